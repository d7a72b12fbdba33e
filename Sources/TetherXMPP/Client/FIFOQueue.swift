import TetherXML

/// A first-in first-out queue: appends at the back, removals from the front in O(1) amortised (a
/// head index; the storage is compacted once the removed part outweighs the rest).
struct FIFOQueue<Element: Sendable>: Sendable {
    private var storage: [Element] = []
    private var head = 0

    /// The number of elements queued.
    var count: Int { storage.count - head }

    var isEmpty: Bool { head == storage.count }

    mutating func append(_ element: Element) {
        storage.append(element)
    }

    /// Removes the first `n` elements (precondition: `n <= count`).
    mutating func removeFirst(_ n: Int) {
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
    var elements: ArraySlice<Element> { storage[head...] }

    /// Empties the queue and returns what it held, oldest first.
    mutating func removeAll() -> [Element] {
        let all = Array(storage[head...])
        storage = []
        head = 0
        return all
    }
}

/// A stanza sent under XEP-0198 and kept until the server acknowledges it.
enum SentStanza: Sendable {
    /// A stanza the app sent (handed back to it if it is never acknowledged).
    case app(XMLElement)
    /// A stanza the machine sent on its own (a ping, an answer), kept as the bytes to resend.
    case own([UInt8])
}
