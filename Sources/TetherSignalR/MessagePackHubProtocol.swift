import TetherCore
import TetherMessagePack

/// The `messagepack` hub protocol: each message is a MessagePack array prefixed by its length as
/// a VarInt of 1–5 bytes (HubProtocol.md "MessagePack (MsgPack) encoding").
///
/// Decoding follows ASP.NET Core's `MessagePackHubProtocolWorker` (same error texts; 5- and
/// 6-element Invocations; 2- and 3-element Close; extra trailing elements ignored) and also
/// accepts the integer that aiosignalr writes in the headers slot (`cc 80`) as empty headers.
/// Encoding writes the C# layout (6-element Invocation, 3-element Close).
public struct MessagePackHubProtocol: HubProtocol {
    /// The largest message accepted, in bytes (default 1 MiB); larger ones are an error.
    public var maximumMessageSize: Int
    /// The deepest nesting of arrays and maps accepted inside a message (default 64).
    public var maximumDepth: Int

    /// Creates the protocol with the given limits.
    public init(
        maximumMessageSize: Int = HubProtocolLimits.defaultMaximumMessageSize,
        maximumDepth: Int = HubProtocolLimits.defaultMaximumDepth
    ) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumDepth = maximumDepth
    }

    public var name: String { "messagepack" }
    public var version: Int { 2 }
    public var transferFormat: TransferFormat { .binary }
    public var valueEncoding: ValueEncoding { .messagePack }

    public func makeParser() -> MessagePackHubMessageParser {
        MessagePackHubMessageParser(maximumMessageSize: maximumMessageSize, maximumDepth: maximumDepth)
    }

    public func write(_ message: HubMessage, into bytes: inout [UInt8]) {
        let prefixOffset = bytes.count
        bytes.append(0)
        var writer = MessagePackWriter()
        swap(&writer.bytes, &bytes)
        MessagePackHubMessageWriter.write(message, &writer)
        swap(&writer.bytes, &bytes)
        let length = bytes.count - prefixOffset - 1
        var prefix: InlineArray<5, UInt8> = .init(repeating: 0)
        let prefixLength = VarInt.encode(length, into: &prefix)
        bytes[prefixOffset] = prefix[0]
        if prefixLength > 1 {
            bytes.insert(contentsOf: repeatElement(0, count: prefixLength - 1), at: prefixOffset + 1)
            for index in 1..<prefixLength { bytes[prefixOffset + index] = prefix[index] }
        }
    }
}

/// The length prefix of MessagePack hub frames: 7 bits per byte, least significant group first,
/// at most 5 bytes, at most 0x7fffffff.
public enum VarInt {
    /// The outcome of reading a prefix.
    public enum ReadResult: Equatable, Sendable {
        /// The prefix is complete: the value and how many bytes it took.
        case value(Int, length: Int)
        /// The prefix continues beyond the available bytes.
        case needMoreData
    }

    /// Writes `value` into `bytes` and returns the number of bytes used.
    public static func encode(_ value: Int, into bytes: inout InlineArray<5, UInt8>) -> Int {
        precondition(value >= 0 && value <= 0x7fff_ffff, "VarInt value out of range")
        var remaining = value
        var count = 0
        repeat {
            var byte = UInt8(remaining & 0x7f)
            remaining >>= 7
            if remaining > 0 { byte |= 0x80 }
            bytes[count] = byte
            count += 1
        } while remaining > 0
        return count
    }

    /// The encoding of `value`.
    public static func encode(_ value: Int) -> [UInt8] {
        var buffer: InlineArray<5, UInt8> = .init(repeating: 0)
        let count = encode(value, into: &buffer)
        return (0..<count).map { buffer[$0] }
    }

    /// Reads a prefix at the start of `bytes`, as C#'s `BinaryMessageParser` does.
    public static func read(_ bytes: Span<UInt8>) throws(HubProtocolError) -> ReadResult {
        var value = 0
        var index = 0
        while true {
            guard index < bytes.count else { return .needMoreData }
            let byte = bytes[index]
            if index == 4 && byte > 7 {
                throw HubProtocolError(.messageTooLarge, "Messages over 2GB in size are not supported.")
            }
            value |= Int(byte & 0x7f) << (7 * index)
            index += 1
            if byte & 0x80 == 0 { return .value(value, length: index) }
        }
    }
}

