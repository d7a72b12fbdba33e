import Testing
import TetherCore
import TetherMessagePack
import TetherText

/// `KeySet` and `readKey(in:)`: map keys matched without creating strings.
struct KeySetTests {
    static let keys = KeySet([
        "a", "Id", "UserId", "12345678", "123456789", "OrganizationCode", "OrganizationName", "é", "",
        "a key longer than sixteen bytes", String(repeating: "k", count: 300),
    ])

    /// `key` written as a str value, followed by `after` (so that a key can end the buffer).
    func keyBytes(_ key: String, after: [UInt8] = []) -> [UInt8] {
        var writer = MessagePackWriter()
        writer.writeString(key)
        return writer.bytes + after
    }

    @Test func everyKeyIsFoundAtItsIndexWhereverTheBufferEnds() throws {
        for (index, name) in Self.keys.names.enumerated() {
            for after in [[], [0xc0], Array(repeating: UInt8(0x2a), count: 16)] {
                var reader = MessagePackReader(keyBytes(name, after: after))
                #expect(try reader.readKey(in: Self.keys) == index, "\(name)")
                #expect(reader.position == keyBytes(name).count)
            }
        }
    }

    @Test func theExpectedKeyIsComparedAsWords() {
        // encodedMessagePackKeyLength: the encoding's length exactly when the bytes at the offset
        // start with it, within `end`, the encoding fits sixteen bytes and sixteen can be read,
        // or it fits 32 and 32 can be read.
        let names =
            Self.keys.names + [
                "I", "Ida", "123456780", "OrganizationCodf", "OrganizationCod", "ID", "OrganizationCodeX",
                "a key longer thaN sixteen bytes", "a key longer than sixteen byteS",
            ]
        for (index, key) in Self.keys.messagePackNames.enumerated() {
            for name in names {
                for (before, after) in [(0, 0), (0, 1), (0, 16), (3, 16), (5, 2), (2, 40)] {
                    let bytes =
                        [UInt8](repeating: 0xa1, count: before) + keyBytes(name)
                        + [UInt8](repeating: 0x2a, count: after)
                    for end in [bytes.count, bytes.count - after - 1] where end >= before {
                        let starts = end - before >= key.count && Array(bytes[before..<(before + key.count)]) == key
                        let readable = key.count <= 16 ? before + 16 <= bytes.count : before + 32 <= bytes.count
                        let expected = starts && key.count <= 32 && readable ? key.count : 0
                        let length = Self.keys.encodedMessagePackKeyLength(
                            index,
                            in: bytes.backDeployedSpan,
                            at: before,
                            end: end
                        )
                        #expect(length == expected, "key \(index), \(name), \(before)+\(after), end \(end)")
                    }
                }
            }
        }
        #expect(Self.keys.encodedMessagePackKeyLength(Self.keys.count, in: keyBytes("a").span, at: 0, end: 2) == 0)
    }

