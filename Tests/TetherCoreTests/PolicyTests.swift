import Testing
import TetherCore

struct ReconnectPolicyTests {
    func delays(_ policy: ReconnectPolicy, count: Int, seed: UInt64 = 1, step: Duration = .seconds(1)) -> [Duration?] {
        var schedule = ReconnectSchedule(policy: policy)
        var rng = SeededRandomNumberGenerator(seed: seed)
        var now = Instant.zero
        schedule.connectionLost(at: now)
        return (0..<count).map { _ in
            let delay = schedule.nextDelay(now: now, reason: "lost", using: &rng)
            now = now + (delay ?? .zero) + step
            return delay
        }
    }

    @Test func signalRDefault() {
        #expect(delays(.signalRDefault, count: 6) == [.zero, .seconds(2), .seconds(10), .seconds(30), nil, nil])
    }

    @Test func fixedWithLimits() {
        #expect(
            delays(.fixed(.seconds(5), maximumAttempts: 3), count: 4) == [.seconds(5), .seconds(5), .seconds(5), nil]
        )
        // Elapsed: attempts at 0, 6, 12 s (delay 5 + 1 s per attempt); the limit of 12 s stops the third.
        #expect(delays(.fixed(.seconds(5), maximumElapsed: .seconds(12)), count: 3) == [.seconds(5), .seconds(5), nil])
    }

    @Test func tieredStopsOrRepeats() {
        let tiers = [
            ReconnectPolicy.Tier(attempts: 5, delay: .seconds(3)), .init(attempts: 5, delay: .seconds(9)),
            .init(attempts: 5, delay: .seconds(15)),
        ]
        let expected: [Duration?] =
            Array(repeating: .seconds(3), count: 5) + Array(repeating: .seconds(9), count: 5)
            + Array(repeating: .seconds(15), count: 5)
        #expect(delays(.tiered(tiers, repeats: false, jitter: .none), count: 17) == expected + [nil, nil])
        #expect(
            delays(.tiered(tiers, repeats: true, jitter: .none), count: 17) == expected + [.seconds(3), .seconds(3)]
        )
    }

    /// The jittered schedules: each delay within ±50 % of the schedule's (the standard jitter),
    /// the immediate retry within 1 s, the same for the same seed (simulations replay), spread
    /// over seeds (a fleet does not retry at one instant).
    @Test func jitterSpreadsEachDelayAroundTheSchedule() {
        var firsts: Set<Duration> = []
        for seed in 1...200 as ClosedRange<UInt64> {
            let spread = delays(.signalR, count: 5, seed: seed)
            #expect(spread[4] == nil)
            let values = spread.prefix(4).map { $0! }
            #expect(values[0] >= .zero && values[0] <= .seconds(1))
            for (value, base) in zip(values.dropFirst(), [2, 10, 30] as [Int64]) {
                #expect(value >= .milliseconds(base * 500) && value <= .milliseconds(base * 1500), "\(value)")
            }
            #expect(delays(.signalR, count: 5, seed: seed) == spread)
            firsts.insert(values[0])
            let tiered = delays(.tiered(repeats: false), count: 6, seed: seed).map { $0! }
            #expect(tiered.prefix(5).allSatisfy { $0 >= .milliseconds(1500) && $0 <= .milliseconds(4500) })
            #expect(tiered[5] >= .milliseconds(4500) && tiered[5] <= .milliseconds(13_500))
            let full = delays(.fixed(.seconds(4)).jittered(.full()), count: 3, seed: seed).map { $0! }
            #expect(full.allSatisfy { $0 >= .zero && $0 <= .seconds(4) })
        }
        #expect(firsts.count > 190)
        // Explicit numbers stay exact unless jittered; the official schedule is there exactly.
        #expect(delays(.fixed(.seconds(5)), count: 2) == [.seconds(5), .seconds(5)])
        #expect(delays(.signalRDefault.jittered(.none), count: 2) == [.zero, .seconds(2)])
    }

    @Test func exponentialBackoffWithFullJitter() {
        for seed in 1...20 as ClosedRange<UInt64> {
            let values = delays(.exponentialBackoff(), count: 7, seed: seed).map { $0! }
            let ceilings: [Int64] = [60, 180, 420, 900, 1860, 1860, 1860]
            for (value, ceiling) in zip(values, ceilings) {
                #expect(value >= .zero && value <= .seconds(ceiling))
            }
        }
        // Deterministic for a seed, different across seeds.
        #expect(delays(.exponentialBackoff(), count: 3, seed: 7) == delays(.exponentialBackoff(), count: 3, seed: 7))
        #expect(delays(.exponentialBackoff(), count: 3, seed: 7) != delays(.exponentialBackoff(), count: 3, seed: 8))
    }

    @Test func customRuleSeesAttemptElapsedAndReason() {
        let policy = ReconnectPolicy.custom { context in
            context.reason == "lost" && context.attempt < 2
                ? .seconds(Int64(context.attempt) + 1) + context.elapsed : nil
        }
        #expect(delays(policy, count: 3, step: .zero) == [.seconds(1), .seconds(3), nil])
    }

    @Test func backOffRestartsOnlyAfterAnEstablishedConnection() {
        var schedule = ReconnectSchedule(policy: .signalRDefault)
        var rng = SeededRandomNumberGenerator(seed: 1)
        schedule.connectionLost(at: .zero)
        #expect(schedule.nextDelay(now: .zero, reason: nil, using: &rng) == .zero)
        #expect(schedule.nextDelay(now: .zero, reason: nil, using: &rng) == .seconds(2))
        // A second loss report while still reconnecting does not start over.
        schedule.connectionLost(at: .zero + .seconds(3))
        #expect(schedule.nextDelay(now: .zero, reason: nil, using: &rng) == .seconds(10))
        schedule.connectionEstablished()
        schedule.connectionLost(at: .zero + .seconds(100))
        #expect(schedule.nextDelay(now: .zero + .seconds(100), reason: nil, using: &rng) == .zero)
    }
}

