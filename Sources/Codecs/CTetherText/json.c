// Validating skip of one JSON value (RFC 8259) for the hub protocol's framing: the arguments,
// results and stream items of every message are checked here before they are kept as raw
// slices. One loop with an explicit stack of open containers (a bit per level, object or
// array); strings scanned a word at a time up to their first escape and from there 64 bytes at
// a time into bit masks (quotes, backslashes, control characters, non-ASCII bytes) whose bits
// are then walked, escapes checked in place; contents checked as UTF-8 when they have non-ASCII
// bytes. It accepts exactly what `JSONScanner.skipValue` (Swift, validating mode) accepts: the
// tests and the fuzz target compare the two. Also here, for the typed readers: the end of an
// already validated string with escapes (`tether_json_validated_string_end`), and its contents
// decoded (`tether_json_unescape_validated`: one escape at a time in bit masks, or on processors
// with AVX-512 VBMI2 a whole 64-byte block at a time with a byte compress).
//
// The kernels' bodies are in json_kernels.h, compiled with the portable `masks_at` (16-byte
// vectors) and, on x86-64, twice more: with `masks_at_avx2` (two 32-byte loads, AVX2) and with
// `masks_at_wide` (one masked 64-byte load and four mask compares, AVX-512BW), the widest the
// processor has chosen at run time (cpu.c). Plain text up to
// a string's first escape is scanned a word at a time in the portable and 32-byte forms (most
// strings are short, and a 64-byte step for them measured slower), and 32 bytes at once in the
// 64-byte form (`skip_string_wide`).

#include "tether_text.h"
#include "form_state.h"
#include "wide.h"

#define ONES 0x0101010101010101u
#define HIGHS 0x8080808080808080u

static inline uint64_t load64(const uint8_t *p) {
    uint64_t word;
    memcpy(&word, p, sizeof word);
    return word;
}

/// High bits of the bytes of `word` that are zero (exact for the lowest one).
static inline uint64_t zero_bytes(uint64_t word) { return (word - ONES) & ~word & HIGHS; }

/// High bits of the bytes of `word` below 0x20 (exact for the lowest one; bytes from 0x80 up
/// never count).
static inline uint64_t control_bytes(uint64_t word) { return (word - ONES * 0x20) & ~word & HIGHS; }

static inline int is_whitespace(uint8_t byte) { return byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09; }

__attribute__((always_inline)) static inline size_t skip_whitespace(const uint8_t *s, size_t i, size_t end) {
    while (i < end && is_whitespace(s[i])) i++;
    return i;
}

static inline int is_hex(uint8_t byte) {
    return (byte >= '0' && byte <= '9') || (byte >= 'a' && byte <= 'f') || (byte >= 'A' && byte <= 'F');
}

static inline int is_digit(uint8_t byte) { return (uint8_t)(byte - '0') < 10; }

typedef uint8_t bytes16 __attribute__((vector_size(16)));
typedef _Bool bool16 __attribute__((ext_vector_type(16)));

#define SPLAT16(x) ((bytes16){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x})

/// One bit per lane that is set in `lanes` (lane 0 → bit 0): `pmovmskb` on x86-64, a short
/// sequence on ARM64.
static inline uint64_t lane_bits(bytes16 lanes) {
    return __builtin_bit_cast(uint16_t, __builtin_convertvector(lanes != SPLAT16(0), bool16));
}

/// Bit masks of 64 bytes: quotes, backslashes, control characters, non-ASCII bytes.
typedef struct {
    uint64_t quotes, backslashes, controls, high;
} block_masks;

__attribute__((always_inline)) static inline block_masks masks_of(const uint8_t *p) {
    block_masks m = {0, 0, 0, 0};
    for (int k = 0; k < 4; k++) {
        bytes16 v;
        memcpy(&v, p + 16 * k, sizeof v);
        m.quotes |= lane_bits((bytes16)(v == SPLAT16('"'))) << (16 * k);
        m.backslashes |= lane_bits((bytes16)(v == SPLAT16('\\'))) << (16 * k);
        m.controls |= lane_bits((bytes16)(v < SPLAT16(0x20))) << (16 * k);
        m.high |= lane_bits(v & SPLAT16(0x80)) << (16 * k);
    }
    return m;
}

