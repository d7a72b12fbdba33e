import Testing
import TetherCore
import TetherTestSupport
import TetherXML

@testable import TetherXMPP

/// Reconnecting: the policy's schedule, what stops it, hung attempts, stale transports.
struct ReconnectTests {
    static let tiered = ReconnectPolicy.tiered(ReconnectPolicy.standardTiers, repeats: false, jitter: .none)

    /// Every attempt fails at once (connection refused): the attempts follow 5×3 s, 5×9 s,
    /// 5×15 s exactly, then the machine suspends until `reconnectNow`.
    @Test func tieredScheduleIsExact() {
        let harness = XMPPClientHarness { $0.reconnectPolicy = Self.tiered }
        harness.login()
        harness.transportClosed()
        var attemptTimes: [Duration] = []
        let lost = harness.now
        for _ in 0..<15 {
            guard case .lifecycle(.reconnecting(_, let delay, _)) = harness.events.last else {
                return fail("not reconnecting")
            }
            harness.advance(by: delay)
            #expect(harness.transcript.last == "open")
            attemptTimes.append(harness.now - lost)
            harness.transportClosed("connection refused")
        }
        var expected: [Duration] = []
        var total = Duration.zero
        for delay in [3, 9, 15] {
            for _ in 0..<5 {
                total += .seconds(delay)
                expected.append(total)
            }
        }
        #expect(attemptTimes == expected)
        #expect(harness.state == .suspended)
        guard case .lifecycle(.suspended(.gaveUp(let error))) = harness.events.last else {
            return fail("not suspended")
        }
        #expect(error.kind == .connectionFailed)
        #expect(harness.timeout == nil)
        let reconnects = harness.events.compactMap {
            if case .lifecycle(.reconnecting(let attempt, _, _)) = $0 { attempt } else { nil }
        }
        #expect(reconnects == Array(1...15))
        // reconnectNow starts at once and resets the back-off.
        harness.machine.reconnectNow(now: harness.now)
        harness.drain()
        #expect(harness.transcript.last == "open")
        harness.transportClosed("connection refused")
        #expect(harness.events.last?.reconnect == ReconnectStep(attempt: 1, delay: .seconds(3)))
    }

