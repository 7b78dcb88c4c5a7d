/* test_http_limits.c - rayboxd at its connection limits: bursts of idle
 * connections beyond --max-connections, round after round, are refused at
 * once with a 503, /v1/health is answered within 1 s once they are gone,
 * and SIGTERM still ends the process cleanly. This is the reproduction of
 * libmicrohttpd 0.9.75's at-limit deadlock (server/listener.h), which
 * once left rayboxd unable to answer or stop; it runs with the default two
 * I/O threads and with one, and (the _poll run) with poll(2). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_util.h"
#include "testutil.h"

enum { LIMIT = 10 };

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* What the server sends on fd until it closes, for up to ms. */
static size_t read_all(int fd, char *buf, size_t cap, int ms)
{
    size_t got = 0;
    double until = now_ms() + ms;
    while (got < cap - 1 && now_ms() < until) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) != 1)
            continue;
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    return got;
}

/* GET /v1/health on a raw connection: the status line's code, 0 if none
 * came within ms. */
static int health_status(int port, int ms)
{
    int fd = connect_port(port);
    static const char req[] =
        "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
    char buf[2048];
    read_all(fd, buf, sizeof buf, ms);
    close(fd);
    return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : 0;
}

/* /v1/health until it answers 200, for up to ms; returns how long it
 * took, or -1. */
static double health_within(int port, int ms)
{
    double t0 = now_ms();
    while (now_ms() - t0 < ms) {
        if (health_status(port, ms) == 200)
            return now_ms() - t0;
        sleep_ms(10);
    }
    return -1;
}

static void refused_with_503(int fd, double t0, int round, int i)
{
    char buf[2048];
    read_all(fd, buf, sizeof buf, 2000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 503", 12) == 0,
                  "round %d, connection %d over the limit: '%.80s'", round, i,
                  buf);
    ck_assert_msg(strstr(buf, "Retry-After: ") &&
                      strstr(buf, "application/problem+json"),
                  "refusal without Retry-After or problem body: %s", buf);
    ck_assert_msg(now_ms() - t0 < 1000, "refused after %.0f ms",
                  now_ms() - t0);
}

/* Rounds of 2 x LIMIT idle connections 20 ms apart: the first LIMIT are
 * held, the rest refused at once; closing them, health answers within 1 s.
 * The last round leaves its connections to --connection-timeout instead
 * (libmicrohttpd closes them; the clients' sockets stay open). */
static void burst_rounds(const char *io_threads)
{
    const char *const args[] = {"--max-connections", "10",
                                "--connection-timeout", "1",
                                "--io-threads", io_threads,
                                "--quiet", NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    enum { ROUNDS = 4, BURST = 2 * LIMIT };
    for (int r = 0; r < ROUNDS; r++) {
        int fds[BURST];
        for (int i = 0; i < BURST; i++) {
            double t0 = now_ms();
            fds[i] = connect_port(s.port);
            if (i >= LIMIT)
                refused_with_503(fds[i], t0, r, i);
            sleep_ms(20);
        }
        /* At the limit, a new client is refused, not left waiting. */
        double t0 = now_ms();
        ck_assert_int_eq(health_status(s.port, 1000), 503);
        ck_assert_msg(now_ms() - t0 < 1000, "health refused after %.0f ms",
                      now_ms() - t0);
        if (r == ROUNDS - 1)
            sleep_ms(2500); /* past the idle timeout */
        for (int i = 0; i < BURST; i++)
            close(fds[i]);
        double took = health_within(s.port, 1000);
        ck_assert_msg(took >= 0, "round %d: no health answer within 1 s", r);
    }
    char *log = rbt_server_log(&s);
    int stopped = rbt_server_stop_within(&s, 5000);
    ck_assert_msg(stopped == 0, "SIGTERM after the bursts: %d (log: %s)",
                  stopped, log);
    free(log);
}

START_TEST(test_burst_two_io_threads)
{
    burst_rounds("2");
}
END_TEST

START_TEST(test_burst_one_io_thread)
{
    burst_rounds("1");
}
END_TEST

/* A client that holds --max-connections-per-address open gets a 503 for
 * the next one; the server's limit is far away, and once the client's
 * connections close it is served again. */
START_TEST(test_per_address_limit)
{
    static const char *const args[] = {"--max-connections-per-address", "4",
                                        "--quiet", NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    int fds[4];
    for (int i = 0; i < 4; i++)
        fds[i] = connect_port(s.port);
    double t0 = now_ms();
    int extra = connect_port(s.port);
    refused_with_503(extra, t0, 0, 4);
    close(extra);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    ck_assert_msg(health_within(s.port, 1000) >= 0,
                  "no health answer after the address's connections closed");
    /* At least the one refused above: health probes made while the
     * closes were still on their way may have been refused too. */
    rbt_resp m;
    ck_assert_int_eq(rbt_get(NULL, &s, "/metrics", &m), 0);
    ck_assert_int_eq(m.status, 200);
    ck_assert_msg(rbt_metric(m.body, "raybox_connections_refused_total{limit="
                                     "\"address\"}") >= 1,
                  "no refusal by address counted");
    rbt_resp_free(&m);
    ck_assert_int_eq(rbt_server_stop_within(&s, 5000), 0);
}
END_TEST

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    Suite *s = suite_create("http_limits");
    TCase *tc = tcase_create("http_limits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_burst_two_io_threads);
    tcase_add_test(tc, test_burst_one_io_thread);
    tcase_add_test(tc, test_per_address_limit);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
