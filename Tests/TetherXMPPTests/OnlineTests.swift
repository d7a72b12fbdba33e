import Testing
import TetherCore
import TetherXML

@testable import TetherXMPP

/// iq tracking, incoming requests, roster, presence subscriptions.
struct IQAndRosterTests {
    @Test func iqResultsAndErrorsReachTheCaller() throws {
        let harness = XMPPClientHarness()
        harness.login()
        let query = XElement(XMLName("query", namespace: "jabber:iq:version"))
        let id = try harness.machine.send(XMPPIQ.get(query, to: JID("example.com")), now: harness.now)
        harness.drain()
        #expect(
            harness.lastSent == "<iq type='get' to='example.com' id='\(id)'><query xmlns='jabber:iq:version'/></iq>"
        )
        // An answer from someone else, and an unknown id: ignored.
        harness.server("<iq type='result' id='\(id)' from='mallory@evil.example'/>")
        harness.server("<iq type='result' id='nope' from='example.com'/>")
        #expect(!harness.events.contains { if case .iqResponse = $0 { true } else { false } })
        harness.server(
            "<iq type='result' id='\(id)' from='example.com'><query xmlns='jabber:iq:version'><name>p</name></query></iq>"
        )
        guard case .iqResponse(id, .result(let result)) = harness.events.last else { return fail("no result") }
        #expect(result.payload?.firstChild("name")?.text == "p")
        // An error reply, addressed to the own server (no from).
        let second = try harness.machine.send(XMPPIQ.set(query), now: harness.now)
        harness.drain()
        harness.server(
            "<iq type='error' id='\(second)'><error type='cancel'><feature-not-implemented xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        )
        guard case .iqResponse(second, .error(let error)) = harness.events.last else { return fail("no error") }
        #expect(error.error?.condition == .featureNotImplemented)
        // A late duplicate answer is ignored (each request ends exactly once).
        let count = harness.events.count
        harness.server("<iq type='result' id='\(second)'/>")
        #expect(harness.events.count == count)
    }

    @Test func iqTimeout() throws {
        let harness = XMPPClientHarness { $0.iqTimeout = .seconds(30) }
        harness.login()
        let first = try harness.machine.send(XMPPIQ.get(XElement(XMLName("q", namespace: "x"))), now: harness.now)
        harness.advance(by: .seconds(10))
        let second = try harness.machine.send(
            XMPPIQ.get(XElement(XMLName("q", namespace: "x"))),
            timeout: .seconds(5),
            now: harness.now
        )
        harness.advance(by: .seconds(5))
        #expect(harness.events.last == .iqResponse(id: second, .timedOut))
        harness.advance(by: .seconds(14))
        #expect(!harness.events.contains(.iqResponse(id: first, .timedOut)))
        harness.advance(by: .seconds(1))
        #expect(harness.events.last == .iqResponse(id: first, .timedOut))
    }

    /// With many requests pending, each times out at its own deadline and only then; answered
    /// ones never do (the timer, which a new request only moves sooner, may fire early for them
    /// and is armed again); the last answer stops it.
    @Test func iqTimeoutsWithManyPendingRequests() throws {
        let harness = XMPPClientHarness { $0.iqTimeout = .seconds(30) }
        harness.login()
        let query = XElement(XMLName("q", namespace: "x"))
        var ids: [String] = []
        for _ in 0..<100 {
            ids.append(try harness.machine.send(XMPPIQ.get(query), now: harness.now))
            harness.advance(by: .milliseconds(100))
        }
        // Sent at 0, 0.1 … 9.9 s; now 10 s. The first half is answered.
        for id in ids.prefix(50) { harness.server("<iq type='result' id='\(id)'/>") }
        func timedOut() -> [String] {
            harness.events.compactMap { if case .iqResponse(let id, .timedOut) = $0 { id } else { nil } }
        }
        harness.advance(by: .milliseconds(24_950))
        #expect(timedOut().isEmpty)
        harness.advance(by: .milliseconds(50))
        #expect(timedOut() == [ids[50]])
        for _ in 0..<49 { harness.advance(by: .milliseconds(100)) }
        #expect(timedOut() == Array(ids[50...]))
        #expect(!harness.machine.timers.isArmed(.iqTimeout))
        // Answered before their deadlines: the timer stops with the last answer.
        let late = try harness.machine.send(XMPPIQ.get(query), now: harness.now)
        let later = try harness.machine.send(XMPPIQ.get(query), timeout: .seconds(5), now: harness.now)
        #expect(harness.machine.timers.deadline(.iqTimeout) == harness.now + .seconds(5))
        harness.server("<iq type='result' id='\(later)'/>")
        harness.server("<iq type='result' id='\(late)'/>")
        #expect(!harness.machine.timers.isArmed(.iqTimeout))
        #expect(timedOut().count == 50)
    }

