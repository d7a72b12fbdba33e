import Foundation
import TetherSimulation

/// `--soak [MINUTES]`: long runs of the network simulations (`TetherSimulation`) in virtual time:
/// the hub connection with stateful reconnect over JSON and over MessagePack, and the XMPP
/// client with stream management, each for MINUTES virtual minutes (default 60) with a cut or a
/// stall about every three minutes and steady traffic both ways through the machines and codecs.
/// Each run's invariants must hold, and the process's resident memory and open descriptors at
/// its end must equal those after its first virtual minute (memory within one MiB: the
/// allocator's page granularity). Returns whether everything held.
enum Soak {
    struct Sample: CustomStringConvertible {
        var residentBytes: Int
        var descriptors: Int

        static func now() -> Sample {
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
            return Sample(residentBytes: residentSetSize(), descriptors: descriptors)
        }

        var description: String {
            String(format: "RSS %.1f MiB, %d descriptors", Double(residentBytes) / 1_048_576, descriptors)
        }
    }

    static let tolerance = 1 << 20

    static func run(minutes: Int) -> Bool {
        let duration = Duration.seconds(60 * minutes)
        let faultInterval = Duration.seconds(180)
        var passed = true
        print("soak: \(minutes) virtual minutes per run, a cut and a stall about every 3 minutes each")

        func report(_ name: String, _ failures: [String], _ first: Sample?, _ last: Sample, _ summary: String) {
            let memoryHeld =
                first.map { last.residentBytes <= $0.residentBytes + tolerance && last.descriptors == $0.descriptors }
                ?? false
            let verdict = failures.isEmpty && memoryHeld ? "ok" : "FAILED"
            if verdict != "ok" { passed = false }
            print("  \(name): \(summary)")
            print("    after minute 1: \(first.map(\.description) ?? "no sample"); at the end: \(last); \(verdict)")
            for failure in failures.prefix(12) { print("    \(failure)") }
        }

        for messagePack in [false, true] {
            var first: Sample?
            let hub = HubSimulation(
                .init(
                    seed: 1,
                    stateful: true,
                    faults: [.cut, .stall],
                    duration: duration,
                    messagePack: messagePack,
                    faultInterval: faultInterval
                )
            )
            hub.onMinute = { minute in if minute == 1 { first = Sample.now() } }
            let failures = hub.run()
            report(
                messagePack ? "signalr messagepack" : "signalr json",
                failures,
                first,
                Sample.now(),
                "\(hub.summary)"
            )
        }

        var first: Sample?
        let xmpp = XMPPSimulation(
            .init(
                seed: 1,
                streamManagement: true,
                faults: [.cut, .stall],
                duration: duration,
                faultInterval: faultInterval
            )
        )
        xmpp.onMinute = { minute in if minute == 1 { first = Sample.now() } }
        let failures = xmpp.run()
        report("xmpp", failures, first, Sample.now(), "\(xmpp.summary)")
        print(passed ? "soak passed" : "soak FAILED")
        return passed
    }
}
