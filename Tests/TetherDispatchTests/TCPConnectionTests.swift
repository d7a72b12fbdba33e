import Dispatch
import Foundation
import Testing
import TetherCore
import TetherTestServers

@_spi(TetherInternal) @testable import TetherDispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `TCPConnection`'s connecting (RFC 8305, Happy Eyeballs) on loopback: an address that
/// swallows the connect, one that refuses it, one that accepts.
@Suite(.timeLimit(.minutes(1)))
struct TCPConnectionTests {
    /// The events of one connection, with the time each came.
    final class Recorder: @unchecked Sendable {
        // `events` is guarded by `lock`.
        private let lock = NSLock()
        private var events: [(time: ContinuousClock.Instant, event: String)] = []

        func record(_ event: TCPConnection.Event) {
            let text =
                switch event {
                case .connected: "connected"
                case .received: "received"
                case .drained: "drained"
                case .closed(let error): "closed: \(error ?? "end")"
                }
            lock.withLock { events.append((ContinuousClock.now, text)) }
        }

        /// How many events came.
        var count: Int { lock.withLock { events.count } }

        /// The first event, once there is one (or nil after `timeout`).
        func first(timeout: Duration = .seconds(20)) async -> (time: ContinuousClock.Instant, event: String)? {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if let first = lock.withLock({ events.first }) { return first }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return nil
        }
    }

    static func address(_ port: Int) throws -> SocketAddress {
        guard case .success(let addresses) = SocketAddress.resolve(host: "127.0.0.1", port: port) else {
            throw TestServerError("cannot resolve 127.0.0.1")
        }
        return addresses[0]
    }

    /// A port nothing listens on (connects are refused at once).
    static func refusingPort() throws -> Int {
        try freeLoopbackPort()
    }

    static func connect(
        _ addresses: [SocketAddress],
        connectTimeout: Duration = .seconds(10),
        attemptDelay: Duration = TCPConnection.defaultAttemptDelay
    ) -> (TCPConnection, Recorder, ContinuousClock.Instant, DispatchQueue) {
        let queue = DispatchQueue(label: "tether.test-tcp")
        let recorder = Recorder()
        let connection = TCPConnection(
            endpoint: Endpoint(host: "test.invalid", port: 1),
            queue: queue,
            connectTimeout: connectTimeout,
            attemptDelay: attemptDelay,
            maximumReadSize: 4096
        ) { recorder.record($0) }
        let start = ContinuousClock.now
        queue.async { connection.connect(to: addresses) }
        return (connection, recorder, start, queue)
    }

    @Test func anAddressThatSwallowsTheConnectCostsOneAttemptDelay() async throws {
        let swallowing = try SwallowingListener()
        let (listener, port) = try boundLoopbackSocket(listening: true)
        defer { close(listener) }
        let (connection, recorder, start, _) = Self.connect([try Self.address(swallowing.port), try Self.address(port)])
        let first = await recorder.first()
        #expect(first?.event == "connected")
        let elapsed = (first?.time ?? start) - start
        // The second address is tried 250 ms after the first, not after its 10 s timeout.
        #expect(elapsed >= .milliseconds(200) && elapsed < .seconds(3), "connected after \(elapsed)")
        connection.close()
    }

    @Test func aRefusedAddressIsFollowedAtOnce() async throws {
        let (listener, port) = try boundLoopbackSocket(listening: true)
        defer { close(listener) }
        // A long attempt delay: only the refusal can start the second attempt early.
        let (connection, recorder, start, _) = Self.connect(
            [try Self.address(Self.refusingPort()), try Self.address(port)],
            attemptDelay: .seconds(5)
        )
        let first = await recorder.first()
        #expect(first?.event == "connected")
        let elapsed = (first?.time ?? start) - start
        #expect(elapsed < .seconds(2), "connected after \(elapsed)")
        connection.close()
    }

