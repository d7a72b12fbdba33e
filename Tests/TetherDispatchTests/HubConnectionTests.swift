import Dispatch
import Foundation
import Testing
import TetherCore
import TetherDispatch
import TetherSignalR
import TetherSignalRClient
import TetherTestServers
import TetherTestSupport

/// `HubConnection` against a real aiosignalr 0.1.1 hub on 127.0.0.1 (started and stopped by each
/// test), directly, through a byte relay the test cuts or stalls, or through a TLS relay.
/// Serialized: the timing tests must not share the two cores with other servers.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.aiosignalr, .opensslCommand)
)
struct HubConnectionTests {
    /// Every transport with every protocol it carries.
    @Test(arguments: [
        (ValueEncoding.json, HubTransport.webSockets), (.messagePack, .webSockets), (.json, .serverSentEvents),
        (.json, .longPolling), (.messagePack, .longPolling),
    ])
    func invokeSendStreamsResultsAndErrors(_ encoding: ValueEncoding, _ transport: HubTransport) async throws {
        let server = try await startedHub()
        let logs = LogRecorder()
        let connection = try HubConnectionBuilder(url: server.url)
            .withHubProtocol(encoding)
            .withTransports(transport)
            .withLogging(.warning, handler: logs.handler)
            .build()
        let lifecycle = LifecycleRecorder(connection)
        let notes = Recorder<String>()
        connection.on("notify") { (text: String) in notes.append(text) }
        connection.onClientResult("Answer") { (question: String) in "answer to \(question)" }
        try await connection.start()
        #expect(await connection.connectionId() != nil)
        #expect(await connection.transport() == transport)

        let echoed: String = try await connection.invoke("Echo", "héllo ✓")
        #expect(echoed == "héllo ✓")
        let sum: Int = try await connection.invoke("Add", 2, 40)
        #expect(sum == 42)

        try await connection.send("NotifyMe", "ping")
        #expect(await notes.wait { $0 == ["ping"] })

        var items: [Int] = []
        for try await item in connection.stream("Counter", 5, of: Int.self) { items.append(item) }
        #expect(items == [0, 1, 2, 3, 4])

        let upload = AsyncStream<Int> { continuation in
            for value in 1...10 { continuation.yield(value) }
            continuation.finish()
        }
        let total: Int = try await connection.invoke("SumStream", upload: upload)
        #expect(total == 55)

        let answer: String = try await connection.invoke("AskClient", "life")
        #expect(answer == "answer to life")

        do {
            try await connection.invoke("Fail", "it broke")
            Issue.record("a failing hub method succeeded")
        } catch {
            #expect(error.kind == .invocationFailed && error.message.contains("it broke"))
        }
        do {
            let _: Int = try await connection.invoke("NoSuchMethod")
            Issue.record("an unknown hub method succeeded")
        } catch {
            #expect(error.kind == .invocationFailed && error.message == "Unknown hub method 'NoSuchMethod'")
        }
        do {
            let _: Int = try await connection.invoke("Echo", "not a number")
            Issue.record("a string decoded as an Int")
        } catch {
            #expect(error.kind == .encoding)
        }

        // A server call of a method nobody handles is logged, never dropped without trace.
        connection.off("Notify")
        try await connection.send("NotifyMe", "unheard")
        #expect(await logs.wait { $0.contains { $0.contains("No client method with the name 'Notify' found.") } })
        #expect(notes.values == ["ping"])

        await connection.stop()
        #expect(
            await lifecycle.wait {
                $0.filter { $0.name != "unhandledInvocation" } == [
                    .lifecycle(
                        .connected(HubSession(connectionId: $0.first?.session?.connectionId, transport: transport))
                    ),
                    .lifecycle(.closed(nil)),
                ]
            }
        )
        // The unhandled call reached the app as an event too.
        #expect(
            lifecycle.events.contains {
                if case .unhandledInvocation(let call) = $0 { call.target == "Notify" } else { false }
            }
        )
        do {
            try await connection.send("Echo", "x")
            Issue.record("sent while stopped")
        } catch {
            #expect(error.kind == .notConnected)
        }

        // Started again, the connection works as new.
        try await connection.start()
        let again: String = try await connection.invoke("Echo", "again")
        #expect(again == "again")
        await connection.stop()
    }

    /// A proxy that refuses WebSocket upgrades (and one that also breaks event streams): the
    /// default connection lands on the next transport; WebSockets alone fails, saying why.
    @Test(arguments: [
        ([TCPRelay.Refusal.webSocketUpgrade], HubTransport.serverSentEvents),
        ([.webSocketUpgrade, .eventStream], .longPolling),
    ])
    func fallsBackThroughAProxyThatRefusesTransports(
        _ refusals: [TCPRelay.Refusal],
        _ expected: HubTransport
    )
        async throws
    {
        let server = try await startedHub()
        let relay = try TCPRelay(upstreamPort: server.port, refusing: Set(refusals))
        let url = "http://127.0.0.1:\(relay.port)/hub"
        let connection = try HubConnectionBuilder(url: url).build()
        let lifecycle = LifecycleRecorder(connection)
        try await connection.start()
        #expect(await connection.transport() == expected)
        let echoed: String = try await connection.invoke("Echo", "through the proxy")
        #expect(echoed == "through the proxy")
        #expect(relay.refusedCount == refusals.count)
        await connection.stop()
        #expect(
            await lifecycle.wait { $0.first?.session?.transport == expected && $0.first?.isConnected == true }
        )

        let webSocketsOnly = try HubConnectionBuilder(url: url).withTransports(.webSockets).build()
        do {
            try await webSocketsOnly.start()
            Issue.record("WebSockets connected through a proxy that refuses them")
        } catch {
            #expect(error.kind == .connectionFailed)
            #expect(
                error.message.hasPrefix(
                    "Unable to connect to the server with any of the available transports. WebSockets failed: "
                ),
                "\(error.message)"
            )
            #expect(error.message.contains("403"), "\(error.message)")
        }
    }

    /// The HTTP transports keep their connections: twenty calls over long polling or Server-Sent
    /// Events open a handful of connections (negotiate, the poll or event stream, the sends), not
    /// one per request.
    @Test(arguments: [HubTransport.longPolling, .serverSentEvents])
    func httpTransportsReuseTheirConnections(_ transport: HubTransport) async throws {
        let server = try await startedHub()
        let relay = try TCPRelay(upstreamPort: server.port)
        let connection = try HubConnectionBuilder(url: "http://127.0.0.1:\(relay.port)/hub")
            .withTransports(transport).build()
        try await connection.start()
        for index in 0..<20 {
            let echoed: String = try await connection.invoke("Echo", "call \(index)")
            #expect(echoed == "call \(index)")
        }
        await connection.stop()
        #expect(relay.acceptedCount <= 5, "\(relay.acceptedCount) connections for 20 calls")
    }

    /// A gateway answering 401 to an expired token, at negotiate or when the transport opens: the
    /// provider is asked once more and the step retried; a provider that keeps returning the
    /// expired token ends with `unauthorized` after two asks, without a loop.
    @Test(arguments: HubTransport.allCases)
    func anExpiredTokenIsReplacedOnce(over transport: HubTransport) async throws {
        let server = try await startedHub()
        for onTransport in [false, true] {
            let relay = try TCPRelay(
                upstreamPort: server.port,
                refusing: [onTransport ? .bearerTokenOnTransport("expired") : .bearerToken("expired")]
            )
            let url = "http://127.0.0.1:\(relay.port)/hub"
            let asked = Recorder<String>()
            let connection = try HubConnectionBuilder(url: url)
                .withTransports(transport)
                .withAccessTokenProvider {
                    let token = asked.values.isEmpty ? "expired" : "fresh"
                    asked.append(token)
                    return token
                }
                .build()
            try await connection.start()
            let echoed: String = try await connection.invoke("Echo", "with a fresh token")
            #expect(echoed == "with a fresh token")
            #expect(asked.values == ["expired", "fresh"])
            #expect(relay.refusedCount == 1)
            await connection.stop()

            let stuck = Recorder<String>()
            let refused = try HubConnectionBuilder(url: url)
                .withTransports(transport)
                .withAccessTokenProvider {
                    stuck.append("expired")
                    return "expired"
                }
                .build()
            do {
                try await refused.start()
                Issue.record("connected with a refused token")
            } catch {
                let step = onTransport ? "opening the \(transport)" : "negotiate"
                #expect(error.kind == .authenticationFailed)
                #expect(
                    error.message
                        == "Unauthorized: the server answered 401 to \(step); a new token from the provider was refused too."
                )
                #expect(!error.message.contains("expired"))
            }
            #expect(stuck.values.count == 2)
        }
    }

    /// From a task on the connection's executor, sends are held until the job ends, but an
    /// invocation whose result the task awaits is written at once, with what was held before it
    /// (the task cannot add to the write before it suspends).
    @Test func anAwaitedInvocationFromTheExecutorIsWrittenAtOnce() async throws {
        let server = try await startedHub()
        let calls = XMPPClientTests.TransportCalls()
        var builder = HubConnectionBuilder(url: server.url)
        builder.options.transportFactory = { request, options, queue, onEvent in
            XMPPClientTests.RecordingTransport(defaultTransportFactory(request, options, queue, onEvent), calls: calls)
        }
        let connection = try builder.build()
        try await connection.start()
        calls.reset()
        calls.executor = connection.executor
        try await withTaskExecutorPreference(connection.executor) {
            try await connection.send("Echo", "held 0")
            let echoed: String = try await connection.invoke("Echo", "answer")
            #expect(echoed == "answer")
        }
        let recorded = calls.reset()
        calls.executor = nil
        let firstFlush = recorded.firstIndex(of: "hold held").flatMap { held in
            recorded[held...].first { $0.hasPrefix("flush") }
        }
        #expect(firstFlush == "flush in job", "\(recorded)")
        await connection.stop()
    }

    /// Two connections to the hub at `url`, both started, reading their sockets as `reading` says.
    static func twoStartedConnections(
        url: String,
        reading: SocketReading
    ) async throws -> (HubConnection, HubConnection) {
        func connection() throws -> HubConnection {
            var builder = HubConnectionBuilder(url: url)
            builder.options.socketReading = reading
            return try builder.build()
        }
        let first = try connection()
        let second = try connection()
        try await first.start()
        try await second.start()
        return (first, second)
    }

    /// Tasks on the connections' executors: with a read thread, each answer resumes its task on
    /// the thread that read it; the calls a task makes on its own connection run on the queue at
    /// once, and calls across (each connection's task calling the other's connection at the same
    /// time) never wait for each other's queue. The same with Dispatch sources (no read thread).
    @Test(arguments: [SocketReading.default, .dispatchSource])
    func callsFromTasksOnTheConnectionsExecutors(reading: SocketReading) async throws {
        let server = try await startedHub()
        let (first, second) = try await Self.twoStartedConnections(url: server.url, reading: reading)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (mine, other) in [(first, second), (second, first)] {
                group.addTask {
                    try await withTaskExecutorPreference(mine.executor) {
                        for index in 0..<50 {
                            let echoed: String = try await mine.invoke("Echo", "call \(index)")
                            #expect(echoed == "call \(index)")
                            if reading != .dispatchSource { #expect(currentThreadName() == "tether.read") }
                            let sum: Int = try await other.invoke("Add", index, 1)
                            #expect(sum == index + 1)
                        }
                        #expect(await mine.state() == .connected)
                        var items: [Int] = []
                        for try await item in mine.stream("Counter", 3, of: Int.self) { items.append(item) }
                        #expect(items == [0, 1, 2])
                    }
                }
            }
            try await group.waitForAll()
        }
        await withTaskExecutorPreference(first.executor) { await first.stop() }
        #expect(await first.state() == .disconnected)
        await second.stop()
    }

    /// Invocations with completions: each completion runs on the connection's queue (with a read
    /// thread, on the thread that read the completion), exactly once, never inside its call; the
    /// next invocation, made from it, goes out at once, and one made on the other connection from
    /// it is answered too. A method that fails ends in `invocationFailed`, a result of another
    /// type in `encoding`, an invocation of a stopped connection in `notConnected`, each also never
    /// inside the call.
    @Test(arguments: [SocketReading.default, .dispatchSource])
    func invocationsWithCompletions(reading: SocketReading) async throws {
        let server = try await startedHub()
        let (first, second) = try await Self.twoStartedConnections(url: server.url, reading: reading)
        let log = CompletionLog()
        @Sendable func record<Value>(_ result: Result<Value, HubConnectionError>) {
            switch result {
            case .success(let value): log.record("\(value)")
            case .failure(let error): log.record(error.kind.rawValue)
            }
        }
        let outcomes: [String] = await withCheckedContinuation { continuation in
            @Sendable func echo(_ index: Int) {
                let returned = log.callStarted()
                first.invoke("Echo", "call \(index)", returning: String.self) { result in
                    log.completed(returned: returned, onReadThread: currentThreadName() == "tether.read")
                    record(result)
                    guard index < 30 else {
                        return second.invoke("Add", index, 1, returning: Int.self) { sum in
                            record(sum)
                            first.invoke("Fail", "on purpose", returning: String.self) { failed in
                                record(failed)
                                first.invoke("Echo", "not a number", returning: Int.self) { mistyped in
                                    record(mistyped)
                                    continuation.resume(returning: log.outcomes)
                                }
                            }
                        }
                    }
                    echo(index + 1)
                }
                returned.set()
            }
            echo(0)
        }
        #expect(outcomes.prefix(31) == ArraySlice((0...30).map { "call \($0)" }))
        #expect(outcomes.dropFirst(31) == ["31", "invocationFailed", "encoding"])
        #expect(log.completedInsideCall == 0)
        if reading != .dispatchSource { #expect(log.offReadThread == 0) }
        await first.stop()
        let stopped: Result<String, HubConnectionError> = await withCheckedContinuation { continuation in
            let returned = log.callStarted()
            first.invoke("Echo", "late", returning: String.self) { result in
                log.completed(returned: returned, onReadThread: true)
                continuation.resume(returning: result)
            }
            returned.set()
        }
        if case .failure(let error) = stopped {
            #expect(error.kind == .notConnected)
        } else {
            Issue.record("\(stopped)")
        }
        #expect(log.completedInsideCall == 0)
        await second.stop()
    }

    /// Invocations with completions into a link that takes nothing: with `backPressure: .fail`
    /// the first that finds the network full gets `sendQueueFull` at once; with the default the
    /// rest wait for room (none fails meanwhile). Once the link is cut, every completion has come,
    /// exactly once.
    @Test(arguments: [BackPressure.fail, .wait])
    func invocationsWithCompletionsIntoAStalledLink(backPressure: BackPressure) async throws {
        let server = try await startedHub()
        let relay = try TCPRelay(upstreamPort: server.port)
        var builder = HubConnectionBuilder(url: "http://127.0.0.1:\(relay.port)/hub").withTransports(.webSockets)
        builder.options.maximumUnsentBytes = 256 * 1024
        builder.options.backPressure = backPressure
        let connection = try builder.build()
        try await connection.start()
        relay.stallAll()
        let payload = String(repeating: "x", count: 64 * 1024)
        let invocations = 400  // 25 MiB: more than the loopback buffers take
        let outcomes = Recorder<(Int, String)>()
        for index in 0..<invocations {
            connection.invoke("Echo", payload, returning: String.self) { result in
                switch result {
                case .success: outcomes.append((index, "answered"))
                case .failure(let error): outcomes.append((index, error.kind.rawValue))
                }
            }
        }
        switch backPressure {
        case .fail:
            #expect(await outcomes.wait { $0.contains { $0.1 == "sendQueueFull" } })
        case .wait:
            let waiting = await eventually { await connection.health().callsWaitingForRoom > 0 }
            #expect(waiting, "no invocation waited for room")
            #expect(outcomes.values.isEmpty, "\(outcomes.values.prefix(3))")
        }
        relay.cutAll()
        #expect(await outcomes.wait(timeout: .seconds(30)) { $0.count >= invocations })
        try await Task.sleep(for: .milliseconds(100))  // no second call
        #expect(outcomes.values.count == invocations)
        #expect(Set(outcomes.values.map(\.0)).count == invocations)
        await connection.stop()
    }

    /// An invocation's completion is called even when the connection is released before the
    /// completion comes (the hub method takes seconds): once, with `notConnected`.
    @Test func aCompletionIsCalledWhenItsConnectionIsReleased() async throws {
        let server = try await startedHub()
        var connection: HubConnection? = try HubConnectionBuilder(url: server.url).build()
        try await connection?.start()
        let calls = Recorder<String>()
        connection?.invoke("Delay", 5.0, returning: String.self) { result in
            switch result {
            case .success(let value): calls.append(value)
            case .failure(let error): calls.append(error.kind.rawValue)
            }
        }
        connection = nil
        #expect(await calls.wait { !$0.isEmpty })
        try await Task.sleep(for: .milliseconds(100))  // no second call
        #expect(calls.values == ["notConnected"])
    }

    /// A link that takes nothing (the relay stalls): sends fill the kernel's buffers (over
    /// WebSockets), then the transport's up to `maximumUnsentBytes` (over long polling, queued
    /// behind the unanswered `POST`); then a send throws `sendQueueFull` naming the network
    /// (`.fail`), or waits (`.wait`) until its task is canceled, and a waiting send ends as soon as
    /// the link is cut.
    @Test(arguments: [HubTransport.webSockets, .longPolling])
    func sendsStopWhileTheNetworkTakesNothing(over transport: HubTransport) async throws {
        let server = try await startedHub()
        let payload = String(repeating: "x", count: 64 * 1024)
        let attempts = 400  // 25 MiB: more than the loopback buffers take
        for backPressure in [BackPressure.fail, .wait] {
            let relay = try TCPRelay(upstreamPort: server.port)
            var builder = HubConnectionBuilder(url: "http://127.0.0.1:\(relay.port)/hub").withTransports(transport)
            builder.options.maximumUnsentBytes = 256 * 1024
            builder.options.backPressure = backPressure
            let connection = try builder.build()
            try await connection.start()
            relay.stallAll()
            let sent = Recorder<Int>()
            let failure = Recorder<HubConnectionError>()
            let sender = Task {
                for index in 0..<attempts {
                    do {
                        try await connection.send("NotifyMe", payload)
                        sent.append(index)
                    } catch let error as HubConnectionError {
                        failure.append(error)
                        return
                    } catch {
                        Issue.record("not a HubConnectionError: \(error)")
                        return
                    }
                }
            }
            let steady = await steadyCount { sent.values.count + failure.values.count }
            #expect(sent.values.count < attempts, "every send went through a stalled link")
            #expect(sent.values.count >= 4, "sent only \(sent.values.count) before stopping")
            // What the transport holds: at most the bound and one message (with its framing).
            let unsent = await connection.health().unsentBytes
            #expect(unsent > 0 && unsent <= 256 * 1024 + 64 * 1024 + 64, "\(unsent) bytes held")
            switch backPressure {
            case .fail:
                #expect(failure.values.first?.kind == .sendQueueFull)
                #expect(failure.values.first?.message.hasPrefix("The network has not taken the ") == true)
            case .wait:
                #expect(failure.values.isEmpty && steady == sent.values.count, "\(failure.values)")
                sender.cancel()
                #expect(await failure.wait { $0.first?.kind == .canceled })
                // Another send waits; cutting the link ends it at once: over a WebSocket with the
                // connection's error, over long polling with the send made on a new connection
                // (each request may open one) or the error.
                let waiting = Task { () -> HubConnectionError? in
                    do {
                        try await connection.send("NotifyMe", payload)
                        return nil
                    } catch {
                        return error as? HubConnectionError
                    }
                }
                let waitsForRoom = await eventually { await connection.health().callsWaitingForRoom == 1 }
                #expect(waitsForRoom, "the second send never waited for room")
                relay.cutAll()
                let error = await waiting.value
                if transport == .webSockets {
                    #expect(error?.kind == .connectionLost, "\(String(describing: error))")
                } else {
                    #expect(error == nil || error?.kind == .connectionLost, "\(String(describing: error))")
                }
            }
            _ = await sender.value
            await connection.stop()
        }
    }

    /// With `retryingFailedStart`, a first `start()` while the hub is down waits through the
    /// policy's attempts and returns once the hub is up (announced as `connected`).
    @Test func aFailedFirstStartIsRetriedWhenAsked() async throws {
        let server = try SignalRHubServer()
        defer { server.stop() }
        let connection = try HubConnectionBuilder(url: server.url)
            .withAutomaticReconnect(.fixed(.milliseconds(300), maximumAttempts: 60), retryingFailedStart: true)
            .build()
        let lifecycle = LifecycleRecorder(connection)
        async let started: Void = connection.start()
        #expect(await lifecycle.wait { $0.contains { $0.isReconnecting } })
        try await server.start()
        try await started
        let echoed: String = try await connection.invoke("Echo", "late")
        #expect(echoed == "late")
        let names = lifecycle.events.map(\.name)
        #expect(names.first == "attemptFailed" && names.dropFirst().first == "reconnecting", "\(names)")
        #expect(names.last == "connected" && names.filter { $0 == "connected" }.count == 1, "\(names)")
        await connection.stop()
    }

    @Test func streamCanceledByTheConsumer() async throws {
        let server = try await startedHub()
        let connection = try HubConnectionBuilder(url: server.url).build()
        try await connection.start()
        var first: [Int] = []
        for try await item in connection.stream("Counter", 100_000, of: Int.self) {
            first.append(item)
            if first.count == 3 { break }
        }
        #expect(first == [0, 1, 2])
        // The connection is still healthy after the cancellation.
        let echoed: String = try await connection.invoke("Echo", "after")
        #expect(echoed == "after")
        await connection.stop()
    }

    /// A stream and an invocation still running when the app stops the connection end with kind
    /// `canceled` (typed from the machine to the app: not `invocationFailed`, the kind a failed
    /// hub method has).
    @Test func callsPendingAtStopEndAsCanceled() async throws {
        let server = try await startedHub()
        let log = Recorder<String>()
        let connection = try HubConnectionBuilder(url: server.url).withLogging(.trace) { _, text in log.append(text) }
            .build()
        try await connection.start()
        let delayed = Task { () throws(HubConnectionError) -> String in try await connection.invoke("Delay", 30.0) }
        #expect(await log.wait { $0.contains { $0.hasPrefix("Sending") && $0.contains("Delay") } })
        var items = 0
        do {
            for try await _ in connection.stream("Counter", 100_000, of: Int.self) {
                items += 1
                if items == 2 { await connection.stop() }
            }
            Issue.record("the stream ended normally")
        } catch let error as HubConnectionError {
            #expect(error.kind == .canceled, "\(error)")
            #expect(error.message == HubConnectionError.invocationCanceled.message)
        }
        let outcome = await delayed.result
        #expect((outcome.failure as? HubConnectionError)?.kind == .canceled, "\(outcome)")
    }

    @Test func serverTimeoutWhenTheServerGoesSilent() async throws {
        let server = try await startedHub()
        let relay = try TCPRelay(upstreamPort: server.port)
        let connection = try HubConnectionBuilder(url: "http://127.0.0.1:\(relay.port)/hub")
            .withServerTimeout(.seconds(3))
            .withKeepAliveInterval(.seconds(1))
            .build()
        let lifecycle = LifecycleRecorder(connection)
        try await connection.start()
        // The server's 1 s keep-alive keeps the connection up past the timeout. (A duration
        // under test, not a wait for something to happen.)
        try await Task.sleep(for: .seconds(4))
        #expect(await connection.state() == .connected)
        relay.stallAll()
        let stalledAt = ContinuousClock.now
        #expect(await lifecycle.wait(timeout: .seconds(8)) { $0.last?.isClosed == true })
        let elapsed = ContinuousClock.now - stalledAt
        #expect(elapsed >= .seconds(2) && elapsed < .seconds(6))
        #expect(lifecycle.events.last == .lifecycle(.closed(HubConnectionError.serverTimeoutForTests)))
    }

    /// The policy gives up while the hub is down: the connection is suspended and tries nothing
    /// more; `reconnectNow()` connects again at once once the hub is back.
    @Test func suspendedWhenThePolicyGivesUpThenReconnectNow() async throws {
        let server = try await startedHub()
        let connection = try HubConnectionBuilder(url: server.url)
            .withAutomaticReconnect(.delays([.zero, .milliseconds(100)]))
            .build()
        let lifecycle = LifecycleRecorder(connection)
        try await connection.start()
        // The hub is gone (its port refuses): both attempts fail, then the policy gives up.
        server.stop()
        #expect(await lifecycle.wait { $0.last?.name == "suspended" }, "\(lifecycle.events)")
        #expect(await connection.state() == .suspended)
        try await server.start()
        connection.reconnectNow()
        #expect(await lifecycle.wait { $0.last?.isConnected == true }, "\(lifecycle.events)")
        let echoed: String = try await connection.invoke("Echo", "back")
        #expect(echoed == "back")
        await connection.stop()
        #expect(
            lifecycle.events.map(\.name) == [
                "connected", "connectionLost", "reconnecting", "attemptFailed", "reconnecting", "attemptFailed",
                "suspended", "connected", "closed",
            ]
        )
    }

    @Test(arguments: HubTransport.allCases)
    func reconnectsAfterTheServerRestartsAndRejoins(over transport: HubTransport) async throws {
        let server = try await startedHub()
        let tokens = Recorder<Int>()
        let connection = try HubConnectionBuilder(url: server.url)
            .withTransports(transport)
            .withAutomaticReconnect(.fixed(.milliseconds(500), maximumAttempts: 40))
            .withAccessTokenProvider {
                tokens.append(tokens.values.count + 1)
                return "token-\(tokens.values.count)"
            }
            .build()
        let lifecycle = LifecycleRecorder(connection)
        let stream = connection.events()
        let notes = Recorder<String>()
        connection.on("Notify") { (text: String) in notes.append(text) }
        let rejoined = Recorder<String>()
        connection.onReconnected { _ in
            Task {
                let group: String = try await connection.invoke("AddToGroup", "lobby")
                rejoined.append(group)
            }
        }
        try await connection.start()
        let joined: String = try await connection.invoke("AddToGroup", "lobby")
        #expect(joined == "lobby")

        server.stop()
        #expect(await lifecycle.wait { $0.contains { $0.isReconnecting } })
        try await server.start()
        #expect(await lifecycle.wait(timeout: .seconds(20)) { $0.filter(\.isConnected).count == 2 })
        #expect(lifecycle.events.filter(\.isConnected).allSatisfy { $0.session?.transport == transport })
        #expect(await rejoined.wait { $0 == ["lobby"] })
        #expect(tokens.values.count >= 2)  // asked again for the new attempt(s)

        // The re-joined group reaches the connection on the new server.
        let sender = try HubConnectionBuilder(url: server.url).build()
        try await sender.start()
        try await sender.invoke("SendToGroup", "lobby", "welcome back")
        #expect(await notes.wait { $0 == ["welcome back"] })
        await sender.stop()
        await connection.stop()
        let names = lifecycle.events.map(\.name)
        #expect(names.first == "connected" && names.last == "closed")
        #expect(names.filter { $0 == "connected" }.count == 2)
        #expect(names.filter { $0 == "connectionLost" }.count == 1)
        // The same lifecycle as an AsyncStream.
        var streamed: [String] = []
        for await event in stream {
            streamed.append(event.name)
            if event.isClosed { break }
        }
        #expect(streamed == names)
    }

    @Test(arguments: [ValueEncoding.json, .messagePack])
    func statefulReconnectSurvivesTwoCutsDuringInvocations(_ encoding: ValueEncoding) async throws {
        let server = try await startedHub()
        let relay = try TCPRelay(upstreamPort: server.port)
        let connection = try HubConnectionBuilder(url: "http://127.0.0.1:\(relay.port)/hub")
            .withHubProtocol(encoding)
            .withStatefulReconnect()
            .build()
        let lifecycle = LifecycleRecorder(connection)
        try await connection.start()
        var results: [Int] = []
        for n in 0..<300 {
            if n == 100 || n == 200 {
                // Cut while this invocation is in flight.
                async let result: Int = connection.invoke("Tally", n)
                relay.cutAll()
                results.append(try await result)
            } else {
                results.append(try await connection.invoke("Tally", n))
            }
        }
        #expect(results == Array(0..<300))
        let tallied: [Int] = try await connection.invoke("Tallied")
        #expect(tallied == Array(0..<300))  // each invocation ran once on the server
        // The negotiate request, the WebSocket, two reopened ones, and more if the hub refused a
        // reopened WebSocket for a moment (it may, under load, until it has seen the old one go).
        #expect(relay.acceptedCount >= 4)
        // Each resume is reported (lost, then resumed: the same connection, nothing to redo); no
        // new connection.
        let names = lifecycle.events.map(\.name)
        #expect(names.first == "connected" && names.filter { $0 == "connected" }.count == 1, "\(names)")
        #expect(names.filter { $0 == "resumed" }.count == names.filter { $0 == "connectionLost" }.count, "\(names)")
        #expect(names.filter { $0 == "resumed" }.count >= 2, "\(names)")
        await connection.stop()
    }

    /// Pinning over wss: the right pin connects (negotiate and WebSocket); a wrong one fails with
    /// `certificateRefused` at once, without a retry even where the policy would retry a start.
    @Test func pinnedPublicKeysOverTLS() async throws {
        let server = try await startedHub()
        let certificates = try TestCertificates()
        let relay = try await TLSRelay(upstreamPort: server.port, certificates: certificates)
        let url = "https://localhost:\(relay.port)/hub"
        let pin = try certificates.publicKeyPin(ofCertificate: certificates.serverCertificate)
        let pinned = try HubConnectionBuilder(url: url).withCAFile(certificates.caCertificate)
            .withPinnedPublicKeys([pin]).build()
        try await pinned.start()
        #expect(await pinned.transport() == .webSockets)
        let echoed: String = try await pinned.invoke("Echo", "pinned")
        #expect(echoed == "pinned")
        await pinned.stop()

        let wrong = try certificates.publicKeyPin(ofCertificate: certificates.otherCertificate)
        let mispinned = try HubConnectionBuilder(url: url).withCAFile(certificates.caCertificate)
            .withPinnedPublicKeys([wrong])
            .withAutomaticReconnect(.fixed(.milliseconds(100), maximumAttempts: 50), retryingFailedStart: true)
            .build()
        let lifecycle = LifecycleRecorder(mispinned)
        do {
            try await mispinned.start()
            Issue.record("connected with a wrong pin")
        } catch {
            #expect(error.kind == .certificateRefused, "\(error)")
            #expect(error.message.contains("no pinned public key matches"), "\(error)")
        }
        #expect(!lifecycle.events.contains { $0.isReconnecting })
    }

    @Test func secureWebSocketThroughATLSRelay() async throws {
        let server = try await startedHub()
        let certificates = try TestCertificates()
        let relay = try await TLSRelay(upstreamPort: server.port, certificates: certificates)
        let url = "https://localhost:\(relay.port)/hub"
        let connection = try HubConnectionBuilder(url: url).withCAFile(certificates.caCertificate).build()
        try await connection.start()
        let echoed: String = try await connection.invoke("Echo", "over TLS")
        #expect(echoed == "over TLS")
        let health = await connection.health()
        #expect(health.transport == "websockets" && health.tlsVersion?.hasPrefix("TLSv1.") == true, "\(health)")
        #expect(health.lastRoundTrip != nil && health.messagesReceived >= 1)
        await connection.stop()

        // The TLS layer is pluggable: a session factory of the app's is used for every connection.
        let names = Recorder<String>()
        let plugged = try HubConnectionBuilder(url: url).withCAFile(certificates.caCertificate)
            .withTLSSessionFactory { configuration in
                names.append(configuration.serverName)
                return try defaultTLSSessionFactory!(configuration)
            }
            .build()
        try await plugged.start()
        let pluggedEcho: String = try await plugged.invoke("Echo", "plugged")
        #expect(pluggedEcho == "plugged")
        await plugged.stop()
        #expect(names.values == ["localhost", "localhost"])  // the negotiate request and the WebSocket

        // Without a TLS layer an https hub cannot be reached (never in cleartext): the connection
        // cannot even be made.
        var options = HubConnection.Options()
        options.tlsSessionFactory = nil
        do {
            _ = try HubConnection(configuration: .init(url: url), options: options)
            Issue.record("made a connection to an https hub without a TLS layer")
        } catch {
            #expect(error.kind == .tlsUnavailable && error.message.contains("tlsSessionFactory"))
        }

        // Without the test CA the certificate is refused.
        let untrusting = try HubConnectionBuilder(url: url).build()
        do {
            try await untrusting.start()
            Issue.record("connected to a server whose CA is not trusted")
        } catch {
            #expect(error.kind == .certificateRefused && error.message.contains("certificate"), "\(error)")
        }
        // Nor does a certificate the CA signed for another name.
        let otherName = try await TLSRelay(
            upstreamPort: server.port,
            certificates: certificates,
            presentsOtherName: true
        )
        let misnamed = try HubConnectionBuilder(url: "https://localhost:\(otherName.port)/hub")
            .withCAFile(certificates.caCertificate).build()
        do {
            try await misnamed.start()
            Issue.record("accepted a certificate for another name")
        } catch {
            #expect(error.kind == .certificateRefused, "\(error)")
        }
    }

    @Test func invocationCanceledByItsTask() async throws {
        let server = try await startedHub()
        let log = Recorder<String>()
        let connection = try HubConnectionBuilder(url: server.url).withLogging(.trace) { _, text in log.append(text) }
            .build()
        try await connection.start()
        let slow = Task { () throws(HubConnectionError) -> String in try await connection.invoke("Delay", 2.0) }
        // The invocation is on its way.
        #expect(await log.wait { $0.contains { $0.hasPrefix("Sending ") && $0.contains(#""target":"Delay""#) } })
        let canceledAt = ContinuousClock.now
        slow.cancel()
        do {
            _ = try await slow.value
            Issue.record("a canceled invocation completed")
        } catch {
            #expect((error as? HubConnectionError)?.kind == .canceled, "\(error)")
        }
        #expect(ContinuousClock.now - canceledAt < .seconds(1))  // at once, not when the hub answers
        // The connection goes on; the late completion is dropped (the hub runs one call at a time).
        let late: String = try await connection.invoke("Delay", 0.01)
        #expect(late == "done")
        await connection.stop()
    }

    /// Invocations whose tasks are canceled at any moment of their life (before the call, while
    /// the invocation is on its way, as the completion arrives; from ordinary tasks and from tasks
    /// on the connection's executor) each end exactly once, completed or `canceled`, and the
    /// connection goes on (as `XMPPClientTests.requestsCanceledAtAnyMomentEndExactlyOnce`).
    @Test func invocationsCanceledAtAnyMomentEndExactlyOnce() async throws {
        let server = try await startedHub()
        let connection = try HubConnectionBuilder(url: server.url).build()
        try await connection.start()
        // Canceled before the call: never sent, `canceled`.
        for _ in 0..<50 {
            let task = Task { () async throws -> String in
                withUnsafeCurrentTask { $0?.cancel() }
                return try await connection.invoke("Echo", "never")
            }
            do {
                _ = try await task.value
                Issue.record("an invocation whose task was canceled before the call completed")
            } catch {
                #expect((error as? HubConnectionError)?.kind == .canceled, "\(error)")
            }
        }
        // Canceled 0–220 µs after the task starts, around a round trip on loopback.
        var completed = 0
        var canceled = 0
        for round in 0..<300 {
            let onExecutor = round % 2 == 1
            let task = Task { () async throws -> String in
                if onExecutor {
                    return try await withTaskExecutorPreference(connection.executor) {
                        try await connection.invoke("Echo", "r\(round)")
                    }
                }
                return try await connection.invoke("Echo", "r\(round)")
            }
            usleep(UInt32(round % 12) * 20)
            task.cancel()
            do {
                #expect(try await task.value == "r\(round)")
                completed += 1
            } catch {
                #expect((error as? HubConnectionError)?.kind == .canceled, "\(error)")
                canceled += 1
            }
        }
        // The rounds canceled with no delay cannot all lose to a round trip: the cancel path ran.
        #expect(canceled > 0, "\(completed) completed, \(canceled) canceled")
        let echoed: String = try await connection.invoke("Echo", "after")
        #expect(echoed == "after")
        await connection.stop()
    }

    /// A send waiting for room in a full stateful-reconnect buffer (the link stalled, so no ack
    /// comes) throws `canceled` at once when its task is canceled, and never reaches the server:
    /// once the link is cut and the connection resumed, the hub has every send before it, once,
    /// and not the canceled one.
    @Test func sendWaitingForRoomCanceledByItsTask() async throws {
        let server = try await startedHub()
        let relay = try TCPRelay(upstreamPort: server.port)
        let log = Recorder<String>()
        let connection = try HubConnectionBuilder(url: "http://127.0.0.1:\(relay.port)/hub")
            .withStatefulReconnect(bufferSize: 1_000)
            .withLogging(.debug) { _, text in log.append(text) }
            .build()
        let lifecycle = LifecycleRecorder(connection)
        try await connection.start()
        relay.stallAll()
        // Tally(n) records n on the hub (Tallied() returns the record).
        let sending = Task { () -> (sent: Int, error: (any Error)?) in
            for n in 1...100 {
                do {
                    try await connection.send("Tally", n)
                } catch {
                    return (n - 1, error)
                }
            }
            return (100, nil)
        }
        #expect(await log.wait { $0.contains { $0.contains("a command waits for room") } })
        let canceledAt = ContinuousClock.now
        sending.cancel()
        let (sent, error) = await sending.value
        #expect((error as? HubConnectionError)?.kind == .canceled, "\(String(describing: error))")
        #expect(sent < 100)
        #expect(ContinuousClock.now - canceledAt < .seconds(1))
        // Cut the stalled link: the connection resumes and replays what the hub never acknowledged.
        relay.cutAll()
        let tallied: [Int] = try await connection.invoke("Tallied")
        #expect(tallied == Array(1...sent), "sent \(sent), the hub has \(tallied)")
        // Resumed, not a new connection: one `connected`, and each loss followed by `resumed`.
        let names = lifecycle.events.map(\.name)
        #expect(names.filter { $0 == "connected" }.count == 1, "\(names)")
        #expect(names.contains("resumed") && !names.contains("closed"), "\(names)")
        await connection.stop()
    }

    @Test func skippingNegotiation() async throws {
        let server = try await startedHub()
        let relay = try TCPRelay(upstreamPort: server.port)
        let connection = try HubConnectionBuilder(url: "ws://127.0.0.1:\(relay.port)/hub")
            .withSkipNegotiation()
            .build()
        try await connection.start()
        #expect(await connection.connectionId() == nil)  // no negotiation, no id
        let echoed: String = try await connection.invoke("Echo", "direct")
        #expect(echoed == "direct")
        #expect(relay.acceptedCount == 1)  // the WebSocket only
        await connection.stop()
    }

    @Test func startCanceledByItsTask() async throws {
        // A server that accepts and never answers: the negotiate request hangs.
        let silent = try SilentListener()
        let connection = try HubConnectionBuilder(url: "http://127.0.0.1:\(silent.port)/hub").build()
        let starting = Task { try await connection.start() }
        // The negotiate request is out and unanswered.
        #expect(await eventually { await connection.state() == .negotiating })
        starting.cancel()
        do {
            try await starting.value
            Issue.record("a canceled start connected")
        } catch {
            #expect((error as? HubConnectionError)?.kind == .canceled, "\(error)")
        }
        #expect(await connection.state() == .disconnected)
    }

    /// A negotiate request that is never answered, or a WebSocket upgrade that is never answered,
    /// ends the attempt at the machine's `connectTimeout` instead of hanging it.
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func hungAttemptEndsAtConnectTimeout(skippingNegotiation: Bool) async throws {
        let silent = try SilentListener()
        var builder = HubConnectionBuilder(url: "http://127.0.0.1:\(silent.port)/hub")
            .withConnectTimeout(.milliseconds(300))
        if skippingNegotiation { builder = builder.withSkipNegotiation() }
        let connection = try builder.build()
        let started = ContinuousClock.now
        do {
            try await connection.start()
            Issue.record("connected to a server that never answers")
        } catch {
            #expect(error.kind == .connectTimeout, "\(error)")
            #expect(error.message.contains(skippingNegotiation ? "the WebSocket to open" : "the negotiate response"))
        }
        // Well before anything else could have ended it (the TCP connect timeout is 10 s).
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(await connection.state() == .disconnected)
    }

    @Test func startFailsCleanlyWhenNothingListens() async throws {
        let port = try freeLoopbackPort()
        let connection = try HubConnectionBuilder(url: "http://127.0.0.1:\(port)/hub").build()
        do {
            try await connection.start()
            Issue.record("connected to a closed port")
        } catch {
            #expect(error.kind == .connectionFailed, "\(error)")
            #expect(error.message.hasPrefix("Failed to complete negotiation with the server: "), "\(error)")
        }
        #expect(await connection.state() == .disconnected)
    }

    /// Handlers, results and stream items read a type by its fast path for the connection's
    /// encoding when it has one (the types reach the connection as `Decodable`, so the path is
    /// chosen at run time), and by `Codable` otherwise.
    @Test(arguments: [ValueEncoding.json, .messagePack])
    func typesWithAFastPathAreReadByIt(_ encoding: ValueEncoding) async throws {
        let server = try await startedHub()
        let connection = try HubConnectionBuilder(url: server.url).withHubProtocol(encoding).build()
        let notes = Recorder<String>()
        connection.on("notify") { (note: PathMarked) in notes.append("\(note.text) by \(note.path)") }
        connection.on("notify") { (note: CodableMarked) in notes.append("\(note.text) by \(note.path)") }
        try await connection.start()
        try await connection.send("NotifyMe", "ping")
        #expect(await notes.wait { Set($0) == ["ping by fast", "ping by codable"] })
        let echoed: PathMarked = try await connection.invoke("Echo", "héllo")
        #expect(echoed.text == "héllo" && echoed.path == "fast")
        let codable: CodableMarked = try await connection.invoke("Echo", "héllo")
        #expect(codable.text == "héllo" && codable.path == "codable")
        var items: [String] = []
        for try await item in connection.stream("Counter", 2, of: PathMarkedNumber.self) {
            items.append("\(item.value) by \(item.path)")
        }
        #expect(items == ["0 by fast", "1 by fast"])
        await connection.stop()
        server.stop()
    }

    private func startedHub() async throws -> SignalRHubServer {
        let server = try SignalRHubServer()
        try await server.start()
        return server
    }
}

