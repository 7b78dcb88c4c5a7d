/* test_http_memory.c - rayboxd's memory budget (--max-memory) and the
 * JSON token limit, through a real server: a body whose share does not
 * fit is refused from its headers (503, Retry-After), a chunked one as
 * its chunks come; a client that never reads its answer holds its share
 * until it goes, and then the budget is whole again (the held-bytes
 * metric back to 0) and the same request is served; an over-long JSON
 * token is refused with 413. Figures of the budget under many
 * non-reading clients come from scripts/hostile.py (docs/http.md). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_util.h"
#include "testutil.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A JSON nearest query of n identical rays against one box. */
static char *rays_body(size_t n, size_t *len)
{
    static const char ray[] = "[-1,0.5,0.5,1,0,0],";
    size_t cap = 64 + n * (sizeof ray - 1) + 64;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    size_t at = (size_t)snprintf(b, cap, "{\"mode\":\"nearest\",\"rays\":[");
    for (size_t i = 0; i < n; i++) {
        memcpy(b + at, ray, sizeof ray - 1);
        at += sizeof ray - 1;
    }
    at--; /* the last comma */
    at += (size_t)snprintf(b + at, cap - at, "],\"boxes\":[[0,0,0,1,1,1]]}");
    *len = at;
    return b;
}

static double held_bytes(const rbt_server *s)
{
    rbt_resp m;
    ck_assert_int_eq(rbt_get(NULL, s, "/metrics", &m), 0);
    double v = rbt_metric(m.body, "raybox_memory_held_bytes");
    rbt_resp_free(&m);
    return v;
}

static void assert_budget_503(const rbt_resp *r)
{
    char ra[32];
    ck_assert_msg(r->status == 503, "status %ld: %.300s", r->status, r->body);
    ck_assert_ptr_nonnull(rbt_header(r, "Retry-After", ra, sizeof ra));
    ck_assert_msg(strstr(r->body, "--max-memory"), "detail: %s", r->body);
}

START_TEST(test_body_over_budget)
{
    const char *const args[] = {"--max-memory", "1M", "--quiet", NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/intersect", s.base);
    /* 20K rays: about 380 KB of JSON, three times that while parsed. */
    size_t len;
    char *body = rays_body(20000, &len);
    rbt_resp r;
    rbt_http(NULL, "POST", url, "application/json", body, len, NULL, NULL,
             &r);
    assert_budget_503(&r);
    rbt_resp_free(&r);
    /* The same as chunks: refused as they come. */
    rbt_http_chunked(NULL, url, "application/json", body, len, 16384, &r);
    assert_budget_503(&r);
    rbt_resp_free(&r);
    /* Nothing is held once the refused request is freed (libmicrohttpd
     * reports it complete just after the client has its answer), and a
     * small request is served. */
    free(body);
    for (int i = 0; i < 100 && held_bytes(&s) != 0; i++)
        sleep_ms(20);
    ck_assert_msg(held_bytes(&s) == 0, "held after the refusals: %.0f",
                  held_bytes(&s));
    body = rays_body(100, &len);
    rbt_http(NULL, "POST", url, "application/json", body, len, NULL, NULL,
             &r);
    ck_assert_msg(r.status == 200, "small request: %ld %s", r.status, r.body);
    rbt_resp_free(&r);
    free(body);
    for (int i = 0; i < 100 && held_bytes(&s) != 0; i++)
        sleep_ms(20);
    ck_assert_msg(held_bytes(&s) == 0, "held after: %.0f", held_bytes(&s));
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

static int send_unread(int port, const char *body, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char head[256];
    int n = snprintf(head, sizeof head,
                     "POST /v1/intersect HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n", len);
    ck_assert_int_eq(send(fd, head, (size_t)n, 0), n);
    for (size_t at = 0; at < len;) {
        ssize_t w = send(fd, body + at, len - at, 0);
        ck_assert_int_gt(w, 0);
        at += (size_t)w;
    }
    return fd;
}

START_TEST(test_unread_answer_holds_its_share)
{
    const char *const args[] = {"--max-memory", "24M", "--quiet", NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/intersect", s.base);
    /* 200K rays: 3.8 MB of JSON (11.4 MB while parsed) and a 3.4 MB
     * answer of arrays (a hit and a kind a ray), about 12 MB as text:
     * more than loopback buffers, so the answer stays unsent while nobody
     * reads it. */
    size_t len;
    char *body = rays_body(200000, &len);
    int fd = send_unread(s.port, body, len);
    double want = 3.0 * (double)len + 200000.0 * (sizeof(rb_hit) + 1);
    for (int i = 0; i < 500 && held_bytes(&s) < want; i++)
        sleep_ms(20);
    ck_assert_msg(held_bytes(&s) >= want, "held %.0f, want %.0f",
                  held_bytes(&s), want);
    rbt_resp r;
    rbt_http(NULL, "POST", url, "application/json", body, len, NULL, NULL,
             &r);
    assert_budget_503(&r);
    rbt_resp_free(&r);
    /* The reader goes: its share comes back, and the request fits. */
    close(fd);
    for (int i = 0; i < 500 && held_bytes(&s) != 0; i++)
        sleep_ms(20);
    ck_assert_msg(held_bytes(&s) == 0, "held after close: %.0f",
                  held_bytes(&s));
    rbt_http(NULL, "POST", url, "application/json", body, len, NULL, NULL,
             &r);
    ck_assert_msg(r.status == 200, "after the reader went: %ld %.200s",
                  r.status, r.body);
    rbt_resp_free(&r);
    free(body);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

START_TEST(test_long_token_refused)
{
    const char *const args[] = {"--quiet", NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/intersect", s.base);
    /* a 100,000-digit number: valid JSON, but nothing of the API */
    size_t digits = 100000;
    char *body = malloc(digits + 128);
    int at = snprintf(body, 128, "{\"rays\":[[1");
    memset(body + at, '0', digits);
    size_t len = (size_t)at + digits;
    len += (size_t)snprintf(body + len, 128,
                            ",0,0,1,0,0]],\"boxes\":[[0,0,0,1,1,1]]}");
    rbt_resp r;
    rbt_http(NULL, "POST", url, "application/json", body, len, NULL, NULL,
             &r);
    ck_assert_msg(r.status == 413 && strstr(r.body, "longer than 65536"),
                  "long token: %ld %.300s", r.status, r.body);
    rbt_resp_free(&r);
    free(body);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *su = suite_create("http_memory");
    TCase *tc = tcase_create("http_memory");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_body_over_budget);
    tcase_add_test(tc, test_unread_answer_holds_its_share);
    tcase_add_test(tc, test_long_token_refused);
    suite_add_tcase(su, tc);
    int failed = rbt_run_suite(su);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
