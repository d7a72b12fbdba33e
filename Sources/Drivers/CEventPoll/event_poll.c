#include "tether_event_poll.h"

#include <errno.h>
#include <stddef.h>

#if defined(__linux__)
#include <sys/epoll.h>

int tether_event_poll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static int control(int poll, int operation, int socket, uint64_t token) {
    struct epoll_event event;
    event.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    event.data.u64 = token;
    return epoll_ctl(poll, operation, socket, &event);
}

int tether_event_poll_add(int poll, int socket, uint64_t token) { return control(poll, EPOLL_CTL_ADD, socket, token); }

/* A modification makes the kernel look at the socket's state again: an event now if it has input. */
int tether_event_poll_rearm(int poll, int socket, uint64_t token) {
    return control(poll, EPOLL_CTL_MOD, socket, token);
}

int tether_event_poll_remove(int poll, int socket) {
    struct epoll_event unused = {0};
    return epoll_ctl(poll, EPOLL_CTL_DEL, socket, &unused);
}

int tether_event_poll_wait(int poll, uint64_t *token, int *ended, int timeout_ms) {
    struct epoll_event event;
    int count = epoll_wait(poll, &event, 1, timeout_ms < 0 ? -1 : timeout_ms);
    if (count < 0) return errno == EINTR ? 0 : -1;
    if (count == 0) return 0;
    *token = event.data.u64;
    *ended = (event.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    return 1;
}

#else
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>
#include <unistd.h>
#include <fcntl.h>

int tether_event_poll_create(void) {
    int poll = kqueue();
    if (poll >= 0) (void)fcntl(poll, F_SETFD, FD_CLOEXEC);
    return poll;
}

static int control(int poll, int socket, uint16_t flags, uint64_t token) {
    struct kevent change;
    EV_SET(&change, (uintptr_t)socket, EVFILT_READ, flags, 0, 0, (void *)(uintptr_t)token);
    return kevent(poll, &change, 1, NULL, 0, NULL) < 0 ? -1 : 0;
}

int tether_event_poll_add(int poll, int socket, uint64_t token) { return control(poll, socket, EV_ADD | EV_CLEAR, token); }

/* Adding an event that is there already updates it, and the kernel looks at the socket's state
 * again (an event now if it has input). */
int tether_event_poll_rearm(int poll, int socket, uint64_t token) {
    return control(poll, socket, EV_ADD | EV_CLEAR, token);
}

int tether_event_poll_remove(int poll, int socket) { return control(poll, socket, EV_DELETE, 0); }

int tether_event_poll_wait(int poll, uint64_t *token, int *ended, int timeout_ms) {
    struct kevent event;
    struct timespec limit = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    int count = kevent(poll, NULL, 0, &event, 1, timeout_ms < 0 ? NULL : &limit);
    if (count < 0) return errno == EINTR ? 0 : -1;
    if (count == 0) return 0;
    *token = (uint64_t)(uintptr_t)event.udata;
    *ended = (event.flags & (EV_EOF | EV_ERROR)) != 0;
    return 1;
}
#endif
