/*
 * test_listener.c - server/listener.c: connections opened together are
 * spread evenly over libmicrohttpd's I/O threads; a closed listener
 * refuses; a port in use is an error.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "listener.h"
#include "testutil.h"

enum { POOL = 2, CONNECTIONS = 16 };

/* Each I/O thread numbers itself on its first request. */
static _Atomic int threads_seen;
static _Thread_local int thread_number = -1;

static enum MHD_Result answer_thread(void *cls, struct MHD_Connection *c,
                                     const char *url, const char *method,
                                     const char *version, const char *data,
                                     size_t *size, void **state)
{
    (void)cls, (void)url, (void)method, (void)version, (void)data;
    (void)size;
    static int seen;
    if (!*state) { /* answered on the second call, as keep-alive wants */
        *state = &seen;
        return MHD_YES;
    }
    if (thread_number < 0)
        thread_number = atomic_fetch_add(&threads_seen, 1);
    char body[16];
    int n = snprintf(body, sizeof body, "%d", thread_number);
    struct MHD_Response *r = MHD_create_response_from_buffer(
        (size_t)n, body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

typedef struct served {
    rbd_listener *listener;
    struct MHD_Daemon *daemon;
    struct sockaddr_in addr;
} served;

/* limit: the daemon's connection limit and the listener's (0: none). */
static void serve(served *s, unsigned limit)
{
    memset(s, 0, sizeof *s);
    atomic_store(&threads_seen, 0);
    s->addr.sin_family = AF_INET;
    s->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->listener = listener_open((struct sockaddr *)&s->addr, sizeof s->addr,
                                64);
    ck_assert_msg(s->listener != NULL, "listener_open: %s", strerror(errno));
    s->addr.sin_port = htons(listener_port(s->listener));
    ck_assert_uint_ne(listener_port(s->listener), 0);
    s->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
            MHD_USE_NO_LISTEN_SOCKET,
        0, NULL, NULL, answer_thread, NULL, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)POOL, MHD_OPTION_CONNECTION_LIMIT, limit ? limit : 1000u,
        MHD_OPTION_END);
    ck_assert_ptr_nonnull(s->daemon);
    ck_assert_int_eq(
        listener_start(s->listener, s->daemon, limit, NULL, NULL), 0);
}

static void unserve(served *s)
{
    listener_close(s->listener);
    MHD_stop_daemon(s->daemon);
}

static unsigned open_connections(const served *s)
{
    const union MHD_DaemonInfo *i =
        MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return i ? i->num_connections : 0;
}

static int connect_to(const served *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(
        connect(fd, (const struct sockaddr *)&s->addr, sizeof s->addr), 0);
    return fd;
}

static void send_request(int fd, const char *connection)
{
    char req[128];
    int n = snprintf(req, sizeof req,
                     "GET / HTTP/1.1\r\nHost: t\r\nConnection: %s\r\n\r\n",
                     connection);
    ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
}

/* Reads an answer to "Connection: close" to its end; returns the
 * answering thread. */
static int read_answer(int fd)
{
    char buf[1024];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof buf - 1 &&
           (n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "answer: %s", buf);
    const char *body = strstr(buf, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    return atoi(body + 4);
}

/* One request on a connected socket; returns the answering thread. */
static int ask(int fd)
{
    send_request(fd, "close");
    return read_answer(fd);
}

/* Whether fd has something to read within ms. */
static int readable_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1;
}

/* A client that opens its connections together (a connection pool, wrk)
 * gets about half of them on each I/O thread. libmicrohttpd's own accept
 * loop gave one thread up to 11 in a row, and often all 16. */
