public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a test server could not run.
public struct TestServerError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// A throw-away prosody (13, from Debian's bookworm-backports) on 127.0.0.1 for one test: its own data directory,
/// a free port, the given accounts; started by `start()`, stopped by `stop()` (or when released).
/// The recipe (`Specs/testing.md`): loopback only, no s2s, no HTTP, plain
/// authentication allowed on the cleartext stream (for the PLAIN tests), stream management and
/// ping modules on.
public final class ProsodyServer: @unchecked Sendable {
    // Mutable state is touched only by the test that owns the server, one call at a time.
    public let port: Int
    /// The port for direct TLS (XEP-0368), when the server has certificates.
    public let directTLSPort: Int?
    /// The HTTP port of XMPP over WebSocket (`mod_websocket`), when asked for.
    public let webSocketPort: Int?
    /// The HTTPS port of XMPP over WebSocket, when asked for with certificates.
    public let secureWebSocketPort: Int?
    public let directory: URL
    public let domain = "localhost"
    private var process: ChildProcess?
    /// Where it runs and listens (nil: this machine's 127.0.0.1).
    private let namespace: (NetworkNamespace, address: String)?

    /// Whether prosody 13 and the community modules are installed (`Tests/run.sh` installs them
    /// from bookworm-backports; a developer machine may not have them, or have Debian 12's 0.12).
    public static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/prosody")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/prosodyctl")
            && installedVersion?.hasPrefix("13.") == true
            && FileManager.default.fileExists(atPath: "/usr/lib/prosody/modules/mod_sasl2")
    }

    /// The installed prosody's version (`/usr/lib/prosody/prosody.version`), nil without one.
    public static var installedVersion: String? {
        (try? String(contentsOfFile: "/usr/lib/prosody/prosody.version", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A server (not started) whose accounts are `accounts` (name, password).
    /// `authentication`: `internal_plain` offers SCRAM-SHA-1, SCRAM-SHA-256 and PLAIN;
    /// `internal_hashed` SCRAM-SHA-1 and PLAIN. With `certificates` the server also offers
    /// STARTTLS (required with `requireEncryption`) and direct TLS on `directTLSPort`, with the
    /// certificate for `localhost` that the test CA signed. With `webSocket` it also serves XMPP
    /// over WebSocket (RFC 7395) at `webSocketURL` (and, with certificates, `secureWebSocketURL`).
    /// `extraModules` are enabled besides the usual ones (community modules such as `sasl_ssdp`).
    public init(
        authentication: String = "internal_plain",
        accounts: [(String, String)] = [("alice", "alicepass"), ("bob", "bobpass")],
        certificates: TestCertificates? = nil,
        requireEncryption: Bool = false,
        webSocket: Bool = false,
        in namespace: (NetworkNamespace, address: String)? = nil,
        port fixedPort: Int? = nil,
        extraModules: [String] = [],
        extraConfiguration: String = ""
    ) throws {
        self.namespace = namespace
        guard RealServer.prosody.isInstalled else { throw TestServerError(RealServer.prosody.missingText) }
        port = try fixedPort ?? freeLoopbackPort()
        directTLSPort = certificates == nil ? nil : try freeLoopbackPort()
        webSocketPort = webSocket ? try freeLoopbackPort() : nil
        secureWebSocketPort = webSocket && certificates != nil ? try freeLoopbackPort() : nil
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-prosody-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("data"),
            withIntermediateDirectories: true
        )
        // The offline store is off unless a test asks for it (`extraModules: ["offline"]`).
        let offline = extraModules.contains("offline") ? "" : #" "offline";"#
        var tls = #"modules_disabled = { "s2s";"# + offline + #" "tls"; }"# + "\nc2s_direct_tls_ports = {}"
        if let certificates {
            let certs = directory.appendingPathComponent("certs")
            try FileManager.default.createDirectory(at: certs, withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                atPath: certificates.serverCertificate,
                toPath: certs.appendingPathComponent("localhost.crt").path
            )
            try FileManager.default.copyItem(
                atPath: certificates.serverKey,
                toPath: certs.appendingPathComponent("localhost.key").path
            )
            // The host `misnamed.test` is served with the certificate for `other.test`, so a
            // client's host-name check must reject it.
            try FileManager.default.copyItem(
                atPath: certificates.otherCertificate,
                toPath: certs.appendingPathComponent("misnamed.test.crt").path
            )
            try FileManager.default.copyItem(
                atPath: certificates.otherKey,
                toPath: certs.appendingPathComponent("misnamed.test.key").path
            )
            tls =
                #"modules_disabled = { "s2s";"# + offline + " }\ncertificates = \"\(certs.path)\""
                + "\nc2s_direct_tls_ports = { \(directTLSPort!) }"
        }
        var http = "http_ports = {}\nhttps_ports = {}"
        var modules = #""roster"; "saslauth"; "disco"; "ping"; "smacks"; "posix"; "tls";"#
        for module in extraModules where module != "offline" { modules += " \"\(module)\";" }
        if let webSocketPort {
            modules += #" "websocket";"#
            http = "http_ports = { \(webSocketPort) }\nhttp_interfaces = { \"127.0.0.1\" }"
            if let secureWebSocketPort {
                let certs = directory.appendingPathComponent("certs").path
                http += "\nhttps_ports = { \(secureWebSocketPort) }\nhttps_interfaces = { \"127.0.0.1\" }"
                http += "\nhttps_ssl = { certificate = \"\(certs)/localhost.crt\"; key = \"\(certs)/localhost.key\"; }"
            } else {
                http += "\nhttps_ports = {}"
            }
        }
        let configuration = """
            run_as_root = true
            data_path = "\(directory.path)/data"
            pidfile = "\(directory.path)/prosody.pid"
            plugin_paths = {}
            admins = {}
            interfaces = { "\(namespace?.address ?? "127.0.0.1")" }
            c2s_ports = { \(port) }
            s2s_ports = {}
            \(http)
            modules_enabled = { \(modules) }
            \(tls)
            c2s_require_encryption = \(requireEncryption)
            allow_unencrypted_plain_auth = true
            authentication = "\(authentication)"
            log = { { levels = { min = "debug" }, to = "file", filename = "\(directory.path)/prosody.log" } }
            \(extraConfiguration)
            VirtualHost "localhost"
            \(certificates == nil ? "" : "VirtualHost \"misnamed.test\"")
            """
        try configuration.write(to: configurationFile, atomically: true, encoding: .utf8)
        for (name, password) in accounts {
            try run("/usr/bin/prosodyctl", ["--config", configurationFile.path, "register", name, domain, password])
        }
    }

    /// `ws://127.0.0.1:PORT/xmpp-websocket`, when serving WebSocket.
    public var webSocketURL: String? { webSocketPort.map { "ws://127.0.0.1:\($0)/xmpp-websocket" } }
    /// `wss://localhost:PORT/xmpp-websocket` (the certificate's name), when serving it with TLS.
    public var secureWebSocketURL: String? { secureWebSocketPort.map { "wss://localhost:\($0)/xmpp-websocket" } }

    private var configurationFile: URL { directory.appendingPathComponent("prosody.cfg.lua") }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts prosody and waits until its ports accept connections.
    public func start() async throws {
        precondition(process == nil, "prosody is already running")
        let console = directory.appendingPathComponent("console.log").path
        let arguments = ["-F", "--config", configurationFile.path]
        let process = try ChildProcess.launch("/usr/bin/prosody", arguments, in: namespace?.0, output: console)
        self.process = process
        if let (namespace, address) = namespace {
            if await process.waitUntilAccepting(host: address, port: port, in: namespace, timeout: 60) { return }
            stop()
            throw TestServerError("prosody did not start on \(address):\(port) in \(namespace.name)")
        }
        // Generous: at the start of a test run on 2 cores many servers start at once.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            // Both listeners: prosody opens the direct-TLS port a moment after the plain one.
            if canConnect(port: port) && directTLSPort.map({ canConnect(port: $0) }) != false
                && webSocketPort.map({ canConnect(port: $0) }) != false
                && secureWebSocketPort.map({ canConnect(port: $0) }) != false
            {
                return
            }
            guard process.isRunning else { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let consoleText = (try? String(contentsOfFile: console, encoding: .utf8)) ?? ""
        let exited = !process.isRunning
        stop()
        throw TestServerError(
            "prosody \(exited ? "exited" : "did not listen within 60 s") on port \(port) "
                + "(direct TLS \(directTLSPort.map(String.init) ?? "none"), "
                + "WebSocket \(webSocketPort.map(String.init) ?? "none")): \(consoleText.suffix(1000)) \(logTail)"
        )
    }

    /// Stops prosody (SIGTERM, then SIGKILL after 5 s) and waits for it to exit.
    public func stop() {
        process?.terminate()
        process = nil
    }

    /// prosody's whole log (debug level), for tests that check what the server did.
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("prosody.log"), encoding: .utf8)) ?? ""
    }

    /// The end of prosody's log, for failure messages.
    public var logTail: String {
        let log = (try? String(contentsOf: directory.appendingPathComponent("prosody.log"), encoding: .utf8)) ?? ""
        return String(log.suffix(4000))
    }
}

