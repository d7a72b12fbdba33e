import Foundation
import Testing
@_spi(TetherInternal) import TetherCore
import TetherTestSupport
@_spi(TetherInternal) import TetherText

/// The vectorised validator must give the standard library's verdict on every input: the
/// boundary cases of every rule at every position relative to the sixteen-byte blocks, and
/// random and mutated text of every length up to a few blocks.
struct UTF8ValidationTests {
    /// The standard library's verdict.
    static func expected(_ bytes: [UInt8]) -> UTF8Validation.Outcome {
        guard String(validating: bytes, as: UTF8.self) != nil else { return .invalid }
        return bytes.allSatisfy { $0 < 0x80 } ? .ascii : .multibyte
    }

    /// Where a sequence is put: ASCII before and after it, so that it starts in every lane of a
    /// short input, of the first block, of a middle block and of the last, overlapping one, and
    /// ends the input.
    static let placements: [(before: Int, after: Int)] = [
        (0, 0), (3, 0), (13, 0), (14, 0), (0, 13), (15, 0), (16, 0), (0, 16), (14, 3), (17, 0),
        (30, 0), (31, 0), (29, 7), (32, 15), (45, 2), (47, 1),
    ]

    /// Around the 32-byte blocks of the AVX2 form (which leaves inputs under 35 bytes to the
    /// portable one) and the 64-byte blocks of the AVX-512 form: a sequence starting in the last
    /// lanes of the first block and of a middle one, ending the input exactly at a block's end, or
    /// cut by it.
    static let widePlacements: [(before: Int, after: Int)] = [
        (33, 0), (34, 0), (35, 0), (32, 3), (0, 35), (93, 2), (95, 0), (94, 3),
        (60, 0), (61, 0), (62, 0), (63, 0), (64, 0), (0, 61), (61, 3), (62, 2), (63, 1), (125, 0),
        (126, 0), (127, 0), (128, 0), (124, 64), (190, 2),
    ]

    /// Both forms of the kernel, and the one `UTF8Validation.check` uses, give the expected
    /// outcome for `sequence` at each placement.
    static func check(_ sequence: [UInt8], placements: [(before: Int, after: Int)] = placements + widePlacements) {
        for (before, after) in placements {
            let bytes = [UInt8](repeating: 0x61, count: before) + sequence + [UInt8](repeating: 0x62, count: after)
            let wanted = expected(bytes)
            for form in UTF8Validation.runnableForms {
                let outcome = UTF8Validation.check(bytes.backDeployedSpan, form: form)
                if outcome != wanted {
                    Issue.record("\(sequence.map { String($0, radix: 16) }) at \(before)+\(after), \(form): \(outcome)")
                    return
                }
            }
            if UTF8Validation.check(bytes.backDeployedSpan) != wanted {
                Issue.record("\(sequence.map { String($0, radix: 16) }) at \(before)+\(after)")
                return
            }
        }
    }

    /// The forms these tests hold to each other are every form this processor runs, named in the
    /// run's summary; the widest runs by default, and `TextKernels.form` narrows the choice for
    /// the process (all forms give the same results, so tests running meanwhile are not
    /// affected). On x86-64 the processor's own report (cpuid, through /proc/cpuinfo's flags)
    /// decides which forms must run here, so a detection that found less than the processor has
    /// fails instead of silently testing fewer forms.
    @Test func everyFormThisProcessorHasRunsAndTheWidestByDefault() throws {
        TestReport.note(UTF8Validation.runnableFormsText)
        let widest = TextKernels.widestForm
        #expect(UTF8Validation.runnableForms == TextKernels.Form.allCases.filter { $0.rawValue <= widest.rawValue })
        #expect(UTF8Validation.kernelForm == widest)
        #if arch(x86_64) && os(Linux)
            let cpuinfo = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
            let flags = Set(
                cpuinfo.split(separator: "\n").first { $0.hasPrefix("flags") }?.split(separator: " ").map(String.init)
                    ?? []
            )
            let expected: TextKernels.Form =
                flags.isSuperset(of: ["avx512f", "avx512bw", "avx512vl", "bmi1", "bmi2"])
                ? .avx512 : flags.isSuperset(of: ["avx2", "bmi1", "bmi2"]) ? .avx2 : .portable
            #expect(widest == expected, "cpuinfo's flags say \(expected)")
        #elseif !arch(x86_64)
            #expect(widest == .portable)
        #endif
        for form in TextKernels.Form.allCases {
            TextKernels.form = form
            #expect(TextKernels.form == (form.rawValue <= widest.rawValue ? form : widest))
            #expect(TextKernels.usesWideVectors == (TextKernels.form != .portable))
        }
        TextKernels.allowsWideVectors = false
        #expect(TextKernels.form == .portable && (!TextKernels.allowsWideVectors || widest == .portable))
        TextKernels.allowsWideVectors = true
        #expect(TextKernels.form == widest && TextKernels.allowsWideVectors)
    }

