internal import CTetherText

/// Byte searches for the hot loops of the text decoders: finding a separator byte (`memchr`),
/// classifying a run of text, and the word-at-a-time (SWAR, eight bytes per step, which beats
/// sixteen-byte vectors on the short runs between a JSON string's escapes) pieces the JSON
/// scanner builds its string scans from (`TetherJSON`'s `JSONTextScanning`).
///
/// Each step loads eight bytes as a little-endian word and computes a mask with the high bit of
/// every byte that matches; the lowest set bit of the mask is exact (the borrow in the
/// subtraction only ever propagates towards higher bytes), so its position is the answer.
@_spi(TetherInternal) public enum ByteScanning {
    @inlinable public static var ones: UInt64 { 0x0101_0101_0101_0101 }
    @inlinable public static var highs: UInt64 { 0x8080_8080_8080_8080 }

    /// High bits set in the bytes of `word` that are zero (exact for the lowest one).
    @inlinable @inline(__always)
    public static func zeroMask(_ word: UInt64) -> UInt64 {
        (word &- ones) & ~word & highs
    }

    /// High bits set in the bytes of `word` below `limit` (≤ 0x80; exact for the lowest one).
    @inlinable @inline(__always)
    public static func lessThanMask(_ word: UInt64, _ limit: UInt8) -> UInt64 {
        (word &- ones &* UInt64(limit)) & ~word & highs
    }

    @inlinable @inline(__always)
    public static func loadWord(_ span: Span<UInt8>, _ offset: Int) -> UInt64 {
        // Callers guarantee offset + 8 <= span.count.
        UInt64(
            littleEndian: unsafe span.withUnsafeBytes {
                unsafe $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            }
        )
    }

    /// The offset of the first `byte` in `span[start..<end]`, or nil. (The C library's `memchr`,
    /// which every platform vectorises; it beat the word-at-a-time loop on the benchmark's
    /// records.)
    public static func firstIndex(of byte: UInt8, in span: Span<UInt8>, from start: Int, to end: Int) -> Int? {
        precondition(start >= 0 && start <= end && end <= span.count, "range outside the span")
        let index = unsafe span.withUnsafeBufferPointer { buffer in
            unsafe tether_find_byte(buffer.baseAddress, start, end, byte)
        }
        return index < end ? index : nil
    }

    /// Whether `span[start..<end]` has control characters (below 0x20) and whether it has bytes
    /// that are not ASCII.
    @inlinable
    public static func textClass(
        in span: Span<UInt8>,
        from start: Int,
        to end: Int
    ) -> (hasControlCharacters: Bool, hasNonASCII: Bool) {
        precondition(start >= 0 && end <= span.count, "range outside the span")
        var control: UInt64 = 0
        var high: UInt64 = 0
        var index = start
        while index + 8 <= end {
            let word = loadWord(span, index)
            control |= lessThanMask(word, 0x20)
            high |= word & highs
            index += 8
        }
        var tailControl = false
        while index < end {
            let byte = span[index]
            if byte < 0x20 { tailControl = true }
            if byte >= 0x80 { high |= 0x80 }
            index += 1
        }
        return (control != 0 || tailControl, high != 0)
    }

}
