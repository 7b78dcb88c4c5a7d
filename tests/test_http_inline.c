/* test_http_inline.c - small CPU queries answered on the I/O thread
 * (rayboxd --inline-max-tests). The same queries, every mode and both
 * forms, on inline boxes and on a stored scene, sent to a server that
 * answers them inline and to one that hands every query to a worker
 * (--inline-max-tests 0): both answers equal the library's, and each
 * other byte for byte but elapsed_ms. A query past the threshold goes to
 * a worker. While one worker runs a heavy query, a burst of small ones
 * is answered, each at once, before the heavy one ends. The memory
 * budget and the access log apply to inline answers as to the others. */
#include <pthread.h>
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
#define SCENE_BOXES 1024
/* The binary answer's elapsed_ms (docs/binary-format.md). */
#define ELAPSED_AT 48

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* POSTs the scene of q's boxes to s; its id into id. */
static void post_scene(const rbt_server *s, const rbt_query *q, char *id,
                       size_t cap)
{
    size_t len;
    char *body = rbt_scene_json(q, &len);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/scenes", s->base);
    rbt_resp r;
    rbt_http(NULL, "POST", url, JSON, body, len, NULL, NULL, &r);
    free(body);
    ck_assert_msg(r.status == 201, "scene: %ld %s", r.status, r.body);
    const char *p = strstr(r.body, "\"id\":\"");
    ck_assert_ptr_nonnull(p);
    snprintf(id, cap, "%.*s", (int)strcspn(p + 6, "\""), p + 6);
    rbt_resp_free(&r);
}

/* One query to a server: the answer, 200 and the library's asserted. */
static void ask(const rbt_server *s, const char *path, const rbt_query *q,
                int with_boxes, int in_bin, int out_bin,
                const rbt_expect *e, rbt_resp *r)
{
    size_t len;
    void *body = in_bin ? rbt_query_binary(q, with_boxes, &len)
                        : (void *)rbt_query_json(q, with_boxes, &len);
    char url[256];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    rbt_http(NULL, "POST", url, in_bin ? BIN : JSON, body, len,
             out_bin ? BIN : JSON, NULL, r);
    free(body);
    ck_assert_msg(r->status == 200, "%s %s query of %zu rays: %ld %s", path,
                  rb_mode_name(q->mode), q->n_rays, r->status,
                  r->body ? r->body : "");
    char why[256];
    int bad = out_bin ? rbt_check_binary(e, r->body, r->len, why, sizeof why)
                      : rbt_check_json(e, r->body, r->len, why, sizeof why);
    ck_assert_msg(!bad, "%s %s query (%s in, %s out): %s", path,
                  rb_mode_name(q->mode), in_bin ? "binary" : "JSON",
                  out_bin ? "binary" : "JSON", why);
}

/* Whether two answers are the same bytes but the time: JSON up to
 * "meta", binary with elapsed_ms zeroed. */
static int same_answer(const rbt_resp *a, const rbt_resp *b, int binary)
{
    if (!binary) {
        size_t n = rbt_strip_meta(a->body, a->len);
        return n == rbt_strip_meta(b->body, b->len) &&
               memcmp(a->body, b->body, n) == 0;
    }
    if (a->len != b->len || a->len < ELAPSED_AT + 8)
        return 0;
    char *x = malloc(a->len), *y = malloc(b->len);
    memcpy(x, a->body, a->len);
    memcpy(y, b->body, b->len);
    memset(x + ELAPSED_AT, 0, 8);
    memset(y + ELAPSED_AT, 0, 8);
    int same = memcmp(x, y, a->len) == 0;
    free(x);
    free(y);
    return same;
}

/* A random nearest query of that many rays and boxes, its JSON answer
 * checked against ctx's. */
