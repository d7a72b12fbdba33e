import TetherCore
@_spi(TetherInternal) import TetherText

/// Decodes `Decodable` values from MessagePack bytes.
///
/// Maps are matched to keyed containers (string keys, or integer keys for `CodingKey`s with an
/// `intValue`), arrays to unkeyed containers; `[UInt8]` also accepts a bin value and
/// `MessagePackTimestamp` the timestamp extension. The input is validated (structure and nesting
/// depth) before decoding starts, so decoding cannot recurse deeper than `maximumDepth` levels of
/// the input.
///
/// Decoding allocates one object per keyed container and nothing else beyond the values it
/// produces. To keep it that way, `Decoder.codingPath` is empty inside `init(from:)`; the path is
/// reconstructed into the `DecodingError` that reaches the caller.
public struct MessagePackDecoder: Sendable {
    /// The deepest array/map nesting accepted (default 100).
    public var maximumDepth: Int

    /// Creates a decoder.
    public init(maximumDepth: Int = MessagePackReader.defaultMaximumDepth) {
        self.maximumDepth = maximumDepth
    }

    /// Decodes a `T` from `bytes`, which must hold exactly one MessagePack value.
    public func decode<T: Decodable>(_ type: T.Type = T.self, from bytes: [UInt8]) throws -> T {
        try decode(type, from: bytes, range: 0..<bytes.count)
    }

    /// Decodes a `T` from `bytes[range]`, which must hold exactly one MessagePack value.
    public func decode<T: Decodable>(_ type: T.Type = T.self, from bytes: [UInt8], range: Range<Int>) throws -> T {
        try validate(bytes, range)
        return try Self.decodeValidated(type, from: bytes, at: range.lowerBound)
    }

    /// Checks that `bytes[range]` is exactly one well-formed MessagePack value (structure and
    /// nesting depth).
    func validate(_ bytes: [UInt8], _ range: Range<Int>) throws {
        var reader = MessagePackReader(bytes, range: range, maximumDepth: maximumDepth)
        do {
            try reader.skipValue()
        } catch {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: error.description, underlyingError: error)
            )
        }
        guard reader.isAtEnd else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "Unexpected bytes after the MessagePack value.")
            )
        }
    }

    /// Decodes a `T` from `bytes`, which must hold exactly one MessagePack value, with
    /// `T.init(messagePack:)`.
    public func decode<T: MessagePackDecodable>(_ type: T.Type = T.self, from bytes: [UInt8]) throws -> T {
        try decode(type, from: bytes, range: 0..<bytes.count)
    }

    /// Decodes a `T` from `bytes[range]`, which must hold exactly one MessagePack value, with
    /// `T.init(messagePack:)`.
    public func decode<T: MessagePackDecodable>(
        _ type: T.Type = T.self,
        from bytes: [UInt8],
        range: Range<Int>
    ) throws -> T {
        try validate(bytes, range)
        return try Self.decodeValidated(type, from: bytes, range: range)
    }

    /// Decodes a `T` with `T.init(messagePack:)` from the value that starts `range`, which the
    /// caller has already validated with `MessagePackReader.skipValue()`.
    @inlinable
    package static func decodeValidated<T: MessagePackDecodable>(
        _ type: T.Type = T.self,
        from bytes: [UInt8],
        range: Range<Int>
    ) throws -> T {
        // Validated: the depth was checked against the caller's limit, which may exceed the
        // reader's default.
        var reader = MessagePackReader(bytes, range: range, maximumDepth: .max)
        do {
            return try T(messagePack: &reader)
        } catch let error as MessagePackError {
            throw decodingError(error, for: type)
        }
    }

    /// Decodes a `T` with `T.init(messagePack:)` at `reader`'s position, leaving `reader` past it.
    /// Errors are those of `decodeValidated`. The value need not have been validated: every read
    /// checks what it reads, and `reader`'s depth limit bounds what the conformance skips.
    @inlinable @inline(__always)
    package static func decode<T: MessagePackDecodable>(
        _ type: T.Type,
        from reader: inout MessagePackReader
    ) throws(DecodingError) -> T {
        do {
            return try T(messagePack: &reader)
        } catch let error as MessagePackError {
            throw decodingError(error, for: type)
        } catch let error as DecodingError {
            throw error
        } catch {
            throw .dataCorrupted(
                .init(
                    codingPath: [],
                    debugDescription: "The initializer of \(type) threw an error that is not a DecodingError "
                        + "(its underlyingError).",
                    underlyingError: error
                )
            )
        }
    }

    /// The `DecodingError` for a reader error met while decoding a `type`.
    package static func readerError(_ error: MessagePackError, decoding type: Any.Type) -> DecodingError {
        TetherMessagePack.decodingError(error, for: type)
    }

    /// Decodes a `T` from the value at `offset`, which the caller has already validated with
    /// `MessagePackReader.skipValue()` (used by protocols that validate while framing; strings'
    /// UTF-8 is validated as they are decoded).
    package static func decodeValidated<T: Decodable>(
        _ type: T.Type = T.self,
        from bytes: [UInt8],
        at offset: Int
    ) throws -> T {
        try MessagePackValueDecoder(bytes: bytes, position: offset).decode(type)
    }
}

