import Synchronization
public import TetherCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `TLSClient` as a `TLSSession`, the drivers' TLS on Linux.
public final class OpenSSLTLSSession: TLSSession {
    private var client: TLSClient

    /// Makes sessions with OpenSSL (system trust store, TLS 1.2 and 1.3). The sessions share
    /// one `TLSContext` per extra CA file (the trust store is loaded once, not on every
    /// connection); a CA file that changed on disk is read again.
    public static let factory: TLSSessionFactory = { configuration in
        try OpenSSLTLSSession(
            configuration,
            context: sharedContext(trusting: configuration.additionalTrustedCertificates)
        )
    }

    /// A refused certificate (`TLSError.certificateRejected`: not trusted or not for the name;
    /// `peerRejected`: refused by the app's `TLSTrust`) as the drivers' `TLSPeerRejected`; other
    /// errors as they are.
    private static func translated(_ error: TLSError) -> any Error {
        error.kind == .peerRejected || error.kind == .certificateRejected ? TLSPeerRejected(error.message) : error
    }

    /// A session for `configuration`, with a context of its own.
    public init(_ configuration: TLSSessionConfiguration) throws(TLSError) {
        client = try TLSClient(
            serverName: configuration.serverName,
            context: TLSContext(additionalTrustedCertificates: configuration.additionalTrustedCertificates),
            trust: configuration.trust
        )
    }

    /// A session for `configuration` with `context`'s trust and versions (its
    /// `additionalTrustedCertificates` is then not used).
    public init(_ configuration: TLSSessionConfiguration, context: TLSContext) throws(TLSError) {
        client = try TLSClient(serverName: configuration.serverName, context: context, trust: configuration.trust)
    }

    /// The shared contexts, by CA file: the file's modification time and size when read, and the context.
    private static let contexts = Mutex<[String?: (stamp: [Int], context: TLSContext)]>([:])

    /// The shared context trusting the system's store and `file`, made on first use (and again
    /// when the file changed).
    static func sharedContext(trusting file: String?) throws(TLSError) -> TLSContext {
        let stamp = file.map(Self.stamp) ?? []
        if let entry = contexts.withLock({ $0[file] }), entry.stamp == stamp { return entry.context }
        // Made outside the lock: loading the trust store takes milliseconds. Two threads may
        // both make one; the last stored wins, and both work.
        let context = try TLSContext(additionalTrustedCertificates: file)
        contexts.withLock { $0[file] = (stamp, context) }
        return context
    }

    /// The file's modification time and size (empty when it cannot be read: then the context is
    /// made, and fails, each time).
    private static func stamp(_ path: String) -> [Int] {
        var info = stat()
        guard stat(path, &info) == 0 else { return [] }
        #if canImport(Darwin)
            return [info.st_mtimespec.tv_sec, info.st_mtimespec.tv_nsec, Int(info.st_size)]
        #else
            return [info.st_mtim.tv_sec, info.st_mtim.tv_nsec, Int(info.st_size)]
        #endif
    }

    public var isEstablished: Bool { client.isEstablished }
    public var protocolVersion: String? { client.isEstablished ? client.protocolVersion : nil }
    public var peerClosed: Bool { client.peerClosed }
    public var channelBindings: TLSChannelBindings { client.channelBindings }
    public func start() throws {
        do throws(TLSError) { try client.start() } catch { throw Self.translated(error) }
    }

    public func receive(_ ciphertext: [UInt8]) throws -> [UInt8] {
        do throws(TLSError) { return try client.receive(ciphertext) } catch { throw Self.translated(error) }
    }

    public func send(_ plaintext: [UInt8]) throws { try client.send(plaintext) }
    public func takeOutput() -> [UInt8] { client.takeOutput() }
    public func close() { client.close() }
}
