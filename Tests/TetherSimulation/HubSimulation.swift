import TetherCore
import TetherSignalR

/// A deterministic network simulation: the real `HubConnectionMachine` against a scripted
/// SignalR hub (negotiate, handshake, Echo, numbered Notify invocations, pings, and the server
/// side of stateful reconnect) over a virtual network with seeded latency, cuts, stalls (a
/// half-open link that silently drops everything) and server restarts, on a virtual clock.
///
/// Everything comes from the scenario's seed: a failing seed replays exactly with
/// `HubSimulation(scenario).run()`.
public final class HubSimulation: MachineSimulation {
    public struct Scenario: SimulationPlan, CustomStringConvertible, Sendable {
        public typealias Fault = SimulatedFault

        public var seed: UInt64
        public var stateful: Bool
        public var faults: [Fault]
        /// Virtual time the app runs for.
        public var duration: Duration
        /// The MessagePack hub protocol instead of JSON.
        public var messagePack: Bool
        /// How often each fault strikes on average (nil: one to three times in the first five
        /// minutes).
        public var faultInterval: Duration?
        /// The reconnect delays are spread (`Jitter.standard`) with the machine's seeded generator.
        public var jitter: Bool

        public init(
            seed: UInt64,
            stateful: Bool,
            faults: [Fault],
            duration: Duration = .seconds(300),
            messagePack: Bool = false,
            faultInterval: Duration? = nil,
            jitter: Bool = false
        ) {
            self.jitter = jitter
            self.seed = seed
            self.stateful = stateful
            self.faults = faults
            self.duration = duration
            self.messagePack = messagePack
            self.faultInterval = faultInterval
        }

        public var description: String {
            "HubSimulation(.init(seed: \(seed), stateful: \(stateful), faults: [\(faults.map { "." + $0.rawValue }.joined(separator: ", "))], "
                + "duration: \(duration), messagePack: \(messagePack), faultInterval: \(String(describing: faultInterval)), "
                + "jitter: \(jitter))).run()"
        }
    }

    /// What a run did, in numbers.
    public struct Summary: Sendable, CustomStringConvertible {
        public var notificationsReceived: Int
        public var invocationsCompleted: Int
        public var invocationsFailed: Int
        public var connections: Int
        public var webSockets: Int

        public var description: String {
            "\(notificationsReceived) notifications, \(invocationsCompleted) invocations completed "
                + "(\(invocationsFailed) failed), \(connections) connections, \(webSockets) WebSockets"
        }
    }

    public var summary: Summary {
        Summary(
            notificationsReceived: notifySegments.joined().count,
            invocationsCompleted: completedInvocations,
            invocationsFailed: erroredInvocations,
            connections: hub.connections,
            webSockets: hub.links.count
        )
    }

    /// The client's configuration in every scenario.
    static let keepAlive = Duration.seconds(2)
    static let serverTimeout = Duration.seconds(8)
    static let handshakeTimeout = Duration.seconds(15)
    static let reconnectDelays: [Duration] = [.zero, .seconds(2), .seconds(5), .seconds(10)]
    /// The server's ping interval and how long it keeps a detached stateful connection.
    static let serverKeepAlive = Duration.seconds(3)
    static let holdTime = Duration.seconds(30)

    let scenario: Scenario
    var record: SimulationRecord<SpecificInput>
    let holder: MachineHolder<HubConnectionMachine>
    /// The machine under test.
    var machine: HubConnectionMachine {
        _read { yield holder.machine }
        _modify { yield &holder.machine }
    }
    var hub = Hub()

    // What the app saw.
    var notifySegments: [[Int]] = [[]]
    var pendingInvocations: [String: Int] = [:]
    var endedInvocations: Set<String> = []
    var erroredInvocations = 0
    var completedInvocations = 0
    /// Stateful reconnect's tries announced in the current outage.
    var resumeTriesAnnounced = 0
    /// The reconnect delays of a spread schedule, as they came.
    public var spreadDelays: [Duration] = []
    /// The arguments of the Echo invocations that completed with a result.
    var completedArguments: [Int] = []
    var closedEvents = 0
    var sessionsLost = 0
    var nextArgument = 0
    /// Called as each virtual minute passes, with its number (from 1): the benchmark's soak
    /// samples memory there.
    public var onMinute: ((Int) -> Void)?

