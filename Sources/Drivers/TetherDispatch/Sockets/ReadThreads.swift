import CEventPoll
import Dispatch
import Synchronization

#if canImport(CDispatch)
    import CDispatch
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a connection waits for its socket's input (`ConnectionOptions.socketReading`).
public enum SocketReading: Sendable, Equatable {
    /// A few threads for the whole process, however many connections it holds, wait on one
    /// kernel readiness queue (epoll, kqueue) for every socket's input. The thread that gets a
    /// socket's input handles it on the connection's queue itself (`queue.sync`, which an idle
    /// serial queue runs right there) and resumes a task on the connection's `ConnectionExecutor`
    /// there too: one thread wake-up per input, as with a blocking client. A connection whose queue
    /// is busy holds up one of the threads while it is; the others go on serving the rest.
    ///
    /// `tickWindow` (Linux; zero by default): for this long after the last input, the thread that
    /// handled it waits for the next one with a 1 ms timer armed (one wake-up per quiet
    /// millisecond, `tickWindow` / 1 ms of them at most after each input), and then without one;
    /// the other threads wait without one. Where the kernel keeps a processor's scheduler tick
    /// running while a timer is due within a tick, the timer spares the tick's restart when an
    /// input wakes the thread (8–11 µs on one virtual machine, about 1 µs on bare hardware). Where
    /// it stops the tick all the same, the timer only adds its own arming and canceling, which a
    /// hypervisor can make dear: on the virtual machines measured last (`Specs/performance.md`,
    /// "The tick-window timer"), a ping's round trip was 4 % longer with it, and about 30 % longer
    /// while the host was quiet. Measure before setting it. Ignored on Apple platforms, whose
    /// kernel has no such tick. Connections with another count or window get threads of their
    /// own: keep to one setting per process.
    case sharedThreads(count: Int, tickWindow: Duration = SocketReading.defaultTickWindow)
    /// A Dispatch read source per socket, served by Dispatch's shared threads. On Linux an input
    /// then reaches the queue through Dispatch's event thread and a worker, and the event thread
    /// is woken again to watch the socket anew: three thread wake-ups per input, tens of µs more
    /// per answer on a busy machine.
    case dispatchSource

    /// The default: `sharedThreads` with one thread per processor (at least 2, at most 8) and the
    /// default tick window.
    public static let `default` = SocketReading.sharedThreads(count: ReadThreads.defaultCount)

    /// `sharedThreads`' default `tickWindow`: zero, no timer (no wake-up at all while no input
    /// comes). 4 ms, a request's answer from a server nearby, is the window to try where the
    /// timer helps.
    public static let defaultTickWindow = Duration.zero

    /// Replaced by `sharedThreads(count:)`, whose threads do not grow with the connections.
    @available(*, unavailable, message: "a thread per socket is gone: use .sharedThreads(count:) (or .default)")
    public static func threadPerSocket(limit: Int) -> SocketReading { .default }
}

/// `SocketReading.sharedThreads`: `count` threads (named "tether.read") waiting on one kernel
/// readiness queue, edge-triggered (an event when input arrives): a socket's input is handled by
/// one thread at a time, in order, and no system call is made per input to watch the socket again.
///
/// A watched socket is known by a token that is never reused. The kernel hands a thread the token
/// of a socket with new input; the thread looks the token up (a watch canceled in between is gone:
/// the event is dropped) and runs the handler until it has read everything the socket had
/// (`Handled.drained`). An event for a socket another thread is handling is passed to that thread
/// (it runs the handler once more), so input that arrives while a handler reads is never left
/// unread. A thread that has read `fullReadsPerTurn` full buffers in a row from one socket asks the
/// kernel to look at it again and goes back to waiting, so one busy socket takes its turn behind
/// the others. `Watch.cancel(then:)` removes the socket from the queue at once, or, while a thread
/// is handling its input, has that thread remove it afterwards; `then` (which closes the socket)
/// runs on the connection's queue only after that, so a new socket that reuses the number is
/// never handled as the old one.
final class ReadThreads: Sendable {
    /// The threads of `SocketReading.default`: one per processor, at least 2 (so that one busy
    /// connection never holds up the rest), at most 8.
    static let defaultCount = min(max(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 2), 8)

    /// The threads' name (in `top -H`, a debugger, a crash log).
    static let threadName = "tether.read"

    /// Full buffers a thread reads from one socket before it lets the others' input go first.
    static let fullReadsPerTurn = 4

    /// What a socket's handler did with its input.
    enum Handled: Sendable, Equatable {
        /// Read everything the socket had (a read shorter than asked, or none waiting): the next
        /// input is a new event.
        case drained
        /// Read as much as it asks for at once: the socket may hold more (the handler runs again).
        case more
        /// Stop watching (the connection is closing); only the cancel is awaited now.
        case stopWatching
    }

