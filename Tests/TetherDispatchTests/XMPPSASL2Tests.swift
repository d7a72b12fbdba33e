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
