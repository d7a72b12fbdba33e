/// What every Tether connection machine shares (`XMPPClientMachine`, `HubConnectionMachine`): the
/// machine contract as code, so that one runner can drive any of them and every one of them reads
/// alike (`Specs/machine-contract.md`).
///
/// A machine is a pure value: it never opens a socket, reads a clock or starts a thread. App
/// commands and transport inputs (each naming the `TransportGeneration` it belongs to) only queue
/// actions; the driver drains them with `pollAction()` after every call and arms one timer at
/// `pollTimeout()`, calling `handleTimeout(now:)` when it fires. Input from a generation the
/// machine no longer uses is ignored, so a late callback from an abandoned attempt never touches
/// the new one.
///
/// The same words mean the same things on every machine: `start`, `stop`, `reconnectNow`;
/// `transportConnected`, `transportReceived`, `transportClosed`; the actions (`ConnectionAction`)
/// `openTransport`, `send`, `closeTransport`, `event` and the protocol's own `request`s; one
/// lifecycle (`ConnectionLifecycle`); one error shape (`ConnectionError`); the states
/// `disconnected`, `connectingTransport`, `connected`, `reconnectWaiting`, `resuming`,
/// `suspended` (see `ConnectionPhase`).
public protocol ConnectionMachine: ~Copyable {
    /// The protocol's own requests of its driver (beyond opening, sending on and closing
    /// transports), answered by the machine's own inputs.
    associatedtype Request: Sendable, Equatable
    /// What the app is told: the lifecycle and the protocol's events.
    associatedtype Event: ConnectionEvent
    /// The machine's states, by name.
    associatedtype StateName: Hashable, Sendable, CaseIterable, RawRepresentable where StateName.RawValue == String

    /// Starts connecting. Precondition: the machine is disconnected.
    mutating func start(now: Instant)
    /// Stops on purpose: closes what is open, ends what is pending, reports that it closed. No
    /// reconnect follows. A no-op when disconnected.
    mutating func stop(now: Instant)
    /// Connects again now (the user asked, the app came to the foreground, the network is back):
    /// from `suspended` or `reconnectWaiting` at once with the back-off reset; an attempt under way
    /// is abandoned for a fresh one. What it does while connected is the machine's (a probe, or
    /// nothing); disconnected, it does nothing.
    mutating func reconnectNow(now: Instant)
    /// The device's network changed (a path or none; other interfaces). No attempts while there
    /// is none; at once when it is back; a live link is probed (`NetworkPolicy`).
    mutating func networkChanged(_ path: NetworkPath, now: Instant)
    /// The app moved between foreground and background; what each machine does is its own
    /// (XMPP: client state indication and slower pings; SignalR: its background policy); both
    /// reconnect at once on returning when the connection was lost.
    mutating func applicationStateChanged(_ application: ApplicationState, now: Instant)
    /// The connection's health at `now`: state, time online, round trips, losses and resumes,
    /// traffic, what awaits acknowledgement, the transport.
    func health(now: Instant) -> ConnectionHealth

    /// The transport of `generation` is open (it carries messages now); `tls`: the channel-binding
    /// data of TLS from its first byte (`.none` without TLS, or when the transport does not tell).
    mutating func transportConnected(generation: TransportGeneration, tls: TLSChannelBindings, now: Instant)
    /// Input arrived on the transport of `generation`: bytes of a stream, or one whole message.
    mutating func transportReceived(_ bytes: Span<UInt8>, generation: TransportGeneration, now: Instant)
    /// `transportReceived(_:generation:now:)` with the received array itself, which a machine may
    /// keep instead of copying its bytes (the SignalR machine's parser does). The default passes
    /// its span on.
    mutating func transportReceived(_ bytes: [UInt8], generation: TransportGeneration, now: Instant)
    /// The transport of `generation` closed, or could not be opened (`error` nil: an orderly end).
    mutating func transportClosed(generation: TransportGeneration, error: TransportError?, now: Instant)
    /// TLS that the machine asked to insert into the transport of `generation` (XMPP's STARTTLS)
    /// is established, with its channel-binding data. Machines that never ask ignore it.
    mutating func tlsEstablished(generation: TransportGeneration, tls: TLSChannelBindings, now: Instant)
    /// Runs the timers due at `now`; extra calls are harmless.
    mutating func handleTimeout(now: Instant)

    /// The next action to carry out, or nil.
    mutating func pollAction() -> ConnectionAction<Request, Event>?
    /// The earliest armed timer, nil if none.
    func pollTimeout() -> Instant?
    /// The generation whose input the machine accepts now, if any.
    var currentGeneration: TransportGeneration? { get }
    /// The session while connected or resuming it (nil otherwise): what `connected` and `resumed`
    /// report.
    var session: Event.Session? { get }

    /// The current state's name.
    var stateName: StateName { get }
    /// The current state's phase (the part every machine shares).
    var phase: ConnectionPhase { get }
}

/// Where a connection stands, in the terms every machine shares: what an app shows and what a
/// runner needs to know. Each machine's `StateName` refines it.
public enum ConnectionPhase: String, Hashable, Sendable, CaseIterable {
    /// Not started, stopped, or stopped by a fatal error.
    case disconnected
    /// An attempt to connect is under way (a first connect or a reconnect).
    case connecting
    /// Connected: messages flow.
    case connected
    /// The same session is being taken up again after its transport was lost (XEP-0198 resumption,
    /// SignalR stateful reconnect): messages sent meanwhile wait for it.
    case resuming
    /// The connection was lost; the reconnect policy's delay runs.
    case reconnectWaiting
    /// The reconnect policy gave up; `reconnectNow` starts again.
    case suspended
    /// Closing on purpose: the closing handshake is under way.
    case closing
}

extension ConnectionMachine where Self: ~Copyable {
    /// Input arrived on the transport of `generation` (its span passed on).
    public mutating func transportReceived(_ bytes: [UInt8], generation: TransportGeneration, now: Instant) {
        transportReceived(bytes.backDeployedSpan, generation: generation, now: now)
    }

    /// The transport of `generation` is open, with no channel-binding data told.
    public mutating func transportConnected(generation: TransportGeneration, now: Instant) {
        transportConnected(generation: generation, tls: .none, now: now)
    }

    /// The TLS asked for is established, with no channel-binding data told.
    public mutating func tlsEstablished(generation: TransportGeneration, now: Instant) {
        tlsEstablished(generation: generation, tls: .none, now: now)
    }
}
