@_spi(TetherInternal) import TetherCore
import TetherJSON

/// Writing hub messages as compact JSON in the C# `JsonHubProtocol` property order. Payload
/// values are written by a `PayloadWriter`: the hub protocol copies JSON payloads as they are,
/// `CanonicalJSON` converts any payload to compact JSON.
enum JSONHubMessageWriter {
    /// How payload values reach the output, and how that can fail (`Never` for the hub
    /// protocol's own writer).
    struct PayloadWriter<Failure: Error>: Sendable {
        var value: @Sendable (EncodedValue, inout [UInt8]) throws(Failure) -> Void
        var arguments: @Sendable (EncodedArguments, inout [UInt8]) throws(Failure) -> Void
    }

    /// Copies JSON payloads verbatim (the hub protocol's writer).
    static let verbatim = PayloadWriter<Never>(
        value: { value, bytes in
            precondition(value.encoding == .json, "a MessagePack value cannot be written by the JSON hub protocol")
            bytes.append(copying: value.storage.backDeployedSpan.extracting(value.range))
        },
        arguments: { arguments, bytes in
            precondition(
                arguments.encoding == .json,
                "MessagePack arguments cannot be written by the JSON hub protocol"
            )
            bytes.append(copying: arguments.storage.backDeployedSpan.extracting(arguments.range))
        }
    )

    static func write<Failure: Error>(
        _ message: HubMessage,
        into bytes: inout [UInt8],
        payloads: PayloadWriter<Failure>
    ) throws(Failure) {
        append(#"{"type":"#, &bytes)
        JSONText.appendInteger(Int64(message.messageType), to: &bytes)
        switch message {
        case .invocation(let invocation):
            writeHeaders(invocation.headers, &bytes)
            if let id = invocation.invocationId { writeString("invocationId", id, &bytes) }
            try writeCall(invocation.target, invocation.arguments, invocation.streamIds, payloads, &bytes)
        case .streamInvocation(let invocation):
            writeHeaders(invocation.headers, &bytes)
            writeString("invocationId", invocation.invocationId, &bytes)
            try writeCall(invocation.target, invocation.arguments, invocation.streamIds, payloads, &bytes)
        case .streamItem(let item):
            writeHeaders(item.headers, &bytes)
            writeString("invocationId", item.invocationId, &bytes)
            writeName("item", &bytes)
            try payloads.value(item.item, &bytes)
        case .completion(let completion):
            writeHeaders(completion.headers, &bytes)
            writeString("invocationId", completion.invocationId, &bytes)
            switch completion.result {
            case .void: break
            case .value(let value):
                writeName("result", &bytes)
                try payloads.value(value, &bytes)
            case .error(let error): writeString("error", error, &bytes)
            }
        case .cancelInvocation(let cancel):
            writeHeaders(cancel.headers, &bytes)
            writeString("invocationId", cancel.invocationId, &bytes)
        case .ping:
            break
        case .close(let close):
            if let error = close.error { writeString("error", error, &bytes) }
            if close.allowReconnect { bytes.append(contentsOf: #","allowReconnect":true"#.utf8) }
        case .ack(let sequenceId), .sequence(let sequenceId):
            bytes.append(contentsOf: #","sequenceId":"#.utf8)
            JSONText.appendInteger(sequenceId, to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// Appends the bytes of `text`.
    static func append(_ text: StaticString, _ bytes: inout [UInt8]) {
        bytes.append(copying: unsafe Span(_unsafeStart: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends `,"name":` in one reservation.
    static func writeName(_ name: StaticString, _ bytes: inout [UInt8]) {
        let count = name.utf8CodeUnitCount
        bytes.append(addingCapacity: count + 4) { output in
            output.append(UInt8(ascii: ","))
            output.append(UInt8(ascii: "\""))
            for index in 0..<count { output.append(unsafe name.utf8Start[index]) }
            output.append(UInt8(ascii: "\""))
            output.append(UInt8(ascii: ":"))
        }
    }

    static func writeString(_ name: StaticString, _ value: String, _ bytes: inout [UInt8]) {
        writeName(name, &bytes)
        JSONText.appendString(value, to: &bytes)
    }

    /// Headers, sorted by name (a dictionary has no order of its own).
    static func writeHeaders(_ headers: HubMessageHeaders, _ bytes: inout [UInt8]) {
        guard !headers.isEmpty else { return }
        writeName("headers", &bytes)
        bytes.append(UInt8(ascii: "{"))
        var first = true
        for (key, value) in headers.sorted(by: { $0.key < $1.key }) {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            JSONText.appendString(key, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONText.appendString(value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    static func writeCall<Failure: Error>(
        _ target: String,
        _ arguments: EncodedArguments,
        _ streamIds: [String]?,
        _ payloads: PayloadWriter<Failure>,
        _ bytes: inout [UInt8]
    ) throws(Failure) {
        writeString("target", target, &bytes)
        writeName("arguments", &bytes)
        try payloads.arguments(arguments, &bytes)
        if let streamIds {
            writeName("streamIds", &bytes)
            bytes.append(UInt8(ascii: "["))
            for (index, id) in streamIds.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONText.appendString(id, to: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        }
    }
}