    public init(_ scenario: Scenario) {
        self.scenario = scenario
        record = SimulationRecord(seed: scenario.seed)
        var configuration = HubConnectionMachine.Configuration(url: "http://hub.test/chat")
        configuration.keepAliveInterval = Self.keepAlive
        configuration.serverTimeout = Self.serverTimeout
        configuration.handshakeTimeout = Self.handshakeTimeout
        configuration.reconnectPolicy =
            scenario.jitter ? .delays(Self.reconnectDelays).jittered(.standard) : .delays(Self.reconnectDelays)
        configuration.statefulReconnect = scenario.stateful
        configuration.handledTargets = ["Notify"]
        // Under stateful reconnect the connection stays in the background, so that its promise
        // (nothing lost, nothing failed) is checked across background cycles; without, the
        // default closes it there and starts a new one on return.
        configuration.backgroundPolicy = scenario.stateful ? .keepConnection : .closeUntilActive
        holder = MachineHolder(
            HubConnectionMachine(
                configuration: configuration,
                hubProtocol: Self.hubProtocol(scenario),
                randomSeed: scenario.seed
            )
        )
        hub.allowsStatefulReconnect = scenario.stateful
        hub.hubProtocol = Self.hubProtocol(scenario)
    }

    static func hubProtocol(_ scenario: Scenario) -> AnyHubProtocol {
        scenario.messagePack ? .messagePack(MessagePackHubProtocol()) : .json(JSONHubProtocol())
    }

    // MARK: - Running

    /// Runs the scenario and returns what broke (empty when every invariant held).
    public func run() -> [String] {
        runScenario()
    }

    /// How long each path back (while waiting to reconnect) took until online, and each move to
    /// another network under a live link until online again.
    public var pathBackToOnline: [Duration] { record.pathBackToOnline }
    public var moveToOnline: [Duration] { record.moveToOnline }

    var stopGrace: Duration { .seconds(20) }
    var onlineAfterPathBound: Duration { .seconds(1) }

    func begin() {
        schedule(after: .milliseconds(500), .appTraffic)
        schedule(after: .seconds(1), .serverTraffic)
        schedule(after: .seconds(1), .serverTick)
    }

    // MARK: - Events

    /// The inputs only a SignalR run has.
    enum SpecificInput: Sendable {
        /// The negotiate response reached the client (nil status: the connection was refused).
        case negotiated(TransportGeneration, status: Int?, body: [UInt8])
        /// The client's WebSocket upgrade reached the server.
        case serverOpen(TransportGeneration, token: String)
    }

    func handleSpecific(_ input: SpecificInput) {
        switch input {
        case .negotiated(let generation, let status, let body):
            if let status {
                machine.negotiateResponse(status: status, body: body, generation: generation, now: now)
            } else {
                machine.negotiateFailed(
                    TransportError(.connectionFailed, "connection refused"),
                    generation: generation,
                    now: now
                )
            }
        case .serverOpen(let generation, let token):
            serverOpen(generation, token: token)
        }
    }

    func serverDetach(_ generation: TransportGeneration) {
        hub.detach(generation, now: now)
    }

    func serverUp() {
        hub.isUp = true
    }

    func serverRestart() {
        if hub.isUp { sessionsLost += hub.sessions.count }
        hub.restart()
    }

    var links: [TransportGeneration: Link] {
        _read { yield hub.links }
        _modify { yield &hub.links }
    }

