/*
 * test_listener.c - server/listener.c: connections opened together are
 * spread evenly over libmicrohttpd's I/O threads; a connection over the
 * limits is refused at once and bursts over the limit never stall the
 * daemon (libmicrohttpd 0.9.75's at-limit deadlock, listener.h); a closed
 * listener refuses; a port in use is an error.
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

static const char REFUSAL[] = "HTTP/1.1 503 Service Unavailable\r\n"
                              "Connection: close\r\n"
                              "Content-Length: 4\r\n\r\nfull";

typedef struct served {
    rbd_listener *listener;
    struct MHD_Daemon *daemon;
    struct sockaddr_in addr;
} served;

/* limit: the listener's connection limit (0: 1000), per_address its
 * limit per client address (0: none); pool I/O threads (0 or 1: none),
 * in poll(2) instead of epoll when use_poll. */
static void serve_with(served *s, unsigned limit, unsigned per_address,
                       unsigned pool, int use_poll)
{
    memset(s, 0, sizeof *s);
    atomic_store(&threads_seen, 0);
    s->addr.sin_family = AF_INET;
    s->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rbd_listener_limits lim = {.max_connections = limit ? limit : 1000,
                               .max_per_address = per_address,
                               .refusal = REFUSAL,
                               .refusal_len = sizeof REFUSAL - 1};
    s->listener = listener_open((struct sockaddr *)&s->addr, sizeof s->addr,
                                64, &lim);
    ck_assert_msg(s->listener != NULL, "listener_open: %s", strerror(errno));
    s->addr.sin_port = htons(listener_port(s->listener));
    ck_assert_uint_ne(listener_port(s->listener), 0);
    s->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD |
            (use_poll ? MHD_USE_POLL : MHD_USE_EPOLL) |
            MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
        0, NULL, NULL, answer_thread, NULL, MHD_OPTION_THREAD_POOL_SIZE,
        pool > 1 ? pool : 0u, MHD_OPTION_CONNECTION_LIMIT,
        listener_mhd_limit(s->listener, pool), MHD_OPTION_NOTIFY_CONNECTION,
        listener_notify, s->listener, MHD_OPTION_END);
    ck_assert_ptr_nonnull(s->daemon);
    ck_assert_int_eq(listener_start(s->listener, s->daemon, NULL, NULL), 0);
}

static void serve(served *s, unsigned limit)
{
    serve_with(s, limit, 0, POOL, 0);
}

/* Stops the daemon (which closes what is left) and checks that every
 * connection counted in was given back. */
static void unserve(served *s)
{
    listener_close(s->listener);
    MHD_stop_daemon(s->daemon);
    ck_assert_uint_eq(listener_connections(s->listener), 0);
    listener_destroy(s->listener);
}

static unsigned open_connections(const served *s)
{
    const union MHD_DaemonInfo *i =
        MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return i ? i->num_connections : 0;
}

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
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
    unserve(&s);
}
END_TEST

/* Reads what the server sends until it closes (or 2 s); asserts it was
 * the refusal, within 1 s of asking. */
static void expect_refused(int fd, double t0)
{
    char buf[256];
    size_t got = 0;
    ssize_t n;
    while (readable_within(fd, 2000) &&
           (n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    ck_assert_msg(strcmp(buf, REFUSAL) == 0, "refused with '%s'", buf);
    ck_assert_msg(now_ms() - t0 < 1000, "refused after %.0f ms",
                  now_ms() - t0);
}

/* At the connection limit a new client is refused at once with the
 * refusal bytes, and served again once a connection has closed. */
START_TEST(test_limit_refuses_at_once)
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
    double t0 = now_ms();
    int third = connect_to(&s);
    send_request(third, "close");
    expect_refused(third, t0);
    close(third);
    uint64_t full, per_address;
    listener_refused(s.listener, &full, &per_address);
    ck_assert_uint_eq(full, 1);
    ck_assert_uint_eq(per_address, 0);
    ck_assert_uint_eq(listener_connections(s.listener), 2);

    close(open_fds[0]);
    for (int i = 0; i < 500 && listener_connections(s.listener) > 1; i++)
        sleep_ms(10);
    ck_assert_uint_eq(listener_connections(s.listener), 1);
    int again = connect_to(&s);
    ck_assert_int_ge(ask(again), 0);
    close(again);
    close(open_fds[1]);
    unserve(&s);
}
END_TEST

/* The per-address limit refuses the next connection from an address that
 * has its share open, while the total limit is far away. */
START_TEST(test_per_address_limit)
{
    served s;
    serve_with(&s, 100, 3, POOL, 0);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = connect_to(&s);
        send_request(fds[i], "keep-alive");
        ck_assert(readable_within(fds[i], 5000));
    }
    double t0 = now_ms();
    int fourth = connect_to(&s);
    expect_refused(fourth, t0);
    close(fourth);
    uint64_t full, per_address;
    listener_refused(s.listener, &full, &per_address);
    ck_assert_uint_eq(full, 0);
    ck_assert_uint_eq(per_address, 1);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    for (int i = 0; i < 500 && listener_connections(s.listener) > 0; i++)
        sleep_ms(10);
    int fd = connect_to(&s);
    ck_assert_int_ge(ask(fd), 0);
    close(fd);
    unserve(&s);
}
END_TEST

