@_spi(TetherInternal) import TetherCore
import TetherJSON
@_spi(TetherInternal) import TetherText

/// Parsing one JSON record (the bytes between separators) into a hub message.
enum JSONHubRecord {
    /// Everything a record may carry; which fields are required depends on `type`.
    struct Fields {
        var type: Int?
        var headers = HubMessageHeaders()
        var invocationId: String?
        var target: String?
        var arguments: EncodedArguments?
        var streamIds: [String]?
        var item: Range<Int>?
        var result: Range<Int>?
        var error: String?
        var allowReconnect = false
        var sequenceId: Int64?
        /// A `protocol` property was seen (a handshake request, not a hub message).
        var sawProtocol = false
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
        targets: inout StringInterner,
        binds: Bool = false,
        offer: MessagePackHubRecord.Offer = { _, _ in }
    ) throws(HubProtocolError) -> HubMessage? {
        var scanner = JSONScanner(bytes, range: record, maximumDepth: maximumDepth)
        let fields = try readObject(&scanner, maximumDepth: maximumDepth, targets: &targets)
        guard scanner.peek() == nil else { throw .errorReadingJSON }
        return try message(from: fields, bytes, binds: binds, offer: offer)
    }

    /// The record at `bytes[start...]` if it is all there and valid: its message (nil for an
    /// unknown type) and the offset of the separator that ends it. Nil for anything else (the
    /// record is cut short, invalid, or followed by something other than whitespace and the
    /// separator): the caller then finds the separator first and parses the record within it,
    /// which gives the error. A valid record parses the same either way, because its object
    /// ends before the separator (JSON text cannot contain 0x1E raw: it is a control character).
    /// The payload of the message is offered to `offer` (when `binds`) only once the record is
    /// known to be whole and valid, so that a binder sees each message once.
    static func parseComplete(
        _ bytes: [UInt8],
        from start: Int,
        maximumDepth: Int,
        targets: inout StringInterner,
        maximumMessageSize: Int = .max,
        binds: Bool = false,
        offer: MessagePackHubRecord.Offer = { _, _ in }
    ) -> (message: HubMessage?, separator: Int)? {
        var fields = Fields()
        let after: Int
        if let next = readCanonicalObject(
            bytes,
            from: start,
            end: bytes.count,
            maximumDepth: maximumDepth,
            targets: &targets,
            into: &fields
        ) {
            after = next
        } else {
            var scanner = JSONScanner(bytes, range: start..<bytes.count, maximumDepth: maximumDepth)
            guard let read = try? readObject(&scanner, maximumDepth: maximumDepth, targets: &targets) else {
                return nil
            }
            fields = read
            after = scanner.position
        }
        let separator = JSONScanner.skipWhitespace(bytes.backDeployedSpan, after, bytes.count)
        // (A record over the size limit is left to the caller's search, which fails it, before
        // its payload is offered.)
        guard separator < bytes.count, bytes[separator] == JSONHubProtocol.recordSeparator,
            separator - start <= maximumMessageSize
        else { return nil }
        // (`consume`: the fields are moved into the message, not copied.)
        guard let message = try? message(from: consume fields, bytes, binds: binds, offer: offer) else { return nil }
        return (message, separator)
    }

