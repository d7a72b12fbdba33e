/// The containers an encoder has open, innermost last: where each starts in the output, how many
/// elements it has so far and whether it is keyed.
///
/// The first eight levels live inline, so encoding ordinary values allocates nothing for the
/// stack; deeper nesting spills into an array.
///
/// SPI-public, not `package`: the `@inlinable` members of a `package` type are not inlined into
/// other modules (measured with Swift 6.3: each `count` and `addElement` was a call), and the
/// encoders call them for every key and element.
@_spi(TetherInternal) public struct EncodingContainerStack: Sendable {
    /// One open container.
    public struct Entry: Sendable {
        /// Where the container starts in the output (also identifies it).
        public var offset: Int
        /// The elements (or members) written so far.
        public var count: Int
        /// Whether it is keyed (an object or map).
        public var isKeyed: Bool

        /// Creates an entry.
        @inlinable
        public init(offset: Int, count: Int, isKeyed: Bool) {
            self.offset = offset
            self.count = count
            self.isKeyed = isKeyed
        }
    }

    // The members are inlinable: called opaquely from another module, each access copied the
    // whole stack (about 200 bytes) to a temporary first. The inline levels are kept as SIMD
    // vectors (fixed-size storage that every supported OS has; `InlineArray` needs 2025's).
    @usableFromInline static let inlineCapacity = 8
    @usableFromInline var inlineOffsets = SIMD8<Int>()
    @usableFromInline var inlineCounts = SIMD8<Int>()
    /// Bit `level` set: the inline container at that level is keyed.
    @usableFromInline var inlineKeyed: UInt8 = 0
    @usableFromInline var spilled: [Entry] = []
    @usableFromInline var openCount = 0
    /// The number of open containers.
    @inlinable public var count: Int { openCount }

    /// An empty stack.
    public init() {}

    /// The container at nesting `level` (0 is the outermost).
    @inlinable
    public subscript(level: Int) -> Entry {
        precondition(level >= 0 && level < count, "no container at that level")
        return level < Self.inlineCapacity ? inlineEntry(level) : spilled[level - Self.inlineCapacity]
    }

    @inlinable
    func inlineEntry(_ level: Int) -> Entry {
        Entry(
            offset: inlineOffsets[level],
            count: inlineCounts[level],
            isKeyed: inlineKeyed & (1 << UInt8(level)) != 0
        )
    }

    /// The offset of the keyed container open at `level`, when it is the innermost one (a value
    /// that asks for its keyed container twice gets the same container, as Foundation's do).
    @inlinable
    public func keyedOffset(at level: Int) -> Int? {
        guard count == level + 1, self[level].isKeyed else { return nil }
        return self[level].offset
    }

    /// The elements written so far into the container at `level` that starts at `offset`; 0 once
    /// it is closed.
    @inlinable
    public func elementCount(at level: Int, offset: Int) -> Int {
        count > level && self[level].offset == offset ? self[level].count : 0
    }

    /// Counts one more element in the innermost container, which must be at `level` and start at
    /// `offset` (a container used after a sibling value was encoded is a programming error);
    /// returns the count before. One mutating call: reading an entry through the subscript
    /// made the caller copy the whole stack first.
    @inlinable @inline(__always)
    public mutating func addElement(level: Int, offset: Int) -> Int {
        let misused = "An encoding container was used after a sibling value was encoded."
        precondition(openCount == level + 1 && level >= 0, misused)
        if level < Self.inlineCapacity {
            precondition(inlineOffsets[level] == offset, misused)
            let before = inlineCounts[level]
            inlineCounts[level] = before + 1
            return before
        }
        let index = level - Self.inlineCapacity
        precondition(spilled[index].offset == offset, misused)
        spilled[index].count += 1
        return spilled[index].count - 1
    }

    /// Opens a container one level deeper than the current innermost.
    @inlinable
    public mutating func append(_ entry: Entry) {
        let index = count
        if index < Self.inlineCapacity {
            inlineOffsets[index] = entry.offset
            inlineCounts[index] = entry.count
            let bit: UInt8 = 1 << UInt8(index)
            inlineKeyed = entry.isKeyed ? inlineKeyed | bit : inlineKeyed & ~bit
        } else {
            spilled.append(entry)
        }
        openCount += 1
    }

    /// Closes the innermost container and returns it.
    @inlinable
    public mutating func removeLast() -> Entry {
        precondition(count > 0, "no open container")
        openCount -= 1
        return count < Self.inlineCapacity ? inlineEntry(count) : spilled.removeLast()
    }
}
