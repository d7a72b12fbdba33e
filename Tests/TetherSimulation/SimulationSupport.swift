import TetherCore

/// What the simulated network does to a link.
public enum SimulatedFault: String, CaseIterable, Sendable {
    /// Both ends are told the connection is gone.
    case cut
    /// Half-open: everything sent either way is lost, and neither end is told.
    case stall
    /// The server loses every session and refuses connections for a few seconds.
    case restart
    /// The device loses its network for 2–30 s: every live link goes half-open (its socket
    /// belongs to the lost network), nothing can connect, and the machine is told 100 ms later;
    /// then a path returns (over another interface) and the machine is told at once.
    case pathFlap
    /// The app goes to the background for 5–60 s, then comes back.
    case background
    /// The device moves to another network (Wi-Fi to cellular): every live link goes half-open
    /// (its socket belongs to the old network), and the machine is told of the new path at once.
    case move
}

/// Events by virtual time, in insertion order among equal times.
struct EventQueue<Event> {
    private var items: [(at: Instant, event: Event)] = []

    var earliest: Instant? { items.first?.at }

    mutating func push(_ at: Instant, _ event: Event) {
        let index = items.firstIndex { $0.at > at } ?? items.count
        items.insert((at, event), at: index)
    }

    mutating func pop() -> Event? {
        items.isEmpty ? nil : items.removeFirst().event
    }
}

/// A simulation's virtual clock, its queue of events and its log, and the order both simulations
/// run things in: at each instant the client machine's due timers first, then the events in the
/// order they were scheduled. A timer asked for in the past, or timers firing more than ten times
/// at one instant (a machine that keeps re-arming a due timer would spin), is a failure.
struct VirtualTime<Event> {
    /// What runs next.
    enum Step {
        /// The machine's timers are due now.
        case timers
        /// An event is due now.
        case event(Event)
    }

    private(set) var now = Instant.zero
    private var queue = EventQueue<Event>()
    /// What went wrong and what happened last.
    private(set) var log = SimulationLog()
    /// Timer rounds at the same instant in a row.
    private var timerRoundsNow = 0
    private var nextMinute = 1

    mutating func schedule(at time: Instant, _ event: Event) {
        queue.push(time, event)
    }

    mutating func schedule(after delay: Duration, _ event: Event) {
        queue.push(now + delay, event)
    }

    mutating func fail(_ text: String) {
        log.fail(text, at: now)
    }

    mutating func note(_ text: String) {
        log.note(text, at: now)
    }

    /// Moves the clock on to `time` (never back).
    mutating func advance(to time: Instant) {
        now = max(now, time)
    }

    /// The next step due by `end`, the machine's next timer being due at `machineTimer`, with the
    /// clock moved on to it; nil when nothing is due by then.
    mutating func next(until end: Instant, machineTimer: Instant?) -> Step? {
        guard let due = [queue.earliest, machineTimer].compactMap({ $0 }).min(), due <= end else { return nil }
        advance(to: due)
        if let timer = machineTimer, timer <= now, queue.earliest.map({ timer <= $0 }) ?? true {
            timerRoundsNow += 1
            if timerRoundsNow > 10 { fail("the machine's timers fired more than 10 times at one instant") }
            return .timers
        }
        timerRoundsNow = 0
        return queue.pop().map(Step.event)
    }

    /// After the machine's timers ran: the timer it asks for next must not be in the past.
    mutating func timersRan(nextTimer: Instant?) {
        if let nextTimer, nextTimer < now { fail("the machine asked for a timer at \(nextTimer), before the present") }
    }

    /// Calls `onMinute` with the number (from 1) of each virtual minute passed since the last call.
    mutating func reportMinutes(to onMinute: ((Int) -> Void)?) {
        while now >= Instant.zero + .seconds(60 * Int64(nextMinute)) {
            onMinute?(nextMinute)
            nextMinute += 1
        }
    }
}

