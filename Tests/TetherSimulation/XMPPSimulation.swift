import TetherCore
import TetherDNS
import TetherTLS
import TetherXML
import TetherXMPP

/// A deterministic network simulation: the real `XMPPClientMachine` against a scripted XMPP
/// server (stream negotiation with PLAIN, bind, XEP-0198 stream management with resumption on
/// the server's side, XEP-0199 pings, numbered chat messages both ways) over a virtual network
/// with seeded latency, cuts, stalls (a half-open link that silently drops everything) and
/// server restarts, on a virtual clock. With `archive`, the server also keeps every message it
/// sends the account in an archive (XEP-0313, with XEP-0359 stanza ids, kept across restarts)
/// and answers the catch-up's queries, and the run checks that no message is lost across
/// sessions, resumed or not. With `failingTarget`, the client finds its server through an SRV
/// lookup whose first target (a balancer with no server behind it) refuses, resets or closes every
/// connection before the stream, and the run checks that each such failure passes the attempt on
/// to the server within it, and that the balancer is not tried first again while the server
/// answers. A failing seed replays exactly with
/// `XMPPSimulation(scenario).run()`.
public final class XMPPSimulation: MachineSimulation {
    public struct Scenario: SimulationPlan, CustomStringConvertible, Sendable {
        public typealias Fault = SimulatedFault

        public var seed: UInt64
        public var streamManagement: Bool
        public var faults: [Fault]
        public var duration: Duration
        /// How often each fault strikes on average (nil: one to three times in the first five
        /// minutes).
        public var faultInterval: Duration?
        /// The server archives what it sends the account, and the client catches up from it.
        public var archive: Bool
        /// The reconnect delays are spread (`Jitter.standard`) with the machine's seeded generator.
        public var jitter: Bool
        /// The server is found through an SRV lookup whose first target always fails before the
        /// stream (refused, reset or closed after the connect, as the seed has it).
        public var failingTarget: Bool

        public init(
            seed: UInt64,
            streamManagement: Bool,
            faults: [Fault],
            duration: Duration = .seconds(300),
            faultInterval: Duration? = nil,
            archive: Bool = false,
            jitter: Bool = false,
            failingTarget: Bool = false
        ) {
            self.failingTarget = failingTarget
            self.archive = archive
            self.jitter = jitter
            self.seed = seed
            self.streamManagement = streamManagement
            self.faults = faults
            self.duration = duration
            self.faultInterval = faultInterval
        }

        public var description: String {
            "XMPPSimulation(.init(seed: \(seed), streamManagement: \(streamManagement), "
                + "faults: [\(faults.map { "." + $0.rawValue }.joined(separator: ", "))], duration: \(duration), "
                + "faultInterval: \(String(describing: faultInterval)), archive: \(archive), jitter: \(jitter), "
                + "failingTarget: \(failingTarget))).run()"
        }
    }

    /// What a run did, in numbers.
    public struct Summary: Sendable, CustomStringConvertible {
        public var messagesSent: Int
        public var messagesReceivedByServer: Int
        public var messagesReceivedByClient: Int
        public var resumptions: Int
        public var connections: Int

        public var description: String {
            "\(messagesSent) messages sent (\(messagesReceivedByServer) received by the server), "
                + "\(messagesReceivedByClient) received, \(resumptions) resumptions, \(connections) TCP connections"
        }
    }

    public var summary: Summary {
        Summary(
            messagesSent: sentBodies,
            messagesReceivedByServer: server.received.count,
            messagesReceivedByClient: incomingSegments.joined().count,
            resumptions: resumptions,
            connections: server.connectionsOpened
        )
    }

    static let pingInterval = Duration.seconds(5)
    static let pingTimeout = Duration.seconds(2)
    static let maximumMissed = 2
    static let connectTimeout = Duration.seconds(10)
    static let reconnectDelays: [Duration] = [.zero, .seconds(2), .seconds(5), .seconds(10)]
    /// How long the server keeps a detached stream-management session for resumption.
    static let holdTime = Duration.seconds(60)

