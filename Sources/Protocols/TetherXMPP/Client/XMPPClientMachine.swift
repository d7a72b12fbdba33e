@_spi(TetherInternal) public import TetherCore
public import TetherXML

/// The client side of an XMPP connection (RFC 6120/6121 c2s) as a pure state machine (sans-IO).
///
/// The machine never opens a socket, reads a clock or starts a thread. The driver feeds it app
/// commands, transport inputs (connected, bytes, closed, TLS established — each naming the
/// transport generation it belongs to) and the current time, and carries out the actions it
/// returns from `pollAction()`: connect, send bytes, start TLS, close, and deliver events.
/// `pollTimeout()` is the earliest armed timer; call `handleTimeout(now:)` then (extra calls are
/// harmless). The contract is the same for every Tether machine (`Specs/machine-contract.md`).
///
/// ```
///  disconnected ──start──▶ connectingTransport ──connected──▶ openingStream ──features──▶ securing
///   ▲                 │                         ▲    │                        │ TLS established
///   │ fatal / stop    │ failure                 │    ▼                        ▼
///   │                 ▼                         │  authenticating ──success──▶ openingStream
///   │   reconnectWaiting ◀── loss, policy ──────┤                                │
///   │        │ timer             gives up ──▶ suspended ──reconnectNow──┐        ▼
///   │        └──────────────────────────────────────────────────────────┴──▶ resuming / binding
///   │                                                                              │
///   └─────── closing ◀──stop── connected ◀────── resumed / bound (+ session, enable SM)
/// ```
///
/// States (`StateName`, the words every Tether machine uses for the same phases):
/// `disconnected` (not started, stopped, or stopped by a fatal error), `connectingTransport` (the
/// TCP connection is being made), `openingStream` (our header is out; waiting for the server's
/// header and features), `securing` (STARTTLS), `authenticating` (SASL), `resuming` (XEP-0198
/// `<resume/>` is out), `binding` (resource binding and the legacy session), `connected` (the
/// stream is connected), `closing` (our `</stream:stream>` is out; waiting briefly for the server's),
/// `reconnectWaiting` (the policy's delay), `suspended` (the policy gave up; waits for
/// `reconnectNow`).
///
/// Every rule, with the transition table the tests walk row by row, is in
/// `Specs/xmpp/client-machine.md`.
public struct XMPPClientMachine: ~Copyable {
    // MARK: - Actions and events

    /// What the driver must do: open, send on and close transports, tell the app, and XMPP's own
    /// requests.
    public typealias Action = ConnectionAction<Request, Event>
    /// The lifecycle this machine reports: sessions are full JIDs.
    public typealias Lifecycle = ConnectionLifecycle<JID, XMPPClientError>

    /// The XMPP requests of the driver, beyond opening, sending on and closing transports (the
    /// contract's actions, `ConnectionAction`).
    public enum Request: Sendable, Equatable {
        /// Look up the SRV records `_xmpp-client._tcp.DOMAIN` and `_xmpps-client._tcp.DOMAIN`
        /// and report them with `serviceLookedUp` naming `generation` (a lookup that failed or
        /// found nothing is `.none`).
        case lookUpService(domain: String, generation: TransportGeneration)
        /// Insert TLS on the transport of `generation` now (after `<proceed/>`): `bufferedBytes`
        /// arrived after `<proceed/>` and are the start of the server's TLS data. Verify the
        /// certificate for `serverName`; report `tlsEstablished`, or `transportClosed` with a
        /// `tlsFailed` or `certificateRefused` error.
        case startTLS(serverName: String, generation: TransportGeneration, bufferedBytes: [UInt8])
    }

    /// How an iq request ended (exactly once per request).
    public enum IQOutcome: Sendable, Equatable {
        /// The `result`.
        case result(XMPPIQ)
        /// The `error` reply (its `error` holds the stanza error).
        case error(XMPPIQ)
        /// No answer within the timeout.
        case timedOut
        /// The stream ended and the request cannot be answered any more: the connection's error,
        /// or `canceled` when the app stopped the connection.
        case notDelivered(XMPPClientError)
    }

