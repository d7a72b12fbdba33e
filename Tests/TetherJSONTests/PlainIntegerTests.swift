import Testing
import TetherCore

@testable import TetherJSON

/// `JSONScanner.plainInteger` (eight digits at a time where eight bytes can be read, then one at
/// a time) against a plain reading of the same text: every digit count, signs, what may follow,
/// and every distance to the end of the input.
struct PlainIntegerTests {
    /// The reference: `-`? then 1...18 digits not followed by `.`, `e`, `E` or a further digit.
    static func reference(_ bytes: [UInt8], _ start: Int, _ end: Int) -> (Int64, Int)? {
        var index = start
        let negative = index < end && bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let digits = index
        while index < end, index - digits < 18, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
            index += 1
        }
        guard index > digits else { return nil }
        if index < end,
            [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index])
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index])
        {
            return nil
        }
        let magnitude = Int64(String(decoding: bytes[digits..<index], as: UTF8.self))!
        return (negative ? -magnitude : magnitude, index)
    }

    @Test func everyDigitCountAndEnding() {
        var rng = SeededRandomNumberGenerator(seed: 7159)
        let endings = ["", ",", "}", "]", " ", ".5", "e3", "E-1", "0", ",\"next\":12345678901"]
        for count in 1...20 {
            for _ in 0..<40 {
                var digits = (0..<count).map { _ in UInt8(ascii: "0") + UInt8.random(in: 0...9, using: &rng) }
                if Bool.random(using: &rng) { digits[0] = UInt8(ascii: "1") }
                for sign in ["", "-"] {
                    for ending in endings {
                        let bytes = Array(sign.utf8) + digits + Array(ending.utf8)
                        for end in [bytes.count, sign.utf8.count + count, max(bytes.count - 1, 0)] {
                            let found = JSONScanner.plainInteger(bytes.backDeployedSpan, 0, end)
                            let expected = Self.reference(bytes, 0, end)
                            #expect(found?.0 == expected?.0 && found?.1 == expected?.1, "\(bytes) end \(end)")
                        }
                    }
                }
            }
        }
        #expect(JSONScanner.plainInteger(Array("-".utf8).span, 0, 1) == nil)
        #expect(JSONScanner.plainInteger(Array("x12345678".utf8).span, 0, 9) == nil)
        #expect(JSONScanner.plainInteger(Array("123456789012345678".utf8).span, 0, 18)?.0 == 123_456_789_012_345_678)
    }
}
