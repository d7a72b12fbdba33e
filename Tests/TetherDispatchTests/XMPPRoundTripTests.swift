import Dispatch
import Foundation
import Testing
import TetherCore
import TetherDispatch
import TetherTestServers
import TetherXMPP
import TetherXMPPClient

/// The round trips from the first byte to `connected` (and to `resumed`) on each path, against a
/// real prosody through a relay that delays each chunk by 25 ms each way, so that every time the
/// client waits for the server shows as one server flight. The numbers are the protocol's
/// minimum for each path (`Specs/xmpp/client-machine.md`, "Round trips"); one more is a wasted
/// round trip.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.prosody, .opensslCommand)
)
struct XMPPRoundTripTests {
    static let delay = Duration.milliseconds(25)

    /// Connects `configuration` (its endpoint or URL pointing at `relay`) and returns the server
    /// flights until `connected`.
    static func flightsToConnected(
        _ configuration: XMPPClient.Configuration,
        relay: TCPRelay,
        options: XMPPClient.Options = .init()
    ) async throws -> Int {
        let client = try XMPPClient(configuration: configuration, options: options)
        let events = EventRecorder(client)
        try await client.connect()
        let connected = try #require(events.timedEvents.first { $0.event.isConnected })
        await client.disconnect()
        return relay.serverFlights(before: connected.time)
    }

    static func configuration(
        port: Int,
        mechanism: SASLMechanism,
        tls: XMPPClientMachine.TLSPolicy = .disabled
    ) -> XMPPClient.Configuration {
        var configuration = testConfiguration("alice", port: port)
        configuration.mechanisms = [mechanism]
        configuration.tls = tls
        configuration.fetchRosterOnConnect = true  // the roster is not waited for
        configuration.initialPresence = XMPPPresence()
        return configuration
    }

    @Test func cleartext() async throws {
        let server = try await startedProsody()
        // PLAIN: header, auth, header after success, bind.
        let plainRelay = try TCPRelay(upstreamPort: server.port, delay: Self.delay)
        var plainConfiguration = Self.configuration(port: plainRelay.port, mechanism: .plain)
        plainConfiguration.allowPlainOnCleartext = true
        let plain = try await Self.flightsToConnected(plainConfiguration, relay: plainRelay)
        #expect(plain == 4)
        // SCRAM: one more for its second message.
        let scramRelay = try TCPRelay(upstreamPort: server.port, delay: Self.delay)
        let scram = try await Self.flightsToConnected(
            Self.configuration(port: scramRelay.port, mechanism: .scramSHA256),
            relay: scramRelay
        )
        #expect(scram == 5)
    }

