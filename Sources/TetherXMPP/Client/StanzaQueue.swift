import TetherXML

/// A first-in first-out queue of stanzas: appends at the back, removals from the front in O(1)
/// amortised (a head index; the storage is compacted once the removed part outweighs the rest).
struct StanzaQueue: Sendable {
    private var storage: [XMLElement] = []
    private var head = 0

    /// The number of stanzas queued.
    var count: Int { storage.count - head }

    var isEmpty: Bool { head == storage.count }

    mutating func append(_ stanza: XMLElement) {
        storage.append(stanza)
    }

    /// Removes the first `n` stanzas (precondition: `n <= count`).
    mutating func removeFirst(_ n: Int) {
        precondition(n <= count, "removing more stanzas than queued")
        head += n
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.count <= 64)
            head = 0
        } else if head >= 32, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }

    /// The queued stanzas, oldest first.
    var elements: ArraySlice<XMLElement> { storage[head...] }

    /// Empties the queue and returns what it held, oldest first.
    mutating func removeAll() -> [XMLElement] {
        let all = Array(storage[head...])
        storage = []
        head = 0
        return all
    }
}
