/* test_http_merge.c - small scene queries merged into one backend call
 * (rayboxd --merge on): every answer must equal the lone run's, in every
 * mode and form, while queries of other scenes, modes and max_hits are
 * queued beside them and must not be merged with them.
 *
 * Scene 1 is large enough that its queries of 30 rays or more count as
 * heavy (rays x elements), which merge only among themselves.
 *
 * One worker and a long merge wait (--merge-wait-us 3000) make the
 * merges happen on 2 cores: CLIENTS threads send at once, the worker
 * takes the first query and waits for the others. The test then asserts
 * from /metrics that merges did happen (else it would prove nothing) and
 * that fewer calls than requests ran.
 *
 * Refused requests are mixed in: some refused before they are queued
 * (tmin > tmax, 2D rays on a 3D scene, a broken body, pairs on a scene),
 * and binary queries with a NaN in a ray, which only the library refuses,
 * inside a merged call: each gets its own status and pointer, and the
 * good queries beside them their own answers.
 *
 * Check's assertions may only fail on the test's own thread, so client
 * threads record their first failure and the test asserts after join. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binary_codec.h"
#include "gen.h"
#include "http_expect.h"
#include "http_util.h"
#include "testutil.h"

#define JSON "application/json"
#define BIN RBB_MEDIA_TYPE
#define CLIENTS 12
#define ROUNDS 30
#define SCENES 3

static rbt_server srv;
static char scene_id[SCENES][160];
static rbt_query scene_q[SCENES]; /* each scene's boxes */
static rb_scene *mirror[SCENES];
static const unsigned scene_dims[SCENES] = {3, 3, 2};

