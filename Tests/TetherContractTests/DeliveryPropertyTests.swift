import Foundation
import Testing
import TetherCore
import TetherSimulation

/// Reference-model property tests on every machine: random plans of app sends and stops, cuts,
/// stalls, network losses and returns, server restarts and elapsed time (`PlanStep`), each run against the
/// real machine and a scripted server on the virtual clock, and held against what must be
/// delivered exactly once (`XMPPSimulation.run(plan:)`, `HubSimulation.run(plan:)`): every stanza
/// reaches the server once or is handed back, never lost silently, never twice; every invocation
/// ends exactly once, and the hub runs it at most once (exactly once when it completed). A failing
/// plan is shrunk to a minimal one, which the failure names (replay it with `run(plan:)`).
/// More plans: `TETHER_PROPERTY_PLANS=2000 swift test --filter DeliveryPropertyTests`.
struct DeliveryPropertyTests {
    enum Subject: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case xmppWithStreamManagement
        case signalRStateful
        case signalR

        var testDescription: String { rawValue }

        func run(seed: UInt64, plan: [PlanStep]) -> [String] {
            switch self {
            case .xmppWithStreamManagement:
                XMPPSimulation(.init(seed: seed, streamManagement: true, faults: [])).run(plan: plan)
            case .signalRStateful:
                HubSimulation(.init(seed: seed, stateful: true, faults: [])).run(plan: plan)
            case .signalR:
                HubSimulation(.init(seed: seed, stateful: false, faults: [])).run(plan: plan)
            }
        }
    }

    static let plans: Int = {
        if let text = ProcessInfo.processInfo.environment["TETHER_PROPERTY_PLANS"], let value = Int(text), value > 0 {
            return value
        }
        return 200
    }()

    @Test(arguments: Subject.allCases)
    func nothingIsLostOrDoubledWhateverHappens(_ subject: Subject) {
        for seed in 1...UInt64(Self.plans) {
            var random = SeededRandomNumberGenerator(seed: seed &* 7919)
            let plan = PlanStep.random(count: Int.random(in: 4...30, using: &random), using: &random)
            guard !subject.run(seed: seed, plan: plan).isEmpty else { continue }
            let minimal = shrink(plan) { !subject.run(seed: seed, plan: $0).isEmpty }
            let failures = subject.run(seed: seed, plan: minimal)
            Issue.record(
                Comment(
                    rawValue:
                        "\(subject), seed \(seed): the plan \(minimal) (shrunk from \(plan.count) steps) breaks the model:\n"
                        + failures.prefix(30).joined(separator: "\n")
                )
            )
            return
        }
    }

    /// The plans do what they say: messages are sent and delivered, faults strike.
    @Test func thePlansExerciseTheMachines() {
        let plan: [PlanStep] = [.send, .send, .cut, .send, .wait(3), .send, .restart, .send, .wait(5), .send]
        let xmpp = XMPPSimulation(.init(seed: 1, streamManagement: true, faults: []))
        #expect(xmpp.run(plan: plan).isEmpty)
        #expect(xmpp.summary.messagesReceivedByServer >= 4 && xmpp.summary.messagesSent == 6, "\(xmpp.summary)")
        let hub = HubSimulation(.init(seed: 1, stateful: true, faults: []))
        #expect(hub.run(plan: plan).isEmpty)
        #expect(hub.summary.invocationsCompleted >= 2, "\(hub.summary)")
    }

    /// The shrinker finds the smallest plan that still fails: here, one that fails whenever a cut
    /// comes before a restart, and a wait of at least 7 s after it.
    @Test func theShrinkerFindsAMinimalPlan() {
        func fails(_ plan: [PlanStep]) -> Bool {
            guard let cut = plan.firstIndex(of: .cut), let restart = plan[cut...].firstIndex(of: .restart) else {
                return false
            }
            return plan[restart...].contains { if case .wait(let seconds) = $0 { seconds >= 7 } else { false } }
        }
        let plan: [PlanStep] = [.send, .stall, .cut, .send, .wait(3), .pathLost, .restart, .send, .wait(30), .pathBack]
        #expect(fails(plan))
        #expect(shrink(plan, fails: fails) == [.cut, .restart, .wait(7)])
    }
}
