import CTetherText
import Testing
import TetherCore
import TetherTestSupport
@_spi(TetherInternal) import TetherText

@testable import TetherJSON

/// `JSONScanner.unescape` (runs copied a word at a time) and the C kernel the typed readers use
/// (`tether_json_unescape_validated`, in every form this processor runs) against a plain
/// byte-by-byte reference: every escape at every position around word and 64-byte boundaries,
/// surrogate pairs and lone surrogates, random strings, strings cut short; and the ASCII mark of
/// the result.
struct UnescapeTests {
    /// The reference: one byte at a time, the rules of RFC 8259 §7 (lone surrogates → U+FFFD).
    static func reference(_ contents: [UInt8]) -> String {
        func hex4(_ at: Int) -> UInt32 {
            contents[at..<(at + 4)].reduce(0) { value, byte in
                value << 4 | UInt32(Character(UnicodeScalar(byte)).hexDigitValue!)
            }
        }
        var scalars = String.UnicodeScalarView()
        var bytes: [UInt8] = []
        func flush() {
            scalars.append(contentsOf: String(decoding: bytes, as: UTF8.self).unicodeScalars)
            bytes.removeAll()
        }
        var index = 0
        while index < contents.count {
            guard contents[index] == UInt8(ascii: "\\") else {
                bytes.append(contents[index])
                index += 1
                continue
            }
            flush()
            let letter = contents[index + 1]
            index += 2
            switch letter {
            case UInt8(ascii: "b"): scalars.append("\u{8}")
            case UInt8(ascii: "f"): scalars.append("\u{C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var unit = hex4(index)
                index += 4
                if (0xD800..<0xDC00).contains(unit), index + 6 <= contents.count,
                    contents[index] == UInt8(ascii: "\\"), contents[index + 1] == UInt8(ascii: "u"),
                    (0xDC00..<0xE000).contains(hex4(index + 2))
                {
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (hex4(index + 2) - 0xDC00)
                    index += 6
                }
                scalars.append(UnicodeScalar(unit) ?? "\u{FFFD}")
            default: scalars.append(UnicodeScalar(letter))
            }
        }
        flush()
        return String(scalars)
    }

    /// The 64-byte form with and without VBMI2's byte compress (where the processor has it), and
    /// each other form the processor runs.
    static let kernelPaths: [(form: UTF8Validation.KernelForm, compress: Bool)] =
        UTF8Validation.runnableForms.map { ($0, false) }
        + (tether_has_vbmi2() != 0 ? [(UTF8Validation.KernelForm.avx512, true)] : [])

    /// Runs the kernel on `"text"` followed by `after`, from each starting point a reader may use
    /// (the contents' start, the first backslash with the text before it copied first), and with
    /// the input cut at every length inside the string (then it must find no quote).
    static func checkKernel(_ text: String, after: String = ",1]", sourceLocation: SourceLocation = #_sourceLocation) {
        let contents = Array(text.utf8)
        let bytes = Array(("\"" + text + "\"" + after).utf8)
        let expected = Array(reference(contents).utf8)
        let quote = contents.count + 1
        var starts = [1]
        if let backslash = contents.firstIndex(of: UInt8(ascii: "\\")) { starts.append(backslash + 1) }
        var ends = [bytes.count, quote + 1]
        if contents.count < 80 { ends += Array(1..<quote) } else { ends += [1, quote / 2, quote - 1] }
        for path in kernelPaths {
            for start in starts {
                for end in ends where end >= start {
                    // In an allocation of exactly `end` bytes, so that AddressSanitizer sees any read past it.
                    let input = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: end)
                    defer { input.deallocate() }
                    _ = input.initialize(from: bytes[..<end])
                    var output = [UInt8](repeating: 0, count: end + 16)
                    var written = start - 1
                    var high: Int32 = bytes[1..<start].contains { $0 >= 0x80 } ? 1 : 0
                    let found = output.withUnsafeMutableBufferPointer { out in
                        for index in 1..<start { out[index - 1] = bytes[index] }
                        return tether_json_unescape_validated_using(
                            input.baseAddress,
                            start,
                            end,
                            out.baseAddress,
                            &written,
                            &high,
                            Int32(path.form.rawValue),
                            path.compress ? 1 : 0
                        )
                    }
                    let name = "\(path.form)\(path.compress ? " (compress)" : ""), from \(start) to \(end)"
                    if end > quote {
                        #expect(found == quote, "\(text.prefix(60)): \(name)", sourceLocation: sourceLocation)
                        #expect(
                            Array(output[..<written]) == expected,
                            "\(text.prefix(60)): \(name)",
                            sourceLocation: sourceLocation
                        )
                        #expect(
                            (high != 0) == expected.contains { $0 >= 0x80 },
                            "\(name)",
                            sourceLocation: sourceLocation
                        )
                    } else {
                        #expect(found == end, "\(text.prefix(60)) cut: \(name)", sourceLocation: sourceLocation)
                    }
                }
            }
        }
    }

    static func check(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let contents = Array(text.utf8)
        let decoded = JSONScanner.unescape(contents.backDeployedSpan)
        let expected = reference(contents)
        #expect(decoded == expected, "\(text)", sourceLocation: sourceLocation)
        #expect(Array(decoded.utf8) == Array(expected.utf8), sourceLocation: sourceLocation)
        #expect(
            decoded.utf8Span.isKnownASCII == decoded.utf8.allSatisfy { $0 < 0x80 },
            "ASCII mark of \(text)",
            sourceLocation: sourceLocation
        )
    }

    @Test func everyEscapeAroundTheBlockBoundaries() {
        let escapes = [
            #"\""#, #"\\"#, #"\/"#, #"\b"#, #"\f"#, #"\n"#, #"\r"#, #"\t"#, #"\u0041"#, #"\u00e9"#, #"\u20AC"#,
            #"\uD83D\uDE00"#, #"\uD83D"#, #"\uDE00"#, #"\uD83Dx"#, #"\uD83D\u0041"#, #"\uD83D\uD83D\uDE00"#,
        ]
        for escape in escapes {
            for before in [0, 1, 7, 8, 9, 50, 52, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 120, 127, 128] {
                for after in ["", "z", "é", String(repeating: "y", count: 70)] {
                    Self.check(String(repeating: "x", count: before) + escape + after)
                    Self.check(String(repeating: "é", count: before / 2) + escape + #"\n"# + after)
                    Self.checkKernel(String(repeating: "x", count: before) + escape + after)
                    Self.checkKernel(String(repeating: "é", count: before / 2) + escape + #"\n"# + after)
                }
            }
        }
    }

    @Test func randomStrings() {
        var rng = SeededRandomNumberGenerator(seed: 8259)
        let pieces = [
            "a", "bc", "hello ", "é", "日本", "😀", #"\""#, #"\\"#, #"\n"#, #"\u00e9"#, #"\uD83D\uDE00"#, #"\uDE00"#,
            #"\u0000"#, #"\/"#,
        ]
        for _ in 0..<3_000 {
            var text = ""
            for _ in 0..<Int.random(in: 0...60, using: &rng) { text += pieces.randomElement(using: &rng)! }
            Self.check(text)
            Self.checkKernel(text)
        }
    }

    /// `readStringValue` (the typed reader's one-pass read: decoding while looking for the closing
    /// quote) on whole JSON strings followed by more input, including strings around and past
    /// its bounded decoding buffer, where it finds the end first.
    @Test func oneReadFindsTheEndAndDecodes() {
        var texts = [
            "", "plain", #"a\"b"#, #"\\"#, #"x\u00e9y"#, #"\uD83D\uDE00 and \"more\""#, #"\"\"\""#, "é\\nx",
            String(repeating: #"\""#, count: 40), String(repeating: "a", count: 70) + #"\t"#,
        ]
        let limit = JSONScanner.fusedLimit
        for length in [limit - 9, limit - 2, limit - 1, limit, limit + 1, limit + 7, 2 * limit] {
            texts.append(#"\n"# + String(repeating: "w", count: length - 4) + #"\""#)
            texts.append(String(repeating: "v", count: length - 2) + #"\/"#)
        }
        for text in texts {
            for after in ["", #","next"]"#, String(repeating: " ", count: 9) + "}"] {
                let bytes = Array(("\"" + text + "\"" + after).utf8)
                let read = JSONScanner.readStringValue(bytes, 0, bytes.count)
                #expect(read?.0 == Self.reference(Array(text.utf8)), "\(text.prefix(40))")
                #expect(read?.1 == text.utf8.count + 2)
                if let string = read?.0 {
                    #expect(string.utf8Span.isKnownASCII == string.utf8.allSatisfy { $0 < 0x80 })
                }
            }
        }
        #expect(JSONScanner.readStringValue(Array("1".utf8), 0, 1) == nil)
    }

    /// Runs of backslashes of every length at every lane of a block (each run starts an escape
    /// at every other backslash, from its first), quotes escaped and not, and escapes whose
    /// backslash ends a block.
    @Test func backslashRunsAcrossTheBlocks() {
        for run in 1...9 {
            for before in 0..<(130 - run) {
                let backslashes = String(repeating: "\\", count: run)
                // An odd run escapes what follows it: a quote, or an n.
                let text = String(repeating: "a", count: before) + backslashes + (run % 2 == 1 ? #"""# : "") + "x\\n"
                Self.checkKernel(text)
                Self.checkKernel(String(repeating: "a", count: before) + backslashes + (run % 2 == 1 ? "t" : "") + "é")
            }
        }
        TestReport.note(
            "JSON unescape kernel tested in: "
                + Self.kernelPaths.map { "\($0.form)\($0.compress ? " with VBMI2" : "")" }.joined(separator: ", ")
        )
    }

    @Test func noEscapesAndEmpty() {
        Self.check("")
        Self.check(String(repeating: "plain ", count: 30))
        Self.check(#"\\"#)
    }
}