/// What went wrong in a run (the first ten) and the last things that happened, for the report.
struct SimulationLog {
    private(set) var failures: [String] = []
    private(set) var trace: [String] = []

    mutating func fail(_ text: String, at now: Instant) {
        if failures.count < 10 { failures.append("t=\(now): \(text)") }
    }

    mutating func note(_ text: String, at now: Instant) {
        trace.append("t=\(now): \(text)")
        if trace.count > 60 { trace.removeFirst(trace.count - 60) }
    }

    /// The failures followed by the trace, or nothing when every invariant held.
    var report: [String] { failures.isEmpty ? [] : failures + ["trace:"] + trace }
}

/// When each fault strikes: about every `interval` throughout `duration` (give or take half of
/// it), or, without an interval, one to three times at seeded moments in the first five minutes.
func faultTimes(
    _ faults: [SimulatedFault],
    interval: Duration?,
    duration: Duration,
    using random: inout SeededRandomNumberGenerator
) -> [(Instant, SimulatedFault)] {
    var times: [(Instant, SimulatedFault)] = []
    for fault in faults {
        guard let interval else {
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                times.append((Instant.zero + .milliseconds(Int64.random(in: 5_000...280_000, using: &random)), fault))
            }
            continue
        }
        var at = Instant.zero
        let spread = interval.components.seconds * 500  // half the interval, in milliseconds
        while true {
            at = at + interval + .milliseconds(Int64.random(in: -spread...spread, using: &random))
            guard at < Instant.zero + duration else { break }
            times.append((at, fault))
        }
    }
    return times
}

/// A link's one-way latency in the simulated network.
func simulatedLatency(using random: inout SeededRandomNumberGenerator) -> Duration {
    .milliseconds(Int64.random(in: 1...40, using: &random))
}

/// What both simulations share: a connection machine against a scripted server on `VirtualTime`,
/// faults struck on a schedule, the app stopping at the end and every invariant checked then. A
/// simulation supplies its machine, how its actions and its own inputs are carried out, and its
/// server; the inputs both have, the draining of actions and the run are the same.
protocol MachineSimulation: AnyObject {
    associatedtype Holder: DrivenMachine
    associatedtype Link: SimulatedLink
    associatedtype Scenario: SimulationPlan
    /// The inputs only this simulation has (`Never` when none).
    associatedtype SpecificInput: Sendable

    /// The clock, the random numbers and what the shared checks need.
    var record: SimulationRecord<SpecificInput> { get set }
    var onMinute: ((Int) -> Void)? { get }
    /// The faults, how often they strike and how long the app runs.
    var scenario: Scenario { get }
    /// How long pending work may take to end after the app stops.
    var stopGrace: Duration { get }
    /// How soon after the path comes back (while waiting to reconnect) the machine should be
    /// online again: the login's round trips on the simulated network.
    var onlineAfterPathBound: Duration { get }
    /// The machine under test, in its holder.
    var holder: Holder { get }
    /// The server's links, by the client's transport generation.
    var links: [TransportGeneration: Link] { get set }

    /// Schedules the scenario's first events (traffic, server ticks).
    func begin()
    /// Carries out one of the machine's actions.
    func perform(_ action: Holder.Action)
    /// Handles an input only this simulation has.
    func handleSpecific(_ input: SpecificInput)
    /// The server received bytes on the link of `generation`.
    func serverReceive(_ generation: TransportGeneration, _ bytes: [UInt8])
    /// The client's end of the link of `generation` closed, as the server sees it.
    func serverDetach(_ generation: TransportGeneration)
    /// The server is back after a restart.
    func serverUp()
    /// The server sends the app its next numbered message (if it can).
    func serverTraffic()
    /// The server's work once a second (pings, held sessions expiring).
    func serverTick()
    /// The app sends its next numbered message or invocation (if it can).
    func appTraffic()
    /// The server loses every session and refuses connections until `serverUp()`.
    func serverRestart()
    /// Checks the invariants that hold once everything ended.
    func checkEnd()
}