    /// What the app is told: the lifecycle every Tether client shares (`ConnectionLifecycle`:
    /// `connected`, `resumed`, `connectionLost`, `attemptFailed`, `reconnecting`,
    /// `waitingForNetwork`, `suspended`, `closed`), and what XMPP adds.
    public enum Event: Sendable, Equatable {
        /// A lifecycle change. `connected(jid)` is a new session, connected with this full JID (the
        /// first one, or after a reconnect without resumption: join rooms and send what depends on
        /// the session here); `resumed(jid)` the same session taken up again (XEP-0198): nothing
        /// was lost.
        case lifecycle(Lifecycle)
        /// The server refused to resume (its condition, if it gave one); a new session follows,
        /// and the stanzas it never acknowledged come in `unacknowledgedStanzas`.
        case resumeFailed(StanzaError.Condition?)
        /// The stream logged in, before its session is connected (`connected` or `resumed` follows):
        /// the SASL mechanism (`SCRAM-SHA-256-PLUS`) and the channel binding it used.
        case authenticated(XMPPAuthentication)
        /// The server gave a FAST token (at a password login that asked for one, or a rotation):
        /// this machine uses it on its own reconnects, and `stateChanged` follows with it for the
        /// next launch.
        case fastToken(XMPPFASTToken)
        /// What the app keeps between launches changed (a FAST token came or went, the user-agent
        /// id was made, the archive position moved): store it (`Configuration.state` takes it
        /// back).
        indirect case stateChanged(XMPPClientState)
        /// The catch-up from the archive at the start of a new session ended: `count` messages
        /// came (`origin` `.archive`), then the ones held back meanwhile; `complete` false when
        /// the archive refused or did not answer, or `maximumMessages` stopped it (the next new
        /// session goes on from there).
        case caughtUp(count: Int, complete: Bool)
        /// The server registered this device for push notifications (XEP-0357).
        indirect case pushEnabled(XMPPPushRegistration)
        /// The server removed the registration (`setPush(nil)`).
        indirect case pushDisabled(XMPPPushRegistration)
        /// The server refused to register or remove it (`remote-server-timeout`: it did not answer
        /// within `iqTimeout`).
        case pushRefused(StanzaError)
        /// The server refused the FAST token (`condition`): it is dropped and the login goes on
        /// with the password, on the same stream.
        case fastTokenRefused(condition: String)
        /// Stream management is on for this session (`resumable`: the server allows resumption).
        case streamManagementEnabled(resumable: Bool)
        /// A message arrived.
        case message(XMPPMessage)
        /// A presence arrived (subscription requests come as `subscriptionRequest`).
        case presence(XMPPPresence)
        /// A contact asks to see the user's presence; `autoAccepted` when the machine already
        /// answered `subscribed` (a roster contact with `autoAcceptSubscriptionsFromContacts`).
        case subscriptionRequest(from: JID, autoAccepted: Bool)
        /// An iq request in one of `handledIQNamespaces`: answer it with `iq.result()` or
        /// `iq.error(…)`.
        case iqRequest(XMPPIQ)
        /// An iq request the app sent ended.
        case iqResponse(id: String, IQOutcome)
        /// The roster fetched when the session started.
        case roster(RosterQuery)
        /// The server changed the roster (the push was acknowledged).
        indirect case rosterPush(RosterItem)
        /// Stanzas the server never acknowledged and the machine will not resend (after a failed
        /// resumption, or when the machine stops): resend them if they still matter.
        case unacknowledgedStanzas([XElement])
    }

