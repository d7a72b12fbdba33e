import Testing
import TetherCore
import TetherTestSupport

@testable import TetherMessagePack

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined(
        separator: " "
    )
}

func written(_ body: (inout MessagePackWriter) -> Void) -> String {
    var writer = MessagePackWriter()
    body(&writer)
    return hex(writer.bytes)
}

/// One table drives the writer (shortest encodings) and the reader (every width).
struct MessagePackFormatTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var value: MessagePackValue
        var hex: String
        var testDescription: String { hex }
    }

    static let cases: [Case] = [
        Case(value: .nil, hex: "c0"),
        Case(value: .bool(false), hex: "c2"),
        Case(value: .bool(true), hex: "c3"),
        Case(value: .uint(0), hex: "00"),
        Case(value: .uint(127), hex: "7f"),
        Case(value: .uint(128), hex: "cc 80"),
        Case(value: .uint(255), hex: "cc ff"),
        Case(value: .uint(256), hex: "cd 01 00"),
        Case(value: .uint(65535), hex: "cd ff ff"),
        Case(value: .uint(65536), hex: "ce 00 01 00 00"),
        Case(value: .uint(4_294_967_295), hex: "ce ff ff ff ff"),
        Case(value: .uint(4_294_967_296), hex: "cf 00 00 00 01 00 00 00 00"),
        Case(value: .uint(UInt64.max), hex: "cf ff ff ff ff ff ff ff ff"),
        Case(value: .int(-1), hex: "ff"),
        Case(value: .int(-32), hex: "e0"),
        Case(value: .int(-33), hex: "d0 df"),
        Case(value: .int(-128), hex: "d0 80"),
        Case(value: .int(-129), hex: "d1 ff 7f"),
        Case(value: .int(-32768), hex: "d1 80 00"),
        Case(value: .int(-32769), hex: "d2 ff ff 7f ff"),
        Case(value: .int(Int64(Int32.min)), hex: "d2 80 00 00 00"),
        Case(value: .int(Int64(Int32.min) - 1), hex: "d3 ff ff ff ff 7f ff ff ff"),
        Case(value: .int(Int64.min), hex: "d3 80 00 00 00 00 00 00 00"),
        Case(value: .float(1.5), hex: "ca 3f c0 00 00"),
        Case(value: .double(-2.25), hex: "cb c0 02 00 00 00 00 00 00"),
        Case(value: .string(""), hex: "a0"),
        Case(value: .string("abc"), hex: "a3 61 62 63"),
        Case(value: .string(String(repeating: "x", count: 31)), hex: "bf" + String(repeating: " 78", count: 31)),
        Case(value: .string(String(repeating: "x", count: 32)), hex: "d9 20" + String(repeating: " 78", count: 32)),
        Case(value: .string("é"), hex: "a2 c3 a9"),
        Case(value: .binary([]), hex: "c4 00"),
        Case(value: .binary([1, 2]), hex: "c4 02 01 02"),
        Case(value: .array([]), hex: "90"),
        Case(value: .array([.uint(1), .nil]), hex: "92 01 c0"),
        Case(
            value: .array(Array(repeating: .uint(0), count: 16)),
            hex: "dc 00 10" + String(repeating: " 00", count: 16)
        ),
        Case(value: .map([]), hex: "80"),
        Case(
            value: .map([MessagePackPair(.string("a"), .uint(1)), MessagePackPair(.uint(2), .bool(true))]),
            hex: "82 a1 61 01 02 c3"
        ),
        Case(
            value: .map((0..<16).map { MessagePackPair(.uint(UInt64($0)), .nil) }),
            hex: "de 00 10" + (0..<16).map { " " + hex([UInt8($0)]) + " c0" }.joined()
        ),
        Case(value: .extension(type: 5, data: [0xaa]), hex: "d4 05 aa"),
        Case(value: .extension(type: 5, data: [1, 2]), hex: "d5 05 01 02"),
        Case(value: .extension(type: 5, data: [1, 2, 3, 4]), hex: "d6 05 01 02 03 04"),
        Case(
            value: .extension(type: 5, data: Array(repeating: 7, count: 8)),
            hex: "d7 05" + String(repeating: " 07", count: 8)
        ),
        Case(
            value: .extension(type: 5, data: Array(repeating: 7, count: 16)),
            hex: "d8 05" + String(repeating: " 07", count: 16)
        ),
        Case(value: .extension(type: -3, data: [1, 2, 3]), hex: "c7 03 fd 01 02 03"),
        Case(value: .extension(type: 1, data: []), hex: "c7 00 01"),
        Case(value: .timestamp(MessagePackTimestamp(seconds: 1)), hex: "d6 ff 00 00 00 01"),
        Case(value: .timestamp(MessagePackTimestamp(seconds: 1, nanoseconds: 1)), hex: "d7 ff 00 00 00 04 00 00 00 01"),
        Case(
            value: .timestamp(MessagePackTimestamp(seconds: -1, nanoseconds: 0)),
            hex: "c7 0c ff 00 00 00 00 ff ff ff ff ff ff ff ff"
        ),
    ]

    @Test(arguments: cases)
    func writesShortestAndReadsBack(_ testCase: Case) throws {
        var writer = MessagePackWriter()
        writer.write(testCase.value)
        #expect(hex(writer.bytes) == testCase.hex)
        var reader = MessagePackReader(writer.bytes + [0xc0])
        #expect(try reader.readValue() == testCase.value)
        var skipper = MessagePackReader(writer.bytes + [0xc0])
        try skipper.skipValue()
        #expect(skipper.position == writer.bytes.count)
        // Every strict prefix is truncated, and the reader stays where it was.
        for length in 0..<writer.bytes.count {
            var truncated = MessagePackReader(Array(writer.bytes[0..<length]))
            expectThrows(\MessagePackError.kind, .truncated) { try truncated.readValue() }
            #expect(truncated.position == 0)
        }
    }

    @Test func readsEveryWidthOfIntegersStringsAndContainers() throws {
        // Non-shortest encodings that other writers emit must be read too.
        let wide: [(String, MessagePackValue)] = [
            ("cc 05", .uint(5)), ("cd 00 05", .uint(5)), ("ce 00 00 00 05", .uint(5)),
            ("cf 00 00 00 00 00 00 00 05", .uint(5)),
            ("d0 05", .uint(5)), ("d1 ff fb", .int(-5)), ("d2 ff ff ff fb", .int(-5)),
            ("d3 ff ff ff ff ff ff ff fb", .int(-5)),
            ("d9 01 61", .string("a")), ("da 00 01 61", .string("a")), ("db 00 00 00 01 61", .string("a")),
            ("c5 00 01 09", .binary([9])), ("c6 00 00 00 01 09", .binary([9])),
            ("dc 00 01 c3", .array([.bool(true)])), ("dd 00 00 00 01 c3", .array([.bool(true)])),
            ("de 00 01 c0 c0", .map([MessagePackPair(.nil, .nil)])),
            ("df 00 00 00 01 c0 c0", .map([MessagePackPair(.nil, .nil)])),
            ("c8 00 01 07 aa", .extension(type: 7, data: [0xaa])),
            ("c9 00 00 00 01 07 aa", .extension(type: 7, data: [0xaa])),
        ]
        for (text, value) in wide {
            var reader = MessagePackReader(hexBytes(text))
            #expect(try reader.readValue() == value, "\(text)")
            #expect(reader.isAtEnd)
            // Followed by more bytes: lengths and integers are then read with one word load,
            // which must drop what follows them.
            var followed = MessagePackReader(hexBytes(text) + [0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8])
            #expect(try followed.readValue() == value, "\(text) followed by more")
            #expect(try followed.readInteger(Int.self) == -1)
        }
    }

    @Test func typedReadsConvertAndCheckRanges() throws {
        var reader = MessagePackReader(hexBytes("cc ff"))
        #expect(throws: MessagePackError.integerOutOfRange(offset: 0)) { try reader.readInteger(Int8.self) }
        #expect(reader.position == 0)
        #expect(try reader.readInteger(UInt8.self) == 255)
        reader = MessagePackReader(hexBytes("ff"))
        #expect(throws: MessagePackError.integerOutOfRange(offset: 0)) { try reader.readUInt64() }
        #expect(try reader.readInt64() == -1)
        reader = MessagePackReader(hexBytes("cf ff ff ff ff ff ff ff ff"))
        #expect(throws: MessagePackError.integerOutOfRange(offset: 0)) { try reader.readInt64() }
        reader = MessagePackReader(hexBytes("2a"))
        #expect(try reader.readDouble() == 42)
        reader = MessagePackReader(hexBytes("a1 61"))
        #expect(throws: MessagePackError.typeMismatch(expected: .integer, found: .string, offset: 0)) {
            try reader.readInt64()
        }
    }

    /// `readInteger` reads positive fixints and uint 8–32 inline (one word load where eight
    /// bytes can be read) and everything else the general way: every encoding width of boundary
    /// values, into types that hold them and types that do not, with 0–9 bytes after them.
    @Test func integersOfEveryEncodingIntoEveryWidth() throws {
        let values: [Int64] = [0, 1, 127, 128, 255, 256, 32767, 32768, 65535, 65536, 2_147_483_647, 4_294_967_295]
        var encodings: [(Int64, [UInt8])] = []
        for value in values {
            var writer = MessagePackWriter()
            writer.writeInt(value)
            encodings.append((value, writer.bytes))
            // The same value in every wider uint encoding (writers may pick any).
            for (header, width) in [(UInt8(0xcc), 1), (0xcd, 2), (0xce, 4), (0xcf, 8)] where value < 1 << (8 * width) {
                encodings.append(
                    (value, [header] + (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * (width - 1 - $0))) })
                )
            }
        }
        encodings.append((-1, [0xff]))
        encodings.append((-200, [0xd1, 0xff, 0x38]))
        for (value, bytes) in encodings {
            for trailing in 0...9 {
                let input = bytes + Array(repeating: UInt8(0xc0), count: trailing)
                func check<T: FixedWidthInteger>(_ type: T.Type) {
                    var reader = MessagePackReader(input)
                    let read = try? reader.readInteger(T.self)
                    #expect(read == T(exactly: value), "\(T.self) from \(bytes)")
                    if read != nil { #expect(reader.position == bytes.count) } else { #expect(reader.position == 0) }
                }
                check(Int.self)
                check(Int8.self)
                check(UInt8.self)
                check(Int16.self)
                check(UInt16.self)
                check(Int32.self)
                check(UInt32.self)
                check(UInt64.self)
            }
            // Cut short by the reader's end, with bytes after it in the buffer: an error.
            for cut in 1..<bytes.count {
                var reader = MessagePackReader(bytes + Array(repeating: 0x01, count: 9), range: 0..<cut)
                expectThrows(\MessagePackError.kind, .truncated) { try reader.readInteger(Int.self) }
            }
        }
    }

    @Test func malformedInputIsATypedError() {
        let cases: [(String, MessagePackError)] = [
            ("c1", .reservedByte(offset: 0)),
            ("92 01 c1", .reservedByte(offset: 2)),
            ("a2 ff fe", .invalidUTF8(offset: 0)),
            ("a2 c3", .truncated(offset: 0)),
            ("d6 ff 00 00", .truncated(offset: 0)),
            ("c7 03 ff 00 00 00", .invalidTimestamp(offset: 0)),
            ("d7 ff ff ff ff ff 00 00 00 00", .invalidTimestamp(offset: 0)),
            ("dd ff ff ff ff", .truncated(offset: 5)),
        ]
        for (text, error) in cases {
            var reader = MessagePackReader(hexBytes(text))
            #expect(throws: error, "\(text)") { try reader.readValue() }
            #expect(reader.position == 0)
        }
    }

    @Test func depthIsLimited() throws {
        let deep = Array(repeating: UInt8(0x91), count: 10) + [0xc0]
        var limited = MessagePackReader(deep, maximumDepth: 9)
        #expect(throws: MessagePackError.depthLimitExceeded(limit: 9)) { try limited.skipValue() }
        #expect(throws: MessagePackError.depthLimitExceeded(limit: 9)) { try limited.readValue() }
        var enough = MessagePackReader(deep, maximumDepth: 10)
        try enough.skipValue()
        #expect(enough.isAtEnd)
        // A hostile input far deeper than the stack could recurse is refused, not a crash.
        var hostile = MessagePackReader(Array(repeating: UInt8(0x91), count: 1_000_000))
        #expect(throws: MessagePackError.depthLimitExceeded(limit: MessagePackReader.defaultMaximumDepth)) {
            try hostile.skipValue()
        }
        let decoder = MessagePackDecoder()
        expectThrows(\DecodingError.kind, .dataCorrupted) {
            try decoder.decode([[Int]].self, from: Array(repeating: UInt8(0x91), count: 1_000_000))
        }
    }

    @Test func skipValueFindsTheEndAndRejectsTruncation() throws {
        var rng = SeededRandomNumberGenerator(seed: 20_261_130)
        for _ in 0..<300 {
            var writer = MessagePackWriter()
            writer.write(randomValue(&rng, depth: 0))
            writer.bytes.append(0x2a)  // a following value, which the skip must not touch
            let bytes = writer.bytes
            var reader = MessagePackReader(bytes)
            try reader.skipValue()
            #expect(reader.position == bytes.count - 1)
            // Every strict prefix of the value is truncated, and the reader stays where it was.
            for cut in Set((0..<8).map { _ in Int.random(in: 0..<(bytes.count - 1), using: &rng) }) {
                var truncated = MessagePackReader(bytes, range: 0..<cut)
                expectThrows(\MessagePackError.kind, .truncated, "cut at \(cut) of \(bytes.count - 1)") {
                    try truncated.skipValue()
                }
                #expect(truncated.position == 0)
            }
        }
    }

    @Test func skipValueCountsDepthPastItsInlineStack() throws {
        // Maps and arrays nested 60 deep, each followed by a sibling, so that the skip must pick
        // up the right count after coming back from each level (including across the recursion
        // it uses beyond its inline stack).
        func nested(_ levels: Int) -> [UInt8] {
            guard levels > 0 else { return [0x01] }
            let inner = nested(levels - 1)
            return levels % 2 == 0 ? [0x92] + inner + [0xa1, 0x78] : [0x82, 0xa1, 0x6b] + inner + [0x05, 0xc3]
        }
        let value = nested(60)
        var reader = MessagePackReader(value + [0xc0], maximumDepth: 60)
        try reader.skipValue()
        #expect(reader.position == value.count)
        var limited = MessagePackReader(value, maximumDepth: 59)
        #expect(throws: MessagePackError.depthLimitExceeded(limit: 59)) { try limited.skipValue() }
        #expect(limited.position == 0)
        var truncated = MessagePackReader(value, range: 0..<(value.count - 1), maximumDepth: 60)
        expectThrows(\MessagePackError.kind, .truncated) { try truncated.skipValue() }
    }

    @Test func randomValuesRoundTrip() throws {
        var rng = SeededRandomNumberGenerator(seed: 20_241_130)
        for _ in 0..<500 {
            let value = randomValue(&rng, depth: 0)
            var writer = MessagePackWriter()
            writer.write(value)
            var reader = MessagePackReader(writer.bytes)
            let decoded = try reader.readValue()
            #expect(reader.isAtEnd)
            // NaN is not equal to itself; compare encodings instead of values.
            var again = MessagePackWriter()
            again.write(decoded)
            #expect(again.bytes == writer.bytes)
        }
    }
}

