// UTF-8 validation sixteen bytes per step, written with Clang's portable vector extensions
// (`vector_size`, `__builtin_shufflevector`): SSE2 on x86-64, NEON on ARM64, plain code
// elsewhere, from one source and without intrinsics; and on x86-64, 32 bytes per step with AVX2
// (`utf8_check_avx2`, the same source at twice the width) and 64 bytes per step with AVX-512BW
// (`utf8_check_wide`), the widest the processor has chosen at run time (cpu.c). The rules
// are those of RFC 3629 §4; see UTF8Validation.swift for the method and the tests that hold it to
// the standard library's validator.

#include "tether_text.h"
#include "form_state.h"
#include "wide.h"

typedef uint8_t bytes16 __attribute__((vector_size(16)));
typedef int8_t mask16 __attribute__((vector_size(16)));

#define SPLAT(x) ((bytes16){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x})

/// `v` moved up by one, two or three lanes, zeros shifted in: the bytes one, two or three
/// positions back, for a block with nothing (or only zeros) in front of it.
#define BACK1(v) __builtin_shufflevector(SPLAT(0), v, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30)
#define BACK2(v) __builtin_shufflevector(SPLAT(0), v, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29)
#define BACK3(v) __builtin_shufflevector(SPLAT(0), v, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28)

static inline bytes16 load16(const uint8_t *p) {
    bytes16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/// Whether any lane of `v` has its high bit set.
static inline int any_high(bytes16 v) {
    uint64_t words[2];
    memcpy(words, &v, sizeof words);
    return ((words[0] | words[1]) & 0x8080808080808080u) != 0;
}

/// The lanes of `current` that break a rule, given the bytes one, two and three positions back.
static inline mask16 broken_rules(bytes16 current, bytes16 back1, bytes16 back2, bytes16 back3) {
    // A byte continues a sequence exactly when a lead byte one, two or three back asks for it.
    mask16 is_continuation = (mask16)((current & SPLAT(0xC0)) == SPLAT(0x80));
    mask16 must_continue =
        (mask16)(back1 >= SPLAT(0xC0)) | (mask16)(back2 >= SPLAT(0xE0)) | (mask16)(back3 >= SPLAT(0xF0));
    mask16 bad = is_continuation ^ must_continue;
    // Bytes that never occur: C0, C1 (overlong two-byte forms) and F5...FF.
    bad |= (mask16)((current & SPLAT(0xFE)) == SPLAT(0xC0)) | (mask16)(current >= SPLAT(0xF5));
    // Second bytes with a narrower range: overlong three- and four-byte forms, surrogates,
    // code points above U+10FFFF.
    bad |= (mask16)(back1 == SPLAT(0xE0)) & (mask16)(current < SPLAT(0xA0));
    bad |= (mask16)(back1 == SPLAT(0xED)) & (mask16)(current > SPLAT(0x9F));
    bad |= (mask16)(back1 == SPLAT(0xF0)) & (mask16)(current < SPLAT(0x90));
    bad |= (mask16)(back1 == SPLAT(0xF4)) & (mask16)(current > SPLAT(0x8F));
    return bad;
}

/// The `count` (< 16) bytes at `p` in the low lanes, zeros above, from at most two loads of each
/// half (overlapping where `count` is not a power of two), never reading outside `p[0..<count]`.
static inline bytes16 load_short(const uint8_t *p, size_t count) {
    uint64_t words[2] = {0, 0};
    if (count >= 8) {
        memcpy(&words[0], p, 8);
        if (count > 8) {
            uint64_t tail;
            memcpy(&tail, p + count - 8, 8);
            words[1] = tail >> (8 * (16 - count));
        }
    } else if (count >= 4) {
        uint32_t head, tail;
        memcpy(&head, p, 4);
        memcpy(&tail, p + count - 4, 4);
        words[0] = (uint64_t)head | ((uint64_t)tail << (8 * (count - 4)));
    } else if (count > 0) {
        words[0] = (uint64_t)p[0] | ((uint64_t)p[count >> 1] << (8 * (count >> 1))) |
                   ((uint64_t)p[count - 1] << (8 * (count - 1)));
    }
    bytes16 v;
    memcpy(&v, words, sizeof v);
    return v;
}

/// Lanes `done..<16` set: masks out the lanes of the last, overlapping block that an earlier
/// block checked already.
static const uint8_t lanes_from[32] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
};

