import Foundation
import Testing
import TetherCore
import TetherMessagePack
import TetherTestSupport
import TetherText

@testable import TetherJSON
@testable import TetherSignalR

extension Decodable {
    /// Decodes the single string a Marked type is coded as and reports the Codable path.
    static func codable(_ decoder: any Decoder) throws -> String {
        _ = try decoder.singleValueContainer().decode(String.self)
        return "codable"
    }
}

extension Encodable {
    /// Encodes a Marked type through Codable.
    static func codable(_ encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode("codable")
    }
}

/// `ParamData` with the MessagePack fast path (hand-written `MessagePackDecodable` /
/// `MessagePackEncodable`), compared with its `Codable` path.
struct FastParamData: Codable, Hashable, MessagePackDecodable, MessagePackEncodable {
    var data: ParamData

    static let keys = KeySet([
        "Id", "UserId", "NiceName", "Time", "DataType", "JsonData", "OrganizationCode", "CustomerId",
    ])

    init(_ data: ParamData) { self.data = data }
    init(from decoder: any Decoder) throws { data = try ParamData(from: decoder) }
    func encode(to encoder: any Encoder) throws { try data.encode(to: encoder) }

    init(messagePack reader: inout MessagePackReader) throws {
        var fields: [Int: Any] = [:]
        for _ in 0..<(try reader.readMapHeader()) {
            guard let index = try reader.readKey(in: Self.keys), fields[index] == nil else {
                try reader.skipValue()  // unknown, or a duplicate: the first wins, as for Codable
                continue
            }
            switch index {
            case 1, 7: fields[index] = try reader.readInteger(Int.self)
            case 3: fields[index] = try reader.readInt64()
            default: fields[index] = try reader.readString()
            }
        }
        data = try Self.assemble(fields)
    }

    /// The ParamData made of the fields read (by key index), or the error for the first missing.
    static func assemble(_ fields: [Int: Any]) throws -> ParamData {
        if let missing = (0..<keys.count).first(where: { fields[$0] == nil }) {
            throw keys.missingKey(missing)
        }
        return ParamData(
            id: fields[0] as! String,
            userId: fields[1] as! Int,
            niceName: fields[2] as! String,
            time: fields[3] as! Int64,
            dataType: fields[4] as! String,
            jsonData: fields[5] as! String,
            organizationCode: fields[6] as! String,
            customerId: fields[7] as! Int
        )
    }

    func encode(messagePack writer: inout MessagePackWriter) {
        writer.writeMapHeader(count: 8)
        writer.writeKey(0, of: Self.keys)
        writer.writeString(data.id)
        writer.writeKey(1, of: Self.keys)
        writer.writeInt(Int64(data.userId))
        writer.writeKey(2, of: Self.keys)
        writer.writeString(data.niceName)
        writer.writeKey(3, of: Self.keys)
        writer.writeInt(data.time)
        writer.writeKey(4, of: Self.keys)
        writer.writeString(data.dataType)
        writer.writeKey(5, of: Self.keys)
        writer.writeString(data.jsonData)
        writer.writeKey(6, of: Self.keys)
        writer.writeString(data.organizationCode)
        writer.writeKey(7, of: Self.keys)
        writer.writeInt(Int64(data.customerId))
    }
}

extension FastParamData: JSONDecodable, JSONEncodable {
    init(json reader: inout JSONReader) throws {
        var fields: [Int: Any] = [:]
        try reader.readObjectStart()
        while reader.nextMember() {
            guard let index = try reader.readKey(in: Self.keys), fields[index] == nil else {
                reader.skipValue()
                continue
            }
            switch index {
            case 1, 7: fields[index] = try reader.readInteger(Int.self)
            case 3: fields[index] = try reader.readInteger(Int64.self)
            default: fields[index] = try reader.readString()
            }
        }
        data = try Self.assemble(fields)
    }

