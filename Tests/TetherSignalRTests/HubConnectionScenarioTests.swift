import Foundation
import Testing
import TetherCore

@testable import TetherSignalR

/// Golden transcripts of the main scenarios and the rules of the spec, on a virtual clock with a
/// scripted server.
struct HubConnectionScenarioTests {
    @Test func connectTranscript() throws {
        var harness = HubConnectionHarness()
        harness.connect()
        #expect(harness.transcript == ["negotiate", "open", "send:handshake", "event:connected", "send:ping"])
        let (url, headers) = try #require(harness.actions[0].negotiateRequest)
        #expect(url == "http://127.0.0.1:5099/hub/negotiate?negotiateVersion=1")
        #expect(headers["Authorization"] == "Bearer secret-token")
        let (wsURL, wsHeaders, format) = try #require(harness.actions[1].transportRequest)
        #expect(wsURL == "ws://127.0.0.1:5099/hub?id=token-1")
        #expect(wsHeaders["Authorization"] == "Bearer secret-token")
        #expect(format == .text)
        let handshake = try #require(harness.actions[2].sentBytes)
        #expect(String(decoding: handshake, as: UTF8.self) == "{\"protocol\":\"json\",\"version\":1}\u{1E}")
        #expect(harness.machine.connectionId == "conn-1")
    }

