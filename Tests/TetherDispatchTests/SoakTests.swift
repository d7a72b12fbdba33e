import Foundation
import Testing
import TetherCore
import TetherSignalRClient
import TetherTestServers
import TetherXMPP
import TetherXMPPClient

/// The soak's run time and cut interval, from the environment.
enum SoakSettings {
    static func setting(_ name: String, default value: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? value
    }

    static let seconds = setting("TETHER_SOAK_SECONDS", default: 10)
    static let cutEvery = setting("TETHER_SOAK_CUT_SECONDS", default: 3)
}

/// A real-time soak: steady traffic through `XMPPClient` (two users on a real prosody, stream
/// management on) and `HubConnection` (a real aiosignalr hub, stateful reconnect on), each
/// through a relay that cuts every link on a schedule. It reports the messages sent, received,
/// lost and duplicated; lost and duplicated must be 0.
///
/// The two run side by side. In `swift test` they run for 10 s with a cut every 3 s; `Tests/Soak/run.sh` runs it for 10
/// minutes with a cut every 30 s (`TETHER_SOAK_SECONDS`, `TETHER_SOAK_CUT_SECONDS`). Each test may
/// take its run time plus two minutes.
@Suite(.timeLimit(.minutes(SoakSettings.seconds / 60 + 2)), .realServers(.prosody, .aiosignalr))
struct SoakTests {
    static let seconds = SoakSettings.seconds
    static let cutEvery = SoakSettings.cutEvery

    struct Tally: CustomStringConvertible {
        var name: String
        var sent = 0
        var received = 0
        var lost = 0
        var duplicated = 0
        var cuts = 0

        var description: String {
            "\(name): \(sent) sent, \(received) received, \(lost) lost, \(duplicated) duplicated, \(cuts) cuts"
        }
    }

    /// Cuts every link of `relays` every `cutEvery` seconds until `deadline`; returns the cuts.
    static func cutting(_ relays: [TCPRelay], until deadline: ContinuousClock.Instant) async -> Int {
        var cuts = 0
        while ContinuousClock.now + .seconds(cutEvery) < deadline {
            try? await Task.sleep(for: .seconds(cutEvery))
            relays[cuts % relays.count].cutAll()
            cuts += 1
        }
        return cuts
    }

    @Test func xmppLinksCutOnAScheduleLoseNothing() async throws {
        let server = try await startedProsody()
        let aliceRelay = try TCPRelay(upstreamPort: server.port)
        let bobRelay = try TCPRelay(upstreamPort: server.port)
        let alice = try XMPPClient(configuration: testConfiguration("alice", port: aliceRelay.port, resource: "soak-a"))
        var bobConfiguration = testConfiguration("bob", port: bobRelay.port, resource: "soak-b")
        bobConfiguration.streamManagement = .init(requestAckAfterStanzas: 5, requestAckAfter: .milliseconds(200))
        let bob = try XMPPClient(configuration: bobConfiguration)
        let bobEvents = EventRecorder(bob)
        let aliceEvents = EventRecorder(alice)
        try await bob.connect()
        try await alice.connect()
        #expect(await aliceEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        #expect(await bobEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })

        let deadline = ContinuousClock.now + .seconds(Self.seconds)
        async let cuts = Self.cutting([aliceRelay, bobRelay], until: deadline)
        var tally = Tally(name: "xmpp")
        while ContinuousClock.now < deadline {
            try await alice.send(XMPPMessage(to: JID("bob@localhost/soak-b"), body: "soak \(tally.sent)"))
            tally.sent += 1
            if tally.sent % 10 == 0 { try await Task.sleep(for: .milliseconds(100)) }
        }
        tally.cuts = await cuts
        try await alice.flush()
        let sent = tally.sent
        // A last message after all of them: once it is in, any duplicate would be in too.
        try await alice.send(XMPPMessage(to: JID("bob@localhost/soak-b"), body: "end"))
        #expect(await bobEvents.wait(timeout: .seconds(30)) { _ in bobEvents.bodies.contains("end") })
        let bodies = bobEvents.bodies.filter { $0.hasPrefix("soak ") }
        tally.received = Set(bodies).count
        tally.lost = Set((0..<sent).map { "soak \($0)" }).subtracting(bodies).count
        tally.duplicated = bodies.count - Set(bodies).count
        print("soak \(tally)")
        #expect(tally.lost == 0 && tally.duplicated == 0, "\(tally)")
        #expect(bodies == (0..<sent).map { "soak \($0)" }, "in order")
        #expect(tally.cuts > 0)
        await alice.disconnect()
        await bob.disconnect()
    }

    @Test func hubLinksCutOnAScheduleLoseNothing() async throws {
        let server = try SignalRHubServer()
        try await server.start()
        let relay = try TCPRelay(upstreamPort: server.port)
        let connection = try HubConnectionBuilder(url: "http://127.0.0.1:\(relay.port)/hub")
            .withStatefulReconnect()
            .withMaximumMessageSize(64 << 20)  // room for `Tallied`'s list after a long soak
            .build()
        try await connection.start()
        let deadline = ContinuousClock.now + .seconds(Self.seconds)
        async let cuts = Self.cutting([relay], until: deadline)
        var tally = Tally(name: "signalr")
        var results: [Int] = []
        while ContinuousClock.now < deadline {
            let n = tally.sent
            tally.sent += 1
            if let result: Int = try? await connection.invoke("Tally", n) { results.append(result) }
            if n % 10 == 0 { try await Task.sleep(for: .milliseconds(20)) }
        }
        tally.cuts = await cuts
        let tallied: [Int] = try await connection.invoke("Tallied")
        tally.received = results.count
        tally.lost = Set(0..<tally.sent).subtracting(results).count
        // Each invocation must have run once on the hub, whatever the cuts.
        tally.duplicated = tallied.count - Set(tallied).count + (results.count - Set(results).count)
        print("soak \(tally)")
        #expect(tally.lost == 0 && tally.duplicated == 0, "\(tally)")
        #expect(tallied == Array(0..<tally.sent))
        #expect(tally.cuts > 0)
        await connection.stop()
    }
}