    func perform(_ action: HubConnectionMachine.Action) {
        switch action {
        case .request(.fetchAccessToken(let generation)):
            machine.accessTokenFetched(nil, generation: generation, now: now)
        case .request(.negotiate(_, _, let generation)):
            connectAttempts.append(now)
            let round = latency() + latency()
            guard
                connectAllowed(
                    generation,
                    closed: { generation, _ in
                        schedule(after: round, .specific(.negotiated(generation, status: nil, body: [])))
                    }
                )
            else { return }
            if hub.isUp {
                let (token, body) = hub.negotiate(now: now)
                _ = token
                schedule(after: round, .specific(.negotiated(generation, status: 200, body: body)))
            } else {
                schedule(after: round, .specific(.negotiated(generation, status: nil, body: [])))
            }
        case .openTransport(let request, let generation):
            guard connectAllowed(generation, closed: { schedule(after: latency(), .clientClosed($0, $1)) }) else {
                return
            }
            guard case .webSocket(let url, _) = request.kind else { return fail("a transport other than WebSockets") }
            let token = url.target.split(separator: "id=").last.map(String.init) ?? ""
            schedule(after: latency(), .specific(.serverOpen(generation, token: token)))
        case .send(let bytes, let generation, _):
            guard let link = hub.links[generation], link.isOpen, !link.isStalled else { return }
            let at = link.nextToServer(now + latency())
            hub.links[generation]!.lastToServer = at
            time.schedule(at: at, .serverReceive(generation, bytes))
        case .closeTransport(let generation):
            closedAt[generation] = now
            if let link = hub.links[generation], link.isOpen {
                hub.links[generation]!.isOpen = false
                if !link.isStalled { schedule(after: latency(), .serverClosed(generation)) }
            }
        case .event(let event):
            if case .invocation = event {} else if case .completion = event {} else { note("event \(event)") }
            observe(event)
        }
    }

    func observe(_ event: HubConnectionMachine.Event) {
        switch event {
        case .lifecycle(.connected):
            if !notifySegments[notifySegments.count - 1].isEmpty { notifySegments.append([]) }
        case .lifecycle(.connectionLost), .lifecycle(.waitingForNetwork):
            resumeTriesAnnounced = 0
        case .lifecycle(.reconnecting(let attempt, let delay, _)) where machine.stateName != .resuming:
            // The policy's attempts are numbered after stateful reconnect's resumes of the same
            // outage (until the network comes back, which starts the count again).
            reconnecting.append((now, attempt, delay))
            let candidates = [attempt - 1 - resumeTriesAnnounced, attempt - 1].filter {
                $0 >= 0 && $0 < Self.reconnectDelays.count
            }
            if scenario.jitter {
                // Spread: ±50 % of the schedule's delay, an immediate retry within 1 s.
                let ranges = candidates.map { index -> ClosedRange<Duration> in
                    let expected = Self.reconnectDelays[index]
                    return expected == .zero ? Duration.zero...Duration.seconds(1) : (expected / 2)...(expected * 3 / 2)
                }
                if !ranges.contains(where: { $0.contains(delay) }) {
                    fail("reconnect attempt \(attempt) after \(delay), outside \(ranges) of the schedule")
                }
                spreadDelays.append(delay)
            } else if !candidates.contains(where: { Self.reconnectDelays[$0] == delay }) {
                let expected = candidates.first.map { Self.reconnectDelays[$0] }
                fail("reconnect attempt \(attempt) after \(delay), the policy says \(String(describing: expected))")
            }
        case .lifecycle(.reconnecting):
            resumeTriesAnnounced += 1
        case .lifecycle(.closed):
            closedEvents += 1
            notifySegments.append([])
            // The app starts again a little later (as a user would, or the app returning to the
            // foreground), unless the run is over.
            if !isOver { schedule(after: .seconds(3), .appStart) }
        case .invocation(let message, _):
            guard message.target == "Notify", let value = try? message.arguments.decode(Int.self, at: 0) else {
                return fail("an unexpected invocation \(message.target)")
            }
            notifySegments[notifySegments.count - 1].append(value)
        case .completion(let id, let result):
            guard let argument = pendingInvocations.removeValue(forKey: id) else {
                return fail(
                    endedInvocations.contains(id) ? "invocation \(id) ended twice" : "a completion for unknown \(id)"
                )
            }
            endedInvocations.insert(id)
            switch result {
            case .success(let value?):
                completedInvocations += 1
                completedArguments.append(argument)
                if (try? value.decode(Int.self)) != argument { fail("Echo \(id) returned \(value), not \(argument)") }
            case .failure:
                // Those still pending when the app stops at the end fail: that is no loss.
                if !isOver { erroredInvocations += 1 }
            case .success(nil):
                fail("Echo \(id) returned nothing")
            }
        default:
            break
        }
    }

