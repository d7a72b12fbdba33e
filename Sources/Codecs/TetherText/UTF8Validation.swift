internal import CTetherText
@_spi(TetherInternal) import TetherCore

/// UTF-8 validation sixteen bytes per step: the check behind every string the decoders create.
///
/// The work is done by `tether_utf8_check` (C target `CTetherText`), written once with the
/// compiler's portable vector types, which become SSE2 on x86-64 and NEON on ARM64. (The same
/// method in Swift's `SIMD16` runs lane by lane: its comparison operators are not compiled to
/// vector instructions.) Each byte is checked against the three bytes before it, sixteen lanes
/// at once:
/// - a byte is a continuation byte (`10xxxxxx`) exactly when the byte before it starts a
///   sequence of two or more bytes, or the one two before starts one of three or more, or the
///   one three before starts one of four (so a sequence cut short, a stray continuation byte,
///   or two sequences overlapping all fail);
/// - `C0`, `C1` and `F5`…`FF` never occur;
/// - the byte after `E0` is at least `A0` (no overlong three-byte forms), after `ED` at most
///   `9F` (no surrogates), after `F0` at least `90` (no overlong four-byte forms), after `F4`
///   at most `8F` (nothing above U+10FFFF).
/// These are the rules of RFC 3629 §4. No read leaves the input: an input shorter than a block
/// is gathered with overlapping word loads into one zero-extended block (a sequence cut off by
/// the end then fails on the zero lanes); the first block of a longer input gets its three bytes
/// of context as zeros by a lane shift; the last, partial block overlaps the one before it, with
/// the lanes checked there masked off, and a sequence cut off by the end shows in the last three
/// bytes. Blocks of ASCII text skip the checks. The tests hold the verdict to the standard
/// library's validator on every one- and two-byte input, every three- and four-byte sequence
/// over the boundary values of each byte, and mutated text at every alignment; the fuzz target
/// on every input it makes, in an allocation of exactly its size under AddressSanitizer.
@_spi(TetherInternal) public enum UTF8Validation {
    /// What `check` found.
    public enum Outcome: Sendable, Equatable {
        /// Valid, and every byte is ASCII.
        case ascii
        /// Valid, with at least one multi-byte sequence.
        case multibyte
        /// Not valid UTF-8.
        case invalid
    }

    /// Whether `bytes` are valid UTF-8, and whether they are all ASCII.
    public static func check(_ bytes: Span<UInt8>) -> Outcome {
        let outcome = unsafe bytes.withUnsafeBufferPointer { buffer in
            unsafe tether_utf8_check(buffer.baseAddress, buffer.count)
        }
        switch outcome {
        case tether_utf8_ascii: return .ascii
        case tether_utf8_multibyte: return .multibyte
        default: return .invalid
        }
    }

    /// Which form of the C kernels runs (`TextKernels.form`).
    package static var kernelForm: KernelForm { TextKernels.form }

    /// The forms this processor really runs (`TextKernels.runnableForms`): asked for a form it
    /// lacks, the kernels run the widest it has, so a test that went through `allCases` there
    /// would test one form twice under two names. Tests go through these and say which ran.
    package static var runnableForms: [KernelForm] { TextKernels.runnableForms }

    /// Which forms of the text kernels ran, in a sentence (for a test run's summary).
    package static var runnableFormsText: String {
        let ran = runnableForms.map(\.description).joined(separator: ", ")
        let missing = KernelForm.allCases.filter { !runnableForms.contains($0) }
        #if arch(x86_64)
            return "text kernels tested in every form this processor runs: \(ran)"
                + (missing.isEmpty
                    ? ""
                    : " (not \(missing.map(\.description).joined(separator: ", ")): this processor lacks it)")
        #else
            return "text kernels tested in the portable form (\(ran)); the x86-64 forms run on x86-64 only"
        #endif
    }

    /// The forms of the C text kernels (`CTetherText`), which must give the same results.
    package typealias KernelForm = TextKernels.Form

    /// `check(_:)` with the given form of the kernel, for tests that hold the forms to each other.
    package static func check(_ bytes: Span<UInt8>, form: KernelForm) -> Outcome {
        let outcome = unsafe bytes.withUnsafeBufferPointer { buffer in
            unsafe tether_utf8_check_using(buffer.baseAddress, buffer.count, Int32(form.rawValue))
        }
        switch outcome {
        case tether_utf8_ascii: return .ascii
        case tether_utf8_multibyte: return .multibyte
        default: return .invalid
        }
    }

    /// The string made of `bytes`, or nil if they are not valid UTF-8.
    public static func string(_ bytes: Span<UInt8>) -> String? {
        let count = bytes.count
        if count <= SmallString.capacity && SmallString.isAvailable {
            // Short strings: one inline ASCII test on the loaded words; only text with other
            // bytes goes to the full check.
            return unsafe bytes.withUnsafeBytes { buffer -> String? in
                guard let base = buffer.baseAddress else { return "" }
                let words = unsafe SmallString.words(base, count: count)
                guard SmallString.isASCII(words) || check(bytes) != .invalid else { return nil }
                return SmallString.makeFromWords(words, count: count)
            }
        }
        let outcome = check(bytes)
        guard outcome != .invalid else { return nil }
        return String(validatedUTF8: bytes, isASCII: outcome == .ascii)
    }

    /// The string made of `bytes`, which the caller has validated as UTF-8 (all ASCII if
    /// `isASCII`; false is always safe).
    package static func string(validated bytes: Span<UInt8>, isASCII: Bool) -> String {
        let count = bytes.count
        if count <= SmallString.capacity && SmallString.isAvailable {
            return unsafe bytes.withUnsafeBytes { buffer in
                guard let base = buffer.baseAddress else { return "" }
                return unsafe SmallString.make(base, count: count)
            }
        }
        return String(validatedUTF8: bytes, isASCII: isASCII)
    }
}