extension HubConnectionError {
    static let serverTimeoutForTests = HubConnectionError(
        .serverTimeout,
        "Server timeout elapsed without receiving a message from the server."
    )
}

extension HubConnection.Event {
    /// The lifecycle change's name (`connected`, `resumed`, `connectionLost`, `attemptFailed`,
    /// `reconnecting`, `waitingForNetwork`, `suspended`, `closed`), or `unhandledInvocation`.
    var name: String {
        switch self {
        case .lifecycle(.connected): "connected"
        case .lifecycle(.resumed): "resumed"
        case .lifecycle(.connectionLost): "connectionLost"
        case .lifecycle(.attemptFailed): "attemptFailed"
        case .lifecycle(.reconnecting): "reconnecting"
        case .lifecycle(.waitingForNetwork): "waitingForNetwork"
        case .lifecycle(.suspended): "suspended"
        case .lifecycle(.closed): "closed"
        case .unhandledInvocation: "unhandledInvocation"
        }
    }
    /// The session of a `connected` or `resumed` event.
    var session: HubSession? {
        switch self {
        case .lifecycle(.connected(let session)), .lifecycle(.resumed(let session)): session
        default: nil
        }
    }
    var isClosed: Bool { name == "closed" }
    var isReconnecting: Bool { name == "reconnecting" }
    var isConnected: Bool { name == "connected" }
}

