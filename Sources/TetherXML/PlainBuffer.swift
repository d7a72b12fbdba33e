/// A growable run of plain values (`BitwiseCopyable`) in memory the buffer owns and frees: an
/// append is a capacity check and a store, with none of `Array`'s uniqueness checks, so the tree
/// builder's per-node work stays small. Indices are checked; the contents leave as an exactly
/// sized `Array`.
@safe struct PlainBuffer<Element: BitwiseCopyable>: ~Copyable {
    private var base: UnsafeMutablePointer<Element>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int = 64) {
        self.capacity = max(capacity, 1)
        unsafe base = .allocate(capacity: self.capacity)
    }

    deinit {
        unsafe base.deallocate()
    }

    var isEmpty: Bool { count == 0 }

    subscript(index: Int) -> Element {
        get {
            precondition(index >= 0 && index < count, "index out of range")
            return unsafe base[index]
        }
        set {
            precondition(index >= 0 && index < count, "index out of range")
            unsafe base[index] = newValue
        }
    }

    mutating func append(_ element: Element) {
        if count == capacity { grow(to: count + 1) }
        unsafe (base + count).initialize(to: element)
        count += 1
    }

    /// Appends the elements of `elements`.
    mutating func append(copying elements: UnsafeBufferPointer<Element>) {
        guard elements.count > 0 else { return }
        if count + elements.count > capacity { grow(to: count + elements.count) }
        unsafe (base + count).initialize(from: elements.baseAddress!, count: elements.count)
        count += elements.count
    }

    mutating func removeLast() -> Element {
        precondition(count > 0, "removeLast from an empty buffer")
        count -= 1
        return unsafe base[count]
    }

    /// Empties the buffer, keeping its memory.
    mutating func removeAll() {
        count = 0
    }

    /// Calls `body` with the contents.
    func withUnsafeBufferPointer<Result>(_ body: (UnsafeBufferPointer<Element>) throws -> Result) rethrows -> Result {
        try unsafe body(UnsafeBufferPointer(start: base, count: count))
    }

    private mutating func grow(to minimum: Int) {
        var newCapacity = capacity * 2
        while newCapacity < minimum { newCapacity *= 2 }
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        unsafe newBase.initialize(from: base, count: count)
        unsafe base.deallocate()
        unsafe base = newBase
        capacity = newCapacity
    }
}