/// Bits 0..<n set (n ≤ 64).
static inline uint64_t below(size_t n) { return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1; }

/// Defines NAME(s, i, end): the masks of s[i..<i + 64] from MASKS_OF, with no bits for bytes at
/// or past `end`. Reads only s[0..<end]: near the end, the 64 bytes before `end` (the masks
/// shifted into place) when there are that many, else a zero-filled copy.
#define DEFINE_MASKS_AT(NAME, ATTRIBUTES, MASKS_OF) \
    ATTRIBUTES __attribute__((always_inline)) static inline block_masks NAME(const uint8_t *s, size_t i, size_t end) { \
        if (end - i >= 64) return MASKS_OF(s + i); \
        block_masks m; \
        if (end >= 64) { \
            size_t shift = i - (end - 64); /* 1...63 */ \
            m = MASKS_OF(s + end - 64); \
            m.quotes >>= shift; \
            m.backslashes >>= shift; \
            m.controls >>= shift; \
            m.high >>= shift; \
            return m; \
        } \
        uint8_t padded[64] = {0}; \
        memcpy(padded, s + i, end - i); \
        m = MASKS_OF(padded); \
        m.controls &= below(end - i); /* the zeros after the copy are not input */ \
        return m; \
    }

DEFINE_MASKS_AT(masks_at, , masks_of)

/// The length of the escape whose backslash is at `i` (2, or 6 for \uXXXX), or 0 if it is not a
/// valid escape within `end`.
__attribute__((always_inline)) static inline size_t escape_length(const uint8_t *s, size_t i, size_t end) {
    if (i + 1 >= end) return 0;
    switch (s[i + 1]) {
    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        return 2;
    case 'u':
        if (i + 5 >= end || !is_hex(s[i + 2]) || !is_hex(s[i + 3]) || !is_hex(s[i + 4]) || !is_hex(s[i + 5]))
            return 0;
        return 6;
    default:
        return 0;
    }
}

/// Copies `n` bytes of text from `from` to `to`, 16 bytes per store: the stores may write up to
/// 15 bytes past `to + n` (the caller's buffer has room for them), and read past `from + n` only
/// where that is before `limit`.
__attribute__((always_inline)) static inline void copy_text(uint8_t *to, const uint8_t *from, size_t n, const uint8_t *limit) {
    size_t k = 0;
    if ((size_t)(limit - from) >= ((n + 15) & ~(size_t)15)) {
        for (; k < n; k += 16) memcpy(to + k, from + k, 16);
        return;
    }
    for (; k + 16 <= n; k += 16) memcpy(to + k, from + k, 16);
    if (k < n) memcpy(to + k, from + k, n - k);
}

static inline uint32_t hex_digit(uint8_t byte) {
    return byte <= '9' ? (uint32_t)(byte - '0') : (uint32_t)((byte | 0x20) - 'a' + 10);
}

/// The value of the four (validated) hex digits at `p`.
static inline uint32_t hex4_at(const uint8_t *p) {
    return hex_digit(p[0]) << 12 | hex_digit(p[1]) << 8 | hex_digit(p[2]) << 4 | hex_digit(p[3]);
}

/// What the letter after a backslash stands for, for the escapes other than \u (validated:
/// " \ / b f n r t).
static const uint8_t simple_escapes[128] = {
    ['"'] = '"', ['\\'] = '\\', ['/'] = '/', ['b'] = 0x08, ['f'] = 0x0C, ['n'] = 0x0A, ['r'] = 0x0D, ['t'] = 0x09,
};

