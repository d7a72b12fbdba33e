/// When to try again after a connection was lost: a schedule of delays, and when to give up.
///
/// A policy is a plain value; the running state (attempt count, when reconnecting started) lives
/// in `ReconnectSchedule`, which machines keep. Randomness (jitter) comes from the generator the
/// caller passes, so tests are deterministic.
///
/// A fleet of clients that lose their server at the same moment (a restart, a deploy) must not
/// all come back at the same moment: `jitter` spreads each delay (`Jitter`). The named schedules
/// a client uses unless told otherwise are jittered (`.signalR`, `.tiered`, and RFC 6120's
/// `.exponentialBackoff`, random by nature); schedules of explicit numbers (`.fixed`, `.delays`,
/// `.signalRDefault`: the official clients' exact 0, 2, 10, 30 s) are exact unless `jittered(_:)`.
/// The decision and the numbers: `Specs/device.md`, "Spreading reconnects".
///
/// ```swift
/// .signalR                                          // 0–1 s, 1–3 s, 5–15 s, 15–45 s, then stop
/// .signalRDefault                                   // exactly 0, 2, 10, 30 s, then stop
/// .tiered([.init(attempts: 5, delay: .seconds(3)), .init(attempts: 5, delay: .seconds(9)),
///          .init(attempts: 5, delay: .seconds(15))], repeats: false)
/// .exponentialBackoff(slot: .seconds(60), maximumExponent: 5)   // RFC 6120 §3.3
/// ```
public struct ReconnectPolicy: Sendable {
    /// What a custom rule is told about the attempt to schedule.
    public struct Context: Sendable {
        /// How many attempts have been made since the connection was lost (0 for the first).
        public var attempt: Int
        /// How long ago the connection was lost.
        public var elapsed: Duration
        /// Why the connection was lost, as text (never containing secrets).
        public var reason: String?

        /// Creates a context.
        public init(attempt: Int, elapsed: Duration, reason: String?) {
            self.attempt = attempt
            self.elapsed = elapsed
            self.reason = reason
        }
    }

    /// One tier of a tiered schedule: `attempts` tries, `delay` apart.
    public struct Tier: Sendable, Equatable {
        /// How many attempts this tier makes.
        public var attempts: Int
        /// The delay before each of them.
        public var delay: Duration

        /// Creates a tier.
        public init(attempts: Int, delay: Duration) {
            precondition(attempts > 0, "a tier makes at least one attempt")
            self.attempts = attempts
            self.delay = delay
        }
    }

    /// How each delay of a schedule is spread, with randomness from the machine's seeded
    /// generator (a fleet spreads; a simulation stays reproducible).
    public enum Jitter: Sendable, Equatable {
        /// Every delay exactly as the schedule says.
        case none
        /// "Full jitter": a delay `d` becomes uniform in `0...d` (the widest spread; the mean
        /// halves); a zero delay uniform in `0...immediateWindow`.
        case full(immediateWindow: Duration = .seconds(1))
        /// A delay `d` becomes uniform in `d × (1 − fraction)...d × (1 + fraction)` (the mean
        /// stays `d`; `fraction` in 0...1); a zero delay (an immediate retry) uniform in
        /// `0...immediateWindow`, so that even the first retry after a loss is spread.
        case proportional(Double, immediateWindow: Duration = .seconds(1))

        /// The default of the jittered schedules: ±50 %, immediate retries within 1 s (a single
        /// client is back within a second of a short outage; a fleet spreads over the interval).
        public static let standard = Jitter.proportional(0.5)

        /// `delay` spread with `generator`.
        func apply(to delay: Duration, using generator: inout some RandomNumberGenerator) -> Duration {
            func uniform(_ low: Int64, _ high: Int64) -> Duration {
                .nanoseconds(high <= low ? low : Int64.random(in: low...high, using: &generator))
            }
            let nanoseconds = max(0, delay.totalNanoseconds)
            switch self {
            case .none:
                return delay
            case .full(let window):
                return nanoseconds == 0 ? uniform(0, window.totalNanoseconds) : uniform(0, nanoseconds)
            case .proportional(let fraction, let window):
                if nanoseconds == 0 { return uniform(0, window.totalNanoseconds) }
                let spread = Int64(Double(nanoseconds) * min(1, max(0, fraction)))
                return uniform(nanoseconds - spread, nanoseconds.addingReportingOverflow(spread).partialValue)
            }
        }
    }

