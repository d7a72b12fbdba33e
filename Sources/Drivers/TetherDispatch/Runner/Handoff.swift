#if canImport(Glibc)
    public import Glibc
#elseif canImport(Darwin)
    public import Darwin
#endif

/// Hands a value from the runner's queue to the task awaiting it: a `CheckedContinuation` whose
/// value also passes through a pthread mutex.
///
/// The continuation alone orders the two threads, but the Swift 6.3 runtime hides that from
/// ThreadSanitizer when the value is handed over before the task awaits (its fast path runs the
/// task on without the TSan acquire that pairs with the resume's release), and TSan then reports
/// the task's reads of the value as races (`Specs/robustness.md`,
/// `Tests/Sanitizers/ContinuationFastPath`). Through the mutex, which TSan sees, the edge is
/// visible on every path, so the sanitized tests need no suppression. The cost is two small
/// allocations and two short critical sections per call, next to a round trip over the network.
///
/// A handoff is one reference (its slot holds the continuation): `CheckedContinuation` is not
/// `@frozen`, so a value holding it has a layout known only at run time, and every enum or
/// dictionary of waiters that held one was copied, switched and destroyed through run-time
/// value witnesses.
@_spi(TetherInternal) public struct Handoff<Value: Sendable>: Sendable {
    @usableFromInline let slot: HandoffSlot

    @inlinable init(slot: HandoffSlot) {
        self.slot = slot
    }

    /// Resumes the task with `value` (exactly once, as with a continuation).
    @inlinable package func resume(returning value: Value) {
        slot.put(value).resume()
    }
}

/// Where a handed-off value waits for its task: memory for the one value, whose address is
/// written and taken under one process-wide mutex (`mutex`: TSan's edge; the critical sections
/// are a store and a load), and the task's continuation. Not generic, so that releasing a slot
/// needs no type information (a generic class's deinit looked its metadata up on every call).
@_spi(TetherInternal) public final class HandoffSlot: @unchecked Sendable {
    /// The value, once put; nil again once taken. Guarded by `mutex`.
    @usableFromInline var storage: UnsafeMutableRawPointer?
    /// The awaiting task's continuation, set before the handoff is handed out. Guarded by `mutex`.
    @usableFromInline var continuation: CheckedContinuation<Void, Never>?

    @usableFromInline nonisolated(unsafe) static let mutex: UnsafeMutablePointer<pthread_mutex_t> = {
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        return mutex
    }()

    @inlinable init() {}

    @inlinable func wait(with continuation: CheckedContinuation<Void, Never>) {
        let mutex = Self.mutex
        pthread_mutex_lock(mutex)
        self.continuation = continuation
        pthread_mutex_unlock(mutex)
    }

    /// Stores `value` and returns the continuation to resume.
    @inlinable func put<Value>(_ value: Value) -> CheckedContinuation<Void, Never> {
        let pointer = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        pointer.initialize(to: value)
        let mutex = Self.mutex
        pthread_mutex_lock(mutex)
        let empty = storage == nil
        if empty { storage = UnsafeMutableRawPointer(pointer) }
        let continuation = self.continuation
        self.continuation = nil
        pthread_mutex_unlock(mutex)
        precondition(empty, "a handoff was resumed twice")
        guard let continuation else { preconditionFailure("a handoff was resumed before it was handed out") }
        return continuation
    }

    @inlinable func take<Value>(_: Value.Type) -> Value {
        let mutex = Self.mutex
        pthread_mutex_lock(mutex)
        let raw = storage
        storage = nil
        pthread_mutex_unlock(mutex)
        guard let raw else { preconditionFailure("a handoff was awaited before it was resumed") }
        let pointer = raw.assumingMemoryBound(to: Value.self)
        defer { pointer.deallocate() }
        return pointer.move()
    }
}

extension Handoff where Value == Void {
    /// Resumes the task.
    @inlinable package func resume() {
        resume(returning: ())
    }
}

/// Suspends until `body`'s handoff is resumed and returns its value; like
/// `withCheckedContinuation`, with the value passed as `Handoff` explains.
@_spi(TetherInternal) @inlinable public func awaitHandoff<Value: Sendable>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: (Handoff<Value>) -> Void
) async -> Value {
    let slot = HandoffSlot()
    await withCheckedContinuation(isolation: isolation) { continuation in
        slot.wait(with: continuation)
        body(Handoff(slot: slot))
    }
    return slot.take(Value.self)
}
