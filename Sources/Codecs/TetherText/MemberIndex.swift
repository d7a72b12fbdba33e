/// A small inline index of the first members of an encoded object or map: where each key's bytes
/// are, the key's length and first byte, and where the member's value starts, packed into 8 bytes
/// per member, for up to eight members.
///
/// Decoders build one per keyed container so that each `decode(_:forKey:)` finds its value
/// without rescanning the object. It lives inline in the container (no allocation) and stays
/// small, because `KeyedDecodingContainer` copies its container on every call. Members that do
/// not fit (more than eight, empty keys, keys longer than 255 bytes, offsets beyond 16 MiB from
/// `base`) are left to the decoder's fallback scan, which starts where the index stops.
@_spi(TetherInternal) public struct MemberIndex: Sendable {
    /// The most members an index holds.
    public static let capacity = 8

    // Packing: bits 0–23 key offset, 24–31 key length, 32–55 value offset, 56–63 first key byte.
    private static let lengthAndFirstByte: UInt64 = 0xFF00_0000_FF00_0000

    /// The offset all packed offsets are relative to.
    public let base: Int
    private var entries = SIMD8<UInt64>()  // fixed-size storage every supported OS has
    /// The number of members indexed.
    public private(set) var count = 0

    /// An empty index for an object whose bytes start at `base`.
    public init(base: Int) {
        self.base = base
    }

    /// Adds the member whose key is `bytes[keyStart..<keyStart + keyLength]`; returns false (and
    /// adds nothing) when the index is full or the member does not fit the packed form.
    public mutating func append(keyStart: Int, keyLength: Int, valueStart: Int, in bytes: Span<UInt8>) -> Bool {
        let keyOffset = keyStart - base
        let valueOffset = valueStart - base
        guard count < Self.capacity, keyLength > 0, keyLength < 256, keyOffset >= 0, keyOffset < 1 << 24,
            valueOffset >= 0, valueOffset < 1 << 24
        else { return false }
        entries[count] =
            UInt64(keyOffset) | UInt64(keyLength) << 24 | UInt64(valueOffset) << 32 | UInt64(bytes[keyStart]) << 56
        count += 1
        return true
    }

    /// The value offset of the member whose key bytes equal `name`, or nil if no indexed member
    /// has that key.
    public func valueStart(forKey name: Span<UInt8>, in bytes: Span<UInt8>) -> Int? {
        guard !name.isEmpty, name.count < 256 else { return nil }
        let tag = UInt64(name.count) << 24 | UInt64(name[0]) << 56
        let packed = entries
        var index = 0
        while index < count {
            let entry = packed[index]
            if entry & Self.lengthAndFirstByte == tag, KeySet.equalBytes(bytes, at: base + Int(entry & 0xFF_FFFF), name)
            {
                return base + Int((entry >> 32) & 0xFF_FFFF)
            }
            index += 1
        }
        return nil
    }

    /// The key range and value offset of member `index` (in insertion order).
    public func member(_ index: Int) -> (key: Range<Int>, valueStart: Int) {
        precondition(index >= 0 && index < count, "member index out of range")
        let entry = entries[index]
        let keyStart = base + Int(entry & 0xFF_FFFF)
        return (keyStart..<(keyStart + Int((entry >> 24) & 0xFF)), base + Int((entry >> 32) & 0xFF_FFFF))
    }
}