    @Test func everyAddressFailingEndsOnceWithTheLastError() async throws {
        let swallowing = try SwallowingListener()
        let (connection, recorder, start, queue) = Self.connect(
            [try Self.address(swallowing.port), try Self.address(Self.refusingPort())],
            connectTimeout: .milliseconds(600)
        )
        let first = await recorder.first()
        // The refused address fails at 250 ms; the swallowed one times out at 600 ms.
        #expect(
            first?.event.hasPrefix("closed: cannot connect to test.invalid:1: timed out") == true,
            "\(String(describing: first))"
        )
        let elapsed = (first?.time ?? start) - start
        #expect(elapsed >= .milliseconds(550) && elapsed < .seconds(3), "failed after \(elapsed)")
        // Ended for good: no attempt, timer or socket is left that could report a second time.
        #expect(queue.sync { connection.hasEndedForGood })
        #expect(recorder.count == 1)
        connection.close()
    }

    @Test func familiesAreInterleaved() {
        func address(_ family: Int32, _ tag: UInt8) -> SocketAddress { SocketAddress(family: family, bytes: [tag]) }
        let six = Int32(AF_INET6)
        let four = Int32(AF_INET)
        let ordered = SocketAddress.interleavingFamilies([
            address(six, 1), address(six, 2), address(six, 3), address(four, 4), address(four, 5),
        ])
        #expect(ordered.map(\.bytes) == [[1], [4], [2], [5], [3]])
        #expect(SocketAddress.interleavingFamilies([address(four, 1), address(four, 2)]).map(\.bytes) == [[1], [2]])
        #expect(SocketAddress.interleavingFamilies([]).isEmpty)
    }

    /// What one connection read, and how it ended.
    final class Received: @unchecked Sendable {
        // Guarded by `lock`.
        private let lock = NSLock()
        private var bytes: [UInt8] = []
        private var ending: String?
        private var connected = false

        func record(_ event: TCPConnection.Event) {
            lock.withLock {
                switch event {
                case .received(let chunk): bytes += chunk
                case .closed(let error): ending = error ?? "end"
                case .connected: connected = true
                case .drained: break
                }
            }
        }

        /// Waits (up to 10 s) for the connection's `connected` event.
        func waitUntilConnected() async -> Bool {
            let deadline = ContinuousClock.now + .seconds(10)
            while !lock.withLock({ connected }) && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(2))
            }
            return lock.withLock { connected }
        }

        var snapshot: (bytes: [UInt8], ending: String?) { lock.withLock { (bytes, ending) } }
    }

    /// A connection to the listener on `port`, read as `reading` says, and the server's side of it.
    static func accepted(
        port: Int,
        listener: Int32,
        reading: SocketReading,
        gracefulCloseTimeout: Duration = .seconds(2)
    ) async throws -> (TCPConnection, DispatchQueue, Received, server: Int32) {
        let queue = DispatchQueue(label: "tether.test-tcp-reading")
        let received = Received()
        let connection = TCPConnection(
            endpoint: Endpoint(host: "127.0.0.1", port: port),
            queue: queue,
            connectTimeout: .seconds(5),
            maximumReadSize: 4096,
            reading: reading,
            gracefulCloseTimeout: gracefulCloseTimeout
        ) { received.record($0) }
        let address = try Self.address(port)
        queue.async { connection.connect(to: [address]) }
        let server = accept(listener, nil, nil)
        guard server >= 0 else { throw TestServerError("accept failed") }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard await received.waitUntilConnected() else { throw TestServerError("the client never connected") }
        return (connection, queue, received, server)
    }

    /// Every way of reading delivers every byte in order, then the end of the stream. Closing the
    /// connection, or dropping it unclosed, closes its socket (the server reads the end), once no
    /// read thread handles it any more.
    @Test(arguments: [SocketReading.sharedThreads(count: 2), .sharedThreads(count: 1), .dispatchSource])
    func everyWayOfReadingDeliversAllAndClosesTheSocket(reading: SocketReading) async throws {
        let (listener, port) = try boundLoopbackSocket(listening: true)
        defer { close(listener) }
        let sent = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }

        let (reader, readerQueue, received, server) = try await Self.accepted(
            port: port,
            listener: listener,
            reading: reading
        )
        #expect(readerQueue.sync { reader.readsOnThread } == (reading != .dispatchSource))
        var offset = 0
        while offset < sent.count {
            let count = min(3000, sent.count - offset)
            let written = sent[offset..<(offset + count)].withUnsafeBytes { send(server, $0.baseAddress, $0.count, 0) }
            #expect(written > 0)
            offset += max(written, 0)
        }
        close(server)
        let deadline = ContinuousClock.now + .seconds(20)
        while received.snapshot.ending == nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(received.snapshot.ending == "end")
        #expect(received.snapshot.bytes == sent)

        for dropping in [false, true] {
            var (connection, queue, _, peer) = try await Self.accepted(port: port, listener: listener, reading: reading)
            defer { close(peer) }
            if dropping {
                connection = TCPConnection(
                    endpoint: Endpoint(host: "127.0.0.1", port: 1),
                    queue: queue,
                    connectTimeout: .seconds(1),
                    maximumReadSize: 512
                ) { _ in }
            } else {
                queue.sync { connection.close() }
            }
            var byte: UInt8 = 0
            #expect(recv(peer, &byte, 1, 0) == 0, "the socket was not closed (dropping: \(dropping))")
            _ = connection
        }
    }

    #if os(Linux)
        /// Input that follows input with nothing written in between (a server streaming) is
        /// acknowledged at once (`TCP_QUICKACK`), so that a server using Nagle's algorithm does not
        /// hold a burst's last segment for the delayed-ACK timer; input that answers what was
        /// written is not (its acknowledgement goes with the next request).
        @Test(arguments: [SocketReading.sharedThreads(count: 1), .dispatchSource])
        func streamingInputIsAcknowledgedAtOnceAndAnAnswerIsNot(reading: SocketReading) async throws {
            let (listener, port) = try boundLoopbackSocket(listening: true)
            defer { close(listener) }
            let (connection, queue, received, server) = try await Self.accepted(
                port: port,
                listener: listener,
                reading: reading
            )
            defer { close(server) }
            var expected = 0
            func serverSends(_ text: String) async throws {
                let bytes = Array(text.utf8)
                #expect(bytes.withUnsafeBytes { send(server, $0.baseAddress, $0.count, 0) } == bytes.count)
                expected += bytes.count
                let deadline = ContinuousClock.now + .seconds(10)
                while received.snapshot.bytes.count < expected && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(2))
                }
                #expect(received.snapshot.bytes.count == expected)
            }
            let acknowledgements = { queue.sync { connection.streamingAcknowledgements } }
            try await serverSends("<a/>")
            #expect(acknowledgements() == 0)  // the first input after the connect (which wrote nothing)
            try await serverSends("<b/>")
            #expect(acknowledgements() == 1)  // input after input
            queue.sync { connection.send(Array("<request/>".utf8)) }
            var answer = [UInt8](repeating: 0, count: 10)
            #expect(recv(server, &answer, answer.count, Int32(MSG_WAITALL)) == 10)
            try await serverSends("<answer/>")
            #expect(acknowledgements() == 1)  // an answer to what was written
            try await serverSends("<c/>")
            #expect(acknowledgements() == 2)
            queue.sync { connection.close() }
        }
    #endif

    /// The shared read threads do not grow with the connections: 300 connections read through
    /// `.sharedThreads(count: 3)` each get their own bytes, and the process then has no more
    /// threads named "tether.read" than the sets any test of this process can start (1 + 2 + 3 +
    /// the default's), where a thread per socket would have 300.
    @Test func sharedThreadsServeManyConnectionsWithAFixedCount() async throws {
        let (listener, port) = try boundLoopbackSocket(listening: true)
        defer { close(listener) }
        var connections: [(TCPConnection, DispatchQueue, Received, server: Int32)] = []
        defer { for connection in connections { close(connection.server) } }
        for _ in 0..<300 {
            connections.append(
                try await Self.accepted(port: port, listener: listener, reading: .sharedThreads(count: 3))
            )
        }
        for (index, connection) in connections.enumerated() {
            let bytes = Array("connection \(index)".utf8)
            #expect(bytes.withUnsafeBytes { send(connection.server, $0.baseAddress, $0.count, 0) } == bytes.count)
        }
        for (index, connection) in connections.enumerated() {
            let expected = Array("connection \(index)".utf8)
            let deadline = ContinuousClock.now + .seconds(10)
            while connection.2.snapshot.bytes.count < expected.count && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(2))
            }
            #expect(connection.2.snapshot.bytes == expected)
        }
        let readThreads = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").filter {
            let name = try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)
            return name?.trimmingCharacters(in: .whitespacesAndNewlines) == ReadThreads.threadName
        }
        // At most the sets the tests make, however many connections: the tick-window test's two
        // of one thread, the first-run-waits tests' three of two, two threads, three, the default.
        #expect(readThreads.count <= 1 + 1 + 2 + 2 + 2 + 2 + 3 + ReadThreads.defaultCount)
        #expect(readThreads.count >= 3)
        for connection in connections { connection.1.sync { connection.0.close() } }
    }

    /// A socket the kernel refuses to look at again when a thread's turn with it ends (here: its
    /// descriptor number was made to name another file, which the readiness queue does not hold,
    /// and the handler reports full reads, so the turn ends after `fullReadsPerTurn` of them) is
    /// reported through `failed` with the error, on the connection's queue, instead of going
    /// quiet; the watch still stands until it is canceled, and the cancel's completion runs then.
    @Test func aSocketThatCannotBeArmedAgainIsReported() async throws {
        let pair = try Self.socketPair()
        let null = open("/dev/null", O_RDONLY)
        defer {
            close(pair[0])
            close(pair[1])
            close(null)
        }
        let threads = try #require(ReadThreads.shared(count: 2))
        let queue = DispatchQueue(label: "rearm-test")
        let failure = Received()
        let watched = pair[0]
        let watch = threads.watch(
            socket: watched,
            queue: queue,
            handler: {
                var byte: UInt8 = 0
                _ = recv(watched, &byte, 1, Int32(MSG_DONTWAIT))
                // The number now names /dev/null (and the socket is closed in one step, so no
                // other test's socket can take the number): the kernel's second look fails.
                dup2(null, watched)
                return .more
            },
            failed: { error in
                dispatchPrecondition(condition: .onQueue(queue))
                failure.record(.received(Array("\(error)".utf8)))
            }
        )
        #expect(watch != nil)
        var byte: UInt8 = 1
        #expect(send(pair[1], &byte, 1, 0) == 1)
        let deadline = ContinuousClock.now + .seconds(5)
        while failure.snapshot.bytes.isEmpty && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        let reported = Int32(String(decoding: failure.snapshot.bytes, as: UTF8.self))
        #expect(reported == ENOENT || reported == EPERM, "reported: \(String(describing: reported))")
        let canceled = DispatchSemaphore(value: 0)
        watch?.cancel { canceled.signal() }
        #expect(canceled.wait(timeout: .now() + 5) == .success)
    }

    /// On Linux the read threads run a socket's handler, and a runner the calls made from outside
    /// its queue, through `dispatch_sync_f` on the queue's Dispatch object (no block copied per
    /// input or call): the object is found for any queue (and is the queue's own: same label, and
    /// `dispatchPrecondition` holds in what runs there, with the queue's specific data), so a
    /// toolchain whose overlay stops keeping it where it is read fails here, not silently slower.
    @Test func theReadThreadsReachAQueuesDispatchObject() async throws {
        let key = DispatchSpecificKey<Int>()
        for label in ["tether.test.direct", "", "ünïcode queue"] {
            let queue = DispatchQueue(label: label)
            queue.setSpecific(key: key, value: 7)
            #if os(Linux)
                #expect(DirectQueue.object(of: queue) != nil, "label '\(label)'")
            #endif
            let ran = DispatchSemaphore(value: 0)
            DirectQueue(queue).sync {
                dispatchPrecondition(condition: .onQueue(queue))
                #expect(DispatchQueue.getSpecific(key: key) == 7)
                ran.signal()
            }
            // Signaled already: `sync` returned after the body ran.
            #expect(ran.wait(timeout: .now()) == .success, "label '\(label)'")
        }
        let pair = try Self.socketPair()
        defer {
            close(pair[0])
            close(pair[1])
        }
        let threads = try #require(ReadThreads.shared(count: 2))
        let queue = DispatchQueue(label: "direct-sync-test")
        let inputs = Received()
        let watch = Self.watchRecordingBytes(pair[0], threads: threads, queue: queue, into: inputs)
        #expect(watch != nil)
        for input in 1...3 { try await Self.sendByte(UInt8(input), on: pair, until: inputs, holds: input) }
        #expect(inputs.snapshot.bytes == [1, 2, 3])
        let canceled = DispatchSemaphore(value: 0)
        watch?.cancel { canceled.signal() }
        #expect(canceled.wait(timeout: .now() + 5) == .success)
    }

    /// Input that arrives while a thread runs the socket's handler is read by that handler's next
    /// run: the kernel's event for it (edge-triggered, so not given again) goes to the other thread,
    /// which passes it on. Here the first run reads one byte and waits until the second byte's
    /// event has been passed on; the second byte is read all the same.
    @Test func inputArrivingWhileAHandlerRunsIsRead() async throws {
        let blocked = try Self.watchWithAFirstRunThatWaits(tickWindow: .milliseconds(6))
        defer { blocked.finish() }
        blocked.write([1])
        try await Self.waitUntil { blocked.runs.count >= 1 }  // the first run has read it and waits
        blocked.write([2])
        try await Self.waitUntil { blocked.threads.eventsPassedOn.events >= 1 }
        #expect(blocked.inputs.snapshot.bytes == [1])  // not read while the first run waits
        blocked.release.signal()
        try await Self.waitUntil { blocked.inputs.snapshot.bytes.count >= 2 }
        #expect(blocked.inputs.snapshot.bytes == [1, 2])
        #expect(blocked.inputs.snapshot.ending == nil)
    }

    /// The same with the peer's end: input and the end arrive while a thread runs the handler,
    /// and their events (the end reported in one) are passed on. The handler's next runs read the
    /// input and then the end (a read shorter than asked does not mean nothing is left when the
    /// end was reported), instead of leaving the end unread with no event to come.
    @Test func anEndArrivingWhileAHandlerRunsIsRead() async throws {
        let blocked = try Self.watchWithAFirstRunThatWaits(tickWindow: .milliseconds(7))
        defer { blocked.finish() }
        blocked.write([1])
        try await Self.waitUntil { blocked.runs.count >= 1 }  // the first run has read it and waits
        blocked.write([2])
        #expect(shutdown(blocked.pair[1], Int32(SHUT_WR)) == 0)
        try await Self.waitUntil { blocked.threads.eventsPassedOn.ends >= 1 }
        blocked.release.signal()
        try await Self.waitUntil { blocked.inputs.snapshot.ending != nil }
        #expect(blocked.inputs.snapshot.bytes == [1, 2])
        #expect(blocked.inputs.snapshot.ending == "end")
    }

    /// A socket pair whose first socket is watched by two read threads of its own (`tickWindow`
    /// one no other test uses, so that the threads' counts are the test's): each run of the handler
    /// reads what is there into `inputs` (the end as `closed`), and the first run then waits for
    /// `release`.
    final class BlockedWatch: @unchecked Sendable {
        let pair: [Int32]
        let threads: ReadThreads
        let inputs = Received()
        let release = DispatchSemaphore(value: 0)
        let runs = Counter()
        var watch: ReadThreads.Watch?

        init(pair: [Int32], threads: ReadThreads) {
            self.pair = pair
            self.threads = threads
        }

        /// Sends `bytes` to the watched socket.
        func write(_ bytes: [UInt8]) {
            #expect(send(pair[1], bytes, bytes.count, 0) == bytes.count)
        }

        /// Cancels the watch (waiting for its completion) and closes both sockets.
        func finish() {
            let canceled = DispatchSemaphore(value: 0)
            watch?.cancel { canceled.signal() }
            #expect(canceled.wait(timeout: .now() + 5) == .success)
            for socket in pair { close(socket) }
        }
    }

    /// A count guarded by a lock.
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func increment() -> Int {
            lock.withLock {
                value += 1
                return value
            }
        }
        var count: Int { lock.withLock { value } }
    }

    static func watchWithAFirstRunThatWaits(tickWindow: Duration) throws -> BlockedWatch {
        let blocked = BlockedWatch(
            pair: try socketPair(),
            threads: try #require(ReadThreads.shared(count: 2, tickWindow: tickWindow))
        )
        let watched = blocked.pair[0]
        blocked.watch = blocked.threads.watch(
            socket: watched,
            queue: DispatchQueue(label: "first-run-waits"),
            handler: {
                var bytes = [UInt8](repeating: 0, count: 64)
                let count = recv(watched, &bytes, bytes.count, Int32(MSG_DONTWAIT))
                if count > 0 { blocked.inputs.record(.received(Array(bytes[..<count]))) }
                if count == 0 { blocked.inputs.record(.closed(nil)) }
                if blocked.runs.increment() == 1 { blocked.release.wait() }
                return count == 0 ? .stopWatching : .drained
            },
            failed: { _ in }
        )
        #expect(blocked.watch != nil)
        return blocked
    }

    /// Waits (5 s at most) until `condition` holds.
    static func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while !condition() && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// A socket with more input than `fullReadsPerTurn` full reads take is read to the end over
    /// several turns (the kernel, asked to look at it again after each turn, gives a new event), in
    /// order, while another socket's input is read meanwhile.
    @Test func aSocketWithMuchInputIsReadOverSeveralTurns() async throws {
        let busy = try Self.socketPair()
        let other = try Self.socketPair()
        defer {
            for socket in busy + other { close(socket) }
        }
        let threads = try #require(ReadThreads.shared(count: 2))
        let queue = DispatchQueue(label: "turns-test")
        let inputs = Received()
        let otherInputs = Received()
        let watched = busy[0]
        let turns = Received()
        // A "full read" is one byte here: 4 per turn, so 20 bytes take 5 turns.
        let watch = threads.watch(
            socket: watched,
            queue: queue,
            handler: {
                var byte: UInt8 = 0
                guard recv(watched, &byte, 1, Int32(MSG_DONTWAIT)) == 1 else {
                    turns.record(.received([0]))
                    return .drained
                }
                inputs.record(.received([byte]))
                return .more
            },
            failed: { _ in }
        )
        let otherWatch = Self.watchRecordingBytes(
            other[0],
            threads: threads,
            queue: DispatchQueue(label: "turns-other"),
            into: otherInputs
        )
        #expect(watch != nil && otherWatch != nil)
        let sent = (1...20).map { UInt8($0) }
        #expect(send(busy[1], sent, sent.count, 0) == sent.count)
        try await Self.sendByte(99, on: other, until: otherInputs, holds: 1)
        let deadline = ContinuousClock.now + .seconds(5)
        while inputs.snapshot.bytes.count < sent.count && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(inputs.snapshot.bytes == sent)
        #expect(otherInputs.snapshot.bytes == [99])
        for watch in [watch, otherWatch] {
            let canceled = DispatchSemaphore(value: 0)
            watch?.cancel { canceled.signal() }
            #expect(canceled.wait(timeout: .now() + 5) == .success)
        }
    }

    /// Watches `socket` with `threads`: each input's byte is recorded in `inputs`, read on `queue`
    /// (checked).
    static func watchRecordingBytes(
        _ socket: Int32,
        threads: ReadThreads,
        queue: DispatchQueue,
        into inputs: Received
    ) -> ReadThreads.Watch? {
        threads.watch(
            socket: socket,
            queue: queue,
            handler: {
                dispatchPrecondition(condition: .onQueue(queue))
                var bytes = [UInt8](repeating: 0, count: 64)
                let count = recv(socket, &bytes, bytes.count, Int32(MSG_DONTWAIT))
                if count > 0 { inputs.record(.received(Array(bytes[..<count]))) }
                return count == bytes.count ? .more : .drained
            },
            failed: { _ in }
        )
    }

    /// Sends `byte` into `pair[1]`, then waits (5 s at most) until `inputs` holds `count` bytes.
    static func sendByte(_ byte: UInt8, on pair: [Int32], until inputs: Received, holds count: Int) async throws {
        var byte = byte
        #expect(send(pair[1], &byte, 1, 0) == 1)
        let deadline = ContinuousClock.now + .seconds(5)
        while inputs.snapshot.bytes.count < count && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// A connected pair of Unix stream sockets (the caller closes both).
    static func socketPair() throws -> [Int32] {
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        return pair
    }

    /// `tickWindow`: after each input a read thread waits with a 1 ms timer, `tickWindow` / 1 ms
    /// times, then without one: no wake-ups before the first input, exactly that many after each
    /// input, and none at all with a zero window.
    @Test func aReadThreadWaitsWithATimerForTheTickWindowAfterEachInput() async throws {
        #expect(ReadThreads.timedWaits(.milliseconds(4)) == 4)
        #expect(ReadThreads.timedWaits(.microseconds(1500)) == 2)
        #expect(ReadThreads.timedWaits(.zero) == 0)
        #expect(ReadThreads.timedWaits(.milliseconds(-3)) == 0)
        #expect(ReadThreads.timedWaits(.seconds(Int64.max)) == Int(Int32.max))
        for (window, waits) in [(Duration.milliseconds(5), 5), (.zero, 0)] {
            let pair = try Self.socketPair()
            defer {
                close(pair[0])
                close(pair[1])
            }
            // One thread, and a window no other test uses: these threads are this test's own.
            let threads = try #require(ReadThreads.shared(count: 1, tickWindow: window))
            let queue = DispatchQueue(label: "tick-window-test")
            let inputs = Received()
            let watch = Self.watchRecordingBytes(pair[0], threads: threads, queue: queue, into: inputs)
            #expect(watch != nil)
            try await Task.sleep(for: .milliseconds(30))
            #expect(threads.quietWakeUps == 0)
            for input in 1...2 {
                try await Self.sendByte(UInt8(input), on: pair, until: inputs, holds: input)
                // The window's wake-ups come, then no more (several windows later).
                let expected = waits * input
                let wakeUpsDeadline = ContinuousClock.now + .seconds(5)
                while threads.quietWakeUps < expected && ContinuousClock.now < wakeUpsDeadline {
                    try await Task.sleep(for: .milliseconds(1))
                }
                try await Task.sleep(for: .milliseconds(30))
                #expect(threads.quietWakeUps == expected, "window \(window), input \(input)")
            }
            let canceled = DispatchSemaphore(value: 0)
            watch?.cancel { canceled.signal() }
            #expect(canceled.wait(timeout: .now() + 5) == .success)
        }
    }

    /// Only the thread that handled the last input waits with a timer: with two threads that have
    /// both handled input at about the same time (the first busy with one socket while the second
    /// reads another, whose handler lets the first one go), the one that finished last makes the
    /// window's wake-ups, and the other wakes once at most after that (its timer armed before)
    /// and then waits without a timer. (Were each thread to keep its own window, the idle one
    /// would wake every millisecond and, back to waiting last, take the next input from the busy
    /// one.) Counted by who woke, not by the total: on a loaded machine the thread that finished
    /// first may stay the last one for several milliseconds before the other finishes, and its
    /// wake-ups then are the window's own.
    @Test func onlyTheThreadThatHandledTheLastInputWaitsWithATimer() async throws {
        let waits = 20
        let blocked = try Self.watchWithAFirstRunThatWaits(tickWindow: .milliseconds(Int64(waits)))
        defer { blocked.finish() }
        blocked.write([1])
        try await Self.waitUntil { blocked.runs.count >= 1 }  // one thread holds the first socket
        let other = try Self.socketPair()
        defer {
            close(other[0])
            close(other[1])
        }
        let inputs = Received()
        let socket = other[0]
        let watch = blocked.threads.watch(
            socket: socket,
            queue: DispatchQueue(label: "last-handler-test"),
            handler: {
                var byte: UInt8 = 0
                if recv(socket, &byte, 1, Int32(MSG_DONTWAIT)) == 1 { inputs.record(.received([byte])) }
                blocked.release.signal()
                return .drained
            },
            failed: { _ in }
        )
        #expect(watch != nil)
        try await Self.sendByte(9, on: other, until: inputs, holds: 1)  // read by the other thread
        #expect(inputs.snapshot.bytes == [9])
        try await Self.waitUntil { blocked.threads.quietWakeUps >= waits }
        try await Task.sleep(for: .milliseconds(Int64(3 * waits)))
        let (wakeUps, stale) = (blocked.threads.quietWakeUps, blocked.threads.staleWakeUps)
        #expect(wakeUps >= waits, "\(wakeUps) quiet wake-ups")
        #expect(stale <= 2, "\(stale) of \(wakeUps) quiet wake-ups by a thread that had not handled the last input")
        let canceled = DispatchSemaphore(value: 0)
        watch?.cancel { canceled.signal() }
        #expect(canceled.wait(timeout: .now() + 5) == .success)
    }

    /// A connection whose queue is busy holds up one shared read thread while it is, not the
    /// others: with two threads, while one connection's queue is blocked with its input waiting,
    /// another connection's input still arrives; the first one's follows once its queue is free.
    @Test func aBusyConnectionHoldsUpOneSharedThreadOnly() async throws {
        let (listener, port) = try boundLoopbackSocket(listening: true)
        defer { close(listener) }
        let busy = try await Self.accepted(port: port, listener: listener, reading: .sharedThreads(count: 2))
        let free = try await Self.accepted(port: port, listener: listener, reading: .sharedThreads(count: 2))
        defer {
            close(busy.server)
            close(free.server)
        }
        let release = DispatchSemaphore(value: 0)
        busy.1.async { release.wait() }
        var byte: UInt8 = 1
        #expect(send(busy.server, &byte, 1, 0) == 1)
        try await Task.sleep(for: .milliseconds(50))  // a thread now waits for the busy queue
        #expect(send(free.server, &byte, 1, 0) == 1)
        let deadline = ContinuousClock.now + .seconds(5)
        while free.2.snapshot.bytes.isEmpty && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(free.2.snapshot.bytes == [1])
        #expect(busy.2.snapshot.bytes.isEmpty)
        release.signal()
        let busyDeadline = ContinuousClock.now + .seconds(5)
        while busy.2.snapshot.bytes.isEmpty && ContinuousClock.now < busyDeadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(busy.2.snapshot.bytes == [1])
        busy.1.sync { busy.0.close() }
        free.1.sync { free.0.close() }
    }

    /// A graceful close (`afterFlushing`) with bytes still queued writes them all, ends its side
    /// of the stream, and reads and drops what the peer sends meanwhile and afterwards: a socket
    /// closed with input unread, or getting input after it closed, sends a reset, and the kernel
    /// drops what it has not delivered yet. The same when the peer ends its side during the
    /// flush (the connection stops reading then, and closes once it has written everything).
    @Test(arguments: [SocketReading.sharedThreads(count: 2), .dispatchSource])
    func aLingeringCloseDropsLateInputAndFlushesEverything(reading: SocketReading) async throws {
        let (listener, port) = try boundLoopbackSocket(listening: true)
        defer { close(listener) }
        // More than loopback's socket buffers take at once, so that bytes wait when the connection
        // closes: a pattern of prime length (so that a lost or repeated piece shows), repeated.
        let pattern = (0..<65_521).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 11) }
        let sent = Array([[UInt8]](repeating: pattern, count: 128).joined())
        for peerEndsItsSide in [false, true] {
            let (connection, queue, _, server) = try await Self.accepted(
                port: port,
                listener: listener,
                reading: reading
            )
            defer { close(server) }
            let waiting = queue.sync {
                connection.send(sent)
                connection.close(afterFlushing: true)
                return connection.pendingWriteCount
            }
            #expect(waiting > 0, "nothing waited to be flushed")
            let late = [UInt8](repeating: 0x41, count: 65_536)
            func sendLate() {
                let written = late.withUnsafeBytes { send(server, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                #expect(written == late.count, "the connection reset: it had closed")
            }
            sendLate()
            if peerEndsItsSide { shutdown(server, Int32(SHUT_WR)) }
            var received: [UInt8] = []
            received.reserveCapacity(sent.count)
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var last = 0
            repeat {
                last = recv(server, &buffer, min(buffer.count, max(sent.count - 1_000_000 - received.count, 1)), 0)
                if last > 0 { received += buffer[..<last] }
            } while last > 0 && received.count < sent.count - 1_000_000
            if !peerEndsItsSide {
                // The rest fits the socket buffers: the connection writes everything, then lingers.
                let flushed = await eventually { queue.sync { connection.pendingWriteCount == 0 } }
                #expect(flushed, "the connection never wrote the rest")
                sendLate()
            }
            while last > 0 {
                last = recv(server, &buffer, buffer.count, 0)
                if last > 0 { received += buffer[..<last] }
            }
            #expect(last == 0, "the stream ended with \(String(cString: strerror(errno))), not its end")
            #expect(received.count == sent.count && received == sent, "peer ends: \(peerEndsItsSide)")
        }
    }

    /// Bytes held (`hold`) wait for `flushHeld()`, and a `send` writes them first, so that the
    /// order never changes; held bytes count as unsent; once `heldLimit` are held they are written
    /// without a flush; a graceful close writes what is held.
    @Test func heldBytesLeaveAtTheFlushInOrder() async throws {
        let (listener, port) = try boundLoopbackSocket(listening: true)
        defer { close(listener) }
        let (connection, queue, _, server) = try await Self.accepted(port: port, listener: listener, reading: .default)
        defer { close(server) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        /// What the server can read now, without waiting for more.
        func readNow() -> [UInt8] {
            var read: [UInt8] = []
            while case let count = recv(server, &buffer, buffer.count, Int32(MSG_DONTWAIT)), count > 0 {
                read += buffer[..<count]
            }
            return read
        }
        /// What the server reads within a second, up to `count` bytes.
        func read(_ count: Int) async throws -> [UInt8] {
            var read: [UInt8] = []
            let deadline = ContinuousClock.now + .seconds(5)
            while read.count < count && ContinuousClock.now < deadline {
                read += readNow()
                if read.count < count { try await Task.sleep(for: .milliseconds(2)) }
            }
            return read
        }

        let unsent = queue.sync {
            connection.hold(Array("<a/>".utf8))
            connection.hold(Array("<b/>".utf8))
            return connection.pendingWriteCount
        }
        #expect(unsent == 8)
        try await Task.sleep(for: .milliseconds(50))
        #expect(readNow().isEmpty, "held bytes were written before the flush")
        queue.sync { connection.flushHeld() }
        #expect(String(decoding: try await read(8), as: UTF8.self) == "<a/><b/>")

        queue.sync {
            connection.hold(Array("<c/>".utf8))
            connection.send(Array("<d/>".utf8))
        }
        #expect(String(decoding: try await read(8), as: UTF8.self) == "<c/><d/>")

        let piece = [UInt8](repeating: 0x78, count: TCPConnection.heldLimit / 2 + 1)
        queue.sync {
            connection.hold(piece)
            connection.hold(piece)
        }
        #expect(try await read(2 * piece.count).count == 2 * piece.count, "the limit did not write what was held")

        queue.sync {
            connection.hold(Array("<e/>".utf8))
            connection.close(afterFlushing: true)
        }
        #expect(String(decoding: try await read(4), as: UTF8.self) == "<e/>")
    }

    /// A graceful close ends our side of the stream at once (the peer reads its end) and keeps
    /// the socket for `gracefulCloseTimeout` at most while the peer does not end its side; zero
    /// closes the socket at once. A closed socket answers the peer's next bytes with a reset.
    @Test(arguments: [Duration.zero, .milliseconds(300)])
    func aGracefulCloseLastsAtMostItsTimeout(_ timeout: Duration) async throws {
        let (listener, port) = try boundLoopbackSocket(listening: true)
        defer { close(listener) }
        let (connection, queue, _, server) = try await Self.accepted(
            port: port,
            listener: listener,
            reading: .default,
            gracefulCloseTimeout: timeout
        )
        defer { close(server) }
        let start = ContinuousClock.now
        queue.sync { connection.close(afterFlushing: true) }
        var byte: UInt8 = 0
        #expect(recv(server, &byte, 1, 0) == 0)
        // The peer's bytes are read and dropped while the socket lingers; once it is closed, the
        // kernel answers them with a reset, which the next send reports. (The loop keeps its
        // thread: awaiting between tries, it could wait for one of the pool's threads for seconds
        // while the other tests run.)
        var resetAfter: Duration?
        while resetAfter == nil && ContinuousClock.now - start < .seconds(10) {
            if send(server, &byte, 1, Int32(MSG_NOSIGNAL)) < 0 {
                resetAfter = ContinuousClock.now - start
            } else {
                usleep(20_000)
            }
        }
        let after = try #require(resetAfter, "the socket was never closed")
        if timeout > .zero { #expect(after >= timeout, "closed after \(after)") }
        #expect(after < timeout + .milliseconds(1500), "closed after \(after)")
    }
}
