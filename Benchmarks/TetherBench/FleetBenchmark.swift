import Dispatch
import Foundation
import TetherCore
import TetherDispatch
import TetherSignalRClient
import TetherXMPP
import TetherXMPPClient

#if canImport(Glibc)
    import Glibc
#endif

/// `tether-bench --fleet [N]`: first N `XMPPClient`s, then N `HubConnection`s, through a server
/// restart. XMPP: N clients (default 2,000) in this process, each its own
/// resource of one account on one local prosody (which the benchmark starts: `prosody` and
/// `prosodyctl` from Debian, as `Tests/run.sh` installs them); the server is killed (SIGKILL, as a
/// crash or a host going away) and started again a few seconds later. Each client sends one
/// stanza while the server is away. Reported: when each client is back online after the server
/// listens again (median, p99), the largest share of the fleet arriving in any 100 ms window,
/// clients still offline after 60 s, and the stanzas sent during the outage (each delivered after
/// the restart or handed back to the app: none lost silently). Twice: with the default reconnect
/// policy (spread) and with the same schedule unspread, side by side. SignalR: N connections
/// (WebSockets, automatic reconnect with its default policy `.signalR`, and the same schedule
/// unspread: the official clients' 0, 2, 10, 30 s) to one local aiosignalr hub (the test
/// environment's `.build/venv-aiosignalr`, which `Tests/run.sh` makes), killed and started
/// again the same way; there is no stream management to count stanzas by. `--chart FILE` writes
/// the arrivals as an SVG histogram.
enum FleetBenchmark {
    struct Outcome {
        var label: String
        /// Seconds after the server listened again at which each client was back.
        var back: [Double]
        var offline: Int
        var sent: Int
        var delivered: Int
        var handedBack: Int
        /// Stanzas sent during the outage are counted (XMPP with stream management).
        var countsStanzas = true

        var median: Double { back.isEmpty ? .nan : back.sorted()[back.count / 2] }
        var p99: Double { back.isEmpty ? .nan : back.sorted()[min(back.count - 1, back.count * 99 / 100)] }
        /// The largest share of the fleet back within any 100 ms.
        func peakShare(of fleet: Int) -> Double {
            let times = back.sorted()
            var peak = 0
            var start = 0
            for end in times.indices {
                while times[end] - times[start] > 0.1 { start += 1 }
                peak = max(peak, end - start + 1)
            }
            return Double(peak) / Double(fleet)
        }
    }

    static func run(clients count: Int, chartPath: String?) async -> Bool {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        do {
            let spread = try await fleet(
                count,
                policy: XMPPClient.Configuration.defaultReconnectPolicy,
                label: "XMPP default (spread)"
            )
            let unspread = try await fleet(
                count,
                policy: XMPPClient.Configuration.defaultReconnectPolicy.jittered(.none),
                label: "XMPP same, unspread"
            )
            let hubSpread = try await hubFleet(count, policy: .signalR, label: "SignalR default (spread)")
            let hubUnspread = try await hubFleet(
                count,
                policy: ReconnectPolicy.signalR.jittered(.none),
                label: "SignalR same, unspread"
            )
            print(
                "Fleet through a server restart: \(count) clients of each protocol, one local server, killed and started again"
            )
            print(
                "  policy                       back p50   back p99   peak/100 ms   offline   outage stanzas (sent / delivered / handed back)"
            )
            let outcomes = [spread, unspread, hubSpread, hubUnspread]
            for outcome in outcomes {
                print(
                    String(
                        format: "  %@ %7.2f s  %7.2f s   %8.1f %%   %7d   %@",
                        outcome.label.padding(toLength: 28, withPad: " ", startingAt: 0),
                        outcome.median,
                        outcome.p99,
                        outcome.peakShare(of: count) * 100,
                        outcome.offline,
                        outcome.countsStanzas
                            ? "\(outcome.sent) / \(outcome.delivered) / \(outcome.handedBack)"
                            : "— (no stream management)"
                    )
                )
            }
            var met = true
            for outcome in [spread, hubSpread] {
                let held =
                    outcome.offline == 0 && outcome.peakShare(of: count) <= 0.10 && outcome.p99 <= 15
                    && outcome.delivered + outcome.handedBack == outcome.sent
                print(
                    "  targets (\(outcome.label)): all back, no 100 ms window over 10 %, p99 within 15 s, nothing lost: "
                        + (held ? "met" : "MISSED")
                )
                met = met && held
            }
            if let chartPath {
                try histogram(outcomes, fleet: count).write(
                    toFile: chartPath,
                    atomically: true,
                    encoding: .utf8
                )
            }
            return met
        } catch {
            FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
            return false
        }
    }

