import Foundation
import Testing
import TetherCore
import TetherSimulation
import TetherTestSupport

@testable import TetherSignalR

/// Walks every row of the transition table in Specs/signalr/hub-connection.md against the code.
struct HubConnectionTransitionTableTests {
    typealias Row = TransitionRow

    /// The number of rows the table has; a row added or lost must be noticed.
    static let expectedRowCount = 113

    static let table = TransitionTable.rows("Specs/signalr/hub-connection.md", columns: 5)

    static var rows: [Row] { table.rows }

    static let everyTransport =
        #"[{"transport":"WebSockets","transferFormats":["Text","Binary"]},"#
        + #"{"transport":"ServerSentEvents","transferFormats":["Text"]},"#
        + #"{"transport":"LongPolling","transferFormats":["Text","Binary"]}]"#

    /// A harness brought into the named state (and its output drained).
    static func setUp(_ state: String) -> HubConnectionHarness? {
        func connected(
            policy: Bool = false,
            stateful: Bool = false,
            _ configure: (inout JSONHubConnection.Configuration) -> Void = { _ in }
        ) -> HubConnectionHarness {
            var harness = HubConnectionHarness {
                $0.handledTargets = ["ReceiveMessage"]
                if policy { $0.reconnectPolicy = .signalRDefault }
                $0.statefulReconnect = stateful
                configure(&$0)
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
        case "disconnected with a token provider":
            harness = HubConnectionHarness { $0.asksForAccessToken = true }
        case "fetchingAccessToken":
            harness = HubConnectionHarness { $0.asksForAccessToken = true }
            harness.machine.start(now: harness.now)
        case "reconnectWaiting with a token provider":
            harness = HubConnectionHarness {
                $0.asksForAccessToken = true
                $0.reconnectPolicy = .signalRDefault
            }
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.machine.accessTokenFetched("t", generation: harness.generation, now: harness.now)
            harness.drain()
            harness.negotiate()
            harness.opened()
            harness.server("{}")
            harness.closed()
        case "negotiating":
            harness.machine.start(now: harness.now)
        case "negotiating a first start retried under the policy":
            harness = HubConnectionHarness {
                $0.reconnectPolicy = .signalRDefault
                $0.retriesFailedStart = true
            }
            harness.machine.start(now: harness.now)
        case "negotiating with a token provider", "negotiating again after a 401":
            harness = HubConnectionHarness { $0.asksForAccessToken = true }
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.machine.accessTokenFetched("old", generation: harness.generation, now: harness.now)
            if state == "negotiating again after a 401" {
                harness.drain()
                harness.negotiate(status: 401, body: [])
                harness.machine.accessTokenFetched("new", generation: harness.generation, now: harness.now)
            }
        case "connectingTransport with a token provider", "fetchingAccessToken after a 401 from the transport",
            "handshaking with a token provider":
            harness = HubConnectionHarness { $0.asksForAccessToken = true }
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.machine.accessTokenFetched("old", generation: harness.generation, now: harness.now)
            harness.drain()
            harness.negotiate()
            if state == "fetchingAccessToken after a 401 from the transport" {
                harness.machine.transportClosed(
                    generation: harness.generation,
                    error: TransportError(.unauthorized, "401"),
                    now: harness.now
                )
            } else if state == "handshaking with a token provider" {
                harness.opened()
            }
        case "connectingTransport":
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.negotiate()
        case "handshaking":
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.negotiate()
            harness.opened()
        case "connectingTransport with every transport offered":
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.negotiate(body: HubConnectionHarness.negotiateBody(transports: everyTransport))
        case "connectingTransport over WebSockets only":
            harness = HubConnectionHarness { $0.transports = [.webSockets] }
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.negotiate(body: HubConnectionHarness.negotiateBody(transports: everyTransport))
        case "negotiating the next transport", "connectingTransport on the last transport":
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.negotiate(body: HubConnectionHarness.negotiateBody(transports: everyTransport))
            harness.closed()
            if state == "connectingTransport on the last transport" {
                harness.negotiate(body: HubConnectionHarness.negotiateBody(transports: everyTransport))
                harness.closed()
                harness.negotiate(body: HubConnectionHarness.negotiateBody(transports: everyTransport))
            }
        case "connected over long polling":
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.negotiate(
                body: HubConnectionHarness.negotiateBody(
                    transports: #"[{"transport":"LongPolling","transferFormats":["Text","Binary"]}]"#
                )
            )
            harness.opened()
            harness.server("{}")
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
        case "negotiating on the policy's last attempt", "suspended":
            harness = connected { $0.reconnectPolicy = .delays([.zero]) }
            harness.closed()
            harness.advance(by: .zero)
            if state == "suspended" { harness.negotiate(status: 404, body: []) }
        case "handshaking again":
            harness = connected(policy: true)
            harness.closed()
            harness.advance(by: .zero)
            harness.negotiate()
            harness.opened()
        case "resuming":
            harness = connected(stateful: true)
            harness.closed()
        case "resuming waiting":
            harness = connected(stateful: true)
            harness.closed()
            harness.drain()
            harness.closed()
        case "connected with a policy, the network lost":
            harness = connected(policy: true)
            harness.machine.networkChanged(.unavailable, now: harness.now)
        case "waiting for the network":
            harness = connected(policy: true)
            harness.machine.networkChanged(.unavailable, now: harness.now)
            harness.closed()
        case "connected stateful on Wi-Fi":
            harness = connected(stateful: true)
            harness.machine.networkChanged(NetworkPath(isAvailable: true, interfaces: ["wlan0"]), now: harness.now)
        case "suspended in the background":
            harness = connected(policy: true)
            harness.machine.applicationStateChanged(.background, now: harness.now)
        case "resuming on its last attempt":
            harness = connected(stateful: true) { $0.resumeRetryDelays = [] }
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
        case "reconnect now":
            harness.machine.reconnectNow(now: now)
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
        case "negotiate offering long polling only":
            return harness.negotiate(
                body: HubConnectionHarness.negotiateBody(
                    transports: #"[{"transport":"LongPolling","transferFormats":["Text"]}]"#
                )
            )
        case "negotiate offering no usable transport":
            return harness.negotiate(
                body: HubConnectionHarness.negotiateBody(
                    transports: #"[{"transport":"ServerSentEvents","transferFormats":["Binary"]}]"#
                )
            )
        case "negotiate offering every transport":
            return harness.negotiate(body: HubConnectionHarness.negotiateBody(transports: everyTransport))
        case "negotiate stateful not asked":
            return harness.negotiate(body: HubConnectionHarness.negotiateBody(stateful: true))
        case "access token":
            harness.machine.accessTokenFetched("fresh-token", generation: harness.generation, now: now)
            return harness.drain()
        case "negotiate 401": return harness.negotiate(status: 401, body: [])
        case "certificate refused":
            harness.machine.transportClosed(
                generation: harness.generation,
                error: TransportError(
                    .certificateRefused,
                    "no pinned public key matches the server's certificate chain"
                ),
                now: now
            )
            return harness.drain()
        case "transport unauthorized":
            harness.machine.transportClosed(
                generation: harness.generation,
                error: TransportError(.unauthorized, "401"),
                now: now
            )
            return harness.drain()
        case "access token failure":
            harness.machine.accessTokenFailed("offline", generation: harness.generation, now: now)
            return harness.drain()
        case "stale access token":
            harness.machine.accessTokenFetched(
                "old",
                generation: TransportGeneration(harness.generation.value - 1),
                now: now
            )
            return harness.drain()
        case "stale negotiate response":
            let stale = TransportGeneration(harness.generation.value + 5)
            harness.machine.negotiateResponse(
                status: 200,
                body: HubConnectionHarness.negotiateBody(),
                generation: stale,
                now: now
            )
            harness.machine.negotiateFailed(
                TransportError(.connectionFailed, "late"),
                generation: TransportGeneration(0),
                now: now
            )
            return harness.drain()
        case "stale transport connected":
            harness.machine.transportConnected(generation: TransportGeneration(harness.generation.value - 1), now: now)
            return harness.drain()
        case "stale transport input":
            let stale = TransportGeneration(harness.generation.value - 1)
            harness.machine.transportReceived(Array(#"{"type":7}"#.utf8) + [0x1E], generation: stale, now: now)
            harness.machine.transportClosed(generation: stale, error: TransportError(.connectionLost, "late"), now: now)
            harness.machine.transportConnected(generation: stale, now: now)
            return harness.drain()
        case "invoke with MessagePack arguments":
            let values = EncodedArguments(encoding: .messagePack, values: [.null(.messagePack)])
            expectThrows(\HubConnectionError.kind, .encoding) {
                try harness.machine.invoke("Echo", arguments: values, now: now)
            }
            return harness.drain()
        case "server call of an unhandled method without a result":
            return harness.server(#"{"type":1,"target":"Other","arguments":[]}"#)
        case "negotiate network failure":
            harness.machine.negotiateFailed(
                TransportError(.connectionFailed, "connection refused"),
                generation: harness.generation,
                now: now
            )
            return harness.drain()
        case "transport connected": return harness.opened()
        case "transport closed": return harness.closed()
        case "network lost":
            harness.machine.networkChanged(.unavailable, now: now)
            return harness.drain()
        case "network on cellular":
            harness.machine.networkChanged(NetworkPath(isAvailable: true, interfaces: ["rmnet0"]), now: now)
            return harness.drain()
        case "network lost and back":
            harness.machine.networkChanged(.unavailable, now: now)
            harness.machine.networkChanged(NetworkPath(isAvailable: true, interfaces: ["rmnet0"]), now: now)
            return harness.drain()
        case "probe timeout": return harness.advance(by: .seconds(20))
        case "app to background":
            harness.machine.applicationStateChanged(.background, now: now)
            return harness.drain()
        case "app to foreground":
            harness.machine.applicationStateChanged(.active, now: now)
            return harness.drain()
        case "handshake response": return harness.server("{}")
        case "handshake response with a ping":
            let bytes = Array("{}\u{1E}{\"type\":6}\u{1E}".utf8)
            harness.machine.transportReceived(bytes.backDeployedSpan, generation: harness.generation, now: now)
            return harness.drain()
        case "handshake error": return harness.server(#"{"error":"The protocol 'json' is not supported."}"#)
        case "handshake garbage": return harness.server("garbage")
        case "handshake timeout": return harness.advance(by: .seconds(15))
        case "connect timeout": return harness.advance(by: .seconds(30))
        case "invoke":
            _ = try? harness.machine.invoke("Echo", arguments: jsonArguments("1"), now: now)
            return harness.drain()
        case "invoke, then transport connected":
            _ = try? harness.machine.invoke("Echo", arguments: jsonArguments("1"), now: now)
            #expect(harness.drain().isEmpty)
            return harness.opened()
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
        case "resume timer": return harness.advance(by: .milliseconds(500))
        default: return nil
        }
    }

    @Test(arguments: rows)
    func row(_ row: Row) throws {
        var harness = try #require(Self.setUp(row.state), "unknown state '\(row.state)'")
        let before = harness.actions.count
        let actions = try #require(Self.apply(row.input, to: &harness), "unknown input '\(row.input)'")
        // `name(text)`: the name must match, and the action's description contain the text.
        let expected = row.actions.map { $0.split(separator: "(", maxSplits: 1).first.map(String.init) ?? $0 }
        #expect(actions == expected)
        let taken = Array(harness.actions[before...])
        for (index, action) in row.actions.enumerated() where action.hasSuffix(")") && index < taken.count {
            let text = String(action.split(separator: "(", maxSplits: 1)[1].dropLast())
            #expect(String(describing: taken[index]).contains(text), "\(taken[index]) lacks '\(text)'")
        }
        #expect(harness.machine.stateName.rawValue == row.next)
        let armed = [
            ("ack", HubConnectionMachine.Timer.ack), ("connect", .connectAttempt), ("handshake", .handshake),
            ("liveness", .liveness), ("reconnect", .reconnect), ("resume", .resume),
        ]
        .filter { harness.machine.timers.isArmed($0.1) }.map(\.0)
        #expect(armed == row.timers, "timers")
    }

    @Test func tableIsWellFormed() {
        #expect(Self.table.malformed.isEmpty, "malformed rows: \(Self.table.malformed)")
        #expect(Self.rows.count == Self.expectedRowCount)
        let states = Set(HubConnectionMachine.StateName.allCases.map(\.rawValue))
        for row in Self.rows { #expect(states.contains(row.next), "unknown next state in \(row.description)") }
    }
}
