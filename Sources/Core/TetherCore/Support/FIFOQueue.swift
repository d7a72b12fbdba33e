/// A first-in first-out queue: appends at the back, removals from the front in O(1) amortised (a
/// head index; the storage is compacted once the removed part outweighs the rest).
package struct FIFOQueue<Element: Sendable>: Sendable {
    private var storage: [Element] = []
    private var head = 0

    /// An empty queue.
    package init() {}

    /// The number of elements queued.
    package var count: Int { storage.count - head }

    package var isEmpty: Bool { head == storage.count }

    package mutating func append(_ element: Element) {
        storage.append(element)
    }

    /// Removes the first `n` elements (precondition: `n <= count`).
    package mutating func removeFirst(_ n: Int) {
        precondition(n <= count, "removing more elements than queued")
        head += n
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.count <= 64)
            head = 0
        } else if head >= 32, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }

    /// The queued elements, oldest first.
    package var elements: ArraySlice<Element> { storage[head...] }

    /// Empties the queue and returns what it held, oldest first.
    package mutating func removeAll() -> [Element] {
        let all = Array(storage[head...])
        storage = []
        head = 0
        return all
    }
}
