import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A network namespace made for one test (`ip netns add`, as root) and deleted when released:
/// its own loopback (brought up) and whatever links the test adds, so that bringing a link down
/// or removing an address produces real rtnetlink events and really cuts the traffic over it,
/// without touching the machine's own network. Programs run inside with `spawn`.
public final class NetworkNamespace: @unchecked Sendable {
    // Used by one test at a time.
    public let name: String

    /// Whether namespaces can be made here (root, iproute2).
    public static var isAvailable: Bool { getuid() == 0 && access(ip, X_OK) == 0 }
    static let ip = "/usr/sbin/ip"

    /// A new namespace with `lo` up.
    public init() throws {
        guard Self.isAvailable else { throw TestServerError(RealServer.networkNamespaces.missingText) }
        name = "tether-\(UInt32.random(in: 0...UInt32.max))"
        try run(Self.ip, ["netns", "add", name])
        try ip("link", "set", "lo", "up")
    }

    deinit {
        try? run(Self.ip, ["netns", "delete", name])
        try? FileManager.default.removeItem(atPath: "/etc/netns/\(name)")
    }

    /// The `resolv.conf` programs inside see (`ip netns exec` mounts `/etc/netns/NAME/resolv.conf`
    /// over `/etc/resolv.conf`): the system resolver's configuration of the namespace.
    public func setResolvConf(_ text: String) throws {
        let directory = "/etc/netns/\(name)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try text.write(toFile: directory + "/resolv.conf", atomically: true, encoding: .utf8)
    }

    /// `ip -n NAME ARGUMENTS…`.
    public func ip(_ arguments: String...) throws {
        try run(Self.ip, ["-n", name] + arguments)
    }

    /// A veth pair between two namespaces: `local` here with `localAddress` (CIDR), `remote` in
    /// `other` with `remoteAddress`, both up.
    public func link(
        _ local: String,
        address localAddress: String,
        to other: NetworkNamespace,
        _ remote: String,
        address remoteAddress: String
    ) throws {
        try run(
            Self.ip,
            ["link", "add", local, "netns", name, "type", "veth", "peer", "name", remote, "netns", other.name]
        )
        try ip("addr", "add", localAddress, "dev", local)
        try other.ip("addr", "add", remoteAddress, "dev", remote)
        try ip("link", "set", local, "up")
        try other.ip("link", "set", remote, "up")
    }

    /// Runs `path ARGUMENTS…` inside, with `environment` added, its output (both streams) to a
    /// file of its own.
    public func spawn(
        _ path: String,
        _ arguments: [String],
        environment: [String: String] = [:]
    ) throws
        -> NamespaceProcess
    {
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("tether-netns-\(UUID().uuidString).log").path
        let command =
            ["netns", "exec", name, "/usr/bin/env"]
            + environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            + [path] + arguments
        return NamespaceProcess(try ChildProcess(Self.ip, command, output: output), output: output)
    }

    /// Whether a TCP connection to `host`:`port` succeeds from inside (bash's /dev/tcp).
    public func canConnect(host: String, port: Int) -> Bool {
        (try? run(Self.ip, ["netns", "exec", name, "/bin/bash", "-c", "exec 3<>/dev/tcp/\(host)/\(port)"])) != nil
    }
}

extension ChildProcess {
    /// `path ARGUMENTS…` on this machine, or inside `namespace` (`ip netns exec`).
    static func launch(
        _ path: String,
        _ arguments: [String],
        in namespace: NetworkNamespace?,
        output: String
    ) throws -> ChildProcess {
        guard let namespace else { return try ChildProcess(path, arguments, output: output) }
        return try ChildProcess(
            NetworkNamespace.ip,
            ["netns", "exec", namespace.name, path] + arguments,
            output: output
        )
    }

    /// Waits (up to `timeout`, while it runs) until `host`:`port` accepts a connection, seen from
    /// `namespace` (nil: this machine, where `host` is 127.0.0.1); whether it did.
    /// (Awaiting between tries leaves the test pool's threads to the other tests.)
    func waitUntilAccepting(
        host: String,
        port: Int,
        in namespace: NetworkNamespace?,
        timeout: TimeInterval
    ) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline, isRunning {
            if namespace.map({ $0.canConnect(host: host, port: port) }) ?? canConnect(port: port) { return true }
            try? await Task.sleep(for: .milliseconds(namespace == nil ? 20 : 50))
        }
        return false
    }
}

/// A program running in a `NetworkNamespace`; stopped when released.
public final class NamespaceProcess: @unchecked Sendable {
    private let process: ChildProcess
    private let output: String

    init(_ process: ChildProcess, output: String) {
        self.process = process
        self.output = output
    }

    deinit {
        process.terminate()
        try? FileManager.default.removeItem(atPath: output)
    }

    /// What it printed so far, by line.
    public var lines: [String] {
        ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    public var isRunning: Bool { process.isRunning }

    /// Stops it (SIGTERM, then SIGKILL).
    public func terminate() { process.terminate() }

    /// Waits (polling every 10 ms, up to `timeout`) until a line satisfies `condition`; the line's
    /// index, or nil.
    public func waitForLine(
        after start: Int = 0,
        timeout: Duration = .seconds(10),
        _ condition: (String) -> Bool
    ) async -> Int? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let current = lines
            if current.count > start, let index = current[start...].firstIndex(where: condition) { return index }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}