/* The reproduction of libmicrohttpd 0.9.75's at-limit deadlock: rounds of
 * more idle connections than the limit, opened in a burst, then closed;
 * after each round a request is served within 1 s, and the daemon stops.
 * With a pool of 2 every I/O thread's own limit once was half of it; the
 * single-thread and poll(2) loops take the other paths into it. */
static void burst_rounds(unsigned pool, int use_poll)
{
    enum { LIMIT = 10, BURST = 24, ROUNDS = 4 };
    served s;
    serve_with(&s, LIMIT, 0, pool, use_poll);
    for (int r = 0; r < ROUNDS; r++) {
        /* The last round's closes may still be on their way through the
         * I/O threads (the probe below needs only one free slot): start
         * from an empty server so that exactly BURST - LIMIT are refused. */
        for (int i = 0; i < 500 && listener_connections(s.listener) > 0; i++)
            sleep_ms(10);
        ck_assert_uint_eq(listener_connections(s.listener), 0);
        int fds[BURST];
        uint64_t before, full = 0, per_address;
        listener_refused(s.listener, &before, &per_address);
        for (int i = 0; i < BURST; i++)
            fds[i] = connect_to(&s);
        /* Every one accepted, counted in or refused. */
        for (int i = 0; i < 500; i++) {
            listener_refused(s.listener, &full, &per_address);
            if (full - before >= BURST - LIMIT)
                break;
            sleep_ms(10);
        }
        ck_assert_uint_eq(full - before, BURST - LIMIT);
        ck_assert_uint_eq(listener_connections(s.listener), LIMIT);
        for (int i = 0; i < BURST; i++)
            close(fds[i]);
        double t0 = now_ms();
        int fd = -1, served_ok = 0;
        while (!served_ok && now_ms() - t0 < 1000) {
            /* Until the closes have been seen, a new one may be refused. */
            fd = connect_to(&s);
            send_request(fd, "close");
            char buf[512];
            ssize_t n = readable_within(fd, 1000) ? recv(fd, buf, 511, 0) : 0;
            served_ok = n > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0;
            close(fd);
            if (!served_ok)
                sleep_ms(20);
        }
        ck_assert_msg(served_ok, "round %d: no answer within 1 s", r);
    }
    unserve(&s);
}

START_TEST(test_burst_over_limit_pool)
{
    burst_rounds(POOL, 0);
}
END_TEST

START_TEST(test_burst_over_limit_one_thread)
{
    burst_rounds(1, 0);
}
END_TEST

START_TEST(test_burst_over_limit_poll)
{
    burst_rounds(POOL, 1);
}
END_TEST

START_TEST(test_port_in_use)
{
    served s;
    serve(&s, 0);
    errno = 0;
    rbd_listener_limits lim = {.max_connections = 1};
    rbd_listener *again =
        listener_open((struct sockaddr *)&s.addr, sizeof s.addr, 64, &lim);
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
    rbd_listener_limits lim = {.max_connections = 1};
    rbd_listener *l = listener_open((struct sockaddr *)&a, sizeof a, 8, &lim);
    ck_assert_ptr_nonnull(l);
    a.sin_port = htons(listener_port(l));
    listener_destroy(l);
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
    tcase_add_test(tc, test_limit_refuses_at_once);
    tcase_add_test(tc, test_per_address_limit);
    tcase_add_test(tc, test_burst_over_limit_pool);
    tcase_add_test(tc, test_burst_over_limit_one_thread);
    tcase_add_test(tc, test_burst_over_limit_poll);
    tcase_add_test(tc, test_port_in_use);
    tcase_add_test(tc, test_close_unstarted);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
