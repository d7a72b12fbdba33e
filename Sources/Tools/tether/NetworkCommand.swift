import Dispatch
import Foundation
import TetherCore
import TetherDispatch
import TetherJSON

/// `tether network [--count N]`: prints the device's network as the Linux monitor (rtnetlink)
/// sees it, one JSON line now and one per change: `{"event":"network","available":BOOL,
/// "interfaces":[NAME,…]}`; stops after N lines (default: never). Exit status 2 for a usage
/// error, 1 when the monitor cannot start.
enum NetworkCommand {
    static let usage = """
        usage: tether network [--count N]

        Prints the device's network as the Linux monitor (rtnetlink) sees it: one JSON line now
        and one for every change, {"event":"network","available":BOOL,"interfaces":[NAME,…]}
        (available: an interface other than loopback is up, has an address and carries a route;
        interfaces: those). Stops after N lines (default: runs until interrupted). The same
        monitor feeds a client with `tether xmpp --network-watch` and `tether signalr
        --network-watch`.
        """

    /// `{"event":"network","available":…,"interfaces":[…]}`.
    static func line(_ path: NetworkPath) -> String {
        var line = Array(#"{"event":"network","available":"#.utf8)
        line += (path.isAvailable ? "true" : "false").utf8
        line += #","interfaces":["#.utf8
        for (index, name) in path.interfaces.sorted().enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            JSONText.appendString(name, to: &line)
        }
        line += "]}".utf8
        return String(decoding: line, as: UTF8.self)
    }

    static func run(
        _ arguments: [String],
        output: @escaping @Sendable (String) -> Void,
        errorOutput: @escaping @Sendable (String) -> Void
    ) async -> Int32 {
        if arguments.contains("--help") || arguments.contains("-h") {
            output(usage)
            return 0
        }
        var count: Int?
        if !arguments.isEmpty {
            guard arguments.count == 2, arguments[0] == "--count", let n = Int(arguments[1]), n >= 1 else {
                errorOutput("tether network: expected [--count N]\n" + usage)
                return 2
            }
            count = n
        }
        #if os(Linux)
            let reported = Counter()
            let limit = count
            let done = AsyncStream<Void>.makeStream()
            let monitor: NetworkMonitor
            do {
                monitor = try NetworkMonitor { path in
                    output(line(path))
                    if let limit, reported.increment() >= limit { done.continuation.finish() }
                }
            } catch {
                errorOutput("tether network: \(error)")
                return 1
            }
            monitor.start()
            for await _ in done.stream {}
            monitor.cancel()
            return 0
        #else
            errorOutput("tether network: the network monitor is Linux's (rtnetlink); use NWPathMonitor elsewhere")
            return 1
        #endif
    }

    /// A count shared with the monitor's queue.
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0

        func increment() -> Int {
            lock.withLock {
                value += 1
                return value
            }
        }
    }
}

/// What `--network-watch` and `--health` run beside a connection command's client: the Linux
/// network monitor feeding the client (and printing network lines), and the health lines at their
/// interval. `stop()` ends both.
final class ClientWatchers {
    private var monitor: AnyObject?
    private var healthTask: Task<Void, Never>?

    /// Starts what was asked; nil (with the reason on standard error) when the monitor cannot
    /// start.
    init?(
        _ arguments: ConnectionArguments,
        watching client: some ConnectionClient,
        output: @escaping @Sendable (String) -> Void,
        errorOutput: @escaping @Sendable (String) -> Void
    ) {
        if arguments.networkWatch {
            #if os(Linux)
                do {
                    let monitor = try NetworkMonitor { path in
                        output(NetworkCommand.line(path))
                        client.networkChanged(path)
                    }
                    monitor.start()
                    self.monitor = monitor
                } catch {
                    errorOutput("tether: --network-watch: \(error)")
                    return nil
                }
            #else
                errorOutput("tether: --network-watch needs Linux (rtnetlink)")
                return nil
            #endif
        }
        if let healthInterval = arguments.healthInterval {
            let updates = client.healthUpdates(every: .milliseconds(Int64(healthInterval * 1000)))
            healthTask = Task {
                for await health in updates { output(HealthLine.line(health)) }
            }
        }
    }

    func stop() {
        #if os(Linux)
            (monitor as? NetworkMonitor)?.cancel()
        #endif
        healthTask?.cancel()
    }
}
