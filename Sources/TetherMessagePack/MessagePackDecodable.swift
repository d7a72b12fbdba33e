/// A type that reads itself straight from MessagePack bytes with a `MessagePackReader`, for hot
/// paths where `Codable` is too slow.
///
/// `Codable` decoding pays for type-erased containers, boxed decoders and a key lookup per
/// property before a single input byte is read: about 3,000 instructions for an eight-property
/// struct even from a decoder that reads nothing (the benchmark's `codable-floor` row), against
/// a few hundred for reading the same struct by hand. A type received thousands of times a
/// second can therefore also conform to this protocol; `MessagePackDecoder.decode(_:from:)`,
/// `EncodedValue.decode(_:)` and `EncodedArguments.decode(_:at:)` then read its MessagePack
/// values with `init(messagePack:)`, and its JSON values (and everything else) still with
/// `init(from:)`. The choice is made at compile time, by overload: in code that is generic over
/// `T: Decodable` the `Codable` path is used.
///
/// A conformance reads exactly one value, the one the reader is at, and leaves the reader just
/// past it. The bytes have already been validated (structure and nesting depth) when the
/// library calls it; strings are checked as they are read. Read maps with `readKey(in:)`, which
/// matches keys without creating strings:
///
/// ```swift
/// extension ChatMessage: MessagePackDecodable {
///     static let keys = MessagePackKeys(["Id", "Text"])
///
///     init(messagePack reader: inout MessagePackReader) throws {
///         var id: Int?
///         var text: String?
///         for _ in 0..<(try reader.readMapHeader()) {
///             switch try reader.readKey(in: Self.keys) {
///             case 0: id = try reader.readInteger(Int.self)
///             case 1: text = try reader.readString()
///             default: try reader.skipValue()  // a key this version does not know
///             }
///         }
///         guard let id else { throw MessagePackError.missingKey("Id") }
///         guard let text else { throw MessagePackError.missingKey("Text") }
///         self.init(id: id, text: text)
///     }
/// }
/// ```
///
/// `MessagePackError`s thrown by the conformance reach the caller as the `DecodingError` that the
/// `Codable` path throws for the same input; other errors pass through unchanged.
public protocol MessagePackDecodable: Decodable {
    /// Reads one value of this type at `reader`'s position and leaves the reader just past it.
    init(messagePack reader: inout MessagePackReader) throws
}

/// A fixed set of map keys, for `MessagePackReader.readKey(in:)`: matched against the key bytes
/// in the input by length and first eight bytes (one comparison per candidate; one more for keys
/// of up to sixteen bytes), without creating a string. Build it once (a `static let`) and share it.
public struct MessagePackKeys: Sendable {
    struct Entry: Sendable {
        /// The first eight bytes of the key, little-endian, zero-padded.
        var prefix: UInt64
        /// Bytes 8..<16 of the key, the same way.
        var suffix: UInt64
        var length: Int
    }

    /// The keys, in the order their indices refer to.
    public let names: [String]
    let entries: [Entry]
    /// Each key as a MessagePack str value, for `MessagePackWriter.writeKey(_:of:)`.
    let encoded: [[UInt8]]

    /// The keys `names`; `readKey(in:)` returns positions in this array. Precondition: no key
    /// appears twice.
    public init(_ names: [String]) {
        precondition(Set(names).count == names.count, "MessagePackKeys: a key appears twice")
        self.names = names
        entries = names.map { name in
            let bytes = Array(name.utf8)
            return Entry(
                prefix: Self.prefix(of: bytes.span, from: 0, length: bytes.count),
                suffix: Self.prefix(of: bytes.span, from: 8, length: max(bytes.count - 8, 0)),
                length: bytes.count
            )
        }
        encoded = names.map { name in
            var writer = MessagePackWriter()
            writer.writeString(name)
            return writer.bytes
        }
    }

    /// The number of keys.
    public var count: Int { names.count }

    /// The first eight bytes (or fewer) of `bytes[start..<start + length]` as a little-endian
    /// word, zero-padded.
    @inline(__always)
    static func prefix(of bytes: Span<UInt8>, from start: Int, length: Int) -> UInt64 {
        unsafe bytes.withUnsafeBufferPointer { buffer in
            unsafe prefix(of: buffer, from: start, length: length)
        }
    }