    let scenario: Scenario
    var record: SimulationRecord<SpecificInput>
    let holder: MachineHolder<XMPPClientMachine>
    /// The machine under test.
    var machine: XMPPClientMachine {
        _read { yield holder.machine }
        _modify { yield &holder.machine }
    }
    var server = Server()
    /// Called as each virtual minute passes, with its number (from 1): the benchmark's soak
    /// samples memory there.
    public var onMinute: ((Int) -> Void)?

    // What the app saw and did.
    var incomingSegments: [[Int]] = [[]]
    var sentBodies = 0
    var reportedUnacknowledged: Set<Int> = []
    var pendingIQs: Set<String> = []
    var endedIQs: Set<String> = []
    var resumeFailures = 0
    var resumptions = 0
    /// Catch-ups that ended complete, and not.
    var catchUps = 0
    var incompleteCatchUps = 0
    /// The archive's size when the run stopped the client online.
    var archivedWhenStopped: Int?
    /// The reconnect delays of a spread schedule, as they came.
    var spreadDelays: [Duration] = []
    /// Messages the catch-up delivered.
    var archivedDeliveries = 0
    /// Whether a session is online (from `connected` or `resumed` to `connectionLost`).
    var online = false
    /// With `failingTarget`: the SRV targets, the failing balancer first by priority.
    static let balancer = Endpoint(host: "balancer.test", port: 5222)
    static let serverTarget = Endpoint(host: "xmpp.test", port: 5222)
    /// The targets opened since the last lookup (one attempt's), in order.
    var attemptTargets: [Endpoint] = []
    /// Connections made to the balancer.
    public var balancerConnections = 0
    /// Connections to the server's target that found it down.
    public var serverRefusals = 0
    /// Attempts that tried the balancer first.
    public var balancerFirst = 0
    /// Whether the server's target answered the last time it was tried (nil: not tried yet).
    var serverAnsweredLast: Bool?

