/// The containers an encoder has open, innermost last: where each starts in the output, how many
/// elements it has so far and whether it is keyed.
///
/// The first eight levels live inline, so encoding ordinary values allocates nothing for the
/// stack; deeper nesting spills into an array.
public struct EncodingContainerStack: Sendable {
    /// One open container.
    public struct Entry: Sendable {
        /// Where the container starts in the output (also identifies it).
        public var offset: Int
        /// The elements (or members) written so far.
        public var count: Int
        /// Whether it is keyed (an object or map).
        public var isKeyed: Bool

        /// Creates an entry.
        public init(offset: Int, count: Int, isKeyed: Bool) {
            self.offset = offset
            self.count = count
            self.isKeyed = isKeyed
        }
    }

    private static let inlineCapacity = 8
    private var inline: InlineArray<8, Entry> = .init(repeating: Entry(offset: 0, count: 0, isKeyed: false))
    private var spilled: [Entry] = []
    /// The number of open containers.
    public private(set) var count = 0

    /// An empty stack.
    public init() {}

    /// The container at nesting `level` (0 is the outermost).
    public subscript(level: Int) -> Entry {
        get {
            precondition(level >= 0 && level < count, "no container at that level")
            return level < Self.inlineCapacity ? inline[level] : spilled[level - Self.inlineCapacity]
        }
        set {
            precondition(level >= 0 && level < count, "no container at that level")
            if level < Self.inlineCapacity {
                inline[level] = newValue
            } else {
                spilled[level - Self.inlineCapacity] = newValue
            }
        }
    }

    /// Opens a container one level deeper than the current innermost.
    public mutating func append(_ entry: Entry) {
        if count < Self.inlineCapacity {
            inline[count] = entry
        } else {
            spilled.append(entry)
        }
        count += 1
    }

    /// Closes the innermost container and returns it.
    public mutating func removeLast() -> Entry {
        precondition(count > 0, "no open container")
        count -= 1
        return count < Self.inlineCapacity ? inline[count] : spilled.removeLast()
    }
}
