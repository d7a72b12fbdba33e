public import Dispatch
public import TetherCore

/// What every Tether client offers beside its protocol's own calls (`XMPPClient`,
/// `HubConnection`): the same names, doing the same things, on every protocol.
///
/// The calls that start and end a connection keep each ecosystem's names: XMPP's `connect()` and
/// `disconnect()`, SignalR's `start()` and `stop()` (`Specs/machine-contract.md`, "One
/// lifecycle"). Everything here reads the same on both.
public protocol ConnectionClient: AnyObject, Sendable {
    /// What the app is told: a `lifecycle` case (`ConnectionLifecycle`) and the protocol's own.
    associatedtype Event: Sendable
    /// The machine's states, by name.
    associatedtype StateName: Sendable

    /// The runner behind the client (Tether's own modules only).
    @_spi(TetherInternal) var runner: any ConnectionRunning<Event, StateName> { get }
}

extension ConnectionClient {
    /// Connect again now: the hook for "the user tapped retry", "the app came to the foreground"
    /// and "the network is back". Suspended or waiting for the next delay: a new attempt at once,
    /// the back-off reset; an attempt under way is abandoned for a fresh one (it may hang on a dead
    /// network); connected: XMPP checks the link with a ping, SignalR does nothing.
    public func reconnectNow() {
        runner.reconnectNowSoon()
    }

    /// The device's network changed: feed it what `NWPathMonitor` (Apple platforms) or
    /// `NetworkMonitor` (Linux) reports. No attempts while there is no network, a reconnect at
    /// once when it is back, a probe of the link (or, with SignalR's stateful reconnect, a reopen
    /// on the new network) when it changes (`NetworkPolicy`).
    public func networkChanged(_ path: NetworkPath) {
        runner.networkChangedSoon(path)
    }

    /// The app moved between foreground and background (its scene phase). Back in the foreground
    /// a lost connection reconnects at once; in the background XMPP tells the server (client
    /// state indication) and pings less often, SignalR follows its `backgroundPolicy`.
    public func applicationStateChanged(_ application: ApplicationState) {
        runner.applicationStateChangedSoon(application)
    }

    /// The client's queue as a task executor, for the least latency per call: the code of
    /// `withTaskExecutorPreference(client.executor) { … }` runs on the client's queue, and each
    /// answer resumes it at once on the thread that read it, not on another thread of the pool.
    /// While that code runs, the client's input waits: keep it short between calls
    /// (`ConnectionExecutor`).
    public var executor: ConnectionExecutor { runner.executor }

    /// The connection's health now (`ConnectionHealth`: state, time online, round trips, how long
    /// the last dead link took to notice, reconnects and their reasons, resumes, traffic, what
    /// awaits acknowledgement, the transport and its TLS version, what the network has not taken).
    nonisolated(nonsending) public func health() async -> ConnectionHealth {
        await runner.health()
    }

    /// The health now and then every `interval`, for a dashboard (ends when the client is gone).
    public func healthUpdates(every interval: Duration) -> AsyncStream<ConnectionHealth> {
        runner.healthUpdates(every: interval)
    }

    /// The machine's state now.
    nonisolated(nonsending) public func state() async -> StateName {
        await runner.stateName()
    }

    /// Calls `handler` on `queue` (default `ConnectionOptions.callbackQueue`) with every event from
    /// now on, replacing an earlier handler. An event reaches it before the awaiting call it ends
    /// (`connect()`, `start()`, `disconnect()`, `stop()`) returns.
    public func setEventHandler(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (Event) -> Void) {
        runner.setEventHandler(queue: queue, handler)
    }

    /// A stream of every event from now on (several streams may be open at once; each ends when
    /// the client is released). Events are buffered until read.
    public func events() -> AsyncStream<Event> {
        runner.events()
    }
}

/// The runner as a client reaches it (`ConnectionClient`'s calls), whatever the machine.
@_spi(TetherInternal) public protocol ConnectionRunning<Event, StateName>: AnyObject, Sendable {
    associatedtype Event: Sendable
    associatedtype StateName: Sendable
    /// The queue as a task executor.
    var executor: ConnectionExecutor { get }
    /// `reconnectNow()` on the queue.
    func reconnectNowSoon()
    /// `networkChanged(_:)` on the queue.
    func networkChangedSoon(_ path: NetworkPath)
    /// `applicationStateChanged(_:)` on the queue.
    func applicationStateChangedSoon(_ application: ApplicationState)
    /// The health now.
    nonisolated(nonsending) func health() async -> ConnectionHealth
    /// The health now and then every `interval`.
    func healthUpdates(every interval: Duration) -> AsyncStream<ConnectionHealth>
    /// The state now.
    nonisolated(nonsending) func stateName() async -> StateName
    /// The app's event handler.
    func setEventHandler(queue: DispatchQueue?, _ handler: @escaping @Sendable (Event) -> Void)
    /// A stream of events.
    func events() -> AsyncStream<Event>
}