    @Test func theExpectedJSONMemberNameIsComparedAsWords() {
        // encodedJSONMemberNameLength: the same rule over the member name with its quotes and
        // colon (`"name":`, escaped as the writers escape it).
        func member(_ name: String) -> [UInt8] {
            let escaped = name.utf8.flatMap { $0 == UInt8(ascii: "\"") ? [UInt8(ascii: "\\"), $0] : [$0] }
            return [UInt8(ascii: "\"")] + escaped + Array(#"":"#.utf8)
        }
        let names =
            Self.keys.names + [
                "I", "Ida", "123456780", "OrganizationCodf", "OrganizationCod", "ID", "OrganizationCodeX",
                "a key longer thaN sixteen bytes", "a key longer than sixteen byteS", "a\"b",
            ]
        for (index, key) in Self.keys.jsonMemberNames.enumerated() {
            for name in names {
                for (before, after) in [(0, 0), (0, 1), (0, 16), (3, 16), (5, 2), (2, 40)] {
                    let bytes =
                        [UInt8](repeating: 0x20, count: before) + member(name) + [UInt8](repeating: 0x31, count: after)
                    for end in [bytes.count, bytes.count - after - 1] where end >= before {
                        let starts = end - before >= key.count && Array(bytes[before..<(before + key.count)]) == key
                        let readable = key.count <= 16 ? before + 16 <= bytes.count : before + 32 <= bytes.count
                        let expected = starts && key.count <= 32 && readable ? key.count : 0
                        let length = Self.keys.encodedJSONMemberNameLength(
                            index,
                            in: bytes.backDeployedSpan,
                            at: before,
                            end: end
                        )
                        #expect(length == expected, "key \(index), \(name), \(before)+\(after), end \(end)")
                    }
                }
            }
        }
    }

    @Test func keysInOrderAndOutOfOrderReadTheSame() throws {
        // In order, each key is the expected one (compared as words when its encoding allows);
        // reversed, none is; both must give every index.
        for order in [Array(Self.keys.names.indices), Self.keys.names.indices.reversed()] {
            var writer = MessagePackWriter()
            writer.writeMapHeader(count: order.count)
            for index in order {
                writer.writeKey(index, of: Self.keys)
                writer.writeInt(Int64(index))
            }
            var reader = MessagePackReader(writer.bytes)
            var read: [Int] = []
            for _ in 0..<(try reader.readMapHeader()) {
                let index = try reader.readKey(in: Self.keys)
                #expect(try Int(reader.readInt64()) == index)
                read.append(index ?? -1)
            }
            #expect(read == order)
        }
    }

    @Test func otherKeysAreNilAndSkipped() throws {
        // Near misses: a prefix, an extension, a different ninth byte, a different last byte.
        let nearMisses = [
            "I", "Ida", "123456780", "1234567890", "OrganizationCodf", "OrganizationCod", "b", "ID", "e",
            "a key longer than sixteen byteS", "a key longer than sixteen Bytes", "a key longer than sixteen byte",
            String(repeating: "k", count: 299) + "K", String(repeating: "k", count: 301),
        ]
        for name in nearMisses {
            var reader = MessagePackReader(keyBytes(name, after: [0x01]))
            #expect(try reader.readKey(in: Self.keys) == nil, "\(name)")
            #expect(try reader.readInt64() == 1)
        }
        // Integer keys are skipped; keys of other types are an error, as for Codable.
        for bytes: [UInt8] in [[0x07], [0xcd, 0x01, 0x00], [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]] {
            var reader = MessagePackReader(bytes + [0x2a])
            #expect(try reader.readKey(in: Self.keys) == nil)
            #expect(try reader.readInt64() == 42)
        }
        for (bytes, found): ([UInt8], MessagePackType) in [([0x92, 0x01, 0xa1, 0x61], .array), ([0xc0], .nil)] {
            var reader = MessagePackReader(bytes + [0x2a])
            #expect(throws: MessagePackError.typeMismatch(expected: .string, found: found, offset: 0)) {
                try reader.readKey(in: Self.keys)
            }
            #expect(reader.position == 0)
        }
    }

    @Test func badKeysAreTypedErrors() {
        var truncated = MessagePackReader([0xa5, 0x61, 0x62])
        #expect(throws: MessagePackError.truncated(offset: 0)) { try truncated.readKey(in: Self.keys) }
        #expect(truncated.position == 0)
        var empty = MessagePackReader([])
        #expect(throws: MessagePackError.truncated(offset: 0)) { try empty.readKey(in: Self.keys) }
        var notUTF8 = MessagePackReader([0xa2, 0xff, 0xfe])
        #expect(throws: MessagePackError.invalidUTF8(offset: 0)) { try notUTF8.readKey(in: Self.keys) }
        #expect(notUTF8.position == 0)
        var reserved = MessagePackReader([0xc1, 0x01])
        #expect(throws: MessagePackError.reservedByte(offset: 0)) { try reserved.readKey(in: Self.keys) }
    }

    @Test func keysComeFromCodingKeysInCaseOrder() throws {
        enum CodingKeys: String, CodingKey, CaseIterable {
            case id = "Id"
            case userName = "UserName"
            case plain
        }
        let keys = KeySet(CodingKeys.self)
        #expect(keys.names == ["Id", "UserName", "plain"])
        var reader = MessagePackReader(keyBytes("UserName"))
        #expect(try reader.readKey(in: keys).map { CodingKeys.allCases[$0] } == .userName)
    }

    @Test func keysAreWrittenPreEncoded() {
        for (index, name) in Self.keys.names.enumerated() {
            var writer = MessagePackWriter()
            writer.writeKey(index, of: Self.keys)
            #expect(writer.bytes == keyBytes(name))
        }
        let long = String(repeating: "k", count: 40)
        var writer = MessagePackWriter()
        writer.writeKey(0, of: KeySet([long]))
        #expect(writer.bytes == keyBytes(long))
    }
}
