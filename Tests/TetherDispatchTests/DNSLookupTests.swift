import Foundation
import Testing
import TetherCore
import TetherDNS
import TetherDispatch
import TetherTestServers
import TetherXMPP
import TetherXMPPClient

/// The driver's DNS against a real DNS server (dnsmasq on 127.0.0.1): SRV records, CNAME chains,
/// NXDOMAIN, an answer too large for UDP fetched over TCP, a nameserver that does not answer,
/// and `resolv.conf`'s nameservers.
@Suite(.serialized, .timeLimit(.minutes(1)), .realServers(.dnsmasq))
struct DNSLookupTests {
    static func server(extraSRV count: Int = 0) async throws -> DNSServer {
        var records: [DNSServer.Record] = [
            .srv("_xmpp-client._tcp.example.test", target: "xmpp.example.test", port: 5222, priority: 10, weight: 60),
            .srv("_xmpps-client._tcp.example.test", target: "tls.example.test", port: 5223, priority: 5, weight: 0),
            .address("xmpp.example.test", ["127.0.0.1", "::1"]),
            .cname("alias.example.test", target: "xmpp.example.test"),
        ]
        for index in 0..<count {
            records.append(
                .srv(
                    "_big._tcp.example.test",
                    target: "a-rather-long-host-name-number-\(index).example.test",
                    port: 5222,
                    priority: index,
                    weight: 1
                )
            )
        }
        return try await DNSServer(local: ["example.test"], records: records)
    }

    @Test func serviceRecordsAddressesAndAliases() async throws {
        let server = try await Self.server()
        let lookup = DNSLookup(nameServers: [Endpoint(host: "127.0.0.1", port: server.port)])
        let question = DNSQuestion(name: "_xmpp-client._tcp.example.test", type: .srv)
        let srv = try await lookup.resolve(question).get()
        #expect(
            srv.records(for: question.name, type: .srv) == [
                .srv(priority: 10, weight: 60, port: 5222, target: "xmpp.example.test")
            ]
        )
        let a = try await lookup.resolve(DNSQuestion(name: "alias.example.test", type: .a)).get()
        #expect(a.records(for: "alias.example.test", type: .a) == [.a([127, 0, 0, 1])], "\(a)")
        let aaaa = try await lookup.resolve(DNSQuestion(name: "xmpp.example.test", type: .aaaa)).get()
        #expect(aaaa.records(for: "xmpp.example.test", type: .aaaa) == [.aaaa(Array(repeating: 0, count: 15) + [1])])
        let missing = try await lookup.resolve(DNSQuestion(name: "_xmpp-client._tcp.nothing.example.test", type: .srv))
            .get()
        #expect(missing.responseCode == .nameError && missing.answers.isEmpty)
    }

    @Test func anAnswerTooLargeForUDPComesOverTCP() async throws {
        let server = try await Self.server(extraSRV: 60)
        let lookup = DNSLookup(nameServers: [Endpoint(host: "127.0.0.1", port: server.port)])
        let response = try await lookup.resolve(DNSQuestion(name: "_big._tcp.example.test", type: .srv)).get()
        #expect(!response.isTruncated)
        #expect(response.answers.count == 60)
        #expect(server.logTail.contains("query[SRV] _big._tcp.example.test"))
    }

    /// A nameserver that never answers costs one timeout; the next one answers.
    @Test func aSilentNameserverIsPassedOver() async throws {
        let server = try await Self.server()
        let silent = try freeLoopbackPort()  // nothing listens for UDP there
        let lookup = DNSLookup(
            nameServers: [Endpoint(host: "127.0.0.1", port: silent), Endpoint(host: "127.0.0.1", port: server.port)],
            timeout: .milliseconds(300)
        )
        let start = ContinuousClock.now
        let response = try await lookup.resolve(DNSQuestion(name: "xmpp.example.test", type: .a)).get()
        #expect(response.records(for: "xmpp.example.test", type: .a) == [.a([127, 0, 0, 1])])
        #expect(ContinuousClock.now - start >= .milliseconds(300))
        // Every server silent: a failure naming the tries.
        let nobody = DNSLookup(nameServers: [Endpoint(host: "127.0.0.1", port: silent)], timeout: .milliseconds(100))
        guard case .failure(let failure) = await nobody.resolve(DNSQuestion(name: "xmpp.example.test", type: .a)) else {
            return #expect(Bool(false), "an answer from nowhere")
        }
        #expect(failure.message.contains("after 2 tries"), "\(failure)")
    }

    /// Nameservers are written as the sources of their answers will be, or every answer from an
    /// address given in another form would be ignored as coming from elsewhere.
    @Test func nameserversAreWrittenAsAnswersComeFrom() {
        #expect(DNSLookup.canonical(Endpoint(host: "0:0:0:0:0:0:0:1", port: 53)) == Endpoint(host: "::1", port: 53))
        #expect(
            DNSLookup.canonical(Endpoint(host: "2001:DB8:0::53", port: 5353))
                == Endpoint(host: "2001:db8::53", port: 5353)
        )
        #expect(DNSLookup.canonical(Endpoint(host: "192.0.2.53", port: 53)) == Endpoint(host: "192.0.2.53", port: 53))
        #expect(DNSLookup.canonical(Endpoint(host: "dns.example", port: 53)) == nil)
    }

    /// The system resolver's nameservers, through its API (glibc's `res_ninit`): on Linux they
    /// are those of `/etc/resolv.conf`, in order (glibc keeps at most three).
    @Test func theSystemResolversNameservers() {
        let system = DNSLookup.systemNameServers()
        let file = DNSLookup.nameServers(resolvConf: "/etc/resolv.conf")
        #expect(system == Array(file.prefix(3)), "\(system) vs \(file)")
        #expect(!system.isEmpty, "this machine's resolver names no nameserver")
    }

    @Test func resolvConfsNameservers() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("resolv-\(UUID().uuidString).conf")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try
            "# comment\nsearch example.test\nnameserver 192.0.2.53\nnameserver\tfe80::1%eth0\noptions ndots:1\nnameserver 2001:db8::53\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        #expect(
            DNSLookup.nameServers(resolvConf: path) == [
                Endpoint(host: "192.0.2.53", port: 53), Endpoint(host: "fe80::1", port: 53),
                Endpoint(host: "2001:db8::53", port: 53),
            ]
        )
        #expect(DNSLookup.nameServers(resolvConf: path + ".missing").isEmpty)
    }
}