    @Test func incomingRequests() {
        let harness = XMPPClientHarness { $0.handledIQNamespaces = ["urn:example:handled"] }
        harness.login()
        // Unhandled: service-unavailable at once, addressed back.
        harness.server("<iq type='get' id='q1' from='bob@example.com/x'><query xmlns='jabber:iq:version'/></iq>")
        #expect(
            harness.lastSent
                == "<iq type='error' to='bob@example.com/x' id='q1'><error type='cancel'><service-unavailable xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        )
        // Ping: answered with a result.
        harness.server("<iq type='get' id='p1' from='example.com'><ping xmlns='urn:xmpp:ping'/></iq>")
        #expect(harness.lastSent == "<iq type='result' to='example.com' id='p1'/>")
        // Handled: an event, no automatic answer.
        let sentBefore = harness.sent.count
        harness.server("<iq type='set' id='h1' from='bob@example.com/x'><do xmlns='urn:example:handled'/></iq>")
        guard case .iqRequest(let request) = harness.events.last else { return fail("no request") }
        #expect(harness.sent.count == sentBefore)
        _ = try? harness.machine.send(request.result(), now: harness.now)
        harness.drain()
        #expect(harness.lastSent == "<iq type='result' to='bob@example.com/x' id='h1'/>")
        // No payload: bad-request.
        harness.server("<iq type='get' id='e1' from='bob@example.com/x'/>")
        #expect(harness.lastSent.contains("<bad-request"))
    }

    @Test func rosterFetchPushesAndSubscriptions() {
        let harness = XMPPClientHarness {
            $0.fetchRosterOnConnect = true
            $0.autoAcceptSubscriptionsFromContacts = true
            $0.initialPresence = XMPPPresence()
        }
        harness.login()
        let rosterRequest = harness.sent.first { $0.text.contains("jabber:iq:roster") }!.text
        #expect(rosterRequest.hasPrefix("<iq type='get' id='roster"))
        let presenceIndex = harness.sent.firstIndex { $0.text == "<presence/>" }!
        let rosterIndex = harness.sent.firstIndex { $0.text.contains("jabber:iq:roster") }!
        #expect(rosterIndex < presenceIndex)  // roster before initial presence (RFC 6121 §2.2)
        let id = String(rosterRequest.split(separator: "'")[3])
        harness.server(
            "<iq type='result' id='\(id)'><query xmlns='jabber:iq:roster' ver='v1'><item jid='bob@example.com' name='Bob' subscription='both'><group>Friends</group></item><item jid='carol@example.com' ask='subscribe'/></query></iq>"
        )
        guard case .roster(let roster) = harness.events.last else { return fail("no roster") }
        #expect(roster.version == "v1")
        #expect(
            roster.items == [
                RosterItem(jid: JID("bob@example.com")!, name: "Bob", subscription: .both, groups: ["Friends"]),
                RosterItem(jid: JID("carol@example.com")!, subscriptionRequested: true),
            ]
        )
        // A push from the account: acknowledged and reported.
        harness.server(
            "<iq type='set' id='push1'><query xmlns='jabber:iq:roster'><item jid='dave@example.com' subscription='none'/></query></iq>"
        )
        #expect(harness.lastSent == "<iq type='result' id='push1'/>")
        #expect(harness.events.last == .rosterPush(RosterItem(jid: JID("dave@example.com")!)))
        // A push from someone else is refused (RFC 6121 §2.1.6).
        harness.server(
            "<iq type='set' id='push2' from='mallory@evil.example'><query xmlns='jabber:iq:roster'><item jid='m@evil.example'/></query></iq>"
        )
        #expect(harness.lastSent.contains("service-unavailable"))
        #expect(harness.events.last == .rosterPush(RosterItem(jid: JID("dave@example.com")!)))
        // Subscription requests: a contact's is accepted, a stranger's only reported.
        harness.server("<presence type='subscribe' from='bob@example.com'/>")
        #expect(harness.sent.suffix(2).contains { $0.text == "<presence type='subscribed' to='bob@example.com'/>" })
        #expect(harness.events.last == .subscriptionRequest(from: JID("bob@example.com")!, autoAccepted: true))
        let sentBefore = harness.sent.count
        harness.server("<presence type='subscribe' from='eve@example.com/x'/>")
        #expect(harness.sent.count == sentBefore)
        #expect(harness.events.last == .subscriptionRequest(from: JID("eve@example.com")!, autoAccepted: false))
        // Ordinary presence and messages.
        harness.server("<presence from='bob@example.com/phone'><show>away</show><status>out</status></presence>")
        guard case .presence(let presence) = harness.events.last else { return fail("no presence") }
        #expect(presence.show == .away && presence.status == "out" && presence.isAvailable)
        harness.server(
            "<message from='bob@example.com/phone' type='chat' id='m1'><body>hi</body><delay xmlns='urn:xmpp:delay' stamp='2024-01-05T12:00:00Z'/></message>"
        )
        guard case .message(let message) = harness.events.last else { return fail("no message") }
        #expect(message.body == "hi" && message.type == .chat && message.delay?.stamp == "2024-01-05T12:00:00Z")
    }

    @Test func subscriptionRequestsAreOnlyReportedByDefault() {
        let harness = XMPPClientHarness()
        harness.login()
        let sentBefore = harness.sent.count
        harness.server("<presence type='subscribe' from='bob@example.com'/>")
        #expect(harness.sent.count == sentBefore)
        #expect(harness.events.last == .subscriptionRequest(from: JID("bob@example.com")!, autoAccepted: false))
    }
}

