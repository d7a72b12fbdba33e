import Testing
import TetherCore
import TetherSimulation

@testable import TetherHTTP

/// Walks every row of the transition table in Specs/http-transports.md against the code: a fresh
/// `HTTPTransportMachine` brought into the row's state, the row's input applied, then the actions
/// (in order) and the state that follows checked. A row it cannot run, a malformed row, or a
/// different number of rows fails, so table, code and the reference's diagram cannot drift.
struct HTTPTransportTransitionTableTests {
    typealias Row = TransitionRow

    /// The number of rows the table has; a row added or lost must be noticed.
    static let expectedRowCount = 44

    static let table = TransitionTable.rows("Specs/http-transports.md", columns: 4)

    @Test func tableIsWellFormed() {
        #expect(Self.table.malformed.isEmpty, "malformed rows: \(Self.table.malformed)")
        #expect(Self.table.rows.count == Self.expectedRowCount)
        let states = Set(HTTPTransportMachine.StateName.allCases.map(\.rawValue))
        for row in Self.table.rows {
            #expect(states.contains(row.next), "unknown next state in \(row.description)")
            #expect(
                states.contains(String(row.state.prefix { $0 != " " && $0 != "," })),
                "unknown state in \(row.description)"
            )
        }
    }

    @Test(arguments: table.rows)
    func row(_ row: Row) throws {
        guard var harness = Harness(row.state) else {
            Issue.record("no setup for the state '\(row.state)'")
            return
        }
        _ = harness.drain()
        guard harness.apply(row.input) else {
            Issue.record("no input named '\(row.input)'")
            return
        }
        #expect(harness.drain() == row.actions)
        #expect(harness.machine.stateName.rawValue == row.next)
    }

    /// A machine and the ids of its requests, by purpose, as the actions named them.
    struct Harness {
        var machine: HTTPTransportMachine
        var ids: [HTTPTransportMachine.Request.Purpose: Int] = [:]

        static let url = "http://127.0.0.1:8080/hub?id=token"
        static let frame = Array("{}\u{1E}".utf8)

        /// The machine in the state a row names (the part before " |"): the state and the kind,
        /// and, where it matters, what is out.
        init?(_ state: String) {
            let longPolling = state.contains("long polling")
            machine = HTTPTransportMachine(
                kind: longPolling ? .longPolling : .serverSentEvents,
                url: Self.url,
                format: .text,
                maximumEventSize: 64
            )
            switch state {
            case "idle, Server-Sent Events", "idle, long polling":
                break
            case "opening, Server-Sent Events":
                machine.open()
            case "open, Server-Sent Events":
                machine.open()
                _ = drain()
                machine.responseStarted(id: ids[.eventStream]!, status: 200, contentType: "text/event-stream")
            case "open, Server-Sent Events, a send out":
                machine.open()
                _ = drain()
                machine.responseStarted(id: ids[.eventStream]!, status: 200, contentType: "text/event-stream")
                machine.send(Self.frame)
            case "closed, Server-Sent Events", "closed, long polling":
                machine.open()
                machine.stop()
                _ = drain()
                if longPolling { machine.responseEnded(id: ids[.close]!) }
            case "open, long polling":
                machine.open()
            case "open, long polling, a send out":
                machine.open()
                machine.send(Self.frame)
            case "open, long polling, a poll out":
                machine.open()
                machine.send(Self.frame)
                _ = drain()
                machine.responseStarted(id: ids[.send]!, status: 200)
                machine.responseEnded(id: ids[.send]!)
            case "closing, long polling":
                machine.open()
                machine.stop()
            default:
                return nil
            }
        }

        /// The actions so far, as the table writes them, remembering each request's id.
        mutating func drain() -> [String] {
            var names: [String] = []
            while let action = machine.pollAction() {
                switch action {
                case .request(let request):
                    ids[request.purpose] = request.id
                    names.append("\(request.method.rawValue) \(request.purpose)")
                case .cancelRequest(let id):
                    let purpose = ids.first { $0.value == id }.map { "\($0.key)" } ?? "unknown"
                    names.append("cancel \(purpose)")
                case .opened:
                    names.append("opened")
                case .received(let bytes):
                    names.append("received \(bytes.count) bytes")
                case .closed(nil):
                    names.append("closed")
                case .closed(let error?):
                    names.append("closed \(error.kind.rawValue)")
                }
            }
            return names
        }

        /// Applies the input a row names; false when there is no such input.
        mutating func apply(_ input: String) -> Bool {
            let stream = ids[.eventStream] ?? -1
            let send = ids[.send] ?? -1
            let poll = ids[.poll] ?? -1
            let close = ids[.close] ?? -1
            switch input {
            case "open": machine.open()
            case "send": machine.send(Self.frame)
            case "stop": machine.stop()
            case "stream head 200 text/event-stream":
                machine.responseStarted(id: stream, status: 200, contentType: "text/event-stream; charset=utf-8")
            case "stream head 200 text/html": machine.responseStarted(id: stream, status: 200, contentType: "text/html")
            case "stream head 500": machine.responseStarted(id: stream, status: 500)
            case "stream head 401": machine.responseStarted(id: stream, status: 401)
            case "stream event": machine.responseBody(id: stream, Array("data: {}\u{1E}\n\n".utf8))
            case "stream event too large":
                machine.responseBody(id: stream, Array(repeating: UInt8(ascii: "x"), count: 100))
            case "stream ended": machine.responseEnded(id: stream)
            case "stream failed": machine.requestFailed(id: stream, .failed("reset"))
            case "stream timed out": machine.requestFailed(id: stream, .timedOut)
            case "send answered":
                machine.responseStarted(id: send, status: 200)
                machine.responseEnded(id: send)
            case "send answered 404": machine.responseStarted(id: send, status: 404)
            case "send answered 401": machine.responseStarted(id: send, status: 401)
            case "send failed": machine.requestFailed(id: send, .failed("reset"))
            case "send timed out": machine.requestFailed(id: send, .timedOut)
            case "poll answered with frames":
                machine.responseStarted(id: poll, status: 200)
                machine.responseBody(id: poll, Self.frame)
                machine.responseEnded(id: poll)
            case "poll answered empty":
                machine.responseStarted(id: poll, status: 200)
                machine.responseEnded(id: poll)
            case "poll answered 204":
                machine.responseStarted(id: poll, status: 204)
                machine.responseEnded(id: poll)
            case "poll answered 404": machine.responseStarted(id: poll, status: 404)
            case "poll answered 401": machine.responseStarted(id: poll, status: 401)
            case "poll timed out": machine.requestFailed(id: poll, .timedOut)
            case "poll failed": machine.requestFailed(id: poll, .tlsFailed("bad record mac"))
            case "delete answered":
                machine.responseStarted(id: close, status: 200)
                machine.responseEnded(id: close)
            case "delete failed": machine.requestFailed(id: close, .failed("refused"))
            case "stale answer": machine.responseEnded(id: 999)
            default: return false
            }
            return true
        }
    }
}
