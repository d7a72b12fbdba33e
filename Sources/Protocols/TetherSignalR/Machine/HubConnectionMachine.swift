@_spi(TetherInternal) public import TetherCore

/// The client side of a SignalR connection as a pure state machine (sans-IO), on the shared
/// machine contract (`Specs/machine-contract.md`).
///
/// The machine never touches a socket or a clock. The driver feeds it inputs (app commands, the
/// access token, the negotiate HTTP response, transport events, received bytes, the current time
/// — every transport and negotiate input naming the generation it belongs to) and carries out the
/// actions it returns from `pollAction()`: fetch a token, send the negotiate request, open the
/// WebSocket, send bytes, close the transport, and deliver events. `pollTimeout()` is the
/// earliest armed timer; call `handleTimeout(now:)` then (extra calls are harmless).
///
/// ```
///  disconnected ──start──▶ (fetchingAccessToken) ──▶ negotiating ──200──▶ connectingTransport
///       ▲                                               │  ▲ redirect          │ opened
///       │ stop / failure                                ▼  └──┘                ▼
///       └──────────────── (start fails: closed) ◀──────────────────────── handshaking ──{}──▶ connected
///                                                                                               │ lost
///  reconnectWaiting ◀── lost with a policy (delay) ◀─────────────────────────────────────────┘
///       │ timer (or reconnectNow): full restart (token, negotiate, transport, handshake)
///       │ the policy gives up ──▶ suspended ──reconnectNow──▶ (full restart)
///       ▼
///  … connected (lifecycle connected)        resuming (stateful reconnect: same id, no negotiate,
///                                            no handshake; lifecycle resumed)
/// ```
///
/// States (`StateName`): `disconnected`; `fetchingAccessToken` (the driver asks the app's
/// provider, when `asksForAccessToken`); `negotiating` (the negotiate request is out; redirects
/// loop here); `connectingTransport` (the WebSocket is being opened); `handshaking` (the
/// handshake request is sent; waiting for the response, with a timeout); `connected` (messages
/// flow; keep-alive pings and the server timeout run); `reconnectWaiting` (the policy's delay);
/// `resuming` (stateful reconnect: the WebSocket of the same connection is being reopened);
/// `suspended` (the policy gave up; `reconnectNow` starts again). The same words as
/// `XMPPClientMachine`'s for the same phases.
///
/// Rules: `Specs/signalr/hub-connection.md` (the transition table the tests walk) and
/// `Specs/signalr/README.md` (the wire layer's decisions).
public struct HubConnectionMachine {
    /// What the app configures. Every limit has the official clients' default.
    public struct Configuration: Sendable {
        /// The hub URL (`http(s)://host/path`).
        public var url: String
        /// A fixed access token sent as `Authorization: Bearer …` (never logged or put in errors).
        public var accessToken: String?
        /// Ask the driver for a fresh access token before every connection attempt
        /// (`fetchAccessToken` actions, answered with `accessTokenFetched`), as the official
        /// clients' token factories are asked, so a token refreshed between reconnects is used.
        public var asksForAccessToken: Bool
        /// Extra HTTP headers for the negotiate request and the WebSocket upgrade.
        public var headers: [String: String]
        /// Connect the WebSocket directly, without negotiating (no connection id then; only with
        /// `.webSockets` among `transports`).
        public var skipNegotiation: Bool
        /// The transports the client may use, in the order it tries them (default: WebSockets,
        /// Server-Sent Events, long polling, the official clients' order). One the server does not
        /// offer, or that cannot carry the hub protocol's format, is skipped; one that fails to
        /// start is followed by the next (after a new negotiate, as the official clients do).
        public var transports: [HubTransport]
        /// Send a Ping after this long without sending (default 15 s).
        public var keepAliveInterval: Duration
        /// Close when nothing was received for this long (default 30 s).
        public var serverTimeout: Duration
        /// Fail the handshake when no response arrives within this long (default 15 s).
        public var handshakeTimeout: Duration
        /// A connect attempt (the access token, negotiate and its redirects, opening the WebSocket,
        /// the handshake) must complete within this long, or it is abandoned and fails with
        /// `connectTimeout` (default 30 s): a request or WebSocket that hangs never blocks the
        /// next attempt.
        public var connectTimeout: Duration
        /// The most bytes of handshake response awaited before the handshake fails (default
        /// 64 KiB).
        public var maximumHandshakeSize: Int
        /// The most negotiate redirects followed (default 100, as the official clients).
        public var maximumNegotiateRedirects: Int
        /// Automatic reconnect (nil: off, like the official clients' default).
        public var reconnectPolicy: ReconnectPolicy?
        /// Retry a failed first `start` under `reconnectPolicy` too (default false, as the
        /// official clients: a failed start fails at once). The attempts are announced as
        /// reconnects (`reconnecting`), the first success as `connected`, and a policy that gives
        /// up suspends the connection.
        public var retriesFailedStart: Bool
        /// Ask for stateful reconnect (hub protocol version 2).
        public var statefulReconnect: Bool
        /// The byte limit of unacknowledged messages under stateful reconnect (default 100,000).
        public var statefulReconnectBufferSize: Int
        /// How long after a receipt the Ack is sent under stateful reconnect (default 1 s).
        public var ackDelay: Duration
        /// Stateful reconnect: when reopening the WebSocket of the same connection fails (or takes
        /// longer than `handshakeTimeout`), the delays before the next tries (default 0.5, 1, 2
        /// and 4 s: the server keeps the connection for some time, 30 s with aiosignalr, and may
        /// refuse a new WebSocket until it has noticed the old one is gone). When every try
        /// failed, the connection is lost as without stateful reconnect.
        public var resumeRetryDelays: [Duration]
        /// Server→client methods the app handles, matched case-insensitively as the servers
        /// match hub methods (`invocation` events name the registered spelling). Server
        /// invocations of other methods are reported as `unhandledInvocation`, and those that
        /// expect a result are answered "Client didn't provide a result.".
        public var handledTargets: Set<String>
        /// The most server invocations awaiting the app's `reply` at once (default 1,000); beyond
        /// it, further ones are answered at once with the error "Too many client results are
        /// pending." instead of reaching the app, so a server cannot grow the set without bound.
        public var maximumPendingClientResults: Int
        /// What the machine does when the device's network changes (`networkChanged`). The
        /// default probe waits 20 s: a hub sends nothing unasked but its pings (every 15 s by
        /// default), so a shorter wait would take a quiet link for a dead one.
        public var network: NetworkPolicy
        /// What the machine does when the app goes to the background (`applicationStateChanged`;
        /// default `closeUntilActive`, what the maintainers of the Swift SignalR clients advise).
        public var backgroundPolicy: BackgroundPolicy

