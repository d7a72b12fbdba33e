// Cross-check of CTetherText's UTF-8 validator on other compilers and architectures (not part
// of `swift test`; see README.md here). Compares tether_utf8_check with a plain scalar
// validator written from the Unicode Standard's table of well-formed byte sequences (Table 3-7)
// on every input of one and two bytes, on three- and four-byte sequences over the boundary
// values of each byte at many positions, and on random and mutated text of every length up to
// 100 bytes. Each input sits in an allocation of exactly its size.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tether_text.h"

/// 0: ASCII, 1: valid with multi-byte sequences, 2: invalid.
static int reference(const uint8_t *s, size_t n) {
    int multibyte = 0;
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        multibyte = 1;
        size_t length;
        uint8_t low = 0x80, high = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) {
            length = 2;
        } else if (b >= 0xE0 && b <= 0xEF) {
            length = 3;
            if (b == 0xE0) low = 0xA0;
            if (b == 0xED) high = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            length = 4;
            if (b == 0xF0) low = 0x90;
            if (b == 0xF4) high = 0x8F;
        } else {
            return 2;
        }
        if (n - i < length) return 2;
        if (s[i + 1] < low || s[i + 1] > high) return 2;
        for (size_t k = 2; k < length; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 2;
        i += length;
    }
    return multibyte;
}

static unsigned long failures = 0, checks = 0;

static void check(const uint8_t *bytes, size_t count) {
    uint8_t *exact = malloc(count ? count : 1);
    memcpy(exact, bytes, count);
    int expected = reference(exact, count);
    // Every form this processor runs (portable; on x86-64 also AVX2 and AVX-512BW where present).
    for (int form = tether_form_portable; form <= tether_best_vector_form(); form++) {
        int outcome = (int)tether_utf8_check_using(count ? exact : NULL, count, form);
        checks++;
        if (outcome != expected && failures++ < 20) {
            printf("mismatch (form %d, got %d, expected %d):", form, outcome, expected);
            for (size_t i = 0; i < count; i++) printf(" %02x", bytes[i]);
            printf("\n");
        }
    }
    free(exact);
}

static void placed(const uint8_t *sequence, size_t length, size_t before, size_t after) {
    uint8_t buffer[256];
    memset(buffer, 'a', before);
    memcpy(buffer + before, sequence, length);
    memset(buffer + before + length, 'b', after);
    check(buffer, before + length + after);
}

static uint64_t state = 0x9E3779B97F4A7C15u;
static uint32_t next_random(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 16);
}

static size_t encode(uint32_t scalar, uint8_t *out) {
    if (scalar < 0x80) { out[0] = (uint8_t)scalar; return 1; }
    if (scalar < 0x800) { out[0] = 0xC0 | scalar >> 6; out[1] = 0x80 | (scalar & 0x3F); return 2; }
    if (scalar < 0x10000) {
        out[0] = 0xE0 | scalar >> 12; out[1] = 0x80 | ((scalar >> 6) & 0x3F); out[2] = 0x80 | (scalar & 0x3F);
        return 3;
    }
    out[0] = 0xF0 | scalar >> 18; out[1] = 0x80 | ((scalar >> 12) & 0x3F);
    out[2] = 0x80 | ((scalar >> 6) & 0x3F); out[3] = 0x80 | (scalar & 0x3F);
    return 4;
}

int main(void) {
    // Around the 16-byte blocks of the portable form, the 32-byte ones of the AVX2 form (which
    // leaves inputs under 35 bytes to the portable one) and the 64-byte ones of the AVX-512 form.
    static const size_t places[][2] = {{0, 0},  {3, 0},   {13, 0},  {14, 0},  {0, 13},  {15, 0},  {16, 0},
                                       {0, 16}, {14, 3},  {17, 0},  {30, 0},  {31, 0},  {29, 7},  {32, 15},
                                       {45, 2}, {47, 1},  {61, 0},  {62, 0},  {63, 0},  {64, 0},  {62, 2},
                                       {0, 61}, {125, 0}, {126, 1}, {127, 0}, {128, 0}, {124, 64}, {190, 2},
                                       {33, 0}, {34, 0},  {35, 0},  {32, 3},  {0, 35},  {93, 2},  {95, 0}};
    const size_t np = sizeof places / sizeof *places;
    static const uint8_t boundaries[] = {0x00, 0x41, 0x7F, 0x80, 0x81, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
                                         0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
    const size_t nb = sizeof boundaries;
    uint8_t s[4];
    for (int a = 0; a < 256; a++) {
        s[0] = (uint8_t)a;
        for (size_t p = 0; p < np; p++) placed(s, 1, places[p][0], places[p][1]);
        for (int b = 0; b < 256; b++) {
            s[1] = (uint8_t)b;
            for (size_t p = 0; p < np; p += 3) placed(s, 2, places[p][0], places[p][1]);
        }
    }
    for (int a = 0xC0; a < 256; a++)
        for (size_t i = 0; i < nb; i++)
            for (size_t j = 0; j < nb; j++) {
                s[0] = (uint8_t)a; s[1] = boundaries[i]; s[2] = boundaries[j];
                for (size_t p = 0; p < np; p++) placed(s, 3, places[p][0], places[p][1]);
                if (a < 0xF0 || a > 0xF5) continue;
                for (size_t k = 0; k < nb; k++) {
                    s[3] = boundaries[k];
                    for (size_t p = 0; p < np; p += 2) placed(s, 4, places[p][0], places[p][1]);
                }
            }
    static const uint32_t scalars[] = {'a', '~', 0x7F, 0x80, 0xE9, 0x7FF, 0x800, 0x20AC, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF,
                                       0x10000, 0x1F600, 0x10FFFF};
    for (int round = 0; round < 200000; round++) {
        uint8_t text[256];
        size_t length = 0, target = next_random() % 200;
        while (length + 4 < target) {
            uint32_t scalar = next_random() % 3 ? 'x' : scalars[next_random() % (sizeof scalars / sizeof *scalars)];
            length += encode(scalar, text + length);
        }
        check(text, length);
        for (int m = 0; m < 3 && length > 0; m++) {
            text[next_random() % length] = (uint8_t)(next_random() % 3 ? boundaries[next_random() % nb] : next_random());
            check(text, length);
            check(text + 1, length - 1);
        }
    }
    static const char *names[] = {"portable", "avx2", "avx512"};
    printf("%lu checks (forms:", checks);
    for (int form = tether_form_portable; form <= tether_best_vector_form(); form++) printf(" %s", names[form]);
    printf("), %lu mismatches\n", failures);
    return failures != 0;
}
