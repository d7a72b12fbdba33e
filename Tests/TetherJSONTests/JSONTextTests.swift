import Testing
@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

@testable import TetherJSON

/// The byte scans the JSON scanner is built of (`ByteScanning` in TetherCore, `JSONTextScanning`
/// here) must agree with the obvious byte loops on every input and range.
struct TextScanningTests {
    static func randomBytes(_ rng: inout SeededRandomNumberGenerator, count: Int) -> [UInt8] {
        // Mostly plain text, with the bytes the scanners look for sprinkled in.
        let specials: [UInt8] = [0x22, 0x5C, 0x1E, 0x00, 0x1F, 0x20, 0x7F, 0x80, 0xC3, 0xFF]
        return (0..<count).map { _ in
            Int.random(in: 0..<10, using: &rng) == 0
                ? specials.randomElement(using: &rng)! : UInt8.random(in: 0x21...0x7E, using: &rng)
        }
    }

    @Test func agreesWithByteLoops() {
        var rng = SeededRandomNumberGenerator(seed: 99)
        for _ in 0..<400 {
            let bytes = Self.randomBytes(&rng, count: Int.random(in: 0...40, using: &rng))
            for start in 0...bytes.count {
                for end in start...bytes.count { Self.check(bytes, start, end) }
            }
        }
        // Long runs with few bytes of interest, so that the 16-byte vector loops run several
        // steps before they stop (and stop in every lane).
        for _ in 0..<300 {
            var bytes = (0..<Int.random(in: 16...160, using: &rng)).map { _ in
                UInt8.random(in: 0x21...0x7E, using: &rng)
            }
            for _ in 0..<Int.random(in: 0...2, using: &rng) where !bytes.isEmpty {
                let specials: [UInt8] = [0x22, 0x5C, 0x1E, 0x00, 0x1F, 0x80, 0xFF]
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = specials.randomElement(using: &rng)!
            }
            for _ in 0..<20 {
                let start = Int.random(in: 0...bytes.count, using: &rng)
                Self.check(bytes, start, Int.random(in: start...bytes.count, using: &rng))
            }
            Self.check(bytes, 0, bytes.count)
        }
    }

    static func check(_ bytes: [UInt8], _ start: Int, _ end: Int) {
        let span = bytes.backDeployedSpan
        let slice = bytes[start..<end]
        #expect(ByteScanning.firstIndex(of: 0x1E, in: span, from: start, to: end) == slice.firstIndex(of: 0x1E))
        let textClass = ByteScanning.textClass(in: span, from: start, to: end)
        #expect(textClass.hasControlCharacters == slice.contains { $0 < 0x20 })
        #expect(textClass.hasNonASCII == slice.contains { $0 >= 0x80 })
        let stop = slice.firstIndex { $0 == 0x22 || $0 == 0x5C } ?? end
        let validatedRun = JSONTextScanning.endOfValidatedJSONText(in: span, from: start, to: end)
        #expect(validatedRun.end == stop)
        #expect((validatedRun.bytes & 0x8080_8080_8080_8080 != 0) == bytes[start..<stop].contains { $0 >= 0x80 })
        let run = JSONTextScanning.scanJSONText(in: span, from: start, to: end)
        #expect(run.end == stop)
        #expect(run.hasControlCharacters == bytes[start..<stop].contains { $0 < 0x20 })
        #expect(run.hasNonASCII == bytes[start..<stop].contains { $0 >= 0x80 })
    }
}

