import Foundation
import Testing
import TetherCore
import TetherDispatch
import TetherTestServers
import TetherXMPP
import TetherXMPPClient

/// XMPP over WebSocket (RFC 7395) against a real prosody's `mod_websocket` (started by each
/// test): SCRAM login, roster, messages both ways with a client on TCP, pings, stream management
/// resumption after a relay cut, and `wss://` with the test CA.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.prosody, .opensslCommand)
)
struct XMPPWebSocketTests {
    static func configuration(_ user: String, url: String, resource: String) -> XMPPClient.Configuration {
        var configuration = testConfiguration(user, port: 0, resource: resource)
        configuration.endpoint = nil
        configuration.webSocket = ServerURL(url)!
        configuration.mechanisms = [.scramSHA256, .scramSHA1]
        return configuration
    }

    @Test func loginRosterMessagesAndPings() async throws {
        let server = try ProsodyServer(webSocket: true)
        try await server.start()
        let log = TrafficLog()
        let alice = try XMPPClient(
            configuration: Self.configuration("alice", url: server.webSocketURL!, resource: "ws"),
            options: .init(logLevel: .trace, logHandler: log.handler)
        )
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port, resource: "tcp"))
        let aliceEvents = EventRecorder(alice)
        let bobEvents = EventRecorder(bob)
        #expect(try await alice.connect() == JID("alice@localhost/ws"))
        try await bob.connect()
        #expect(await aliceEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        // The framing: <open/> (twice: before and after SASL), stanzas that declare jabber:client.
        let sent = log.entries.filter { $0.direction == .sent }.map(\.text)
        #expect(
            sent.filter { $0.hasPrefix("<open xmlns='urn:ietf:params:xml:ns:xmpp-framing' to='localhost'") }.count == 2
        )
        #expect(!sent.contains { $0.contains("stream:stream") })
        #expect(sent.contains { $0.hasPrefix("<iq xmlns='jabber:client'") })
        // Messages both ways.
        try await alice.send(XMPPMessage(to: JID("bob@localhost/tcp"), body: "from the websocket"))
        #expect(await bobEvents.wait { _ in bobEvents.bodies == ["from the websocket"] })
        try await bob.send(XMPPMessage(to: JID("alice@localhost/ws"), body: "from tcp"))
        #expect(await aliceEvents.wait { _ in aliceEvents.bodies == ["from tcp"] })
        // The roster.
        _ = try await alice.request(RosterQuery.update(RosterItem(jid: JID("bob@localhost")!, name: "Bob")))
        #expect(try await alice.fetchRoster().items.map(\.jid) == [JID("bob@localhost")!])
        // Pings: to the server, and from bob to alice (answered by alice's machine).
        #expect(try await alice.ping() > .zero)
        #expect(try await bob.request(.ping(to: JID("alice@localhost/ws"))).type == .result)
        await alice.disconnect()
        await bob.disconnect()
        #expect(
            log.entries.last { $0.direction == .sent }?.text == "<close xmlns='urn:ietf:params:xml:ns:xmpp-framing'/>"
        )
        #expect(aliceEvents.events.last == .lifecycle(.closed(nil)))
    }

    /// The link under the WebSocket is cut while messages flow: the session resumes (XEP-0198)
    /// over a new WebSocket and bob gets every message exactly once, in order.
    @Test func resumesAfterTheLinkIsCut() async throws {
        let server = try ProsodyServer(webSocket: true)
        try await server.start()
        let relay = try TCPRelay(upstreamPort: server.webSocketPort!)
        let alice = try XMPPClient(
            configuration: Self.configuration(
                "alice",
                url: "ws://127.0.0.1:\(relay.port)/xmpp-websocket",
                resource: "ws"
            )
        )
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port, resource: "tcp"))
        let aliceEvents = EventRecorder(alice)
        let bobEvents = EventRecorder(bob)
        try await bob.connect()
        try await alice.connect()
        #expect(await aliceEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        for n in 1...60 {
            try await alice.send(XMPPMessage(to: JID("bob@localhost/tcp"), body: "message \(n)"))
            if n == 30 { relay.cutAll() }
            if n % 10 == 0 { try await Task.sleep(for: .milliseconds(20)) }
        }
        try await alice.flush()
        try await alice.send(XMPPMessage(to: JID("bob@localhost/tcp"), body: "end"))
        #expect(await bobEvents.wait(timeout: .seconds(20)) { _ in bobEvents.bodies.contains("end") })
        #expect(bobEvents.bodies == (1...60).map { "message \($0)" } + ["end"])
        #expect(aliceEvents.events.contains { $0.isResumed })
        #expect(relay.acceptedCount == 2)
        await alice.disconnect()
        await bob.disconnect()
    }

    /// The link under the WebSocket stalls (nothing passes, nothing closes): the pings find it
    /// dead within their bound, and the session resumes over a new WebSocket.
    @Test func aStalledLinkIsDetectedAndResumed() async throws {
        let server = try ProsodyServer(webSocket: true)
        try await server.start()
        let relay = try TCPRelay(upstreamPort: server.webSocketPort!)
        var configuration = Self.configuration(
            "alice",
            url: "ws://127.0.0.1:\(relay.port)/xmpp-websocket",
            resource: "ws"
        )
        configuration.autoPing = .init(interval: .seconds(1), timeout: .milliseconds(500), maximumMissed: 2)
        let client = try XMPPClient(configuration: configuration)
        let events = EventRecorder(client)
        try await client.connect()
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        try await expectStallFoundByPingsAndResumed(relay, events)
        let rtt = try await client.ping()
        #expect(rtt < .seconds(5))
        await client.disconnect()
    }

    /// `wss://`: TLS from the first byte, the certificate checked for the URL's host against the
    /// test CA; without the CA the certificate is refused and nothing is retried.
    @Test func secureWebSocketWithTheTestCA() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates, webSocket: true)
        try await server.start()
        let log = TrafficLog()
        var configuration = Self.configuration("alice", url: server.secureWebSocketURL!, resource: "wss")
        configuration.mechanisms = [.plain]  // allowed: the stream is protected by TLS
        let client = try XMPPClient(
            configuration: configuration,
            options: .init(logLevel: .trace, logHandler: log.handler, caFile: certificates.caCertificate)
        )
        #expect(try await client.connect() == JID("alice@localhost/wss"))
        // Protected from the first byte: the first <open/> names the account (RFC 6120 §4.7.1).
        #expect(log.entries.first { $0.direction == .sent }?.text.contains("from='alice@localhost'") == true)
        #expect(try await client.ping() > .zero)
        await client.disconnect()

        let untrusting = try XMPPClient(configuration: configuration)  // no CA file
        let events = EventRecorder(untrusting)
        do {
            try await untrusting.connect()
            Issue.record("connected to a wss server whose CA is unknown")
        } catch {
            #expect(error.kind == .certificateRefused && error.isFatal, "\(error)")
            #expect(error.message.contains("unable to get local issuer certificate"), "\(error)")
        }
        #expect(!events.events.contains { if case .lifecycle(.reconnecting) = $0 { true } else { false } })
    }
}
