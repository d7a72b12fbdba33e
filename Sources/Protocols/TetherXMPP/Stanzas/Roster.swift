public import TetherXML

/// One contact of the roster (RFC 6121 §2.1.2).
public struct RosterItem: Hashable, Sendable {
    /// The subscription states (RFC 6121 §2.1.2.5); `remove` appears only in roster pushes.
    public enum Subscription: String, Hashable, Sendable, CaseIterable {
        /// No subscription either way.
        case none
        /// The user sees the contact's presence.
        case to
        /// The contact sees the user's presence.
        case from
        /// Both see each other's presence.
        case both
        /// The item is removed (in a roster push).
        case remove
    }

    /// The contact's bare JID.
    public var jid: JID
    /// The name the user gave the contact.
    public var name: String?
    /// The subscription state (`none` when absent).
    public var subscription: Subscription
    /// Whether a subscription request to the contact is pending (`ask='subscribe'`).
    public var subscriptionRequested: Bool
    /// Whether the user pre-approved the contact's subscription (`approved='true'`).
    public var approved: Bool
    /// The groups the contact is in.
    public var groups: [String]

    /// An item.
    public init(
        jid: JID,
        name: String? = nil,
        subscription: Subscription = .none,
        subscriptionRequested: Bool = false,
        approved: Bool = false,
        groups: [String] = []
    ) {
        self.jid = jid
        self.name = name
        self.subscription = subscription
        self.subscriptionRequested = subscriptionRequested
        self.approved = approved
        self.groups = groups
    }

    /// The view of an `<item/>` of a roster query; nil without a valid `jid`.
    public init?(_ element: XElement) {
        guard element.localName == "item", element.namespace == XMPPNamespace.roster,
            let jid = element.attribute("jid").flatMap(JID.init)
        else { return nil }
        self.jid = jid
        name = element.attribute("name")
        subscription = element.attribute("subscription").flatMap(Subscription.init(rawValue:)) ?? .none
        subscriptionRequested = element.attribute("ask") == "subscribe"
        let approved = element.attribute("approved")
        self.approved = approved == "true" || approved == "1"
        groups = element.children("group", namespace: XMPPNamespace.roster).map(\.text)
    }

    /// The `<item/>` element, for a roster set (adding, changing or removing a contact).
    public var element: XElement {
        var attributes = [XMLAttribute(XMLName("jid"), jid.description)]
        if let name { attributes.append(XMLAttribute(XMLName("name"), name)) }
        if subscription == .remove { attributes.append(XMLAttribute(XMLName("subscription"), "remove")) }
        return XElement(
            XMLName("item", namespace: XMPPNamespace.roster),
            attributes: attributes,
            children: groups.map {
                .element(XElement(XMLName("group", namespace: XMPPNamespace.roster), children: [.text($0)]))
            }
        )
    }
}

/// A roster query (`<query xmlns='jabber:iq:roster'/>`): the whole roster in a result, one item
/// in a push.
public struct RosterQuery: Hashable, Sendable {
    /// The items.
    public var items: [RosterItem]
    /// The roster version (RFC 6121 §2.6), if the server versions rosters.
    public var version: String?

    /// The view of a `<query xmlns='jabber:iq:roster'/>` element (items without a valid JID are
    /// left out).
    public init?(_ element: XElement) {
        guard element.localName == "query", element.namespace == XMPPNamespace.roster else { return nil }
        items = element.children("item", namespace: XMPPNamespace.roster).compactMap(RosterItem.init)
        version = element.attribute("ver")
    }

    /// The `get` request for the whole roster.
    public static func request() -> XMPPIQ {
        .get(XElement(XMLName("query", namespace: XMPPNamespace.roster)))
    }

    /// The `set` request that adds or updates `item` (or removes it when its subscription is
    /// `remove`).
    public static func update(_ item: RosterItem) -> XMPPIQ {
        .set(XElement(XMLName("query", namespace: XMPPNamespace.roster), children: [.element(item.element)]))
    }
}
