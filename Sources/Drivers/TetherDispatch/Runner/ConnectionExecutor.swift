import CEventPoll
import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Marks every runner's queue with its own identity, so that a call knows whether it is made on
/// its runner's queue (by a task on `ConnectionExecutor`), on another runner's, or elsewhere.
@usableFromInline let runnerQueueKey = DispatchSpecificKey<ObjectIdentifier>()

/// A connection's queue as a task executor (`XMPPClient.executor`, `HubConnection.executor`).
///
/// A task that prefers it (`withTaskExecutorPreference(connection.executor) { … }`) runs on the
/// connection's queue. The answer to each of its calls then resumes it on the thread that read the
/// answer, right after that input is handled, instead of waking a thread of the global pool: one
/// thread hand-off less per call, which is most of a call's latency over what the server itself
/// takes (`Specs/machine-contract.md`, "The runner"). The calls it makes run on the queue at once.
///
/// The sends such a task makes before it next waits leave together: the runner holds their bytes
/// (`Transport.hold`) and writes them in one go when the task's job ends, so that a burst costs
/// the server one read instead of one per message.
///
/// The price: while the task runs, the connection's input waits for it. Keep the work between
/// calls short, and leave the preference (or hand off) for anything heavy or blocking. Waiting
/// for another connection's calls from it is fine: no runner's queue ever waits for another's.
///
/// `@unchecked Sendable`: `isRunningJob` and `afterJob` are used only on the queue.
public final class ConnectionExecutor: TaskExecutor, @unchecked Sendable {
    private let queue: DispatchQueue
    /// A job of this executor runs now (on the queue).
    @exclusivity(unchecked) @usableFromInline private(set) var isRunningJob = false
    /// Runs on the queue after each job (the runner writes what the job's sends held).
    @exclusivity(unchecked) @usableFromInline var afterJob: (() -> Void)?

    @usableFromInline init(queue: DispatchQueue) {
        self.queue = queue
    }

    private func run(_ job: InlineJobs.Job) {
        let thread = InlineJobs.ofThisThread
        let outer = thread.runningExecutor
        thread.runningExecutor = ObjectIdentifier(self)
        isRunningJob = true
        switch job {
        case .task(let job): job.runSynchronously(on: asUnownedTaskExecutor())
        case .call(let body): body()
        }
        isRunningJob = false
        thread.runningExecutor = outer
        afterJob?()
    }

    /// This thread runs a job of this executor now, and so is on the queue (a completion that
    /// calls again): asked of any thread, without a queue lookup.
    @usableFromInline package var isRunningJobOnThisThread: Bool {
        InlineJobs.runningExecutorOfThisThread == ObjectIdentifier(self)
    }

    /// Runs `job` on the connection's queue (inline after the input that resumed it, when one is being handled on this thread).
    public func enqueue(_ job: consuming ExecutorJob) {
        schedule(.task(UnownedJob(job)))
    }

    /// Runs `body` on the connection's queue as a job of this executor, as `enqueue` runs a task's:
    /// right after the input being handled on this thread, when it is this queue's; else as a
    /// block on the queue. What `body` sends leaves when it returns (`Transport.hold`). For the
    /// completions of the clients' callback calls (`XMPPClient.request(_:timeout:completion:)`).
    @usableFromInline package func perform(_ body: @escaping @Sendable () -> Void) {
        schedule(.call(body))
    }

    /// Jobs of this executor wait to run on this thread right after the input it handles now
    /// (`runningInline`), and `afterJob` will be called after them, still on the queue: work
    /// that only has to be done before the queue is left can wait for that.
    @usableFromInline var jobsFollowThisInput: Bool {
        guard let inline = InlineJobs.current, inline.queue == ObjectIdentifier(queue) else { return false }
        return inline.hasJobs(of: self)
    }

    private func schedule(_ job: InlineJobs.Job) {
        if let inline = InlineJobs.current, inline.queue == ObjectIdentifier(queue) {
            if inline.first == nil {
                inline.first = (job, self)
            } else {
                inline.more.append((job, self))
            }
            inline.lastScheduler = ObjectIdentifier(self)
        } else {
            queue.async { self.run(job) }
        }
    }

