public import TetherXML

/// A `<message/>` stanza (RFC 6121 §5): built to send, or a typed view of one received.
///
/// ```swift
/// try client.send(XMPPMessage(to: bob, body: "Hello"))          // <message type='chat' to=…><body>Hello</body>
/// case .message(let message): print(message.from, message.body ?? "")
/// ```
///
/// The view reads the element on demand; `element` is the stanza as received or built.
public struct XMPPMessage: Hashable, Sendable {
    /// The message types (RFC 6121 §5.2.2); a missing or unknown type counts as `normal`.
    public enum MessageType: String, Hashable, Sendable, CaseIterable {
        /// One-to-one chat.
        case chat
        /// An error about a message sent.
        case error
        /// A message in a multi-user chat room.
        case groupchat
        /// An alert or notification (no reply expected).
        case headline
        /// A standalone message (the default).
        case normal
    }

    /// How a received message came to this client.
    public enum Origin: Hashable, Sendable {
        /// Routed to this session (or built here to send).
        case live
        /// Delivered by the catch-up from the account's archive (XEP-0313): it arrived while no
        /// session was online. `id` is the archive's id, `timestamp` when it was archived.
        case archive(id: String, timestamp: String?)
        /// A carbon copy (XEP-0280) of a message one of the account's other clients received
        /// (`sent` false) or sent (`sent` true).
        case carbon(sent: Bool)
    }

    /// The stanza.
    public let element: XElement
    /// How it came (`live` for messages built to send).
    public var origin: Origin

    /// The view of `element`; nil unless it is a `<message/>` in the client namespace.
    public init?(_ element: XElement, origin: Origin = .live) {
        guard element.localName == "message", element.namespace == XMPPNamespace.client else { return nil }
        self.element = element
        self.origin = origin
    }

    /// A message to send. `extensions` are added after the standard children (for example a
    /// `<request xmlns='urn:xmpp:receipts'/>`); the connection adds an `id` when it is nil.
    public init(
        to: JID?,
        body: String?,
        type: MessageType = .chat,
        id: String? = nil,
        subject: String? = nil,
        thread: String? = nil,
        language: String? = nil,
        extensions: [XElement] = []
    ) {
        var attributes = StanzaAttributes()
        attributes.add("type", type.rawValue)
        attributes.add("to", to?.description)
        attributes.add("id", id)
        attributes.addLanguage(language)
        var children: [XNode] = []
        if let subject = textChild("subject", subject) { children.append(subject) }
        if let body = textChild("body", body) { children.append(body) }
        if let thread = textChild("thread", thread) { children.append(thread) }
        children += extensions.map(XNode.element)
        element = XElement(.client("message"), attributes: attributes.attributes, children: children)
        origin = .live
    }

    private var view: Stanza { Stanza(element)! }

    /// The type (`normal` when absent or unknown, RFC 6121 §5.2.2).
    public var type: MessageType { element.attribute("type").flatMap(MessageType.init(rawValue:)) ?? .normal }
    /// The sender (nil when absent or not a valid JID).
    public var from: JID? { view.from }
    /// The addressee.
    public var to: JID? { view.to }
    /// The `id` attribute.
    public var id: String? { element.attribute("id") }
    /// The `<body/>` text.
    public var body: String? { view.body }
    /// The `<subject/>` text.
    public var subject: String? { view.subject }
    /// The `<thread/>` text.
    public var thread: String? { view.thread }
    /// The delayed-delivery information (XEP-0203), present on stored or redelivered messages.
    public var delay: Delay? { Delay(in: element) }
    /// Whether it came from the archive catch-up.
    public var isArchived: Bool {
        if case .archive = origin { return true }
        return false
    }
    /// The id that `archive` (the account's bare JID for its own archive, a room's for a
    /// groupchat) gave the message (XEP-0359 `<stanza-id>`), if it carries one.
    public func stanzaID(by archive: JID) -> String? {
        // (Every message received asks; the archive's JID is written out only when a stanza-id
        // is there to compare it with.)
        var by: String?
        return element.firstChild { child in
            guard child.localName == "stanza-id", child.namespace == XMPPNamespace.stanzaID else { return false }
            if by == nil { by = archive.description }
            return child.attribute("by") == by
        }?.attribute("id")
    }
    /// The stanza error, for `type='error'`.
    public var error: StanzaError? { view.error }
    /// The children outside the client namespace (chat states, receipts, …).
    public var extensions: [XElement] { element.children(outside: XMPPNamespace.client) }
}