    public init(_ scenario: Scenario) {
        self.scenario = scenario
        record = SimulationRecord(seed: scenario.seed)
        var configuration = XMPPClientMachine.Configuration(
            jid: JID("alice@example.com")!,
            password: "secret",
            endpoint: Endpoint(host: "xmpp.test", port: 5222),
            tls: .disabled,
            resource: "sim",
            mechanisms: [.plain],
            allowPlainOnCleartext: true,
            // The background keeps the interval: the stall bounds hold throughout (the stretched
            // interval has its unit tests).
            autoPing: .init(
                interval: Self.pingInterval,
                timeout: Self.pingTimeout,
                maximumMissed: Self.maximumMissed,
                backgroundInterval: nil
            ),
            streamManagement: scenario.streamManagement ? .init() : nil,
            reconnectPolicy: .delays(Self.reconnectDelays),
            fetchRosterOnConnect: false,
            initialPresence: nil,
            connectTimeout: Self.connectTimeout,
            iqTimeout: .seconds(20),
            releaseBuffersAfterIdle: nil
        )
        configuration.archiveCatchUp = scenario.archive ? .init(pageSize: 4) : nil
        if scenario.failingTarget {
            configuration.endpoint = nil
            configuration.serviceLookup = true
        }
        if scenario.jitter { configuration.reconnectPolicy = .delays(Self.reconnectDelays).jittered(.standard) }
        holder = MachineHolder(
            XMPPClientMachine(
                configuration: configuration,
                hashProvider: OpenSSLHashProvider(),
                randomSeed: scenario.seed,
                makeNonce: { "simulation-nonce" }
            )
        )
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

    var stopGrace: Duration { .seconds(30) }
    var onlineAfterPathBound: Duration { .seconds(1) }

    func begin() {
        schedule(after: .milliseconds(700), .appTraffic)
        schedule(after: .seconds(1), .serverTraffic)
        schedule(after: .seconds(1), .serverTick)
    }

    // MARK: - Events

    enum SpecificInput: Sendable {
        /// The SRV lookup of `generation` answers.
        case serviceLookedUp(TransportGeneration)
    }

    func handleSpecific(_ input: SpecificInput) {
        switch input {
        case .serviceLookedUp(let generation):
            machine.serviceLookedUp(
                startTLS: .records([
                    .srv(priority: 10, weight: 0, port: UInt16(Self.balancer.port), target: Self.balancer.host),
                    .srv(priority: 20, weight: 0, port: UInt16(Self.serverTarget.port), target: Self.serverTarget.host),
                ]),
                directTLS: .none,
                generation: generation,
                now: now
            )
        }
    }

    func serverDetach(_ generation: TransportGeneration) {
        server.detach(generation, now: now)
    }

    func serverUp() {
        server.isUp = true
    }

    func serverRestart() {
        server.restart()
    }

    var links: [TransportGeneration: Link] {
        _read { yield server.links }
        _modify { yield &server.links }
    }

    func perform(_ action: XMPPClientMachine.Action) {
        switch action {
        case .request(.lookUpService(_, let generation)):
            guard scenario.failingTarget else { return fail("a lookup although the client names its server") }
            connectAttempts.append(now)
            if attemptTargets == [Self.balancer] {
                fail("an attempt ended at the failing balancer without trying the next target")
            }
            attemptTargets = []
            schedule(after: latency(), .specific(.serviceLookedUp(generation)))
        case .openTransport(let request, let generation):
            guard case .tcp(let endpoint, _) = request.kind else {
                preconditionFailure("the simulated client connects over TCP")
            }
            connectAttempts.append(now)
            if scenario.failingTarget, !openingTarget(endpoint, generation) { return }
            guard connectAllowed(generation, closed: { schedule(after: latency(), .clientClosed($0, $1)) }) else {
                return
            }
            if server.isUp {
                server.links[generation] = Link()
                server.connectionsOpened += 1
                let at = now + latency()
                server.links[generation]!.lastToClient = at
                time.schedule(at: at, .clientConnected(generation))
            } else {
                schedule(
                    after: latency(),
                    .clientClosed(generation, TransportError(.connectionFailed, "connection refused"))
                )
            }
        case .send(let bytes, let generation, _):
            guard let link = server.links[generation], link.isOpen, !link.isStalled else { return }
            let at = max(now + latency(), link.lastToServer)
            server.links[generation]!.lastToServer = at
            time.schedule(at: at, .serverReceive(generation, bytes))
        case .request(.startTLS):
            fail("a STARTTLS with TLS disabled")
        case .closeTransport(let generation):
            closedAt[generation] = now
            if let link = server.links[generation], link.isOpen {
                server.links[generation]!.isOpen = false
                if !link.isStalled { schedule(after: latency(), .serverClosed(generation)) }
            }
        case .event(let event):
            observe(event)
        }
    }

    /// With `failingTarget`: checks the order of the targets in the attempt, and has the balancer
    /// fail the connection (false: the server is not involved).
    func openingTarget(_ endpoint: Endpoint, _ generation: TransportGeneration) -> Bool {
        if attemptTargets.contains(endpoint) { fail("\(endpoint) tried twice in one attempt") }
        attemptTargets.append(endpoint)
        if endpoint == Self.serverTarget {
            serverAnsweredLast = server.isUp && !record.networkDown
            if serverAnsweredLast == false { serverRefusals += 1 }
            return true
        }
        guard endpoint == Self.balancer else {
            fail("a connection to \(endpoint), which the lookup did not name")
            return false
        }
        // Tried first again only while the server's target did not answer its last try.
        if attemptTargets.count == 1 {
            balancerFirst += 1
            if serverAnsweredLast == true {
                fail("the failing balancer tried first although the server answered last time")
            }
        }
        balancerConnections += 1
        switch Int.random(in: 0..<3, using: &random) {
        case 0:
            schedule(
                after: latency(),
                .clientClosed(generation, TransportError(.connectionFailed, "connection refused"))
            )
        case 1:
            schedule(after: latency(), .clientConnected(generation))
            schedule(after: latency() * 2, .clientClosed(generation, TransportError(.connectionLost, "reset by peer")))
        default:
            schedule(after: latency(), .clientConnected(generation))
            schedule(after: latency() * 2, .clientClosed(generation, nil))
        }
        return false
    }

    func observe(_ event: XMPPClientMachine.Event) {
        switch event {
        case .message(let message):
            guard let body = message.body, let value = Int(body) else { return fail("a message without a number") }
            if message.isArchived { archivedDeliveries += 1 }
            incomingSegments[incomingSegments.count - 1].append(value)
        case .lifecycle(.connected):
            online = true
            note("event connected")
            if !incomingSegments[incomingSegments.count - 1].isEmpty { incomingSegments.append([]) }
        case .caughtUp(let count, let complete):
            note("event caughtUp \(count) \(complete)")
            if complete { catchUps += 1 } else { incompleteCatchUps += 1 }
        case .lifecycle(.resumed):
            online = true
            note("event resumed")
            resumptions += 1
        case .resumeFailed:
            note("event resumeFailed")
            resumeFailures += 1
        case .unacknowledgedStanzas(let stanzas):
            for stanza in stanzas {
                if let body = stanza.firstChild("body", namespace: "jabber:client")?.text, let value = Int(body) {
                    reportedUnacknowledged.insert(value)
                }
            }
        case .iqResponse(let id, _):
            if pendingIQs.remove(id) != nil {
                endedIQs.insert(id)
            } else if endedIQs.contains(id) {
                fail("iq \(id) ended twice")
            }
        case .lifecycle(.reconnecting(let attempt, let delay, _)):
            note("event reconnecting \(attempt) \(delay)")
            reconnecting.append((now, attempt, delay))
            let expected = attempt - 1 < Self.reconnectDelays.count ? Self.reconnectDelays[attempt - 1] : nil
            if scenario.jitter, let expected {
                // Spread: ±50 % of the schedule's delay, an immediate retry within 1 s.
                let range =
                    expected == .zero ? Duration.zero...Duration.seconds(1) : (expected / 2)...(expected * 3 / 2)
                if !range.contains(delay) {
                    fail("reconnect attempt \(attempt) after \(delay), outside \(range) around \(expected)")
                }
                spreadDelays.append(delay)
            } else if delay != expected {
                fail("reconnect attempt \(attempt) after \(delay), the policy says \(String(describing: expected))")
            }
        case .lifecycle(.closed(let error)):
            note("event closed \(String(describing: error))")
            incomingSegments.append([])
            if isOver, online { archivedWhenStopped = archivedWhenStopped ?? server.archive.count }
            online = false
            if !isOver { schedule(after: .seconds(3), .appStart) }
        case .lifecycle(.connectionLost(let error)):
            online = false
            note("event connection lost \(error)")
        default:
            break
        }
    }

    /// The app sends a numbered chat message, and now and then pings the server.
    func appTraffic() {
        guard machine.stateName != .disconnected, machine.stateName != .closing else { return }
        let message = XMPPMessage(to: JID("bob@example.com"), body: String(sentBodies))
        if (try? machine.send(message, now: now)) != nil { sentBodies += 1 }
        if Bool.random(using: &random),
            let id = try? machine.send(XMPPIQ.get(XElement(XMLName("ping", namespace: "urn:xmpp:ping"))), now: now)
        {
            pendingIQs.insert(id)
        }
    }

    // MARK: - Plans

    /// Runs `plan` (see `PlanStep`) and holds the run against the reference model: every message
    /// the app sent reached the server exactly once or was handed back to the app
    /// (`unacknowledgedStanzas`), never lost silently, never twice; every iq ended exactly once.
    /// Stream management should be on (without it a message can be lost with its stream, as the
    /// protocol says).
    public func run(plan: [PlanStep]) -> [String] {
        runPlanned(plan, settle: .seconds(120)) {
            var counts: [Int: Int] = [:]
            for value in server.received { counts[value, default: 0] += 1 }
            for (value, count) in counts.sorted(by: { $0.key < $1.key }) where count > 1 {
                fail("message \(value) reached the server \(count) times")
            }
            for value in 0..<sentBodies where counts[value] == nil && !reportedUnacknowledged.contains(value) {
                fail("message \(value) was neither delivered nor handed back")
            }
            if !pendingIQs.isEmpty { fail("iqs never ended: \(pendingIQs.sorted())") }
        }
    }

    // MARK: - Checks at the end

    func checkEnd() {
        if !pendingIQs.isEmpty { fail("iqs never ended: \(pendingIQs.sorted())") }
        if scenario.archive { return checkArchiveEnd() }
        // Server → client: within one session, in order, each once, from the first.
        for segment in incomingSegments where !segment.isEmpty {
            if segment != Array(segment[0]..<(segment[0] + segment.count)) {
                fail("server messages out of order, lost or repeated within a session: \(segment.prefix(40))")
            }
            if scenario.streamManagement, segment[0] != 0 { fail("a session's first server message was \(segment[0])") }
        }
        // Client → server: never twice; with stream management every message arrives or is
        // handed back to the app (`unacknowledgedStanzas`).
        let received = server.received
        if Set(received).count != received.count { fail("the server got a message twice: \(received.suffix(40))") }
        if scenario.streamManagement {
            let missing = Set(0..<sentBodies).subtracting(received).subtracting(reportedUnacknowledged)
            if !missing.isEmpty { fail("messages lost without a report: \(missing.sorted().prefix(20))") }
            if !scenario.faults.contains(.restart) {
                if incomingSegments.filter({ !$0.isEmpty }).count > 1 {
                    fail("a new session although the server kept the old one")
                }
                if resumeFailures > 0 {
                    fail("\(resumeFailures) resumptions failed although the server kept the session")
                }
            }
        }
        // A dead link is noticed within interval + maximumMissed × timeout of its last byte once
        // online; before that, within the connect timeout.
        checkReconnectsAndStalls {
            $0 ? Self.pingInterval + Self.pingTimeout * Self.maximumMissed : Self.connectTimeout
        }
        if server.received.isEmpty { fail("the server received no message at all") }
    }

    /// With the archive: the server's messages come in order within each session, and none is
    /// lost across sessions (no value missing below the highest delivered); one comes twice only
    /// after a catch-up that could not complete (its held messages may come again).
    func checkArchiveEnd() {
        for segment in incomingSegments where !segment.isEmpty {
            if zip(segment, segment.dropFirst()).contains(where: { $0 >= $1 }) {
                fail("server messages out of order or repeated within a session: \(segment.prefix(40))")
            }
        }
        let delivered = incomingSegments.joined()
        guard let highest = delivered.max() else { return fail("no server message reached the client") }
        let missing = Set(0...highest).subtracting(delivered)
        if !missing.isEmpty { fail("server messages lost: \(missing.sorted().prefix(20))") }
        if incompleteCatchUps == 0, Set(delivered).count != delivered.count {
            fail("a server message delivered twice without an incomplete catch-up")
        }
        // Stopped online: at most the messages of the last seconds may still have been on the way.
        if let archived = archivedWhenStopped, archived - 1 - highest > 5 {
            fail("the client was \(archived - 1 - highest) archived messages behind when it stopped online")
        }
        checkReconnectsAndStalls {
            $0 ? Self.pingInterval + Self.pingTimeout * Self.maximumMissed : Self.connectTimeout
        }
    }
}

// MARK: - The scripted server

extension XMPPSimulation {
    struct Link: SimulatedLink {
        var isOpen = true
        var isStalled = false
        var lastToServer = Instant.zero
        var lastToClient = Instant.zero
        /// The server's parser of what the client sends (a reference: the parser is not copyable).
        var parser = ParserBox()
        var authenticated = false
        var bound = false
        /// The stream-management session the link carries.
        var session: String?
    }

