/*
 * The libstrophe side of Benchmarks/xmpp-online/run.sh: COUNT logins through the slow relay
 * (cleartext, SCRAM as libstrophe chooses it, stream management on, the roster asked for and
 * presence sent once online, as an app does), each followed by a cut of the link (a connection
 * to the relay's control port) and a resumption: a new connection given the old one's stream
 * management state (libstrophe leaves reconnecting to the application). Prints one JSON line
 * with the median times.
 *
 *   strophe_online HOST PORT JID PASSWORD CONTROL_PORT COUNT
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strophe.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int state = 0; /* 0 connecting, 1 online, 2 disconnected */
static int resumed = 0;
static int enabled = 0;

static void logger(void *userdata, xmpp_log_level_t level, const char *area, const char *msg) {
    (void)userdata;
    (void)level;
    (void)area;
    if (strstr(msg, "<resumed")) resumed = 1;
    if (strstr(msg, "<enabled")) enabled = 1;
}

static void on_connect(xmpp_conn_t *conn, xmpp_conn_event_t status, int error, xmpp_stream_error_t *stream_error,
                       void *userdata) {
    (void)error;
    (void)stream_error;
    (void)userdata;
    if (status == XMPP_CONN_CONNECT) {
        state = 1;
        if (!resumed) {
            xmpp_ctx_t *ctx = xmpp_conn_get_context(conn);
            xmpp_stanza_t *iq = xmpp_iq_new(ctx, "get", "roster1");
            xmpp_stanza_t *query = xmpp_stanza_new(ctx);
            xmpp_stanza_set_name(query, "query");
            xmpp_stanza_set_ns(query, "jabber:iq:roster");
            xmpp_stanza_add_child(iq, query);
            xmpp_stanza_release(query);
            xmpp_send(conn, iq);
            xmpp_stanza_release(iq);
            xmpp_stanza_t *presence = xmpp_presence_new(ctx);
            xmpp_send(conn, presence);
            xmpp_stanza_release(presence);
        }
    } else {
        state = 2;
    }
}

static xmpp_conn_t *start(xmpp_ctx_t *ctx, const char *host, int port, const char *jid, const char *password,
                          xmpp_sm_state_t *sm) {
    xmpp_conn_t *conn = xmpp_conn_new(ctx);
    xmpp_conn_set_flags(conn, XMPP_CONN_FLAG_DISABLE_TLS);
    xmpp_conn_set_jid(conn, jid);
    xmpp_conn_set_pass(conn, password);
    if (sm) xmpp_conn_set_sm_state(conn, sm);
    state = 0;
    if (xmpp_connect_client(conn, host, (unsigned short)port, on_connect, NULL) != XMPP_EOK) {
        fprintf(stderr, "strophe_online: connect failed\n");
        exit(1);
    }
    return conn;
}

static void run_until(xmpp_ctx_t *ctx, int wanted, double seconds) {
    double deadline = now_ms() + seconds * 1e3;
    while (state != wanted && now_ms() < deadline) xmpp_run_once(ctx, 1);
    if (state != wanted) {
        fprintf(stderr, "strophe_online: state %d, not %d, after %.0f s\n", state, wanted, seconds);
        exit(1);
    }
}

static void cut(int control_port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {0};
    address.sin_family = AF_INET;
    address.sin_port = htons((unsigned short)control_port);
    address.sin_addr.s_addr = inet_addr("127.0.0.1");
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        fprintf(stderr, "strophe_online: cannot reach the control port\n");
        exit(1);
    }
    close(fd);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: strophe_online HOST PORT JID PASSWORD CONTROL_PORT COUNT\n");
        return 2;
    }
    const char *host = argv[1], *jid = argv[3], *password = argv[4];
    int port = atoi(argv[2]), control_port = atoi(argv[5]), count = atoi(argv[6]);
    double *logins = calloc((size_t)count, sizeof(double)), *resumptions = calloc((size_t)count, sizeof(double));
    xmpp_initialize();
    xmpp_log_t log = {logger, NULL};
    xmpp_ctx_t *ctx = xmpp_ctx_new(NULL, &log);
    xmpp_ctx_set_verbosity(ctx, 1);
    for (int round = 0; round < count; round++) {
        resumed = 0;
        enabled = 0;
        double begin = now_ms();
        xmpp_conn_t *conn = start(ctx, host, port, jid, password, NULL);
        run_until(ctx, 1, 20);
        logins[round] = now_ms() - begin;
        double settle = now_ms() + 300;
        while (now_ms() < settle || !enabled) xmpp_run_once(ctx, 1);
        double cut_at = now_ms();
        cut(control_port);
        run_until(ctx, 2, 20);
        xmpp_sm_state_t *sm = xmpp_conn_get_sm_state(conn);
        xmpp_conn_release(conn);
        conn = start(ctx, host, port, jid, password, sm);
        run_until(ctx, 1, 20);
        resumptions[round] = now_ms() - cut_at;
        if (!resumed) {
            fprintf(stderr, "strophe_online: the session was not resumed\n");
            return 1;
        }
        xmpp_disconnect(conn);
        run_until(ctx, 2, 10);
        xmpp_conn_release(conn);
    }
    qsort(logins, (size_t)count, sizeof(double), compare);
    qsort(resumptions, (size_t)count, sizeof(double), compare);
    printf("{\"client\":\"libstrophe\",\"count\":%d,\"login_ms\":%.1f,\"resume_ms\":%.1f}\n", count, logins[count / 2],
           resumptions[count / 2]);
    xmpp_ctx_free(ctx);
    xmpp_shutdown();
    return 0;
}
