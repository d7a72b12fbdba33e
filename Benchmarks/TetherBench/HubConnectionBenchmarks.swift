import Foundation
import TetherCore
import TetherSignalR

/// Connection-machine benchmarks: memory per idle connected machine, one timer sweep over many
/// machines, and the machine's overhead per received message on top of parsing.
struct HubConnectionBenchmarks {
    static let names = ["hub-machine-idle", "hub-machine-sweep", "hub-machine-receive"]

    typealias Machine = HubConnectionMachine

    let machineCount: Int
    let passes: Int
    let corpus: SignalRCorpus

    /// A machine driven through negotiate, transport and handshake, its actions drained.
    static func connectedMachine(seed: UInt64, handledTargets: Set<String> = []) -> Machine {
        var machine = Machine(
            configuration: .init(url: "http://127.0.0.1:5099/hub", handledTargets: handledTargets),
            hubProtocol: .json(JSONHubProtocol()),
            randomSeed: seed
        )
        machine.start(now: .zero)
        var generation = TransportGeneration(0)
        func drain(_ machine: inout Machine) {
            while let action = machine.pollAction() {
                switch action {
                case .request(.fetchAccessToken(let next)), .request(.negotiate(_, _, let next)),
                    .openTransport(_, let next):
                    generation = next
                case .send, .closeTransport, .event: break
                }
            }
        }
        drain(&machine)
        machine.negotiateResponse(
            status: 200,
            body: Array(
                #"{"negotiateVersion":1,"connectionId":"c\#(seed)","connectionToken":"t\#(seed)","availableTransports":[{"transport":"WebSockets","transferFormats":["Text","Binary"]}]}"#
                    .utf8
            ),
            generation: generation,
            now: .zero
        )
        drain(&machine)
        machine.transportConnected(generation: generation, now: .zero)
        let response = Array("{}\u{1E}".utf8)
        machine.transportReceived(response.backDeployedSpan, generation: generation, now: .zero)
        drain(&machine)
        return machine
    }

    /// The corpus's non-blocking Invocations (what servers push to clients) and Pings
    /// (Completions and StreamItems would answer invocations this machine never made, and
    /// blocking invocations would wait for client results).
    func serverStream() -> [UInt8] {
        var stream: [UInt8] = []
        var start = 0
        let invocation = Array(#"{"type":1,"target""#.utf8)
        let ping = Array(#"{"type":6"#.utf8)
        for index in corpus.json.indices where corpus.json[index] == 0x1E {
            let record = corpus.json[start...index]
            if record.starts(with: invocation) || record.starts(with: ping) { stream.append(contentsOf: record) }
            start = index + 1
        }
        return stream
    }

    func run(filter: (String) -> Bool, progress: (String) -> Void) -> [BenchmarkResult] {
        var results: [BenchmarkResult] = []
        if filter("hub-machine-idle") || filter("hub-machine-sweep") {
            progress("connecting \(machineCount) machines")
            let before = residentSetSize()
            var machines: [Machine] = []
            machines.reserveCapacity(machineCount)
            for index in 0..<machineCount { machines.append(Self.connectedMachine(seed: UInt64(index))) }
            let perMachine = Double(residentSetSize() - before) / Double(machineCount)
            if filter("hub-machine-idle") {
                var result = BenchmarkResult(
                    name: "hub-machine-idle",
                    bytes: Int(perMachine) * machineCount,
                    messages: machineCount,
                    seconds: 1,
                    mallocsPerMessage: 0,
                    peakRSS: peakResidentSetSize()
                )
                result.note = String(format: "%.0f bytes per idle connected machine (target 4096)", perMachine)
                results.append(result)
            }
            if filter("hub-machine-sweep") {
                progress("hub-machine-sweep")
                // A sweep when nothing is due, and one at the keep-alive deadline (every machine pings).
                var idle = measure("hub-machine-sweep (nothing due)", bytes: 0, messages: machineCount, passes: passes)
                {
                    let now = Instant.zero + .seconds(1)
                    var count = 0
                    for index in machines.indices {
                        machines[index].handleTimeout(now: now)
                        while machines[index].pollAction() != nil { count += 1 }
                    }
                    return count
                }
                idle.note = String(
                    format: "%.1f ms per sweep of %d machines (target 50)",
                    idle.seconds * 1000,
                    machineCount
                )
                results.append(idle)
                var due = measure("hub-machine-sweep (keep-alive due)", bytes: 0, messages: machineCount, passes: 1) {
                    let now = Instant.zero + .seconds(15)
                    var count = 0
                    for index in machines.indices {
                        machines[index].handleTimeout(now: now)
                        while machines[index].pollAction() != nil { count += 1 }
                    }
                    return count
                }
                due.note = String(format: "%.1f ms per sweep (each machine sends a ping)", due.seconds * 1000)
                results.append(due)
            }
        }
        if filter("hub-machine-receive") {
            progress("hub-machine-receive")
            let stream = serverStream()
            let messages = stream.reduce(0) { $0 + ($1 == 0x1E ? 1 : 0) }
            // Both sides decode each invocation's ParamData argument, as an app does: the
            // question is what the machine adds to receiving and decoding a message.
            let parseOnly = measure("hub-decode (same stream)", bytes: stream.count, messages: messages, passes: passes)
            {
                var parser = JSONHubProtocol().makeParser()
                var count = 0
                var offset = 0
                while offset < stream.count {
                    let end = min(offset + 65536, stream.count)
                    parser.append(stream.backDeployedSpan.extracting(offset..<end))
                    offset = end
                    while let message = try? parser.next() {
                        if case .invocation(let invocation) = message {
                            count &+= (try? invocation.arguments.decode(ParamData.self, at: 0))?.userId ?? 0
                        }
                    }
                }
                return count
            }
            results.append(parseOnly)
            let targets = Set(SignalRCorpus.targets)
            var machineResult = measure("hub-machine-receive", bytes: stream.count, messages: messages, passes: passes)
            {
                var machine = Self.connectedMachine(seed: 1, handledTargets: targets)
                let generation = machine.currentGeneration!
                var count = 0
                var offset = 0
                while offset < stream.count {
                    let end = min(offset + 65536, stream.count)
                    machine.transportReceived(
                        stream.backDeployedSpan.extracting(offset..<end),
                        generation: generation,
                        now: .zero
                    )
                    offset = end
                    while let action = machine.pollAction() {
                        if case .event(.invocation(let invocation, _)) = consume action {
                            count &+= (try? invocation.arguments.decode(ParamData.self, at: 0))?.userId ?? 0
                        }
                    }
                }
                return count
            }
            machineResult.note = String(
                format: "%+.0f%% over decoding (target 10%%)",
                (machineResult.seconds / parseOnly.seconds - 1) * 100
            )
            results.append(machineResult)
        }
        return results
    }
}
