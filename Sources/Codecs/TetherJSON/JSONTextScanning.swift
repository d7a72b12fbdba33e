@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

/// The word-at-a-time scans of JSON string contents (see `ByteScanning` for the technique):
/// eight bytes per step, the lowest match of each step's mask exact.
package enum JSONTextScanning {
    /// The offset of the first `"` or `\` in `span[start..<end]`, or `end`: the end of a run of
    /// an already validated JSON string; and the bytes before it OR-ed together, whose high bits
    /// say whether the run is ASCII (the words are loaded anyway; strings made of the run are
    /// then marked ASCII or not).
    @inline(__always)
    static func endOfValidatedJSONText(
        in span: Span<UInt8>,
        from start: Int,
        to end: Int
    ) -> (end: Int, bytes: UInt64) {
        precondition(start >= 0 && end <= span.count, "range outside the span")
        var index = start
        let quote = ByteScanning.ones &* 0x22
        let backslash = ByteScanning.ones &* 0x5C
        var seen: UInt64 = 0
        while index + 8 <= end {
            let word = ByteScanning.loadWord(span, index)
            let mask = ByteScanning.zeroMask(word ^ quote) | ByteScanning.zeroMask(word ^ backslash)
            if mask != 0 {
                // Only the bytes before the stop count.
                return (
                    index + mask.trailingZeroBitCount >> 3,
                    seen | word & ((1 << UInt64(mask.trailingZeroBitCount)) &- 1)
                )
            }
            seen |= word
            index += 8
        }
        while index < end {
            let byte = span[index]
            if byte == 0x22 || byte == 0x5C { break }
            seen |= UInt64(byte)
            index += 1
        }
        return (index, seen)
    }

    /// The offset of the first `"` or `\` in `span[start..<end]` (or `end`), and whether the
    /// bytes before it include control characters (below 0x20) or non-ASCII bytes: one pass for
    /// the run of a JSON string that is being validated.
    @inline(__always)
    package static func scanJSONText(
        in span: Span<UInt8>,
        from start: Int,
        to end: Int
    ) -> (end: Int, hasControlCharacters: Bool, hasNonASCII: Bool) {
        precondition(start >= 0 && end <= span.count, "range outside the span")
        var index = start
        let quote = ByteScanning.ones &* 0x22
        let backslash = ByteScanning.ones &* 0x5C
        var control: UInt64 = 0
        var high: UInt64 = 0
        while index + 8 <= end {
            let word = ByteScanning.loadWord(span, index)
            let stop = ByteScanning.zeroMask(word ^ quote) | ByteScanning.zeroMask(word ^ backslash)
            if stop != 0 {
                // Only the bytes before the stop byte count.
                let keep = (UInt64(1) << UInt64(stop.trailingZeroBitCount)) &- 1
                control |= ByteScanning.lessThanMask(word, 0x20) & keep
                high |= word & ByteScanning.highs & keep
                return (index + stop.trailingZeroBitCount >> 3, control != 0, high != 0)
            }
            control |= ByteScanning.lessThanMask(word, 0x20)
            high |= word & ByteScanning.highs
            index += 8
        }
        var tailControl = false
        while index < end {
            let byte = span[index]
            if byte == 0x22 || byte == 0x5C { break }
            if byte < 0x20 { tailControl = true }
            if byte >= 0x80 { high |= 0x80 }
            index += 1
        }
        return (index, control != 0 || tailControl, high != 0)
    }
}