    /// One run: connect the fleet, kill the server, send, start it again, wait for everyone.
    static func fleet(_ count: Int, policy: ReconnectPolicy, label: String) async throws -> Outcome {
        let server = try BenchProsody()
        defer { server.stop() }
        try server.start()
        let record = Record()
        var clients: [XMPPClient] = []
        for index in 0..<count {
            var configuration = XMPPClient.Configuration(
                jid: JID("fleet@localhost/c\(index)")!,
                password: Secret(BenchProsody.password),
                endpoint: Endpoint(host: "127.0.0.1", port: server.port),
                tls: .disabled
            )
            configuration.allowPlainOnCleartext = true
            configuration.mechanisms = [.plain]
            configuration.fetchRosterOnConnect = false
            configuration.initialPresence = nil  // thousands of resources of one account
            configuration.archiveCatchUp = nil
            configuration.reconnectPolicy = policy
            configuration.connectTimeout = .seconds(20)
            var options = XMPPClient.Options()
            options.randomSeed = UInt64(index + 1) &* 0x9E37_79B9_7F4A_7C15
            let client = try XMPPClient(configuration: configuration, options: options)
            client.setEventHandler(queue: DispatchQueue(label: "fleet.events")) { event in
                let now = DispatchTime.now().uptimeNanoseconds
                switch event {
                case .lifecycle(.connected), .lifecycle(.resumed):
                    record.back(index, at: now)
                case .unacknowledgedStanzas(let stanzas):
                    record.handedBack(stanzas.count)
                default:
                    break
                }
            }
            clients.append(client)
        }
        try await inBatches(clients, of: 200) { _ = try await $0.connect() }
        try await Task.sleep(for: .seconds(2))
        record.killed(at: DispatchTime.now().uptimeNanoseconds)
        server.kill()
        try await Task.sleep(for: .milliseconds(500))
        for client in clients {
            try await client.send(XMPPMessage(to: JID("nobody@localhost"), body: "sent while the server was away"))
        }
        try await Task.sleep(for: .seconds(3))
        try server.start()
        let listening = DispatchTime.now().uptimeNanoseconds
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, record.backCount < count {
            try await Task.sleep(for: .milliseconds(100))
        }
        // Every outage stanza is acknowledged by the server (delivered) or handed back.
        let delivered = await withTaskGroup(of: Bool.self) { group in
            for client in clients {
                group.addTask {
                    (try? await withTimeout(.seconds(20)) { try await client.flush() }) != nil
                }
            }
            var count = 0
            for await ok in group where ok { count += 1 }
            return count
        }
        let back = record.backTimes.map { Double(Int64($0) - Int64(listening)) / 1e9 }
        for client in clients { await client.disconnect() }
        return Outcome(
            label: label,
            back: back,
            offline: count - back.count,
            sent: count,
            delivered: delivered,
            handedBack: record.handedBackCount
        )
    }

