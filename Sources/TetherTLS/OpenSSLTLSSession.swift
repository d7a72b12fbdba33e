public import TetherCore

/// `TLSClient` as a `TLSSession`, the drivers' TLS on Linux.
public final class OpenSSLTLSSession: TLSSession {
    private var client: TLSClient

    /// Makes sessions with OpenSSL (system trust store, TLS 1.2 and 1.3).
    public static let factory: TLSSessionFactory = { configuration in
        try OpenSSLTLSSession(configuration)
    }

    /// A session for `configuration`.
    public init(_ configuration: TLSSessionConfiguration) throws(TLSError) {
        client = try TLSClient(
            configuration: .init(
                serverName: configuration.serverName,
                additionalTrustedCertificates: configuration.additionalTrustedCertificates
            )
        )
    }

    public var isEstablished: Bool { client.isEstablished }
    public var peerClosed: Bool { client.peerClosed }
    public func start() throws { try client.start() }
    public func receive(_ ciphertext: [UInt8]) throws -> [UInt8] { try client.receive(ciphertext) }
    public func send(_ plaintext: [UInt8]) throws { try client.send(plaintext) }
    public func takeOutput() -> [UInt8] { client.takeOutput() }
    public func close() { client.close() }
}
