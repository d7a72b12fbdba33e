import Foundation
import Testing
import TetherCore
import TetherXML

@testable import TetherXMPP

/// The catch-up from the archive (XEP-0313) at a new session, the state an app keeps, carbons
/// (XEP-0280) and push (XEP-0357), against a scripted server.
struct ArchiveCatchUpTests {
    static func harness(
        position: XMPPArchivePosition? = nil,
        _ configure: @escaping (inout XMPPClientMachine.Configuration) -> Void = { _ in }
    ) -> XMPPClientHarness {
        XMPPClientHarness {
            $0.archiveCatchUp = .init(pageSize: 2, maximumMessages: 10, maximumHeldMessages: 5)
            $0.state.archivePosition = position
            configure(&$0)
        }
    }

    /// A result of the query `queryID` with the archive id `id`.
    static func result(_ queryID: String, _ id: String, body: String, from: String = "bob@example.com/x") -> String {
        "<message to='alice@example.com/phone'><result xmlns='urn:xmpp:mam:2' queryid='\(queryID)' id='\(id)'><forwarded xmlns='urn:xmpp:forward:0'><delay xmlns='urn:xmpp:delay' stamp='2026-12-01T10:00:00Z'/><message xmlns='jabber:client' from='\(from)' to='alice@example.com' id='m-\(id)' type='chat'><body>\(body)</body></message></forwarded></result></message>"
    }

    static func live(_ id: String, body: String, stanzaID: String?) -> String {
        let sid = stanzaID.map { "<stanza-id xmlns='urn:xmpp:sid:0' by='alice@example.com' id='\($0)'/>" } ?? ""
        return
            "<message from='bob@example.com/x' to='alice@example.com/phone' id='\(id)' type='chat'><body>\(body)</body>\(sid)</message>"
    }

    static func fin(_ iqID: String, complete: Bool, last: String?) -> String {
        let set = last.map { "<set xmlns='http://jabber.org/protocol/rsm'><last>\($0)</last></set>" } ?? ""
        return "<iq type='result' id='\(iqID)'><fin xmlns='urn:xmpp:mam:2' complete='\(complete)'>\(set)</fin></iq>"
    }

    /// The query's queryid and the iq's id, from the last query sent.
    static func query(_ harness: XMPPClientHarness) -> (queryID: String, iqID: String, text: String)? {
        guard let text = harness.sent.last(where: { $0.text.contains("urn:xmpp:mam:2") })?.text,
            let range = text.range(of: "queryid='")
        else { return nil }
        let queryID = String(text[range.upperBound...].prefix { $0 != "'" })
        let iqRange = text.range(of: "id='")!
        return (queryID, String(text[iqRange.upperBound...].prefix { $0 != "'" }), text)
    }

    var messages: (XMPPClientHarness) -> [XMPPMessage] = { harness in
        harness.events.compactMap { if case .message(let message) = $0 { message } else { nil } }
    }