struct HeartbeatTests {
    let start = Instant.zero

    @Test func keepAliveAfterSendSilence() {
        var heartbeat = Heartbeat(
            configuration: .init(keepAliveInterval: .seconds(15), receiveTimeout: .seconds(30)),
            now: start
        )
        #expect(heartbeat.nextDeadline == start + .seconds(15))
        #expect(heartbeat.check(now: start + .seconds(14)) == nil)
        #expect(heartbeat.check(now: start + .seconds(15)) == .keepAlive)
        heartbeat.didSend(at: start + .seconds(15))
        heartbeat.didReceive(at: start + .seconds(20))
        #expect(heartbeat.nextDeadline == start + .seconds(30))
        #expect(heartbeat.check(now: start + .seconds(30)) == .keepAlive)
        heartbeat.didSend(at: start + .seconds(30))
        #expect(heartbeat.nextDeadline == start + .seconds(45))
        #expect(heartbeat.check(now: start + .seconds(50)) == .receiveTimedOut)
    }

    @Test func awaitedAnswerWindow() {
        var heartbeat = Heartbeat(configuration: .init(keepAliveInterval: .seconds(15)), now: start)
        heartbeat.expectSomething(at: start + .seconds(2), within: .seconds(5))
        #expect(heartbeat.nextDeadline == start + .seconds(7))
        #expect(heartbeat.check(now: start + .seconds(7)) == .awaitedNothingReceived)
        // The window is spent: the next deadline is the keep-alive.
        #expect(heartbeat.nextDeadline == start + .seconds(15))
        heartbeat.expectSomething(at: start + .seconds(8), within: .seconds(5))
        heartbeat.didReceive(at: start + .seconds(9))
        #expect(heartbeat.check(now: start + .seconds(13)) == nil)
        #expect(heartbeat.nextDeadline == start + .seconds(15))
    }
}

struct TimerTableTests {
    enum Timer: Hashable, Sendable { case ping, timeout, handshake }

    @Test func earliestAndExpiry() {
        var table = TimerTable<Timer>()
        #expect(table.earliest == nil)
        table.set(.timeout, at: Instant(nanoseconds: 30))
        table.set(.ping, at: Instant(nanoseconds: 15))
        table.set(.handshake, at: Instant(nanoseconds: 20))
        #expect(table.earliest == Instant(nanoseconds: 15))
        table.set(.ping, at: Instant(nanoseconds: 25))
        #expect(table.earliest == Instant(nanoseconds: 20))
        #expect(Array(table.expired(at: Instant(nanoseconds: 26))) == [.handshake, .ping])
        #expect(table.expired(at: Instant(nanoseconds: 26)).isEmpty)
        table.cancel(.timeout)
        #expect(table.earliest == nil)
    }

    @Test func oneDueTimerLeavesTheOthersArmed() {
        var table = TimerTable<Timer>()
        table.set(.timeout, at: Instant(nanoseconds: 30))
        table.set(.ping, at: Instant(nanoseconds: 15))
        table.set(.handshake, at: Instant(nanoseconds: 20))
        let due = table.expired(at: Instant(nanoseconds: 15))
        #expect(Array(due) == [.ping])
        #expect(!due.isEmpty)
        #expect(!table.isArmed(.ping) && table.isArmed(.handshake) && table.isArmed(.timeout))
        #expect(table.earliest == Instant(nanoseconds: 20))
        table.set(.ping, at: Instant(nanoseconds: 40))
        #expect(Array(table.expired(at: Instant(nanoseconds: 35))) == [.handshake, .timeout])
        #expect(table.deadline(.ping) == Instant(nanoseconds: 40))
    }

