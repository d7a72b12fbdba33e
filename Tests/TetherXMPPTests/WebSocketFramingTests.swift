import Foundation
import Testing
import TetherCore
import TetherTLS
import TetherXML
import TetherXMPP

/// XMPP over WebSocket (RFC 7395) in the machine, against a scripted server: the framing both
/// ways in any split, standalone elements, no STARTTLS, `see-other-uri`, and the stream error.
@Suite struct WebSocketFramingTests {
    static let open =
        "<open xmlns='urn:ietf:params:xml:ns:xmpp-framing' id='s1' from='example.com' version='1.0' xml:lang='en'/>"
    static let close = "<close xmlns='urn:ietf:params:xml:ns:xmpp-framing'/>"
    static let streamsNamespace = " xmlns:stream='http://etherx.jabber.org/streams'"

    static func harness(_ url: String = "ws://example.com/xmpp-websocket") -> XMPPClientHarness {
        XMPPClientHarness { $0.webSocket = ServerURL(url)! }
    }

    /// Features as a WebSocket server sends them: the stream prefix declared in the message.
    static func features(_ features: String) -> String {
        features.replacingFirst("<stream:features>", with: "<stream:features\(streamsNamespace)>")
    }

    /// Logs in over the WebSocket; the server's messages arrive as `split` says.
    static func login(_ harness: XMPPClientHarness, split: (String) -> [String] = { [$0] }) {
        harness.start()
        harness.connected()
        for part in split(open + features(XMPPClientHarness.mechanisms(["PLAIN"]))) { harness.server(part) }
        harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        for part in split(open + features(XMPPClientHarness.boundFeatures)) { harness.server(part) }
        let bindID = harness.lastSentID
        for part in split(
            "<iq xmlns='jabber:client' type='result' id='\(bindID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/phone</jid></bind></iq>"
        ) { harness.server(part) }
        harness.server("<enabled xmlns='urn:xmpp:sm:3' id='sm-1' resume='true' max='600'/>")
    }

    @Test(arguments: [false, true])
    func loginFramesEveryElement(byteByByte: Bool) throws {
        let harness = Self.harness()
        Self.login(harness, split: byteByByte ? { $0.map { String($0) } } : { [$0] })
        #expect(harness.webSocketURLs == [ServerURL("ws://example.com/xmpp-websocket")!])
        #expect(harness.endpoints.isEmpty)
        #expect(harness.state == .connected && harness.jid == JID("alice@example.com/phone"))
        let sent = harness.sent.map(\.text)
        #expect(
            sent.first
                == "<open xmlns='urn:ietf:params:xml:ns:xmpp-framing' to='example.com' version='1.0' xml:lang='en'/>"
        )
        #expect(sent.filter { $0.hasPrefix("<open ") }.count == 2)
        #expect(sent.contains { $0.hasPrefix("<iq xmlns='jabber:client' type='set'") })
        #expect(!sent.contains { $0.contains("stream:stream") || $0.hasPrefix("<?xml") })
        // A stanza from the app: its namespace declared. A ping from the server: answered so too.
        try harness.machine.send(XMPPMessage(to: JID("bob@example.com")!, body: "hi"), now: harness.now)
        harness.drain()
        #expect(harness.lastSent.hasPrefix("<message xmlns='jabber:client'"))
        harness.server(
            "<iq xmlns='jabber:client' type='get' id='p1' from='example.com'><ping xmlns='urn:xmpp:ping'/></iq>"
        )
        #expect(harness.sent.map(\.text).contains("<iq xmlns='jabber:client' type='result' to='example.com' id='p1'/>"))
        // A message without the namespace of its own still counts as jabber:client (RFC 7395
        // servers such as prosody declare it; the stream tag of the machine's making supplies it).
        harness.server("<message from='bob@example.com/x' type='chat'><body>plain</body></message>")
        #expect(harness.events.contains { if case .message(let m) = $0 { m.body == "plain" } else { false } })
        // stop(): <a/>, then <close/>; the server's <close/> ends it.
        harness.machine.stop(now: harness.now)
        harness.drain()
        #expect(harness.lastSent == Self.close)
        harness.server(Self.close)
        #expect(harness.state == .disconnected && harness.events.last == .lifecycle(.closed(nil)))
    }

    /// ws:// is cleartext: STARTTLS is not negotiated even when offered and required (RFC 7395
    /// leaves TLS to wss), and the `tls` policy does not apply.
    @Test func noSTARTTLSInsideAWebSocket() {
        let harness = XMPPClientHarness {
            $0.webSocket = ServerURL("ws://example.com/ws")!
            $0.tls = .required
        }
        harness.start()
        harness.connected()
        harness.server(
            Self.open
                + Self.features(
                    "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>"
                )
        )
        #expect(!harness.sent.contains { $0.text.hasPrefix("<starttls") })
        #expect(harness.state == .authenticating)
    }

    /// wss:// is protected from the first byte: the first `<open/>` names the account.
    @Test func secureWebSocketCountsAsProtected() {
        let harness = Self.harness("wss://example.com/ws")
        harness.start()
        harness.connected()
        #expect(harness.sent.first?.text.contains("from='alice@example.com'") == true)
    }

    /// `see-other-uri` sends the next attempt there at once (not a reconnect attempt); a
    /// redirect from wss to ws (a downgrade) or to another scheme is an ordinary close.
    @Test func seeOtherURI() {
        let harness = Self.harness("wss://example.com/ws")
        Self.login(harness)
        harness.server(
            "<close xmlns='urn:ietf:params:xml:ns:xmpp-framing' see-other-uri='wss://other.example.com:5281/xmpp'/>"
        )
        #expect(harness.lastSent == Self.close || harness.sent.map(\.text).contains(Self.close))
        #expect(harness.state == .connectingTransport)
        #expect(harness.webSocketURLs.last == ServerURL("wss://other.example.com:5281/xmpp")!)
        #expect(!harness.events.contains { if case .lifecycle(.reconnecting) = $0 { true } else { false } })

        let downgraded = Self.harness("wss://example.com/ws")
        Self.login(downgraded)
        downgraded.server(
            "<close xmlns='urn:ietf:params:xml:ns:xmpp-framing' see-other-uri='ws://other.example.com/'/>"
        )
        #expect(downgraded.state == .reconnectWaiting)
        #expect(downgraded.webSocketURLs.count == 1)
    }

    /// A stream error is one message and `<close/>` another (each a complete document); the
    /// server's stream error is read with the stream prefix declared in its own message.
    @Test func streamErrorsBothWays() throws {
        let harness = Self.harness()
        Self.login(harness)
        harness.server("<message></iq>")  // not well-formed
        let sent = harness.sent.map(\.text)
        let errorIndex = try #require(sent.lastIndex { $0.hasPrefix("<stream:error") })
        #expect(sent[errorIndex].contains(Self.streamsNamespace))
        #expect(sent[errorIndex + 1] == Self.close)

        let other = Self.harness()
        Self.login(other)
        other.server(
            "<stream:error\(Self.streamsNamespace)><conflict xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>"
        )
        #expect(
            other.events.contains {
                if case .lifecycle(.connectionLost(let e)) = $0 { e.streamError?.condition == .conflict } else { false }
            }
        )
    }
}

extension String {
    fileprivate func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = range(of: target) else { return self }
        return replacingCharacters(in: range, with: replacement)
    }
}