/// Incremental decoder of the MessagePack hub protocol.
public struct MessagePackHubMessageParser: HubMessageParser {
    var buffer = ReceiveBuffer()
    var failure: HubProtocolError?
    var targets = StringInterner(capacity: 64)
    let maximumMessageSize: Int
    let maximumDepth: Int

    /// A parser with the given limits.
    public init(
        maximumMessageSize: Int = HubProtocolLimits.defaultMaximumMessageSize,
        maximumDepth: Int = HubProtocolLimits.defaultMaximumDepth
    ) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumDepth = maximumDepth
    }

    public var hasPartialMessage: Bool { buffer.pendingCount > 0 }

    public mutating func append(_ bytes: Span<UInt8>) {
        guard failure == nil else { return }
        buffer.append(bytes)
    }

    public mutating func next() throws(HubProtocolError) -> HubMessage? {
        if let failure { throw failure }
        while buffer.pendingCount > 0 {
            let storage = buffer.storage
            let prefix: VarInt.ReadResult
            do {
                prefix = try VarInt.read(storage.span.extracting(buffer.start..<storage.count))
            } catch {
                throw fail(error)
            }
            guard case .value(let length, let prefixLength) = prefix else { return nil }
            guard length <= maximumMessageSize else { throw fail(.tooLarge(maximumMessageSize)) }
            let bodyStart = buffer.start + prefixLength
            guard storage.count - bodyStart >= length else { return nil }
            buffer.start = bodyStart + length
            do {
                if let message = try MessagePackHubRecord.parse(
                    storage,
                    bodyStart..<(bodyStart + length),
                    maximumDepth: maximumDepth,
                    targets: &targets
                ) {
                    return message
                }
            } catch {
                throw fail(error)
            }
        }
        return nil
    }

    private mutating func fail(_ error: HubProtocolError) -> HubProtocolError {
        failure = error
        buffer = ReceiveBuffer()
        return error
    }
}

/// Parsing one MessagePack frame body into a hub message, as C#'s worker does: fields are read in
/// order from the bytes (the array's declared length only decides the optional trailing fields),
/// and trailing extra elements are skipped.
enum MessagePackHubRecord {
    static func readFailed(_ field: String, _ type: String) -> HubProtocolError {
        .invalid("Reading '\(field)' as \(type) failed.")
    }

    static func parse(
        _ bytes: [UInt8],
        _ body: Range<Int>,
        maximumDepth: Int,
        targets: inout StringInterner
    ) throws(HubProtocolError) -> HubMessage? {
        var reader = MessagePackReader(bytes, range: body, maximumDepth: maximumDepth)
        guard let count = try? reader.readArrayHeader() else {
            throw .invalid("Reading array length for 'elementCount' failed.")
        }
        guard let type = try? reader.readInteger(Int32.self) else { throw readFailed("messageType", "Int32") }
        var read = 1
        let message: HubMessage?
        switch type {
        case 1:
            let headers = try readHeaders(&reader)
            let id = try readString(&reader, "invocationId")
            let target = try readTarget(&reader, &targets)
            guard let target, !target.isEmpty else { throw .invalid("Null or empty target for Invocation message.") }
            let arguments = try readArguments(&reader)
            read = 5
            let streamIds = count > 5 ? try readStreamIds(&reader) : nil
            if count > 5 { read = 6 }
            message = .invocation(
                InvocationMessage(
                    headers: headers,
                    invocationId: id.flatMap { $0.isEmpty ? nil : $0 },
                    target: target,
                    arguments: arguments,
                    streamIds: streamIds
                )
            )
        case 2:
            let headers = try readHeaders(&reader)
            let id = try readInvocationId(&reader, "StreamItem")
            let item = try readValue(&reader, "item")
            read = 4
            message = .streamItem(StreamItemMessage(headers: headers, invocationId: id, item: item))
        case 3:
            let headers = try readHeaders(&reader)
            let id = try readInvocationId(&reader, "Completion")
            guard let kind = try? reader.readInteger(Int32.self) else { throw readFailed("resultKind", "Int32") }
            let result: CompletionResult
            switch kind {
            case 1:
                guard let error = try? reader.readString() else { throw readFailed("error", "String") }
                result = .error(error)
                read = 5
            case 2:
                result = .void
                read = 4
            case 3:
                result = .value(try readValue(&reader, "argument"))
                read = 5
            default:
                throw .invalid("Invalid invocation result kind.")
            }
            message = .completion(CompletionMessage(headers: headers, invocationId: id, result: result))
        case 4:
            let headers = try readHeaders(&reader)
            let id = try readInvocationId(&reader, "StreamInvocation")
            let target = try readTarget(&reader, &targets)
            guard let target, !target.isEmpty else {
                throw .invalid("Null or empty target for StreamInvocation message.")
            }
            let arguments = try readArguments(&reader)
            read = 5
            let streamIds = count > 5 ? try readStreamIds(&reader) : nil
            if count > 5 { read = 6 }
            message = .streamInvocation(
                StreamInvocationMessage(
                    headers: headers,
                    invocationId: id,
                    target: target,
                    arguments: arguments,
                    streamIds: streamIds
                )
            )
        case 5:
            let headers = try readHeaders(&reader)
            let id = try readInvocationId(&reader, "CancelInvocation")
            read = 3
            message = .cancelInvocation(CancelInvocationMessage(headers: headers, invocationId: id))
        case 6:
            message = .ping
        case 7:
            let error = try readString(&reader, "error")
            read = 2
            var allowReconnect = false
            if count > 2 {
                guard let value = try? reader.readBool() else { throw readFailed("allowReconnect", "Boolean") }
                allowReconnect = value
                read = 3
            }
            message = .close(CloseMessage(error: error, allowReconnect: allowReconnect))
        case 8, 9:
            guard let sequenceId = try? reader.readInt64() else { throw readFailed("sequenceId", "Int64") }
            read = 2
            message = type == 8 ? .ack(sequenceId: sequenceId) : .sequence(sequenceId: sequenceId)
        default:
            return nil
        }
        // Forward compatibility: skip elements this version does not know.
        while read < count, !reader.isAtEnd {
            do {
                try reader.skipValue()
            } catch {
                throw .invalid("Reading an extra message element failed.")
            }
            read += 1
        }
        return message
    }

