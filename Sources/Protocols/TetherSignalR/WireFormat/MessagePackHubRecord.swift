@_spi(TetherInternal) import TetherCore
import TetherMessagePack
@_spi(TetherInternal) import TetherText

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
        return try parse(&reader, targets: &targets)
    }

    /// `parse` with a reader that the caller has placed at the frame body (the parser keeps one
    /// per received chunk, so that a message costs no new reference to the chunk).
    static func parse(
        _ reader: inout MessagePackReader,
        targets: inout StringInterner
    ) throws(HubProtocolError) -> HubMessage? {
        try parse(&reader, targets: &targets, binds: false) { _, _ in }
    }

    /// What a payload offer does when the parser binds nothing.
    typealias Offer = (HubPayloadOwner, inout HubPayloadReader) -> Void

    /// `parse`, with each payload (arguments, result, stream item) offered to `offer` as it is
    /// reached when `binds`: what the binder reads is not skipped first (see `HubMessageBinder`).
    @inline(__always)
    static func parse(
        _ reader: inout MessagePackReader,
        targets: inout StringInterner,
        binds: Bool,
        offer: Offer
    ) throws(HubProtocolError) -> HubMessage? {
        // Offsets in error texts count from the message's first byte.
        let start = reader.position
        guard let count = try? reader.readArrayHeader() else {
            throw .invalid("Reading array length for 'elementCount' failed.")
        }
        guard let type = try? reader.readInteger(Int32.self) else { throw readFailed("messageType", "Int32") }
        // Each message is returned as soon as it is made (after any extra elements are skipped):
        // a message kept in a variable across the skipping was copied on return, a retain and a
        // release of each of its references per message.
        switch type {
        case 1:
            let headers = try readHeaders(&reader)
            let id = try readString(&reader, "invocationId")
            let target = try readTarget(&reader, &targets)
            guard let target, !target.isEmpty else { throw .invalid("Null or empty target for Invocation message.") }
            let arguments = try readArguments(
                &reader,
                messageStart: start,
                offering: binds ? .arguments(target: target) : nil,
                to: offer
            )
            let streamIds = count > 5 ? try readStreamIds(&reader) : nil
            try skipExtraElements(&reader, count, read: count > 5 ? 6 : 5)
            return .invocation(
                InvocationMessage(
                    target: target,
                    arguments: arguments,
                    invocationId: id?.isEmpty == false ? id : nil,
                    headers: headers,
                    streamIds: streamIds
                )
            )
        case 2:
            let headers = try readHeaders(&reader)
            let id = try readInvocationId(&reader, "StreamItem")
            let item = try readValue(
                &reader,
                "item",
                messageStart: start,
                offering: binds ? .item(invocationId: id) : nil,
                to: offer
            )
            try skipExtraElements(&reader, count, read: 4)
            return .streamItem(StreamItemMessage(invocationId: id, item: item, headers: headers))
        case 3:
            let headers = try readHeaders(&reader)
            let id = try readInvocationId(&reader, "Completion")
            guard let kind = try? reader.readInteger(Int32.self) else { throw readFailed("resultKind", "Int32") }
            let result: CompletionResult
            let read: Int
            switch kind {
            case 1:
                guard let error = try? reader.readString() else { throw readFailed("error", "String") }
                result = .error(error)
                read = 5
            case 2:
                result = .void
                read = 4
            case 3:
                result = .value(
                    try readValue(
                        &reader,
                        "argument",
                        messageStart: start,
                        offering: binds ? .result(invocationId: id) : nil,
                        to: offer
                    )
                )
                read = 5
            default:
                throw .invalid("Invalid invocation result kind.")
            }
            try skipExtraElements(&reader, count, read: read)
            return .completion(CompletionMessage(invocationId: id, result: result, headers: headers))
        case 4:
            let headers = try readHeaders(&reader)
            let id = try readInvocationId(&reader, "StreamInvocation")
            let target = try readTarget(&reader, &targets)
            guard let target, !target.isEmpty else {
                throw .invalid("Null or empty target for StreamInvocation message.")
            }
            let arguments = try readArguments(
                &reader,
                messageStart: start,
                offering: binds ? .arguments(target: target) : nil,
                to: offer
            )
            let streamIds = count > 5 ? try readStreamIds(&reader) : nil
            try skipExtraElements(&reader, count, read: count > 5 ? 6 : 5)
            return .streamInvocation(
                StreamInvocationMessage(
                    target: target,
                    arguments: arguments,
                    invocationId: id,
                    headers: headers,
                    streamIds: streamIds
                )
            )
        case 5:
            let headers = try readHeaders(&reader)
            let id = try readInvocationId(&reader, "CancelInvocation")
            try skipExtraElements(&reader, count, read: 3)
            return .cancelInvocation(CancelInvocationMessage(invocationId: id, headers: headers))
        case 6:
            try skipExtraElements(&reader, count, read: 1)
            return .ping
        case 7:
            let error = try readString(&reader, "error")
            var read = 2
            var allowReconnect = false
            if count > 2 {
                guard let value = try? reader.readBool() else { throw readFailed("allowReconnect", "Boolean") }
                allowReconnect = value
                read = 3
            }
            try skipExtraElements(&reader, count, read: read)
            return .close(CloseMessage(error: error, allowReconnect: allowReconnect))
        case 8, 9:
            guard let sequenceId = try? reader.readInt64() else { throw readFailed("sequenceId", "Int64") }
            try skipExtraElements(&reader, count, read: 2)
            return type == 8 ? .ack(sequenceId: sequenceId) : .sequence(sequenceId: sequenceId)
        default:
            return nil
        }
    }

    /// Forward compatibility: skips the elements after the `read` this version knows, up to the
    /// array's declared `count` (or the end of the frame).
    static func skipExtraElements(
        _ reader: inout MessagePackReader,
        _ count: Int,
        read: Int
    ) throws(HubProtocolError) {
        var read = read
        while read < count, !reader.isAtEnd {
            do {
                try reader.skipValue()
            } catch {
                throw .invalid("Reading an extra message element failed.")
            }
            read += 1
        }
    }

    /// The headers map; aiosignalr's integer in this slot (`cc 80`) counts as no headers.
    static func readHeaders(_ reader: inout MessagePackReader) throws(HubProtocolError) -> HubMessageHeaders {
        // The common case first: no headers, an empty fixmap.
        if reader.position < reader.end, reader.bytes[reader.position] == 0x80 {
            reader.position += 1
            return [:]
        }
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
            let target = targets.intern(validating: reader.bytes.backDeployedSpan.extracting(range))
        else {
            reader.position = start
            throw readFailed("target", "String")
        }
        return target
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

    static func readArguments(
        _ reader: inout MessagePackReader,
        messageStart: Int,
        offering owner: HubPayloadOwner? = nil,
        to offer: Offer
    ) throws(HubProtocolError) -> EncodedArguments {
        let start = reader.position
        guard let count = try? reader.readArrayHeader() else {
            throw .invalid("Reading array length for 'arguments' failed.")
        }
        // The arguments a binder read are not skipped: its reads checked them (a read that
        // fails does not move the payload reader).
        var read = 0
        if let owner {
            var payload = HubPayloadReader(messagePack: reader, count: count)
            offer(owner, &payload)
            read = count - payload.left
            reader.position = payload.position
        }
        for _ in read..<count {
            do {
                try reader.skipValue()
            } catch {
                throw .invalid("Reading 'arguments' failed: \(error.offset(from: messageStart).description)")
            }
        }
        return EncodedArguments(
            encoding: .messagePack,
            count: count,
            storage: reader.bytes,
            range: start..<reader.position
        )
    }

    static func readValue(
        _ reader: inout MessagePackReader,
        _ field: String,
        messageStart: Int,
        offering owner: HubPayloadOwner? = nil,
        to offer: Offer
    ) throws(HubProtocolError) -> EncodedValue {
        let start = reader.position
        if let owner {
            var payload = HubPayloadReader(messagePack: reader, count: 1)
            offer(owner, &payload)
            if payload.left == 0 {
                reader.position = payload.position
                return EncodedValue(encoding: .messagePack, storage: reader.bytes, range: start..<reader.position)
            }
        }
        do {
            try reader.skipValue()
        } catch {
            throw .invalid("Reading '\(field)' failed: \(error.offset(from: messageStart).description)")
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
