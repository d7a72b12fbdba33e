public import TetherXML

/// A stream error (`<stream:error/>`, RFC 6120 §4.9): the condition, an optional text and an
/// optional application-specific element.
public struct StreamError: Error, Hashable, Sendable {
    /// Every defined condition (RFC 6120 §4.9.3).
    public enum Condition: String, Hashable, Sendable, CaseIterable {
        /// The server cannot process the data sent.
        case badFormat = "bad-format"
        /// A namespace prefix is not supported.
        case badNamespacePrefix = "bad-namespace-prefix"
        /// A new stream for this entity replaces this one.
        case conflict
        /// The server closed an idle stream.
        case connectionTimeout = "connection-timeout"
        /// The host is no longer served here.
        case hostGone = "host-gone"
        /// The host is not served here.
        case hostUnknown = "host-unknown"
        /// A from or to address is missing or wrong.
        case improperAddressing = "improper-addressing"
        /// The server had an internal error.
        case internalServerError = "internal-server-error"
        /// The from address does not match the authenticated one.
        case invalidFrom = "invalid-from"
        /// The stream's namespace is wrong.
        case invalidNamespace = "invalid-namespace"
        /// The data is not valid XML.
        case invalidXML = "invalid-xml"
        /// Data was sent before authentication.
        case notAuthorized = "not-authorized"
        /// The data is not well-formed XML.
        case notWellFormed = "not-well-formed"
        /// The server's policy was violated.
        case policyViolation = "policy-violation"
        /// A remote connection the server needs failed.
        case remoteConnectionFailed = "remote-connection-failed"
        /// The stream must be restarted (new security or credentials).
        case reset
        /// The server lacks the resources to serve the stream.
        case resourceConstraint = "resource-constraint"
        /// The data used restricted XML (comments, DTDs, processing instructions).
        case restrictedXML = "restricted-xml"
        /// The server redirects to another host (`see-other-host`).
        case seeOtherHost = "see-other-host"
        /// The server is shutting down.
        case systemShutdown = "system-shutdown"
        /// Another condition.
        case undefinedCondition = "undefined-condition"
        /// The stream's encoding is not supported.
        case unsupportedEncoding = "unsupported-encoding"
        /// A required feature is not supported.
        case unsupportedFeature = "unsupported-feature"
        /// A first-level element is not supported.
        case unsupportedStanzaType = "unsupported-stanza-type"
        /// The stream's version is not supported.
        case unsupportedVersion = "unsupported-version"

        /// The condition for an element name, accepting RFC 3920's `xml-not-well-formed`.
        public init?(elementName: String) {
            if elementName == "xml-not-well-formed" {
                self = .notWellFormed
            } else {
                self.init(rawValue: elementName)
            }
        }
    }

    /// The condition (`undefined-condition` when the peer sent none that is defined).
    public var condition: Condition
    /// The human-readable text, if any.
    public var text: String?
    /// An application-specific condition element, if any (e.g. prosody's `<stanza-too-big/>`).
    public var applicationCondition: XElement?
    /// For `see-other-host`, the host to reconnect to.
    public var otherHost: String?

    /// Creates a stream error.
    public init(_ condition: Condition, text: String? = nil, applicationCondition: XElement? = nil) {
        self.condition = condition
        self.text = text
        self.applicationCondition = applicationCondition
    }

    /// The view of `element`, or nil if it is not `<stream:error/>`.
    public init?(_ element: XElement) {
        guard element.localName == "error", element.namespace == XMPPNamespace.streams else { return nil }
        var condition: Condition?
        var text: String?
        var application: XElement?
        var otherHost: String?
        for child in element.children {
            if child.namespace == XMPPNamespace.streamErrors {
                if child.localName == "text" {
                    text = child.text
                } else if condition == nil, let known = Condition(elementName: child.localName) {
                    condition = known
                    if known == .seeOtherHost { otherHost = child.text }
                }
            } else if application == nil {
                application = child
            }
        }
        self.condition = condition ?? .undefinedCondition
        self.text = text
        self.applicationCondition = application
        self.otherHost = otherHost
    }

    /// The `<stream:error/>` element for sending.
    public var element: XElement {
        var children: [XNode] = [
            .element(XElement(XMLName(condition.rawValue, namespace: XMPPNamespace.streamErrors)))
        ]
        if let text {
            children.append(
                .element(XElement(XMLName("text", namespace: XMPPNamespace.streamErrors), children: [.text(text)]))
            )
        }
        if let applicationCondition { children.append(.element(applicationCondition)) }
        return XElement(XMLName("error", namespace: XMPPNamespace.streams, prefix: "stream"), children: children)
    }

    /// Whether an automatic reconnect makes sense after this error.
    ///
    /// Not after `conflict` (another session took the resource, RFC 6120 §4.9.3.3; reconnecting
    /// would throw it out in turn), nor after the conditions that say the server will never accept
    /// this client as configured: `not-authorized`, `host-unknown`, `host-gone`, `invalid-from`,
    /// `improper-addressing`, `invalid-namespace`, `bad-namespace-prefix`, `unsupported-version`,
    /// `unsupported-encoding`. Everything else (`system-shutdown`, `connection-timeout`, `reset`,
    /// `see-other-host`, `policy-violation`, …) is worth another attempt under the policy.
    public var allowsReconnect: Bool {
        switch condition {
        case .conflict, .notAuthorized, .hostUnknown, .hostGone, .invalidFrom, .improperAddressing, .invalidNamespace,
            .badNamespacePrefix, .unsupportedVersion, .unsupportedEncoding:
            false
        case .badFormat, .connectionTimeout, .internalServerError, .invalidXML, .notWellFormed, .policyViolation,
            .remoteConnectionFailed, .reset, .resourceConstraint, .restrictedXML, .seeOtherHost, .systemShutdown,
            .undefinedCondition, .unsupportedFeature, .unsupportedStanzaType:
            true
        }
    }
}
