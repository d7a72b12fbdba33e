public import TetherXML

/// A typed view of `<stream:features/>` (RFC 6120 §4.3.2).
///
/// Child order does not matter (prosody's varies between runs); unknown features stay available
/// in `element`.
public struct StreamFeatures: Hashable, Sendable {
    /// The features element itself.
    public let element: XElement

    /// Whether STARTTLS is offered.
    public var startTLS: Bool { element.firstChild("starttls", namespace: XMPPNamespace.tls) != nil }
    /// Whether STARTTLS is offered with `<required/>`.
    public var startTLSRequired: Bool {
        element.firstChild("starttls", namespace: XMPPNamespace.tls)?.firstChild("required") != nil
    }
    /// The SASL mechanisms offered, in the server's order.
    public var mechanisms: [String] {
        element.firstChild("mechanisms", namespace: XMPPNamespace.sasl)?.children("mechanism").map(\.text) ?? []
    }
    /// XEP-0478 stream limits the server announces, nil when it announces none.
    public var limits: StreamLimits? {
        guard let limits = element.firstChild("limits", namespace: XMPPNamespace.streamLimits) else { return nil }
        func integer(_ name: String) -> Int? {
            limits.firstChild(name).flatMap { Int(String($0.text.filter { !$0.isWhitespace })) }.flatMap {
                $0 > 0 ? $0 : nil
            }
        }
        return StreamLimits(maximumBytes: integer("max-bytes"), idleSeconds: integer("idle-seconds"))
    }
    /// XEP-0388 SASL2: the mechanisms offered in `<authentication xmlns='urn:xmpp:sasl:2'>`, in
    /// the server's order; nil when SASL2 is not offered.
    public var sasl2Mechanisms: [String]? {
        element.firstChild("authentication", namespace: XMPPNamespace.sasl2)?.children("mechanism").map(\.text)
    }
    /// What SASL2 can do inside the login (`<inline>`): XEP-0386 Bind 2, XEP-0198 resumption.
    var sasl2Inline: XElement? {
        element.firstChild("authentication", namespace: XMPPNamespace.sasl2)?.firstChild("inline")
    }
    /// XEP-0386 Bind 2 offered inside the SASL2 login.
    public var sasl2Bind: Bool { sasl2Inline?.firstChild("bind", namespace: XMPPNamespace.bind2) != nil }
    /// The features Bind 2 can enable inside the login (`<inline><feature var='…'/>`), such as
    /// `urn:xmpp:sm:3`.
    public var sasl2BindInlineFeatures: [String] {
        sasl2Inline?.firstChild("bind", namespace: XMPPNamespace.bind2)?.firstChild("inline")?
            .children("feature").compactMap { $0.attribute("var") } ?? []
    }
    /// XEP-0484 FAST: the token mechanisms offered inside the SASL2 login, in the server's order
    /// (empty: no FAST; prosody lists it only when the stream header names the account).
    public var sasl2FASTMechanisms: [String] {
        sasl2Inline?.firstChild("fast", namespace: "urn:xmpp:fast:0")?.children("mechanism").map(\.text) ?? []
    }
    /// XEP-0198 resumption offered inside the SASL2 login.
    public var sasl2StreamManagement: Bool {
        sasl2Inline?.firstChild("sm", namespace: XMPPNamespace.streamManagement3) != nil
    }
    /// The channel-binding types the server supports (XEP-0440 `<sasl-channel-binding>`), in its
    /// order; nil when it does not say.
    public var channelBindingTypes: [String]? {
        element.firstChild("sasl-channel-binding", namespace: XMPPNamespace.saslChannelBinding)?
            .children("channel-binding").compactMap { $0.attribute("type") }
    }
    /// Whether resource binding is offered.
    /// XEP-0352 client state indication (`<csi xmlns='urn:xmpp:csi:0'/>`).
    public var clientStateIndication: Bool {
        element.firstChild("csi", namespace: XMPPNamespace.clientStateIndication) != nil
    }
    /// Whether the server offers resource binding (RFC 6120).
    public var bind: Bool { element.firstChild("bind", namespace: XMPPNamespace.bind) != nil }
    /// Whether the legacy session is offered at all.
    public var session: Bool { element.firstChild("session", namespace: XMPPNamespace.session) != nil }
    /// Whether the legacy session is offered and marked `<optional/>` (so it is not to be sent).
    public var sessionOptional: Bool {
        element.firstChild("session", namespace: XMPPNamespace.session)?.firstChild("optional") != nil
    }
    /// The XEP-0198 stream management versions offered (2, 3), in the server's order.
    public var streamManagementVersions: [Int] {
        element.children("sm").compactMap { feature in
            guard let namespace = feature.namespace, namespace.hasPrefix("urn:xmpp:sm:") else { return nil }
            return Int(namespace.dropFirst("urn:xmpp:sm:".count))
        }
    }
    /// Whether roster versioning is offered.
    public var rosterVersioning: Bool { element.firstChild("ver", namespace: XMPPNamespace.rosterVersioning) != nil }

    /// The view of `element`, or nil if it is not `<stream:features/>`.
    public init?(_ element: XElement) {
        guard element.localName == "features", element.namespace == XMPPNamespace.streams else { return nil }
        self.element = element
    }
}

/// What a server announces it accepts (XEP-0478): the largest top-level element, in bytes, and
/// how long it lets a client stay silent before it checks or drops the stream.
public struct StreamLimits: Hashable, Sendable {
    /// The largest first-level element (stanza) the server accepts, in bytes.
    public var maximumBytes: Int?
    /// Seconds of silence from the client after which the server may check or end the stream.
    public var idleSeconds: Int?

    /// Limits.
    public init(maximumBytes: Int?, idleSeconds: Int?) {
        self.maximumBytes = maximumBytes
        self.idleSeconds = idleSeconds
    }
}
