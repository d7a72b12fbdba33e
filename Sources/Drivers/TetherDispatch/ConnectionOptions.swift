public import Dispatch
public import TetherCore

/// The driver's settings beyond the protocol, the same for both clients (`XMPPClient.Options` and
/// `HubConnection.Options` are this type): queues, transports and TLS, back-pressure, logging.
/// What each protocol bounds itself (connect attempts, keep-alive, queue sizes) is in its
/// machine's configuration.
public struct ConnectionOptions: Sendable {
    /// Where event handlers and callbacks run unless a queue is given when they are registered
    /// (nil: a serial queue of the client's own).
    public var callbackQueue: DispatchQueue?
    /// The timeout of each TCP connect (per resolved address; default 10 s). The addresses are
    /// raced as RFC 8305 says (a new one every 250 ms while earlier ones hang), so one that
    /// swallows the connect costs 250 ms, not this timeout. The machine's `connectTimeout`
    /// bounds the whole attempt.
    public var tcpConnectTimeout: Duration
    /// The most bytes handed up from one read of a connection (default 64 KiB).
    public var maximumReadSize: Int
    /// How a connection waits for its socket's input (`SocketReading.default`: a thread of its own
    /// for each of the process's first 64 sockets, which answers sooner; Dispatch's shared threads
    /// beyond).
    public var socketReading: SocketReading
    /// How long a closed connection may keep its socket (default 2 s) to write what is queued (a
    /// last `</stream:stream>`, WebSocket Close or TLS close_notify), end its side of the stream
    /// and read the server's end, so that a reset does not drop those last bytes. Zero closes at
    /// once.
    public var gracefulCloseTimeout: Duration
    /// What a send does while the queue of unacknowledged messages is full (XMPP stream
    /// management's `maximumQueuedStanzas`, SignalR stateful reconnect's buffer), or the network
    /// has not taken `maximumUnsentBytes`: wait for room (the default, cancelably, as the official
    /// SignalR clients do) or throw at once (`sendQueueFull`, `sendBufferFull`).
    public var backPressure: BackPressure
    /// The most bytes a connection holds that the network has not taken (written while the
    /// kernel's socket buffer was full; over SignalR's HTTP transports, queued behind a `POST` or
    /// in it) before the app's sends wait (or fail, as `backPressure` says); default 1 MiB. A
    /// send is never split: one larger than this goes when nothing else waits.
    public var maximumUnsentBytes: Int
    /// The least severe level logged (default `none`: a client says nothing unless asked).
    /// `trace` logs every stanza or message sent and received.
    public var logLevel: LogLevel
    /// Where log lines go (default: standard error, once `logLevel` asks for something).
    /// Secrets (passwords, SASL credentials, access tokens) never reach it.
    public var logHandler: LogHandler
    /// Seeds reconnect jitter and ids (nil: random).
    public var randomSeed: UInt64?
    /// A PEM file of CA certificates trusted, for TLS, in addition to the system's (a private CA,
    /// a test server).
    public var caFile: String?
    /// Which server certificates are accepted beyond the trust store: pinned public keys, or the
    /// app's evaluator (`TLSTrust`), for every TLS connection of the client.
    public var trust: TLSTrust
    /// Makes the TLS sessions (default: OpenSSL on Linux; nil elsewhere, where a client that needs
    /// TLS cannot be created: `XMPPClient` throws `tlsUnavailable`, `HubConnection`
    /// `invalidConfiguration`).
    public var tlsSessionFactory: TLSSessionFactory?
    /// The DNS servers asked for the XMPP server's SRV records and, when set, for every host's
    /// A and AAAA records too (nil: SRV through the nameservers of `/etc/resolv.conf`, addresses
    /// through the system's resolver, which also reads `/etc/hosts`); IP addresses, port 53
    /// unless given.
    public var nameServers: [Endpoint]?
    /// Makes the byte transports (default: TCP with TLS from `tlsSessionFactory`); an app can
    /// bring its own, for example over Network.framework.
    public var transportFactory: ByteTransportFactory

    /// Options.
    public init(
        callbackQueue: DispatchQueue? = nil,
        tcpConnectTimeout: Duration = .seconds(10),
        maximumReadSize: Int = 65536,
        socketReading: SocketReading = .default,
        gracefulCloseTimeout: Duration = .seconds(2),
        backPressure: BackPressure = .wait,
        maximumUnsentBytes: Int = 1 << 20,
        logLevel: LogLevel = .none,
        logHandler: @escaping LogHandler = logToStandardError,
        randomSeed: UInt64? = nil,
        caFile: String? = nil,
        trust: TLSTrust = TLSTrust(),
        nameServers: [Endpoint]? = nil,
        tlsSessionFactory: TLSSessionFactory? = defaultTLSSessionFactory,
        transportFactory: @escaping ByteTransportFactory = defaultByteTransportFactory
    ) {
        self.callbackQueue = callbackQueue
        self.tcpConnectTimeout = tcpConnectTimeout
        self.maximumReadSize = maximumReadSize
        self.socketReading = socketReading
        self.gracefulCloseTimeout = gracefulCloseTimeout
        self.backPressure = backPressure
        self.maximumUnsentBytes = maximumUnsentBytes
        self.logLevel = logLevel
        self.logHandler = logHandler
        self.randomSeed = randomSeed
        self.caFile = caFile
        self.trust = trust
        self.nameServers = nameServers
        self.tlsSessionFactory = tlsSessionFactory
        self.transportFactory = transportFactory
    }

    /// Why the app's sends must wait for the network: the transports hold `unsent` bytes it has not
    /// taken, more than `maximumUnsentBytes` (nil: there is room). Each client throws it as its
    /// protocol's "full" error.
    package func networkFullReason(unsent: Int) -> String? {
        guard unsent > maximumUnsentBytes else { return nil }
        return "The network has not taken the \(unsent) bytes sent already (more than maximumUnsentBytes, "
            + "\(maximumUnsentBytes))."
    }

    /// A byte transport to `endpoint` on `queue`, made by `transportFactory` with these options'
    /// connect timeout, read size and TLS settings (TLS from the first byte when
    /// `directTLSServerName` is set).
    public func makeTransport(
        to endpoint: Endpoint,
        directTLSServerName: String?,
        queue: DispatchQueue,
        onEvent: @escaping (ByteTransportEvent) -> Void
    ) -> any ByteTransport {
        var request = ByteTransportRequest(
            endpoint: endpoint,
            directTLSServerName: directTLSServerName,
            tcpConnectTimeout: tcpConnectTimeout,
            maximumReadSize: maximumReadSize,
            tlsSessionFactory: tlsSessionFactory,
            caFile: caFile,
            trust: trust,
            nameServers: nameServers,
            socketReading: socketReading,
            gracefulCloseTimeout: gracefulCloseTimeout
        )
        if logLevel <= .debug {
            let log = ConnectionLog(level: logLevel, handler: logHandler)
            request.resolutionLog = { log.debug($0) }
        }
        return transportFactory(request, queue, onEvent)
    }

    /// A byte transport to a URL's host: TLS from the first byte for https and wss, the
    /// certificate checked for the URL's host.
    public func makeTransport(
        to url: ServerURL,
        queue: DispatchQueue,
        onEvent: @escaping (ByteTransportEvent) -> Void
    ) -> any ByteTransport {
        makeTransport(
            to: url.endpoint,
            directTLSServerName: url.isSecure ? url.host : nil,
            queue: queue,
            onEvent: onEvent
        )
    }
}
