@_spi(TetherInternal) import TetherCore
import TetherMessagePack

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
        guard !headers.isEmpty else { return }  // the common case: no sorting
        for (key, value) in headers.sorted(by: { $0.key < $1.key }) {
            writer.writeString(key)
            writer.writeString(value)
        }
    }

    static func writeValue(_ value: EncodedValue, _ writer: inout MessagePackWriter) {
        precondition(value.encoding == .messagePack, "a JSON value cannot be written by the MessagePack hub protocol")
        writer.bytes.append(copying: value.storage.backDeployedSpan.extracting(value.range))
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
        writer.bytes.append(copying: arguments.storage.backDeployedSpan.extracting(arguments.range))
        let ids = streamIds ?? []
        writer.writeArrayHeader(count: ids.count)
        for id in ids { writer.writeString(id) }
    }
}