    /// The states, by name.
    public enum StateName: String, Hashable, Sendable, CaseIterable {
        /// Not started, or stopped.
        case disconnected
        /// Looking up the server or opening the connection.
        case connectingTransport
        /// The stream header is out.
        case openingStream
        /// STARTTLS: the TLS handshake is under way.
        case securing
        /// SASL or SASL2.
        case authenticating
        /// XEP-0198 `<resume/>` is out.
        case resuming
        /// Binding a resource.
        case binding
        /// Connected: stanzas flow.
        case connected
        /// The stream's end is out; waiting for the server's.
        case closing
        /// Waiting before the next attempt (or for the network).
        case reconnectWaiting
        /// The reconnect policy gave up, or the app closed the stream for the background; `reconnectNow` starts again.
        case suspended
    }

    // MARK: - State

    enum Timer: Hashable, Sendable {
        case connectAttempt, reconnect, ping, ackRequest, iqTimeout, close, releaseBuffers, keepAlive
    }

    /// One connect attempt, from the connect action until the stream is connected.
    struct Attempt: Sendable {
        var generation: TransportGeneration
        var endpoint: Endpoint
        /// `see-other-host` redirects followed to get here.
        var redirects: Int
        /// Whether the attempt goes to the configured server (found through DNS, or the
        /// domain's default), not to a redirect's or a resumption's place.
        var toConfiguredServer = false
        /// The SRV lookup is out (nothing is connecting yet).
        var lookingUp = false
        /// Whether this target speaks TLS from the first byte.
        var directTLS = false
        /// The targets left to try after this one, from the lookup.
        var remainingTargets: [XMPPServiceTargets.Target] = []
        /// The WebSocket URL of this attempt (the configured one, or a `see-other-uri`).
        var webSocket: ServerURL?

        /// The target this attempt is on.
        var target: XMPPServiceTargets.Target {
            XMPPServiceTargets.Target(host: endpoint.host, port: endpoint.port, directTLS: directTLS)
        }
    }

    enum SASLExchange: Sendable {
        case plain
        case scram(SCRAMClient)
        /// A FAST token login: the server's answer must be this (HMAC of "Responder").
        case fast(expected: [UInt8])
    }

    /// Where the negotiation of a stream stands.
    enum NegotiationStep: Sendable {
        /// Our header is out; the server's header is awaited.
        case awaitingHeader
        /// The server's header arrived; its features are awaited.
        case awaitingFeatures
        /// `<starttls/>` is out.
        case awaitingProceed
        /// `startTLS` was asked of the driver.
        case awaitingTLS
        case authenticating(SASLExchange)
        /// A SASL2 login succeeded: the features follow at once, without a restart; then what
        /// the login brought (a resumed or bound session) is connected.
        case awaitingSASL2Features(SASL2Outcome)
        /// `<resume/>` is out.
        case resuming
        /// The bind request (id) is out.
        case binding(id: String)
        /// The legacy session request (id) is out; bound to `jid`.
        case startingSession(id: String, jid: JID)
    }

    /// What a SASL2 login asked for inside itself (XEP-0388's inline features).
    struct SASL2Request: Sendable {
        /// XEP-0198 `<resume/>` of the previous session.
        var resume = false
        /// XEP-0386 Bind 2.
        var bind = false
        /// XEP-0198 `<enable/>` inside the bind.
        var enable = false
        /// XEP-0280 carbons enabled inside the bind.
        var carbons = false
        /// The FAST token mechanism asked for (`<request-token>`), at a password login.
        var requestedTokenMechanism: String?
    }

    /// What a SASL2 `<success>` brought besides the login.
    struct SASL2Outcome: Sendable {
        /// The previous session resumed: the server's `h`.
        var resumedH: UInt32?
        /// Resumption refused (`<failed/>`): its condition, if it gave one.
        var resumeFailed: StanzaError.Condition??
        /// The full JID Bind 2 bound.
        var boundJID: JID?
        /// The answer to the inline `<enable/>` (`<enabled/>` or `<failed/>`).
        var streamManagementAnswer: XElement?
        /// What the server sent for the session before the features (prosody asks for an
        /// acknowledgement at once after resuming), handled once it is connected.
        var early: [XElement] = []

