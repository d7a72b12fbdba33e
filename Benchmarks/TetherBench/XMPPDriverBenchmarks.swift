import CMallocCounter
import Dispatch
import Foundation
import TetherCore
import TetherDispatch
import TetherXMPP
import TetherXMPPClient

#if canImport(Glibc)
    import Glibc
#endif

/// `tether-bench --xmpp-latency`, `--xmpp-throughput`, `--xmpp-idle`: `XMPPClient` against a
/// running XMPP server (`Benchmarks/xmpp-driver/run.sh` starts prosody and runs libstrophe's
/// harness on the same measurements, alternately). Each prints one JSON line.
enum XMPPDriverBenchmarks {
    struct Server {
        var host: String
        var port: Int
        var password: String
    }

    /// Cleartext, as the libstrophe harness connects; the rest as an app would leave it.
    static func configuration(
        _ jid: String,
        _ server: Server,
        streamManagement: Bool
    ) throws -> XMPPClient.Configuration {
        guard let parsed = JID(jid) else { throw BenchError("not a JID: \(jid)") }
        var configuration = XMPPClient.Configuration(
            jid: parsed,
            password: Secret(server.password),
            endpoint: Endpoint(host: server.host, port: server.port),
            tls: .disabled
        )
        configuration.allowPlainOnCleartext = true
        configuration.fetchRosterOnConnect = false
        if !streamManagement { configuration.streamManagement = nil }
        return configuration
    }

