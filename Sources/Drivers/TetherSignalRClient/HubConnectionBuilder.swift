public import Dispatch
public import TetherCore
public import TetherDispatch
public import TetherSignalR

/// Builds a `HubConnection` in the shape SignalR users know from the official clients:
///
/// ```swift
/// let connection = HubConnectionBuilder(url: "https://example.com/hub")
///     .withHeader("X-Client", "phone")
///     .withAccessTokenProvider { await tokens.current() }
///     .withHubProtocol(.messagePack)
///     .withAutomaticReconnect()                       // about 0, 2, 10, 30 s (spread), then suspended
///     .withStatefulReconnect()
///     .withLogging(.information) { level, line in logger.log(level, line) }
///     .build()
/// ```
public struct HubConnectionBuilder: Sendable {
    /// The protocol-level configuration so far.
    public var configuration: HubConnection.Configuration
    /// The hub protocol so far (JSON by default).
    public var hubProtocol: AnyHubProtocol = .json(JSONHubProtocol())
    /// The driver options so far.
    public var options = HubConnection.Options()
    /// The access-token provider, if any.
    public var accessTokenProvider: (@Sendable () async throws -> String?)?

    /// A builder for the hub at `url` (`http(s)://…`; `ws(s)://` with `withSkipNegotiation()`).
    public init(url: String) {
        configuration = HubConnection.Configuration(url: url)
    }

    /// Adds HTTP headers to the negotiate request and the WebSocket upgrade.
    public func withHeaders(_ headers: [String: String]) -> Self {
        with { $0.configuration.headers.merge(headers) { _, new in new } }
    }

    /// Adds one HTTP header.
    public func withHeader(_ name: String, _ value: String) -> Self {
        withHeaders([name: value])
    }

    /// Asks `provider` for an access token before every connection attempt (reconnects
    /// included), sent as `Authorization: Bearer …`; nil sends none. Tokens are never logged.
    public func withAccessTokenProvider(_ provider: @escaping @Sendable () async throws -> String?) -> Self {
        with {
            $0.accessTokenProvider = provider
            $0.configuration.asksForAccessToken = true
        }
    }

    /// Sends a fixed access token.
    public func withAccessToken(_ token: String) -> Self {
        with { $0.configuration.accessToken = token }
    }

    /// Speaks the `json` or `messagepack` hub protocol (default limits).
    public func withHubProtocol(_ encoding: ValueEncoding) -> Self {
        switch encoding {
        case .json: withHubProtocol(.json(JSONHubProtocol()))
        case .messagePack: withHubProtocol(.messagePack(MessagePackHubProtocol()))
        }
    }

    /// Speaks `hubProtocol` (for custom limits).
    public func withHubProtocol(_ hubProtocol: AnyHubProtocol) -> Self {
        with { $0.hubProtocol = hubProtocol }
    }

    /// Reconnects automatically after a lost connection, as `policy` says (default `.signalR`:
    /// the official clients' 0, 2, 10 and 30 s spread ±50 %, the first retry within 1 s, so that
    /// the clients of a restarted hub do not all come back at once; `.signalRDefault` for the exact
    /// numbers; `.tiered()` for about 5×3 s, 5×9 s, 5×15 s). When the
    /// policy gives up the connection is suspended (`onSuspended`) until `reconnectNow()`.
    /// `retryingFailedStart`: a failed first `start()` is retried under the policy too, and
    /// `start()` returns once connected (or throws when the policy gives up); off by default, as
    /// in the official clients.
    public func withAutomaticReconnect(
        _ policy: ReconnectPolicy = .signalR,
        retryingFailedStart: Bool = false
    ) -> Self {
        with {
            $0.configuration.reconnectPolicy = policy
            $0.configuration.retriesFailedStart = retryingFailedStart
        }
    }

    /// Sends a Ping after `interval` without sending (default 15 s).
    public func withKeepAliveInterval(_ interval: Duration) -> Self {
        with { $0.configuration.keepAliveInterval = interval }
    }

    /// Closes when nothing was received for `timeout` (default 30 s; keep it at least twice the
    /// server's keep-alive interval).
    public func withServerTimeout(_ timeout: Duration) -> Self {
        with { $0.configuration.serverTimeout = timeout }
    }

    /// Abandons a connect attempt (access token, negotiate, WebSocket, handshake) that has not
    /// completed within `timeout` (default 30 s); it fails with `connectTimeout`.
    public func withConnectTimeout(_ timeout: Duration) -> Self {
        with { $0.configuration.connectTimeout = timeout }
    }

