public import Dispatch
@_spi(TetherInternal) public import TetherCore

/// The one runner of every Tether client, whatever its protocol (`Specs/machine-contract.md`,
/// "The runner"). It owns what is the same everywhere:
/// - one serial queue that owns the machine, one timer armed at the machine's earliest deadline,
///   and the action loop;
/// - the transports, one per generation (`openTransport`, `send`, `closeTransport` carried out
///   from `ConnectionOptions.transportFactory`; their events mapped to the machine's inputs, those
///   of generations it no longer holds dropped);
/// - the lifecycle: `connect()`/`start()` and `disconnect()`/`stop()` waiters and their
///   cancellation, ended by `connected`, `resumed`, `suspended` and `closed`, every change logged
///   in one format and delivered to the app before the call it ends returns;
/// - back-pressure (commands waiting for room in the protocol's queue or the network's), the
///   device inputs, and the health (the machine's, with its transport's TLS version and the bytes
///   the network has not taken).
///
/// A client adds only what its protocol has and the other lacks (`ConnectionProtocolPart`): its
/// own requests, its events, and the waiters of its own calls (XMPP's iq requests and flushes,
/// SignalR's invocations and streams).
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: `machine` and everything else
/// mutable are used only on `queue` (`dispatchPrecondition` checks the loop in debug builds, so
/// in every test).
///
/// SPI-public, with `@inlinable package` members, only so that each client's module compiles its
/// own copy specialized for its machine: a generic type used from another module runs
/// unspecialized and looks up type metadata for every message, and the members of a `package`
/// type are never inlined across modules (`Specs/performance.md`, "The ping's critical path").
/// The same holds for `BlockedCommands`, `EventDelivery`, `Handoff` and `ConnectionLog`. Not API:
/// the `TetherInternal` SPI is for this package's own modules.
@_spi(TetherInternal)
public final class ConnectionRunner<Machine: ConnectionMachine & ~Copyable & SendableMetatype, ClientEvent: Sendable>:
    @unchecked Sendable
{
    public typealias Session = Machine.Event.Session
    public typealias Failure = Machine.Event.Failure
    public typealias Lifecycle = ConnectionLifecycle<Session, Failure>
    public typealias Command = BlockedCommands<Machine, Failure>.Command

    @usableFromInline package let queue: DispatchQueue
    /// `queue`, entered from other threads without `sync`'s allocations.
    @usableFromInline let directQueue: DirectQueue
    /// The queue as a task executor (`ConnectionExecutor`).
    public let executor: ConnectionExecutor
    /// Used only on `queue`, by one access at a time: `drive()` ends each access (`pollAction`)
    /// before it carries the action out, so a call made while an action is carried out (a
    /// command, a nested drive) never overlaps one. Unchecked at run time (a check is a call into
    /// the runtime and a thread-local lookup per access, several per input); the tests run under
    /// ThreadSanitizer for the queue's confinement.
    @exclusivity(unchecked) @usableFromInline package var machine: Machine
    @usableFromInline package let options: ConnectionOptions
    @usableFromInline package let log: ConnectionLog
    @usableFromInline package let delivery: EventDelivery<ClientEvent>
    /// Where event handlers run unless a queue is given when they are registered.
    @usableFromInline package let callbackQueue: DispatchQueue
    @usableFromInline let timer: DeadlineTimer
    @exclusivity(unchecked) @usableFromInline package private(set) var isShutDown = false
    /// The protocol's part (`bind`), reached unowned: it holds the runner, and its `shutDown()`
    /// ends the runner's calls into it. Nil before `bind` and after the shutdown.
    @exclusivity(unchecked) @usableFromInline unowned var part:
        (any ConnectionProtocolPart<Machine.Request, Machine.Event, Failure>)?
    /// The client's event for a lifecycle change.
    @usableFromInline let lifecycleEvent: (Lifecycle) -> ClientEvent
    /// The open transports by generation.
    @exclusivity(unchecked) @usableFromInline package private(set) var transports = TransportTable()
    @usableFromInline var startWaiters: [Handoff<Result<Session, Failure>>] = []
    @usableFromInline var stopWaiters: [Handoff<Void>] = []
    /// Commands waiting for room (`BackPressure.wait`), in order.
    @usableFromInline var blocked = BlockedCommands<Machine, Failure>()
    /// The protocol's part has work after each drain (`ConnectionProtocolPart.afterDrain`): set by
    /// the part, so that a drive does not call it for nothing.
    @exclusivity(unchecked) @usableFromInline package var wantsAfterDrain = false
    /// The generation whose transport holds bytes sent by a job of `executor` (`Transport.hold`),
    /// written when the job ends.
    @exclusivity(unchecked) @usableFromInline var heldGeneration: TransportGeneration?
    /// A drive's last part waits for the end of the executor's next job (`drive`).
    @exclusivity(unchecked) @usableFromInline var drivePending = false

    /// A runner for `machine` on a new serial queue named `label`. The queue targets the global
    /// concurrent queue (not an overcommitting one of its own), so that many connections share a
    /// pool of threads about as large as the machine has cores.
    @inlinable package init(
        label: String,
        machine: consuming Machine,
        options: ConnectionOptions,
        lifecycleEvent: @escaping (Lifecycle) -> ClientEvent
    ) {
        let queue = DispatchQueue(label: label, target: DispatchQueue.global())
        self.queue = queue
        directQueue = DirectQueue(queue)
        queue.setSpecific(key: runnerQueueKey, value: ObjectIdentifier(queue))
        executor = ConnectionExecutor(queue: queue)
        self.machine = machine
        self.options = options
        self.lifecycleEvent = lifecycleEvent
        log = ConnectionLog(level: options.logLevel, handler: options.logHandler)
        delivery = EventDelivery(runnerQueue: queue)
        callbackQueue =
            options.callbackQueue ?? DispatchQueue(label: label + ".callbacks", target: DispatchQueue.global())
        timer = DeadlineTimer(queue: queue)
        timer.onFire = { [weak self] in self?.timerFired() }
        executor.afterJob = { [weak self] in self?.jobEnded() }
    }

    /// Sets the protocol's part (once the client that owns it exists), reached unowned.
    @inlinable package func bind<Part: ConnectionProtocolPart>(_ owner: Part)
    where Part.Request == Machine.Request, Part.Event == Machine.Event, Part.Failure == Failure {
        part = owner
    }

    /// The current time on the clock the machine runs on (the uptime clock Dispatch timers use).
    @inlinable package func now() -> Instant {
        DeadlineTimer.now()
    }

    // MARK: - The loop

    /// After every input (a transport event, a timer, an app command): carries out every action
    /// the machine queued, retries the commands waiting for room, then arms the timer at the
    /// machine's earliest deadline. With `writingHeldBytes` (a request whose caller waits for
    /// its answer), what the executor's job held is written before that last part.
    ///
    /// When jobs this input resumed (or completions it called) run next on this thread, the last
    /// part (the app's events handed on, the timer armed) waits until the first of them ended
    /// (`jobEnded`), still on the queue: the answer reaches them, and their requests the wire, that
    /// much sooner.
    @inlinable package func drive(writingHeldBytes: Bool = false) {
        #if DEBUG
            // In debug builds only: in release a check per drive (two per request) costs the
            // queue lookup each time, on every answer's path.
            dispatchPrecondition(condition: .onQueue(queue))
        #endif
        guard !isShutDown else { return }
        while let action = machine.pollAction() { perform(action) }
        if !blocked.isEmpty { blocked.retry(on: &machine, now: now()) { $0.kind == .sendQueueFull } }
        if wantsAfterDrain { part?.afterDrain() }
        // What the retries and `afterDrain` asked of the machine is carried out now, not at the
        // next input.
        while let action = machine.pollAction() { perform(action) }
        if writingHeldBytes { flushHeldBytes() }
        if executor.jobsFollowThisInput {
            drivePending = true
        } else {
            finishDrive()
        }
    }

    /// The last part of `drive`: the events for the app handed on, the timer armed.
    @inlinable func finishDrive() {
        drivePending = false
        delivery.flush()
        timer.arm(at: machine.pollTimeout())
    }

    /// A job of the executor ended: what its sends held is written, and a command that waits for
    /// room is retried (held bytes count as unsent, and once written without the kernel refusing
    /// any, no `drained` event comes to retry it); the last part of a drive that waited for the
    /// job is done.
    @inlinable func jobEnded() {
        guard !isShutDown else { return }
        if heldGeneration != nil {
            flushHeldBytes()
            if !blocked.isEmpty { drive() }
        }
        if drivePending { finishDrive() }
    }

    /// Writes what the sends of the executor's job held.
    @inlinable func flushHeldBytes() {
        guard let generation = heldGeneration else { return }
        heldGeneration = nil
        transports[generation]?.flush()
    }

    @inlinable func timerFired() {
        machine.handleTimeout(now: now())
        drive()
    }

    /// Carries out `action` (taken: its payload is moved into the call it goes to, not copied).
    @inlinable func perform(_ action: consuming ConnectionAction<Machine.Request, Machine.Event>) {
        switch consume action {
        case .openTransport(let request, let generation):
            log.debug("Connecting to \(request) (\(generation)).")
            let transport = options.makeTransport(request, queue: queue) { [weak self] event in
                self?.transportEvent(event, generation: generation)
            }
            transports[generation] = transport
            transport.start()
        case .send(let bytes, let generation, let containsCredentials):
            log.trace {
                "Sending " + (containsCredentials ? Self.hidingCredentials(bytes) : part?.describe(bytes) ?? "")
            }
            guard let transport = transports[generation] else { return }
            if executor.isRunningJob {
                if heldGeneration != generation { flushHeldBytes() }
                heldGeneration = generation
                transport.hold(bytes)
            } else {
                transport.send(bytes)
            }
        case .closeTransport(let generation):
            if heldGeneration == generation { heldGeneration = nil }
            transports.remove(generation)?.close()
            part?.closeRequests(of: generation)
        case .event(let event):
            if let change = event.lifecycle {
                lifecycleChanged(change)
            } else {
                part?.handle(event)
            }
        case .request(let request):
            log.debug("Request: \(request).")
            part?.perform(request)
        }
    }

    /// A transport's event, for the machine (dropped when the generation is no longer held).
    @inlinable func transportEvent(_ event: TransportEvent, generation: TransportGeneration) {
        guard let transport = transports[generation] else { return }
        switch event {
        case .connected:
            log.debug("The transport of \(generation) is open.")
            machine.transportConnected(generation: generation, tls: transport.channelBindings, now: now())
        case .tlsEstablished:
            let tls = transport.channelBindings
            log.debug("TLS is established (\(transport.tlsVersion ?? "version not told"), channel binding: \(tls)).")
            machine.tlsEstablished(generation: generation, tls: tls, now: now())
        case .received(let bytes):
            log.trace { "Received " + (self.part?.describe(bytes) ?? "") }
            machine.transportReceived(bytes, generation: generation, now: now())
        case .drained:
            break  // the drive's retry of commands waiting for room follows
        case .closed(let error):
            transports.remove(generation)?.close()
            log.debug("The transport of \(generation) closed\(error.map { ": \($0)" } ?? ".")")
            machine.transportClosed(generation: generation, error: error, now: now())
        }
        drive()
    }

    // MARK: - The lifecycle

    @inlinable func lifecycleChanged(_ change: Lifecycle) {
        switch change {
        case .connected, .resumed:
            log.info("\(change.description.prefix(1).uppercased())\(change.description.dropFirst()).")
        case .connectionLost:
            log.warning("The connection was lost: \(change.failure!).")
        case .attemptFailed(let error):
            log.debug("The connect attempt failed: \(error).")
        case .reconnecting(let attempt, let delay, _):
            log.info("Reconnect attempt \(attempt) in \(delay).")
        case .waitingForNetwork:
            log.info("No network: reconnecting when it is back.")
        case .suspended(.gaveUp(let error)):
            log.error("The reconnect policy gave up: \(error); reconnectNow() starts again.")
        case .suspended(.background):
            log.info("Closed for the background; connecting again in the foreground.")
        case .closed(let error):
            if let error { log.error("Stopped: \(error).") } else { log.info("Stopped.") }
        }
        let event = lifecycleEvent(change)
        switch change {
        case .connected(let session), .resumed(let session):
            let waiters = takeStartWaiters()
            delivery.deliver(event) { for waiter in waiters { waiter.resume(returning: .success(session)) } }
        case .suspended(let reason):
            let failure: Failure =
                switch reason {
                case .gaveUp(let error): error
                case .background: Failure(.notConnected, "The connection closed for the background.")
                }
            let waiters = takeStartWaiters()
            delivery.deliver(event) { for waiter in waiters { waiter.resume(returning: .failure(failure)) } }
        case .closed(let error):
            let failure = error ?? Failure(.canceled, "The connection was stopped.")
            let starting = takeStartWaiters()
            let stopping = stopWaiters
            stopWaiters.removeAll()
            blocked.failAll(failure)
            part?.closed(failure)
            delivery.deliver(event) {
                for waiter in starting { waiter.resume(returning: .failure(failure)) }
                for waiter in stopping { waiter.resume() }
            }
        case .connectionLost, .attemptFailed, .reconnecting, .waitingForNetwork:
            delivery.deliver(event)
        }
    }

    @inlinable func takeStartWaiters() -> [Handoff<Result<Session, Failure>>] {
        defer { startWaiters.removeAll() }
        return startWaiters
    }

    // MARK: - Connecting and stopping (on the queue)

    /// `connect()`/`start()`: the session once connected (at once when it is, or while it is being
    /// resumed); from `disconnected` the machine starts, from `suspended` it tries again now; an
    /// attempt under way is waited for.
    @inlinable package func start(_ handoff: Handoff<Result<Session, Failure>>) {
        if let session = machine.session { return handoff.resume(returning: .success(session)) }
        startWaiters.append(handoff)
        switch machine.phase {
        case .disconnected:
            log.info("Starting.")
            machine.start(now: now())
        case .suspended:
            log.info("Starting again after the connection was suspended.")
            machine.reconnectNow(now: now())
        case .connecting, .connected, .resuming, .closing, .reconnectWaiting:
            break
        }
        drive()
    }

    /// The task awaiting `connect()`/`start()` was canceled: the attempt is abandoned (the machine
    /// stops) and the waiting calls throw `canceled`. Nothing happens once connected.
    @inlinable package func cancelStart() {
        guard !startWaiters.isEmpty, machine.session == nil else { return }
        let failure = Failure(.canceled, "The connect's task was canceled.")
        for waiter in takeStartWaiters() { waiter.resume(returning: .failure(failure)) }
        machine.stop(now: now())
        drive()
    }

    /// `disconnect()`/`stop()`: returns once the machine is stopped (at once when it is).
    @inlinable package func stop(_ handoff: Handoff<Void>) {
        guard machine.phase != .disconnected else { return handoff.resume() }
        stopWaiters.append(handoff)
        log.info("Stopping.")
        machine.stop(now: now())
        drive()
    }

    // MARK: - Device inputs (on the queue)

    @inlinable package func reconnectNow() {
        machine.reconnectNow(now: now())
        drive()
    }

    @inlinable package func networkChanged(_ path: NetworkPath) {
        log.debug("Network: \(path).")
        machine.networkChanged(path, now: now())
        drive()
    }

    @inlinable package func applicationStateChanged(_ application: ApplicationState) {
        log.debug("Application: \(application.rawValue).")
        machine.applicationStateChanged(application, now: now())
        drive()
    }

    // MARK: - Commands and back-pressure (on the queue)

    /// Runs `command` now, or, while others wait for room, after them; when it finds no room (the
    /// protocol's queue, or the network holding more than `maximumUnsentBytes`) it waits for some
    /// (`BackPressure.wait`) or fails with `sendQueueFull`. With `writingAtOnce` (for a request
    /// whose caller waits for the answer, and so cannot add to the write before it suspends),
    /// what the executor's job held is written now instead of when the job ends: the request is
    /// on the wire while the task suspends.
    @inlinable package func submit(_ command: Command, writingAtOnce: Bool = false) {
        if let call = command.call as? RunnerCall, call.isCanceled { return command.fail(callCanceled) }
        if blocked.isEmpty {
            // Nothing waits: it runs now, the network's room checked here (no wrapper to build).
            switch runNow(command.run) {
            case .ran:
                break
            case .failed(let error):
                command.fail(error)
            case .waits(let networkFull?) where options.backPressure == .fail:
                command.fail(Failure(.sendQueueFull, networkFull))
            case .waits(let networkFull):
                blocked.append(checkingTheNetwork(command))
                if let networkFull {
                    log.debug("\(networkFull) A send waits for room.")
                } else {
                    part?.queueFull()
                }
            }
        } else {
            blocked.append(checkingTheNetwork(command))
        }
        drive(writingHeldBytes: writingAtOnce)
    }

    /// What `runNow` came to.
    @usableFromInline enum RunNow {
        case ran
        case failed(Failure)
        /// Nothing was done: the network holds too much (its reason), or (nil) the protocol's
        /// queue is full and `BackPressure.wait` holds.
        case waits(networkFull: String?)
    }

    /// Runs `body` on the machine now, unless the network holds more than `maximumUnsentBytes`;
    /// the protocol's `sendQueueFull` is a wait under `BackPressure.wait`. Does not drive.
    @inlinable func runNow(_ body: (inout Machine, Instant) throws(Failure) -> Void) -> RunNow {
        if let reason = networkFullReason() { return .waits(networkFull: reason) }
        do throws(Failure) {
            try body(&machine, now())
            return .ran
        } catch {
            if error.kind == .sendQueueFull && options.backPressure == .wait { return .waits(networkFull: nil) }
            return .failed(error)
        }
    }

    /// Runs `body` on the machine now and drives (writing what the executor's job held first,
    /// with `writingAtOnce`), as `submit` runs a command when nothing waits for room and the
    /// network has some, but without a `Command` to build; its failure is thrown after the drive.
    /// False, with nothing run, when it would have to wait (commands wait already, the network is
    /// full, or `body` found the machine's queue full and `BackPressure.wait` holds): `submit` the
    /// command then.
    @inlinable package func runAtOnce(
        writingAtOnce: Bool = false,
        _ body: (inout Machine, Instant) throws(Failure) -> Void
    ) throws(Failure) -> Bool {
        guard blocked.isEmpty else { return false }
        switch runNow(body) {
        case .ran:
            drive(writingHeldBytes: writingAtOnce)
            return true
        case .failed(let error):
            drive(writingHeldBytes: writingAtOnce)
            throw error
        case .waits:
            return false
        }
    }

    /// Runs `body` for a call of a client: at once when it can (`runAtOnce`; writing at once unless
    /// told not to, as a send from a job of the executor leaves with the job's other sends), else
    /// as the command `later` makes (nothing is made for it on the way that runs at once).
    /// The failure of a `body` run at once (or `canceled`, when `call`'s task was canceled before
    /// it came here) is returned, for the caller to hand to the call's completion as a job of the
    /// executor (never inside the call), or to its hand-off.
    @inlinable package func runForCompletion(
        call: RunnerCall? = nil,
        writingAtOnce: Bool = true,
        _ body: (inout Machine, Instant) throws(Failure) -> Void,
        later: () -> Command
    ) -> Failure? {
        if let call, call.isCanceled { return callCanceled }
        do throws(Failure) {
            if try runAtOnce(writingAtOnce: writingAtOnce, body) { return nil }
        } catch {
            return error
        }
        submit(later(), writingAtOnce: writingAtOnce)
        return nil
    }

    /// `command`, failing with `sendQueueFull` first while the network holds too much, for
    /// retrying when it waits.
    @inlinable func checkingTheNetwork(_ command: Command) -> Command {
        Command(
            run: { [unowned self] machine, now throws(Failure) in
                if let reason = networkFullReason() { throw Failure(.sendQueueFull, reason) }
                try command.run(&machine, now)
            },
            fail: command.fail,
            call: command.call
        )
    }

    /// Why sends must wait for the network now: the transports hold more bytes it has not taken
    /// than `maximumUnsentBytes` (nil: there is room). Each client throws it as its protocol's
    /// "full" error. Reads the limit alone: the options are not copied for it.
    @inlinable func networkFullReason() -> String? {
        let unsent = unsentByteCount
        let limit = options.maximumUnsentBytes
        guard unsent > limit else { return nil }
        return "The network has not taken the \(unsent) bytes sent already (more than maximumUnsentBytes, \(limit))."
    }

    /// Runs `body` on the machine now and carries out its actions.
    @inlinable package func run<Value>(
        _ body: (inout Machine, Instant) throws(Failure) -> Value
    ) -> Result<Value, Failure> {
        let result: Result<Value, Failure>
        do throws(Failure) {
            result = .success(try body(&machine, now()))
        } catch {
            result = .failure(error)
        }
        drive()
        return result
    }

    /// The task of a command waiting for room was canceled: it fails with `canceled` and never
    /// runs. False when it is not waiting (it ran already).
    @discardableResult
    @inlinable package func cancelWaitingCommand(_ call: RunnerCall) -> Bool {
        call.isCanceled = true
        return blocked.cancel(call, with: callCanceled)
    }

    /// The error of a call whose task was canceled before it ran.
    @inlinable var callCanceled: Failure { Failure(.canceled, "The call's task was canceled.") }

    /// The bytes sent that the network has not taken yet, over every open transport.
    @usableFromInline package var unsentByteCount: Int { transports.unsentByteCount }

    /// The transport of the machine's current generation.
    @inlinable package var currentTransport: (any Transport)? {
        machine.currentGeneration.flatMap { transports[$0] }
    }

    // MARK: - Awaiting calls

    /// An awaiting call of the app's: `record.start()` runs on the queue (the record is where its
    /// answer waits for the caller's task); when the task is canceled first, `record.cancel()`
    /// runs on the queue (it must hand off the answer at once, with the call's `canceled` error).
    ///
    /// `start` runs with `queue.sync`, on the caller's thread: the queue's work items are short
    /// and never wait, so this costs no thread hop, and a call that `start` answers at once (a
    /// send with room, a state query) returns without suspending. Only an answer that comes later
    /// (a response, a connect) hops back to the task, unless the task prefers `executor`. A call
    /// made on the queue already (by such a task) runs `start` at once; one made on another
    /// runner's queue enqueues it, so that no queue ever waits for another.
    @inlinable nonisolated(nonsending) package func call<Value: Sendable>(
        _ record: RunnerCall,
        returning _: Value.Type = Value.self,
        cancelable: Bool = true
    ) async -> Value {
        let queue = queue
        let directQueue = directQueue
        let executor = executor
        let enter: (RunnerCall) -> Void = { record in
            // A task on this client's executor is on the queue: known from the thread's mark of
            // the running job, without the queue lookup.
            if executor.isRunningJobOnThisThread { return record.start() }
            switch DispatchQueue.getSpecific(key: runnerQueueKey) {
            case .none: directQueue.start(record)
            case .some(let current) where current == ObjectIdentifier(queue): record.start()
            case .some: queue.async { record.start() }
            }
        }
        guard cancelable else {
            return await record.awaitAnswer(Value.self, entering: enter)
        }
        return await withTaskCancellationHandler {
            await record.awaitAnswer(Value.self, entering: enter)
        } onCancel: {
            queue.async { record.cancel() }
        }
    }

    /// `call(_:)` with a start and a cancel given as closures (each given the call's record).
    @inlinable nonisolated(nonsending) package func call<Value: Sendable>(
        _ start: @escaping @Sendable (Handoff<Value>) -> Void,
        onCancel cancel: (@Sendable (RunnerCall) -> Void)? = nil
    ) async -> Value {
        await call(ClosureCall(start, onCancel: cancel), returning: Value.self, cancelable: cancel != nil)
    }

    /// Runs `body` on the queue as `call` runs its `start`: at once when called on it (by a task
    /// on `executor`, or a completion), with `queue.sync` from elsewhere, and as a block when
    /// called on another runner's queue (no queue waits for another).
    @inlinable package func onQueue(_ body: @escaping @Sendable () -> Void) {
        switch DispatchQueue.getSpecific(key: runnerQueueKey) {
        case .none: directQueue.sync(body)
        case .some(let current) where current == ObjectIdentifier(queue): body()
        case .some: queue.async(execute: body)
        }
    }

    /// `connect()` / `start()`.
    @inlinable nonisolated(nonsending) package func connect() async throws(Failure) -> Session {
        let result: Result<Session, Failure> = await call(
            { [self] in start($0) },
            onCancel: { [self] _ in cancelStart() }
        )
        return try result.get()
    }

    /// `disconnect()` / `stop()`.
    @inlinable nonisolated(nonsending) package func disconnect() async {
        await call { [self] in stop($0) }
    }

    /// Runs `body` on the machine, waiting for room as `ConnectionOptions.backPressure` says;
    /// canceling the task while it waits throws `canceled`, and `body` never runs.
    @inlinable nonisolated(nonsending) package func send<Value: Sendable>(
        _ body: @escaping @Sendable (inout Machine, Instant) throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        try await call(SendCall(runner: self, body: body), returning: Result<Value, Failure>.self).get()
    }

    /// A call of `send(_:)`: its own start and cancel, so that a send costs this object and the
    /// caller's closure (a `ClosureCall` would add its start's and its cancel's).
    @usableFromInline final class SendCall<Value: Sendable>: RunnerCall, @unchecked Sendable {
        @usableFromInline let runner: ConnectionRunner
        @usableFromInline let body: @Sendable (inout Machine, Instant) throws(Failure) -> Value

        @inlinable init(
            runner: ConnectionRunner,
            body: @escaping @Sendable (inout Machine, Instant) throws(Failure) -> Value
        ) {
            self.runner = runner
            self.body = body
        }

        @inlinable override func start() {
            let handoff = Handoff<Result<Value, Failure>>(self)
            let body = body
            // At once when nothing waits for room (no command built), else as a command.
            let failure = runner.runForCompletion(
                call: self,
                writingAtOnce: false,
                { machine, now throws(Failure) in handoff.resume(returning: .success(try body(&machine, now))) },
                later: {
                    Command(
                        run: { machine, now throws(Failure) in
                            handoff.resume(returning: .success(try body(&machine, now)))
                        },
                        fail: { handoff.resume(returning: .failure($0)) },
                        call: handoff.call
                    )
                }
            )
            if let failure { handoff.resume(returning: .failure(failure)) }
        }

        @inlinable override func cancel() {
            runner.cancelWaitingCommand(self)
        }
    }

    // MARK: - Health and shutdown

    @inlinable func currentHealth() -> ConnectionHealth {
        var health = machine.health(now: now())
        health.tlsVersion = currentTransport?.tlsVersion
        health.unsentBytes = unsentByteCount
        health.callsWaitingForRoom = blocked.count
        return health
    }

    /// The client is gone: closes every transport, ends the event streams and the protocol's part;
    /// nothing is carried out any more. The block keeps the runner and `owner` (the protocol's
    /// part, which its closures reach unowned) alive until it has run, so that input handled
    /// before it still finds them.
    @inlinable package func shutDown(keepingAlive owner: some AnyObject & Sendable) {
        queue.async { [self] in
            withExtendedLifetime(owner) {}
            isShutDown = true
            timer.cancel()
            for transport in transports.values { transport.close() }
            transports.removeAll()
            delivery.finish()
            part?.shutDown()
            part = nil
        }
    }

    /// A SASL element as the log shows it: its start and end tags (the mechanism included), its
    /// content, which carries the credentials, replaced by a placeholder.
    @inlinable package static func hidingCredentials(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let startTagEnd = text.firstIndex(of: ">"), let endTagStart = text.lastIndex(of: "<"),
            startTagEnd < endTagStart
        else { return "[\(bytes.count) bytes of credentials not shown]" }
        let hidden = text.utf8.distance(from: text.index(after: startTagEnd), to: endTagStart)
        return text[...startTagEnd] + "[\(hidden) bytes of credentials not shown]" + text[endTagStart...]
    }
}