/// Values appended from any thread; waits for a condition on them.
final class Recorder<Value: Sendable>: @unchecked Sendable {
    // `stored` is guarded by `lock`.
    private let lock = NSLock()
    private var stored: [Value] = []

    func append(_ value: Value) {
        lock.withLock { stored.append(value) }
    }

    var values: [Value] { lock.withLock { stored } }

    /// Waits until `condition` holds (polling), or `timeout`; true if it held.
    func wait(timeout: Duration = .seconds(10), _ condition: ([Value]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(values) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition(values)
    }
}

/// A connection's lifecycle events.
final class LifecycleRecorder: Sendable {
    private let recorder = Recorder<HubConnection.Event>()

    init(_ connection: HubConnection) {
        connection.setEventHandler(queue: DispatchQueue(label: "lifecycle")) { [recorder] event in
            recorder.append(event)
        }
    }

    var events: [HubConnection.Event] { recorder.values }

    func wait(
        timeout: Duration = .seconds(10),
        _ condition: ([HubConnection.Event]) -> Bool
    ) async -> Bool {
        await recorder.wait(timeout: timeout, condition)
    }
}

/// Log lines.
final class LogRecorder: Sendable {
    private let recorder = Recorder<String>()

    var handler: @Sendable (LogLevel, String) -> Void {
        { [recorder] level, text in recorder.append("\(level): \(text)") }
    }