    final class ParserBox {
        var value = XMLStreamParser()
    }

    /// A XEP-0198 session on the server's side.
    struct Session {
        var id: String
        var attached: TransportGeneration?
        var detachedAt: Instant?
        /// Stanzas received from the client (`h` the server reports).
        var inbound: UInt32 = 0
        /// Stanzas sent to the client and the ones not yet acknowledged.
        var outbound: UInt32 = 0
        var unacknowledged: [(number: UInt32, bytes: [UInt8])] = []
        var nextMessage = 0
    }

    struct Server {
        var isUp = true
        var links: [TransportGeneration: Link] = [:]
        var connectionsOpened = 0
        var sessions: [String: Session] = [:]
        var count = 0
        /// The stream-management session enabled last.
        var latestSession: String?
        /// The link new server messages go to (the latest bound one).
        var current: TransportGeneration?
        /// Messages without stream management: numbered per link.
        var plainCounters: [TransportGeneration: Int] = [:]
        /// Bodies of the client's chat messages, in arrival order.
        var received: [Int] = []
        /// The account's archive (with `Scenario.archive`): message `n` has the id `a<n>`. Kept
        /// across restarts.
        var archive: [Int] = []

        mutating func detach(_ generation: TransportGeneration, now: Instant) {
            guard let id = links[generation]?.session, sessions[id]?.attached == generation else { return }
            sessions[id]!.attached = nil
            sessions[id]!.detachedAt = now
        }

