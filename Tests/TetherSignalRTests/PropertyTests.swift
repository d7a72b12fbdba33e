import Testing
import TetherCore
import TetherMessagePack
import TetherTestSupport

@testable import TetherSignalR

/// Seeded property tests: random messages round-trip through each protocol, and every chunking
/// of a random stream decodes to the same messages.
struct HubProtocolPropertyTests {
    static func randomString(_ rng: inout SeededRandomNumberGenerator) -> String {
        let pool: [String] = ["a", "Z", "0", " ", "\"", "\\", "\n", "\u{1}", "é", "日本", "😀", "\u{1E}", "/", "<"]
        return (0..<Int.random(in: 0...12, using: &rng)).map { _ in pool.randomElement(using: &rng)! }.joined()
    }

    /// A random payload that both JSON and MessagePack can carry.
    static func randomPayload(_ rng: inout SeededRandomNumberGenerator, depth: Int = 0) -> MessagePackValue {
        switch Int.random(in: 0..<(depth > 2 ? 6 : 8), using: &rng) {
        case 0: return .nil
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: Int64.min...(-1), using: &rng))
        case 3: return .uint(UInt64.random(in: 0...UInt64.max, using: &rng) >> UInt64.random(in: 0...63, using: &rng))
        case 4: return .double(Double.random(in: -1e6...1e6, using: &rng))
        case 5: return .string(randomString(&rng))
        case 6:
            return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in randomPayload(&rng, depth: depth + 1) })
        default:
            return .map(
                (0..<Int.random(in: 0...4, using: &rng)).map { index in
                    MessagePackPair(.string("k\(index)" + randomString(&rng)), randomPayload(&rng, depth: depth + 1))
                }
            )
        }
    }

    static func encode(_ payload: MessagePackValue, _ encoding: ValueEncoding) throws -> EncodedValue {
        switch encoding {
        case .json:
            var text: [UInt8] = []
            try CanonicalJSON.appendMessagePack(payload, to: &text)
            return try EncodedValue(json: text)
        case .messagePack:
            var writer = MessagePackWriter()
            writer.write(payload)
            return try EncodedValue(messagePack: writer.bytes)
        }
    }

    static func randomMessage(_ rng: inout SeededRandomNumberGenerator, _ encoding: ValueEncoding) throws -> HubMessage
    {
        func headers() -> HubMessageHeaders {
            Bool.random(using: &rng) ? [:] : ["h" + randomString(&rng): "v" + randomString(&rng)]
        }
        func id() -> String { "id" + randomString(&rng) }
        func arguments() throws -> EncodedArguments {
            EncodedArguments(
                encoding: encoding,
                values: try (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                    try encode(randomPayload(&rng), encoding)
                }
            )
        }
        func streamIds() -> [String]? { Bool.random(using: &rng) ? nil : ["s" + randomString(&rng), "t"] }
        switch Int.random(in: 1...9, using: &rng) {
        case 1:
            return .invocation(
                InvocationMessage(
                    headers: headers(),
                    invocationId: Bool.random(using: &rng) ? id() : nil,
                    target: "T" + randomString(&rng),
                    arguments: try arguments(),
                    streamIds: streamIds()
                )
            )
        case 2:
            return .streamItem(
                StreamItemMessage(
                    headers: headers(),
                    invocationId: id(),
                    item: try encode(randomPayload(&rng), encoding)
                )
            )
        case 3:
            let results: [CompletionResult] = [
                .void, .error(randomString(&rng)), .value(try encode(randomPayload(&rng), encoding)),
            ]
            return .completion(
                CompletionMessage(headers: headers(), invocationId: id(), result: results.randomElement(using: &rng)!)
            )
        case 4:
            return .streamInvocation(
                StreamInvocationMessage(
                    headers: headers(),
                    invocationId: id(),
                    target: "S" + randomString(&rng),
                    arguments: try arguments(),
                    streamIds: streamIds()
                )
            )
        case 5: return .cancelInvocation(CancelInvocationMessage(headers: headers(), invocationId: id()))
        case 6: return .ping
        case 7:
            return .close(
                CloseMessage(
                    error: Bool.random(using: &rng) ? randomString(&rng) : nil,
                    allowReconnect: Bool.random(using: &rng)
                )
            )
        case 8: return .ack(sequenceId: Int64.random(in: 0...Int64.max, using: &rng))
        default: return .sequence(sequenceId: Int64.random(in: 0...Int64.max, using: &rng))
        }
    }

    static func normalizedForMessagePack(_ message: HubMessage) -> HubMessage {
        // MessagePack has no way to say "empty streamIds" apart from "none".
        switch message {
        case .invocation(var invocation):
            if invocation.streamIds?.isEmpty == true { invocation.streamIds = nil }
            return .invocation(invocation)
        default: return message
        }
    }

    func check<P: HubProtocol>(_ hubProtocol: P, seed: UInt64) throws {
        var rng = SeededRandomNumberGenerator(seed: seed)
        let messages = try (0..<200).map { _ in try Self.randomMessage(&rng, hubProtocol.valueEncoding) }
        var stream: [UInt8] = []
        for message in messages { hubProtocol.write(message, into: &stream) }
        for feeding in Feeding.allCases {
            let result = decodeAll(hubProtocol.makeParser(), stream, feeding)
            #expect(result.error == nil, "\(feeding)")
            #expect(!result.partial)
            #expect(result.messages == messages.map(Self.normalizedForMessagePack), "\(feeding)")
        }
        for chunkSeed in 1...5 as ClosedRange<UInt64> {
            var parser = hubProtocol.makeParser()
            var decoded: [HubMessage] = []
            for chunk in Feeding.randomChunks.chunks(stream, seed: chunkSeed) {
                let bytes = Array(chunk)
                parser.append(bytes.backDeployedSpan)
                while let message = try parser.next() { decoded.append(message) }
            }
            #expect(decoded == messages)
            // Re-encoding what was decoded reproduces the stream byte for byte.
            var again: [UInt8] = []
            for message in decoded { hubProtocol.write(message, into: &again) }
            #expect(again == stream)
        }
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func jsonRoundTrips(_ seed: UInt64) throws {
        try check(JSONHubProtocol(), seed: seed)
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func messagePackRoundTrips(_ seed: UInt64) throws {
        try check(MessagePackHubProtocol(), seed: seed)
    }
}

/// Limits, failure handling and memory bounds of the parsers.
struct HubProtocolLimitTests {
    @Test func jsonMessageSizeLimitIsEnforcedWhileBuffering() throws {
        var parser = JSONHubProtocol(maximumMessageSize: 100).makeParser()
        let chunk = [UInt8](repeating: UInt8(ascii: " "), count: 64)
        parser.append(chunk.backDeployedSpan)
        #expect(try parser.next() == nil)
        parser.append(chunk.backDeployedSpan)
        #expect(throws: HubProtocolError(.messageTooLarge, "The maximum message size of 100B was exceeded.")) {
            try parser.next()
        }
        // The parser stays failed and drops what it had buffered.
        parser.append(Array(#"{"type":6}"#.utf8 + [0x1E]).backDeployedSpan)
        expectThrows(\HubProtocolError.kind, .messageTooLarge) { try parser.next() }
        #expect(!parser.hasPartialMessage)
    }

    /// Records that are complete in the buffer are parsed before their separator is searched
    /// for (the separator must then follow the object); anything else takes the search first.
    /// Both routes must give the same messages and the same errors: fed whole (records parsed
    /// first) and byte by byte (separators found first), and after a valid record (so that the
    /// record under test starts in the middle of the buffer).
    @Test func recordsParsedBeforeTheirSeparatorIsFoundGiveTheSameResults() {
        let records: [String] = [
            #"{"type":6}"#, #"{"type":6}   "#, "{\"type\":6}\r\n\t ", #" {"type":6}"#, #"{"type":6} x"#,
            #"{"type":6}{"type":6}"#, #"{"type":6}]"#, #"{"type":6"#, #"{"type":99}"#, #"{"type":1}"#,
            #"{"type":1,"target":"T","arguments":[1,"a"]} "#, #"{"type":1,"target":"T","arguments":[1,"a\u0041"]}"#,
            #"{"type":1,"target":"T","arguments":[1,"a]}"#, "", " ", #"[]"#, #"{}"#, #"{"type":6} "# + "\u{1}",
        ]
        for record in records {
            for before in ["", #"{"type":6}"# + "\u{1E}"] {
                let bytes = Array((before + record + "\u{1E}" + #"{"type":6}"# + "\u{1E}").utf8)
                let whole = decodeAll(JSONHubProtocol().makeParser(), bytes, .whole)
                let split = decodeAll(JSONHubProtocol().makeParser(), bytes, .byteByByte)
                #expect(whole.messages == split.messages, "\(record)")
                #expect(whole.error == split.error, "\(record)")
                #expect(whole.partial == split.partial, "\(record)")
            }
        }
        // A complete record over the limit is refused, whichever route finds it.
        let large = Array((#"{"type":6,"pad":""# + String(repeating: "x", count: 200) + "\"}\u{1E}").utf8)
        for feeding in Feeding.allCases {
            let result = decodeAll(JSONHubProtocol(maximumMessageSize: 100).makeParser(), large, feeding)
            #expect(
                result.error == HubProtocolError(.messageTooLarge, "The maximum message size of 100B was exceeded.")
            )
            #expect(result.messages.isEmpty)
        }
    }

    @Test func aPeerThatNeverSendsTheSeparatorCannotGrowMemory() throws {
        var parser = JSONHubProtocol().makeParser()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 65536)
        var failed = false
        for _ in 0..<64 {
            parser.append(chunk.backDeployedSpan)
            do {
                _ = try parser.next()
            } catch {
                #expect(error.kind == .messageTooLarge)
                failed = true
                break
            }
            #expect(parser.buffer.storage.count <= HubProtocolLimits.defaultMaximumMessageSize + chunk.count)
        }
        #expect(failed)
    }

    @Test func messagePackSizeLimitIsCheckedFromThePrefix() {
        var parser = MessagePackHubProtocol(maximumMessageSize: 1000).makeParser()
        let prefix = VarInt.encode(1001)
        parser.append(prefix.backDeployedSpan)
        #expect(throws: HubProtocolError(.messageTooLarge, "The maximum message size of 1000B was exceeded.")) {
            try parser.next()
        }
    }

    @Test func nestingDepthIsLimited() {
        let deep = String(repeating: "[", count: 66) + String(repeating: "]", count: 66)
        let record = Array((#"{"type":1,"target":"T","arguments":"# + deep + "}").utf8) + [0x1E]
        let result = decodeAll(JSONHubProtocol().makeParser(), record, .whole)
        #expect(result.error == .errorReadingJSON)
        let allowed = decodeAll(JSONHubProtocol(maximumDepth: 65).makeParser(), record, .whole)
        #expect(allowed.error == nil)
        #expect(allowed.messages.count == 1)
        // A hostile nesting far beyond the stack's reach is refused, not a crash.
        let hostile =
            Array((#"{"type":1,"target":"T","arguments":"# + String(repeating: "[", count: 500_000)).utf8) + [0x1E]
        #expect(decodeAll(JSONHubProtocol().makeParser(), hostile, .whole).error == .errorReadingJSON)
        let packed =
            VarInt.encode(200_006) + [0x96, 0x01, 0x80, 0xc0, 0xa1, 0x54]
            + Array(repeating: UInt8(0x91), count: 200_000)
        #expect(decodeAll(MessagePackHubProtocol().makeParser(), packed, .whole).error?.kind == .invalidMessage)
    }

    @Test func invalidUTF8IsRejected() {
        let record: [UInt8] =
            Array(#"{"type":1,"target":"T","arguments":[""#.utf8) + [0xC3, 0x28] + Array(#""]}"#.utf8) + [0x1E]
        #expect(decodeAll(JSONHubProtocol().makeParser(), record, .whole).error == .errorReadingJSON)
        let overlong: [UInt8] = Array(#"{"type":7,"error":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8) + [0x1E]
        #expect(decodeAll(JSONHubProtocol().makeParser(), overlong, .whole).error == .errorReadingJSON)
        let surrogate: [UInt8] = Array(#"{"type":7,"error":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8) + [0x1E]
        #expect(decodeAll(JSONHubProtocol().makeParser(), surrogate, .whole).error == .errorReadingJSON)
        let packedTarget: [UInt8] = [0x96, 0x01, 0x80, 0xc0, 0xa2, 0xC3, 0x28, 0x90, 0x90]
        #expect(
            decodeAll(MessagePackHubProtocol().makeParser(), VarInt.encode(packedTarget.count) + packedTarget, .whole)
                .error
                == HubProtocolError(.invalidMessage, "Reading 'target' as String failed.")
        )
    }
}
