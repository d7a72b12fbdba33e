import Testing
import TetherCore
import TetherXML

@testable import TetherXMPP

/// The device in the loop: network paths and the app's state as inputs (`networkChanged`,
/// `applicationStateChanged`), against a scripted server.
struct DeviceTests {
    static let wifi = NetworkPath(isAvailable: true, interfaces: ["wlan0"])
    static let cellular = NetworkPath(isAvailable: true, interfaces: ["rmnet0"])
    static let tiered = ReconnectPolicy.tiered(ReconnectPolicy.standardTiers, repeats: false, jitter: .none)

    static func online(_ configure: (inout XMPPClientMachine.Configuration) -> Void = { _ in }) -> XMPPClientHarness {
        let harness = XMPPClientHarness {
            $0.reconnectPolicy = Self.tiered
            configure(&$0)
        }
        harness.machine.networkChanged(Self.wifi, now: harness.now)
        harness.login()
        return harness
    }

    /// No network: no attempt and none counted however long it lasts; back: an attempt at once.
    @Test func noAttemptWhileThereIsNoPath() {
        let harness = Self.online()
        harness.machine.networkChanged(.unavailable, now: harness.now)
        harness.drain()
        #expect(harness.lastSent.contains("urn:xmpp:ping"))  // the live link is probed at once
        harness.transportClosed("network is unreachable")
        #expect(harness.state == .reconnectWaiting)
        #expect(harness.events.last == .lifecycle(.waitingForNetwork))
        #expect(harness.timeout == nil || !harness.transcript.suffix(1).contains("open"))
        let opensBefore = harness.transcript.filter { $0 == "open" }.count
        harness.advance(by: .seconds(600))
        #expect(harness.transcript.filter { $0 == "open" }.count == opensBefore)
        harness.machine.networkChanged(Self.cellular, now: harness.now)
        harness.drain()
        #expect(harness.transcript.last == "open" && harness.state == .connectingTransport)
        // The session resumes on the new path.
        harness.resume(h: 0)
        #expect(harness.events.contains { if case .lifecycle(.resumed) = $0 { true } else { false } })
    }

    /// The path lost while waiting for the back-off pauses it; back, the current tier starts
    /// again (after six failures, in the 9 s tier: the next failure waits 9 s, not 15).
    @Test func thePathBackRestartsTheCurrentTier() {
        let harness = Self.online()
        harness.transportClosed()
        for _ in 0..<6 {
            guard case .lifecycle(.reconnecting(_, let delay, _)) = harness.events.last else {
                return fail("not reconnecting")
            }
            harness.advance(by: delay)
            harness.transportClosed("connection refused")
        }
        guard case .lifecycle(.reconnecting(let attempt, let delay, _)) = harness.events.last else {
            return fail("not reconnecting")
        }
        #expect(attempt == 7 && delay == .seconds(9))
        harness.machine.networkChanged(.unavailable, now: harness.now)
        harness.drain()
        #expect(harness.events.last == .lifecycle(.waitingForNetwork) && harness.timeout == nil)
        harness.advance(by: .seconds(60))
        harness.machine.networkChanged(Self.wifi, now: harness.now)
        harness.drain()
        #expect(harness.transcript.last == "open")
        harness.transportClosed("connection refused")
        // Attempt 6 again (the 9 s tier's first), not 8.
        guard case .lifecycle(.reconnecting(let next, let nextDelay, _)) = harness.events.last else {
            return fail("not reconnecting")
        }
        #expect(next == 6 && nextDelay == .seconds(9))
    }

    /// Given up: the path back (or another network) starts again at once.
    @Test func thePathBackAfterGivingUp() {
        let harness = Self.online { $0.reconnectPolicy = .fixed(.seconds(1), maximumAttempts: 1) }
        harness.transportClosed()
        harness.advance(by: .seconds(1))
        harness.transportClosed("connection refused")
        #expect(harness.state == .suspended)
        harness.machine.networkChanged(.unavailable, now: harness.now)
        harness.machine.networkChanged(Self.cellular, now: harness.now)
        harness.drain()
        #expect(harness.state == .connectingTransport && harness.transcript.last == "open")
    }

