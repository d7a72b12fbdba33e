import Testing
import TetherCore
import TetherTestSupport
import TetherXML

@testable import TetherXMPP

/// XEP-0478: the server's announced limits are kept (a stanza over `max-bytes` is a typed error,
/// not sent) and the stream is never silent for its whole `idle-seconds`.
struct StreamLimitsTests {
    static let limited =
        "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><required/></bind><limits xmlns='urn:xmpp:stream-limits:0'><max-bytes>400</max-bytes><idle-seconds>30</idle-seconds></limits></stream:features>"

    func online() -> XMPPClientHarness {
        let harness = XMPPClientHarness { $0.autoPing = nil }
        harness.login(features: Self.limited)
        #expect(harness.state == .connected)
        return harness
    }

    @Test func aStanzaOverTheLimitIsRefusedAndNotSent() throws {
        let harness = online()
        let before = harness.sent.count
        let big = XMPPMessage(to: JID("bob@example.com"), body: String(repeating: "x", count: 500))
        expectThrows(\XMPPClientError.kind, .stanzaTooLarge) { try harness.machine.send(big, now: harness.now) }
        do {
            try harness.machine.send(big, now: harness.now)
        } catch {
            #expect(!error.isFatal && error.message.contains("at most 400"))
        }
        harness.drain()
        #expect(harness.sent.count == before)
        try harness.machine.send(XMPPMessage(to: JID("bob@example.com"), body: "short"), now: harness.now)
        harness.drain()
        #expect(harness.lastSent.contains("<body>short</body>"))
        #expect(harness.state == .connected)
    }

    @Test func silenceIsBrokenBeforeTheServersIdleTime() throws {
        let harness = online()
        let sentBefore = harness.sent.count
        // Nothing sent for a third of the idle time: a whitespace keep-alive.
        harness.advance(by: .seconds(10))
        #expect(harness.sent.count == sentBefore + 1 && harness.lastSent == " ")
        // Something sent within the next third: no keep-alive then.
        harness.advance(by: .seconds(5))
        try harness.machine.send(XMPPMessage(to: JID("bob@example.com"), body: "hi"), now: harness.now)
        harness.drain()
        let afterMessage = harness.sent.count
        harness.advance(by: .seconds(5))
        #expect(harness.sent.count == afterMessage)
        harness.advance(by: .seconds(10))
        #expect(harness.sent.count == afterMessage + 1 && harness.lastSent == " ")
    }

    /// The limits before the login (prosody's 10,000 bytes) are not the session's: a stanza queued
    /// meanwhile waits for the logged-in stream's limits.
    @Test func theLimitsBeforeTheLoginDoNotApplyToStanzas() throws {
        let harness = XMPPClientHarness()
        harness.open(
            "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms><limits xmlns='urn:xmpp:stream-limits:0'><max-bytes>100</max-bytes></limits></stream:features>"
        )
        try harness.machine.send(
            XMPPMessage(to: JID("bob@example.com"), body: String(repeating: "x", count: 300)),
            now: harness.now
        )
        #expect(harness.unacknowledged == 1)
    }
}
