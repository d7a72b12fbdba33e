import Testing
@_spi(TetherInternal) import TetherCore
import TetherMessagePack
import TetherTestSupport
@_spi(TetherInternal) import TetherText

@testable import TetherJSON
@testable import TetherSignalR

/// Arguments, results and items stay encoded and decode on demand into app types.
struct PayloadTests {
    static let sample = ParamData(
        id: "1a2b3c4d-0001",
        userId: 2_147_483_000,
        niceName: "Zoë \"Rock\" Ó Briain",
        time: 1_701_234_567_000,
        dataType: "chat",
        jsonData: #"{"text":"café\n😀","mentions":[1,2]}"#,
        organizationCode: "北京公司",
        customerId: 0
    )

    @Test(arguments: [ValueEncoding.json, .messagePack])
    func paramDataRoundTripsThroughEachProtocol(_ encoding: ValueEncoding) throws {
        let arguments = try EncodedArguments(encoding: encoding, Self.sample, "second", 3)
        let message = HubMessage.invocation(
            InvocationMessage(invocationId: "7", target: "ReceiveMessage", arguments: arguments)
        )
        var bytes: [UInt8] = []
        switch encoding {
        case .json: JSONHubProtocol().write(message, into: &bytes)
        case .messagePack: MessagePackHubProtocol().write(message, into: &bytes)
        }
        let decoded =
            encoding == .json
            ? decodeAll(JSONHubProtocol().makeParser(), bytes, .byteByByte).messages
            : decodeAll(MessagePackHubProtocol().makeParser(), bytes, .byteByByte).messages
        #expect(decoded == [message])
        let invocation = try #require(decoded.first?.invocation)
        #expect(invocation.arguments.count == 3)
        #expect(try invocation.arguments.decode(ParamData.self, at: 0) == Self.sample)
        #expect(try invocation.arguments.decode(String.self, at: 1) == "second")
        #expect(try invocation.arguments.decode(Int.self, at: 2) == 3)
        expectThrows(\DecodingError.kind, .typeMismatch) { try invocation.arguments.decode(String.self, at: 2) }
    }

    /// Arguments behind every MessagePack array header width (fixarray, array 16, array 32) and
    /// in JSON: the first and the last decode from where they start.
    @Test(arguments: [ValueEncoding.json, .messagePack], [1, 15, 16, 70_000])
    func argumentsAtEveryArrayHeaderWidth(_ encoding: ValueEncoding, _ count: Int) throws {
        let values = try (0..<count).map { try EncodedValue("v\($0)", encoding: encoding) }
        let arguments = EncodedArguments(encoding: encoding, values: values)
        let bytes = Array(arguments.bytes)
        if encoding == .messagePack {
            #expect(bytes[0] == (count < 16 ? 0x90 | UInt8(count) : count < 0x1_0000 ? 0xdc : 0xdd))
        }
        #expect(arguments.count == count)
        #expect(try arguments.decode(String.self, at: 0) == "v0")
        #expect(try arguments.decode(String.self, at: count - 1) == "v\(count - 1)")
        #expect(Array(arguments) == values)
    }