    /// Another network while online: a probe at once; no answer (and nothing else) within the
    /// probe timeout drops the link, which resumes; an answer keeps it.
    @Test func anotherNetworkProbesTheLink() {
        let harness = Self.online { $0.network.probeTimeout = .seconds(3) }
        harness.machine.networkChanged(Self.cellular, now: harness.now)
        harness.drain()
        let probeID = harness.lastSentID
        #expect(harness.lastSent.contains("urn:xmpp:ping"))
        harness.advance(by: .seconds(1))
        harness.server("<iq type='result' id='\(probeID)' from='example.com'/>")
        harness.advance(by: .seconds(5))
        #expect(harness.state == .connected)

        harness.machine.networkChanged(Self.wifi, now: harness.now)
        harness.drain()
        harness.advance(by: .seconds(3))
        #expect(harness.state == .reconnectWaiting)
        guard
            case .lifecycle(.connectionLost(let error)) = harness.events.first(where: {
                if case .lifecycle(.connectionLost) = $0 { true } else { false }
            })
        else { return fail("not disconnected") }
        #expect(error.kind == .serverTimeout)
    }

    /// Another network during an attempt: that attempt is dropped for one on the new network.
    @Test func anotherNetworkRestartsAnAttempt() {
        let harness = XMPPClientHarness()
        harness.machine.networkChanged(Self.wifi, now: harness.now)
        harness.start()
        let first = harness.generation
        harness.machine.networkChanged(Self.cellular, now: harness.now)
        harness.drain()
        #expect(harness.closed == [first!])
        #expect(harness.generation != first && harness.state == .connectingTransport)
    }

    static let csiFeatures =
        "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><required/></bind><sm xmlns='urn:xmpp:sm:3'><optional/></sm><csi xmlns='urn:xmpp:csi:0'/></stream:features>"

    /// XEP-0352 where the server offers it: `<inactive/>` in the background (also for a session
    /// that starts there), `<active/>` back in the foreground; pings at the background interval.
    @Test func clientStateIndication() {
        let harness = XMPPClientHarness {
            $0.autoPing = .init(interval: .seconds(60), backgroundInterval: .seconds(300))
            $0.releaseBuffersAfterIdle = nil
        }
        harness.login(features: Self.csiFeatures)
        harness.machine.applicationStateChanged(.background, now: harness.now)
        harness.drain()
        #expect(harness.lastSent == "<inactive xmlns='urn:xmpp:csi:0'/>")
        #expect(harness.timeout == harness.now + .seconds(300))
        harness.machine.applicationStateChanged(.inactive, now: harness.now)  // the foreground
        harness.drain()
        #expect(harness.lastSent == "<active xmlns='urn:xmpp:csi:0'/>")
        #expect(harness.timeout == harness.now + .seconds(60))
        harness.machine.applicationStateChanged(.active, now: harness.now)
        harness.drain()
        #expect(harness.sent.filter { $0.text.hasPrefix("<active") }.count == 1)

        // A session that starts in the background says so at once; without the feature, nothing.
        let background = XMPPClientHarness()
        background.machine.applicationStateChanged(.background, now: background.now)
        background.login(features: Self.csiFeatures)
        #expect(background.sent.contains { $0.text == "<inactive xmlns='urn:xmpp:csi:0'/>" })
        let plain = XMPPClientHarness()
        plain.login()
        plain.machine.applicationStateChanged(.background, now: plain.now)
        plain.drain()
        #expect(!plain.sent.contains { $0.text.contains("urn:xmpp:csi:0") })
    }