/// What the shared run keeps of a simulation: its clock and random numbers, whether the app has
/// stopped (late traffic is then expected to end), and what the shared checks look at.
struct SimulationRecord<Specific: Sendable> {
    var time = VirtualTime<SimulationInput<Specific>>()
    var random: SeededRandomNumberGenerator
    var isOver = false
    /// The reconnect attempts the machine announced, and when attempts started.
    var reconnecting: [(at: Instant, attempt: Int, delay: Duration)] = []
    var connectAttempts: [Instant] = []
    /// When each link stalled (set by a `stall` fault), to check how soon the client noticed.
    var stalledAt: [TransportGeneration: Instant] = [:]
    /// When the client closed each transport.
    var closedAt: [TransportGeneration: Instant] = [:]
    /// When the machine was first connected over each transport generation (set by `drain()`).
    var onlineSince: [TransportGeneration: Instant] = [:]
    /// The device has no network (connects fail), and whether the machine has been told.
    var networkDown = false
    var networkDownReported = false
    /// Path flaps so far (each path back comes over a new interface).
    var pathFlaps = 0
    /// When the app is in the background.
    var inBackground = false
    /// How many times a path came back while the machine waited to reconnect, and how often it
    /// was online again within `onlineAfterPathBound` (the server's own time plus round trips).
    var pathReturnsWhileWaiting = 0
    var pathReturnsOnlineInTime = 0
    /// When the path last came back while waiting (checked by `drain()`).
    var pathBackWhileWaitingAt: Instant?
    /// How long each path back (while waiting) took to online, and each move under a live link
    /// took to online again (the benchmark's numbers).
    var pathBackToOnline: [Duration] = []
    var moveToOnline: [Duration] = []
    /// When the last move happened with the machine online (checked by `drain()`).
    var movedWhileOnlineAt: Instant?

    init(seed: UInt64) {
        random = SeededRandomNumberGenerator(seed: seed)
    }
}

/// What every scenario says: the faults, how often they strike and how long the app runs.
protocol SimulationPlan {
    var faults: [SimulatedFault] { get }
    /// How often each fault strikes on average (nil: one to three times in the first five minutes).
    var faultInterval: Duration? { get }
    /// Virtual time the app runs for.
    var duration: Duration { get }
}

/// What the simulated network knows of a link on the server's side.
protocol SimulatedLink {
    /// Neither closed by either end nor cut.
    var isOpen: Bool { get set }
    /// Half-open: everything sent either way is lost, and neither end is told.
    var isStalled: Bool { get set }
}

/// The inputs of a simulation: those both protocols have, and a protocol's own (`specific`).
enum SimulationInput<Specific: Sendable>: Sendable {
    case clientConnected(TransportGeneration)
    case clientReceive(TransportGeneration, [UInt8])
    case clientClosed(TransportGeneration, TransportError?)
    case serverReceive(TransportGeneration, [UInt8])
    case serverClosed(TransportGeneration)
    /// The server's next message to the app (then the one after, at a random interval).
    case serverTraffic
    case serverTick
    case serverUp
    /// The app's next message or invocation (then the one after, at a random interval).
    case appTraffic
    /// The app starts the machine again if it is disconnected.
    case appStart
    case fault(SimulatedFault)
    /// The device's path goes (false) or comes back (true), as the machine is told.
    case pathReported(Bool)
    /// The app's state changes.
    case applicationState(ApplicationState)
    case specific(Specific)
}

extension MachineSimulation where SpecificInput == Never {
    func handleSpecific(_ input: Never) {}
}

extension MachineSimulation {
    typealias Event = SimulationInput<SpecificInput>

