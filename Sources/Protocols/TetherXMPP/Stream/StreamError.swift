public import TetherXML

/// A stream error (`<stream:error/>`, RFC 6120 §4.9): the condition, an optional text and an
/// optional application-specific element.
public struct StreamError: Error, Hashable, Sendable {
    /// Every defined condition (RFC 6120 §4.9.3).
    public enum Condition: String, Hashable, Sendable, CaseIterable {
        case badFormat = "bad-format"
        case badNamespacePrefix = "bad-namespace-prefix"
        case conflict
        case connectionTimeout = "connection-timeout"
        case hostGone = "host-gone"
        case hostUnknown = "host-unknown"
        case improperAddressing = "improper-addressing"
        case internalServerError = "internal-server-error"
        case invalidFrom = "invalid-from"
        case invalidNamespace = "invalid-namespace"
        case invalidXML = "invalid-xml"
        case notAuthorized = "not-authorized"
        case notWellFormed = "not-well-formed"
        case policyViolation = "policy-violation"
        case remoteConnectionFailed = "remote-connection-failed"
        case reset
        case resourceConstraint = "resource-constraint"
        case restrictedXML = "restricted-xml"
        case seeOtherHost = "see-other-host"
        case systemShutdown = "system-shutdown"
        case undefinedCondition = "undefined-condition"
        case unsupportedEncoding = "unsupported-encoding"
        case unsupportedFeature = "unsupported-feature"
        case unsupportedStanzaType = "unsupported-stanza-type"
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