typedef struct client {
    int index;
    pthread_t thread;
    CURL *curl;
    rb_context *ctx;
    rbt_rng rng;
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

static pthread_barrier_t round_start;

/* One good scene query (not pairs: no boxes of its own) in a random
 * form; its answer must be the in-process one. Three in four take the
 * round's scene, mode and max_hits (so that most of a round can merge),
 * the others random ones (which must not merge with them). */
static void good_query(client *c, int round)
{
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    int themed = rbt_below(&c->rng, 4) != 0;
    int sc = themed ? round % SCENES : (int)rbt_below(&c->rng, SCENES);
    rb_mode mode = modes[themed ? (uint32_t)(round / SCENES) % 4
                                : rbt_below(&c->rng, 4)];
    uint32_t max_hits = themed ? 1 + (uint32_t)round % 3
                               : 1 + rbt_below(&c->rng, 3);
    rbt_query q;
    /* On scene 1 (9000 boxes) a query of 30 rays or more is heavy (rays
     * x elements >= 262144): heavy ones merge with heavy ones only. */
    size_t n = sc == 1 ? 20 + rbt_below(&c->rng, 21)
                       : 1 + rbt_below(&c->rng, 32);
    rbt_query_random(&q, &c->rng, mode, scene_dims[sc], n, 1,
                     (int)rbt_below(&c->rng, 2),
                     mode == RB_MODE_ALL ? max_hits : 0);
    rbt_expect e;
    rbt_expect_run(c->ctx, &q, mirror[sc], 1, &e);
    int in_bin = rbt_below(&c->rng, 2), out_bin = rbt_below(&c->rng, 2);
    size_t len;
    void *body = in_bin ? rbt_query_binary(&q, 0, &len)
                        : (void *)rbt_query_json(&q, 0, &len);
    char url[512];
    snprintf(url, sizeof url, "%s/v1/scenes/%s/intersect", srv.base,
             scene_id[sc]);
    rbt_resp r;
    if (rbt_http(c->curl, "POST", url, in_bin ? BIN : JSON, body, len,
                 out_bin ? BIN : JSON, NULL, &r))
        client_fail(c, "transfer failed");
    else if (r.status != 200)
        client_fail(c, "good %s query on scene %d: %ld %s",
                    rb_mode_name(mode), sc, r.status, r.body);
    else {
        char why[256];
        if (out_bin ? rbt_check_binary(&e, r.body, r.len, why, sizeof why)
                    : rbt_check_json(&e, r.body, r.len, why, sizeof why))
            client_fail(c, "%s query of %zu rays on scene %d (%s in, %s "
                        "out): %s",
                        rb_mode_name(mode), q.n_rays, sc,
                        in_bin ? "binary" : "JSON",
                        out_bin ? "binary" : "JSON", why);
        c->good++;
    }
    rbt_resp_free(&r);
    free(body);
    rbt_expect_free(&e);
    rbt_query_free(&q);
}

/* A binary query with a NaN in one ray: the binary decoder leaves ray
 * records to the library, so this one is queued, merged and refused
 * inside the merged call; it must get its own 422, pointing into its own
 * rays, and the queries merged with it their answers. */
static void nan_query(client *c)
{
    rbt_query q;
    rbt_query_random(&q, &c->rng, RB_MODE_ANY, 3, 2 + rbt_below(&c->rng, 16),
                     1, 0, 0);
    size_t bad = rbt_below(&c->rng, (uint32_t)q.n_rays);
    q.rays[bad].dir[1] = NAN;
    size_t len;
    void *body = rbt_query_binary(&q, 0, &len);
    char url[512], want[64];
    snprintf(url, sizeof url, "%s/v1/scenes/%s/intersect", srv.base,
             scene_id[0]);
    snprintf(want, sizeof want, "\"/rays/%zu/4\"", bad);
    rbt_resp r;
    if (rbt_http(c->curl, "POST", url, BIN, body, len, JSON, NULL, &r))
        client_fail(c, "transfer failed");
    else if (r.status != 422 || !strstr(r.body, want))
        client_fail(c, "NaN in ray %zu: %ld %s", bad, r.status, r.body);
    c->bad++;
    rbt_resp_free(&r);
    free(body);
    rbt_query_free(&q);
}

/* A refused request beside the good ones: its status must be its own. */
static void bad_query(client *c)
{
    static const struct {
        const char *body;
        long status;
    } bad[] = {
        /* tmin > tmax */
        {"{\"mode\":\"any\",\"rays\":[[0,0,0,1,0,0,5,1]]}", 422},
        /* 2D rays on a 3D scene */
        {"{\"mode\":\"any\",\"dims\":2,\"rays\":[[0,0,1,0]]}", 422},
        {"{\"mode\":\"count\",\"rays\":[[0,0,0,1,0,0]],", 400},
        {"{\"mode\":\"pairs\",\"rays\":[[0,0,0,1,0,0]]}", 422},
    };
    int i = (int)rbt_below(&c->rng, sizeof bad / sizeof *bad);
    char url[512];
    snprintf(url, sizeof url, "%s/v1/scenes/%s/intersect", srv.base,
             scene_id[0]);
    rbt_resp r;
    if (rbt_http(c->curl, "POST", url, JSON, bad[i].body,
                 strlen(bad[i].body), NULL, NULL, &r))
        client_fail(c, "transfer failed");
    else if (r.status != bad[i].status)
        client_fail(c, "bad request %d: %ld, not %ld: %s", i, r.status,
                    bad[i].status, r.body);
    c->bad++;
    rbt_resp_free(&r);
}

static void *client_main(void *arg)
{
    client *c = arg;
    for (int k = 0; k < ROUNDS; k++) {
        /* Rounds start together: the queries of a round meet in the
         * queue. */
        pthread_barrier_wait(&round_start);
        uint32_t pick = rbt_below(&c->rng, 10);
        if (pick == 0)
            bad_query(c);
        else if (pick == 1)
            nan_query(c);
        else
            good_query(c, k);
    }
    return NULL;
}

static void make_scene(int i)
{
    rbt_rng rng = {1000u + (unsigned)i};
    rbt_query_random(&scene_q[i], &rng, RB_MODE_NEAREST, scene_dims[i], 1,
                     i == 1 ? 9000 : 100 + 50 * i, 0, 0);
    rb_context *ctx = rbt_context(RBT_CPU);
    const void *boxes = scene_q[i].boxes;
    rb_box2 *b2 = NULL;
    if (scene_dims[i] == 2) {
        b2 = malloc(scene_q[i].n_boxes * sizeof *b2);
        rbt_to_2d_boxes(scene_q[i].boxes, b2, scene_q[i].n_boxes);
        boxes = b2;
    }
    ck_assert_int_eq(rb_scene_create(ctx, scene_dims[i], boxes,
                                     scene_q[i].n_boxes, &mirror[i]),
                     RB_OK);
    free(b2);
    rb_context_destroy(ctx);
    size_t len;
    char *body = rbt_scene_json(&scene_q[i], &len);
    char url[512];
    snprintf(url, sizeof url, "%s/v1/scenes", srv.base);
    rbt_resp r;
    rbt_http(NULL, "POST", url, JSON, body, len, NULL, NULL, &r);
    free(body);
    ck_assert_msg(r.status == 201, "scene %d: %ld %s", i, r.status, r.body);
    const char *p = strstr(r.body, "\"id\":\"");
    snprintf(scene_id[i], sizeof scene_id[i], "%.*s",
             (int)strcspn(p + 6, "\""), p + 6);
    rbt_resp_free(&r);
}

static double metric(const char *name)
{
    rbt_resp m;
    ck_assert_int_eq(rbt_get(NULL, &srv, "/metrics", &m), 0);
    double v = rbt_metric(m.body, name);
    rbt_resp_free(&m);
    return v;
}

static void run_clients(void)
{
    client *cl = calloc(CLIENTS, sizeof *cl);
    pthread_barrier_init(&round_start, NULL, CLIENTS);
    for (int i = 0; i < CLIENTS; i++) {
        cl[i].index = i;
        cl[i].rng.s = 77u + (unsigned)i;
        cl[i].curl = curl_easy_init();
        cl[i].ctx = rbt_context(RBT_CPU);
        ck_assert_int_eq(pthread_create(&cl[i].thread, NULL, client_main,
                                        &cl[i]),
                         0);
    }
    int good = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(cl[i].thread, NULL);
        good += cl[i].good;
        curl_easy_cleanup(cl[i].curl);
        rb_context_destroy(cl[i].ctx);
    }
    pthread_barrier_destroy(&round_start);
    for (int i = 0; i < CLIENTS; i++)
        ck_assert_msg(!cl[i].failure[0], "client %d: %s", i, cl[i].failure);
    ck_assert_int_gt(good, CLIENTS * ROUNDS / 2);
    free(cl);
}