    func appTraffic() {
        guard machine.stateName == .connected || machine.stateName == .resuming else { return }
        let argument = nextArgument
        nextArgument += 1
        guard let arguments = try? EncodedArguments(encoding: hub.hubProtocol.valueEncoding, argument),
            let id = try? machine.invoke("Echo", arguments: arguments, now: now)
        else { return }
        pendingInvocations[id] = argument
    }

    // MARK: - Plans

    /// Runs `plan` (see `PlanStep`) and holds the run against the reference model: every
    /// invocation the app made ended exactly once (a completion or an error); the hub ran each at
    /// most once, and exactly once when the app got its result.
    public func run(plan: [PlanStep]) -> [String] {
        runPlanned(plan, settle: .seconds(120)) {
            if !pendingInvocations.isEmpty {
                fail("invocations never ended: \(pendingInvocations.keys.sorted())")
            }
            for (argument, count) in hub.executed.sorted(by: { $0.key < $1.key }) where count > 1 {
                fail("the hub ran Echo(\(argument)) \(count) times")
            }
            for argument in completedArguments where hub.executed[argument] != 1 {
                fail("Echo(\(argument)) completed, but the hub ran it \(hub.executed[argument] ?? 0) times")
            }
        }
    }

    // MARK: - Checks at the end

    func checkEnd() {
        if !pendingInvocations.isEmpty {
            fail("invocations never ended: \(pendingInvocations.keys.sorted())")
        }
        // Within one connection, Notify values arrive in order, each once, from the first.
        for segment in notifySegments where !segment.isEmpty {
            if segment != Array(segment[0]..<(segment[0] + segment.count)) {
                fail("Notify values out of order, lost or repeated within a connection: \(segment.prefix(40))")
            }
            if scenario.stateful, segment[0] != 0 {
                fail("a stateful connection's first Notify was \(segment[0])")
            }
        }
        // Stateful reconnect hides cuts and stalls: no message is lost, the connection is one
        // connection until the server loses it (a restart), and no Echo fails.
        if scenario.stateful, !scenario.faults.contains(.restart) {
            if notifySegments.filter({ !$0.isEmpty }).count > 1 {
                fail("a stateful connection was replaced without the server losing it")
            }
            if erroredInvocations > 0 { fail("\(erroredInvocations) Echo invocations failed under stateful reconnect") }
        }
        // Connected, the heartbeat's server timeout bounds a stall; before that (a handshake, a
        // resume), the handshake timeout.
        checkReconnectsAndStalls { $0 ? Self.serverTimeout : Self.handshakeTimeout }
        if completedInvocations == 0 { fail("no Echo invocation completed at all") }
    }
}

// MARK: - The scripted hub

extension HubSimulation {
    /// One WebSocket between the client and the hub.
    struct Link: SimulatedLink {
        var token: String
        var isOpen = true
        /// Half-open: everything sent either way is lost, and neither side is told.
        var isStalled = false
        /// The latest delivery time in each direction (links deliver in order).
        var lastToServer = Instant.zero
        var lastToClient = Instant.zero

        func nextToServer(_ at: Instant) -> Instant { max(at, lastToServer) }
    }