    /// `prefix(of:from:length:)` on a buffer; `start + length <= buffer.count`.
    @inline(__always)
    @unsafe static func prefix(of buffer: UnsafeBufferPointer<UInt8>, from start: Int, length: Int) -> UInt64 {
        let width = min(length, 8)
        if start + 8 <= buffer.count {
            let word = UInt64(
                littleEndian: unsafe UnsafeRawPointer(buffer.baseAddress! + start).loadUnaligned(as: UInt64.self)
            )
            return width == 8 ? word : word & ((1 << (8 * UInt64(width))) - 1)
        }
        var word: UInt64 = 0
        for offset in 0..<width {
            word |= UInt64(unsafe buffer[start + offset]) << (8 * UInt64(offset))
        }
        return word
    }

    /// The index of the key equal to `bytes[start..<start + length]`, or nil. The search starts
    /// at `hint` (the key expected next: maps usually list their keys in the same order each
    /// time) and wraps around.
    @inline(__always)
    func index(of bytes: Span<UInt8>, from start: Int, length: Int, hint: Int) -> Int? {
        let prefix = unsafe bytes.withUnsafeBufferPointer { buffer in
            unsafe Self.prefix(of: buffer, from: start, length: length)
        }
        let count = entries.count
        var index = hint < count ? hint : 0
        for _ in 0..<count {
            let entry = entries[index]
            if entry.prefix == prefix && entry.length == length
                && (length <= 8 || restEqual(index, bytes, start))
            {
                return index
            }
            index = index + 1 == count ? 0 : index + 1
        }
        return nil
    }

    /// Whether the bytes of key `index` past its first eight equal those at `start + 8...` of
    /// `bytes`. (Not inlined: only keys longer than eight bytes whose first eight match get here.)
    @inline(never)
    func restEqual(_ index: Int, _ bytes: Span<UInt8>, _ start: Int) -> Bool {
        let length = entries[index].length
        guard entries[index].suffix == Self.prefix(of: bytes, from: start + 8, length: length - 8) else { return false }
        return length <= 16 || remaindersEqual(names[index], bytes, start + 16, length - 16)
    }

    /// Whether the key bytes past the first sixteen equal `name`'s.
    func remaindersEqual(_ name: String, _ bytes: Span<UInt8>, _ start: Int, _ count: Int) -> Bool {
        let utf8 = name.utf8.span
        var offset = 0
        while offset < count {
            if utf8[16 + offset] != bytes[start + offset] { return false }
            offset += 1
        }
        return true
    }
}

extension MessagePackReader {
    /// Reads a map key and returns the index in `keys` of the key it equals, or nil for any other
    /// key (a string that is not one of `keys`, or a key that is not a string, which is skipped).
    /// A string key that is not UTF-8 is an error.
    public mutating func readKey(in keys: MessagePackKeys) throws(MessagePackError) -> Int? {
        guard let (index, next) = try Self.key(bytes.span, position, end, in: keys, hint: nextKeyHint) else {
            try skipValue()
            return nil
        }
        position = next
        if let index { nextKeyHint = index + 1 }
        return index
    }

    /// The index in `keys` of the str key at `position` (or nil for another string) and the
    /// offset after it; nil if the key is not a string.
    @inline(__always)
    static func key(
        _ span: Span<UInt8>,
        _ position: Int,
        _ end: Int,
        in keys: MessagePackKeys,
        hint: Int
    ) throws(MessagePackError) -> (Int?, Int)? {
        guard position < end else { throw .truncated(offset: position) }
        let byte = span[position]
        let start: Int
        let length: Int
        if byte & 0xe0 == 0xa0 {
            start = position + 1
            length = Int(byte & 0x1f)
            guard length <= end - start else { throw .truncated(offset: position) }
        } else if byte >= 0xd9 && byte <= 0xdb {
            let range = try stringRange(span, position, end)
            start = range.lowerBound
            length = range.count
        } else {
            return nil
        }
        if let index = keys.index(of: span, from: start, length: length, hint: hint) { return (index, start + length) }
        guard (try? UTF8Span(validating: span.extracting(start..<(start + length)))) != nil else {
            throw .invalidUTF8(offset: position)
        }
        return (nil, start + length)
    }
}
