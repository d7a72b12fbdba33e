import Foundation
import Testing
import TetherCore
import TetherSignalR
import TetherTLS
import TetherXML
import TetherXMPP

/// An action as the contract sees it, whatever the protocol.
enum ContractAction: Equatable, CustomStringConvertible {
    case open(TransportGeneration)
    case send(TransportGeneration)
    case close(TransportGeneration)
    /// One of the protocol's own requests (with the generation it names, if any).
    case request(TransportGeneration?)
    /// A lifecycle change: its name (`connected`, `connectionLost`, …), the failure's kind if it
    /// carries one, and the attempt number of a `reconnecting`.
    case lifecycle(String, kind: String?, attempt: Int?)
    /// A call of the app's ended (an iq request, an invocation, a stream): its id and the error's
    /// kind (nil: it succeeded).
    case callEnded(String, kind: String?)
    /// Any other protocol event.
    case event

    var description: String {
        switch self {
        case .open(let generation): "open \(generation)"
        case .send(let generation): "send \(generation)"
        case .close(let generation): "close \(generation)"
        case .request(let generation): "request \(generation.map(\.description) ?? "")"
        case .lifecycle(let name, let kind, let attempt):
            "\(name)\(kind.map { "(\($0))" } ?? "")\(attempt.map { " #\($0)" } ?? "")"
        case .callEnded(let id, let kind): "call \(id) ended \(kind ?? "ok")"
        case .event: "event"
        }
    }

    var lifecycleName: String? {
        if case .lifecycle(let name, _, _) = self { return name }
        return nil
    }

    /// Whether it starts (or continues) a connect attempt: a transport opened or a protocol
    /// request (a lookup, a token, a negotiate request).
    var isAttempt: Bool {
        switch self {
        case .open, .request: true
        case .send, .close, .lifecycle, .callEnded, .event: false
        }
    }
}

extension ConnectionLifecycle {
    /// The lifecycle change as the contract sees it.
    var contractAction: ContractAction {
        switch self {
        case .connected: .lifecycle("connected", kind: nil, attempt: nil)
        case .resumed: .lifecycle("resumed", kind: nil, attempt: nil)
        case .connectionLost(let error): .lifecycle("connectionLost", kind: error.kind.rawValue, attempt: nil)
        case .attemptFailed(let error): .lifecycle("attemptFailed", kind: error.kind.rawValue, attempt: nil)
        case .reconnecting(let attempt, _, let error):
            .lifecycle("reconnecting", kind: error?.kind.rawValue, attempt: attempt)
        case .waitingForNetwork: .lifecycle("waitingForNetwork", kind: nil, attempt: nil)
        case .suspended(.gaveUp(let error)): .lifecycle("suspended", kind: error.kind.rawValue, attempt: nil)
        case .suspended(.background): .lifecycle("suspended", kind: "background", attempt: nil)
        case .closed(let error): .lifecycle("closed", kind: error?.kind.rawValue, attempt: nil)
        }
    }
}

/// A connection machine under the contract suite, with a scripted server that logs it in and
/// brings it into each of its states. Every machine of the package has one; the suite runs
/// against all of them (`ContractSubjects.all`).
protocol ContractSubject: AnyObject {
    /// Every state name the machine has.
    var stateNames: [String] { get }
    var now: Instant { get set }
    var phase: ConnectionPhase { get }
    var stateName: String { get }
    var currentGeneration: TransportGeneration? { get }
    var hasSession: Bool { get }
    func pollTimeout() -> Instant?
    func health() -> ConnectionHealth

    func start()
    func stop()
    func reconnectNow()
    func networkChanged(_ path: NetworkPath)
    func handleTimeout()
    func transportConnected(_ generation: TransportGeneration)
    func transportReceived(_ bytes: [UInt8], _ generation: TransportGeneration)
    func transportClosed(_ generation: TransportGeneration, _ error: TransportError?)

