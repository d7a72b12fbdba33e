// libFuzzer target: the HTTP transport machine (Server-Sent Events and long polling) under
// operation sequences: the app's open, sends and stop, and the runner's answers (a status with a
// content type, body pieces, an end, a failure) to any request, current or long gone. The first
// byte picks the kind, the format and a small `maximumPostSize`. Invariants: at most one `POST`
// and one receiving request out at a time; the `POST` bodies are the frames sent, in order, each
// once, never split; long polling polls only once a send was answered; `opened` at most once and
// before anything received; `closed` once and last, after which nothing is out that the machine
// has not canceled or that it still waits for (its `DELETE` aside) and nothing is unsent; the
// unsent-byte count is what the model says; at most 10,000 actions per input.
import FuzzSupport
import TetherCore
import TetherHTTP

struct Model {
    let kind: HTTPTransportMachine.Kind
    /// Requests out: neither answered to the end by the runner nor canceled by the machine.
    var out: [Int: HTTPTransportMachine.Request] = [:]
    var lastID = 0
    /// The bytes of every frame the app sent while the transport took frames, in order.
    var sent: [UInt8] = []
    /// The `POST` bodies, in order, and how many bytes of them were answered.
    var posted: [UInt8] = []
    var postAnswered = 0
    /// Where the frames sent end (a `POST` body must end at one of them).
    var frameEnds: Set<Int> = [0]
    var firstSendAnswered = false
    /// The app opened the transport and has not stopped it.
    var taking = false
    var stopped = false
    var opened = false
    var closed = false
    var received = false
    var actions = 0

    mutating func drain(_ machine: inout HTTPTransportMachine) {
        while let action = machine.pollAction() {
            actions += 1
            require(actions <= 10_000, "more than 10,000 actions for one input")
            require(!closed, "an action after closed: \(action)")
            switch action {
            case .request(let request):
                require(request.id > lastID, "request ids not increasing")
                lastID = request.id
                switch request.purpose {
                case .send:
                    require(!out.values.contains { $0.purpose == .send }, "a second POST while one is out")
                    require(!request.body.isEmpty, "an empty POST")
                    posted += request.body
                    require(sent.starts(with: posted), "the POST bodies are not the frames sent, in order")
                    require(frameEnds.contains(posted.count), "a POST body ends inside a frame")
                case .eventStream, .poll:
                    require(
                        !out.values.contains { $0.purpose == .eventStream || $0.purpose == .poll },
                        "a second receiving request while one is out"
                    )
                    if request.purpose == .poll {
                        require(kind == .longPolling && firstSendAnswered, "a poll before a send was answered")
                    } else {
                        require(kind == .serverSentEvents, "an event stream on long polling")
                    }
                case .close:
                    require(kind == .longPolling, "a DELETE on Server-Sent Events")
                }
                out[request.id] = request
            case .cancelRequest(let id):
                require(out.removeValue(forKey: id) != nil, "canceled a request that is not out: \(id)")
            case .opened:
                require(!opened, "opened twice")
                opened = true
            case .received(let frames):
                require(opened, "received before opened")
                require(!frames.isEmpty || kind == .serverSentEvents, "an empty receive")
                received = true
            case .closed:
                closed = true
                require(machine.isClosed, "closed, but the machine says it is not")
                require(machine.unsentByteCount == 0, "bytes unsent after closed")
                require(out.isEmpty, "requests still out after closed: \(out.values.map(\.purpose))")
            }
        }
        if !closed {
            let inFlight = out.values.first { $0.purpose == .send }?.body.count ?? 0
            require(
                machine.unsentByteCount == sent.count - posted.count + inFlight,
                "unsent bytes \(machine.unsentByteCount), the model says \(sent.count - posted.count + inFlight)"
            )
        }
    }

    /// The app stops the transport: what was not posted yet is dropped (and the `POST` out,
    /// which the machine cancels).
    mutating func stop(_ machine: inout HTTPTransportMachine) {
        stopped = true
        taking = false
        machine.stop()
        if !closed { sent = Array(sent.prefix(posted.count)) }
    }