        mutating func restart() {
            isUp = false
            sessions.removeAll()
            current = nil
        }
    }

    static let header =
        "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='s' from='example.com' version='1.0'>"

    func serverWrite(_ text: String, on generation: TransportGeneration) {
        serverWrite(Array(text.utf8), on: generation)
    }

    func serverWrite(_ bytes: [UInt8], on generation: TransportGeneration) {
        guard let link = server.links[generation], link.isOpen, !link.isStalled else { return }
        let at = max(now + latency(), link.lastToClient)
        server.links[generation]!.lastToClient = at
        time.schedule(at: at, .clientReceive(generation, bytes))
    }

    /// Sends a stanza on the link's session (counted and kept until acknowledged with stream
    /// management).
    func serverSendStanza(_ text: String, on generation: TransportGeneration) {
        let bytes = Array(text.utf8)
        if let id = server.links[generation]?.session, server.sessions[id] != nil {
            server.sessions[id]!.outbound &+= 1
            server.sessions[id]!.unacknowledged.append((server.sessions[id]!.outbound, bytes))
        }
        serverWrite(bytes, on: generation)
    }

    func serverReceive(_ generation: TransportGeneration, _ bytes: [UInt8]) {
        guard server.links[generation]?.isOpen == true else { return }
        server.links[generation]!.parser.value.append(bytes)
        while true {
            let event: XMLStreamEvent?
            do {
                event = try server.links[generation]!.parser.value.next()
            } catch {
                return fail("the server could not parse the client's stream: \(error)")
            }
            guard let event else { return }
            switch event {
            case .streamOpen:
                let link = server.links[generation]!
                let features =
                    link.authenticated
                    ? "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/>"
                        + (scenario.streamManagement ? "<sm xmlns='urn:xmpp:sm:3'/>" : "") + "</stream:features>"
                    : "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>"
                serverWrite(Self.header + features, on: generation)
            case .streamClose:
                serverWrite("</stream:stream>", on: generation)
                server.detach(generation, now: now)
                server.links[generation]!.isOpen = false
                schedule(after: latency(), .clientClosed(generation, nil))
                return
            case .element(let element):
                serverHandle(element, on: generation)
                if element.localName == "auth" {
                    // The client opens a new stream after <success/>.
                    let parser = server.links[generation]!.parser
                    let rest = parser.value.restart()
                    parser.value.append(rest)
                }
            }
        }
    }

