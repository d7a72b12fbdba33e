// Which vector width the text kernels use: the portable kernels (SSE2 on x86-64, NEON on ARM64)
// everywhere, and on x86-64 processors with AVX-512BW (and an operating system that saves its
// registers) the 64-byte kernels, chosen once at run time. `tether_allow_wide_vectors(0)` keeps the
// portable kernels for the whole process (to compare the two, or to rule them out); no library
// code reads the environment.

#include "tether_text.h"


#if defined(__x86_64__)
#include <cpuid.h>

/// -1 until detected; then 1 if the processor and the operating system support the wide kernels.
static int available_state = -1;
/// -1 until decided; then 1 if the wide kernels run, 0 if not.
static int wide_state = -1;

static int detect(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    if (!(ecx & (1u << 27))) return 0;  // OSXSAVE: XGETBV available
    unsigned low, high;
    __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    // SSE, AVX, opmask, upper halves of ZMM0-15, ZMM16-31: all saved by the OS.
    if ((low & 0xE6) != 0xE6) return 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    const unsigned needed = (1u << 16) | (1u << 30) | (1u << 31) | (1u << 3) | (1u << 8);  // F, BW, VL, BMI1, BMI2
    return (ebx & needed) == needed;
}

int tether_has_wide_vectors(void) {
    int state = __atomic_load_n(&available_state, __ATOMIC_RELAXED);
    if (state < 0) {
        state = detect();
        __atomic_store_n(&available_state, state, __ATOMIC_RELAXED);
    }
    return state;
}

int tether_wide_vectors(void) {
    int state = __atomic_load_n(&wide_state, __ATOMIC_RELAXED);
    if (state < 0) {
        state = tether_has_wide_vectors();
        __atomic_store_n(&wide_state, state, __ATOMIC_RELAXED);
    }
    return state;
}

void tether_allow_wide_vectors(int allowed) {
    __atomic_store_n(&wide_state, allowed ? tether_has_wide_vectors() : 0, __ATOMIC_RELAXED);
}
#else
int tether_wide_vectors(void) { return 0; }
int tether_has_wide_vectors(void) { return 0; }
void tether_allow_wide_vectors(int allowed) { (void)allowed; }
#endif