/// The `Decoder` for one value: two words, so it fits an existential's inline buffer.
struct MessagePackValueDecoder: Decoder, IntegerValueDecoding {
    let bytes: [UInt8]
    let position: Int

    var reader: MessagePackReader { MessagePackReader(bytes, range: position..<bytes.count) }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(try MessagePackKeyedContainer<Key>(bytes: bytes, position: position))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try MessagePackUnkeyedContainer(bytes: bytes, position: position)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    // MARK: SingleValueDecodingContainer

    func decodeNil() -> Bool {
        bytes[position] == 0xc0
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        var reader = reader
        return try convertingErrors(type) { () throws(MessagePackError) in try reader.readBool() }
    }

    func decode(_ type: String.Type) throws -> String {
        try convertingErrors(type) { () throws(MessagePackError) in
            try MessagePackReader.string(bytes.backDeployedSpan, position, bytes.count).0
        }
    }

    func decode(_ type: Double.Type) throws -> Double {
        var reader = reader
        return try convertingErrors(type) { () throws(MessagePackError) in try reader.readDouble() }
    }

    func decode(_ type: Float.Type) throws -> Float {
        var reader = reader
        return try convertingErrors(type) { () throws(MessagePackError) in try reader.readFloat() }
    }

    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try convertingErrors(type) { () throws(MessagePackError) in
            try MessagePackReader.integer(T.self, bytes.backDeployedSpan, position, bytes.count).0
        }
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == [UInt8].self, bytes[position] >= 0xc4 && bytes[position] <= 0xc6 {
            var reader = reader
            let binary = try convertingErrors([UInt8].self) { () throws(MessagePackError) in try reader.readBinary() }
            return unsafe unsafeBitCast(binary, to: T.self)
        }
        if T.self == MessagePackTimestamp.self {
            var reader = reader
            let timestamp = try convertingErrors(MessagePackTimestamp.self) { () throws(MessagePackError) in
                try reader.readTimestamp()
            }
            return unsafe unsafeBitCast(timestamp, to: T.self)
        }
        return try T(from: self)
    }
}

/// The result of `read`, a reader error turned into the `DecodingError` for `type`.
func convertingErrors<T>(_ type: Any.Type, _ read: () throws(MessagePackError) -> T) throws -> T {
    do {
        return try read()
    } catch {
        throw decodingError(error, for: type)
    }
}

/// Maps a reader error to the `DecodingError` that Codable users expect.
@usableFromInline func decodingError(_ error: MessagePackError, for type: Any.Type) -> DecodingError {
    switch error.kind {
    case .typeMismatch, .integerOutOfRange:
        return .typeMismatch(type, .init(codingPath: [], debugDescription: error.description, underlyingError: error))
    case .truncated, .reservedByte, .invalidUTF8, .depthLimitExceeded, .invalidTimestamp:
        return .dataCorrupted(.init(codingPath: [], debugDescription: error.description, underlyingError: error))
    }
}
