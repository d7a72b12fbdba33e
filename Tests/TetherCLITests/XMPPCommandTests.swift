import Foundation
import Testing
import TetherCore
import TetherTestServers
import TetherXMPP

@testable import tether

/// Captures output lines from any thread.
final class Lines: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var stored: [String] = []

    var all: [String] { lock.withLock { stored } }

    var sink: @Sendable (String) -> Void {
        { [self] line in lock.withLock { stored.append(line) } }
    }
}

/// `tether ARGUMENTS` running in process: its output can be watched while it runs.
struct RunningTether: Sendable {
    let output = Lines()
    let errors = Lines()
    let status: Task<Int32, Never>

    init(_ arguments: [String], environment: [String: String] = [:]) {
        let (output, errors) = (output, errors)
        status = Task {
            await runCommandLine(arguments, environment: environment, output: output.sink, errorOutput: errors.sink)
        }
    }

    /// Waits until a line of standard output starts with `prefix`; true if one did.
    func printed(_ prefix: String) async -> Bool {
        await eventually { output.all.contains { $0.hasPrefix(prefix) } }
    }

    /// Waits for the end; the status, standard output and error lines.
    var result: (status: Int32, output: [String], errors: [String]) {
        get async { (await status.value, output.all, errors.all) }
    }
}

/// Runs `tether ARGUMENTS` in process; returns the status, standard output and error lines.
func tether(
    _ arguments: [String],
    environment: [String: String] = [:]
) async -> (status: Int32, output: [String], errors: [String]) {
    let output = Lines()
    let errors = Lines()
    let status = await runCommandLine(
        arguments,
        environment: environment,
        output: output.sink,
        errorOutput: errors.sink
    )
    return (status, output.all, errors.all)
}

struct CommandLineTests {
    @Test func helpExitsZero() async {
        let top = await tether(["--help"])
        #expect(top.status == 0 && top.output.joined().contains("xmpp"))
        let xmpp = await tether(["xmpp", "--help"])
        #expect(xmpp.status == 0 && xmpp.output.joined().contains("usage: tether xmpp --jid JID"))
    }

    @Test(arguments: [
        ["xmpp"], ["xmpp", "--jid", "alice@localhost"], ["xmpp", "--jid", "localhost", "roster"],
        ["xmpp", "--jid", "alice@localhost", "frob"], ["xmpp", "--jid", "alice@localhost", "send", "bob@localhost"],
        ["xmpp", "--jid", "alice@localhost", "--tls", "maybe", "roster"],
        ["xmpp", "--jid", "alice@localhost", "listen", "--count", "0"], ["nonsense"],
        ["xmpp", "--jid", "alice@localhost", "--pin", "short=", "roster"],
        ["xmpp", "--jid", "alice@localhost", "--nameserver", "", "roster"],
        ["xmpp", "--jid", "alice@localhost", "--websocket", "http://localhost/ws", "roster"],
        ["xmpp", "--jid", "alice@localhost", "--websocket", "ws://localhost/ws", "--host", "localhost", "roster"],
        ["xmpp", "--jid", "alice@localhost", "--websocket", "wss://localhost/ws", "--tls", "direct", "roster"],
        ["xmpp", "--jid", "alice@localhost", "--push-service", "push.example", "roster"],
        ["xmpp", "--jid", "alice@localhost", "--push-node", "n", "roster"],
        ["xmpp", "--jid", "alice@localhost", "--state-file", "", "roster"],
    ])
    func usageErrorsExitTwo(_ arguments: [String]) async {
        let result = await tether(arguments)
        #expect(result.status == 2)
        #expect(!result.errors.isEmpty)
    }

