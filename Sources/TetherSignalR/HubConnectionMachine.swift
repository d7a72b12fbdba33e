public import TetherCore

/// The client side of a SignalR connection as a pure state machine (sans-IO).
///
/// The machine never touches a socket or a clock. The driver feeds it inputs (app commands, the
/// negotiate HTTP response, transport events, received bytes, the current time) and carries out
/// the actions it returns from `pollAction()`: send the negotiate request, open the WebSocket,
/// send bytes, close the transport, and deliver events to the app. `pollTimeout()` is the
/// earliest armed timer; call `handleTimeout(now:)` then (extra calls are harmless).
///
/// ```
///  disconnected ──start──▶ negotiating ──200──▶ connectingTransport ──opened──▶ handshaking
///       ▲                     │  ▲ redirect          │                            │ {}
///       │ stop / failure      ▼  └──┘                ▼                            ▼
///       └──────────────────── (start fails: closed) ◀───────────────────────  connected
///                                                                               │ transport lost,
///  reconnectWaiting ◀── lost with a policy (delay) ◀──────────────────────────┘ Close(allowReconnect)
///       │ timer: full restart (negotiate, transport, handshake)
///       ▼
///  negotiating … connected (event reconnected)          resuming (stateful reconnect: same id,
///                                                                 no negotiate, no handshake)
/// ```
///
/// States:
/// - `disconnected`: not started, or stopped/closed; `start` begins a connection.
/// - `negotiating`: the negotiate request is out (redirects loop here).
/// - `connectingTransport`: the WebSocket is being opened.
/// - `handshaking`: the handshake request is sent; waiting for the response (with a timeout).
/// - `connected`: messages flow; keep-alive pings and the server timeout run.
/// - `reconnectWaiting`: the connection was lost; waiting for the policy's delay.
/// - `resuming`: stateful reconnect: the WebSocket is being reopened on the same connection.
///
/// Rules: see `Specs/signalr/hub-connection.md` (the transition table the tests walk) and
/// `shared/specs/signalr.md` §§4–10.
public struct HubConnectionMachine {
    /// What the app configures.
    public struct Configuration: Sendable {
        /// The hub URL (`http(s)://host/path`).
        public var url: String
        /// The access token sent as `Authorization: Bearer …` (never logged or put in errors).
        public var accessToken: String?
        /// Extra HTTP headers for the negotiate request and the WebSocket upgrade.
        public var headers: [String: String]
        /// Connect the WebSocket directly, without negotiating (no connection id then).
        public var skipNegotiation: Bool
        /// Send a Ping after this long without sending (default 15 s).
        public var keepAliveInterval: Duration
        /// Close when nothing was received for this long (default 30 s).
        public var serverTimeout: Duration
        /// Fail the handshake when no response arrives within this long (default 15 s).
        public var handshakeTimeout: Duration
        /// Automatic reconnect (nil: off, like the official clients' default).
        public var reconnectPolicy: ReconnectPolicy?
        /// Ask for stateful reconnect (hub protocol version 2).
        public var statefulReconnect: Bool
        /// The byte limit of unacknowledged messages under stateful reconnect (default 100,000).
        public var statefulReconnectBufferSize: Int
        /// How long after a receipt the Ack is sent under stateful reconnect (default 1 s).
        public var ackDelay: Duration
        /// Server→client methods the app handles (matched case-insensitively); server
        /// invocations of other methods that expect a result get "Client didn't provide a result.".
        public var handledTargets: Set<String>
        /// The most server invocations awaiting the app's `reply` at once (default 1,000); beyond
        /// it, further ones are answered at once with the error "Too many client results are
        /// pending." instead of reaching the app, so a server cannot grow the set without bound.
        public var maximumPendingClientResults: Int

