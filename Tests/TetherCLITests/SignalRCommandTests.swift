import Foundation
import Testing
import TetherCore
import TetherSignalR
import TetherTestServers

@testable import tether

struct SignalRCommandParsingTests {
    @Test func parsesTheWholeContract() {
        guard
            case .command(let command) = SignalRCommand.parse([
                "--url", "https://example.com/hub", "--protocol", "messagepack", "--stateful", "--header", "X-A: 1",
                "--header", "X-B:two", "--access-token-env", "TOKEN", "--reconnect", "tiered", "--ca-file", "ca.pem",
                "--verbose", "invoke", "Add", "[1,2]", "--count", "3",
            ])
        else { return #expect(Bool(false)) }
        #expect(command.url == "https://example.com/hub" && command.encoding == .messagePack && command.stateful)
        #expect(command.headers == ["X-A": "1", "X-B": "two"] && command.accessTokenVariable == "TOKEN")
        #expect(command.reconnect == .tiered && command.caFile == "ca.pem" && command.verbose)
        #expect(command.action == .invoke(method: "Add", arguments: "[1,2]", count: 3))
        guard case .command(let stream) = SignalRCommand.parse(["--url", "ws://h/hub", "stream", "Counter"]) else {
            return #expect(Bool(false))
        }
        #expect(stream.action == .stream(method: "Counter", arguments: "[]") && stream.reconnect == .default)
        guard
            case .command(let listen) = SignalRCommand.parse([
                "--url", "http://h/hub", "listen", "A", "B", "--count", "2", "--seconds", "1.5",
            ])
        else { return #expect(Bool(false)) }
        #expect(listen.action == .listen(targets: ["A", "B"], count: 2, seconds: 1.5))
        #expect(listen.transports == [.webSockets, .serverSentEvents, .longPolling])
        guard
            case .command(let transports) = SignalRCommand.parse([
                "--url", "http://h/hub", "--transport", "long-polling,sse", "invoke", "Echo",
            ])
        else { return #expect(Bool(false)) }
        #expect(transports.transports == [.longPolling, .serverSentEvents])
        guard
            case .command(let pinned) = SignalRCommand.parse([
                "--url", "https://h/hub", "--pin", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "--pin",
                "48DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "invoke", "Echo",
            ])
        else { return #expect(Bool(false)) }
        #expect(
            pinned.pins == [
                "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "48DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
            ]
        )
    }

    @Test func serverSentEventsAloneCannotCarryMessagePack() async {
        let result = await tether([
            "signalr", "--url", "http://h/hub", "--transport", "sse", "--protocol", "messagepack", "invoke", "Echo",
        ])
        #expect(result.status == 2)
        #expect(result.errors.joined().contains("Server-Sent Events carry text only"), "\(result.errors)")
    }

    @Test(arguments: [
        ["signalr"], ["signalr", "invoke", "Echo"], ["signalr", "--url", "ftp://h/hub", "invoke", "Echo"],
        ["signalr", "--url", "http://h/hub"], ["signalr", "--url", "http://h/hub", "frob"],
        ["signalr", "--url", "http://h/hub", "--protocol", "xml", "invoke", "Echo"],
        ["signalr", "--url", "http://h/hub", "--header", "novalue", "invoke", "Echo"],
        ["signalr", "--url", "http://h/hub", "listen"],
        ["signalr", "--url", "http://h/hub", "invoke", "Echo", "--count", "0"],
        ["signalr", "--url", "http://h/hub", "stream", "Counter", "[1]", "--count", "2"],
        ["signalr", "--url", "http://h/hub", "invoke", "Echo", "not json"],
        ["signalr", "--url", "http://h/hub", "invoke", "Echo", #"{"not":"an array"}"#],
        ["signalr", "--url", "http://h/hub", "--access-token-env", "TETHER_UNSET_TOKEN", "invoke", "Echo"],
        ["signalr", "--url", "http://h/hub", "--transport", "invoke", "Echo"],
        ["signalr", "--url", "http://h/hub", "--transport", "websocket", "invoke", "Echo"],
        ["signalr", "--url", "http://h/hub", "--transport", "sse,sse", "invoke", "Echo"],
        ["signalr", "--url", "http://h/hub", "--transport", "sse,", "invoke", "Echo"],
        ["signalr", "--url", "https://h/hub", "--pin", "not-a-hash", "invoke", "Echo"],
        ["signalr", "--url", "https://h/hub", "--pin", "invoke", "Echo"],
    ])
    func usageErrorsExitTwo(_ arguments: [String]) async {
        let result = await tether(arguments)
        #expect(result.status == 2, "\(result)")
        #expect(!result.errors.isEmpty)
    }

    @Test func helpExitsZero() async {
        let help = await tether(["signalr", "--help"])
        #expect(help.status == 0 && help.output.joined().contains("usage: tether signalr --url URL"))
        #expect(await tether(["--help"]).output.joined().contains("signalr"))
    }

    @Test func argumentsAreReencodedForMessagePack() throws {
        let arguments = try JSONArguments.encode(#"[1, -2.5, "x", null, true, [1], {"k": {"n": 3}}]"#, as: .messagePack)
        #expect(arguments.encoding == .messagePack && arguments.count == 7)
        let rendered = arguments.map { SignalRCommand.render($0) }
        #expect(rendered == ["1", "-2.5", #""x""#, "null", "true", "[1]", #"{"k":{"n":3}}"#])
    }
}

/// `tether signalr` against a real aiosignalr hub.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.aiosignalr)
)
struct SignalRCommandServerTests {
    /// Every transport with every protocol it carries.
    @Test(arguments: [
        ("json", "websockets"), ("json", "sse"), ("json", "long-polling"), ("messagepack", "websockets"),
        ("messagepack", "long-polling"),
    ])
    func invokeStreamAndErrors(_ encoding: String, _ transport: String) async throws {
        let server = try SignalRHubServer()
        try await server.start()
        let common = ["signalr", "--url", server.url, "--protocol", encoding, "--transport", transport]
        let connected = #"{"event":"connected","transport":"\#(transport)"}"#
        let add = await tether(common + ["invoke", "Add", "[2, 3]", "--count", "3"])
        #expect(add.status == 0, "\(add.errors)")
        #expect(
            withoutConnectionIds(add.output) == [
                connected, #"{"result":5}"#, #"{"result":5}"#, #"{"result":5}"#, #"{"event":"closed","reason":null}"#,
            ]
        )
        #expect(add.output.first?.contains(#","connection_id":""#) == true, "\(add.output)")
        let echo = await tether(common + ["invoke", "Echo", #"[{"a": [1, 2.5, null, "é"]}]"#])
        #expect(echo.output.dropFirst().first == #"{"result":{"a":[1,2.5,null,"é"]}}"#)
        let notify = await tether(common + ["invoke", "NotifyMe", #"["x"]"#])
        #expect(notify.output.dropFirst().first == #"{"result":null}"#)

        let stream = await tether(common + ["stream", "Counter", "[3]"])
        #expect(stream.status == 0, "\(stream.errors)")
        #expect(
            withoutConnectionIds(stream.output) == [
                connected, #"{"item":0}"#, #"{"item":1}"#, #"{"item":2}"#, #"{"completed":true}"#,
                #"{"event":"closed","reason":null}"#,
            ]
        )

        let failing = await tether(common + ["invoke", "Fail", #"["it \"broke\""]"#])
        #expect(failing.status == 1)
        #expect(failing.output.contains(#"{"error":"it \"broke\""}"#), "\(failing.output)")
    }

    /// `--health`: the health lines, with the invocation round trips and the transport.
    @Test func healthLines() async throws {
        let server = try SignalRHubServer()
        try await server.start()
        let result = await tether(
            ["signalr", "--url", server.url, "--health", "0.1", "invoke", "Delay", "[0.15]", "--count", "3"]
        )
        #expect(result.status == 0, "\(result.errors)")
        let online = try #require(
            result.output.last { $0.hasPrefix(#"{"event":"health","state":"connected""#) },
            "\(result.output)"
        )
        #expect(online.contains(#""transport":"websockets","tls_version":null,"server":"http://"#), "\(online)")
        #expect(online.hasSuffix(#","failing_servers":[]}"#), "\(online)")
        #expect(!online.contains(#""rtt_ms":null"#) && online.contains(#""reconnect_attempts":0"#), "\(online)")
    }

    @Test func listenPrintsServerCalls() async throws {
        let server = try SignalRHubServer()
        try await server.start()
        let listen = RunningTether([
            "signalr", "--url", server.url, "listen", "Notify", "Other", "--count", "2", "--seconds", "20",
        ])
        #expect(await listen.printed(#"{"event":"connected","transport":"websockets","connection_id":"#))
        for text in ["one", "two"] {
            let sent = await tether(["signalr", "--url", server.url, "invoke", "Broadcast", "[\"\(text)\"]"])
            #expect(sent.status == 0, "\(sent.errors)")
        }
        let result = await listen.result
        #expect(result.status == 0, "\(result.errors)")
        #expect(
            withoutConnectionIds(result.output) == [
                #"{"event":"connected","transport":"websockets"}"#, #"{"target":"Notify","arguments":["one"]}"#,
                #"{"target":"Notify","arguments":["two"]}"#, #"{"event":"closed","reason":null}"#,
            ]
        )
    }

    @Test func unreachableHubExitsOneWithTheErrorOnStandardError() async throws {
        let port = try freeLoopbackPort()
        let result = await tether(["signalr", "--url", "http://127.0.0.1:\(port)/hub", "invoke", "Echo", #"["x"]"#])
        #expect(result.status == 1)
        // The lifecycle says why too: the attempt failed (no policy: closed).
        #expect(result.output.count == 2, "\(result.output)")
        #expect(
            result.output.first?.hasPrefix(#"{"event":"attempt-failed","kind":"connectionFailed","reason":"#) == true,
            "\(result.output)"
        )
        #expect(result.output.last?.hasPrefix(#"{"event":"closed","reason":"Failed to complete"#) == true)
        #expect(result.errors.last?.contains("Connection refused") == true, "\(result.errors)")
    }

    @Test func accessTokenIsNeverPrinted() async throws {
        let server = try SignalRHubServer()
        try await server.start()
        let result = await tether(
            [
                "signalr", "--url", server.url, "--access-token-env", "HUB_TOKEN", "--verbose", "invoke", "Echo",
                #"["x"]"#,
            ],
            environment: ["HUB_TOKEN": "s3cr3t-t0ken"]
        )
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.errors.contains { $0.contains("Negotiate answered 200") })  // --verbose logs steps
        #expect(!(result.output + result.errors).joined().contains("s3cr3t-t0ken"))
    }

    /// Through a proxy that refuses WebSocket upgrades: by default the command lands on
    /// Server-Sent Events; `--transport websockets` fails with exit status 1 and the reasons.
    @Test func fallsBackThroughAProxyThatRefusesWebSockets() async throws {
        let server = try SignalRHubServer()
        try await server.start()
        let relay = try TCPRelay(upstreamPort: server.port, refusing: [.webSocketUpgrade])
        let url = "http://127.0.0.1:\(relay.port)/hub"
        let fallback = await tether(["signalr", "--url", url, "invoke", "Echo", #"["x"]"#])
        #expect(fallback.status == 0, "\(fallback.errors)")
        #expect(withoutConnectionIds(fallback.output).first == #"{"event":"connected","transport":"sse"}"#)
        let only = await tether(["signalr", "--url", url, "--transport", "websockets", "invoke", "Echo", #"["x"]"#])
        #expect(only.status == 1)
        #expect(
            only.output.last?.hasPrefix(#"{"event":"closed","reason":"Unable to connect"#) == true,
            "\(only.output)"
        )
        #expect(
            only.errors.joined().contains(
                "Unable to connect to the server with any of the available transports. WebSockets failed:"
            ),
            "\(only.errors)"
        )
    }

    /// `--access-token-command` through a gateway that refuses the first token: the command runs
    /// again on the 401, the call succeeds, and no token is ever printed (even with --verbose).
    @Test func accessTokenCommandRunsAgainOnA401() async throws {
        let server = try SignalRHubServer()
        try await server.start()
        let relay = try TCPRelay(upstreamPort: server.port, refusing: [.bearerToken("exp1red-t0ken")])
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("tether-token-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: marker) }
        let command =
            "if [ -e '\(marker.path)' ]; then echo fr3sh-t0ken; else touch '\(marker.path)'; echo exp1red-t0ken; fi"
        let result = await tether([
            "signalr", "--url", "http://127.0.0.1:\(relay.port)/hub", "--access-token-command", command, "--verbose",
            "invoke", "Echo", #"["x"]"#,
        ])
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.output.dropFirst().first == #"{"result":"x"}"#)
        #expect(relay.refusedCount == 1)
        let printed = (result.output + result.errors).joined()
        #expect(!printed.contains("fr3sh-t0ken") && !printed.contains("exp1red-t0ken"))

        let both = await tether([
            "signalr", "--url", server.url, "--access-token-env", "X", "--access-token-command", "echo t", "invoke",
            "Echo",
        ])
        #expect(both.status == 2 && both.errors.joined().contains("exclude each other"))
        let failing = await tether([
            "signalr", "--url", server.url, "--access-token-command", "echo s3cr3t; exit 3", "invoke", "Echo",
        ])
        #expect(failing.status == 1)
        #expect(failing.errors.joined().contains("exited with status 3"), "\(failing.errors)")
        #expect(!failing.errors.joined().contains("s3cr3t"))
    }
}

/// The lines with the connection ids left out (they differ on every run).
func withoutConnectionIds(_ lines: [String]) -> [String] {
    lines.map { $0.replacing(#/,"connection_id":("[^"]*"|null)/#, with: "") }
}
