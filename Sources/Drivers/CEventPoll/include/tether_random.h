#ifndef TETHER_RANDOM_H
#define TETHER_RANDOM_H

#include <stddef.h>

/*
 * Fills `buffer` with `count` bytes from the system's secure random generator in one call
 * (getrandom on Linux, arc4random_buf on Apple platforms and the BSDs): the Dispatch driver takes
 * a WebSocket connection's masks from it a block at a time instead of one system call per frame.
 * Returns 0, or -1 with errno set (the generator is not ready, or the call is not there).
 */
int tether_random_bytes(void *buffer, size_t count);

#endif
