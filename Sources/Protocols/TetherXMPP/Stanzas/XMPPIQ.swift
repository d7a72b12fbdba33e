public import TetherXML

/// An `<iq/>` stanza (RFC 6120 §8.2.3): a request (`get`/`set`) with exactly one payload, or its
/// answer (`result`, `error`) carrying the request's id.
///
/// ```swift
/// let request = XMPPIQ.get(XElement(XMLName("query", namespace: "jabber:iq:version")), to: server)
/// case .iqRequest(let iq): try client.send(iq.result())             // or iq.error(StanzaError(…))
/// ```
public struct XMPPIQ: Hashable, Sendable {
    /// The four iq types.
    public enum IQType: String, Hashable, Sendable, CaseIterable {
        /// A request for data.
        case get
        /// A request that provides data or changes state.
        case set
        /// A successful answer.
        case result
        /// An error answer.
        case error

        /// Whether an iq of this type is a request that must be answered.
        public var isRequest: Bool { self == .get || self == .set }

        /// The type spelled `rawValue`, or nil for any other text. (Written out: the synthesized
        /// initializer compares the text with each case through the runtime's string switch, on
        /// every iq received.)
        public init?(rawValue: String) {
            switch rawValue {
            case "result": self = .result
            case "get": self = .get
            case "set": self = .set
            case "error": self = .error
            default: return nil
            }
        }
    }

    /// The stanza.
    public let element: XElement
    /// The type (read from the element once, when the view is made).
    public let type: IQType

    /// The view of `element`; nil unless it is an `<iq/>` in the client namespace with a known
    /// type.
    public init?(_ element: XElement) {
        guard element.isNamed("iq", namespace: XMPPNamespace.client),
            let type = element.attribute("type").flatMap(IQType.init(rawValue:))
        else { return nil }
        self.element = element
        self.type = type
    }

    /// An iq of `type` with `payload` (the connection adds an `id` when nil).
    public init(type: IQType, payload: XElement?, to: JID? = nil, id: String? = nil) {
        var attributes = StanzaAttributes()
        attributes.add("type", type.rawValue)
        attributes.add("to", to?.description)
        attributes.add("id", id)
        element = XElement(
            .client("iq"),
            attributes: attributes.attributes,
            children: payload.map { [.element($0)] } ?? []
        )
        self.type = type
    }

    /// A `get` request.
    public static func get(_ payload: XElement, to: JID? = nil, id: String? = nil) -> XMPPIQ {
        XMPPIQ(type: .get, payload: payload, to: to, id: id)
    }

    /// A `set` request.
    public static func set(_ payload: XElement, to: JID? = nil, id: String? = nil) -> XMPPIQ {
        XMPPIQ(type: .set, payload: payload, to: to, id: id)
    }

    /// An XEP-0199 ping to `to` (the server when nil).
    public static func ping(to: JID? = nil, id: String? = nil) -> XMPPIQ {
        // The server's ping without an id (the connection adds one), the common one, is built once.
        if to == nil && id == nil { return serverPing }
        return .get(XElement(XMLName("ping", namespace: XMPPNamespace.ping)), to: to, id: id)
    }

    private static let serverPing = XMPPIQ.get(XElement(XMLName("ping", namespace: XMPPNamespace.ping)))

    /// Whether this is the server ping `ping()` returns (that very tree, not an equal one): the
    /// connection writes its bytes without walking the tree (`XMPPClientMachine.serverPingBytes`).
    var isTheServerPing: Bool { element.isSameNode(as: Self.serverPing.element) }

    /// The `result` answering this request, addressed to its sender, with an optional payload.
    public func result(payload: XElement? = nil) -> XMPPIQ {
        XMPPIQ(type: .result, payload: payload, to: from, id: id ?? "")
    }

    /// The `error` answering this request, addressed to its sender.
    public func error(_ error: StanzaError) -> XMPPIQ {
        var attributes = StanzaAttributes()
        attributes.add("type", IQType.error.rawValue)
        attributes.add("to", from?.description)
        attributes.add("id", id ?? "")
        return XMPPIQ(
            uncheckedElement: XElement(
                .client("iq"),
                attributes: attributes.attributes,
                children: [.element(error.element)]
            ),
            type: .error
        )
    }

    init(uncheckedElement: XElement, type: IQType) {
        element = uncheckedElement
        self.type = type
    }
    /// The `id` attribute.
    public var id: String? { element.attribute("id") }
    /// The sender (nil when absent: the user's own server or account).
    public var from: JID? { element.attribute("from").flatMap(JID.init) }
    /// The addressee.
    public var to: JID? { element.attribute("to").flatMap(JID.init) }
    /// The payload: the first child that is not the `<error/>`.
    public var payload: XElement? {
        element.firstChild { !($0.localName == "error" && $0.namespace == XMPPNamespace.client) }
    }
    /// The stanza error, for `type='error'`.
    public var error: StanzaError? {
        type == .error ? element.firstChild("error", namespace: XMPPNamespace.client).flatMap(StanzaError.init) : nil
    }
    /// Whether this is an XEP-0199 ping request.
    public var isPing: Bool {
        type == .get && payload.map { $0.localName == "ping" && $0.namespace == XMPPNamespace.ping } == true
    }
}