START_TEST(test_burst_spreads_evenly)
{
    served s;
    serve(&s, 0);
    /* Every client socket is made before the first connect, so that the
     * server's descriptors are numbered one after another as in a
     * process of its own. */
    int fds[CONNECTIONS];
    for (int i = 0; i < CONNECTIONS; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_ge(fds[i], 0);
    }
    for (int i = 0; i < CONNECTIONS; i++)
        ck_assert_int_eq(connect(fds[i], (struct sockaddr *)&s.addr,
                                 sizeof s.addr), 0);
    /* All taken in before any closes: a closed connection's number would
     * be given to the next one accepted. */
    for (int tries = 0; tries < 500 && open_connections(&s) < CONNECTIONS;
         tries++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    ck_assert_uint_eq(open_connections(&s), CONNECTIONS);
    int per_thread[CONNECTIONS] = {0};
    for (int i = 0; i < CONNECTIONS; i++) {
        int t = ask(fds[i]);
        ck_assert_int_ge(t, 0);
        ck_assert_int_lt(t, POOL);
        per_thread[t]++;
        close(fds[i]);
    }
    /* Socket numbers alternate between the two threads; a number freed
     * meanwhile elsewhere in the process (seen: one in about twenty runs)
     * can shift a connection or two. libmicrohttpd's own accept loop gave
     * one thread 14 to 16 of the 16. */
    for (int t = 0; t < POOL; t++)
        ck_assert_msg(per_thread[t] >= CONNECTIONS / POOL - 2 &&
                          per_thread[t] <= CONNECTIONS / POOL + 2,
                      "I/O thread %d served %d of %d connections", t,
                      per_thread[t], CONNECTIONS);
    unserve(&s);
}
END_TEST

START_TEST(test_closed_listener_refuses)
{
    served s;
    serve(&s, 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&s.addr, sizeof s.addr),
                     0);
    ck_assert_int_ge(ask(fd), 0); /* served while open */
    close(fd);

    listener_close(s.listener);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    int rc = connect(fd, (struct sockaddr *)&s.addr, sizeof s.addr);
    int err = errno;
    close(fd);
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(err, ECONNREFUSED);
    MHD_stop_daemon(s.daemon);
}
END_TEST

/* At the connection limit a new client waits in the backlog and is
 * served once a connection closes: it is not accepted only to be closed
 * unanswered. */
START_TEST(test_limit_waits_in_backlog)
{
    served s;
    serve(&s, 2);
    int open_fds[2];
    for (int i = 0; i < 2; i++) {
        open_fds[i] = connect_to(&s);
        /* A keep-alive request: the connection stays open afterwards. */
        send_request(open_fds[i], "keep-alive");
        ck_assert(readable_within(open_fds[i], 5000));
    }
    int waiting = connect_to(&s); /* completes in the kernel's backlog */
    send_request(waiting, "close");
    if (readable_within(waiting, 300)) {
        char b[256] = "";
        ssize_t n = recv(waiting, b, sizeof b - 1, 0);
        ck_abort_msg("a third connection was served or closed at a limit "
                     "of 2: %zd bytes '%.60s'", n, n > 0 ? b : "");
    }
    close(open_fds[0]);
    ck_assert_msg(readable_within(waiting, 5000),
                  "the waiting connection was not served after one closed");
    ck_assert_int_ge(read_answer(waiting), 0);
    close(waiting);
    close(open_fds[1]);
    unserve(&s);
}
END_TEST

START_TEST(test_port_in_use)
{
    served s;
    serve(&s, 0);
    errno = 0;
    rbd_listener *again =
        listener_open((struct sockaddr *)&s.addr, sizeof s.addr, 64);
    int err = errno;
    ck_assert_ptr_null(again);
    ck_assert_int_eq(err, EADDRINUSE);
    unserve(&s);
}
END_TEST

/* Closing a listener that never started (start-up failed later) frees it
 * and its socket. */
START_TEST(test_close_unstarted)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    rbd_listener *l = listener_open((struct sockaddr *)&a, sizeof a, 8);
    ck_assert_ptr_nonnull(l);
    a.sin_port = htons(listener_port(l));
    listener_close(l);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), -1);
    close(fd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("listener");
    TCase *tc = tcase_create("listener");
    tcase_add_test(tc, test_burst_spreads_evenly);
    tcase_add_test(tc, test_closed_listener_refuses);
    tcase_add_test(tc, test_limit_waits_in_backlog);
    tcase_add_test(tc, test_port_in_use);
    tcase_add_test(tc, test_close_unstarted);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
