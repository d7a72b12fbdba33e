#include "tether_thread_slots.h"

_Thread_local void *tether_thread_slots[TETHER_THREAD_SLOT_COUNT];
