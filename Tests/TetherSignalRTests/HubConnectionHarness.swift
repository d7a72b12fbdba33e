import Foundation
import TetherCore
import TetherSimulation

@testable import TetherSignalR

typealias JSONHubConnection = HubConnectionMachine

/// Drives a `HubConnectionMachine` against a scripted server on a virtual clock, recording a
/// transcript of action names (`negotiate`, `open`, `send:invocation`, `event:connected`, …).
struct HubConnectionHarness {
    var machine: JSONHubConnection
    var now = Instant.zero
    /// Every action taken, in order.
    var actions: [JSONHubConnection.Action] = []
    /// Action names, in order.
    var transcript: [String] = []
    /// Client→server hub messages sent after the handshake, decoded.
    var sentMessages: [HubMessage] = []
    var sentParser = JSONHubProtocol().makeParser()
    /// The server's sequence of trackable messages (for stateful tests).
    var events: [JSONHubConnection.Event] = []
    /// The generation of the last token request, negotiate request or transport.
    var generation = TransportGeneration(0)
    /// Generations the machine asked to close.
    var closedGenerations: [TransportGeneration] = []

    static let url = "http://127.0.0.1:5099/hub"

    init(_ configure: (inout JSONHubConnection.Configuration) -> Void = { _ in }) {
        var configuration = JSONHubConnection.Configuration(url: Self.url, accessToken: "secret-token")
        configure(&configuration)
        machine = JSONHubConnection(configuration: configuration, hubProtocol: .json(JSONHubProtocol()), randomSeed: 1)
    }

    /// Collects the machine's pending actions; returns their names.
    @discardableResult
    mutating func drain() -> [String] {
        var names: [String] = []
        while let action = machine.pollAction() {
            actions.append(action)
            switch action {
            case .request(.fetchAccessToken(let next)), .request(.negotiate(_, _, let next)),
                .openTransport(_, let next):
                generation = next
            case .closeTransport(let closed):
                closedGenerations.append(closed)
            case .send, .event:
                break
            }
            let name = Self.name(of: action, parser: &sentParser, sent: &sentMessages)
            if case .event(let event) = action { events.append(event) }
            names.append(name)
        }
        transcript += names
        return names
    }

    static func name(
        of action: JSONHubConnection.Action,
        parser: inout JSONHubMessageParser,
        sent: inout [HubMessage]
    ) -> String {
        switch action {
        case .request(.fetchAccessToken): return "token"
        case .request(.negotiate): return "negotiate"
        case .openTransport: return "open"
        case .closeTransport: return "close"
        case .send(let bytes, _, _):
            if bytes.starts(with: Array(#"{"protocol""#.utf8)) { return "send:handshake" }
            parser.append(bytes.backDeployedSpan)
            guard let message = try? parser.next() else { return "send:?" }
            sent.append(message)
            switch message {
            case .invocation: return "send:invocation"
            case .streamItem: return "send:streamitem"
            case .completion: return "send:completion"
            case .streamInvocation: return "send:streaminvocation"
            case .cancelInvocation: return "send:cancelinvocation"
            case .ping: return "send:ping"
            case .close: return "send:close"
            case .ack: return "send:ack"
            case .sequence: return "send:sequence"
            }
        case .event(let event):
            switch event {
            case .lifecycle(let change): return "event:" + lifecycleName(change)
            case .invocation: return "event:invocation"
            case .unhandledInvocation: return "event:unhandledinvocation"
            case .completion: return "event:completion"
            case .streamItem: return "event:streamitem"
            case .streamCompleted: return "event:streamcompleted"
            case .sendBufferAvailable: return "event:sendbufferavailable"
            }
        }
    }

    /// Advances the virtual clock to `target`, firing timers on the way.
    @discardableResult
    mutating func advance(to target: Instant) -> [String] {
        var names: [String] = []
        while let deadline = machine.pollTimeout(), deadline <= target {
            now = max(now, deadline)
            machine.handleTimeout(now: now)
            names += drain()
        }
        now = max(now, target)
        return names
    }

    @discardableResult
    mutating func advance(by duration: Duration) -> [String] { advance(to: now + duration) }

    // MARK: - Scripted server

    static func negotiateBody(
        connectionId: String = "conn-1",
        token: String = "token-1",
        stateful: Bool = false,
        transports: String? = nil
    ) -> [UInt8] {
        let available = transports ?? #"[{"transport":"WebSockets","transferFormats":["Text","Binary"]}]"#
        return Array(
            #"{"negotiateVersion":1,"connectionId":"\#(connectionId)","connectionToken":"\#(token)","availableTransports":\#(available)\#(stateful ? ",\"useStatefulReconnect\":true" : "")}"#
                .utf8
        )
    }

    @discardableResult
    mutating func negotiate(status: Int = 200, body: [UInt8] = negotiateBody()) -> [String] {
        machine.negotiateResponse(status: status, body: body, generation: generation, now: now)
        return drain()
    }

    @discardableResult
    mutating func opened() -> [String] {
        machine.transportConnected(generation: generation, now: now)
        return drain()
    }

    @discardableResult
    mutating func closed(_ error: TransportError? = TransportError(.connectionLost, "connection reset")) -> [String] {
        machine.transportClosed(generation: generation, error: error, now: now)
        return drain()
    }

    /// The transport closed with `reason` (a lost connection), or in order (nil).
    @discardableResult
    mutating func closed(_ reason: String?) -> [String] {
        closed(reason.map { TransportError(.connectionLost, $0) })
    }

    /// The lifecycle events, in order.
    var lifecycle: [JSONHubConnection.Lifecycle] { events.compactMap(\.lifecycle) }

    /// The server sends JSON records (each gets its 0x1E) in one WebSocket message.
    @discardableResult
    mutating func server(_ records: String...) -> [String] {
        let bytes = Array(records.map { $0 + "\u{1E}" }.joined().utf8)
        machine.transportReceived(bytes.backDeployedSpan, generation: generation, now: now)
        return drain()
    }

    /// Delivers raw bytes (without draining).
    mutating func receiveRaw(_ bytes: [UInt8]) {
        machine.transportReceived(bytes.backDeployedSpan, generation: generation, now: now)
    }

    /// Start → negotiate → transport → handshake, up to connected.
    mutating func connect(stateful: Bool = false) {
        machine.start(now: now)
        drain()
        if !machine.configuration.skipNegotiation { negotiate(body: Self.negotiateBody(stateful: stateful)) }
        opened()
        server("{}")
    }
}

extension JSONHubConnection.Configuration {
    static func test(_ configure: (inout Self) -> Void = { _ in }) -> Self {
        var configuration = Self(url: HubConnectionHarness.url)
        configure(&configuration)
        return configuration
    }
}

func jsonArguments(_ values: String...) -> EncodedArguments {
    EncodedArguments(encoding: .json, values: values.map { try! EncodedValue(json: Array($0.utf8)) })
}
