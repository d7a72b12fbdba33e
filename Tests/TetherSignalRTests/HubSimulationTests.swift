import Foundation
import Testing
import TetherCore

@testable import TetherSimulation

/// The connection machine against a scripted hub on a simulated network (`HubSimulation`), over
/// many seeds per scenario. A failure names the scenario to replay. More seeds:
/// `TETHER_SIMULATION_SEEDS=5000 swift test --filter HubSimulationTests`.
struct HubSimulationTests {
    typealias Scenario = HubSimulation.Scenario

    static let seeds: Int = {
        // Tests may read the environment (library modules do not).
        var count = 200
        if let text = ProcessInfo.processInfo.environment["TETHER_SIMULATION_SEEDS"], let value = Int(text), value > 0 {
            count = value
        }
        return count
    }()

    static let scenarios: [(name: String, stateful: Bool, faults: [Scenario.Fault])] = [
        ("stateful, cuts and stalls", true, [.cut, .stall]),
        ("stateful, server restarts, spread reconnects", true, [.cut, .restart]),
        ("plain, cuts and stalls", false, [.cut, .stall]),
        ("plain, server restarts, spread reconnects", false, [.stall, .restart]),
        ("stateful, path flaps, moves, background, cuts", true, [.pathFlap, .move, .background, .cut]),
        ("plain, path flaps, background, stalls", false, [.pathFlap, .background, .stall]),
    ]

    @Test(arguments: 0..<6)
    func invariantsHoldForEverySeed(_ index: Int) {
        let (name, stateful, faults) = Self.scenarios[index]
        for seed in 1...UInt64(Self.seeds) {
            // Odd seeds speak JSON, even ones MessagePack; the restart scenarios spread their
            // reconnects (Jitter.standard, seeded).
            let scenario = Scenario(
                seed: seed,
                stateful: stateful,
                faults: faults,
                messagePack: seed % 2 == 0,
                jitter: faults.contains(.restart)
            )
            let simulation = HubSimulation(scenario)
            let failures = simulation.run()
            if !failures.isEmpty {
                Issue.record(Comment(rawValue: "\(name): replay with \(scenario)\n" + failures.joined(separator: "\n")))
                return
            }
        }
    }
}

extension HubSimulationTests {
    /// Spread reconnects replay exactly for a seed, differ between seeds, and stay within ±50 %
    /// of the schedule (checked by the run).
    @Test func spreadReconnectsReplayForASeed() {
        func run(_ seed: UInt64) -> HubSimulation {
            let simulation = HubSimulation(.init(seed: seed, stateful: false, faults: [.restart, .cut], jitter: true))
            #expect(simulation.run().isEmpty)
            return simulation
        }
        let first = run(3)
        let again = run(3)
        let other = run(4)
        #expect(!first.spreadDelays.isEmpty && first.spreadDelays == again.spreadDelays)
        #expect(first.spreadDelays != other.spreadDelays)
    }

    /// The scenarios do what they say: traffic both ways, resumptions without new connections.
    @Test func theSimulationExercisesTheProtocol() {
        let simulation = HubSimulation(.init(seed: 1, stateful: true, faults: [.cut, .stall]))
        #expect(simulation.run().isEmpty)
        #expect(simulation.completedInvocations > 50)
        #expect(simulation.notifySegments.joined().count > 50)
        #expect(simulation.reconnecting.isEmpty)
        #expect(simulation.hub.links.count > 3)  // the cuts and stalls were resumed on new WebSockets
    }
}
