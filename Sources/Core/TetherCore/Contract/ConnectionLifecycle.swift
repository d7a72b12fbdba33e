/// The one lifecycle every Tether connection reports, with the same cases and the same meanings
/// for every protocol: what an app shows ("online", "reconnecting in 9 s", "offline, tap to
/// retry") and what it must redo (join rooms and groups after `connected`, nothing after
/// `resumed`). Each machine's events carry it (`ConnectionEvent.lifecycle`); `Session` is what
/// identifies a session of the protocol (XMPP: the full JID; SignalR: the connection id and
/// transport), `Failure` the protocol's error.
///
/// The order is fixed (`Specs/machine-contract.md`, "One lifecycle"):
/// - a first connect: `connected`, or `attemptFailed` followed by what the reconnect policy decides;
/// - a connection lost by accident: `connectionLost`, then `resumed` (the session survived) or
///   `reconnecting`/`waitingForNetwork` and, after each failed attempt, `attemptFailed` and the next
///   `reconnecting`, until `connected`/`resumed` or `suspended`;
/// - a fatal error, or `stop`: `closed` (after `connectionLost` or `attemptFailed` for an error).
///
/// The verbs that start and end a connection keep each ecosystem's names (XMPP's `connect()` and
/// `disconnect()`, SignalR's `start()` and `stop()`); the lifecycle is the same on both.
public enum ConnectionLifecycle<Session: Sendable & Hashable, Failure: ConnectionError>: Sendable, Hashable {
    /// A new session is up, the first one or one that replaces a lost session that could not be
    /// resumed: redo what depends on the session here (join rooms or groups, send presence).
    case connected(Session)
    /// The session continues after its transport was lost (XEP-0198 resumption, SignalR stateful
    /// reconnect): nothing was lost, nothing needs redoing.
    case resumed(Session)
    /// A connection that was up was lost by accident (the link dropped, the server went away or
    /// stopped answering). What follows is `resumed`, `reconnecting`, `waitingForNetwork`,
    /// `suspended` or `closed`.
    case connectionLost(Failure)
    /// An attempt to connect failed before it was up; what the reconnect policy decides follows.
    case attemptFailed(Failure)
    /// Attempt number `attempt` (counting from 1 since the connection was lost, or since the first
    /// attempt failed) starts after `delay`; `lastError` is why the previous one ended.
    case reconnecting(attempt: Int, delay: Duration, lastError: Failure?)
    /// The connection is down and the device has no network: nothing is tried, or counted, until
    /// `networkChanged` reports a path.
    case waitingForNetwork
    /// Nothing is tried until the app acts (`reconnectNow()`, `connect()`/`start()`, or the app's
    /// return to the foreground); `reason` says why.
    case suspended(SuspensionReason<Failure>)
    /// Stopped for good: nil after the app's `disconnect()`/`stop()`, otherwise the fatal error
    /// (wrong credentials, a refused certificate, …).
    case closed(Failure?)
}

/// Why a connection is suspended.
public enum SuspensionReason<Failure: ConnectionError>: Sendable, Hashable {
    /// The reconnect policy gave up; `lastError` is why the last attempt (or the connection)
    /// ended.
    case gaveUp(lastError: Failure)
    /// The app went to the background and the connection closed for it (SignalR's
    /// `closeUntilActive`); it connects again when the app returns to the foreground.
    case background
}

/// A machine's event type: the lifecycle plus the protocol's own events. The generic runner reads
/// the lifecycle (to end `connect()`/`start()` and `disconnect()`/`stop()`, and to log every
/// change in one format) and hands the rest to the protocol's client.
public protocol ConnectionEvent: Sendable, Equatable {
    /// What identifies a session (XMPP: the full JID; SignalR: connection id and transport).
    associatedtype Session: Sendable, Hashable, CustomStringConvertible
    /// The protocol's error.
    associatedtype Failure: ConnectionError
    /// The event for a lifecycle change.
    static func lifecycle(_ change: ConnectionLifecycle<Session, Failure>) -> Self
    /// The lifecycle change this event is, if it is one.
    var lifecycle: ConnectionLifecycle<Session, Failure>? { get }
}

extension ConnectionLifecycle: CustomStringConvertible {
    /// One line in the same words for every protocol (the runners log it).
    public var description: String {
        switch self {
        case .connected(let session): "connected: \(session)"
        case .resumed(let session): "resumed: \(session)"
        case .connectionLost(let error): "connection lost: \(error)"
        case .attemptFailed(let error): "attempt failed: \(error)"
        case .reconnecting(let attempt, let delay, let lastError):
            "reconnecting: attempt \(attempt) in \(delay)\(lastError.map { " (after \($0))" } ?? "")"
        case .waitingForNetwork: "waiting for the network"
        case .suspended(.gaveUp(let error)): "suspended: the reconnect policy gave up (\(error))"
        case .suspended(.background): "suspended: closed for the background"
        case .closed(nil): "closed"
        case .closed(let error?): "closed: \(error)"
        }
    }
}
