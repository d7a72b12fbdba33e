/// The namespace URIs of RFC 6120 and the XEPs Tether implements.
public enum XMPPNamespace {
    /// Client-to-server stanzas (the default namespace of a c2s stream).
    public static let client = "jabber:client"
    /// The stream element and `<stream:features/>`, `<stream:error/>`.
    public static let streams = "http://etherx.jabber.org/streams"
    /// STARTTLS.
    public static let tls = "urn:ietf:params:xml:ns:xmpp-tls"
    /// SASL.
    public static let sasl = "urn:ietf:params:xml:ns:xmpp-sasl"
    /// XEP-0440: the channel-binding types a server supports.
    public static let saslChannelBinding = "urn:xmpp:sasl-cb:0"
    /// Resource binding.
    public static let bind = "urn:ietf:params:xml:ns:xmpp-bind"
    /// The legacy session establishment (RFC 3921).
    public static let session = "urn:ietf:params:xml:ns:xmpp-session"
    /// Stream error conditions.
    public static let streamErrors = "urn:ietf:params:xml:ns:xmpp-streams"
    /// Stanza error conditions.
    public static let stanzaErrors = "urn:ietf:params:xml:ns:xmpp-stanzas"
    /// Roster versioning (stream feature).
    public static let rosterVersioning = "urn:xmpp:features:rosterver"
    /// XEP-0199 ping.
    public static let ping = "urn:xmpp:ping"

    /// XEP-0198 stream management, version `n` (2 or 3).
    public static func streamManagement(_ version: Int) -> String { "urn:xmpp:sm:\(version)" }
}

extension XMPPNamespace {
    /// The roster (RFC 6121 §2).
    public static let roster = "jabber:iq:roster"
    /// XEP-0203 delayed delivery.
    public static let delay = "urn:xmpp:delay"
    /// XEP-0198 stream management, version 3 (the one Tether speaks).
    public static let streamManagement3 = "urn:xmpp:sm:3"
    /// XMPP over WebSocket's `<open/>` and `<close/>` (RFC 7395).
    public static let framing = "urn:ietf:params:xml:ns:xmpp-framing"
    /// XEP-0352 client state indication.
    public static let clientStateIndication = "urn:xmpp:csi:0"
}

extension XMPPNamespace {
    /// XEP-0478 stream limits.
    public static let streamLimits = "urn:xmpp:stream-limits:0"
    /// XEP-0313 Message Archive Management.
    public static let archive = "urn:xmpp:mam:2"
    /// XEP-0059 Result Set Management.
    public static let resultSet = "http://jabber.org/protocol/rsm"
    /// XEP-0004 data forms.
    public static let dataForms = "jabber:x:data"
    /// XEP-0297 stanza forwarding.
    public static let forward = "urn:xmpp:forward:0"
    /// XEP-0359 unique and stable stanza ids.
    public static let stanzaID = "urn:xmpp:sid:0"
    /// XEP-0280 message carbons.
    public static let carbons = "urn:xmpp:carbons:2"
    /// XEP-0357 push notifications.
    public static let push = "urn:xmpp:push:0"
}