func hexBytes(_ text: String) -> [UInt8] {
    let digits = Array(text.split(separator: " ").joined().utf8)
    return stride(from: 0, to: digits.count, by: 2).map {
        UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
    }
}

func randomValue(_ rng: inout SeededRandomNumberGenerator, depth: Int) -> MessagePackValue {
    let choice = Int.random(in: 0..<(depth > 3 ? 10 : 13), using: &rng)
    switch choice {
    case 0: return .nil
    case 1: return .bool(Bool.random(using: &rng))
    case 2: return .int(-Int64.random(in: 1...Int64.max, using: &rng) >> Int64.random(in: 0...62, using: &rng))
    case 3: return .uint(UInt64.random(in: 0...UInt64.max, using: &rng) >> UInt64.random(in: 0...63, using: &rng))
    case 4: return .float(Float(bitPattern: UInt32.random(in: 0...UInt32.max, using: &rng)))
    case 5: return .double(Double(bitPattern: UInt64.random(in: 0...UInt64.max, using: &rng)))
    case 6:
        let scalars = (0..<Int.random(in: 0...40, using: &rng)).map { _ in
            Character(Unicode.Scalar(UInt32.random(in: 0x20...0x7e, using: &rng))!)
        }
        return .string(String(scalars) + (Bool.random(using: &rng) ? "é😀" : ""))
    case 7:
        return .binary((0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
    case 8:
        let length = [0, 1, 2, 4, 8, 16, 3, 300].randomElement(using: &rng)!
        return .extension(
            type: Int8.random(in: 0...127, using: &rng),
            data: (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
        )
    case 9:
        return .timestamp(
            MessagePackTimestamp(
                seconds: Int64.random(in: -(1 << 40)...(1 << 40), using: &rng),
                nanoseconds: UInt32.random(in: 0..<1_000_000_000, using: &rng)
            )
        )
    case 10, 11:
        return .array((0..<Int.random(in: 0...20, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
    default:
        return .map(
            (0..<Int.random(in: 0...20, using: &rng)).map { _ in
                MessagePackPair(randomValue(&rng, depth: depth + 1), randomValue(&rng, depth: depth + 1))
            }
        )
    }
}