    /// The machine's pending actions, as the contract sees them. With `answersRequests` on, the
    /// protocol's own requests are answered at once as a cooperative driver would (a token, the
    /// negotiate response).
    func drain() -> [ContractAction]
    /// Takes the machine's pending actions into the log `drain()` hands out next (the scripts'
    /// steps, so that nothing they cause is lost).
    func collect()
    var answersRequests: Bool { get set }
    /// The transport generation the last open (or request) named.
    var lastGeneration: TransportGeneration? { get }
    /// From a transport that just connected: the server's side of the login up to connected (or
    /// resumed, for a session that can be).
    func serverLogin()
    /// Brings the machine into the state named `state` (one of `stateNames`); false when the
    /// subject has no script for it.
    func reach(_ state: String) -> Bool
    /// Starts every kind of call the server must answer (XMPP: an iq request; SignalR: an
    /// invocation and a stream); their ids.
    func startPendingCalls() -> [String]
    /// Ends the current link the way the server's end of the protocol does without loss of the
    /// session (a reset the machine may resume from).
    func cut()
}

extension ContractSubject {
    /// Runs the timers due up to `now + duration` at their deadlines; the actions they caused.
    @discardableResult
    func advance(by duration: Duration) -> [ContractAction] {
        let end = now + duration
        var actions: [ContractAction] = []
        while let deadline = pollTimeout(), deadline <= end {
            now = max(now, deadline)
            handleTimeout()
            actions += drain()
        }
        actions += drain()
        now = end
        return actions
    }

    /// Starts and logs in: connected.
    func connect() {
        start()
        collect()
        transportConnected(lastGeneration!)
        serverLogin()
    }
}

/// The machines the contract suite runs against.
enum ContractSubjects: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case xmpp
    case signalR

    var testDescription: String { rawValue }

    func make() -> any ContractSubject {
        switch self {
        case .xmpp: XMPPSubject()
        case .signalR: HubSubject()
        }
    }
}

/// The phase a state name must have: the names every machine shares map to the phase of the same
/// name, every protocol's own step of an attempt to `connecting`.
func expectedPhase(_ stateName: String) -> ConnectionPhase {
    switch stateName {
    case "disconnected": .disconnected
    case "connected": .connected
    case "resuming": .resuming
    case "reconnectWaiting": .reconnectWaiting
    case "suspended": .suspended
    case "closing": .closing
    default: .connecting
    }
}

// MARK: - XMPP

/// `XMPPClientMachine` against a scripted server: PLAIN, bind, XEP-0198 with resumption,
/// auto-ping, STARTTLS offered on request (to reach `securing`).
final class XMPPSubject: ContractSubject {
    var machine: XMPPClientMachine
    var now = Instant.zero
    var answersRequests = true
    private(set) var lastGeneration: TransportGeneration?
    /// The text of every send, in order.
    private(set) var sent: [String] = []
    /// The server offers STARTTLS in its first features.
    var offersStartTLS = false
    /// The session the server keeps for resumption (nil: it lost it, or there is none).
    var serverSession: String?

    static let header =
        "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='s' from='example.com' version='1.0'>"

    init() {
        let configuration = XMPPClientMachine.Configuration(
            jid: JID("alice@example.com")!,
            password: "secret",
            endpoint: Endpoint(host: "xmpp.test", port: 5222),
            tls: .optional,
            resource: "contract",
            mechanisms: [.plain],
            allowPlainOnCleartext: true,
            autoPing: .init(interval: .seconds(30), timeout: .seconds(10), maximumMissed: 2),
            reconnectPolicy: .fixed(.seconds(1), maximumAttempts: 2),
            fetchRosterOnConnect: false,
            initialPresence: nil,
            releaseBuffersAfterIdle: nil
        )
        machine = XMPPClientMachine(
            configuration: configuration,
            hashProvider: OpenSSLHashProvider(),
            randomSeed: 7,
            makeNonce: { "contract-nonce" }
        )
    }