    var lines: [String] { recorder.values }

    func wait(timeout: Duration = .seconds(10), _ condition: ([String]) -> Bool) async -> Bool {
        await recorder.wait(timeout: timeout, condition)
    }
}

extension HubConnectionTests {
    /// `withMaximumMessageSize` bounds what the hub may send: a result over the limit ends the
    /// connection with an error (the call fails, nothing hangs); a small one still arrives.
    @Test func maximumMessageSizeBoundsWhatTheHubSends() async throws {
        let server = try SignalRHubServer()
        try await server.start()
        let connection = try HubConnectionBuilder(url: server.url).withMaximumMessageSize(200).build()
        try await connection.start()
        let small: String = try await connection.invoke("Echo", "fits")
        #expect(small == "fits")
        await expectThrows(\HubConnectionError.kind, .canceled) {
            let _: String = try await connection.invoke("Echo", String(repeating: "x", count: 400))
        }
        await connection.stop()
    }
}

extension Result {
    /// The error, if it failed.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// A string read by the fast path of either encoding ("fast") or by `Codable` ("codable").
struct PathMarked: Decodable, JSONDecodable, MessagePackDecodable, Sendable {
    var text: String
    var path: String

    init(from decoder: any Decoder) throws {
        text = try decoder.singleValueContainer().decode(String.self)
        path = "codable"
    }

    init(json reader: inout JSONReader) throws {
        text = try reader.readString()
        path = "fast"
    }

    init(messagePack reader: inout MessagePackReader) throws {
        text = try reader.readString()
        path = "fast"
    }
}

/// A string with no fast path.
struct CodableMarked: Decodable, Sendable {
    var text: String
    var path = "codable"

    init(from decoder: any Decoder) throws {
        text = try decoder.singleValueContainer().decode(String.self)
    }
}

/// An integer read by the fast path of either encoding, or by `Codable`.
struct PathMarkedNumber: Decodable, JSONDecodable, MessagePackDecodable, Sendable {
    var value: Int
    var path: String

    init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(Int.self)
        path = "codable"
    }

    init(json reader: inout JSONReader) throws {
        value = try reader.readInteger(Int.self)
        path = "fast"
    }

    init(messagePack reader: inout MessagePackReader) throws {
        value = try reader.readInteger(Int.self)
        path = "fast"
    }
}
