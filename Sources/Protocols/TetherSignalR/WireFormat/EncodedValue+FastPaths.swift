public import TetherJSON
public import TetherMessagePack

// The fast paths for types that read and write themselves (`JSONDecodable`,
// `MessagePackDecodable`, `JSONEncodable`, `MessagePackEncodable`), chosen by overload: the most
// constrained overload wins, so a type that conforms for both encodings takes its own path for
// each, and one that conforms for one encoding takes `Codable` for the other.

extension EncodedValue {
    /// The JSON value at `range` of `storage` read by `T.init(json:)`.
    @inlinable @inline(__always)
    static func decodeJSON<T: JSONDecodable>(
        _ type: T.Type,
        _ storage: [UInt8],
        _ range: Range<Int>
    ) throws(DecodingError) -> T {
        do {
            var reader = JSONReader(bytes: storage, position: range.lowerBound, end: range.upperBound)
            return try T(json: &reader)
        } catch {
            throw decodingError(error, decoding: type)
        }
    }

    /// The MessagePack value at `range` of `storage` read by `T.init(messagePack:)`.
    @inlinable @inline(__always)
    static func decodeMessagePack<T: MessagePackDecodable>(
        _ type: T.Type,
        _ storage: [UInt8],
        _ range: Range<Int>
    ) throws(DecodingError) -> T {
        do {
            return try MessagePackDecoder.decodeValidated(type, from: storage, range: range)
        } catch {
            throw decodingError(error, decoding: type)
        }
    }

    /// Decodes the value as a `T`: a MessagePack value with `T.init(messagePack:)`, a JSON value
    /// with `T.init(from:)`.
    @inlinable
    public func decode<T: MessagePackDecodable>(_ type: T.Type = T.self) throws(DecodingError) -> T {
        switch encoding {
        case .json: try Self.decodeCodable(type, .json, storage, range)
        case .messagePack: try Self.decodeMessagePack(type, storage, range)
        }
    }

    /// Decodes the value as a `T`: a JSON value with `T.init(json:)`, a MessagePack value with
    /// `T.init(from:)`.
    @inlinable
    public func decode<T: JSONDecodable>(_ type: T.Type = T.self) throws(DecodingError) -> T {
        switch encoding {
        case .json: try Self.decodeJSON(type, storage, range)
        case .messagePack: try Self.decodeCodable(type, .messagePack, storage, range)
        }
    }

    /// Decodes the value as a `T`: a JSON value with `T.init(json:)`, a MessagePack value with
    /// `T.init(messagePack:)`.
    @inlinable
    public func decode<T: JSONDecodable & MessagePackDecodable>(_ type: T.Type = T.self) throws(DecodingError) -> T {
        switch encoding {
        case .json: try Self.decodeJSON(type, storage, range)
        case .messagePack: try Self.decodeMessagePack(type, storage, range)
        }
    }

    /// Encodes `value` in `encoding`: MessagePack with `encode(messagePack:)`, JSON with
    /// `encode(to:)`.
    public init(_ value: some MessagePackEncodable, encoding: ValueEncoding) throws {
        var bytes = Self.encodingBuffer()
        switch encoding {
        case .json: try JSONValueEncoding.encode(value, into: &bytes)
        case .messagePack: try MessagePackEncoder().encode(value, into: &bytes)
        }
        self.init(encoding: encoding, storage: bytes, range: 0..<bytes.count)
    }

    /// Encodes `value` in `encoding`: JSON with `encode(json:)`, MessagePack with `encode(to:)`.
    public init(_ value: some JSONEncodable, encoding: ValueEncoding) throws {
        var bytes = Self.encodingBuffer()
        switch encoding {
        case .json: try JSONWriter.encode(value, into: &bytes)
        case .messagePack: try MessagePackEncoder().encode(value, into: &bytes)
        }
        self.init(encoding: encoding, storage: bytes, range: 0..<bytes.count)
    }

    /// Encodes `value` in `encoding`: JSON with `encode(json:)`, MessagePack with
    /// `encode(messagePack:)`.
    public init(_ value: some JSONEncodable & MessagePackEncodable, encoding: ValueEncoding) throws {
        var bytes = Self.encodingBuffer()
        switch encoding {
        case .json: try JSONWriter.encode(value, into: &bytes)
        case .messagePack: try MessagePackEncoder().encode(value, into: &bytes)
        }
        self.init(encoding: encoding, storage: bytes, range: 0..<bytes.count)
    }

}

extension EncodedArguments {
    /// Decodes the argument at `index` as a `T`: MessagePack with `T.init(messagePack:)`, JSON
    /// with `T.init(from:)`. Precondition: `index < count`.
    @inlinable
    public func decode<T: MessagePackDecodable>(_ type: T.Type = T.self, at index: Int) throws(DecodingError) -> T {
        let argument = start(of: index)..<range.upperBound
        switch encoding {
        case .json: return try EncodedValue.decodeCodable(type, .json, storage, argument)
        case .messagePack: return try EncodedValue.decodeMessagePack(type, storage, argument)
        }
    }

    /// Decodes the argument at `index` as a `T`: JSON with `T.init(json:)`, MessagePack with
    /// `T.init(from:)`. Precondition: `index < count`.
    @inlinable
    public func decode<T: JSONDecodable>(_ type: T.Type = T.self, at index: Int) throws(DecodingError) -> T {
        let argument = start(of: index)..<range.upperBound
        switch encoding {
        case .json: return try EncodedValue.decodeJSON(type, storage, argument)
        case .messagePack: return try EncodedValue.decodeCodable(type, .messagePack, storage, argument)
        }
    }

