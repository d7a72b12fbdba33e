public import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real program a suite runs (a server, or a tool that makes what the servers need).
public enum RealServer: Sendable, CaseIterable {
    /// prosody, the XMPP server (Debian: `prosody`, with `lua-unbound`).
    case prosody
    /// aiosignalr 0.1.1, the SignalR hub, in the virtual environment `.build/venv-aiosignalr`.
    case aiosignalr
    /// The `openssl` command, which makes the throw-away CA and certificates of the TLS tests.
    case opensslCommand
    /// dnsmasq, the DNS server of the DNS tests (Debian: `dnsmasq-base`).
    case dnsmasq
    /// Network namespaces (`ip netns`, as root; Debian: `iproute2`): real links cut and restored.
    case networkNamespaces

    /// Whether it is installed where the tests look for it.
    public var isInstalled: Bool {
        switch self {
        case .prosody: ProsodyServer.isInstalled
        case .aiosignalr: SignalRHubServer.isInstalled
        case .opensslCommand: access("/usr/bin/openssl", X_OK) == 0
        case .dnsmasq: DNSServer.isInstalled
        case .networkNamespaces: NetworkNamespace.isAvailable
        }
    }

    /// What is missing and how to install it.
    public var missingText: String {
        switch self {
        case .prosody:
            "prosody is not installed (/usr/bin/prosody): run Tests/run.sh as root, or "
                + "`sudo apt-get install prosody lua-unbound`"
        case .aiosignalr:
            "aiosignalr is not installed (\(SignalRHubServer.python)): run Tests/run.sh, which makes "
                + "the virtual environment .build/venv-aiosignalr (needs `sudo apt-get install python3-venv`), "
                + "or set TETHER_AIOSIGNALR_PYTHON to a Python that has aiosignalr 0.1.1"
        case .opensslCommand:
            "the openssl command is not installed (/usr/bin/openssl): run Tests/run.sh as root, or "
                + "`sudo apt-get install openssl`"
        case .dnsmasq:
            "dnsmasq is not installed (\(DNSServer.path)): run Tests/run.sh as root, or "
                + "`sudo apt-get install dnsmasq-base`"
        case .networkNamespaces:
            "network namespaces need root and iproute2 (/usr/sbin/ip): run the tests as root, after "
                + "`sudo apt-get install iproute2`"
        }
    }
}

/// The trait of a suite that drives real servers: `@Suite(.realServers(.prosody))`.
///
/// A server that is missing fails the suite with what is missing and how to install it. The
/// suite is skipped only when asked for with the environment variable `TETHER_SKIP_REAL_SERVERS=1`
/// (a machine without the servers). Either way the suite's name goes to the file named by
/// `TETHER_REAL_SERVER_REPORT` (as `ran NAME` or `skipped NAME`), from which `Tests/run.sh` prints
/// how many real-server suites ran and how many were skipped.
public struct RealServersTrait: SuiteTrait {
    /// What the suite needs.
    public let servers: [RealServer]

    /// Whether the environment asks to skip the real-server suites.
    public static var skipRequested: Bool {
        guard let value = getenv("TETHER_SKIP_REAL_SERVERS").map({ String(cString: $0) }) else { return false }
        return !value.isEmpty && value != "0"
    }

    public var isRecursive: Bool { false }

    public func prepare(for test: Test) async throws {
        if Self.skipRequested {
            Self.report("skipped \(test.name)")
            // A condition that is false skips the suite, as `.disabled` does.
            try await ConditionTrait.disabled("TETHER_SKIP_REAL_SERVERS is set").prepare(for: test)
            return
        }
        Self.report("ran \(test.name)")
        let missing = servers.filter { !$0.isInstalled }
        guard missing.isEmpty else {
            throw TestServerError(missing.map(\.missingText).joined(separator: "; "))
        }
    }

    /// Appends `line` to the report file, if there is one.
    static func report(_ line: String) {
        guard let path = getenv("TETHER_REAL_SERVER_REPORT") else { return }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}

extension Trait where Self == RealServersTrait {
    /// A suite that drives `servers` (see `RealServersTrait`).
    public static func realServers(_ servers: RealServer...) -> Self {
        RealServersTrait(servers: servers)
    }
}

/// Waits until `condition` holds (checked every 10 ms) or `timeout` passes; true if it held.
/// The way tests wait for something to happen, instead of sleeping a fixed time.
public func eventually(timeout: Duration = .seconds(15), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await condition()
}
