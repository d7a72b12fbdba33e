import TetherJSON
public import TetherMessagePack

/// The wire encoding of a hub protocol's values.
public enum ValueEncoding: Hashable, Sendable {
    /// JSON text (RFC 8259), as in the `json` hub protocol.
    case json
    /// MessagePack, as in the `messagepack` hub protocol.
    case messagePack
}

/// One argument, result or stream item exactly as it arrived (or will leave) on the wire.
///
/// Decoding a hub message does not decode its payload values: each stays a slice of the received
/// bytes, validated (syntax, UTF-8, nesting depth) but not interpreted, until the app asks for a
/// concrete type with `decode(_:)`. Integers beyond 2^53, key order and number spelling therefore
/// survive a decode → encode round trip byte for byte.
///
/// A value shares the storage of the chunk it was received in; keep it only as long as needed, or
/// copy it with `compacted()` to release the rest of that chunk.
public struct EncodedValue: Hashable, Sendable, CustomStringConvertible {
    /// How `bytes` are encoded.
    public let encoding: ValueEncoding
    @usableFromInline let storage: [UInt8]
    @usableFromInline let range: Range<Int>

    init(encoding: ValueEncoding, storage: [UInt8], range: Range<Int>) {
        self.encoding = encoding
        self.storage = storage
        self.range = range
    }

    /// The encoded bytes.
    public var bytes: ArraySlice<UInt8> { storage[range] }

    /// A value from the JSON text `bytes`, validated. Throws `HubProtocolError` for invalid JSON.
    public init(json bytes: [UInt8], maximumDepth: Int = HubProtocolLimits.defaultMaximumDepth) throws(HubProtocolError)
    {
        var scanner = JSONScanner(bytes, range: 0..<bytes.count, maximumDepth: maximumDepth)
        _ = scanner.peek()
        let start = scanner.position
        do {
            try scanner.skipValue()
        } catch {
            throw .errorReadingJSON
        }
        let end = scanner.position
        guard scanner.peek() == nil else { throw .errorReadingJSON }
        self.init(encoding: .json, storage: bytes, range: start..<end)
    }

    /// A value from the MessagePack bytes `bytes`, validated.
    public init(
        messagePack bytes: [UInt8],
        maximumDepth: Int = HubProtocolLimits.defaultMaximumDepth
    ) throws(MessagePackError) {
        var reader = MessagePackReader(bytes, maximumDepth: maximumDepth)
        try reader.skipValue()
        guard reader.isAtEnd else {
            throw .typeMismatch(expected: .nil, found: try reader.peekType(), offset: reader.position)
        }
        self.init(encoding: .messagePack, storage: bytes, range: 0..<bytes.count)
    }

    /// Encodes `value` in `encoding` through `Codable` (a `JSONEncodable` or
    /// `MessagePackEncodable` value takes the fast-path overloads instead).
    public init(_ value: some Encodable, encoding: ValueEncoding) throws {
        // (Each encoding written out, without closures: a closure capturing `value` copied it, a
        // retain and a release per reference in it.)
        var bytes = Self.encodingBuffer()
        switch encoding {
        case .json: try JSONValueEncoding.encode(value, into: &bytes)
        case .messagePack: try MessagePackEncoder().encode(value, into: &bytes)
        }
        self.init(encoding: encoding, storage: bytes, range: 0..<bytes.count)
    }