static tether_utf8_outcome utf8_check_portable(const uint8_t *bytes, size_t count) {
    if (count < 16) {
        // One block; the zero lanes after the input end any sequence cut short by the end.
        bytes16 block = load_short(bytes, count);
        if (!any_high(block)) return tether_utf8_ascii;
        mask16 bad = broken_rules(block, BACK1(block), BACK2(block), BACK3(block));
        return any_high((bytes16)bad) ? tether_utf8_invalid : tether_utf8_multibyte;
    }
    mask16 errors = {0};
    bytes16 seen = {0};
    // The first block has nothing in front of it.
    bytes16 current = load16(bytes);
    if (any_high(current)) {
        seen |= current;
        errors |= broken_rules(current, BACK1(current), BACK2(current), BACK3(current));
    }
    size_t offset = 16;
    for (; offset + 16 <= count; offset += 16) {
        current = load16(bytes + offset);
        bytes16 back3 = load16(bytes + offset - 3);
        // bytes[offset - 3 ..< offset + 16] all ASCII: no rule can fail here.
        if (!any_high(current | back3)) continue;
        seen |= current;
        errors |= broken_rules(current, load16(bytes + offset - 1), load16(bytes + offset - 2), back3);
    }
    if (offset < count) {
        // The last sixteen bytes, overlapping the block before; its lanes below `done` were
        // checked there already (and may lack their bytes in front when `last` < 3).
        size_t last = count - 16;
        size_t done = offset - last;
        current = load16(bytes + last);
        bytes16 back1, back2, back3;
        if (last >= 3) {
            back1 = load16(bytes + last - 1);
            back2 = load16(bytes + last - 2);
            back3 = load16(bytes + last - 3);
        } else {
            back1 = BACK1(current);
            back2 = BACK2(current);
            back3 = BACK3(current);
        }
        if (any_high(current | back3)) {
            seen |= current;
            errors |= broken_rules(current, back1, back2, back3) & (mask16)load16(lanes_from + 16 - done);
        }
    }
    // A sequence cut short by the end of the input.
    if (bytes[count - 1] >= 0xC0 || bytes[count - 2] >= 0xE0 || bytes[count - 3] >= 0xF0) return tether_utf8_invalid;
    if (any_high((bytes16)errors)) return tether_utf8_invalid;
    return any_high(seen) ? tether_utf8_multibyte : tether_utf8_ascii;
}

#if defined(__x86_64__)
typedef uint8_t bytes32 __attribute__((vector_size(32)));
typedef int8_t mask32 __attribute__((vector_size(32)));

#define SPLAT32(x) \
    ((bytes32){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x})

AVX2 static inline bytes32 load32(const uint8_t *p) {
    bytes32 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/// Whether any lane of `v` has its high bit set.
AVX2 static inline int any_high32(bytes32 v) { return _mm256_movemask_epi8((__m256i)v) != 0; }

/// `broken_rules` for 32 lanes.
AVX2 static inline mask32 broken_rules32(bytes32 current, bytes32 back1, bytes32 back2, bytes32 back3) {
    mask32 is_continuation = (mask32)((current & SPLAT32(0xC0)) == SPLAT32(0x80));
    mask32 must_continue =
        (mask32)(back1 >= SPLAT32(0xC0)) | (mask32)(back2 >= SPLAT32(0xE0)) | (mask32)(back3 >= SPLAT32(0xF0));
    mask32 bad = is_continuation ^ must_continue;
    bad |= (mask32)((current & SPLAT32(0xFE)) == SPLAT32(0xC0)) | (mask32)(current >= SPLAT32(0xF5));
    bad |= (mask32)(back1 == SPLAT32(0xE0)) & (mask32)(current < SPLAT32(0xA0));
    bad |= (mask32)(back1 == SPLAT32(0xED)) & (mask32)(current > SPLAT32(0x9F));
    bad |= (mask32)(back1 == SPLAT32(0xF0)) & (mask32)(current < SPLAT32(0x90));
    bad |= (mask32)(back1 == SPLAT32(0xF4)) & (mask32)(current > SPLAT32(0x8F));
    return bad;
}

/// Lanes `done..<32` set, as `lanes_from` for 16.
static const uint8_t lanes_from32[64] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
};

/// `utf8_check_portable` 32 bytes per step (AVX2), the same steps: every block after the first
/// reads its bytes one, two and three back with loads from one, two and three bytes earlier, and
/// the last block overlaps the one before it. Inputs shorter than a block and three bytes go to
/// the portable form (so that the last block always has its three bytes in front of it).
AVX2 static tether_utf8_outcome utf8_check_avx2(const uint8_t *bytes, size_t count) {
    if (count < 32 + 3) return utf8_check_portable(bytes, count);
    mask32 errors = {0};
    bytes32 seen = {0};
    bytes32 current = load32(bytes);
    if (any_high32(current)) {
        // The first block has nothing in front of it: its bytes back are the block moved up.
        seen |= current;
        bytes32 zero = SPLAT32(0);
        bytes32 back1 = __builtin_shufflevector(zero, current, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
            44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62);
        bytes32 back2 = __builtin_shufflevector(zero, current, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42,
            43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61);
        bytes32 back3 = __builtin_shufflevector(zero, current, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41,
            42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60);
        errors |= broken_rules32(current, back1, back2, back3);
    }
    size_t offset = 32;
    for (; offset + 32 <= count; offset += 32) {
        current = load32(bytes + offset);
        bytes32 back3 = load32(bytes + offset - 3);
        if (!any_high32(current | back3)) continue;
        seen |= current;
        errors |= broken_rules32(current, load32(bytes + offset - 1), load32(bytes + offset - 2), back3);
    }
    if (offset < count) {
        // The last 32 bytes, overlapping the block before (`last` ≥ 3: count ≥ 35).
        size_t last = count - 32;
        size_t done = offset - last;
        current = load32(bytes + last);
        bytes32 back3 = load32(bytes + last - 3);
        if (any_high32(current | back3)) {
            seen |= current;
            errors |= broken_rules32(current, load32(bytes + last - 1), load32(bytes + last - 2), back3) &
                      (mask32)load32(lanes_from32 + 32 - done);
        }
    }
    if (bytes[count - 1] >= 0xC0 || bytes[count - 2] >= 0xE0 || bytes[count - 3] >= 0xF0) return tether_utf8_invalid;
    if (any_high32((bytes32)errors)) return tether_utf8_invalid;
    return any_high32(seen) ? tether_utf8_multibyte : tether_utf8_ascii;
}