    /// Asks for stateful reconnect: a dropped WebSocket is reopened for the same connection and
    /// unacknowledged messages are replayed both ways (`bufferSize` bytes at most in flight).
    public func withStatefulReconnect(bufferSize: Int = 100_000) -> Self {
        with {
            $0.configuration.statefulReconnect = true
            $0.configuration.statefulReconnectBufferSize = bufferSize
        }
    }

    /// The transports allowed, in the order they are tried (default: WebSockets, Server-Sent
    /// Events, long polling). A transport the server does not offer, or that cannot carry the hub
    /// protocol (Server-Sent Events carry text only), is skipped; one that fails to start (a proxy
    /// refusing the WebSocket upgrade) is followed by the next.
    public func withTransports(_ transports: [HubTransport]) -> Self {
        with { $0.configuration.transports = transports }
    }

    /// The transports allowed, in the order they are tried.
    public func withTransports(_ transports: HubTransport...) -> Self {
        withTransports(transports)
    }

    /// Opens the WebSocket at once, without the negotiate request (the server must allow it).
    public func withSkipNegotiation() -> Self {
        with { $0.configuration.skipNegotiation = true }
    }

    /// Accepts a TLS server only if one certificate of its verified chain has one of these
    /// public keys (base64 SHA-256 of the SubjectPublicKeyInfo, as `TLSTrust` says), on every
    /// TLS connection (negotiate, WebSocket, Server-Sent Events, long polling). A mismatch fails
    /// with `certificateRefused`, and nothing is retried.
    public func withPinnedPublicKeys(_ hashes: [String]) -> Self {
        with { $0.options.trust.pinnedPublicKeys = hashes }
    }

    /// Lets `evaluator` decide which TLS servers to accept (for a self-signed server whose key
    /// the app knows, say), from the chain and what the trust store said (`TLSPeer`).
    public func withTrustEvaluator(_ evaluator: @escaping @Sendable (TLSPeer) -> Bool) -> Self {
        with { $0.options.trust.evaluator = evaluator }
    }

    /// Logs at `level` and above, to `handler` (default: standard error).
    public func withLogging(
        _ level: LogLevel,
        handler: @escaping LogHandler = logToStandardError
    ) -> Self {
        with {
            $0.options.logLevel = level
            $0.options.logHandler = handler
        }
    }

    /// Runs handlers and lifecycle callbacks on `queue` (e.g. `.main`) unless one is given at
    /// registration.
    public func withCallbackQueue(_ queue: DispatchQueue) -> Self {
        with { $0.options.callbackQueue = queue }
    }

    /// Trusts the CA certificates in the PEM file `path` for TLS, in addition to the system's.
    public func withCAFile(_ path: String) -> Self {
        with { $0.options.caFile = path }
    }

    /// Makes TLS sessions for `https://` and `wss://` with `factory` (default: OpenSSL on Linux;
    /// on other platforms an app supplies its own).
    public func withTLSSessionFactory(_ factory: @escaping TLSSessionFactory) -> Self {
        with { $0.options.tlsSessionFactory = factory }
    }

    /// The largest message accepted from the hub (each hub message, and each WebSocket message;
    /// default 1 MiB): the hub protocol's `maximumMessageSize`, whichever protocol is chosen. A
    /// larger one ends the connection with an error rather than growing memory without bound.
    public func withMaximumMessageSize(_ bytes: Int) -> Self {
        precondition(bytes > 0, "the maximum message size must be positive")
        return with { $0.maximumMessageSize = bytes }
    }

    /// The largest message accepted, once set (applied to the hub protocol at `build()`, so that
    /// it holds whichever protocol is chosen, before or after).
    private var maximumMessageSize: Int?

    /// A copy with `change` made.
    private func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }

    /// The connection (not started). Throws `invalidConfiguration` when it could never connect
    /// (see `HubConnection.init`): a URL that is not absolute http(s) or ws(s), or TLS without a
    /// TLS layer on this platform.
    public func build() throws(HubConnectionError) -> HubConnection {
        var hubProtocol = hubProtocol
        if let maximumMessageSize { hubProtocol.maximumMessageSize = maximumMessageSize }
        return try HubConnection(
            configuration: configuration,
            hubProtocol: hubProtocol,
            options: options,
            accessTokenProvider: accessTokenProvider
        )
    }
}
