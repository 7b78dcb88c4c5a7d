/* test_http_concurrency.c - rayboxd under concurrent clients.
 *
 * clients: 32 threads, each with its own curl handle (kept alive) and its
 * own in-process context, mix good queries (JSON and binary, inline boxes
 * and a shared scene), bad requests of every kind, failing PATCHes of the
 * shared scene and good PATCHes of their own scene. Every good answer must
 * equal the library's; the server must stay up; the shared scene must be
 * untouched at the end (version 1, same description, same answers).
 *
 * saturation: one worker, a queue of one: with the worker busy and the
 * queue full, a request gets 503 with Retry-After at once.
 *
 * Check's assertions may only fail on the test's own thread, so client
 * threads record their first failure and the test asserts after join. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "binary_codec.h"
#include "http_expect.h"
#include "http_util.h"
#include "testutil.h"

#define JSON "application/json"
#define BIN RBB_MEDIA_TYPE
#define CLIENTS 32
#define ROUNDS 24

static rbt_server srv;
static char shared_id[160];
static rbt_query shared_q;   /* the shared scene's boxes (and some rays) */
static rb_scene *shared_mirror;
static char *shared_desc;    /* its GET body at the start */

typedef struct client {
    int index;
    pthread_t thread;
    CURL *curl;
    rb_context *ctx;
    rbt_rng rng;
    char own_id[160];
    rb_scene *own_mirror;
    uint64_t own_version;
    int good, bad;
    char failure[512];
} client;