        /// The most elements kept before the features (a server that never sends them ends the
        /// attempt rather than filling memory).
        static let maximumEarly = 100
    }

    /// A stream being negotiated.
    struct Negotiation: Sendable {
        var attempt: Attempt
        var secured = false
        /// The channel-binding data of the stream's TLS (`.none` without TLS).
        var tls = TLSChannelBindings.none
        /// How this stream logged in, once it has.
        var authentication: XMPPAuthentication?
        /// The SASL2 login's inline requests (nil: RFC 6120 SASL).
        var sasl2: SASL2Request?

        /// Whether the previous session is being taken up again: `<resume/>` is out, on its own or
        /// inside a SASL2 login.
        var isResuming: Bool {
            switch step {
            case .resuming: true
            case .authenticating, .awaitingSASL2Features: sasl2?.resume == true
            default: false
            }
        }
        var authenticated = false
        /// The server has sent something on this transport (its stream header): the target
        /// works, and a loss from here on is not a reason to try the next one.
        var heardServer = false
        var step = NegotiationStep.awaitingHeader
        /// The latest features (the post-authentication ones decide bind, session and SM).
        var features: StreamFeatures?
    }

    /// A connected stream.
    struct Session: Sendable {
        var generation: TransportGeneration
        /// What the stream settled at login and keeps: one reference, so that copying the session
        /// (every `case .connected(let session)`, several per stanza) retains one object instead
        /// of each of its strings.
        let login: Login
        var autoPing: AutoPing?
        /// The server offers XEP-0352 client state indication.
        var clientStateIndication = false

        init(
            generation: TransportGeneration,
            endpoint: Endpoint,
            jid: JID,
            secured: Bool,
            authentication: XMPPAuthentication?,
            autoPing: AutoPing?,
            clientStateIndication: Bool
        ) {
            self.generation = generation
            login = Login(endpoint: endpoint, jid: jid, secured: secured, authentication: authentication)
            self.autoPing = autoPing
            self.clientStateIndication = clientStateIndication
        }

        var endpoint: Endpoint { login.endpoint }
        var jid: JID { login.jid }
        var secured: Bool { login.secured }
        /// How the stream logged in.
        var authentication: XMPPAuthentication? { login.authentication }

        /// The session's fixed part.
        final class Login: Sendable {
            let endpoint: Endpoint
            let jid: JID
            let secured: Bool
            let authentication: XMPPAuthentication?

            init(endpoint: Endpoint, jid: JID, secured: Bool, authentication: XMPPAuthentication?) {
                self.endpoint = endpoint
                self.jid = jid
                self.secured = secured
                self.authentication = authentication
            }
        }
    }

    enum State: Sendable {
        case disconnected
        case connectingTransport(Attempt)
        case negotiating(Negotiation)
        case connected(Session)
        case closing(generation: TransportGeneration)
        /// `next` nil: the configured server.
        case reconnectWaiting(next: Endpoint?, redirects: Int)
        case suspended

        /// The generation whose bytes are XML to parse in this state: the stream's while it is
        /// negotiated (not while TLS is set up on it), online or closing; nil otherwise.
        var xmlGeneration: TransportGeneration? {
            switch self {
            case .negotiating(let negotiation):
                if case .awaitingTLS = negotiation.step { return nil }
                return negotiation.attempt.generation
            case .connected(let session):
                return session.generation
            case .closing(let closing):
                return closing
            case .disconnected, .connectingTransport, .reconnectWaiting, .suspended:
                return nil
            }
        }
    }

    /// An iq request awaiting its answer.
    struct PendingIQ: Sendable {
        enum Purpose: Sendable, Equatable {
            case app
            case rosterFetch
            /// A page of the archive catch-up.
            case archive
            /// Enabling (or, with `enable` false, disabling) push. Boxed (`indirect`): a rare case,
            /// and so every other case is a word whose copies need no run-time value witness.
            indirect case push(XMPPPushRegistration, enable: Bool)
            /// Enabling carbons.
            case carbons
        }

