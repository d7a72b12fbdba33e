#ifndef TETHER_TEXT_H
#define TETHER_TEXT_H

#include <stddef.h>
#include <stdint.h>

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

#endif
