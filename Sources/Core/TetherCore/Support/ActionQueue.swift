/// A machine's queue of actions for its driver: inputs append, `pollAction()` takes them in
/// order. Taken actions are moved out (no copy), the queue needs no O(n) removals, and its
/// storage (its slots, empty once taken) is kept between inputs unless a burst made it large (so
/// an idle machine stays small).
@_spi(TetherInternal) public struct ActionQueue<Action: Sendable>: Sendable {
    // The counters first: polling an empty queue (what a sweep over many idle machines does)
    // reads only them, at the start of the machine's storage (next to its `TimerTable`'s
    // earliest deadline when the machine stores the queue first and the timers next).
    @usableFromInline var read = 0
    /// `actions.count`, kept next to `read` so that polling an empty queue reads no memory
    /// outside the machine.
    @usableFromInline var written = 0
    /// The actions; every slot at `written` or after, and before `read`, is nil.
    @usableFromInline var actions: [Action?] = []

    /// The capacity kept once the queue is drained (larger storage is released).
    @usableFromInline static var retainedCapacity: Int { 16 }

    /// An empty queue.
    @inlinable public init() {}

    /// Appends an action.
    @inlinable
    public mutating func append(_ action: consuming Action) {
        // The slots of taken actions stay between inputs, empty (nil: `next()` took them), and
        // are written over: emptying the array, or assigning over a slot, destroys the old values
        // through the type's run-time value witness, and a nil holds nothing to destroy.
        if written < actions.count {
            let slot = written
            var moved: Action? = action
            unsafe actions.withUnsafeMutableBufferPointer { slots in
                unsafe slots.baseAddress.unsafelyUnwrapped.advanced(by: slot).initialize(to: moved.take())
            }
        } else {
            actions.append(action)
        }
        written += 1
    }

    /// Takes the next action, or nil when all were taken.
    @inlinable
    public mutating func next() -> Action? {
        guard read < written else {
            if written > 0 {
                if actions.count > Self.retainedCapacity { actions = [] }
                read = 0
                written = 0
            }
            return nil
        }
        defer { read += 1 }
        return actions[read].take()
    }

    /// Whether every appended action was taken.
    @inlinable public var isEmpty: Bool { read >= written }
}