        /// A configuration with the official clients' defaults.
        public init(
            url: String,
            accessToken: String? = nil,
            asksForAccessToken: Bool = false,
            headers: [String: String] = [:],
            skipNegotiation: Bool = false,
            transports: [HubTransport] = HubTransport.allCases,
            keepAliveInterval: Duration = .seconds(15),
            serverTimeout: Duration = .seconds(30),
            handshakeTimeout: Duration = .seconds(15),
            connectTimeout: Duration = .seconds(30),
            maximumHandshakeSize: Int = 64 * 1024,
            maximumNegotiateRedirects: Int = 100,
            reconnectPolicy: ReconnectPolicy? = nil,
            retriesFailedStart: Bool = false,
            statefulReconnect: Bool = false,
            statefulReconnectBufferSize: Int = 100_000,
            ackDelay: Duration = .seconds(1),
            resumeRetryDelays: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4)],
            handledTargets: Set<String> = [],
            maximumPendingClientResults: Int = 1000,
            network: NetworkPolicy = NetworkPolicy(probeTimeout: .seconds(20)),
            backgroundPolicy: BackgroundPolicy = .closeUntilActive
        ) {
            self.network = network
            self.backgroundPolicy = backgroundPolicy
            self.url = url
            self.accessToken = accessToken
            self.asksForAccessToken = asksForAccessToken
            self.headers = headers
            self.skipNegotiation = skipNegotiation
            self.transports = transports
            self.keepAliveInterval = keepAliveInterval
            self.serverTimeout = serverTimeout
            self.handshakeTimeout = handshakeTimeout
            self.connectTimeout = connectTimeout
            self.maximumHandshakeSize = maximumHandshakeSize
            self.maximumNegotiateRedirects = maximumNegotiateRedirects
            self.reconnectPolicy = reconnectPolicy
            self.retriesFailedStart = retriesFailedStart
            self.statefulReconnect = statefulReconnect
            self.statefulReconnectBufferSize = statefulReconnectBufferSize
            self.ackDelay = ackDelay
            self.resumeRetryDelays = resumeRetryDelays
            self.handledTargets = handledTargets
            self.maximumPendingClientResults = maximumPendingClientResults
        }
    }

    /// What the driver must do: open, send on and close transports, tell the app, and SignalR's own
    /// requests.
    public typealias Action = ConnectionAction<Request, Event>
    /// The lifecycle this machine reports: sessions are connections (id and transport).
    public typealias Lifecycle = ConnectionLifecycle<HubSession, HubConnectionError>

    /// SignalR's requests of the driver, beyond opening, sending on and closing transports (the
    /// contract's actions, `ConnectionAction`).
    public enum Request: Sendable, Equatable {
        /// Ask the app's token provider for a token; answer with `accessTokenFetched` (or
        /// `accessTokenFailed`) naming `generation`.
        case fetchAccessToken(generation: TransportGeneration)
        /// POST to `url` with an empty body and `headers`; report `negotiateResponse` or
        /// `negotiateFailed` with `generation`. A `closeTransport` of the generation abandons it.
        case negotiate(url: ServerURL, headers: [String: String], generation: TransportGeneration)
    }

    /// What the app is told: the lifecycle every Tether client shares (`ConnectionLifecycle`), and
    /// what SignalR adds.
    public enum Event: Sendable, Equatable {
        /// A lifecycle change. `connected` is a new connection (after `start`, or after a reconnect:
        /// re-join groups here); `resumed` a stateful reconnect that took the same connection up
        /// again on a new transport (nothing lost, nothing to redo).
        case lifecycle(Lifecycle)
        /// The server invoked a handled method, `handler` being its registered spelling; reply
        /// with `reply(to:result:now:)` when `invocationId` is set.
        case invocation(InvocationMessage, handler: String)
        /// The server invoked a method nobody handles (the official clients log "No client method
        /// with the name '…' found."); one that expected a result was answered with an error.
        case unhandledInvocation(InvocationMessage)
        /// A blocking invocation ended: its result (nil for a void method), or why it failed
        /// (`invocationFailed` with the server's text, `canceled` when the connection closed
        /// first).
        case completion(invocationId: String, result: Result<EncodedValue?, HubConnectionError>)
        /// An item of a server→client stream.
        case streamItem(invocationId: String, item: EncodedValue)
        /// A server→client stream ended: nil when it completed (or the app canceled it), else why
        /// (`invocationFailed` with the server's text, `canceled` when the connection closed first).
        case streamCompleted(invocationId: String, error: HubConnectionError?)
        /// Stateful reconnect: the send buffer has room again after `sendQueueFull`.
        case sendBufferAvailable
    }

    /// The states, by name.
    public enum StateName: String, Hashable, Sendable, CaseIterable {
        /// Not started, or stopped.
        case disconnected
        /// Waiting for the access token provider.
        case fetchingAccessToken
        /// The negotiate request is out.
        case negotiating
        /// Opening the transport.
        case connectingTransport
        /// The handshake is out.
        case handshaking
        /// Connected: invocations flow.
        case connected
        /// Waiting before the next attempt.
        case reconnectWaiting
        /// Stateful reconnect: the same connection over a new transport.
        case resuming
        /// The reconnect policy gave up, or the app is in the background; `reconnectNow` starts again.
        case suspended
    }

    enum Timer: Hashable, Sendable {
        /// The handshake's deadline, and, when resuming, the reopened transport's.
        case handshake
        /// The connect attempt's deadline (`connectTimeout`), from its start to the handshake
        /// response.
        case connectAttempt
        case liveness, reconnect, ack
        /// Resuming: the next try to reopen the WebSocket.
        case resume
    }

    /// Where reopening the WebSocket of a stateful connection stands.
    enum ResumeStep: Sendable {
        /// The WebSocket of the session's generation is being opened (`attempt` counts from 1).
        case opening(attempt: Int)
        /// Waiting (timer `resume`) to open the WebSocket of the session's generation.
        case waiting(attempt: Int)
    }

    /// What an attempt to connect is for.
    struct Attempt: Sendable {
        /// The generation of the current step's transport (token, negotiate request, WebSocket).
        var generation: TransportGeneration
        var url: String
        var accessToken: String?
        var redirects = 0
        var isReconnect: Bool
        var negotiated: NegotiateResponse?
        /// The transport being opened (or to open once negotiated).
        var transport = HubTransport.webSockets
        /// The transports left to try after `transport`, in order.
        var untried: [HubTransport]
        /// A 401 answered this attempt: the token provider was asked once more, and the step
        /// that was refused is retried with the new token (a second 401 fails the attempt).
        var retryAfterUnauthorized: UnauthorizedStep?
        /// Why each transport tried or skipped so far did not do ("'ServerSentEvents' does not
        /// support Binary.", "WebSockets failed: …"), for the attempt's error.
        var transportFailures: [String] = []
    }

    /// The step of an attempt that a 401 refused.
    enum UnauthorizedStep: Sendable {
        case negotiate
        case transport
    }

    enum Pending: Sendable {
        case invocation
        case stream
        /// Canceled by the app (already reported ended): late items and its Completion are ignored.
        case canceledStream
    }

    /// What identifies a live (or resuming) connection: the state's payload.
    struct Session: Sendable {
        /// The generation of its WebSocket (a new one for each reopened WebSocket).
        var generation: TransportGeneration
        var connectionId: String?
        var transport: HubTransport
        /// The hub's URL this connection went to (after redirects).
        var url: String
        /// What reopens its WebSocket under stateful reconnect.
        var transportRequest: TransportRequest?
    }

    /// What a live connection accumulates and changes with every message: its parser, the
    /// invocations in flight, the stateful-reconnect buffer, the heartbeat. It is part of the
    /// `connected` and `resuming` states' payloads (in a `LinkStorage`). To change it in place,
    /// the payload is taken out (`takeLive()`) while the state is `modifying`, so that the link's
    /// buffers have one owner and are not copied, and put back (`restore(_:)`) or replaced by the
    /// next state.
    struct Link: Sendable {
        var parser: AnyHubMessageParser
        /// Client→server invocations and streams awaiting their Completion.
        var pending: [String: Pending] = [:]
        /// When each pending invocation was sent (its completion measures a round trip).
        var invocationSentAt: [String: Instant] = [:]
        /// Client→server upload streams still open.
        var uploads: Set<String> = []
        /// Server→client invocations awaiting the app's reply.
        var serverInvocations: Set<String> = []
        var stateful: StatefulReconnectBuffer?
        /// Stateful reconnect: when the last resume completed, what had been received by then,
        /// and how many resumed transports in a row were lost again at once with nothing new
        /// received (a message the client cannot take, replayed on every resume, would otherwise
        /// make an endless loop of reconnects).
        var resumedAt: Instant?
        var receivedAtResume: Int64 = 0
        var quickLosses = 0
        /// Stateful reconnect: the tries to reopen the WebSocket announced (`reconnecting`) since
        /// the link was lost (the lifecycle numbers them from 1 in each outage).
        var resumeTries = 0
        /// Keep-alive pings after send silence and the server timeout after receive silence.
        var heartbeat: Heartbeat
    }

    /// A link in one heap block of its own, copied on write: the states' payloads stay small, so
    /// taking a live connection out of the state and putting it back moves a few words instead of
    /// the whole link (a keep-alive sweep over many machines does that for each of them).
    struct LinkStorage: Sendable {
        // Mutated only through `link`'s `_modify`, which copies a shared block first; a block is
        // reached only through the one LinkStorage that owns it uniquely while it is changed, so
        // the dynamic exclusivity check (a third of a keep-alive sweep's cost) is left out.
        private final class Block: @unchecked Sendable {
            @exclusivity(unchecked) var link: Link
            init(_ link: Link) { unsafe self.link = link }
        }
        private var block: Block

        init(_ link: Link) { block = Block(link) }

        // A getter, not a `_read` coroutine: Swift 6.3.1 at -Onone reads a large value yielded
        // by `_read` (such as `link.stateful` in `live.link.stateful != nil`) after ending the
        // coroutine, from its freed frame (AddressSanitizer's heap-use-after-free). Inlined, the
        // getter loads only the fields its caller uses.
        var link: Link {
            @inline(__always) get { unsafe block.link }
            @inline(__always) _modify {
                if !isKnownUniquelyReferenced(&block) { copyBlock() }
                yield &(unsafe block.link)
            }
        }

        // Out of line: the copy would otherwise make the accessor's coroutine frame too large for
        // its caller's buffer, and every access would allocate one.
        @inline(never)
        private mutating func copyBlock() {
            block = Block(unsafe block.link)
        }
    }

    enum State: Sendable {
        case disconnected
        case fetchingAccessToken(Attempt)
        case negotiating(Attempt)
        case connectingTransport(Attempt)
        /// The handshake response is awaited (what arrived of it is in `handshakeReceived`).
        case handshaking(Attempt)
        case connected(Session, LinkStorage)
        case reconnectWaiting
        /// The reconnect policy gave up, or the connection closed for the background;
        /// `reconnectNow` (or `stop`) ends it.
        case suspended
        /// Stateful reconnect: the WebSocket of `Session.generation` is being opened, or will be.
        case resuming(Session, ResumeStep, LinkStorage)
        /// Only while a live connection's link is changed in place (`takeLive()`); never seen
        /// between two calls, and a trap if it is.
        case modifying
    }

    /// A live connection (connected or resuming) taken out of the state to be changed in place:
    /// the state is `modifying` until `restore(_:)` puts it back or a transition replaces it.
    struct LiveConnection {
        var session: Session
        /// Where reopening the WebSocket stands while resuming; nil while connected.
        var resumeStep: ResumeStep?
        var linkStorage: LinkStorage
        var link: Link {
            @inline(__always) get { linkStorage.link }
            @inline(__always) _modify { yield &linkStorage.link }
        }
        /// The WebSocket messages go out on now: nil while resuming (sequenced messages are then
        /// only buffered, for the replay).
        var generation: TransportGeneration? { resumeStep == nil ? session.generation : nil }
    }

    // The action queue and the timers first, their counters and earliest deadline next to each
    // other (`ActionQueue`, `TimerTable`): a sweep over many machines reads only these.
    var actions = ActionQueue<Action>()
    var timers = TimerTable<Timer>()
    /// The configuration.
    public let configuration: Configuration
    let hubProtocol: AnyHubProtocol
    var state: State = .disconnected
    /// What arrived of the handshake response (in `handshaking`).
    var handshakeReceived: [UInt8] = []
    var schedule: ReconnectSchedule?
    var nextInvocationId = 0
    /// Tries of the current outage announced before the reconnect policy took over (stateful
    /// reconnect's resumes): the policy's attempt numbers continue from them.
    var reconnectAttemptOffset = 0
    /// The device's network and the app's state, as last reported.
    var device = DeviceState()
    /// Closed because the app went to the background (`closeUntilActive`): started again when it
    /// is active.
    var closedForBackground = false
    /// What `health(now:)` reports.
    var health = HealthCounters()
    var lastGeneration = TransportGeneration(0)
    var random: SeededRandomNumberGenerator
    /// The handled targets by lower-cased name (targets match case-insensitively): the
    /// configuration's, and those added with `handle(_:)`.
    var handledTargets: [String: String]
    /// Targets seen so far → the handler's name, or nil when unhandled (saves lower-casing each
    /// message's target; bounded).
    var handledCache: [String: String?] = [:]
    /// The last few targets seen and their handlers (see `handler(for:)`).
    var recentTargets: [(target: String, handler: String?)] = []
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
        var handlers: [String: String] = [:]
        for name in configuration.handledTargets.sorted() {
            handlers[name.lowercased()] = handlers[name.lowercased()] ?? name
        }
        handledTargets = handlers
    }

    // MARK: - Driver interface

    /// The next action to carry out, or nil.
    public mutating func pollAction() -> Action? {
        actions.next()
    }

    mutating func enqueue(_ action: consuming Action) {
        if case .send(let bytes, _, _) = action { health.bytesSent += bytes.count }
        actions.append(action)
    }

    /// The earliest armed timer.
    public func pollTimeout() -> Instant? { timers.earliest }

    /// The current state's name.
    public var stateName: StateName {
        switch state {
        case .disconnected: .disconnected
        case .fetchingAccessToken: .fetchingAccessToken
        case .negotiating: .negotiating
        case .connectingTransport: .connectingTransport
        case .handshaking: .handshaking
        case .connected: .connected
        case .reconnectWaiting: .reconnectWaiting
        case .suspended: .suspended
        case .resuming: .resuming
        case .modifying: Self.modifyingObserved()
        }
    }

    static func modifyingObserved() -> Never {
        preconditionFailure("the state was observed while a live connection was being changed")
    }

    /// Takes the live connection (connected or resuming) out of the state, leaving it
    /// `modifying`; nil in any other state. The payload is moved, not copied: swapped out of the
    /// state and taken apart, so the link keeps one owner and changing it copies nothing (hold
    /// no other reference to the state's `LinkStorage` meanwhile, or the first change copies the
    /// link).
    mutating func takeLive() -> LiveConnection? {
        switch state {
        case .connected, .resuming:
            break
        case .modifying:
            Self.modifyingObserved()
        case .disconnected, .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking, .reconnectWaiting,
            .suspended:
            return nil
        }
        var taken = State.modifying
        swap(&state, &taken)
        switch consume taken {
        case .connected(let session, let link):
            return LiveConnection(session: session, resumeStep: nil, linkStorage: link)
        case .resuming(let session, let step, let link):
            return LiveConnection(session: session, resumeStep: step, linkStorage: link)
        case .disconnected, .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking, .reconnectWaiting,
            .suspended, .modifying:
            Self.modifyingObserved()
        }
    }

    /// Puts a live connection taken by `takeLive()` back.
    mutating func restore(_ live: consuming LiveConnection) {
        if let step = live.resumeStep {
            state = .resuming(live.session, step, live.linkStorage)
        } else {
            state = .connected(live.session, live.linkStorage)
        }
    }

    /// The transport of the current connection (while connected or resuming), or the one being
    /// opened (while connecting or handshaking); nil otherwise.
    public var transport: HubTransport? {
        switch state {
        case .connected(let session, _), .resuming(let session, _, _): session.transport
        case .connectingTransport(let attempt), .handshaking(let attempt): attempt.transport
        case .modifying: Self.modifyingObserved()
        case .disconnected, .fetchingAccessToken, .negotiating, .reconnectWaiting, .suspended: nil
        }
    }

    /// The current connection (its id and transport), while connected or resuming it.
    public var session: HubSession? {
        switch state {
        case .connected(let session, _), .resuming(let session, _, _):
            HubSession(connectionId: session.connectionId, transport: session.transport)
        case .modifying: Self.modifyingObserved()
        case .disconnected, .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking, .reconnectWaiting,
            .suspended:
            nil
        }
    }

    /// SignalR never inserts TLS into an open transport: nothing to do.
    public mutating func tlsEstablished(generation: TransportGeneration, tls: TLSChannelBindings, now: Instant) {}

    /// The connection id of the current connection.
    public var connectionId: String? {
        switch state {
        case .connected(let session, _), .resuming(let session, _, _): session.connectionId
        case .modifying: Self.modifyingObserved()
        case .disconnected, .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking, .reconnectWaiting,
            .suspended:
            nil
        }
    }

    /// Stateful reconnect: the bytes of sent messages the server has not acknowledged yet (kept
    /// for replay after a reconnect; 0 without stateful reconnect). New messages wait while it is
    /// at `statefulReconnectBufferSize` or more, so it exceeds that by one message at most.
    public var unacknowledgedBytes: Int {
        switch state {
        case .connected(_, let storage), .resuming(_, _, let storage): storage.link.stateful?.bufferedBytes ?? 0
        case .modifying: Self.modifyingObserved()
        case .disconnected, .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking, .reconnectWaiting,
            .suspended:
            0
        }
    }

    /// The connection's health at `now` (see `ConnectionHealth`; the round trips are those of
    /// invocations, the only exchange a hub answers).
    public func health(now: Instant) -> ConnectionHealth {
        var awaiting = 0
        var transport: String?
        var server: String?
        switch state {
        case .connected(let session, let storage):
            awaiting = storage.link.stateful?.unacknowledged.count ?? 0
            transport = session.transport.healthName
            server = session.url
        case .resuming(let session, _, let storage):
            awaiting = storage.link.stateful?.unacknowledged.count ?? 0
            server = session.url
        case .modifying: Self.modifyingObserved()
        case .fetchingAccessToken(let attempt), .negotiating(let attempt), .connectingTransport(let attempt),
            .handshaking(let attempt):
            server = attempt.url
        case .disconnected, .reconnectWaiting, .suspended:
            break
        }
        var snapshot = health.snapshot(
            now: now,
            phase: phase,
            state: stateName.rawValue,
            awaitingAcknowledgement: awaiting,
            transport: transport
        )
        snapshot.server = server.map(ServerURL.redacted)
        return snapshot
    }

    /// The generation whose input the machine accepts now, if any.
    public var currentGeneration: TransportGeneration? {
        switch state {
        case .fetchingAccessToken(let attempt), .negotiating(let attempt), .connectingTransport(let attempt),
            .handshaking(let attempt):
            attempt.generation
        case .connected(let session, _), .resuming(let session, _, _): session.generation
        case .modifying: Self.modifyingObserved()
        case .disconnected, .reconnectWaiting, .suspended: nil
        }
    }

    /// A new transport generation.
    mutating func makeGeneration() -> TransportGeneration {
        lastGeneration = lastGeneration.next
        return lastGeneration
    }

    // MARK: - App commands

    /// Handles the server→client method `target` from now on (as if it were in
    /// `configuration.handledTargets`): a handler registered while connected.
    public mutating func handle(_ target: String) {
        guard handledTargets[target.lowercased()] == nil else { return }
        handledTargets[target.lowercased()] = target
        handledCache.removeAll()
        recentTargets.removeAll()
        nextRecentTarget = 0
    }

    /// Stops handling the server→client method `target` (its invocations are reported as
    /// `unhandledInvocation` from now on, and answered with an error when they expect a result).
    public mutating func stopHandling(_ target: String) {
        guard handledTargets.removeValue(forKey: target.lowercased()) != nil else { return }
        handledCache.removeAll()
        recentTargets.removeAll()
        nextRecentTarget = 0
    }

    /// Starts connecting. Precondition: the machine is disconnected.
    public mutating func start(now: Instant) {
        guard case .disconnected = state else { preconditionFailure("start() while \(stateName)") }
        closedForBackground = false
        reconnectAttemptOffset = 0
        beginAttempt(isReconnect: false, now: now)
    }

    /// Stops: closes the transport, fails what is pending (`canceled`), and reports `closed(nil)`.
    public mutating func stop(now: Instant) {
        if case .disconnected = state { return }
        closeGracefully(now: now)
        finish(error: nil)
    }

    /// A close on purpose (`stop`, the background): a Close message when connected, what is
    /// pending failed, the transport closed; the caller sets the next state.
    mutating func closeGracefully(now: Instant) {
        switch state {
        case .disconnected:
            return
        case .connected, .resuming:
            guard var live = takeLive() else { return }
            if live.resumeStep == nil { send(.close(CloseMessage()), live: &live, now: now) }
            failPending(live.link)
            if case .waiting = live.resumeStep {
                // No WebSocket is open.
            } else {
                enqueue(.closeTransport(generation: live.session.generation))
            }
        case .connectingTransport(let attempt), .handshaking(let attempt):
            enqueue(.closeTransport(generation: attempt.generation))
        case .fetchingAccessToken, .negotiating, .reconnectWaiting, .suspended:
            break
        case .modifying:
            Self.modifyingObserved()
        }
    }

    /// Connect again now, for example because the user asked, the app came to the foreground or
    /// the network came back. Suspended or waiting to reconnect: a new attempt (a full restart) at
    /// once, with the back-off reset. An attempt under way (token, negotiate, WebSocket,
    /// handshake): it is abandoned (it may hang on a dead network) and a fresh one starts.
    /// Resuming (stateful reconnect) and waiting to try again: the WebSocket is reopened at once.
    /// Disconnected or connected: a no-op.
    public mutating func reconnectNow(now: Instant) {
        switch state {
        case .disconnected, .connected, .resuming(_, .opening, _):
            return
        case .resuming(let session, .waiting(let attempt), let link):
            timers.cancel(.resume)
            state = .modifying
            openResumedTransport(session, linkStorage: link, attempt: attempt + 1, now: now)
        case .reconnectWaiting, .suspended:
            timers.cancel(.reconnect)
            schedule?.connectionEstablished()
            beginAttempt(isReconnect: true, now: now)
        case .fetchingAccessToken(let attempt), .negotiating(let attempt):
            timers.cancel(.handshake)
            schedule?.connectionEstablished()
            beginAttempt(isReconnect: attempt.isReconnect, now: now)
        case .connectingTransport(let attempt), .handshaking(let attempt):
            timers.cancel(.handshake)
            handshakeReceived = []
            enqueue(.closeTransport(generation: attempt.generation))
            schedule?.connectionEstablished()
            beginAttempt(isReconnect: attempt.isReconnect, now: now)
        case .modifying:
            Self.modifyingObserved()
        }
    }
}

