import Foundation
import Testing
import TetherCore
import TetherDispatch
import TetherTestServers
import TetherTestSupport
import TetherXMPP
import TetherXMPPClient

/// XEP-0388 SASL2 with XEP-0386 Bind 2 and XEP-0198 inside the login, against prosody 13 with
/// `sasl2`, `sasl2_bind2` and `sasl2_sm`: one exchange logs in, binds and enables stream
/// management; after a cut, one exchange logs in and resumes; a client told not to use SASL2
/// logs in the RFC 6120 way on the same server.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.prosody, .opensslCommand)
)
struct XMPPSASL2Tests {
    static let modules = ["sasl2", "sasl2_bind2", "sasl2_sm"]

    static func configuration(port: Int) -> XMPPClient.Configuration {
        var configuration = testConfiguration("alice", port: port)
        configuration.jid = JID("alice@localhost")!
        configuration.tls = .direct
        configuration.mechanisms = SASLMechanism.allCases
        return configuration
    }

    @Test func oneExchangeLogsInBindsAndResumes() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates, extraModules: Self.modules)
        try await server.start()
        let relay = try TCPRelay(upstreamPort: server.directTLSPort!)
        let log = TrafficLog()
        let client = try XMPPClient(
            configuration: Self.configuration(port: relay.port),
            options: .init(logLevel: .trace, logHandler: log.handler, caFile: certificates.caCertificate)
        )
        let events = EventRecorder(client)
        let jid = try await client.connect()
        // Bind 2 makes the resource from the tag and a hash of the user agent (prosody: tag~hash).
        #expect(jid.resourcepart?.hasPrefix("tether~") == true, "\(jid)")
        let authentication = await client.authentication()
        #expect(
            authentication?.sasl2 == true && authentication?.channelBinding == .tlsExporter,
            "\(String(describing: authentication))"
        )
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        let sent = log.entries.filter { $0.direction == .sent }.map(\.text)
        #expect(sent.contains { $0.hasPrefix("<authenticate xmlns='urn:xmpp:sasl:2'") })
        // No separate bind, session or enable: they came inside the login.
        #expect(!sent.contains { $0.contains("urn:ietf:params:xml:ns:xmpp-bind") || $0.hasPrefix("<enable") })
        #expect(!sent.contains { $0.hasPrefix("<auth ") })

        let before = log.entries.count
        relay.cutAll()
        #expect(
            await events.wait(timeout: .seconds(20)) { events in events.contains { $0.isResumed } },
            "\(events.events) \(log.entries.dropFirst(before).map(\.text))"
        )
        #expect(!events.events.contains { if case .resumeFailed = $0 { true } else { false } })
        let afterCut = log.entries.dropFirst(before).filter { $0.direction == .sent }.map(\.text)
        #expect(afterCut.contains { $0.hasPrefix("<authenticate xmlns='urn:xmpp:sasl:2'") })
        #expect(!afterCut.contains { $0.hasPrefix("<resume ") }, "\(afterCut)")  // inside the login
        #expect(try await client.ping() > .zero)
        await client.disconnect()
    }

    /// FAST (XEP-0484) against prosody's `sasl2_fast`: a password login asks for a token and gets
    /// one (HT-SHA-256-EXPR on TLS 1.3); a later client logs in with the token alone (its password
    /// is wrong on purpose); a token the server does not know is refused, said, and the same stream
    /// logs in with the password.
    @Test func aFASTTokenReplacesThePassword() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates, extraModules: Self.modules + ["sasl2_fast"])
        try await server.start()
        let options = XMPPClient.Options(caFile: certificates.caCertificate)
        var configuration = Self.configuration(port: server.directTLSPort!)
        configuration.userAgent = XMPPUserAgent(software: "Tether tests")
        configuration.state.userAgentID = "2f5c8a3e-1111-4222-8333-444455556666"
        let log = TrafficLog()
        let first = try XMPPClient(
            configuration: configuration,
            options: .init(logLevel: .trace, logHandler: log.handler, caFile: certificates.caCertificate)
        )
        let firstEvents = EventRecorder(first)
        try await first.connect()
        #expect(await firstEvents.wait { $0.contains { if case .fastToken = $0 { true } else { false } } })
        let token = try #require(
            firstEvents.events.lazy.compactMap { if case .fastToken(let token) = $0 { token } else { nil } }.first
        )
        #expect(token.mechanism == "HT-SHA-256-EXPR" && !token.expiry.isEmpty)
        let secret = token.secret.withUnsafeText { $0 }
        #expect(!"\(token)".contains(secret))
        // The trace log shows the server's <token/>, its secret hidden.
        #expect(log.entries.contains { $0.direction == .received && $0.text.contains("token='[hidden]'") })
        #expect(!log.entries.contains { $0.text.contains(secret) })
        await first.disconnect()

        var withToken = configuration
        withToken.password = "not-the-password"
        withToken.state.fastToken = token
        let second = try XMPPClient(configuration: withToken, options: options)
        try await second.connect()
        let authentication = await second.authentication()
        #expect(
            authentication?.fast == true && authentication?.mechanism == "HT-SHA-256-EXPR",
            "\(String(describing: authentication))"
        )
        #expect(try await second.ping() > .zero)
        await second.disconnect()

        var stale = configuration
        // A token as an app would store it (Codable), with a secret the server never gave.
        stale.state.fastToken = try JSONDecoder().decode(
            XMPPFASTToken.self,
            from: Data(
                #"{"mechanism":"HT-SHA-256-EXPR","secret":"secret-token:nonsense","expiry":"2099-01-01T00:00:00Z"}"#
                    .utf8
            )
        )
        let third = try XMPPClient(configuration: stale, options: options)
        let thirdEvents = EventRecorder(third)
        try await third.connect()
        #expect(thirdEvents.events.contains { if case .fastTokenRefused = $0 { true } else { false } })
        #expect(await third.authentication()?.fast == false)
        await third.disconnect()
    }

    /// prosody 13 announces XEP-0478 limits (256 KiB per stanza after login): a larger stanza is a
    /// typed error and never reaches the server, whose stream error would end the connection.
    @Test func theServersStanzaLimitIsKept() async throws {
        let server = try await startedProsody()
        let client = try XMPPClient(configuration: testConfiguration("alice", port: server.port))
        try await client.connect()
        let big = XMPPMessage(to: JID("bob@localhost"), body: String(repeating: "x", count: 300_000))
        await expectThrows(\XMPPClientError.kind, .stanzaTooLarge) { try await client.send(big) }
        try await client.send(XMPPMessage(to: JID("bob@localhost"), body: "small"))
        #expect(try await client.ping() > .zero)
        #expect(await client.state() == .connected)
        await client.disconnect()
    }

    @Test func withoutSASL2TheClientLogsInTheRFC6120Way() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates, extraModules: Self.modules)
        try await server.start()
        var configuration = Self.configuration(port: server.directTLSPort!)
        configuration.sasl2 = false
        let log = TrafficLog()
        let client = try XMPPClient(
            configuration: configuration,
            options: .init(logLevel: .trace, logHandler: log.handler, caFile: certificates.caCertificate)
        )
        try await client.connect()
        #expect(await client.authentication()?.sasl2 == false)
        #expect(log.entries.contains { $0.direction == .sent && $0.text.hasPrefix("<auth ") })
        await client.disconnect()
    }
}

