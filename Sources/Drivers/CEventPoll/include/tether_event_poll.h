#ifndef TETHER_EVENT_POLL_H
#define TETHER_EVENT_POLL_H

#include <stdint.h>

/*
 * The kernel's readiness queue (epoll on Linux, kqueue on Apple platforms and the BSDs) in the
 * one form the Dispatch driver's shared read threads need: each socket is watched for new input,
 * edge-triggered (EPOLLET, EV_CLEAR): an event when input arrives (or the stream ends, or fails),
 * not again for input that was there already. So no call is needed after each event to watch a
 * socket again; the thread that takes an event reads until the socket has nothing more (a read
 * shorter than asked; with the stream's end reported, until the end is read), and input
 * arriving meanwhile is a new event (which the threads pass on to the one reading). Each socket carries a 64-bit token, handed back with its event.
 *
 * Every function returns 0 (or, for create, the queue's descriptor) on success and -1 with errno
 * set on failure.
 */

/* A new queue (close-on-exec). */
int tether_event_poll_create(void);

/* Watches `socket` for new input (or its end, or an error). */
int tether_event_poll_add(int poll, int socket, uint64_t token);

/* Makes the kernel look at `socket` again: an event now if it has input (how a thread that read
 * for long enough hands a busy socket's further input to the queue's turn, behind the others). */
int tether_event_poll_rearm(int poll, int socket, uint64_t token);

/* Stops watching `socket` (before it is closed). */
int tether_event_poll_remove(int poll, int socket);

/* Waits for one socket's event, at most `timeout_ms` milliseconds (negative: without a limit), and
 * stores its token, and in `ended` whether the peer's stream has ended or the socket failed (so
 * that a read shorter than asked does not mean the socket has nothing more: its end is still to
 * be read): 1; interrupted by a signal, or the time is up: 0. */
int tether_event_poll_wait(int poll, uint64_t *token, int *ended, int timeout_ms);

#endif
