// The JSON kernels' bodies, included by json.c once as the portable kernels (suffix `_portable`,
// 16-byte vectors and words) and on x86-64 twice more, as the 32-byte kernels (`_avx2`) and the
// 64-byte kernels (`_wide`, AVX-512BW), with these macros:
//   KERNEL(name)       the function's name with the variant's suffix
//   KERNEL_ATTRIBUTES  the variant's target attributes
//   KERNEL_MASKS_AT    the variant's `masks_at`
//   KERNEL_OWN_ESCAPED_SKIP  1 if the variant defines its own `skip_escaped_string`
//   KERNEL_OWN_STRING_SKIP   1 if the variant defines its own `skip_string`
// Not a header for other files.

#if !KERNEL_OWN_ESCAPED_SKIP
/// `skip_string` from the first escape on (at `i`), for strings with escapes: 64 bytes at a
/// time into bit masks, then the escapes, the closing quote and any control character are
/// found with bit scans, so that each escape costs a few register operations instead of a
/// restart of the byte scan (whose load, compare and branch chain made escape-heavy strings,
/// such as JSON documents carried in a string, the slowest part of validation).
KERNEL_ATTRIBUTES static size_t KERNEL(skip_escaped_string)(const uint8_t *s, size_t i, size_t end, size_t contents, uint64_t seen) {
    int has_high = (seen & HIGHS) != 0;
    while (i < end) {
        // (A string that does not close before `end` runs out of blocks: SIZE_MAX below.)
        block_masks m = KERNEL_MASKS_AT(s, i, end);
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
#endif

KERNEL_ATTRIBUTES static size_t KERNEL(validated_string_end)(const uint8_t *s, size_t i, size_t end, int *has_high) {
    while (i < end) {
        block_masks m = KERNEL_MASKS_AT(s, i, end);
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

/// `tether_json_unescape_validated` one escape at a time: 64 bytes at a time into quote and
/// backslash masks whose bits are then walked; the text between two stops is copied 16 bytes
/// per store and each escape decoded in place. Returns the closing quote's offset, or `end` if
/// it (or the whole of an escape) is not before `end`.
KERNEL_ATTRIBUTES static size_t KERNEL(unescape_walk)(const uint8_t *s, size_t i, size_t end, uint8_t *out, size_t *written, int *has_high) {
    size_t o = *written;
    int high = 0;
    while (i < end) {
        block_masks m = KERNEL_MASKS_AT(s, i, end);
        uint64_t stops = m.quotes | m.backslashes;
        size_t done = 0;  // lanes of this block already copied or decoded
        size_t next = i + 64;
        for (;;) {
            size_t lane = stops ? (size_t)__builtin_ctzll(stops) : 64;
            size_t stop = i + lane < end ? i + lane : end;
            copy_text(out + o, s + i + done, stop - (i + done), s + end);
            o += stop - (i + done);
            if (stop == end) {
                *has_high |= high;
                return end;
            }
            if (lane == 64) break;
            if (m.quotes & ((uint64_t)1 << lane)) {
                *has_high |= high | ((m.high & below(lane)) != 0);
                *written = o;
                return stop;
            }
            size_t after = decode_escape(s, stop, end, out, &o, &high);
            if (after == 0) {
                *has_high |= high;
                return end;
            }
            done = after - i;
            if (done >= 64) {
                next = after;
                break;
            }
            stops &= ~below(done);
        }
        high |= (m.high & below(next - i)) != 0;
        i = next;
    }
    *has_high |= high;
    return end;
}

#if !KERNEL_OWN_STRING_SKIP
/// The offset after the string whose opening quote is at `i`, or SIZE_MAX: escapes checked,
/// control characters refused, and the contents checked as UTF-8 when they have non-ASCII bytes.
/// Plain text is scanned a word at a time up to the first quote, backslash or control character
/// (most strings, keys above all, end there); from a first escape on, `skip_escaped_string`.
KERNEL_ATTRIBUTES static size_t KERNEL(skip_string)(const uint8_t *s, size_t i, size_t end) {
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
    return KERNEL(skip_escaped_string)(s, i, end, contents, seen);
}
#endif

KERNEL_ATTRIBUTES static size_t KERNEL(skip_value)(const uint8_t *s, size_t i, size_t end, size_t maximum_depth, uint64_t *stack) {
    size_t depth = 0;  // open containers; bit (depth - 1) of `stack` is 1 for an object
    if (end <= i) return SIZE_MAX;
value:
    i = skip_whitespace(s, i, end);
    if (i >= end) return SIZE_MAX;
    switch (s[i]) {
    case '"':
        i = KERNEL(skip_string)(s, i, end);
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
    i = KERNEL(skip_string)(s, i, end);
    if (i == SIZE_MAX) return SIZE_MAX;
    i = skip_whitespace(s, i, end);
    if (i >= end || s[i] != ':') return SIZE_MAX;
    i++;
    goto value;
}