    /// An empty buffer with room for a typical encoded value or argument list.
    static func encodingBuffer() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(512)
        return bytes
    }

    /// The JSON `null` or MessagePack nil value.
    public static func null(_ encoding: ValueEncoding) -> EncodedValue {
        switch encoding {
        case .json: EncodedValue(encoding: .json, storage: Array("null".utf8), range: 0..<4)
        case .messagePack: EncodedValue(encoding: .messagePack, storage: [0xc0], range: 0..<1)
        }
    }

    /// Decodes the value as a `T` through `Codable`. (A `T` that is `JSONDecodable` or
    /// `MessagePackDecodable` takes the overloads in EncodedValue+FastPaths.swift instead, which
    /// read it with its own `init` for that encoding.)
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws(DecodingError) -> T {
        try Self.decodeCodable(type, encoding, storage, range)
    }

    /// What `decode` throws for an error from decoding: a `DecodingError` as it is, any other
    /// error (one a type's own `init(from:)`, `init(json:)` or `init(messagePack:)` threw) as
    /// `DecodingError.dataCorrupted` with that error as its `underlyingError`. The text names
    /// only the type, never the error's contents.
    @usableFromInline
    static func decodingError(_ error: any Error, decoding type: Any.Type) -> DecodingError {
        if let error = error as? DecodingError { return error }
        let context = DecodingError.Context(
            codingPath: [],
            debugDescription: "The initializer of \(type) threw an error that is not a DecodingError "
                + "(its underlyingError).",
            underlyingError: error
        )
        return .dataCorrupted(context)
    }

    /// The value in `encoding` at `range.lowerBound` of `storage` decoded through `Codable`
    /// (also the other encoding's path for a type with a fast path for one).
    @usableFromInline @inline(__always)
    static func decodeCodable<T: Decodable>(
        _ type: T.Type,
        _ encoding: ValueEncoding,
        _ storage: [UInt8],
        _ range: Range<Int>
    ) throws(DecodingError) -> T {
        do {
            switch encoding {
            case .json: return try JSONValueDecoding.decode(type, from: storage, at: range.lowerBound)
            case .messagePack: return try MessagePackDecoder.decodeValidated(type, from: storage, at: range.lowerBound)
            }
        } catch {
            throw decodingError(error, decoding: type)
        }
    }

    /// Whether the value is JSON `null` / MessagePack nil.
    public var isNull: Bool {
        switch encoding {
        case .json: storage[range.lowerBound] == UInt8(ascii: "n")
        case .messagePack: storage[range.lowerBound] == 0xc0
        }
    }

    /// A copy that owns exactly its bytes (releasing the rest of the chunk it came from).
    public func compacted() -> EncodedValue {
        let copy = Array(bytes)
        return EncodedValue(encoding: encoding, storage: copy, range: 0..<copy.count)
    }

    public static func == (lhs: EncodedValue, rhs: EncodedValue) -> Bool {
        lhs.encoding == rhs.encoding && lhs.bytes.elementsEqual(rhs.bytes)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(encoding)
        hasher.combine(range.count)
        for byte in bytes { hasher.combine(byte) }
    }

    public var description: String {
        switch encoding {
        case .json: String(decoding: bytes, as: UTF8.self)
        case .messagePack: "msgpack(" + bytes.map { String($0, radix: 16) }.joined(separator: " ") + ")"
        }
    }
}

/// The `arguments` of an invocation: an encoded array, with its elements available one by one
/// as `EncodedValue`s without copying.
public struct EncodedArguments: Hashable, Sendable, Sequence {
    /// How the array is encoded.
    public let encoding: ValueEncoding
    /// The number of arguments.
    public let count: Int
    @usableFromInline let storage: [UInt8]
    /// The whole array (JSON brackets or MessagePack header included).
    @usableFromInline let range: Range<Int>

    init(encoding: ValueEncoding, count: Int, storage: [UInt8], range: Range<Int>) {
        self.encoding = encoding
        self.count = count
        self.storage = storage
        self.range = range
    }