        var deadline: Instant
        /// The addressee (nil: the user's own server).
        var to: JID?
        var purpose: Purpose
    }

    /// The configuration.
    public let configuration: Configuration
    let hashProvider: any SCRAMHashProvider
    let makeNonce: @Sendable () -> String
    var state: State = .disconnected {
        didSet { xmlGeneration = state.xmlGeneration }
    }
    /// The generation whose transport's bytes are parsed now (`State.xmlGeneration`), kept as the
    /// state changes: every input asks it, and reading it from the state copied the session.
    private(set) var xmlGeneration: TransportGeneration?
    /// The online stream's generation (nil unless connected), for every send: online, the parsed
    /// generation is the session's (the case is tested without binding, so nothing is copied).
    var onlineGeneration: TransportGeneration? {
        if case .connected = state { xmlGeneration } else { nil }
    }
    var parser: XMLStreamParser
    var timers = TimerTable<Timer>()
    var actions = ActionQueue<Action>()
    var random: SeededRandomNumberGenerator
    var lastGeneration = TransportGeneration(0)
    var schedule: ReconnectSchedule?
    /// XEP-0198 state: set when `<enable/>` is sent, kept across a lost connection while the
    /// session can be resumed.
    var streamManagement: StreamManagement?
    /// Stanzas the app sent while no stream was connected, sent once one is.
    var outbox = FIFOQueue<XElement>()
    var pendingIQs: [String: PendingIQ] = [:]
    /// The JID of the last session (kept for resumption).
    var boundJID: JID?
    /// The FAST token in use: the configuration's, then each one the server gives; nil once
    /// refused.
    var fastToken: XMPPFASTToken?
    /// Targets that failed before a stream was established on them (refused, reset, closed
    /// before the server's header, a TLS handshake failure), oldest first: later lookups try them
    /// after the others. A target leaves the list when a server answers on it.
    var failingTargets: [XMPPServiceTargets.Target] = []
    /// The targets of the latest lookup in the order they are tried (failing ones last).
    public internal(set) var targetOrder: [XMPPServiceTargets.Target] = []
    /// The limits the server announced in its latest features (XEP-0478).
    var serverLimits: StreamLimits?
    /// The archive position (XEP-0313) of the last archived message delivered.
    var archivePosition: XMPPArchivePosition?
    /// The archive catch-up of the session, while it runs.
    var catchUp: ArchiveCatchUp?
    /// The archive ids the session's catch-up delivered: a later copy (the offline store's) is
    /// not delivered again.
    var caughtUpIDs: Set<String> = []
    /// The push registration, enabled at every new session.
    var push: XMPPPushRegistration?
    /// When bytes last arrived on a stream: the auto-ping's measure of life. (Kept here, not in
    /// the session's `AutoPing`: updating it on every read would copy the session out of the
    /// state and back.)
    var lastReceived = Instant.zero
    /// `health.bytesSent` at the last keep-alive check: nothing sent since means silence.
    var bytesSentAtKeepAliveCheck = 0
    /// The SASL2 user-agent id: the state's, or one made on the first SASL2 login.
    var userAgentID: String?
    /// The device's network and the app's state, as last reported.
    var device = DeviceState()
    /// What `health(now:)` reports.
    var health = HealthCounters()
    /// Bare JIDs of the roster, kept only for `autoAcceptSubscriptionsFromContacts`.
    var rosterContacts: Set<JID> = []
    /// The prefix of this machine's stanza ids (random per machine, so that ids of successive
    /// machines do not collide).
    let idPrefix: String
    var nextID = 0