    @Test func parsesTheWholeContract() {
        let parsed = XMPPCommand.parse([
            "--jid", "alice@localhost/r", "--password-env", "PW", "--host", "127.0.0.1", "--port", "5999", "--tls",
            "disabled", "--resource", "res", "--allow-plain", "--ping-interval", "20", "--ping-timeout", "2.5",
            "--max-missed-pings", "3", "--reconnect", "tiered", "--no-stream-management", "--verbose", "send",
            "bob@localhost", "hello there", "--count", "4",
        ])
        guard case .command(let command) = parsed else { return #expect(Bool(false), "\(parsed)") }
        #expect(command.action == .send(to: JID("bob@localhost")!, text: "hello there", count: 4))
        let configuration = command.configuration(password: "x")
        #expect(configuration.endpoint == Endpoint(host: "127.0.0.1", port: 5999))
        #expect(configuration.tls == .disabled && configuration.allowPlainOnCleartext)
        #expect(configuration.resource == "res")
        #expect(configuration.autoPing == .init(interval: .seconds(20), timeout: .milliseconds(2500), maximumMissed: 3))
        #expect(configuration.streamManagement == nil)
        #expect(command.passwordVariable == "PW" && command.verbose)
        guard case .command(let listen) = XMPPCommand.parse(["--jid", "a@b", "listen", "--seconds", "1.5"]) else {
            return #expect(Bool(false))
        }
        #expect(listen.action == .listen(count: nil, seconds: 1.5))
        #expect(listen.tls == .required)
        guard
            case .command(let direct) = XMPPCommand.parse([
                "--jid", "a@b", "--tls", "direct", "--ca-file", "ca.pem", "--pin",
                "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "roster",
            ])
        else { return #expect(Bool(false)) }
        #expect(
            direct.tls == .direct && direct.caFile == "ca.pem"
                && direct.pins == ["47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="] && direct.nameServers.isEmpty
        )
        #expect(direct.configuration(password: "x").endpoint == nil)
        guard case .command(let ping) = XMPPCommand.parse(["--jid", "a@b", "ping", "c@d/e"]) else {
            return #expect(Bool(false))
        }
        #expect(ping.action == .ping(JID("c@d/e")))
        guard
            case .command(let webSocket) = XMPPCommand.parse(["--jid", "a@b", "--websocket", "wss://h:5281/x", "ping"])
        else { return #expect(Bool(false)) }
        #expect(webSocket.configuration(password: "x").webSocket == ServerURL("wss://h:5281/x"))
        guard
            case .command(let modern) = XMPPCommand.parse([
                "--jid", "a@b", "--state-file", "/tmp/s.json", "--carbons", "--push-service", "push.example",
                "--push-node", "device", "ping",
            ])
        else { return #expect(Bool(false)) }
        let configuration2 = modern.configuration(password: "x")
        #expect(modern.stateFile == "/tmp/s.json" && configuration2.carbons)
        #expect(configuration2.push == XMPPPushRegistration(service: JID("push.example")!, node: "device"))
    }

    @Test func missingPasswordExitsTwo() async {
        let result = await tether(["xmpp", "--jid", "alice@localhost", "--tls", "disabled", "roster"])
        #expect(result.status == 2)
        #expect(result.errors.first?.contains("TETHER_PASSWORD") == true)
    }
}

/// `tether xmpp` against a real prosody.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.prosody, .opensslCommand, .dnsmasq)
)
struct XMPPCommandServerTests {
    static func common(_ user: String, _ server: ProsodyServer) -> [String] {
        ["xmpp", "--jid", "\(user)@localhost", "--host", "127.0.0.1", "--port", "\(server.port)", "--tls", "disabled"]
    }

    /// `--health`: the health as JSON lines at the interval, with every field the help names.
    @Test func healthLines() async throws {
        let server = try ProsodyServer()
        try await server.start()
        let result = await tether(
            Self.common("alice", server) + ["--allow-plain", "--health", "0.2", "listen", "--seconds", "1"],
            environment: ["TETHER_PASSWORD": "alicepass"]
        )
        #expect(result.status == 0, "\(result.errors)")
        let lines = result.output.filter { $0.hasPrefix(#"{"event":"health""#) }
        #expect(lines.count >= 3, "\(result.output)")
        let online = try #require(lines.last { $0.contains(#""state":"connected""#) }, "\(lines)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(online.utf8)) as? [String: Any])
        for field in [
            "state", "phase", "online_ms", "rtt_ms", "srtt_ms", "dead_link_detected_ms", "reconnect_attempts",
            "reconnect_reasons", "resumes", "failed_resumes", "bytes_sent", "bytes_received", "messages_sent",
            "messages_received", "awaiting_ack", "unsent_bytes", "calls_waiting", "transport", "tls_version", "server",
            "failing_servers",
        ] {
            #expect(object[field] != nil, "no \(field) in \(online)")
        }
        #expect(object["transport"] as? String == "tcp" && (object["bytes_received"] as? Int ?? 0) > 0)
        #expect((object["online_ms"] as? Double ?? 0) > 0)
    }

    @Test func sendAndListen() async throws {
        let server = try ProsodyServer()
        try await server.start()
        let listen = RunningTether(
            Self.common("bob", server) + ["--resource", "cli", "listen", "--count", "3", "--seconds", "20"],
            environment: ["TETHER_PASSWORD": "bobpass"]
        )
        // Bob is online (bound, his presence sent) before Alice logs in.
        #expect(await listen.printed(#"{"event":"connected","jid":"bob@localhost/cli","mechanism":"#))
        let send = await tether(
            Self.common("alice", server) + ["--verbose", "send", "bob@localhost/cli", "hi", "--count", "3"],
            environment: ["TETHER_PASSWORD": "alicepass"]
        )
        #expect(send.status == 0, "\(send.errors)")
        #expect(send.output.first?.hasPrefix(#"{"event":"connected","jid":"alice@localhost/"#) == true)
        #expect(send.output.last == #"{"event":"closed","reason":null}"#)
        // --verbose: the traffic, credentials hidden.
        #expect(send.errors.contains { $0.hasPrefix("tether: trace: Sending <?xml") })
        #expect(send.errors.contains { $0.contains("credentials not shown") })
        #expect(!send.errors.joined().contains("alicepass"))
        let received = await listen.result
        #expect(received.status == 0, "\(received.errors)")
        let messages = received.output.filter { $0.contains(#""event":"message""#) }
        #expect(messages.count == 3)
        #expect(messages.first?.hasPrefix(#"{"event":"message","from":"alice@localhost/"#) == true)
        #expect(
            messages.map { $0.components(separatedBy: #""body":"#).last ?? "" } == [
                #""hi 1"}"#, #""hi 2"}"#, #""hi 3"}"#,
            ]
        )
    }

    @Test func pingAndRoster() async throws {
        let server = try ProsodyServer()
        try await server.start()
        let environment = ["TETHER_PASSWORD": "alicepass"]
        let ping = await tether(Self.common("alice", server) + ["ping"], environment: environment)
        #expect(ping.status == 0, "\(ping.errors)")
        let pong = ping.output.first { $0.hasPrefix(#"{"event":"pong","rtt_ms":"#) }
        #expect(pong != nil, "\(ping.output)")
        let roster = await tether(Self.common("alice", server) + ["roster"], environment: environment)
        #expect(roster.status == 0)
        #expect(roster.output.contains(#"{"event":"roster","items":[]}"#))
        let unknown = await tether(
            Self.common("alice", server) + ["ping", "nobody@localhost/x"],
            environment: environment
        )
        #expect(unknown.status == 0)  // an error reply proves the server answered
    }

    /// Without `--host` the server is found through DNS (`--nameserver` names the DNS server); a
    /// domain whose SRV record says "no service" ends with status 1, naming the lookups.
    @Test func theServerFoundThroughDNS() async throws {
        let server = try ProsodyServer()
        try await server.start()
        let dns = try await DNSServer(
            local: ["localhost"],
            records: [
                .srv("_xmpp-client._tcp.localhost", target: "localhost", port: server.port, priority: 0, weight: 0),
                .address("localhost", ["127.0.0.1"]),
            ]
        )
        let environment = ["TETHER_PASSWORD": "alicepass"]
        let arguments = [
            "xmpp", "--jid", "alice@localhost", "--tls", "disabled", "--allow-plain", "--nameserver",
            "127.0.0.1:\(dns.port)", "--verbose", "ping",
        ]
        let found = await tether(arguments, environment: environment)
        #expect(found.status == 0, "\(found.errors)")
        #expect(found.output.contains { $0.hasPrefix(#"{"event":"pong""#) })
        #expect(found.errors.contains { $0.contains("DNS: _xmpp-client._tcp.localhost SRV") }, "\(found.errors)")
        // The target's address through the same nameserver, and the target tried.
        #expect(found.errors.contains { $0.contains("DNS: localhost A: [127.0.0.1].") }, "\(found.errors)")
        #expect(found.errors.contains { $0.contains("Connecting to localhost:\(server.port)") }, "\(found.errors)")
        let none = try await DNSServer(
            local: ["localhost", "test"],
            records: [.srv("_xmpp-client._tcp.localhost", target: ".", port: 0, priority: 0, weight: 0)]
        )
        let refused = await tether(
            ["xmpp", "--jid", "alice@localhost", "--nameserver", "127.0.0.1:\(none.port)", "ping"],
            environment: environment
        )
        #expect(refused.status == 1)
        #expect(refused.errors.joined().contains("offers no XMPP service"), "\(refused.errors)")
        #expect(refused.errors.joined().contains("_xmpp-client._tcp.localhost"))
        // A domain that does not exist: the same, with NXDOMAIN named.
        let nowhere = await tether(
            ["xmpp", "--jid", "alice@nowhere.test", "--nameserver", "127.0.0.1:\(none.port)", "ping"],
            environment: environment
        )
        #expect(nowhere.status == 1)
        #expect(nowhere.errors.joined().contains("does not exist (NXDOMAIN)"), "\(nowhere.errors)")
        #expect(nowhere.errors.joined().contains("_xmpps-client._tcp.nowhere.test"))
    }

    /// `--websocket`: XMPP over WebSocket (prosody's mod_websocket), ws:// and wss://.
    @Test func overWebSocket() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates, webSocket: true)
        try await server.start()
        let environment = ["TETHER_PASSWORD": "alicepass"]
        let plain = await tether(
            ["xmpp", "--jid", "alice@localhost", "--websocket", server.webSocketURL!, "--verbose", "ping"],
            environment: environment
        )
        #expect(plain.status == 0, "\(plain.errors)")
        #expect(plain.output.contains { $0.hasPrefix(#"{"event":"pong""#) })
        #expect(plain.errors.contains { $0.contains("<open xmlns='urn:ietf:params:xml:ns:xmpp-framing'") })
        let secure = await tether(
            [
                "xmpp", "--jid", "alice@localhost", "--websocket", server.secureWebSocketURL!, "--ca-file",
                certificates.caCertificate, "roster",
            ],
            environment: environment
        )
        #expect(secure.status == 0, "\(secure.errors)")
        #expect(secure.output.contains(#"{"event":"roster","items":[]}"#))
    }

    @Test func overTLSWithACAFile() async throws {
        let certificates = try TestCertificates()
        let server = try ProsodyServer(certificates: certificates, requireEncryption: true)
        try await server.start()
        let environment = ["TETHER_PASSWORD": "alicepass"]
        let base = ["xmpp", "--jid", "alice@localhost", "--host", "127.0.0.1", "--ca-file", certificates.caCertificate]
        let startTLS = await tether(base + ["--port", "\(server.port)", "ping"], environment: environment)
        #expect(startTLS.status == 0, "\(startTLS.errors)")
        #expect(startTLS.output.contains { $0.hasPrefix(#"{"event":"pong""#) })
        let direct = await tether(
            base + ["--tls", "direct", "--port", "\(server.directTLSPort!)", "roster"],
            environment: environment
        )
        #expect(direct.status == 0, "\(direct.errors)")
        // Without the CA file the certificate is refused, at once (no retry loop).
        let untrusted = await tether(
            ["xmpp", "--jid", "alice@localhost", "--host", "127.0.0.1", "--port", "\(server.port)", "ping"],
            environment: environment
        )
        #expect(untrusted.status == 1)
        #expect(
            untrusted.errors.first?.contains("unable to get local issuer certificate") == true,
            "\(untrusted.errors)"
        )
    }

    /// The connected line names the mechanism and the channel binding (tls-exporter on TLS 1.3);
    /// `--channel-binding required` against a server whose -PLUS mechanisms are not listed fails at
    /// once with status 1; `--channel-binding disabled` logs in unbound (`"channel_binding":null`).
    @Test func channelBinding() async throws {
        let certificates = try TestCertificates.shared()
        let environment = ["TETHER_PASSWORD": "alicepass"]
        let server = try ProsodyServer(certificates: certificates)
        try await server.start()
        let base = ["xmpp", "--jid", "alice@localhost", "--host", "127.0.0.1", "--ca-file", certificates.caCertificate]
        let bound = await tether(base + ["--port", "\(server.port)", "ping"], environment: environment)
        #expect(bound.status == 0, "\(bound.errors)")
        let connected = bound.output.first { $0.hasPrefix(#"{"event":"connected""#) } ?? ""
        #expect(
            connected.contains(#""mechanism":"SCRAM-SHA-256-PLUS","channel_binding":"tls-exporter""#),
            "\(connected)"
        )
        let unbound = await tether(
            base + ["--port", "\(server.port)", "--channel-binding", "disabled", "ping"],
            environment: environment
        )
        #expect(unbound.status == 0, "\(unbound.errors)")
        #expect(unbound.output.contains { $0.contains(#""mechanism":"SCRAM-SHA-256","channel_binding":null"#) })
        server.stop()

        let stripped = try ProsodyServer(
            certificates: certificates,
            extraConfiguration: #"disable_sasl_mechanisms = { "DIGEST-MD5"; "SCRAM-SHA-1-PLUS"; "SCRAM-SHA-256-PLUS" }"#
        )
        try await stripped.start()
        let refused = await tether(
            base + ["--port", "\(stripped.port)", "--channel-binding", "required", "ping"],
            environment: environment
        )
        #expect(refused.status == 1)
        #expect(
            refused.errors.contains { $0.contains("Channel binding is required but not possible") },
            "\(refused.errors)"
        )
        #expect(await tether(base + ["--channel-binding", "maybe", "ping"], environment: environment).status == 2)
        stripped.stop()

        // With SASL2 on the server the line says so; --no-sasl2 logs in the RFC 6120 way.
        let sasl2 = try ProsodyServer(
            certificates: certificates,
            extraModules: ["sasl2", "sasl2_bind2", "sasl2_sm", "sasl2_fast"]
        )
        try await sasl2.start()
        let modern = await tether(base + ["--port", "\(sasl2.port)", "ping"], environment: environment)
        #expect(
            modern.output.contains { $0.contains(#""channel_binding":"tls-exporter","sasl2":true"#) },
            "\(modern.output)"
        )
        // The FAST token is announced, never printed.
        #expect(
            modern.output.contains { $0.hasPrefix(#"{"event":"fast-token","mechanism":"HT-SHA-256-EXPR","expiry":"#) }
        )
        #expect(!modern.output.contains { $0.contains("secret-token") })
        let old = await tether(base + ["--port", "\(sasl2.port)", "--no-sasl2", "ping"], environment: environment)
        #expect(old.output.contains { $0.contains(#""sasl2":false"#) }, "\(old.output)")
    }

    /// `--state-file`: the first run keeps the FAST token and the archive position (mode 0600,
    /// never printed); the second logs in with the token and catches up from the archive.
    @Test func aStateFileCarriesTheTokenAndTheArchivePosition() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(
            certificates: certificates,
            extraModules: ["sasl2", "sasl2_bind2", "sasl2_sm", "sasl2_fast", "mam", "offline"],
            extraConfiguration: "default_archive_policy = true"
        )
        try await server.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-state-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let stateFile = directory.appendingPathComponent("alice.json").path
        let alice = [
            "xmpp", "--jid", "alice@localhost", "--host", "127.0.0.1", "--port", "\(server.directTLSPort!)", "--tls",
            "direct", "--ca-file", certificates.caCertificate, "--state-file", stateFile,
        ]
        let bob = Self.common("bob", server)
        let bobEnvironment = ["TETHER_PASSWORD": "bobpass"]
        #expect(await tether(bob + ["send", "alice@localhost", "before"], environment: bobEnvironment).status == 0)

        let first = await tether(alice + ["ping"], environment: ["TETHER_PASSWORD": "alicepass"])
        #expect(first.status == 0, "\(first.errors)")
        let attributes = try FileManager.default.attributesOfItem(atPath: stateFile)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let saved = try JSONDecoder().decode(
            XMPPClientState.self,
            from: Data(contentsOf: URL(fileURLWithPath: stateFile))
        )
        let secret = try #require(saved.fastToken).secret.withUnsafeText { $0 }
        #expect(saved.archivePosition != nil && saved.userAgentID != nil)
        #expect(!(first.output + first.errors).joined().contains(secret))

        #expect(
            await tether(bob + ["send", "alice@localhost", "away", "--count", "3"], environment: bobEnvironment).status
                == 0
        )
        // The second run has no password it could use: the token logs in.
        let second = await tether(
            alice + ["listen", "--seconds", "3"],
            environment: ["TETHER_PASSWORD": "wrong"]
        )
        #expect(second.status == 0, "\(second.errors)")
        #expect(
            second.output.first { $0.hasPrefix(#"{"event":"connected""#) }?.contains(#""fast":true"#) == true,
            "\(second.output)"
        )
        let messages = second.output.filter { $0.hasPrefix(#"{"event":"message""#) }
        #expect(messages.count == 3 && messages.allSatisfy { $0.hasSuffix(#","archived":true}"#) }, "\(messages)")
        #expect(messages.map { $0.contains(#""body":"away 1""#) } == [true, false, false])
        #expect(second.output.contains(#"{"event":"caught-up","count":3,"complete":true}"#), "\(second.output)")
        let rotated = try JSONDecoder().decode(
            XMPPClientState.self,
            from: Data(contentsOf: URL(fileURLWithPath: stateFile))
        )
        #expect(rotated.archivePosition != saved.archivePosition && rotated.userAgentID == saved.userAgentID)
        #expect(!(second.output + second.errors).joined().contains(secret))
        // A file that is not a saved state: status 1, said.
        try Data("nonsense".utf8).write(to: URL(fileURLWithPath: stateFile))
        let broken = await tether(alice + ["ping"], environment: ["TETHER_PASSWORD": "alicepass"])
        #expect(broken.status == 1 && broken.errors.contains { $0.contains("is not a saved state") })
    }

    @Test func authenticationFailureExitsTwoAtOnce() async throws {
        let server = try ProsodyServer()
        try await server.start()
        let start = ContinuousClock.now
        let result = await tether(
            Self.common("alice", server) + ["--reconnect", "tiered", "roster"],
            environment: ["TETHER_PASSWORD": "wrong"]
        )
        #expect(result.status == 2)
        #expect(result.errors.first?.contains("not-authorized") == true)
        #expect(!result.errors.joined().contains("wrong"))
        #expect(ContinuousClock.now - start < .seconds(3))
    }
}
