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
/// in the input by length and first eight bytes (one comparison per candidate), without creating
/// a string. Build it once (a `static let`) and share it.
public struct MessagePackKeys: Sendable {
    struct Entry: Sendable {
        /// The first eight bytes of the key, little-endian, zero-padded.
        var prefix: UInt64
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
            return Entry(prefix: Self.prefix(of: bytes.span, from: 0, length: bytes.count), length: bytes.count)
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
        let width = min(length, 8)
        if width == 8 || start + 8 <= bytes.count {
            let word = unsafe bytes.withUnsafeBytes { unsafe $0.loadUnaligned(fromByteOffset: start, as: UInt64.self) }
            let littleEndian = UInt64(littleEndian: word)
            return width == 8 ? littleEndian : littleEndian & ((1 << (8 * UInt64(width))) - 1)
        }
        var word: UInt64 = 0
        for offset in 0..<width {
            word |= UInt64(bytes[start + offset]) << (8 * UInt64(offset))
        }
        return word
    }

    /// The index of the key equal to `bytes[start..<start + length]`, or nil.
    @inline(__always)
    func index(of bytes: Span<UInt8>, from start: Int, length: Int) -> Int? {
        let prefix = Self.prefix(of: bytes, from: start, length: length)
        var index = 0
        while index < entries.count {
            let entry = entries[index]
            if entry.prefix == prefix && entry.length == length
                && (length <= 8 || remaindersEqual(names[index], bytes, start + 8, length - 8))
            {
                return index
            }
            index += 1
        }
        return nil
    }

    /// Whether the key bytes past the first eight equal `name`'s.
    func remaindersEqual(_ name: String, _ bytes: Span<UInt8>, _ start: Int, _ count: Int) -> Bool {
        let utf8 = name.utf8.span
        var offset = 0
        while offset < count {
            if utf8[8 + offset] != bytes[start + offset] { return false }
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
        guard position < end else { throw .truncated(offset: position) }
        let byte = bytes[position]
        guard byte >= 0xa0 && byte <= 0xbf || byte >= 0xd9 && byte <= 0xdb else {
            try skipValue()
            return nil
        }
        let start = position
        let range = try Self.stringRange(bytes.span, position, end)
        if let index = keys.index(of: bytes.span, from: range.lowerBound, length: range.count) {
            position = range.upperBound
            return index
        }
        guard (try? UTF8Span(validating: bytes.span.extracting(range))) != nil else {
            throw .invalidUTF8(offset: start)
        }
        position = range.upperBound
        return nil
    }
}