    /// A machine for `configuration`. `hashProvider` supplies SCRAM's cryptography;
    /// `randomSeed` seeds reconnect jitter and ids (pass a random one in production, a fixed one
    /// in tests); `makeNonce` returns a fresh SCRAM nonce (default: 24 characters from the
    /// system's secure generator).
    public init(
        configuration: Configuration,
        hashProvider: any SCRAMHashProvider,
        randomSeed: UInt64,
        makeNonce: @escaping @Sendable () -> String = XMPPClientMachine.secureNonce
    ) {
        self.configuration = configuration
        self.hashProvider = hashProvider
        self.makeNonce = makeNonce
        fastToken = configuration.state.fastToken
        userAgentID = configuration.state.userAgentID
        archivePosition = configuration.state.archivePosition
        push = configuration.push
        parser = XMLStreamParser(configuration: configuration.parserLimits)
        var random = SeededRandomNumberGenerator(seed: randomSeed)
        idPrefix = String(random.next() & 0xFFFFF, radix: 36)
        self.random = random
        schedule = configuration.reconnectPolicy.map(ReconnectSchedule.init(policy:))
    }

    /// 24 random base64 characters (18 bytes) from the system's secure generator.
    public static func secureNonce() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<18).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Base64.encode(bytes)
    }

    // MARK: - Driver interface

    /// The next action to carry out, or nil.
    public mutating func pollAction() -> Action? {
        actions.next()
    }

    // Actions and events are taken (`consuming`) down to the queue: moved into it, not copied
    // (and the caller's copy destroyed) at each step.
    mutating func enqueue(_ action: consuming Action) {
        if case .send(let bytes, _, _) = action { health.bytesSent += bytes.count }
        actions.append(action)
    }

    mutating func emit(_ event: consuming Event) {
        actions.append(.event(event))
    }

    mutating func emit(_ change: Lifecycle) {
        actions.append(.event(.lifecycle(change)))
    }

    /// The earliest armed timer.
    public func pollTimeout() -> Instant? { timers.earliest }

    /// The current state's name.
    public var stateName: StateName {
        switch state {
        case .disconnected: .disconnected
        case .connectingTransport: .connectingTransport
        case .negotiating(let negotiation):
            switch negotiation.step {
            case .awaitingHeader, .awaitingFeatures: .openingStream
            case .awaitingProceed, .awaitingTLS: .securing
            case .authenticating, .awaitingSASL2Features: .authenticating
            case .resuming: .resuming
            case .binding, .startingSession: .binding
            }
        case .connected: .connected
        case .closing: .closing
        case .reconnectWaiting: .reconnectWaiting
        case .suspended: .suspended
        }
    }

    /// The full JID of the connected session.
    public var jid: JID? {
        if case .connected(let session) = state { return session.jid }
        return nil
    }

    /// How the connected stream logged in: the SASL mechanism and its channel binding.
    public var authentication: XMPPAuthentication? {
        if case .connected(let session) = state { return session.authentication }
        return nil
    }

    /// The session: its full JID while connected, and while `<resume/>` takes it up again.
    public var session: JID? {
        switch state {
        case .connected(let session): session.jid
        case .negotiating(let negotiation):
            negotiation.isResuming ? boundJID : nil
        case .disconnected, .connectingTransport, .closing, .reconnectWaiting, .suspended: nil
        }
    }

    /// The transport generation in use, if any.
    public var currentGeneration: TransportGeneration? {
        switch state {
        case .connectingTransport(let attempt): attempt.generation
        case .negotiating(let negotiation): negotiation.attempt.generation
        case .connected(let session): session.generation
        case .closing(let generation): generation
        case .disconnected, .reconnectWaiting, .suspended: nil
        }
    }

    /// Stanzas sent but not acknowledged (XEP-0198) plus stanzas waiting for a stream.
    public var unacknowledgedCount: Int {
        (streamManagement?.unacknowledged.count ?? 0) + outbox.count
    }

    /// The connection's health at `now` (see `ConnectionHealth`).
    public func health(now: Instant) -> ConnectionHealth {
        var transport: String?
        if case .connected(let session) = state {
            transport =
                overWebSocket ? (session.secured ? "websocket-tls" : "websocket") : (session.secured ? "tls" : "tcp")
        }
        var snapshot = health.snapshot(
            now: now,
            phase: phase,
            state: stateName.rawValue,
            awaitingAcknowledgement: unacknowledgedCount,
            transport: transport
        )
        switch state {
        case .connectingTransport(let attempt) where !attempt.lookingUp:
            snapshot.server = attempt.webSocket?.redacted ?? attempt.endpoint.description
        case .negotiating(let negotiation):
            snapshot.server = negotiation.attempt.webSocket?.redacted ?? negotiation.attempt.endpoint.description
        case .connected(let session):
            snapshot.server = configuration.webSocket?.redacted ?? session.endpoint.description
        default:
            break
        }
        snapshot.failingServers = failingTargets.map { Endpoint(host: $0.host, port: $0.port).description }
        return snapshot
    }

    /// What the app keeps between launches, as it stands (`stateChanged` reports each change).
    public var clientState: XMPPClientState {
        XMPPClientState(fastToken: fastToken, userAgentID: userAgentID, archivePosition: archivePosition)
    }

    /// Reports the state the app keeps.
    mutating func clientStateChanged() {
        emit(.stateChanged(clientState))
    }

    /// Whether XEP-0198 is enabled on the current (or resumable) session.
    public var isStreamManagementEnabled: Bool { streamManagement?.isEnabled ?? false }

    /// A fresh stanza id.
    mutating func makeID(_ kind: String) -> String {
        nextID += 1
        // `kind`, the prefix, "-" and the number, written into one string at once (an id per
        // stanza sent: usually short enough to be stored inline, with no allocation), rather than
        // appended piece by piece (each append a call that retains and releases the pieces).
        let number = nextID
        var digitCount = 1
        var rest = number / 10
        while rest > 0 {
            digitCount += 1
            rest /= 10
        }
        let length = kind.utf8.count + idPrefix.utf8.count + 1 + digitCount
        return unsafe String(unsafeUninitializedCapacity: length) { buffer in
            var index = 0
            for byte in kind.utf8 {
                unsafe buffer[index] = byte
                index += 1
            }
            for byte in idPrefix.utf8 {
                unsafe buffer[index] = byte
                index += 1
            }
            unsafe buffer[index] = UInt8(ascii: "-")
            var value = number
            for position in stride(from: length - 1, through: index + 1, by: -1) {
                unsafe buffer[position] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
            return length
        }
    }
}

