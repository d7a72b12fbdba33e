@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

/// Writing JSON text (RFC 8259) into byte buffers: string escaping and number formatting shared by
/// the SignalR JSON hub protocol, its handshake and the `tether` CLI.
public enum JSONText {
    /// Appends `string` as a JSON string literal (quotes included) to `output`.
    ///
    /// Escapes `"`, `\` and the control characters below U+0020 (`\n`, `\r`, `\t`, `\b`, `\f` in
    /// their short forms, the others as `\u00XX`); everything else is written as UTF-8.
    public static func appendString(_ string: String, to output: inout [UInt8]) {
        string.withUTF8Span { appendString(utf8: $0, to: &output) }
    }

    /// Appends the UTF-8 text `utf8` as a JSON string literal (quotes included) to `output`.
    ///
    /// Written into reserved space: room for the text as it is, both quotes and `escapeSlack`
    /// bytes for what escapes add, so that a string with a few escapes (such as a JSON document
    /// carried in a string) costs one reservation; when an escape would not fit, what is written
    /// so far is kept and the rest goes into a new reservation.
    public static func appendString(utf8: Span<UInt8>, to output: inout [UInt8]) {
        let count = utf8.count
        var index = 0
        var opened = false
        var closed = false
        while !closed {
            output.append(addingCapacity: count - index + 2 + escapeSlack) { span in
                unsafe span.withUnsafeMutableBufferPointer { buffer, initialized in
                    let target = buffer.baseAddress!
                    var out = initialized
                    if !opened {
                        unsafe target[out] = UInt8(ascii: "\"")
                        out += 1
                        opened = true
                    }
                    while index < count {
                        let end = endOfUnescapedRun(utf8, from: index)
                        if end > index {
                            unsafe utf8.withUnsafeBufferPointer { source in
                                unsafe (target + out).initialize(from: source.baseAddress! + index, count: end - index)
                            }
                            out += end - index
                            index = end
                        }
                        guard index < count else { break }
                        // The rest of the input as it is, this escape (at most six bytes for one)
                        // and the closing quote must still fit.
                        guard buffer.count - out >= count - index + 6 else { break }
                        out += unsafe writeEscape(for: utf8[index], at: target + out)
                        index += 1
                    }
                    if index == count {
                        unsafe target[out] = UInt8(ascii: "\"")
                        out += 1
                        closed = true
                    }
                    initialized = out
                }
            }
        }
    }

    /// Bytes reserved beyond the text for what its escapes add (one for `\"`, five for `\u0001`).
    static let escapeSlack = 32

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

    /// Writes the escape for `byte` (`"`, `\` or a control character) at `target`, which has
    /// room for six bytes; returns its length.
    @inline(__always)
    private static func writeEscape(for byte: UInt8, at target: UnsafeMutablePointer<UInt8>) -> Int {
        unsafe target[0] = UInt8(ascii: "\\")
        let short: UInt8
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): short = byte
        case 0x0A: short = UInt8(ascii: "n")
        case 0x0D: short = UInt8(ascii: "r")
        case 0x09: short = UInt8(ascii: "t")
        case 0x08: short = UInt8(ascii: "b")
        case 0x0C: short = UInt8(ascii: "f")
        default:
            let hex: StaticString = "0123456789abcdef"
            unsafe target[1] = UInt8(ascii: "u")
            unsafe target[2] = UInt8(ascii: "0")
            unsafe target[3] = UInt8(ascii: "0")
            unsafe target[4] = unsafe hex.utf8Start[Int(byte >> 4)]
            unsafe target[5] = unsafe hex.utf8Start[Int(byte & 0x0F)]
            return 6
        }
        unsafe target[1] = short
        return 2
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

    /// Appends the decimal form of `value` to `output`: the digits are counted, reserved in one
    /// piece and formed from the right in place.
    public static func appendInteger(_ value: UInt64, to output: inout [UInt8]) {
        if value < 10 {
            output.append(UInt8(ascii: "0") &+ UInt8(value))
            return
        }
        var length = 1
        var power: UInt64 = 10
        while length < 20 && value >= power {
            length += 1
            power = power &* 10
        }
        output.append(addingCapacity: length) { span in
            for _ in 0..<length { span.append(0) }
            var digits = span.mutableSpan
            var remaining = value
            for index in (0..<length).reversed() {
                digits[index] = UInt8(ascii: "0") &+ UInt8(remaining % 10)
                remaining /= 10
            }
        }
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
