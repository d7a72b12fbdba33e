import CTetherText
import Testing
@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

@testable import TetherJSON
@testable import TetherSignalR

/// The C validating skip (`tether_json_skip_value`, behind `JSONScanner.skipValue` for input not
/// yet validated) must accept exactly what the Swift validating skip accepts, and end at the
/// same offset: on edge cases of every token, on random JSON and on random mutations of it, with
/// depth limits around the nesting and with the input cut anywhere.
struct ValidatingSkipTests {
    static func swiftSkip(_ bytes: [UInt8], end: Int, depth: Int) -> Int? {
        try? JSONScanner.skipValue(bytes.backDeployedSpan, 0, end, depth: 0, maximumDepth: depth, validated: false)
    }

    static func cSkip(
        _ bytes: [UInt8],
        end: Int,
        depth: Int,
        form: UTF8Validation.KernelForm? = nil
    ) -> Int? {
        try? JSONScanner.validatingSkip(bytes.backDeployedSpan, 0, end, maximumDepth: depth, form: form)
    }

    /// The Swift reference, both forms of the C kernel and the one in use agree.
    static func agree(_ bytes: [UInt8], depths: [Int] = [0, 1, 2, 3, 64], ends: [Int]? = nil) -> Bool {
        for depth in depths {
            for end in ends ?? [bytes.count] {
                let expected = swiftSkip(bytes, end: end, depth: depth)
                for form in [nil] + UTF8Validation.runnableForms.map(Optional.some) {
                    let found = cSkip(bytes, end: end, depth: depth, form: form)
                    if expected != found {
                        Issue.record(
                            "\(String(decoding: bytes, as: UTF8.self)) end \(end) depth \(depth): Swift \(String(describing: expected)), C \(String(describing: form)) \(String(describing: found))"
                        )
                        return false
                    }
                }
            }
        }
        return true
    }

    @Test func edgeCasesOfEveryToken() {
        let cases = [
            "", " ", "1", "-", "-0", "01", "1.", "1.5", "1.5e", "1e+", "1E-7", "-12.25e+3", "0.0", "2a", "1 2",
            "true", "tru", "truex", "false", "fals", "null", "nul", "nulll", "x", "+1", ".5",
            #""""#, #""abc""#, #""a\"b""#, #""\\""#, #""\/\b\f\n\r\t""#, #""\u00e9\uD83D\uDE00""#, #""\u12g4""#,
            #""\u12""#, #""\x""#, #""\"#, #""abc"#, "\"a\u{1}b\"", "\"a\u{7F}b\"", "\"é😀\"", "\"tab\there\"",
            "[]", "[ ]", " [1, 2 ,3 ] ", "[1,]", "[,1]", "[1 2]", "[", "]", "[[[]]]", "[[[[]]]]",
            "{}", "{ }", #"{"a":1}"#, #"{"a":1,}"#, #"{"a" 1}"#, #"{"a":}"#, #"{a:1}"#, #"{"a":1 "b":2}"#,
            #"{"a":{"b":[1,{"c":null}]},"d":"e"}"#, #"{"":""}"#, #" { "a" : [ true , false ] } "#, "{", "}",
            #"[{"a":[{"b":[{"c":1}]}]}]"#, #"{"a":[1,2],}"#, #"["a",{"b":"c"]"#, #"{"a":1]"#, #"[1}"#,
        ]
        for text in cases {
            let bytes = Array(text.utf8)
            #expect(Self.agree(bytes, ends: Array(0...bytes.count)))
        }
        // Invalid UTF-8 in strings and keys, and non-ASCII outside them.
        let raw: [[UInt8]] = [
            [0x22, 0xC3, 0x22], [0x22, 0xC3, 0xA9, 0x22], [0x22, 0xE0, 0x80, 0x80, 0x22],
            [0x22, 0xED, 0xA0, 0x80, 0x22],
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], [0x22, 0xFF, 0x22], [0x7B, 0x22, 0xC0, 0xAF, 0x22, 0x3A, 0x31, 0x7D],
            [0x5B, 0xC3, 0xA9, 0x5D],
            [0x5B, 0x31, 0x2C, 0x22] + Array(repeating: 0x61, count: 20) + [0xC3, 0x22, 0x5D],
        ]
        for bytes in raw { #expect(Self.agree(bytes, ends: Array(0...bytes.count))) }
        // Nesting at and around the limit, past 64 levels of the C stack's first word.
        for levels in [1, 2, 63, 64, 65, 130] {
            let nested = Array(
                (String(repeating: "[{\"k\":", count: levels) + "0" + String(repeating: "}]", count: levels)).utf8
            )
            #expect(Self.agree(nested, depths: [levels * 2 - 1, levels * 2, levels * 2 + 1, 1_000]))
        }
    }

