import Foundation
import TetherDispatch
import TetherSignalR
import TetherSignalRClient

/// `tether-bench --echo-latency URL`: sequential Echo invocations through `HubConnection` against
/// a running hub, timed one by one (for `Benchmarks/signalr-latency/run.sh`, which runs the same
/// calls through pysignalr and signalrcore). With `onExecutor` the calls are made from a task that
/// prefers the connection's executor (`--executor`). Prints one JSON line: count, p50 and p99 in
/// microseconds.
enum EchoLatency {
    static func run(
        url: String,
        count: Int,
        encoding: ValueEncoding,
        transport: HubTransport = .webSockets,
        onExecutor: Bool = false,
        warmUp: Int = 50
    ) async throws -> String {
        let connection = try HubConnectionBuilder(url: url).withHubProtocol(encoding).withTransports(transport)
            .withLogging(.error).build()
        try await connection.start()
        for index in 0..<warmUp {
            let _: String = try await connection.invoke("Echo", "warm-up \(index)")
        }
        func measure() async throws -> [Double] {
            var samples: [Double] = []
            samples.reserveCapacity(count)
            for index in 0..<count {
                let text = "echo \(index)"
                let start = DispatchTime.now().uptimeNanoseconds
                let echoed: String = try await connection.invoke("Echo", text)
                samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
                guard echoed == text else { throw BenchError("Echo returned '\(echoed)' for '\(text)'") }
            }
            return samples
        }
        var samples =
            onExecutor
            ? try await withTaskExecutorPreference(connection.executor) { try await measure() } : try await measure()
        await connection.stop()
        samples.sort()
        func percentile(_ p: Double) -> Double { samples[min(samples.count - 1, Int(p * Double(samples.count)))] }
        return String(
            format:
                #"{"client":"\#(onExecutor ? "tether-executor" : "tether")","transport":"\#(name(of: transport))","count":%d,"p50_us":%.1f,"p99_us":%.1f}"#,
            count,
            percentile(0.5),
            percentile(0.99)
        )
    }

    static func name(of transport: HubTransport) -> String {
        switch transport {
        case .webSockets: "websockets"
        case .serverSentEvents: "sse"
        case .longPolling: "long-polling"
        }
    }
}
