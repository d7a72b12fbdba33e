import TetherCore

/// The `json` hub protocol: each message is one JSON object followed by the record separator
/// 0x1E (HubProtocol.md "JSON Encoding").
///
/// Decoding follows ASP.NET Core's `JsonHubProtocol`: property order is free, unknown properties
/// and unknown message types are ignored, whitespace is allowed, and invalid input fails with the
/// same texts (for example "Missing required property 'arguments'."). Encoding writes the
/// canonical compact form in the C# property order.
public struct JSONHubProtocol: HubProtocol {
    /// The record separator that ends every JSON record.
    public static let recordSeparator: UInt8 = 0x1E

    /// The largest message accepted, in bytes (default 1 MiB); larger ones are an error.
    public var maximumMessageSize: Int
    /// The deepest nesting of arrays and objects accepted inside a message (default 64).
    public var maximumDepth: Int

    /// Creates the protocol with the given limits.
    public init(
        maximumMessageSize: Int = HubProtocolLimits.defaultMaximumMessageSize,
        maximumDepth: Int = HubProtocolLimits.defaultMaximumDepth
    ) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumDepth = maximumDepth
    }

    public var name: String { "json" }
    public var version: Int { 2 }
    public var transferFormat: TransferFormat { .text }
    public var valueEncoding: ValueEncoding { .json }

    public func makeParser() -> JSONHubMessageParser {
        JSONHubMessageParser(maximumMessageSize: maximumMessageSize, maximumDepth: maximumDepth)
    }

    public func write(_ message: HubMessage, into bytes: inout [UInt8]) {
        JSONHubMessageWriter.write(message, into: &bytes)
        bytes.append(Self.recordSeparator)
    }
}

/// Incremental decoder of the JSON hub protocol: splits the stream at 0x1E (scanning each byte
/// once) and parses each record.
public struct JSONHubMessageParser: HubMessageParser {
    var buffer = ReceiveBuffer()
    /// How far past `buffer.start` the search for the separator has already looked.
    var scanned = 0
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
        let scannedAbsolute = buffer.start + scanned
        let oldStart = buffer.start
        buffer.append(bytes)
        scanned = scannedAbsolute - oldStart
    }

    public mutating func next() throws(HubProtocolError) -> HubMessage? {
        if let failure { throw failure }
        while true {
            guard let end = findSeparator() else {
                if buffer.pendingCount > maximumMessageSize { throw fail(.tooLarge(maximumMessageSize)) }
                return nil
            }
            let record = buffer.start..<end
            buffer.start = end + 1
            scanned = 0
            guard record.count <= maximumMessageSize else { throw fail(.tooLarge(maximumMessageSize)) }
            do {
                if let message = try JSONHubRecord.parse(
                    buffer.storage,
                    record,
                    maximumDepth: maximumDepth,
                    targets: &targets
                ) {
                    return message
                }
            } catch {
                throw fail(error)
            }
        }
    }

    private mutating func fail(_ error: HubProtocolError) -> HubProtocolError {
        failure = error
        buffer = ReceiveBuffer()
        return error
    }

    /// The offset of the next 0x1E, continuing where the last search stopped.
    private mutating func findSeparator() -> Int? {
        let storage = buffer.storage
        let end = storage.count
        if let index = ByteScanning.firstIndex(
            of: JSONHubProtocol.recordSeparator,
            in: storage.span,
            from: buffer.start + scanned,
            to: end
        ) {
            return index
        }
        scanned = end - buffer.start
        return nil
    }
}

extension HubProtocolError {
    static func tooLarge(_ limit: Int) -> HubProtocolError {
        HubProtocolError(.messageTooLarge, "The maximum message size of \(limit)B was exceeded.")
    }
}

/// Parsing one JSON record (the bytes between separators) into a hub message.
enum JSONHubRecord {
    /// Everything a record may carry; which fields are required depends on `type`.
    struct Fields {
        var type: Int?
        var headers: HubMessageHeaders = [:]
        var invocationId: String?
        var target: String?
        var arguments: EncodedArguments?
        var streamIds: [String]?
        var item: Range<Int>?
        var result: Range<Int>?
        var error: String?
        var allowReconnect = false
        var sequenceId: Int64?
    }

    static func missing(_ name: String) -> HubProtocolError { .invalid("Missing required property '\(name)'.") }
    static func expected(_ name: String, _ type: String) -> HubProtocolError {
        .invalid("Expected '\(name)' to be of type \(type).")
    }