/// `XMPPClient` finding prosody through DNS: the SRV record of the JID's domain (served by
/// dnsmasq) names the host and port; a domain that publishes "no service" fails at once, for
/// good.
@Suite(.serialized, .timeLimit(.minutes(1)), .realServers(.prosody, .dnsmasq, .opensslCommand))
struct XMPPServiceLookupTests {
    @Test func theServerIsFoundThroughItsSRVRecord() async throws {
        let prosody = try await startedProsody()
        let dns = try await DNSServer(
            local: ["localhost"],
            records: [
                .srv("_xmpp-client._tcp.localhost", target: "localhost", port: prosody.port, priority: 0, weight: 0),
                .address("localhost", ["127.0.0.1"]),
            ]
        )
        var configuration = testConfiguration("alice", port: prosody.port)
        configuration.endpoint = nil
        let options = XMPPClient.Options(nameServers: [Endpoint(host: "127.0.0.1", port: dns.port)])
        let client = try XMPPClient(configuration: configuration, options: options)
        let jid = try await client.connect()
        #expect(jid.bare == JID("alice@localhost")!.bare)
        await client.disconnect()
        #expect(dns.logTail.contains("query[SRV] _xmpp-client._tcp.localhost"), "\(dns.logTail)")
        #expect(dns.logTail.contains("query[SRV] _xmpps-client._tcp.localhost"), "\(dns.logTail)")
    }

    /// The targets in priority order: the first (priority 0) refuses the connection, the second
    /// (priority 10) is prosody; both names exist only in the test's DNS server, so their
    /// addresses (A and AAAA) come through the client's own resolver, not the system's.
    @Test func theNextTargetAfterOneThatRefuses() async throws {
        let prosody = try await startedProsody()
        let closedPort = try freeLoopbackPort()
        let dns = try await DNSServer(
            local: ["localhost", "test"],
            records: [
                .srv("_xmpp-client._tcp.localhost", target: "dead.xmpp.test", port: closedPort, priority: 0, weight: 0),
                .srv("_xmpp-client._tcp.localhost", target: "xmpp.test", port: prosody.port, priority: 10, weight: 5),
                .address("dead.xmpp.test", ["127.0.0.1"]),
                .address("xmpp.test", ["127.0.0.1"]),
            ]
        )
        var configuration = testConfiguration("alice", port: prosody.port)
        configuration.endpoint = nil
        let client = try XMPPClient(
            configuration: configuration,
            options: XMPPClient.Options(nameServers: [Endpoint(host: "127.0.0.1", port: dns.port)])
        )
        let events = EventRecorder(client)
        #expect(try await client.connect().bare == JID("alice@localhost")!)
        // One attempt: the refusal moved on to the next target within it.
        #expect(!events.events.contains { if case .lifecycle(.attemptFailed) = $0 { true } else { false } })
        await client.disconnect()
        let log = dns.logTail
        #expect(log.contains("query[A] dead.xmpp.test") && log.contains("query[AAAA] dead.xmpp.test"), "\(log)")
        #expect(log.contains("query[A] xmpp.test"), "\(log)")
        let dead = try #require(log.range(of: "query[A] dead.xmpp.test"))
        let live = try #require(log.range(of: "query[A] xmpp.test"))
        #expect(dead.lowerBound < live.lowerBound)
    }