        /// A configuration with the official clients' defaults.
        public init(
            url: String,
            accessToken: String? = nil,
            headers: [String: String] = [:],
            skipNegotiation: Bool = false,
            keepAliveInterval: Duration = .seconds(15),
            serverTimeout: Duration = .seconds(30),
            handshakeTimeout: Duration = .seconds(15),
            reconnectPolicy: ReconnectPolicy? = nil,
            statefulReconnect: Bool = false,
            statefulReconnectBufferSize: Int = 100_000,
            ackDelay: Duration = .seconds(1),
            handledTargets: Set<String> = [],
            maximumPendingClientResults: Int = 1000
        ) {
            self.url = url
            self.accessToken = accessToken
            self.headers = headers
            self.skipNegotiation = skipNegotiation
            self.keepAliveInterval = keepAliveInterval
            self.serverTimeout = serverTimeout
            self.handshakeTimeout = handshakeTimeout
            self.reconnectPolicy = reconnectPolicy
            self.statefulReconnect = statefulReconnect
            self.statefulReconnectBufferSize = statefulReconnectBufferSize
            self.ackDelay = ackDelay
            self.handledTargets = handledTargets
            self.maximumPendingClientResults = maximumPendingClientResults
        }
    }

    /// What the driver must do.
    public enum Action: Sendable, Equatable {
        /// POST to `url` with an empty body and `headers`; report with `negotiateResponse` or
        /// `negotiateFailed`.
        case sendNegotiate(url: String, headers: [String: String])
        /// Open a WebSocket to `url` with `headers`; report `transportOpened` or `transportClosed`.
        case openTransport(url: String, headers: [String: String])
        /// Send `bytes` in one WebSocket message of `format` (Text for JSON, Binary for MessagePack).
        case send([UInt8], format: TransferFormat)
        /// Close the WebSocket (then report `transportClosed`).
        case closeTransport
        /// Tell the app.
        case event(Event)
    }

    /// What the app is told.
    public enum Event: Sendable, Equatable {
        /// Connected (the connection id is nil when negotiation was skipped).
        case connected(connectionId: String?)
        /// The connection was lost and the reconnect policy is running.
        case reconnecting(HubConnectionError?)
        /// Reconnected (a new connection: re-join groups here).
        case reconnected(connectionId: String?)
        /// Closed for good (nil after `stop()`).
        case closed(HubConnectionError?)
        /// The server invoked a handled method; reply with `reply(to:result:now:)` when
        /// `invocationId` is set.
        case invocation(InvocationMessage)
        /// A blocking invocation ended.
        case completion(invocationId: String, result: CompletionResult)
        /// An item of a server→client stream.
        case streamItem(invocationId: String, item: EncodedValue)
        /// A server→client stream ended (with the server's error, or nil).
        case streamCompleted(invocationId: String, error: String?)
        /// Stateful reconnect: the send buffer has room again after `sendBufferFull`.
        case sendBufferAvailable
    }

    enum Timer: Hashable, Sendable {
        case handshake, liveness, reconnect, ack
    }

    /// What an attempt to connect is for.
    struct Attempt: Sendable {
        var url: String
        var accessToken: String?
        var redirects = 0
        var isReconnect: Bool
        var negotiated: NegotiateResponse?
    }

    enum Pending: Sendable {
        case invocation
        case stream
        /// Canceled by the app (already reported ended): late items and its Completion are ignored.
        case canceledStream
    }

    /// A live (or resuming) connection.
    struct Session: Sendable {
        var connectionId: String?
        var transportURL: String
        var headers: [String: String]
        var parser: AnyHubMessageParser
        /// Client→server invocations and streams awaiting their Completion.
        var pending: [String: Pending] = [:]
        /// Client→server upload streams still open.
        var uploads: Set<String> = []
        /// Server→client invocations awaiting the app's reply.
        var serverInvocations: Set<String> = []
        var stateful: StatefulReconnectBuffer?
        /// Keep-alive pings after send silence and the server timeout after receive silence.
        var heartbeat: Heartbeat
    }

    enum State: Sendable {
        case disconnected
        case negotiating(Attempt)
        case connectingTransport(Attempt)
        case handshaking(Attempt, received: [UInt8])
        case connected(Session)
        case reconnectWaiting(lastError: HubConnectionError?)
        case resuming(Session)
    }

