/// A client TLS session as a sans-IO object: ciphertext in, plaintext out, the records to send in
/// `takeOutput()`. The drivers insert one where a protocol needs TLS (`https://`, `wss://`, XMPP
/// STARTTLS and direct TLS) through a `TLSSessionFactory`, so the TLS implementation is the
/// embedder's choice: on Linux `TetherTLS`'s OpenSSL session is the default; elsewhere an app
/// supplies its own (or runs the sans-IO machines over a transport that does TLS itself, such as
/// Network.framework's `NWConnection`).
///
/// Errors thrown are the implementation's; their descriptions are shown to the app and must not
/// contain secrets.
public protocol TLSSession: AnyObject {
    /// Whether the handshake is complete (the certificate verified).
    var isEstablished: Bool { get }
    /// Whether the server sent close_notify.
    var peerClosed: Bool { get }
    /// Starts the handshake (the ClientHello is then in `takeOutput()`).
    func start() throws
    /// Feeds ciphertext from the server; returns the plaintext it decrypts to.
    func receive(_ ciphertext: [UInt8]) throws -> [UInt8]
    /// Encrypts plaintext (held until the handshake ends).
    func send(_ plaintext: [UInt8]) throws
    /// The ciphertext to send to the server now (empty when there is none).
    func takeOutput() -> [UInt8]
    /// Sends close_notify (in `takeOutput()`).
    func close()
    /// The protocol version negotiated (`TLSv1.3`), once established; nil when unknown.
    var protocolVersion: String? { get }
    /// What ties an authentication to this connection (RFC 5056), once established: the data of
    /// each channel-binding type the session can give. SASL's SCRAM-*-PLUS mechanisms send it to
    /// the server, which compares it with its own view of the connection, so that a login relayed
    /// by someone in the middle (holding a certificate the device trusts) fails.
    var channelBindings: TLSChannelBindings { get }
}

extension TLSSession {
    /// Unknown unless the session says.
    public var protocolVersion: String? { nil }
    /// None unless the session gives them.
    public var channelBindings: TLSChannelBindings { .none }
}

/// A TLS channel-binding type: which value of the TLS connection an authentication is bound to.
public enum ChannelBindingType: String, Hashable, Sendable, CaseIterable {
    /// RFC 9266: 32 bytes of keying material exported with the label `EXPORTER-Channel-Binding`
    /// and no context. Defined for TLS 1.3 (the one to use there).
    case tlsExporter = "tls-exporter"
    /// RFC 5929: the hash of the server's certificate (DER), with the hash function of the
    /// certificate's signature algorithm, SHA-256 when that is MD5 or SHA-1. Any TLS version;
    /// it binds to the server's certificate, not to the connection.
    case tlsServerEndPoint = "tls-server-end-point"
    /// RFC 5929: the first Finished message of the latest handshake. TLS 1.2 and older only: TLS
    /// 1.3 does not define it (RFC 9266 §1).
    case tlsUnique = "tls-unique"
}

/// The channel-binding data a TLS connection gives (`TLSSession.channelBindings`), read after its
/// handshake: an app's own TLS (Network.framework: `sec_protocol_metadata_create_secret` for
/// tls-exporter, the server's certificate for tls-server-end-point) supplies it as
/// `TetherTLS`'s OpenSSL session does.
public struct TLSChannelBindings: Hashable, Sendable, CustomStringConvertible {
    /// The protocol version (`TLSv1.3`, `TLSv1.2`), nil when unknown.
    public var protocolVersion: String?
    /// The data of each type the session can give.
    public var data: [ChannelBindingType: [UInt8]]

    /// The bindings of a session; data of a type its version does not define is left out
    /// (tls-unique on TLS 1.3, tls-exporter before it).
    public init(protocolVersion: String?, data: [ChannelBindingType: [UInt8]]) {
        self.protocolVersion = protocolVersion
        let isTLS13 = protocolVersion == "TLSv1.3"
        self.data = data.filter { type, bytes in
            guard !bytes.isEmpty else { return false }
            switch type {
            case .tlsExporter: return isTLS13
            case .tlsUnique: return protocolVersion != nil && !isTLS13
            case .tlsServerEndPoint: return true
            }
        }
    }

    /// No TLS, or a session that gives no channel binding.
    public static let none = TLSChannelBindings(protocolVersion: nil, data: [:])

    /// The types with data, best first: tls-exporter, tls-unique, then tls-server-end-point
    /// (which binds to the certificate only).
    public var types: [ChannelBindingType] {
        [.tlsExporter, .tlsUnique, .tlsServerEndPoint].filter { data[$0] != nil }
    }

    /// The version and the types; never the data.
    public var description: String {
        "\(protocolVersion ?? "TLS") (\(types.isEmpty ? "no channel binding" : types.map(\.rawValue).joined(separator: ", ")))"
    }
}

