import Testing
import TetherCore
import TetherMessagePack
import TetherTestSupport

@testable import TetherJSON
@testable import TetherSignalR

/// One value read through a fast path, kept as its encoded bytes: what a binder read, to compare
/// with the message's own encoded payload.
struct OpaqueValue: JSONDecodable, MessagePackDecodable {
    var bytes: [UInt8]

    init(json reader: inout JSONReader) throws {
        _ = reader.nextByte()  // past whitespace
        let start = reader.position
        reader.skipValue()
        bytes = Array(reader.bytes[start..<reader.position])
    }

    init(messagePack reader: inout MessagePackReader) throws {
        let start = reader.position
        _ = try reader.readValue()
        bytes = Array(reader.bytes[start..<reader.position])
    }

    init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "fast paths only"))
    }
}

/// Records what it is offered, reading up to `limit` arguments of each invocation.
struct RecordingBinder: HubMessageBinder {
    enum Entry: Equatable, CustomStringConvertible {
        case arguments(target: String, values: [[UInt8]])
        case result(invocationId: String, value: [UInt8])
        case item(invocationId: String, value: [UInt8])
        case failed(String)

        var description: String {
            switch self {
            case .arguments(let target, let values): "arguments(\(target), \(values.count))"
            case .result(let id, _): "result(\(id))"
            case .item(let id, _): "item(\(id))"
            case .failed(let text): "failed(\(text))"
            }
        }
    }

    var limit: Int
    var log: [Entry] = []

    mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader) {
        var values: [[UInt8]] = []
        do {
            while values.count < limit, !arguments.isAtEnd {
                values.append(try arguments.read(OpaqueValue.self).bytes)
            }
            log.append(.arguments(target: target, values: values))
        } catch {
            log.append(.failed("\(error)"))
        }
    }

    mutating func bindResult(of invocationId: String, from result: inout HubPayloadReader) {
        do {
            log.append(.result(invocationId: invocationId, value: try result.read(OpaqueValue.self).bytes))
        } catch {
            log.append(.failed("\(error)"))
        }
    }

    mutating func bindItem(of invocationId: String, from item: inout HubPayloadReader) {
        do {
            log.append(.item(invocationId: invocationId, value: try item.read(OpaqueValue.self).bytes))
        } catch {
            log.append(.failed("\(error)"))
        }
    }

    /// What it records for `messages` (as `next()` decodes them), reading up to `limit` arguments.
    static func expected(_ messages: [HubMessage], limit: Int) -> [Entry] {
        messages.compactMap { message in
            switch message {
            case .invocation(let invocation):
                .arguments(
                    target: invocation.target,
                    values: invocation.arguments.prefix(limit).map { Array($0.bytes) }
                )
            case .streamInvocation(let invocation):
                .arguments(
                    target: invocation.target,
                    values: invocation.arguments.prefix(limit).map { Array($0.bytes) }
                )
            case .completion(let completion):
                if case .value(let value) = completion.result {
                    .result(invocationId: completion.invocationId, value: Array(value.bytes))
                } else {
                    nil
                }
            case .streamItem(let item): .item(invocationId: item.invocationId, value: Array(item.item.bytes))
            default: nil
            }
        }
    }
}

/// Feeds `bytes` to `parser` as `feeding` says, binding with `binder`; collects the messages (or
/// the first error).
func bindAll<P: HubMessageParser, B: HubMessageBinder>(
    _ parser: P,
    _ binder: inout B,
    _ bytes: [UInt8],
    _ feeding: Feeding
) -> (messages: [HubMessage], error: HubProtocolError?) {
    var parser = parser
    var messages: [HubMessage] = []
    for chunk in feeding.chunks(bytes) {
        let copy = Array(chunk)
        parser.append(copy.backDeployedSpan)
        do {
            while let message = try parser.next(binding: &binder) { messages.append(message) }
        } catch {
            return (messages, error)
        }
    }
    return (messages, nil)
}

