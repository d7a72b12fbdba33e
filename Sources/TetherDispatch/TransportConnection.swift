import Dispatch
import TetherCore

#if canImport(TetherTLS)
    import TetherTLS
#endif

/// What to trust when a transport inserts TLS.
struct TLSSettings: Sendable {
    /// A PEM file of CA certificates trusted in addition to the system's.
    var caFile: String?
}

/// One transport generation's stack for a runner: a TCP connection and, when asked, TLS over it
/// (at once for direct TLS, or mid-stream for STARTTLS). It hands the runner plaintext and
/// lifecycle events, and takes plaintext to send; the TLS layer is `TLSClient` (OpenSSL over
/// memory BIOs) where `TetherTLS` is available (Linux), and absent elsewhere.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`. Events are delivered on `queue` from inside socket events, never from
/// inside a call the runner makes (failures found while sending are delivered asynchronously).
final class TransportConnection: @unchecked Sendable {
    enum Event {
        /// Connected (with direct TLS: and TLS is established).
        case connected
        /// TLS inserted by `startTLS` is established.
        case tlsEstablished
        /// Plaintext received.
        case received([UInt8])
        /// TLS failed (a rejected certificate, a failed handshake, a broken record).
        case tlsFailed(String)
        /// Everything written was taken by the kernel.
        case drained
        /// The connection ended (nil: orderly).
        case closed(String?)
    }

    private let queue: DispatchQueue
    private let settings: TLSSettings
    private let directTLSServerName: String?
    private var tcp: TCPConnection?
    private var onEvent: ((Event) -> Void)?
    private var closed = false

    #if canImport(TetherTLS)
        /// The TLS session (a box: the session is noncopyable and changes in place).
        private final class Session {
            var client: TLSClient
            let direct: Bool

            init(_ client: consuming TLSClient, direct: Bool) {
                self.client = client
                self.direct = direct
            }
        }
        private var session: Session?
    #endif

    init(
        endpoint: Endpoint,
        queue: DispatchQueue,
        connectTimeout: Duration,
        readBufferSize: Int,
        directTLSServerName: String?,
        settings: TLSSettings,
        onEvent: @escaping (Event) -> Void
    ) {
        self.queue = queue
        self.settings = settings
        self.directTLSServerName = directTLSServerName
        self.onEvent = onEvent
        tcp = TCPConnection(
            endpoint: endpoint,
            queue: queue,
            connectTimeout: connectTimeout,
            readBufferSize: readBufferSize
        ) { [weak self] event in
            self?.tcpEvent(event)
        }
    }

    /// Bytes written and not yet taken by the kernel.
    var pendingWriteCount: Int { tcp?.pendingWriteCount ?? 0 }

    func start() {
        tcp?.start()
    }

    /// Inserts TLS now (after STARTTLS's `<proceed/>`); `buffered` arrived after it.
    func startTLS(serverName: String, buffered: [UInt8]) {
        beginTLS(serverName: serverName, direct: false)
        if !buffered.isEmpty { queue.async { [self] in received(buffered) } }
    }

    /// Sends plaintext (through TLS when it is in place).
    func send(_ bytes: [UInt8]) {
        guard !closed else { return }
        #if canImport(TetherTLS)
            if let session {
                do throws(TLSError) {
                    try session.client.send(bytes)
                } catch {
                    return failLater(error.message)
                }
                return flushTLS()
            }
        #endif
        tcp?.send(bytes)
    }

    /// Closes: TLS's close_notify first when TLS is up, then the socket once what is written has
    /// gone out. No event follows.
    func close() {
        guard !closed else { return }
        closed = true
        onEvent = nil
        #if canImport(TetherTLS)
            if let session {
                session.client.close()
                flushTLS()
            }
        #endif
        tcp?.close(afterFlushing: true)
        tcp = nil
    }

    // MARK: - Internals

    private func deliver(_ event: Event) {
        guard !closed else { return }
        onEvent?(event)
    }

    private func failLater(_ message: String) {
        queue.async { [self] in deliver(.tlsFailed(message)) }
    }

    private func tcpEvent(_ event: TCPConnection.Event) {
        switch event {
        case .connected:
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
            deliver(.closed(error))
        }
    }

    private func beginTLS(serverName: String, direct: Bool) {
        #if canImport(TetherTLS)
            do throws(TLSError) {
                var client = try TLSClient(
                    configuration: .init(serverName: serverName, additionalTrustedCertificates: settings.caFile)
                )
                try client.start()
                session = Session(client, direct: direct)
            } catch {
                return failLater(error.message)
            }
            flushTLS()
        #else
            failLater("this platform's driver has no TLS layer")
        #endif
    }

    private func received(_ bytes: [UInt8]) {
        guard !closed else { return }
        #if canImport(TetherTLS)
            if let session {
                let wasEstablished = session.client.isEstablished
                let plaintext: [UInt8]
                do throws(TLSError) {
                    plaintext = try session.client.receive(bytes)
                } catch {
                    flushTLS()  // an alert for the server, if OpenSSL made one
                    return deliver(.tlsFailed(error.message))
                }
                flushTLS()
                if !wasEstablished && session.client.isEstablished {
                    deliver(session.direct ? .connected : .tlsEstablished)
                }
                if !plaintext.isEmpty { deliver(.received(plaintext)) }
                if session.client.peerClosed { deliver(.closed(nil)) }
                return
            }
        #endif
        deliver(.received(bytes))
    }

    #if canImport(TetherTLS)
        private func flushTLS() {
            guard let session else { return }
            let output = session.client.takeOutput()
            if !output.isEmpty { tcp?.send(output) }
        }
    #endif
}