    @Test func startTLSAndDirectTLS() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates)
        try await server.start()
        let options = XMPPClient.Options(caFile: certificates.caCertificate)
        // STARTTLS: header, <starttls/>, the TLS 1.3 handshake, header, auth, response, header,
        // bind.
        let startTLSRelay = try TCPRelay(upstreamPort: server.port, delay: Self.delay)
        let startTLS = try await Self.flightsToConnected(
            Self.configuration(port: startTLSRelay.port, mechanism: .scramSHA256, tls: .required),
            relay: startTLSRelay,
            options: options
        )
        #expect(startTLS == 8)
        // Direct TLS: the handshake instead of the first two.
        let directRelay = try TCPRelay(upstreamPort: server.directTLSPort!, delay: Self.delay)
        let direct = try await Self.flightsToConnected(
            Self.configuration(port: directRelay.port, mechanism: .scramSHA256, tls: .direct),
            relay: directRelay,
            options: options
        )
        #expect(direct == 6)
    }

    @Test func webSocket() async throws {
        let server = try ProsodyServer(webSocket: true)
        try await server.start()
        // The upgrade, <open/>, auth, response, <open/> after success, bind.
        let relay = try TCPRelay(upstreamPort: server.webSocketPort!, delay: Self.delay)
        var configuration = Self.configuration(port: 0, mechanism: .scramSHA256)
        configuration.endpoint = nil
        configuration.webSocket = ServerURL("ws://127.0.0.1:\(relay.port)/xmpp-websocket")
        #expect(try await Self.flightsToConnected(configuration, relay: relay) == 6)
    }

    /// Resumption: header, auth, response, header after success, <resume/>; nothing is redone
    /// after `<resumed/>`.
    @Test func resumption() async throws {
        let server = try await startedProsody()
        let relay = try TCPRelay(upstreamPort: server.port, delay: Self.delay)
        var configuration = Self.configuration(port: relay.port, mechanism: .scramSHA256)
        configuration.reconnectPolicy = .fixed(.milliseconds(1), maximumAttempts: 5)
        let client = try XMPPClient(configuration: configuration)
        let events = EventRecorder(client)
        try await client.connect()
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        // A round trip: everything of the first session sent before it has been answered.
        #expect(try await Self.flightsToResume(client, relay, events) == 5)
        await client.disconnect()
    }

    /// SASL2 (XEP-0388) with Bind 2 and stream management inside the login, against prosody 13
    /// with the `sasl2` modules: header, authenticate, response; the session is online with the
    /// success (no restart, no bind, no enable). A resumption takes the same three, direct TLS
    /// one more (its handshake).
    @Test func sasl2() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates, extraModules: ["sasl2", "sasl2_bind2", "sasl2_sm"])
        try await server.start()
        let relay = try TCPRelay(upstreamPort: server.port, delay: Self.delay)
        var configuration = Self.configuration(port: relay.port, mechanism: .scramSHA256)
        configuration.reconnectPolicy = .fixed(.milliseconds(1), maximumAttempts: 5)
        let client = try XMPPClient(configuration: configuration)
        let events = EventRecorder(client)
        try await client.connect()
        let connected = try #require(events.timedEvents.first { $0.event.isConnected })
        #expect(relay.serverFlights(before: connected.time) == 3)
        #expect(await client.authentication()?.sasl2 == true)
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        #expect(try await Self.flightsToResume(client, relay, events) == 3)
        await client.disconnect()

        let directRelay = try TCPRelay(upstreamPort: server.directTLSPort!, delay: Self.delay)
        let direct = try await Self.flightsToConnected(
            Self.configuration(port: directRelay.port, mechanism: .scramSHA256, tls: .direct),
            relay: directRelay,
            options: XMPPClient.Options(caFile: certificates.caCertificate)
        )
        #expect(direct == 4)
    }

    /// FAST (XEP-0484) over direct TLS: the TLS 1.3 handshake, the header, then one exchange that
    /// logs in with the token and resumes (or binds): 3, one fewer than a SCRAM login (its second
    /// message), so 2 on top of the handshake.
    @Test func fast() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(
            certificates: certificates,
            extraModules: ["sasl2", "sasl2_bind2", "sasl2_sm", "sasl2_fast"]
        )
        try await server.start()
        let relay = try TCPRelay(upstreamPort: server.directTLSPort!, delay: Self.delay)
        var configuration = Self.configuration(port: relay.port, mechanism: .scramSHA256, tls: .direct)
        configuration.reconnectPolicy = .fixed(.milliseconds(1), maximumAttempts: 5)
        let client = try XMPPClient(configuration: configuration, options: .init(caFile: certificates.caCertificate))
        let events = EventRecorder(client)
        try await client.connect()
        #expect(await events.wait { $0.contains { if case .fastToken = $0 { true } else { false } } })
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        #expect(try await Self.flightsToResume(client, relay, events) == 3)
        #expect(await client.authentication()?.fast == true)
        await client.disconnect()
    }

    /// After a round trip (everything of the session answered), cuts the link and returns the
    /// server's flights until the session is resumed.
    static func flightsToResume(_ client: XMPPClient, _ relay: TCPRelay, _ events: EventRecorder) async throws -> Int {
        _ = try await client.ping()
        let cut = DispatchTime.now().uptimeNanoseconds
        relay.cutAll()
        #expect(await events.wait(timeout: .seconds(10)) { $0.contains { $0.isResumed } })
        let resumed = try #require(events.timedEvents.first { $0.event.isResumed })
        return relay.serverFlights(from: cut, before: resumed.time)
    }
}
