import Testing
import TetherCore

@testable import TetherSignalR

/// The device in the loop for the hub machine: network paths and the app's state as inputs,
/// against a scripted server on a virtual clock.
struct HubDeviceTests {
    static let wifi = NetworkPath(isAvailable: true, interfaces: ["wlan0"])
    static let cellular = NetworkPath(isAvailable: true, interfaces: ["rmnet0"])

    static func connected(
        stateful: Bool = false,
        _ configure: (inout JSONHubConnection.Configuration) -> Void = { _ in }
    ) -> HubConnectionHarness {
        var harness = HubConnectionHarness {
            $0.reconnectPolicy = .tiered(ReconnectPolicy.standardTiers, repeats: false, jitter: .none)
            $0.statefulReconnect = stateful
            configure(&$0)
        }
        harness.machine.networkChanged(Self.wifi, now: harness.now)
        harness.connect(stateful: stateful)
        return harness
    }

    /// No network: no attempt and none counted; back: an attempt at once.
    @Test func noAttemptWhileThereIsNoPath() {
        var harness = Self.connected()
        harness.machine.networkChanged(.unavailable, now: harness.now)
        #expect(harness.drain() == ["send:ping"])  // the probe
        harness.closed()
        #expect(harness.machine.stateName == .reconnectWaiting)
        #expect(harness.events.last == .lifecycle(.waitingForNetwork))
        #expect(harness.machine.pollTimeout() == nil)
        #expect(!harness.advance(by: .seconds(600)).contains("negotiate"))
        harness.machine.networkChanged(Self.cellular, now: harness.now)
        #expect(harness.drain() == ["negotiate"])
    }