    enum Rule: Sendable {
        case delays([Duration])
        case fixed(Duration)
        case tiered([Tier], repeats: Bool)
        case exponential(slot: Duration, maximumExponent: Int)
        case custom(@Sendable (Context) -> Duration?)
    }

    let rule: Rule
    /// Give up after this many attempts (nil: as the schedule says).
    public var maximumAttempts: Int?
    /// Give up once this much time has passed since the connection was lost (nil: never).
    public var maximumElapsed: Duration?
    /// How each delay is spread (not applied to `.exponentialBackoff`, random already, nor to
    /// `.custom`, whose rule decides).
    public var jitter: Jitter

    init(_ rule: Rule, maximumAttempts: Int? = nil, maximumElapsed: Duration? = nil, jitter: Jitter = .none) {
        self.rule = rule
        self.maximumAttempts = maximumAttempts
        self.maximumElapsed = maximumElapsed
        self.jitter = jitter
    }

    /// This schedule with `jitter`.
    public func jittered(_ jitter: Jitter = .standard) -> ReconnectPolicy {
        var policy = self
        policy.jitter = jitter
        return policy
    }

    /// The SignalR clients' default, exactly: immediately, then after 2, 10 and 30 seconds, then
    /// stop. Every client of a restarted hub retries at the same instants; `.signalR` spreads them.
    public static let signalRDefault = delays([.zero, .seconds(2), .seconds(10), .seconds(30)])

    /// The SignalR clients' schedule, spread (`Jitter.standard`): within 1 s, then about 2, 10
    /// and 30 s (±50 %), then stop. `HubConnectionBuilder.withAutomaticReconnect()`'s default.
    public static let signalR = signalRDefault.jittered(.standard)

    /// These delays in turn, then stop.
    public static func delays(_ delays: [Duration]) -> ReconnectPolicy {
        ReconnectPolicy(.delays(delays))
    }

    /// The same delay before every attempt, forever (or up to the limits).
    public static func fixed(
        _ delay: Duration,
        maximumAttempts: Int? = nil,
        maximumElapsed: Duration? = nil
    ) -> ReconnectPolicy {
        ReconnectPolicy(.fixed(delay), maximumAttempts: maximumAttempts, maximumElapsed: maximumElapsed)
    }

    /// The mobile schedule's tiers: 5 attempts 3 s apart, then 5 attempts 9 s apart, then 5
    /// attempts 15 s apart (about 2 minutes in all).
    public static let standardTiers = [
        Tier(attempts: 5, delay: .seconds(3)), Tier(attempts: 5, delay: .seconds(9)),
        Tier(attempts: 5, delay: .seconds(15)),
    ]

    /// Tiers in turn (by default `standardTiers`: 5 attempts every 3 s, 5 every 9 s, 5 every
    /// 15 s); afterwards start over (`repeats`) or stop. Stop earlier after `maximumAttempts`
    /// attempts or `maximumElapsed`. Spread by `jitter` (default `.standard`: ±50 %).
    public static func tiered(
        _ tiers: [Tier] = standardTiers,
        repeats: Bool,
        maximumAttempts: Int? = nil,
        maximumElapsed: Duration? = nil,
        jitter: Jitter = .standard
    ) -> ReconnectPolicy {
        precondition(!tiers.isEmpty, "a tiered schedule needs at least one tier")
        return ReconnectPolicy(
            .tiered(tiers, repeats: repeats),
            maximumAttempts: maximumAttempts,
            maximumElapsed: maximumElapsed,
            jitter: jitter
        )
    }

    /// Truncated binary exponential back-off with full jitter (RFC 6120 §3.3): attempt `n`
    /// (from 1) waits a random time in `0...(2^min(n, maximumExponent) − 1) × slot`, so the first
    /// wait is random in 0–60 s with the default slot.
    public static func exponentialBackoff(
        slot: Duration = .seconds(60),
        maximumExponent: Int = 5,
        maximumAttempts: Int? = nil,
        maximumElapsed: Duration? = nil
    ) -> ReconnectPolicy {
        precondition(maximumExponent >= 1 && maximumExponent < 31, "maximumExponent must be in 1..<31")
        return ReconnectPolicy(
            .exponential(slot: slot, maximumExponent: maximumExponent),
            maximumAttempts: maximumAttempts,
            maximumElapsed: maximumElapsed
        )
    }

