@_spi(TetherInternal) import TetherCore

/// A bounded cache that turns recurring short UTF-8 byte sequences (hub method names, XML names)
/// into shared `String`s, so that a decoder does not allocate a new string for a name it has
/// seen before.
///
/// It is direct-mapped: each byte sequence hashes to one slot, and a newcomer replaces the slot's
/// previous string. Memory is therefore bounded by `capacity` strings of at most `maximumLength`
/// bytes, whatever a peer sends; longer sequences are never cached.
@_spi(TetherInternal) public struct StringInterner: Sendable {
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
        guard utf8.count <= maximumLength else { return Self.makeString(utf8) }
        let slot = slot(of: utf8)
        if let cached = slots[slot], Self.equals(cached, utf8) { return cached }
        let string = Self.makeString(utf8)
        slots[slot] = string
        return string
    }

    /// The string for `utf8`, shared with earlier calls when possible, or nil if the bytes are
    /// not valid UTF-8. Bytes equal to a cached string are valid as it is, so only a miss pays
    /// for the check: a recurring name costs a hash and a compare.
    public mutating func intern(validating utf8: Span<UInt8>) -> String? {
        guard utf8.count <= maximumLength else { return UTF8Validation.string(utf8) }
        let slot = slot(of: utf8)
        if let cached = slots[slot], Self.equals(cached, utf8) { return cached }
        guard UTF8Validation.check(utf8) != .invalid else { return nil }
        let string = Self.makeString(utf8)
        slots[slot] = string
        return string
    }

    /// The slot of `utf8` (at most `maximumLength` bytes). The hash mixes the length and the first
    /// and last eight bytes (which for names of up to sixteen bytes are all of them): a word
    /// operation instead of one step per byte. Names that differ only in the middle share a
    /// slot, which costs a miss, never a wrong string.
    @inline(__always)
    private func slot(of utf8: Span<UInt8>) -> Int {
        let count = utf8.count
        let head = KeySet.prefix(of: utf8, from: 0, length: count)
        let tail = count > 8 ? KeySet.prefix(of: utf8, from: count - 8, length: 8) : 0
        var hash = (head ^ (tail &* 0x9e37_79b9_7f4a_7c15) ^ UInt64(count)) &* 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 29
        return Int(truncatingIfNeeded: hash) & mask
    }

    @inline(__always)
    private static func equals(_ string: String, _ utf8: Span<UInt8>) -> Bool {
        string.withUTF8Span { other in
            other.count == utf8.count && (other.isEmpty || KeySet.equalBytes(utf8, at: 0, other))
        }
    }

    private static func makeString(_ utf8: Span<UInt8>) -> String {
        unsafe utf8.withUnsafeBufferPointer { unsafe String(decoding: $0, as: UTF8.self) }
    }
}
