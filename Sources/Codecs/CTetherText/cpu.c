// Which form the text kernels run in: the portable kernels (16-byte vectors: SSE2 on x86-64, NEON
// on ARM64) everywhere; on x86-64 the 32-byte kernels (AVX2) where the processor has AVX2 and the
// 64-byte kernels (AVX-512BW) where it has that, the widest chosen once at run time (with an
// operating system that saves the registers). `tether_use_vector_form` narrows the choice for the
// whole process (to compare the forms, or to rule one out); no library code reads the environment.

#include "tether_text.h"


#if defined(__x86_64__)
#include <cpuid.h>

/// -1 until detected; then the widest form the processor and the operating system support.
static int best_state = -1;
/// -1 until decided; then the form in use (read inline by the kernels' entry points:
/// form_state.h).
int tether_form_state = -1;

static int detect(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return tether_form_portable;
    if (!(ecx & (1u << 27))) return tether_form_portable;  // OSXSAVE: XGETBV available
    unsigned low, high;
    __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    if ((low & 0x6) != 0x6) return tether_form_portable;  // SSE and AVX (YMM) state saved by the OS
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return tether_form_portable;
    const unsigned avx2 = (1u << 5) | (1u << 3) | (1u << 8);  // AVX2, BMI1, BMI2
    if ((ebx & avx2) != avx2) return tether_form_portable;
    // Opmask, upper halves of ZMM0-15, ZMM16-31 saved too; AVX-512 F, BW, VL.
    const unsigned avx512 = (1u << 16) | (1u << 30) | (1u << 31);
    if ((low & 0xE6) == 0xE6 && (ebx & avx512) == avx512) return tether_form_avx512;
    return tether_form_avx2;
}

int tether_best_vector_form(void) {
    int state = __atomic_load_n(&best_state, __ATOMIC_RELAXED);
    if (state < 0) {
        state = detect();
        __atomic_store_n(&best_state, state, __ATOMIC_RELAXED);
    }
    return state;
}

int tether_vector_form(void) {
    int state = __atomic_load_n(&tether_form_state, __ATOMIC_RELAXED);
    if (state < 0) {
        state = tether_best_vector_form();
        __atomic_store_n(&tether_form_state, state, __ATOMIC_RELAXED);
    }
    return state;
}

void tether_use_vector_form(int form) {
    int best = tether_best_vector_form();
    if (form < tether_form_portable) form = tether_form_portable;
    __atomic_store_n(&tether_form_state, form < best ? form : best, __ATOMIC_RELAXED);
}
#else
int tether_best_vector_form(void) { return tether_form_portable; }
int tether_vector_form(void) { return tether_form_portable; }
void tether_use_vector_form(int form) { (void)form; }
#endif

int tether_runnable_form(int form) {
    int best = tether_best_vector_form();
    if (form <= tether_form_portable) return tether_form_portable;
    return form < best ? form : best;
}

#if defined(__x86_64__)
/// -1 until detected; then whether the processor has AVX-512 VBMI2.
static int vbmi2_state = -1;

int tether_has_vbmi2(void) {
    int state = __atomic_load_n(&vbmi2_state, __ATOMIC_RELAXED);
    if (state < 0) {
        unsigned eax, ebx, ecx, edx;
        state = tether_best_vector_form() == tether_form_avx512 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) &&
                (ecx & (1u << 6)) != 0;
        __atomic_store_n(&vbmi2_state, state, __ATOMIC_RELAXED);
    }
    return state;
}
#else
int tether_has_vbmi2(void) { return 0; }
#endif

int tether_wide_vectors(void) { return tether_vector_form() != tether_form_portable; }
int tether_has_wide_vectors(void) { return tether_best_vector_form() != tether_form_portable; }
void tether_allow_wide_vectors(int allowed) {
    tether_use_vector_form(allowed ? tether_best_vector_form() : tether_form_portable);
}