    @Test func withoutAPositionTheLatestIDStartsOne() throws {
        let harness = Self.harness()
        harness.login()
        let query = try #require(Self.query(harness))
        #expect(query.text.contains("<max>1</max><before/>"))
        harness.server(Self.result(query.queryID, "A7", body: "old"))
        harness.server(Self.fin(query.iqID, complete: false, last: "A7"))
        #expect(messages(harness).isEmpty)  // history is not the catch-up's business
        #expect(!harness.events.contains { if case .caughtUp = $0 { true } else { false } })
        #expect(
            harness.machine.clientState.archivePosition
                == XMPPArchivePosition(id: "A7", timestamp: "2026-12-01T10:00:00Z")
        )
        #expect(harness.events.last == .stateChanged(harness.machine.clientState))
        // A live message with the account's stanza id moves the position; one by a room does not.
        harness.server(Self.live("l1", body: "hi", stanzaID: "B1"))
        #expect(harness.machine.clientState.archivePosition?.id == "B1")
        harness.server(
            "<message from='room@muc.example.com/bob' type='groupchat' id='g'><body>g</body><stanza-id xmlns='urn:xmpp:sid:0' by='room@muc.example.com' id='R1'/></message>"
        )
        #expect(harness.machine.clientState.archivePosition?.id == "B1")
    }

    @Test func pagesInOrderThenWhatCameMeanwhile() throws {
        let harness = Self.harness(position: XMPPArchivePosition(id: "A1", timestamp: "2026-12-01T09:00:00Z"))
        harness.login()
        let first = try #require(Self.query(harness))
        #expect(first.text.contains("<max>2</max><after>A1</after>"))
        // Live messages during the catch-up wait: one the archive also has (B3), one it has not.
        harness.server(Self.live("m-B3", body: "three", stanzaID: "B3"))
        harness.server(Self.result(first.queryID, "B2", body: "two"))
        harness.server(Self.result(first.queryID, "A1", body: "the position itself"))  // not again
        harness.server(Self.fin(first.iqID, complete: false, last: "B2"))
        let second = try #require(Self.query(harness))
        #expect(second.text.contains("<after>B2</after>") && second.queryID == first.queryID)
        harness.server(Self.live("m-C1", body: "live", stanzaID: "C1"))
        harness.server(Self.result(second.queryID, "B3", body: "three"))
        harness.server(Self.fin(second.iqID, complete: true, last: "B3"))
        let delivered = messages(harness)
        #expect(delivered.map(\.body) == ["two", "three", "live"])
        #expect(delivered.map(\.isArchived) == [true, true, false])
        #expect(delivered[0].origin == .archive(id: "B2", timestamp: "2026-12-01T10:00:00Z"))
        let caughtUp = try #require(harness.events.firstIndex(of: .caughtUp(count: 2, complete: true)))
        let live = try #require(
            harness.events.firstIndex { if case .message(let m) = $0 { m.body == "live" } else { false } }
        )
        #expect(caughtUp < live)
        #expect(harness.machine.clientState.archivePosition?.id == "C1")
        // The offline store's copy of an archived message, later: not delivered again.
        harness.server(Self.live("m-B2", body: "two", stanzaID: "B2"))
        #expect(messages(harness).count == 3)
        // Another live message: delivered, position moves.
        harness.server(Self.live("m-D1", body: "new", stanzaID: "D1"))
        #expect(messages(harness).last?.body == "new" && harness.machine.clientState.archivePosition?.id == "D1")
    }

    /// Copies are recognised by the archive's id; by sender and id only when they carry none
    /// (senders reuse ids: a new message with a reused id and its own archive id is not a copy).
    @Test func copiesAreRecognisedByTheArchivesID() throws {
        let harness = Self.harness(position: XMPPArchivePosition(id: "A1"))
        harness.login()
        let query = try #require(Self.query(harness))
        harness.server(Self.result(query.queryID, "B1", body: "one"))  // id m-B1 from bob@example.com/x
        harness.server(Self.fin(query.iqID, complete: true, last: "B1"))
        // The offline store's copy without an archive id: the same sender and id, dropped.
        harness.server(Self.live("m-B1", body: "one", stanzaID: nil))
        // A new message that reuses the id, with its own archive id: delivered.
        harness.server(Self.live("m-B1", body: "one again", stanzaID: "B7"))
        #expect(messages(harness).map(\.body) == ["one", "one again"])
    }

    @Test func anUnknownPositionGoesByTime() throws {
        let harness = Self.harness(position: XMPPArchivePosition(id: "gone", timestamp: "2026-12-01T09:00:00Z"))
        harness.login()
        let first = try #require(Self.query(harness))
        harness.server(
            "<iq type='error' id='\(first.iqID)'><error type='cancel'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        )
        let second = try #require(Self.query(harness))
        #expect(second.text.contains("<field var='start'><value>2026-12-01T09:00:00Z</value></field>"))
        #expect(!second.text.contains("<after>"))
        harness.server(Self.result(second.queryID, "B1", body: "since"))
        harness.server(Self.fin(second.iqID, complete: true, last: "B1"))
        #expect(harness.events.contains(.caughtUp(count: 1, complete: true)))
        // Without a time, an unknown position ends the catch-up incomplete.
        let other = Self.harness(position: XMPPArchivePosition(id: "gone"))
        other.login()
        let query = try #require(Self.query(other))
        other.server(
            "<iq type='error' id='\(query.iqID)'><error type='cancel'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        )
        #expect(other.events.contains(.caughtUp(count: 0, complete: false)))
    }

    @Test func onlyTheAccountsOwnResultsAreTheCatchUps() throws {
        let harness = Self.harness(position: XMPPArchivePosition(id: "A1"))
        harness.login()
        let query = try #require(Self.query(harness))
        // Someone else sends a look-alike result: an ordinary (held) message, not an archived one.
        harness.server(
            Self.result(query.queryID, "X1", body: "forged").replacingOccurrences(
                of: "<message to=",
                with: "<message from='mallory@evil.example' to="
            )
        )
        // A result of another query (the app's own): an ordinary message too.
        harness.server(Self.result("apps-query", "Y1", body: "apps"))
        harness.server(Self.fin(query.iqID, complete: true, last: nil))
        let delivered = messages(harness)
        #expect(delivered.count == 2 && delivered.allSatisfy { !$0.isArchived })
        #expect(harness.events.contains(.caughtUp(count: 0, complete: true)))
        #expect(harness.machine.clientState.archivePosition?.id == "A1")
    }

    @Test func aSessionLostDuringTheCatchUpDeliversWhatWasHeld() throws {
        let harness = Self.harness(position: XMPPArchivePosition(id: "A1")) { $0.streamManagement = nil }
        harness.login()
        let query = try #require(Self.query(harness))
        harness.server(Self.result(query.queryID, "B1", body: "one"))
        harness.server(Self.live("l", body: "held", stanzaID: "Z9"))
        harness.transportClosed()
        #expect(messages(harness).map(\.body) == ["one", "held"])
        #expect(harness.events.contains(.caughtUp(count: 1, complete: false)))
        // The held message came out of order: the position stays at the archive's last.
        #expect(harness.machine.clientState.archivePosition?.id == "B1")
    }

    @Test func theLimitsBoundTheCatchUp() throws {
        let harness = Self.harness(position: XMPPArchivePosition(id: "A0")) {
            $0.archiveCatchUp = .init(pageSize: 2, maximumMessages: 2, maximumHeldMessages: 1)
        }
        harness.login()
        let query = try #require(Self.query(harness))
        harness.server(Self.live("l1", body: "held", stanzaID: nil))
        harness.server(Self.live("l2", body: "over the limit", stanzaID: nil))  // delivered at once
        #expect(messages(harness).map(\.body) == ["over the limit"])
        harness.server(Self.result(query.queryID, "B1", body: "one"))
        harness.server(Self.result(query.queryID, "B2", body: "two"))
        let sentBefore = harness.sent.count
        harness.server(Self.fin(query.iqID, complete: false, last: "B2"))
        #expect(harness.sent.count == sentBefore)  // no third page
        #expect(harness.events.contains(.caughtUp(count: 2, complete: false)))
        #expect(messages(harness).map(\.body) == ["over the limit", "one", "two", "held"])
        #expect(harness.machine.clientState.archivePosition?.id == "B2")
    }

    @Test func aServerThatDoesNotMoveOnIsStopped() throws {
        let harness = Self.harness(position: XMPPArchivePosition(id: "A0"))
        harness.login()
        var query = try #require(Self.query(harness))
        harness.server(Self.fin(query.iqID, complete: false, last: "B1"))
        query = try #require(Self.query(harness))
        harness.server(Self.fin(query.iqID, complete: false, last: "B1"))  // the same page again
        #expect(harness.events.contains(.caughtUp(count: 0, complete: false)))
    }

    @Test func aTimeoutEndsTheCatchUp() throws {
        let harness = Self.harness(position: XMPPArchivePosition(id: "A0")) { $0.iqTimeout = .seconds(5) }
        harness.login()
        harness.server(Self.live("l1", body: "held", stanzaID: "B5"))
        harness.advance(by: .seconds(5))
        #expect(harness.events.contains(.caughtUp(count: 0, complete: false)))
        #expect(messages(harness).map(\.body) == ["held"])
        #expect(harness.machine.clientState.archivePosition?.id == "A0")
    }

    /// A server without an archive refuses the query (RFC 6120 §8.4): nothing is lost and nothing
    /// waits for it; the next new session asks again (Specs/xmpp/archive.md, "No service
    /// discovery first").
    @Test(arguments: ["service-unavailable", "feature-not-implemented"])
    func aServerWithoutAnArchiveRefusesTheQuery(_ condition: String) throws {
        let refusal = { (id: String) in
            "<iq type='error' id='\(id)'><error type='cancel'><\(condition) xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        }
        // No position: the anchoring query is refused, and nothing follows.
        let fresh = Self.harness { $0.streamManagement = nil }
        fresh.login()
        let anchoring = try #require(Self.query(fresh))
        fresh.server(refusal(anchoring.iqID))
        fresh.server(Self.live("l1", body: "live", stanzaID: nil))
        #expect(messages(fresh).map(\.body) == ["live"])
        #expect(!fresh.events.contains { if case .caughtUp = $0 { true } else { false } })
        #expect(fresh.machine.clientState.archivePosition == nil)
        fresh.transportClosed()
        fresh.advance(by: .seconds(60))
        fresh.login()
        #expect(try #require(Self.query(fresh)).queryID != anchoring.queryID)  // asked again

        // A position: what came meanwhile is delivered after the refusal, and the position stays.
        let known = Self.harness(position: XMPPArchivePosition(id: "A0"))
        known.login()
        let query = try #require(Self.query(known))
        known.server(Self.live("l2", body: "held", stanzaID: "B5"))
        #expect(messages(known).isEmpty)
        known.server(refusal(query.iqID))
        #expect(known.events.contains(.caughtUp(count: 0, complete: false)))
        #expect(messages(known).map(\.body) == ["held"])
        #expect(known.machine.clientState.archivePosition?.id == "A0")
    }

    @Test func aResumedSessionDoesNotCatchUp() throws {
        let harness = Self.harness(position: XMPPArchivePosition(id: "A0"))
        harness.login()
        let query = try #require(Self.query(harness))
        harness.server(Self.fin(query.iqID, complete: true, last: nil))
        harness.server("<r xmlns='urn:xmpp:sm:3'/>")
        harness.transportClosed()
        harness.advance(by: .seconds(1))
        let sentBefore = harness.sent.count
        harness.resume(h: 1)  // the query was the one stanza sent
        #expect(harness.lifecycle.last == .resumed(JID("alice@example.com/phone")!))
        #expect(!harness.sent.dropFirst(sentBefore).contains { $0.text.contains("urn:xmpp:mam:2") })
    }
}

struct ClientStateTests {
    @Test func theStateRoundTripsWithoutShowingTheSecret() throws {
        let state = XMPPClientState(
            fastToken: XMPPFASTToken(
                mechanism: "HT-SHA-256-EXPR",
                secret: "s3cr3t-token",
                expiry: "2027-01-01T00:00:00Z"
            ),
            userAgentID: "2f5c8a3e-1111-4222-8333-444455556666",
            archivePosition: XMPPArchivePosition(id: "A1", timestamp: "2026-12-01T10:00:00Z")
        )
        let data = try JSONEncoder().encode(state)
        #expect(try JSONDecoder().decode(XMPPClientState.self, from: data) == state)
        #expect(!"\(state)".contains("s3cr3t") && !String(reflecting: state).contains("s3cr3t"))
        #expect("\(state)".contains("A1"))
    }

    @Test func theMachineTakesTheStateAndReportsChanges() {
        let harness = XMPPClientHarness {
            $0.state = XMPPClientState(userAgentID: "kept-id")
            $0.userAgent = XMPPUserAgent(software: "Tether", device: nil)
        }
        harness.open(SASL2Tests.features())
        #expect(harness.lastSent.contains("<user-agent id='kept-id'>"))
        #expect(!harness.events.contains { if case .stateChanged = $0 { true } else { false } })
        // Without one, an id is made once and reported.
        let fresh = XMPPClientHarness()
        fresh.open(SASL2Tests.features())
        guard
            case .stateChanged(let state) = fresh.events.first(where: {
                if case .stateChanged = $0 { true } else { false }
            })
        else { return fail("no state") }
        #expect(state.userAgentID?.count == 36 && fresh.lastSent.contains("<user-agent id='\(state.userAgentID!)'>"))
    }
}

struct CarbonsAndPushTests {
    static let bareJID = "alice@example.com"

    @Test func carbonCopiesAreUnwrappedOnlyFromTheAccount() {
        let harness = XMPPClientHarness { $0.carbons = true }
        harness.login()
        #expect(harness.sent.contains { $0.text.contains("<enable xmlns='urn:xmpp:carbons:2'/>") })
        harness.server(
            "<message from='alice@example.com' to='alice@example.com/phone' type='chat'><received xmlns='urn:xmpp:carbons:2'><forwarded xmlns='urn:xmpp:forward:0'><message xmlns='jabber:client' from='bob@example.com/x' to='alice@example.com/laptop' type='chat' id='c1'><body>to the laptop</body></message></forwarded></received></message>"
        )
        harness.server(
            "<message from='alice@example.com' to='alice@example.com/phone' type='chat'><sent xmlns='urn:xmpp:carbons:2'><forwarded xmlns='urn:xmpp:forward:0'><message xmlns='jabber:client' from='alice@example.com/laptop' to='bob@example.com' type='chat' id='c2'><body>from the laptop</body></message></forwarded></sent></message>"
        )
        // A forged copy (XEP-0280 §11): from someone else, it is that someone's message.
        harness.server(
            "<message from='mallory@evil.example' to='alice@example.com/phone' type='chat'><sent xmlns='urn:xmpp:carbons:2'><forwarded xmlns='urn:xmpp:forward:0'><message xmlns='jabber:client' from='alice@example.com/laptop' to='bob@example.com' id='c3'><body>forged</body></message></forwarded></sent></message>"
        )
        let messages = harness.events.compactMap { if case .message(let m) = $0 { m } else { nil } }
        #expect(messages.map(\.origin) == [.carbon(sent: false), .carbon(sent: true), .live])
        #expect(messages[0].body == "to the laptop" && messages[0].from == JID("bob@example.com/x"))
        #expect(messages[2].from == JID("mallory@evil.example") && messages[2].body == nil)
    }

    @Test func carbonsComeInsideTheBind2Login() {
        let harness = XMPPClientHarness {
            $0.carbons = true
            $0.state.userAgentID = "id"
        }
        harness.open(SASL2Tests.features())
        #expect(harness.lastSent.contains("<bind xmlns='urn:xmpp:bind:0'><tag>tether</tag>"))
        #expect(harness.lastSent.contains("<enable xmlns='urn:xmpp:carbons:2'/>"))
        // Offered without carbons inline: asked for once online instead.
        let other = XMPPClientHarness {
            $0.carbons = true
            $0.state.userAgentID = "id"
        }
        other.open(SASL2Tests.features().replacingOccurrences(of: "<feature var='urn:xmpp:carbons:2'/>", with: ""))
        #expect(!other.lastSent.contains("urn:xmpp:carbons:2"))
    }

    @Test func pushIsEnabledAtEveryNewSessionWithItsSecretHidden() throws {
        let registration = XMPPPushRegistration(
            service: JID("push.example.net")!,
            node: "device-1",
            publishOptions: ["secret": "push-secret"]
        )
        let harness = XMPPClientHarness { $0.push = registration }
        harness.login()
        let index = try #require(harness.sent.lastIndex { $0.text.contains("urn:xmpp:push:0") })
        let enable = harness.sent[index].text
        #expect(enable.contains("<enable xmlns='urn:xmpp:push:0' jid='push.example.net' node='device-1'>"))
        #expect(enable.contains("<field var='secret'><value>push-secret</value></field>"))
        #expect(harness.sentWithCredentials[index])  // the trace log does not show it
        let id = String(enable[enable.range(of: "id='")!.upperBound...].prefix { $0 != "'" })
        harness.server("<iq type='result' id='\(id)'/>")
        #expect(harness.events.last == .pushEnabled(registration))

        // Removed at run time: <disable/>, then pushDisabled.
        harness.machine.setPush(nil, now: harness.now)
        harness.drain()
        #expect(harness.lastSent.contains("<disable xmlns='urn:xmpp:push:0' jid='push.example.net' node='device-1'/>"))
        harness.server("<iq type='result' id='\(harness.lastSentID)'/>")
        #expect(harness.events.last == .pushDisabled(registration))

        // Set again and refused.
        let other = XMPPPushRegistration(service: JID("push.example.net")!, node: "device-2")
        harness.machine.setPush(other, now: harness.now)
        harness.drain()
        #expect(harness.lastSent.contains("<enable xmlns='urn:xmpp:push:0' jid='push.example.net' node='device-2'/>"))
        harness.server(
            "<iq type='error' id='\(harness.lastSentID)'><error type='cancel'><not-allowed xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        )
        guard case .pushRefused(let error) = harness.events.last else { return fail("not refused") }
        #expect(error.condition == .notAllowed)

        // Unanswered within the iq timeout: refused with remote-server-timeout.
        harness.machine.setPush(registration, now: harness.now)
        harness.drain()
        harness.advance(by: .seconds(30))
        guard case .pushRefused(let timeout) = harness.events.last else { return fail("no timeout") }
        #expect(timeout.condition == .remoteServerTimeout)

        // A new session (no resumption) enables it again.
        let streamManagementOff = XMPPClientHarness {
            $0.push = registration
            $0.streamManagement = nil
        }
        streamManagementOff.login()
        streamManagementOff.transportClosed()
        streamManagementOff.advance(by: .seconds(1))
        let before = streamManagementOff.sent.count
        streamManagementOff.login()
        #expect(
            streamManagementOff.sent.dropFirst(before).contains { $0.text.contains("<enable xmlns='urn:xmpp:push:0'") }
        )
    }
}
