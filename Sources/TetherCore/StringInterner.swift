/// A bounded cache that turns recurring short UTF-8 byte sequences (hub method names, XML names)
/// into shared `String`s, so that a decoder does not allocate a new string for a name it has
/// seen before.
///
/// It is direct-mapped: each byte sequence hashes to one slot, and a newcomer replaces the slot's
/// previous string. Memory is therefore bounded by `capacity` strings of at most `maximumLength`
/// bytes, whatever a peer sends; longer sequences are never cached.
public struct StringInterner: Sendable {
    /// The default number of slots.
    public static let defaultCapacity = 256
    /// The default longest byte sequence that is cached.
    public static let defaultMaximumLength = 64

    private var slots: [String?]
    private let mask: Int
    /// The longest byte sequence that is cached.
    public let maximumLength: Int

    /// An empty interner with `capacity` slots (rounded up to a power of two).
    public init(capacity: Int = Self.defaultCapacity, maximumLength: Int = Self.defaultMaximumLength) {
        precondition(capacity > 0 && maximumLength >= 0, "capacity must be positive")
        var size = 1
        while size < capacity { size <<= 1 }
        slots = Array(repeating: nil, count: size)
        mask = size - 1
        self.maximumLength = maximumLength
    }

    /// The string for the valid UTF-8 bytes `utf8`, shared with earlier calls when possible.
    public mutating func intern(_ utf8: Span<UInt8>) -> String {
        let count = utf8.count
        guard count <= maximumLength else { return Self.makeString(utf8) }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var index = 0
        while index < count {
            hash = (hash ^ UInt64(utf8[index])) &* 0x100_0000_01b3
            index += 1
        }
        let slot = Int(truncatingIfNeeded: hash ^ (hash >> 29)) & mask
        if let cached = slots[slot], Self.equals(cached, utf8) { return cached }
        let string = Self.makeString(utf8)
        slots[slot] = string
        return string
    }

    @inline(__always)
    private static func equals(_ string: String, _ utf8: Span<UInt8>) -> Bool {
        let other = string.utf8.span
        guard other.count == utf8.count else { return false }
        var index = 0
        while index < utf8.count {
            if other[index] != utf8[index] { return false }
            index += 1
        }
        return true
    }

    private static func makeString(_ utf8: Span<UInt8>) -> String {
        unsafe utf8.withUnsafeBufferPointer { unsafe String(decoding: $0, as: UTF8.self) }
    }
}