/// Decodes the validated escape whose backslash is at `i` into `out + *o` (advancing `*o`, and
/// setting `*high` for a non-ASCII scalar): returns the offset after it, or 0 if it is not all
/// before `end`. A \u pair of surrogates becomes its one scalar; a lone surrogate becomes U+FFFD
/// (as `JSONScanner.unescape`).
__attribute__((always_inline)) static inline size_t decode_escape(const uint8_t *s, size_t i, size_t end, uint8_t *out, size_t *o, int *high) {
    if (i + 1 >= end) return 0;
    uint8_t letter = s[i + 1];
    if (letter != 'u') {
        out[(*o)++] = simple_escapes[letter & 0x7F];
        return i + 2;
    }
    if (end - i < 6) return 0;
    uint32_t unit = hex4_at(s + i + 2);
    size_t after = i + 6;
    if (unit >= 0xD800 && unit < 0xDC00 && end - after >= 6 && s[after] == '\\' && s[after + 1] == 'u') {
        uint32_t low = hex4_at(s + after + 2);
        if (low >= 0xDC00 && low < 0xE000) {
            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            after += 6;
        }
    }
    if (unit >= 0xD800 && unit < 0xE000) unit = 0xFFFD;
    uint8_t *p = out + *o;
    if (unit < 0x80) {
        p[0] = (uint8_t)unit;
        *o += 1;
        return after;
    }
    *high = 1;
    if (unit < 0x800) {
        p[0] = (uint8_t)(0xC0 | unit >> 6);
        p[1] = (uint8_t)(0x80 | (unit & 0x3F));
        *o += 2;
    } else if (unit < 0x10000) {
        p[0] = (uint8_t)(0xE0 | unit >> 12);
        p[1] = (uint8_t)(0x80 | ((unit >> 6) & 0x3F));
        p[2] = (uint8_t)(0x80 | (unit & 0x3F));
        *o += 3;
    } else {
        p[0] = (uint8_t)(0xF0 | unit >> 18);
        p[1] = (uint8_t)(0x80 | ((unit >> 12) & 0x3F));
        p[2] = (uint8_t)(0x80 | ((unit >> 6) & 0x3F));
        p[3] = (uint8_t)(0x80 | (unit & 0x3F));
        *o += 4;
    }
    return after;
}

/// The offset after the number at `i`, or SIZE_MAX: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
__attribute__((always_inline)) static inline size_t skip_number(const uint8_t *s, size_t i, size_t end) {
    if (i < end && s[i] == '-') i++;
    if (i >= end) return SIZE_MAX;
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < end && is_digit(s[i])) i++;
    } else {
        return SIZE_MAX;
    }
    if (i < end && s[i] == '.') {
        size_t digits = ++i;
        while (i < end && is_digit(s[i])) i++;
        if (i == digits) return SIZE_MAX;
    }
    if (i < end && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < end && (s[i] == '+' || s[i] == '-')) i++;
        size_t digits = i;
        while (i < end && is_digit(s[i])) i++;
        if (i == digits) return SIZE_MAX;
    }
    return i;
}

__attribute__((always_inline)) static inline size_t skip_literal(const uint8_t *s, size_t i, size_t end, const char *word, size_t length) {
    if (end - i < length || memcmp(s + i, word, length) != 0) return SIZE_MAX;
    return i + length;
}


#if defined(__x86_64__)
/// `masks_at` 64 bytes at once (AVX-512BW): one masked load, which reads nothing at or past `end`.
WIDE __attribute__((always_inline)) static inline block_masks masks_at_wide(const uint8_t *s, size_t i, size_t end) {
    __mmask64 valid = lanes_below(end - i);
    __m512i v = _mm512_maskz_loadu_epi8(valid, s + i);
    block_masks m;
    m.quotes = _mm512_cmpeq_epi8_mask(v, B64('"'));
    m.backslashes = _mm512_cmpeq_epi8_mask(v, B64('\\'));
    m.controls = _mm512_mask_cmplt_epu8_mask(valid, v, B64(0x20));
    m.high = _mm512_movepi8_mask(v);
    return m;
}
#endif

