/*
 * The libstrophe side of Benchmarks/xmpp-driver/run.sh: the same measurements tether-bench's
 * --xmpp-latency, --xmpp-throughput and --xmpp-idle make with XMPPClient, against the same
 * prosody, printed as one JSON line each.
 *
 *   strophe_bench latency    HOST PORT JID PASSWORD COUNT
 *   strophe_bench throughput HOST PORT FROM_JID TO_JID PASSWORD COUNT
 *   strophe_bench throughput-sm HOST PORT FROM_JID TO_JID PASSWORD COUNT   (with stream management)
 *   strophe_bench idle       HOST PORT ACCOUNT@DOMAIN PASSWORD COUNT
 *
 * Cleartext (TLS disabled), stream management disabled (but in throughput-sm), one context and one thread, as an app
 * would use libstrophe's event loop. Built by run.sh with `pkg-config libstrophe`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strophe.h>
#include <time.h>
#include <malloc.h>
#include <dirent.h>
#include <sys/resource.h>
#include <errno.h>
#include <unistd.h>

/* User and system time of the whole process, in microseconds. */
static double cpu_us(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 + usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
}

/* The server's time on a processor, in microseconds (every thread of BENCH_SERVER_PID, from
   /proc/PID/task/TID/schedstat, nanoseconds), or -1 when not given or not readable: the message
   rows print the share of their time the server was busy. */