struct JSONTextTests {
    func text(_ body: (inout [UInt8]) -> Void) -> String {
        var bytes: [UInt8] = []
        body(&bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The JSON string literal of `bytes`, byte by byte.
    static func reference(_ bytes: [UInt8]) -> [UInt8] {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [0x22]
        for byte in bytes {
            switch byte {
            case 0x22: out += [0x5C, 0x22]
            case 0x5C: out += [0x5C, 0x5C]
            case 0x0A: out += [0x5C, 0x6E]
            case 0x0D: out += [0x5C, 0x72]
            case 0x09: out += [0x5C, 0x74]
            case 0x08: out += [0x5C, 0x62]
            case 0x0C: out += [0x5C, 0x66]
            case ..<0x20: out += [0x5C, 0x75, 0x30, 0x30] + [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            default: out.append(byte)
            }
        }
        return out + [0x22]
    }

    @Test func stringsWithMoreEscapesThanTheReservedSlack() {
        // The writer reserves room for the text and a little more for escapes, and starts a new
        // reservation when an escape does not fit: strings of escapes only (two and six bytes
        // each), and random mixes, of every length around the slack, after existing output.
        var rng = SeededRandomNumberGenerator(seed: 8259)
        let specials: [UInt8] = [0x22, 0x5C, 0x00, 0x01, 0x0A, 0x1F, 0x61, 0xC3, 0xA9]
        for length in 0...200 {
            for fill: UInt8 in [0x22, 0x01, 0x0A] {
                let bytes = [UInt8](repeating: fill, count: length)
                var out: [UInt8] = [0x5B]
                JSONText.appendString(utf8: bytes.backDeployedSpan, to: &out)
                #expect(out == [0x5B] + Self.reference(bytes), "\(fill) × \(length)")
            }
            let mixed = (0..<length).map { _ in specials.randomElement(using: &rng)! }
            var out = [UInt8](repeating: 0x20, count: Int.random(in: 0...70, using: &rng))
            let before = out
            JSONText.appendString(utf8: mixed.backDeployedSpan, to: &out)
            #expect(out == before + Self.reference(mixed), "\(mixed)")
        }
    }

    @Test func integersOfEveryLength() {
        var values: [UInt64] = [0, 9, 10, 11, 99, 100, UInt64.max, UInt64.max - 1]
        var power: UInt64 = 10
        for _ in 1...19 {
            values += [power - 1, power, power + 1]
            power = power &* 10
        }
        for value in values {
            var out: [UInt8] = [0x2C]
            JSONText.appendInteger(value, to: &out)
            #expect(out == [0x2C] + Array(String(value).utf8))
            if value <= UInt64(Int64.max) {
                out = []
                JSONText.appendInteger(-Int64(value), to: &out)
                #expect(out == Array(String(-Int64(value)).utf8))
            }
        }
    }

    @Test func escapesEveryPositionOfAWord() {
        // The writer skips plain text eight bytes at a time: each special byte at each position
        // of strings longer than a few words, against the byte-by-byte reference.
        for special: UInt8 in [0x22, 0x5C, 0x00, 0x0A, 0x1F, 0x20, 0x7F, 0x80, 0xC3, 0xFF] {
            for length in 1...40 {
                for position in 0..<length {
                    var bytes = [UInt8](repeating: 0x61, count: length)
                    bytes[position] = special
                    if position + 3 < length { bytes[position + 3] = 0x22 }
                    var out: [UInt8] = []
                    JSONText.appendString(utf8: bytes.backDeployedSpan, to: &out)
                    #expect(out == Self.reference(bytes), "\(special) at \(position) of \(length)")
                }
            }
        }
    }

    @Test func escapesStringsAndFormatsNumbers() {
        do {
            let written = text { bytes in JSONText.appendString("a\"b\\c\n\r\t\u{8}\u{C}\u{1}é😀/", to: &bytes) }
            #expect(written == #""a\"b\\c\n\r\t\b\f\u0001é😀/""#)
        }
        do {
            let written = text { bytes in JSONText.appendInteger(Int64.min, to: &bytes) }
            #expect(written == "-9223372036854775808")
        }
        do {
            let written = text { bytes in JSONText.appendInteger(UInt64.max, to: &bytes) }
            #expect(written == "18446744073709551615")
        }
        do {
            let written = text { bytes in JSONText.appendInteger(Int64(0), to: &bytes) }
            #expect(written == "0")
        }
        do {
            let written = text { bytes in JSONText.appendDouble(42, to: &bytes) }
            #expect(written == "42")
        }
        do {
            let written = text { bytes in JSONText.appendDouble(-0.0, to: &bytes) }
            #expect(written == "-0")
        }
        do {
            let written = text { bytes in JSONText.appendDouble(0.1, to: &bytes) }
            #expect(written == "0.1")
        }
        do {
            let written = text { bytes in JSONText.appendDouble(1e300, to: &bytes) }
            #expect(written == "1e+300")
        }
        do {
            let written = text { bytes in JSONText.appendFloat(1.5, to: &bytes) }
            #expect(written == "1.5")
        }
        do {
            let written = text { bytes in JSONText.appendFloat(42, to: &bytes) }
            #expect(written == "42")
        }
    }
}

/// `KeySet` (TetherCore) writes its keys' JSON member names itself, for the readers' fast key
/// match; they must be the bytes `JSONText` writes, or the fast match would never hit.
struct KeySetJSONNameTests {
    @Test func memberNamesAreJSONTextStrings() {
        var names = (0..<0x80).map { String(UnicodeScalar(UInt8($0))) }
        names += ["", "type", "invocationId", "é", "a\"b\\c\u{1}\n", "日本語"]
        let keys = KeySet(names)
        for (index, name) in names.enumerated() {
            var expected: [UInt8] = []
            JSONText.appendString(name, to: &expected)
            expected.append(UInt8(ascii: ":"))
            #expect(keys.jsonMemberNames[index] == expected, "key \(index)")
        }
    }
}
