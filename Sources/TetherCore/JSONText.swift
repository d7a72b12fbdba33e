/// Writing JSON text (RFC 8259) into byte buffers: string escaping and number formatting shared by
/// the SignalR JSON hub protocol, its handshake and the `tether` CLI.
public enum JSONText {
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `string` as a JSON string literal (quotes included) to `output`.
    ///
    /// Escapes `"`, `\` and the control characters below U+0020 (`\n`, `\r`, `\t`, `\b`, `\f` in
    /// their short forms, the others as `\u00XX`); everything else is written as UTF-8.
    public static func appendString(_ string: String, to output: inout [UInt8]) {
        appendString(utf8: string.utf8.span, to: &output)
    }

    /// Appends the UTF-8 text `utf8` as a JSON string literal (quotes included) to `output`.
    public static func appendString(utf8: Span<UInt8>, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var runStart = 0
        var index = 0
        let count = utf8.count
        while index < count {
            index = endOfUnescapedRun(utf8, from: index)
            guard index < count else { break }
            if runStart < index { output.append(copying: utf8.extracting(runStart..<index)) }
            appendEscape(for: utf8[index], to: &output)
            index += 1
            runStart = index
        }
        if runStart < count { output.append(copying: utf8.extracting(runStart..<count)) }
        output.append(UInt8(ascii: "\""))
    }

    /// The offset of the first byte at or after `start` that a JSON string must escape (`"`,
    /// `\`, a control character), or the end: eight bytes per step.
    @inline(__always)
    static func endOfUnescapedRun(_ utf8: Span<UInt8>, from start: Int) -> Int {
        let count = utf8.count
        var index = start
        let quotes = ByteScanning.ones &* 0x22
        let backslashes = ByteScanning.ones &* 0x5C
        while index + 8 <= count {
            let word = ByteScanning.loadWord(utf8, index)
            let mask =
                ByteScanning.zeroMask(word ^ quotes) | ByteScanning.zeroMask(word ^ backslashes)
                | ByteScanning.lessThanMask(word, 0x20)
            if mask != 0 { return index + mask.trailingZeroBitCount >> 3 }
            index += 8
        }
        while index < count {
            let byte = utf8[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return index }
            index += 1
        }
        return count
    }

    @inline(never)
    private static func appendEscape(for byte: UInt8, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): output.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\"))
        case 0x0A: output.append(UInt8(ascii: "n"))
        case 0x0D: output.append(UInt8(ascii: "r"))
        case 0x09: output.append(UInt8(ascii: "t"))
        case 0x08: output.append(UInt8(ascii: "b"))
        case 0x0C: output.append(UInt8(ascii: "f"))
        default:
            output.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            output.append(hexDigits[Int(byte >> 4)])
            output.append(hexDigits[Int(byte & 0x0F)])
        }
    }

    /// Appends the decimal form of `value` to `output`.
    public static func appendInteger(_ value: Int64, to output: inout [UInt8]) {
        if value < 0 {
            output.append(UInt8(ascii: "-"))
            appendInteger(value.magnitude, to: &output)
        } else {
            appendInteger(UInt64(value), to: &output)
        }
    }

    /// Appends the decimal form of `value` to `output`.
    public static func appendInteger(_ value: UInt64, to output: inout [UInt8]) {
        if value < 10 {
            output.append(UInt8(ascii: "0") &+ UInt8(value))
            return
        }
        var digits: InlineArray<20, UInt8> = .init(repeating: 0)
        var remaining = value
        var count = 0
        while remaining > 0 {
            digits[19 - count] = UInt8(ascii: "0") &+ UInt8(remaining % 10)
            remaining /= 10
            count += 1
        }
        for index in (20 - count)..<20 { output.append(digits[index]) }
    }

    /// Appends the shortest round-tripping decimal form of a finite `value` to `output`.
    ///
    /// Integral values within ±2^53 are written without a fraction (`1`, not `1.0`), as
    /// JavaScript and System.Text.Json do. Precondition: `value` is finite.
    public static func appendDouble(_ value: Double, to output: inout [UInt8]) {
        precondition(value.isFinite, "JSON cannot represent \(value)")
        if value.magnitude <= 9_007_199_254_740_992, Double(Int64(value)) == value {
            appendInteger(Int64(value), to: &output)
            if value == 0, value.sign == .minus {
                // Keep negative zero distinguishable, as JavaScript's JSON.stringify does not.
                output.removeLast()
                output.append(contentsOf: [UInt8(ascii: "-"), UInt8(ascii: "0")])
            }
            return
        }
        output.append(contentsOf: value.description.utf8)
    }

    /// Appends the shortest round-tripping decimal form of a finite `value` to `output`.
    public static func appendFloat(_ value: Float, to output: inout [UInt8]) {
        precondition(value.isFinite, "JSON cannot represent \(value)")
        if value.magnitude <= 16_777_216, Float(Int64(value)) == value {
            appendInteger(Int64(value), to: &output)
            return
        }
        output.append(contentsOf: value.description.utf8)
    }
}
