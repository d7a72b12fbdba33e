@_spi(TetherInternal) public import TetherCore
@_spi(TetherInternal) public import TetherText

/// A type that reads itself straight from JSON with a `JSONReader`, for hot paths where `Codable`
/// is too slow: the JSON counterpart of `MessagePackDecodable`.
///
/// `EncodedValue.decode(_:)` and `EncodedArguments.decode(_:at:)` read a conforming type's JSON
/// values with `init(json:)` and its MessagePack values with `init(from:)` (or with
/// `init(messagePack:)` if it is `MessagePackDecodable` too). The choice is made at compile
/// time, by overload: in code that is generic over `T: Decodable` the `Codable` path is used.
///
/// The value was validated (syntax, UTF-8, depth) when its message was parsed, so the reader only
/// fails on type mismatches, with the `DecodingError` the `Codable` path throws:
///
/// ```swift
/// extension ChatMessage: JSONDecodable {
///     init(json reader: inout JSONReader) throws {
///         var id: Int?
///         var text: String?
///         let keys = Self.keys                      // a KeySet (TetherCore)
///         try reader.readObjectStart()
///         while reader.nextMember() {
///             switch try reader.readKey(in: keys) {
///             case 0: id = try reader.readInteger(Int.self)
///             case 1: text = try reader.readString()
///             default: reader.skipValue()           // a member this version does not know
///             }
///         }
///         guard let id else { throw keys.missingKey(0) }
///         guard let text else { throw keys.missingKey(1) }
///         self.init(id: id, text: text)
///     }
/// }
/// ```
public protocol JSONDecodable: Decodable {
    /// Reads one value of this type at `reader`'s position and leaves the reader just past it.
    init(json reader: inout JSONReader) throws
}

/// A cursor over one validated JSON value (an argument, result or stream item), for
/// `JSONDecodable` conformances.
///
/// Objects are read member by member (`readObjectStart`, then `nextMember` before each member),
/// arrays element by element (`readArrayStart`, then `nextElement`); keys are matched against a
/// `KeySet` without creating strings. Reads of the wrong type throw `DecodingError.typeMismatch`,
/// integers that do not fit `DecodingError.dataCorrupted`, and the cursor then stays where it
/// was (past any whitespace).
public struct JSONReader {
    @usableFromInline var scanner: JSONScanner
    /// Where `readKey(in:)` starts looking: the index after the last key it matched.
    @usableFromInline var nextKeyHint = 0

    /// A reader at the start of the validated value at `position` of `bytes`, which ends by
    /// `end`.
    @inlinable package init(bytes: [UInt8], position: Int, end: Int) {
        scanner = JSONScanner(validated: bytes, range: position..<end)
    }

    /// The next value's first byte (whitespace skipped, the cursor moved to it), or nil at the
    /// end.
    @inlinable @inline(__always)
    mutating func nextByte() -> UInt8? {
        scanner.peek()
    }

    @inlinable @inline(__always)
    var bytes: [UInt8] { scanner.bytes }

    /// The offset of the next byte to read (past the value just read, and any whitespace read
    /// looking for it).
    @inlinable @inline(__always)
    package var position: Int { scanner.position }

    func mismatch(_ type: Any.Type, _ expected: String) -> DecodingError {
        JSONValueDecoder.mismatch(in: bytes, at: position, type, expected)
    }

    /// Consumes the `{` that starts an object.
    public mutating func readObjectStart() throws {
        guard nextByte() == UInt8(ascii: "{") else { throw mismatch([String: Any].self, "an object") }
        scanner.position += 1
    }

    /// Moves to the next member of the object being read: true if there is one (its key is
    /// next), false at the end of the object (the `}` is consumed).
    @inlinable
    public mutating func nextMember() -> Bool {
        next(closing: UInt8(ascii: "}"))
    }

    /// `nextMember` / `nextElement`: consumes a comma (true) or the closing bracket (false).
    @inlinable @inline(__always)
    mutating func next(closing: UInt8) -> Bool {
        switch nextByte() {
        case closing:
            scanner.position += 1
            return false
        case UInt8(ascii: ","):
            scanner.position += 1
            return true
        case nil: return false
        default: return true
        }
    }

    /// Reads a member's key and its colon; returns the case of `keys` it equals, or nil for any
    /// other key (then read or skip the value).
    @inlinable @inline(__always)
    public mutating func readKey<Key>(in keys: CodingKeySet<Key>) throws -> Key? {
        guard let index = try readKey(in: keys.keySet) else { return nil }
        return keys.key(at: index)
    }

    /// Reads a member's key and its colon; returns the index in `keys` of the key it equals, or
    /// nil for any other key (then read or skip the value).
    @inlinable @inline(__always)
    public mutating func readKey(in keys: KeySet) throws -> Int? {
        // Most objects list their keys in the same order each time and write them as the
        // encoders do: first try the expected key's own bytes (`"Name":`, quoted, escaped as
        // JSONText escapes, colon right after), inlined into the caller's decoder. Equal bytes
        // are that key; anything else (another key, other escapes, whitespace before the colon)
        // is read the long way.
        if nextByte() == UInt8(ascii: "\"") {
            let hint = nextKeyHint < keys.count ? nextKeyHint : 0
            let start = position
            let length = keys.encodedJSONMemberNameLength(hint, in: bytes.backDeployedSpan, at: start, end: scanner.end)
            if length > 0 {
                scanner.position = start + length
                nextKeyHint = hint + 1
                return hint
            }
        }
        return try readAnyKey(in: keys)
    }