    func encode(json writer: inout JSONWriter) {
        writer.writeObjectStart()
        writer.writeKey(0, of: Self.keys)
        writer.writeString(data.id)
        writer.writeKey(1, of: Self.keys)
        writer.writeInt(Int64(data.userId))
        writer.writeKey(2, of: Self.keys)
        writer.writeString(data.niceName)
        writer.writeKey(3, of: Self.keys)
        writer.writeInt(data.time)
        writer.writeKey(4, of: Self.keys)
        writer.writeString(data.dataType)
        writer.writeKey(5, of: Self.keys)
        writer.writeString(data.jsonData)
        writer.writeKey(6, of: Self.keys)
        writer.writeString(data.organizationCode)
        writer.writeKey(7, of: Self.keys)
        writer.writeInt(Int64(data.customerId))
        writer.writeObjectEnd()
    }
}

/// The fast path is chosen by overload for MessagePack values, gives what `Codable` gives, and
/// maps its errors to the same `DecodingError`s.
struct FastPathTests {
    static func randomParamData(_ rng: inout SeededRandomNumberGenerator) -> ParamData {
        ParamData(
            id: HubProtocolPropertyTests.randomString(&rng),
            userId: Int.random(in: Int.min...Int.max, using: &rng) >> Int.random(in: 0...63, using: &rng),
            niceName: HubProtocolPropertyTests.randomString(&rng),
            time: Int64.random(in: 0...Int64.max, using: &rng) >> Int64.random(in: 0...63, using: &rng),
            dataType: HubProtocolPropertyTests.randomString(&rng),
            jsonData: String(repeating: HubProtocolPropertyTests.randomString(&rng), count: 5),
            organizationCode: HubProtocolPropertyTests.randomString(&rng),
            customerId: Int.random(in: -5...5000, using: &rng)
        )
    }