    /// One watched socket: an object, so that a thread takes it from the table once per input
    /// (one lookup, one reference) and changes it in place. Its `var`s are guarded by the
    /// table's mutex.
    private final class Entry: @unchecked Sendable {
        let socket: Int32
        let queue: DispatchQueue
        /// Runs on `queue` when the socket has input.
        let handler: @Sendable () -> Handled
        /// Runs on `queue` when the socket cannot be watched any more (the kernel refused to look
        /// at it again after a thread's turn with it): the connection must end, as no input would
        /// reach it.
        let failed: @Sendable (Int32) -> Void
        /// `queue`'s Dispatch object, for `dispatch_sync_f` (`DirectQueue.object(of:)`); nil: `queue.sync`.
        let direct: OpaquePointer?
        /// A thread is running `handler` (guarded by the table's mutex, so exempt from run-time
        /// exclusivity checks, as are the other `var`s).
        @exclusivity(unchecked) var handling = false
        /// An event came while a thread was running `handler`: that thread runs it once more.
        @exclusivity(unchecked) var pending = false
        /// Such an event reported the peer's end: that thread reads until the end.
        @exclusivity(unchecked) var pendingEnd = false
        /// The handler asked to stop watching: later events are dropped.
        @exclusivity(unchecked) var stopped = false
        /// Canceled while a thread was handling: that thread removes the socket, then runs this on
        /// `queue` (guarded by the table's mutex).
        @exclusivity(unchecked) var onCanceled: (@Sendable () -> Void)?

        init(
            socket: Int32,
            queue: DispatchQueue,
            handler: @escaping @Sendable () -> Handled,
            failed: @escaping @Sendable (Int32) -> Void
        ) {
            self.socket = socket
            self.queue = queue
            direct = DirectQueue.object(of: queue)
            self.handler = handler
            self.failed = failed
        }
    }

    private struct Table {
        var entries: [UInt64: Entry] = [:]
        var nextToken: UInt64 = 1
        /// Timed waits that came back without input, over all the threads (for the tests).
        var quietWakeUps = 0
        /// Of them, those of a thread that was no longer the last to handle input when it woke
        /// (its timer armed before another thread took over; for the tests).
        var staleWakeUps = 0
        /// Events passed on to the thread handling their socket, and of them those that reported
        /// the peer's end (for the tests).
        var passedOn = (events: 0, ends: 0)
    }

    /// How many times the threads woke from a timed wait without input (`tickWindow`).
    var quietWakeUps: Int { table.withLock { $0.quietWakeUps } }

    /// How many of those were made by a thread that was no longer the last to handle input.
    var staleWakeUps: Int { table.withLock { $0.staleWakeUps } }

    /// How many events were passed on to the thread handling their socket (and how many of them
    /// reported the peer's end).
    var eventsPassedOn: (events: Int, ends: Int) { table.withLock { $0.passedOn } }

    /// The kernel's readiness queue.
    private let poll: Int32

    /// The thread (its index, `threadIndices`) that last finished handling input: only it waits
    /// with a timer (`tickWindow`). The kernel hands an event to the thread that went back to
    /// waiting last, which is this one while input keeps coming, so its processor is the one whose
    /// tick should keep running. Were every thread to keep its own timer, an idle thread's timer
    /// would wake it every millisecond, and, back to waiting after the busy one, it would take the
    /// next input from it: the input alternates between threads (the thread that handles it has
    /// just woken from a timer, and its caches are cold) and the threads wake a thousand times a
    /// second for nothing.
    private let lastHandler = Atomic<Int>(-1)
    /// The next thread's index.
    private let threadIndices = Atomic<Int>(0)
    private let table = PThreadLocked(Table())

    /// How many 1 ms waits with a timer a thread makes after an input before it waits without one
    /// (`SocketReading.sharedThreads`' `tickWindow`; zero on Apple platforms).
    private let timedWaits: Int

    /// The process's sets of threads, by thread count and timed waits (created at first use, kept
    /// for the life of the process, as Dispatch keeps its own threads).
    private static let sets = PThreadLocked<[SetKey: ReadThreads]>([:])

    private struct SetKey: Hashable {
        let count: Int
        let timedWaits: Int
    }

    /// The process's `count` threads for `tickWindow` (started at first use); nil when the system
    /// gives no readiness queue or no thread (the caller then uses a Dispatch source).
    static func shared(count: Int, tickWindow: Duration = SocketReading.defaultTickWindow) -> ReadThreads? {
        let key = SetKey(count: max(count, 1), timedWaits: timedWaits(tickWindow))
        return sets.withLock { sets -> ReadThreads? in
            if let existing = sets[key] { return existing }
            let poll = tether_event_poll_create()
            guard poll >= 0 else { return nil }
            let threads = ReadThreads(poll: poll, timedWaits: key.timedWaits)
            var started = 0
            for _ in 0..<key.count where threads.startThread() { started += 1 }
            guard started > 0 else { return nil }  // the queue stays open: a few bytes, once
            sets[key] = threads
            return threads
        }
    }

