import Foundation
import Testing
import TetherCore
import TetherMessagePack

@testable import TetherSignalR

/// `ParamData` with the MessagePack fast path (hand-written `MessagePackDecodable` /
/// `MessagePackEncodable`), compared with its `Codable` path.
struct FastParamData: Codable, Hashable, MessagePackDecodable, MessagePackEncodable {
    var data: ParamData

    static let keys = MessagePackKeys([
        "Id", "UserId", "NiceName", "Time", "DataType", "JsonData", "OrganizationCode", "CustomerId",
    ])

    init(_ data: ParamData) { self.data = data }
    init(from decoder: any Decoder) throws { data = try ParamData(from: decoder) }
    func encode(to encoder: any Encoder) throws { try data.encode(to: encoder) }

    init(messagePack reader: inout MessagePackReader) throws {
        var fields: [Int: Any] = [:]
        for _ in 0..<(try reader.readMapHeader()) {
            guard let index = try reader.readKey(in: Self.keys) else {
                try reader.skipValue()
                continue
            }
            switch index {
            case 1, 7: fields[index] = try reader.readInteger(Int.self)
            case 3: fields[index] = try reader.readInt64()
            default: fields[index] = try reader.readString()
            }
        }
        if let missing = (0..<Self.keys.count).first(where: { fields[$0] == nil }) {
            throw MessagePackError.missingKey(Self.keys.names[missing])
        }
        data = ParamData(
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

    /// Says which path coded it: the fast path reads and writes "fast", `Codable` "codable".
    struct Marked: Codable, Equatable, MessagePackDecodable, MessagePackEncodable {
        var path: String
        init(path: String) { self.path = path }
        init(from decoder: any Decoder) throws {
            _ = try decoder.singleValueContainer().decode(String.self)
            path = "codable"
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode("codable")
        }
        init(messagePack reader: inout MessagePackReader) throws {
            _ = try reader.readString()
            path = "fast"
        }
        func encode(messagePack writer: inout MessagePackWriter) { writer.writeString("fast") }
    }

    @Test func theFastPathIsChosenForMessagePackOnly() throws {
        let marked = Marked(path: "")
        let messagePack = try EncodedValue(marked, encoding: .messagePack)
        #expect(messagePack == (try EncodedValue(messagePack: [0xa4] + Array("fast".utf8))))
        #expect(try messagePack.decode(Marked.self).path == "fast")
        #expect(try MessagePackEncoder().encode(marked) == Array(messagePack.bytes))
        #expect(try MessagePackDecoder().decode(Marked.self, from: Array(messagePack.bytes)).path == "fast")
        let arguments = try EncodedArguments(encoding: .messagePack, marked, marked)
        #expect(Array(arguments.bytes) == [0x92] + Array(messagePack.bytes) + Array(messagePack.bytes))
        #expect(try arguments.decode(Marked.self, at: 1).path == "fast")
        let json = try EncodedValue(marked, encoding: .json)
        #expect(json.description == #""codable""#)
        #expect(try json.decode(Marked.self).path == "codable")
        #expect(try EncodedArguments(encoding: .json, marked).decode(Marked.self, at: 0).path == "codable")
        // Code generic over Decodable/Encodable takes the Codable path.
        func viaCodable<T: Codable>(_ value: T) throws -> T {
            try EncodedValue(value, encoding: .messagePack).decode(T.self)
        }
        #expect(try viaCodable(marked).path == "codable")
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