static double server_cpu_us(void) {
    const char *pid = getenv("BENCH_SERVER_PID");
    if (!pid) return -1;
    char path[320];
    snprintf(path, sizeof path, "/proc/%s/task", pid);
    DIR *tasks = opendir(path);
    if (!tasks) return -1;
    double total = 0;
    struct dirent *task;
    while ((task = readdir(tasks)) != NULL) {
        if (task->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/%s/task/%s/schedstat", pid, task->d_name);
        FILE *f = fopen(path, "r");
        unsigned long long ns = 0;
        if (f && fscanf(f, "%llu", &ns) == 1) total += ns / 1e3;
        if (f) fclose(f);
    }
    closedir(tasks);
    return total;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * 4096;
}

static int count_entries(const char *path) {
    DIR *d = opendir(path);
    int n = 0;
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n - 2;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int online = 0;
static int failed = 0;

static void on_connect(xmpp_conn_t *conn, xmpp_conn_event_t status, int error, xmpp_stream_error_t *stream_error,
                       void *userdata) {
    (void)conn;
    (void)error;
    (void)stream_error;
    (void)userdata;
    if (status == XMPP_CONN_CONNECT) {
        online++;
    } else {
        failed++;
    }
}

/* Stream management off unless `throughput-sm` asks for it (XEP-0198, libstrophe's default). */
static int stream_management = 0;

static xmpp_conn_t *connect_one(xmpp_ctx_t *ctx, const char *host, int port, const char *jid, const char *password) {
    xmpp_conn_t *conn = xmpp_conn_new(ctx);
    xmpp_conn_set_flags(conn, XMPP_CONN_FLAG_DISABLE_TLS | (stream_management ? 0 : XMPP_CONN_FLAG_DISABLE_SM));
    xmpp_conn_set_jid(conn, jid);
    xmpp_conn_set_pass(conn, password);
    if (xmpp_connect_client(conn, host, (unsigned short)port, on_connect, NULL) != XMPP_EOK) failed++;
    return conn;
}

static void wait_online(xmpp_ctx_t *ctx, int count) {
    double deadline = now_us() + 120e6;
    while (online + failed < count && now_us() < deadline) xmpp_run_once(ctx, 10);
    if (online < count) {
        fprintf(stderr, "strophe_bench: %d of %d connections online (%d failed)\n", online, count, failed);
        exit(1);
    }
}

/* Turns taken with the other harnesses (turns.py; tether-bench's XMPPDriverBenchmarks.Turns does
 * the same): with BENCH_TURNS=IN,OUT,BATCH, a byte on OUT once connected, a byte read from IN
 * before each BATCH pings (then one untimed ping) or messages, a byte on OUT after each batch but
 * the last (the exit passes that turn). */
static int turn_in = -1, turn_out = -1, turn_batch = 0;

static void turn_signal(void) {
    char byte = 't';
    while (write(turn_out, &byte, 1) < 0 && errno == EINTR) {}
}

static void turn_take(void) {
    char byte;
    while (read(turn_in, &byte, 1) < 0 && errno == EINTR) {}
}

static int turn_starts(int index) {
    if (turn_batch <= 0 || index % turn_batch != 0) return 0;
    turn_take();
    return 1;
}

/* Sequential pings to the server. */
static int ping_answered = 0;

static int on_pong(xmpp_conn_t *conn, xmpp_stanza_t *stanza, void *userdata) {
    (void)conn;
    (void)stanza;
    (void)userdata;
    ping_answered = 1;
    return 0;
}

/* One ping, from building the request to its answer, as the Tether rows time
 * `request(.ping(to: nil))`, and the same stanza: no `to`, so the server answers for the account
 * (RFC 6120 §10.3.3). (Addressed to the domain, prosody takes about 6 µs longer to answer.) */
static double ping_once(xmpp_ctx_t *ctx, xmpp_conn_t *conn, int number) {
    char id[32];
    double start = now_us();
    snprintf(id, sizeof id, "p%d", number);
    xmpp_stanza_t *iq = xmpp_iq_new(ctx, "get", id);
    xmpp_stanza_t *ping = xmpp_stanza_new(ctx);
    xmpp_stanza_set_name(ping, "ping");
    xmpp_stanza_set_ns(ping, "urn:xmpp:ping");
    xmpp_stanza_add_child(iq, ping);
    xmpp_stanza_release(ping);
    xmpp_id_handler_add(conn, on_pong, id, NULL);
    ping_answered = 0;
    xmpp_send(conn, iq);
    xmpp_stanza_release(iq);
    while (!ping_answered) xmpp_run_once(ctx, 1);
    return now_us() - start;
}

static int latency(const char *host, int port, const char *jid, const char *password, int count) {
    xmpp_ctx_t *ctx = xmpp_ctx_new(NULL, NULL);
    xmpp_conn_t *conn = connect_one(ctx, host, port, jid, password);
    wait_online(ctx, 1);
    double *samples = calloc((size_t)count, sizeof(double));
    double cpu = 0;
    const char *turns = getenv("BENCH_TURNS");
    if (turns && sscanf(turns, "%d,%d,%d", &turn_in, &turn_out, &turn_batch) != 3) {
        fprintf(stderr, "BENCH_TURNS is IN,OUT,BATCH\n");
        return 1;
    }
    for (int i = -50; i < count; i++) {
        if (i == 0) {
            if (turn_batch > 0) turn_signal();
            cpu = cpu_us();
        }
        /* A batch's first ping, after the wait for the turn, is not timed. */
        if (i >= 0 && turn_starts(i)) ping_once(ctx, conn, i + 50);
        double elapsed = ping_once(ctx, conn, i + 50);
        if (i >= 0) samples[i] = elapsed;
        if (turn_batch > 0 && i >= 0 && (i + 1) % turn_batch == 0 && i + 1 < count) turn_signal();
    }
    cpu = cpu_us() - cpu;
    qsort(samples, (size_t)count, sizeof(double), compare);
    printf("{\"client\":\"libstrophe\",\"count\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,\"cpu_us_per_ping\":%.1f}\n", count,
           samples[count / 2], samples[(int)(count * 0.99)], cpu / count);
    xmpp_disconnect(conn);
    xmpp_conn_release(conn);
    xmpp_ctx_free(ctx);
    return 0;
}

/* Messages from one account to another, as fast as the client takes them. */
static int received = 0;

static int on_message(xmpp_conn_t *conn, xmpp_stanza_t *stanza, void *userdata) {
    (void)conn;
    (void)userdata;
    if (xmpp_stanza_get_child_by_name(stanza, "body")) received++;
    return 1;
}

static int throughput(const char *host, int port, const char *from, const char *to, const char *password, int count) {
    xmpp_ctx_t *ctx = xmpp_ctx_new(NULL, NULL);
    xmpp_conn_t *receiver = connect_one(ctx, host, port, to, password);
    xmpp_conn_t *sender = connect_one(ctx, host, port, from, password);
    wait_online(ctx, 2);
    xmpp_handler_add(receiver, on_message, NULL, "message", NULL, NULL);
    /* The same stanzas as tether-bench's clients send: an initial presence from each (XMPPClient's
       default), and an id on every message (RFC 6120 §8.1.3 recommends one; XMPPClient gives each
       message one). The receiver's presence makes it available; let it settle. */
    xmpp_stanza_t *presence = xmpp_presence_new(ctx);
    xmpp_send(receiver, presence);
    xmpp_send(sender, presence);
    xmpp_stanza_release(presence);
    for (int i = 0; i < 50; i++) xmpp_run_once(ctx, 1);
    char body[64];
    char id[32];
    /* With BENCH_TURNS, in batches of its size, one a turn (as tether-bench's harness), each timed
     * from its first send to its last arrival. */
    const char *turns = getenv("BENCH_TURNS");
    if (turns && sscanf(turns, "%d,%d,%d", &turn_in, &turn_out, &turn_batch) != 3) {
        fprintf(stderr, "BENCH_TURNS is IN,OUT,BATCH\n");
        return 1;
    }
    int batch = turn_batch > 0 ? turn_batch : count;
    if (turn_batch > 0) turn_signal();
    double elapsed = 0, cpu = cpu_us(), server = 0;
    for (int sent = 0; sent < count;) {
        int next = sent + batch < count ? sent + batch : count;
        if (turn_batch > 0) turn_take();
        double start = now_us(), server_start = server_cpu_us();
        for (int i = sent; i < next; i++) {
            snprintf(id, sizeof id, "m%d", i);
            xmpp_stanza_t *message = xmpp_message_new(ctx, "chat", to, id);
            snprintf(body, sizeof body, "message %d", i);
            xmpp_message_set_body(message, body);
            xmpp_send(sender, message);
            xmpp_stanza_release(message);
            if (i % 64 == 0) xmpp_run_once(ctx, 0);
        }
        double deadline = now_us() + 120e6;
        while (received < next && now_us() < deadline) xmpp_run_once(ctx, 1);
        elapsed += now_us() - start;
        server += server_cpu_us() - server_start;
        if (received < next) {
            fprintf(stderr, "strophe_bench: %d of %d messages arrived\n", received, next);
            return 1;
        }
        sent = next;
        if (turn_batch > 0 && sent < count) turn_signal();
    }
    cpu = cpu_us() - cpu;
    printf("{\"client\":\"libstrophe\",\"count\":%d,\"seconds\":%.4f,\"messages_per_s\":%.0f,\"cpu_us_per_message\":%.1f,"
           "\"server_busy\":%.3f}\n",
           count, elapsed / 1e6, count / (elapsed / 1e6), cpu / count, server_cpu_us() < 0 ? -1 : server / elapsed);
    xmpp_disconnect(sender);
    xmpp_disconnect(receiver);
    return 0;
}

/* Many idle connections in one process: resident memory and heap per connection. */
static int idle(const char *host, int port, const char *account, const char *password, int count) {
    xmpp_ctx_t *ctx = xmpp_ctx_new(NULL, NULL);
    char jid[256];
    /* Measured beyond one connection made first, as tether-bench measures. */
    snprintf(jid, sizeof jid, "%s/idle-first", account);
    connect_one(ctx, host, port, jid, password);
    wait_online(ctx, 1);
    malloc_trim(0);
    long rss_before = rss_bytes();
    struct mallinfo2 heap_before = mallinfo2();
    for (int i = 0; i < count; i++) {
        snprintf(jid, sizeof jid, "%s/idle%d", account, i);
        connect_one(ctx, host, port, jid, password);
        while (online + failed < i + 2) xmpp_run_once(ctx, 1);
    }
    wait_online(ctx, count + 1);
    for (int i = 0; i < 200; i++) xmpp_run_once(ctx, 5);
    malloc_trim(0);
    long rss_after = rss_bytes();
    struct mallinfo2 heap_after = mallinfo2();
    printf("{\"client\":\"libstrophe\",\"count\":%d,\"rss_per_connection\":%.0f,\"heap_per_connection\":%.0f,"
           "\"threads\":%d,\"descriptors\":%d}\n",
           count, (double)(rss_after - rss_before) / count,
           (double)((long)heap_after.uordblks - (long)heap_before.uordblks) / count, count_entries("/proc/self/task"),
           count_entries("/proc/self/fd"));
    return 0;
}

int main(int argc, char **argv) {
    xmpp_initialize();
    if (argc == 7 && strcmp(argv[1], "latency") == 0)
        return latency(argv[2], atoi(argv[3]), argv[4], argv[5], atoi(argv[6]));
    if (argc == 8 && strcmp(argv[1], "throughput-sm") == 0) {
        stream_management = 1;
        return throughput(argv[2], atoi(argv[3]), argv[4], argv[5], argv[6], atoi(argv[7]));
    }
    if (argc == 8 && strcmp(argv[1], "throughput") == 0)
        return throughput(argv[2], atoi(argv[3]), argv[4], argv[5], argv[6], atoi(argv[7]));
    if (argc == 7 && strcmp(argv[1], "idle") == 0)
        return idle(argv[2], atoi(argv[3]), argv[4], argv[5], atoi(argv[6]));
    fprintf(stderr, "usage: strophe_bench latency|throughput|idle HOST PORT ...\n");
    return 2;
}
