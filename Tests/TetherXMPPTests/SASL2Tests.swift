import Foundation
import Testing
import TetherCore
import TetherTLS
import TetherXML

@testable import TetherXMPP

/// XEP-0388 SASL2 with XEP-0386 Bind 2 and XEP-0198 inside the login, against a scripted server
/// (prosody 13's shapes: `<success>`'s children in its order, an `<r/>` before the features).
struct SASL2Tests {
    static func features(bind: Bool = true, sm: Bool = true) -> String {
        var inline = ""
        if bind {
            inline +=
                "<bind xmlns='urn:xmpp:bind:0'><inline><feature var='urn:xmpp:sm:3'/><feature var='urn:xmpp:carbons:2'/></inline></bind>"
        }
        if sm { inline += "<sm xmlns='urn:xmpp:sm:3'/>" }
        return
            "<stream:features><authentication xmlns='urn:xmpp:sasl:2'><mechanism>SCRAM-SHA-1</mechanism><mechanism>PLAIN</mechanism><inline>\(inline)</inline></authentication><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism></mechanisms></stream:features>"
    }

    static let postFeatures = "<stream:features><ver xmlns='urn:xmpp:features:rosterver'/></stream:features>"

    /// Sends the SCRAM challenge for the last `<authenticate>` and returns the `<success>`'s
    /// additional data.
    func scram(_ harness: XMPPClientHarness) -> String {
        let initial = authenticateInitialResponse(harness.lastSent)
        let challenge = harness.scramServer.challenge(forAuth: initial)
        harness.server("<challenge xmlns='urn:xmpp:sasl:2'>\(challenge)</challenge>")
        #expect(harness.lastSent.hasPrefix("<response xmlns='urn:xmpp:sasl:2'>"))
        let (clientFinal, serverFinal) = harness.scramServer.final()
        #expect(saslPayload(harness.lastSent) == Base64.encode(Array(clientFinal.utf8)))
        return Base64.encode(Array(serverFinal.utf8))
    }

    func authenticateInitialResponse(_ text: String) -> String {
        guard let start = text.range(of: "<initial-response>"), let end = text.range(of: "</initial-response>") else {
            return ""
        }
        return String(text[start.upperBound..<end.lowerBound])
    }

    func harness(_ configure: @escaping (inout Machine.Configuration) -> Void = { _ in }) -> XMPPClientHarness {
        XMPPClientHarness {
            $0.mechanisms = [.scramSHA1]
            $0.userAgent = XMPPUserAgent(software: "Tether", device: "Test")
            $0.state.userAgentID = "d4b3f2a1-0000-4000-8000-000000000001"
            $0.resource = "phone"
            configure(&$0)
        }
    }

