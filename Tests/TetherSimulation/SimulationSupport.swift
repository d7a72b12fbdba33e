import TetherCore

/// What the simulated network does to a link.
public enum SimulatedFault: String, CaseIterable, Sendable {
    /// Both ends are told the connection is gone.
    case cut
    /// Half-open: everything sent either way is lost, and neither end is told.
    case stall
    /// The server loses every session and refuses connections for a few seconds.
    case restart
}

/// Events by virtual time, in insertion order among equal times.
struct EventQueue<Event> {
    private var items: [(at: Instant, event: Event)] = []

    var earliest: Instant? { items.first?.at }

    mutating func push(_ at: Instant, _ event: Event) {
        let index = items.firstIndex { $0.at > at } ?? items.count
        items.insert((at, event), at: index)
    }

    mutating func pop() -> Event? {
        items.isEmpty ? nil : items.removeFirst().event
    }
}

/// A simulation's virtual clock, its queue of events and its log, and the order both simulations
/// run things in: at each instant the client machine's due timers first, then the events in the
/// order they were scheduled. A timer asked for in the past, or timers firing more than ten times
/// at one instant (a machine that keeps re-arming a due timer would spin), is a failure.
struct VirtualTime<Event> {
    /// What runs next.
    enum Step {
        /// The machine's timers are due now.
        case timers
        /// An event is due now.
        case event(Event)
    }

    private(set) var now = Instant.zero
    private var queue = EventQueue<Event>()
    /// What went wrong and what happened last.
    private(set) var log = SimulationLog()
    /// Timer rounds at the same instant in a row.
    private var timerRoundsNow = 0
    private var nextMinute = 1

    mutating func schedule(at time: Instant, _ event: Event) {
        queue.push(time, event)
    }

    mutating func schedule(after delay: Duration, _ event: Event) {
        queue.push(now + delay, event)
    }

    mutating func fail(_ text: String) {
        log.fail(text, at: now)
    }

    mutating func note(_ text: String) {
        log.note(text, at: now)
    }

    /// Moves the clock on to `time` (never back).
    mutating func advance(to time: Instant) {
        now = max(now, time)
    }

    /// The next step due by `end`, the machine's next timer being due at `machineTimer`, with the
    /// clock moved on to it; nil when nothing is due by then.
    mutating func next(until end: Instant, machineTimer: Instant?) -> Step? {
        guard let due = [queue.earliest, machineTimer].compactMap({ $0 }).min(), due <= end else { return nil }
        advance(to: due)
        if let timer = machineTimer, timer <= now, queue.earliest.map({ timer <= $0 }) ?? true {
            timerRoundsNow += 1
            if timerRoundsNow > 10 { fail("the machine's timers fired more than 10 times at one instant") }
            return .timers
        }
        timerRoundsNow = 0
        return queue.pop().map(Step.event)
    }

    /// After the machine's timers ran: the timer it asks for next must not be in the past.
    mutating func timersRan(nextTimer: Instant?) {
        if let nextTimer, nextTimer < now { fail("the machine asked for a timer at \(nextTimer), before the present") }
    }

    /// Calls `onMinute` with the number (from 1) of each virtual minute passed since the last call.
    mutating func reportMinutes(to onMinute: ((Int) -> Void)?) {
        while now >= Instant.zero + .seconds(60 * Int64(nextMinute)) {
            onMinute?(nextMinute)
            nextMinute += 1
        }
    }
}

/// What went wrong in a run (the first ten) and the last things that happened, for the report.
struct SimulationLog {
    private(set) var failures: [String] = []
    private(set) var trace: [String] = []

    mutating func fail(_ text: String, at now: Instant) {
        if failures.count < 10 { failures.append("t=\(now): \(text)") }
    }

    mutating func note(_ text: String, at now: Instant) {
        trace.append("t=\(now): \(text)")
        if trace.count > 60 { trace.removeFirst(trace.count - 60) }
    }

    /// The failures followed by the trace, or nothing when every invariant held.
    var report: [String] { failures.isEmpty ? [] : failures + ["trace:"] + trace }
}

/// When each fault strikes: about every `interval` throughout `duration` (give or take half of
/// it), or, without an interval, one to three times at seeded moments in the first five minutes.
func faultTimes(
    _ faults: [SimulatedFault],
    interval: Duration?,
    duration: Duration,
    using random: inout SeededRandomNumberGenerator
) -> [(Instant, SimulatedFault)] {
    var times: [(Instant, SimulatedFault)] = []
    for fault in faults {
        guard let interval else {
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                times.append((Instant.zero + .milliseconds(Int64.random(in: 5_000...280_000, using: &random)), fault))
            }
            continue
        }
        var at = Instant.zero
        let spread = interval.components.seconds * 500  // half the interval, in milliseconds
        while true {
            at = at + interval + .milliseconds(Int64.random(in: -spread...spread, using: &random))
            guard at < Instant.zero + duration else { break }
            times.append((at, fault))
        }
    }
    return times
}

/// A link's one-way latency in the simulated network.
func simulatedLatency(using random: inout SeededRandomNumberGenerator) -> Duration {
    .milliseconds(Int64.random(in: 1...40, using: &random))
}