    /// The 1 ms waits `tickWindow` makes (rounded up; none on Apple platforms).
    static func timedWaits(_ tickWindow: Duration) -> Int {
        #if os(Linux)
            let (seconds, attoseconds) = tickWindow.components
            guard seconds >= 0, tickWindow > .zero else { return 0 }
            let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
            guard !milliseconds.overflow, milliseconds.partialValue < Int64(Int32.max) else { return Int(Int32.max) }
            let rest = (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
            return Int(min(milliseconds.partialValue + rest, Int64(Int32.max)))
        #else
            return 0
        #endif
    }

    private init(poll: Int32, timedWaits: Int) {
        self.poll = poll
        self.timedWaits = timedWaits
    }

    /// Watches `socket`: `handler` runs on `queue` (from one of the threads) whenever it has input,
    /// until the watch is canceled or the handler stops it; `failed` runs there with the error
    /// number if the kernel refuses to look at the socket again after a thread's turn with it (the
    /// watch then stands, without events, until it is canceled). Nil when the kernel refuses the
    /// socket.
    func watch(
        socket: Int32,
        queue: DispatchQueue,
        handler: @escaping @Sendable () -> Handled,
        failed: @escaping @Sendable (Int32) -> Void
    ) -> Watch? {
        let token = table.withLock { table -> UInt64? in
            let token = table.nextToken
            table.nextToken &+= 1
            guard tether_event_poll_add(poll, socket, token) == 0 else { return nil }
            table.entries[token] = Entry(socket: socket, queue: queue, handler: handler, failed: failed)
            return token
        }
        return token.map { Watch(threads: self, token: $0) }
    }

    /// A socket's watch (`watch(socket:queue:handler:)`).
    struct Watch: Sendable {
        fileprivate let threads: ReadThreads
        fileprivate let token: UInt64

        /// Stops watching; `then` runs on the connection's queue once no thread handles the socket
        /// any more, nor will.
        func cancel(then: @escaping @Sendable () -> Void) {
            threads.cancel(token, then: then)
        }
    }

    private func cancel(_ token: UInt64, then: @escaping @Sendable () -> Void) {
        let queue = table.withLock { table -> DispatchQueue? in
            guard let entry = table.entries[token] else { return nil }
            if entry.handling {
                entry.onCanceled = then
                return nil
            }
            table.entries[token] = nil
            _ = tether_event_poll_remove(poll, entry.socket)
            return entry.queue
        }
        queue?.async(execute: then)
    }

    private func startThread() -> Bool {
        let context = Unmanaged.passRetained(self).toOpaque()
        #if canImport(Darwin)
            var thread: pthread_t?
        #else
            var thread = pthread_t()
        #endif
        let started = pthread_create(
            &thread,
            nil,
            { context in
                #if canImport(Darwin)
                    let threads = Unmanaged<ReadThreads>.fromOpaque(context).takeRetainedValue()
                #else
                    let threads = Unmanaged<ReadThreads>.fromOpaque(context!).takeRetainedValue()
                #endif
                threads.run()
                return nil
            },
            context
        )
        guard started == 0 else {
            Unmanaged<ReadThreads>.fromOpaque(context).release()
            return false
        }
        #if canImport(Darwin)
            if let thread { pthread_detach(thread) }
        #else
            pthread_detach(thread)
        #endif
        return true
    }

    private func run() {
        #if canImport(Darwin)
            pthread_setname_np(Self.threadName)
        #else
            // `pthread_setname_np` is a GNU extension the Glibc module does not show; the kernel's
            // own way is the thread's `comm` file.
            let file = open("/proc/thread-self/comm", O_WRONLY)
            if file >= 0 {
                _ = Array(Self.threadName.utf8).withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
                _ = systemClose(file)
            }
        #endif
        let index = threadIndices.wrappingAdd(1, ordering: .relaxed).oldValue
        // The waits since this thread's last input that came back without one (none armed before
        // the first input).
        var quietWaits = timedWaits
        while true {
            var token: UInt64 = 0
            var ended: Int32 = 0
            let timed = quietWaits < timedWaits && lastHandler.load(ordering: .relaxed) == index
            let waited = tether_event_poll_wait(poll, &token, &ended, timed ? 1 : -1)
            if waited < 0 {
                // Only ENOMEM can happen here: wait a moment and watch again.
                usleep(1000)
                continue
            }
            guard waited == 1 else {
                if timed {
                    let stale = lastHandler.load(ordering: .relaxed) != index
                    table.withLock { table in
                        table.quietWakeUps += 1
                        if stale { table.staleWakeUps += 1 }
                    }
                }
                quietWaits += 1
                continue
            }
            if handle(token, ended: ended != 0) {
                // Without a window nothing reads it: no shared write per input.
                if timedWaits > 0 { lastHandler.store(index, ordering: .relaxed) }
                quietWaits = 0
            }
        }
    }

    /// Runs the handler of the socket `token` names (if its watch still stands) until it has read
    /// everything, or hands the event to the thread handling it; removes the socket when it was
    /// canceled meanwhile. `ended`: the event reports the peer's end (or a failure), which a read
    /// after the last input reads: the handler runs once more after it reported `.drained`.
    /// Returns whether this thread ran the handler.
    private func handle(_ token: UInt64, ended: Bool) -> Bool {
        let taken = table.withLock { table -> Entry? in
            guard let entry = table.entries[token], !entry.stopped else { return nil }
            guard !entry.handling else {
                entry.pending = true
                table.passedOn.events += 1
                if ended {
                    entry.pendingEnd = true
                    table.passedOn.ends += 1
                }
                return nil
            }
            entry.handling = true
            return entry
        }
        guard let entry = taken else { return false }
        var fullReads = 0
        var endUnread = ended
        while true {
            let handled = Self.handleOnQueue(entry)
            if handled == .more { fullReads += 1 }
            let step = table.withLock { table -> Step in
                // The entry is still in the table: a cancel while `handling` leaves it there for
                // this thread to remove.
                if let onCanceled = entry.onCanceled {
                    entry.handling = false
                    table.entries[token] = nil
                    _ = tether_event_poll_remove(poll, entry.socket)
                    return .then(onCanceled)
                }
                guard handled != .stopWatching else {
                    entry.handling = false
                    entry.stopped = true
                    return .done
                }
                var again = handled == .more
                if entry.pending {
                    // Input came meanwhile (its event passed on to this thread), maybe the end.
                    entry.pending = false
                    again = true
                    if entry.pendingEnd {
                        entry.pendingEnd = false
                        endUnread = true
                    }
                } else if handled == .drained && endUnread {
                    endUnread = false
                    again = true
                }
                guard again else {
                    entry.handling = false
                    return .done
                }
                if fullReads < Self.fullReadsPerTurn { return .again }
                // The socket's turn is over: the kernel looks at it again (an event behind the
                // others' if it still has input, or its end).
                entry.handling = false
                guard tether_event_poll_rearm(poll, entry.socket, token) != 0 else { return .done }
                let error = errno
                let failed = entry.failed
                return .then { failed(error) }
            }
            switch step {
            case .again: continue
            case .done: return true
            case .then(let job):
                entry.queue.async(execute: job)
                return true
            }
        }
    }

    /// What `handle` does after a handler ran.
    private enum Step {
        /// Run the handler again (input may be waiting).
        case again
        case done
        /// Run this on the connection's queue, and be done.
        case then(@Sendable () -> Void)
    }
}

extension ReadThreads {
    /// Runs `entry`'s handler on its queue (`queue.sync`, which an idle serial queue runs on this
    /// thread) with the jobs it gives the queue's executor (`ConnectionExecutor.runningInline`).
    ///
    /// Through `dispatch_sync_f` where the queue's Dispatch object is known (`DirectQueue`), on
    /// every input.
    private static func handleOnQueue(_ entry: Entry) -> Handled {
        #if canImport(CDispatch)
            if let direct = entry.direct {
                var context = DirectSync(entry: entry)
                withUnsafeMutablePointer(to: &context) { pointer in
                    dispatch_sync_f(direct, pointer) { raw in
                        guard let context = raw?.assumingMemoryBound(to: DirectSync.self) else { return }
                        let entry = context.pointee.entry
                        context.pointee.handled = ConnectionExecutor.runningInline(on: entry.queue, entry.handler)
                    }
                }
                return context.handled
            }
        #endif
        // The untyped `sync` (the generic one's helper looks up type metadata on every call).
        var handled = Handled.drained
        let queue = entry.queue
        queue.sync { handled = ConnectionExecutor.runningInline(on: queue, entry.handler) }
        return handled
    }

    /// What `handleOnQueue` passes to `dispatch_sync_f`.
    private struct DirectSync {
        let entry: Entry
        var handled = Handled.drained
    }
}

/// A value guarded by a pthread mutex. Not `Synchronization.Mutex`: on Linux that locks with raw
/// futex calls, which ThreadSanitizer does not see, so every access under it would be reported as
/// a race (as `Handoff` says for its slot); a pthread mutex is visible to it on every path.
final class PThreadLocked<Value>: @unchecked Sendable {
    // `value` is guarded by `mutex` (so exempt from run-time exclusivity checks).
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    @exclusivity(unchecked) private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