static void client_fail(client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void client_fail(client *c, const char *fmt, ...)
{
    if (c->failure[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->failure, sizeof c->failure, fmt, ap);
    va_end(ap);
}

static void url_of(char *out, size_t cap, const char *path)
{
    snprintf(out, cap, "%s%s", srv.base, path);
}

static int request(client *c, const char *method, const char *path,
                   const char *type, const void *body, size_t len,
                   const char *accept, rbt_resp *r)
{
    char url[512];
    url_of(url, sizeof url, path);
    int rc = rbt_http(c->curl, method, url, type, body, len, accept, NULL, r);
    if (rc)
        client_fail(c, "%s %s: transfer failed", method, path);
    return rc;
}

static char *get_text(client *c, const char *path)
{
    rbt_resp r;
    if (request(c, "GET", path, NULL, NULL, 0, NULL, &r) || r.status != 200) {
        client_fail(c, "GET %s: %ld", path, r.status);
        rbt_resp_free(&r);
        return NULL;
    }
    return r.body;
}

/* A good query: inline or against a scene, JSON or binary both ways. */
static void good_query(client *c, int k)
{
    rb_mode mode = (rb_mode)rbt_below(&c->rng, 5);
    int scene = k % 3 == 2, own = scene && (k & 4);
    if (scene && mode == RB_MODE_PAIRS)
        mode = RB_MODE_NEAREST;
    rbt_query q;
    rbt_query_random(&q, &c->rng, mode, 3, 1 + rbt_below(&c->rng, 64),
                     1 + rbt_below(&c->rng, 64), (int)rbt_below(&c->rng, 2),
                     mode == RB_MODE_ALL ? 1 + rbt_below(&c->rng, 5) : 0);
    const rb_scene *mirror = own ? c->own_mirror : scene ? shared_mirror : NULL;
    uint64_t version = own ? c->own_version : 1;
    rbt_expect e;
    rbt_expect_run(c->ctx, &q, mirror, version, &e);
    int in_bin = rbt_below(&c->rng, 2), out_bin = rbt_below(&c->rng, 2);
    size_t len;
    void *body = in_bin ? rbt_query_binary(&q, !scene, &len)
                        : (void *)rbt_query_json(&q, !scene, &len);
    char path[256];
    if (scene)
        snprintf(path, sizeof path, "/v1/scenes/%s/intersect",
                 own ? c->own_id : shared_id);
    else
        snprintf(path, sizeof path, "/v1/intersect");
    rbt_resp r;
    if (!request(c, "POST", path, in_bin ? BIN : JSON, body, len,
                 out_bin ? BIN : JSON, &r)) {
        char why[256];
        if (r.status != 200)
            client_fail(c, "good %s query: %ld %s", rb_mode_name(mode), r.status,
                 r.body);
        else if (out_bin ? rbt_check_binary(&e, r.body, r.len, why, sizeof why)
                         : rbt_check_json(&e, r.body, r.len, why, sizeof why))
            client_fail(c, "%s query on %s: %s", rb_mode_name(mode),
                 scene ? (own ? "own scene" : "shared scene") : "boxes", why);
        c->good++;
    }
    rbt_resp_free(&r);
    free(body);
    rbt_expect_free(&e);
    rbt_query_free(&q);
}

/* A bad request of some kind; its status must be the expected one. */
static void bad_request(client *c, int k)
{
    static const struct {
        const char *method, *path, *type, *body;
        long status;
    } bad[] = {
        {"POST", "/v1/intersect", JSON, "{\"rays\":[[0,0,0,1,0,0]],", 400},
        {"POST", "/v1/intersect", JSON,
         "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[[1,1,1,0,0,0]]}", 422},
        {"POST", "/v1/intersect", "text/plain", "{}", 415},
        {"POST", "/v1/scenes/nope/intersect", JSON, "{\"rays\":[]}", 404},
        {"GET", "/v1/intersect", NULL, NULL, 405},
        {"POST", "/v1/intersect", BIN, "RBOX", 400},
        {"POST", "/v1/intersect", JSON, "{\"rays\":[[[[[[[[[[[[", 422},
        {"POST", "/v1/intersect", JSON,
         "{\"mode\":\"pairs\",\"rays\":[[0,0,0,1,0,0]],\"boxes\":[]}", 422},
    };
    int i = (int)rbt_below(&c->rng, sizeof bad / sizeof *bad);
    (void)k;
    rbt_resp r;
    const char *b = bad[i].body;
    if (!request(c, bad[i].method, bad[i].path, bad[i].type, b,
                 b ? strlen(b) : 0, NULL, &r) &&
        r.status != bad[i].status)
        client_fail(c, "bad request %d: %ld, expected %ld: %s", i, r.status,
             bad[i].status, r.body);
    rbt_resp_free(&r);
    c->bad++;
}

/* PATCHes of the shared scene that must fail and change nothing. */
static void failing_patch(client *c)
{
    static const char *const bodies[] = {
        "{\"set\":[[0,0,0,0,1,1,1],[100000,0,0,0,1,1,1]]}",
        "{\"append\":[[0,0,0,1,1,1],[5,0,0,1,1,1]]}",
        "{\"set\":[[1,0,0,0,1,1,1]],\"append\":[[0,0,0,1,1,-1]]}",
        "{\"set\":[[1,0,0,0,1,1,1]],\"append\":[[0,0,0,1,1",
        "{\"set\":[[2,9,9,9,1,1,1]]}",
    };
    int i = (int)rbt_below(&c->rng, 5);
    char path[256];
    snprintf(path, sizeof path, "/v1/scenes/%s", shared_id);
    rbt_resp r;
    if (!request(c, "PATCH", path, JSON, bodies[i], strlen(bodies[i]), NULL,
                 &r) &&
        r.status != (i == 3 ? 400 : 422))
        client_fail(c, "failing PATCH %d answered %ld: %s", i, r.status, r.body);
    rbt_resp_free(&r);
    c->bad++;
}

/* A good PATCH of the client's own scene, mirrored in-process. */
static void good_patch(client *c)
{
    rb_box box;
    for (int a = 0; a < 3; a++) {
        float m = rbt_uniform(&c->rng, -8, 8);
        box.min[a] = m;
        box.max[a] = m + rbt_uniform(&c->rng, 0.1f, 3);
    }
    rb_scene_stats st;
    rb_scene_stats_get(c->own_mirror, &st);
    uint32_t idx = rbt_below(&c->rng, (uint32_t)st.boxes);
    char body[512];
    snprintf(body, sizeof body,
             "{\"set\":[[%u,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g]],"
             "\"append\":[[%.9g,%.9g,%.9g,%.9g,%.9g,%.9g]]}",
             idx, box.min[0], box.min[1], box.min[2], box.max[0], box.max[1],
             box.max[2], box.max[0], box.max[1], box.max[2],
             box.max[0] + 1, box.max[1] + 1, box.max[2] + 1);
    char path[256];
    snprintf(path, sizeof path, "/v1/scenes/%s", c->own_id);
    rbt_resp r;
    if (request(c, "PATCH", path, JSON, body, strlen(body), NULL, &r)) {
        rbt_resp_free(&r);
        return;
    }
    char want[64];
    snprintf(want, sizeof want, "\"version\":%llu",
             (unsigned long long)(c->own_version + 1));
    if (r.status != 200 || !strstr(r.body, want)) {
        client_fail(c, "good PATCH: %ld %s (wanted %s)", r.status, r.body, want);
    } else {
        /* The same change in-process (%.9g reads back exactly). */
        rb_box app = {{box.max[0], box.max[1], box.max[2]},
                      {box.max[0] + 1, box.max[1] + 1, box.max[2] + 1}};
        if (rb_scene_set(c->ctx, c->own_mirror, &idx, &box, 1) ||
            rb_scene_append(c->ctx, c->own_mirror, &app, 1))
            client_fail(c, "mirror PATCH failed");
        c->own_version++;
    }
    rbt_resp_free(&r);
}

static void *client_main(void *arg)
{
    client *c = arg;
    c->curl = curl_easy_init();
    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_CPU;
    o.threads = 1;
    if (rb_context_create(&o, &c->ctx, NULL, 0)) {
        client_fail(c, "no context");
        return NULL;
    }
    /* The client's own scene. */
    rbt_query q;
    rbt_query_random(&q, &c->rng, RB_MODE_NEAREST, 3, 1, 30, 0, 0);
    size_t len;
    char *body = rbt_scene_json(&q, &len);
    rbt_resp r;
    if (!request(c, "POST", "/v1/scenes", JSON, body, len, NULL, &r)) {
        const char *p = strstr(r.body, "\"id\":\"");
        if (r.status != 201 || !p)
            client_fail(c, "create: %ld %s", r.status, r.body);
        else
            snprintf(c->own_id, sizeof c->own_id, "%.*s",
                     (int)strcspn(p + 6, "\""), p + 6);
    }
    rbt_resp_free(&r);
    free(body);
    rb_scene_create(c->ctx, 3, q.boxes, q.n_boxes, &c->own_mirror);
    c->own_version = 1;
    rbt_query_free(&q);

    for (int k = 0; k < ROUNDS && !c->failure[0]; k++) {
        switch ((k + c->index) % 6) {
        case 0:
        case 1:
        case 2:
            good_query(c, k);
            break;
        case 3:
            bad_request(c, k);
            break;
        case 4:
            failing_patch(c);
            break;
        case 5:
            good_patch(c);
            break;
        }
    }
    rb_scene_destroy(c->own_mirror);
    rb_context_destroy(c->ctx);
    curl_easy_cleanup(c->curl);
    return NULL;
}

static void setup(void)
{
    static const char *const args[] = {"--workers", "2", "--threads", "1",
                                        "--quiet", NULL};
    curl_global_init(CURL_GLOBAL_ALL);
    rbt_server_start(&srv, args);
    rbt_rng rng = {99};
    rbt_query_random(&shared_q, &rng, RB_MODE_NEAREST, 3, 1, 200, 0, 0);
    rb_context *ctx = rbt_context(RBT_CPU);
    ck_assert_int_eq(rb_scene_create(ctx, 3, shared_q.boxes, 200,
                                     &shared_mirror),
                     RB_OK);
    rb_context_destroy(ctx);
    size_t len;
    char *body = rbt_scene_json(&shared_q, &len);
    char url[512];
    url_of(url, sizeof url, "/v1/scenes");
    rbt_resp r;
    rbt_http(NULL, "POST", url, JSON, body, len, NULL, NULL, &r);
    free(body);
    ck_assert_int_eq(r.status, 201);
    const char *p = strstr(r.body, "\"id\":\"");
    snprintf(shared_id, sizeof shared_id, "%.*s", (int)strcspn(p + 6, "\""),
             p + 6);
    rbt_resp_free(&r);
    snprintf(url, sizeof url, "%s/v1/scenes/%s", srv.base, shared_id);
    rbt_http(NULL, "GET", url, NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    shared_desc = r.body;
}

static void teardown(void)
{
    free(shared_desc);
    rb_scene_destroy(shared_mirror);
    rbt_query_free(&shared_q);
    int st = rbt_server_stop(&srv);
    ck_assert_msg(st == 0, "rayboxd exited with %d after SIGTERM", st);
    unlink(srv.log_path);
    curl_global_cleanup();
}

START_TEST(test_32_clients)
{
    static client cs[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        memset(&cs[i], 0, sizeof cs[i]);
        cs[i].index = i;
        cs[i].rng.s = 1000 + (uint64_t)i;
        ck_assert_int_eq(pthread_create(&cs[i].thread, NULL, client_main,
                                        &cs[i]),
                         0);
    }
    int good = 0, bad = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(cs[i].thread, NULL);
        good += cs[i].good;
        bad += cs[i].bad;
    }
    for (int i = 0; i < CLIENTS; i++)
        ck_assert_msg(!cs[i].failure[0], "client %d: %s", i, cs[i].failure);
    ck_assert_int_ge(good, CLIENTS * ROUNDS / 3);
    ck_assert_int_ge(bad, CLIENTS * ROUNDS / 4);

    /* The shared scene is untouched by the failed PATCHes: the same
     * description (version 1) and the same answers. */
    client c = {.rng = {7}};
    c.curl = curl_easy_init();
    c.ctx = rbt_context(RBT_CPU);
    char path[256];
    snprintf(path, sizeof path, "/v1/scenes/%s", shared_id);
    char *desc = get_text(&c, path);
    ck_assert_ptr_nonnull(desc);
    ck_assert_str_eq(desc, shared_desc);
    free(desc);
    for (int k = 0; k < 6; k++)
        good_query(&c, 2); /* k % 3 == 2: the shared scene */
    ck_assert_msg(!c.failure[0], "%s", c.failure);
    char *metrics = get_text(&c, "/metrics");
    ck_assert_ptr_nonnull(metrics);
    ck_assert_msg(rbt_metric(metrics, "raybox_queue_depth") == 0, "queue");
    free(metrics);
    rb_context_destroy(c.ctx);
    curl_easy_cleanup(c.curl);
}
END_TEST

/* ------------------------------------------------------------------------
 * Saturation
 */
typedef struct heavy {
    const char *url;
    const void *body;
    size_t len;
    atomic_int stop;
    atomic_int sent;
} heavy;

static void *heavy_main(void *arg)
{
    heavy *h = arg;
    while (!atomic_load(&h->stop)) {
        rbt_resp r;
        rbt_http(NULL, "POST", h->url, BIN, h->body, h->len, BIN, NULL, &r);
        rbt_resp_free(&r);
        atomic_fetch_add(&h->sent, 1);
    }
    return NULL;
}

START_TEST(test_queue_full_503)
{
    static const char *const args[] = {
        "--workers", "1", "--threads", "1", "--queue-depth", "1", "--quiet",
        "--max-body-bytes", "64M",
        /* the small query knocks on the queue, not answered inline */
        "--inline-max-tests", "0", NULL};
    rbt_server s;
    curl_global_init(CURL_GLOBAL_ALL);
    rbt_server_start(&s, args);
    /* A query that keeps the one worker busy for seconds. */
    rbt_rng rng = {3};
    rbt_query q;
    rbt_query_random(&q, &rng, RB_MODE_COUNT, 3, 1 << 20, 4096, 0, 0);
    size_t len;
    void *body = rbt_query_binary(&q, 1, &len);
    rbt_query_free(&q);
    char url[256], murl[256];
    snprintf(url, sizeof url, "%s/v1/intersect", s.base);
    snprintf(murl, sizeof murl, "%s/metrics", s.base);
    heavy h[2] = {{url, body, len, 0, 0}, {url, body, len, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, heavy_main, &h[i]), 0);

    /* Wait for "one running, one waiting", then knock. */
    int got_503 = 0;
    for (int tries = 0; tries < 20000 && !got_503; tries++) {
        rbt_resp m;
        rbt_http(NULL, "GET", murl, NULL, NULL, 0, NULL, NULL, &m);
        int full = m.status == 200 &&
                   rbt_metric(m.body, "raybox_jobs_running") == 1 &&
                   rbt_metric(m.body, "raybox_queue_depth") == 1;
        rbt_resp_free(&m);
        if (!full) {
            nanosleep(&(struct timespec){0, 5000000}, NULL);
            continue;
        }
        rbt_resp r;
        const char *small = "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[]}";
        rbt_http(NULL, "POST", url, JSON, small, strlen(small), NULL, NULL,
                 &r);
        char ra[32];
        if (r.status == 503) {
            ck_assert_str_eq(rbt_header(&r, "Retry-After", ra, sizeof ra),
                             "1");
            ck_assert_ptr_nonnull(strstr(r.body, "\"status\":503"));
            got_503 = 1;
        } else {
            /* The running job ended in between: both are legal. */
            ck_assert_int_eq(r.status, 200);
        }
        rbt_resp_free(&r);
    }
    ck_assert_msg(got_503, "never saw the queue full");
    rbt_resp m;
    ck_assert_msg(rbt_metrics_with(murl, "code=\"503\"} ", &m),
                  "no 503 in raybox_http_requests_total");
    ck_assert(rbt_metric(m.body, "raybox_queue_rejections_total") >= 1);
    rbt_resp_free(&m);
    /* The busy server is not waited for: its jobs would take seconds. */
    for (int i = 0; i < 2; i++)
        atomic_store(&h[i].stop, 1);
    rbt_server_kill(&s);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    free(body);
    unlink(s.log_path);
    curl_global_cleanup();
}
END_TEST

/* A JSON answer larger than what the worker renders ahead (4 MiB) is
 * finished by the I/O thread as it is sent (chunked): the same bytes. */
START_TEST(test_streamed_json_answer)
{
    rbt_rng rng = {4242};
    rbt_query q;
    rbt_query_random(&q, &rng, RB_MODE_NEAREST, 3, 160000, 12, 1, 0);
    rb_context *ctx = rbt_context(RBT_CPU);
    rbt_expect e;
    rbt_expect_run(ctx, &q, NULL, 0, &e);
    ck_assert_uint_gt(e.json_len, 4u << 20);
    size_t len;
    char *body = rbt_query_json(&q, 1, &len);
    char url[512], why[256], te[64];
    url_of(url, sizeof url, "/v1/intersect");
    rbt_resp r;
    rbt_http(NULL, "POST", url, JSON, body, len, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(rbt_header(&r, "Transfer-Encoding", te, sizeof te),
                     "chunked");
    ck_assert_msg(!rbt_check_json(&e, r.body, r.len, why, sizeof why), "%s",
                  why);
    rbt_resp_free(&r);
    free(body);
    rbt_expect_free(&e);
    rbt_query_free(&q);
    rb_context_destroy(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http_concurrency");
    TCase *tc = tcase_create("clients");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_32_clients);
    tcase_add_test(tc, test_streamed_json_answer);
    suite_add_tcase(s, tc);
    tc = tcase_create("saturation");
    tcase_add_test(tc, test_queue_full_503);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
