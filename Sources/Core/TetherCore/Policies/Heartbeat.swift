/// Liveness for a long-lived connection, as deadlines rather than threads: when to send a
/// keep-alive, when the peer counts as dead, and how many probes may go unanswered.
///
/// The three building blocks both protocols use:
/// - **keep-alive**: send something after `keepAliveInterval` of silence on the send side
///   (SignalR pings after 15 s, XMPP whitespace or XEP-0199 pings);
/// - **receive timeout**: the peer is dead after `receiveTimeout` without receiving anything
///   (SignalR's 30 s server timeout);
/// - **probes**: a probe (an XEP-0199 ping) must be answered within `probeTimeout`; after
///   `maximumUnansweredProbes` consecutive unanswered probes the peer is dead.
///
/// Feed it what happens (`didSend`, `didReceive`, `probeSent`) and ask `nextDeadline` for the timer
/// to arm; at the deadline, `check(now:)` says what is due.
public struct Heartbeat: Sendable {
    /// The intervals; nil switches a block off.
    public struct Configuration: Sendable, Equatable {
        /// Send a keep-alive after this long without sending.
        public var keepAliveInterval: Duration?
        /// The peer is dead after this long without receiving.
        public var receiveTimeout: Duration?
        /// A probe must be answered within this long.
        public var probeTimeout: Duration?
        /// Give up after this many consecutive unanswered probes (at least 1).
        public var maximumUnansweredProbes: Int

        /// Creates a configuration.
        public init(
            keepAliveInterval: Duration? = nil,
            receiveTimeout: Duration? = nil,
            probeTimeout: Duration? = nil,
            maximumUnansweredProbes: Int = 1
        ) {
            precondition(maximumUnansweredProbes >= 1, "maximumUnansweredProbes must be at least 1")
            self.keepAliveInterval = keepAliveInterval
            self.receiveTimeout = receiveTimeout
            self.probeTimeout = probeTimeout
            self.maximumUnansweredProbes = maximumUnansweredProbes
        }
    }

    /// What is due at a deadline.
    public enum Due: Sendable, Equatable {
        /// Nothing was sent for the keep-alive interval: send a keep-alive (or probe).
        case keepAlive
        /// Nothing was received for the receive timeout: the peer is dead.
        case receiveTimedOut
        /// The outstanding probe was not answered in time (`count` consecutive so far); send the
        /// next one.
        case probeUnanswered(count: Int)
        /// `maximumUnansweredProbes` probes in a row went unanswered: the peer is dead.
        case probesExhausted
        /// Nothing arrived within the window `expectSomething(at:within:)` opened.
        case awaitedNothingReceived
    }

    /// The intervals.
    public var configuration: Configuration
    private var lastSent: Instant
    /// When something was last received.
    public private(set) var lastReceived: Instant
    private var probeSentAt: Instant?
    /// Consecutive probes that went unanswered.
    public private(set) var unansweredProbes = 0
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

    /// A probe was sent at `now`.
    public mutating func probeSent(at now: Instant) {
        probeSentAt = now
        lastSent = now
    }

    /// The outstanding probe was answered (a result or an error both prove liveness).
    public mutating func probeAnswered(at now: Instant) {
        probeSentAt = nil
        unansweredProbes = 0
        lastReceived = now
    }

    /// Whether a probe is outstanding.
    public var isProbeOutstanding: Bool { probeSentAt != nil }

    /// The earliest moment something can be due.
    public var nextDeadline: Instant? {
        var earliest: Instant?
        func consider(_ deadline: Instant) {
            if earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
        }
        if let interval = configuration.keepAliveInterval, probeSentAt == nil { consider(lastSent + interval) }
        if let timeout = configuration.receiveTimeout { consider(lastReceived + timeout) }
        if let timeout = configuration.probeTimeout, let sent = probeSentAt { consider(sent + timeout) }
        if let awaited { consider(awaited.until) }
        return earliest
    }

    /// What is due at `now` (most severe first); nil if nothing is. A due keep-alive is reported
    /// once: the caller sends something and calls `didSend` or `probeSent`.
    public mutating func check(now: Instant) -> Due? {
        if let timeout = configuration.receiveTimeout, now - lastReceived >= timeout { return .receiveTimedOut }
        if let window = awaited, now >= window.until {
            awaited = nil
            if lastReceived <= window.since { return .awaitedNothingReceived }
        }
        if let timeout = configuration.probeTimeout, let sent = probeSentAt, now - sent >= timeout {
            unansweredProbes += 1
            probeSentAt = nil
            if unansweredProbes >= configuration.maximumUnansweredProbes { return .probesExhausted }
            return .probeUnanswered(count: unansweredProbes)
        }
        if let interval = configuration.keepAliveInterval, probeSentAt == nil, now - lastSent >= interval {
            return .keepAlive
        }
        return nil
    }
}
