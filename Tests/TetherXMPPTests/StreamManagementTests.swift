import Testing
import TetherCore
import TetherTestSupport
import TetherXML

@testable import TetherXMPP

/// XEP-0198: counters, acknowledgements, resumption, failures.
struct StreamManagementTests {
    static func message(_ n: Int) -> XMPPMessage {
        XMPPMessage(to: JID("bob@example.com"), body: "m\(n)", id: "id\(n)")
    }

    @Test func answersRequestsAtOnceWithTheHandledCount() {
        let harness = XMPPClientHarness()
        harness.login()
        harness.server("<r xmlns='urn:xmpp:sm:3'/>")
        #expect(harness.lastSent == "<a xmlns='urn:xmpp:sm:3' h='0'/>")
        harness.server("<message from='bob@example.com/x'><body>1</body></message><presence from='bob@example.com/x'/>")
        harness.server(
            "<iq type='get' id='p' from='example.com'><ping xmlns='urn:xmpp:ping'/></iq><r xmlns='urn:xmpp:sm:3'/>"
        )
        #expect(harness.lastSent == "<a xmlns='urn:xmpp:sm:3' h='3'/>")
        // Nonzas do not count.
        harness.server("<a xmlns='urn:xmpp:sm:3' h='1'/><r xmlns='urn:xmpp:sm:3'/>")
        #expect(harness.lastSent == "<a xmlns='urn:xmpp:sm:3' h='3'/>")
    }

    @Test func stanzasBeforeEnabledAreNotCounted() {
        let harness = XMPPClientHarness()
        harness.login(enableSM: false)
        harness.server("<message from='bob@example.com/x'><body>early</body></message>")
        harness.server("<enabled xmlns='urn:xmpp:sm:3' id='sm-1' resume='true'/><r xmlns='urn:xmpp:sm:3'/>")
        #expect(harness.lastSent == "<a xmlns='urn:xmpp:sm:3' h='0'/>")
    }

    @Test func requestsAcksAfterNStanzasOrTSeconds() throws {
        let harness = XMPPClientHarness {
            $0.streamManagement = .init(requestAckAfterStanzas: 3, requestAckAfter: .seconds(2))
        }
        harness.login()
        try harness.machine.send(Self.message(1), now: harness.now)
        try harness.machine.send(Self.message(2), now: harness.now)
        harness.drain()
        #expect(harness.transcript.suffix(2) == ["send:message", "send:message"])
        try harness.machine.send(Self.message(3), now: harness.now)
        harness.drain()
        #expect(harness.transcript.suffix(2) == ["send:message", "send:r"])
        try harness.machine.send(Self.message(4), now: harness.now)
        harness.drain()
        harness.advance(by: .milliseconds(1999))
        #expect(harness.transcript.last == "send:message")
        harness.advance(by: .milliseconds(1))
        #expect(harness.transcript.last == "send:r")
        #expect(harness.unacknowledged == 4)
        harness.server("<a xmlns='urn:xmpp:sm:3' h='3'/>")
        #expect(harness.unacknowledged == 1)
        harness.server("<a xmlns='urn:xmpp:sm:3' h='4'/>")
        #expect(harness.unacknowledged == 0)
        // An explicit request with nothing unacknowledged sends nothing.
        let sent = harness.sent.count
        harness.machine.requestAcknowledgement(now: harness.now)
        harness.drain()
        #expect(harness.sent.count == sent)
    }

    /// A message sent without an id goes out with one the connection gives it (written on the
    /// wire, not into a copy of the tree) and is handed back with that same id.
    @Test func aMessageWithoutAnIDIsHandedBackWithTheIDItWentOutWith() throws {
        let harness = XMPPClientHarness()
        harness.login()
        let messages = (1...2).map { XMPPMessage(to: JID("bob@example.com"), body: "no id \($0)") }
        for message in messages { try harness.machine.send(message, now: harness.now) }
        harness.drain()
        let ids = try messages.map { message in
            let wire = try #require(harness.sent.last { $0.text.contains("<body>\(message.body!)</body>") }?.text)
            let id = try #require(wire.firstMatch(of: /<message [^>]*id='([^']+)'/)?.1)
            return String(id)
        }
        #expect(ids[0] != ids[1])
        harness.server("<a xmlns='urn:xmpp:sm:3' h='10'/>")  // Too high: the stream ends, both handed back.
        let returned = harness.events.compactMap { if case .unacknowledgedStanzas(let s) = $0 { s } else { nil } }
        #expect(returned == [zip(messages, ids).map { $0.element.settingAttribute("id", to: $1) }])
        #expect(returned.first?.map { $0.attribute("id") } == ids)
    }

