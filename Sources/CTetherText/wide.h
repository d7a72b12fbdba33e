// The 64-byte (AVX-512BW) forms of the kernels, for x86-64: shared definitions. Functions with
// `WIDE` are compiled for those instructions and run only after `tether_wide_vectors()` has
// found them (cpu.c).

#ifndef TETHER_WIDE_H
#define TETHER_WIDE_H

#if defined(__x86_64__)
#include <immintrin.h>

#define WIDE __attribute__((target("avx512f,avx512bw,avx512vl,bmi,bmi2")))
#define B64(x) _mm512_set1_epi8((char)(x))

/// Lanes 0..<n of a 64-lane mask (all of them for n ≥ 64).
static inline __mmask64 lanes_below(size_t n) { return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1); }
#endif

#endif