    /// One SignalR run: connect the fleet (WebSockets), kill the hub, start it again, wait for
    /// everyone to be connected again.
    static func hubFleet(_ count: Int, policy: ReconnectPolicy, label: String) async throws -> Outcome {
        let hub = try BenchHub()
        defer { hub.stop() }
        try hub.start()
        let record = Record()
        var connections: [HubConnection] = []
        for index in 0..<count {
            var builder = HubConnectionBuilder(url: hub.url).withAutomaticReconnect(policy)
            builder.options.randomSeed = UInt64(index + 1) &* 0x9E37_79B9_7F4A_7C15
            let connection = try builder.build()
            connection.setEventHandler(queue: DispatchQueue(label: "fleet.events")) { event in
                if case .lifecycle(.connected) = event { record.back(index, at: DispatchTime.now().uptimeNanoseconds) }
            }
            connections.append(connection)
        }
        try await inBatches(connections, of: 100) { try await $0.start() }
        try await Task.sleep(for: .seconds(2))
        record.killed(at: DispatchTime.now().uptimeNanoseconds)
        hub.kill()
        try await Task.sleep(for: .milliseconds(3500))
        try hub.start()
        let listening = DispatchTime.now().uptimeNanoseconds
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, record.backCount < count {
            try await Task.sleep(for: .milliseconds(100))
        }
        let back = record.backTimes.map { Double(Int64($0) - Int64(listening)) / 1e9 }
        for connection in connections { await connection.stop() }
        return Outcome(
            label: label,
            back: back,
            offline: count - back.count,
            sent: 0,
            delivered: 0,
            handedBack: 0,
            countsStanzas: false
        )
    }

    /// Runs `body` on every client, `size` at a time (the server takes the logins as it can).
    static func inBatches<Client: Sendable>(
        _ clients: [Client],
        of size: Int,
        _ body: @escaping @Sendable (Client) async throws -> Void
    ) async throws {
        var index = 0
        while index < clients.count {
            let batch = clients[index..<min(clients.count, index + size)]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in batch { group.addTask { try await body(client) } }
                try await group.waitForAll()
            }
            index += batch.count
        }
    }

    /// What the clients' handlers record, from their queues.
    final class Record: @unchecked Sendable {
        private let lock = NSLock()
        private var backAt: [Int: UInt64] = [:]
        private var handed = 0
        private var killedAt: UInt64 = .max

        func killed(at time: UInt64) { lock.withLock { killedAt = time } }
        /// Client `index` is online at `time` (counted once, after the kill).
        func back(_ index: Int, at time: UInt64) {
            lock.withLock { if time > killedAt, backAt[index] == nil { backAt[index] = time } }
        }
        func handedBack(_ count: Int) { lock.withLock { handed += count } }
        var backCount: Int { lock.withLock { backAt.count } }
        var backTimes: [UInt64] { lock.withLock { Array(backAt.values) } }
        var handedBackCount: Int { lock.withLock { handed } }
    }

    /// `body`, or nil after `timeout`.
    static func withTimeout<T: Sendable>(
        _ timeout: Duration,
        _ body: @escaping @Sendable () async throws -> T
    )
        async throws -> T?
    {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// The arrivals after the server listened again, per 100 ms, one row of bars per run.
    static func histogram(_ outcomes: [Outcome], fleet: Int) -> String {
        let width = 900.0
        let rowHeight = 160.0
        let bins = 150  // 15 s
        var svg =
            "<svg xmlns='http://www.w3.org/2000/svg' width='\(Int(width) + 60)' height='\(Int(rowHeight) * outcomes.count + 40)' font-family='sans-serif' font-size='12'>"
        svg +=
            "<text x='10' y='16'>Clients back per 100 ms after the server listened again (\(fleet) clients, 0–15 s)</text>"
        for (row, outcome) in outcomes.enumerated() {
            var counts = [Int](repeating: 0, count: bins)
            var later = 0
            for time in outcome.back where time >= 0 {
                if Int(time * 10) < bins { counts[Int(time * 10)] += 1 } else { later += 1 }
            }
            let top = Double(max(1, counts.max() ?? 1))
            let base = 30 + rowHeight * Double(row + 1) - 10
            svg +=
                "<text x='10' y='\(Int(base - rowHeight + 30))'>\(Chart.escape(outcome.label)): peak \(Int(top)) per 100 ms"
                + (later > 0 ? ", \(later) after 15 s" : "") + "</text>"
            for (bin, value) in counts.enumerated() where value > 0 {
                let height = (rowHeight - 40) * Double(value) / top
                svg += String(
                    format: "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%@'/>",
                    40 + width * Double(bin) / Double(bins),
                    base - height,
                    width / Double(bins) - 1,
                    height,
                    row % 2 == 0 ? "#3b7dd8" : "#d8583b"
                )
            }
        }
        return svg + "</svg>"
    }
}