    @Test func tooHighAcknowledgementClosesTheStream() throws {
        let harness = XMPPClientHarness()
        harness.login()
        for n in 1...2 { try harness.machine.send(Self.message(n), now: harness.now) }
        harness.drain()
        harness.server("<a xmlns='urn:xmpp:sm:3' h='10'/>")
        #expect(
            harness.sent.last?.text
                == "<stream:error><undefined-condition xmlns='urn:ietf:params:xml:ns:xmpp-streams'/><handled-count-too-high xmlns='urn:xmpp:sm:3' h='10' send-count='2'/></stream:error></stream:stream>"
        )
        #expect(harness.events.contains(.unacknowledgedStanzas([Self.message(1).element, Self.message(2).element])))
        guard
            case .lifecycle(.connectionLost(let error)) = harness.events.first(where: {
                if case .lifecycle(.connectionLost) = $0 { true } else { false }
            })
        else {
            return fail("no disconnect")
        }
        #expect(error.kind == .protocolViolation && error.streamError?.condition == .undefinedCondition)
        // The counters are not trusted any more: the next connection binds afresh.
        harness.advance(by: .seconds(1))
        harness.connected()
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.mechanisms(["PLAIN"]))
        harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.boundFeatures)
        #expect(harness.lastSent.contains("<bind"))
    }

    /// Counters wrap at 2^32 (xs:unsignedInt): acknowledgements across the wrap work.
    @Test func countersWrap() {
        var sm = StreamManagement()
        sm.isEnabled = true
        sm.acknowledged = UInt32.max - 1
        for n in 0..<4 { sm.sentStanza(.app(Self.message(n).element)) }
        #expect(sm.sent == 2)
        #expect(sm.acknowledge(UInt32.max) == .acknowledged(count: 1))
        #expect(sm.acknowledge(1) == .acknowledged(count: 2))
        #expect(sm.acknowledge(3) == .tooHigh(h: 3, sent: 2))
        #expect(sm.acknowledge(2) == .acknowledged(count: 1))
        sm.inbound = UInt32.max
        sm.handledInbound()
        #expect(sm.inbound == 0)
        #expect(StreamManagement.h(of: try! element("<a xmlns='urn:xmpp:sm:3' h='4294967295'/>")) == UInt32.max)
        #expect(StreamManagement.h(of: try! element("<a xmlns='urn:xmpp:sm:3' h='4294967296'/>")) == nil)
        #expect(StreamManagement.h(of: try! element("<a xmlns='urn:xmpp:sm:3' h='-1'/>")) == nil)
    }

    @Test func resumptionRetransmitsWhatTheServerDidNotGet() throws {
        let harness = XMPPClientHarness()
        harness.login()
        for n in 1...5 { try harness.machine.send(Self.message(n), now: harness.now) }
        harness.drain()
        harness.server("<a xmlns='urn:xmpp:sm:3' h='2'/>")
        harness.server("<message from='bob@example.com/x'><body>in</body></message>")
        let pending = try harness.machine.send(XMPPIQ.get(XElement(XMLName("q", namespace: "x"))), now: harness.now)
        harness.drain()
        harness.transportClosed()
        #expect(harness.state == .reconnectWaiting)
        // Sent while offline: queued.
        try harness.machine.send(Self.message(6), now: harness.now)
        harness.advance(by: .seconds(1))
        let before = harness.sent.count
        harness.connected()
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.mechanisms(["PLAIN"]))
        harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.boundFeatures)
        #expect(harness.lastSent == "<resume xmlns='urn:xmpp:sm:3' previd='sm-1' h='1'/>")
        harness.server("<resumed xmlns='urn:xmpp:sm:3' previd='sm-1' h='4'/>")
        #expect(harness.state == .connected)
        #expect(harness.jid == JID("alice@example.com/phone"))
        let after = harness.sent[before...].map(\.text)
        // m5 and the iq again (m1…m4 reached the server), then m6, then a request for an ack.
        #expect(after.filter { $0.contains("<body>") || $0.hasPrefix("<iq") }.count == 3)
        #expect(after.contains { $0.contains("<body>m5</body>") })
        #expect(after.contains { $0.contains("<body>m6</body>") })
        // The iq went out with the id the connection gave it, the same bytes both times.
        let iq = "<iq type='get' id='\(pending)'><q xmlns='x'/></iq>"
        #expect(harness.sent[..<before].map(\.text).filter { $0 == iq }.count == 1)
        #expect(after.contains(iq))
        #expect(!after.contains { $0.contains("<body>m4</body>") })
        #expect(after.last == "<r xmlns='urn:xmpp:sm:3'/>")
        #expect(harness.events.contains(.lifecycle(.resumed(JID("alice@example.com/phone")!))))
        #expect(harness.events.filter { if case .lifecycle(.connected) = $0 { true } else { false } }.count == 1)
        // The iq survived: its answer still reaches the caller.
        harness.server("<iq type='result' id='\(pending)'/>")
        guard case .iqResponse(pending, .result) = harness.events.last else { return fail("no iq answer") }
    }

    @Test func failedResumptionHandsBackTheStanzasAndBindsAfresh() throws {
        let harness = XMPPClientHarness()
        harness.login()
        for n in 1...3 { try harness.machine.send(Self.message(n), now: harness.now) }
        let pending = try harness.machine.send(XMPPIQ.get(XElement(XMLName("q", namespace: "x"))), now: harness.now)
        harness.drain()
        harness.transportClosed()
        try harness.machine.send(Self.message(4), now: harness.now)
        harness.advance(by: .seconds(1))
        harness.connected()
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.mechanisms(["PLAIN"]))
        harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.boundFeatures)
        harness.server(
            "<failed xmlns='urn:xmpp:sm:3' h='1'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></failed>"
        )
        #expect(harness.events.contains(.resumeFailed(.itemNotFound)))
        // m1 reached the server (h='1'); m2, m3 and the iq are handed back; m4 was never sent
        // and goes out on the new session.
        guard
            let returned = harness.events.compactMap({ if case .unacknowledgedStanzas(let s) = $0 { s } else { nil } })
                .first
        else { return fail("nothing handed back") }
        #expect(returned.count == 3)
        #expect(returned.first == Self.message(2).element)
        // The iq is handed back with the id it went out with.
        #expect(returned.last == XMPPIQ.get(XElement(XMLName("q", namespace: "x")), id: pending).element)
        #expect(
            harness.events.contains(
                .iqResponse(
                    id: pending,
                    .notDelivered(XMPPClientError(.connectionLost, "The previous session could not be resumed."))
                )
            )
        )
        #expect(harness.lastSent.contains("<bind"))
        harness.server(
            "<iq type='result' id='\(harness.lastSentID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/new</jid></bind></iq>"
        )
        #expect(harness.events.contains(.lifecycle(.connected(JID("alice@example.com/new")!))))
        #expect(harness.sent.suffix(3).contains { $0.text.contains("<body>m4</body>") })
    }

    @Test func withoutResumptionLossesAreReported() throws {
        let harness = XMPPClientHarness()
        harness.login(resumable: false)
        try harness.machine.send(Self.message(1), now: harness.now)
        harness.drain()
        harness.transportClosed()
        #expect(harness.events.contains(.unacknowledgedStanzas([Self.message(1).element])))
    }

    @Test func stopHandsBackWhatIsUnacknowledged() throws {
        let harness = XMPPClientHarness()
        harness.login()
        try harness.machine.send(Self.message(1), now: harness.now)
        harness.drain()
        harness.machine.stop(now: harness.now)
        harness.drain()
        #expect(harness.sent.suffix(2).map(\.text) == ["<a xmlns='urn:xmpp:sm:3' h='0'/>", "</stream:stream>"])
        #expect(harness.state == .closing)
        // An acknowledgement before the server's close still counts.
        harness.server("<a xmlns='urn:xmpp:sm:3' h='1'/></stream:stream>")
        #expect(harness.state == .disconnected)
        #expect(harness.transcript.suffix(2) == ["close", "event:closed"])
        #expect(!harness.events.contains { if case .unacknowledgedStanzas = $0 { true } else { false } })
    }

    @Test func queueLimit() throws {
        let harness = XMPPClientHarness { $0.maximumQueuedStanzas = 3 }
        harness.login()
        for n in 1...3 { try harness.machine.send(Self.message(n), now: harness.now) }
        expectThrows(\XMPPClientError.kind, .sendQueueFull) {
            try harness.machine.send(Self.message(4), now: harness.now)
        }
        harness.drain()
        harness.server("<a xmlns='urn:xmpp:sm:3' h='3'/>")
        try harness.machine.send(Self.message(4), now: harness.now)
    }
}

struct UnacknowledgedLimitTests {
    /// A server that sends pings but never acknowledges: the replies cannot pile up forever.
    @Test func aServerThatNeverAcknowledgesIsCutOff() {
        let harness = XMPPClientHarness { $0.maximumQueuedStanzas = 3 }
        harness.login()
        for n in 1...6 {
            harness.server("<iq type='get' id='p\(n)' from='example.com'><ping xmlns='urn:xmpp:ping'/></iq>")
        }
        #expect(harness.unacknowledged == 6)
        harness.server("<iq type='get' id='p7' from='example.com'><ping xmlns='urn:xmpp:ping'/></iq>")
        #expect(harness.sent.last?.text.contains("<resource-constraint") == true)
        // The unacknowledged stanzas are the machine's own answers: nothing to hand back.
        #expect(!harness.events.contains { if case .unacknowledgedStanzas = $0 { true } else { false } })
        #expect(harness.state == .reconnectWaiting)
    }
}
