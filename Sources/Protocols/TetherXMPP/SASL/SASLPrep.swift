/// SASLprep (RFC 4013), the string preparation SCRAM applies to user names and passwords.
///
/// Implemented: the mapping (non-ASCII spaces to U+0020, "commonly mapped to nothing" characters
/// removed) and the prohibited output (controls, private use, non-characters, surrogates,
/// characters inappropriate for plain text or canonical representation, display-changing and
/// tagging characters). Not implemented: NFKC normalisation and the bidirectional check, which
/// need Unicode tables the pure modules do not carry; names and passwords already in NFKC (all
/// ASCII ones, and most others as typed) prepare identically (decision in `Specs/xmpp/sasl.md`).
public enum SASLPrep {
    /// The prepared string, or nil if it contains a prohibited character.
    public static func prepare(_ string: String) -> String? {
        if string.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return string }
        var result = String.UnicodeScalarView()
        for scalar in string.unicodeScalars {
            if isMappedToNothing(scalar.value) { continue }
            if isNonASCIISpace(scalar.value) {
                result.append(" ")
                continue
            }
            if isProhibited(scalar.value) { return nil }
            result.append(scalar)
        }
        return String(result)
    }

    /// RFC 3454 table B.1.
    static func isMappedToNothing(_ value: UInt32) -> Bool {
        switch value {
        case 0x00AD, 0x034F, 0x1806, 0x180B...0x180D, 0x200B...0x200D, 0x2060, 0xFE00...0xFE0F, 0xFEFF: true
        default: false
        }
    }

    /// RFC 3454 table C.1.2.
    static func isNonASCIISpace(_ value: UInt32) -> Bool {
        switch value {
        case 0x00A0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: true
        default: false
        }
    }

    /// RFC 3454 tables C.2.1–C.9 (C.5, surrogates, cannot occur in a Swift string).
    static func isProhibited(_ value: UInt32) -> Bool {
        switch value {
        case 0x0000...0x001F, 0x007F: true  // C.2.1
        case 0x0080...0x009F, 0x06DD, 0x070F, 0x180E, 0x200C, 0x200D, 0x2028, 0x2029, 0x2060...0x2063,
            0x206A...0x206F, 0xFEFF, 0xFFF9...0xFFFC, 0x1D173...0x1D17A:
            true  // C.2.2
        case 0xE000...0xF8FF, 0xF0000...0xFFFFD, 0x100000...0x10FFFD: true  // C.3
        case 0xFDD0...0xFDEF: true  // C.4
        case _ where value & 0xFFFE == 0xFFFE: true  // C.4: U+xFFFE and U+xFFFF in every plane
        case 0xFFFD: true  // C.6
        case 0x2FF0...0x2FFB: true  // C.7
        case 0x0340, 0x0341, 0x200E, 0x200F, 0x202A...0x202E: true  // C.8
        case 0xE0001, 0xE0020...0xE007F: true  // C.9
        default: false
        }
    }
}
