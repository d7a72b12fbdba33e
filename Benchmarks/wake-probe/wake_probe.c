/* What a wait costs on this machine: request-response round trips over loopback TCP between two
 * processes, the client waiting for each answer in one of several ways, so that the wait is the
 * only difference (Specs/performance.md, "The tick-window timer").
 *
 *   gcc -O2 -o /tmp/wake_probe Benchmarks/wake-probe/wake_probe.c
 *   /tmp/wake_probe PORT server WORK_US &       an echo server that spins WORK_US per request
 *                                               (50 is about prosody's time for a ping)
 *   /tmp/wake_probe PORT MODE COUNT             COUNT round trips of 60 bytes; prints p50, p99
 *
 * MODE: block (a blocking recv), epoll (epoll_wait, edge-triggered, no timeout: Tether's read
 * threads), epoll-timer (epoll_wait with a TIMEOUT_MS timeout, default 1: the read threads with a
 * tick window), select (pselect with a 1 ms timeout: libstrophe's loop). Run the modes in
 * alternating rounds: the host's noise moves every mode's round trip between rounds. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return address;
}

static int serve(int port, double work_us) {
    int listener = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in address = loopback(port);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 16)) {
        perror("listen");
        return 1;
    }
    for (;;) {
        int connection = accept(listener, NULL, NULL);
        if (connection < 0) continue;
        if (fork() == 0) {
            char buffer[4096];
            for (;;) {
                ssize_t count = recv(connection, buffer, sizeof buffer, 0);
                if (count <= 0) _exit(0);
                for (double start = now_us(); now_us() - start < work_us;) {
                }
                send(connection, buffer, (size_t)count, 0);
            }
        }
        close(connection);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s PORT server WORK_US | PORT block|epoll|epoll-timer|select COUNT\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    const char *mode = argv[2];
    if (!strcmp(mode, "server")) return serve(port, atof(argv[3]));
    int count = atoi(argv[3]);
    int blocking = !strcmp(mode, "block"), selecting = !strcmp(mode, "select");
    int timeout = !strcmp(mode, "epoll-timer") ? (getenv("TIMEOUT_MS") ? atoi(getenv("TIMEOUT_MS")) : 1) : -1;
    if (!blocking && !selecting && strcmp(mode, "epoll") && strcmp(mode, "epoll-timer")) {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = loopback(port);
    if (connect(sock, (struct sockaddr *)&address, sizeof address)) {
        perror("connect");
        return 1;
    }
    int poll = -1;
    if (!blocking) fcntl(sock, F_SETFL, O_NONBLOCK);
    if (!blocking && !selecting) {
        poll = epoll_create1(0);
        struct epoll_event event = {.events = EPOLLIN | EPOLLET | EPOLLRDHUP, .data.u64 = 1};
        epoll_ctl(poll, EPOLL_CTL_ADD, sock, &event);
    }
    char message[60], buffer[65536];
    memset(message, 'x', sizeof message);
    double *samples = calloc((size_t)count, sizeof(double));
    for (int i = -200; i < count; i++) {
        double start = now_us();
        send(sock, message, sizeof message, MSG_NOSIGNAL);
        size_t received = 0;
        while (received < sizeof message) {
            if (blocking) {
                ssize_t got = recv(sock, buffer, sizeof buffer, 0);
                if (got <= 0) return 1;
                received += (size_t)got;
                continue;
            }
            if (selecting) {
                fd_set set;
                FD_ZERO(&set);
                FD_SET(sock, &set);
                struct timespec limit = {0, 1000000};
                if (pselect(sock + 1, &set, NULL, NULL, &limit, NULL) <= 0) continue;
            } else {
                struct epoll_event event;
                if (epoll_wait(poll, &event, 1, timeout) <= 0) continue;
            }
            for (ssize_t got; (got = recv(sock, buffer, sizeof buffer, 0)) > 0;) received += (size_t)got;
        }
        if (i >= 0) samples[i] = now_us() - start;
    }
    qsort(samples, (size_t)count, sizeof(double), compare);
    printf("{\"client\":\"%s\",\"p50_us\":%.1f,\"p99_us\":%.1f}\n", mode, samples[count / 2],
           samples[(int)(count * 0.99)]);
    return 0;
}
