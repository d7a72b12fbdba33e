import Testing
import TetherCore
import TetherTestSupport

@testable import TetherMessagePack

struct MessagePackCodableTests {
    struct Person: Codable, Equatable {
        var name: String
        var age: Int
        var tags: [String]
        var nickname: String?
        var scores: [String: Double]
        var avatar: [UInt8]
        var seen: MessagePackTimestamp
        var nested: Nested
        var flags: [Bool]

        struct Nested: Codable, Equatable {
            var level: UInt8
            var ratio: Float
            var big: UInt64
            var small: Int64
        }
    }

    static let person = Person(
        name: "Zoë",
        age: 42,
        tags: ["a", "b"],
        nickname: nil,
        scores: ["x": 1.5],
        avatar: [0, 1, 255],
        seen: MessagePackTimestamp(seconds: 1_701_234_567, nanoseconds: 5),
        nested: .init(level: 3, ratio: 0.25, big: UInt64.max, small: Int64.min),
        flags: [true, false]
    )

    @Test func roundTripsAStruct() throws {
        let bytes = try MessagePackEncoder().encode(Self.person)
        #expect(try MessagePackDecoder().decode(Person.self, from: bytes) == Self.person)
        // [UInt8] is a bin value and the timestamp its extension.
        var reader = MessagePackReader(bytes)
        guard case .map(let pairs) = try reader.readValue() else {
            Issue.record("not a map")
            return
        }
        #expect(pairs.first { $0.key == .string("avatar") }?.value == .binary([0, 1, 255]))
        #expect(
            pairs.first { $0.key == .string("seen") }?.value
                == .timestamp(MessagePackTimestamp(seconds: 1_701_234_567, nanoseconds: 5))
        )
        #expect(pairs.first { $0.key == .string("nickname") } == nil, "nil optionals are omitted, as JSONEncoder does")
    }

    @Test func encodesShortestHeadersForLargeContainers() throws {
        let many = Dictionary(uniqueKeysWithValues: (0..<300).map { ("k\($0)", $0) })
        let bytes = try MessagePackEncoder().encode(many)
        #expect(Array(bytes.prefix(3)) == [0xde, 0x01, 0x2c])
        #expect(try MessagePackDecoder().decode([String: Int].self, from: bytes) == many)
        let list = Array(0..<70_000)
        let listBytes = try MessagePackEncoder().encode(list)
        #expect(Array(listBytes.prefix(5)) == [0xdd, 0x00, 0x01, 0x11, 0x70])
        #expect(try MessagePackDecoder().decode([Int].self, from: listBytes) == list)
    }

    @Test func errorsCarryTheCodingPath() throws {
        struct Wrong: Decodable { var nested: Person.Nested }
        let bytes = hexBytes(
            "81 a6 6e 65 73 74 65 64 84 a5 6c 65 76 65 6c cd 01 00 a5 72 61 74 69 6f 00 a3 62 69 67 00 a5 73 6d 61 6c 6c 00"
        )
        do {
            _ = try MessagePackDecoder().decode(Wrong.self, from: bytes)
            Issue.record("decoded an out-of-range UInt8")
        } catch DecodingError.typeMismatch(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["nested", "level"])
        }
        expectThrows(\DecodingError.kind, .dataCorrupted) {
            try MessagePackDecoder().decode(Int.self, from: [0x01, 0x02])
        }
        expectThrows(\DecodingError.kind, .dataCorrupted) {
            try MessagePackDecoder().decode(Int.self, from: [0xcd, 0x01])
        }
    }

    /// Invalid UTF-8 never becomes a `String`: string values are validated as they are decoded,
    /// and every key of a map as soon as its container is made (so that no key can be missing
    /// from `allKeys` without an error).
    @Test func invalidUTF8IsRejectedBeforeDecoding() throws {
        struct Named: Decodable { var name: String }
        #expect(try MessagePackDecoder().decode(Named.self, from: hexBytes("81 a4 6e 61 6d 65 a2 c3 a9")).name == "é")
        for hex in [
            "81 a4 6e 61 6d 65 a2 ff fe", "82 a4 6e 61 6d 65 a1 61 a1 ff 01", "81 a4 6e 61 6d c3 a1 61",
            "82 a4 6e 61 6d 65 a1 61 d9 01 ff 01",
        ] {
            expectThrows(\DecodingError.kind, .dataCorrupted, "\(hex)") {
                try MessagePackDecoder().decode(Named.self, from: hexBytes(hex))
            }
        }
        expectThrows(\DecodingError.kind, .dataCorrupted) {
            try MessagePackDecoder().decode(String.self, from: hexBytes("a1 80"))
        }
        expectThrows(\DecodingError.kind, .dataCorrupted) {
            try MessagePackDecoder().decode([String].self, from: hexBytes("91 a1 c0"))
        }
    }

    @Test func integerKeysAndLargeMaps() throws {
        enum Keys: Int, CodingKey {
            case a = 1
            case b = 2
        }
        struct Keyed: Codable, Equatable {
            var a: String
            var b: Int
            enum CodingKeys: Int, CodingKey {
                case a = 1
                case b = 2
            }
        }
        let bytes = try MessagePackEncoder(useIntegerKeys: true).encode(Keyed(a: "x", b: 7))
        #expect(hex(bytes) == "82 01 a1 78 02 07")
        #expect(try MessagePackDecoder().decode(Keyed.self, from: bytes) == Keyed(a: "x", b: 7))
        // More members than the container indexes inline are still found.
        let wide = Dictionary(uniqueKeysWithValues: (0..<40).map { ("key\($0)", "v\($0)") })
        #expect(
            try MessagePackDecoder().decode([String: String].self, from: try MessagePackEncoder().encode(wide)) == wide
        )
    }
}
