public import TetherXML

/// A typed view of a stanza (`<message/>`, `<presence/>`, `<iq/>` in `jabber:client`, RFC 6120 §8).
public struct Stanza: Hashable, Sendable {
    /// The three stanza kinds.
    public enum Kind: String, Hashable, Sendable {
        /// `<message/>`.
        case message
        /// `<presence/>`.
        case presence
        /// `<iq/>`.
        case iq
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
        element.firstChild { !($0.localName == "error" && $0.namespace == XMPPNamespace.client) }
    }
}

/// A stanza error (`<error type='…'>` inside a stanza, RFC 6120 §8.3).
public struct StanzaError: Error, Hashable, Sendable {
    /// The error types (RFC 6120 §8.3.2).
    public enum ErrorType: String, Hashable, Sendable {
        /// Retry after providing credentials.
        case auth
        /// Do not retry: the error cannot be remedied.
        case cancel
        /// Proceed: the condition was only a warning.
        case `continue`
        /// Retry after changing the data sent.
        case modify
        /// Retry after waiting: the error is temporary.
        case wait
    }

    /// The defined conditions (RFC 6120 §8.3.3).
    public enum Condition: String, Hashable, Sendable, CaseIterable {
        /// The request was malformed.
        case badRequest = "bad-request"
        /// Access was refused because a resource or session of that name exists.
        case conflict
        /// The feature is not implemented by the recipient.
        case featureNotImplemented = "feature-not-implemented"
        /// The requester lacks the permissions.
        case forbidden
        /// The recipient is no longer at this address.
        case gone
        /// The server had an internal error.
        case internalServerError = "internal-server-error"
        /// The addressed item was not found.
        case itemNotFound = "item-not-found"
        /// The address is not a valid JID.
        case jidMalformed = "jid-malformed"
        /// The request violates the recipient's policy.
        case notAcceptable = "not-acceptable"
        /// No one may perform this action.
        case notAllowed = "not-allowed"
        /// The sender must authenticate first.
        case notAuthorized = "not-authorized"
        /// The server's policy forbids it.
        case policyViolation = "policy-violation"
        /// The recipient is unavailable.
        case recipientUnavailable = "recipient-unavailable"
        /// The recipient is at another address.
        case redirect
        /// The requester must register first.
        case registrationRequired = "registration-required"
        /// The remote server does not exist.
        case remoteServerNotFound = "remote-server-not-found"
        /// The remote server could not be reached in time.
        case remoteServerTimeout = "remote-server-timeout"
        /// The server or recipient lacks the resources.
        case resourceConstraint = "resource-constraint"
        /// The service is not available.
        case serviceUnavailable = "service-unavailable"
        /// The requester must be subscribed first.
        case subscriptionRequired = "subscription-required"
        /// Another condition (see the application-specific element).
        case undefinedCondition = "undefined-condition"
        /// The recipient did not expect the request now.
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
