/// A growable run of plain values (`BitwiseCopyable`) in memory the buffer owns and frees: an
/// append is a capacity check and a store, with none of `Array`'s uniqueness checks, so the tree
/// builder's per-node work stays small. Indices are checked; the contents are read out through
/// `withUnsafeBufferPointer` (into a tree's exactly sized storage).
@safe struct PlainBuffer<Element: BitwiseCopyable>: ~Copyable {
    private var base: UnsafeMutablePointer<Element>
    private(set) var count = 0
    /// How many elements fit before it grows.
    private(set) var capacity: Int

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

    mutating func removeLast() -> Element {
        precondition(count > 0, "removeLast from an empty buffer")
        count -= 1
        return unsafe base[count]
    }

    /// Empties the buffer, keeping its memory.
    mutating func removeAll() {
        count = 0
    }

    /// Keeps the first `newCount` elements (at most `count`).
    mutating func truncate(to newCount: Int) {
        precondition(newCount >= 0 && newCount <= count, "truncating beyond the contents")
        count = newCount
    }

    /// The address of the element at `index` (valid until the buffer next grows or is freed).
    func address(of index: Int) -> UnsafePointer<Element> {
        precondition(index >= 0 && index <= count, "index out of range")
        return unsafe UnsafePointer(base + index)
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

extension PlainBuffer where Element == UInt8 {
    /// Appends `count` bytes from `source`. Runs of up to 32 bytes (names, attribute values,
    /// text pieces between entities) are copied with two overlapping loads and stores instead of
    /// a call to `memcpy`.
    @inline(__always)
    mutating func append(bytes source: UnsafeRawPointer, count length: Int) {
        if count + length > capacity { grow(to: count + length) }
        let target = unsafe UnsafeMutableRawPointer(base + count)
        if length >= 8 && length <= 16 {
            let head = unsafe source.loadUnaligned(as: UInt64.self)
            let tail = unsafe source.loadUnaligned(fromByteOffset: length - 8, as: UInt64.self)
            unsafe target.storeBytes(of: head, as: UInt64.self)
            unsafe target.storeBytes(of: tail, toByteOffset: length - 8, as: UInt64.self)
        } else if length >= 4 && length < 8 {
            let head = unsafe source.loadUnaligned(as: UInt32.self)
            let tail = unsafe source.loadUnaligned(fromByteOffset: length - 4, as: UInt32.self)
            unsafe target.storeBytes(of: head, as: UInt32.self)
            unsafe target.storeBytes(of: tail, toByteOffset: length - 4, as: UInt32.self)
        } else if length > 0 && length < 4 {
            unsafe target.storeBytes(of: source.load(as: UInt8.self), as: UInt8.self)
            unsafe target.storeBytes(
                of: source.load(fromByteOffset: length / 2, as: UInt8.self),
                toByteOffset: length / 2,
                as: UInt8.self
            )
            unsafe target.storeBytes(
                of: source.load(fromByteOffset: length - 1, as: UInt8.self),
                toByteOffset: length - 1,
                as: UInt8.self
            )
        } else if length > 16 && length <= 32 {
            let head = unsafe source.loadUnaligned(as: SIMD16<UInt8>.self)
            let tail = unsafe source.loadUnaligned(fromByteOffset: length - 16, as: SIMD16<UInt8>.self)
            unsafe target.storeBytes(of: head, as: SIMD16<UInt8>.self)
            unsafe target.storeBytes(of: tail, toByteOffset: length - 16, as: SIMD16<UInt8>.self)
        } else if length > 32 {
            unsafe target.copyMemory(from: source, byteCount: length)
        }
        count += length
    }
}