/// `utf8_check_portable` 64 bytes per step (AVX-512BW): the same rules, as lane masks. Blocks
/// are read with masked loads, which touch no byte outside bytes[0..<count]; the bytes one, two
/// and three back are loaded from one, two and three bytes earlier (zero before the start).
WIDE static tether_utf8_outcome utf8_check_wide(const uint8_t *bytes, size_t count) {
    __mmask64 errors = 0, high = 0;
    for (size_t offset = 0; offset < count; offset += 64) {
        // Lane i holds bytes[offset + i - k] for k back, where that is inside the input: the
        // block's lanes moved up by k, and the k lanes below them except in the first block.
        __mmask64 lanes = lanes_below(count - offset);
        __mmask64 before = offset ? 7 : 0;
        __m512i current = _mm512_maskz_loadu_epi8(lanes, bytes + offset);
        __m512i back3 = _mm512_maskz_loadu_epi8((lanes << 3) | before, bytes + offset - 3);
        __mmask64 current_high = _mm512_movepi8_mask(current);
        if ((current_high | _mm512_movepi8_mask(back3)) == 0) continue;
        high |= current_high;
        __mmask64 back1_lanes = (lanes << 1) | (before & 1);
        __mmask64 back2_lanes = (lanes << 2) | (before & 3);
        __m512i back1 = _mm512_maskz_loadu_epi8(back1_lanes, bytes + offset - 1);
        __m512i back2 = _mm512_maskz_loadu_epi8(back2_lanes, bytes + offset - 2);
        __mmask64 is_continuation = _mm512_cmpeq_epi8_mask(_mm512_and_si512(current, B64(0xC0)), B64(0x80));
        __mmask64 must_continue = _mm512_cmpge_epu8_mask(back1, B64(0xC0)) | _mm512_cmpge_epu8_mask(back2, B64(0xE0)) |
                                  _mm512_cmpge_epu8_mask(back3, B64(0xF0));
        __mmask64 bad = is_continuation ^ must_continue;
        bad |= _mm512_cmpeq_epi8_mask(_mm512_and_si512(current, B64(0xFE)), B64(0xC0));
        bad |= _mm512_cmpge_epu8_mask(current, B64(0xF5));
        bad |= _mm512_mask_cmplt_epu8_mask(_mm512_cmpeq_epi8_mask(back1, B64(0xE0)), current, B64(0xA0));
        bad |= _mm512_mask_cmpgt_epu8_mask(_mm512_cmpeq_epi8_mask(back1, B64(0xED)), current, B64(0x9F));
        bad |= _mm512_mask_cmplt_epu8_mask(_mm512_cmpeq_epi8_mask(back1, B64(0xF0)), current, B64(0x90));
        bad |= _mm512_mask_cmpgt_epu8_mask(_mm512_cmpeq_epi8_mask(back1, B64(0xF4)), current, B64(0x8F));
        errors |= bad;
    }
    if (errors) return tether_utf8_invalid;
    if (high == 0) return tether_utf8_ascii;
    // A sequence cut short by the end: the lanes after the last byte are zeros, which is caught
    // above unless the input ends exactly at a block's end.
    if (count % 64 == 0 &&
        (bytes[count - 1] >= 0xC0 || bytes[count - 2] >= 0xE0 || bytes[count - 3] >= 0xF0))
        return tether_utf8_invalid;
    return tether_utf8_multibyte;
}
#endif

static tether_utf8_outcome utf8_check_form(const uint8_t *bytes, size_t count, int form) {
#if defined(__x86_64__)
    switch (form) {
    case tether_form_avx512: return utf8_check_wide(bytes, count);
    case tether_form_avx2: return utf8_check_avx2(bytes, count);
    default: break;
    }
#else
    (void)form;
#endif
    return utf8_check_portable(bytes, count);
}

tether_utf8_outcome tether_utf8_check_using(const uint8_t *bytes, size_t count, int form) {
    return utf8_check_form(bytes, count, tether_runnable_form(form));
}

tether_utf8_outcome tether_utf8_check(const uint8_t *bytes, size_t count) {
    return utf8_check_form(bytes, count, current_form());
}