    /// Runs `body` (an input, on `queue`, on one of the `ReadThreads`) and then, still on `queue` and on this
    /// thread, the jobs the input gave this queue's executor (the tasks its answers resumed):
    /// enqueued on the queue instead, they would wait for a thread of Dispatch's to be woken. Jobs
    /// those jobs enqueue go to the queue as usual.
    ///
    /// The collector is the thread's own, reused from input to input (an input allocates nothing
    /// for it); it is active only while `body` runs, which never nests on a thread.
    static func runningInline<Result>(on queue: DispatchQueue, _ body: () -> Result) -> Result {
        let inline = InlineJobs.ofThisThread
        inline.queue = ObjectIdentifier(queue)
        let result = body()
        inline.queue = nil
        // Jobs these jobs enqueue go to the queue (the collector is inactive now), so the list
        // does not change while it runs.
        if let (job, executor) = inline.first.take() {
            executor.run(job)
            if !inline.more.isEmpty {
                for index in inline.more.indices {
                    let (job, executor) = inline.more[index]
                    executor.run(job)
                }
                inline.more.removeAll(keepingCapacity: true)
            }
            inline.lastScheduler = nil
        }
        return result
    }
}

/// The jobs collected by `ConnectionExecutor.runningInline` on one thread, and the executor whose
/// job the thread runs.
private final class InlineJobs {
    /// A task's job, or a completion (`ConnectionExecutor.perform`).
    enum Job {
        case task(UnownedJob)
        case call(@Sendable () -> Void)
    }

    /// The queue whose input the thread runs inline now (its identity: the input's `sync` keeps
    /// it alive); nil between inputs.
    @exclusivity(unchecked) var queue: ObjectIdentifier?
    /// The first job collected (most inputs give one at most: moved out to run, not copied).
    @exclusivity(unchecked) var first: (Job, ConnectionExecutor)?
    /// The jobs collected after `first`, in order.
    @exclusivity(unchecked) var more: [(Job, ConnectionExecutor)] = []
    /// The executor whose job the thread runs now.
    @exclusivity(unchecked) var runningExecutor: ObjectIdentifier?
    /// The executor that collected the last of the jobs (nil while there are none).
    @exclusivity(unchecked) var lastScheduler: ObjectIdentifier?

    /// Whether `executor` collected any of the jobs (without going through the list: a queue has
    /// one executor, and one that is not the last to collect a job looks it up).
    func hasJobs(of executor: ConnectionExecutor) -> Bool {
        guard let lastScheduler else { return false }
        return lastScheduler == ObjectIdentifier(executor) || first?.1 === executor
            || more.contains { $0.1 === executor }
    }

    /// The executor whose job this thread runs now.
    static var runningExecutorOfThisThread: ObjectIdentifier? {
        guard let pointer = tether_thread_slot(Int32(TETHER_THREAD_SLOT_JOBS)) else { return nil }
        return Unmanaged<InlineJobs>.fromOpaque(pointer).takeUnretainedValue().runningExecutor
    }

    /// The collector of the thread, when it runs an input inline now.
    static var current: InlineJobs? {
        guard let pointer = tether_thread_slot(Int32(TETHER_THREAD_SLOT_JOBS)) else { return nil }
        let inline = Unmanaged<InlineJobs>.fromOpaque(pointer).takeUnretainedValue()
        return inline.queue == nil ? nil : inline
    }

    /// The thread's collector, made at its first input or job (in the thread's slot, read inline;
    /// released when the thread ends, by the key's destructor).
    static var ofThisThread: InlineJobs {
        if let pointer = tether_thread_slot(Int32(TETHER_THREAD_SLOT_JOBS)) {
            return Unmanaged<InlineJobs>.fromOpaque(pointer).takeUnretainedValue()
        }
        let inline = InlineJobs()
        let pointer = Unmanaged.passRetained(inline).toOpaque()
        tether_thread_slot_set(Int32(TETHER_THREAD_SLOT_JOBS), pointer)
        pthread_setspecific(key, pointer)
        return inline
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            tether_thread_slot_set(Int32(TETHER_THREAD_SLOT_JOBS), nil)
            #if canImport(Darwin)
                Unmanaged<InlineJobs>.fromOpaque(pointer).release()
            #else
                if let pointer { Unmanaged<InlineJobs>.fromOpaque(pointer).release() }
            #endif
        }
        return key
    }()
}
