public import Synchronization

/// One awaiting call of a client's (a request, an invocation, a send waiting for room, a connect):
/// what the runner keeps of it on its queue (the id of what it sent, whether its task was
/// canceled) and where its answer waits for the task (its hand-off, `Handoff`). A subclass is its
/// own start and cancel (`start()` runs on the queue once, `cancel()` when the task is canceled),
/// so that a call costs one allocation: no closures, no separate slot or box for the answer.
///
/// The answer passes from the queue to the task through an atomic state with release and acquire
/// ordering, not through the continuation alone: the continuation orders the two threads too, but
/// the Swift 6.3 runtime hides that from ThreadSanitizer when the answer comes before the task
/// awaits (its fast path runs the task on without the acquire that pairs with the resume's
/// release), and TSan then reports the task's reads of the answer as races (`Specs/robustness.md`,
/// `Tests/Sanitizers/ContinuationFastPath`). Through the atomic, which TSan sees, the edge is
/// visible on every path, so the sanitized tests need no suppression. An answer of up to
/// `inlineCapacity` bytes is kept in the record itself; a larger one in memory of its own.
///
/// A call its start answers at once (a send with room, a state query) makes no continuation:
/// the task finds the answer when the start returns. One that waits makes an unsafe one (no
/// allocation; a second answer is a precondition failure, as a checked one would stop it, and a
/// call never answered would leave its task waiting with either: the runner answers each one,
/// at the latest with its shutdown's error). Its continuation exists only from the moment the
/// task, inside `withUnsafeContinuation`, moves the state from `fresh` to `waiting` with release
/// ordering, and the queue resumes it only after seeing `waiting` with acquire ordering, so the
/// task's writes to its context before that are ordered for ThreadSanitizer too. (Before the
/// fifteenth performance session the continuation was made before the state said so, and an
/// unsafe one's inlined resume then raced, as TSan saw it, with those writes: `Specs/robustness.md`.)
@_spi(TetherInternal) open class RunnerCall: @unchecked Sendable {
    /// The id of what it sent (an iq's id, an invocation id), once sent. Used only on the queue.
    package var id: String?
    /// Its task was canceled. Used only on the queue.
    @usableFromInline package var isCanceled = false