    /// The configuration.
    public let configuration: Configuration
    let hubProtocol: AnyHubProtocol
    var state: State = .disconnected
    var timers = TimerTable<Timer>()
    /// Queued actions; handed-out ones are taken (moved out, leaving nil), so the queue needs no
    /// O(n) removals and no extra copies.
    var actionQueue: [Action?] = []
    /// How many of the queued actions were handed out.
    var actionsRead = 0
    var schedule: ReconnectSchedule?
    var nextInvocationId = 0
    var random: SeededRandomNumberGenerator
    /// `configuration.handledTargets`, lower-cased (targets match case-insensitively).
    let handledTargets: Set<String>
    /// Targets seen so far → whether handled (saves lower-casing each message's target; bounded).
    var handledCache: [String: Bool] = [:]
    /// The last few targets seen and whether they are handled (see `isHandled`).
    var recentTargets: [(target: String, handled: Bool)] = []
    /// The entry of `recentTargets` replaced next once it is full.
    var nextRecentTarget = 0
    let heartbeatConfiguration: Heartbeat.Configuration

    /// A machine for `configuration` speaking `hubProtocol`; `randomSeed` seeds the reconnect
    /// jitter (pass a random one in production, a fixed one in tests).
    public init(configuration: Configuration, hubProtocol: AnyHubProtocol, randomSeed: UInt64) {
        self.configuration = configuration
        self.hubProtocol = hubProtocol
        random = SeededRandomNumberGenerator(seed: randomSeed)
        schedule = configuration.reconnectPolicy.map(ReconnectSchedule.init(policy:))
        heartbeatConfiguration = Heartbeat.Configuration(
            keepAliveInterval: configuration.keepAliveInterval,
            receiveTimeout: configuration.serverTimeout
        )
        handledTargets = Set(configuration.handledTargets.map { $0.lowercased() })
    }

    // MARK: - Driver interface

    /// The next action to carry out, or nil.
    public mutating func pollAction() -> Action? {
        guard actionsRead < actionQueue.count else {
            if !actionQueue.isEmpty {
                actionQueue.removeAll(keepingCapacity: true)
                actionsRead = 0
            }
            return nil
        }
        defer { actionsRead += 1 }
        return actionQueue[actionsRead].take()
    }

    mutating func enqueue(_ action: Action) {
        actionQueue.append(action)
    }

    /// The earliest armed timer.
    public func pollTimeout() -> Instant? { timers.earliest }

    /// The current state's name (for logs and tests).
    public var stateName: String {
        switch state {
        case .disconnected: "disconnected"
        case .negotiating: "negotiating"
        case .connectingTransport: "connectingTransport"
        case .handshaking: "handshaking"
        case .connected: "connected"
        case .reconnectWaiting: "reconnectWaiting"
        case .resuming: "resuming"
        }
    }

    /// The connection id of the current connection.
    public var connectionId: String? {
        switch state {
        case .connected(let session), .resuming(let session): session.connectionId
        default: nil
        }
    }

    // MARK: - App commands

    /// Starts connecting. Precondition: the machine is disconnected.
    public mutating func start(now: Instant) {
        guard case .disconnected = state else { preconditionFailure("start() while \(stateName)") }
        beginAttempt(isReconnect: false, now: now)
    }

    /// Stops: closes the transport, fails what is pending, and reports `closed(nil)`.
    public mutating func stop(now: Instant) {
        switch state {
        case .disconnected:
            return
        case .connected(var session):
            send(.close(CloseMessage()), in: &session, now: now)
            failPending(session)
            enqueue(.closeTransport)
        case .resuming(let session):
            failPending(session)
            enqueue(.closeTransport)
        case .connectingTransport, .handshaking:
            enqueue(.closeTransport)
        case .negotiating, .reconnectWaiting:
            break
        }
        finish(error: nil)
    }
}
