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
    /// How a connection waits for its socket's input (`SocketReading.default`: the process's few
    /// shared read threads, one per processor, which handle each input on the connection's queue
    /// themselves; or Dispatch read sources).
    public var socketReading: SocketReading
    /// How long a closed connection may keep its socket (default 2 s) to write what is queued (a
    /// last `</stream:stream>`, WebSocket Close or TLS close_notify), end its side of the stream
    /// and read the server's end, so that a reset does not drop those last bytes. Zero closes at
    /// once.
    public var gracefulCloseTimeout: Duration
    /// What a send does while the queue of unacknowledged messages is full (XMPP stream
    /// management's `maximumQueuedStanzas`, SignalR stateful reconnect's buffer), or the network
    /// has not taken `maximumUnsentBytes`: wait for room (the default, cancelably, as the official
    /// SignalR clients do) or throw `sendQueueFull` at once.
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

    /// The seed for the machine: `randomSeed`, or a random one.
    package var machineSeed: UInt64 { randomSeed ?? UInt64.random(in: 0...UInt64.max) }
    /// A PEM file of CA certificates trusted, for TLS, in addition to the system's (a private CA,
    /// a test server).
    public var caFile: String?
    /// Which server certificates are accepted beyond the trust store: pinned public keys, or the
    /// app's evaluator (`TLSTrust`), for every TLS connection of the client.
    public var trust: TLSTrust
    /// Makes the TLS sessions (default: OpenSSL on Linux; nil elsewhere, where a client that needs
    /// TLS cannot be created: both throw `tlsUnavailable`).
    public var tlsSessionFactory: TLSSessionFactory?
    /// The DNS servers asked for the XMPP server's SRV records and, when set, for every host's
    /// A and AAAA records too (nil: SRV through the system resolver's nameservers, read through its API; addresses
    /// through the system's resolver, which also reads `/etc/hosts`); IP addresses, port 53
    /// unless given.
    public var nameServers: [Endpoint]?
    /// Makes the transports (default: `defaultTransportFactory`, TCP with TLS from
    /// `tlsSessionFactory` and the message transports over it); an app can bring its own, for one
    /// kind or for all, for example TCP over Network.framework.
    public var transportFactory: TransportFactory
    /// The `User-Agent` of the HTTP requests that open or carry a transport (the WebSocket
    /// upgrade, SignalR's negotiate and HTTP transports).
    public var userAgent: String

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
        transportFactory: @escaping TransportFactory = defaultTransportFactory,
        userAgent: String = "Tether/0.1 (Swift)"
    ) {
        self.userAgent = userAgent
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

}

// Names of earlier versions, kept so that the compiler names their replacements (CHANGELOG.md).
extension ConnectionOptions {
    /// Replaced by `maximumReadSize` (the most bytes handed up from one read).
    @available(*, unavailable, renamed: "maximumReadSize")
    public var readBufferSize: Int {
        get { maximumReadSize }
        set { maximumReadSize = newValue }
    }

    /// Gone: the largest message is the hub protocol's (`maximumMessageSize`), and XMPP's is
    /// `parserLimits.maximumElementSize`.
    @available(
        *,
        unavailable,
        message:
            "the largest message is set in one place now: the hub protocol's maximumMessageSize (SignalR), parserLimits.maximumElementSize (XMPP)"
    )
    public var maximumMessageSize: Int {
        get { 0 }
        set {}
    }

    /// Replaced by the log: set `logLevel = .trace` (every stanza or message sent and received)
    /// and, to receive the lines, `logHandler`.
    @available(
        *,
        unavailable,
        message: "the traffic is logged now: set logLevel = .trace, and logHandler to receive the lines"
    )
    public var trafficLog: (@Sendable (String) -> Void)? {
        get { nil }
        set {}
    }
}
