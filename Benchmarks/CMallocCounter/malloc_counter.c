// Counts heap allocations for the benchmark by defining the allocator entry points in the
// executable, which the dynamic linker then prefers over glibc's (the Swift runtime and every
// library allocate through them). Each definition counts and forwards to glibc's own
// implementation (__libc_*), so behaviour is otherwise unchanged.
#include "CMallocCounter.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

static _Atomic unsigned long long allocations;

static inline void count(void) { atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed); }

unsigned long long tether_malloc_count(void) { return atomic_load_explicit(&allocations, memory_order_relaxed); }

void *malloc(size_t size) {
    count();
    return __libc_malloc(size);
}

void *calloc(size_t number, size_t size) {
    count();
    return __libc_calloc(number, size);
}

void *realloc(void *pointer, size_t size) {
    count();
    return __libc_realloc(pointer, size);
}

void free(void *pointer) { __libc_free(pointer); }

void *memalign(size_t alignment, size_t size) {
    count();
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count();
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    count();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *result = pointer;
    return 0;
}

#include <malloc.h>

unsigned long long tether_heap_in_use(void) {
    malloc_trim(0);
    struct mallinfo2 info = mallinfo2();
    return (unsigned long long)info.uordblks;
}
