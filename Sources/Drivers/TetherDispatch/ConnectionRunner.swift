package import Dispatch
@_spi(TetherInternal) package import TetherCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What every client's runner shares, whatever its protocol (`Specs/machine-contract.md`, "The
/// runner"): one serial queue that owns the machine, one timer armed at the machine's earliest
/// deadline, the action loop, event delivery, and the awaiting calls with their cancellation.
/// A client adds what its protocol needs: how each action is carried out (`perform`), what to
/// check after every drain (`afterDrain`), and its waiters.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: `machine` and everything else
/// mutable are used only on `queue` (`dispatchPrecondition` checks the loop).
package final class ConnectionRunner<Machine: ConnectionMachine & ~Copyable & SendableMetatype, Event: Sendable>:
    @unchecked Sendable
{
    package let queue: DispatchQueue
    /// The queue as a task executor (`ConnectionExecutor`).
    package let executor: ConnectionExecutor
    package var machine: Machine
    package let events: EventDelivery<Event>
    private let timer: DeadlineTimer
    package private(set) var isShutDown = false
    private var perform: (Machine.Action) -> Void = { _ in }
    private var afterDrain: () -> Void = {}

    /// A runner for `machine` on a new serial queue named `label`. The queue targets the global
    /// concurrent queue (not an overcommitting one of its own), so that many connections share a
    /// pool of threads about as large as the machine has cores.
    package init(label: String, machine: consuming Machine) {
        let queue = DispatchQueue(label: label, target: DispatchQueue.global())
        self.queue = queue
        queue.setSpecific(key: runnerQueueKey, value: ObjectIdentifier(queue))
        executor = ConnectionExecutor(queue: queue)
        self.machine = machine
        events = EventDelivery(runnerQueue: queue)
        timer = DeadlineTimer(queue: queue)
        timer.onFire = { [weak self] in self?.timerFired() }
    }

    /// Sets the protocol's part: `perform` carries out one action, `afterDrain` runs after every
    /// drain. The closures should hold their owner unowned: the owner holds the runner, and only
    /// the owner's calls reach the runner (and its `shutDown()` ends them).
    package func bind(perform: @escaping (Machine.Action) -> Void, afterDrain: @escaping () -> Void = {}) {
        self.perform = perform
        self.afterDrain = afterDrain
    }

    /// The current time on the clock the machine runs on (the uptime clock Dispatch timers use).
    package func now() -> Instant {
        DeadlineTimer.now()
    }

    /// After every input (a transport event, a timer, an app command): carries out every action
    /// the machine queued, then arms the timer at its earliest deadline.
    package func drive() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !isShutDown else { return }
        while let action = machine.pollAction() { perform(action) }
        afterDrain()
        // What `afterDrain` asked of the machine (a command that found room) is carried out now,
        // not at the next input.
        while let action = machine.pollAction() { perform(action) }
        events.flush()
        timer.arm(at: machine.pollTimeout())
    }

    private func timerFired() {
        machine.handleTimeout(now: now())
        drive()
    }

    /// The client is gone (on the queue): stops the timer and ends the event streams; nothing is
    /// carried out any more. The owner closes what it holds (transports, waiters) around it.
    package func shutDown() {
        dispatchPrecondition(condition: .onQueue(queue))
        isShutDown = true
        timer.cancel()
        events.finish()
        perform = { _ in }
        afterDrain = {}
    }

    /// What the protocol's runner adds to the machine's health (the TLS version of its transport).
    package var completeHealth: (inout ConnectionHealth) -> Void = { _ in }

    private func currentHealth() -> ConnectionHealth {
        var health = machine.health(now: now())
        completeHealth(&health)
        return health
    }

    /// The machine's health now.
    package func health() async -> ConnectionHealth {
        await call { [self] handoff in handoff.resume(returning: currentHealth()) }
    }

    /// The machine's health now and then every `interval`, until the stream's consumer stops
    /// (or the client is gone).
    package func healthUpdates(every interval: Duration) -> AsyncStream<ConnectionHealth> {
        precondition(interval > .zero, "the interval must be positive")
        let (stream, continuation) = AsyncStream<ConnectionHealth>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now(), repeating: .nanoseconds(Int(interval.totalNanoseconds)))
        timer.setEventHandler { [weak self] in
            guard let self, !isShutDown else { return continuation.finish() }
            continuation.yield(currentHealth())
        }
        // Cancelled on the queue it runs on (the source is not Sendable; the queue keeps it safe).
        nonisolated(unsafe) let source = timer
        let queue = queue
        continuation.onTermination = { _ in queue.async { source.cancel() } }
        timer.resume()
        return stream
    }

    /// An awaiting call of the app's: `start` runs on the queue with the hand-off the caller's
    /// task awaits; when the task is canceled first, `cancel` runs on the queue (it must resume the
    /// hand-off at once, with the call's `canceled` error).
    ///
    /// `start` runs with `queue.sync`, on the caller's thread: the queue's work items are short
    /// and never wait, so this costs no thread hop, and a call that `start` answers at once (a
    /// send with room, a state query) returns without suspending. Only an answer that comes later
    /// (a response, a connect) hops back to the task, unless the task prefers `executor`. A call
    /// made on the queue already (by such a task) runs `start` at once; one made on another
    /// runner's queue enqueues it, so that no queue ever waits for another.
    package func call<Value: Sendable>(
        _ start: @escaping @Sendable (Handoff<Value>) -> Void,
        onCancel cancel: (@Sendable () -> Void)? = nil
    ) async -> Value {
        let queue = queue
        let enter: (Handoff<Value>) -> Void = { handoff in
            switch DispatchQueue.getSpecific(key: runnerQueueKey) {
            case .none: queue.sync { start(handoff) }
            case .some(let current) where current == ObjectIdentifier(queue): start(handoff)
            case .some: queue.async { start(handoff) }
            }
        }
        guard let cancel else {
            return await awaitHandoff(enter)
        }
        return await withTaskCancellationHandler {
            await awaitHandoff(enter)
        } onCancel: {
            queue.async { cancel() }
        }
    }
}