    /// A connection on the hub's side: what stateful reconnect keeps across WebSockets.
    struct Session {
        var token: String
        var stateful: Bool
        var attached: TransportGeneration?
        var detachedAt: Instant?
        var handshaken = false
        var parser: AnyHubMessageParser
        var waitingForSequence = false
        var total: Int64 = 0
        var buffer: [(id: Int64, bytes: [UInt8])] = []
        var currentReceiving: Int64 = 1
        var latestReceived: Int64 = 0
        var lastAcked: Int64 = 0
        var notifyCounter = 0
        var lastSent = Instant.zero
        var lastReceived = Instant.zero
    }

    struct Hub {
        var allowsStatefulReconnect = false
        var hubProtocol = AnyHubProtocol.json(JSONHubProtocol())
        var isUp = true
        var sessions: [String: Session] = [:]
        var links: [TransportGeneration: Link] = [:]
        var connections = 0
        /// The most recent session: the one Notify goes to.
        var current: String?
        /// How many times the hub ran Echo with each argument.
        var executed: [Int: Int] = [:]

        mutating func negotiate(now: Instant) -> (String, [UInt8]) {
            connections += 1
            let token = "token-\(connections)"
            sessions[token] = Session(token: token, stateful: allowsStatefulReconnect, parser: hubProtocol.makeParser())
            current = token
            let body =
                #"{"negotiateVersion":1,"connectionId":"conn-\#(connections)","connectionToken":"\#(token)","#
                + #""availableTransports":[{"transport":"WebSockets","transferFormats":["Text","Binary"]}]"#
                + (allowsStatefulReconnect ? #","useStatefulReconnect":true}"# : "}")
            return (token, Array(body.utf8))
        }

        mutating func detach(_ generation: TransportGeneration, now: Instant) {
            guard let token = links[generation]?.token, sessions[token]?.attached == generation else { return }
            sessions[token]!.attached = nil
            sessions[token]!.detachedAt = now
            if !sessions[token]!.stateful { sessions[token] = nil }
        }

        mutating func restart() {
            isUp = false
            sessions.removeAll()
            current = nil
        }
    }

    func serverOpen(_ generation: TransportGeneration, token: String) {
        guard hub.isUp, var session = hub.sessions[token], !session.handshaken || session.stateful else {
            schedule(after: latency(), .clientClosed(generation, TransportError(.rejected, "404 Not Found")))
            return
        }
        if let old = session.attached {
            // A new WebSocket for the connection replaces the old one (stalled, say).
            hub.links[old]?.isOpen = false
        }
        note(
            "hub: \(generation) opens \(token)\(session.handshaken ? " (resume)" : ""), replacing \(String(describing: session.attached))"
        )
        hub.links[generation] = Link(token: token)
        session.attached = generation
        session.detachedAt = nil
        session.lastReceived = now
        session.parser = hub.hubProtocol.makeParser()
        let resuming = session.handshaken
        session.waitingForSequence = resuming
        hub.sessions[token] = session
        // The client learns the WebSocket is open before any message on it arrives.
        let opened = now + latency()
        hub.links[generation]!.lastToClient = opened
        time.schedule(at: opened, .clientConnected(generation))
        if resuming {
            // Sequence(the first unacknowledged id, or the next one), then the replay.
            let first = hub.sessions[token]!.buffer.first?.id ?? hub.sessions[token]!.total + 1
            serverSend(.sequence(sequenceId: first), token: token, trackable: false)
            for (_, bytes) in hub.sessions[token]!.buffer { serverWrite(bytes, token: token) }
        }
    }

    func serverReceive(_ generation: TransportGeneration, _ bytes: [UInt8]) {
        guard let token = hub.links[generation]?.token, var session = hub.sessions[token],
            session.attached == generation
        else { return }
        session.lastReceived = now
        var input = bytes[...]
        if !session.handshaken {
            guard let (request, consumed) = try? HandshakeRequest.parse(Array(input)) else {
                return fail("the hub could not read the handshake")
            }
            if request.version != (session.stateful ? 2 : 1) {
                fail("handshake version \(request.version) on a \(session.stateful ? "stateful" : "plain") connection")
            }
            input = input.dropFirst(consumed)
            session.handshaken = true
            hub.sessions[token] = session
            serverWrite(Array("{}\u{1E}".utf8), token: token)
            session = hub.sessions[token]!
        }
        session.parser.append(input)
        var messages: [HubMessage] = []
        do {
            while let message = try session.parser.next() { messages.append(message) }
        } catch {
            fail("the hub could not parse the client's bytes: \(error)")
        }
        hub.sessions[token] = session
        for message in messages { serverHandle(message, token: token) }
    }