    @Test func invokeAndStreamTranscripts() throws {
        var harness = HubConnectionHarness()
        harness.connect()
        let id = try harness.machine.invoke("Echo", arguments: jsonArguments(#""hi""#), now: harness.now)
        #expect(id == "0")
        #expect(harness.drain() == ["send:invocation"])
        #expect(harness.server(#"{"type":3,"invocationId":"0","result":"hi"}"#) == ["event:completion"])
        guard case .completion(let completedId, .success(let value?)) = harness.events.last else {
            Issue.record("no completion")
            return
        }
        #expect(completedId == "0")
        #expect(try value.decode(String.self) == "hi")
        let stream = try harness.machine.stream("Counter", arguments: jsonArguments("3"), now: harness.now)
        #expect(stream == "1")
        harness.drain()
        let names = harness.server(
            #"{"type":2,"invocationId":"1","item":0}"#,
            #"{"type":2,"invocationId":"1","item":1}"#,
            #"{"type":3,"invocationId":"1","error":"boom"}"#
        )
        #expect(names == ["event:streamitem", "event:streamitem", "event:streamcompleted"])
        #expect(
            harness.events.last
                == .streamCompleted(invocationId: "1", error: HubConnectionError(.invocationFailed, "boom"))
        )
        // Anything for a finished invocation is a protocol violation.
        #expect(
            harness.server(#"{"type":3,"invocationId":"1"}"#)
                == ["send:close", "close", "event:connectionlost", "event:closed"]
        )
        #expect(
            harness.sentMessages.last
                == .close(CloseMessage(error: "Received a Completion for unknown invocation '1'."))
        )
        #expect(
            harness.events.last
                == .lifecycle(
                    .closed(HubConnectionError(.protocolViolation, "Received a Completion for unknown invocation '1'."))
                )
        )
    }

    @Test func bytesAfterTheHandshakeResponseAreMessages() {
        var harness = HubConnectionHarness()
        harness.machine.start(now: harness.now)
        harness.drain()
        harness.negotiate()
        harness.opened()
        let bytes = Array("{}\u{1E}{\"type\":7,\"error\":\"bye\"}\u{1E}".utf8)
        harness.machine.transportReceived(bytes.backDeployedSpan, generation: harness.generation, now: harness.now)
        #expect(harness.drain() == ["event:connected", "send:ping", "close", "event:connectionlost", "event:closed"])
        #expect(
            harness.events.last
                == .lifecycle(.closed(HubConnectionError(.serverClosed, "Server returned an error on close: bye")))
        )
    }

    @Test func handshakeFailuresHaveTheExactTexts() {
        var harness = HubConnectionHarness()
        harness.machine.start(now: harness.now)
        harness.drain()
        harness.negotiate()
        harness.opened()
        harness.server(#"{"error":"The server does not support version 1 of the 'json' protocol."}"#)
        #expect(
            harness.events.last
                == .lifecycle(
                    .closed(
                        HubConnectionError(
                            .handshake,
                            "Server returned handshake error: The server does not support version 1 of the 'json' protocol."
                        )
                    )
                )
        )
        var timeout = HubConnectionHarness()
        timeout.machine.start(now: timeout.now)
        timeout.drain()
        timeout.negotiate()
        timeout.opened()
        #expect(timeout.advance(by: .seconds(14)).isEmpty)
        #expect(timeout.advance(by: .seconds(1)) == ["close", "event:attemptfailed", "event:closed"])
        #expect(
            timeout.events.last
                == .lifecycle(.closed(HubConnectionError(.handshake, "The handshake timed out after 15 seconds.")))
        )
    }

    @Test func keepAlivePingsOnlyAfterSendSilence() throws {
        var harness = HubConnectionHarness()
        harness.connect()
        // Receiving does not count as sending: pings go out every 15 s.
        harness.advance(by: .seconds(10))
        harness.server(#"{"type":6}"#)
        #expect(harness.advance(by: .seconds(5)) == ["send:ping"])
        harness.server(#"{"type":6}"#)
        // Sending postpones the ping.
        harness.advance(by: .seconds(10))
        _ = try harness.machine.invoke("Echo", arguments: jsonArguments("1"), now: harness.now)
        harness.drain()
        #expect(harness.advance(by: .seconds(14)).isEmpty)
        #expect(harness.advance(by: .seconds(1)) == ["send:ping"])
    }

    @Test func serverTimeoutClosesWithTheSpecText() throws {
        var harness = HubConnectionHarness()
        harness.connect()
        harness.advance(by: .seconds(20))
        harness.server(#"{"type":6}"#)  // resets the timeout
        #expect(!harness.advance(by: .seconds(29)).contains("event:closed"))
        #expect(harness.advance(by: .seconds(1)).suffix(3) == ["close", "event:connectionlost", "event:closed"])
        #expect(harness.events.last == .lifecycle(.closed(.serverTimeout)))
        #expect(
            HubConnectionError.serverTimeout.message
                == "Server timeout elapsed without receiving a message from the server."
        )
    }

    @Test func negotiateRedirectsV0AndLimits() throws {
        var harness = HubConnectionHarness()
        harness.machine.start(now: harness.now)
        harness.drain()
        harness.negotiate(body: Array(#"{"url":"https://other.example/chat?x=1","accessToken":"redirect-token"}"#.utf8))
        let (url, headers) = try #require(harness.actions.last?.negotiateRequest)
        #expect(url == "https://other.example/chat/negotiate?x=1&negotiateVersion=1")
        #expect(headers["Authorization"] == "Bearer redirect-token")
        harness.negotiate(
            body: Array(
                #"{"connectionId":"v0-id","availableTransports":[{"transport":"WebSockets","transferFormats":["Text"]}]}"#
                    .utf8
            )
        )
        let wsURL = try #require(harness.actions.last?.transportRequest).url
        #expect(wsURL == "wss://other.example/chat?x=1&id=v0-id")

        var looping = HubConnectionHarness()
        looping.machine.start(now: looping.now)
        looping.drain()
        for _ in 0..<100 { looping.negotiate(body: Array(#"{"url":"http://loop/hub"}"#.utf8)) }
        #expect(looping.machine.stateName == .negotiating)
        looping.negotiate(body: Array(#"{"url":"http://loop/hub"}"#.utf8))
        #expect(
            looping.events.last
                == .lifecycle(.closed(HubConnectionError(.negotiation, "Negotiate redirection limit exceeded.")))
        )
    }

    @Test func negotiationErrorsAndOldServers() {
        let cases: [(Int, String, String)] = [
            (
                404, "",
                "Failed to complete negotiation with the server: Status code '404' Either this is not a SignalR endpoint or there is a proxy blocking the connection."
            ),
            (500, "", "Failed to complete negotiation with the server: Status code '500'"),
            (204, "", "Unexpected status code returned from negotiate '204'"),
            (200, #"{"error":"This connection is not allowed."}"#, "This connection is not allowed."),
            (200, #"{"ProtocolVersion":"1.5","ConnectionId":"x"}"#, Negotiate.aspNetSignalRDetected.message),
        ]
        for (status, body, message) in cases {
            var harness = HubConnectionHarness()
            harness.machine.start(now: harness.now)
            harness.drain()
            harness.negotiate(status: status, body: Array(body.utf8))
            #expect(harness.events.last == .lifecycle(.closed(HubConnectionError(.negotiation, message))))
            #expect(!message.contains("secret-token"))
        }
    }

    @Test func skipNegotiation() throws {
        var harness = HubConnectionHarness { $0.skipNegotiation = true }
        harness.connect()
        #expect(harness.transcript == ["open", "send:handshake", "event:connected", "send:ping"])
        let url = try #require(harness.actions.first?.transportRequest).url
        #expect(url == "ws://127.0.0.1:5099/hub")
        #expect(harness.machine.connectionId == nil)
    }

    @Test func clientResults() throws {
        var harness = HubConnectionHarness { $0.handledTargets = ["GetLocation"] }
        harness.connect()
        #expect(
            harness.server(#"{"type":1,"invocationId":"7","target":"getlocation","arguments":[]}"#) == [
                "event:invocation"
            ]
        )
        try harness.machine.reply(
            to: "7",
            result: .value(try EncodedValue(json: Array(#""home""#.utf8))),
            now: harness.now
        )
        harness.drain()
        #expect(
            harness.sentMessages.last
                == .completion(
                    CompletionMessage(invocationId: "7", result: .value(try EncodedValue(json: Array(#""home""#.utf8))))
                )
        )
        harness.server(#"{"type":1,"invocationId":"8","target":"Unknown","arguments":[]}"#)
        #expect(
            harness.sentMessages.last
                == .completion(CompletionMessage(invocationId: "8", result: .error("Client didn't provide a result.")))
        )
        // A non-blocking call of an unknown method is reported, never dropped without trace.
        #expect(harness.server(#"{"type":1,"target":"Unknown","arguments":[]}"#) == ["event:unhandledinvocation"])
        let unknown = try #require(harness.events.last?.unhandledInvocation)
        #expect(unknown.target == "Unknown" && unknown.invocationId == nil)
    }

    @Test func handlersAddedAndRemovedWhileConnected() {
        var harness = HubConnectionHarness()
        harness.connect()
        let call = #"{"type":1,"target":"news","arguments":[]}"#
        #expect(harness.server(call) == ["event:unhandledinvocation"])
        harness.machine.handle("News")
        #expect(harness.server(call) == ["event:invocation"])
        guard case .invocation(_, let handler) = harness.events.last else {
            Issue.record("no invocation: \(harness.events)")
            return
        }
        #expect(handler == "News")
        harness.machine.stopHandling("NEWS")
        #expect(harness.server(call) == ["event:unhandledinvocation"])
    }

    @Test func handledTargetsMatchCaseInsensitivelyAmongManyTargets() {
        // More distinct targets than the machine's recent-target list holds, in varying case and
        // order, so that entries are replaced and looked up again: only the handled ones arrive.
        var harness = HubConnectionHarness { $0.handledTargets = ["Handled3", "handled11"] }
        harness.connect()
        var rng = SeededRandomNumberGenerator(seed: 11)
        for _ in 0..<200 {
            let number = Int.random(in: 0..<20, using: &rng)
            let name = Bool.random(using: &rng) ? "Handled\(number)" : "HANDLED\(number)"
            let events = harness.server(#"{"type":1,"target":""# + name + #"","arguments":[]}"#)
            let handled = number == 3 || number == 11
            #expect(events == [handled ? "event:invocation" : "event:unhandledinvocation"], "\(name)")
            // The event names the handler as registered, whatever the server's spelling.
            if handled, case .invocation(_, let handler) = harness.events.last {
                #expect(handler == (number == 3 ? "Handled3" : "handled11"))
            }
        }
    }

    @Test func handledTargetsLongerThanTheInternersAreMatchedByTheirText() {
        // A target longer than the parsers intern arrives as a new string each time: the machine's
        // recent-target list (checked by the strings' identity) never holds it, and the lookup must
        // still find it by its text, in any case, alternating with short (interned) targets.
        let long = "Receive" + String(repeating: "Notification", count: 8)
        var harness = HubConnectionHarness { $0.handledTargets = [long, "Short"] }
        harness.connect()
        for round in 0..<12 {
            let name = round % 3 == 0 ? long.uppercased() : round % 3 == 1 ? long : "SHORT"
            // Unhandled: as long as the handled one (one letter differs), longer, a short one.
            let other = [String(long.dropLast()) + "X", long + "X", "Shorter"][round % 3]
            #expect(harness.server(#"{"type":1,"target":""# + name + #"","arguments":[]}"#) == ["event:invocation"])
            if case .invocation(_, let handler) = harness.events.last {
                #expect(handler == (name == "SHORT" ? "Short" : long))
            }
            let unhandled = harness.server(#"{"type":1,"target":""# + other + #"","arguments":[]}"#)
            #expect(unhandled == ["event:unhandledinvocation"], "\(other)")
        }
    }

    @Test func pendingClientResultsAreBounded() throws {
        var harness = HubConnectionHarness {
            $0.handledTargets = ["GetLocation"]
            $0.maximumPendingClientResults = 2
        }
        harness.connect()
        let invocation = { (id: Int) in #"{"type":1,"invocationId":"\#(id)","target":"GetLocation","arguments":[]}"# }
        #expect(harness.server(invocation(1), invocation(2)) == ["event:invocation", "event:invocation"])
        // The third is answered at once and never reaches the app.
        #expect(harness.server(invocation(3)) == ["send:completion"])
        #expect(
            harness.sentMessages.last
                == .completion(
                    CompletionMessage(invocationId: "3", result: .error("Too many client results are pending."))
                )
        )
        // A reply makes room again.
        try harness.machine.reply(to: "1", result: .void, now: harness.now)
        harness.drain()
        #expect(harness.server(invocation(4)) == ["event:invocation"])
    }

    @Test func uploadStreams() throws {
        var harness = HubConnectionHarness()
        harness.connect()
        let stream = try harness.machine.makeUploadStream(now: harness.now)
        let id = try harness.machine.invoke("Upload", arguments: jsonArguments(), streamIds: [stream], now: harness.now)
        try harness.machine.sendStreamItem(stream, item: try EncodedValue(json: Array("1".utf8)), now: harness.now)
        try harness.machine.completeUploadStream(stream, now: harness.now)
        harness.drain()
        #expect(
            harness.sentMessages.suffix(3) == [
                .invocation(
                    InvocationMessage(
                        invocationId: id,
                        target: "Upload",
                        arguments: jsonArguments(),
                        streamIds: [stream]
                    )
                ),
                .streamItem(StreamItemMessage(invocationId: stream, item: try EncodedValue(json: Array("1".utf8)))),
                .completion(CompletionMessage(invocationId: stream, result: .void)),
            ]
        )
    }

    @Test func lateRepliesAndStreamItemsAfterAReconnectThrow() throws {
        var harness = HubConnectionHarness {
            $0.reconnectPolicy = .signalRDefault
            $0.handledTargets = ["GetLocation"]
        }
        harness.connect()
        harness.server(#"{"type":1,"invocationId":"7","target":"GetLocation","arguments":[]}"#)
        let stream = try harness.machine.makeUploadStream(now: harness.now)
        harness.closed()
        harness.advance(by: .zero)
        harness.negotiate(body: HubConnectionHarness.negotiateBody(connectionId: "conn-2", token: "token-2"))
        harness.opened()
        harness.server("{}")
        harness.drain()
        let sentBefore = harness.sentMessages.count
        // The app's handler and upload producer were still running across the reconnect.
        #expect(throws: HubConnectionError(.unknownInvocation, "No server invocation '7' awaits a reply.")) {
            try harness.machine.reply(to: "7", result: .void, now: harness.now)
        }
        #expect(throws: HubConnectionError.unknownUploadStream(stream)) {
            try harness.machine.sendStreamItem(stream, item: try EncodedValue(json: Array("1".utf8)), now: harness.now)
        }
        #expect(throws: HubConnectionError.unknownUploadStream(stream)) {
            try harness.machine.completeUploadStream(stream, now: harness.now)
        }
        harness.drain()
        #expect(harness.sentMessages.count == sentBefore)
        #expect(harness.machine.stateName == .connected)
        // A completed upload stream is closed too.
        let second = try harness.machine.makeUploadStream(now: harness.now)
        try harness.machine.completeUploadStream(second, now: harness.now)
        #expect(throws: HubConnectionError.unknownUploadStream(second)) {
            try harness.machine.completeUploadStream(second, now: harness.now)
        }
    }

    @Test func commandsWhileNotConnectedThrow() {
        var harness = HubConnectionHarness()
        #expect(throws: HubConnectionError.notConnected) {
            try harness.machine.invoke("Echo", arguments: jsonArguments(), now: .zero)
        }
        harness.machine.start(now: .zero)
        #expect(throws: HubConnectionError.notConnected) {
            try harness.machine.send("Echo", arguments: jsonArguments(), now: .zero)
        }
    }

    @Test func closeHonoursAllowReconnect() {
        var plain = HubConnectionHarness { $0.reconnectPolicy = .signalRDefault }
        plain.connect()
        plain.server(#"{"type":7,"error":"shutting down"}"#)
        #expect(plain.machine.stateName == .disconnected)
        var allowed = HubConnectionHarness { $0.reconnectPolicy = .signalRDefault }
        allowed.connect()
        #expect(allowed.server(#"{"type":7,"error":"restart","allowReconnect":true}"#).contains("event:reconnecting"))
    }
}

struct HubConnectionReconnectTests {
    /// Lets every reconnect attempt fail at negotiation; returns the times attempts started.
    func attemptTimes(_ policy: ReconnectPolicy, until end: Duration) -> (times: [Int64], transcript: [String]) {
        var harness = HubConnectionHarness { $0.reconnectPolicy = policy }
        harness.connect()
        harness.closed()
        var times: [Int64] = []
        while harness.now < .zero + end, harness.machine.stateName != .suspended {
            guard let deadline = harness.machine.pollTimeout() else { break }
            harness.advance(to: deadline)
            if harness.machine.stateName == .negotiating {
                times.append(harness.now.nanoseconds / 1_000_000_000)
                harness.negotiate(status: 503, body: [])
            }
        }
        return (times, harness.transcript)
    }

    @Test func defaultPolicyTranscript() {
        let result = attemptTimes(.signalRDefault, until: .seconds(100))
        #expect(result.times == [0, 2, 12, 42])
        #expect(
            result.transcript == [
                "negotiate", "open", "send:handshake", "event:connected", "send:ping", "event:connectionlost",
                // Every scheduled attempt is reported (with its number and delay), and every failed one.
                "event:reconnecting", "negotiate", "event:attemptfailed", "event:reconnecting", "negotiate",
                "event:attemptfailed", "event:reconnecting", "negotiate", "event:attemptfailed", "event:reconnecting",
                "negotiate", "event:attemptfailed", "event:suspended",
            ]
        )
    }

    /// When the policy gave up, `reconnectNow` starts a full attempt at once and the back-off
    /// starts over; `stop` ends the suspension with `closed(nil)`.
    @Test func reconnectNowAfterThePolicyGaveUp() {
        var harness = HubConnectionHarness { $0.reconnectPolicy = .delays([.seconds(5), .seconds(7)]) }
        harness.connect()
        harness.closed()
        for _ in 0..<2 {
            harness.advance(by: .seconds(60))
            harness.negotiate(status: 503, body: [])
        }
        #expect(harness.machine.stateName == .suspended)
        #expect(
            harness.events.last.map {
                if case .lifecycle(.suspended(.gaveUp(let error))) = $0 { error.kind == .negotiation } else { false }
            } == true
        )
        #expect(harness.machine.pollTimeout() == nil)  // nothing is retried meanwhile
        harness.machine.reconnectNow(now: harness.now)
        #expect(harness.drain() == ["negotiate"])
        harness.negotiate(status: 503, body: [])
        // The schedule starts over: the first delay again.
        #expect(
            harness.events.last
                == .lifecycle(
                    .reconnecting(
                        attempt: 1,
                        delay: .seconds(5),
                        lastError: HubConnectionError(
                            .negotiation,
                            "Failed to complete negotiation with the server: Status code '503'"
                        )
                    )
                )
        )
        harness.machine.stop(now: harness.now)
        #expect(harness.drain() == ["event:closed"])
        #expect(harness.machine.stateName == .disconnected)
    }

    @Test func tieredPolicy() {
        let tiers = [
            ReconnectPolicy.Tier(attempts: 5, delay: .seconds(3)), .init(attempts: 5, delay: .seconds(9)),
            .init(attempts: 5, delay: .seconds(15)),
        ]
        let stopping = attemptTimes(.tiered(tiers, repeats: false, jitter: .none), until: .seconds(1000))
        #expect(stopping.times == [3, 6, 9, 12, 15, 24, 33, 42, 51, 60, 75, 90, 105, 120, 135])
        #expect(stopping.transcript.last == "event:suspended")
        let repeating = attemptTimes(.tiered(tiers, repeats: true, jitter: .none), until: .seconds(150))
        // After the last tier the schedule starts over with the first one.
        #expect(Array(repeating.times.prefix(17).suffix(3)) == [135, 138, 141])
    }

    @Test func firstStartIsNotRetried() {
        var harness = HubConnectionHarness { $0.reconnectPolicy = .signalRDefault }
        harness.machine.start(now: harness.now)
        harness.drain()
        harness.negotiate(status: 503, body: [])
        #expect(harness.transcript == ["negotiate", "event:attemptfailed", "event:closed"])
    }

    @Test func stopDuringTheDelayCancels() {
        var harness = HubConnectionHarness { $0.reconnectPolicy = .fixed(.seconds(5)) }
        harness.connect()
        harness.closed()
        harness.machine.stop(now: harness.now)
        #expect(harness.drain() == ["event:closed"])
        #expect(harness.machine.pollTimeout() == nil)
        #expect(harness.advance(by: .seconds(60)).isEmpty)
    }

    /// The app re-joins its groups when a new connection after a loss is `connected` (a new
    /// connection id).
    @Test func rejoinGroupsAfterReconnect() throws {
        var harness = HubConnectionHarness { $0.reconnectPolicy = .signalRDefault }
        harness.connect()
        _ = try harness.machine.invoke("AddToGroup", arguments: jsonArguments(#""room-1""#), now: harness.now)
        harness.drain()
        harness.server(#"{"type":3,"invocationId":"0"}"#)
        harness.closed()
        harness.advance(by: .zero)
        harness.negotiate(body: HubConnectionHarness.negotiateBody(connectionId: "conn-2", token: "token-2"))
        harness.opened()
        harness.server("{}")
        let session = try #require(harness.lifecycle.last)
        #expect(session == .connected(HubSession(connectionId: "conn-2", transport: .webSockets)))
        // What an app does on a new connection:
        _ = try harness.machine.invoke("AddToGroup", arguments: jsonArguments(#""room-1""#), now: harness.now)
        harness.drain()
        #expect(
            harness.sentMessages.last
                == .invocation(
                    InvocationMessage(invocationId: "1", target: "AddToGroup", arguments: jsonArguments(#""room-1""#))
                )
        )
        #expect(
            harness.transcript.suffix(7) == [
                "event:reconnecting", "negotiate", "open", "send:handshake", "event:connected", "send:ping",
                "send:invocation",
            ]
        )
    }

    @Test func pendingInvocationsFailOnTheClose() throws {
        var harness = HubConnectionHarness { $0.reconnectPolicy = .signalRDefault }
        harness.connect()
        _ = try harness.machine.invoke("Slow", arguments: jsonArguments(), now: harness.now)
        _ = try harness.machine.stream("Feed", arguments: jsonArguments(), now: harness.now)
        harness.drain()
        harness.closed()
        let lost = HubConnectionError(.connectionLost, "WebSocket closed with an error: connection reset")
        #expect(
            harness.events.suffix(4) == [
                .lifecycle(.connectionLost(lost)),
                .completion(invocationId: "0", result: .failure(.invocationCanceled)),
                .streamCompleted(invocationId: "1", error: .invocationCanceled),
                .lifecycle(.reconnecting(attempt: 1, delay: .zero, lastError: lost)),
            ]
        )
        // Typed: the kind says the connection closed first (not the server's failure).
        #expect(HubConnectionError.invocationCanceled.kind == .canceled)
    }

    @Test func everyScheduledAttemptIsReported() {
        var harness = HubConnectionHarness { $0.reconnectPolicy = .signalRDefault }
        harness.connect()
        harness.closed()
        #expect(
            harness.lifecycle.last
                == .reconnecting(attempt: 1, delay: .zero, lastError: harness.events.last?.reconnectError)
        )
        harness.advance(by: .zero)  // attempt 1 starts: negotiate
        harness.negotiate(status: 503, body: [])
        guard case .lifecycle(.reconnecting(let attempt, let delay, let error)) = harness.events.last else {
            Issue.record("no reconnecting event for the second attempt")
            return
        }
        #expect(attempt == 2 && delay == .seconds(2))
        #expect(error?.message.contains("503") == true)
    }
}

struct HubConnectionStatefulReconnectTests {
    /// Vector 57 (aiosignalr's transcript): replay after a transport loss, duplicates dropped.
    @Test func replayAndDuplicateDrop() throws {
        var harness = HubConnectionHarness { $0.statefulReconnect = true }
        harness.machine.start(now: harness.now)
        harness.drain()
        let url = try #require(harness.actions.last?.negotiateRequest).url
        #expect(url.hasSuffix("negotiateVersion=1&useStatefulReconnect=true"))
        harness.negotiate(body: HubConnectionHarness.negotiateBody(stateful: true))
        harness.opened()
        let handshake = try #require(harness.actions.last?.sentBytes)
        #expect(String(decoding: handshake, as: UTF8.self) == "{\"protocol\":\"json\",\"version\":2}\u{1E}")
        harness.server("{}")
        _ = try harness.machine.invoke("Echo", arguments: jsonArguments(#""a""#), now: harness.now)
        _ = try harness.machine.invoke("Echo", arguments: jsonArguments(#""b""#), now: harness.now)
        harness.drain()
        harness.server(#"{"type":3,"invocationId":"0","result":"a"}"#, #"{"type":3,"invocationId":"1","result":"b"}"#)
        // The client acknowledges about a second later; the server acknowledges too.
        #expect(harness.advance(by: .seconds(1)) == ["send:ack"])
        #expect(harness.sentMessages.last == .ack(sequenceId: 2))
        // Transport lost without Close: reopen the same connection, no negotiate, no handshake.
        // Reported as lost and being reconnected at once, then resumed (nothing to redo).
        #expect(harness.closed() == ["event:connectionlost", "event:reconnecting", "open"])
        let again = try #require(harness.actions.last?.transportRequest).url
        #expect(again == "ws://127.0.0.1:5099/hub?id=token-1")
        // Nothing was acknowledged by the server: Sequence(1) (oldest unacked), then the replay.
        #expect(harness.opened() == ["send:sequence", "send:invocation", "send:invocation", "event:resumed"])
        #expect(harness.sentMessages.suffix(3).first == .sequence(sequenceId: 1))
        // The server resumes at 1 and replays the two completions: both are duplicates.
        let before = harness.events.count
        harness.server(
            #"{"type":9,"sequenceId":1}"#,
            #"{"type":3,"invocationId":"0","result":"a"}"#,
            #"{"type":3,"invocationId":"1","result":"b"}"#
        )
        #expect(harness.events.count == before)
        _ = try harness.machine.invoke("Echo", arguments: jsonArguments(#""c""#), now: harness.now)
        harness.drain()
        #expect(harness.server(#"{"type":3,"invocationId":"2","result":"c"}"#) == ["event:completion"])
        #expect(harness.machine.stateName == .connected)
    }

    @Test func backPressureAndAcks() throws {
        var harness = HubConnectionHarness {
            $0.statefulReconnect = true
            $0.statefulReconnectBufferSize = 200
        }
        harness.connect(stateful: true)
        var sent = 0
        var refusal: HubConnectionError?
        while refusal == nil, sent < 100 {
            let result = Result { () throws(HubConnectionError) in
                try harness.machine.invoke("Echo", arguments: jsonArguments(#""0123456789""#), now: harness.now)
            }
            switch result {
            case .success: sent += 1
            case .failure(let error): refusal = error
            }
        }
        #expect(refusal?.kind == .sendQueueFull)
        // Nor is an upload stream made for an invocation that could not go out (a command waiting
        // for room is tried again and again).
        let upload = Result { () throws(HubConnectionError) in try harness.machine.makeUploadStream(now: harness.now) }
        if case .failure(let error) = upload {
            #expect(error.kind == .sendQueueFull)
        } else {
            Issue.record("an upload stream was made while the buffer is full")
        }
        harness.drain()
        #expect(sent > 1 && sent < 10)
        // Full: at the limit or past it by the last message at most.
        let full = harness.machine.unacknowledgedBytes
        #expect(full >= 200 && full < 200 + full / sent + 1, "\(full) bytes buffered")
        // One message acknowledged makes room (the messages are all the same size).
        #expect(harness.server(#"{"type":8,"sequenceId":1}"#) == ["event:sendbufferavailable"])
        #expect(harness.machine.unacknowledgedBytes == full - full / sent)
        #expect(harness.server(#"{"type":8,"sequenceId":\#(sent)}"#).isEmpty)
        #expect(harness.machine.unacknowledgedBytes == 0)
        // The refused call used no invocation id: ids stay consecutive.
        let next = try harness.machine.invoke("Echo", arguments: jsonArguments(), now: harness.now)
        #expect(next == String(sent))
    }

    /// The live link sits in a shared block copied on write: a copied machine is still a value.
    @Test func copiedMachineIsIndependent() throws {
        var harness = HubConnectionHarness { $0.statefulReconnect = true }
        harness.connect(stateful: true)
        harness.drain()
        let copy = harness.machine
        _ = try harness.machine.invoke("Echo", arguments: jsonArguments(#""x""#), now: harness.now)
        #expect(harness.machine.unacknowledgedBytes > 0)
        #expect(copy.unacknowledgedBytes == 0)
        var other = copy
        _ = try other.invoke("Echo", arguments: jsonArguments(#""yy""#), now: harness.now)
        #expect(other.unacknowledgedBytes > harness.machine.unacknowledgedBytes)
        #expect(copy.unacknowledgedBytes == 0)
    }

    @Test func sequenceGreaterThanReceivedIsFatal() {
        var harness = HubConnectionHarness { $0.statefulReconnect = true }
        harness.connect(stateful: true)
        harness.closed()
        harness.opened()
        harness.server(#"{"type":9,"sequenceId":3}"#)
        #expect(
            harness.events.last
                == .lifecycle(
                    .closed(
                        HubConnectionError(
                            .protocolViolation,
                            "Sequence ID greater than amount of messages we've received."
                        )
                    )
                )
        )
    }

    @Test func statefulNotAskedButGranted() {
        var harness = HubConnectionHarness()
        harness.machine.start(now: harness.now)
        harness.drain()
        harness.negotiate(body: HubConnectionHarness.negotiateBody(stateful: true))
        #expect(
            harness.events.last
                == .lifecycle(
                    .closed(
                        HubConnectionError(
                            .negotiation,
                            "Client didn't negotiate Stateful Reconnect but the server did."
                        )
                    )
                )
        )
    }
}

/// Random input sequences: never a crash, no bytes after a close, every invocation ends once.
struct HubConnectionPropertyTests {
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func randomInputs(_ seed: UInt64) throws {
        var rng = SeededRandomNumberGenerator(seed: seed)
        for _ in 0..<40 {
            var harness = HubConnectionHarness {
                $0.reconnectPolicy = Bool.random(using: &rng) ? .signalRDefault : nil
                $0.statefulReconnect = Bool.random(using: &rng)
                $0.handledTargets = ["Notify"]
            }
            var invoked: Set<String> = []
            var ended: [String: Int] = [:]
            var closedSeen = false
            for _ in 0..<120 {
                let before = harness.actions.count
                // Half of the steps move the connection forward, so that connected states are
                // reached often; the other half are any input at all.
                let progress: Int? =
                    switch harness.machine.stateName {
                    case .disconnected: 0
                    case .negotiating: 2
                    case .connectingTransport: 3
                    case .handshaking: 5
                    default: nil
                    }
                let choice = Bool.random(using: &rng) ? progress : nil
                switch choice ?? Int.random(in: 0..<18, using: &rng) {
                case 0: if harness.machine.stateName == .disconnected { harness.machine.start(now: harness.now) }
                case 1: harness.machine.stop(now: harness.now)
                case 2:
                    harness.machine.negotiateResponse(
                        status: [200, 200, 404][Int.random(in: 0...2, using: &rng)],
                        body: HubConnectionHarness.negotiateBody(stateful: Bool.random(using: &rng)),
                        generation: harness.generation,
                        now: harness.now
                    )
                case 3: harness.machine.transportConnected(generation: harness.generation, now: harness.now)
                case 4:
                    harness.machine.transportClosed(
                        generation: harness.generation,
                        error: Bool.random(using: &rng) ? TransportError(.connectionLost, "reset") : nil,
                        now: harness.now
                    )
                case 5: harness.receiveRaw(Array("{}\u{1E}".utf8))
                case 6:
                    if let id = try? harness.machine.invoke("Echo", arguments: jsonArguments("1"), now: harness.now) {
                        invoked.insert(id)
                    }
                case 7:
                    let id = invoked.randomElement(using: &rng) ?? "0"
                    harness.receiveRaw(Array(#"{"type":3,"invocationId":"\#(id)","result":1}"#.utf8 + [0x1E]))
                case 8:
                    harness.receiveRaw(
                        Array(#"{"type":1,"invocationId":"x","target":"Notify","arguments":[]}"#.utf8 + [0x1E])
                    )
                case 9: harness.receiveRaw(Array(#"{"type":7,"allowReconnect":true}"#.utf8 + [0x1E]))
                case 10:
                    harness.receiveRaw(
                        (0..<Int.random(in: 1...8, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    )
                case 11:
                    harness.receiveRaw(
                        Array(#"{"type":8,"sequenceId":\#(Int.random(in: 0...5, using: &rng))}"#.utf8 + [0x1E])
                    )
                case 12:
                    harness.receiveRaw(
                        Array(#"{"type":9,"sequenceId":\#(Int.random(in: 0...5, using: &rng))}"#.utf8 + [0x1E])
                    )
                case 13: _ = try? harness.machine.stream("Feed", arguments: jsonArguments(), now: harness.now)
                case 14:
                    // A reply that may come late (after a Close or a reconnect) or twice.
                    try? harness.machine.reply(to: "x", result: .void, now: harness.now)
                case 15:
                    let id =
                        Bool.random(using: &rng)
                        ? (try? harness.machine.makeUploadStream(now: harness.now))
                        : String(Int.random(in: 0...9, using: &rng))
                    if let id {
                        try? harness.machine.sendStreamItem(
                            id,
                            item: try EncodedValue(json: Array("1".utf8)),
                            now: harness.now
                        )
                        if Bool.random(using: &rng) { try? harness.machine.completeUploadStream(id, now: harness.now) }
                    }
                default: harness.advance(by: .seconds(Int64.random(in: 0...40, using: &rng)))
                }
                harness.drain()
                for action in harness.actions[before...] {
                    switch action {
                    case .event(.lifecycle(.closed)): closedSeen = true
                    case .request(.negotiate), .openTransport: closedSeen = false
                    case .send:
                        #expect(!closedSeen, "bytes sent after the connection closed")
                    case .event(.completion(let id, _)):
                        ended[id, default: 0] += 1
                    default: break
                    }
                }
            }
            for (id, count) in ended { #expect(count == 1, "invocation \(id) ended \(count) times") }
            // Whatever is still pending ends when the machine stops.
            harness.machine.stop(now: harness.now)
            harness.drain()
            var final: [String: Int] = [:]
            for action in harness.actions {
                if case .event(.completion(let id, _)) = action { final[id, default: 0] += 1 }
            }
            for id in invoked { #expect(final[id] == 1, "invocation \(id) ended \(final[id] ?? 0) times") }
        }
    }
}

extension HubConnectionMachine.Event {
    var reconnectError: HubConnectionError? {
        if case .lifecycle(.reconnecting(_, _, let error)) = self { return error }
        return nil
    }
}

extension HubConnectionScenarioTests {
    /// A resumed WebSocket that is lost again at once with nothing new received (a message the
    /// client cannot take, replayed on every resume, say) is a failed resume: the retry delays
    /// apply, and once they are used up the connection is lost instead of looping. Found by the
    /// real-time soak: a result over the message size limit made an endless loop of resumes.
    @Test func resumesThatFailAtOnceDoNotLoop() {
        var harness = HubConnectionHarness { $0.statefulReconnect = true }
        harness.connect(stateful: true)
        harness.server(#"{"type":1,"target":"Notify","arguments":[]}"#)  // progress: one message
        #expect(harness.closed() == ["event:connectionlost", "event:reconnecting", "open"])
        #expect(harness.opened() == ["send:sequence", "event:resumed"])
        // Lost at once, four times: each waits the next retry delay (0.5, 1, 2, 4 s) first.
        // Each is a new outage (lost after a resume): its first attempt, after the next delay.
        for delay in [500, 1_000, 2_000, 4_000] as [Int64] {
            #expect(harness.closed() == ["event:connectionlost", "event:reconnecting"])
            #expect(
                harness.lifecycle.last
                    == .reconnecting(
                        attempt: 1,
                        delay: .milliseconds(delay),
                        lastError: HubConnectionError(
                            .connectionLost,
                            "WebSocket closed with an error: connection reset"
                        )
                    )
            )
            #expect(harness.machine.stateName == .resuming)
            #expect(harness.advance(by: .milliseconds(delay - 1)) == [])
            #expect(harness.advance(by: .milliseconds(1)) == ["open"])
            #expect(harness.opened() == ["send:sequence", "event:resumed"])
        }
        // The fifth: the connection is lost (no policy: closed).
        let names = harness.closed()
        #expect(names.last == "event:closed")
        #expect(harness.machine.stateName == .disconnected)
    }

    /// A resumed WebSocket that works for a while, or brings something new, resets the count.
    @Test func resumesWithProgressAreNotCounted() {
        var harness = HubConnectionHarness { $0.statefulReconnect = true }
        harness.connect(stateful: true)
        for round in 0..<10 {
            #expect(harness.closed() == ["event:connectionlost", "event:reconnecting", "open"])
            #expect(harness.opened() == ["send:sequence", "event:resumed"])
            // The server resumes after what the client had, and sends one new message.
            harness.server(#"{"type":9,"sequenceId":\#(round + 1)}"#, #"{"type":1,"target":"Notify","arguments":[]}"#)
        }
        #expect(harness.machine.stateName == .connected)
    }
}