    var time: VirtualTime<Event> {
        _read { yield record.time }
        _modify { yield &record.time }
    }
    var random: SeededRandomNumberGenerator {
        _read { yield record.random }
        _modify { yield &record.random }
    }
    var isOver: Bool {
        _read { yield record.isOver }
        _modify { yield &record.isOver }
    }
    var reconnecting: [(at: Instant, attempt: Int, delay: Duration)] {
        _read { yield record.reconnecting }
        _modify { yield &record.reconnecting }
    }
    var connectAttempts: [Instant] {
        _read { yield record.connectAttempts }
        _modify { yield &record.connectAttempts }
    }
    var stalledAt: [TransportGeneration: Instant] {
        _read { yield record.stalledAt }
        _modify { yield &record.stalledAt }
    }
    var closedAt: [TransportGeneration: Instant] {
        _read { yield record.closedAt }
        _modify { yield &record.closedAt }
    }
    var onlineSince: [TransportGeneration: Instant] {
        _read { yield record.onlineSince }
        _modify { yield &record.onlineSince }
    }

    var now: Instant { time.now }

    /// Runs the scenario and returns what broke (empty when every invariant held).
    func runScenario() -> [String] {
        // The device's path as a monitor reports it when it starts (a later one then differs).
        holder.networkChanged(NetworkPath(isAvailable: true, interfaces: ["net0"]), now: now)
        holder.start(now: now)
        drain()
        begin()
        let plan = scenario
        for (at, fault) in faultTimes(
            plan.faults,
            interval: plan.faultInterval,
            duration: plan.duration,
            using: &random
        ) {
            time.schedule(at: at, .fault(fault))
        }
        let end = Instant.zero + plan.duration
        runSteps(until: end, countingMinutes: true)
        // The app stops; whatever is pending must end.
        time.advance(to: end)
        isOver = true
        holder.stop(now: now)
        drain()
        runSteps(until: now + stopGrace)
        checkEnd()
        return time.log.report
    }

    /// Runs the machine's timers and the events due by `end`.
    func runSteps(until end: Instant, countingMinutes: Bool = false) {
        while let step = time.next(until: end, machineTimer: holder.pollTimeout()) {
            switch step {
            case .timers:
                holder.handleTimeout(now: now)
                drain()
                time.timersRan(nextTimer: holder.pollTimeout())
            case .event(let event):
                handle(event)
            }
            if countingMinutes { time.reportMinutes(to: onMinute) }
        }
    }

    /// Feeds one input to the machine or the server, then carries out what the machine asks.
    func handle(_ event: Event) {
        switch event {
        case .clientConnected(let generation):
            holder.transportConnected(generation: generation, now: now)
        case .clientReceive(let generation, let bytes):
            holder.transportReceived(bytes, generation: generation, now: now)
        case .clientClosed(let generation, let error):
            holder.transportClosed(generation: generation, error: error, now: now)
        case .serverReceive(let generation, let bytes):
            serverReceive(generation, bytes)
        case .serverClosed(let generation):
            serverDetach(generation)
        case .serverTraffic:
            serverTraffic()
            schedule(after: .milliseconds(Int64.random(in: 500...2_500, using: &random)), .serverTraffic)
        case .serverTick:
            serverTick()
            schedule(after: .seconds(1), .serverTick)
        case .serverUp:
            serverUp()
        case .appTraffic:
            appTraffic()
            schedule(after: .milliseconds(Int64.random(in: 500...4_000, using: &random)), .appTraffic)
        case .appStart:
            if holder.phase == .disconnected { holder.start(now: now) }
        case .fault(let fault):
            inject(fault)
        case .pathReported(let available):
            record.networkDownReported = !available
            if available { record.networkDown = false }
            let waiting = holder.phase == .reconnectWaiting || holder.phase == .suspended
            let resuming = holder.phase == .resuming
            let attemptsBefore = connectAttempts.count
            if available {
                record.pathFlaps += 1
                holder.networkChanged(NetworkPath(isAvailable: true, interfaces: ["net\(record.pathFlaps)"]), now: now)
            } else {
                holder.networkChanged(.unavailable, now: now)
            }
            drain()
            // An announced attempt that has not started is replaced: paused (no path) or started now.
            let current = now
            reconnecting.removeAll { $0.at + $0.delay > current }
            // (In the background a connection closed for it waits for the foreground instead.)
            if available && resuming && !record.inBackground { record.pathBackWhileWaitingAt = now }
            if available && waiting && !record.inBackground {
                record.pathReturnsWhileWaiting += 1
                record.pathBackWhileWaitingAt = now
                if connectAttempts.count == attemptsBefore {
                    fail("the path came back while waiting to reconnect, and no attempt started at once")
                }
            }
            return
        case .applicationState(let state):
            record.inBackground = state == .background
            holder.applicationStateChanged(state, now: now)
            drain()
            let current = now
            reconnecting.removeAll { $0.at + $0.delay > current }
            return
        case .specific(let input):
            handleSpecific(input)
        }
        drain()
    }