    /// `readKey(in:)` for a key other than the expected one, or one written another way.
    @usableFromInline
    mutating func readAnyKey(in keys: KeySet) throws -> Int? {
        let (token, valueStart) = try memberName()
        let index: Int?
        if token.hasEscapes {
            let name = JSONScanner.string(bytes, token)
            let hint = nextKeyHint
            index = name.withUTF8Span { keys.index(of: $0, from: 0, length: $0.count, hint: hint) }
        } else {
            index = keys.index(
                of: bytes.backDeployedSpan,
                from: token.contents.lowerBound,
                length: token.contents.count,
                hint: nextKeyHint
            )
        }
        scanner.position = valueStart
        if let index { nextKeyHint = index + 1 }
        return index
    }

    /// Reads a member's key and its colon, and returns the key (for objects whose keys are data,
    /// such as dictionaries).
    public mutating func readMemberName() throws -> String {
        let (token, valueStart) = try memberName()
        scanner.position = valueStart
        return JSONScanner.string(bytes, token)
    }

    /// The member name that is next and the offset after its colon; consumes nothing.
    mutating func memberName() throws -> (JSONStringToken, Int) {
        guard nextByte() == UInt8(ascii: "\""),
            let (token, next) = try? JSONScanner.readString(
                bytes.backDeployedSpan,
                position,
                scanner.end,
                validated: true
            )
        else { throw mismatch(String.self, "a member name") }
        let colon = JSONScanner.skipWhitespace(bytes.backDeployedSpan, next, scanner.end)
        guard colon < scanner.end, bytes[colon] == UInt8(ascii: ":") else {
            throw mismatch(String.self, "a member name")
        }
        return (token, colon + 1)
    }

    /// Consumes the `[` that starts an array.
    public mutating func readArrayStart() throws {
        guard nextByte() == UInt8(ascii: "[") else { throw mismatch([Any].self, "an array") }
        scanner.position += 1
    }

    /// Moves to the next element of the array being read: true if there is one, false at the
    /// end of the array (the `]` is consumed).
    @inlinable
    public mutating func nextElement() -> Bool {
        next(closing: UInt8(ascii: "]"))
    }

    /// Reads a string.
    public mutating func readString() throws -> String {
        guard nextByte() == UInt8(ascii: "\""),
            let (string, next) = JSONScanner.readStringValue(bytes, position, scanner.end)
        else { throw mismatch(String.self, "a string") }
        scanner.position = next
        return string
    }

    /// Reads a number that is exactly a `T` (an integer in range, or a number with an integral
    /// value, as the `Codable` path accepts).
    @inlinable
    public mutating func readInteger<T: FixedWidthInteger>(_ type: T.Type = T.self) throws -> T {
        // The common case, compiled for `T` in the caller: digits that fit `Int64`.
        if let (small, end) = plainInteger(), let value = T(exactly: small) {
            moveTo(end)
            return value
        }
        return try readAnyInteger(type)
    }

    /// The value and end of the plain integer that is next (`JSONScanner.plainInteger`), or nil;
    /// consumes nothing.
    @usableFromInline
    mutating func plainInteger() -> (Int64, Int)? {
        guard nextByte() != nil else { return nil }
        return JSONScanner.plainInteger(bytes.backDeployedSpan, position, scanner.end)
    }

    @usableFromInline
    mutating func moveTo(_ offset: Int) {
        scanner.position = offset
    }

    /// `readInteger` for any number (large, fractional, exponent): exact or an error.
    @usableFromInline
    mutating func readAnyInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard nextByte() != nil else { throw mismatch(type, "a number") }
        let number = try JSONValueDecoder.numberRange(in: bytes, at: position, type)
        let value = try JSONValueDecoder.integer(type, in: bytes, number: number)
        scanner.position = number.range.upperBound
        return value
    }

    /// Reads a number as the nearest `Double`.
    public mutating func readDouble() throws -> Double {
        guard nextByte() != nil else { throw mismatch(Double.self, "a number") }
        let number = try JSONValueDecoder.numberRange(in: bytes, at: position, Double.self)
        guard let value = JSONScanner.double(bytes, number.range) else { throw mismatch(Double.self, "a number") }
        scanner.position = number.range.upperBound
        return value
    }

    /// Reads `true` or `false`.
    public mutating func readBool() throws -> Bool {
        switch nextByte() {
        case UInt8(ascii: "t"):
            scanner.position += 4
            return true
        case UInt8(ascii: "f"):
            scanner.position += 5
            return false
        default: throw mismatch(Bool.self, "a boolean")
        }
    }

    /// Consumes `null` if it is next; returns whether it did.
    public mutating func readNilIfPresent() -> Bool {
        guard nextByte() == UInt8(ascii: "n") else { return false }
        scanner.position += 4
        return true
    }

    /// Skips one value (of any type).
    public mutating func skipValue() {
        // Validated bytes: skipping cannot fail, except at the end of the value, where there is
        // nothing left to skip.
        try? scanner.skipValue()
    }
}