    var stateNames: [String] { XMPPClientMachine.StateName.allCases.map(\.rawValue) }
    var phase: ConnectionPhase { machine.phase }
    var stateName: String { machine.stateName.rawValue }
    var currentGeneration: TransportGeneration? { machine.currentGeneration }
    var hasSession: Bool { machine.session != nil }
    func pollTimeout() -> Instant? { machine.pollTimeout() }
    func health() -> ConnectionHealth { machine.health(now: now) }
    func start() { machine.start(now: now) }
    func stop() { machine.stop(now: now) }
    func reconnectNow() { machine.reconnectNow(now: now) }
    func networkChanged(_ path: NetworkPath) { machine.networkChanged(path, now: now) }
    func handleTimeout() { machine.handleTimeout(now: now) }
    func transportConnected(_ generation: TransportGeneration) {
        machine.transportConnected(generation: generation, now: now)
    }
    func transportReceived(_ bytes: [UInt8], _ generation: TransportGeneration) {
        machine.transportReceived(bytes, generation: generation, now: now)
    }
    func transportClosed(_ generation: TransportGeneration, _ error: TransportError?) {
        machine.transportClosed(generation: generation, error: error, now: now)
    }

    /// What was collected and not yet handed out by `drain()`.
    private var collected: [ContractAction] = []

    func drain() -> [ContractAction] {
        collect()
        defer { collected.removeAll() }
        return collected
    }

    /// Takes the machine's pending actions into `collected` (the scripts' drains keep them for the
    /// next `drain()`).
    func collect() {
        var actions: [ContractAction] = []
        defer { collected += actions }
        while let action = machine.pollAction() {
            switch action {
            case .openTransport(_, let generation):
                lastGeneration = generation
                actions.append(.open(generation))
            case .send(let bytes, let generation, _):
                sent.append(String(decoding: bytes, as: UTF8.self))
                actions.append(.send(generation))
            case .closeTransport(let generation):
                actions.append(.close(generation))
            case .request(.startTLS(_, let generation, _)):
                actions.append(.request(generation))
            case .request(.lookUpService(_, let generation)):
                lastGeneration = generation
                actions.append(.request(generation))
            case .event(.lifecycle(let change)):
                actions.append(change.contractAction)
            case .event(.iqResponse(let id, let outcome)):
                let kind: String? =
                    switch outcome {
                    case .result: nil
                    case .error: "iqError"
                    case .timedOut: "iqTimeout"
                    case .notDelivered(let error): error.kind.rawValue
                    }
                actions.append(.callEnded(id, kind: kind))
            case .event:
                actions.append(.event)
            }
        }
    }

    /// The server sends `text` on the current transport.
    func server(_ text: String) {
        transportReceived(Array(text.utf8), lastGeneration!)
        collect()
    }

    /// The id of the last iq sent.
    var lastIQID: String {
        guard let text = sent.last(where: { $0.hasPrefix("<iq") }), let range = text.range(of: "id='") else {
            return ""
        }
        return String(text[range.upperBound...].prefix { $0 != "'" })
    }

    func serverLogin() {
        let mechanisms =
            "<mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms>"
        server(Self.header + "<stream:features>" + mechanisms + "</stream:features>")
        collect()
        server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        collect()
        server(
            Self.header
                + "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/><sm xmlns='urn:xmpp:sm:3'/></stream:features>"
        )
        collect()
        if sent.last?.hasPrefix("<resume") == true {
            guard let session = serverSession else {
                server(
                    "<failed xmlns='urn:xmpp:sm:3'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></failed>"
                )
                collect()
                return bind()
            }
            server("<resumed xmlns='urn:xmpp:sm:3' previd='\(session)' h='0'/>")
            return
        }
        bind()
    }

    private func bind() {
        server(
            "<iq type='result' id='\(lastIQID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/contract</jid></bind></iq>"
        )
        collect()
        if sent.contains(where: { $0.hasPrefix("<enable") }) {
            serverSession = "sm-1"
            server("<enabled xmlns='urn:xmpp:sm:3' id='sm-1' resume='true'/>")
        }
    }