    /// The arguments made of `values`, which must all be in `encoding`.
    public init(encoding: ValueEncoding, values: [EncodedValue]) {
        var bytes: [UInt8] = []
        switch encoding {
        case .json:
            bytes.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                precondition(value.encoding == .json, "argument \(index) is not JSON")
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                bytes.append(contentsOf: value.bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .messagePack:
            var writer = MessagePackWriter()
            writer.writeArrayHeader(count: values.count)
            bytes = writer.bytes
            for (index, value) in values.enumerated() {
                precondition(value.encoding == .messagePack, "argument \(index) is not MessagePack")
                bytes.append(contentsOf: value.bytes)
            }
        }
        self.init(encoding: encoding, count: values.count, storage: bytes, range: 0..<bytes.count)
    }

    /// Encodes each of `values` as one argument, in `encoding`, through `Codable` (values that
    /// are all `JSONEncodable` or all `MessagePackEncodable` take the fast-path overloads).
    public init<each Argument: Encodable>(encoding: ValueEncoding, _ values: repeat each Argument) throws {
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

    /// The number of types in the pack `Argument` (counted on the types, so that no value is
    /// copied).
    static func count<each Argument>(_ types: repeat (each Argument).Type) -> Int {
        var count = 0
        for _ in repeat each types { count += 1 }
        return count
    }

    /// Appends `values` as a JSON array (`Codable`) to `bytes`.
    static func writeJSON<each Argument: Encodable>(_ values: repeat each Argument, into bytes: inout [UInt8]) throws {
        bytes.append(UInt8(ascii: "["))
        var first = true
        for value in repeat each values {
            if !first { bytes.append(UInt8(ascii: ",")) }
            try JSONValueEncoding.encode(value, into: &bytes)
            first = false
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Appends `values` as a MessagePack array (`Codable`) to `bytes`.
    static func writeMessagePack<each Argument: Encodable>(
        _ values: repeat each Argument,
        into bytes: inout [UInt8]
    ) throws {
        var writer = MessagePackWriter()
        swap(&writer.bytes, &bytes)
        writer.writeArrayHeader(count: count(repeat (each Argument).self))
        swap(&writer.bytes, &bytes)
        let encoder = MessagePackEncoder()
        for value in repeat each values { try encoder.encode(value, into: &bytes) }
    }

    /// No arguments.
    public static func empty(_ encoding: ValueEncoding) -> EncodedArguments {
        EncodedArguments(encoding: encoding, values: [])
    }

    /// The whole encoded array.
    public var bytes: ArraySlice<UInt8> { storage[range] }

    /// An iterator over the arguments.
    public struct Iterator: IteratorProtocol {
        let arguments: EncodedArguments
        var position: Int
        var remaining: Int

        public mutating func next() -> EncodedValue? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            switch arguments.encoding {
            case .json:
                var scanner = JSONScanner(validated: arguments.storage, range: position..<arguments.range.upperBound)
                _ = scanner.peek()
                let start = scanner.position
                guard (try? scanner.skipValue()) != nil else { return nil }
                let end = scanner.position
                _ = scanner.consume(UInt8(ascii: ","))
                position = scanner.position
                return EncodedValue(encoding: .json, storage: arguments.storage, range: start..<end)
            case .messagePack:
                var reader = MessagePackReader(
                    arguments.storage,
                    range: position..<arguments.range.upperBound,
                    maximumDepth: .max
                )
                guard (try? reader.skipValue()) != nil else { return nil }
                defer { position = reader.position }
                return EncodedValue(
                    encoding: .messagePack,
                    storage: arguments.storage,
                    range: position..<reader.position
                )
            }
        }
    }

    public func makeIterator() -> Iterator {
        switch encoding {
        case .json:
            return Iterator(arguments: self, position: range.lowerBound + 1, remaining: count)
        case .messagePack:
            return Iterator(arguments: self, position: messagePackElementsStart, remaining: count)
        }
    }

    /// Where a MessagePack array's elements start: after its header (fixarray, array 16 or
    /// array 32; the array was validated or written by this package).
    var messagePackElementsStart: Int {
        switch storage[range.lowerBound] {
        case 0xdc: range.lowerBound + 3
        case 0xdd: range.lowerBound + 5
        default: range.lowerBound + 1
        }
    }

    /// The argument at `index` (found by walking the array). Precondition: `index < count`.
    public subscript(index: Int) -> EncodedValue {
        precondition(index >= 0 && index < count, "argument index out of range")
        var iterator = makeIterator()
        for _ in 0..<index { _ = iterator.next() }
        return iterator.next()!
    }

    /// Decodes the argument at `index` as a `T` through `Codable` (see `EncodedValue.decode(_:)`
    /// for the fast-path overloads). Precondition: `index < count`.
    public func decode<T: Decodable>(_ type: T.Type = T.self, at index: Int) throws(DecodingError) -> T {
        let argument = start(of: index)..<range.upperBound
        return try EncodedValue.decodeCodable(type, encoding, storage, argument)
    }

    /// The offset where the argument at `index` starts. Only the start is needed: this skips
    /// the arguments before it, not the argument. Precondition: `index < count`.
    @usableFromInline func start(of index: Int) -> Int {
        precondition(index >= 0 && index < count, "argument index out of range")
        // The first argument (the usual one) without an iterator, which would copy `self`: after
        // the MessagePack array's header, or after the JSON array's `[` and any whitespace.
        if index == 0 {
            guard encoding == .json else { return messagePackElementsStart }
            return JSONScanner.skipWhitespace(storage.backDeployedSpan, range.lowerBound + 1, range.upperBound)
        }
        var iterator = makeIterator()
        for _ in 0..<index { _ = iterator.next() }
        guard encoding == .json else { return iterator.position }
        var scanner = JSONScanner(validated: storage, range: iterator.position..<range.upperBound)
        _ = scanner.peek()
        return scanner.position
    }

    /// A copy that owns exactly its bytes (releasing the rest of the chunk it came from).
    public func compacted() -> EncodedArguments {
        let copy = Array(bytes)
        return EncodedArguments(encoding: encoding, count: count, storage: copy, range: 0..<copy.count)
    }

    public static func == (lhs: EncodedArguments, rhs: EncodedArguments) -> Bool {
        lhs.encoding == rhs.encoding && lhs.count == rhs.count && lhs.elementsEqual(rhs)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(encoding)
        hasher.combine(count)
        for value in self { hasher.combine(value) }
    }
}

/// Default limits shared by the hub protocols.
public enum HubProtocolLimits {
    /// The default maximum size of one hub message: 1 MiB (the ASP.NET Core server's own default
    /// is 32 KiB for what it receives; clients receive larger results and stream items).
    public static let defaultMaximumMessageSize = 1 << 20
    /// The default maximum nesting of arrays/objects inside a message's values (64 levels, like
    /// System.Text.Json's default `MaxDepth`).
    public static let defaultMaximumDepth = 64
}