    /// Strings with escapes are scanned 64 bytes at a time from their first escape on: escapes
    /// (valid and not), control characters, non-ASCII bytes and the closing quote at every
    /// position around the block boundaries, escapes split by a boundary, and strings cut off by
    /// the end. The validating skip must agree with the Swift reference, and the validated
    /// reader (the typed fast path) must read the same string as the `Codable` path.
    @Test func escapesAcrossTheBlockBoundaries() throws {
        let escapes = [#"\""#, #"\\"#, #"\/"#, #"\n"#, #"\u00e9"#, #"\uD83D\uDE00"#, #"\u12"#, #"\x"#, "\\"]
        let fillers: [String] = ["a", "é", "\u{1}", #"""#]
        for escape in escapes {
            for lead in [0, 1, 7, 8, 9] {
                for gap in [0, 1, 50, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 70, 120, 127, 128, 129] {
                    for filler in fillers {
                        // "<lead>\<escape><gap>X<tail>" with X a filler at the gap's end.
                        let text =
                            "\"" + String(repeating: "p", count: lead) + #"\n"# + String(repeating: "q", count: gap)
                            + escape + filler + "r\""
                        let bytes = Array(text.utf8)
                        #expect(Self.agree(bytes, depths: [1], ends: [bytes.count, bytes.count - 1, bytes.count - 3]))
                        // The typed reader on what the skip accepts, against the validating
                        // scanner (Swift, a byte scan with escapes checked in place).
                        if Self.cSkip(bytes, end: bytes.count, depth: 1) == bytes.count {
                            let (reference, referenceEnd) = try JSONScanner.readString(
                                bytes.backDeployedSpan,
                                0,
                                bytes.count,
                                validated: false
                            )
                            let (token, tokenEnd) = try JSONScanner.readString(
                                bytes.backDeployedSpan,
                                0,
                                bytes.count,
                                validated: true
                            )
                            #expect(token.contents == reference.contents && tokenEnd == referenceEnd, "\(text)")
                            #expect(token.hasEscapes == reference.hasEscapes && token.isASCII == reference.isASCII)
                            // Every form of the validated scan from the first backslash.
                            if let backslash = bytes.firstIndex(of: UInt8(ascii: "\\")) {
                                for form in UTF8Validation.runnableForms {
                                    var high: Int32 = 0
                                    let quote = bytes.withUnsafeBufferPointer { buffer in
                                        tether_json_validated_string_end_using(
                                            buffer.baseAddress,
                                            backslash,
                                            bytes.count,
                                            &high,
                                            Int32(form.rawValue)
                                        )
                                    }
                                    #expect(quote == reference.contents.upperBound, "\(text) form \(form)")
                                    #expect(
                                        (high != 0) == !reference.isASCII || bytes[..<backslash].contains { $0 >= 0x80 }
                                    )
                                }
                            }
                            let fast = try EncodedValue(json: bytes).decode(FastString.self).value
                            #expect(fast == JSONScanner.string(bytes, reference), "\(text)")
                        }
                    }
                }
            }
        }
    }

    /// Runs of backslashes of every length up to seven, followed by each kind of byte, ending
    /// at every lane around the 64-byte blocks (which the wide form starts at a string's first
    /// escape), and `\u` escapes whose digits cross a block: the wide form finds escaped bytes
    /// from the parity of each run, and a run may continue from one block into the next.
    @Test func backslashRunsAcrossTheBlocks() {
        // (The bytes around the hex digits' ranges too: / : @ G ` g.)
        let afters = [
            #"""#, "n", "u0041", "u00e9", "uD83D\\uDE00", "u12", "x", "/", "é", "\u{1}", "uABCF", "uabcf", "u12/4",
            "u0:00", "u00@0", "u00G0", "u00`0", "u000g",
        ]
        for run in 1...7 {
            for after in afters {
                for gap in 50...72 {
                    let text =
                        #""\n"# + String(repeating: "q", count: gap) + String(repeating: "\\", count: run) + after
                        + #"r""#
                    let bytes = Array(text.utf8)
                    #expect(Self.agree(bytes, depths: [1], ends: [bytes.count, bytes.count - 1]))
                }
            }
        }
    }

    /// Inside arrays and objects, whole and cut: strings with escapes, backslash runs, numbers,
    /// literals and non-ASCII bytes placed at every offset from the container's start to past its
    /// first 64 bytes (where a string's escapes are scanned 64 bytes at a time, the string's start
    /// at any lane).
    @Test func containersAcrossTheBlocks() {
        let escapes = [
            #"\""#, #"\\"#, #"\n"#, #"\u00e9"#, #"\uD83D\uDE00"#, #"\u12"#, #"\x"#, "\\", #"\\\""#, "é", "\u{1}",
        ]
        let scalars = ["0", "-12.5e+3", "true", "false", "null", "1x", "tru", "-", "é", "\\"]
        for pad in 0...70 {
            let spaces = String(repeating: " ", count: pad)
            var texts: [String] = []
            for escape in escapes {
                let string = "\"q" + escape + "r\""
                texts.append("[" + spaces + string + "]")
                texts.append("{" + spaces + string + ":" + string + "}")
                texts.append("[" + spaces + "\"" + String(repeating: "\\", count: pad % 7 + 1) + "\"]")
            }
            for scalar in scalars {
                texts.append("[" + spaces + scalar + "]")
                texts.append("[" + spaces + scalar + " , [" + scalar + "]]")
                texts.append("{\"k\":" + spaces + scalar + "}")
            }
            for text in texts {
                let bytes = Array(text.utf8)
                #expect(Self.agree(bytes, depths: [1, 2, 64], ends: [bytes.count, bytes.count - 1, bytes.count / 2]))
            }
        }
    }

    /// Large documents (many blocks), random and mutated.
    @Test func randomLargeContainers() {
        var rng = SeededRandomNumberGenerator(seed: 2_019)
        for round in 0..<3_000 {
            var bytes: [UInt8] = [UInt8(ascii: "[")]
            for index in 0..<Int.random(in: 1...24, using: &rng) {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.appendValue(&bytes, &rng, depth: 1)
            }
            bytes.append(UInt8(ascii: "]"))
            if round % 3 != 0 { Self.mutate(&bytes, times: Int.random(in: 1...2, using: &rng), &rng) }
            let cut = Int.random(in: 0...bytes.count, using: &rng)
            if !Self.agree(bytes, depths: [3, 64], ends: [bytes.count, cut]) { return }
        }
    }

    @Test func randomAndMutatedJSON() {
        var rng = SeededRandomNumberGenerator(seed: 8259)
        for round in 0..<20_000 {
            var bytes: [UInt8] = []
            Self.appendValue(&bytes, &rng, depth: 0)
            if round % 2 == 1 { Self.mutate(&bytes, times: Int.random(in: 1...3, using: &rng), &rng) }
            let cut = Int.random(in: 0...bytes.count, using: &rng)
            if !Self.agree(bytes, ends: [bytes.count, cut]) { return }
        }
    }

    /// Bytes a mutation puts in: JSON's own, control and non-ASCII bytes.
    static let interesting: [UInt8] =
        Array(#""\{}[],: -.eEu01tfn"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xA9, 0xED, 0xFF]

    /// Replaces, inserts or removes a byte `times` times (nothing once `bytes` is empty).
    static func mutate(_ bytes: inout [UInt8], times: Int, _ rng: inout SeededRandomNumberGenerator) {
        for _ in 0..<times where !bytes.isEmpty {
            let index = Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: bytes[index] = interesting.randomElement(using: &rng)!
            case 1: bytes.insert(interesting.randomElement(using: &rng)!, at: index)
            default: bytes.remove(at: index)
            }
        }
    }

    static func appendValue(_ bytes: inout [UInt8], _ rng: inout SeededRandomNumberGenerator, depth: Int) {
        if Bool.random(using: &rng) {
            bytes.append(contentsOf: [0x20, 0x0A, 0x09, 0x0D].prefix(Int.random(in: 0...2, using: &rng)))
        }
        switch Int.random(in: 0..<(depth < 5 ? 7 : 4), using: &rng) {
        case 0:
            let numbers = ["0", "-0", "12", "-3.5", "1e10", "2.5E-3", "123456789012345678901234", "0.125"]
            bytes.append(contentsOf: numbers.randomElement(using: &rng)!.utf8)
        case 1: bytes.append(contentsOf: ["true", "false", "null"].randomElement(using: &rng)!.utf8)
        case 2, 3: appendString(&bytes, &rng)
        case 4, 5:
            bytes.append(UInt8(ascii: "["))
            for index in 0..<Int.random(in: 0...4, using: &rng) {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                appendValue(&bytes, &rng, depth: depth + 1)
            }
            bytes.append(UInt8(ascii: "]"))
        default:
            bytes.append(UInt8(ascii: "{"))
            for index in 0..<Int.random(in: 0...4, using: &rng) {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                appendString(&bytes, &rng)
                bytes.append(contentsOf: Bool.random(using: &rng) ? Array(":".utf8) : Array(" : ".utf8))
                appendValue(&bytes, &rng, depth: depth + 1)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    static func appendString(_ bytes: inout [UInt8], _ rng: inout SeededRandomNumberGenerator) {
        let pieces = [
            "a", "text", "é", "😀", #"\""#, #"\\"#, #"\n"#, #"\u00e9"#, #"\ud83d\ude00"#, "long enough to fill words",
            " ",
        ]
        bytes.append(UInt8(ascii: "\""))
        for _ in 0..<Int.random(in: 0...6, using: &rng) {
            bytes.append(contentsOf: pieces.randomElement(using: &rng)!.utf8)
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// A string read by the JSON fast path's `readString` (the validated scan), for comparison with
/// the `Codable` path.
struct FastString: JSONDecodable {
    let value: String

    init(json reader: inout JSONReader) throws {
        value = try reader.readString()
    }

    init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(String.self)
    }
}