static void ask_nearest(const rbt_server *s, rb_context *ctx, rbt_rng *rng,
                        size_t rays, size_t boxes)
{
    rbt_query q;
    rbt_query_random(&q, rng, RB_MODE_NEAREST, 3, rays, boxes, 0, 0);
    rbt_expect e;
    rbt_expect_run(ctx, &q, NULL, 0, &e);
    rbt_resp r;
    ask(s, "/v1/intersect", &q, 1, 1, 1, &e, &r);
    rbt_resp_free(&r);
    rbt_expect_free(&e);
    rbt_query_free(&q);
}

START_TEST(test_inline_same_as_worker)
{
    static const char *const inl[] = {"--workers", "1", "--quiet", NULL};
    static const char *const off[] = {"--workers", "1", "--quiet",
                                      "--inline-max-tests", "0", NULL};
    rbt_server si, sw;
    rb_context *ctx;
    rbt_fixture_start(&si, inl, &ctx);
    rbt_server_start(&sw, off);
    rbt_rng rng = {41};
    rbt_query scene_q;
    rbt_query_random(&scene_q, &rng, RB_MODE_NEAREST, 3, 1, SCENE_BOXES, 0,
                     0);
    rb_scene *mirror;
    ck_assert_int_eq(rb_scene_create(ctx, 3, scene_q.boxes, scene_q.n_boxes,
                                     &mirror),
                     RB_OK);
    char id_i[128], id_w[128];
    post_scene(&si, &scene_q, id_i, sizeof id_i);
    post_scene(&sw, &scene_q, id_w, sizeof id_w);

    static const rb_mode modes[] = {RB_MODE_ANY, RB_MODE_NEAREST,
                                    RB_MODE_COUNT, RB_MODE_ALL,
                                    RB_MODE_PAIRS};
    int sent = 0;
    for (int round = 0; round < 40; round++) {
        rb_mode mode = modes[round % 5];
        int on_scene = mode != RB_MODE_PAIRS && round % 2;
        int in_bin = round / 5 % 2, out_bin = round / 10 % 2;
        rbt_query q;
        /* 16 rays against 1024 boxes, as make load's small query, or a
         * few rays against a few boxes of their own. */
        size_t rays = on_scene ? 16 : 1 + (size_t)round % 7;
        size_t boxes = mode == RB_MODE_PAIRS ? rays : 1 + (size_t)round % 9;
        rbt_query_random(&q, &rng, mode, 3, rays, on_scene ? 1 : boxes,
                         round % 3 == 0, mode == RB_MODE_ALL ? 4 : 0);
        rbt_expect e;
        rbt_expect_run(ctx, &q, on_scene ? mirror : NULL, 1, &e);
        char pi[256], pw[256];
        snprintf(pi, sizeof pi, on_scene ? "/v1/scenes/%s/intersect"
                                         : "/v1/intersect", id_i);
        snprintf(pw, sizeof pw, on_scene ? "/v1/scenes/%s/intersect"
                                         : "/v1/intersect", id_w);
        rbt_resp a, b;
        ask(&si, pi, &q, !on_scene, in_bin, out_bin, &e, &a);
        ask(&sw, pw, &q, !on_scene, in_bin, out_bin, &e, &b);
        ck_assert_msg(same_answer(&a, &b, out_bin),
                      "%s query %d: the inline answer differs from the "
                      "worker's", rb_mode_name(mode), round);
        sent++;
        rbt_resp_free(&a);
        rbt_resp_free(&b);
        rbt_expect_free(&e);
        rbt_query_free(&q);
    }
    ck_assert(rbt_server_metric(&si, "raybox_inline_answers_total") == sent);
    ck_assert(rbt_server_metric(&sw, "raybox_inline_answers_total") == 0);
    /* Inline answers are queries like the others in the metrics. */
    ck_assert(rbt_server_metric(&si, "raybox_queries_total") == sent);
    ck_assert(rbt_server_metric(&sw, "raybox_queries_total") == sent);
    ck_assert_int_eq(rbt_server_stop(&sw), 0);
    unlink(sw.log_path);
    rb_scene_destroy(mirror);
    rbt_query_free(&scene_q);
    rbt_fixture_stop(&si, ctx);
}
END_TEST

