/* test_http_strict.c - rayboxd refuses what HTTP forbids instead of
 * guessing (server/strict.h), over raw sockets: conflicting or duplicate
 * Content-Length, a Transfer-Encoding other than chunked, no Host on
 * HTTP/1.1, lengths libmicrohttpd cannot read, NUL bytes and escapes in
 * scene ids, bytes that are not UTF-8 in echoed headers; each is answered
 * 400 (or 404/501) as problem+json, or by libmicrohttpd itself, with the
 * connection closed and nothing acted on, and every log line stays valid
 * UTF-8 JSON. Then slow clients: headers or a body dripped in are cut off
 * by --header-timeout and --min-body-rate while the connection limit is
 * full, and the server answers others again within a second. */
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
#include <yajl/yajl_tree.h>

#include "http_util.h"
#include "strict.h"
#include "testutil.h"

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

/* One raw request (len bytes: NULs allowed) on a fresh connection. */
typedef struct answer {
    int status;    /* of the first status line, 0 if none */
    int closed;    /* the server closed the connection */
    double ms;     /* until the close, or the read timeout */
    char text[8192];
} answer;

static void send_raw(const rbt_server *s, const char *req, size_t len,
                     answer *a)
{
    double t0 = now_ms();
    rbt_raw(s->port, req, len, 0, a->text, sizeof a->text, 3000, &a->closed);
    a->ms = now_ms() - t0;
    a->status = strncmp(a->text, "HTTP/1.", 7) == 0 ? atoi(a->text + 9) : 0;
}

#define SEND(s, lit, a) send_raw(s, lit, sizeof lit - 1, a)

/* The answer is a problem+json `status`, the connection closed at once. */
static void refused(const answer *a, int status, const char *what)
{
    ck_assert_msg(a->status == status, "%s: %d, expected %d: %.300s", what,
                  a->status, status, a->text);
    ck_assert_msg(strstr(a->text, "Content-Type: application/problem+json"),
                  "%s: not problem+json: %.300s", what, a->text);
    ck_assert_msg(a->closed && a->ms < 1000, "%s: closed %d after %.0f ms",
                  what, a->closed, a->ms);
}

/* A stored scene (one box); its id into id. */
static void make_scene(const rbt_server *s, char id[64])
{
    static const char body[] = "{\"dims\":3,\"boxes\":[[0,0,0,1,1,1]]}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /v1/scenes HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu"
                     "\r\nConnection: close\r\n\r\n%s",
                     sizeof body - 1, body);
    answer a;
    send_raw(s, req, (size_t)n, &a);
    ck_assert_int_eq(a.status, 201);
    const char *at = strstr(a.text, "\"id\":\"");
    ck_assert_ptr_nonnull(at);
    at += 6;
    size_t k = strcspn(at, "\"");
    ck_assert_uint_lt(k, 64);
    memcpy(id, at, k);
    id[k] = '\0';
}

static long scene_status(const rbt_server *s, const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    rbt_resp r;
    rbt_get(NULL, s, path, &r);
    long st = r.status;
    rbt_resp_free(&r);
    return st;
}

static long scene_count(const rbt_server *s)
{
    rbt_resp r;
    rbt_get(NULL, s, "/v1/scenes", &r);
    ck_assert_int_eq(r.status, 200);
    long n = 0;
    for (const char *p = r.body; (p = strstr(p, "\"id\":")); p++)
        n++;
    rbt_resp_free(&r);
    return n;
}

/* Well-formed UTF-8 (RFC 3629), the whole of s. */
static int utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2
                  : c >= 0xE0 && c <= 0xEF             ? 3
                  : c >= 0xF0 && c <= 0xF4             ? 4
                                                       : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
        i += k;
    }
    return 1;
}

/* Every line of the server's log is a JSON object in valid UTF-8 (yajl
 * checks the encoding of strings too). */
static void log_is_json(const rbt_server *s)
{
    char *log = rbt_server_log(s);
    for (char *line = log; *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        ck_assert_msg(utf8_ok((const unsigned char *)line, strlen(line)),
                      "log line not UTF-8: %s", line);
        char err[256];
        yajl_val v = yajl_tree_parse(line, err, sizeof err);
        ck_assert_msg(v && YAJL_IS_OBJECT(v), "log line not JSON (%s): %s",
                      err, line);
        yajl_tree_free(v);
        if (!end)
            break;
        line = end + 1;
    }
    free(log);
}

