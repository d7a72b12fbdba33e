@_spi(TetherInternal) import TetherCore
public import TetherJSON
public import TetherMessagePack

/// Reads the payloads of hub messages into the app's own types while a parser reads the
/// messages: what the official clients call an invocation binder.
///
/// `HubMessageParser.next()` leaves every argument, result and stream item encoded
/// (`EncodedArguments`, `EncodedValue`), validated but not interpreted, for the app to decode
/// later, which reads each payload twice: once to validate it, once to decode it. A binder given
/// to `next(binding:)` is offered each payload as its message is read instead, with what it
/// belongs to (the invocation's target, the invocation id of a result or item), and reads what it
/// wants through a `HubPayloadReader`; the values it reads are read once. The message is
/// returned as `next()` returns it, payload included (still encoded, to decode again if needed):
///
/// ```swift
/// struct ChatBinder: HubMessageBinder {
///     var event: ChatEvent?              // what the last message carried
///     var failure: (any Error)?
///
///     mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader) {
///         event = nil
///         do {
///             switch target {
///             case "ReceiveMessage": event = .message(try arguments.read(ChatMessage.self))
///             case "UserTyping": event = .typing(try arguments.read(String.self))
///             default: break             // left encoded, in the message
///             }
///         } catch {
///             failure = error            // a type mismatch, say: the message still arrives
///         }
///     }
/// }
///
/// var binder = ChatBinder()
/// while let message = try parser.next(binding: &binder) {
///     if case .invocation = message, let event = binder.event.take() { handle(event) }
/// }
/// ```
///
/// The parser accepts exactly what `next()` accepts, and fails with the same errors: each
/// MessagePack read checks what it reads (a `MessagePackDecodable` conformance's reads, each
/// string's UTF-8), a read that fails leaves its value to the parser, and the parser validates
/// and skips whatever the binder did not read. A type the binder reads through `Codable` only is
/// validated first and then decoded.
/// - With `messagepack` every payload is offered as its message is read, and the values the
///   binder reads are read once.
/// - With `json` a payload is offered once its record has been read and validated (the reads
///   then find their way through valid bytes): two passes, as with `next()` and `decode`. (A
///   JSON read that validates as it goes costs more than the two today: its strings would be
///   scanned twice unless escapes, control characters and UTF-8 were checked in the pass that
///   decodes them; `Specs/performance.md`.)
/// - The binder is offered the payload of each message `next(binding:)` returns once. A
///   MessagePack message that the parser rejects after its payload (a malformed field after it)
///   was offered before the error; no other message is.
/// - A `MessagePackDecodable` conformance that reads its own type recursively must bound its own
///   nesting (`MessagePackReader.maximumDepth`), as `skipValue()` bounds what it skips.
public protocol HubMessageBinder {
    /// Reads the arguments of an invocation or stream invocation of `target`. Read as many as
    /// needed: the rest are validated and skipped.
    mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader)

    /// Reads the result of a completion of the invocation `invocationId`.
    mutating func bindResult(of invocationId: String, from result: inout HubPayloadReader)

    /// Reads an item of the stream `invocationId`.
    mutating func bindItem(of invocationId: String, from item: inout HubPayloadReader)
}

extension HubMessageBinder {
    /// Leaves every invocation's arguments encoded.
    public mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader) {}

    /// Leaves every completion's result encoded.
    public mutating func bindResult(of invocationId: String, from result: inout HubPayloadReader) {}

    /// Leaves every stream item encoded.
    public mutating func bindItem(of invocationId: String, from item: inout HubPayloadReader) {}
}

/// What a payload belongs to.
@usableFromInline
enum HubPayloadOwner {
    /// The arguments of an invocation of `target`.
    case arguments(target: String)
    /// The result of a completion of `invocationId`.
    case result(invocationId: String)
    /// An item of the stream `invocationId`.
    case item(invocationId: String)
}

extension HubMessageBinder {
    /// Offers the payload of `owner` to the binder.
    @inlinable @inline(__always)
    mutating func offer(_ owner: HubPayloadOwner, _ payload: inout HubPayloadReader) {
        switch owner {
        case .arguments(let target): bindArguments(of: target, from: &payload)
        case .result(let invocationId): bindResult(of: invocationId, from: &payload)
        case .item(let invocationId): bindItem(of: invocationId, from: &payload)
        }
    }
}