/// Marks every runner's queue with its own identity, so that a call knows whether it is made on
/// its runner's queue (by a task on `ConnectionExecutor`), on another runner's, or elsewhere.
private let runnerQueueKey = DispatchSpecificKey<ObjectIdentifier>()

/// A connection's queue as a task executor (`XMPPClient.executor`, `HubConnection.executor`).
///
/// A task that prefers it (`withTaskExecutorPreference(connection.executor) { … }`) runs on the
/// connection's queue. The answer to each of its calls then resumes it on the thread that read the
/// answer, right after that input is handled, instead of waking a thread of the global pool: one
/// thread hand-off less per call, which is most of a call's latency over what the server itself
/// takes (`Specs/machine-contract.md`, "The runner"). The calls it makes run on the queue at once.
///
/// The price: while the task runs, the connection's input waits for it. Keep the work between
/// calls short, and leave the preference (or hand off) for anything heavy or blocking. Waiting
/// for another connection's calls from it is fine: no runner's queue ever waits for another's.
public final class ConnectionExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(queue: DispatchQueue) {
        self.queue = queue
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        if let inline = InlineJobs.current, inline.queue === queue {
            inline.jobs.append((job, self))
        } else {
            queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    /// Runs `body` (an input, on `queue`, on a `ReadThread`) and then, still on `queue` and on this
    /// thread, the jobs the input gave this queue's executor (the tasks its answers resumed):
    /// enqueued on the queue instead, they would wait for a thread of Dispatch's to be woken. Jobs
    /// those jobs enqueue go to the queue as usual.
    static func runningInline<Result>(on queue: DispatchQueue, _ body: () -> Result) -> Result {
        let inline = InlineJobs(queue: queue)
        InlineJobs.current = inline
        let result = body()
        InlineJobs.current = nil
        for (job, executor) in inline.jobs { job.runSynchronously(on: executor.asUnownedTaskExecutor()) }
        return result
    }
}

/// The jobs collected by `ConnectionExecutor.runningInline` on the current thread.
private final class InlineJobs {
    let queue: DispatchQueue
    var jobs: [(UnownedJob, ConnectionExecutor)] = []

