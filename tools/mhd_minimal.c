/*
 * mhd_minimal.c - the serving-layer limit of this machine, for make load:
 * libmicrohttpd with rayboxd's daemon flags (internal polling thread,
 * epoll or with --poll poll(2), suspend/resume allowed, a thread pool of
 * --io-threads), its connection memory and its accept thread
 * (server/listener.c), on 127.0.0.1, answering every request with a
 * constant body of the size and shape of a 16-ray nearest answer: JSON,
 * or binary (320 bytes) to a request with "Accept: application/x-raybox".
 * It reads request bodies and drops them; nothing else.
 *
 *   mhd-minimal [--port N] [--io-threads N] [--connection-memory BYTES]
 *               [--poll]   (poll(2) instead of epoll, like rayboxd --poll)
 *
 * Prints {"msg":"listening","port":N} on stderr; stops on SIGTERM/SIGINT.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listener.h"

static char body[1100];
/* The binary form's answer of the same query: a 64-byte header and 16
 * 16-byte records (docs/binary-format.md), zeros but for the magic. */
static char binary_body[64 + 16 * 16] = "RBOX";

/* Appends ,"key":[...] to body at n with 16 items, item i printed by fmt
 * from first + i % period (a format without a conversion ignores it);
 * returns the new length. */
static int put_list(int n, const char *key, const char *fmt, int first,
                    int period)
{
    n += snprintf(body + n, sizeof body - (size_t)n, ",\"%s\":[", key);
    for (int i = 0; i < 16; i++) {
        if (i)
            n += snprintf(body + n, sizeof body - (size_t)n, ",");
        n += snprintf(body + n, sizeof body - (size_t)n, fmt,
                      first + i % period);
    }
    return n + snprintf(body + n, sizeof body - (size_t)n, "]");
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c,
                               const char *url, const char *method,
                               const char *version, const char *data,
                               size_t *size, void **state)
{
    static int first;
    (void)cls, (void)url, (void)method, (void)version, (void)data;
    if (!*state) {
        *state = &first;
        return MHD_YES;
    }
    if (*size) {
        *size = 0; /* consume and drop */
        return MHD_YES;
    }
    /* Like rayboxd, the answer takes the form the client accepts (only
     * the exact type is looked at: make load sends nothing else). */
    const char *accept =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
    int binary = accept && strcmp(accept, "application/x-raybox") == 0;
    struct MHD_Response *r =
        binary ? MHD_create_response_from_buffer(sizeof binary_body,
                                                 binary_body,
                                                 MHD_RESPMEM_PERSISTENT)
               : MHD_create_response_from_buffer(strlen(body), body,
                                                 MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type",
                            binary ? "application/x-raybox"
                                   : "application/json");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

int main(int argc, char **argv)
{
    unsigned port = 0, threads = 2;
    size_t memory = 32 * 1024; /* rayboxd's default */
    int use_poll = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: mhd-minimal [--port N] [--io-threads N] "
                   "[--connection-memory BYTES] [--poll]\n"
                   "libmicrohttpd set up as rayboxd is, answering every "
                   "request with a constant\n16-ray nearest answer: the "
                   "serving-layer bound of make load (scripts/load.sh).\n"
                   "Prints {\"msg\":\"listening\",\"port\":N} on stderr; "
                   "stops on SIGTERM/SIGINT.\n");
            return 0;
        } else if (strcmp(a, "--poll") == 0) {
            use_poll = 1;
        } else if (has_value && strcmp(a, "--port") == 0) {
            port = (unsigned)atoi(argv[++i]);
        } else if (has_value && strcmp(a, "--io-threads") == 0) {
            threads = (unsigned)atoi(argv[++i]);
        } else if (has_value && strcmp(a, "--connection-memory") == 0) {
            memory = (size_t)atol(argv[++i]);
        } else {
            fprintf(stderr, "mhd-minimal: unknown option or missing value "
                    "'%s' (see --help)\n", a);
            return 2;
        }
    }
    /* A nearest answer for 16 rays with every field rayboxd writes, so
     * that wrk and the kernel move as many bytes as for the real one
     * (about 760 bytes of body). */
    int n = snprintf(body, sizeof body, "{\"mode\":\"nearest\",\"count\":16");
    n = put_list(n, "hit", "true", 0, 1);
    n = put_list(n, "box", "%d", 100, 16);
    n = put_list(n, "t_enter", "0.12345%d", 0, 10);
    n = put_list(n, "t_exit", "0.23456%d", 0, 10);
    n = put_list(n, "face", "\"-x\"", 0, 1);
    n = put_list(n, "exit_face", "\"+x\"", 0, 1);
    snprintf(body + n, sizeof body - (size_t)n,
             ",\"scene_version\":1,\"meta\":{\"backend\":\"none\","
             "\"device\":\"none\",\"elapsed_ms\":0.000,"
             "\"fell_back\":false}}");

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* The same admission as rayboxd's defaults, so that make load
     * compares like with like (and no burst can reach libmicrohttpd's
     * own limit, listener.h). */
    rbd_listener_limits limits = {.max_connections = 1000,
                                  .max_per_address = 256};
    rbd_listener *l =
        listener_open((struct sockaddr *)&addr, sizeof addr, 1024, &limits);
    struct MHD_Daemon *d = l ? MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD |
            (use_poll ? MHD_USE_POLL : MHD_USE_EPOLL) |
            MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
            MHD_USE_NO_LISTEN_SOCKET,
        0, NULL, NULL, handler, NULL,
        MHD_OPTION_THREAD_POOL_SIZE, threads > 1 ? threads : 0,
        MHD_OPTION_CONNECTION_LIMIT,
        listener_mhd_limit(l, threads > 1 ? threads : 0),
        MHD_OPTION_NOTIFY_CONNECTION, listener_notify, l,
        MHD_OPTION_CONNECTION_TIMEOUT, 30u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory, MHD_OPTION_END) : NULL;
    if (!d || listener_start(l, d, NULL, NULL)) {
        fprintf(stderr, "mhd-minimal: cannot start\n");
        return 1;
    }
    fprintf(stderr, "{\"msg\":\"listening\",\"port\":%u}\n",
            listener_port(l));
    sigdelset(&set, SIGPIPE);
    int sig;
    sigwait(&set, &sig);
    listener_close(l);
    MHD_stop_daemon(d);
    listener_destroy(l);
    return 0;
}
