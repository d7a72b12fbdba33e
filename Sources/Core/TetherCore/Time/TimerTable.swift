/// The timers a protocol machine has armed, keyed by a small enum of its own: at most one
/// deadline per key, and `earliest` is what the machine's `pollTimeout()` reports.
///
/// Machines never sleep or schedule anything: the driver asks for `earliest`, waits until then
/// (or until input arrives), and calls the machine's `handleTimeout(now:)`, which asks the table
/// which timers have `expired(at:)`.
public struct TimerTable<Key: Hashable & Sendable>: Sendable {
    /// The earliest deadline, first and kept in the table itself, so that asking for it (what a
    /// sweep over many idle machines does) reads no memory outside the machine, next to the
    /// machine's `ActionQueue` counters when the machine stores the queue just before the table.
    @usableFromInline var earliestDeadline: Instant?
    @usableFromInline var entries: [(key: Key, deadline: Instant)] = []

    /// An empty table.
    @inlinable public init() {}

    /// Arms (or re-arms) the timer `key` for `deadline`.
    @inlinable
    public mutating func set(_ key: Key, at deadline: Instant) {
        if let index = entries.firstIndex(where: { $0.key == key }) {
            let previous = entries[index].deadline
            entries[index].deadline = deadline
            if let earliest = earliestDeadline, deadline > earliest {
                // Later than the earliest: only moving the earliest timer itself changes it.
                if previous == earliest { recomputeEarliest() }
            } else {
                earliestDeadline = deadline
            }
        } else {
            entries.append((key, deadline))
            earliestDeadline = min(deadline, earliestDeadline ?? deadline)
        }
    }

    /// Disarms the timer `key` (a no-op if it is not armed).
    @inlinable
    public mutating func cancel(_ key: Key) {
        guard let index = entries.firstIndex(where: { $0.key == key }) else { return }
        let deadline = entries.remove(at: index).deadline
        if deadline == earliestDeadline { recomputeEarliest() }
    }

    /// Disarms every timer.
    @inlinable
    public mutating func cancelAll() {
        entries.removeAll(keepingCapacity: true)
        earliestDeadline = nil
    }

    @inlinable
    mutating func recomputeEarliest() {
        earliestDeadline = entries.lazy.map(\.deadline).min()
    }

    /// The deadline of `key`, if armed.
    @inlinable
    public func deadline(_ key: Key) -> Instant? {
        entries.first { $0.key == key }?.deadline
    }

    /// Whether `key` is armed.
    @inlinable
    public func isArmed(_ key: Key) -> Bool { deadline(key) != nil }

    /// The earliest deadline of all armed timers.
    @inlinable
    public var earliest: Instant? { earliestDeadline }

    /// Disarms and returns the timers due at `now`, earliest first.
    @inlinable
    public mutating func expired(at now: Instant) -> ExpiredTimers<Key> {
        guard let earliest = earliestDeadline, earliest <= now else { return ExpiredTimers(.none) }
        defer { recomputeEarliest() }
        // The common cases allocate nothing: nothing due, or one timer (a keep-alive) due.
        var dueCount = 0
        var lastDue = 0
        for (index, entry) in entries.enumerated() where entry.deadline <= now {
            dueCount += 1
            lastDue = index
        }
        switch dueCount {
        case 0: return ExpiredTimers(.none)
        case 1: return ExpiredTimers(.one(entries.remove(at: lastDue).key))
        default:
            let due = entries.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }.map(\.key)
            entries.removeAll { $0.deadline <= now }
            return ExpiredTimers(.many(due))
        }
    }
}

/// The timers that expired at one instant, earliest first; none or one need no allocation.
public struct ExpiredTimers<Key: Hashable & Sendable>: Sequence, Sendable {
    @usableFromInline enum Storage: Sendable {
        case none
        case one(Key)
        case many([Key])
    }

    @usableFromInline let storage: Storage

    @inlinable init(_ storage: Storage) { self.storage = storage }

    /// Iterates the expired timers.
    public struct Iterator: IteratorProtocol {
        @usableFromInline let storage: Storage
        @usableFromInline var index = 0

        @inlinable init(_ storage: Storage) { self.storage = storage }

        @inlinable
        public mutating func next() -> Key? {
            defer { index += 1 }
            switch storage {
            case .none: return nil
            case .one(let key): return index == 0 ? key : nil
            case .many(let keys): return index < keys.count ? keys[index] : nil
            }
        }
    }

    @inlinable public func makeIterator() -> Iterator { Iterator(storage) }

    /// Whether no timer expired.
    @inlinable public var isEmpty: Bool {
        if case .none = storage { return true }
        return false
    }
}
