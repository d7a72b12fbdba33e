public import Dispatch
public import TetherCore

/// What a client asks of a byte transport: where to connect, and how.
public struct ByteTransportRequest: Sendable {
    /// The host and port.
    public var endpoint: Endpoint
    /// TLS from the first byte, the certificate verified for this name (nil: cleartext first;
    /// `startTLS` may insert TLS later).
    public var directTLSServerName: String?
    /// The timeout of each TCP connect (per resolved address).
    public var tcpConnectTimeout: Duration
    /// The most bytes handed up from one read.
    public var maximumReadSize: Int
    /// Makes the TLS sessions (nil: no TLS layer; a request for TLS then fails with `tlsFailed`).
    public var tlsSessionFactory: TLSSessionFactory?
    /// A PEM file of CA certificates trusted for TLS in addition to the system's.
    public var caFile: String?
    /// Pins and the app's evaluator for the server's certificate.
    public var trust: TLSTrust
    /// Resolve the host's A and AAAA records through these nameservers (`DNSLookup`) instead of
    /// the system's resolver (nil, the default: `getaddrinfo`, which also reads `/etc/hosts`).
    public var nameServers: [Endpoint]?
    /// Told, for a log, what each of those lookups answered (nil: nobody asks).
    public var resolutionLog: (@Sendable (String) -> Void)?
    /// How the socket's input is waited for (`SocketReading.default`: a thread per socket, for the
    /// process's first 64).
    public var socketReading: SocketReading
    /// How long a closed connection may keep its socket to deliver its last bytes and read the
    /// peer's end of the stream (zero: it closes at once, and may lose them).
    public var gracefulCloseTimeout: Duration

    /// A request.
    public init(
        endpoint: Endpoint,
        directTLSServerName: String? = nil,
        tcpConnectTimeout: Duration = .seconds(10),
        maximumReadSize: Int = 65536,
        tlsSessionFactory: TLSSessionFactory? = defaultTLSSessionFactory,
        caFile: String? = nil,
        trust: TLSTrust = TLSTrust(),
        nameServers: [Endpoint]? = nil,
        socketReading: SocketReading = .default,
        gracefulCloseTimeout: Duration = .seconds(2)
    ) {
        self.socketReading = socketReading
        self.gracefulCloseTimeout = gracefulCloseTimeout
        self.endpoint = endpoint
        self.directTLSServerName = directTLSServerName
        self.tcpConnectTimeout = tcpConnectTimeout
        self.maximumReadSize = maximumReadSize
        self.tlsSessionFactory = tlsSessionFactory
        self.caFile = caFile
        self.trust = trust
        self.nameServers = nameServers
    }
}

/// What a byte transport reports, on the queue it was made for: `connected` once (with direct TLS,
/// once TLS is established), then any number of `received` and `drained`, `tlsEstablished` after
/// `startTLS`, and at most one of `closed` or `tlsFailed`, after which nothing follows.
public enum ByteTransportEvent: Sendable {
    /// Connected (with direct TLS: and TLS is established).
    case connected
    /// TLS inserted by `startTLS` is established.
    case tlsEstablished
    /// Bytes arrived (plaintext, once TLS is in place).
    case received([UInt8])
    /// TLS failed: a refused certificate, a failed handshake, a broken record. Nothing follows.
    case tlsFailed(String)
    /// The app's `TLSTrust` (pins, evaluator) refused the server's certificate. Nothing follows,
    /// and the clients do not retry.
    case certificateRefused(String)
    /// Everything sent was handed to the network (after a send had to wait).
    case drained
    /// The connection ended (nil: an orderly end; otherwise what went wrong, never a secret).
    case closed(String?)
}

/// One connection of one transport generation, under a client's runner: bytes in and out, TLS
/// inserted on request. The Dispatch driver's is TCP with Happy Eyeballs and OpenSSL
/// (`defaultByteTransportFactory`); an app can bring its own (Network.framework's `NWConnection`
/// on Apple platforms) through the clients' `Options.transportFactory` and keep everything above.
///
/// Every call comes on the runner's queue and every event must be delivered on it, never from
/// inside a call (a failure found while sending is reported asynchronously), so that a runner
/// never re-enters its machine. After `close()` no event is delivered.
public protocol ByteTransport: AnyObject {
    /// Connects (asynchronously): `connected`, or `closed`/`tlsFailed`, follows.
    func start()
    /// Sends `bytes` after everything sent before (through TLS once it is in place).
    func send(_ bytes: [UInt8])
    /// Inserts TLS now (STARTTLS), verifying the certificate for `serverName`; `bufferedBytes`
    /// arrived after the protocol's go-ahead and are the start of the server's TLS data.
    func startTLS(serverName: String, bufferedBytes: [UInt8])
    /// Closes (what was sent goes out first, with TLS's close_notify); no event follows.
    func close()
    /// Bytes sent and not yet handed to the network.
    var pendingWriteCount: Int { get }
    /// The TLS version in use (`TLSv1.3`), nil without TLS or when the transport does not tell.
    var tlsVersion: String? { get }
}

extension ByteTransport {
    /// Not told.
    public var tlsVersion: String? { nil }
}

/// Makes the byte transports of a client, one per transport generation: the request, the runner's
/// queue, and where the transport's events go.
public typealias ByteTransportFactory =
    @Sendable (ByteTransportRequest, DispatchQueue, @escaping (ByteTransportEvent) -> Void) -> any ByteTransport

/// The Dispatch driver's transport: non-blocking TCP with the resolved addresses raced (RFC 8305)
/// and TLS from the request's session factory (OpenSSL on Linux).
public let defaultByteTransportFactory: ByteTransportFactory = { request, queue, onEvent in
    TCPTransport(request: request, queue: queue, onEvent: onEvent)
}