    func serverHandle(_ message: HubMessage, token: String) {
        guard var session = hub.sessions[token] else { return }
        switch message {
        case .ping, .close:
            return
        case .ack(let id):
            session.buffer.removeAll { $0.id <= id }
            hub.sessions[token] = session
            return
        case .sequence(let id):
            if id > session.currentReceiving {
                fail("the client's Sequence \(id) is beyond the \(session.currentReceiving - 1) messages received")
            }
            note(
                "hub: client's Sequence \(id) (received \(session.currentReceiving - 1), latest \(session.latestReceived))"
            )
            session.currentReceiving = id
            session.waitingForSequence = false
            hub.sessions[token] = session
            return
        default:
            break
        }
        if session.stateful {
            if session.waitingForSequence { return }
            let id = session.currentReceiving
            session.currentReceiving += 1
            hub.sessions[token] = session
            if id <= session.latestReceived { return }  // a duplicate from the replay
            hub.sessions[token]!.latestReceived = id
        }
        guard case .invocation(let invocation) = message else { return }
        guard invocation.target == "Echo", let id = invocation.invocationId,
            let argument = invocation.arguments.first(where: { _ in true })
        else { return fail("an unexpected call \(invocation.target)") }
        if let value = try? invocation.arguments.decode(Int.self, at: 0) { hub.executed[value, default: 0] += 1 }
        serverSend(
            .completion(CompletionMessage(invocationId: id, result: .value(argument))),
            token: token,
            trackable: true
        )
    }

    /// Sends a message on `token`'s connection: numbered and kept until acknowledged when the
    /// connection is stateful and the message trackable; lost when nothing carries it.
    func serverSend(_ message: HubMessage, token: String, trackable: Bool) {
        guard var session = hub.sessions[token] else { return }
        var bytes: [UInt8] = []
        hub.hubProtocol.write(message, into: &bytes)
        if session.stateful && trackable {
            session.total += 1
            session.buffer.append((session.total, bytes))
            hub.sessions[token] = session
        }
        serverWrite(bytes, token: token)
    }

    func serverWrite(_ bytes: [UInt8], token: String) {
        guard let generation = hub.sessions[token]?.attached, let link = hub.links[generation], link.isOpen,
            !link.isStalled
        else { return }
        let at = max(now + latency(), link.lastToClient)
        hub.links[generation]!.lastToClient = at
        hub.sessions[token]!.lastSent = now
        time.schedule(at: at, .clientReceive(generation, bytes))
    }

    func serverTraffic() {
        guard let token = hub.current, let session = hub.sessions[token], session.handshaken else { return }
        let value = session.notifyCounter
        hub.sessions[token]!.notifyCounter += 1
        let arguments = try! EncodedArguments(encoding: hub.hubProtocol.valueEncoding, value)
        serverSend(
            .invocation(InvocationMessage(target: "Notify", arguments: arguments)),
            token: token,
            trackable: true
        )
    }

    func serverTick() {
        for token in hub.sessions.keys.sorted() {
            guard let session = hub.sessions[token] else { continue }
            if let detached = session.detachedAt {
                if now - detached > Self.holdTime { hub.sessions[token] = nil }
                continue
            }
            guard session.attached != nil, session.handshaken else { continue }
            if session.stateful, !session.waitingForSequence, session.latestReceived > session.lastAcked {
                hub.sessions[token]!.lastAcked = session.latestReceived
                serverSend(.ack(sequenceId: session.latestReceived), token: token, trackable: false)
            }
            if now - session.lastSent >= Self.serverKeepAlive {
                serverSend(.ping, token: token, trackable: false)
            }
        }
    }
}
