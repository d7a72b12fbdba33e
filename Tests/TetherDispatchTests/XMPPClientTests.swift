import Dispatch
import Foundation
import Testing
import TetherCore
import TetherTestServers
import TetherXML
import TetherXMPP
import TetherXMPPClient

@testable import TetherDispatch

/// `XMPPClient` against a real prosody on 127.0.0.1 (started and stopped by each test), through
/// a byte relay where a test cuts or stalls the link. Serialized: the timing tests must not
/// share the two cores with other servers.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.prosody)
)
struct XMPPClientTests {
    /// Each mechanism logs in, binds the resource asked for, and carries a stanza both ways.
    @Test(arguments: [
        ("internal_hashed", SASLMechanism.scramSHA1), ("internal_plain", .scramSHA1), ("internal_plain", .scramSHA256),
    ])
    func scramLogin(authentication: String, mechanism: SASLMechanism) async throws {
        let server = try await startedProsody(authentication: authentication)
        var configuration = testConfiguration("alice", port: server.port, resource: "login")
        configuration.mechanisms = [mechanism]
        let client = try XMPPClient(configuration: configuration)
        #expect(try await client.connect() == JID("alice@localhost/login"))
        try await expectRoundTrip(client, jid: JID("alice@localhost/login")!)
        await client.disconnect()
    }

    /// A message to the client's own full JID comes back through the server: the session is
    /// really online.
    func expectRoundTrip(_ client: XMPPClient, jid: JID) async throws {
        let events = EventRecorder(client)
        let body = "round trip \(UInt32.random(in: 0...UInt32.max))"
        try await client.send(XMPPMessage(to: jid, body: body))
        #expect(await events.wait { _ in events.bodies.contains(body) }, "no round trip for \(jid)")
    }

    @Test func plainIsRefusedOnCleartextUnlessAllowed() async throws {
        let server = try await startedProsody()
        var configuration = testConfiguration("alice", port: server.port)
        configuration.mechanisms = [.plain]
        let refused = try XMPPClient(configuration: configuration)
        do {
            try await refused.connect()
            Issue.record("PLAIN was used on a cleartext stream")
        } catch {
            #expect(error.kind == .noAcceptableMechanism)
        }
        configuration.allowPlainOnCleartext = true
        let allowed = try XMPPClient(configuration: configuration)
        let jid = try await allowed.connect()
        #expect(jid.bare == JID("alice@localhost"))
        try await expectRoundTrip(allowed, jid: jid)
        await allowed.disconnect()
    }

    @Test func bindWithAndWithoutResource() async throws {
        let server = try await startedProsody()
        let named = try XMPPClient(
            configuration: testConfiguration("alice", port: server.port, resource: "tether-test")
        )
        #expect(try await named.connect() == JID("alice@localhost/tether-test"))
        let chosen = try XMPPClient(configuration: testConfiguration("bob", port: server.port))
        let jid = try await chosen.connect()
        #expect(jid.bare == JID("bob@localhost") && (jid.resourcepart?.isEmpty == false))
        await named.disconnect()
        await chosen.disconnect()
    }

    @Test func wrongPasswordFailsOnceWithoutRetrying() async throws {
        let server = try await startedProsody()
        let relay = try TCPRelay(upstreamPort: server.port)
        let client = try XMPPClient(configuration: testConfiguration("alice", port: relay.port, password: "wrong"))
        do {
            try await client.connect()
            Issue.record("logged in with a wrong password")
        } catch {
            #expect(error.kind == .authenticationFailed && error.saslCondition == "not-authorized")
            #expect(!error.message.contains("wrong"))
        }
        // Stopped (idle), not waiting to reconnect: no second attempt is scheduled.
        #expect(await client.state() == .disconnected)
        #expect(relay.acceptedCount == 1)
    }

    @Test func connectAndRequestCanceledByTheirTasks() async throws {
        // connect: a server that accepts and never answers, so the attempt hangs.
        let silent = try SilentListener()
        let hanging = try XMPPClient(configuration: testConfiguration("alice", port: silent.port))
        let connecting = Task { try await hanging.connect() }
        // Our stream header is out and unanswered: the attempt hangs.
        #expect(await eventually { await hanging.state() == .openingStream })
        connecting.cancel()
        do {
            _ = try await connecting.value
            Issue.record("a canceled connect went online")
        } catch {
            #expect((error as? XMPPClientError)?.kind == .canceled, "\(error)")
        }
        #expect(await hanging.state() == .disconnected)

        // request: bob handles the namespace and never answers.
        let server = try await startedProsody()
        let alice = try XMPPClient(configuration: testConfiguration("alice", port: server.port, resource: "a"))
        var bobConfiguration = testConfiguration("bob", port: server.port, resource: "b")
        bobConfiguration.handledIQNamespaces = ["urn:example:never"]
        let bob = try XMPPClient(configuration: bobConfiguration)
        let aliceEvents = EventRecorder(alice)
        let bobEvents = EventRecorder(bob)
        try await alice.connect()
        try await bob.connect()
        let payload = XElement(XMLName("query", namespace: "urn:example:never"))
        let asking = Task { try await alice.request(.get(payload, to: JID("bob@localhost/b"))) }
        // Bob has the request (and never answers it).
        #expect(await bobEvents.wait { $0.contains { if case .iqRequest = $0 { true } else { false } } })
        let canceledAt = ContinuousClock.now
        asking.cancel()
        do {
            _ = try await asking.value
            Issue.record("a canceled request was answered")
        } catch {
            #expect((error as? XMPPClientError)?.kind == .canceled, "\(error)")
        }
        // At once, not at the 30 s iq timeout (the bound leaves room for a loaded machine running
        // the other suites: 1 s was missed by 15 ms once).
        #expect(ContinuousClock.now - canceledAt < .seconds(5))
        // The client goes on.
        _ = try await alice.ping()
        #expect(!aliceEvents.events.contains { if case .iqResponse = $0 { true } else { false } })
        await alice.disconnect()
        await bob.disconnect()
    }

