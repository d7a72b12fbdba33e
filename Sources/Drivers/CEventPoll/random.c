#include "tether_random.h"

#include <errno.h>

#if defined(__linux__)
#include <sys/random.h>

int tether_random_bytes(void *buffer, size_t count) {
    size_t filled = 0;
    while (filled < count) {
        ssize_t got = getrandom((char *)buffer + filled, count - filled, 0);
        if (got > 0) {
            filled += (size_t)got;
        } else if (got < 0 && errno != EINTR) {
            return -1;
        }
    }
    return 0;
}

#else
#include <stdlib.h>

int tether_random_bytes(void *buffer, size_t count) {
    arc4random_buf(buffer, count);
    return 0;
}
#endif
