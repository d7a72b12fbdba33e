#ifndef TETHER_EVENT_POLL_H
#define TETHER_EVENT_POLL_H

#include <stdint.h>

/*
 * The kernel's readiness queue (epoll on Linux, kqueue on Apple platforms and the BSDs) in the
 * one form the Dispatch driver's shared read threads need: each socket is watched for input once
 * per arming (EPOLLONESHOT, EV_DISPATCH), so that of the threads waiting on one queue only one
 * gets a socket's input, and it is not reported again until that thread has handled it and
 * re-armed the socket. Each socket carries a 64-bit token, handed back with its event.
 *
 * Every function returns 0 (or, for create, the queue's descriptor) on success and -1 with errno
 * set on failure.
 */

/* A new queue (close-on-exec). */
int tether_event_poll_create(void);

/* Watches `socket` for input (or its end, or an error), armed once. */
int tether_event_poll_add(int poll, int socket, uint64_t token);

/* Arms `socket` again after its event was handled. */
int tether_event_poll_rearm(int poll, int socket, uint64_t token);

/* Stops watching `socket` (before it is closed). */
int tether_event_poll_remove(int poll, int socket);

/* Waits for one socket's event, at most `timeout_ms` milliseconds (negative: without a limit), and
 * stores its token: 1; interrupted by a signal, or the time is up: 0. */
int tether_event_poll_wait(int poll, uint64_t *token, int timeout_ms);

#endif