    @Test func messagePackFramesOfEveryPrefixLengthRoundTrip() throws {
        // The writer reserves a two-byte length prefix and moves the message when it needs one
        // or three bytes: message sizes on both sides of 128 and 16,384 bytes, and far above,
        // each written after bytes already in the buffer.
        let hubProtocol = MessagePackHubProtocol()
        var bytes: [UInt8] = []
        hubProtocol.write(.ping, into: &bytes)
        var messages: [HubMessage] = [.ping]
        for length in [0, 100, 105, 106, 107, 108, 120, 16_350, 16_360, 16_362, 16_363, 16_364, 16_400, 2_100_000] {
            let arguments = try EncodedArguments(encoding: .messagePack, String(repeating: "x", count: length))
            let message = HubMessage.invocation(InvocationMessage(invocationId: nil, target: "T", arguments: arguments))
            let start = bytes.count
            hubProtocol.write(message, into: &bytes)
            guard
                case .value(let bodyLength, let prefixLength) = try VarInt.read(
                    bytes.backDeployedSpan.extracting(start..<bytes.count)
                )
            else {
                Issue.record("no length prefix for \(length)")
                continue
            }
            #expect(prefixLength + bodyLength == bytes.count - start)
            #expect(VarInt.encode(bodyLength) == Array(bytes[start..<(start + prefixLength)]))
            messages.append(message)
        }
        let decoded = decodeAll(MessagePackHubProtocol(maximumMessageSize: 4 << 20).makeParser(), bytes, .whole)
        #expect(decoded.error == nil)
        let roundTripped = decoded.messages == messages  // (not printed: megabytes of arguments)
        #expect(roundTripped)
        #expect(
            Set(
                messages.dropFirst().map { message -> Int in
                    var frame: [UInt8] = []
                    hubProtocol.write(message, into: &frame)
                    guard case .value(_, let prefixLength)? = try? VarInt.read(frame.span) else { return 0 }
                    return prefixLength
                }
            ) == [1, 2, 3, 4]
        )
    }

    @Test func jsonDecodesFromForeignSpellings() throws {
        // Members in another order, escapes, whitespace, exponent numbers and unknown members.
        let text = #"""
            { "JsonData" : "{\"a\":1}", "Time": 1.701234567E9, "UserId": 12, "Extra": [1, {"x": null}],
              "NiceName": "Zo\u00eb \ud83d\ude00", "Id": "x", "DataType": "chat", "OrganizationCode": "ACME", "CustomerId": -0 }
            """#
        let value = try EncodedValue(json: Array(text.utf8))
        let decoded = try value.decode(ParamData.self)
        #expect(decoded.niceName == "Zoë 😀")
        #expect(decoded.jsonData == #"{"a":1}"#)
        #expect(decoded.time == 1_701_234_567)
        #expect(decoded.customerId == 0)
    }

    /// Each argument of a received invocation decodes at its index, whatever whitespace the
    /// sender put around it (the first one is found without walking the array).
    @Test func argumentsDecodeAtTheirIndexAcrossWhitespace() throws {
        for spacing in ["", " ", "\n\t ", "\r\n"] {
            let text =
                #"{"type":1,"target":"T","arguments":["# + spacing + #""first""# + spacing + ","
                + spacing + "[1,2]" + spacing + "," + spacing + "3" + spacing + "]}\u{1E}"
            var parser = JSONHubProtocol().makeParser()
            parser.append(Array(text.utf8))
            guard case .invocation(let invocation) = try parser.next() else {
                Issue.record("not an invocation: \(text)")
                continue
            }
            #expect(invocation.arguments.count == 3)
            #expect(try invocation.arguments.decode(String.self, at: 0) == "first")
            #expect(try invocation.arguments.decode([Int].self, at: 1) == [1, 2])
            #expect(try invocation.arguments.decode(Int.self, at: 2) == 3)
            #expect(invocation.arguments[0] == (try EncodedValue(json: Array(#""first""#.utf8))))
        }
    }

    @Test func integersBeyondTwoToTheFiftyThreeSurvive() throws {
        let text =
            #"{"type":1,"target":"T","arguments":[9007199254740993,18446744073709551615,-9223372036854775808,1e400]}"#
        let message = try parseJSONRecord(text)
        var written: [UInt8] = []
        JSONHubProtocol().write(message, into: &written)
        #expect(String(decoding: written.dropLast(), as: UTF8.self) == text)
        let invocation = try #require(message.invocation)
        #expect(try invocation.arguments.decode(Int64.self, at: 0) == 9_007_199_254_740_993)
        #expect(try invocation.arguments.decode(UInt64.self, at: 1) == UInt64.max)
        #expect(try invocation.arguments.decode(Int64.self, at: 2) == Int64.min)
        expectThrows(\DecodingError.kind, .dataCorrupted) { try invocation.arguments.decode(Int64.self, at: 1) }

        var large = MessagePackWriter()
        large.writeUInt(UInt64.max)
        var small = MessagePackWriter()
        small.writeInt(Int64.min)
        let arguments = EncodedArguments(
            encoding: .messagePack,
            values: [try EncodedValue(messagePack: large.bytes), try EncodedValue(messagePack: small.bytes)]
        )
        let packed = HubMessage.invocation(InvocationMessage(target: "T", arguments: arguments))
        var bytes: [UInt8] = []
        MessagePackHubProtocol().write(packed, into: &bytes)
        let decoded = decodeAll(MessagePackHubProtocol().makeParser(), bytes, .whole).messages
        #expect(decoded == [packed])
        let back = try #require(decoded.first?.invocation)
        #expect(try back.arguments.decode(UInt64.self, at: 0) == UInt64.max)
        #expect(try back.arguments.decode(Int64.self, at: 1) == Int64.min)
    }

    @Test func encodedValuesValidateAndCompare() throws {
        #expect(throws: HubProtocolError.errorReadingJSON) { try EncodedValue(json: Array("[1,".utf8)) }
        #expect(throws: HubProtocolError.errorReadingJSON) { try EncodedValue(json: Array("1 2".utf8)) }
        #expect(throws: HubProtocolError.errorReadingJSON) { try EncodedValue(json: [0x22, 0xff, 0x22]) }
        #expect(throws: HubProtocolError.errorReadingJSON) {
            try EncodedValue(
                json: Array(String(repeating: "[", count: 65).utf8) + Array(String(repeating: "]", count: 65).utf8)
            )
        }
        #expect(try EncodedValue(json: Array(" [1] ".utf8)) == (try EncodedValue(json: Array("[1]".utf8))))
        #expect(try EncodedValue(json: Array("null".utf8)).isNull)
        #expect(EncodedValue.null(.messagePack).isNull)
        let big = try EncodedValue(json: Array(#"{"a":[1,2,{"b":"c"}]}"#.utf8))
        #expect(big.compacted() == big)
        #expect(
            try CanonicalJSON.render(try EncodedValue(Self.sample, encoding: .messagePack))
                == CanonicalJSON.render(try EncodedValue(Self.sample, encoding: .json))
        )
    }

    @Test func encoderRejectsNonFiniteNumbers() {
        expectThrows(\EncodingError.kind, .invalidValue) { try EncodedValue(Double.nan, encoding: .json) }
        expectThrows(\EncodingError.kind, .invalidValue) { try EncodedValue([Float.infinity], encoding: .json) }
        #expect(throws: Never.self) { try EncodedValue(Double.nan, encoding: .messagePack) }
    }
}

/// A recursive value, to nest containers deeper than the encoders' inline stack of eight.
struct Tree: Codable, Equatable {
    var label: String
    var children: [Tree]
    var weights: [String: [Int]]

    static func chain(depth: Int) -> Tree {
        var tree = Tree(label: "leaf", children: [], weights: ["w": [depth]])
        for level in 0..<depth {
            tree = Tree(
                label: "level \(level)",
                children: [tree, Tree(label: "x", children: [], weights: [:])],
                weights: ["a": [level, 1], "b": []]
            )
        }
        return tree
    }
}

struct DeepNestingTests {
    @Test(arguments: [ValueEncoding.json, .messagePack], [1, 5, 30])
    func deeplyNestedValuesRoundTrip(_ encoding: ValueEncoding, _ depth: Int) throws {
        let tree = Tree.chain(depth: depth)
        let value = try EncodedValue(tree, encoding: encoding)
        #expect(try value.decode(Tree.self) == tree)
        if encoding == .json {
            // The output is valid JSON on its own (the validating initializer accepts it).
            #expect(try EncodedValue(json: Array(value.bytes)) == value)
        }
    }
}

/// Map keys that are maps or arrays render as their JSON text, escaped once more per level; the
/// nesting is bounded so that a small value cannot render to gigabytes.
struct CanonicalJSONKeyNestingTests {
    /// A map whose key is a map whose key is … `levels` deep.
    static func nestedKeys(_ levels: Int) -> MessagePackValue {
        var value = MessagePackValue.string("a")
        for level in 0..<levels { value = .map([MessagePackPair(value, .int(Int64(level)))]) }
        return value
    }

    @Test func keysRenderAsEscapedJSONTextUpToTheLimit() throws {
        var out: [UInt8] = []
        try CanonicalJSON.appendMessagePack(Self.nestedKeys(2), to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #"{"{\"a\":0}":1}"#)
        out = []
        try CanonicalJSON.appendMessagePack(Self.nestedKeys(CanonicalJSON.maximumKeyNesting + 1), to: &out)
        #expect(out.count < 200)
        out = []
        expectThrows(
            \CanonicalJSON.RenderingError.message,
            "Map keys that are maps or arrays are nested too deeply to render as JSON."
        ) {
            try CanonicalJSON.appendMessagePack(Self.nestedKeys(CanonicalJSON.maximumKeyNesting + 2), to: &out)
        }
        // Arrays as keys count too, and so do keys inside values inside keys.
        let arrayKeys = MessagePackValue.map([
            MessagePackPair(.array([Self.nestedKeys(CanonicalJSON.maximumKeyNesting + 1)]), .nil)
        ])
        out = []
        expectThrows(
            \CanonicalJSON.RenderingError.message,
            "Map keys that are maps or arrays are nested too deeply to render as JSON."
        ) { try CanonicalJSON.appendMessagePack(arrayKeys, to: &out) }
    }

    @Test func aFuzzFoundBombRendersAnErrorAtOnce() throws {
        // 28 maps nested as keys of one another (found by FuzzHubProtocols: it took 20 s and
        // grew without bound before the limit).
        var bytes: [UInt8] = [0x95] + Array(repeating: 0x82, count: 28)
        bytes += Array(repeating: 0x00, count: 4 + 27 * 3 + 4)  // every key and value left, as fixint 0
        let value = try EncodedValue(messagePack: bytes)
        expectThrows(
            \CanonicalJSON.RenderingError.message,
            "Map keys that are maps or arrays are nested too deeply to render as JSON."
        ) { try CanonicalJSON.render(value) }
    }
}

struct SharedPingTests {
    /// The machine sends a shared, pre-encoded Ping; it must be what each protocol writes.
    @Test func sharedPingsMatchTheWriters() {
        var json: [UInt8] = []
        JSONHubProtocol().write(.ping, into: &json)
        #expect(AnyHubProtocol.json(JSONHubProtocol()).encodedPing == json)
        var messagePack: [UInt8] = []
        MessagePackHubProtocol().write(.ping, into: &messagePack)
        #expect(AnyHubProtocol.messagePack(MessagePackHubProtocol()).encodedPing == messagePack)
    }
}

/// Objects and maps with many members (a dictionary from a peer) are decoded through a member
/// table, not a scan per key: the same values, the first of duplicate keys, escaped keys and
/// integer keys, on both sides of the table's threshold.
struct LargeObjectTests {
    static func dictionary(_ count: Int) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: (0..<count).map { ("key \($0) é", $0) })
    }

    @Test(arguments: [8, 8 + MemberTable.scanLimit, 8 + MemberTable.scanLimit + 1, 3000])
    func dictionariesRoundTrip(count: Int) throws {
        let dictionary = Self.dictionary(count)
        for encoding in [ValueEncoding.json, .messagePack] {
            let value = try EncodedValue(dictionary, encoding: encoding)
            #expect(try value.decode([String: Int].self) == dictionary)
        }
    }

    @Test func duplicateAndEscapedKeysPastTheIndex() throws {
        // 40 members; "dup" twice past the index (the first wins, as in a scan); a key written
        // with an escape.
        var members = (0..<38).map { #""m\#($0)":\#($0)"# }
        members.insert(#""dup":1"#, at: 20)
        members.append(#""dup":2"#)
        let text = "{" + members.joined(separator: ",") + #","k\u0031":7}"#
        struct Dup: Decodable {
            var dup: Int
            var k1: Int
        }
        let value = try EncodedValue(json: Array(text.utf8)).decode(Dup.self)
        #expect(value.dup == 1)
        #expect(value.k1 == 7)
        // MessagePack: integer keys past the index, and a duplicate.
        var writer = MessagePackWriter()
        writer.writeMapHeader(count: 40)
        for index in 0..<39 {
            writer.writeInt(Int64(index))
            writer.writeInt(Int64(index * 10))
        }
        writer.writeInt(30)
        writer.writeInt(-1)
        struct IntKeyed: Decodable {
            var a: Int
            var b: Int
            enum CodingKeys: Int, CodingKey {
                case a = 3
                case b = 30
            }
        }
        let decoded = try MessagePackDecoder().decode(IntKeyed.self, from: writer.bytes)
        #expect(decoded.a == 30)
        #expect(decoded.b == 300)
    }
}