#if defined(__x86_64__)
/// `masks_of` from two 32-byte loads (AVX2): a compare and a `vpmovmskb` per mask and half.
AVX2 __attribute__((always_inline)) static inline block_masks masks_of_avx2(const uint8_t *p) {
    block_masks m = {0, 0, 0, 0};
    for (int k = 0; k < 2; k++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(p + 32 * k));
        // Bytes below 0x20 are those that the unsigned maximum with 0x1F leaves at 0x1F.
        __m256i controls = _mm256_cmpeq_epi8(_mm256_max_epu8(v, _mm256_set1_epi8(0x1F)), _mm256_set1_epi8(0x1F));
        m.quotes |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('"'))) << (32 * k);
        m.backslashes |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\')))
                         << (32 * k);
        m.controls |= (uint64_t)(uint32_t)_mm256_movemask_epi8(controls) << (32 * k);
        m.high |= (uint64_t)(uint32_t)_mm256_movemask_epi8(v) << (32 * k);
    }
    return m;
}

/// `masks_at` with `masks_of_avx2`.
DEFINE_MASKS_AT(masks_at_avx2, AVX2, masks_of_avx2)
#endif

#define KERNEL(name) name##_portable
#define KERNEL_ATTRIBUTES
#define KERNEL_MASKS_AT masks_at
#define KERNEL_OWN_ESCAPED_SKIP 0
#define KERNEL_OWN_STRING_SKIP 0
#include "json_kernels.h"
#undef KERNEL
#undef KERNEL_ATTRIBUTES
#undef KERNEL_MASKS_AT
#undef KERNEL_OWN_ESCAPED_SKIP
#undef KERNEL_OWN_STRING_SKIP

#if defined(__x86_64__)
/// The bytes of a block that an escape's backslash escapes (the letter after an odd-length run
/// of backslashes), given the block's backslashes; `*carry` is 1 if the block's first byte is
/// escaped by a run that ended the block before, and is set for the next block. Runs are found
/// by their starts; adding a run's start to the run carries through it to the byte after it,
/// and that byte is escaped exactly when the run's length is odd, that is when the run started
/// on an even lane and ends on an odd one, or the other way round (the method of Langdale and
/// Lemire, "Parsing Gigabytes of JSON per Second", 2019, §3.1.1). No branch per escape.
static inline uint64_t escaped_bytes(uint64_t backslashes, uint64_t *carry) {
    const uint64_t even_lanes = 0x5555555555555555u;
    uint64_t runs = backslashes & ~*carry;  // an escaped backslash starts no escape
    uint64_t starts = runs & ~(runs << 1);
    uint64_t after_even_starts = (runs + (starts & even_lanes)) & ~runs;
    uint64_t odd_sum;
    int odd_carry = __builtin_add_overflow(runs, starts & ~even_lanes, &odd_sum);
    uint64_t after_odd_starts = odd_sum & ~runs;
    uint64_t escaped = (after_even_starts & ~even_lanes) | (after_odd_starts & even_lanes) | *carry;
    *carry = (uint64_t)odd_carry;  // an odd run from an odd lane through lane 63
    return escaped;
}