/// A MessagePack-protocol frame: the VarInt length and `body`.
func messagePackFrame(_ body: [UInt8]) -> [UInt8] {
    VarInt.encode(body.count) + body
}

struct BinderTests {
    /// Random streams of every message type, in both protocols and every feeding: binding
    /// returns the messages `next()` returns, and the binder is offered each payload exactly once,
    /// reading exactly the bytes of the arguments it reads (none, one, or all of them).
    @Test(arguments: [ValueEncoding.json, .messagePack])
    func bindingReturnsWhatNextReturnsAndOffersEachPayloadOnce(encoding: ValueEncoding) throws {
        let hubProtocol: AnyHubProtocol =
            encoding == .json ? .json(JSONHubProtocol()) : .messagePack(MessagePackHubProtocol())
        var rng = SeededRandomNumberGenerator(seed: 20_261_205)
        let messages = try (0..<300).map { _ in try HubProtocolPropertyTests.randomMessage(&rng, encoding) }
        var stream: [UInt8] = []
        for message in messages { hubProtocol.write(message, into: &stream) }
        let decoded = decodeAll(hubProtocol.makeParser(), stream, .whole)
        #expect(decoded.error == nil)
        var offered = 0
        for limit in [0, 1, 3] {
            for feeding in Feeding.allCases {
                var binder = RecordingBinder(limit: limit)
                let bound = bindAll(hubProtocol.makeParser(), &binder, stream, feeding)
                #expect(bound.error == nil, "\(feeding)")
                #expect(bound.messages == decoded.messages, "\(feeding), limit \(limit)")
                #expect(
                    binder.log == RecordingBinder.expected(decoded.messages, limit: limit),
                    "\(feeding), limit \(limit)"
                )
                offered = binder.log.count
            }
        }
        #expect(offered >= 80)
        // The protocol's own parser type, not only the enum of both.
        var binder = RecordingBinder(limit: 3)
        let bound =
            encoding == .json
            ? bindAll(JSONHubProtocol().makeParser(), &binder, stream, .randomChunks)
            : bindAll(MessagePackHubProtocol().makeParser(), &binder, stream, .randomChunks)
        #expect(bound.messages == decoded.messages)
        #expect(binder.log == RecordingBinder.expected(decoded.messages, limit: 3))
    }

    /// The arguments a MessagePack binder does not read are still validated: a malformed one is
    /// the protocol error `next()` reports, whether the binder read none, the ones before it, or
    /// stopped at it (its read failing).
    @Test func argumentsLeftUnreadAreValidated() throws {
        // [1, {}, nil, "T", ["ab", 0xc1]]: the second argument is the reserved byte.
        let invalid = messagePackFrame([0x95, 0x01, 0x80, 0xc0, 0xa1, 0x54, 0x92, 0xa2, 0x61, 0x62, 0xc1])
        // The same with the second argument cut short: a str8 of 5 bytes with 2 of them.
        let truncated = messagePackFrame([
            0x95, 0x01, 0x80, 0xc0, 0xa1, 0x54, 0x92, 0xa2, 0x61, 0x62, 0xd9, 0x05, 0x61, 0x62,
        ])
        for frame in [invalid, truncated] {
            let expected = decodeAll(MessagePackHubProtocol().makeParser(), frame, .whole)
            let error = try #require(expected.error)
            for limit in [0, 1, 2] {
                var binder = RecordingBinder(limit: limit)
                let bound = bindAll(MessagePackHubProtocol().makeParser(), &binder, frame, .whole)
                #expect(bound.messages.isEmpty)
                #expect(bound.error == error, "limit \(limit)")
            }
        }
        // A malformed result and stream item, the binder's read failing on them.
        let result = messagePackFrame([0x95, 0x03, 0x80, 0xa1, 0x31, 0x03, 0xc1])
        let item = messagePackFrame([0x94, 0x02, 0x80, 0xa1, 0x31, 0xdc, 0x00])
        for frame in [result, item] {
            let error = try #require(decodeAll(MessagePackHubProtocol().makeParser(), frame, .whole).error)
            var binder = RecordingBinder(limit: 1)
            let bound = bindAll(MessagePackHubProtocol().makeParser(), &binder, frame, .whole)
            #expect(bound.error == error)
            #expect(binder.log.count == 1)
            #expect(binder.log.first.map { if case .failed = $0 { true } else { false } } == true)
        }
    }

    /// A value that is valid but not what the binder reads (a type mismatch; MessagePack text that
    /// is not UTF-8, which `next()` leaves to the decoding too) fails the binder's read only: the
    /// message is returned as `next()` returns it, and the parser goes on.
    @Test(arguments: [ValueEncoding.json, .messagePack])
    func aValueTheBinderCannotReadFailsTheReadNotTheParser(encoding: ValueEncoding) throws {
        let hubProtocol: AnyHubProtocol =
            encoding == .json ? .json(JSONHubProtocol()) : .messagePack(MessagePackHubProtocol())
        var stream: [UInt8] = []
        let number = try EncodedValue(42, encoding: encoding)
        let text = try EncodedValue("after", encoding: encoding)
        hubProtocol.write(
            .invocation(
                InvocationMessage(
                    target: "Send",
                    arguments: EncodedArguments(encoding: encoding, values: [number, text])
                )
            ),
            into: &stream
        )
        if encoding == .messagePack {
            // ["\u{FF}"]: a str1 whose byte is not UTF-8.
            stream += messagePackFrame([0x95, 0x01, 0x80, 0xc0, 0xa1, 0x54, 0x91, 0xa1, 0xff])
        }
        hubProtocol.write(.ping, into: &stream)
        let decoded = decodeAll(hubProtocol.makeParser(), stream, .whole)
        #expect(decoded.error == nil)

        struct StringBinder: HubMessageBinder {
            var read: [String] = []
            var failures: [DecodingError] = []
            mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader) {
                do {
                    read.append(try arguments.read(String.self))
                } catch {
                    failures.append(error)
                }
            }
        }
        var binder = StringBinder()
        let bound = bindAll(hubProtocol.makeParser(), &binder, stream, .whole)
        #expect(bound.error == nil)
        #expect(bound.messages == decoded.messages)
        #expect(binder.read.isEmpty)
        #expect(binder.failures.count == (encoding == .messagePack ? 2 : 1))
        if case .typeMismatch? = binder.failures.first {
        } else {
            Issue.record("not a type mismatch: \(binder.failures)")
        }
        if encoding == .messagePack {
            if case .dataCorrupted? = binder.failures.last {
            } else {
                Issue.record("not data corrupted: \(binder.failures)")
            }
        }
    }

    /// A parser of one's own that implements only `next()` gets `next(binding:)` by default: the
    /// payload offered once its message is read, the messages those of `next()`.
    @Test(arguments: [ValueEncoding.json, .messagePack])
    func aParserOfOnesOwnBindsByDefault(encoding: ValueEncoding) throws {
        struct OwnParser: HubMessageParser {
            var inner: AnyHubMessageParser
            mutating func append(_ bytes: Span<UInt8>) { inner.append(bytes) }
            mutating func next() throws(HubProtocolError) -> HubMessage? { try inner.next() }
            var hasPartialMessage: Bool { inner.hasPartialMessage }
        }
        let hubProtocol: AnyHubProtocol =
            encoding == .json ? .json(JSONHubProtocol()) : .messagePack(MessagePackHubProtocol())
        var rng = SeededRandomNumberGenerator(seed: 20_261_207)
        var stream: [UInt8] = []
        for _ in 0..<100 {
            hubProtocol.write(try HubProtocolPropertyTests.randomMessage(&rng, encoding), into: &stream)
        }
        let decoded = decodeAll(hubProtocol.makeParser(), stream, .whole)
        var binder = RecordingBinder(limit: 2)
        let bound = bindAll(OwnParser(inner: hubProtocol.makeParser()), &binder, stream, .randomChunks)
        #expect(bound.error == nil)
        #expect(bound.messages == decoded.messages)
        #expect(binder.log == RecordingBinder.expected(decoded.messages, limit: 2))
        #expect(binder.log.count >= 20)
    }

    /// A message over the size limit fails as with `next()`, and its payload is not offered.
    @Test(arguments: [ValueEncoding.json, .messagePack])
    func aMessageOverTheSizeLimitIsNotOffered(encoding: ValueEncoding) throws {
        let hubProtocol: AnyHubProtocol =
            encoding == .json
            ? .json(JSONHubProtocol(maximumMessageSize: 40))
            : .messagePack(MessagePackHubProtocol(maximumMessageSize: 40))
        let text = try EncodedValue(String(repeating: "x", count: 60), encoding: encoding)
        var stream: [UInt8] = []
        hubProtocol.write(
            .invocation(
                InvocationMessage(target: "Big", arguments: EncodedArguments(encoding: encoding, values: [text]))
            ),
            into: &stream
        )
        let expected = decodeAll(hubProtocol.makeParser(), stream, .whole)
        #expect(expected.error?.kind == .messageTooLarge)
        var binder = RecordingBinder(limit: 1)
        let bound = bindAll(hubProtocol.makeParser(), &binder, stream, .whole)
        #expect(bound.error == expected.error)
        #expect(binder.log.isEmpty)
    }

    /// A read past the last argument throws `valueNotFound`, without moving the reader, and
    /// `isAtEnd` says when the last one has been read.
    @Test(arguments: [ValueEncoding.json, .messagePack])
    func readingPastTheLastArgumentThrows(encoding: ValueEncoding) throws {
        let hubProtocol: AnyHubProtocol =
            encoding == .json ? .json(JSONHubProtocol()) : .messagePack(MessagePackHubProtocol())
        var stream: [UInt8] = []
        let arguments = try EncodedArguments(encoding: encoding, values: [EncodedValue(7, encoding: encoding)])
        hubProtocol.write(.invocation(InvocationMessage(target: "One", arguments: arguments)), into: &stream)

        struct GreedyBinder: HubMessageBinder {
            var numbers: [Int] = []
            var atEnd: [Bool] = []
            var failure: DecodingError?
            mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader) {
                do {
                    while true {
                        atEnd.append(arguments.isAtEnd)
                        numbers.append(try arguments.read(Int.self))
                    }
                } catch {
                    failure = error
                }
            }
        }
        var binder = GreedyBinder()
        let bound = bindAll(hubProtocol.makeParser(), &binder, stream, .whole)
        #expect(bound.error == nil)
        #expect(bound.messages.count == 1)
        #expect(binder.numbers == [7])
        #expect(binder.atEnd == [false, true])
        if case .valueNotFound? = binder.failure {
        } else {
            Issue.record("not valueNotFound: \(String(describing: binder.failure))")
        }
    }

    /// The reads choose the fast path by overload, as `EncodedValue.decode` does.
    @Test(arguments: [ValueEncoding.json, .messagePack])
    func readsTakeTheFastPathsTheTypeOffers(encoding: ValueEncoding) throws {
        let hubProtocol: AnyHubProtocol =
            encoding == .json ? .json(JSONHubProtocol()) : .messagePack(MessagePackHubProtocol())
        let values = try (0..<3).map { _ in try EncodedValue("fast", encoding: encoding) }
        var stream: [UInt8] = []
        hubProtocol.write(
            .invocation(
                InvocationMessage(target: "M", arguments: EncodedArguments(encoding: encoding, values: values))
            ),
            into: &stream
        )

        struct PathBinder: HubMessageBinder {
            var paths: [String] = []
            mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader) {
                paths.append((try? arguments.read(FastPathTests.MarkedJSON.self).path) ?? "failed")
                paths.append((try? arguments.read(FastPathTests.MarkedMessagePack.self).path) ?? "failed")
                paths.append((try? arguments.read(FastPathTests.MarkedBoth.self).path) ?? "failed")
            }
        }
        var binder = PathBinder()
        _ = bindAll(hubProtocol.makeParser(), &binder, stream, .whole)
        // A fast path reads the string; the Codable path of a Marked type says "codable".
        let expected =
            encoding == .json ? ["fast", "codable", "fast"] : ["codable", "fast", "fast"]
        #expect(binder.paths == expected)
    }

    /// Binding accepts exactly what `next()` accepts: for valid streams and for the same streams
    /// with bytes changed, inserted and deleted, the binder's parser returns the messages and
    /// throws the errors that `next()` does, and what the binder read equals what decoding the
    /// messages gives. The binder reads every value by hand (`JSONTree`), trying each kind in
    /// turn and catching the mismatches, as a binder reading unknown values would.
    @Test(arguments: [ValueEncoding.json, .messagePack])
    func bindingAcceptsExactlyWhatNextAccepts(encoding: ValueEncoding) throws {
        let hubProtocol: AnyHubProtocol =
            encoding == .json ? .json(JSONHubProtocol()) : .messagePack(MessagePackHubProtocol())
        var rng = SeededRandomNumberGenerator(seed: 20_261_206)
        var checked = 0
        var failedBoth = 0
        for round in 0..<400 {
            var stream: [UInt8] = []
            let count = Int.random(in: 1...4, using: &rng)
            for _ in 0..<count {
                let message = try HubProtocolPropertyTests.randomMessage(&rng, encoding)
                hubProtocol.write(message, into: &stream)
            }
            if round % 4 != 0 {
                // Mutate a few bytes (never the separators, so that records stay apart).
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    let index = Int.random(in: 0..<stream.count, using: &rng)
                    guard encoding == .messagePack || stream[index] != 0x1E else { continue }
                    let pool: [UInt8] =
                        Array(#"{}[],:"\ 0123456789-.eEtrufalsn"#.utf8) + [0x01, 0x7F, 0xC3, 0xA9, 0xFF]
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: stream[index] = pool.randomElement(using: &rng)!
                    case 1: stream.insert(pool.randomElement(using: &rng)!, at: index)
                    default: stream.remove(at: index)
                    }
                }
            }
            for feeding in [Feeding.whole, .randomChunks] {
                let expected = decodeAll(hubProtocol.makeParser(), stream, feeding)
                var binder = TreeBinder()
                let bound = bindAll(hubProtocol.makeParser(), &binder, stream, feeding)
                #expect(bound.messages == expected.messages, "round \(round), \(feeding)")
                #expect(bound.error == expected.error, "round \(round), \(feeding)")
                // (A MessagePack message rejected after its payload was read was offered first.)
                let trees = TreeBinder.trees(of: expected.messages)
                #expect(Array(binder.trees.prefix(trees.count)) == trees, "round \(round), \(feeding)")
                #expect(binder.trees.count <= trees.count + (encoding == .messagePack ? 1 : 0))
                if expected.error == nil { #expect(binder.trees.count == trees.count) }
                checked += expected.messages.count
                if expected.error != nil { failedBoth += 1 }
            }
        }
        #expect(checked > 500)
        #expect(failedBoth > 100)
    }

    /// Payloads that are not valid JSON, each as an invocation's argument and as a completion's
    /// result: binding fails the record as `next()` does, and the binder is offered nothing.
    @Test(arguments: [
        #"{"a":}"#, "[1,]", "[,1]", #"{"a":1 "b":2}"#, "{1}", "[1 2]", #"{"a":1]"#, #"[{"a":1]]"#, "tru", "nul",
        "\"\u{01}\"", #""\q""#, "\"\u{FF}\"", "01", "-", "1.", "[1]]", #"{"a" 1}"#, #"{"a":1,}"#, #"{,"a":1}"#,
        String(repeating: "[", count: 65) + String(repeating: "]", count: 65),
    ])
    func malformedPayloadsFailTheRecord(payload: String) throws {
        let texts = [
            #"{"type":1,"target":"T","arguments":["# + payload + "]}",
            #"{"type":1,"target":"T","arguments":[1,"# + payload + "]}",
            #"{"type":3,"invocationId":"1","result":"# + payload + "}",
        ]
        for text in texts {
            let bytes = Array(text.utf8).map { $0 == 0xC3 ? 0xFF : $0 } + [0x1E]
            let expected = decodeAll(JSONHubProtocol().makeParser(), bytes, .whole)
            #expect(expected.error != nil, "\(text)")
            var binder = TreeBinder()
            let bound = bindAll(JSONHubProtocol().makeParser(), &binder, bytes, .whole)
            #expect(bound.messages.isEmpty, "\(text)")
            #expect(bound.error == expected.error, "\(text)")
            #expect(binder.trees.isEmpty, "\(text)")
        }
    }
}

