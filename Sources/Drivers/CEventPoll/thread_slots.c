#include "tether_thread_slots.h"

#if defined(__linux__)
__attribute__((tls_model("initial-exec")))
#endif
_Thread_local void *tether_thread_slots[TETHER_THREAD_SLOT_COUNT];
