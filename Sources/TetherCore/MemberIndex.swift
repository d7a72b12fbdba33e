/// A small inline index of the first members of an encoded object or map: where each key's bytes
/// are, the key's length and first byte, and where the member's value starts, packed into 8 bytes
/// per member, for up to eight members.
///
/// Decoders build one per keyed container so that each `decode(_:forKey:)` finds its value
/// without rescanning the object. It lives inline in the container (no allocation) and stays
/// small, because `KeyedDecodingContainer` copies its container on every call. Members that do
/// not fit (more than eight, empty keys, keys longer than 255 bytes, offsets beyond 16 MiB from
/// `base`) are left to the decoder's fallback scan, which starts where the index stops.
public struct MemberIndex: Sendable {
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
            if entry & Self.lengthAndFirstByte == tag, Self.equal(bytes, base + Int(entry & 0xFF_FFFF), name) {
                return base + Int((entry >> 32) & 0xFF_FFFF)
            }
            index += 1
        }
        return nil
    }

    /// Whether `bytes[start..<start + name.count]` equals `name` (1...255 bytes), compared a
    /// word at a time (overlapping words at the end, no byte loop).
    @inlinable @inline(__always)
    public static func equal(_ bytes: Span<UInt8>, _ start: Int, _ name: Span<UInt8>) -> Bool {
        let length = name.count
        guard start >= 0, length <= bytes.count - start else { return false }
        return unsafe bytes.withUnsafeBytes { bytes in
            unsafe name.withUnsafeBytes { name in
                let left = unsafe bytes.baseAddress! + start
                let right = name.baseAddress!
                if length >= 8 {
                    var offset = 0
                    while offset + 8 < length {
                        guard
                            unsafe left.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                                == right.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                        else { return false }
                        offset += 8
                    }
                    return unsafe left.loadUnaligned(fromByteOffset: length - 8, as: UInt64.self)
                        == right.loadUnaligned(fromByteOffset: length - 8, as: UInt64.self)
                }
                if length >= 4 {
                    return unsafe left.loadUnaligned(as: UInt32.self) == right.loadUnaligned(as: UInt32.self)
                        && left.loadUnaligned(fromByteOffset: length - 4, as: UInt32.self)
                            == right.loadUnaligned(fromByteOffset: length - 4, as: UInt32.self)
                }
                return unsafe left.load(as: UInt8.self) == right.load(as: UInt8.self)
                    && left.load(fromByteOffset: length / 2, as: UInt8.self)
                        == right.load(fromByteOffset: length / 2, as: UInt8.self)
                    && left.load(fromByteOffset: length - 1, as: UInt8.self)
                        == right.load(fromByteOffset: length - 1, as: UInt8.self)
            }
        }
    }

    /// The key range and value offset of member `index` (in insertion order).
    public func member(_ index: Int) -> (key: Range<Int>, valueStart: Int) {
        precondition(index >= 0 && index < count, "member index out of range")
        let entry = entries[index]
        let keyStart = base + Int(entry & 0xFF_FFFF)
        return (keyStart..<(keyStart + Int((entry >> 24) & 0xFF)), base + Int((entry >> 32) & 0xFF_FFFF))
    }
}
