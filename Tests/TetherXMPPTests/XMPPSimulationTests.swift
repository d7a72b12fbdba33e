import Foundation
import Testing

@testable import TetherSimulation

/// The XMPP client machine against a scripted server on a simulated network
/// (`XMPPSimulation`), over many seeds per scenario. A failure names the scenario to replay.
/// More seeds: `TETHER_SIMULATION_SEEDS=5000 swift test --filter XMPPSimulationTests`.
struct XMPPSimulationTests {
    typealias Scenario = XMPPSimulation.Scenario

    static let seeds: Int = {
        // Tests may read the environment (library modules do not).
        if let text = ProcessInfo.processInfo.environment["TETHER_SIMULATION_SEEDS"], let value = Int(text), value > 0 {
            return value
        }
        return 200
    }()

    static let scenarios:
        [(name: String, streamManagement: Bool, faults: [Scenario.Fault], archive: Bool, failingTarget: Bool)] = [
            ("stream management, cuts and stalls", true, [.cut, .stall], false, false),
            ("stream management, server restarts", true, [.cut, .restart], false, false),
            ("plain, cuts and stalls", false, [.cut, .stall], false, false),
            ("plain, server restarts", false, [.stall, .restart], false, false),
            (
                "stream management, path flaps, moves, background, cuts", true, [.pathFlap, .move, .background, .cut],
                false, false
            ),
            ("plain, path flaps, background, stalls", false, [.pathFlap, .background, .stall], false, false),
            (
                "archive and spread reconnects with stream management, restarts and cuts", true,
                [.cut, .restart, .stall],
                true, false
            ),
            (
                "archive and spread reconnects without stream management, cuts and stalls", false,
                [.cut, .stall, .restart], true, false
            ),
            (
                "a failing first SRV target, spread reconnects, stream management, restarts, cuts and stalls", true,
                [.cut, .restart, .stall], false, true
            ),
        ]

    @Test(arguments: 0..<9)
    func invariantsHoldForEverySeed(_ index: Int) {
        let (name, streamManagement, faults, archive, failingTarget) = Self.scenarios[index]
        for seed in 1...UInt64(Self.seeds) {
            // The archive and fail-over scenarios also spread their reconnects (Jitter.standard,
            // seeded).
            let scenario = Scenario(
                seed: seed,
                streamManagement: streamManagement,
                faults: faults,
                archive: archive,
                jitter: archive || failingTarget,
                failingTarget: failingTarget
            )
            let simulation = XMPPSimulation(scenario)
            let failures = simulation.run()
            if !failures.isEmpty {
                Issue.record(Comment(rawValue: "\(name): replay with \(scenario)\n" + failures.joined(separator: "\n")))
                return
            }
        }
    }

    /// The scenarios do what they say: traffic both ways, resumptions under stream management.
    @Test func theSimulationExercisesTheProtocol() {
        let simulation = XMPPSimulation(.init(seed: 1, streamManagement: true, faults: [.cut, .stall]))
        #expect(simulation.run().isEmpty)
        #expect(simulation.resumptions > 0)
        #expect(simulation.server.received.count > 50)
        #expect(simulation.incomingSegments.joined().count > 50)
        #expect(!simulation.endedIQs.isEmpty)
    }

    /// With the archive, server restarts end sessions, and the catch-ups bring back what the
    /// sessions lost (checked by the run: nothing missing).
    @Test func theArchiveBringsBackWhatLostSessionsMissed() {
        var caughtUp = 0
        var catchUps = 0
        for seed in 1...UInt64(10) {
            let simulation = XMPPSimulation(
                .init(seed: seed, streamManagement: true, faults: [.restart, .cut], archive: true)
            )
            #expect(simulation.run().isEmpty)
            catchUps += simulation.catchUps
            caughtUp += simulation.archivedDeliveries
        }
        #expect(catchUps >= 5 && caughtUp > 10, "\(catchUps) catch-ups, \(caughtUp) messages")
        // Spread reconnects replay exactly for a seed, and differ between seeds.
        let first = XMPPSimulation(.init(seed: 3, streamManagement: true, faults: [.restart, .cut], jitter: true))
        let again = XMPPSimulation(.init(seed: 3, streamManagement: true, faults: [.restart, .cut], jitter: true))
        let other = XMPPSimulation(.init(seed: 4, streamManagement: true, faults: [.restart, .cut], jitter: true))
        #expect(first.run().isEmpty && again.run().isEmpty && other.run().isEmpty)
        #expect(!first.spreadDelays.isEmpty && first.spreadDelays == again.spreadDelays)
        #expect(first.spreadDelays != other.spreadDelays)
    }

    /// The fail-over scenario does what it says: the balancer is tried, fails each time, and the
    /// client still gets online through the server after every restart, with nothing lost
    /// (checked by the run); the balancer comes first again only after the server's target failed
    /// too (at most once per such failure, beside the first attempt).
    @Test func aFailingFirstTargetPassesEachAttemptOn() {
        for seed in 1...UInt64(10) {
            let simulation = XMPPSimulation(
                .init(
                    seed: seed,
                    streamManagement: true,
                    faults: [.restart, .cut],
                    jitter: true,
                    failingTarget: true
                )
            )
            let failures = simulation.run()
            #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
            #expect(simulation.balancerConnections >= 1)
            #expect(simulation.balancerFirst <= 1 + simulation.serverRefusals, "seed \(seed)")
            #expect(simulation.summary.connections > 1)
            #expect(simulation.server.received.count > 20)
        }
    }

    /// Path flaps alone: each time the path comes back while the machine waits, an attempt
    /// starts at once and the session is online again within a second (checked by the run), with
    /// nothing lost.
    @Test func thePathBackBringsTheSessionBackAtOnce() {
        var waiting = 0
        for seed in 1...UInt64(20) {
            let simulation = XMPPSimulation(
                .init(
                    seed: seed,
                    streamManagement: true,
                    faults: [.pathFlap],
                    duration: .seconds(600),
                    faultInterval: .seconds(60)
                )
            )
            let failures = simulation.run()
            #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
            #expect(simulation.record.pathReturnsOnlineInTime == simulation.record.pathReturnsWhileWaiting)
            waiting += simulation.record.pathReturnsWhileWaiting
        }
        #expect(waiting > 20)
    }
}
