// Validating skip of one JSON value (RFC 8259) for the hub protocol's framing: the arguments,
// results and stream items of every message are checked here before they are kept as raw
// slices. One loop with an explicit stack of open containers (a bit per level, object or
// array); strings scanned a word at a time up to their first escape and from there 64 bytes at
// a time into bit masks (quotes, backslashes, control characters, non-ASCII bytes) whose bits
// are then walked, escapes checked in place; contents checked as UTF-8 when they have non-ASCII
// bytes. It accepts exactly what `JSONScanner.skipValue` (Swift, validating mode) accepts: the
// tests and the fuzz target compare the two. Also here: the end of an already validated string
// with escapes, for the typed readers (`tether_json_validated_string_end`).

#include "tether_text.h"

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

static inline size_t skip_whitespace(const uint8_t *s, size_t i, size_t end) {
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

/// The masks of s[i..<i + 64], with no bits for bytes at or past `end`. Reads only s[0..<end]:
/// near the end, the 64 bytes before `end` (the masks shifted into place) when there are that
/// many, else a zero-filled copy.
__attribute__((always_inline)) static inline block_masks masks_at(const uint8_t *s, size_t i, size_t end) {
    if (end - i >= 64) return masks_of(s + i);
    block_masks m;
    if (end >= 64) {
        size_t shift = i - (end - 64);  // 1...63
        m = masks_of(s + end - 64);
        m.quotes >>= shift;
        m.backslashes >>= shift;
        m.controls >>= shift;
        m.high >>= shift;
        return m;
    }
    uint8_t padded[64] = {0};
    memcpy(padded, s + i, end - i);
    m = masks_of(padded);
    m.controls &= below(end - i);  // the zeros after the copy are not input
    return m;
}

/// The length of the escape whose backslash is at `i` (2, or 6 for \uXXXX), or 0 if it is not a
/// valid escape within `end`.
static inline size_t escape_length(const uint8_t *s, size_t i, size_t end) {
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

/// `skip_string` from the first escape on (at `i`), for strings with escapes: 64 bytes at a
/// time into bit masks, then the escapes, the closing quote and any control character are
/// found with bit scans, so that each escape costs a few register operations instead of a
/// restart of the byte scan (whose load, compare and branch chain made escape-heavy strings,
/// such as JSON documents carried in a string, the slowest part of validation).
static size_t skip_escaped_string(const uint8_t *s, size_t i, size_t end, size_t contents, uint64_t seen) {
    int has_high = (seen & HIGHS) != 0;
    while (i < end) {
        // (A string that does not close before `end` runs out of blocks: SIZE_MAX below.)
        block_masks m = masks_at(s, i, end);
        uint64_t stops = m.quotes | m.backslashes | m.controls;
        size_t next = i + 64;
        while (stops) {
            size_t lane = (size_t)__builtin_ctzll(stops);
            uint64_t bit = (uint64_t)1 << lane;
            if (m.backslashes & bit) {
                size_t length = escape_length(s, i + lane, end);
                if (length == 0) return SIZE_MAX;
                size_t after = lane + length;
                if (after >= 64) {
                    // The escape runs into the next block: continue from just after it.
                    next = i + after;
                    break;
                }
                stops &= ~below(after);
                continue;
            }
            if (m.controls & bit) return SIZE_MAX;
            // The closing quote.
            has_high |= (m.high & below(lane)) != 0;
            size_t close = i + lane;
            if (has_high && tether_utf8_check(s + contents, close - contents) == tether_utf8_invalid) return SIZE_MAX;
            return close + 1;
        }
        has_high |= (m.high & below(next - i)) != 0;
        i = next;
    }
    return SIZE_MAX;
}

size_t tether_json_validated_string_end(const uint8_t *s, size_t i, size_t end, int *has_high) {
    while (i < end) {
        block_masks m = masks_at(s, i, end);
        uint64_t stops = m.quotes | m.backslashes;
        size_t next = i + 64;
        while (stops) {
            size_t lane = (size_t)__builtin_ctzll(stops);
            if (m.quotes & ((uint64_t)1 << lane)) {
                *has_high |= (m.high & below(lane)) != 0;
                return i + lane;
            }
            // A backslash: the byte after it is escaped (a \u's four hex digits are neither).
            if (lane + 2 >= 64) {
                next = i + lane + 2;
                break;
            }
            stops &= ~below(lane + 2);
        }
        *has_high |= (m.high & below(next - i)) != 0;
        i = next;
    }
    return end;
}

/// The offset after the string whose opening quote is at `i`, or SIZE_MAX: escapes checked,
/// control characters refused, and the contents checked as UTF-8 when they have non-ASCII bytes.
/// Plain text is scanned a word at a time up to the first quote, backslash or control character
/// (most strings, keys above all, end there); from a first escape on, `skip_escaped_string`.
static size_t skip_string(const uint8_t *s, size_t i, size_t end) {
    size_t contents = ++i;
    uint64_t seen = 0;  // the contents' bytes, OR-ed (for the high bits)
    // Plain text up to a quote, a backslash or a control character, eight bytes per step.
    while (i + 8 <= end) {
        uint64_t word = load64(s + i);
        uint64_t stop = zero_bytes(word ^ (ONES * '"')) | zero_bytes(word ^ (ONES * '\\')) | control_bytes(word);
        if (stop) {
            size_t lane = (size_t)__builtin_ctzll(stop) >> 3;
            seen |= word & (((uint64_t)1 << (8 * lane)) - 1);
            i += lane;
            goto found;
        }
        seen |= word;
        i += 8;
    }
    while (i < end && s[i] != '"' && s[i] != '\\' && s[i] >= 0x20) seen |= s[i++];
    if (i >= end) return SIZE_MAX;
found:
    if (s[i] == '"') {
        if ((seen & HIGHS) && tether_utf8_check(s + contents, i - contents) == tether_utf8_invalid) return SIZE_MAX;
        return i + 1;
    }
    if (s[i] < 0x20) return SIZE_MAX;
    return skip_escaped_string(s, i, end, contents, seen);
}

/// The offset after the number at `i`, or SIZE_MAX: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
static size_t skip_number(const uint8_t *s, size_t i, size_t end) {
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

static inline size_t skip_literal(const uint8_t *s, size_t i, size_t end, const char *word, size_t length) {
    if (end - i < length || memcmp(s + i, word, length) != 0) return SIZE_MAX;
    return i + length;
}

size_t tether_json_skip_value(const uint8_t *s, size_t i, size_t end, size_t maximum_depth, uint64_t *stack) {
    size_t depth = 0;  // open containers; bit (depth - 1) of `stack` is 1 for an object
    if (end <= i) return SIZE_MAX;
value:
    i = skip_whitespace(s, i, end);
    if (i >= end) return SIZE_MAX;
    switch (s[i]) {
    case '"':
        i = skip_string(s, i, end);
        break;
    case '{':
    case '[': {
        if (depth >= maximum_depth) return SIZE_MAX;
        int is_object = s[i] == '{';
        uint64_t bit = (uint64_t)1 << (depth & 63);
        stack[depth >> 6] = is_object ? stack[depth >> 6] | bit : stack[depth >> 6] & ~bit;
        depth++;
        i = skip_whitespace(s, i + 1, end);
        if (i < end && s[i] == (is_object ? '}' : ']')) {
            i++;
            depth--;
            break;
        }
        if (is_object) goto key;
        goto value;
    }
    case 't':
        i = skip_literal(s, i, end, "true", 4);
        break;
    case 'f':
        i = skip_literal(s, i, end, "false", 5);
        break;
    case 'n':
        i = skip_literal(s, i, end, "null", 4);
        break;
    default:
        i = skip_number(s, i, end);
        break;
    }
    if (i == SIZE_MAX) return SIZE_MAX;
after_value:
    if (depth == 0) return i;
    i = skip_whitespace(s, i, end);
    if (i >= end) return SIZE_MAX;
    {
        int in_object = (stack[(depth - 1) >> 6] >> ((depth - 1) & 63)) & 1;
        if (s[i] == ',') {
            i++;
            if (in_object) goto key;
            goto value;
        }
        if (s[i] != (in_object ? '}' : ']')) return SIZE_MAX;
        i++;
        depth--;
        goto after_value;
    }
key:
    i = skip_whitespace(s, i, end);
    if (i >= end || s[i] != '"') return SIZE_MAX;
    i = skip_string(s, i, end);
    if (i == SIZE_MAX) return SIZE_MAX;
    i = skip_whitespace(s, i, end);
    if (i >= end || s[i] != ':') return SIZE_MAX;
    i++;
    goto value;
}