/// XEP-0199 auto-ping.
struct AutoPingTests {
    static func harness(missed: Int = 2) -> XMPPClientHarness {
        XMPPClientHarness {
            $0.autoPing = .init(interval: .seconds(20), timeout: .seconds(5), maximumMissed: missed)
            $0.streamManagement = nil
        }
    }

    @Test func pingsOnlyWhenNothingWasReceived() {
        let harness = Self.harness()
        harness.login()
        harness.advance(by: .seconds(15))
        harness.server("<message from='bob@example.com/x'><body>x</body></message>")
        harness.advance(by: .seconds(19))
        #expect(!harness.sent.contains { $0.text.contains("urn:xmpp:ping") })
        harness.advance(by: .seconds(1))
        #expect(harness.lastSent.contains("<ping xmlns='urn:xmpp:ping'/>"))
        #expect(harness.lastSent.contains("to='example.com'"))
        // One ping at a time: nothing more before its timeout.
        let sent = harness.sent.count
        harness.advance(by: .seconds(4))
        #expect(harness.sent.count == sent)
    }

    @Test func anyAnswerProvesLiveness() {
        let harness = Self.harness()
        harness.login()
        harness.advance(by: .seconds(20))
        harness.server(
            "<iq type='error' id='\(harness.lastSentID)' from='example.com'><error type='cancel'><service-unavailable xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        )
        harness.advance(by: .seconds(19))
        #expect(harness.state == .connected)
        harness.advance(by: .seconds(1))
        #expect(harness.sent.filter { $0.text.contains("urn:xmpp:ping") }.count == 2)
    }

    /// A stalled link: declared dead exactly `interval + N × timeout` after the last byte.
    @Test(arguments: [1, 2, 3])
    func missedPingsDisconnect(_ missed: Int) {
        let harness = Self.harness(missed: missed)
        harness.login()
        let lastByte = harness.now
        harness.advance(by: .seconds(20) + .seconds(5) * missed - .milliseconds(1))
        #expect(harness.state == .connected)
        #expect(harness.sent.filter { $0.text.contains("urn:xmpp:ping") }.count == missed)
        harness.advance(by: .milliseconds(1))
        #expect(harness.state == .reconnectWaiting)
        #expect(harness.now - lastByte == .seconds(20) + .seconds(5) * missed)
        guard
            case .lifecycle(.connectionLost(let error)) = harness.events.first(where: {
                if case .lifecycle(.connectionLost) = $0 { true } else { false }
            })
        else {
            return fail("no disconnect")
        }
        #expect(error.kind == .serverTimeout)
        #expect(harness.closed.contains(harness.generation!))
    }

    @Test func otherTrafficDuringAnOutstandingPingCountsAsLife() {
        let harness = Self.harness(missed: 1)
        harness.login()
        harness.advance(by: .seconds(20))
        harness.advance(by: .seconds(2))
        harness.server("<presence from='bob@example.com/x'/>")
        harness.advance(by: .seconds(3))
        #expect(harness.state == .connected)
    }

    @Test func serverPingsAreAnswered() {
        let harness = Self.harness()
        harness.login()
        harness.server("<iq type='get' id='s2c1' from='example.com'><ping xmlns='urn:xmpp:ping'/></iq>")
        #expect(harness.lastSent == "<iq type='result' to='example.com' id='s2c1'/>")
    }

    @Test func reconnectNowWhileOnlinePingsAtOnce() {
        let harness = Self.harness(missed: 1)
        harness.login()
        harness.machine.reconnectNow(now: harness.now)
        harness.drain()
        #expect(harness.lastSent.contains("urn:xmpp:ping"))
        harness.advance(by: .seconds(5))
        #expect(harness.state == .reconnectWaiting)
    }
}

/// The parser's buffers go back after a quiet spell and return with the next byte.
struct IdleMemoryTests {
    @Test func buffersAreReleasedWhenQuietAndComeBack() {
        let harness = XMPPClientHarness {
            $0.releaseBuffersAfterIdle = .seconds(30)
            $0.autoPing = nil
        }
        harness.login()
        harness.advance(by: .seconds(29))
        #expect(!harness.parserReleased)
        harness.advance(by: .seconds(1))
        #expect(harness.parserReleased)
        // Stanzas after the release parse as before, prefixes of the stream header included.
        harness.server(
            "<message from='bob@example.com/x'><body>after</body></message><stream:error><system-shutdown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>"
        )
        #expect(
            harness.events.contains { if case .message(let message) = $0 { message.body == "after" } else { false } }
        )
        #expect(harness.state == .reconnectWaiting)
    }