    /// A rule of the app's own: the delay before the attempt described by the context, or nil to
    /// give up.
    public static func custom(_ rule: @escaping @Sendable (Context) -> Duration?) -> ReconnectPolicy {
        ReconnectPolicy(.custom(rule))
    }

    /// The delay before the attempt described by `context`, or nil to give up.
    /// The first attempt of the tier `attempt` falls in (0 for policies without tiers).
    public func startOfTier(containing attempt: Int) -> Int {
        guard case .tiered(let tiers, let repeats) = rule else { return 0 }
        let total = tiers.reduce(0) { $0 + $1.attempts }
        guard total > 0 else { return 0 }
        let position: Int
        if attempt < total {
            position = attempt
        } else if repeats {
            position = attempt % total
        } else {
            return total - tiers[tiers.count - 1].attempts
        }
        var start = 0
        for tier in tiers {
            if position < start + tier.attempts { return attempt - (position - start) }
            start += tier.attempts
        }
        return 0
    }

    /// The wait before the attempt `context` describes, drawn from `generator` when the policy is spread; nil when the policy gives up.
    public func delay(for context: Context, using generator: inout some RandomNumberGenerator) -> Duration? {
        if let maximumAttempts, context.attempt >= maximumAttempts { return nil }
        if let maximumElapsed, context.elapsed >= maximumElapsed { return nil }
        switch rule {
        case .delays(let delays):
            return context.attempt < delays.count ? jitter.apply(to: delays[context.attempt], using: &generator) : nil
        case .fixed(let delay):
            return jitter.apply(to: delay, using: &generator)
        case .tiered(let tiers, let repeats):
            let total = tiers.reduce(0) { $0 + $1.attempts }
            var position = context.attempt
            if position >= total {
                guard repeats else { return nil }
                position %= total
            }
            for tier in tiers {
                if position < tier.attempts { return jitter.apply(to: tier.delay, using: &generator) }
                position -= tier.attempts
            }
            return nil
        case .exponential(let slot, let maximumExponent):
            let exponent = min(context.attempt + 1, maximumExponent)
            let ceiling = slot.totalNanoseconds.multipliedReportingOverflow(by: (1 << exponent) - 1)
            let upper = ceiling.overflow ? Int64.max : ceiling.partialValue
            return .nanoseconds(Int64.random(in: 0...max(0, upper), using: &generator))
        case .custom(let rule):
            return rule(context)
        }
    }
}

/// The running state of reconnecting under a `ReconnectPolicy`: how many attempts have been
/// made since the connection was lost and when it was lost.
///
/// The count restarts only when a connection is actually established again
/// (`connectionEstablished()`), never merely because an attempt began, so a server that accepts
/// the socket and then drops it cannot reset the back-off (a bug of several XMPP libraries).
public struct ReconnectSchedule: Sendable {
    /// The policy in force.
    public var policy: ReconnectPolicy
    /// Attempts made since the connection was lost.
    public private(set) var attempts = 0
    /// When the connection was lost (nil while connected).
    public private(set) var lostAt: Instant?

    /// A schedule for `policy`.
    public init(policy: ReconnectPolicy) {
        self.policy = policy
    }

    /// Records that the connection was lost at `now` (the first loss since it was established
    /// starts the count).
    public mutating func connectionLost(at now: Instant) {
        if lostAt == nil {
            lostAt = now
            attempts = 0
        }
    }

    /// The delay before the next attempt, counting it, or nil when the policy gives up.
    public mutating func nextDelay(
        now: Instant,
        reason: String?,
        using generator: inout some RandomNumberGenerator
    ) -> Duration? {
        let lost = lostAt ?? now
        if lostAt == nil { lostAt = now }
        let context = ReconnectPolicy.Context(attempt: attempts, elapsed: now - lost, reason: reason)
        guard let delay = policy.delay(for: context, using: &generator) else { return nil }
        attempts += 1
        return delay
    }

    /// The network came back (or the device moved to another): the next attempt starts the
    /// current tier again (a tiered policy; after the last tier of one that does not repeat, that
    /// last tier), any other policy from its first delay; the time without a network does not
    /// count towards `maximumElapsed`.
    public mutating func pathReturned(at now: Instant) {
        attempts = policy.startOfTier(containing: attempts)
        if lostAt != nil { lostAt = now }
    }

    /// Records that a connection was established: the next loss starts the schedule over.
    public mutating func connectionEstablished() {
        attempts = 0
        lostAt = nil
    }
}