extension HubConnectionMachine.Request: CustomStringConvertible {
    /// A short, readable rendering (headers by name only, so that no token is shown).
    public var description: String {
        switch self {
        case .fetchAccessToken(let generation): "fetchAccessToken(\(generation))"
        case .negotiate(let url, let headers, let generation):
            "negotiate(\(url.redacted), headers: \(headers.keys.sorted()), \(generation))"
        }
    }
}

extension HubConnectionMachine: ConnectionMachine {
    /// The current state's phase.
    public var phase: ConnectionPhase {
        switch state {
        case .disconnected: .disconnected
        case .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking: .connecting
        case .connected: .connected
        case .resuming: .resuming
        case .reconnectWaiting: .reconnectWaiting
        case .suspended: .suspended
        case .modifying: Self.modifyingObserved()
        }
    }
}

extension HubTransport {
    /// The name `ConnectionHealth` and the command line use: `websockets`, `sse`, `long-polling`.
    public var healthName: String {
        switch self {
        case .webSockets: "websockets"
        case .serverSentEvents: "sse"
        case .longPolling: "long-polling"
        }
    }
}

/// A SignalR connection as the lifecycle names it: its id (nil when negotiation was skipped) and
/// the transport it runs over.
public struct HubSession: Sendable, Hashable, CustomStringConvertible {
    /// The connection id the negotiate response gave (nil when negotiation was skipped).
    public var connectionId: String?
    /// The transport the connection runs over.
    public var transport: HubTransport

