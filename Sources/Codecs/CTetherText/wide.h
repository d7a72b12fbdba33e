// The 32-byte (AVX2) and 64-byte (AVX-512BW) forms of the kernels, for x86-64: shared
// definitions. Functions with `AVX2` or `WIDE` are compiled for those instructions and run only
// after `tether_best_vector_form()` has found them (cpu.c).

#ifndef TETHER_WIDE_H
#define TETHER_WIDE_H

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,bmi,bmi2")))
#define WIDE __attribute__((target("avx512f,avx512bw,avx512vl,bmi,bmi2")))
/// `WIDE` and VBMI2's byte compress, for kernels that run only where `tether_has_vbmi2()`.
#define WIDE_VBMI2 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi2,bmi,bmi2,popcnt")))
#define B64(x) _mm512_set1_epi8((char)(x))

/// Lanes 0..<n of a 64-lane mask (all of them for n ≥ 64).
WIDE static inline __mmask64 lanes_below(size_t n) { return _bzhi_u64(~(uint64_t)0, (unsigned)(n < 64 ? n : 64)); }
#endif

#endif