/// `skip_escaped_string` of the wide kernels: per 64-byte block, the escaped bytes from the
/// backslash mask (`escaped_bytes`), the closing quote as the first quote not escaped, and every
/// check as mask arithmetic (escaped bytes must be " \\ / b f n r t u, a u must be followed by
/// four hex digits, no control character before the closing quote), instead of a step per
/// escape with a jump on its letter.
WIDE static size_t skip_escaped_string_wide(const uint8_t *s, size_t i, size_t end, size_t contents, uint64_t seen) {
    int has_high = (seen & HIGHS) != 0;
    uint64_t carry = 0;
    while (i < end) {
        __mmask64 valid = lanes_below(end - i);
        __m512i v = _mm512_maskz_loadu_epi8(valid, s + i);
        uint64_t quotes = _mm512_cmpeq_epi8_mask(v, B64('"'));
        uint64_t escaped = escaped_bytes(_mm512_cmpeq_epi8_mask(v, B64('\\')), &carry);
        uint64_t closing = quotes & ~escaped;
        uint64_t inside = closing ? (closing & -closing) - 1 : ~(uint64_t)0;  // lanes before the close
        if (_mm512_mask_cmplt_epu8_mask(valid, v, B64(0x20)) & inside) return SIZE_MAX;
        uint64_t letters = escaped & inside;
        if (letters) {
            uint64_t simple = _mm512_cmpeq_epi8_mask(v, B64('"')) | _mm512_cmpeq_epi8_mask(v, B64('\\')) |
                              _mm512_cmpeq_epi8_mask(v, B64('/')) | _mm512_cmpeq_epi8_mask(v, B64('b')) |
                              _mm512_cmpeq_epi8_mask(v, B64('f')) | _mm512_cmpeq_epi8_mask(v, B64('n')) |
                              _mm512_cmpeq_epi8_mask(v, B64('r')) | _mm512_cmpeq_epi8_mask(v, B64('t'));
            uint64_t u = letters & _mm512_cmpeq_epi8_mask(v, B64('u'));
            if (letters & ~(simple | u)) return SIZE_MAX;
            if (u) {
                uint64_t hex = _mm512_cmplt_epu8_mask(_mm512_sub_epi8(v, B64('0')), B64(10)) |
                               _mm512_cmplt_epu8_mask(_mm512_sub_epi8(_mm512_or_si512(v, B64(0x20)), B64('a')), B64(6));
                if (((u << 1) | (u << 2) | (u << 3) | (u << 4)) & ~hex) return SIZE_MAX;
                // A u in the last four lanes has digits in the next block: checked here.
                for (uint64_t late = u >> 60; late; late &= late - 1) {
                    size_t lane = 60 + (size_t)__builtin_ctzll(late);
                    if (escape_length(s, i + lane - 1, end) != 6) return SIZE_MAX;
                }
            }
        }
        uint64_t high = _mm512_movepi8_mask(v);
        if (closing) {
            size_t lane = (size_t)__builtin_ctzll(closing);
            has_high |= (high & below(lane)) != 0;
            size_t close = i + lane;
            if (has_high && tether_utf8_check(s + contents, close - contents) == tether_utf8_invalid) return SIZE_MAX;
            return close + 1;
        }
        has_high |= high != 0;
        i += 64;
    }
    return SIZE_MAX;
}

#define KERNEL(name) name##_avx2
#define KERNEL_ATTRIBUTES AVX2
#define KERNEL_MASKS_AT masks_at_avx2
#define KERNEL_OWN_ESCAPED_SKIP 0
#define KERNEL_OWN_STRING_SKIP 0
#include "json_kernels.h"
#undef KERNEL
#undef KERNEL_ATTRIBUTES
#undef KERNEL_MASKS_AT
#undef KERNEL_OWN_ESCAPED_SKIP
#undef KERNEL_OWN_STRING_SKIP