    /// Values on both sides of every range boundary of the rules (ASCII, continuation ranges,
    /// lead bytes, the narrowed second-byte ranges, the bytes that never occur).
    static let boundaries: [UInt8] = [
        0x00, 0x41, 0x7F, 0x80, 0x81, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1,
        0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
    ]

    @Test func everyOneAndTwoByteSequence() {
        for first in 0...255 {
            Self.check([UInt8(first)])
            for second in 0...255 {
                Self.check(
                    [UInt8(first), UInt8(second)],
                    placements: [(0, 0), (14, 0), (15, 0), (16, 15), (31, 0), (62, 0), (63, 0), (63, 1), (64, 0)]
                )
            }
        }
    }

    @Test func threeAndFourByteSequencesOverBoundaryValues() {
        for lead in UInt8(0xC0)...0xFF {
            for second in Self.boundaries {
                for third in Self.boundaries {
                    Self.check([lead, second, third])
                    guard lead >= 0xF0 && lead <= 0xF5 else { continue }
                    for fourth in Self.boundaries {
                        Self.check(
                            [lead, second, third, fourth],
                            placements: [
                                (0, 0), (13, 0), (14, 1), (30, 2), (47, 0), (61, 0), (62, 1), (63, 0), (124, 0),
                            ]
                        )
                    }
                }
            }
        }
    }

    @Test func randomAndMutatedText() {
        var rng = SeededRandomNumberGenerator(seed: 3629)
        let scalars: [Unicode.Scalar] = [
            "a", "~", "\u{7F}", "\u{80}", "é", "\u{7FF}", "\u{800}", "€", "\u{D7FF}",
            "\u{E000}", "\u{FFFD}", "\u{FFFF}", "\u{10000}", "😀", "\u{10FFFF}",
        ]
        for _ in 0..<3_000 {
            var text = ""
            for _ in 0..<Int.random(in: 0...100, using: &rng) {
                text.unicodeScalars.append(
                    Int.random(in: 0..<3, using: &rng) == 0 ? scalars.randomElement(using: &rng)! : "x"
                )
            }
            var bytes = Array(text.utf8)
            #expect(UTF8Validation.check(bytes.span) == Self.expected(bytes))
            for form in UTF8Validation.runnableForms {
                #expect(UTF8Validation.check(bytes.span, form: form) == Self.expected(bytes), "\(form)")
            }
            #expect(UTF8Validation.string(bytes.span) == text)
            for _ in 0..<4 {
                switch Int.random(in: 0..<3, using: &rng) {
                case 0 where !bytes.isEmpty:
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                case 1:
                    bytes.insert(
                        Self.boundaries.randomElement(using: &rng)!,
                        at: Int.random(in: 0...bytes.count, using: &rng)
                    )
                default:
                    if !bytes.isEmpty { bytes.remove(at: Int.random(in: 0..<bytes.count, using: &rng)) }
                }
                let outcome = UTF8Validation.check(bytes.backDeployedSpan)
                #expect(outcome == Self.expected(bytes), "\(bytes)")
                for form in UTF8Validation.runnableForms {
                    #expect(UTF8Validation.check(bytes.span, form: form) == outcome, "\(form)")
                }
                #expect((UTF8Validation.string(bytes.span) == nil) == (outcome == .invalid))
            }
        }
    }

    @Test func slicesOfALargerBufferReadOnlyTheirBytes() {
        // A slice that ends in the middle of a sequence is invalid even though the buffer goes on
        // (the check must not look past the end), and one starting at a continuation byte too.
        let bytes = Array("abcdefghijklmnopqrstu€vwxyz0123456789😀!".utf8)
        let euro = 21
        for end in (euro + 1)..<(euro + 3) {
            for start in [0, euro - 16, euro - 15, euro - 3] {
                #expect(UTF8Validation.check(bytes.span.extracting(start..<end)) == .invalid)
            }
        }
        #expect(UTF8Validation.check(bytes.span.extracting((euro + 1)..<(euro + 20))) == .invalid)
        #expect(UTF8Validation.check(bytes.span.extracting(0..<(euro + 3))) == .multibyte)
        #expect(UTF8Validation.check(bytes.span.extracting(0..<euro)) == .ascii)
        #expect(UTF8Validation.check(bytes.span.extracting(0..<0)) == .ascii)
    }
}