extension HubMessageParser {
    /// The next complete message, its payload offered to `binder` (see `HubMessageBinder`); nil
    /// if more bytes are needed. Errors and skipped messages are those of `next()`.
    ///
    /// This implementation offers the payload after `next()` has read and validated the message
    /// (two passes over its bytes); `MessagePackHubMessageParser` offers it while it reads.
    @inlinable
    public mutating func next<Binder: HubMessageBinder>(
        binding binder: inout Binder
    ) throws(HubProtocolError) -> HubMessage? {
        guard let message = try next() else { return nil }
        HubPayloadReader.offer(message, to: &binder)
        return message
    }
}

/// Reads the payload of one hub message for a `HubMessageBinder`: an invocation's arguments, one
/// after the other, or a completion's result or a stream item (one value).
///
/// Each `read` decodes the next value as the `decode` methods of `EncodedValue` do, choosing the
/// fast path by overload (`JSONDecodable`, `MessagePackDecodable`, both, or `Codable` only).
public struct HubPayloadReader {
    /// How the payload is encoded.
    public let encoding: ValueEncoding
    /// Whether every value has been read (the end of the arguments, or the result or item read).
    public var isAtEnd: Bool { left == 0 }
    /// How many values are left to read.
    @usableFromInline var left: Int
    @usableFromInline let storage: [UInt8]
    /// The offset of the next value.
    @usableFromInline var position: Int
    /// The end of what may be read (the message's end for MessagePack, the array's for JSON).
    @usableFromInline let end: Int
    /// The nesting limit for what a read skips (MessagePack, whose values were not validated).
    @usableFromInline let maximumDepth: Int
    /// Whether values are separated by commas (JSON arguments).
    @usableFromInline let isJSONList: Bool

    /// A reader of `count` values starting at `position` of `storage`. For JSON the bytes were
    /// validated and `position` is the first value's (after `[` for a list).
    @usableFromInline
    init(
        encoding: ValueEncoding,
        storage: [UInt8],
        position: Int,
        end: Int,
        count: Int,
        maximumDepth: Int,
        isJSONList: Bool
    ) {
        self.encoding = encoding
        self.storage = storage
        self.position = position
        self.end = end
        self.left = count
        self.maximumDepth = maximumDepth
        self.isJSONList = isJSONList
    }

    /// Reads the next value as a `T`: JSON with `T.init(json:)`, MessagePack with
    /// `T.init(messagePack:)`.
    @inlinable @inline(__always)
    public mutating func read<T: JSONDecodable & MessagePackDecodable>(
        _ type: T.Type = T.self
    ) throws(DecodingError)
        -> T
    {
        try checkRemaining(type)
        switch encoding {
        case .json: return try readJSON(type)
        case .messagePack: return try readMessagePack(type)
        }
    }

    /// Reads the next value as a `T`: MessagePack with `T.init(messagePack:)`, JSON through
    /// `Codable`.
    @inlinable @inline(__always)
    public mutating func read<T: MessagePackDecodable>(_ type: T.Type = T.self) throws(DecodingError) -> T {
        try checkRemaining(type)
        switch encoding {
        case .json: return try readCodable(type)
        case .messagePack: return try readMessagePack(type)
        }
    }

    /// Reads the next value as a `T`: JSON with `T.init(json:)`, MessagePack through `Codable`.
    @inlinable @inline(__always)
    public mutating func read<T: JSONDecodable>(_ type: T.Type = T.self) throws(DecodingError) -> T {
        try checkRemaining(type)
        switch encoding {
        case .json: return try readJSON(type)
        case .messagePack: return try readCodable(type)
        }
    }

    /// Reads the next value as a `T` through `Codable`.
    public mutating func read<T: Decodable>(_ type: T.Type = T.self) throws(DecodingError) -> T {
        try checkRemaining(type)
        return try readCodable(type)
    }

    @inlinable @inline(__always)
    func checkRemaining(_ type: Any.Type) throws(DecodingError) {
        guard !isAtEnd else { throw Self.nothingLeft(type) }
    }

    /// The error for a read past the last value.
    @usableFromInline
    static func nothingLeft(_ type: Any.Type) -> DecodingError {
        .valueNotFound(type, .init(codingPath: [], debugDescription: "No value left to read: the payload has no more."))
    }

