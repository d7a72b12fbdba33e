import Testing

@_spi(TetherInternal) @testable import TetherCore
@_spi(TetherInternal) @testable import TetherText

/// Strings of up to fifteen bytes are built in their inline form (`SmallString`): each must be
/// the very value the standard library would make — same bits, so every `String` operation sees
/// no difference — and must be built from its own bytes only.
struct SmallStringTests {
    /// The two words of a string value.
    static func bits(_ string: String) -> (UInt64, UInt64) {
        unsafe unsafeBitCast(string, to: (UInt64, UInt64).self)
    }

    /// Checks `made` against the standard library's string of the same bytes.
    static func expectSame(_ made: String?, _ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let reference = String(decoding: bytes, as: UTF8.self)
        guard let made else {
            Issue.record("nil for valid \(bytes)", sourceLocation: sourceLocation)
            return
        }
        #expect(bits(made) == bits(reference), "\(bytes)", sourceLocation: sourceLocation)
        #expect(made == reference, sourceLocation: sourceLocation)
        #expect(Array(made.utf8) == bytes, sourceLocation: sourceLocation)
        #expect(made.utf16.count == reference.utf16.count, sourceLocation: sourceLocation)
        #expect(made.unicodeScalars.count == reference.unicodeScalars.count, sourceLocation: sourceLocation)
        #expect(made.hashValue == reference.hashValue, sourceLocation: sourceLocation)
        #expect(made + "!" == reference + "!", sourceLocation: sourceLocation)
    }

    @Test func theLayoutIsVerifiedOnSixtyFourBitLittleEndianPlatforms() {
        // Where this fails, the decoders silently fall back to `String(copying:)`: still correct,
        // but the fast path would go untested, so the test suite insists on it where it applies.
        if MemoryLayout<Int>.size == 8 && 1.littleEndian == 1 {
            #expect(SmallString.isAvailable)
        }
    }

    @Test func everyLengthFromItsOwnBytesOnly() {
        // Each string is a slice of a buffer whose other bytes are 0xFF: a load outside the
        // slice would put them into the string.
        var rng = SeededRandomNumberGenerator(seed: 15)
        let pieces: [[UInt8]] = [[0x61], [0x7A], [0x20], [0x7F], Array("é".utf8), Array("€".utf8), Array("😀".utf8)]
        for count in 0...SmallString.capacity {
            for round in 0..<300 {
                var text: [UInt8] = []
                while text.count < count {
                    let piece =
                        round < 100 ? [UInt8.random(in: 0...0x7F, using: &rng)] : pieces.randomElement(using: &rng)!
                    if text.count + piece.count <= count { text += piece } else { text.append(0x41) }
                }
                let offset = Int.random(in: 0...9, using: &rng)
                let buffer = Array(repeating: UInt8(0xFF), count: offset) + text + Array(repeating: 0xFF, count: 9)
                let slice = buffer.backDeployedSpan.extracting(offset..<(offset + count))
                Self.expectSame(UTF8Validation.string(slice), text)
                let isASCII = text.allSatisfy { $0 < 0x80 }
                Self.expectSame(UTF8Validation.string(validated: slice, isASCII: isASCII), text)
                // A caller that does not know may pass false; the mark still comes out right.
                Self.expectSame(UTF8Validation.string(validated: slice, isASCII: false), text)
                // An exact-size array: nothing before or after to read.
                Self.expectSame(UTF8Validation.string(text.span), text)
            }
        }
    }

    @Test func invalidShortInputsAreRejected() {
        for first in 0...255 {
            let one = [UInt8(first)]
            let oneValid = String(validating: one, as: UTF8.self) != nil
            let made = UTF8Validation.string(one.backDeployedSpan)
            if oneValid { Self.expectSame(made, one) } else { #expect(made == nil, "\(one)") }
            for second in 0...255 {
                let two = [UInt8(first), UInt8(second)]
                let made = UTF8Validation.string(two.backDeployedSpan)
                if String(validating: two, as: UTF8.self) != nil {
                    #expect(made.map(Self.bits) ?? (0, 0) == Self.bits(String(decoding: two, as: UTF8.self)))
                } else {
                    #expect(made == nil, "\(two)")
                }
            }
        }
        // Invalid sequences anywhere in the fifteen bytes, behind ASCII that passes the word test.
        for bad: [UInt8] in [
            [0x80], [0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82],
        ] {
            for before in 0...(SmallString.capacity - bad.count) {
                let bytes = Array(repeating: UInt8(ascii: "a"), count: before) + bad
                #expect(UTF8Validation.string(bytes.span) == nil, "\(bytes)")
            }
        }
    }

    @Test func longerStringsTakeTheStandardPath() {
        for count in 16...40 {
            let text = Array(repeating: UInt8(ascii: "q"), count: count - 2) + Array("é".utf8)
            let made = UTF8Validation.string(text.backDeployedSpan)
            #expect(made == String(decoding: text, as: UTF8.self))
        }
    }
}
