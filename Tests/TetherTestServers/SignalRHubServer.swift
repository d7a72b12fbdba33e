import Foundation

/// A throw-away aiosignalr 0.1.1 hub (`Resources/signalr_hub.py`) on 127.0.0.1 for one test, run
/// by the Python of the virtual environment `.ci/run` creates (`.build/venv-aiosignalr`, or the
/// interpreter named by `TETHER_AIOSIGNALR_PYTHON`). It can be stopped and started again on the
/// same port (a server restart), and fronted by a TLS relay (`TLSRelay`).
///
/// The hub (method names match case-insensitively): `Echo(text) -> text`, `Add(a, b) -> a + b`,
/// `Counter(n)` streams 0..<n, `Fail(text)` raises a HubException with `text`,
/// `AskClient(question)` returns what the client's `Answer(question)` client result returned,
/// `NotifyMe(text)` sends `Notify(text)` to the caller, `AddToGroup(group) -> group` (a group
/// name, or `{"PlatUserId": N}` for the group `user-N`, refused for a negative N),
/// `PushSaasMessage(N, message)` sends `ReciveSaasMessage(message)` to the group `user-N`,
/// `SendToGroup(group, text)` sends `Notify(text)` to the group, `Broadcast(text)` sends
/// `Notify(text)` to everyone, `SumStream(stream) -> sum`,
/// `Delay(seconds) -> "done"` answers late, `Tally(n) -> n` records `n` and `Tallied() -> [n]` returns the record. Stateful reconnect is
/// allowed, detailed errors are on, and the server's keep-alive interval is 1 s.
public final class SignalRHubServer: @unchecked Sendable {
    // Mutable state is touched only by the test that owns the server, one call at a time.
    public let port: Int
    private let directory: URL
    private var process: ChildProcess?

    /// The package's root directory (from this file's path).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The Python interpreter that has aiosignalr.
    public static var python: String {
        if let path = ProcessInfo.processInfo.environment["TETHER_AIOSIGNALR_PYTHON"], !path.isEmpty { return path }
        return packageRoot.appendingPathComponent(".build/venv-aiosignalr/bin/python").path
    }

    /// Whether the interpreter exists (`.ci/run` creates the environment; a developer machine
    /// may not have it).
    public static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: python)
    }

    static func resource(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Resources/\(name)").path
    }

    /// The hub's URL (`http://127.0.0.1:PORT/hub`, or the namespace's address).
    public var url: String { "http://\(namespace?.address ?? "127.0.0.1"):\(port)/hub" }
    /// Where it runs and listens (nil: this machine's 127.0.0.1).
    private let namespace: (NetworkNamespace, address: String)?

    /// A server on a free port (not started), in `namespace` on its address when given.
    public init(in namespace: (NetworkNamespace, address: String)? = nil) throws {
        self.namespace = namespace
        guard RealServer.aiosignalr.isInstalled else { throw TestServerError(RealServer.aiosignalr.missingText) }
        port = try freeLoopbackPort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-signalr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the hub and waits until its port accepts connections.
    public func start() async throws {
        precondition(process == nil, "the hub is already running")
        let output = directory.appendingPathComponent("hub.log").path
        let arguments = ["-u", Self.resource("signalr_hub.py"), String(port), "1.0", namespace?.address ?? "127.0.0.1"]
        let process = try ChildProcess.launch(Self.python, arguments, in: namespace?.0, output: output)
        self.process = process
        let address = namespace?.address ?? "127.0.0.1"
        if await process.waitUntilAccepting(host: address, port: port, in: namespace?.0, timeout: 60) { return }
        stop()
        throw TestServerError(
            "the aiosignalr hub did not start on \(address):\(port)\(namespace.map { " in \($0.0.name)" } ?? ""): \(logTail)"
        )
    }

    /// Stops the hub (SIGTERM, then SIGKILL after 5 s) and waits for it to exit.
    public func stop() {
        process?.terminate()
        process = nil
    }

    /// The end of the hub's output, for failure messages.
    public var logTail: String {
        let log = (try? String(contentsOf: directory.appendingPathComponent("hub.log"), encoding: .utf8)) ?? ""
        return String(log.suffix(4000))
    }
}

/// A TLS-terminating relay on 127.0.0.1 (`Resources/tls_relay.py`, Python's `ssl`): it presents
/// the test CA's certificate for `localhost` and relays the plaintext to an upstream port, so
/// that a cleartext test server can be reached over `https://` / `wss://`.
public final class TLSRelay: @unchecked Sendable {
    public let port: Int
    private let process: ChildProcess
    private let output: String

    /// A relay to 127.0.0.1:`upstreamPort` with `certificates`' certificate for `localhost` (and
    /// 127.0.0.1), or, with `presentsOtherName`, the one for `other.test` only (a host-name
    /// mismatch for a client that asked for `localhost`).
    public init(upstreamPort: Int, certificates: TestCertificates, presentsOtherName: Bool = false) async throws {
        port = try freeLoopbackPort()
        output =
            FileManager.default.temporaryDirectory.appendingPathComponent("tether-tls-relay-\(UUID().uuidString)")
            .path
        process = try ChildProcess(
            SignalRHubServer.python,
            [
                "-u", SignalRHubServer.resource("tls_relay.py"),
                presentsOtherName ? certificates.otherCertificate : certificates.serverCertificate,
                presentsOtherName ? certificates.otherKey : certificates.serverKey, String(port), String(upstreamPort),
            ],
            output: output
        )
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if canConnect(port: port) { return }
            guard process.isRunning else { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let log = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        process.terminate()
        throw TestServerError("the TLS relay did not start on port \(port): \(log)")
    }

    deinit {
        process.terminate()
        try? FileManager.default.removeItem(atPath: output)
    }
}
