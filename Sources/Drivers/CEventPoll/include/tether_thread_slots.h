#ifndef TETHER_THREAD_SLOTS_H
#define TETHER_THREAD_SLOTS_H

/*
 * Per-thread pointers for the Dispatch driver (the job collector of a read thread, its read
 * buffer), read and written inline through a thread-local variable: every input reads them, and
 * pthread_getspecific behind a lazily created key cost a call into the C library and one into the
 * Swift runtime (the key's lazy initialization check) per access. What a slot points to is freed
 * at thread exit by a pthread key's destructor, which also clears the slot.
 */
enum {
    TETHER_THREAD_SLOT_JOBS = 0,
    TETHER_THREAD_SLOT_READ_BUFFER = 1,
    TETHER_THREAD_SLOT_COUNT = 2
};

/* On Linux in the initial-exec model: an offset from the thread pointer, with no call to
 * __tls_get_addr (the slots are a few bytes of the static TLS block, which glibc also keeps room
 * for in libraries opened later). */
#if defined(__linux__)
__attribute__((tls_model("initial-exec")))
#endif
extern _Thread_local void *tether_thread_slots[TETHER_THREAD_SLOT_COUNT];

static inline void *tether_thread_slot(int index) { return tether_thread_slots[index]; }

static inline void tether_thread_slot_set(int index, void *value) { tether_thread_slots[index] = value; }

#endif