/* Past --inline-max-tests (rays x elements, or rays when there are no
 * elements) a query goes to a worker; at it, it is answered inline. */
START_TEST(test_threshold)
{
    static const char *const args[] = {"--inline-max-tests", "1000",
                                       "--quiet", NULL};
    rbt_server s;
    rb_context *ctx;
    rbt_fixture_start(&s, args, &ctx);
    rbt_rng rng = {5};
    for (int over = 0; over < 2; over++) {
        /* 10 x 100 = 1000 tests, then 10 x 101. */
        ask_nearest(&s, ctx, &rng, 10, 100 + (size_t)over);
        ck_assert_msg(rbt_server_metric(&s, "raybox_inline_answers_total") == 1,
                      "%s the threshold: %g inline answers",
                      over ? "past" : "at",
                      rbt_server_metric(&s, "raybox_inline_answers_total"));
    }
    /* No elements: the rays count (each has its answer), 1001 > 1000. */
    ask_nearest(&s, ctx, &rng, 1001, 0);
    ck_assert(rbt_server_metric(&s, "raybox_inline_answers_total") == 1);
    ck_assert(rbt_server_metric(&s, "raybox_queries_total") == 3);
    rbt_fixture_stop(&s, ctx);
}
END_TEST

typedef struct heavy_call {
    const char *url;
    const void *body;
    size_t len;
    pthread_t thread;
    rbt_resp resp;
} heavy_call;

static void *heavy_main(void *arg)
{
    heavy_call *h = arg;
    rbt_http(NULL, "POST", h->url, JSON, h->body, h->len, NULL, NULL,
             &h->resp);
    return NULL;
}

/* One worker runs a heavy query (seconds); meanwhile a burst of small
 * queries on the same I/O threads is answered, each at once, and all
 * before the heavy one ends. With every query on the workers they would
 * wait for it. */
START_TEST(test_burst_beside_heavy)
{
    static const char *const args[] = {"--workers", "1", "--threads", "1",
                                       "--max-query-ms", "0", "--quiet",
                                       "--max-body-bytes", "64M", NULL};
    rbt_server s;
    rb_context *ctx;
    rbt_fixture_start(&s, args, &ctx);
    rbt_rng rng = {9};
    size_t len;
    char *body = rbt_count_body(RBT_HEAVY_RAYS, RBT_HEAVY_BOXES, &len);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/intersect", s.base);
    heavy_call h = {.url = url, .body = body, .len = len};
    ck_assert_int_eq(pthread_create(&h.thread, NULL, heavy_main, &h), 0);
    double t0 = now_ms();
    while (rbt_server_metric(&s, "raybox_jobs_running") < 1 && now_ms() - t0 < 20000)
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    ck_assert_msg(rbt_server_metric(&s, "raybox_jobs_running") == 1,
                  "the heavy query never ran");

    rbt_query q;
    rbt_query_random(&q, &rng, RB_MODE_NEAREST, 3, 16, 64, 0, 0);
    rbt_expect e;
    rbt_expect_run(ctx, &q, NULL, 0, &e);
    CURL *c = curl_easy_init();
    size_t qlen;
    void *qbody = rbt_query_binary(&q, 1, &qlen);
    double slowest = 0;
    enum { BURST = 200 };
    for (int i = 0; i < BURST; i++) {
        rbt_resp r;
        double t = now_ms();
        rbt_http(c, "POST", url, BIN, qbody, qlen, BIN, NULL, &r);
        t = now_ms() - t;
        slowest = t > slowest ? t : slowest;
        char why[256];
        ck_assert_msg(r.status == 200, "small query %d: %ld", i, r.status);
        ck_assert_msg(!rbt_check_binary(&e, r.body, r.len, why, sizeof why),
                      "small query %d: %s", i, why);
        rbt_resp_free(&r);
    }
    /* A loose bound for a loaded sanitizer build. */
    ck_assert_msg(slowest < 1000, "a small query took %.0f ms", slowest);
    ck_assert_msg(rbt_server_metric(&s, "raybox_jobs_running") == 1 &&
                      rbt_server_metric(&s, "raybox_queries_total") == BURST,
                  "the heavy query ended before the burst did");
    ck_assert(rbt_server_metric(&s, "raybox_inline_answers_total") == BURST);
    curl_easy_cleanup(c);
    free(qbody);
    rbt_expect_free(&e);
    rbt_query_free(&q);
    /* The busy server is not waited for. */
    rbt_server_kill(&s);
    pthread_join(h.thread, NULL);
    rbt_resp_free(&h.resp);
    free(body);
    unlink(s.log_path);
    rb_context_destroy(ctx);
    curl_global_cleanup();
}
END_TEST

