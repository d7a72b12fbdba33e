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

    static let scenarios: [(name: String, streamManagement: Bool, faults: [Scenario.Fault])] = [
        ("stream management, cuts and stalls", true, [.cut, .stall]),
        ("stream management, server restarts", true, [.cut, .restart]),
        ("plain, cuts and stalls", false, [.cut, .stall]),
        ("plain, server restarts", false, [.stall, .restart]),
    ]

    @Test(arguments: 0..<4)
    func invariantsHoldForEverySeed(_ index: Int) {
        let (name, streamManagement, faults) = Self.scenarios[index]
        for seed in 1...UInt64(Self.seeds) {
            let scenario = Scenario(seed: seed, streamManagement: streamManagement, faults: faults)
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
}