    init(queue: DispatchQueue) {
        self.queue = queue
    }

    /// The thread's collector, if it runs an input inline (a thread-specific value, unretained: the
    /// collector lives through `runningInline`).
    static var current: InlineJobs? {
        get { pthread_getspecific(key).map { Unmanaged<InlineJobs>.fromOpaque($0).takeUnretainedValue() } }
        set { pthread_setspecific(key, newValue.map { Unmanaged.passUnretained($0).toOpaque() }) }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}

/// How a client treats a command when its protocol's queue of unacknowledged messages is full
/// (XEP-0198's stanzas awaiting acknowledgement, SignalR's stateful-reconnect buffer), or the
/// network has not taken `ConnectionOptions.maximumUnsentBytes`: the same choice on both clients.
public enum BackPressure: Sendable, Equatable {
    /// The call waits (cancelably) until there is room, in order with the calls after it. The
    /// default: a plain loop of sends loses nothing.
    case wait
    /// The call throws the protocol's "full" error at once (`sendQueueFull`, `sendBufferFull`):
    /// the app decides.
    case fail
}

/// Commands that found the send queue full, waiting for room in order (`BackPressure.wait`). Used
/// only on the runner's queue.
package struct BlockedCommands<Machine: ~Copyable, Failure: Error> {
    package struct Command {
        /// Runs it; throws the protocol's "full" error when there is still no room.
        package var run: (inout Machine, Instant) throws(Failure) -> Void
        package var fail: (Failure) -> Void
        /// Identifies the command for canceling it (its awaiting call).
        package var call: AnyObject?

        package init(
            run: @escaping (inout Machine, Instant) throws(Failure) -> Void,
            fail: @escaping (Failure) -> Void,
            call: AnyObject? = nil
        ) {
            self.run = run
            self.fail = fail
            self.call = call
        }
    }

    private var commands: [Command] = []

    package init() {}

    package var isEmpty: Bool { commands.isEmpty }

    package mutating func append(_ command: Command) {
        commands.append(command)
    }

    /// Runs `command` now unless others wait (then it waits behind them, in order). When it finds
    /// no room (`isFull`) and the app chose to wait (`backPressure`), it waits and this returns
    /// true (the caller may log it, or ask the server to acknowledge); any other error fails it.
    package mutating func submit(
        _ command: Command,
        on machine: inout Machine,
        now: Instant,
        backPressure: BackPressure,
        isFull: (Failure) -> Bool
    ) -> Bool {
        guard isEmpty else {
            append(command)
            return false
        }
        do throws(Failure) {
            try command.run(&machine, now)
        } catch {
            guard isFull(error), backPressure == .wait else {
                command.fail(error)
                return false
            }
            append(command)
            return true
        }
        return false
    }

    /// Runs the waiting commands in order until one finds no room (`isFull`) again.
    package mutating func retry(on machine: inout Machine, now: Instant, isFull: (Failure) -> Bool) {
        while let command = commands.first {
            do throws(Failure) {
                try command.run(&machine, now)
            } catch {
                if isFull(error) { return }
                command.fail(error)
            }
            commands.removeFirst()
        }
    }

    /// Fails the waiting command of `call` (its task was canceled); false if none waits.
    package mutating func cancel(_ call: AnyObject, with error: Failure) -> Bool {
        guard let index = commands.firstIndex(where: { $0.call === call }) else { return false }
        commands.remove(at: index).fail(error)
        return true
    }

    /// Fails every waiting command (the connection closed).
    package mutating func failAll(_ error: Failure) {
        let failing = commands
        commands.removeAll()
        for command in failing { command.fail(error) }
    }
}
