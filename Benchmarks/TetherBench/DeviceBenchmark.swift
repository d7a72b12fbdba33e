import Foundation
import TetherSimulation

/// `--device [SEEDS]`: the device in the loop, in the network simulations (virtual time, one-way
/// latency 1–40 ms): for both protocols, how long after the path comes back (while waiting to
/// reconnect) the machine is online again, and how long after a move to another network under a
/// live link (its socket dead with the old network) it is online again, over SEEDS seeds of ten
/// virtual minutes with a flap or a move about every minute. Prints the medians and maxima with
/// the targets; returns whether they held.
enum DeviceBenchmark {
    /// The simulations' mean round trip (two one-way latencies of 1–40 ms).
    static let roundTrip = Duration.milliseconds(41)

    static func run(seeds: Int) -> Bool {
        var held = true
        print("device: \(seeds) seeds × 10 virtual minutes, a path flap or a move about every minute")
        func report(_ name: String, _ samples: [Duration], target: Duration, _ what: String) {
            guard !samples.isEmpty else {
                print("  \(name): no samples")
                held = false
                return
            }
            let sorted = samples.sorted()
            let median = sorted[sorted.count / 2]
            let maximum = sorted.last!
            let ok = maximum <= target
            if !ok { held = false }
            print(
                "  \(name): \(samples.count) \(what), median \(milliseconds(median)), max \(milliseconds(maximum)) "
                    + "(target ≤ \(milliseconds(target))) \(ok ? "ok" : "MISSED")"
            )
        }
        var xmppBack: [Duration] = []
        var xmppMove: [Duration] = []
        var hubBack: [Duration] = []
        var hubMove: [Duration] = []
        for seed in 1...UInt64(seeds) {
            for fault in [SimulatedFault.pathFlap, .move] {
                let xmpp = XMPPSimulation(
                    .init(
                        seed: seed,
                        streamManagement: true,
                        faults: [fault],
                        duration: .seconds(600),
                        faultInterval: .seconds(60)
                    )
                )
                if !xmpp.run().isEmpty { held = false }
                xmppBack += xmpp.pathBackToOnline
                xmppMove += xmpp.moveToOnline
                let hub = HubSimulation(
                    .init(
                        seed: seed,
                        stateful: true,
                        faults: [fault],
                        duration: .seconds(600),
                        faultInterval: .seconds(60)
                    )
                )
                if !hub.run().isEmpty { held = false }
                hubBack += hub.pathBackToOnline
                hubMove += hub.moveToOnline
            }
        }
        // The path back: an attempt at once, then the login's own round trips (XMPP: connect,
        // header, auth, header, resume; SignalR: negotiate, connect, the reopen) — the target is
        // one round trip beyond those, at the simulation's worst latency (80 ms a round trip).
        report("xmpp path back → resumed", xmppBack, target: .milliseconds(80 * 6), "returns")
        report("signalr path back → online", hubBack, target: .milliseconds(80 * 4), "returns")
        // A move under a live link: XMPP probes (2 s here, the ping timeout being shorter than the
        // probe's 5 s), then resumes; SignalR with stateful reconnect reopens at once.
        report("xmpp move → resumed", xmppMove, target: .seconds(2) + .milliseconds(80 * 6), "moves")
        report("signalr move → resumed", hubMove, target: .milliseconds(80 * 3), "moves")
        return held
    }

    static func milliseconds(_ duration: Duration) -> String {
        String(
            format: "%.0f ms",
            Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
        )
    }
}