/* The body of an answer (after the blank line) parses as JSON in UTF-8. */
static void body_is_json(const answer *a)
{
    const char *b = strstr(a->text, "\r\n\r\n");
    ck_assert_ptr_nonnull(b);
    b += 4;
    ck_assert_msg(utf8_ok((const unsigned char *)b, strlen(b)),
                  "answer not UTF-8: %s", b);
    char err[256];
    yajl_val v = yajl_tree_parse(b, err, sizeof err);
    ck_assert_msg(v != NULL, "answer not JSON (%s): %s", err, b);
    yajl_tree_free(v);
}

/* The unescape callback: escapes of unreserved characters are decoded,
 * every other one stays as sent (no NUL, no '/', no raw high byte). */
START_TEST(test_unescape)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"/v1/scene%73/ab", "/v1/scenes/ab"},
        {"/a%2Db%2e%5F%7e%41", "/a-b._~A"},
        {"/x%00y", "/x%00y"},
        {"/x%2Fy%2f", "/x%2Fy%2f"},
        {"/%ff%C3%A9", "/%ff%C3%A9"},
        {"/%20%25%3F", "/%20%25%3F"},
        {"/bad%g1%4", "/bad%g1%4"},
        {"%", "%"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", cases[i].in);
        size_t n = strict_unescape(NULL, NULL, buf);
        ck_assert_str_eq(buf, cases[i].out);
        ck_assert_uint_eq(n, strlen(cases[i].out));
    }
}
END_TEST

static const char *const quiet_args[] = {"--workers", "1", NULL};

/* ------------------------------------------------------------------------
 * A. Strict HTTP
 */

/* Two Content-Length headers: libmicrohttpd takes the first, a proxy in
 * front may take the other. Refused whether they differ or not. */