/// A throw-away prosody for the fleet: one account (`fleet`), cleartext, PLAIN allowed, stream
/// management on; its data kept across `kill()` and `start()`.
final class BenchProsody {
    static let password = "fleetpass"
    let port: Int
    let directory: String
    private var process: Process?

    init() throws {
        port = Self.freePort()
        directory = NSTemporaryDirectory() + "tether-fleet-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory + "/data", withIntermediateDirectories: true)
        let configuration = """
            run_as_root = true
            data_path = "\(directory)/data"
            pidfile = "\(directory)/prosody.pid"
            plugin_paths = {}
            admins = {}
            interfaces = { "127.0.0.1" }
            c2s_ports = { \(port) }
            c2s_direct_tls_ports = {}
            s2s_ports = {}
            http_ports = {}
            https_ports = {}
            modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "smacks"; "posix"; }
            modules_disabled = { "s2s"; "offline"; "tls"; }
            c2s_require_encryption = false
            allow_unencrypted_plain_auth = true
            authentication = "internal_plain"
            limits = { c2s = { rate = "100mb/s" } }
            log = { { levels = { min = "error" }, to = "file", filename = "\(directory)/prosody.log" } }
            VirtualHost "localhost"
            """
        try configuration.write(toFile: directory + "/prosody.cfg.lua", atomically: true, encoding: .utf8)
        let register = try Self.launch(
            "/usr/bin/prosodyctl",
            ["--config", directory + "/prosody.cfg.lua", "register", "fleet", "localhost", Self.password]
        )
        register.waitUntilExit()
        guard register.terminationStatus == 0 else { throw BenchError("prosodyctl register failed") }
    }

    /// A free port on 127.0.0.1 (bound, read and released).
    static func freePort() -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        close(socket)
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func launch(_ path: String, _ arguments: [String]) throws -> Process {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchError("\(path) is missing: the fleet benchmark needs prosody (apt-get install prosody)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Starts prosody and waits until it accepts connections.
    func start() throws {
        process = try Self.launch("/usr/bin/prosody", ["-F", "--config", directory + "/prosody.cfg.lua"])
        guard Self.accepts(port: port) else { throw BenchError("prosody did not start on port \(port)") }
    }

    /// Whether 127.0.0.1:`port` accepts connections within 10 s.
    static func accepts(port: Int) -> Bool {
        for _ in 0..<400 {
            if acceptsNow(port: port) { return true }
            usleep(25_000)
        }
        return false
    }

    static func acceptsNow(port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// SIGKILL: every connection drops at once, as in a crash.
    func kill() {
        guard let process else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    func stop() {
        kill()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A throw-away aiosignalr hub for the fleet (`Tests/TetherTestServers/Resources/signalr_hub.py`
/// on the Python of `.build/venv-aiosignalr`, which `Tests/run.sh` makes), on one port across
/// `kill()` and `start()`.
final class BenchHub {
    static let python = ".build/venv-aiosignalr/bin/python"
    static let script = "Tests/TetherTestServers/Resources/signalr_hub.py"
    let port = BenchProsody.freePort()
    private var process: Process?

    var url: String { "http://127.0.0.1:\(port)/hub" }

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python),
            FileManager.default.fileExists(atPath: Self.script)
        else {
            throw BenchError(
                "the SignalR fleet needs aiosignalr in \(Self.python), run from the package's directory "
                    + "(Tests/run.sh makes it: python3 -m venv .build/venv-aiosignalr && "
                    + ".build/venv-aiosignalr/bin/pip install aiosignalr==0.1.1)"
            )
        }
    }

    /// Starts the hub (its keep-alive at 15 s, as a production hub's) and waits until it accepts
    /// connections.
    func start() throws {
        process = try BenchProsody.launch(Self.python, [Self.script, String(port), "15"])
        guard BenchProsody.accepts(port: port) else { throw BenchError("the hub did not start on port \(port)") }
    }

    /// SIGKILL: every connection drops at once, as in a crash.
    func kill() {
        guard let process else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    func stop() { kill() }
}