    /// Requests whose tasks are canceled at any moment of their life (before the call, while the
    /// request is on its way, as the answer arrives; from ordinary tasks and from tasks on the
    /// client's executor) each end exactly once, answered or `canceled`; the answers to canceled
    /// ones never reach the app as events, and the client goes on.
    @Test func requestsCanceledAtAnyMomentEndExactlyOnce() async throws {
        let server = try await startedProsody()
        let client = try XMPPClient(configuration: testConfiguration("alice", port: server.port, resource: "race"))
        let events = EventRecorder(client)
        try await client.connect()
        // Canceled before the call: never sent, `canceled`.
        for _ in 0..<50 {
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await client.request(.ping(to: nil))
            }
            do {
                _ = try await task.value
                Issue.record("a request whose task was canceled before the call was answered")
            } catch {
                #expect((error as? XMPPClientError)?.kind == .canceled, "\(error)")
            }
        }
        // Canceled 0–220 µs after the task starts, around a round trip on loopback.
        var answered = 0
        var canceled = 0
        for round in 0..<300 {
            let onExecutor = round % 2 == 1
            let task = Task {
                if onExecutor {
                    return try await withTaskExecutorPreference(client.executor) {
                        try await client.request(.ping(to: nil))
                    }
                }
                return try await client.request(.ping(to: nil))
            }
            usleep(UInt32(round % 12) * 20)
            task.cancel()
            do {
                _ = try await task.value
                answered += 1
            } catch {
                #expect((error as? XMPPClientError)?.kind == .canceled, "\(error)")
                canceled += 1
            }
        }
        // The rounds canceled with no delay cannot all lose to a round trip: the cancel path ran.
        #expect(canceled > 0, "\(answered) answered, \(canceled) canceled")
        // The server answers in order: once this is answered, every earlier answer has come.
        _ = try await client.ping()
        #expect(!events.events.contains { if case .iqResponse = $0 { true } else { false } })
        await client.disconnect()
    }

    @Test func messageRosterAndPings() async throws {
        let server = try await startedProsody()
        let alice = try XMPPClient(configuration: testConfiguration("alice", port: server.port, resource: "a"))
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port, resource: "b"))
        let bobEvents = EventRecorder(bob)
        let aliceEvents = EventRecorder(alice)
        try await alice.connect()
        try await bob.connect()
        #expect(await aliceEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        // A message alice → bob.
        try await alice.send(XMPPMessage(to: JID("bob@localhost/b"), body: "hello bob", id: "m1"))
        #expect(await bobEvents.wait { _ in bobEvents.bodies == ["hello bob"] })
        let message = bobEvents.events.compactMap { if case .message(let m) = $0 { m } else { nil } }.first
        #expect(message?.from == JID("alice@localhost/a") && message?.id == "m1")
        // Roster: empty at first; add bob (the push arrives as an event, since alice asked for
        // the roster, RFC 6121 §2.1.6), fetch it back.
        #expect(try await alice.fetchRoster().items.isEmpty)
        _ = try await alice.request(
            RosterQuery.update(RosterItem(jid: JID("bob@localhost")!, name: "Bob", groups: ["Friends"]))
        )
        #expect(await aliceEvents.wait { $0.contains { if case .rosterPush = $0 { true } else { false } } })
        let roster = try await alice.fetchRoster()
        #expect(roster.items.map(\.jid) == [JID("bob@localhost")!])
        #expect(roster.items.first?.name == "Bob" && roster.items.first?.groups == ["Friends"])
        // Ping the server: a round trip.
        let rtt = try await alice.ping()
        #expect(rtt > .zero && rtt < .seconds(5))
        // A ping to alice (relayed by the server) is answered by alice's machine.
        let answer = try await bob.request(.ping(to: JID("alice@localhost/a")))
        #expect(answer.type == .result)
        await alice.disconnect()
        await bob.disconnect()
        #expect(aliceEvents.events.last == .lifecycle(.closed(nil)))
    }

    /// alice (resource `a`) and bob (resource `b`), both connected, reading their sockets as
    /// `reading` says.
    static func connectedAliceAndBob(port: Int, reading: SocketReading) async throws -> (XMPPClient, XMPPClient) {
        var options = XMPPClient.Options()
        options.socketReading = reading
        let alice = try XMPPClient(
            configuration: testConfiguration("alice", port: port, resource: "a"),
            options: options
        )
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: port, resource: "b"), options: options)
        try await alice.connect()
        try await bob.connect()
        return (alice, bob)
    }

    /// Tasks on the clients' executors: with a read thread, each answer resumes its task on the
    /// thread that read it; a task's requests on its own client run on the queue at once, and
    /// requests across (alice's task pinging through bob's client while bob's pings through
    /// alice's) never wait for each other's queue. The same with Dispatch sources.
    @Test(arguments: [SocketReading.default, .dispatchSource])
    func requestsFromTasksOnTheClientsExecutors(reading: SocketReading) async throws {
        let server = try await startedProsody()
        let (alice, bob) = try await Self.connectedAliceAndBob(port: server.port, reading: reading)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (mine, other, peer) in [(alice, bob, "alice@localhost/a"), (bob, alice, "bob@localhost/b")] {
                group.addTask {
                    try await withTaskExecutorPreference(mine.executor) {
                        for _ in 0..<30 {
                            let rtt = try await mine.ping()
                            #expect(rtt > .zero)
                            if reading != .dispatchSource { #expect(currentThreadName() == "tether.read") }
                            // The other client asks this one's full JID: the server relays it, and this
                            // client's machine answers (while this task waits on the other's queue).
                            let answer = try await other.request(.ping(to: JID(peer)))
                            #expect(answer.type == .result)
                        }
                        #expect(await mine.state() == .connected)
                    }
                }
            }
            try await group.waitForAll()
        }
        await withTaskExecutorPreference(alice.executor) { await alice.disconnect() }
        #expect(await alice.state() == .disconnected)
        await bob.disconnect()
    }

    /// Requests with completions: each completion runs on the client's queue (with a read thread,
    /// on the thread that read the answer), exactly once, never inside its call; the next
    /// request, made from it, goes out at once, and one made on the other client from it (through
    /// that client's queue) is answered too. An error reply ends in `iqError`, a request of a
    /// stopped client in `notConnected`, also never inside the call.
    @Test(arguments: [SocketReading.default, .dispatchSource])
    func requestsWithCompletions(reading: SocketReading) async throws {
        let server = try await startedProsody()
        let (alice, bob) = try await Self.connectedAliceAndBob(port: server.port, reading: reading)
        let log = CompletionLog()
        let outcomes: [String] = await withCheckedContinuation { continuation in
            @Sendable func ping(_ index: Int) {
                let returned = log.callStarted()
                alice.request(.ping(to: nil)) { result in
                    log.completed(returned: returned, onReadThread: currentThreadName() == "tether.read")
                    log.record(result.map { "\($0.type)" })
                    guard index < 30 else {
                        // Across: bob's client, from alice's queue, asks alice's full JID.
                        return bob.request(.ping(to: JID("alice@localhost/a"))) { answer in
                            log.record(answer.map { "across \($0.type)" })
                            // An error reply: nobody is at this full JID.
                            alice.request(.ping(to: JID("bob@localhost/nobody"))) { error in
                                log.record(error.map { "\($0.type)" })
                                continuation.resume(returning: log.outcomes)
                            }
                        }
                    }
                    ping(index + 1)
                }
                returned.set()
            }
            ping(0)
        }
        #expect(outcomes.prefix(31) == ArraySlice(repeating: "result", count: 31))
        #expect(outcomes.dropFirst(31) == ["across result", "iqError"])
        #expect(log.completedInsideCall == 0)
        if reading != .dispatchSource { #expect(log.offReadThread == 0) }
        await alice.disconnect()
        let stopped: Result<XMPPIQ, XMPPClientError> = await withCheckedContinuation { continuation in
            let returned = log.callStarted()
            alice.request(.ping(to: nil)) { result in
                log.completed(returned: returned, onReadThread: true)
                continuation.resume(returning: result)
            }
            returned.set()
        }
        #expect(throws: XMPPClientError.self) { try stopped.get() }
        if case .failure(let error) = stopped { #expect(error.kind == .notConnected) }
        #expect(log.completedInsideCall == 0)
        await bob.disconnect()
    }

    /// One input answers a request made with a completion and carries a message too: the
    /// completion runs right after the input, and the message reaches the app's handler without
    /// waiting for another input (the input's drive finishes, handing on its events and arming
    /// the timer, once the completion's job ends).
    @Test func anInputsEventsReachTheAppWhenACompletionFollowsIt() async throws {
        let server = try await startedProsody()
        let merging = MergedInputs()
        var options = XMPPClient.Options()
        options.transportFactory = { request, options, queue, onEvent in
            defaultTransportFactory(request, options, queue, merging.merging(onEvent))
        }
        // Nothing else arrives or fires meanwhile: no stream management, auto-ping or idle timer.
        var configuration = testConfiguration("alice", port: server.port, resource: "a")
        configuration.streamManagement = nil
        configuration.autoPing = nil
        configuration.releaseBuffersAfterIdle = nil
        let alice = try XMPPClient(configuration: configuration, options: options)
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port, resource: "b"))
        let events = EventRecorder(alice)
        try await alice.connect()
        try await bob.connect()
        merging.holdNextMessage()
        try await bob.send(XMPPMessage(to: JID("alice@localhost/a"), body: "with the answer"))
        #expect(await merging.wait { $0.holding })
        let completed = Recorder<Bool>()
        alice.request(.ping(to: nil)) { result in
            completed.append((try? result.get()) != nil)
        }
        #expect(await completed.wait { !$0.isEmpty })
        #expect(completed.values == [true])
        #expect(merging.merged.count == 1)
        #expect(merging.merged.first.map { $0.contains("<message") && $0.contains("type='result'") } == true)
        #expect(await events.wait(timeout: .seconds(5)) { _ in events.bodies == ["with the answer"] })
        await alice.disconnect()
        await bob.disconnect()
    }

    /// Keeps back the first input that carries a `<message` (once asked to) and hands it on
    /// with the next input, as one.
    final class MergedInputs: @unchecked Sendable {
        // Guarded by `lock`.
        private let lock = NSLock()
        private var armed = false
        private var held: [UInt8]?
        private var mergedTexts: [String] = []

        struct State { var holding: Bool }

        func holdNextMessage() { lock.withLock { armed = true } }
        var merged: [String] { lock.withLock { mergedTexts } }

        func wait(_ condition: (State) -> Bool) async -> Bool {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                if condition(State(holding: lock.withLock { held != nil })) { return true }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return false
        }

        func merging(_ onEvent: @escaping (TransportEvent) -> Void) -> (TransportEvent) -> Void {
            { [self] event in
                guard case .received(let bytes) = event else { return onEvent(event) }
                let passed: [UInt8]? = lock.withLock {
                    if let earlier = held {
                        held = nil
                        mergedTexts.append(String(decoding: earlier + bytes, as: UTF8.self))
                        return earlier + bytes
                    }
                    if armed, String(decoding: bytes, as: UTF8.self).contains("<message") {
                        armed = false
                        held = bytes
                        return nil
                    }
                    return bytes
                }
                if let passed { onEvent(.received(passed)) }
            }
        }
    }

    /// Alice connected through a relay with stream management on and a queue of 3 stanzas, the
    /// link then stalled: what she sends gets no acknowledgement until `relay.cutAll()`. (The
    /// server and the relay are returned to be kept for the test's length.)
    static func stalledWithAShortQueue(
        _ resource: String,
        backPressure: BackPressure
    ) async throws -> (ProsodyServer, TCPRelay, XMPPClient) {
        let server = try await startedProsody()
        let relay = try TCPRelay(upstreamPort: server.port)
        var configuration = testConfiguration("alice", port: relay.port, resource: resource)
        configuration.maximumQueuedStanzas = 3
        let alice = try XMPPClient(configuration: configuration, options: .init(backPressure: backPressure))
        let events = EventRecorder(alice)
        try await alice.connect()
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        relay.stallAll()
        return (server, relay, alice)
    }

    /// Requests with completions into a full queue (three stanzas, the link stalled so that no
    /// acknowledgement comes): with `backPressure: .fail` the fourth's completion gets
    /// `sendQueueFull`; with the default it waits for room, and once the link is cut and the
    /// session resumed, every request is answered, in order.
    @Test(arguments: [BackPressure.fail, .wait])
    func requestsWithCompletionsIntoAFullQueue(backPressure: BackPressure) async throws {
        let (server, relay, alice) = try await Self.stalledWithAShortQueue("full", backPressure: backPressure)
        defer { withExtendedLifetime(server) {} }
        let outcomes = Recorder<String>()
        for index in 1...5 {
            alice.request(.ping(to: nil)) { result in
                switch result {
                case .success: outcomes.append("\(index) answered")
                case .failure(let error): outcomes.append("\(index) \(error.kind.rawValue)")
                }
            }
        }
        switch backPressure {
        case .fail:
            // (A stanza sent before the stall may still wait for its acknowledgement, taking a
            // place: the last two at least fail, at once.) The failures' completions were queued
            // on the client's queue before this call: they have all run when it returns.
            _ = await alice.health()
            let failed = outcomes.values
            #expect(failed.count >= 2)
            let sent = 5 - failed.count
            #expect(failed == (sent + 1...5).map { "\($0) sendQueueFull" })
            relay.cutAll()
            #expect(await outcomes.wait(timeout: .seconds(30)) { $0.count == 5 })
            #expect(outcomes.values.dropFirst(failed.count) == ArraySlice((1...sent).map { "\($0) answered" }))
        case .wait:
            let waiting = await alice.health().callsWaitingForRoom
            #expect(waiting >= 2, "\(waiting) requests wait for room")
            #expect(outcomes.values.isEmpty)
            relay.cutAll()
            #expect(await outcomes.wait(timeout: .seconds(30)) { $0.count == 5 })
            #expect(outcomes.values == (1...5).map { "\($0) answered" })
        }
        await alice.disconnect()
    }

    /// Requests from tasks into a full queue (as `requestsWithCompletionsIntoAFullQueue`): with
    /// `backPressure: .fail` the ones that find no room throw `sendQueueFull` at once, the rest are
    /// answered once the link is cut and the session resumed; with the default they wait for room,
    /// one whose task is canceled while it waits throws `canceled` at once (and is never sent),
    /// and every other is answered after the cut.
    @Test(arguments: [BackPressure.fail, .wait])
    func requestsFromTasksIntoAFullQueue(backPressure: BackPressure) async throws {
        let (server, relay, alice) = try await Self.stalledWithAShortQueue("full-tasks", backPressure: backPressure)
        defer { withExtendedLifetime(server) {} }
        let outcomes = Recorder<String>()
        func start(_ index: Int) -> Task<Void, Never> {
            Task {
                do throws(XMPPClientError) {
                    _ = try await alice.request(.ping(to: nil))
                    outcomes.append("\(index) answered")
                } catch {
                    outcomes.append("\(index) \(error.kind.rawValue)")
                }
            }
        }
        let tasks = (1...5).map(start)
        func waiting() async -> Int { await alice.health().callsWaitingForRoom }
        switch backPressure {
        case .fail:
            #expect(await outcomes.wait { $0.count >= 2 })
            let failed = outcomes.values
            #expect(failed.allSatisfy { $0.hasSuffix(" sendQueueFull") }, "\(failed)")
            relay.cutAll()
            #expect(await outcomes.wait(timeout: .seconds(30)) { $0.count == 5 })
            #expect(outcomes.values.filter { $0.hasSuffix(" answered") }.count == 5 - failed.count)
        case .wait:
            let deadline = ContinuousClock.now + .seconds(10)
            while await waiting() < 2 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            let before = await waiting()
            #expect(before >= 2, "\(before) requests wait for room")
            let sixth = start(6)
            while await waiting() <= before && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(outcomes.values.isEmpty)
            sixth.cancel()
            #expect(await outcomes.wait { $0 == ["6 canceled"] })
            relay.cutAll()
            #expect(await outcomes.wait(timeout: .seconds(30)) { $0.count == 6 })
            #expect(Set(outcomes.values) == Set((1...5).map { "\($0) answered" } + ["6 canceled"]))
        }
        for task in tasks { await task.value }
        await alice.disconnect()
    }

    /// A request's completion is called even when the client is released before the answer
    /// comes (the link stalled): once, with `notConnected`, on the client's queue.
    @Test func aCompletionIsCalledWhenItsClientIsReleased() async throws {
        let server = try await startedProsody()
        let relay = try TCPRelay(upstreamPort: server.port)
        var client: XMPPClient? = try XMPPClient(configuration: testConfiguration("alice", port: relay.port))
        try await client?.connect()
        relay.stallAll()
        let calls = Recorder<String>()
        client?.request(.ping(to: nil)) { result in
            switch result {
            case .success: calls.append("answered")
            case .failure(let error): calls.append(error.kind.rawValue)
            }
        }
        client = nil
        #expect(await calls.wait { !$0.isEmpty })
        try await Task.sleep(for: .milliseconds(100))  // no second call
        #expect(calls.values == ["notConnected"])
        relay.cutAll()
    }

    /// The sends a task on the client's executor makes before it next waits are held by the
    /// transport and written together when its job ends (`Transport.hold`, then one `flush`); an
    /// ordinary task's sends go out one by one. Every message arrives, in order.
    @Test func sendsFromATaskOnTheExecutorLeaveTogether() async throws {
        let server = try await startedProsody()
        let calls = TransportCalls()
        var options = XMPPClient.Options()
        options.transportFactory = { request, options, queue, onEvent in
            RecordingTransport(defaultTransportFactory(request, options, queue, onEvent), calls: calls)
        }
        let alice = try XMPPClient(
            configuration: testConfiguration("alice", port: server.port, resource: "a"),
            options: options
        )
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port, resource: "b"))
        let events = EventRecorder(bob)
        try await bob.connect()
        try await alice.connect()
        let target = JID("bob@localhost/b")!

        calls.reset()
        try await withTaskExecutorPreference(alice.executor) {
            for index in 0..<20 { try await alice.send(XMPPMessage(to: target, body: "held \(index)")) }
        }
        // The client's own traffic (its catch-up query, answers) may come between: only the test's
        // messages are counted. The flush comes when the task's job ends, which may be after the
        // task went on past the block (until it next waits).
        _ = await eventually { calls.peek().last == "flush" }
        let held = calls.reset()
        #expect(held.filter { $0 == "hold held" }.count == 20, "\(held)")
        #expect(held.lastIndex(of: "hold held").map { held[($0 + 1)...].contains("flush") } == true, "\(held)")
        #expect(!held.contains("send held"), "\(held)")

        // A request: the task waits for its answer, so what the job held goes out with the
        // request at once, while the job still runs, not when the task has suspended.
        calls.reset()
        calls.executor = alice.executor
        try await withTaskExecutorPreference(alice.executor) {
            try await alice.send(XMPPMessage(to: target, body: "held 20"))
            _ = try await alice.request(.ping(to: nil))
        }
        let requested = calls.reset()
        calls.executor = nil
        let firstFlush = requested.firstIndex(of: "hold held").flatMap { held in
            requested[held...].first { $0.hasPrefix("flush") }
        }
        #expect(firstFlush == "flush in job", "\(requested)")

        for index in 0..<5 { try await alice.send(XMPPMessage(to: target, body: "sent \(index)")) }
        let sent = calls.reset()
        #expect(sent.filter { $0 == "send sent" }.count == 5 && !sent.contains("hold sent"), "\(sent)")

        let expected = (0..<21).map { "held \($0)" } + (0..<5).map { "sent \($0)" }
        #expect(await events.wait { _ in events.bodies.count >= expected.count })
        #expect(events.bodies == expected)
        await alice.disconnect()

        // Held bytes count as unsent: with room for fewer than a burst's, a send waits, the job
        // ends, what was held is written, and the waiting send goes on (nothing else arrives to
        // retry it: no stream management, no answer).
        var small = XMPPClient.Options()
        small.maximumUnsentBytes = 1_000
        var quiet = testConfiguration("alice", port: server.port, resource: "small")
        quiet.streamManagement = nil
        let limited = try XMPPClient(configuration: quiet, options: small)
        try await limited.connect()
        let started = ContinuousClock.now
        try await withTaskExecutorPreference(limited.executor) {
            for index in 0..<100 { try await limited.send(XMPPMessage(to: target, body: "limited \(index)")) }
        }
        // A liveness bound, not a speed target: without the retry the sends stall until the
        // client's own keepalive ping (about 70 s here).
        #expect(ContinuousClock.now - started < .seconds(15), "a send waiting for room stalled")
        #expect(await events.wait { _ in events.bodies.count >= expected.count + 100 })
        #expect(events.bodies.dropFirst(expected.count).elementsEqual((0..<100).map { "limited \($0)" }))
        await limited.disconnect()
        await bob.disconnect()
    }

    /// The calls a runner makes on its transports, in order: "send", "hold" (followed by " held" or
    /// " sent" when the bytes are one of the test's messages, named by its body) and "flush".
    final class TransportCalls: @unchecked Sendable {
        private let lock = NSLock()
        private var calls: [String] = []
        /// When set, a `flush` made while a job of this executor runs is recorded as
        /// "flush in job" (read on the executor's queue, where the flag is kept).
        var executor: ConnectionExecutor? {
            get { lock.withLock { storedExecutor } }
            set { lock.withLock { storedExecutor = newValue } }
        }
        private var storedExecutor: ConnectionExecutor?

        func record(_ call: String, _ bytes: [UInt8] = []) {
            let text = String(decoding: bytes, as: UTF8.self)
            // (A hub invocation's argument, `"held …"`, counts as held too.)
            let held = text.contains("<body>held ") || text.contains("\"held ")
            let kind = held ? " held" : text.contains("<body>sent ") ? " sent" : ""
            lock.withLock { calls.append(call + kind) }
        }

        /// The calls so far.
        func peek() -> [String] { lock.withLock { calls } }

        /// The calls so far; the record starts again.
        @discardableResult
        func reset() -> [String] {
            lock.withLock {
                defer { calls.removeAll() }
                return calls
            }
        }
    }

    /// A transport that records the runner's `send`, `hold` and `flush` and passes them on.
    final class RecordingTransport: Transport {
        let inner: any Transport
        let calls: TransportCalls

        init(_ inner: any Transport, calls: TransportCalls) {
            self.inner = inner
            self.calls = calls
        }

        func start() { inner.start() }
        func send(_ bytes: [UInt8]) {
            calls.record("send", bytes)
            inner.send(bytes)
        }
        func hold(_ bytes: [UInt8]) {
            calls.record("hold", bytes)
            inner.hold(bytes)
        }
        func flush() {
            calls.record(calls.executor?.isRunningJob == true ? "flush in job" : "flush")
            inner.flush()
        }
        func startTLS(serverName: String, bufferedBytes: [UInt8]) {
            inner.startTLS(serverName: serverName, bufferedBytes: bufferedBytes)
        }
        func close() { inner.close() }
        var unsentByteCount: Int { inner.unsentByteCount }
        var tlsVersion: String? { inner.tlsVersion }
        var channelBindings: TLSChannelBindings { inner.channelBindings }
    }

    /// A link that takes nothing (the relay stalls): stanzas fill the kernel's buffers, then the
    /// transport's up to `maximumUnsentBytes` (long before stream management's 1,000 stanzas);
    /// then a send throws `sendQueueFull` naming the network (`.fail`), or waits (`.wait`) until
    /// its task is canceled. Cut, the link is resumed and sending goes on.
    @Test(arguments: [BackPressure.fail, .wait])
    func sendsStopWhileTheNetworkTakesNothing(backPressure: BackPressure) async throws {
        let server = try await startedProsody()
        let relay = try TCPRelay(upstreamPort: server.port)
        var options = XMPPClient.Options()
        options.maximumUnsentBytes = 256 * 1024
        options.backPressure = backPressure
        let client = try XMPPClient(configuration: testConfiguration("alice", port: relay.port), options: options)
        let events = EventRecorder(client)
        try await client.connect()
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        relay.stallAll()
        let body = String(repeating: "x", count: 64 * 1024)
        let attempts = 400  // 25 MiB: more than the loopback buffers take
        let sent = Recorder<Int>()
        let failure = Recorder<XMPPClientError>()
        let sender = Task {
            for index in 0..<attempts {
                do throws(XMPPClientError) {
                    try await client.send(XMPPMessage(to: JID("bob@localhost"), body: body))
                    sent.append(index)
                } catch {
                    failure.append(error)
                    return
                }
            }
        }
        let steady = await steadyCount { sent.values.count + failure.values.count }
        #expect(sent.values.count < attempts, "every send went through a stalled link")
        #expect(sent.values.count >= 4, "sent only \(sent.values.count) before stopping")
        // What the transport holds: at most the bound and one stanza.
        let unsent = await client.health().unsentBytes
        #expect(unsent > 0 && unsent <= 256 * 1024 + 64 * 1024 + 256, "\(unsent) bytes held")
        switch backPressure {
        case .fail:
            #expect(failure.values.first?.kind == .sendQueueFull)
            #expect(failure.values.first?.message.hasPrefix("The network has not taken the ") == true)
        case .wait:
            #expect(failure.values.isEmpty && steady == sent.values.count, "\(failure.values)")
            sender.cancel()
            #expect(await failure.wait { $0.first?.kind == .canceled })
        }
        _ = await sender.value
        // Cut: the client reconnects through the relay (which relays new connections), resumes
        // (sending again what the server never acknowledged), and sends on: once the network has
        // taken that, with `.fail`.
        relay.cutAll()
        #expect(
            await events.wait(timeout: .seconds(30)) {
                $0.contains { if case .lifecycle(.resumed) = $0 { true } else { false } }
            }
        )
        let deadline = ContinuousClock.now + .seconds(30)
        var sentAfterwards = false
        while !sentAfterwards {
            do throws(XMPPClientError) {
                try await client.send(XMPPMessage(to: JID("bob@localhost"), body: "after the stall"))
                sentAfterwards = true
            } catch {
                guard error.kind == .sendQueueFull, backPressure == .fail, ContinuousClock.now < deadline else {
                    throw error
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        await client.disconnect()
    }

    /// The link under alice (sending) and the link under bob (receiving) are cut while 200
    /// messages flow: both resume, and bob gets every message exactly once, in order.
    @Test func linkCutsDuringTrafficLoseNothing() async throws {
        let server = try await startedProsody()
        let aliceRelay = try TCPRelay(upstreamPort: server.port)
        let bobRelay = try TCPRelay(upstreamPort: server.port)
        let alice = try XMPPClient(configuration: testConfiguration("alice", port: aliceRelay.port, resource: "a"))
        var bobConfiguration = testConfiguration("bob", port: bobRelay.port, resource: "b")
        bobConfiguration.streamManagement = .init(requestAckAfterStanzas: 5, requestAckAfter: .milliseconds(200))
        let bob = try XMPPClient(configuration: bobConfiguration)
        let aliceEvents = EventRecorder(alice)
        let bobEvents = EventRecorder(bob)
        try await bob.connect()
        try await alice.connect()
        #expect(await aliceEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        #expect(await bobEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        for n in 1...200 {
            try await alice.send(XMPPMessage(to: JID("bob@localhost/b"), body: "message \(n)"))
            if n == 70 { aliceRelay.cutAll() }
            if n == 140 { bobRelay.cutAll() }
            if n % 20 == 0 { try await Task.sleep(for: .milliseconds(20)) }
        }
        try await alice.flush()
        // A last message after all of them: once it is in, any duplicate would be in too.
        try await alice.send(XMPPMessage(to: JID("bob@localhost/b"), body: "end"))
        let expected = (1...200).map { "message \($0)" } + ["end"]
        let complete = await bobEvents.wait(timeout: .seconds(20)) { _ in bobEvents.bodies.contains("end") }
        #expect(complete, "bob got \(Set(bobEvents.bodies).count) of 201")
        #expect(bobEvents.bodies == expected)
        #expect(aliceEvents.events.contains { $0.isResumed })
        #expect(bobEvents.events.contains { $0.isResumed })
        #expect(!aliceEvents.events.contains { if case .unacknowledgedStanzas = $0 { true } else { false } })
        await alice.disconnect()
        await bob.disconnect()
    }

    /// A plain loop of sends through a small stream-management queue loses nothing: each send
    /// waits for room (the default back-pressure) instead of throwing `sendQueueFull`.
    @Test func sendsWaitForRoomInTheQueue() async throws {
        let server = try await startedProsody()
        var aliceConfiguration = testConfiguration("alice", port: server.port, resource: "a")
        aliceConfiguration.maximumQueuedStanzas = 10
        let alice = try XMPPClient(configuration: aliceConfiguration)
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port, resource: "b"))
        let bobEvents = EventRecorder(bob)
        try await bob.connect()
        try await alice.connect()
        for n in 1...300 {
            try await alice.send(XMPPMessage(to: JID("bob@localhost/b"), body: "m\(n)"))
        }
        let expected = (1...300).map { "m\($0)" }
        #expect(await bobEvents.wait(timeout: .seconds(20)) { _ in bobEvents.bodies.count >= 300 })
        #expect(bobEvents.bodies == expected)
        await alice.disconnect()
        await bob.disconnect()
    }

    /// With `backPressure: .fail` a full queue throws `sendQueueFull` at once; with the default, a
    /// send waiting for room whose task is canceled throws `canceled` and never reaches the server.
    @Test func fullQueueFailsFastOrWaitsCancelably() async throws {
        let server = try await startedProsody()
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port, resource: "b"))
        let bobEvents = EventRecorder(bob)
        try await bob.connect()

        let relay = try TCPRelay(upstreamPort: server.port)
        var configuration = testConfiguration("alice", port: relay.port, resource: "fails")
        configuration.maximumQueuedStanzas = 3
        let failing = try XMPPClient(configuration: configuration, options: .init(backPressure: .fail))
        let failingEvents = EventRecorder(failing)
        try await failing.connect()
        #expect(await failingEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        relay.stallAll()  // no acknowledgement comes back
        do {
            for n in 1...4 { try await failing.send(XMPPMessage(to: JID("bob@localhost/b"), body: "f\(n)")) }
            Issue.record("four sends into a queue of three")
        } catch {
            #expect(error.kind == .sendQueueFull)
        }
        relay.cutAll()
        await failing.disconnect()

        // The default: a send into the full queue waits; canceled, it is dropped.
        let log = TrafficLog()
        let stalling = try TCPRelay(upstreamPort: server.port)
        configuration.endpoint = Endpoint(host: "127.0.0.1", port: stalling.port)
        configuration.resource = "waits"
        let debug = Recorder<String>()
        let waiting = try XMPPClient(
            configuration: configuration,
            options: .init(logLevel: .trace) { level, line in
                log.handler(level, line)
                debug.append(line)
            }
        )
        let waitingEvents = EventRecorder(waiting)
        try await waiting.connect()
        #expect(await waitingEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        stalling.stallAll()
        let sent = Recorder<Int>()
        let sending = Task {
            for n in 1...10 {
                try await waiting.send(XMPPMessage(to: JID("bob@localhost/b"), body: "w\(n)"))
                sent.append(n)
            }
        }
        // One waits (the client asked for an acknowledgement to make room).
        #expect(await debug.wait { $0.contains { $0.contains("a send waits for room") } })
        sending.cancel()
        do {
            try await sending.value
            Issue.record("ten sends into a queue of three")
        } catch {
            #expect((error as? XMPPClientError)?.kind == .canceled, "\(error)")
        }
        let delivered = sent.values.map { "w\($0)" }
        #expect(delivered.count < 3)
        // Cut the stalled link: the session resumes and the queued messages arrive; the canceled
        // one never does.
        stalling.cutAll()
        #expect(await waitingEvents.wait { $0.contains { $0.isResumed } })
        try await waiting.send(XMPPMessage(to: JID("bob@localhost/b"), body: "end"))
        #expect(await bobEvents.wait { _ in bobEvents.bodies.contains("end") })
        // (The failing client's first message may have slipped through before its stall.)
        #expect(bobEvents.bodies.filter { !$0.hasPrefix("f") } == delivered + ["end"])
        await waiting.disconnect()
        await bob.disconnect()
    }

    /// A flush waiting for an acknowledgement that cannot come (the link stalled) throws
    /// `canceled` at once when its task is canceled.
    @Test func flushCanceledByItsTask() async throws {
        let server = try await startedProsody()
        let relay = try TCPRelay(upstreamPort: server.port)
        var configuration = testConfiguration("alice", port: relay.port)
        // No acknowledgement request of its own: the only <r/> is the flush's.
        configuration.streamManagement = .init(requestAckAfterStanzas: 1000, requestAckAfter: .seconds(600))
        let log = TrafficLog()
        let client = try XMPPClient(
            configuration: configuration,
            options: .init(logLevel: .trace, logHandler: log.handler)
        )
        let events = EventRecorder(client)
        try await client.connect()
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        relay.stallAll()
        try await client.send(XMPPMessage(to: JID("bob@localhost"), body: "never acknowledged"))
        let flushing = Task { try await client.flush() }
        // The flush asked for an acknowledgement: it is waiting for one.
        #expect(
            await eventually {
                log.entries.contains { $0.direction == .sent && $0.text.contains("<r xmlns='urn:xmpp:sm:3'") }
            }
        )
        let canceledAt = ContinuousClock.now
        flushing.cancel()
        do {
            try await flushing.value
            Issue.record("a flush through a stalled link returned")
        } catch {
            #expect((error as? XMPPClientError)?.kind == .canceled, "\(error)")
        }
        #expect(ContinuousClock.now - canceledAt < .seconds(5))  // at once, on a loaded machine too
        await client.disconnect()
    }

    /// A stalled link (nothing forwarded, nothing closed) is noticed by auto-ping within
    /// interval + N × timeout of the last byte, and the session resumes on a new connection.
    @Test func stalledLinkIsDetectedAndResumed() async throws {
        let server = try await startedProsody()
        let relay = try TCPRelay(upstreamPort: server.port)
        var configuration = testConfiguration("alice", port: relay.port)
        configuration.autoPing = .init(interval: .seconds(1), timeout: .milliseconds(500), maximumMissed: 2)
        let client = try XMPPClient(configuration: configuration)
        let events = EventRecorder(client)
        try await client.connect()
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        try await expectStallFoundByPingsAndResumed(relay, events)
        await client.disconnect()
    }

    /// The server stops: attempts follow the policy (connection refused each time) until it is
    /// back; the session could not survive the restart, so a new one starts.
    @Test func serverRestartReconnectsOnSchedule() async throws {
        let server = try await startedProsody()
        var configuration = testConfiguration("alice", port: server.port)
        configuration.reconnectPolicy = .fixed(.milliseconds(300), maximumAttempts: 30)
        let client = try XMPPClient(configuration: configuration)
        let events = EventRecorder(client)
        try await client.connect()
        #expect(await events.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        server.stop()
        #expect(await events.wait { $0.contains { $0.isDisconnected } })
        // A few attempts are refused while the server is down.
        #expect(
            await events.wait {
                $0.filter { if case .lifecycle(.attemptFailed) = $0 { true } else { false } }.count >= 3
            }
        )
        try await server.start()
        #expect(await events.wait(timeout: .seconds(15)) { $0.filter(\.isConnected).count == 2 })
        let attempts = events.events.compactMap {
            if case .lifecycle(.reconnecting(let attempt, let delay, _)) = $0 { (attempt, delay) } else { nil }
        }
        #expect(attempts.count >= 3)
        #expect(attempts.map(\.0) == Array(1...attempts.count))
        #expect(attempts.allSatisfy { $0.1 == .milliseconds(300) })
        // Attempts were about 300 ms apart (refused at once while the server was down).
        let times = events.timedEvents.filter { if case .lifecycle(.attemptFailed) = $0.event { true } else { false } }
            .map(
                \.time
            )
        for (earlier, later) in zip(times, times.dropFirst()) {
            let gap = Duration.nanoseconds(Int64(later - earlier))
            #expect(gap >= .milliseconds(280) && gap <= .milliseconds(1500), "gap \(gap)")
        }
        #expect(events.events.contains(.resumeFailed(.itemNotFound)))
        await client.disconnect()
    }

    @Test func trafficLogHidesCredentials() async throws {
        let server = try await startedProsody()
        let log = TrafficLog()
        var configuration = testConfiguration("alice", port: server.port)
        configuration.mechanisms = [.plain]
        configuration.allowPlainOnCleartext = true
        let client = try XMPPClient(
            configuration: configuration,
            options: .init(logLevel: .trace, logHandler: log.handler)
        )
        try await client.connect()
        await client.disconnect()
        let sent = log.entries.filter { $0.direction == .sent }.map(\.text).joined()
        #expect(sent.contains("<stream:stream"))
        #expect(sent.contains("mechanism='PLAIN'>[") && sent.contains(" bytes of credentials not shown]</auth>"))
        let plain = Base64.encode([0] + Array("alice".utf8) + [0] + Array("alicepass".utf8))
        #expect(!sent.contains(plain) && !sent.contains("alicepass"))
        #expect(log.entries.contains { $0.direction == .received && $0.text.contains("<success") })
    }
}

/// The XML traffic a client logs at `trace` ("Sending …", "Received …").
final class TrafficLog: @unchecked Sendable {
    struct Entry: Sendable {
        enum Direction: Sendable { case sent, received }
        var direction: Direction
        var text: String
    }

    // Guarded by `lock`.
    private let lock = NSLock()
    private var stored: [Entry] = []

    /// The handler to pass as `Options.logHandler` (with `logLevel: .trace`).
    var handler: LogHandler {
        { [self] _, line in
            let entry: Entry? =
                if line.hasPrefix("Sending ") {
                    Entry(direction: .sent, text: String(line.dropFirst("Sending ".count)))
                } else if line.hasPrefix("Received ") {
                    Entry(direction: .received, text: String(line.dropFirst("Received ".count)))
                } else {
                    nil
                }
            if let entry { lock.withLock { stored.append(entry) } }
        }
    }

    var entries: [Entry] {
        lock.withLock { stored }
    }
}