    /// The path lost while online: a ping, and something must arrive within the probe timeout.
    @Test func aProbeThatGetsNothingBackDropsTheLink() {
        var harness = Self.connected { $0.network.probeTimeout = .seconds(5) }
        harness.machine.networkChanged(.unavailable, now: harness.now)
        harness.drain()
        harness.advance(by: .seconds(4))
        harness.server(#"{"type":6}"#)  // anything proves the link
        harness.advance(by: .seconds(2))
        #expect(harness.machine.stateName == .connected)
        harness.machine.networkChanged(Self.wifi, now: harness.now)  // back: probed again
        harness.drain()
        let names = harness.advance(by: .seconds(5))
        #expect(names.contains("close"), "\(names)")
        #expect(harness.machine.stateName == .reconnectWaiting)
    }

    /// Another network while connected with stateful reconnect: the link is reopened on it at
    /// once (the same connection, nothing lost); without, it is probed.
    @Test func anotherNetworkReopensAStatefulLink() {
        var harness = Self.connected(stateful: true)
        harness.machine.networkChanged(Self.cellular, now: harness.now)
        let names = harness.drain()
        #expect(names == ["close", "event:connectionlost", "event:reconnecting", "open"], "\(names)")
        #expect(harness.machine.stateName == .resuming)

        var plain = Self.connected()
        plain.machine.networkChanged(Self.cellular, now: plain.now)
        #expect(plain.drain() == ["send:ping"])
        #expect(plain.machine.stateName == .connected)
    }

    /// Given up: the path back starts again at once, the last tier restarted.
    @Test func thePathBackAfterGivingUp() {
        var harness = Self.connected { $0.reconnectPolicy = .fixed(.seconds(1), maximumAttempts: 1) }
        harness.closed()
        harness.advance(by: .seconds(1))
        harness.negotiate(status: 503, body: [])
        #expect(harness.machine.stateName == .suspended)
        harness.machine.networkChanged(.unavailable, now: harness.now)
        harness.machine.networkChanged(Self.wifi, now: harness.now)
        #expect(harness.drain() == ["negotiate"])
    }

    /// `closeUntilActive`: the background closes gracefully (a Close message, pending calls
    /// failed), the foreground starts a new connection announced as `connected`.
    @Test func theBackgroundClosesAndTheForegroundStartsAgain() throws {
        var harness = Self.connected()
        _ = try harness.machine.invoke("Slow", "x", now: harness.now)
        harness.drain()
        harness.machine.applicationStateChanged(.background, now: harness.now)
        let names = harness.drain()
        #expect(names.contains("send:close") && names.contains("close"), "\(names)")
        #expect(names.contains("event:completion") && names.last == "event:suspended", "\(names)")
        #expect(harness.machine.stateName == .suspended)
        harness.machine.applicationStateChanged(.inactive, now: harness.now)
        #expect(harness.drain() == ["negotiate"])
        harness.negotiate()
        harness.opened()
        harness.server("{}")
        let connects = harness.events.filter { if case .lifecycle(.connected) = $0 { true } else { false } }
        #expect(connects.count == 2 && harness.machine.stateName == .connected)
        #expect(harness.lifecycle.contains(.suspended(.background)))
    }

    /// `keepConnection`: the background changes nothing; back in the foreground while waiting to
    /// reconnect, an attempt at once.
    @Test func keepConnectionAndTheForegroundReconnectsNow() {
        var harness = Self.connected { $0.backgroundPolicy = .keepConnection }
        harness.machine.applicationStateChanged(.background, now: harness.now)
        #expect(harness.drain().isEmpty)
        harness.closed()
        #expect(harness.machine.stateName == .reconnectWaiting)
        harness.machine.applicationStateChanged(.active, now: harness.now)
        #expect(harness.drain() == ["negotiate"])
    }

    /// Without `reconnectWhenPathReturns` (nor probes), the path back lets the paused back-off,
    /// or the paused stateful retries, go on by their own delays: nothing waits forever.
    @Test func thePathBackWithoutReconnectingAtOnce() {
        let policy = NetworkPolicy(reconnectWhenPathReturns: false, probeOnPathChange: false)
        var plain = Self.connected { $0.network = policy }
        plain.machine.networkChanged(.unavailable, now: plain.now)
        plain.closed()
        #expect(plain.events.last == .lifecycle(.waitingForNetwork) && plain.machine.pollTimeout() == nil)
        plain.machine.networkChanged(Self.wifi, now: plain.now)
        plain.drain()
        #expect(plain.machine.pollTimeout() != nil)
        #expect(plain.advance(by: .seconds(3)).contains("negotiate"))

        var stateful = Self.connected(stateful: true) { $0.network = policy }
        stateful.machine.networkChanged(.unavailable, now: stateful.now)
        stateful.closed()
        #expect(stateful.machine.stateName == .resuming && stateful.machine.pollTimeout() == nil)
        stateful.machine.networkChanged(Self.wifi, now: stateful.now)
        stateful.drain()
        #expect(stateful.advance(by: .seconds(1)).contains("open"))
    }

    @Test func heartbeatExpectsSomething() {
        let zero = Instant.zero
        var heartbeat = Heartbeat(configuration: .init(), now: zero)
        heartbeat.expectSomething(at: zero + .seconds(1), within: .seconds(5))
        #expect(heartbeat.nextDeadline == zero + .seconds(6))
        #expect(heartbeat.check(now: zero + .seconds(6)) == .awaitedNothingReceived)
        heartbeat.expectSomething(at: zero + .seconds(10), within: .seconds(5))
        heartbeat.didReceive(at: zero + .seconds(12))
        #expect(heartbeat.nextDeadline == nil && heartbeat.check(now: zero + .seconds(20)) == nil)
    }
}

/// `health(now:)` of the hub machine: invocation round trips, traffic, losses.
struct HubHealthTests {
    @Test func countsWhatHappened() throws {
        var harness = HubConnectionHarness { $0.reconnectPolicy = .fixed(.seconds(1)) }
        harness.connect()
        _ = try harness.machine.invoke("Echo", "x", now: harness.now)
        harness.drain()
        harness.advance(by: .milliseconds(25))
        harness.server(#"{"type":3,"invocationId":"0","result":"x"}"#)
        var health = harness.machine.health(now: harness.now)
        #expect(health.lastRoundTrip == .milliseconds(25) && health.transport == "websockets")
        #expect(health.messagesSent == 1 && health.messagesReceived == 1)
        #expect(health.bytesSent > 0 && health.bytesReceived > 0)
        #expect(health.timeOnline == .milliseconds(25))
        harness.advance(by: .seconds(30))  // the server timeout: nothing for 30 s
        health = harness.machine.health(now: harness.now)
        #expect(health.lastDeadLinkDetection == .seconds(30))
        #expect(health.reconnectAttempts == 1 && health.phase == .reconnectWaiting)
    }
}