    func cut() {
        transportClosed(machine.currentGeneration!, TransportError(.connectionLost, "reset"))
    }

    func reach(_ state: String) -> Bool {
        let features = "<mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms>"
        switch state {
        case "disconnected":
            return true
        case "connectingTransport":
            start()
        case "openingStream":
            start()
            collect()
            transportConnected(lastGeneration!)
        case "securing", "authenticating":
            start()
            collect()
            transportConnected(lastGeneration!)
            collect()
            let startTLS = state == "securing" ? "<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>" : ""
            server(Self.header + "<stream:features>" + startTLS + features + "</stream:features>")
        case "binding":
            _ = reach("authenticating")
            collect()
            server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
            collect()
            server(Self.header + "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></stream:features>")
        case "connected":
            connect()
        case "closing":
            connect()
            collect()
            stop()
        case "reconnectWaiting":
            connect()
            collect()
            cut()
        case "resuming":
            _ = reach("reconnectWaiting")
            collect()
            advance(by: .seconds(1))
            transportConnected(lastGeneration!)
            collect()
            server(Self.header + "<stream:features>" + features + "</stream:features>")
            collect()
            server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
            collect()
            server(
                Self.header
                    + "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/><sm xmlns='urn:xmpp:sm:3'/></stream:features>"
            )
        case "suspended":
            _ = reach("reconnectWaiting")
            collect()
            // Every attempt of the policy (two) is refused.
            for _ in 0..<2 {
                advance(by: .seconds(1))
                transportClosed(lastGeneration!, TransportError(.connectionFailed, "refused"))
                collect()
            }
        default:
            return false
        }
        collect()
        return stateName == state
    }

    func startPendingCalls() -> [String] {
        let id = try? machine.send(XMPPIQ.get(XElement(XMLName("query", namespace: "urn:example:slow"))), now: now)
        collect()
        return id.map { [$0] } ?? []
    }
}

// MARK: - SignalR

/// `HubConnectionMachine` against a scripted hub: an access token, negotiate (stateful reconnect
/// granted), the WebSocket, the handshake.
final class HubSubject: ContractSubject {
    var machine: HubConnectionMachine
    var now = Instant.zero
    var answersRequests = true
    private(set) var lastGeneration: TransportGeneration?

    init() {
        var configuration = HubConnectionMachine.Configuration(url: "http://hub.test/chat")
        configuration.asksForAccessToken = true
        configuration.statefulReconnect = true
        configuration.reconnectPolicy = .fixed(.seconds(1), maximumAttempts: 2)
        machine = HubConnectionMachine(
            configuration: configuration,
            hubProtocol: .json(JSONHubProtocol()),
            randomSeed: 7
        )
    }

    var stateNames: [String] { HubConnectionMachine.StateName.allCases.map(\.rawValue) }
    var phase: ConnectionPhase { machine.phase }
    var stateName: String { machine.stateName.rawValue }
    var currentGeneration: TransportGeneration? { machine.currentGeneration }
    var hasSession: Bool { machine.session != nil }
    func pollTimeout() -> Instant? { machine.pollTimeout() }
    func health() -> ConnectionHealth { machine.health(now: now) }
    func start() { machine.start(now: now) }
    func stop() { machine.stop(now: now) }
    func reconnectNow() { machine.reconnectNow(now: now) }
    func networkChanged(_ path: NetworkPath) { machine.networkChanged(path, now: now) }
    func handleTimeout() { machine.handleTimeout(now: now) }
    func transportConnected(_ generation: TransportGeneration) {
        machine.transportConnected(generation: generation, now: now)
    }
    func transportReceived(_ bytes: [UInt8], _ generation: TransportGeneration) {
        machine.transportReceived(bytes, generation: generation, now: now)
    }
    func transportClosed(_ generation: TransportGeneration, _ error: TransportError?) {
        machine.transportClosed(generation: generation, error: error, now: now)
    }