extension XMPPClientMachine.Request: CustomStringConvertible {
    /// A short, readable rendering.
    public var description: String {
        switch self {
        case .startTLS(let serverName, let generation, let bufferedBytes):
            "startTLS(\(serverName), \(generation), \(bufferedBytes.count) bytes buffered)"
        case .lookUpService(let domain, let generation): "lookUpService(\(domain), \(generation))"
        }
    }
}

extension XMPPClientMachine: ConnectionMachine {
    /// The current state's phase: `resuming` while XEP-0198's `<resume/>` is out (the session's
    /// stanzas wait for it), `connecting` for every other step of an attempt.
    public var phase: ConnectionPhase {
        switch state {
        case .disconnected: .disconnected
        case .connectingTransport: .connecting
        case .negotiating(let negotiation):
            negotiation.isResuming ? .resuming : .connecting
        case .connected: .connected
        case .closing: .closing
        case .reconnectWaiting: .reconnectWaiting
        case .suspended: .suspended
        }
    }
}

extension XMPPClientMachine.Event: ConnectionEvent {
    /// The lifecycle change this event is, if it is one.
    public var lifecycle: XMPPClientMachine.Lifecycle? {
        if case .lifecycle(let change) = self { return change }
        return nil
    }
}

extension XMPPClientMachine {
    /// A random UUID (version 4, RFC 9562) from the machine's generator, for a user agent the app
    /// gave no id.
    mutating func makeUserAgentID() -> String {
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
        return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]].map { $0.joined() }.joined(
            separator: "-"
        )
    }
}
