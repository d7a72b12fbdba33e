import Foundation
import Testing
import TetherXMPP

/// Events, stanzas and errors describe themselves in one readable line (what a log or a debugger
/// shows), and never with a secret in it.
struct EventDescriptionTests {
    let alice = JID("alice@example.com/phone")!
    let bob = JID("bob@example.com")!

    @Test func stanzasSayWhatTheyAreWithoutTheirBodies() {
        let message = XMPPMessage(to: bob, body: "meet me at the usual place", id: "m1")
        #expect(message.description == "message chat to bob@example.com, id m1, body 26 characters")
        #expect(!message.description.contains("usual place"))
        let presence = XMPPPresence(show: .away)
        #expect(presence.description == "presence available, show away")
        let ping = XMPPIQ.ping(to: JID("example.com")!, id: "iq1")
        #expect(ping.description == "iq get to example.com, id iq1, <ping xmlns='urn:xmpp:ping'/>")
        let error = StanzaError(type: .cancel, condition: .itemNotFound, text: "No such node")
        #expect(error.description == "item-not-found (cancel): No such node")
    }

    @Test func eventsReadAsOneLine() throws {
        typealias Event = XMPPClientMachine.Event
        #expect(Event.lifecycle(.connected(alice)).description == "connected: alice@example.com/phone")
        #expect(Event.caughtUp(count: 12, complete: true).description == "caught up: 12 messages from the archive")
        #expect(
            Event.message(XMPPMessage(to: bob, body: "hi", id: "m2")).description
                == "message chat to bob@example.com, id m2, body 2 characters"
        )
        #expect(
            Event.subscriptionRequest(from: bob, autoAccepted: true).description
                == "subscription request from bob@example.com (accepted)"
        )
        #expect(
            Event.iqResponse(id: "iq1", .timedOut).description == "response to iq1: timed out"
        )
        let stanzas = [XMPPMessage(to: bob, body: "a").element, XMPPIQ.ping().element]
        #expect(
            Event.unacknowledgedStanzas(stanzas).description == "2 stanzas never acknowledged: message, iq"
        )
        // Nothing prints as the type's dump any more.
        #expect(!Event.presence(XMPPPresence()).description.contains("XMPPPresence("))
    }

    @Test func secretsNeverShow() throws {
        let token = try JSONDecoder().decode(
            XMPPFASTToken.self,
            from: Data(#"{"mechanism":"HT-SHA-256-NONE","secret":"s3cr3t-token","expiry":"2027-01-01T00:00:00Z"}"#.utf8)
        )
        let registration = XMPPPushRegistration(
            service: JID("push.example.com")!,
            node: "n1",
            publishOptions: ["secret": Secret("push-s3cr3t")]
        )
        let events: [XMPPClientMachine.Event] = [
            .fastToken(token),
            .stateChanged(XMPPClientState(fastToken: token, userAgentID: "install-1")),
            .pushEnabled(registration),
        ]
        for event in events {
            #expect(!event.description.contains("s3cr3t"), "\(event.description)")
        }
        #expect(registration.description == "push to push.example.com, node n1 (1 publish options)")
    }
}