/* --max-memory applies before the query runs, inline or not: a query
 * whose answer does not fit is 503 on both servers; and an inline
 * answer's access log line names its rays and run time. */
START_TEST(test_guards)
{
    static const char *const tight[] = {"--max-memory", "20000", NULL};
    static const char *const tight_off[] = {"--max-memory", "20000",
                                            "--inline-max-tests", "0",
                                            NULL};
    for (int k = 0; k < 2; k++) {
        rbt_server s;
        rb_context *ctx;
        rbt_fixture_start(&s, k ? tight_off : tight, &ctx);
        rbt_rng rng = {13};
        rbt_query q;
        /* all, 100 rays x max_hits 64: an answer of more than 20000
         * bytes from a body of a few KB; 100 x 1 box stays inline. */
        rbt_query_random(&q, &rng, RB_MODE_ALL, 3, 100, 1, 0, 64);
        size_t len;
        void *body = rbt_query_binary(&q, 1, &len);
        char url[256];
        snprintf(url, sizeof url, "%s/v1/intersect", s.base);
        rbt_resp r;
        rbt_http(NULL, "POST", url, BIN, body, len, BIN, NULL, &r);
        ck_assert_msg(r.status == 503 && strstr(r.body, "the answer needs"),
                      "%s: %ld %s", k ? "worker" : "inline", r.status,
                      r.body ? r.body : "");
        rbt_resp_free(&r);
        free(body);
        rbt_query_free(&q);
        /* A small one is answered, and logged. */
        rbt_query_random(&q, &rng, RB_MODE_NEAREST, 3, 3, 2, 0, 0);
        rbt_expect e;
        rbt_expect_run(ctx, &q, NULL, 0, &e);
        ask(&s, "/v1/intersect", &q, 1, 0, 0, &e, &r);
        rbt_resp_free(&r);
        rbt_expect_free(&e);
        rbt_query_free(&q);
        ck_assert(rbt_server_metric(&s, "raybox_inline_answers_total") == (k ? 0 : 1));
        char *log = NULL;
        double t0 = now_ms();
        do {
            free(log);
            log = rbt_server_log(&s);
        } while (!strstr(log, "\"rays\":3,") && now_ms() - t0 < 2000);
        char *line = strstr(log, "\"rays\":3,");
        ck_assert_msg(line, "no access log line for the small query:\n%s",
                      log);
        while (line > log && line[-1] != '\n')
            line--;
        line[strcspn(line, "\n")] = '\0';
        ck_assert_msg(strstr(line, "\"status\":200") &&
                          strstr(line, "\"run_ms\":") &&
                          (strstr(line, "\"inline\":true") != NULL) == !k,
                      "%s: %s", k ? "worker" : "inline", line);
        free(log);
        rbt_fixture_stop(&s, ctx);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_inline");
    TCase *tc = tcase_create("inline");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_inline_same_as_worker);
    tcase_add_test(tc, test_threshold);
    tcase_add_test(tc, test_burst_beside_heavy);
    tcase_add_test(tc, test_guards);
    suite_add_tcase(s, tc);
    return rbt_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