/// Any JSON or MessagePack value, read by hand through the fast paths' readers (each kind tried
/// in turn, mismatches caught): what a binder reading unknown values would do.
indirect enum JSONTree: Hashable, JSONDecodable, MessagePackDecodable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONTree])
    case object([String: JSONTree])

    init(json reader: inout JSONReader) throws {
        if reader.readNilIfPresent() {
            self = .null
            return
        }
        if (try? reader.readObjectStart()) != nil {
            var members: [String: JSONTree] = [:]
            while reader.nextMember() {
                let name = try reader.readMemberName()
                members[name] = try JSONTree(json: &reader)
            }
            self = .object(members)
            return
        }
        if (try? reader.readArrayStart()) != nil {
            var elements: [JSONTree] = []
            while reader.nextElement() { elements.append(try JSONTree(json: &reader)) }
            self = .array(elements)
            return
        }
        if let string = try? reader.readString() {
            self = .string(string)
        } else if let bool = try? reader.readBool() {
            self = .bool(bool)
        } else {
            self = .number(try reader.readDouble())
        }
    }

    init(messagePack reader: inout MessagePackReader) throws {
        self = JSONTree(try reader.readValue())
    }

    init(_ value: MessagePackValue) {
        switch value {
        case .nil: self = .null
        case .bool(let bool): self = .bool(bool)
        case .int(let int): self = .number(Double(int))
        case .uint(let uint): self = .number(Double(uint))
        case .double(let double): self = .number(double)
        case .string(let string): self = .string(string)
        case .array(let elements): self = .array(elements.map(JSONTree.init))
        case .map(let pairs):
            var members: [String: JSONTree] = [:]
            for pair in pairs { if case .string(let key) = pair.key { members[key] = JSONTree(pair.value) } }
            self = .object(members)
        default: self = .null
        }
    }

    init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "fast paths only"))
    }
}

