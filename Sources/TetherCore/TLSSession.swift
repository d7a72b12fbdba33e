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
}

/// What a TLS session is made for.
public struct TLSSessionConfiguration: Sendable, Hashable {
    /// The name sent as SNI and checked against the certificate (a host name or an IP address).
    public var serverName: String
    /// A PEM file of CA certificates trusted in addition to the system's.
    public var additionalTrustedCertificates: String?

    /// A configuration.
    public init(serverName: String, additionalTrustedCertificates: String? = nil) {
        self.serverName = serverName
        self.additionalTrustedCertificates = additionalTrustedCertificates
    }
}

/// Makes the TLS session for one connection.
public typealias TLSSessionFactory = @Sendable (TLSSessionConfiguration) throws -> any TLSSession