    /// The hand-off's state: `fresh` until the task waits or the answer comes, `waiting` once
    /// the task's continuation is in place, `answered` once the answer is (whichever came first).
    @usableFromInline let state = Atomic<Int>(RunnerCall.fresh)
    /// The awaiting task's continuation; written before `state` becomes `waiting`.
    @usableFromInline var continuation: UnsafeContinuation<Void, Never>?
    /// The answer, when it fits (`inlineCapacity` bytes, 8-byte alignment at most).
    @exclusivity(unchecked) @usableFromInline var inlineAnswer:
        (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
            (0, 0, 0, 0, 0, 0, 0, 0)
    /// The answer, when it does not fit in `inlineAnswer`.
    @usableFromInline var outOfLineAnswer: UnsafeMutableRawPointer?

    @usableFromInline static let fresh = 0
    @usableFromInline static let waiting = 1
    @usableFromInline static let answered = 2
    /// The largest answer kept in the record itself, in bytes.
    @usableFromInline static let inlineCapacity = 64

    public init() {}

    /// Starts the call on the runner's queue (sends what it sends, or notes where its answer is to
    /// go); its answer, now or later, goes to `Handoff(self)`. Every subclass passed to
    /// `ConnectionRunner.call` overrides it (a record that started nothing would wait forever).
    open func start() {
        preconditionFailure("\(type(of: self)) does not start its call")
    }

    /// The call's task was canceled (on the queue; possibly before `start()`, which then sees
    /// `isCanceled`): the answer must be handed off at once, with the call's `canceled` error,
    /// unless it was already.
    open func cancel() {}

    @inlinable static func fits<Value>(_: Value.Type) -> Bool {
        MemoryLayout<Value>.size <= inlineCapacity && MemoryLayout<Value>.alignment <= MemoryLayout<UInt64>.alignment
    }

    /// Hands the record to the queue (`enter`) and returns the answer: at once when the start
    /// answered (a send with room, a state query: no continuation made, nothing suspended), else
    /// once it is handed off; like `withUnsafeContinuation`, with the answer passed as the type
    /// explains.
    @inlinable final package func awaitAnswer<Value>(
        isolation: isolated (any Actor)? = #isolation,
        _: Value.Type,
        entering enter: (RunnerCall) -> Void
    ) async -> Value {
        enter(self)
        if state.load(ordering: .acquiring) == Self.answered { return take(Value.self) }
        await withUnsafeContinuation(isolation: isolation) { (continuation: UnsafeContinuation<Void, Never>) in
            self.continuation = continuation
            let (waiting, _) = state.compareExchange(
                expected: Self.fresh,
                desired: Self.waiting,
                ordering: .acquiringAndReleasing
            )
            if !waiting {
                // Answered since the check above (on the queue's thread): the answer is there.
                self.continuation = nil
                continuation.resume()
            }
        }
        return take(Value.self)
    }

    /// Stores the answer and returns the continuation to resume: nil when the task does not wait
    /// (yet): it finds the answer when it looks.
    @inlinable final func put<Value>(_ value: Value) -> UnsafeContinuation<Void, Never>? {
        // Answers are put on the queue, one after another: a second finds the first's state.
        precondition(state.load(ordering: .relaxed) != Self.answered, "a call was answered twice")
        if Self.fits(Value.self) {
            withUnsafeMutableBytes(of: &inlineAnswer) {
                _ = $0.baseAddress!.initializeMemory(as: Value.self, to: value)
            }
        } else {
            let pointer = UnsafeMutablePointer<Value>.allocate(capacity: 1)
            pointer.initialize(to: value)
            outOfLineAnswer = UnsafeMutableRawPointer(pointer)
        }
        let (early, found) = state.compareExchange(
            expected: Self.fresh,
            desired: Self.answered,
            ordering: .acquiringAndReleasing
        )
        if early { return nil }
        precondition(found == Self.waiting, "a call was answered twice")
        // The task waits, suspended until resumed: its continuation (written before `waiting`,
        // seen through the acquire above) is taken before the answer is published.
        let continuation = continuation.unsafelyUnwrapped
        self.continuation = nil
        state.store(Self.answered, ordering: .releasing)
        return continuation
    }

    @inlinable final func take<Value>(_: Value.Type) -> Value {
        precondition(state.load(ordering: .acquiring) == Self.answered, "a call's task went on before its answer")
        if Self.fits(Value.self) {
            return withUnsafeMutableBytes(of: &inlineAnswer) {
                $0.baseAddress!.assumingMemoryBound(to: Value.self).move()
            }
        }
        let pointer = outOfLineAnswer.unsafelyUnwrapped.assumingMemoryBound(to: Value.self)
        outOfLineAnswer = nil
        defer { pointer.deallocate() }
        return pointer.move()
    }
}

/// Where the queue hands a call's answer to its task: the call's record, seen as taking `Value`.
@_spi(TetherInternal) public struct Handoff<Value: Sendable>: Sendable {
    /// The call whose answer this is.
    @usableFromInline package let call: RunnerCall

    @inlinable package init(_ call: RunnerCall) {
        self.call = call
    }

    /// Resumes the task with `value` (exactly once, as with a continuation).
    @inlinable package func resume(returning value: Value) {
        call.put(value)?.resume()
    }
}

extension Handoff where Value == Void {
    /// Resumes the task.
    @inlinable package func resume() {
        resume(returning: ())
    }
}

/// A call whose start and cancel are closures (the calls made less often than requests).
@_spi(TetherInternal) public final class ClosureCall<Value: Sendable>: RunnerCall, @unchecked Sendable {
    @usableFromInline let body: @Sendable (Handoff<Value>) -> Void
    @usableFromInline let onCancel: (@Sendable (RunnerCall) -> Void)?

    @inlinable init(_ body: @escaping @Sendable (Handoff<Value>) -> Void, onCancel: (@Sendable (RunnerCall) -> Void)?) {
        self.body = body
        self.onCancel = onCancel
    }

    @inlinable override public func start() {
        body(Handoff(self))
    }

    @inlinable override public func cancel() {
        onCancel?(self)
    }
}

/// Suspends until `body`'s handoff is resumed and returns its value; like
/// `withUnsafeContinuation`, with the value passed as `RunnerCall` explains (resumed more than
/// once: a precondition failure).
@_spi(TetherInternal) @inlinable public func awaitHandoff<Value: Sendable>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: (Handoff<Value>) -> Void
) async -> Value {
    await RunnerCall().awaitAnswer(isolation: isolation, Value.self) { body(Handoff($0)) }
}
