/* The client's own part of a round trip, measured the same way in any client: loaded with
 * LD_PRELOAD, it wraps the C library's waits (epoll_wait, epoll_pwait, select, pselect, poll) and
 * socket sends (send, sendto, sendmsg: both clients send with them) and times, per round trip, how long the process
 * took from the wait that returned with input to its next send ("turnaround": reading the
 * answer, handling it, any thread hand-off, building and sending the next request), and how long
 * from that send until a wait returned with input again ("waiting": the server, the kernel and
 * the client's wake-up). Whatever the host's scheduling does to a run moves the waiting; the
 * turnaround is the client's code. Used by run.sh on the ping rows of Tether and of libstrophe.
 *
 *   gcc -O2 -shared -fPIC -o turnaround.so turnaround.c -ldl
 *   TURNAROUND_OUT=file LD_PRELOAD=./turnaround.so client …    appends one JSON line at exit:
 *   {"turnaround_p50_us":…,"turnaround_p90_us":…,"waiting_p50_us":…,"rounds":…}
 *
 * Only sends that follow a wait that returned with input count (the handshake's few are in the
 * samples; with thousands of pings they do not move the medians). At most MAX_SAMPLES round trips
 * are kept. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 200000

static _Atomic long long woke_ns;      /* when a wait last returned with input; 0: a send came since */
static _Atomic long long sent_ns;      /* when the last counted send was made; 0: a wait came since */
static double turnaround[MAX_SAMPLES]; /* µs */
static double waiting[MAX_SAMPLES];
static _Atomic int turnarounds, waits;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void woke(int ready) {
    if (ready <= 0) return;
    long long now = now_ns();
    atomic_store(&woke_ns, now);
    long long sent = atomic_exchange(&sent_ns, 0);
    if (sent) {
        int index = atomic_fetch_add(&waits, 1);
        if (index < MAX_SAMPLES) waiting[index] = (now - sent) / 1e3;
    }
}

static void sending(void) {
    long long woken = atomic_exchange(&woke_ns, 0);
    if (!woken) return;
    long long now = now_ns();
    atomic_store(&sent_ns, now);
    int index = atomic_fetch_add(&turnarounds, 1);
    if (index < MAX_SAMPLES) turnaround[index] = (now - woken) / 1e3;
}

#define NEXT(name) static __typeof__(name) *next_##name; if (!next_##name) next_##name = dlsym(RTLD_NEXT, #name)

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout) {
    NEXT(epoll_wait);
    int ready = next_epoll_wait(epfd, events, maxevents, timeout);
    woke(ready);
    return ready;
}

int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout, const sigset_t *mask) {
    NEXT(epoll_pwait);
    int ready = next_epoll_pwait(epfd, events, maxevents, timeout, mask);
    woke(ready);
    return ready;
}

int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout) {
    NEXT(select);
    int ready = next_select(n, r, w, e, timeout);
    woke(ready);
    return ready;
}

int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *timeout, const sigset_t *mask) {
    NEXT(pselect);
    int ready = next_pselect(n, r, w, e, timeout, mask);
    woke(ready);
    return ready;
}

int poll(struct pollfd *fds, nfds_t count, int timeout) {
    NEXT(poll);
    int ready = next_poll(fds, count, timeout);
    woke(ready);
    return ready;
}

ssize_t send(int fd, const void *buffer, size_t length, int flags) {
    NEXT(send);
    sending();
    return next_send(fd, buffer, length, flags);
}

ssize_t sendto(int fd, const void *buffer, size_t length, int flags, const struct sockaddr *to, socklen_t size) {
    NEXT(sendto);
    sending();
    return next_sendto(fd, buffer, length, flags, to, size);
}

ssize_t sendmsg(int fd, const struct msghdr *message, int flags) {
    NEXT(sendmsg);
    sending();
    return next_sendmsg(fd, message, flags);
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *samples, int count, double p) {
    if (count == 0) return 0;
    qsort(samples, (size_t)count, sizeof(double), compare);
    return samples[(int)(count * p)];
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("TURNAROUND_OUT");
    if (!path) return;
    int t = atomic_load(&turnarounds), w = atomic_load(&waits);
    if (t > MAX_SAMPLES) t = MAX_SAMPLES;
    if (w > MAX_SAMPLES) w = MAX_SAMPLES;
    FILE *out = fopen(path, "a");
    if (!out) return;
    double t50 = percentile(turnaround, t, 0.5), t90 = percentile(turnaround, t, 0.9);
    fprintf(out, "{\"turnaround_p50_us\":%.1f,\"turnaround_p90_us\":%.1f,\"waiting_p50_us\":%.1f,\"rounds\":%d}\n", t50,
            t90, percentile(waiting, w, 0.5), t);
    fclose(out);
}