extension ConnectionLifecycle {
    /// The error a lost connection or failed attempt carries.
    @usableFromInline var failure: Failure? {
        switch self {
        case .connectionLost(let error), .attemptFailed(let error): error
        case .connected, .resumed, .reconnecting, .waitingForNetwork, .suspended, .closed: nil
        }
    }
}

extension ConnectionRunner: ConnectionRunning where Machine: ~Copyable {
    public typealias Event = ClientEvent
    public typealias StateName = Machine.StateName

    public func reconnectNowSoon() {
        queue.async { [self] in reconnectNow() }
    }

    public func networkChangedSoon(_ path: NetworkPath) {
        queue.async { [self] in networkChanged(path) }
    }

    public func applicationStateChangedSoon(_ application: ApplicationState) {
        queue.async { [self] in applicationStateChanged(application) }
    }

    nonisolated(nonsending) public func health() async -> ConnectionHealth {
        await call { [self] handoff in handoff.resume(returning: currentHealth()) }
    }

    public func healthUpdates(every interval: Duration) -> AsyncStream<ConnectionHealth> {
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

    nonisolated(nonsending) public func stateName() async -> Machine.StateName {
        await call { [self] handoff in handoff.resume(returning: machine.stateName) }
    }

    public func setEventHandler(queue: DispatchQueue?, _ handler: @escaping @Sendable (ClientEvent) -> Void) {
        let queue = queue ?? callbackQueue
        self.queue.async { [self] in delivery.setHandler(queue: queue, handler) }
    }

    public func addObserver(queue: DispatchQueue?, _ handler: @escaping @Sendable (ClientEvent) -> Void) {
        let queue = queue ?? callbackQueue
        self.queue.async { [self] in delivery.addObserver(queue: queue, handler) }
    }

    public func events() -> AsyncStream<ClientEvent> {
        let (stream, continuation) = AsyncStream<ClientEvent>.makeStream(bufferingPolicy: .unbounded)
        queue.async { [self] in delivery.addStream(continuation) }
        return stream
    }
}

/// What a protocol's client adds to the generic runner (`ConnectionRunner.bind`): what its
/// protocol has and the other lacks. Every method runs on the runner's queue; the runner reaches
/// the part unowned (the part holds the runner).
@_spi(TetherInternal) public protocol ConnectionProtocolPart<Request, Event, Failure>: AnyObject {
    associatedtype Request
    associatedtype Event
    associatedtype Failure
    /// Carries out one of the protocol's own requests (`ConnectionAction.request`).
    func perform(_ request: Request)
    /// A protocol event (not a lifecycle change): deliver it, or hand it to the call it answers.
    func handle(_ event: consuming Event)
    /// After every drain while `ConnectionRunner.wantsAfterDrain` is set (flushes waiting for
    /// acknowledgements).
    func afterDrain()
    /// The connection closed for good: end the protocol's own waiting calls with `failure`.
    func closed(_ failure: Failure)
    /// A `closeTransport` of `generation`: abandon the protocol's request of it still under way.
    func closeRequests(of generation: TransportGeneration)
    /// A command waits because the protocol's own queue is full (not the network): say so, and
    /// ask the server to make room (XMPP asks for an acknowledgement).
    func queueFull()
    /// How a message sent or received shows in the trace log.
    func describe(_ bytes: [UInt8]) -> String
    /// The client is gone: release what the protocol holds.
    func shutDown()
}

extension ConnectionProtocolPart {
    package func afterDrain() {}
    package func closeRequests(of generation: TransportGeneration) {}
    package func queueFull() {}
    package func describe(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
    package func shutDown() {}
}