/// Runs a program to completion; throws with its output when it fails.
func run(_ path: String, _ arguments: [String]) throws {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("tether-run-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: output) }
    let process = try ChildProcess(path, arguments, output: output)
    let status = process.wait()
    guard status == 0 else {
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        throw TestServerError("\(path) \(arguments.joined(separator: " ")) failed (\(status)): \(text)")
    }
}

/// A child process started with posix_spawn, its output (stdout and stderr) going to a file.
/// (Foundation's `Process.waitUntilExit` spins a run loop on Linux; this waits with waitpid.)
final class ChildProcess: @unchecked Sendable {
    // Used by one test at a time.
    let pid: pid_t
    private var exitStatus: Int32?

    init(_ path: String, _ arguments: [String], output: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // A clean signal mask and default handlers: the spawning thread may block signals
        // (Dispatch's threads do), and a child inherits that, which would make it deaf to SIGTERM.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let status = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard status == 0 else { throw TestServerError("cannot start \(path): \(String(cString: strerror(status)))") }
        self.pid = pid
    }

    deinit {
        terminate()
    }

    /// Whether it still runs.
    var isRunning: Bool {
        guard exitStatus == nil else { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid {
            exitStatus = status
            return false
        }
        return true
    }

    /// Waits for the exit and returns the raw wait status (0: exit code 0).
    @discardableResult
    func wait() -> Int32 {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        exitStatus = status
        return status
    }

    /// SIGTERM, then SIGKILL if it has not exited after 5 s; waits for the exit.
    func terminate() {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        for _ in 0..<250 {
            if !isRunning { return }
            usleep(20_000)
        }
        kill(pid, SIGKILL)
        wait()
    }
}

/// A port on 127.0.0.1, free for TCP and UDP a moment ago, for a server that a test starts.
///
/// It lies below the kernel's ephemeral range, so no client socket of the test run (whose local
/// port the kernel picks from that range) can take it before the server binds it, and it is never
/// handed out twice in this process. A port the kernel picked (`bind` to port 0) is from that
/// range: prosody once failed to start in CI on such a port while other tests made connections.
public func freeLoopbackPort() throws -> Int {
    try LoopbackPorts.shared.next()
}

/// The ports `freeLoopbackPort()` hands out: from 20000 up to the start of the ephemeral range,
/// starting at a place that depends on the process, wrapping around.
private final class LoopbackPorts: @unchecked Sendable {
    static let shared = LoopbackPorts()
    private let lock = NSLock()
    private let range: Range<Int>
    private var nextPort: Int
    private var handedOut: Set<Int> = []

    private init() {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let ephemeralStart = text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
        range = 20000..<max(ephemeralStart, 21000)
        nextPort = range.lowerBound + Int(getpid()) % range.count
    }

    func next() throws -> Int {
        lock.lock()
        defer { lock.unlock() }
        for _ in 0..<range.count {
            let port = nextPort
            nextPort = nextPort + 1 == range.upperBound ? range.lowerBound : nextPort + 1
            guard !handedOut.contains(port), Self.isFree(port) else { continue }
            handedOut.insert(port)
            return port
        }
        throw TestServerError("no free loopback port in \(range)")
    }

    /// Whether 127.0.0.1:`port` can be bound for TCP and for UDP now.
    private static func isFree(_ port: Int) -> Bool {
        for type in [Int32(SOCK_STREAM.rawValue), Int32(SOCK_DGRAM.rawValue)] {
            let fd = socket(AF_INET, type, 0)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var address = loopbackAddress(port: port)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { return false }
        }
        return true
    }
}

/// A TCP socket bound to 127.0.0.1 on a free port (listening when `listening`, with `backlog`),
/// and the port.
public func boundLoopbackSocket(
    listening: Bool,
    backlog: Int32 = 16,
    reuseAddress: Bool = false
) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestServerError("socket failed") }
    if reuseAddress {
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    }
    var address = loopbackAddress(port: 0)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0, !listening || listen(fd, backlog) == 0 else {
        close(fd)
        throw TestServerError(listening ? "bind/listen failed" : "bind failed")
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}

/// A blocking TCP socket connected to 127.0.0.1:`port`, or nil when the connect fails.
func connectedLoopbackSocket(port: Int) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
    guard connected else {
        close(fd)
        return nil
    }
    return fd
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func canConnect(port: Int) -> Bool {
    guard let fd = connectedLoopbackSocket(port: port) else { return false }
    close(fd)
    return true
}