START_TEST(test_duplicate_content_length)
{
    rbt_server s;
    rbt_server_start(&s, quiet_args);
    answer a;
    /* A 2-byte body for us, a scene for whoever reads 35. */
    SEND(&s, "POST /v1/scenes HTTP/1.1\r\nHost: localhost\r\n"
             "Content-Type: application/json\r\n"
             "Content-Length: 35\r\nContent-Length: 2\r\n\r\n"
             "{\"dims\":3,\"boxes\":[[0,0,0,1,1,1]]}\n", &a);
    refused(&a, 400, "Content-Length 35 and 2");
    ck_assert_ptr_nonnull(strstr(a.text, "Content-Length"));
    SEND(&s, "POST /v1/scenes HTTP/1.1\r\nHost: localhost\r\n"
             "Content-Type: application/json\r\n"
             "Content-Length: 35\r\ncontent-length: 35\r\n\r\n"
             "{\"dims\":3,\"boxes\":[[0,0,0,1,1,1]]}\n", &a);
    refused(&a, 400, "Content-Length 35 twice");
    /* On a route without a body too. */
    SEND(&s, "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n"
             "Content-Length: 0\r\nContent-Length: 5\r\n\r\n", &a);
    refused(&a, 400, "GET with two lengths");
    ck_assert_int_eq(scene_count(&s), 0);
    log_is_json(&s);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* A Transfer-Encoding libmicrohttpd would read as "until the connection
 * closes" is answered on the spot, not held to the timeout. */
START_TEST(test_transfer_encoding)
{
    rbt_server s;
    rbt_server_start(&s, quiet_args);
    answer a;
    SEND(&s, "POST /v1/intersect HTTP/1.1\r\nHost: localhost\r\n"
             "Content-Type: application/json\r\n"
             "Transfer-Encoding: gzip\r\n\r\n{}", &a);
    refused(&a, 400, "Transfer-Encoding: gzip");
    SEND(&s, "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n"
             "Transfer-Encoding: identity\r\n\r\n", &a);
    refused(&a, 400, "GET with Transfer-Encoding: identity");
    SEND(&s, "POST /v1/scenes HTTP/1.1\r\nHost: localhost\r\n"
             "Content-Type: application/json\r\n"
             "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", &a);
    refused(&a, 501, "Transfer-Encoding: gzip, chunked");
    SEND(&s, "POST /v1/scenes HTTP/1.1\r\nHost: localhost\r\n"
             "Content-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n"
             "0\r\n\r\n", &a);
    refused(&a, 400, "Transfer-Encoding twice");
    SEND(&s, "POST /v1/scenes HTTP/1.1\r\nHost: localhost\r\n"
             "Content-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
             "0\r\n\r\n", &a);
    refused(&a, 400, "Transfer-Encoding and Content-Length");
    /* chunked alone still works. */
    static const char ok[] = "POST /v1/scenes HTTP/1.1\r\nHost: localhost\r\n"
                             "Content-Type: application/json\r\n"
                             "Transfer-Encoding: chunked\r\n"
                             "Connection: close\r\n\r\n"
                             "22\r\n{\"dims\":3,\"boxes\":[[0,0,0,1,1,1]]}\r\n"
                             "0\r\n\r\n";
    SEND(&s, ok, &a);
    ck_assert_msg(a.status == 201, "chunked: %.300s", a.text);
    ck_assert_int_eq(scene_count(&s), 1);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* RFC 9112 3.2: one Host on HTTP/1.1; HTTP/1.0 may go without. */
START_TEST(test_host)
{
    rbt_server s;
    rbt_server_start(&s, quiet_args);
    answer a;
    SEND(&s, "GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n", &a);
    refused(&a, 400, "HTTP/1.1 without Host");
    ck_assert_ptr_nonnull(strstr(a.text, "Host"));
    SEND(&s, "GET /v1/health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &a);
    refused(&a, 400, "two Host headers");
    char id[64];
    make_scene(&s, id);
    char req[256];
    int n = snprintf(req, sizeof req, "DELETE /v1/scenes/%s HTTP/1.1\r\n"
                     "Connection: close\r\n\r\n", id);
    send_raw(&s, req, (size_t)n, &a);
    refused(&a, 400, "DELETE without Host");
    ck_assert_int_eq(scene_status(&s, id), 200);
    SEND(&s, "GET /v1/health HTTP/1.0\r\n\r\n", &a);
    ck_assert_msg(a.status == 200, "HTTP/1.0 without Host: %.300s", a.text);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* Lengths libmicrohttpd cannot read: it answers them itself (its own
 * HTML; our handler never runs) and closes the connection. Nothing is
 * acted on, not even a request pipelined behind; the log says so. */
START_TEST(test_unreadable_content_length)
{
    rbt_server s;
    rbt_server_start(&s, quiet_args);
    char id[64];
    make_scene(&s, id);
    static const char *const lengths[] = {"-1", "1x", "+35", " 3 5",
                                          "99999999999999999999999",
                                          "0x23"};
    static const int statuses[] = {400, 400, 400, 400, 413, 400};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        char req[1024];
        int n = snprintf(req, sizeof req,
                         "POST /v1/scenes HTTP/1.1\r\nHost: localhost\r\n"
                         "Content-Type: application/json\r\n"
                         "Content-Length: %s\r\n\r\n"
                         "{\"dims\":3,\"boxes\":[[0,0,0,1,1,1]]}"
                         "DELETE /v1/scenes/%s HTTP/1.1\r\nHost: localhost\r\n\r\n",
                         lengths[i], id);
        answer a;
        send_raw(&s, req, (size_t)n, &a);
        ck_assert_msg(a.status == statuses[i] && a.closed && a.ms < 1000,
                      "Content-Length '%s': %d closed %d after %.0f ms: "
                      "%.300s", lengths[i], a.status, a.closed, a.ms,
                      a.text);
        ck_assert_msg(!strstr(a.text, "204"), "pipelined DELETE answered");
    }
    ck_assert_int_eq(scene_count(&s), 1);
    ck_assert_int_eq(scene_status(&s, id), 200);
    char *log = rbt_server_log(&s);
    ck_assert_msg(strstr(log, "\"status\":400,\"outcome\":"
                              "\"answered_by_libmicrohttpd\""),
                  "no log line for libmicrohttpd's answer: %s", log);
    free(log);
    log_is_json(&s);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* A scene id with a NUL, an escape or stray bytes names no scene: never
 * the one its prefix names, nor another route. */
START_TEST(test_ids_exact)
{
    rbt_server s;
    rbt_server_start(&s, quiet_args);
    char id[64], req[1024];
    make_scene(&s, id);
    answer a;
    int n;

    /* %00 in the path: not decoded, so no id. */
    n = snprintf(req, sizeof req, "DELETE /v1/scenes/%s%%00x HTTP/1.1\r\n"
                 "Host: localhost\r\n\r\n", id);
    send_raw(&s, req, (size_t)n, &a);
    ck_assert_msg(a.status == 404 && strstr(a.text, "%00x"),
                  "DELETE <id>%%00x: %.300s", a.text);
    ck_assert_int_eq(scene_status(&s, id), 200);

    /* A NUL sent raw in the path. */
    n = snprintf(req, sizeof req, "DELETE /v1/scenes/%s", id);
    static const char tail[] = "\0x HTTP/1.1\r\nHost: localhost\r\n\r\n";
    memcpy(req + n, tail, sizeof tail - 1);
    send_raw(&s, req, (size_t)n + sizeof tail - 1, &a);
    refused(&a, 400, "DELETE <id><NUL>x");
    ck_assert_ptr_nonnull(strstr(a.text, "NUL"));
    ck_assert_int_eq(scene_status(&s, id), 200);

    /* %2F: the scene "<id>/intersect", not the intersect route. */
    static const char query[] = "{\"mode\":\"nearest\","
                                "\"rays\":[[0,0,0,1,0,0]]}";
    n = snprintf(req, sizeof req, "POST /v1/scenes/%s%%2Fintersect "
                 "HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n%s", id, sizeof query - 1,
                 query);
    send_raw(&s, req, (size_t)n, &a);
    ck_assert_msg(a.status == 404, "<id>%%2Fintersect: %.300s", a.text);

    /* Escapes of plain characters still mean them (RFC 3986 6.2.2.2). */
    n = snprintf(req, sizeof req, "GET /v1/scene%%73/%s HTTP/1.1\r\n"
                 "Host: localhost\r\nConnection: close\r\n\r\n", id);
    send_raw(&s, req, (size_t)n, &a);
    ck_assert_msg(a.status == 200, "/v1/scene%%73/<id>: %.300s", a.text);

    /* Bytes that are not ASCII: raw (400) or escaped (404). */
    SEND(&s, "GET /v1/scenes/\xff\xfe HTTP/1.1\r\nHost: localhost\r\n\r\n", &a);
    refused(&a, 400, "raw 0xff in the path");
    body_is_json(&a);
    SEND(&s, "GET /v1/scenes/%ff%c3%28 HTTP/1.1\r\nHost: localhost\r\n"
             "Connection: close\r\n\r\n", &a);
    ck_assert_msg(a.status == 404, "%%ff in the path: %.300s", a.text);
    body_is_json(&a);

    /* "scene": "<id>\u0000x" in a JSON body. */
    n = snprintf(req, sizeof req, "{\"mode\":\"nearest\",\"rays\":"
                 "[[0,0,0,1,0,0]],\"scene\":\"%s\\u0000x\"}", id);
    char full[2048];
    int m = snprintf(full, sizeof full, "POST /v1/intersect HTTP/1.1\r\n"
                     "Host: localhost\r\nContent-Type: application/json\r\n"
                     "Connection: close\r\nContent-Length: %d\r\n\r\n%s", n,
                     req);
    send_raw(&s, full, (size_t)m, &a);
    ck_assert_msg(a.status == 404 && strstr(a.text, "\"pointer\":\"/scene\"")
                      && strstr(a.text, "x00x"),
                  "\"scene\":\"<id>\\u0000x\": %.400s", a.text);
    body_is_json(&a);
    ck_assert_int_eq(scene_status(&s, id), 200);
    log_is_json(&s);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* Headers that answers or the log echo: bytes that are not UTF-8 (or not
 * ASCII at all, where only ASCII belongs) never reach a JSON string raw. */
START_TEST(test_echoed_headers)
{
    rbt_server s;
    rbt_server_start(&s, quiet_args);
    answer a;
    SEND(&s, "POST /v1/intersect HTTP/1.1\r\nHost: localhost\r\n"
             "Content-Type: application/json\r\nAccept: text/\xff\xfe\r\n"
             "Content-Length: 2\r\n\r\n{}", &a);
    refused(&a, 400, "Accept with 0xff");
    body_is_json(&a);
    SEND(&s, "POST /v1/intersect HTTP/1.1\r\nHost: localhost\r\n"
             "Content-Type: text/\xc3\x28\r\nContent-Length: 2\r\n\r\n{}", &a);
    refused(&a, 400, "Content-Type with a broken sequence");
    body_is_json(&a);
    /* A request id that is not a token is replaced, not echoed. */
    SEND(&s, "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n"
             "X-Request-Id: a\xff\r\nConnection: close\r\n\r\n", &a);
    ck_assert_int_eq(a.status, 200);
    ck_assert_ptr_null(strstr(a.text, "a\xff"));
    /* A method with stray bytes, and a valid UTF-8 one: the log line
     * carries both as valid UTF-8. */
    SEND(&s, "G\xe9T /v1/health HTTP/1.1\r\nHost: localhost\r\n"
             "Connection: close\r\n\r\n", &a);
    ck_assert_int_eq(a.status, 405);
    body_is_json(&a);
    log_is_json(&s);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* ------------------------------------------------------------------------
 * B. Slow clients
 */
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

/* GET /v1/health on a new connection: the status, 0 if none within ms. */
static int health_status(int port, int ms)
{
    int fd = connect_port(port);
    static const char req[] = "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n"
                              "Connection: close\r\n\r\n";
    send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
    char buf[2048];
    size_t got = 0;
    double until = now_ms() + ms;
    while (got < sizeof buf - 1 && now_ms() < until) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) != 1)
            continue;
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    close(fd);
    return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : 0;
}

enum { SLOW = 20 };

/* SLOW connections fill --max-connections and drip a byte each every
 * 0.5 s: header bytes, or (body) body bytes after whole headers that
 * announce 100000. Every byte is activity to libmicrohttpd's idle
 * timeout, so only the deadlines can end them: after 3 s health must
 * answer again within 1 s, and each slow one got its 408 or a close. */
static void slow_clients(int body)
{
    const char *const args[] = {"--max-connections", "20",
                                "--header-timeout", "2",
                                "--min-body-rate", "1024",
                                "--connection-timeout", "30", NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    static const char head[] = "POST /v1/scenes HTTP/1.1\r\nHost: localhost\r\n"
                               "Content-Type: application/json\r\n"
                               "Content-Length: 100000\r\n\r\n";
    static const char drip[] = "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n"
                               "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    int fds[SLOW], ended[SLOW] = {0}, got408 = 0;
    for (int i = 0; i < SLOW; i++) {
        fds[i] = connect_port(s.port);
        if (body)
            ck_assert_int_eq(send(fds[i], head, sizeof head - 1,
                                  MSG_NOSIGNAL),
                             (ssize_t)sizeof head - 1);
    }
    double t0 = now_ms();
    int full = 0;
    for (size_t k = 0; now_ms() - t0 < 3000; k++) {
        for (int i = 0; i < SLOW; i++) {
            if (ended[i])
                continue;
            char c = body ? '[' : drip[k % (sizeof drip - 1)];
            if (send(fds[i], &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
                ended[i] = 1;
            char buf[1024];
            ssize_t n = recv(fds[i], buf, sizeof buf - 1, MSG_DONTWAIT);
            if (n > 0) {
                buf[n] = '\0';
                got408 += strncmp(buf, "HTTP/1.1 408", 12) == 0;
                ck_assert_msg(strncmp(buf, "HTTP/1.1 408", 12) == 0,
                              "slow client %d got: %s", i, buf);
                ended[i] = 1;
            } else if (n == 0) {
                ended[i] = 1;
            }
        }
        if (!full && now_ms() - t0 > 1000) {
            /* The premise: the slow ones hold every connection. */
            ck_assert_int_eq(health_status(s.port, 1000), 503);
            full = 1;
        }
        sleep_ms(500);
    }
    double t1 = now_ms();
    int st = 0;
    while (now_ms() - t1 < 1000 && (st = health_status(s.port, 1000)) != 200)
        sleep_ms(20);
    ck_assert_msg(st == 200, "health %d %.0f ms after the slow clients' 3 s",
                  st, now_ms() - t1);
    for (int i = 0; i < SLOW; i++) {
        if (!ended[i]) { /* cut since the last look: 408 or closed */
            char buf[1024];
            struct pollfd p = {.fd = fds[i], .events = POLLIN};
            ck_assert_msg(poll(&p, 1, 1000) == 1, "slow client %d open", i);
            ssize_t n = recv(fds[i], buf, sizeof buf - 1, 0);
            got408 += n > 0 && strncmp(buf, "HTTP/1.1 408", 12) == 0;
        }
        close(fds[i]);
    }
    ck_assert_msg(got408 > 0, "no slow client got a 408");
    char *log = rbt_server_log(&s);
    if (body)
        ck_assert_msg(strstr(log, "\"status\":408,\"outcome\":"
                                  "\"body_too_slow\""),
                      "no body_too_slow in the log: %s", log);
    free(log);
    char url[128], want[96];
    snprintf(url, sizeof url, "%s/metrics", s.base);
    snprintf(want, sizeof want, "raybox_slow_clients_total{deadline=\"%s\"} "
             "%d\n", body ? "body" : "headers", SLOW);
    rbt_resp m;
    ck_assert_msg(rbt_metrics_with(url, want, &m), "no '%s' in %s", want,
                  m.body);
    rbt_resp_free(&m);
    ck_assert_int_eq(rbt_server_stop_within(&s, 5000), 0);
}

START_TEST(test_slow_headers)
{
    slow_clients(0);
}
END_TEST

START_TEST(test_slow_body)
{
    slow_clients(1);
}
END_TEST

/* A client that keeps up is not cut off: a body sent in pieces over
 * 3 s at well above --min-body-rate, and a keep-alive connection whose
 * second request comes 1 s after the first, within --header-timeout. */
START_TEST(test_steady_clients_pass)
{
    const char *const args[] = {"--header-timeout", "2", "--min-body-rate",
                                "64", NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    char body[400];
    int len = snprintf(body, sizeof body, "{\"dims\":3,\"boxes\":[");
    for (int i = 0; i < 12; i++)
        len += snprintf(body + len, sizeof body - (size_t)len, "%s[0,0,0,1,1,1]",
                        i ? "," : "");
    len += snprintf(body + len, sizeof body - (size_t)len, "]}");
    char head[256];
    int hn = snprintf(head, sizeof head, "POST /v1/scenes HTTP/1.1\r\n"
                      "Host: localhost\r\nContent-Type: application/json\r\n"
                      "Content-Length: %d\r\n\r\n", len);
    int fd = connect_port(s.port);
    ck_assert_int_eq(send(fd, head, (size_t)hn, MSG_NOSIGNAL), hn);
    /* 3 s for ~190 bytes: past the 2 s grace, but 64 bytes a second. */
    for (int at = 0; at < len; at += len / 6 + 1) {
        sleep_ms(500);
        int n = at + len / 6 + 1 > len ? len - at : len / 6 + 1;
        ck_assert_int_eq(send(fd, body + at, (size_t)n, MSG_NOSIGNAL), n);
    }
    char buf[2048];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ck_assert_int_eq(poll(&p, 1, 2000), 1);
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_msg(strncmp(buf, "HTTP/1.1 201", 12) == 0, "steady body: %s",
                  buf);
    /* Keep-alive: the next request 1 s later, on the same connection. */
    sleep_ms(1000);
    static const char again[] = "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n";
    ck_assert_int_eq(send(fd, again, sizeof again - 1, MSG_NOSIGNAL),
                     (ssize_t)sizeof again - 1);
    ck_assert_int_eq(poll(&p, 1, 2000), 1);
    n = recv(fd, buf, sizeof buf - 1, 0);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "keep-alive: %s",
                  buf);
    /* Idle past --header-timeout: closed (408 or not). */
    ck_assert_int_eq(poll(&p, 1, 3500), 1);
    close(fd);
    ck_assert_int_eq(rbt_server_stop_within(&s, 5000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_strict");
    TCase *tc = tcase_create("strict");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_unescape);
    tcase_add_test(tc, test_duplicate_content_length);
    tcase_add_test(tc, test_transfer_encoding);
    tcase_add_test(tc, test_host);
    tcase_add_test(tc, test_unreadable_content_length);
    tcase_add_test(tc, test_ids_exact);
    tcase_add_test(tc, test_echoed_headers);
    suite_add_tcase(s, tc);
    TCase *slow = tcase_create("slow_clients");
    tcase_set_timeout(slow, 120);
    tcase_add_test(slow, test_slow_headers);
    tcase_add_test(slow, test_slow_body);
    tcase_add_test(slow, test_steady_clients_pass);
    suite_add_tcase(s, slow);
    int failed = rbt_run_suite(s);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
