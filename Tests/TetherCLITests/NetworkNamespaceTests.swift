import Foundation
import Testing
import TetherTestServers

/// The device's network for real: network namespaces made by each test (as root), links brought
/// up and down, addresses added, so that the kernel sends real rtnetlink events. The `tether`
/// executable runs inside them: `tether network` (the monitor alone) and `tether xmpp
/// --network-watch` (the client fed by it) against a prosody in a second namespace, reached
/// over a veth link the test cuts.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.networkNamespaces, .prosody, .aiosignalr, .dnsmasq)
)
struct NetworkNamespaceTests {
    /// The `tether` executable next to the test bundle (built by `swift test` with the rest).
    static var tether: String {
        get throws {
            let path = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("tether").path
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw TestServerError("the tether executable is not built at \(path) (swift build)")
            }
            return path
        }
    }

    static func network(_ available: Bool, _ interfaces: [String]) -> String {
        #"{"event":"network","available":\#(available),"interfaces":["#
            + interfaces.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
    }

    /// Links and addresses come and go: the monitor reports each change of the path (a usable
    /// interface with an address and a route, and which ones), and nothing else.
    @Test func theMonitorFollowsLinksAndAddresses() async throws {
        let namespace = try NetworkNamespace()
        let monitor = try namespace.spawn(try Self.tether, ["network"])
        func expect(_ line: String, after index: Int, timeout: Duration = .seconds(10)) async throws -> Int {
            let found = await monitor.waitForLine(after: index, timeout: timeout) { $0 == line }
            try #require(found != nil, "no \(line) after line \(index): \(monitor.lines)")
            return found! + 1
        }
        // The first report waits for the process to start, which a loaded test run can delay
        // past 10 s (seen once in CI, with the line arriving just after).
        var next = try await expect(Self.network(false, []), after: 0, timeout: .seconds(30))  // only loopback
        try namespace.ip("link", "add", "v0", "type", "veth", "peer", "name", "v1")
        try namespace.ip("link", "set", "v1", "up")  // no address: not usable
        try namespace.ip("addr", "add", "10.77.1.1/24", "dev", "v0")
        try namespace.ip("link", "set", "v0", "up")
        next = try await expect(Self.network(true, ["v0"]), after: next)
        try namespace.ip("link", "add", "w0", "type", "veth", "peer", "name", "w1")
        try namespace.ip("link", "set", "w1", "up")
        try namespace.ip("addr", "add", "10.77.2.1/24", "dev", "w0")
        try namespace.ip("link", "set", "w0", "up")
        next = try await expect(Self.network(true, ["v0", "w0"]), after: next)  // another network
        try namespace.ip("addr", "del", "10.77.1.1/24", "dev", "v0")
        next = try await expect(Self.network(true, ["w0"]), after: next)
        try namespace.ip("link", "set", "w0", "down")
        next = try await expect(Self.network(false, []), after: next)
        try namespace.ip("addr", "add", "10.77.1.1/24", "dev", "v0")
        next = try await expect(Self.network(true, ["v0"]), after: next)
        #expect(monitor.lines.count == next, "\(monitor.lines)")  // no report without a change
    }

    /// The client in one namespace, prosody in another, a veth link between them. The link goes
    /// down: the monitor says so, the client's probe finds the stream dead within its 5 s, and
    /// no attempt is made while the path is gone (no `reconnecting`, however long). The link
    /// comes back: the session is resumed (XEP-0198) within a second, not after a back-off.
    @Test func theClientWaitsForThePathAndResumesAtOnce() async throws {
        let client = try NetworkNamespace()
        let server = try NetworkNamespace()
        try client.link("v0", address: "10.77.0.1/24", to: server, "v1", address: "10.77.0.2/24")
        let prosody = try ProsodyServer(in: (server, address: "10.77.0.2"))
        try await prosody.start()
        let process = try client.spawn(
            try Self.tether,
            [
                "xmpp", "--jid", "alice@localhost/ns", "--host", "10.77.0.2", "--port", "\(prosody.port)", "--tls",
                "disabled", "--allow-plain", "--network-watch", "--reconnect", "tiered", "listen",
            ],
            environment: ["TETHER_PASSWORD": "alicepass"]
        )
        defer { process.terminate() }
        let connected = try await #require(
            process.waitForLine { $0.hasPrefix(#"{"event":"connected""#) },
            "\(process.lines)"
        )
        #expect(process.lines.contains(Self.network(true, ["v0"])))
        _ = try await #require(
            process.waitForLine(after: connected) { $0 == #"{"event":"stream-management","resumable":true}"# },
            "\(process.lines)"
        )
        try client.ip("link", "set", "v0", "down")
        let down = try await #require(
            process.waitForLine(after: connected) { $0 == Self.network(false, []) },
            "\(process.lines)"
        )
        let waiting = try await #require(
            process.waitForLine(after: down, timeout: .seconds(10)) { $0 == #"{"event":"waiting-for-network"}"# },
            "\(process.lines)"
        )
        #expect(process.lines[down...waiting].contains { $0.hasPrefix(#"{"event":"connection-lost""#) })
        // Longer than the policy's first delay (3 s): no attempt. (A duration under test.)
        try await Task.sleep(for: .seconds(4))
        #expect(!process.lines[waiting...].contains { $0.hasPrefix(#"{"event":"reconnecting""#) }, "\(process.lines)")
        let restored = ContinuousClock.now
        try client.ip("link", "set", "v0", "up")
        let resumed = try await #require(
            process.waitForLine(after: waiting, timeout: .seconds(5)) { $0.hasPrefix(#"{"event":"resumed","jid":"#) },
            "\(process.lines)"
        )
        let elapsed = ContinuousClock.now - restored
        #expect(elapsed < .seconds(1), "resumed \(elapsed) after the link came back")
        #expect(!process.lines[waiting...resumed].contains { $0.hasPrefix(#"{"event":"reconnecting""#) })
    }

    /// The same for a SignalR hub connection with stateful reconnect, against aiosignalr in the
    /// other namespace: the link down makes the probe (a ping, and 20 s for anything to arrive,
    /// more than the hub's keep-alive) give the link up; no attempt while the path is gone; the
    /// link back reopens the same connection (a resume, in the health lines) within a second.
    @Test func theHubConnectionWaitsForThePathAndResumesAtOnce() async throws {
        let client = try NetworkNamespace()
        let server = try NetworkNamespace()
        try client.link("v0", address: "10.78.0.1/24", to: server, "v1", address: "10.78.0.2/24")
        let hub = try SignalRHubServer(in: (server, address: "10.78.0.2"))
        try await hub.start()
        let process = try client.spawn(
            try Self.tether,
            [
                "signalr", "--url", hub.url, "--stateful", "--network-watch", "--health", "0.1", "--reconnect",
                "tiered",
                "listen", "Notify", "--seconds", "90",
            ]
        )
        defer { process.terminate() }
        let connected = try await #require(
            process.waitForLine { $0.hasPrefix(#"{"event":"connected""#) },
            "\(process.lines)"
        )
        // The monitor has reported the link (so that its going down is a change it reports).
        _ = try await #require(process.waitForLine { $0 == Self.network(true, ["v0"]) }, "\(process.lines)")
        try client.ip("link", "set", "v0", "down")
        let down = try await #require(
            process.waitForLine(after: connected) { $0 == Self.network(false, []) },
            "\(process.lines)"
        )
        let waiting = try await #require(
            process.waitForLine(after: down, timeout: .seconds(25)) { $0 == #"{"event":"waiting-for-network"}"# },
            "\(process.lines.filter { !$0.contains("health") })"
        )
        // Longer than the policy's first delay (3 s): no attempt. (A duration under test.)
        try await Task.sleep(for: .seconds(4))
        #expect(!process.lines[waiting...].contains { $0.hasPrefix(#"{"event":"reconnecting""#) })
        let restored = ContinuousClock.now
        try client.ip("link", "set", "v0", "up")
        let resumed = await process.waitForLine(after: waiting, timeout: .seconds(5)) {
            $0.contains(#""state":"connected""#) && $0.contains(#""resumes":1"#)
        }
        let elapsed = ContinuousClock.now - restored
        #expect(resumed != nil, "\(process.lines.suffix(5))")
        #expect(elapsed < .milliseconds(1200), "resumed \(elapsed) after the link came back (health lines every 0.1 s)")
        #expect(!process.lines[waiting...].contains { $0.hasPrefix(#"{"event":"connected""#) })  // the same connection
    }

    /// Without --nameserver the SRV records come through the nameservers the system's resolver is
    /// configured with, read through its API (`res_ninit`), not a file of Tether's reading: in a
    /// namespace whose resolver names dnsmasq on 127.0.0.1:53, the SRV record sends `tether xmpp`
    /// to prosody on port 5333.
    @Test func theSystemResolversNameserverFindsTheServer() async throws {
        let namespace = try NetworkNamespace()
        try namespace.setResolvConf("nameserver 127.0.0.1\n")
        let prosody = try ProsodyServer(in: (namespace, address: "127.0.0.1"), port: 5333)
        try await prosody.start()
        let dns = try await DNSServer(
            local: ["localhost"],
            records: [
                .srv("_xmpp-client._tcp.localhost", target: "localhost", port: 5333, priority: 0, weight: 0),
                .address("localhost", ["127.0.0.1"]),
            ],
            in: namespace,
            port: 53
        )
        let process = try namespace.spawn(
            try Self.tether,
            ["xmpp", "--jid", "alice@localhost", "--tls", "disabled", "--allow-plain", "--verbose", "ping"],
            environment: ["TETHER_PASSWORD": "alicepass"]
        )
        let pong = await process.waitForLine { $0.hasPrefix(#"{"event":"pong""#) }
        #expect(pong != nil, "\(process.lines.suffix(12))")
        #expect(process.lines.contains { $0.contains("Connecting to localhost:5333") }, "\(process.lines)")
        #expect(dns.logTail.contains("query[SRV] _xmpp-client._tcp.localhost"), "\(dns.logTail)")
    }

    /// A domain without SRV records is the domain itself on 5222 (RFC 6120 §3.2.2), its address
    /// from the client's own resolver: in a namespace of its own, where nothing else holds port
    /// 5222, prosody listens there, dnsmasq answers the domain's A record and no SRV record, and
    /// `tether xmpp` without --host finds the server.
    @Test func withoutRecordsTheDomainOn5222() async throws {
        let namespace = try NetworkNamespace()
        let prosody = try ProsodyServer(in: (namespace, address: "127.0.0.1"), port: 5222)
        try await prosody.start()
        let dns = try await DNSServer(
            local: ["localhost"],
            records: [.address("localhost", ["127.0.0.1"])],
            in: namespace
        )
        let process = try namespace.spawn(
            try Self.tether,
            [
                "xmpp", "--jid", "alice@localhost", "--nameserver", "127.0.0.1:\(dns.port)", "--tls", "disabled",
                "--allow-plain", "--verbose", "ping",
            ],
            environment: ["TETHER_PASSWORD": "alicepass"]
        )
        let pong = await process.waitForLine { $0.hasPrefix(#"{"event":"pong""#) }
        #expect(pong != nil, "\(process.lines.suffix(12))")
        #expect(process.lines.contains { $0.contains("_xmpp-client._tcp.localhost SRV: none") }, "\(process.lines)")
        #expect(process.lines.contains { $0.contains("Connecting to localhost:5222") }, "\(process.lines)")
    }
}