    /// Carries out the machine's actions (at most 1,000 per input: no busy loop), and notes when
    /// it came online over a transport.
    func drain() {
        var count = 0
        while let action = holder.pollAction() {
            count += 1
            if count > 1_000 { return fail("more than 1,000 actions for one input") }
            perform(action)
        }
        if holder.phase == .connected, let generation = holder.currentGeneration,
            onlineSince[generation] == nil
        {
            onlineSince[generation] = now
            if let back = record.pathBackWhileWaitingAt {
                record.pathBackWhileWaitingAt = nil
                record.pathBackToOnline.append(now - back)
                if now - back <= onlineAfterPathBound { record.pathReturnsOnlineInTime += 1 }
            }
            if let moved = record.movedWhileOnlineAt {
                record.movedWhileOnlineAt = nil
                record.moveToOnline.append(now - moved)
            }
        }
    }

    /// Strikes a fault on every live link (or on the server).
    func inject(_ fault: SimulatedFault) {
        let live = links.filter { $0.value.isOpen && !$0.value.isStalled }.map(\.key).sorted()
        note("fault \(fault) on \(live)")
        switch fault {
        case .cut:
            for generation in live {
                links[generation]!.isOpen = false
                schedule(
                    after: latency(),
                    .clientClosed(generation, TransportError(.connectionLost, "connection reset"))
                )
                schedule(after: latency(), .serverClosed(generation))
            }
        case .stall:
            for generation in live {
                links[generation]!.isStalled = true
                stalledAt[generation] = now
            }
        case .restart:
            serverRestart()
            for generation in live {
                links[generation]!.isOpen = false
                schedule(
                    after: latency(),
                    .clientClosed(generation, TransportError(.connectionLost, "connection reset"))
                )
            }
            schedule(after: .milliseconds(Int64.random(in: 1_000...8_000, using: &random)), .serverUp)
        case .pathFlap:
            guard !record.networkDown else { return }
            record.networkDown = true
            for generation in live {
                links[generation]!.isStalled = true
            }
            schedule(after: .milliseconds(100), .pathReported(false))
            let down = Duration.milliseconds(Int64.random(in: 2_000...30_000, using: &random))
            schedule(after: down, .pathReported(true))
        case .move:
            guard !record.networkDown else { return }
            let online = holder.phase == .connected
            for generation in live {
                links[generation]!.isStalled = true
            }
            if online && !live.isEmpty { record.movedWhileOnlineAt = now }
            record.pathFlaps += 1
            holder.networkChanged(NetworkPath(isAvailable: true, interfaces: ["net\(record.pathFlaps)"]), now: now)
            let current = now
            reconnecting.removeAll { $0.at + $0.delay > current }
        case .background:
            guard !record.inBackground else { return }
            schedule(after: .zero, .applicationState(.background))
            schedule(after: .milliseconds(Int64.random(in: 5_000...60_000, using: &random)), .applicationState(.active))
        }
    }

