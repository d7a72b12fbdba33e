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
/// visible on every path, so the sanitized tests need no suppression. The cost is one allocation
/// and one uncontended lock per call, next to a round trip over the network.
@_spi(TetherInternal) public struct Handoff<Value: Sendable>: Sendable {
    @usableFromInline let continuation: CheckedContinuation<Void, Never>
    @usableFromInline let slot: Slot

    /// Where the value waits for the task. `value` is guarded by `mutex`.
    public final class Slot: @unchecked Sendable {
        @usableFromInline let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        @usableFromInline var value: Value?

        @inlinable init() {
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }

        @inlinable deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }

        @inlinable func put(_ newValue: Value) {
            pthread_mutex_lock(mutex)
            value = newValue
            pthread_mutex_unlock(mutex)
        }

        @inlinable func take() -> Value {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            guard let value = value.take() else { preconditionFailure("a handoff was awaited before it was resumed") }
            return value
        }
    }

    @inlinable init(_ continuation: CheckedContinuation<Void, Never>, slot: Slot) {
        self.continuation = continuation
        self.slot = slot
    }

    /// Resumes the task with `value` (exactly once, as with a continuation).
    @inlinable package func resume(returning value: Value) {
        slot.put(value)
        continuation.resume()
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
    let slot = Handoff<Value>.Slot()
    await withCheckedContinuation(isolation: isolation) { continuation in
        body(Handoff(continuation, slot: slot))
    }
    return slot.take()
}
