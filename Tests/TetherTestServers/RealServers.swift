public import Testing
import TetherTestSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real program a suite runs (a server, or a tool that makes what the servers need).
public enum RealServer: Sendable, CaseIterable {
    /// prosody 13, the XMPP server, with the community modules (Debian bookworm-backports:
    /// `prosody`, `prosody-modules`, with `lua-unbound`).
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
            "prosody 13 with the community modules is not installed (found: \(ProsodyServer.installedVersion ?? "none")): "
                + "run Tests/run.sh as root, or add bookworm-backports to the apt sources and "
                + "`sudo apt-get install -t bookworm-backports prosody prosody-modules lua-unbound`"
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
                + "`sudo apt-get install iproute2`, or skip the suites that need root with "
                + "TETHER_SKIP_ROOT_SUITES=1"
        }
    }
}

/// The trait of a suite that drives real servers: `@Suite(.realServers(.prosody))`.
///
/// A server that is missing fails the suite with what is missing and how to install it. A suite
/// is skipped only when asked for: `TETHER_SKIP_REAL_SERVERS=1` skips every real-server suite (a
/// machine without the servers); `TETHER_SKIP_ROOT_SUITES=1` skips only those that need root
/// (network namespaces), so that a developer without root still gets a green run with prosody
/// and aiosignalr. Each suite's outcome goes to the test report (`TestReport`): `ran NAME` once
/// its programs are all there, `missing NAME` when one is not, `skipped NAME` or
/// `skipped-root NAME`; `Tests/run.sh` counts them in its summary line.
public struct RealServersTrait: SuiteTrait {
    /// What the suite needs.
    public let servers: [RealServer]

    /// Whether the environment asks to skip the real-server suites.
    public static var skipRequested: Bool { isSet("TETHER_SKIP_REAL_SERVERS") }

    /// Whether the environment asks to skip the suites that need root.
    public static var skipRootRequested: Bool { isSet("TETHER_SKIP_ROOT_SUITES") }

    static func isSet(_ name: String) -> Bool {
        guard let value = getenv(name).map({ String(cString: $0) }) else { return false }
        return !value.isEmpty && value != "0"
    }

    /// Whether the suite needs root.
    public var needsRoot: Bool { servers.contains(.networkNamespaces) }

    public var isRecursive: Bool { false }

    public func prepare(for test: Test) async throws {
        let skip: (line: String, reason: String)? =
            if Self.skipRequested {
                ("skipped \(test.name)", "TETHER_SKIP_REAL_SERVERS is set")
            } else if needsRoot && Self.skipRootRequested {
                ("skipped-root \(test.name)", "TETHER_SKIP_ROOT_SUITES is set")
            } else {
                nil
            }
        if let skip {
            TestReport.add(skip.line)
            // A condition that is false skips the suite, as `.disabled` does.
            try await ConditionTrait.disabled(Comment(rawValue: skip.reason)).prepare(for: test)
            return
        }
        let missing = servers.filter { !$0.isInstalled }
        guard missing.isEmpty else {
            TestReport.add("missing \(test.name)")
            throw TestServerError(missing.map(\.missingText).joined(separator: "; "))
        }
        TestReport.add("ran \(test.name)")
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