    /// Back in the foreground while waiting to reconnect or given up: an attempt at once (not
    /// while there is no network).
    @Test func theForegroundReconnectsNow() {
        let harness = Self.online()
        harness.machine.applicationStateChanged(.background, now: harness.now)
        harness.transportClosed()
        #expect(harness.state == .reconnectWaiting)
        harness.machine.applicationStateChanged(.active, now: harness.now)
        harness.drain()
        #expect(harness.state == .connectingTransport && harness.transcript.last == "open")

        let offline = Self.online()
        offline.machine.applicationStateChanged(.background, now: offline.now)
        offline.machine.networkChanged(.unavailable, now: offline.now)
        offline.transportClosed()
        offline.machine.applicationStateChanged(.active, now: offline.now)
        offline.drain()
        #expect(offline.state == .reconnectWaiting && offline.events.last == .lifecycle(.waitingForNetwork))
    }

    @Test func pathChanges() {
        var device = DeviceState()
        #expect(device.hasPath)
        #expect(device.pathChanged(to: Self.wifi) == .none)  // assumed available before
        #expect(device.pathChanged(to: Self.wifi) == .none)
        #expect(device.pathChanged(to: Self.cellular) == .moved)
        #expect(device.pathChanged(to: .unavailable) == .lost)
        #expect(!device.hasPath)
        #expect(device.pathChanged(to: .unavailable) == .none)
        #expect(device.pathChanged(to: Self.wifi) == .returned)
        #expect(device.pathChanged(to: NetworkPath(isAvailable: true)) == .moved)
        #expect(ReconnectPolicy.tiered(repeats: false).startOfTier(containing: 7) == 5)
        #expect(ReconnectPolicy.tiered(repeats: false).startOfTier(containing: 15) == 10)
        #expect(ReconnectPolicy.tiered(repeats: true).startOfTier(containing: 17) == 15)
        #expect(ReconnectPolicy.fixed(.seconds(1)).startOfTier(containing: 9) == 0)
    }
}

/// `health(now:)`: what the machine counts, on a scripted session.
struct XMPPHealthTests {
    @Test func countsWhatHappened() throws {
        let harness = XMPPClientHarness {
            $0.autoPing = .init(interval: .seconds(10), timeout: .seconds(2), maximumMissed: 1)
            $0.releaseBuffersAfterIdle = nil
        }
        harness.login()
        var health = harness.machine.health(now: harness.now)
        #expect(health.phase == .connected && health.state == "connected" && health.transport == "tcp")
        #expect(health.timeOnline == .zero && health.bytesSent > 0 && health.bytesReceived > 0)
        // A ping answered after 40 ms: the round trip.
        harness.advance(by: .seconds(10))
        let pingID = harness.lastSentID
        harness.advance(by: .milliseconds(40))
        harness.server("<iq type='result' id='\(pingID)' from='example.com'/>")
        health = harness.machine.health(now: harness.now)
        #expect(health.lastRoundTrip == .milliseconds(40) && health.smoothedRoundTrip == .milliseconds(40))
        #expect(health.timeOnline == .milliseconds(10_040))
        // A message each way.
        try harness.machine.send(XMPPMessage(to: JID("bob@example.com")!, body: "hi"), now: harness.now)
        harness.drain()
        harness.server("<message from='bob@example.com/x' type='chat'><body>hello</body></message>")
        health = harness.machine.health(now: harness.now)
        #expect(health.messagesSent >= 1 && health.messagesReceived == 2)  // the ping answer and the message
        #expect(health.awaitingAcknowledgement == 2)  // the ping and the message, both counted by XEP-0198
        // The next ping goes unanswered: the dead link is noticed 12 s after the last byte.
        harness.advance(by: .seconds(12))
        health = harness.machine.health(now: harness.now)
        #expect(health.lastDeadLinkDetection == .seconds(12))
        #expect(health.reconnectAttempts == 1 && health.recentReconnectReasons.count == 1)
        #expect(health.phase == .reconnectWaiting && health.timeOnline == nil && health.transport == nil)
        // Resumed: counted.
        harness.advance(by: .seconds(1))
        harness.resume(h: 0)
        health = harness.machine.health(now: harness.now)
        #expect(health.resumes == 1 && health.phase == .connected)
    }
}