    /// User and system time of the whole process (every thread), in microseconds: with a
    /// count of pings, what a round trip costs the client's processors, read threads included,
    /// beside what it takes in time.
    static func processCPUMicroseconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        let user = Double(usage.ru_utime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec)
        return user + Double(usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_stime.tv_usec)
    }

    /// The server's time on a processor, in microseconds (every thread of the process
    /// `BENCH_SERVER_PID` names, from `/proc/PID/task/TID/schedstat`), or nil when not given or
    /// not readable: the message rows print the share of their time the server was busy (a rate
    /// the server sets is the same for every client).
    static func serverCPUMicroseconds() -> Double? {
        guard let pid = ProcessInfo.processInfo.environment["BENCH_SERVER_PID"],
            let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
        else { return nil }
        var total = 0.0
        for task in tasks {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8),
                let nanoseconds = text.split(separator: " ").first.flatMap({ Double($0) })
            else { continue }
            total += nanoseconds / 1e3
        }
        return total
    }

    /// Turns taken with other ping harnesses (`Benchmarks/xmpp-driver/turns.py`, which starts
    /// them side by side and passes one turn around): with `BENCH_TURNS=IN,OUT,BATCH` in the
    /// environment, the harness says it is connected with a byte on the descriptor `OUT`, then
    /// waits for a byte on `IN` before each `BATCH` pings, makes one untimed ping (what the wait
    /// cooled), and writes a byte when the batch is done (the last one: it exits). So every
    /// client's samples come from the same minutes of a noisy host (the message harnesses take a
    /// turn for each batch of `BATCH` messages: `take()`, then `pass()`). The wait blocks the thread it
    /// is made on (the client's queue, for a task on its executor or a completion: the client has
    /// nothing else to do meanwhile). Without it, no waits.
    struct Turns: Sendable {
        let input: Int32
        let output: Int32
        let batch: Int

        static func fromEnvironment() throws -> Turns? {
            guard let value = ProcessInfo.processInfo.environment["BENCH_TURNS"] else { return nil }
            let parts = value.split(separator: ",").compactMap { Int($0) }
            guard parts.count == 3, parts[2] > 0 else { throw BenchError("BENCH_TURNS is IN,OUT,BATCH") }
            return Turns(input: Int32(parts[0]), output: Int32(parts[1]), batch: parts[2])
        }

        /// Says the harness is connected and warmed up.
        func ready() { signal() }

        /// Waits for the turn (a message batch's start).
        func take() {
            var byte: UInt8 = 0
            while read(input, &byte, 1) < 0 && errno == EINTR {}
        }

        /// Passes the turn on (a message batch done, but the last).
        func pass() { signal() }

        /// Before ping `index`: whether this starts a batch (the turn waited for).
        func starts(_ index: Int) -> Bool {
            guard index % batch == 0 else { return false }
            var byte: UInt8 = 0
            while read(input, &byte, 1) < 0 && errno == EINTR {}
            return true
        }

        /// After ping `index` of `count`: passes the turn on when a batch is done (after the last
        /// one, the process's exit passes it: its end of the pipe closes).
        func ends(_ index: Int, of count: Int) {
            if (index + 1) % batch == 0 && index + 1 < count { signal() }
        }

        private func signal() {
            var byte = UInt8(ascii: "t")
            while write(output, &byte, 1) < 0 && errno == EINTR {}
        }
    }

    /// Sequential pings of the server: p50 and p99 of the round trip. With `onExecutor` the pings
    /// are made from a task that prefers the client's executor (`XMPPClient.executor`), as the
    /// libstrophe harness runs its loop on the connection's one thread.
    static func latency(_ server: Server, jid: String, count: Int, onExecutor: Bool) async throws -> String {
        let client = try XMPPClient(configuration: configuration(jid, server, streamManagement: false))
        try await client.connect()
        let turns = try Turns.fromEnvironment()
        var mallocs: UInt64 = 0
        var cpu = 0.0
        func measure() async throws -> [Double] {
            var samples: [Double] = []
            samples.reserveCapacity(count)
            for index in -50..<count {
                if index == 0 {
                    turns?.ready()
                    (mallocs, cpu) = (tether_malloc_count(), processCPUMicroseconds())
                }
                if index >= 0, let turns, turns.starts(index) { _ = try await client.request(.ping(to: nil)) }
                let start = DispatchTime.now().uptimeNanoseconds
                _ = try await client.request(.ping(to: nil))
                if index >= 0 { samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000) }
                if index >= 0 { turns?.ends(index, of: count) }
            }
            (mallocs, cpu) = (tether_malloc_count() - mallocs, processCPUMicroseconds() - cpu)
            return samples
        }
        var samples =
            onExecutor
            ? try await withTaskExecutorPreference(client.executor) { try await measure() } : try await measure()
        await client.disconnect()
        samples.sort()
        return String(
            format:
                #"{"client":"\#(onExecutor ? "tether-executor" : "tether")","count":%d,"p50_us":%.1f,"p99_us":%.1f,"cpu_us_per_ping":%.1f,"allocations_per_ping":%.1f}"#,
            count,
            samples[count / 2],
            samples[Int(Double(count) * 0.99)],
            cpu / Double(count),
            Double(mallocs) / Double(count)
        )
    }

    /// Sequential pings of the server made with the callback request: each one from the
    /// completion of the one before (on the client's queue, right after its answer was read), as
    /// the libstrophe harness sends each ping from its loop. p50 and p99 of the round trip.
    static func callbackLatency(_ server: Server, jid: String, count: Int) async throws -> String {
        let client = try XMPPClient(configuration: configuration(jid, server, streamManagement: false))
        try await client.connect()
        let pings = CallbackPings(client: client, count: count, turns: try Turns.fromEnvironment())
        let samples = try await withCheckedThrowingContinuation { continuation in
            pings.finished = { continuation.resume(with: $0) }
            pings.next()
        }.sorted()
        await client.disconnect()
        return String(
            format:
                #"{"client":"tether-callback","count":%d,"p50_us":%.1f,"p99_us":%.1f,"cpu_us_per_ping":%.1f,"allocations_per_ping":%.1f}"#,
            count,
            samples[count / 2],
            samples[Int(Double(count) * 0.99)],
            pings.cpu / Double(count),
            Double(pings.mallocs) / Double(count)
        )
    }

    /// The pings of `callbackLatency`: each completion times its ping and sends the next one.
    /// `@unchecked Sendable`: after `next()` starts it, used only on the client's queue.
    final class CallbackPings: @unchecked Sendable {
        let client: XMPPClient
        let count: Int
        let turns: Turns?
        var index = -50
        /// The untimed ping that starts a batch is out (`Turns`).
        var warming = false
        /// The last index `next()` was called for.
        var reached = Int.min
        var start: UInt64 = 0
        /// Heap allocations over the measured pings (the process's, the read threads' included).
        var mallocs: UInt64 = 0
        /// The process's processor time over the measured pings, in microseconds.
        var cpu = 0.0
        var samples: [Double] = []
        var finished: ((Result<[Double], any Error>) -> Void)?

        init(client: XMPPClient, count: Int, turns: Turns?) {
            self.client = client
            self.count = count
            self.turns = turns
            samples.reserveCapacity(count)
        }

        /// Sends ping `index` (with a turn: waiting for it on the client's queue, which has
        /// nothing else to do meanwhile, and an untimed ping first).
        func next() {
            if index > reached {
                reached = index
                if index == 0 {
                    turns?.ready()
                    (mallocs, cpu) = (tether_malloc_count(), processCPUMicroseconds())
                }
                if index >= 0, let turns, turns.starts(index) { warming = true }
            }
            start = DispatchTime.now().uptimeNanoseconds
            client.request(.ping(to: nil)) { [self] result in
                if case .failure(let error) = result { return finished!(.failure(error)) }
                if warming {
                    warming = false
                    return next()
                }
                if index >= 0 {
                    samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
                    turns?.ends(index, of: count)
                }
                index += 1
                if index < count {
                    next()
                } else {
                    (mallocs, cpu) = (tether_malloc_count() - mallocs, processCPUMicroseconds() - cpu)
                    finished!(.success(samples))
                }
            }
        }
    }

    /// `count` messages from one account to another, with or without stream management on both
    /// clients, sent as fast as the client takes them; the time until the last one arrived. With
    /// `onExecutor` the sends are made from a task that prefers the sender's executor, so that the
    /// messages sent before the task next waits leave in one write (`ConnectionExecutor`), as the
    /// libstrophe harness writes what it queued when it runs its loop. With `Turns`, in batches
    /// of its size, one a turn, each timed from its first send to its last arrival.
    static func throughput(
        _ server: Server,
        from: String,
        to: String,
        count: Int,
        streamManagement: Bool,
        onExecutor: Bool
    ) async throws -> String {
        let receiver = try XMPPClient(configuration: configuration(to, server, streamManagement: streamManagement))
        let sender = try XMPPClient(configuration: configuration(from, server, streamManagement: streamManagement))
        let turns = try Turns.fromEnvironment()
        let batch = turns?.batch ?? count
        let arrived = Counter()
        let done = DispatchSemaphore(value: 0)
        receiver.setEventHandler(queue: DispatchQueue(label: "receiver")) { event in
            guard case .message(let message) = event, message.body != nil else { return }
            let total = arrived.increment()
            if total % batch == 0 || total == count { done.signal() }
        }
        try await receiver.connect()
        try await sender.connect()
        try await Task.sleep(for: .milliseconds(50))  // as the harness: the receiver's presence settles
        guard let target = JID(to) else { throw BenchError("not a JID: \(to)") }
        turns?.ready()
        let (mallocs, cpu) = (tether_malloc_count(), processCPUMicroseconds())
        var nanoseconds: UInt64 = 0
        var serverMicroseconds = 0.0
        func send(_ indices: Range<Int>) async throws {
            for index in indices {
                try await sender.send(XMPPMessage(to: target, body: "message \(index)", type: .chat))
            }
        }
        var sent = 0
        while sent < count {
            let next = min(sent + batch, count)
            turns?.take()
            let (start, serverStart) = (DispatchTime.now().uptimeNanoseconds, Self.serverCPUMicroseconds())
            if onExecutor {
                try await withTaskExecutorPreference(sender.executor) { [sent] in try await send(sent..<next) }
            } else {
                try await send(sent..<next)
            }
            let finished = await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: done.wait(timeout: .now() + 120)) }
            }
            guard finished == .success else { throw BenchError("\(arrived.value) of \(next) messages arrived") }
            nanoseconds += DispatchTime.now().uptimeNanoseconds - start
            if let serverStart, let serverEnd = Self.serverCPUMicroseconds() {
                serverMicroseconds += serverEnd - serverStart
            }
            sent = next
            if sent < count { turns?.pass() }
        }
        let seconds = Double(nanoseconds) / 1e9
        let (allocations, processor) = (tether_malloc_count() - mallocs, processCPUMicroseconds() - cpu)
        await sender.disconnect()
        await receiver.disconnect()
        return String(
            format: #"{"client":"\#(onExecutor ? "tether-executor" : "tether")","count":%d,"seconds":%.4f,"#
                + #""messages_per_s":%.0f,"cpu_us_per_message":%.1f,"allocations_per_message":%.1f,"#
                + #""server_busy":%.3f}"#,
            count,
            seconds,
            Double(count) / seconds,
            processor / Double(count),
            Double(allocations) / Double(count),
            Self.serverCPUMicroseconds() == nil ? -1.0 : serverMicroseconds / (seconds * 1e6)
        )
    }

    /// `count` idle clients in this process (stream management on, buffers released after
    /// `idleRelease` of quiet): resident memory and live heap per connection beyond the process with one such
    /// client connected already (so that the code and the runtime's one-time data the first
    /// connection brings in are not counted per connection; the libstrophe harness does the same),
    /// threads and descriptors.
    static func idle(_ server: Server, account: String, count: Int) async throws -> String {
        func idleClient(_ resource: String) throws -> XMPPClient {
            var configuration = try configuration("\(account)/\(resource)", server, streamManagement: true)
            configuration.releaseBuffersAfterIdle = idleRelease
            // Idle: no presence (the harness sends none either; thousands of resources of one
            // account would otherwise each get every other's presence).
            configuration.initialPresence = nil
            return try XMPPClient(configuration: configuration)
        }
        let first = try idleClient("idle-first")
        try await first.connect()
        let heapBefore = Int(tether_heap_in_use())
        let rssBefore = residentBytes()
        var clients: [XMPPClient] = []
        clients.reserveCapacity(count)
        let started = DispatchTime.now().uptimeNanoseconds
        var index = 0
        while index < count {
            let batch = min(idleBatch, count - index)
            let made = try (0..<batch).map { offset in try idleClient("idle\(index + offset)") }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in made { group.addTask { try await client.connect() } }
                try await group.waitForAll()
            }
            clients += made
            index += batch
        }
        let connectSeconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        try await Task.sleep(for: .seconds(4))  // every machine has released its parser buffers
        let heap = Int(tether_heap_in_use()) - heapBefore
        let rss = residentBytes() - rssBefore
        let line = String(
            format: #"{"client":"tether","count":%d,"rss_per_connection":%.0f,"heap_per_connection":%.0f,"#
                + #""threads":%d,"descriptors":%d,"connect_seconds":%.1f}"#,
            count,
            Double(rss) / Double(count),
            Double(heap) / Double(count),
            entries("/proc/self/task"),
            entries("/proc/self/fd"),
            connectSeconds
        )
        withExtendedLifetime((first, clients)) {}
        return line
    }

    /// How soon an idle client's parser gives its buffers back (`TETHER_IDLE_RELEASE_MS`, default
    /// 250 ms), as an app holding many idle connections would set it. Each login's buffers (about
    /// 34 KiB) are freed that long after it; the logins of the last such span before the
    /// measurement leave their freed buffers in pages shared with live objects, so they stay
    /// resident: with 2 s and one login every 10–20 ms that is about 5–8 MB, whatever the count
    /// (Benchmarks/README.md).
    static let idleRelease = Duration.milliseconds(
        max(Int(ProcessInfo.processInfo.environment["TETHER_IDLE_RELEASE_MS"] ?? "") ?? 250, 1)
    )

    /// How many idle clients connect at once (`TETHER_IDLE_BATCH`, default 1: one after the other,
    /// as the libstrophe harness connects).
    static let idleBatch = max(Int(ProcessInfo.processInfo.environment["TETHER_IDLE_BATCH"] ?? "") ?? 1, 1)

    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }

    static func entries(_ path: String) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: path).count) ?? -1
    }

    /// A count shared with a handler's queue.
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0

        func increment() -> Int {
            lock.withLock {
                count += 1
                return count
            }
        }
        var value: Int { lock.withLock { count } }
    }
}
