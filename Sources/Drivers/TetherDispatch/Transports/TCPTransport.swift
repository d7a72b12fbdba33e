import Dispatch
public import TetherCore

#if canImport(TetherTLS)
    import TetherTLS
#endif

/// This platform's default TLS session maker for the drivers: OpenSSL (`TetherTLS`'s
/// `OpenSSLTLSSession`) on Linux, none elsewhere.
public let defaultTLSSessionFactory: TLSSessionFactory? = {
    #if canImport(TetherTLS)
        OpenSSLTLSSession.factory
    #else
        nil
    #endif
}()

/// The driver's TCP transport: a `TCPConnection` and, when asked, TLS over it (at once for direct
/// TLS, or mid-stream for STARTTLS). It hands the runner plaintext and lifecycle events, and
/// takes plaintext to send; the TLS layer is a `TLSSession` from the options' factory (by default
/// `TetherTLS`'s OpenSSL session on Linux, none elsewhere).
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`. Events are delivered on `queue` from inside socket events, never from
/// inside a call the runner makes (failures found while sending are delivered asynchronously).
final class TCPTransport: Transport, @unchecked Sendable {
    private let queue: DispatchQueue
    private let tlsSessionFactory: TLSSessionFactory?
    private let caFile: String?
    private let trust: TLSTrust
    private let directTLSServerName: String?
    @exclusivity(unchecked) private var tcp: TCPConnection?
    @exclusivity(unchecked) private var onEvent: ((TransportEvent) -> Void)?
    @exclusivity(unchecked) private var closed = false
    /// The TCP connection was made (a failure before is `connectionFailed`, after `connectionLost`).
    @exclusivity(unchecked) private var connected = false

    /// The TLS session, once inserted, and whether it was direct TLS.
    @exclusivity(unchecked) private var session: (any TLSSession)?
    private var sessionIsDirect = false

    /// A connection to `endpoint` with the options' timeouts, reading and TLS settings; with
    /// `tlsServerName`, TLS from the first byte, the certificate verified for that name.
    init(
        endpoint: Endpoint,
        tlsServerName: String?,
        options: ConnectionOptions,
        queue: DispatchQueue,
        onEvent: @escaping (TransportEvent) -> Void
    ) {
        self.queue = queue
        tlsSessionFactory = options.tlsSessionFactory
        caFile = options.caFile
        trust = options.trust
        directTLSServerName = tlsServerName
        self.onEvent = onEvent
        var resolutionLog: (@Sendable (String) -> Void)?
        if options.logLevel <= .debug {
            let log = ConnectionLog(level: options.logLevel, handler: options.logHandler)
            resolutionLog = { log.debug($0) }
        }
        tcp = TCPConnection(
            endpoint: endpoint,
            queue: queue,
            connectTimeout: options.tcpConnectTimeout,
            maximumReadSize: options.maximumReadSize,
            reading: options.socketReading,
            gracefulCloseTimeout: options.gracefulCloseTimeout,
            nameServers: options.nameServers,
            resolutionLog: resolutionLog
        ) { [weak self] event in
            self?.tcpEvent(event)
        }
        // Without TLS the bytes read are the runner's as they are: they go to it straight from
        // the connection (until TLS begins, or the transport closes).
        if tlsServerName == nil { tcp?.onReceived = { bytes in onEvent(.received(bytes)) } }
    }

    /// Bytes written and not yet taken by the kernel.
    var unsentByteCount: Int { tcp?.pendingWriteCount ?? 0 }

    var tlsVersion: String? { session?.isEstablished == true ? session?.protocolVersion : nil }
    var channelBindings: TLSChannelBindings {
        session?.isEstablished == true ? session?.channelBindings ?? .none : .none
    }

    func start() {
        tcp?.start()
    }

    /// Inserts TLS now (after STARTTLS's `<proceed/>`); `buffered` arrived after it.
    func startTLS(serverName: String, bufferedBytes: [UInt8]) {
        beginTLS(serverName: serverName, direct: false)
        if !bufferedBytes.isEmpty { queue.async { [self] in received(bufferedBytes) } }
    }

    /// Sends plaintext (through TLS when it is in place).
    func send(_ bytes: [UInt8]) {
        write(bytes, holding: false)
    }

    /// As `send`, the bytes (their TLS records) held for `flush()`.
    func hold(_ bytes: [UInt8]) {
        write(bytes, holding: true)
    }

    private func write(_ bytes: [UInt8], holding: Bool) {
        guard !closed else { return }
        var wire = bytes
        if let session {
            do {
                try session.send(bytes)
            } catch {
                return failLater("\(error)")
            }
            wire = session.takeOutput()
            if wire.isEmpty { return }
        }
        if holding { tcp?.hold(wire) } else { tcp?.send(wire) }
    }

    func flush() {
        tcp?.flushHeld()
    }

    /// Closes: TLS's close_notify first when TLS is up, then the socket once what is written has
    /// gone out. No event follows.
    func close() {
        guard !closed else { return }
        closed = true
        onEvent = nil
        tcp?.onReceived = nil
        if let session {
            session.close()
            flushTLS()
        }
        tcp?.close(afterFlushing: true)
        tcp = nil
    }

    // MARK: - Internals

    private func deliver(_ event: TransportEvent) {
        guard !closed else { return }
        onEvent?(event)
    }

    /// Ends the transport with `error` (the last event).
    private func end(_ error: TransportError) {
        guard !closed else { return }
        let report = onEvent
        onEvent = nil
        closed = true
        tcp?.onReceived = nil
        tcp?.close(afterFlushing: true)
        tcp = nil
        report?(.closed(error))
    }

    private func failLater(_ message: String) {
        queue.async { [self] in end(TransportError(.tlsFailed, message)) }
    }

    private func tcpEvent(_ event: TCPConnection.Event) {
        switch event {
        case .connected:
            connected = true
            if let name = directTLSServerName {
                beginTLS(serverName: name, direct: true)
            } else {
                deliver(.connected)
            }
        case .received(let bytes):
            received(bytes)
        case .drained:
            deliver(.drained)
        case .closed(let error):
            tcp = nil
            let kind: TransportError.Kind =
                session != nil && session?.isEstablished != true
                ? .tlsFailed : connected ? .connectionLost : .connectionFailed
            deliver(.closed(error.map { TransportError(kind, $0) }))
        }
    }

    private func beginTLS(serverName: String, direct: Bool) {
        tcp?.onReceived = nil  // the bytes read go through the TLS session from now on
        guard let factory = tlsSessionFactory else { return failLater("this platform's driver has no TLS layer") }
        do {
            let session = try factory(
                TLSSessionConfiguration(serverName: serverName, additionalTrustedCertificates: caFile, trust: trust)
            )
            try session.start()
            self.session = session
            sessionIsDirect = direct
        } catch {
            return failLater("\(error)")
        }
        flushTLS()
    }

    private func received(_ bytes: [UInt8]) {
        guard !closed else { return }
        guard let session else { return deliver(.received(bytes)) }
        let wasEstablished = session.isEstablished
        let plaintext: [UInt8]
        do {
            plaintext = try session.receive(bytes)
        } catch let rejected as TLSPeerRejected {
            flushTLS()
            return end(TransportError(.certificateRefused, rejected.message))
        } catch {
            flushTLS()  // an alert for the server, if the session made one
            return end(TransportError(.tlsFailed, "\(error)"))
        }
        flushTLS()
        if !wasEstablished && session.isEstablished {
            deliver(sessionIsDirect ? .connected : .tlsEstablished)
        }
        if !plaintext.isEmpty { deliver(.received(plaintext)) }
        if session.peerClosed { deliver(.closed(nil)) }
    }

    private func flushTLS() {
        guard let session else { return }
        let output = session.takeOutput()
        if !output.isEmpty { tcp?.send(output) }
    }
}
