import Foundation
import Testing
import TetherCore

@testable import TetherSignalR

/// Walks every row of the transition table in Specs/signalr/hub-connection.md against the code.
struct HubConnectionTransitionTableTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var state: String
        var input: String
        var actions: [String]
        var next: String
        var testDescription: String { "\(state) | \(input)" }
    }

    static let rows: [Row] = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try! String(
            contentsOf: root.appendingPathComponent("Specs/signalr/hub-connection.md"),
            encoding: .utf8
        )
        let table = text.components(separatedBy: "## Transition table")[1]
        return table.split(separator: "\n").compactMap { line -> Row? in
            guard line.hasPrefix("| "), !line.hasPrefix("| state"), !line.hasPrefix("|---") else { return nil }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard cells.count >= 6 else { return nil }
            let actions = cells[3].isEmpty ? [] : cells[3].components(separatedBy: ", ")
            return Row(state: cells[1], input: cells[2], actions: actions, next: cells[4])
        }
    }()

    /// A harness brought into the named state (and its output drained).
    static func setUp(_ state: String) -> HubConnectionHarness? {
        func connected(policy: Bool = false, stateful: Bool = false) -> HubConnectionHarness {
            var harness = HubConnectionHarness {
                $0.handledTargets = ["ReceiveMessage"]
                if policy { $0.reconnectPolicy = .signalRDefault }
                $0.statefulReconnect = stateful
            }
            harness.connect(stateful: stateful)
            _ = try! harness.machine.invoke("Echo", arguments: jsonArguments(#""hi""#), now: harness.now)
            harness.drain()
            if stateful {
                harness.server(#"{"type":1,"target":"ReceiveMessage","arguments":[]}"#)
            }
            return harness
        }
        var harness = HubConnectionHarness { $0.handledTargets = ["ReceiveMessage"] }
        switch state {
        case "disconnected":
            break
        case "negotiating":
            harness.machine.start(now: harness.now)
        case "connectingTransport":
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.negotiate()
        case "handshaking":
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.negotiate()
            harness.opened()
        case "connected": harness = connected()
        case "connected with a policy": harness = connected(policy: true)
        case "connected stateful": harness = connected(stateful: true)
        case "reconnectWaiting":
            harness = connected(policy: true)
            harness.closed()
        case "negotiating again":
            harness = connected(policy: true)
            harness.closed()
            harness.advance(by: .zero)
        case "handshaking again":
            harness = connected(policy: true)
            harness.closed()
            harness.advance(by: .zero)
            harness.negotiate()
            harness.opened()
        case "resuming":
            harness = connected(stateful: true)
            harness.closed()
        default:
            return nil
        }
        harness.drain()
        return harness
    }

    /// Applies the named input; returns the action names, or nil for an unknown input.
    static func apply(_ input: String, to harness: inout HubConnectionHarness) -> [String]? {
        let now = harness.now
        switch input {
        case "start":
            harness.machine.start(now: now)
            return harness.drain()
        case "start skipping negotiation":
            harness = HubConnectionHarness { $0.skipNegotiation = true }
            harness.machine.start(now: now)
            return harness.drain()
        case "stop":
            harness.machine.stop(now: now)
            return harness.drain()
        case "negotiate 200": return harness.negotiate()
        case "negotiate redirect":
            return harness.negotiate(body: Array(#"{"url":"http://other/hub","accessToken":"t2"}"#.utf8))
        case "negotiate 404": return harness.negotiate(status: 404, body: [])
        case "negotiate 204": return harness.negotiate(status: 204, body: [])
        case "negotiate error body":
            return harness.negotiate(body: Array(#"{"error":"This connection is not allowed."}"#.utf8))
        case "negotiate without WebSockets":
            return harness.negotiate(
                body: HubConnectionHarness.negotiateBody(
                    transports: #"[{"transport":"LongPolling","transferFormats":["Text"]}]"#
                )
            )
        case "negotiate stateful not asked":
            return harness.negotiate(body: HubConnectionHarness.negotiateBody(stateful: true))
        case "negotiate network failure":
            harness.machine.negotiateFailed("connection refused", now: now)
            return harness.drain()
        case "transport opened": return harness.opened()
        case "transport closed": return harness.closed()
        case "handshake response": return harness.server("{}")
        case "handshake response with a ping":
            let bytes = Array("{}\u{1E}{\"type\":6}\u{1E}".utf8)
            harness.machine.receive(bytes.span, now: now)
            return harness.drain()
        case "handshake error": return harness.server(#"{"error":"The protocol 'json' is not supported."}"#)
        case "handshake garbage": return harness.server("garbage")
        case "handshake timeout": return harness.advance(by: .seconds(15))
        case "invoke":
            _ = try? harness.machine.invoke("Echo", arguments: jsonArguments("1"), now: now)
            return harness.drain()
        case "send":
            try? harness.machine.send("Log", arguments: jsonArguments("1"), now: now)
            return harness.drain()
        case "stream":
            _ = try? harness.machine.stream("Counter", arguments: jsonArguments("3"), now: now)
            return harness.drain()
        case "completion for the invocation": return harness.server(#"{"type":3,"invocationId":"0","result":"hi"}"#)
        case "stream item and completion":
            guard let id = try? harness.machine.stream("Counter", arguments: jsonArguments("3"), now: now) else {
                return nil
            }
            harness.drain()
            return harness.server(
                #"{"type":2,"invocationId":"\#(id)","item":0}"#,
                #"{"type":3,"invocationId":"\#(id)"}"#
            )
        case "cancel stream":
            guard let id = try? harness.machine.stream("Counter", arguments: jsonArguments("3"), now: now) else {
                return nil
            }
            harness.drain()
            try? harness.machine.cancelStream(id, now: now)
            return harness.drain()
        case "upload stream item and completion":
            guard let id = try? harness.machine.makeUploadStream(now: now) else { return nil }
            try? harness.machine.sendStreamItem(id, item: try! EncodedValue(json: Array("1".utf8)), now: now)
            try? harness.machine.completeUploadStream(id, now: now)
            return harness.drain()
        case "server invocation of a handled method":
            return harness.server(#"{"type":1,"invocationId":"s1","target":"receivemessage","arguments":[1]}"#)
        case "server invocation of an unhandled method":
            return harness.server(#"{"type":1,"invocationId":"s1","target":"Other","arguments":[]}"#)
        case "reply to a server invocation":
            harness.server(#"{"type":1,"invocationId":"s1","target":"ReceiveMessage","arguments":[]}"#)
            try? harness.machine.reply(
                to: "s1",
                result: .value(try! EncodedValue(json: Array("42".utf8))),
                now: harness.now
            )
            return harness.drain()
        case "ping": return harness.server(#"{"type":6}"#)
        case "unknown message type": return harness.server(#"{"type":99}"#)
        case "keep-alive timer": return harness.advance(by: .seconds(15))
        case "server timeout":
            // Keep receiving nothing; pings go out every 15 s, the timeout fires at 30 s.
            return harness.advance(by: .seconds(30)).filter { $0 != "send:ping" }
        case "close message": return harness.server(#"{"type":7,"error":"bye"}"#)
        case "close message allowing reconnect":
            return harness.server(#"{"type":7,"error":"restart","allowReconnect":true}"#)
        case "completion for an unknown id": return harness.server(#"{"type":3,"invocationId":"99"}"#)
        case "malformed message": return harness.server(#"{"type":1}"#)
        case "ack timer": return harness.advance(by: .seconds(1))
        case "sequence too high": return harness.server(#"{"type":9,"sequenceId":5}"#)
        case "reconnect timer": return harness.advance(by: .zero)
        default: return nil
        }
    }

    @Test(arguments: rows)
    func row(_ row: Row) throws {
        var harness = try #require(Self.setUp(row.state), "unknown state '\(row.state)'")
        let actions = try #require(Self.apply(row.input, to: &harness), "unknown input '\(row.input)'")
        #expect(actions == row.actions)
        #expect(harness.machine.stateName == row.next)
    }

    @Test func tableIsNotEmpty() {
        #expect(Self.rows.count > 40)
    }
}