    /// The message in `bytes[record]`, or nil for an unknown message type.
    static func parse(
        _ bytes: [UInt8],
        _ record: Range<Int>,
        maximumDepth: Int,
        targets: inout StringInterner
    ) throws(HubProtocolError) -> HubMessage? {
        var scanner = JSONScanner(bytes, range: record, maximumDepth: maximumDepth)
        let fields = try readObject(&scanner, maximumDepth: maximumDepth, targets: &targets)
        guard scanner.peek() == nil else { throw .errorReadingJSON }
        return try message(from: fields, bytes)
    }

    /// Checks that the top-level token is an object, as System.Text.Json reports it.
    static func expectObject(_ scanner: inout JSONScanner) throws(HubProtocolError) {
        guard let kind = scanner.peekKind(), scanner.firstTokenIsValid() else { throw .errorReadingJSON }
        guard kind == .object else {
            throw .invalid("Unexpected JSON Token Type '\(kind.rawValue)'. Expected a JSON Object.")
        }
    }

    static func readObject(
        _ scanner: inout JSONScanner,
        maximumDepth: Int,
        targets: inout StringInterner
    ) throws(HubProtocolError) -> Fields {
        try expectObject(&scanner)
        var fields = Fields()
        scanner.position += 1
        if scanner.consume(UInt8(ascii: "}")) { return fields }
        let bytes = scanner.bytes
        repeat {
            guard scanner.peek() == UInt8(ascii: "\""), let key = try? scanner.readString(),
                scanner.consume(UInt8(ascii: ":")), let kind = scanner.peekKind()
            else { throw .errorReadingJSON }
            try readProperty(key, kind, &scanner, &fields, bytes, targets: &targets)
        } while scanner.consume(UInt8(ascii: ","))
        guard scanner.consume(UInt8(ascii: "}")) else { throw .errorReadingJSON }
        return fields
    }

    static func keyIs(_ bytes: [UInt8], _ key: JSONStringToken, _ name: StaticString) -> Bool {
        JSONScanner.stringEquals(bytes, key, unsafe Span(_unsafeStart: name.utf8Start, count: name.utf8CodeUnitCount))
    }

    static func readStringOrNull(
        _ scanner: inout JSONScanner,
        _ kind: JSONTokenKind,
        _ name: String
    ) throws(HubProtocolError) -> JSONStringToken? {
        switch kind {
        case .null:
            try scan { () throws(JSONScanner.Failure) in try scanner.readLiteral("null") }
            return nil
        case .string:
            return try scan { () throws(JSONScanner.Failure) in try scanner.readString() }
        default:
            throw expected(name, "String")
        }
    }

    @inline(__always)
    static func scan<T>(_ body: () throws(JSONScanner.Failure) -> T) throws(HubProtocolError) -> T {
        do {
            return try body()
        } catch {
            throw .errorReadingJSON
        }
    }

    static func readProperty(
        _ key: JSONStringToken,
        _ kind: JSONTokenKind,
        _ scanner: inout JSONScanner,
        _ fields: inout Fields,
        _ bytes: [UInt8],
        targets: inout StringInterner
    ) throws(HubProtocolError) {
        switch key.contents.count {
        case 4 where keyIs(bytes, key, "type"):
            guard kind == .number else { throw expected("type", "Number") }
            let number = try scan { () throws(JSONScanner.Failure) in try scanner.readNumber() }
            guard number.isInteger, let value = JSONScanner.int64(bytes, number.range), let type = Int(exactly: value)
            else {
                throw expected("type", "Number")
            }
            fields.type = type
        case 7 where keyIs(bytes, key, "headers"):
            fields.headers = try readHeaders(&scanner, kind)
        case 12 where keyIs(bytes, key, "invocationId"):
            fields.invocationId = try readStringOrNull(&scanner, kind, "invocationId").map {
                JSONScanner.string(bytes, $0)
            }
        case 6 where keyIs(bytes, key, "target"):
            if let token = try readStringOrNull(&scanner, kind, "target") {
                fields.target =
                    token.hasEscapes
                    ? JSONScanner.string(bytes, token) : targets.intern(bytes.span.extracting(token.contents))
            } else {
                fields.target = nil
            }
        case 9 where keyIs(bytes, key, "arguments"):
            guard kind == .array else { throw expected("arguments", "Array") }
            let start = scanner.position
            let count = try scan { () throws(JSONScanner.Failure) in try scanner.skipArrayCountingElements() }
            fields.arguments = EncodedArguments(
                encoding: .json,
                count: count,
                storage: bytes,
                range: start..<scanner.position
            )
        case 9 where keyIs(bytes, key, "streamIds"):
            fields.streamIds = try readStreamIds(&scanner, kind)
        case 4 where keyIs(bytes, key, "item"):
            fields.item = try readRawValue(&scanner)
        case 6 where keyIs(bytes, key, "result"):
            fields.result = try readRawValue(&scanner)
        case 5 where keyIs(bytes, key, "error"):
            fields.error = try readStringOrNull(&scanner, kind, "error").map { JSONScanner.string(bytes, $0) }
        case 14 where keyIs(bytes, key, "allowReconnect"):
            switch kind {
            case .trueLiteral: fields.allowReconnect = true
            case .falseLiteral: fields.allowReconnect = false
            default: throw expected("allowReconnect", "Boolean")
            }
            try scan { () throws(JSONScanner.Failure) in try scanner.skipValue() }
        case 10 where keyIs(bytes, key, "sequenceId"):
            guard kind == .number else { throw expected("sequenceId", "Number") }
            let number = try scan { () throws(JSONScanner.Failure) in try scanner.readNumber() }
            guard number.isInteger, let value = JSONScanner.int64(bytes, number.range) else {
                throw expected("sequenceId", "Number")
            }
            fields.sequenceId = value
        default:
            try scan { () throws(JSONScanner.Failure) in try scanner.skipValue() }
        }
    }