    /// A session.
    public init(connectionId: String?, transport: HubTransport) {
        self.connectionId = connectionId
        self.transport = transport
    }

    /// `over webSockets (connection id X)`.
    public var description: String {
        "over \(transport)\(connectionId.map { " (connection id \($0))" } ?? "")"
    }
}

extension HubConnectionMachine.Event: ConnectionEvent {
    /// The lifecycle change this event is, if it is one.
    public var lifecycle: HubConnectionMachine.Lifecycle? {
        if case .lifecycle(let change) = self { return change }
        return nil
    }
}

extension HubConnectionMachine.Event: CustomStringConvertible {
    /// One line per event: `connected: …`, `invocation of ReceiveMessage (2 arguments) for its
    /// handler`, `completion of 3: a result`. Arguments and results are counted, not shown: they
    /// may carry what a log must not.
    public var description: String {
        switch self {
        case .lifecycle(let change): change.description
        case .invocation(let invocation, let handler):
            "invocation of \(invocation.target) (\(invocation.arguments.count) arguments)"
                + (invocation.invocationId.map { ", id \($0)" } ?? "") + ", for the handler of \(handler)"
        case .unhandledInvocation(let invocation):
            "unhandled invocation of \(invocation.target) (\(invocation.arguments.count) arguments)"
                + (invocation.invocationId.map { ", id \($0)" } ?? "")
        case .completion(let id, .success(let value)):
            "completion of \(id): " + (value == nil ? "no result" : "a result")
        case .completion(let id, .failure(let error)): "completion of \(id): \(error)"
        case .streamItem(let id, _): "stream item of \(id)"
        case .streamCompleted(let id, nil): "stream \(id) completed"
        case .streamCompleted(let id, let error?): "stream \(id) completed: \(error)"
        case .sendBufferAvailable: "the send buffer has room"
        }
    }
}