    /// The back-off restarts only once a stream is online again, not when a TCP connection
    /// merely opens (a server that accepts and drops cannot reset it).
    @Test func backOffResetsOnlyWhenOnline() throws {
        let harness = XMPPClientHarness { $0.reconnectPolicy = Self.tiered }
        harness.login()
        harness.transportClosed()
        for attempt in 1...6 {
            #expect(
                harness.events.last.map {
                    if case .lifecycle(.reconnecting(attempt, _, _)) = $0 { true } else { false }
                } == true
            )
            let delay = try #require(harness.events.last?.reconnectDelay)
            harness.advance(by: delay)
            harness.connected()
            harness.transportClosed()
        }
        #expect(harness.events.last?.reconnect == ReconnectStep(attempt: 7, delay: .seconds(9)))
        harness.advance(by: .seconds(9))
        harness.resume(h: 0)
        #expect(harness.state == .connected)
        harness.transportClosed()
        #expect(harness.events.last?.reconnect == ReconnectStep(attempt: 1, delay: .seconds(3)))
    }

    @Test(arguments: ["conflict", "not-authorized", "host-unknown"])
    func fatalStreamErrorsStop(_ condition: String) throws {
        let harness = XMPPClientHarness()
        harness.login()
        harness.server(
            "<stream:error><\(condition) xmlns='urn:ietf:params:xml:ns:xmpp-streams'/><text xmlns='urn:ietf:params:xml:ns:xmpp-streams'>Replaced by new connection</text></stream:error></stream:stream>"
        )
        #expect(harness.state == .disconnected)
        #expect(harness.transcript.suffix(4) == ["send:footer", "close", "event:connectionlost", "event:closed"])
        let error = try closedError(harness.events)
        #expect(error.kind == .streamError && error.streamError?.condition.rawValue == condition)
        #expect(error.message.contains("Replaced by new connection"))
    }

    @Test func recoverableStreamErrorsReconnect() {
        let harness = XMPPClientHarness()
        harness.login()
        harness.server("<stream:error><system-shutdown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>")
        #expect(harness.state == .reconnectWaiting)
    }

    @Test func seeOtherHostReconnectsThereAtOnce() {
        let harness = XMPPClientHarness()
        harness.login()
        harness.server(
            "<stream:error><see-other-host xmlns='urn:ietf:params:xml:ns:xmpp-streams'>[2001:db8::1]:5223</see-other-host></stream:error>"
        )
        #expect(harness.transcript.suffix(2) == ["event:connectionlost", "open"])
        #expect(harness.endpoints.last == Endpoint(host: "2001:db8::1", port: 5223))
        // The redirect is limited.
        let limited = XMPPClientHarness { $0.maximumRedirects = 1 }
        limited.login()
        limited.server(
            "<stream:error><see-other-host xmlns='urn:ietf:params:xml:ns:xmpp-streams'>other.example</see-other-host></stream:error>"
        )
        #expect(limited.endpoints.last == Endpoint(host: "other.example", port: 5222))
        limited.connected()
        limited.server(
            XMPPClientHarness.serverHeader
                + "<stream:error><see-other-host xmlns='urn:ietf:params:xml:ns:xmpp-streams'>third.example</see-other-host></stream:error>"
        )
        #expect(limited.state == .reconnectWaiting)
    }

    @Test func theServerClosingTheStreamIsALossNotAStop() {
        let harness = XMPPClientHarness()
        harness.login()
        harness.server("</stream:stream>")
        #expect(harness.transcript.suffix(4) == ["send:footer", "close", "event:connectionlost", "event:reconnecting"])
    }

    @Test func withoutPolicyTheMachineStops() throws {
        let harness = XMPPClientHarness { $0.reconnectPolicy = nil }
        harness.login()
        harness.transportClosed()
        #expect(harness.state == .disconnected)
        let error = try closedError(harness.events)
        #expect(error.kind == .connectionLost)
    }

    /// A connect attempt that hangs (SYN unanswered, or the server stops after `<proceed/>`) is
    /// abandoned after `connectTimeout`, and the next attempt follows the policy.
    @Test func hungAttemptsAreAbandoned() {
        let harness = XMPPClientHarness { $0.connectTimeout = .seconds(10) }
        harness.start()
        let first = harness.generation!
        harness.advance(by: .seconds(10))
        #expect(harness.closed == [first])
        guard case .lifecycle(.attemptFailed(let error)) = harness.events.dropLast().last else {
            return fail("no failure")
        }
        #expect(error.kind == .connectTimeout)
        harness.advance(by: .seconds(1))
        #expect(harness.generation != first)
        // Hung in the middle of negotiation.
        harness.connected()
        harness.server(XMPPClientHarness.serverHeader)
        harness.advance(by: .seconds(10))
        #expect(harness.state == .reconnectWaiting)
    }

    /// Input from an abandoned transport never touches the new one.
    @Test func staleGenerationsAreIgnored() {
        let harness = XMPPClientHarness { $0.connectTimeout = .seconds(10) }
        harness.start()
        let old = harness.generation!
        harness.advance(by: .seconds(11))  // timed out, then the next attempt
        let current = harness.generation!
        #expect(current > old)
        // The old connection completes late, sends bytes, closes: nothing happens.
        harness.machine.transportConnected(generation: old, now: harness.now)
        harness.machine.transportReceived(Array(XMPPClientHarness.serverHeader.utf8), generation: old, now: harness.now)
        harness.machine.transportClosed(
            generation: old,
            error: TransportError(.connectionLost, "late"),
            now: harness.now
        )
        #expect(harness.drain().isEmpty)
        #expect(harness.state == .connectingTransport)
        // After stop() and start(), the previous generation is stale too.
        harness.login()
        let online = harness.generation!
        harness.machine.stop(now: harness.now)
        harness.drain()
        harness.machine.transportClosed(generation: online, error: nil, now: harness.now)
        harness.drain()
        harness.start()
        harness.machine.transportConnected(generation: online, now: harness.now)
        harness.machine.transportReceived(Array("<junk".utf8), generation: online, now: harness.now)
        #expect(harness.drain().isEmpty)
        #expect(harness.state == .connectingTransport)
    }

    @Test func reconnectNowAbandonsAnAttemptInProgress() {
        let harness = XMPPClientHarness()
        harness.start()
        let first = harness.generation!
        harness.machine.reconnectNow(now: harness.now)
        harness.drain()
        #expect(harness.closed == [first])
        #expect(harness.generation! > first)
        #expect(harness.transcript == ["open", "close", "open"])
    }

    @Test func stopInEveryState() {
        // Connecting: close, closed.
        let connecting = XMPPClientHarness()
        connecting.start()
        connecting.machine.stop(now: connecting.now)
        #expect(connecting.drain() == ["close", "event:closed"])
        // Waiting to reconnect: closed.
        let waiting = XMPPClientHarness()
        waiting.login()
        waiting.transportClosed()
        waiting.machine.stop(now: waiting.now)
        #expect(waiting.drain() == ["event:closed"])
        #expect(waiting.timeout == nil)
        // Online without an answer from the server: the close timeout ends it.
        let online = XMPPClientHarness { $0.streamManagement = nil }
        online.login()
        online.machine.stop(now: online.now)
        #expect(online.drain() == ["send:footer"])
        online.advance(by: .seconds(2))
        #expect(online.transcript.suffix(2) == ["close", "event:closed"])
        #expect(online.state == .disconnected)
        // Sending after stop is refused.
        expectThrows(\XMPPClientError.kind, .notConnected) {
            try online.machine.send(XMPPMessage(to: nil, body: "x"), now: online.now)
        }
        // Idle: a no-op.
        online.machine.stop(now: online.now)
        #expect(online.drain().isEmpty)
    }

    @Test func firstConnectFailuresFollowThePolicyToo() {
        let harness = XMPPClientHarness { $0.reconnectPolicy = .fixed(.seconds(5), maximumAttempts: 2) }
        harness.start()
        harness.transportClosed("connection refused")
        #expect(harness.transcript == ["open", "event:attemptfailed", "event:reconnecting"])
        harness.advance(by: .seconds(5))
        harness.transportClosed("connection refused")
        harness.advance(by: .seconds(5))
        harness.transportClosed("connection refused")
        #expect(harness.state == .suspended)
    }

    @Test func queuedWhileSuspendedAndSentAfterReconnectNow() throws {
        let harness = XMPPClientHarness { $0.reconnectPolicy = .fixed(.seconds(1), maximumAttempts: 0) }
        harness.login()
        harness.transportClosed()
        #expect(harness.state == .suspended)
        try harness.machine.send(XMPPMessage(to: JID("bob@example.com"), body: "later"), now: harness.now)
        harness.machine.reconnectNow(now: harness.now)
        harness.drain()
        harness.resume(h: 0)
        #expect(harness.sent.suffix(2).contains { $0.text.contains("<body>later</body>") })
    }
}