    static func readRawValue(_ scanner: inout JSONScanner) throws(HubProtocolError) -> Range<Int> {
        let start = scanner.position
        try scan { () throws(JSONScanner.Failure) in try scanner.skipValue() }
        return start..<scanner.position
    }

    static func readHeaders(
        _ scanner: inout JSONScanner,
        _ kind: JSONTokenKind
    ) throws(HubProtocolError) -> HubMessageHeaders {
        guard kind == .object else { throw expected("headers", "Object") }
        let bytes = scanner.bytes
        scanner.position += 1
        var headers: HubMessageHeaders = [:]
        if scanner.consume(UInt8(ascii: "}")) { return headers }
        repeat {
            guard scanner.peek() == UInt8(ascii: "\""), let key = try? scanner.readString(),
                scanner.consume(UInt8(ascii: ":")), let valueKind = scanner.peekKind()
            else { throw .errorReadingJSON }
            let name = JSONScanner.string(bytes, key)
            guard valueKind == .string else { throw .invalid("Expected header '\(name)' to be of type String.") }
            let value = try scan { () throws(JSONScanner.Failure) in try scanner.readString() }
            headers[name] = JSONScanner.string(bytes, value)
        } while scanner.consume(UInt8(ascii: ","))
        guard scanner.consume(UInt8(ascii: "}")) else { throw .errorReadingJSON }
        return headers
    }

    static func readStreamIds(_ scanner: inout JSONScanner, _ kind: JSONTokenKind) throws(HubProtocolError) -> [String]
    {
        guard kind == .array else { throw expected("streamIds", "Array") }
        let bytes = scanner.bytes
        scanner.position += 1
        var ids: [String] = []
        if scanner.consume(UInt8(ascii: "]")) { return ids }
        repeat {
            guard let itemKind = scanner.peekKind() else { throw .errorReadingJSON }
            guard itemKind == .string else { throw .invalid("Expected 'streamIds' items to be of type String.") }
            let token = try scan { () throws(JSONScanner.Failure) in try scanner.readString() }
            ids.append(JSONScanner.string(bytes, token))
        } while scanner.consume(UInt8(ascii: ","))
        guard scanner.consume(UInt8(ascii: "]")) else { throw .errorReadingJSON }
        return ids
    }

    static func value(_ bytes: [UInt8], _ range: Range<Int>) -> EncodedValue {
        EncodedValue(encoding: .json, storage: bytes, range: range)
    }