/// Reads every payload as `JSONTree`s (all of an invocation's arguments).
struct TreeBinder: HubMessageBinder {
    var trees: [[JSONTree]] = []

    mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader) {
        var values: [JSONTree] = []
        while !arguments.isAtEnd, let tree = try? arguments.read(JSONTree.self) { values.append(tree) }
        trees.append(values)
    }

    mutating func bindResult(of invocationId: String, from result: inout HubPayloadReader) {
        trees.append([(try? result.read(JSONTree.self)) ?? .null])
    }

    mutating func bindItem(of invocationId: String, from item: inout HubPayloadReader) {
        trees.append([(try? item.read(JSONTree.self)) ?? .null])
    }

    /// What it reads from `messages`, decoded after `next()`.
    static func trees(of messages: [HubMessage]) -> [[JSONTree]] {
        messages.compactMap { message in
            switch message {
            case .invocation(let invocation):
                (0..<invocation.arguments.count).map {
                    (try? invocation.arguments.decode(JSONTree.self, at: $0)) ?? .null
                }
            case .streamInvocation(let invocation):
                (0..<invocation.arguments.count).map {
                    (try? invocation.arguments.decode(JSONTree.self, at: $0)) ?? .null
                }
            case .completion(let completion):
                if case .value(let value) = completion.result {
                    [(try? value.decode(JSONTree.self)) ?? .null]
                } else {
                    nil
                }
            case .streamItem(let item): [(try? item.item.decode(JSONTree.self)) ?? .null]
            default: nil
            }
        }
    }
}
