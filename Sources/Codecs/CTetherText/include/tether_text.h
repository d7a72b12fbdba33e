#ifndef TETHER_TEXT_H
#define TETHER_TEXT_H

// Text kernels for the decoders, written with Clang's portable vector extensions
// (`vector_size`), which become SSE2 on x86-64 and NEON on ARM64 from one source, without
// intrinsics. (Swift's SIMD types would do, but their comparison operators are compiled lane by
// lane.) On x86-64, 32-byte forms (AVX2) and 64-byte forms (AVX-512BW) of the UTF-8 check and
// of the JSON string kernels are chosen at run time, the widest the processor has (cpu.c,
// Specs/text-kernels.md). Inline functions here are inlined into their Swift callers.

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "CTetherText assumes a little-endian target"
#endif

/// The forms of the kernels, narrowest first; all give the same results.
typedef enum {
    /// 16-byte vectors: SSE2 on x86-64, NEON on ARM64.
    tether_form_portable = 0,
    /// 32-byte vectors (x86-64 with AVX2).
    tether_form_avx2 = 1,
    /// 64-byte vectors (x86-64 with AVX-512BW).
    tether_form_avx512 = 2,
} tether_kernel_form;

/// The widest form this processor and operating system can run (detected at first use).
int tether_best_vector_form(void);

/// The form the kernels run in: `tether_best_vector_form()` unless `tether_use_vector_form`
/// narrowed it.
int tether_vector_form(void);

/// Process-wide: the kernels run in `form`, or the widest this processor has if it has not that
/// one. Call it before decoding starts (a decode in flight keeps its form).
void tether_use_vector_form(int form);

/// The form a kernel asked for `form` really runs in: `form` if the processor has it, else the
/// widest it has.
int tether_runnable_form(int form);

/// Whether the kernels run in a form wider than the portable one.
int tether_wide_vectors(void);

/// Whether this processor and operating system can run a form wider than the portable one.
int tether_has_wide_vectors(void);

/// Process-wide: 0 keeps the portable forms; non-zero uses the widest the processor has (the
/// default).
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

/// `tether_utf8_check` in the given form (`tether_kernel_form`; `tether_runnable_form` says which
/// runs). For tests that hold the forms to each other.
tether_utf8_outcome tether_utf8_check_using(const uint8_t *bytes, size_t count, int form);

/// Validates the JSON value (RFC 8259) at bytes[start...], whitespace before it allowed, nested at
/// most `maximum_depth` containers deep (the value itself is at depth 0), and returns the offset
/// just after it, or SIZE_MAX if bytes[start..<end] does not begin with such a value. Strings
/// are checked for escapes, control characters and UTF-8. `stack` must hold at least
/// min(maximum_depth, end - start) / 64 + 1 words.
size_t tether_json_skip_value(const uint8_t *bytes, size_t start, size_t end, size_t maximum_depth, uint64_t *stack);

/// `tether_json_skip_value` in the given form, as `tether_utf8_check_using`.
size_t tether_json_skip_value_using(
    const uint8_t *bytes, size_t start, size_t end, size_t maximum_depth, uint64_t *stack, int form);

/// In a JSON string that has been validated (`tether_json_skip_value`), from the backslash at
/// `start`: the offset of the closing quote, or `end` if there is none before it. Sets
/// `*has_high` if a byte passed on the way is not ASCII (leaves it alone otherwise). Reads only
/// bytes[start..<end].
size_t tether_json_validated_string_end(const uint8_t *bytes, size_t start, size_t end, int *has_high);

/// `tether_json_validated_string_end` in the given form, as `tether_utf8_check_using`.
size_t tether_json_validated_string_end_using(const uint8_t *bytes, size_t start, size_t end, int *has_high, int form);

/// In a JSON string that has been validated (`tether_json_skip_value`), from `start` (in its
/// contents): decodes the contents up to the closing quote into `out + *written`, advancing
/// `*written`, and returns the quote's offset; `end` if the quote, or the whole of an escape, is
/// not before `end` (then what was written is to be dropped). Escapes are decoded as
/// `JSONScanner.unescape` does (a lone surrogate becomes U+FFFD). Sets `*has_high` if a byte
/// written is not ASCII (leaves it alone otherwise). Reads only bytes[start..<end]; `out` must
/// have room for `end - start + 16` bytes past `*written` (text is copied 16 bytes per store).
size_t tether_json_unescape_validated(
    const uint8_t *bytes, size_t start, size_t end, uint8_t *out, size_t *written, int *has_high);

/// `tether_json_unescape_validated` in the given form, as `tether_utf8_check_using`; in the
/// 64-byte form with AVX-512 VBMI2's byte compress if `compress` is not 0 and the processor has
/// it (`tether_has_vbmi2`), otherwise one escape at a time (as the other forms).
size_t tether_json_unescape_validated_using(
    const uint8_t *bytes, size_t start, size_t end, uint8_t *out, size_t *written, int *has_high, int form,
    int compress);

/// Whether the processor has the 64-byte form and AVX-512 VBMI2 (whose byte compress
/// `tether_json_unescape_validated` uses there).
int tether_has_vbmi2(void);

/// The offset of the first `byte` in bytes[start..<end], or `end`.
static inline size_t tether_find_byte(const uint8_t *bytes, size_t start, size_t end, uint8_t byte) {
    if (start >= end) return end;
    const uint8_t *found = (const uint8_t *)memchr(bytes + start, byte, end - start);
    return found ? (size_t)(found - bytes) : end;
}

#endif