/// What a TLS session is made for.
public struct TLSSessionConfiguration: Sendable {
    /// The name sent as SNI and checked against the certificate (a host name or an IP address).
    public var serverName: String
    /// A PEM file of CA certificates trusted in addition to the system's.
    public var additionalTrustedCertificates: String?
    /// What the server's certificate must satisfy beyond (or instead of) the trust store.
    public var trust: TLSTrust

    /// A configuration.
    public init(serverName: String, additionalTrustedCertificates: String? = nil, trust: TLSTrust = TLSTrust()) {
        self.serverName = serverName
        self.additionalTrustedCertificates = additionalTrustedCertificates
        self.trust = trust
    }
}

/// Which servers' certificates to accept, the same for both protocols and every TLS use (HTTPS
/// negotiate, WebSocket, Server-Sent Events, long polling, XMPP STARTTLS and direct TLS).
///
/// - Default: the chain must verify against the system's trust store (plus a CA file) and be
///   for the server's name.
/// - `pinnedPublicKeys`: in addition, one certificate of the verified chain must have one of
///   these public keys: the base64 SHA-256 of its DER SubjectPublicKeyInfo, as HTTP public key
///   pinning (RFC 7469) writes them (`openssl x509 -pubkey -noout | openssl pkey -pubin
///   -outform der | openssl dgst -sha256 -binary | base64`). Pin the leaf's key, or a CA's to
///   survive certificate renewals.
/// - `evaluator`: decides alone, after the handshake, from the chain and what the trust store
///   said (`TLSPeer`): for a self-signed server whose key the app knows, or a policy of its own.
///   Pins still apply when both are set.
///
/// A certificate refused by the pins or the evaluator fails the connection with
/// `TLSPeerRejected` (the clients' `certificateRefused`), and no reconnect follows: another
/// attempt would meet the same certificate.
public struct TLSTrust: Sendable {
    /// Base64 SHA-256 hashes of accepted SubjectPublicKeyInfos (empty: no pinning).
    public var pinnedPublicKeys: [String]
    /// The app's own decision (nil: the trust store's).
    public var evaluator: (@Sendable (TLSPeer) -> Bool)?

    /// A trust setting.
    public init(pinnedPublicKeys: [String] = [], evaluator: (@Sendable (TLSPeer) -> Bool)? = nil) {
        self.pinnedPublicKeys = pinnedPublicKeys
        self.evaluator = evaluator
    }

    /// Whether the certificate `peer` presented is accepted; if not, why (no secret in it).
    public func check(_ peer: TLSPeer) -> String? {
        if let evaluator {
            guard evaluator(peer) else { return "the app's trust evaluator refused the certificate" }
        } else if !peer.isTrustedBySystem {
            return "certificate verify failed: \(peer.verificationError ?? "untrusted")"
        }
        if !pinnedPublicKeys.isEmpty, !peer.publicKeyHashes.contains(where: pinnedPublicKeys.contains) {
            return "no pinned public key matches the server's certificate chain (its keys: "
                + peer.publicKeyHashes.joined(separator: ", ") + ")"
        }
        return nil
    }
}

/// What the server presented, for `TLSTrust.evaluator`.
public struct TLSPeer: Sendable {
    /// The name the connection is for.
    public var serverName: String
    /// The certificate chain as sent, DER, the server's own first.
    public var certificates: [[UInt8]]
    /// Each certificate's public key: base64 SHA-256 of its SubjectPublicKeyInfo.
    public var publicKeyHashes: [String]
    /// Whether the chain verifies against the trust store for `serverName`.
    public var isTrustedBySystem: Bool
    /// Why not, when it does not.
    public var verificationError: String?

    /// A description of a peer.
    public init(
        serverName: String,
        certificates: [[UInt8]],
        publicKeyHashes: [String],
        isTrustedBySystem: Bool,
        verificationError: String?
    ) {
        self.serverName = serverName
        self.certificates = certificates
        self.publicKeyHashes = publicKeyHashes
        self.isTrustedBySystem = isTrustedBySystem
        self.verificationError = verificationError
    }
}

/// A TLS session refused the server's certificate: not trusted, not valid for the server's name,
/// or refused by the app's `TLSTrust` (pins or evaluator). Final: the drivers do not retry, and an
/// XMPP client does not pass the attempt on to the next server of a DNS lookup (an attacker in the
/// path could otherwise steer clients to the server of their choosing). A session of the app's
/// own throws it for every certificate it refuses, so that a handshake failing for another reason
/// (`tlsFailed`) can be told apart.
public struct TLSPeerRejected: Error, Sendable, CustomStringConvertible {
    /// Why.
    public let message: String

    /// An error.
    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

/// Makes the TLS session for one connection.
public typealias TLSSessionFactory = @Sendable (TLSSessionConfiguration) throws -> any TLSSession