    /// Decodes the argument at `index` as a `T`: JSON with `T.init(json:)`, MessagePack with
    /// `T.init(messagePack:)`. Precondition: `index < count`.
    @inlinable
    public func decode<T: JSONDecodable & MessagePackDecodable>(
        _ type: T.Type = T.self,
        at index: Int
    ) throws(DecodingError) -> T {
        let argument = start(of: index)..<range.upperBound
        switch encoding {
        case .json: return try EncodedValue.decodeJSON(type, storage, argument)
        case .messagePack: return try EncodedValue.decodeMessagePack(type, storage, argument)
        }
    }

    /// Encodes each of `values` as one argument, in `encoding`: MessagePack with
    /// `encode(messagePack:)`, JSON with `encode(to:)`.
    public init<each Argument: MessagePackEncodable>(encoding: ValueEncoding, _ values: repeat each Argument) throws {
        var bytes = EncodedValue.encodingBuffer()
        switch encoding {
        case .json: try Self.writeJSON(repeat each values, into: &bytes)
        case .messagePack: try Self.writeMessagePack(repeat each values, into: &bytes)
        }
        self.init(
            encoding: encoding,
            count: Self.count(repeat (each Argument).self),
            storage: bytes,
            range: 0..<bytes.count
        )
    }

    /// Encodes each of `values` as one argument, in `encoding`: JSON with `encode(json:)`,
    /// MessagePack with `encode(to:)`.
    public init<each Argument: JSONEncodable>(encoding: ValueEncoding, _ values: repeat each Argument) throws {
        var bytes = EncodedValue.encodingBuffer()
        switch encoding {
        case .json: try Self.writeJSON(repeat each values, into: &bytes)
        case .messagePack: try Self.writeMessagePack(repeat each values, into: &bytes)
        }
        self.init(
            encoding: encoding,
            count: Self.count(repeat (each Argument).self),
            storage: bytes,
            range: 0..<bytes.count
        )
    }

    /// Encodes each of `values` as one argument, in `encoding`: JSON with `encode(json:)`,
    /// MessagePack with `encode(messagePack:)`.
    public init<each Argument: JSONEncodable & MessagePackEncodable>(
        encoding: ValueEncoding,
        _ values: repeat each Argument
    ) throws {
        var bytes = EncodedValue.encodingBuffer()
        switch encoding {
        case .json: try Self.writeJSON(repeat each values, into: &bytes)
        case .messagePack: try Self.writeMessagePack(repeat each values, into: &bytes)
        }
        self.init(
            encoding: encoding,
            count: Self.count(repeat (each Argument).self),
            storage: bytes,
            range: 0..<bytes.count
        )
    }

    /// The arguments made of one value (the common case), encoded as the variadic initializers
    /// encode it; without a parameter pack, whose forwarding copied the value.
    public init(encoding: ValueEncoding, _ value: some MessagePackEncodable) throws {
        var bytes = EncodedValue.encodingBuffer()
        switch encoding {
        case .json:
            bytes.append(UInt8(ascii: "["))
            try JSONValueEncoding.encode(value, into: &bytes)
            bytes.append(UInt8(ascii: "]"))
        case .messagePack:
            bytes.append(0x91)
            try MessagePackEncoder().encode(value, into: &bytes)
        }
        self.init(encoding: encoding, count: 1, storage: bytes, range: 0..<bytes.count)
    }

    /// The arguments made of one value (the common case), as `init(encoding:_:)` above.
    public init(encoding: ValueEncoding, _ value: some JSONEncodable) throws {
        var bytes = EncodedValue.encodingBuffer()
        switch encoding {
        case .json:
            bytes.append(UInt8(ascii: "["))
            try JSONWriter.encode(value, into: &bytes)
            bytes.append(UInt8(ascii: "]"))
        case .messagePack:
            bytes.append(0x91)
            try MessagePackEncoder().encode(value, into: &bytes)
        }
        self.init(encoding: encoding, count: 1, storage: bytes, range: 0..<bytes.count)
    }

    /// The arguments made of one value (the common case), as `init(encoding:_:)` above.
    public init(encoding: ValueEncoding, _ value: some JSONEncodable & MessagePackEncodable) throws {
        var bytes = EncodedValue.encodingBuffer()
        switch encoding {
        case .json:
            bytes.append(UInt8(ascii: "["))
            try JSONWriter.encode(value, into: &bytes)
            bytes.append(UInt8(ascii: "]"))
        case .messagePack:
            bytes.append(0x91)
            try MessagePackEncoder().encode(value, into: &bytes)
        }
        self.init(encoding: encoding, count: 1, storage: bytes, range: 0..<bytes.count)
    }

    /// Appends `values` as a JSON array, each written by its `encode(json:)`, to `bytes`.
    static func writeJSON<each Argument: JSONEncodable>(
        _ values: repeat each Argument,
        into bytes: inout [UInt8]
    ) throws {
        bytes.append(UInt8(ascii: "["))
        var first = true
        for value in repeat each values {
            if !first { bytes.append(UInt8(ascii: ",")) }
            try JSONWriter.encode(value, into: &bytes)
            first = false
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Appends `values` as a MessagePack array, each written by its `encode(messagePack:)`, to
    /// `bytes`.
    static func writeMessagePack<each Argument: MessagePackEncodable>(
        _ values: repeat each Argument,
        into bytes: inout [UInt8]
    ) throws {
        var writer = MessagePackWriter()
        swap(&writer.bytes, &bytes)
        defer { swap(&writer.bytes, &bytes) }
        writer.writeArrayHeader(count: count(repeat (each Argument).self))
        repeat try (each values).encode(messagePack: &writer)
    }
}
