public import TetherXML

/// A typed view of a stanza (`<message/>`, `<presence/>`, `<iq/>` in `jabber:client`, RFC 6120 §8).
public struct Stanza: Hashable, Sendable {
    /// The three stanza kinds.
    public enum Kind: String, Hashable, Sendable {
        case message, presence, iq
    }

    /// The stanza element.
    public let element: XElement
    /// Which kind of stanza it is.
    public let kind: Kind

    /// The view of `element`, or nil if it is not a stanza of the client namespace.
    public init?(_ element: XElement) {
        guard element.namespace == XMPPNamespace.client, let kind = Kind(rawValue: element.localName) else {
            return nil
        }
        self.element = element
        self.kind = kind
    }

    /// The `id` attribute.
    public var id: String? { element.attribute("id") }
    /// The `type` attribute.
    public var type: String? { element.attribute("type") }
    /// The `from` address; nil when absent or not a valid JID.
    public var from: JID? { element.attribute("from").flatMap(JID.init) }
    /// The `to` address; nil when absent or not a valid JID.
    public var to: JID? { element.attribute("to").flatMap(JID.init) }
    /// The `xml:lang` attribute.
    public var language: String? { element.attribute("lang", namespace: XMLName.xmlNamespace) }
    /// The stanza error, for `type='error'` stanzas.
    public var error: StanzaError? { type == "error" ? element.firstChild("error").flatMap(StanzaError.init) : nil }

    /// For messages: the `<body/>` text.
    public var body: String? { element.firstChild("body", namespace: XMPPNamespace.client)?.text }
    /// For messages: the `<subject/>` text.
    public var subject: String? { element.firstChild("subject", namespace: XMPPNamespace.client)?.text }
    /// For messages: the `<thread/>` text.
    public var thread: String? { element.firstChild("thread", namespace: XMPPNamespace.client)?.text }

    /// For presence: the `<show/>` value (`away`, `chat`, `dnd`, `xa`).
    public var show: String? { element.firstChild("show", namespace: XMPPNamespace.client)?.text }
    /// For presence: the `<status/>` text.
    public var status: String? { element.firstChild("status", namespace: XMPPNamespace.client)?.text }
    /// For presence: the `<priority/>` (−128…127; nil when absent or invalid).
    public var priority: Int8? {
        element.firstChild("priority", namespace: XMPPNamespace.client).flatMap { Int8($0.text) }
    }

    /// For iq: the payload (the first child that is not an `<error/>`).
    public var payload: XElement? {
        element.children.first { !($0.localName == "error" && $0.namespace == XMPPNamespace.client) }
    }
}

/// A stanza error (`<error type='…'>` inside a stanza, RFC 6120 §8.3).
public struct StanzaError: Error, Hashable, Sendable {
    /// The error types (RFC 6120 §8.3.2).
    public enum ErrorType: String, Hashable, Sendable {
        case auth, cancel, `continue`, modify, wait
    }

    /// The defined conditions (RFC 6120 §8.3.3).
    public enum Condition: String, Hashable, Sendable, CaseIterable {
        case badRequest = "bad-request"
        case conflict
        case featureNotImplemented = "feature-not-implemented"
        case forbidden
        case gone
        case internalServerError = "internal-server-error"
        case itemNotFound = "item-not-found"
        case jidMalformed = "jid-malformed"
        case notAcceptable = "not-acceptable"
        case notAllowed = "not-allowed"
        case notAuthorized = "not-authorized"
        case policyViolation = "policy-violation"
        case recipientUnavailable = "recipient-unavailable"
        case redirect
        case registrationRequired = "registration-required"
        case remoteServerNotFound = "remote-server-not-found"
        case remoteServerTimeout = "remote-server-timeout"
        case resourceConstraint = "resource-constraint"
        case serviceUnavailable = "service-unavailable"
        case subscriptionRequired = "subscription-required"
        case undefinedCondition = "undefined-condition"
        case unexpectedRequest = "unexpected-request"
    }

    /// The error type (nil if the peer sent none or an unknown one).
    public var type: ErrorType?
    /// The condition (`undefined-condition` when none that is defined was sent).
    public var condition: Condition
    /// The human-readable text, if any.
    public var text: String?
    /// The entity that generated the error (`by`), if given.
    public var by: String?

    /// Creates a stanza error.
    public init(type: ErrorType?, condition: Condition, text: String? = nil, by: String? = nil) {
        self.type = type
        self.condition = condition
        self.text = text
        self.by = by
    }

    /// The view of an `<error/>` element.
    public init?(_ element: XElement) {
        guard element.localName == "error" else { return nil }
        type = element.attribute("type").flatMap(ErrorType.init(rawValue:))
        by = element.attribute("by")
        var condition: Condition?
        var text: String?
        for child in element.children where child.namespace == XMPPNamespace.stanzaErrors {
            if child.localName == "text" {
                text = child.text
            } else if condition == nil {
                condition = Condition(rawValue: child.localName)
            }
        }
        self.condition = condition ?? .undefinedCondition
        self.text = text
    }
}