    /// The record at `bytes[start..<end]` read the short way when it is written as the hub
    /// protocol's writers write records (ASP.NET Core's and this package's): no whitespace,
    /// property names without escapes, a one-digit type, ids and targets without escapes or
    /// control characters (an id ASCII too), and only the properties of invocations, stream
    /// invocations, stream items, completions and pings. Its fields go into `fields` (a fresh
    /// `Fields`), and the offset after its closing brace is returned; nil for any other record
    /// (`fields` then holds whatever was read), which `readObject` then reads from the start, so
    /// that every other form and every error is the general reader's. Values are validated by
    /// the same skip as there; the fields are those `readObject` gives (the tests compare the two).
    static func readCanonicalObject(
        _ bytes: [UInt8],
        from start: Int,
        end: Int,
        maximumDepth: Int,
        targets: inout StringInterner,
        into fields: inout Fields
    ) -> Int? {
        let span = bytes.backDeployedSpan
        guard start < end, end <= bytes.count, bytes[start] == UInt8(ascii: "{") else { return nil }
        var position = start + 1
        /// The offset of the closing quote of the string at `position` if it has no escapes and
        /// no control characters, and whether it is ASCII.
        func plainString() -> (close: Int, isASCII: Bool)? {
            guard position < end, bytes[position] == UInt8(ascii: "\"") else { return nil }
            let run = JSONTextScanning.scanJSONText(in: span, from: position + 1, to: end)
            guard !run.hasControlCharacters, run.end < end, bytes[run.end] == UInt8(ascii: "\"") else { return nil }
            return (run.end, !run.hasNonASCII)
        }
        /// The end of the (validated) value at `position`.
        func value() -> Int? {
            try? JSONScanner.validatingSkip(span, position, end, maximumDepth: maximumDepth)
        }
        while true {
            guard let (property, length) = knownProperty(bytes, position, end) else { return nil }
            position += length
            guard position < end else { return nil }
            switch property {
            case .type:
                let digit = bytes[position] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                fields.type = Int(digit)
                position += 1
            case .invocationId:
                guard let (close, isASCII) = plainString(), isASCII else { return nil }
                fields.invocationId = UTF8Validation.string(
                    validated: span.extracting((position + 1)..<close),
                    isASCII: true
                )
                position = close + 1
            case .target:
                guard let (close, _) = plainString(),
                    let target = targets.intern(validating: span.extracting((position + 1)..<close))
                else { return nil }
                fields.target = target
                position = close + 1
            case .arguments:
                guard bytes[position] == UInt8(ascii: "[") else { return nil }
                let open = position
                position += 1
                var count = 0
                if position < end && bytes[position] == UInt8(ascii: "]") {
                    position += 1
                } else {
                    while true {
                        guard let next = value(), next < end else { return nil }
                        count += 1
                        position = next + 1
                        if bytes[next] == UInt8(ascii: ",") { continue }
                        guard bytes[next] == UInt8(ascii: "]") else { return nil }
                        break
                    }
                }
                fields.arguments = EncodedArguments(
                    encoding: .json,
                    count: count,
                    storage: bytes,
                    range: open..<position
                )
            case .item, .result:
                // (No whitespace first: the general reader's range starts after it.)
                guard bytes[position] > 0x20, let next = value() else { return nil }
                if property == .item { fields.item = position..<next } else { fields.result = position..<next }
                position = next
            case .headers, .streamIds, .error, .allowReconnect, .sequenceId, .handshakeProtocol, .other:
                return nil
            }
            guard position < end else { return nil }
            if bytes[position] == UInt8(ascii: ",") {
                position += 1
                continue
            }
            guard bytes[position] == UInt8(ascii: "}") else { return nil }
            return position + 1
        }
    }

