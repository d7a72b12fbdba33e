@_spi(TetherInternal) import TetherCore

/// Strings of up to fifteen UTF-8 bytes built directly in their inline form.
///
/// Swift keeps such strings inside the `String` value itself (a "small string", no allocation).
/// On 64-bit platforms the value's two words hold the bytes in memory order, and the top byte of
/// the second word is a discriminator — `0xE0` if every byte is ASCII, `0xA0` otherwise — or'd
/// with the byte count. The standard library builds them with a generic copy loop behind a
/// non-inlinable call (about a hundred instructions for a short name); the decoders make five or
/// more per message, so they build them here from two word loads instead (about fifteen).
///
/// The layout is part of the standard library's ABI on Apple platforms (inlinable code compiled
/// into apps reads it), but nothing promises it elsewhere, so it is checked before first use:
/// `isAvailable` compares the bits this type computes with those of strings the standard library
/// makes, for every length and for ASCII and non-ASCII text; on any difference (another word size,
/// byte order or flag) the decoders use `String(copying:)` for good. No `String` is ever formed
/// from bits that were not verified this way. Decision and measurements: `Specs/text-kernels.md`.
package enum SmallString {
    /// The longest string in the inline form (bytes).
    package static let capacity = 15

    /// Whether this platform's `String` layout matched the one assumed here.
    package static let isAvailable: Bool = verifyLayout()

    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// The string made of `count` (≤ `capacity`) bytes at `base`, which must be valid UTF-8.
    /// Reads only those bytes. Precondition: `isAvailable`.
    @inline(__always)
    package static func make(_ base: UnsafeRawPointer, count: Int) -> String {
        unsafe makeFromWords(words(base, count: count), count: count)
    }

    /// The bytes as two little-endian words: bytes 0–7 and 8–14, zero-filled.
    @inline(__always)
    package static func words(_ base: UnsafeRawPointer, count: Int) -> (UInt64, UInt64) {
        // Overlapping loads that stay inside the `count` bytes; the overlapping bytes are equal,
        // so or-ing the shifted halves places each byte once.
        if count >= 8 {
            let low = unsafe load64(base, 0)
            let high = count == 8 ? 0 : unsafe load64(base, count - 8) &>> UInt64(8 * (16 - count))
            return (low, high)
        }
        if count >= 4 {
            let first = UInt64(unsafe load32(base, 0))
            let last = UInt64(unsafe load32(base, count - 4))
            return (first | last &<< UInt64(8 * (count - 4)), 0)
        }
        if count == 0 { return (0, 0) }
        let first = UInt64(unsafe base.load(fromByteOffset: 0, as: UInt8.self))
        let middle = UInt64(unsafe base.load(fromByteOffset: count >> 1, as: UInt8.self))
        let last = UInt64(unsafe base.load(fromByteOffset: count - 1, as: UInt8.self))
        return (first | middle &<< UInt64(8 * (count >> 1)) | last &<< UInt64(8 * (count - 1)), 0)
    }

    /// Whether the bytes in `words` are all ASCII.
    @inline(__always)
    package static func isASCII(_ words: (UInt64, UInt64)) -> Bool {
        (words.0 | words.1) & highs == 0
    }

    /// The string whose bytes are `words` (from `words(_:count:)`), which must be valid UTF-8.
    @inline(__always)
    package static func makeFromWords(_ words: (UInt64, UInt64), count: Int) -> String {
        let raw = rawBits(words, count: count)
        return unsafe unsafeBitCast(raw, to: String.self)
    }

    /// The two words of the `String` value for the bytes in `words`.
    @inline(__always)
    static func rawBits(_ words: (UInt64, UInt64), count: Int) -> (UInt64, UInt64) {
        let discriminator: UInt64 = isASCII(words) ? 0xE0 : 0xA0
        return (words.0, words.1 | (discriminator | UInt64(count)) &<< 56)
    }

    @inline(__always)
    private static func load64(_ base: UnsafeRawPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: unsafe base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always)
    private static func load32(_ base: UnsafeRawPointer, _ offset: Int) -> UInt32 {
        UInt32(littleEndian: unsafe base.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    /// Compares `rawBits` with the standard library's own strings: every length from 0 to 15,
    /// ASCII and non-ASCII (two- and three-byte sequences at the start, middle and end), made
    /// both by `String(decoding:as:)` and the copy of validated bytes (`String(copying:)` where
    /// the system has it).
    static func verifyLayout() -> Bool {
        guard MemoryLayout<String>.size == 16, MemoryLayout<(UInt64, UInt64)>.size == 16 else { return false }
        var samples: [[UInt8]] = []
        for count in 0...capacity {
            samples.append((0..<count).map { UInt8(ascii: "a") + UInt8($0) })
            if count >= 2 {
                samples.append([0xC3, 0xA9] + Array(repeating: UInt8(ascii: "z"), count: count - 2))
                samples.append(Array(repeating: UInt8(ascii: "~"), count: count - 2) + [0xD0, 0x96])
            }
            if count >= 5 {
                let middle = (count - 3) / 2
                samples.append(
                    Array(repeating: UInt8(ascii: "0"), count: middle) + [0xE2, 0x82, 0xAC]
                        + Array(repeating: UInt8(ascii: "1"), count: count - 3 - middle)
                )
            }
        }
        for sample in samples {
            let computed = unsafe sample.withUnsafeBytes { buffer in
                guard let base = buffer.baseAddress else { return rawBits((0, 0), count: 0) }
                return unsafe rawBits(words(base, count: sample.count), count: sample.count)
            }
            let decoded = String(decoding: sample, as: UTF8.self)
            let copied = String(validatedUTF8: sample.backDeployedSpan, isASCII: false)
            for string in [decoded, copied] {
                let bits = unsafe unsafeBitCast(string, to: (UInt64, UInt64).self)
                guard bits == computed else { return false }
            }
        }
        return true
    }
}
