#ifndef TETHER_TEXT_H
#define TETHER_TEXT_H

// Text kernels for the decoders, written with Clang's portable vector extensions
// (`vector_size`), which become SSE2 on x86-64 and NEON on ARM64 from one source, without
// intrinsics. (Swift's SIMD types would do, but their comparison operators are compiled lane by
// lane.) On x86-64 processors with AVX-512BW, 64-byte forms of the UTF-8 check and of the JSON
// string kernels are chosen at run time (cpu.c, Specs/text-kernels.md). Inline functions here
// are inlined into their Swift callers.

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "CTetherText assumes a little-endian target"
#endif

/// Whether the kernels use their 64-byte forms (x86-64 with AVX-512BW, detected at first use,
/// unless tether_allow_wide_vectors(0) was called); otherwise the portable ones (SSE2 on x86-64,
/// NEON on ARM64). Both forms give the same results.
int tether_wide_vectors(void);

/// Whether this processor and operating system can run the 64-byte forms.
int tether_has_wide_vectors(void);

/// Process-wide: 0 keeps the portable forms; non-zero uses the 64-byte forms where the processor
/// has them (the default). Call it before decoding starts (a decode in flight keeps its form).
void tether_allow_wide_vectors(int allowed);

/// What tether_utf8_check found.
typedef enum {
    /// Valid UTF-8, every byte ASCII.
    tether_utf8_ascii = 0,
    /// Valid UTF-8 with at least one multi-byte sequence.
    tether_utf8_multibyte = 1,
    /// Not valid UTF-8 (RFC 3629).
    tether_utf8_invalid = 2,
} tether_utf8_outcome;

/// Checks `count` bytes at `bytes` (which may be null when `count` is 0). Reads only
/// bytes[0..<count].
tether_utf8_outcome tether_utf8_check(const uint8_t *bytes, size_t count);

/// `tether_utf8_check` in the given form: the 64-byte one if `wide` and the processor has it
/// (`tether_has_wide_vectors`), else the portable one. For tests that hold the two to each other.
tether_utf8_outcome tether_utf8_check_using(const uint8_t *bytes, size_t count, int wide);

/// Validates the JSON value (RFC 8259) at bytes[start...], whitespace before it allowed, nested at
/// most `maximum_depth` containers deep (the value itself is at depth 0), and returns the offset
/// just after it, or SIZE_MAX if bytes[start..<end] does not begin with such a value. Strings
/// are checked for escapes, control characters and UTF-8. `stack` must hold at least
/// min(maximum_depth, end - start) / 64 + 1 words.
size_t tether_json_skip_value(const uint8_t *bytes, size_t start, size_t end, size_t maximum_depth, uint64_t *stack);

/// `tether_json_skip_value` in the given form, as `tether_utf8_check_using`.
size_t tether_json_skip_value_using(
    const uint8_t *bytes, size_t start, size_t end, size_t maximum_depth, uint64_t *stack, int wide);

/// In a JSON string that has been validated (`tether_json_skip_value`), from the backslash at
/// `start`: the offset of the closing quote, or `end` if there is none before it. Sets
/// `*has_high` if a byte passed on the way is not ASCII (leaves it alone otherwise). Reads only
/// bytes[start..<end].
size_t tether_json_validated_string_end(const uint8_t *bytes, size_t start, size_t end, int *has_high);

/// `tether_json_validated_string_end` in the given form, as `tether_utf8_check_using`.
size_t tether_json_validated_string_end_using(const uint8_t *bytes, size_t start, size_t end, int *has_high, int wide);

/// The offset of the first `byte` in bytes[start..<end], or `end`.
static inline size_t tether_find_byte(const uint8_t *bytes, size_t start, size_t end, uint8_t byte) {
    if (start >= end) return end;
    const uint8_t *found = (const uint8_t *)memchr(bytes + start, byte, end - start);
    return found ? (size_t)(found - bytes) : end;
}

#endif