    /// The headers map; aiosignalr's integer in this slot (`cc 80`) counts as no headers.
    static func readHeaders(_ reader: inout MessagePackReader) throws(HubProtocolError) -> HubMessageHeaders {
        if (try? reader.peekType()) == .integer {
            _ = try? reader.readInt64()
            return [:]
        }
        guard let count = try? reader.readMapHeader() else {
            throw .invalid("Reading map length for 'headers' failed.")
        }
        var headers: HubMessageHeaders = [:]
        for index in 0..<count {
            let key = try readString(&reader, "headers[\(index)].Key")
            guard let key, !key.isEmpty else { throw .invalid("Null or empty key in header.") }
            let value = try readString(&reader, "headers[\(index)].Value")
            guard let value, !value.isEmpty else { throw .invalid("Null or empty value in header.") }
            headers[key] = value
        }
        return headers
    }

    static func readString(_ reader: inout MessagePackReader, _ field: String) throws(HubProtocolError) -> String? {
        do {
            return try reader.readOptionalString()
        } catch {
            throw readFailed(field, "String")
        }
    }

    static func readTarget(
        _ reader: inout MessagePackReader,
        _ targets: inout StringInterner
    ) throws(HubProtocolError) -> String? {
        if reader.readNilIfPresent() { return nil }
        let start = reader.position
        guard let range = try? reader.readStringRange(),
            (try? UTF8Span(validating: reader.bytes.span.extracting(range))) != nil
        else {
            reader.position = start
            throw readFailed("target", "String")
        }
        return targets.intern(reader.bytes.span.extracting(range))
    }

    static func readInvocationId(
        _ reader: inout MessagePackReader,
        _ messageName: String
    ) throws(HubProtocolError) -> String {
        guard let id = try readString(&reader, "invocationId"), !id.isEmpty else {
            throw .invalid("Null or empty invocation ID for \(messageName) message.")
        }
        return id
    }

    static func readArguments(_ reader: inout MessagePackReader) throws(HubProtocolError) -> EncodedArguments {
        let start = reader.position
        guard let count = try? reader.readArrayHeader() else {
            throw .invalid("Reading array length for 'arguments' failed.")
        }
        for _ in 0..<count {
            do {
                try reader.skipValue()
            } catch {
                throw .invalid("Reading 'arguments' failed: \(error.description)")
            }
        }
        return EncodedArguments(
            encoding: .messagePack,
            count: count,
            storage: reader.bytes,
            range: start..<reader.position
        )
    }

    static func readValue(_ reader: inout MessagePackReader, _ field: String) throws(HubProtocolError) -> EncodedValue {
        let start = reader.position
        do {
            try reader.skipValue()
        } catch {
            throw .invalid("Reading '\(field)' failed: \(error.description)")
        }
        return EncodedValue(encoding: .messagePack, storage: reader.bytes, range: start..<reader.position)
    }