static void start(const char *merge)
{
    const char *args[] = {"--workers", "1", "--threads", "1", "--merge",
                          merge, "--merge-wait-us", "3000", "--quiet",
                          NULL};
    curl_global_init(CURL_GLOBAL_ALL);
    rbt_server_start(&srv, args);
    for (int i = 0; i < SCENES; i++)
        make_scene(i);
}

static void stop(void)
{
    for (int i = 0; i < SCENES; i++) {
        rb_scene_destroy(mirror[i]);
        rbt_query_free(&scene_q[i]);
    }
    int st = rbt_server_stop(&srv);
    ck_assert_msg(st == 0, "rayboxd exited with %d after SIGTERM", st);
    unlink(srv.log_path);
    curl_global_cleanup();
}

/* Merging on: answers as alone, and merges did happen. */
START_TEST(test_merged_answers)
{
    start("on");
    run_clients();
    double launches = metric("raybox_query_launches_total");
    double requests = metric("raybox_query_launch_requests_total");
    double merged = metric("raybox_merged_launches_total");
    double in_merged = metric("raybox_merged_requests_total");
    double per = metric("raybox_launches_per_request");
    ck_assert_msg(merged >= 10 && in_merged >= 2 * merged,
                  "merged launches %.0f, requests in them %.0f", merged,
                  in_merged);
    ck_assert_msg(launches < requests && per < 0.9,
                  "launches %.0f for %.0f requests (%.3f)", launches,
                  requests, per);
    ck_assert_double_eq_tol(per, launches / requests, 1e-9);
    stop();
}
END_TEST

/* Merging off: the same traffic, one call a request, no merge. */
START_TEST(test_merge_off)
{
    start("off");
    run_clients();
    ck_assert(metric("raybox_merged_launches_total") == 0);
    ck_assert(metric("raybox_launches_per_request") == 1);
    ck_assert(metric("raybox_query_launches_total") ==
              metric("raybox_query_launch_requests_total"));
    stop();
}
END_TEST

/* A bad --merge value is refused at start, naming it. */
START_TEST(test_merge_option)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' --port 0 --merge sometimes 2>&1",
             RAYBOXD);
    FILE *p = popen(cmd, "r");
    char out[2048] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "exit %d", st);
    ck_assert_msg(strstr(out, "--merge 'sometimes'"), "%s", out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_merge");
    TCase *tc = tcase_create("merge");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_merged_answers);
    tcase_add_test(tc, test_merge_off);
    tcase_add_test(tc, test_merge_option);
    suite_add_tcase(s, tc);
    return rbt_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
