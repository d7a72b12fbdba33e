public import TetherXML

/// A `<presence/>` stanza (RFC 6121 §4): built to send, or a typed view of one received.
///
/// ```swift
/// try client.send(XMPPPresence(show: .away, status: "In a meeting"))      // availability
/// try client.send(XMPPPresence(type: .subscribe, to: bob))                // subscription request
/// ```
public struct XMPPPresence: Hashable, Sendable {
    /// The presence types other than availability (RFC 6121 §4.7.1); a presence without `type`
    /// announces availability and has `type == nil`.
    public enum PresenceType: String, Hashable, Sendable, CaseIterable {
        /// An error about a presence sent.
        case error
        /// A request for an entity's current presence (servers send it).
        case probe
        /// A request to subscribe to the recipient's presence.
        case subscribe
        /// The sender allows the recipient's subscription.
        case subscribed
        /// The sender is no longer available.
        case unavailable
        /// The sender unsubscribes from the recipient's presence.
        case unsubscribe
        /// The sender denies or cancels the recipient's subscription.
        case unsubscribed
    }

    /// The availability sub-states (RFC 6121 §4.7.2.1).
    public enum Show: String, Hashable, Sendable, CaseIterable {
        /// Temporarily away.
        case away
        /// Interested in chatting.
        case chat
        /// Busy (do not disturb).
        case dnd
        /// Away for an extended period.
        case xa
    }

    /// The stanza.
    public let element: XElement

    /// The view of `element`; nil unless it is a `<presence/>` in the client namespace.
    public init?(_ element: XElement) {
        guard element.localName == "presence", element.namespace == XMPPNamespace.client else { return nil }
        self.element = element
    }

    /// A presence to send (`XMPPPresence()` is the initial available presence).
    public init(
        type: PresenceType? = nil,
        to: JID? = nil,
        show: Show? = nil,
        status: String? = nil,
        priority: Int8? = nil,
        id: String? = nil,
        extensions: [XElement] = []
    ) {
        var attributes = StanzaAttributes()
        attributes.add("type", type?.rawValue)
        attributes.add("to", to?.description)
        attributes.add("id", id)
        var children: [XNode] = []
        if let show = textChild("show", show?.rawValue) { children.append(show) }
        if let status = textChild("status", status) { children.append(status) }
        if let priority = textChild("priority", priority.map { String($0) }) { children.append(priority) }
        children += extensions.map(XNode.element)
        element = XElement(.client("presence"), attributes: attributes.attributes, children: children)
    }

    private var view: Stanza { Stanza(element)! }

    /// The type; nil for an availability announcement (also for an unknown type, which RFC 6121
    /// §4.7.1 says to treat as an error the app may ignore: check `rawType`).
    public var type: PresenceType? { element.attribute("type").flatMap(PresenceType.init(rawValue:)) }
    /// The `type` attribute as sent.
    public var rawType: String? { element.attribute("type") }
    /// Whether this announces availability (no `type`).
    public var isAvailable: Bool { element.attribute("type") == nil }
    /// The sender.
    public var from: JID? { view.from }
    /// The addressee.
    public var to: JID? { view.to }
    /// The `id` attribute.
    public var id: String? { element.attribute("id") }
    /// The `<show/>` value (nil when absent or not one of the four).
    public var show: Show? { view.show.flatMap(Show.init(rawValue:)) }
    /// The `<status/>` text.
    public var status: String? { view.status }
    /// The `<priority/>` (nil when absent or invalid; RFC 6121 treats that as 0).
    public var priority: Int8? { view.priority }
    /// The delayed-delivery information (XEP-0203).
    public var delay: Delay? { Delay(in: element) }
    /// The stanza error, for `type='error'`.
    public var error: StanzaError? { view.error }
    /// The children outside the client namespace (entity capabilities, …).
    public var extensions: [XElement] { element.children(outside: XMPPNamespace.client) }
}
