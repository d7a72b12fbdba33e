import Testing
import TetherCore
import TetherXML
import TetherXMPP

func element(
    _ text: String,
    scope: String = "<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>"
) throws -> XElement {
    var parser = XMLStreamParser()
    parser.append(Array((scope + text).utf8).backDeployedSpan)
    _ = try parser.next()
    guard case .element(let element) = try parser.next() else { throw XMLStreamError(.notWellFormed, "no element") }
    return element
}

struct StreamFeaturesTests {
    @Test func readsProsodyFeatures() throws {
        let before = try element(
            "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism><mechanism>PLAIN</mechanism><mechanism>SCRAM-SHA-256</mechanism></mechanisms></stream:features>"
        )
        let features = try #require(StreamFeatures(before))
        #expect(features.startTLS && features.startTLSRequired)
        #expect(features.mechanisms == ["SCRAM-SHA-1", "PLAIN", "SCRAM-SHA-256"])
        #expect(!features.bind)
        let after = try element(
            "<stream:features><ver xmlns='urn:xmpp:features:rosterver'/><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/><c ver='wBr6DNC6Vxj+iDPS/AmhkECMTr8=' node='http://prosody.im' hash='sha-1' xmlns='http://jabber.org/protocol/caps'/><sm xmlns='urn:xmpp:sm:2'><optional/></sm><sm xmlns='urn:xmpp:sm:3'><optional/></sm><sub xmlns='urn:xmpp:features:pre-approval'/><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><required/></bind><session xmlns='urn:ietf:params:xml:ns:xmpp-session'><optional/></session></stream:features>"
        )
        let bound = try #require(StreamFeatures(after))
        #expect(bound.startTLS && !bound.startTLSRequired)
        #expect(bound.bind && bound.session && bound.sessionOptional && bound.rosterVersioning)
        #expect(bound.streamManagementVersions == [2, 3])
        #expect(bound.mechanisms.isEmpty)
        #expect(StreamFeatures(try element("<message/>")) == nil)
    }
}

struct StreamErrorTests {
    @Test func readsEveryConditionAndWritesItBack() throws {
        for condition in StreamError.Condition.allCases {
            let error = try #require(StreamError(StreamError(condition, text: "why").element))
            #expect(error.condition == condition)
            #expect(error.text == "why")
        }
        let legacy = try #require(
            StreamError(
                try element(
                    "<stream:error><xml-not-well-formed xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>"
                )
            )
        )
        #expect(legacy.condition == .notWellFormed)
        let prosody = try #require(
            StreamError(
                try element(
                    "<stream:error><policy-violation xmlns='urn:ietf:params:xml:ns:xmpp-streams'/><text xmlns='urn:ietf:params:xml:ns:xmpp-streams'>XML stanza is too big</text><stanza-too-big xmlns='urn:xmpp:errors'/></stream:error>"
                )
            )
        )
        #expect(prosody.condition == .policyViolation)
        #expect(prosody.text == "XML stanza is too big")
        #expect(prosody.applicationCondition?.name == XMLName("stanza-too-big", namespace: "urn:xmpp:errors"))
        let conflict = try #require(
            StreamError(
                try element("<stream:error><conflict xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>")
            )
        )
        #expect(!conflict.allowsReconnect)
        let unknown = try #require(
            StreamError(
                try element("<stream:error><made-up xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>")
            )
        )
        #expect(unknown.condition == .undefinedCondition)
    }
}

struct StanzaTests {
    @Test func readsMessagesPresenceAndIQ() throws {
        let message = try #require(
            Stanza(
                try element(
                    "<message from='alice@example.com/phone' to='bob@example.com' type='chat' id='m1' xml:lang='en'><body>hi &amp; bye</body><thread>t1</thread></message>"
                )
            )
        )
        #expect(message.kind == .message)
        #expect(message.from == JID("alice@example.com/phone"))
        #expect(message.to?.isBare == true)
        #expect(message.body == "hi & bye")
        #expect(message.thread == "t1")
        #expect(message.language == "en")
        let presence = try #require(
            Stanza(try element("<presence><show>dnd</show><status>busy</status><priority>-1</priority></presence>"))
        )
        #expect(presence.show == "dnd" && presence.status == "busy" && presence.priority == -1)
        let ping = try #require(Stanza(try element("<iq type='get' id='p1'><ping xmlns='urn:xmpp:ping'/></iq>")))
        #expect(ping.payload?.name == XMLName("ping", namespace: "urn:xmpp:ping"))
        let failed = try #require(
            Stanza(
                try element(
                    "<iq type='error' id='p2'><ping xmlns='urn:xmpp:ping'/><error type='cancel'><service-unavailable xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/><text xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'>nope</text></error></iq>"
                )
            )
        )
        #expect(failed.error == StanzaError(type: .cancel, condition: .serviceUnavailable, text: "nope"))
        #expect(failed.payload?.localName == "ping")
        #expect(Stanza(try element("<message xmlns='jabber:server'/>")) == nil)
    }
}

struct SASLElementTests {
    @Test func roundTrips() throws {
        let cases: [SASLElement] = [
            .auth(mechanism: "PLAIN", initialResponse: "AGFsaWNlAGFsaWNlcGFzcw=="),
            .auth(mechanism: "SCRAM-SHA-1", initialResponse: nil),
            .challenge("cj1meWtv"), .response("Yz1iaXdz"), .success("dj1ybUY5"), .success(nil),
            .failure(condition: "not-authorized", text: "Invalid username or password"), .abort,
        ]
        for sasl in cases {
            let written = XMLSerializer.string(sasl.element)
            #expect(SASLElement(try element(written)) == sasl, "\(written)")
        }
    }
}