    @inlinable @inline(__always)
    mutating func readJSON<T: JSONDecodable>(_ type: T.Type) throws(DecodingError) -> T {
        var reader = JSONReader(bytes: storage, position: position, end: end)
        let value: T
        do {
            value = try T(json: &reader)
        } catch {
            throw EncodedValue.decodingError(error, decoding: type)
        }
        finishValue(at: reader.position)
        return value
    }

    @inlinable @inline(__always)
    mutating func readMessagePack<T: MessagePackDecodable>(_ type: T.Type) throws(DecodingError) -> T {
        var reader = MessagePackReader(storage, range: position..<end, maximumDepth: maximumDepth)
        let value = try MessagePackDecoder.decode(type, from: &reader)
        position = reader.position
        left -= 1
        return value
    }

    /// A `Codable` read: the value's end is found first (for MessagePack, by the validating skip
    /// that `next()` would have made), then it is decoded.
    @usableFromInline
    mutating func readCodable<T: Decodable>(_ type: T.Type) throws(DecodingError) -> T {
        let valueEnd: Int
        switch encoding {
        case .json:
            var scanner = JSONScanner(validated: storage, range: position..<end)
            do {
                try scanner.skipValue()
            } catch {
                throw .dataCorrupted(.init(codingPath: [], debugDescription: "The JSON value ends early."))
            }
            valueEnd = scanner.position
        case .messagePack:
            var reader = MessagePackReader(storage, range: position..<end, maximumDepth: maximumDepth)
            do {
                try reader.skipValue()
            } catch {
                throw MessagePackDecoder.readerError(error, decoding: type)
            }
            valueEnd = reader.position
        }
        let value = try EncodedValue.decodeCodable(type, encoding, storage, position..<valueEnd)
        if encoding == .json {
            finishValue(at: valueEnd)
        } else {
            position = valueEnd
            left -= 1
        }
        return value
    }

    /// Moves past a JSON value that ended at `offset`, and past the comma after it in a list.
    @usableFromInline
    mutating func finishValue(at offset: Int) {
        left -= 1
        let storage = self.storage
        let span = storage.backDeployedSpan
        var next = JSONScanner.skipWhitespace(span, offset, end)
        if isJSONList, left > 0, next < end, span[next] == UInt8(ascii: ",") {
            next = JSONScanner.skipWhitespace(span, next + 1, end)
        }
        position = next
    }

    /// Offers the payload of a decoded (so validated) message to `binder`, if it has one.
    @inlinable
    static func offer<Binder: HubMessageBinder>(_ message: borrowing HubMessage, to binder: inout Binder) {
        switch message {
        case .invocation(let invocation):
            var payload = HubPayloadReader(arguments: invocation.arguments)
            binder.bindArguments(of: invocation.target, from: &payload)
        case .streamInvocation(let invocation):
            var payload = HubPayloadReader(arguments: invocation.arguments)
            binder.bindArguments(of: invocation.target, from: &payload)
        case .completion(let completion):
            guard case .value(let result) = completion.result else { return }
            var payload = HubPayloadReader(value: result)
            binder.bindResult(of: completion.invocationId, from: &payload)
        case .streamItem(let item):
            var payload = HubPayloadReader(value: item.item)
            binder.bindItem(of: item.invocationId, from: &payload)
        default:
            return
        }
    }

    /// A reader of validated arguments.
    @inlinable
    init(arguments: EncodedArguments) {
        self.init(
            encoding: arguments.encoding,
            storage: arguments.storage,
            position: arguments.count > 0 ? arguments.start(of: 0) : arguments.range.upperBound,
            end: arguments.range.upperBound,
            count: arguments.count,
            maximumDepth: HubProtocolLimits.defaultMaximumDepth,
            isJSONList: arguments.encoding == .json
        )
    }

    /// A reader of one validated value.
    @inlinable
    init(value: EncodedValue) {
        self.init(
            encoding: value.encoding,
            storage: value.storage,
            position: value.range.lowerBound,
            end: value.range.upperBound,
            count: 1,
            maximumDepth: HubProtocolLimits.defaultMaximumDepth,
            isJSONList: false
        )
    }

    /// A reader of `count` values at `reader`'s position, not validated: each read checks what
    /// it reads, and skips within them are bounded by `reader`'s depth limit.
    init(messagePack reader: borrowing MessagePackReader, count: Int) {
        self.init(
            encoding: .messagePack,
            storage: reader.bytes,
            position: reader.position,
            end: reader.end,
            count: count,
            maximumDepth: reader.maximumDepth,
            isJSONList: false
        )
    }
}