    /// Checks that the top-level token is an object, as System.Text.Json reports it.
    @inline(__always)
    static func expectObject(_ scanner: inout JSONScanner) throws(HubProtocolError) {
        if scanner.peek() == UInt8(ascii: "{") { return }  // every record of a hub
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
            guard scanner.peek() == UInt8(ascii: "\"") else { throw .errorReadingJSON }
            let property: Property
            if let (known, length) = knownProperty(bytes, scanner.position, scanner.end) {
                // Written as the writers write it (`"name":`): no string scan, no key compare.
                property = known
                scanner.position += length
            } else {
                guard let key = try? scanner.readString(), scanner.consume(UInt8(ascii: ":")) else {
                    throw .errorReadingJSON
                }
                property = Property(bytes, key)
            }
            guard let kind = scanner.peekKind() else { throw .errorReadingJSON }
            try readProperty(property, kind, &scanner, &fields, bytes, targets: &targets)
        } while scanner.consume(UInt8(ascii: ","))
        guard scanner.consume(UInt8(ascii: "}")) else { throw .errorReadingJSON }
        return fields
    }

    static func keyIs(_ bytes: [UInt8], _ key: JSONStringToken, _ name: StaticString) -> Bool {
        JSONScanner.stringEquals(bytes, key, unsafe Span(_unsafeStart: name.utf8Start, count: name.utf8CodeUnitCount))
    }

    /// The properties a record may carry.
    enum Property {
        case type, headers, invocationId, target, arguments, streamIds, item, result, error, allowReconnect
        case sequenceId, handshakeProtocol, other

        /// The property named by `key` (escapes decoded, as System.Text.Json compares names;
        /// unknown names are `other`).
        init(_ bytes: [UInt8], _ key: JSONStringToken) {
            let length = key.hasEscapes ? JSONScanner.string(bytes, key).utf8.count : key.contents.count
            self =
                switch length {
                case 4 where keyIs(bytes, key, "type"): .type
                case 7 where keyIs(bytes, key, "headers"): .headers
                case 12 where keyIs(bytes, key, "invocationId"): .invocationId
                case 6 where keyIs(bytes, key, "target"): .target
                case 9 where keyIs(bytes, key, "arguments"): .arguments
                case 9 where keyIs(bytes, key, "streamIds"): .streamIds
                case 4 where keyIs(bytes, key, "item"): .item
                case 6 where keyIs(bytes, key, "result"): .result
                case 5 where keyIs(bytes, key, "error"): .error
                case 14 where keyIs(bytes, key, "allowReconnect"): .allowReconnect
                case 10 where keyIs(bytes, key, "sequenceId"): .sequenceId
                case 8 where keyIs(bytes, key, "protocol"): .handshakeProtocol
                default: .other
                }
        }
    }

    /// The property whose key starts at `position` written exactly as the writers write it
    /// (`"name":`, no escapes, no whitespace before the colon), and that text's length; nil for
    /// anything else, which is then read the general way.
    @inline(__always)
    static func knownProperty(_ bytes: [UInt8], _ position: Int, _ end: Int) -> (Property, Int)? {
        guard position + 1 < end else { return nil }
        @inline(__always)
        func matches(_ text: StaticString) -> Bool {
            text.utf8CodeUnitCount <= end - position
                && KeySet.equalBytes(
                    bytes.backDeployedSpan,
                    at: position,
                    unsafe Span(_unsafeStart: text.utf8Start, count: text.utf8CodeUnitCount)
                )
        }
        switch bytes[position + 1] {
        case UInt8(ascii: "t"):
            if matches(#""type":"#) { return (.type, 7) }
            if matches(#""target":"#) { return (.target, 9) }
        case UInt8(ascii: "i"):
            if matches(#""invocationId":"#) { return (.invocationId, 15) }
            if matches(#""item":"#) { return (.item, 7) }
        case UInt8(ascii: "a"):
            if matches(#""arguments":"#) { return (.arguments, 12) }
        case UInt8(ascii: "r"):
            if matches(#""result":"#) { return (.result, 9) }
        case UInt8(ascii: "e"):
            if matches(#""error":"#) { return (.error, 8) }
        case UInt8(ascii: "h"):
            if matches(#""headers":"#) { return (.headers, 10) }
        default: break
        }
        return nil
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
        _ property: Property,
        _ kind: JSONTokenKind,
        _ scanner: inout JSONScanner,
        _ fields: inout Fields,
        _ bytes: [UInt8],
        targets: inout StringInterner
    ) throws(HubProtocolError) {
        switch property {
        case .type:
            guard kind == .number else { throw expected("type", "Number") }
            // One digit and the comma or brace after it: every type of the protocol.
            let position = scanner.position
            if position + 1 < scanner.end, case let digit = bytes[position] &- UInt8(ascii: "0"), digit < 10,
                bytes[position + 1] == UInt8(ascii: ",") || bytes[position + 1] == UInt8(ascii: "}")
            {
                scanner.position = position + 1
                fields.type = Int(digit)
                return
            }
            let number = try scan { () throws(JSONScanner.Failure) in try scanner.readNumber() }
            guard number.isInteger, let value = JSONScanner.int64(bytes, number.range), let type = Int(exactly: value)
            else {
                throw expected("type", "Number")
            }
            fields.type = type
        case .headers:
            fields.headers = try readHeaders(&scanner, kind)
        case .invocationId:
            fields.invocationId = try readStringOrNull(&scanner, kind, "invocationId").map {
                JSONScanner.string(bytes, $0)
            }
        case .target:
            if let token = try readStringOrNull(&scanner, kind, "target") {
                fields.target =
                    token.hasEscapes
                    ? JSONScanner.string(bytes, token)
                    : targets.intern(bytes.backDeployedSpan.extracting(token.contents))
            } else {
                fields.target = nil
            }
        case .arguments:
            guard kind == .array else { throw expected("arguments", "Array") }
            let start = scanner.position
            let count = try scan { () throws(JSONScanner.Failure) in try scanner.skipArrayCountingElements() }
            fields.arguments = EncodedArguments(
                encoding: .json,
                count: count,
                storage: bytes,
                range: start..<scanner.position
            )
        case .streamIds:
            fields.streamIds = try readStreamIds(&scanner, kind)
        case .item:
            fields.item = try readRawValue(&scanner)
        case .result:
            fields.result = try readRawValue(&scanner)
        case .error:
            fields.error = try readStringOrNull(&scanner, kind, "error").map { JSONScanner.string(bytes, $0) }
        case .allowReconnect:
            switch kind {
            case .trueLiteral: fields.allowReconnect = true
            case .falseLiteral: fields.allowReconnect = false
            default: throw expected("allowReconnect", "Boolean")
            }
            try scan { () throws(JSONScanner.Failure) in try scanner.skipValue() }
        case .sequenceId:
            guard kind == .number else { throw expected("sequenceId", "Number") }
            let number = try scan { () throws(JSONScanner.Failure) in try scanner.readNumber() }
            guard number.isInteger, let value = JSONScanner.int64(bytes, number.range) else {
                throw expected("sequenceId", "Number")
            }
            fields.sequenceId = value
        case .handshakeProtocol:
            fields.sawProtocol = true
            try scan { () throws(JSONScanner.Failure) in try scanner.skipValue() }
        case .other:
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

    /// Applies the per-type rules of ASP.NET Core's `JsonHubProtocol.ParseMessage`; when `binds`,
    /// offers the payload of a valid message to `offer` (the record was validated: this is the
    /// binder's pass over it).
    static func message(
        from fields: consuming Fields,
        _ bytes: [UInt8],
        binds: Bool = false,
        offer: MessagePackHubRecord.Offer = { _, _ in }
    ) throws(HubProtocolError) -> HubMessage? {
        guard let type = fields.type else {
            // The official text; for a handshake request, also what to do about it. (`{}`, the
            // handshake response, keeps the bare text the conformance vectors require.)
            guard fields.sawProtocol else { throw missing("type") }
            throw .invalid(
                "Missing required property 'type'. This is a handshake request, not a hub message: parse it with HandshakeRequest.parse(_:) and feed the hub parser what follows it."
            )
        }
        switch type {
        case 1:
            guard let target = fields.target.take() else { throw missing("target") }
            guard let arguments = fields.arguments.take() else { throw missing("arguments") }
            let invocationId = fields.invocationId.take().flatMap { $0.isEmpty ? nil : $0 }
            if binds { offerArguments(arguments, of: target, to: offer) }
            // (The memberwise initializers: see `InvocationMessage`.)
            return .invocation(
                InvocationMessage(
                    target: target,
                    arguments: arguments,
                    invocationId: invocationId,
                    headers: fields.headers,
                    streamIds: fields.streamIds.take()
                )
            )
        case 2:
            guard let invocationId = fields.invocationId.take() else { throw missing("invocationId") }
            guard let item = fields.item.take() else { throw missing("item") }
            if binds {
                var payload = HubPayloadReader(value: value(bytes, item))
                offer(.item(invocationId: invocationId), &payload)
            }
            return .streamItem(
                StreamItemMessage(invocationId: invocationId, item: value(bytes, item), headers: fields.headers)
            )
        case 3:
            guard let invocationId = fields.invocationId.take() else { throw missing("invocationId") }
            let result: CompletionResult
            switch (fields.error.take(), fields.result) {
            case (.some, .some): throw .invalid("The 'error' and 'result' properties are mutually exclusive.")
            case (.some(let error), nil): result = .error(error)
            case (nil, .some(let range)):
                result = .value(value(bytes, range))
                if binds {
                    var payload = HubPayloadReader(value: value(bytes, range))
                    offer(.result(invocationId: invocationId), &payload)
                }
            case (nil, nil): result = .void
            }
            return .completion(CompletionMessage(invocationId: invocationId, result: result, headers: fields.headers))
        case 4:
            guard let invocationId = fields.invocationId.take() else { throw missing("invocationId") }
            guard let target = fields.target.take() else { throw missing("target") }
            guard let arguments = fields.arguments.take() else { throw missing("arguments") }
            if binds { offerArguments(arguments, of: target, to: offer) }
            return .streamInvocation(
                StreamInvocationMessage(
                    target: target,
                    arguments: arguments,
                    invocationId: invocationId,
                    headers: fields.headers,
                    streamIds: fields.streamIds.take()
                )
            )
        case 5:
            guard let invocationId = fields.invocationId.take() else { throw missing("invocationId") }
            return .cancelInvocation(CancelInvocationMessage(invocationId: invocationId, headers: fields.headers))
        case 6:
            return .ping
        case 7:
            return .close(CloseMessage(error: fields.error.take(), allowReconnect: fields.allowReconnect))
        case 8:
            guard let sequenceId = fields.sequenceId.take() else { throw missing("sequenceId") }
            return .ack(sequenceId: sequenceId)
        case 9:
            guard let sequenceId = fields.sequenceId.take() else { throw missing("sequenceId") }
            return .sequence(sequenceId: sequenceId)
        default:
            return nil
        }
    }

    /// Offers validated arguments to a binder.
    static func offerArguments(_ arguments: EncodedArguments, of target: String, to offer: MessagePackHubRecord.Offer) {
        var payload = HubPayloadReader(arguments: arguments)
        offer(.arguments(target: target), &payload)
    }
}
