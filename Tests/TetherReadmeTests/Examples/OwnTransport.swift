import TetherXMPP

/// What your runtime supplies (Network.framework, an event loop, a test): connections that can
/// start TLS, and one timer.
protocol MachineTransport {
    func open(_ endpoint: Endpoint, tlsServerName: String?, generation: TransportGeneration)
    func write(_ bytes: [UInt8], generation: TransportGeneration)
    func startTLS(serverName: String, bufferedBytes: [UInt8], generation: TransportGeneration)
    func close(generation: TransportGeneration)
    func armTimer(at deadline: Instant?)  // nil: no timer
}

/// What your runtime reports, each naming the generation of the connection it came from: the
/// machine ignores a late callback from a connection it abandoned.
enum TransportInput {
    case opened(TransportGeneration)
    case received([UInt8], TransportGeneration)
    case tlsEstablished(TransportGeneration)
    // A failed TLS handshake too (.tlsFailed; a refused certificate: .certificateRefused).
    case closed(TransportGeneration, error: TransportError?)
    case timerFired
}

/// `XMPPClientMachine` on your own transport: feed it every input, then do what it asks.
struct MachineDriver: ~Copyable {
    var machine: XMPPClientMachine
    let transport: any MachineTransport
    let onEvent: (XMPPClientMachine.Event) -> Void

    mutating func start(now: Instant) {
        machine.start(now: now)
        drain()
    }

    mutating func handle(_ input: TransportInput, now: Instant) {
        switch input {
        case .opened(let generation): machine.transportConnected(generation: generation, now: now)
        case .received(let bytes, let generation): machine.transportReceived(bytes, generation: generation, now: now)
        case .tlsEstablished(let generation): machine.tlsEstablished(generation: generation, now: now)
        case .closed(let generation, let error): machine.transportClosed(generation: generation, error: error, now: now)
        case .timerFired: machine.handleTimeout(now: now)
        }
        drain()
    }

    /// Carries out what the machine asks; also call it after a command such as `machine.send(_:now:)`.
    mutating func drain() {
        while let action = machine.pollAction() {
            switch action {
            case .openTransport(let request, let generation):
                guard case .tcp(let endpoint, let tlsName) = request.kind else {
                    preconditionFailure("set configuration.endpoint (TCP), not webSocket")
                }
                transport.open(endpoint, tlsServerName: tlsName, generation: generation)
            case .send(let bytes, let generation, _): transport.write(bytes, generation: generation)
            case .request(.startTLS(let name, let generation, let buffered)):
                transport.startTLS(serverName: name, bufferedBytes: buffered, generation: generation)
            case .request(.lookUpService): preconditionFailure("set configuration.endpoint")
            case .closeTransport(let generation): transport.close(generation: generation)
            case .event(let event): onEvent(event)
            }
        }
        transport.armTimer(at: machine.pollTimeout())
    }
}