    /// Whether a connect attempt may go out now: not while the machine knows there is no path.
    /// With no network a connect fails (after a latency), as an unreachable network does.
    func connectAllowed(
        _ generation: TransportGeneration,
        closed: (TransportGeneration, TransportError) -> Void
    ) -> Bool {
        if record.networkDownReported { fail("a connect attempt while the machine knew there was no network") }
        guard record.networkDown else { return true }
        closed(generation, TransportError(.connectionFailed, "network is unreachable"))
        return false
    }

    /// Checks what both protocols promise: each reconnect attempt starts exactly when its event
    /// said, and a stalled link is closed within `bound(online)` of the stall (`online`: the
    /// machine was connected over it by then), plus one latency for a message already on its way.
    func checkReconnectsAndStalls(bound: (_ online: Bool) -> Duration) {
        for (at, attempt, delay) in reconnecting where !connectAttempts.contains(at + delay) {
            fail("reconnect attempt \(attempt) announced at \(at) for \(delay) later did not start then")
        }
        for (generation, stalled) in stalledAt {
            guard let closed = closedAt[generation] else {
                fail("stalled link \(generation) was never closed")
                continue
            }
            let limit = bound(onlineSince[generation].map { $0 <= stalled } ?? false)
            if closed > stalled + limit + .milliseconds(40) {
                fail("stalled link \(generation) was closed \(closed - stalled) after it stalled (bound \(limit))")
            }
        }
    }

    func fail(_ text: String) {
        time.fail(text)
    }

    func note(_ text: String) {
        time.note(text)
    }

    func schedule(after delay: Duration, _ event: Event) {
        time.schedule(after: delay, event)
    }

    /// A link's one-way latency.
    func latency() -> Duration {
        simulatedLatency(using: &random)
    }
}

/// What the shared run and input handling call on a simulation's machine.
protocol DrivenMachine: AnyObject {
    associatedtype Action
    func start(now: Instant)
    func stop(now: Instant)
    func reconnectNow(now: Instant)
    func handleTimeout(now: Instant)
    func pollTimeout() -> Instant?
    func pollAction() -> Action?
    func transportConnected(generation: TransportGeneration, now: Instant)
    func transportReceived(_ bytes: [UInt8], generation: TransportGeneration, now: Instant)
    func transportClosed(generation: TransportGeneration, error: TransportError?, now: Instant)
    func networkChanged(_ path: NetworkPath, now: Instant)
    func applicationStateChanged(_ state: ApplicationState, now: Instant)
    var phase: ConnectionPhase { get }
    var currentGeneration: TransportGeneration? { get }
}

/// Holds a connection machine (copyable or not) for a simulation.
final class MachineHolder<Machine: ConnectionMachine & ~Copyable>: DrivenMachine {
    var machine: Machine

    init(_ machine: consuming Machine) {
        self.machine = machine
    }

    func start(now: Instant) { machine.start(now: now) }
    func stop(now: Instant) { machine.stop(now: now) }
    func reconnectNow(now: Instant) { machine.reconnectNow(now: now) }
    func handleTimeout(now: Instant) { machine.handleTimeout(now: now) }
    func pollTimeout() -> Instant? { machine.pollTimeout() }
    func pollAction() -> ConnectionAction<Machine.Request, Machine.Event>? { machine.pollAction() }
    func transportConnected(generation: TransportGeneration, now: Instant) {
        machine.transportConnected(generation: generation, now: now)
    }
    func transportReceived(_ bytes: [UInt8], generation: TransportGeneration, now: Instant) {
        machine.transportReceived(bytes.backDeployedSpan, generation: generation, now: now)
    }
    func transportClosed(generation: TransportGeneration, error: TransportError?, now: Instant) {
        machine.transportClosed(generation: generation, error: error, now: now)
    }
    func networkChanged(_ path: NetworkPath, now: Instant) { machine.networkChanged(path, now: now) }
    func applicationStateChanged(_ state: ApplicationState, now: Instant) {
        machine.applicationStateChanged(state, now: now)
    }
    var phase: ConnectionPhase { machine.phase }
    var currentGeneration: TransportGeneration? { machine.currentGeneration }
}