    @Test func oneExchangeLogsInBindsAndEnablesStreamManagement() throws {
        let harness = harness()
        harness.open(Self.features())
        let authenticate = harness.lastSent
        #expect(authenticate.hasPrefix("<authenticate xmlns='urn:xmpp:sasl:2' mechanism='SCRAM-SHA-1'>"))
        #expect(
            authenticate.contains(
                "<user-agent id='d4b3f2a1-0000-4000-8000-000000000001'><software>Tether</software><device>Test</device></user-agent>"
            )
        )
        #expect(
            authenticate.contains(
                "<bind xmlns='urn:xmpp:bind:0'><tag>phone</tag><enable xmlns='urn:xmpp:sm:3' resume='true'/></bind>"
            ),
            "\(authenticate)"
        )
        #expect(harness.sentWithCredentials.last == true)
        let signature = scram(harness)
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(signature)</additional-data><bound xmlns='urn:xmpp:bind:0'><enabled xmlns='urn:xmpp:sm:3' id='sm-9' resume='1' max='120'/></bound><authorization-identifier>alice@example.com/phone~abc</authorization-identifier></success>"
        )
        #expect(harness.state == .authenticating)  // the features come next, without a restart
        harness.server(Self.postFeatures)
        #expect(harness.state == .connected)
        #expect(harness.jid == JID("alice@example.com/phone~abc"))
        #expect(harness.smEnabled)
        #expect(harness.events.contains(.streamManagementEnabled(resumable: true)))
        #expect(
            harness.machine.authentication
                == XMPPAuthentication(mechanism: "SCRAM-SHA-1", channelBinding: nil, sasl2: true)
        )
        // No stream restart, no bind iq, no separate enable.
        #expect(!harness.transcript.contains("send:iq") && !harness.transcript.contains("send:enable"))
        #expect(harness.transcript.filter { $0 == "send:header" }.count == 1)
    }

    @Test func oneExchangeResumesWithEarlyElementsKept() throws {
        let harness = harness()
        harness.open(Self.features())
        let signature = scram(harness)
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(signature)</additional-data><bound xmlns='urn:xmpp:bind:0'><enabled xmlns='urn:xmpp:sm:3' id='sm-9' resume='1' max='120'/></bound><authorization-identifier>alice@example.com/phone~abc</authorization-identifier></success>"
                + Self.postFeatures
        )
        try harness.machine.send(XMPPMessage(to: JID("bob@example.com"), body: "one"), now: harness.now)
        harness.drain()
        harness.transportClosed("reset")
        harness.advance(by: .seconds(1))
        harness.connected()
        harness.server(XMPPClientHarness.serverHeader + Self.features())
        let authenticate = harness.lastSent
        #expect(authenticate.contains("<resume xmlns='urn:xmpp:sm:3' previd='sm-9' h='0'/>"), "\(authenticate)")
        #expect(harness.machine.phase == .resuming)
        let signature2 = scram(harness)
        // prosody: <resumed/> among <success>'s children, then an <r/> before the features.
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(signature2)</additional-data><resumed xmlns='urn:xmpp:sm:3' h='0' previd='sm-9'/><authorization-identifier>alice@example.com/phone~abc</authorization-identifier></success><r xmlns='urn:xmpp:sm:3'/>"
        )
        #expect(harness.state == .authenticating)
        harness.server(Self.postFeatures)
        #expect(harness.state == .connected)
        #expect(harness.lifecycle.last == .resumed(JID("alice@example.com/phone~abc")!))
        // The early <r/> is answered once online; the unacknowledged message goes out again.
        #expect(harness.sent.contains { $0.text == "<a xmlns='urn:xmpp:sm:3' h='0'/>" })
        #expect(harness.sent.suffix(4).contains { $0.text.contains("<body>one</body>") })
    }

    @Test func aFailedResumptionBindsInTheSameExchange() throws {
        let harness = harness()
        harness.open(Self.features())
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(scram(harness))</additional-data><bound xmlns='urn:xmpp:bind:0'><enabled xmlns='urn:xmpp:sm:3' id='sm-9' resume='1'/></bound><authorization-identifier>alice@example.com/phone~abc</authorization-identifier></success>"
                + Self.postFeatures
        )
        harness.transportClosed("reset")
        harness.advance(by: .seconds(1))
        harness.connected()
        harness.server(XMPPClientHarness.serverHeader + Self.features())
        let signature = scram(harness)
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(signature)</additional-data><failed xmlns='urn:xmpp:sm:3'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></failed><bound xmlns='urn:xmpp:bind:0'><enabled xmlns='urn:xmpp:sm:3' id='sm-10' resume='1'/></bound><authorization-identifier>alice@example.com/phone~def</authorization-identifier></success>"
                + Self.postFeatures
        )
        #expect(harness.events.contains(.resumeFailed(.itemNotFound)))
        #expect(harness.lifecycle.last == .connected(JID("alice@example.com/phone~def")!))
        #expect(harness.smEnabled)
    }

    @Test func withoutBind2TheFeaturesLeadToTheUsualBind() throws {
        let harness = harness()
        harness.open(Self.features(bind: false, sm: false))
        #expect(!harness.lastSent.contains("<bind"))
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(scram(harness))</additional-data><authorization-identifier>alice@example.com</authorization-identifier></success>"
        )
        harness.server(XMPPClientHarness.boundFeatures)
        #expect(harness.lastSent.contains("urn:ietf:params:xml:ns:xmpp-bind"))
        harness.server(
            "<iq type='result' id='\(harness.lastSentID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/phone</jid></bind></iq>"
        )
        #expect(harness.state == .connected)
    }

    @Test func failureAndContinueEndTheAttempt() throws {
        let failing = harness()
        failing.open(Self.features())
        failing.server(
            "<failure xmlns='urn:xmpp:sasl:2'><not-authorized xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/><text>Wrong password</text></failure>"
        )
        let error = try closedError(failing.events)
        #expect(error.kind == .authenticationFailed && error.saslCondition == "not-authorized" && error.isFatal)
        #expect(error.message == "Authentication failed (not-authorized): Wrong password.")

        let continuing = harness()
        continuing.open(Self.features())
        _ = scram(continuing)
        continuing.server(
            "<continue xmlns='urn:xmpp:sasl:2'><tasks><task>TOTP-EXAMPLE</task></tasks></continue>"
        )
        let other = try closedError(continuing.events)
        #expect(other.kind == .authenticationFailed && other.message.contains("TOTP-EXAMPLE"))
        #expect(continuing.sent.contains { $0.text == "<abort xmlns='urn:xmpp:sasl:2'/>" })
    }

    @Test func aWrongServerSignatureInSASL2IsFatal() throws {
        let harness = harness()
        harness.open(Self.features())
        _ = scram(harness)
        let (_, tampered) = harness.scramServer.final(signatureTampered: true)
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(Base64.encode(Array(tampered.utf8)))</additional-data><authorization-identifier>alice@example.com</authorization-identifier></success>"
        )
        let error = try closedError(harness.events)
        #expect(error.kind == .serverAuthenticationFailed && error.isFatal)
        #expect(harness.sent.contains { $0.text == "<abort xmlns='urn:xmpp:sasl:2'/>" })
    }

    @Test func theBackgroundIsSaidInsideTheBind() {
        let harness = harness()
        harness.machine.applicationStateChanged(.background, now: harness.now)
        harness.open(Self.features())
        #expect(harness.lastSent.contains("<inactive xmlns='urn:xmpp:csi:0'/></bind>"), "\(harness.lastSent)")
    }

    @Test func sasl2CanBeTurnedOff() {
        let harness = harness { $0.sasl2 = false }
        harness.open(Self.features())
        #expect(harness.lastSent.hasPrefix("<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='SCRAM-SHA-1'"))
    }

    @Test func aUserAgentIdIsMadeWhenTheAppGivesNone() {
        let harness = harness { $0.userAgent = XMPPUserAgent() }
        harness.open(Self.features())
        let text = harness.lastSent
        guard let start = text.range(of: "<user-agent id='") else {
            Issue.record("no user agent: \(text)")
            return
        }
        let id = text[start.upperBound...].prefix { $0 != "'" }
        #expect(id.count == 36 && id.split(separator: "-").map(\.count) == [8, 4, 4, 4, 12], "\(id)")
    }

    // MARK: - FAST (XEP-0484)

    static let exporter = Array(repeating: UInt8(0x5A), count: 32)
    static let tls13 = TLSChannelBindings(protocolVersion: "TLSv1.3", data: [.tlsExporter: exporter])
    static let fastFeatures =
        "<stream:features><authentication xmlns='urn:xmpp:sasl:2'><mechanism>SCRAM-SHA-1</mechanism><inline><bind xmlns='urn:xmpp:bind:0'/><fast xmlns='urn:xmpp:fast:0'><mechanism>HT-SHA-256-EXPR</mechanism><mechanism>HT-SHA-256-NONE</mechanism></fast></inline></authentication></stream:features>"

    /// Starts, connects with direct TLS (its bindings `tls`) and sends the header with `features`.
    func openSecured(_ harness: XMPPClientHarness, features: String = fastFeatures, starting: Bool = true) {
        if starting { harness.start() }
        harness.machine.transportConnected(generation: harness.generation!, tls: Self.tls13, now: harness.now)
        harness.drain()
        harness.server(XMPPClientHarness.serverHeader + features)
    }

    func hmac(_ token: String, _ label: String) -> [UInt8] {
        OpenSSLHashProvider().hmac(.sha256, key: Array(token.utf8), data: Array(label.utf8) + Self.exporter)
    }

    @Test func aPasswordLoginAsksForATokenAndTheNextLoginUsesIt() throws {
        let harness = harness { $0.tls = .direct }
        openSecured(harness)
        #expect(harness.lastSent.contains("<request-token xmlns='urn:xmpp:fast:0' mechanism='HT-SHA-256-EXPR'/>"))
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(scram(harness))</additional-data><bound xmlns='urn:xmpp:bind:0'/><authorization-identifier>alice@example.com/phone~1</authorization-identifier><token xmlns='urn:xmpp:fast:0' token='secret-token:abc' expiry='2026-12-24T12:00:00Z'/></success>"
                + Self.postFeatures
        )
        let token = XMPPFASTToken(
            mechanism: "HT-SHA-256-EXPR",
            secret: "secret-token:abc",
            expiry: "2026-12-24T12:00:00Z"
        )
        #expect(harness.events.contains(.fastToken(token)))
        #expect(!"\(harness.events)".contains("secret-token:abc"))
        // The reconnect logs in with the token: user NUL HMAC(token, "Initiator" + tls-exporter data).
        harness.transportClosed("reset")
        harness.advance(by: .seconds(1))
        openSecured(harness, starting: false)
        let authenticate = harness.lastSent
        #expect(authenticate.hasPrefix("<authenticate xmlns='urn:xmpp:sasl:2' mechanism='HT-SHA-256-EXPR'>"))
        #expect(authenticate.contains("<fast xmlns='urn:xmpp:fast:0'/>") && !authenticate.contains("request-token"))
        #expect(
            authenticateInitialResponse(authenticate)
                == Base64.encode(Array("alice".utf8) + [0] + hmac("secret-token:abc", "Initiator"))
        )
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(Base64.encode(hmac("secret-token:abc", "Responder")))</additional-data><bound xmlns='urn:xmpp:bind:0'/><authorization-identifier>alice@example.com/phone~2</authorization-identifier></success>"
                + Self.postFeatures
        )
        #expect(harness.state == .connected)
        #expect(harness.machine.authentication?.fast == true)
    }

    @Test func aRefusedTokenFallsBackToThePasswordOnTheSameStream() throws {
        let token = XMPPFASTToken(
            mechanism: "HT-SHA-256-EXPR",
            secret: "secret-token:old",
            expiry: "2026-12-24T12:00:00Z"
        )
        let harness = harness {
            $0.tls = .direct
            $0.state.fastToken = token
        }
        openSecured(harness)
        #expect(harness.lastSent.contains("mechanism='HT-SHA-256-EXPR'"))
        let generation = harness.generation
        harness.server(
            "<failure xmlns='urn:xmpp:sasl:2'><credentials-expired xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/></failure>"
        )
        #expect(harness.events.contains(.fastTokenRefused(condition: "credentials-expired")))
        #expect(harness.lastSent.hasPrefix("<authenticate xmlns='urn:xmpp:sasl:2' mechanism='SCRAM-SHA-1'>"))
        #expect(harness.generation == generation && harness.state == .authenticating)
    }

    @Test func aWrongAnswerToTheTokenIsFatal() throws {
        let token = XMPPFASTToken(mechanism: "HT-SHA-256-EXPR", secret: "secret-token:abc", expiry: "x")
        let harness = harness {
            $0.tls = .direct
            $0.state.fastToken = token
        }
        openSecured(harness)
        harness.server(
            "<success xmlns='urn:xmpp:sasl:2'><additional-data>\(Base64.encode(hmac("secret-token:other", "Responder")))</additional-data><authorization-identifier>alice@example.com</authorization-identifier></success>"
        )
        let error = try closedError(harness.events)
        #expect(error.kind == .serverAuthenticationFailed && error.isFatal)
    }

    @Test func noTokenWithoutTLS() {
        let harness = harness {
            $0.state.fastToken = XMPPFASTToken(mechanism: "HT-SHA-256-NONE", secret: "t", expiry: "x")
        }
        harness.open(Self.fastFeatures)
        #expect(harness.lastSent.contains("mechanism='SCRAM-SHA-1'") && !harness.lastSent.contains("request-token"))
    }
}
