@_spi(TetherInternal) public import TetherCore
@_spi(TetherInternal) public import TetherText

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
/// past it. Every read checks what it reads (a truncated value, a reserved byte or text that is
/// not UTF-8 throws), and `skipValue()` bounds the nesting it skips by the reader's
/// `maximumDepth`. The bytes of an `EncodedValue` were also validated (structure and nesting
/// depth) before; those a hub message binder reads (`HubPayloadReader`) were not, so a
/// conformance that reads its own type recursively must bound its own nesting (by
/// `maximumDepth`, say). Read maps with `readKey(in:)`, which matches keys against a `KeySet`
/// without creating strings:
///
/// ```swift
/// extension ChatMessage: MessagePackDecodable {
///     static let keys = KeySet(["Id", "Text"])   // TetherCore
///
///     init(messagePack reader: inout MessagePackReader) throws {
///         var id: Int?
///         var text: String?
///         let keys = Self.keys
///         for _ in 0..<(try reader.readMapHeader()) {
///             switch try reader.readKey(in: keys) {
///             case 0: id = try reader.readInteger(Int.self)
///             case 1: text = try reader.readString()
///             default: try reader.skipValue()  // a key this version does not know
///             }
///         }
///         guard let id else { throw Self.keys.missingKey(0) }
///         guard let text else { throw Self.keys.missingKey(1) }
///         self.init(id: id, text: text)
///     }
/// }
/// ```
///
/// `MessagePackError`s thrown by the conformance reach the caller as the `DecodingError` that the
/// `Codable` path throws for the same input; other errors (such as `KeySet.missingKey(_:)`'s)
/// pass through unchanged.
public protocol MessagePackDecodable: Decodable {
    /// Reads one value of this type at `reader`'s position and leaves the reader just past it.
    init(messagePack reader: inout MessagePackReader) throws
}

extension MessagePackReader {
    /// Reads a map key and returns the case of `keys` it equals, or nil for any other string or
    /// integer key (see `readKey(in:)` for `KeySet`).
    @inlinable @inline(__always)
    public mutating func readKey<Key>(in keys: CodingKeySet<Key>) throws(MessagePackError) -> Key? {
        guard let index = try readKey(in: keys.keySet) else { return nil }
        return keys.key(at: index)
    }

    /// Reads a map key and returns the index in `keys` of the key it equals, or nil for any other
    /// string or integer key. A string key that is not UTF-8, or a key of another type, is an
    /// error (as it is for `Codable`, whose keys are strings or integers).
    @inlinable @inline(__always)
    public mutating func readKey(in keys: KeySet) throws(MessagePackError) -> Int? {
        // First the key expected next, as the writers encode it: two word compares, no parsing
        // (inlined into the caller's decoder).
        let hint = nextKeyHint < keys.count ? nextKeyHint : 0
        let length = keys.encodedMessagePackKeyLength(hint, in: bytes.backDeployedSpan, at: position, end: end)
        if length > 0 {
            position += length
            nextKeyHint = hint + 1
            return hint
        }
        return try readAnyKey(in: keys)
    }

    /// `readKey(in:)` for a key other than the expected one, or one written another way.
    @usableFromInline
    mutating func readAnyKey(in keys: KeySet) throws(MessagePackError) -> Int? {
        guard let (index, next) = try Self.key(bytes.backDeployedSpan, position, end, in: keys, hint: nextKeyHint)
        else {
            let type = try peekType()
            guard type == .integer else { throw .typeMismatch(expected: .string, found: type, offset: position) }
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
        in keys: KeySet,
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
        guard UTF8Validation.check(span.extracting(start..<(start + length))) != .invalid else {
            throw .invalidUTF8(offset: position)
        }
        return (nil, start + length)
    }
}