    @Test func fastPathWritesAndReadsWhatCodableDoes() throws {
        var rng = SeededRandomNumberGenerator(seed: 20_261_130)
        for _ in 0..<200 {
            let data = Self.randomParamData(&rng)
            let fast = try EncodedValue(FastParamData(data), encoding: .messagePack)
            let codable = try EncodedValue(data, encoding: .messagePack)
            #expect(fast == codable)
            #expect(try fast.decode(FastParamData.self).data == data)
            #expect(try MessagePackEncoder().encode(FastParamData(data)) == Array(codable.bytes))
            #expect(try MessagePackDecoder().decode(FastParamData.self, from: Array(codable.bytes)).data == data)
            for encoding in [ValueEncoding.json, .messagePack] {
                let arguments = try EncodedArguments(encoding: encoding, FastParamData(data), FastParamData(data))
                #expect(arguments == (try EncodedArguments(encoding: encoding, data, data)))
                #expect(try arguments.decode(FastParamData.self, at: 1).data == data)
                #expect(
                    try EncodedValue(FastParamData(data), encoding: encoding).decode(FastParamData.self).data == data
                )
            }
        }
    }

    /// Says which path coded it: the fast paths read and write "fast", `Codable` "codable".
    struct MarkedMessagePack: Codable, MessagePackDecodable, MessagePackEncodable {
        var path = ""
        init() {}
        init(from decoder: any Decoder) throws { path = try Self.codable(decoder) }
        func encode(to encoder: any Encoder) throws { try Self.codable(encoder) }
        init(messagePack reader: inout MessagePackReader) throws { path = try reader.readString() }
        func encode(messagePack writer: inout MessagePackWriter) { writer.writeString("fast") }
    }

    struct MarkedJSON: Codable, JSONDecodable, JSONEncodable {
        var path = ""
        init() {}
        init(from decoder: any Decoder) throws { path = try Self.codable(decoder) }
        func encode(to encoder: any Encoder) throws { try Self.codable(encoder) }
        init(json reader: inout JSONReader) throws { path = try reader.readString() }
        func encode(json writer: inout JSONWriter) { writer.writeString("fast") }
    }

    struct MarkedBoth: Codable, JSONDecodable, JSONEncodable, MessagePackDecodable, MessagePackEncodable {
        var path = ""
        init() {}
        init(from decoder: any Decoder) throws { path = try Self.codable(decoder) }
        func encode(to encoder: any Encoder) throws { try Self.codable(encoder) }
        init(json reader: inout JSONReader) throws { path = try reader.readString() }
        func encode(json writer: inout JSONWriter) { writer.writeString("fast") }
        init(messagePack reader: inout MessagePackReader) throws { path = try reader.readString() }
        func encode(messagePack writer: inout MessagePackWriter) { writer.writeString("fast") }
    }

    /// Checks one Marked type: what each encoding writes and reads through every entry point.
    func check(
        fast: Set<ValueEncoding>,
        value: (ValueEncoding) throws -> EncodedValue,
        arguments: (ValueEncoding) throws -> EncodedArguments,
        decode: (EncodedValue) throws -> String,
        decodeArgument: (EncodedArguments) throws -> String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for encoding in [ValueEncoding.json, .messagePack] {
            let path = fast.contains(encoding) ? "fast" : "codable"
            let written = try value(encoding)
            let expected = try EncodedValue(path, encoding: encoding)
            #expect(written == expected, "\(encoding) writes", sourceLocation: sourceLocation)
            let other = try EncodedValue("x", encoding: encoding)
            #expect(
                try decode(other) == (path == "fast" ? "x" : "codable"),
                "\(encoding) reads",
                sourceLocation: sourceLocation
            )
            let list = try arguments(encoding)
            #expect(list == EncodedArguments(encoding: encoding, values: [expected]), sourceLocation: sourceLocation)
            #expect(
                try decodeArgument(EncodedArguments(encoding: encoding, values: [other]))
                    == (path == "fast" ? "x" : "codable"),
                sourceLocation: sourceLocation
            )
        }
    }

    @Test func eachEncodingTakesItsOwnFastPathOrCodable() throws {
        try check(
            fast: [.messagePack],
            value: { try EncodedValue(MarkedMessagePack(), encoding: $0) },
            arguments: { try EncodedArguments(encoding: $0, MarkedMessagePack()) },
            decode: { try $0.decode(MarkedMessagePack.self).path },
            decodeArgument: { try $0.decode(MarkedMessagePack.self, at: 0).path }
        )
        try check(
            fast: [.json],
            value: { try EncodedValue(MarkedJSON(), encoding: $0) },
            arguments: { try EncodedArguments(encoding: $0, MarkedJSON()) },
            decode: { try $0.decode(MarkedJSON.self).path },
            decodeArgument: { try $0.decode(MarkedJSON.self, at: 0).path }
        )
        try check(
            fast: [.json, .messagePack],
            value: { try EncodedValue(MarkedBoth(), encoding: $0) },
            arguments: { try EncodedArguments(encoding: $0, MarkedBoth()) },
            decode: { try $0.decode(MarkedBoth.self).path },
            decodeArgument: { try $0.decode(MarkedBoth.self, at: 0).path }
        )
        // MessagePackEncoder and MessagePackDecoder take the fast path too.
        let bytes = try MessagePackEncoder().encode(MarkedMessagePack())
        #expect(bytes == [0xa4] + Array("fast".utf8))
        #expect(try MessagePackDecoder().decode(MarkedMessagePack.self, from: [0xa1, 0x78]).path == "x")
        // Code generic over Codable takes the Codable path.
        func viaCodable<T: Codable>(_ value: T, _ encoding: ValueEncoding) throws -> T {
            try EncodedValue(value, encoding: encoding).decode(T.self)
        }
        #expect(try viaCodable(MarkedBoth(), .json).path == "codable")
        #expect(try viaCodable(MarkedBoth(), .messagePack).path == "codable")
    }

    @Test(arguments: [ValueEncoding.json, .messagePack])
    func collectionsOfFastTypesAreFastTypes(_ encoding: ValueEncoding) throws {
        // Written and read by the elements' own paths...
        let list = try EncodedValue([MarkedBoth(), MarkedBoth()], encoding: encoding)
        #expect(list == (try EncodedValue(["fast", "fast"], encoding: encoding)))
        let strings = try EncodedValue(["x", "y"], encoding: encoding)
        #expect(try strings.decode([MarkedBoth].self).map(\.path) == ["x", "y"])
        #expect(try EncodedValue(MarkedBoth?.none, encoding: encoding) == .null(encoding))
        #expect(try EncodedValue.null(encoding).decode(MarkedBoth?.self) == nil)
        #expect(try EncodedValue("x", encoding: encoding).decode(MarkedBoth?.self)?.path == "x")
        let map = try EncodedValue(["k": MarkedBoth()], encoding: encoding)
        #expect(map == (try EncodedValue(["k": "fast"], encoding: encoding)))
        #expect(try EncodedValue(["k": "x"], encoding: encoding).decode([String: MarkedBoth].self)["k"]?.path == "x")
        // ... and agreeing with Codable on real values, duplicates included (the first wins).
        var rng = SeededRandomNumberGenerator(seed: 7)
        let values = (0..<5).map { _ in FastParamData(Self.randomParamData(&rng)) }
        let fastList = try EncodedValue(values, encoding: encoding)
        #expect(fastList == (try EncodedValue(values.map(\.data), encoding: encoding)))
        #expect(try fastList.decode([FastParamData].self) == values)
        #expect(try EncodedValue([FastParamData](), encoding: encoding).decode([FastParamData].self).isEmpty)
        // Many elements (more than a collection reserves for up front): nils read as optionals,
        // and as an error for the non-optional type, on both paths.
        let nils = try EncodedValue([FastParamData?](repeating: nil, count: 5000), encoding: encoding)
        #expect(try nils.decode([FastParamData?].self).count == 5000)
        expectThrows(\DecodingError.kind, .typeMismatch) { try nils.decode([FastParamData].self) }
        expectThrows(\DecodingError.kind, .typeMismatch) { try nils.decode([ParamData].self) }
        let duplicated: EncodedValue
        switch encoding {
        case .json:
            var text = Array(#"{"a":"#.utf8)
            text += try EncodedValue(values[0], encoding: .json).bytes
            text += Array(#","a":"#.utf8) + (try EncodedValue(values[1], encoding: .json).bytes) + [0x7d]
            duplicated = try EncodedValue(json: text)
        case .messagePack:
            var bytes: [UInt8] = [0x82, 0xa1, 0x61]
            bytes += try EncodedValue(values[0], encoding: .messagePack).bytes
            bytes += [0xa1, 0x61] + (try EncodedValue(values[1], encoding: .messagePack).bytes)
            duplicated = try EncodedValue(messagePack: bytes)
        }
        #expect(try duplicated.decode([String: FastParamData].self) == ["a": values[0]])
        #expect(try duplicated.decode([String: ParamData].self) == ["a": values[0].data])
        if encoding == .messagePack {
            // Found by FuzzHubProtocols: integer map keys are their decimal text in a
            // `[String: V]`, on both paths.
            var bytes: [UInt8] = [0x82, 0x6b]
            bytes += try EncodedValue(values[0], encoding: .messagePack).bytes
            bytes += [0xd0, 0xfb] + (try EncodedValue(values[1], encoding: .messagePack).bytes)
            let numbered = try EncodedValue(messagePack: bytes)
            #expect(try numbered.decode([String: FastParamData].self) == ["107": values[0], "-5": values[1]])
            #expect(try numbered.decode([String: ParamData].self) == ["107": values[0].data, "-5": values[1].data])
        }
    }

    @Test func unknownMembersAndAnyOrderAreRead() throws {
        var writer = MessagePackWriter()
        writer.writeMapHeader(count: 9)
        writer.writeString("Extra")
        writer.write(.array([.int(-1), .string("x")]))
        let data = PayloadTests.sample
        for name in FastParamData.keys.names.reversed() {
            writer.writeString(name)
            switch name {
            case "UserId": writer.writeInt(Int64(data.userId))
            case "CustomerId": writer.writeInt(Int64(data.customerId))
            case "Time": writer.writeInt(data.time)
            case "Id": writer.writeString(data.id)
            case "NiceName": writer.writeString(data.niceName)
            case "DataType": writer.writeString(data.dataType)
            case "JsonData": writer.writeString(data.jsonData)
            default: writer.writeString(data.organizationCode)
            }
        }
        let value = try EncodedValue(messagePack: writer.bytes)
        #expect(try value.decode(FastParamData.self).data == data)
        #expect(try value.decode(ParamData.self) == data)
    }

    @Test func skippingHonoursTheLimitTheValueWasValidatedWith() throws {
        // A value validated with a limit above the reader's default (100 levels) skips whole.
        let fields = try EncodedValue(FastParamData(PayloadTests.sample), encoding: .messagePack)
        var bytes = Array(fields.bytes)
        bytes[0] += 1
        bytes += [0xa5] + Array("Extra".utf8) + Array(repeating: 0x91, count: 120) + [0xc0]
        let value = try EncodedValue(messagePack: bytes, maximumDepth: 150)
        #expect(try value.decode(FastParamData.self).data == PayloadTests.sample)
    }

    @Test func keysOfOtherTypesAreAnErrorOnBothPaths() throws {
        // Found by FuzzHubProtocols: a map with an array key was skipped by the fast path and
        // an error for Codable. Both now refuse it; integer keys both skip.
        let fields = try EncodedValue(FastParamData(PayloadTests.sample), encoding: .messagePack)
        for (key, accepted): ([UInt8], Bool) in [([0x90], false), ([0xc0], false), ([0x07], true)] {
            var bytes = Array(fields.bytes)
            bytes[0] += 1  // one more member: the key under test, with an invalid-UTF-8 value
            bytes += key + [0xa2, 0xff, 0xfe]
            let value = try EncodedValue(messagePack: bytes)
            #expect(((try? value.decode(FastParamData.self)) != nil) == accepted, "\(key)")
            #expect(((try? value.decode(ParamData.self)) != nil) == accepted, "\(key)")
        }
    }

    @Test func fastPathErrorsAreTheDecodingErrorsOfCodable() throws {
        var writer = MessagePackWriter()
        writer.writeMapHeader(count: 1)
        writer.writeString("Id")
        writer.writeString("x")
        let missing = try EncodedValue(messagePack: writer.bytes)
        #expect {
            try missing.decode(FastParamData.self)
        } throws: { error in
            guard case DecodingError.keyNotFound(let key, _) = error else { return false }
            return key.stringValue == "UserId"
        }
        writer = MessagePackWriter()
        writer.writeMapHeader(count: 1)
        writer.writeString("UserId")
        writer.writeString("not a number")
        let mismatch = try EncodedValue(messagePack: writer.bytes)
        #expect {
            try mismatch.decode(FastParamData.self)
        } throws: { error in
            guard case DecodingError.typeMismatch = error else { return false }
            return true
        }
        writer = MessagePackWriter()
        writer.writeMapHeader(count: 1)
        writer.writeString("Id")
        writer.writeStringHeader(length: 2)
        writer.bytes += [0xff, 0xfe]
        let notUTF8 = try EncodedValue(messagePack: writer.bytes)
        #expect {
            try notUTF8.decode(FastParamData.self)
        } throws: { error in
            guard case DecodingError.dataCorrupted(let context) = error else { return false }
            return context.underlyingError as? MessagePackError == .invalidUTF8(offset: 4)
        }
    }
}