    static func readStreamIds(_ reader: inout MessagePackReader) throws(HubProtocolError) -> [String]? {
        guard let count = try? reader.readArrayHeader() else {
            throw .invalid("Reading array length for 'streamIds' failed.")
        }
        guard count > 0 else { return nil }
        var ids: [String] = []
        ids.reserveCapacity(min(count, 64))
        for _ in 0..<count {
            let id = try readString(&reader, "streamId")
            guard let id, !id.isEmpty else { throw .invalid("Null or empty value in streamIds received.") }
            ids.append(id)
        }
        return ids
    }
}

/// Writing hub messages in the layout of C#'s `MessagePackHubProtocolWorker`.
enum MessagePackHubMessageWriter {
    static func write(_ message: HubMessage, _ writer: inout MessagePackWriter) {
        switch message {
        case .invocation(let invocation):
            writer.writeArrayHeader(count: 6)
            writer.writeUInt(1)
            writeHeaders(invocation.headers, &writer)
            if let id = invocation.invocationId { writer.writeString(id) } else { writer.writeNil() }
            writeCall(invocation.target, invocation.arguments, invocation.streamIds, &writer)
        case .streamInvocation(let invocation):
            writer.writeArrayHeader(count: 6)
            writer.writeUInt(4)
            writeHeaders(invocation.headers, &writer)
            writer.writeString(invocation.invocationId)
            writeCall(invocation.target, invocation.arguments, invocation.streamIds, &writer)
        case .streamItem(let item):
            writer.writeArrayHeader(count: 4)
            writer.writeUInt(2)
            writeHeaders(item.headers, &writer)
            writer.writeString(item.invocationId)
            writeValue(item.item, &writer)
        case .completion(let completion):
            switch completion.result {
            case .void:
                writer.writeArrayHeader(count: 4)
                writer.writeUInt(3)
                writeHeaders(completion.headers, &writer)
                writer.writeString(completion.invocationId)
                writer.writeUInt(2)
            case .error(let error):
                writer.writeArrayHeader(count: 5)
                writer.writeUInt(3)
                writeHeaders(completion.headers, &writer)
                writer.writeString(completion.invocationId)
                writer.writeUInt(1)
                writer.writeString(error)
            case .value(let value):
                writer.writeArrayHeader(count: 5)
                writer.writeUInt(3)
                writeHeaders(completion.headers, &writer)
                writer.writeString(completion.invocationId)
                writer.writeUInt(3)
                writeValue(value, &writer)
            }
        case .cancelInvocation(let cancel):
            writer.writeArrayHeader(count: 3)
            writer.writeUInt(5)
            writeHeaders(cancel.headers, &writer)
            writer.writeString(cancel.invocationId)
        case .ping:
            writer.writeArrayHeader(count: 1)
            writer.writeUInt(6)
        case .close(let close):
            writer.writeArrayHeader(count: 3)
            writer.writeUInt(7)
            if let error = close.error { writer.writeString(error) } else { writer.writeNil() }
            writer.writeBool(close.allowReconnect)
        case .ack(let sequenceId), .sequence(let sequenceId):
            writer.writeArrayHeader(count: 2)
            writer.writeUInt(UInt64(message.messageType))
            writer.writeInt(sequenceId)
        }
    }

    static func writeHeaders(_ headers: HubMessageHeaders, _ writer: inout MessagePackWriter) {
        writer.writeMapHeader(count: headers.count)
        for (key, value) in headers.sorted(by: { $0.key < $1.key }) {
            writer.writeString(key)
            writer.writeString(value)
        }
    }

    static func writeValue(_ value: EncodedValue, _ writer: inout MessagePackWriter) {
        precondition(value.encoding == .messagePack, "a JSON value cannot be written by the MessagePack hub protocol")
        writer.bytes.append(contentsOf: value.bytes)
    }

    static func writeCall(
        _ target: String,
        _ arguments: EncodedArguments,
        _ streamIds: [String]?,
        _ writer: inout MessagePackWriter
    ) {
        writer.writeString(target)
        precondition(
            arguments.encoding == .messagePack,
            "JSON arguments cannot be written by the MessagePack hub protocol"
        )
        writer.bytes.append(contentsOf: arguments.bytes)
        let ids = streamIds ?? []
        writer.writeArrayHeader(count: ids.count)
        for id in ids { writer.writeString(id) }
    }
}
