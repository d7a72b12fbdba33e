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
