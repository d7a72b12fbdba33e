import TetherCore
@_spi(TetherInternal) import TetherText

/// Decodes `Decodable` values from validated JSON values (syntax, UTF-8 and depth checked when
/// their message was parsed).
package enum JSONValueDecoding {
    /// The value of type `type` in the validated JSON value that starts at `position` of `bytes`
    /// (no leading whitespace); a `DecodingError` if it does not fit the type.
    package static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8], at position: Int) throws -> T {
        try JSONValueDecoder(bytes: bytes, position: position).decode(type)
    }
}

/// The `Decoder` over one validated JSON value (two words, so it fits an existential's inline
/// buffer and costs no allocation). Objects are keyed containers, arrays unkeyed containers.
///
/// The value was validated (syntax, UTF-8, depth) when its message was parsed, so scanning here
/// only fails on type mismatches. As in `MessagePackDecoder`, `codingPath` is empty inside
/// `init(from:)` and the path is rebuilt into the `DecodingError` on its way out.
struct JSONValueDecoder: Decoder, IntegerValueDecoding {
    let bytes: [UInt8]
    /// Offset of the value's first byte (no leading whitespace).
    let position: Int

    func mismatch(_ type: Any.Type, _ expected: String) -> DecodingError {
        Self.mismatch(in: bytes, at: position, type, expected)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard bytes[position] == UInt8(ascii: "{") else { throw mismatch([String: Any].self, "an object") }
        return KeyedDecodingContainer(JSONKeyedContainer<Key>(bytes: bytes, position: position))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard bytes[position] == UInt8(ascii: "[") else { throw mismatch([Any].self, "an array") }
        return JSONUnkeyedContainer(bytes: bytes, position: position)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { bytes[position] == UInt8(ascii: "n") }

    func decode(_ type: Bool.Type) throws -> Bool {
        switch bytes[position] {
        case UInt8(ascii: "t"): return true
        case UInt8(ascii: "f"): return false
        default: throw mismatch(type, "a boolean")
        }
    }

    func decode(_ type: String.Type) throws -> String {
        try Self.string(in: bytes, at: position)
    }

    /// The string value at `position` of the validated `bytes`.
    static func string(in bytes: [UInt8], at position: Int) throws -> String {
        guard bytes[position] == UInt8(ascii: "\""),
            let (token, _) = try? JSONScanner.readString(bytes.backDeployedSpan, position, bytes.count, validated: true)
        else { throw mismatch(in: bytes, at: position, String.self, "a string") }
        return JSONScanner.string(bytes, token)
    }

    static func mismatch(in bytes: [UInt8], at position: Int, _ type: Any.Type, _ expected: String) -> DecodingError {
        var scanner = JSONScanner(validated: bytes, range: position..<bytes.count)
        let found = scanner.peekKind()?.rawValue ?? "nothing"
        return .typeMismatch(type, .init(codingPath: [], debugDescription: "Expected \(expected) but found \(found)."))
    }

    func numberRange(_ type: Any.Type) throws -> (range: Range<Int>, isInteger: Bool) {
        try Self.numberRange(in: bytes, at: position, type)
    }

    static func numberRange(
        in bytes: [UInt8],
        at position: Int,
        _ type: Any.Type
    ) throws -> (range: Range<Int>, isInteger: Bool) {
        let first = bytes[position]
        guard first == UInt8(ascii: "-") || JSONScanner.isDigit(first),
            let number = try? JSONScanner.readNumber(bytes.backDeployedSpan, position, bytes.count)
        else { throw mismatch(in: bytes, at: position, type, "a number") }
        return number
    }

    func decode(_ type: Double.Type) throws -> Double {
        let number = try numberRange(type)
        guard let value = JSONScanner.double(bytes, number.range) else { throw mismatch(type, "a number") }
        return value
    }

    func decode(_ type: Float.Type) throws -> Float {
        let value = try decode(Double.self)
        let narrowed = Float(value)
        guard narrowed.isFinite || !value.isFinite else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "Number \(value) does not fit in Float.")
            )
        }
        return narrowed
    }

    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try Self.integer(type, in: bytes, at: position)
    }

    /// The integer value at `position` of the validated `bytes`, which must fit `T` exactly.
    static func integer<T: FixedWidthInteger>(_ type: T.Type, in bytes: [UInt8], at position: Int) throws -> T {
        if let (small, _) = JSONScanner.plainInteger(bytes.backDeployedSpan, position, bytes.count),
            let value = T(exactly: small)
        {
            return value
        }
        return try integer(type, in: bytes, number: try numberRange(in: bytes, at: position, type))
    }

    /// The number token `number` of the validated `bytes` as a `T`, which it must fit exactly.
    static func integer<T: FixedWidthInteger>(
        _ type: T.Type,
        in bytes: [UInt8],
        number: (range: Range<Int>, isInteger: Bool)
    ) throws -> T {
        let result: T?
        if number.isInteger {
            if bytes[number.range.lowerBound] == UInt8(ascii: "-") {
                result = JSONScanner.int64(bytes, number.range).flatMap { T(exactly: $0) }
            } else {
                result = JSONScanner.uint64(bytes, number.range).flatMap { T(exactly: $0) }
            }
        } else {
            result = JSONScanner.double(bytes, number.range).flatMap { T(exactly: $0) }
        }
        guard let result else {
            let text = String(decoding: bytes[number.range], as: UTF8.self)
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "Number \(text) does not fit in \(T.self).")
            )
        }
        return result
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try T(from: self)
    }
}