    /// Applies the per-type rules of ASP.NET Core's `JsonHubProtocol.ParseMessage`.
    static func message(from fields: Fields, _ bytes: [UInt8]) throws(HubProtocolError) -> HubMessage? {
        guard let type = fields.type else { throw missing("type") }
        switch type {
        case 1:
            guard let target = fields.target else { throw missing("target") }
            guard let arguments = fields.arguments else { throw missing("arguments") }
            let invocationId = fields.invocationId.flatMap { $0.isEmpty ? nil : $0 }
            return .invocation(
                InvocationMessage(
                    headers: fields.headers,
                    invocationId: invocationId,
                    target: target,
                    arguments: arguments,
                    streamIds: fields.streamIds
                )
            )
        case 2:
            guard let invocationId = fields.invocationId else { throw missing("invocationId") }
            guard let item = fields.item else { throw missing("item") }
            return .streamItem(
                StreamItemMessage(headers: fields.headers, invocationId: invocationId, item: value(bytes, item))
            )
        case 3:
            guard let invocationId = fields.invocationId else { throw missing("invocationId") }
            let result: CompletionResult
            switch (fields.error, fields.result) {
            case (.some, .some): throw .invalid("The 'error' and 'result' properties are mutually exclusive.")
            case (.some(let error), nil): result = .error(error)
            case (nil, .some(let range)): result = .value(value(bytes, range))
            case (nil, nil): result = .void
            }
            return .completion(CompletionMessage(headers: fields.headers, invocationId: invocationId, result: result))
        case 4:
            guard let invocationId = fields.invocationId else { throw missing("invocationId") }
            guard let target = fields.target else { throw missing("target") }
            guard let arguments = fields.arguments else { throw missing("arguments") }
            return .streamInvocation(
                StreamInvocationMessage(
                    headers: fields.headers,
                    invocationId: invocationId,
                    target: target,
                    arguments: arguments,
                    streamIds: fields.streamIds
                )
            )
        case 5:
            guard let invocationId = fields.invocationId else { throw missing("invocationId") }
            return .cancelInvocation(CancelInvocationMessage(headers: fields.headers, invocationId: invocationId))
        case 6:
            return .ping
        case 7:
            return .close(CloseMessage(error: fields.error, allowReconnect: fields.allowReconnect))
        case 8:
            guard let sequenceId = fields.sequenceId else { throw missing("sequenceId") }
            return .ack(sequenceId: sequenceId)
        case 9:
            guard let sequenceId = fields.sequenceId else { throw missing("sequenceId") }
            return .sequence(sequenceId: sequenceId)
        default:
            return nil
        }
    }
}

/// Writing hub messages as compact JSON in the C# `JsonHubProtocol` property order. Payload
/// values are written by a `PayloadWriter`: the hub protocol copies JSON payloads as they are,
/// `CanonicalJSON` converts any payload to compact JSON.
enum JSONHubMessageWriter {
    /// How payload values reach the output.
    struct PayloadWriter: Sendable {
        var value: @Sendable (EncodedValue, inout [UInt8]) -> Void
        var arguments: @Sendable (EncodedArguments, inout [UInt8]) -> Void

        /// Copies JSON payloads verbatim (the hub protocol's writer).
        static let verbatim = PayloadWriter(
            value: { value, bytes in
                precondition(value.encoding == .json, "a MessagePack value cannot be written by the JSON hub protocol")
                bytes.append(contentsOf: value.bytes)
            },
            arguments: { arguments, bytes in
                precondition(
                    arguments.encoding == .json,
                    "MessagePack arguments cannot be written by the JSON hub protocol"
                )
                bytes.append(contentsOf: arguments.bytes)
            }
        )
    }

    static func write(_ message: HubMessage, into bytes: inout [UInt8], payloads: PayloadWriter = .verbatim) {
        bytes.append(contentsOf: #"{"type":"#.utf8)
        JSONText.appendInteger(Int64(message.messageType), to: &bytes)
        switch message {
        case .invocation(let invocation):
            writeHeaders(invocation.headers, &bytes)
            if let id = invocation.invocationId { writeString("invocationId", id, &bytes) }
            writeCall(invocation.target, invocation.arguments, invocation.streamIds, payloads, &bytes)
        case .streamInvocation(let invocation):
            writeHeaders(invocation.headers, &bytes)
            writeString("invocationId", invocation.invocationId, &bytes)
            writeCall(invocation.target, invocation.arguments, invocation.streamIds, payloads, &bytes)
        case .streamItem(let item):
            writeHeaders(item.headers, &bytes)
            writeString("invocationId", item.invocationId, &bytes)
            writeName("item", &bytes)
            payloads.value(item.item, &bytes)
        case .completion(let completion):
            writeHeaders(completion.headers, &bytes)
            writeString("invocationId", completion.invocationId, &bytes)
            switch completion.result {
            case .void: break
            case .value(let value):
                writeName("result", &bytes)
                payloads.value(value, &bytes)
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

    static func writeName(_ name: StaticString, _ bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: ","))
        bytes.append(UInt8(ascii: "\""))
        bytes.append(copying: unsafe Span(_unsafeStart: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
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

    static func writeCall(
        _ target: String,
        _ arguments: EncodedArguments,
        _ streamIds: [String]?,
        _ payloads: PayloadWriter,
        _ bytes: inout [UInt8]
    ) {
        writeString("target", target, &bytes)
        writeName("arguments", &bytes)
        payloads.arguments(arguments, &bytes)
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