    @Test func notWhileAStanzaIsHalfReceived() {
        let harness = XMPPClientHarness { $0.autoPing = nil }
        harness.login()
        harness.server("<message from='bob@example.com/x'><bo")
        harness.advance(by: .seconds(30))
        #expect(!harness.parserReleased)
        harness.server("dy>x</body></message>")
        harness.advance(by: .seconds(30))
        #expect(harness.parserReleased)
        #expect(harness.events.contains { if case .message = $0 { true } else { false } })
    }
}

struct AnswerAddressTests {
    /// Who may answer a request, decided from the `from` attribute as written: the same as from
    /// the parsed JID for every spelling (the user's own addresses exactly as the client spells
    /// them are recognised without parsing; other spellings, others' addresses, malformed ones
    /// are parsed), for requests to the server and to someone else.
    @Test func answersAreMatchedTheSameFromTheWrittenAddress() throws {
        let jid = try #require(JID("alice@example.com/phone"))
        let written: [String?] = [
            nil, "example.com", "alice@example.com", "alice@example.com/phone", "alice@example.com/tablet",
            "example.com/phone", "bob@example.com", "alice@example.org", "ALICE@Example.COM", "alice@EXAMPLE.com/phone",
            "alice@example.com/phone/x", "alice@example.com/ph@ne", "@example.com", "alice@", "", "alice@example.com/",
            "example.co", "xample.com", "alice@example.comm", "bob@example.com/phone",
        ]
        let targets: [JID?] = [nil, jid.bare, jid, jid.domainJID, JID("bob@example.com/laptop"), JID("example.org")]
        for to in targets {
            for text in written {
                let parsed = XMPPClientMachine.answer(from: text.flatMap(JID.init), matches: to, session: jid)
                let asWritten = XMPPClientMachine.answer(from: text, matches: to, session: jid)
                #expect(parsed == asWritten, "from \(text ?? "nil") to \(to?.description ?? "nil")")
            }
        }
        #expect(XMPPClientMachine.isOwn(written: "alice@example.com/phone", jid))
        #expect(XMPPClientMachine.isOwn(written: "example.com", jid))
        #expect(!XMPPClientMachine.isOwn(written: "alice@EXAMPLE.com", jid))  // left to the parser
        #expect(XMPPClientMachine.answer(from: "alice@EXAMPLE.com", matches: nil, session: jid))
        #expect(!XMPPClientMachine.answer(from: "bob@example.com", matches: nil, session: jid))
    }
}