/// `skip_string` of the wide kernels: the first 32 bytes of the contents in one load and three
/// compares, so that a string shorter than that without escapes (keys, ids, names: most strings)
/// takes no loop, whose varying trip count the branch predictor misses (about 1 % of the JSON
/// decode row against the word loop; a masked load for every string, which would also serve the
/// last 32 bytes of the input, measured 2 % slower than the word loop: its mask is on the load's
/// critical path). Longer strings and strings with escapes continue in
/// `skip_escaped_string_wide`, which checks plain text as well, 64 bytes at a time; within 32
/// bytes of `end` the 32-byte kernel's word loop runs.
WIDE static size_t skip_string_wide(const uint8_t *s, size_t i, size_t end) {
    size_t contents = i + 1;
    if (end - contents < 32) return skip_string_avx2(s, i, end);
    __m256i v = _mm256_loadu_si256((const __m256i *)(s + contents));
    __m256i quote_lanes = _mm256_cmpeq_epi8(v, _mm256_set1_epi8('"'));
    __m256i controls = _mm256_cmpeq_epi8(_mm256_max_epu8(v, _mm256_set1_epi8(0x1F)), _mm256_set1_epi8(0x1F));
    __m256i stop_lanes =
        _mm256_or_si256(_mm256_or_si256(quote_lanes, _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\'))), controls);
    uint32_t stops = (uint32_t)_mm256_movemask_epi8(stop_lanes);
    uint32_t high = (uint32_t)_mm256_movemask_epi8(v);
    if (stops == 0) return skip_escaped_string_wide(s, contents + 32, end, contents, high ? HIGHS : 0);
    unsigned lane = (unsigned)__builtin_ctz(stops);
    uint64_t seen = (high & _bzhi_u32(~(uint32_t)0, lane)) ? HIGHS : 0;
    if (s[contents + lane] == '"') {
        if (seen && tether_utf8_check(s + contents, lane) == tether_utf8_invalid) return SIZE_MAX;
        return contents + lane + 1;
    }
    // A backslash, or a control character (which the block skip refuses).
    return skip_escaped_string_wide(s, contents + lane, end, contents, seen);
}

#define KERNEL(name) name##_wide
#define KERNEL_ATTRIBUTES WIDE
#define KERNEL_MASKS_AT masks_at_wide
#define KERNEL_OWN_ESCAPED_SKIP 1
#define KERNEL_OWN_STRING_SKIP 1
#include "json_kernels.h"
#undef KERNEL
#undef KERNEL_ATTRIBUTES
#undef KERNEL_MASKS_AT
#undef KERNEL_OWN_ESCAPED_SKIP
#undef KERNEL_OWN_STRING_SKIP

/// `unescape_walk_wide` without a step per escape, for processors with AVX-512 VBMI2. Per 64-byte
/// block: the backslashes that start escapes and the bytes they escape, from the backslash mask;
/// the closing quote as the first quote not escaped; the escapes' letters replaced by what they
/// stand for (masked moves) and the backslashes that start them dropped (one byte compress); the
/// block's lanes up to the closing quote stored at once. From a block with a \u escape (whose
/// value needs its digits) on, `unescape_walk_wide` takes over. A block whose last lane starts an
/// escape stops before it (the next block starts there), so no escape spans two blocks.
#define EVEN_LANES 0x5555555555555555u

WIDE_VBMI2 static size_t unescape_compress_wide(const uint8_t *s, size_t i, size_t end, uint8_t *out, size_t *written, int *has_high) {
    size_t o = *written;
    int high = 0;
    while (i < end) {
        __mmask64 valid = lanes_below(end - i);
        __m512i v = _mm512_maskz_loadu_epi8(valid, s + i);
        // In a run of backslashes, every other one starts an escape, from the run's first; the
        // runs that start on an even lane are those the addition of their first bit clears.
        uint64_t runs = _mm512_cmpeq_epi8_mask(v, B64('\\'));
        uint64_t firsts = runs & ~(runs << 1);
        uint64_t even_runs = runs & ~(runs + (firsts & EVEN_LANES));
        uint64_t starts = (even_runs & EVEN_LANES) | (runs & ~even_runs & ~EVEN_LANES);
        uint64_t escaped = starts << 1;
        uint64_t closing = _mm512_cmpeq_epi8_mask(v, B64('"')) & ~escaped;
        uint64_t lanes = closing ? (closing & -closing) - 1 : valid;
        size_t step = 64;
        if (!closing && (starts >> 63)) {
            lanes &= ~((uint64_t)1 << 63);
            step = 63;
        }
        uint64_t letters = escaped & lanes;
        if (letters & _mm512_cmpeq_epi8_mask(v, B64('u'))) break;
        __m512i decoded = v;
        decoded = _mm512_mask_mov_epi8(decoded, letters & _mm512_cmpeq_epi8_mask(v, B64('n')), B64(0x0A));
        decoded = _mm512_mask_mov_epi8(decoded, letters & _mm512_cmpeq_epi8_mask(v, B64('t')), B64(0x09));
        decoded = _mm512_mask_mov_epi8(decoded, letters & _mm512_cmpeq_epi8_mask(v, B64('r')), B64(0x0D));
        decoded = _mm512_mask_mov_epi8(decoded, letters & _mm512_cmpeq_epi8_mask(v, B64('b')), B64(0x08));
        decoded = _mm512_mask_mov_epi8(decoded, letters & _mm512_cmpeq_epi8_mask(v, B64('f')), B64(0x0C));
        uint64_t kept = lanes & ~starts;
        size_t count = (size_t)__builtin_popcountll(kept);
        _mm512_mask_storeu_epi8(out + o, lanes_below(count), _mm512_maskz_compress_epi8(kept, decoded));
        o += count;
        high |= (_mm512_movepi8_mask(v) & lanes) != 0;
        if (closing) {
            *has_high |= high;
            *written = o;
            return i + (size_t)__builtin_ctzll(closing);
        }
        i += step;
    }
    *has_high |= high;
    if (i >= end) return end;
    *written = o;
    return unescape_walk_wide(s, i, end, out, written, has_high);
}
#endif

static size_t skip_value_form(
    const uint8_t *s, size_t i, size_t end, size_t maximum_depth, uint64_t *stack, int form) {
#if defined(__x86_64__)
    switch (form) {
    case tether_form_avx512: return skip_value_wide(s, i, end, maximum_depth, stack);
    case tether_form_avx2: return skip_value_avx2(s, i, end, maximum_depth, stack);
    default: break;
    }
#else
    (void)form;
#endif
    return skip_value_portable(s, i, end, maximum_depth, stack);
}

size_t tether_json_skip_value_using(
    const uint8_t *s, size_t i, size_t end, size_t maximum_depth, uint64_t *stack, int form) {
    return skip_value_form(s, i, end, maximum_depth, stack, tether_runnable_form(form));
}

size_t tether_json_skip_value(const uint8_t *s, size_t i, size_t end, size_t maximum_depth, uint64_t *stack) {
    return skip_value_form(s, i, end, maximum_depth, stack, current_form());
}

static size_t validated_string_end_form(const uint8_t *s, size_t i, size_t end, int *has_high, int form) {
#if defined(__x86_64__)
    switch (form) {
    case tether_form_avx512: return validated_string_end_wide(s, i, end, has_high);
    case tether_form_avx2: return validated_string_end_avx2(s, i, end, has_high);
    default: break;
    }
#else
    (void)form;
#endif
    return validated_string_end_portable(s, i, end, has_high);
}

size_t tether_json_validated_string_end_using(const uint8_t *s, size_t i, size_t end, int *has_high, int form) {
    return validated_string_end_form(s, i, end, has_high, tether_runnable_form(form));
}

size_t tether_json_validated_string_end(const uint8_t *s, size_t i, size_t end, int *has_high) {
    return validated_string_end_form(s, i, end, has_high, current_form());
}

static size_t unescape_validated_form(
    const uint8_t *s, size_t i, size_t end, uint8_t *out, size_t *written, int *has_high, int form, int compress) {
#if defined(__x86_64__)
    switch (form) {
    case tether_form_avx512:
        return compress && tether_has_vbmi2() ? unescape_compress_wide(s, i, end, out, written, has_high)
                                              : unescape_walk_wide(s, i, end, out, written, has_high);
    case tether_form_avx2: return unescape_walk_avx2(s, i, end, out, written, has_high);
    default: break;
    }
#else
    (void)form;
    (void)compress;
#endif
    return unescape_walk_portable(s, i, end, out, written, has_high);
}

size_t tether_json_unescape_validated_using(
    const uint8_t *s, size_t i, size_t end, uint8_t *out, size_t *written, int *has_high, int form, int compress) {
    return unescape_validated_form(s, i, end, out, written, has_high, tether_runnable_form(form), compress);
}

size_t tether_json_unescape_validated(const uint8_t *s, size_t i, size_t end, uint8_t *out, size_t *written, int *has_high) {
    return unescape_validated_form(s, i, end, out, written, has_high, current_form(), 1);
}