    /// The first target (priority 10) accepts the connection and ends it at once, as a balancer
    /// with no server behind it (an orderly close, or a reset); the second (priority 20) is
    /// prosody, reached through a relay. The first attempt moves on to the second target within
    /// itself; after a cut, the next attempt tries the working target first and the failing one
    /// last (said in the log and in health).
    @Test(arguments: [FailingTarget.Ending.close, .reset])
    func aTargetThatEndsConnectionsAtOnceIsPassedOver(_ ending: FailingTarget.Ending) async throws {
        let prosody = try await startedProsody()
        let relay = try TCPRelay(upstreamPort: prosody.port)
        let balancer = try FailingTarget(ending)
        let dns = try await DNSServer(
            local: ["localhost", "test"],
            records: [
                .srv(
                    "_xmpp-client._tcp.localhost",
                    target: "balancer.test",
                    port: balancer.port,
                    priority: 10,
                    weight: 0
                ),
                .srv("_xmpp-client._tcp.localhost", target: "xmpp.test", port: relay.port, priority: 20, weight: 0),
                .address("balancer.test", ["127.0.0.1"]),
                .address("xmpp.test", ["127.0.0.1"]),
            ]
        )
        var configuration = testConfiguration("alice", port: 0)
        configuration.endpoint = nil
        configuration.reconnectPolicy = .tiered(repeats: false)
        let lines = Recorder<String>()
        let client = try XMPPClient(
            configuration: configuration,
            options: XMPPClient.Options(
                logLevel: .debug,
                logHandler: { _, text in lines.append(text) },
                nameServers: [Endpoint(host: "127.0.0.1", port: dns.port)]
            )
        )
        let events = EventRecorder(client)
        #expect(try await client.connect().bare == JID("alice@localhost")!)
        #expect(!events.events.contains { if case .lifecycle(.attemptFailed) = $0 { true } else { false } })
        #expect(balancer.connections == 1)
        #expect(
            lines.values.contains(
                "Servers in the order tried: balancer.test:\(balancer.port), xmpp.test:\(relay.port)."
            )
        )
        let health = await client.health()
        #expect(
            health.failingServers == ["balancer.test:\(balancer.port)"] && health.server == "xmpp.test:\(relay.port)"
        )

        let before = lines.values.count
        relay.cutAll()
        // Online again (resumed, or a new session: either way through the working server).
        #expect(
            await events.wait(timeout: .seconds(20)) { $0.filter { $0.isResumed || $0.isConnected }.count == 2 },
            "\(events.events)"
        )
        let after = Array(lines.values.dropFirst(before))
        #expect(
            after.contains(
                "Servers in the order tried: xmpp.test:\(relay.port), balancer.test:\(balancer.port) (last, as they failed before: balancer.test:\(balancer.port))."
            ),
            "\(after)"
        )
        #expect(
            after.first { $0.hasPrefix("Connecting to ") } == "Connecting to xmpp.test:\(relay.port) over TCP (#3).",
            "\(after)"
        )
        #expect(balancer.connections == 1)  // not tried again: the working server came first
        await client.disconnect()
        balancer.stop()
    }

    /// Weights (RFC 2782): two targets of one priority, weights 90 and 10. Over 30 clients
    /// (seeds 1–30) the heavier is tried first most of the time and the lighter at least once;
    /// every client gets online (the lighter target refuses, and the next one is tried).
    @Test func weightsShareTheFirstPlace() async throws {
        let prosody = try await startedProsody()
        let closedPort = try freeLoopbackPort()
        let dns = try await DNSServer(
            local: ["localhost", "test"],
            records: [
                .srv("_xmpp-client._tcp.localhost", target: "heavy.test", port: prosody.port, priority: 5, weight: 90),
                .srv("_xmpp-client._tcp.localhost", target: "light.test", port: closedPort, priority: 5, weight: 10),
                .address("heavy.test", ["127.0.0.1"]),
                .address("light.test", ["127.0.0.1"]),
            ]
        )
        var configuration = testConfiguration("alice", port: 0)
        configuration.endpoint = nil
        var heavyFirst = 0
        var lightFirst = 0
        for seed in 1...30 {
            let lines = Recorder<String>()
            let client = try XMPPClient(
                configuration: configuration,
                options: XMPPClient.Options(
                    logLevel: .debug,
                    logHandler: { _, text in if text.hasPrefix("Connecting to ") { lines.append(text) } },
                    randomSeed: UInt64(seed),
                    nameServers: [Endpoint(host: "127.0.0.1", port: dns.port)]
                )
            )
            _ = try await client.connect()
            await client.disconnect()
            let first = try #require(lines.values.first, "seed \(seed): no target tried")
            if first.hasPrefix("Connecting to heavy.test:") { heavyFirst += 1 }
            if first.hasPrefix("Connecting to light.test:") { lightFirst += 1 }
        }
        #expect(heavyFirst + lightFirst == 30)
        #expect(heavyFirst > 20 && lightFirst >= 1, "heavy first \(heavyFirst), light first \(lightFirst)")
    }

    /// A fleet spread over two working targets by weight (RFC 2782): one priority, weights 3 and
    /// 1, each a relay in front of the same prosody. 40 clients (seeds 1–40) connecting at once
    /// all get online in one attempt each, each through the one target it tried first, and the
    /// heavier target takes about three quarters of them (between 22 and 38 of 40; a client that
    /// ignored the weights would put half on each, one that ignored the lighter all on one).
    @Test func aFleetIsSpreadOverTwoWorkingTargetsByWeight() async throws {
        let prosody = try await startedProsody()
        let heavy = try TCPRelay(upstreamPort: prosody.port)
        let light = try TCPRelay(upstreamPort: prosody.port)
        let dns = try await DNSServer(
            local: ["localhost", "test"],
            records: [
                .srv("_xmpp-client._tcp.localhost", target: "heavy.test", port: heavy.port, priority: 5, weight: 30),
                .srv("_xmpp-client._tcp.localhost", target: "light.test", port: light.port, priority: 5, weight: 10),
                .address("heavy.test", ["127.0.0.1"]),
                .address("light.test", ["127.0.0.1"]),
            ]
        )
        var configuration = testConfiguration("alice", port: 0)
        configuration.endpoint = nil
        let clients = try (1...40).map { seed in
            var own = configuration
            own.jid = JID("alice@localhost/fleet\(seed)")!
            return try XMPPClient(
                configuration: own,
                options: XMPPClient.Options(
                    randomSeed: UInt64(seed),
                    nameServers: [Endpoint(host: "127.0.0.1", port: dns.port)]
                )
            )
        }
        let recorders = clients.map { EventRecorder($0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { _ = try await client.connect() } }
            try await group.waitForAll()
        }
        var servers: [String: Int] = [:]
        for client in clients { servers[await client.health().server ?? "none", default: 0] += 1 }
        for recorder in recorders {
            #expect(!recorder.events.contains { if case .lifecycle(.attemptFailed) = $0 { true } else { false } })
        }
        let onHeavy = servers["heavy.test:\(heavy.port)"] ?? 0
        let onLight = servers["light.test:\(light.port)"] ?? 0
        #expect(onHeavy + onLight == 40, "\(servers)")
        #expect(heavy.acceptedCount == onHeavy && light.acceptedCount == onLight)
        #expect((22...38).contains(onHeavy), "\(servers)")
        for client in clients { await client.disconnect() }
    }

    /// A direct-TLS target (priority 0) whose certificate the client does not trust (another CA's)
    /// ahead of a working STARTTLS target: the refused certificate ends the attempt, fatal, as
    /// an attacker in the path could otherwise push every client to a target of their choosing;
    /// the second target is never contacted and no retry follows.
    @Test func aTargetWithAWrongCertificateIsFatal() async throws {
        let trusted = try TestCertificates.shared()
        let untrusted = try TestCertificates()
        let impostor = try ProsodyServer(certificates: untrusted)
        try await impostor.start()
        let prosody = try ProsodyServer(certificates: trusted)
        try await prosody.start()
        let working = try TCPRelay(upstreamPort: prosody.port)
        let dns = try await DNSServer(
            local: ["localhost", "test"],
            records: [
                .srv(
                    "_xmpps-client._tcp.localhost",
                    target: "impostor.test",
                    port: impostor.directTLSPort!,
                    priority: 0,
                    weight: 0
                ),
                .srv("_xmpp-client._tcp.localhost", target: "xmpp.test", port: working.port, priority: 10, weight: 0),
                .address("impostor.test", ["127.0.0.1"]),
                .address("xmpp.test", ["127.0.0.1"]),
            ]
        )
        var configuration = testConfiguration("alice", port: 0)
        configuration.endpoint = nil
        configuration.tls = .required
        let client = try XMPPClient(
            configuration: configuration,
            options: XMPPClient.Options(
                caFile: trusted.caCertificate,
                nameServers: [Endpoint(host: "127.0.0.1", port: dns.port)]
            )
        )
        let events = EventRecorder(client)
        do {
            _ = try await client.connect()
            Issue.record("connected past a target with an untrusted certificate")
        } catch {
            #expect(error.kind == .certificateRefused, "\(error)")
            #expect(error.isFatal)
        }
        #expect(working.acceptedCount == 0)
        #expect(!events.events.contains { if case .lifecycle(.reconnecting) = $0 { true } else { false } })
    }

    /// A direct-TLS record (XEP-0368) ahead of the STARTTLS one by priority: TLS from the first
    /// byte to the port it names, the certificate checked for the JID's domain (not the target's
    /// name, which the certificate does not carry).
    @Test func aDirectTLSRecordGetsTLSFromTheFirstByte() async throws {
        let certificates = try TestCertificates.shared()
        let prosody = try ProsodyServer(certificates: certificates)
        try await prosody.start()
        let dns = try await DNSServer(
            local: ["localhost", "test"],
            records: [
                .srv(
                    "_xmpps-client._tcp.localhost",
                    target: "tls.xmpp.test",
                    port: prosody.directTLSPort!,
                    priority: 0,
                    weight: 0
                ),
                .srv("_xmpp-client._tcp.localhost", target: "xmpp.test", port: prosody.port, priority: 10, weight: 0),
                .address("tls.xmpp.test", ["127.0.0.1"]),
                .address("xmpp.test", ["127.0.0.1"]),
            ]
        )
        var configuration = testConfiguration("alice", port: 0)
        configuration.endpoint = nil
        configuration.tls = .required
        let log = TrafficLog()
        let client = try XMPPClient(
            configuration: configuration,
            options: XMPPClient.Options(
                logLevel: .trace,
                logHandler: log.handler,
                caFile: certificates.caCertificate,
                nameServers: [Endpoint(host: "127.0.0.1", port: dns.port)]
            )
        )
        #expect(try await client.connect().bare == JID("alice@localhost")!)
        let sent = log.entries.filter { $0.direction == .sent }.map(\.text)
        #expect(!sent.contains { $0.hasPrefix("<starttls") })
        #expect(sent.first?.contains("from='alice@localhost'") == true)  // protected from the first header
        await client.disconnect()
    }

    /// A domain that does not exist (NXDOMAIN) and so has no SRV records: no service, fatal,
    /// naming the lookups.
    @Test func aDomainThatDoesNotExistFailsForGood() async throws {
        let dns = try await DNSServer(local: ["test"], records: [])
        var configuration = testConfiguration("alice", port: 0)
        configuration.jid = JID("alice@nowhere.test")!
        configuration.endpoint = nil
        let client = try XMPPClient(
            configuration: configuration,
            options: XMPPClient.Options(nameServers: [Endpoint(host: "127.0.0.1", port: dns.port)])
        )
        let events = EventRecorder(client)
        do {
            _ = try await client.connect()
            Issue.record("connected to a domain that does not exist")
        } catch {
            #expect(error.kind == .serviceUnavailable && error.isFatal, "\(error)")
            #expect(error.message.contains("does not exist (NXDOMAIN)"), "\(error)")
            #expect(error.message.contains("_xmpp-client._tcp.nowhere.test"), "\(error)")
        }
        #expect(!events.events.contains { if case .lifecycle(.reconnecting) = $0 { true } else { false } })
    }

    @Test func aDomainWithoutServiceFailsForGood() async throws {
        let prosody = try await startedProsody()
        let dns = try await DNSServer(
            local: ["localhost"],
            records: [.srv("_xmpp-client._tcp.localhost", target: ".", port: 0, priority: 0, weight: 0)]
        )
        var configuration = testConfiguration("alice", port: prosody.port)
        configuration.endpoint = nil
        let client = try XMPPClient(
            configuration: configuration,
            options: XMPPClient.Options(nameServers: [Endpoint(host: "127.0.0.1", port: dns.port)])
        )
        let events = EventRecorder(client)
        do {
            _ = try await client.connect()
            Issue.record("connected to a domain that offers no XMPP service")
        } catch {
            #expect(error.kind == .serviceUnavailable && error.isFatal, "\(error)")
        }
        #expect(!events.events.contains { if case .lifecycle(.reconnecting) = $0 { true } else { false } })
    }
}
