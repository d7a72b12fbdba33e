/// Liveness for a long-lived connection, as deadlines rather than threads: when to send a
/// keep-alive and when the peer counts as dead.
///
/// Its building blocks, as the SignalR hub protocol defines them:
/// - **keep-alive**: send something after `keepAliveInterval` of silence on the send side
///   (SignalR pings after 15 s);
/// - **receive timeout**: the peer is dead after `receiveTimeout` without receiving anything
///   (SignalR's 30 s server timeout);
/// - **an awaited answer**: after the network changed under the link, something must arrive
///   within a window (`expectSomething(at:within:)`) or the link counts as dead.
///
/// The hub machine uses it. XMPP's liveness follows other rules (XEP-0199 practice pings after
/// *receive* silence and counts misses in a row), so the XMPP machine keeps its own `AutoPing`
/// rather than bending this one.
///
/// Feed it what happens (`didSend`, `didReceive`) and ask `nextDeadline` for the timer to arm; at
/// the deadline, `check(now:)` says what is due.
public struct Heartbeat: Sendable {
    /// The intervals; nil switches a block off.
    public struct Configuration: Sendable, Equatable {
        /// Send a keep-alive after this long without sending.
        public var keepAliveInterval: Duration?
        /// The peer is dead after this long without receiving.
        public var receiveTimeout: Duration?

        /// Creates a configuration.
        public init(keepAliveInterval: Duration? = nil, receiveTimeout: Duration? = nil) {
            self.keepAliveInterval = keepAliveInterval
            self.receiveTimeout = receiveTimeout
        }
    }

    /// What is due at a deadline.
    public enum Due: Sendable, Equatable {
        /// Nothing was sent for the keep-alive interval: send a keep-alive.
        case keepAlive
        /// Nothing was received for the receive timeout: the peer is dead.
        case receiveTimedOut
        /// Nothing arrived within the window `expectSomething(at:within:)` opened.
        case awaitedNothingReceived
    }

    /// The intervals.
    public var configuration: Configuration
    private var lastSent: Instant
    /// When something was last received.
    public private(set) var lastReceived: Instant
    /// Something must arrive after `since` and before `until` (a check after the network changed).
    private var awaited: (since: Instant, until: Instant)?

    /// Starts watching a connection established at `now`.
    public init(configuration: Configuration, now: Instant) {
        self.configuration = configuration
        lastSent = now
        lastReceived = now
    }

    /// Something was sent at `now`.
    public mutating func didSend(at now: Instant) {
        lastSent = now
    }

    /// Something was received at `now` (any data proves the peer alive).
    public mutating func didReceive(at now: Instant) {
        lastReceived = now
        awaited = nil
    }

    /// Something must arrive within `timeout` from `now` (the caller sent something that makes
    /// the peer answer, or the network changed under the link), or the peer counts as dead.
    public mutating func expectSomething(at now: Instant, within timeout: Duration) {
        awaited = (now, now + timeout)
    }

    /// The earliest moment something can be due.
    public var nextDeadline: Instant? {
        // No collection: the hub machine asks after every message it sends or receives.
        func earlier(_ a: Instant?, _ b: Instant?) -> Instant? {
            guard let a, let b else { return a ?? b }
            return Swift.min(a, b)
        }
        return earlier(
            earlier(
                configuration.keepAliveInterval.map { lastSent + $0 },
                configuration.receiveTimeout.map { lastReceived + $0 }
            ),
            awaited?.until
        )
    }

    /// What is due at `now` (most severe first); nil if nothing is. A due keep-alive is reported
    /// once: the caller sends something and calls `didSend`.
    public mutating func check(now: Instant) -> Due? {
        if let timeout = configuration.receiveTimeout, now - lastReceived >= timeout { return .receiveTimedOut }
        if let window = awaited, now >= window.until {
            awaited = nil
            if lastReceived <= window.since { return .awaitedNothingReceived }
        }
        if let interval = configuration.keepAliveInterval, now - lastSent >= interval { return .keepAlive }
        return nil
    }
}