    static let negotiateBody = Array(
        #"{"negotiateVersion":1,"connectionId":"c1","connectionToken":"t1","availableTransports":[{"transport":"WebSockets","transferFormats":["Text","Binary"]}],"useStatefulReconnect":true}"#
            .utf8
    )

    /// What was collected and not yet handed out by `drain()`.
    private var collected: [ContractAction] = []

    func drain() -> [ContractAction] {
        collect()
        defer { collected.removeAll() }
        return collected
    }

    /// Takes the machine's pending actions into `collected` (answering requests as it goes).
    func collect() {
        var actions: [ContractAction] = []
        defer { collected += actions }
        while let action = machine.pollAction() {
            switch action {
            case .openTransport(_, let generation):
                lastGeneration = generation
                actions.append(.open(generation))
            case .send(_, let generation, _):
                actions.append(.send(generation))
            case .closeTransport(let generation):
                actions.append(.close(generation))
            case .request(.fetchAccessToken(let generation)):
                lastGeneration = generation
                actions.append(.request(generation))
                if answersRequests { machine.accessTokenFetched("token", generation: generation, now: now) }
            case .request(.negotiate(_, _, let generation)):
                lastGeneration = generation
                actions.append(.request(generation))
                if answersRequests {
                    machine.negotiateResponse(status: 200, body: Self.negotiateBody, generation: generation, now: now)
                }
            case .event(.lifecycle(let change)):
                actions.append(change.contractAction)
            case .event(.completion(let id, let result)):
                let kind: String? = if case .failure(let error) = result { error.kind.rawValue } else { nil }
                actions.append(.callEnded(id, kind: kind))
            case .event(.streamCompleted(let id, let error)):
                actions.append(.callEnded(id, kind: error?.kind.rawValue))
            case .event:
                actions.append(.event)
            }
        }
    }

    func serverLogin() {
        collect()
        if machine.stateName == .handshaking {
            transportReceived(Array("{}\u{1E}".utf8), lastGeneration!)
        } else if machine.stateName == .connected, machine.session != nil {
            // Stateful reconnect: the reopened WebSocket resumes at once (no handshake); the hub
            // says where it resumes.
            transportReceived(Array(#"{"type":9,"sequenceId":1}"#.utf8) + [0x1E], lastGeneration!)
        }
    }

    func cut() {
        transportClosed(machine.currentGeneration!, TransportError(.connectionLost, "reset"))
    }

    func reach(_ state: String) -> Bool {
        switch state {
        case "disconnected":
            return true
        case "fetchingAccessToken":
            answersRequests = false
            start()
        case "negotiating":
            answersRequests = false
            start()
            collect()
            machine.accessTokenFetched("token", generation: lastGeneration!, now: now)
        case "connectingTransport":
            start()
        case "handshaking":
            start()
            collect()
            transportConnected(lastGeneration!)
        case "connected":
            connect()
        case "resuming":
            connect()
            collect()
            cut()
        case "reconnectWaiting":
            connect()
            collect()
            // A Close that allows reconnecting: not resumable, the policy's delay.
            transportReceived(Array(#"{"type":7,"allowReconnect":true}"#.utf8) + [0x1E], lastGeneration!)
        case "suspended":
            _ = reach("reconnectWaiting")
            collect()
            for _ in 0..<2 {
                advance(by: .seconds(1))
                transportClosed(lastGeneration!, TransportError(.connectionFailed, "refused"))
                collect()
            }
        default:
            return false
        }
        collect()
        return stateName == state
    }

    func startPendingCalls() -> [String] {
        let invocation = try? machine.invoke("Slow", arguments: EncodedArguments.empty(.json), now: now)
        let stream = try? machine.stream("Feed", arguments: EncodedArguments.empty(.json), now: now)
        collect()
        return [invocation, stream].compactMap { $0 }
    }
}