    func serverHandle(_ element: XElement, on generation: TransportGeneration) {
        let sm = "urn:xmpp:sm:3"
        switch (element.localName, element.namespace) {
        case ("auth", _):
            server.links[generation]!.authenticated = true
            serverWrite("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>", on: generation)
        case ("enable", sm):
            server.count += 1
            let id = "sm-\(server.count)"
            server.sessions[id] = Session(id: id, attached: generation)
            server.latestSession = id
            server.links[generation]!.session = id
            serverWrite("<enabled xmlns='urn:xmpp:sm:3' id='\(id)' resume='true'/>", on: generation)
        case ("resume", sm):
            guard let id = element.attribute("previd"), var session = server.sessions[id],
                let h = element.attribute("h").flatMap(UInt32.init)
            else {
                note("server: resume refused")
                return serverWrite(
                    "<failed xmlns='urn:xmpp:sm:3'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></failed>",
                    on: generation
                )
            }
            if let old = session.attached { server.links[old]?.isOpen = false }
            session.unacknowledged.removeAll { Int32(bitPattern: $0.number &- h) <= 0 }
            session.attached = generation
            session.detachedAt = nil
            server.sessions[id] = session
            server.links[generation]!.session = id
            server.links[generation]!.bound = true
            server.current = generation
            note("server: resumed \(id) on \(generation), client h \(h), resending \(session.unacknowledged.count)")
            serverWrite("<resumed xmlns='urn:xmpp:sm:3' previd='\(id)' h='\(session.inbound)'/>", on: generation)
            for (_, bytes) in session.unacknowledged { serverWrite(bytes, on: generation) }
        case ("r", sm):
            let h = server.links[generation]?.session.flatMap { server.sessions[$0]?.inbound } ?? 0
            serverWrite("<a xmlns='urn:xmpp:sm:3' h='\(h)'/>", on: generation)
        case ("a", sm):
            guard let id = server.links[generation]?.session, let h = element.attribute("h").flatMap(UInt32.init) else {
                return
            }
            server.sessions[id]?.unacknowledged.removeAll { Int32(bitPattern: $0.number &- h) <= 0 }
        case ("iq", _), ("message", _), ("presence", _):
            if let id = server.links[generation]?.session { server.sessions[id]?.inbound &+= 1 }
            serverStanza(element, on: generation)
        default:
            fail("the server got an unexpected <\(element.localName)>")
        }
    }