    /// The id an answer goes to: one out (most often), or one long gone or never made.
    func pick(_ selector: UInt8) -> Int {
        let ids = out.keys.sorted()
        if selector & 0x80 == 0, !ids.isEmpty { return ids[Int(selector) % ids.count] }
        return Int(selector & 0x0F)
    }

    /// The runner answered request `id` to the end (ended or failed): it is no longer out.
    mutating func answered(_ id: Int, ended: Bool) {
        guard let request = out.removeValue(forKey: id) else { return }
        if request.purpose == .send, ended {
            firstSendAnswered = true
            postAnswered += request.body.count
        }
    }
}

let statuses = [200, 200, 200, 204, 401, 404, 409, 500]
let contentTypes: [String?] = [
    "text/event-stream", " Text/Event-Stream ; charset=utf-8", "text/plain", nil,
]
let bodies: [[UInt8]] = [
    Array("data: {}\u{1E}\n\n".utf8), Array("data: a\r\ndata: b\r\n\r\n".utf8), Array(": ping\n".utf8),
    Array("retry: 10\nevent: x\ndata:".utf8), Array("\n\n".utf8), [0x1E], Array("{\"type\":6}\u{1E}".utf8),
]

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    let kind: HTTPTransportMachine.Kind = selector & 1 == 0 ? .serverSentEvents : .longPolling
    let format: MessageFormat = kind == .longPolling && selector & 2 != 0 ? .binary : .text
    var machine = HTTPTransportMachine(
        kind: kind,
        url: "http://h/hub?id=x",
        headers: ["Authorization": "Bearer t"],
        format: format,
        maximumPostSize: 1 + Int(selector >> 2) * 2,
        maximumEventSize: 64
    )
    var model = Model(kind: kind)
    var frameNumber = 0
    while !input.isAtEnd {
        let operation = input.byte()
        let argument = input.byte()
        switch operation % 10 {
        case 0:
            if !machine.isClosed && !model.stopped { model.taking = true }
            machine.open()
        case 1, 2:
            // A frame of 1 to 16 bytes, each frame's bytes distinct from its neighbours'.
            frameNumber += 1
            let frame = [UInt8](repeating: UInt8(truncatingIfNeeded: frameNumber), count: 1 + Int(argument & 0x0F))
            machine.send(frame)
            if model.taking && !machine.isClosed {
                model.sent += frame
                model.frameEnds.insert(model.sent.count)
            }
        case 3:
            model.stop(&machine)
        case 4, 5:
            let id = model.pick(argument)
            let status = statuses[Int(input.byte()) % statuses.count]
            machine.responseStarted(
                id: id,
                status: status,
                contentType: contentTypes[Int(argument >> 4) % contentTypes.count]
            )
        case 6, 7:
            let id = model.pick(argument)
            var piece = bodies[Int(input.byte()) % bodies.count]
            if argument & 0x40 != 0 { piece += input.take(Int(argument & 0x07)) }
            machine.responseBody(id: id, piece)
        case 8:
            let id = model.pick(argument)
            machine.responseEnded(id: id)
            model.answered(id, ended: true)
        default:
            let id = model.pick(argument)
            let failure: HTTPTransportMachine.RequestFailure =
                switch argument >> 4 & 3 {
                case 0: .timedOut
                case 1: .tlsFailed("bad record mac")
                default: .failed("connection reset")
                }
            machine.requestFailed(id: id, failure)
            model.answered(id, ended: false)
        }
        model.drain(&machine)
    }
    // The app stops; the runner answers the DELETE, if one is out: the transport is closed.
    model.stop(&machine)
    model.drain(&machine)
    if let delete = model.out.values.first(where: { $0.purpose == .close }) {
        machine.responseEnded(id: delete.id)
        model.answered(delete.id, ended: true)
        model.drain(&machine)
    }
    require(model.closed && machine.isClosed, "not closed after stop and its DELETE answered")
    return 0
}
