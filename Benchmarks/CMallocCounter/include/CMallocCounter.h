#ifndef TETHER_MALLOC_COUNTER_H
#define TETHER_MALLOC_COUNTER_H

/// The number of heap allocations (malloc, calloc, realloc, and the aligned variants) made by the
/// whole process so far. The benchmark executable links this target, which interposes glibc's
/// allocator entry points; nothing else in Tether does.
unsigned long long tether_malloc_count(void);

/// The bytes of heap in use now (glibc's mallinfo2), after giving free memory back to the system
/// (malloc_trim): what live objects hold, for memory per connection.
unsigned long long tether_heap_in_use(void);

#endif