    func serverStanza(_ element: XElement, on generation: TransportGeneration) {
        let id = element.attribute("id") ?? ""
        switch element.localName {
        case "iq":
            if element.firstChild("bind", namespace: "urn:ietf:params:xml:ns:xmpp-bind") != nil {
                server.links[generation]!.bound = true
                server.current = generation
                server.plainCounters[generation] = 0
                serverSendStanza(
                    "<iq type='result' id='\(id)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/sim</jid></bind></iq>",
                    on: generation
                )
            } else if let query = element.firstChild("query", namespace: "urn:xmpp:mam:2") {
                archiveQuery(query, id: id, on: generation)
            } else if element.attribute("type") == "get" || element.attribute("type") == "set" {
                serverSendStanza("<iq type='result' id='\(id)' to='alice@example.com/sim'/>", on: generation)
            }
        case "message":
            if let body = element.firstChild("body", namespace: "jabber:client")?.text, let value = Int(body) {
                server.received.append(value)
            }
        default:
            break
        }
    }

    /// A numbered chat message to the client, on its current stream (with the archive: numbered
    /// for the account, archived first, sent when a session is there).
    func serverTraffic() {
        if scenario.archive { return archiveTraffic() }
        guard let generation = server.current, let link = server.links[generation], link.bound else { return }
        // With stream management the messages start once the session is enabled.
        if scenario.streamManagement, link.session == nil { return }
        let value: Int
        if let id = link.session, server.sessions[id] != nil {
            value = server.sessions[id]!.nextMessage
            server.sessions[id]!.nextMessage += 1
            // Detached: kept for the resumption (sent now only if a link carries it).
            if server.sessions[id]!.attached != generation {
                server.sessions[id]!.outbound &+= 1
                let text =
                    "<message from='bob@example.com/x' to='alice@example.com/sim' type='chat'><body>\(value)</body></message>"
                server.sessions[id]!.unacknowledged.append((server.sessions[id]!.outbound, Array(text.utf8)))
                return
            }
        } else {
            guard link.isOpen else { return }
            value = server.plainCounters[generation, default: 0]
            server.plainCounters[generation] = value + 1
        }
        serverSendStanza(
            "<message from='bob@example.com/x' to='alice@example.com/sim' type='chat'><body>\(value)</body></message>",
            on: generation
        )
    }