/// XEP-0352 client state indication reaching a real server (prosody 13's `csi_simple`): in the
/// background the client says `<inactive/>` and prosody holds a contact's presence back; in the
/// foreground `<active/>` makes it deliver what it held.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.prosody)
)
struct XMPPClientStateIndicationTests {
    /// Whether prosody's debug log shows `<NAME xmlns='urn:xmpp:csi:0'>` received (its attribute
    /// order varies between runs).
    static func received(_ name: String, by server: ProsodyServer) -> Bool {
        server.log.split(separator: "\n").contains {
            $0.contains("Received[c2s]: <\(name) ") && $0.contains("urn:xmpp:csi:0")
        }
    }

    @Test func theServerHoldsPresenceWhileInactive() async throws {
        let server = try ProsodyServer(extraModules: ["csi_simple"])
        try await server.start()
        let alice = try XMPPClient(configuration: testConfiguration("alice", port: server.port, resource: "a"))
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port, resource: "b"))
        let aliceEvents = EventRecorder(alice)
        try await alice.connect()
        try await bob.connect()
        alice.applicationStateChanged(.background)
        // prosody has it (its debug log shows what it received) before anything is sent to alice.
        #expect(await eventually { Self.received("inactive", by: server) })
        try await bob.send(XMPPPresence(to: JID("alice@localhost/a")!, show: .away))
        // prosody decides to hold it (its debug log says so); alice has not seen it then.
        #expect(await eventually { server.log.contains("Holding buffer") }, "\(server.logTail)")
        let isPresenceFromBob: (XMPPClient.Event) -> Bool = {
            if case .presence(let presence) = $0 { presence.from?.bare == JID("bob@localhost") } else { false }
        }
        #expect(!aliceEvents.events.contains(where: isPresenceFromBob))
        alice.applicationStateChanged(.active)
        #expect(await eventually { Self.received("active", by: server) })
        #expect(await aliceEvents.wait { $0.contains(where: isPresenceFromBob) })
        await bob.disconnect()
        await alice.disconnect()
    }
}
