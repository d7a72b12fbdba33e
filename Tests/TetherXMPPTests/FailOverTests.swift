import Testing
import TetherCore
import TetherDNS
import TetherXML

@testable import TetherXMPP

/// Failing over between the targets of a lookup (RFC 2782 order): a target that fails before the
/// stream is established sends the attempt on to the next one within itself, and is tried after the
/// others on later attempts.
struct FailOverTests {
    static func srv(_ priority: UInt16, _ port: UInt16, _ target: String) -> DNSRecordData {
        .srv(priority: priority, weight: 0, port: port, target: target)
    }

    static func harness(tls: XMPPClientMachine.TLSPolicy = .disabled) -> XMPPClientHarness {
        XMPPClientHarness {
            $0.serviceLookup = true
            $0.tls = tls
        }
    }

    /// Answers the lookup with a broken first target and a working second one.
    static func lookUp(_ harness: XMPPClientHarness, directTLS: Bool = false) {
        let records: XMPPServiceTargets.Lookup = .records([
            srv(10, 5222, "balancer.example.com"), srv(20, 5222, "xmpp.example.com"),
        ])
        harness.machine.serviceLookedUp(
            startTLS: directTLS ? .none : records,
            directTLS: directTLS
                ? .records([srv(10, 5223, "balancer.example.com"), srv(20, 5223, "xmpp.example.com")]) : .none,
            generation: harness.generation!,
            now: harness.now
        )
        harness.drain()
    }

    @Test(arguments: ["closed before the header", "reset before the header", "refused"])
    func theNextTargetWithinTheAttempt(_ failure: String) {
        let harness = Self.harness()
        harness.start()
        Self.lookUp(harness)
        #expect(harness.endpoints.last == Endpoint(host: "balancer.example.com", port: 5222))
        if failure != "refused" { harness.connected() }
        harness.transportClosed(
            failure == "closed before the header" ? nil : TransportError(.connectionLost, "reset")
        )
        // Within the same attempt: no failure reported, the next target opened.
        #expect(harness.endpoints.last == Endpoint(host: "xmpp.example.com", port: 5222))
        #expect(!harness.events.contains { if case .lifecycle(.attemptFailed) = $0 { true } else { false } })
        #expect(harness.machine.health(now: harness.now).failingServers == ["balancer.example.com:5222"])
        harness.login()
        #expect(harness.state == .connected)

        // Lost: the next attempt tries the working target first.
        harness.transportClosed()
        harness.advance(by: .seconds(1))
        Self.lookUp(harness)
        #expect(harness.endpoints.last == Endpoint(host: "xmpp.example.com", port: 5222))
        #expect(harness.machine.targetOrder.map(\.host) == ["xmpp.example.com", "balancer.example.com"])
    }

    @Test func aTargetThatAnsweredIsNotFailing() {
        let harness = Self.harness()
        harness.start()
        Self.lookUp(harness)
        harness.transportClosed(TransportError(.connectionFailed, "refused"))
        #expect(harness.machine.health(now: harness.now).failingServers == ["balancer.example.com:5222"])
        // The second target answers, then drops during the login: the attempt fails (no more
        // targets), but only the first is failing.
        harness.connected()
        harness.server(XMPPClientHarness.serverHeader)
        harness.transportClosed()
        #expect(harness.events.contains { if case .lifecycle(.attemptFailed) = $0 { true } else { false } })
        #expect(harness.machine.health(now: harness.now).failingServers == ["balancer.example.com:5222"])
        // Once the balancer answers, it is no longer failing.
        harness.advance(by: .seconds(1))
        Self.lookUp(harness)
        #expect(harness.endpoints.last == Endpoint(host: "xmpp.example.com", port: 5222))
        harness.transportClosed(TransportError(.connectionFailed, "refused"))
        #expect(harness.endpoints.last == Endpoint(host: "balancer.example.com", port: 5222))
        harness.connected()
        harness.server(XMPPClientHarness.serverHeader)
        #expect(harness.machine.health(now: harness.now).failingServers == ["xmpp.example.com:5222"])
    }

    @Test func aDirectTLSHandshakeFailureMovesOnButARefusedCertificateIsFatal() {
        let harness = Self.harness(tls: .direct)
        harness.start()
        Self.lookUp(harness, directTLS: true)
        harness.transportClosed(TransportError(.tlsFailed, "handshake failure"))
        #expect(harness.endpoints.last == Endpoint(host: "xmpp.example.com", port: 5223))
        #expect(harness.state == .connectingTransport)

        let refused = Self.harness(tls: .direct)
        refused.start()
        Self.lookUp(refused, directTLS: true)
        refused.transportClosed(TransportError(.certificateRefused, "unknown CA"))
        #expect(refused.state == .disconnected)
        guard case .lifecycle(.closed(let error)) = refused.events.last else { return fail("not closed") }
        #expect(error?.kind == .certificateRefused)
    }
}