    func archiveTraffic() {
        let value = server.archive.count
        server.archive.append(value)
        let text =
            "<message from='bob@example.com/x' to='alice@example.com/sim' type='chat' id='m\(value)'><body>\(value)</body><stanza-id xmlns='urn:xmpp:sid:0' by='alice@example.com' id='a\(value)'/></message>"
        if scenario.streamManagement {
            // Into the latest session, as a server routes to a session it keeps for resumption,
            // whether a link carries it or not (its link may be long gone).
            guard let id = server.latestSession, let session = server.sessions[id] else { return }
            guard let generation = session.attached, server.links[generation]?.isOpen == true else {
                server.sessions[id]!.outbound &+= 1
                server.sessions[id]!.unacknowledged.append((server.sessions[id]!.outbound, Array(text.utf8)))
                return
            }
            return serverSendStanza(text, on: generation)
        }
        guard let generation = server.current, let link = server.links[generation], link.bound, link.isOpen else {
            return
        }
        serverSendStanza(text, on: generation)
    }

    /// A page of the archive for the client's query.
    func archiveQuery(_ query: XElement, id: String, on generation: TransportGeneration) {
        let rsm = "http://jabber.org/protocol/rsm"
        let set = query.firstChild("set", namespace: rsm)
        let size = Int(set?.firstChild("max", namespace: rsm)?.text ?? "") ?? 10
        var start = 0
        if set?.firstChild("before", namespace: rsm) != nil {
            start = max(0, server.archive.count - size)
        } else if let after = set?.firstChild("after", namespace: rsm)?.text, let n = Int(after.dropFirst()) {
            start = n + 1
        }
        let page = Array(server.archive.dropFirst(start).prefix(size))
        let queryID = query.attribute("queryid") ?? ""
        for value in page {
            serverSendStanza(
                "<message to='alice@example.com/sim'><result xmlns='urn:xmpp:mam:2' queryid='\(queryID)' id='a\(value)'><forwarded xmlns='urn:xmpp:forward:0'><message xmlns='jabber:client' from='bob@example.com/x' to='alice@example.com' type='chat' id='m\(value)'><body>\(value)</body></message></forwarded></result></message>",
                on: generation
            )
        }
        let complete = start + page.count >= server.archive.count
        let last = page.last.map { "<set xmlns='\(rsm)'><last>a\($0)</last></set>" } ?? ""
        serverSendStanza(
            "<iq type='result' id='\(id)' to='alice@example.com/sim'><fin xmlns='urn:xmpp:mam:2' complete='\(complete)'>\(last)</fin></iq>",
            on: generation
        )
    }

    func serverTick() {
        // Closed connections no session is attached to any more are gone (their parsers with
        // them).
        let attached = Set(server.sessions.values.compactMap(\.attached))
        server.links = server.links.filter { $0.value.isOpen || attached.contains($0.key) }
        for id in server.sessions.keys.sorted() {
            guard let session = server.sessions[id] else { continue }
            if let detached = session.detachedAt, now - detached > Self.holdTime {
                server.sessions[id] = nil
            } else if let generation = session.attached, !session.unacknowledged.isEmpty {
                serverWrite("<r xmlns='urn:xmpp:sm:3'/>", on: generation)
            }
        }
    }
}