    /// The earliest deadline kept beside the table always equals the minimum over the entries,
    /// through random sets, re-sets (earlier and later), cancels and expiries.
    @Test func cachedEarliestMatchesTheEntries() {
        var table = TimerTable<Int>()
        var reference: [Int: Instant] = [:]
        var rng = SeededRandomNumberGenerator(seed: 11)
        for step in 0..<20_000 {
            let key = Int.random(in: 0..<6, using: &rng)
            let at = Instant(nanoseconds: Int64.random(in: 0..<50, using: &rng))
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<6:
                table.set(key, at: at)
                reference[key] = at
            case 6..<8:
                table.cancel(key)
                reference[key] = nil
            case 8:
                let due = Array(table.expired(at: at))
                let expected = reference.filter { $0.value <= at }.sorted { ($0.value, $0.key) < ($1.value, $1.key) }
                #expect(Set(due) == Set(expected.map(\.key)), "step \(step)")
                for key in due { reference[key] = nil }
            default:
                table.cancelAll()
                reference.removeAll()
            }
            #expect(table.earliest == reference.values.min(), "step \(step)")
        }
    }
}

/// The network rules both machines carry out, written once in `NetworkPolicy.response(to:in:)`.
struct NetworkPolicyTests {
    typealias Standing = NetworkPolicy.Standing

    static let standings: [Standing] = [
        .connected, .attempting, .waitingToRetry(timerArmed: true), .waitingToRetry(timerArmed: false),
        .suspended(forBackground: false), .suspended(forBackground: true), .idle,
    ]

    @Test func theDefaults() {
        let policy = NetworkPolicy()
        let lost = Self.standings.map { policy.response(to: .lost, in: $0) }
        #expect(lost == [.probe, .endAttempt, .pauseRetries, .nothing, .nothing, .nothing, .nothing])
        let returned = Self.standings.map { policy.response(to: .returned, in: $0) }
        #expect(returned == [.probe, .nothing, .retryNow, .retryNow, .retryNow, .nothing, .nothing])
        let moved = Self.standings.map { policy.response(to: .moved, in: $0) }
        #expect(moved == [.probe, .restartAttempt, .retryNow, .retryNow, .retryNow, .nothing, .nothing])
        #expect(Self.standings.allSatisfy { policy.response(to: .none, in: $0) == .nothing })
    }

    @Test func eachSwitchOff() {
        let noWaiting = NetworkPolicy(waitForPath: false)
        #expect(Self.standings.map { noWaiting.response(to: .lost, in: $0) }.filter { $0 != .nothing } == [.probe])
        let noReconnect = NetworkPolicy(reconnectWhenPathReturns: false)
        let returned = Self.standings.map { noReconnect.response(to: .returned, in: $0) }
        // The paused wait (no timer) goes on where it was; one still counting down is left alone.
        #expect(returned == [.probe, .nothing, .nothing, .continueRetries, .nothing, .nothing, .nothing])
        #expect(noReconnect.response(to: .moved, in: .attempting) == .nothing)
        let noProbe = NetworkPolicy(probeOnPathChange: false)
        #expect(noProbe.response(to: .lost, in: .connected) == .nothing)
        #expect(noProbe.response(to: .moved, in: .connected) == .nothing)
    }

    @Test func standingFromThePhase() {
        #expect(Standing(.connected, retryTimerArmed: false) == .connected)
        #expect(Standing(.connecting, retryTimerArmed: false) == .attempting)
        #expect(Standing(.resuming, retryTimerArmed: true) == .attempting)
        #expect(Standing(.resuming, retryTimerArmed: true, waitingToResume: true) == .waitingToRetry(timerArmed: true))
        #expect(Standing(.reconnectWaiting, retryTimerArmed: false) == .waitingToRetry(timerArmed: false))
        #expect(
            Standing(.suspended, retryTimerArmed: false, closedForBackground: true) == .suspended(forBackground: true)
        )
        #expect(Standing(.disconnected, retryTimerArmed: false) == .idle)
        #expect(Standing(.closing, retryTimerArmed: false) == .idle)
    }

    @Test func applicationChanges() {
        var device = DeviceState()
        #expect(device.applicationChanged(to: .inactive) == nil)  // still the foreground
        #expect(device.applicationChanged(to: .background) == true)
        #expect(device.applicationChanged(to: .background) == nil)
        #expect(device.applicationChanged(to: .inactive) == false)
        #expect(device.applicationChanged(to: .active) == nil)
    }
}