struct WrittenBytesTests {
    /// The hand-written ping and answer bytes equal what the builders serialise to.
    @Test func fastPathsMatchTheBuilders() {
        let harness = XMPPClientHarness()
        harness.login()
        harness.machine.reconnectNow(now: harness.now)  // online: a ping at once
        harness.drain()
        var reference: [UInt8] = []
        XMLSerializer.write(
            XMPPIQ.ping(to: JID("example.com"), id: harness.lastSentID).element,
            in: .clientStream,
            into: &reference
        )
        #expect(harness.lastSent == String(decoding: reference, as: UTF8.self))
        for (from, id): (String?, String) in [("example.com", "p1"), (nil, "x"), ("a@b/c'd", "i&d<")] {
            let request =
                from.map { XMPPIQ.ping(id: id).element.settingAttribute("from", to: $0) } ?? XMPPIQ.ping(id: id).element
            var answer: [UInt8] = []
            XMLSerializer.write(XMPPIQ(request)!.result().element, in: .clientStream, into: &answer)
            #expect(XMPPClientMachine.emptyResult(to: from, id: id) == answer, "\(String(describing: from)) \(id)")
            // Over WebSocket each stanza stands alone, its namespace declared.
            var standalone: [UInt8] = []
            XMLSerializer.write(XMPPIQ(request)!.result().element, in: XMLNamespaceScope(), into: &standalone)
            #expect(XMPPClientMachine.emptyResult(to: from, id: id, standalone: true) == standalone)
        }
    }

    /// A stanza id is the kind, the machine's prefix, "-" and the count of ids made so far (written
    /// in one go: checked across digit counts, the largest count, and an empty kind).
    @Test func idsAreTheKindThePrefixAndACount() {
        let harness = XMPPClientHarness()
        let prefix = harness.machine.idPrefix
        #expect(!prefix.isEmpty)
        for count in 1...12 {
            let id = harness.machine.makeID("iq")
            #expect(id == "iq\(prefix)-\(count)")
        }
        let cases = [(99, "ping"), (999_999, "sm"), (Int.max - 1, ""), (0, "a-much-longer-kind-than-fits-inline")]
        for (before, kind) in cases {
            harness.machine.nextID = before
            let id = harness.machine.makeID(kind)
            #expect(id == "\(kind)\(prefix)-\(before + 1)")
        }
    }

    /// The app's server ping (`XMPPIQ.ping()`, one constant tree) is written from its known bytes:
    /// the same bytes the serializer writes for that tree with the id added, in a stream and over
    /// WebSocket, whatever the id holds. Only that very tree is: an equal one built anew, or the
    /// ping with an id, is serialized as any stanza.
    @Test func theServerPingIsWrittenFromItsKnownBytes() throws {
        for id in ["iqx-1", "a'b&c<d\"e>", "", "é\t\n"] {
            for overWebSocket in [false, true] {
                var reference: [UInt8] = []
                XMLSerializer.write(
                    XMPPIQ.ping().element,
                    in: overWebSocket ? XMLNamespaceScope() : .clientStream,
                    adding: ("id", id),
                    into: &reference
                )
                let written = XMPPClientMachine.serverPingBytes(id: id, overWebSocket: overWebSocket)
                #expect(written == reference, "\(id) \(overWebSocket)")
            }
        }
        #expect(XMPPIQ.ping().isTheServerPing && XMPPIQ.ping(to: nil).isTheServerPing)
        #expect(!XMPPIQ.get(XElement(XMLName("ping", namespace: XMPPNamespace.ping))).isTheServerPing)
        #expect(!XMPPIQ.ping(id: "mine").isTheServerPing && !XMPPIQ.ping(to: JID("example.com")).isTheServerPing)
        // Through the machine: the bytes on the wire, with the id it chose.
        let harness = XMPPClientHarness()
        harness.login()
        let id = try harness.machine.send(XMPPIQ.ping(), now: harness.now)
        harness.drain()
        #expect(harness.lastSent == "<iq type='get' id='\(id)'><ping xmlns='urn:xmpp:ping'/></iq>")
    }
}
