// Cross-architecture check of the JSON kernels (CTetherText/json.c): runs the validating skip, the
// validated-string scan and the validated-string decoding on a million seeded inputs (JSON-like text with escapes of every
// kind, nesting, non-ASCII bytes, control characters, random mutations and cuts, each in an
// allocation of exactly its size) and prints a digest of every result. The tests hold the
// x86-64 build to the Swift reference; run.sh requires the ARM64 (NEON) build under qemu to
// print the same digest, so the 64-byte mask code is checked there too.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tether_text.h"

static uint64_t state = 0x9E3779B97F4A7C15u;
static uint64_t next_random(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}
static size_t below_n(size_t n) { return (size_t)(next_random() % n); }

static const char *pieces[] = {
    "\"", "\\\"", "\\\\", "\\/", "\\n", "\\u00e9", "\\uD83D\\uDE00", "\\uDE00", "\\u12", "\\x", "\\",
    "a", "plain text ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xC3", "\x01", "\t",
    "{", "}", "[", "]", ":", ",", "1", "-2.5e3", "true", "null", " ", "\"k\":",
};

/// The digest of a million results of one form of the kernels.
static uint64_t run(int form, unsigned *accepted) {
    uint64_t digest = 1469598103934665603u;
    uint64_t stack[8];
    state = 0x9E3779B97F4A7C15u;
    *accepted = 0;
    for (int round = 0; round < 1000000; round++) {
        char text[600];
        size_t length = 0;
        // Mostly a string or an object holding strings, sometimes anything.
        const char *opening = round % 3 == 0 ? "{\"JsonData\":\"" : round % 3 == 1 ? "\"" : "";
        memcpy(text, opening, strlen(opening));
        length = strlen(opening);
        size_t count = below_n(60);
        for (size_t k = 0; k < count && length < 500; k++) {
            const char *piece = pieces[below_n(sizeof pieces / sizeof *pieces)];
            if (below_n(4) != 0 && piece[0] != '\\' && piece[0] != '"') piece = "abcdefgh";
            size_t n = strlen(piece);
            memcpy(text + length, piece, n);
            length += n;
        }
        if (round % 3 == 0) { memcpy(text + length, "\",\"x\":1}", 8); length += 8; }
        if (round % 3 == 1) text[length++] = '"';
        if (below_n(8) == 0 && length > 0) text[below_n(length)] = (char)next_random();
        if (below_n(8) == 0 && length > 0) length = below_n(length);
        uint8_t *bytes = malloc(length ? length : 1);
        memcpy(bytes, text, length);
        size_t end = tether_json_skip_value_using(bytes, 0, length, 64, stack, form);
        digest = (digest ^ end) * 1099511628211u;
        if (end != SIZE_MAX) {
            (*accepted)++;
            // The validated scan from the first backslash of a string that the skip accepted, and
            // the decoding of its contents (into exactly the room the kernel asks for), whole and
            // cut short.
            if (bytes[0] == '"') {
                for (size_t i = 1; i + 1 < end; i++) {
                    if (bytes[i] == '\\') {
                        int high = 0;
                        size_t quote = tether_json_validated_string_end_using(bytes, i, length, &high, form);
                        digest = (digest ^ quote ^ ((uint64_t)high << 40)) * 1099511628211u;
                        break;
                    }
                }
                size_t limits[2] = {length, 1 + below_n(end)};
                for (int k = 0; k < 2; k++) {
                    uint8_t *out = malloc(limits[k] - 1 + 16);
                    size_t written = 0;
                    int high = 0;
                    size_t quote = tether_json_unescape_validated_using(bytes, 1, limits[k], out, &written, &high, form, 1);
                    digest = (digest ^ quote) * 1099511628211u;
                    if (quote < limits[k]) {  // (cut short, what was written is dropped)
                        digest = (digest ^ ((uint64_t)high << 40)) * 1099511628211u;
                        for (size_t j = 0; j < written; j++) digest = (digest ^ out[j]) * 1099511628211u;
                    }
                    free(out);
                }
            }
        }
        free(bytes);
    }
    return digest;
}

int main(void) {
    // Every form this processor runs (portable; on x86-64 also AVX2 and AVX-512BW where present):
    // they must agree, and the first line printed must be the same on every machine (the second
    // names the forms that ran).
    static const char *names[] = {"portable", "avx2", "avx512"};
    unsigned accepted;
    uint64_t digest = run(tether_form_portable, &accepted);
    for (int form = tether_form_avx2; form <= tether_best_vector_form(); form++) {
        unsigned form_accepted;
        uint64_t form_digest = run(form, &form_accepted);
        if (form_digest != digest || form_accepted != accepted) {
            printf("forms differ: portable %016llx, %s %016llx\n", (unsigned long long)digest, names[form],
                   (unsigned long long)form_digest);
            return 1;
        }
    }
    printf("accepted %u of 1000000, digest %016llx\n", accepted, (unsigned long long)digest);
    printf("forms:");
    for (int form = tether_form_portable; form <= tether_best_vector_form(); form++)
        printf(" %s%s", names[form], form == tether_form_avx512 && tether_has_vbmi2() ? "+vbmi2" : "");
    printf("\n");
    return 0;
}
