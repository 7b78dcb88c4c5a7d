/* test_http.c - rayboxd through real HTTP (libcurl and raw sockets): every
 * endpoint and mode, JSON and binary answers against the library run
 * in-process and against `raybox intersect`, scenes, every error status
 * with its pointer, odd lengths and odd JSON, request ids and the log,
 * and the paths of docs/openapi.yaml. One server (a child process on an
 * ephemeral port, CPU backend, small limits) serves the suite; it must
 * exit 0 on SIGTERM at the end, which under ASan also means no leak. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "binary_codec.h"
#include "float_text.h"
#include "http_expect.h"
#include "http_util.h"
#include "testutil.h"

#ifndef RAYBOX_CLI
#error "RAYBOX_CLI must name the raybox executable"
#endif
#ifndef RAYBOX_SOURCE_DIR
#error "RAYBOX_SOURCE_DIR must name the source tree"
#endif

#define JSON "application/json"
#define BIN RBB_MEDIA_TYPE
#define PROBLEM "application/problem+json"

static rbt_server srv;
static rb_context *ctx;
static char url[512];

static const char *U(const char *path)
{
    snprintf(url, sizeof url, "%s%s", srv.base, path);
    return url;
}

static void setup(void)
{
    static const char *const args[] = {
        "--max-rays", "5000", "--max-boxes", "5000", "--max-body-bytes",
        "4M", "--max-results", "100000", "--max-scenes", "64", "--workers",
        "2", "--threads", "2", "--connection-timeout", "3", NULL};
    curl_global_init(CURL_GLOBAL_ALL);
    rbt_server_start(&srv, args);
    rb_context_options o;
    rb_context_options_init(&o);
    o.threads = 1;
    ctx = rbt_context_opts(RBT_CPU, &o);
}

static void teardown(void)
{
    rb_context_destroy(ctx);
    int st = rbt_server_stop(&srv);
    if (st != 0) {
        char *log = rbt_server_log(&srv);
        size_t n = log ? strlen(log) : 0;
        fprintf(stderr, "rayboxd log tail:\n%s\n",
                log ? log + (n > 4000 ? n - 4000 : 0) : "");
        free(log);
    }
    ck_assert_msg(st == 0, "rayboxd exited with %d after SIGTERM", st);
    unlink(srv.log_path);
    curl_global_cleanup();
}

/* A problem answer: status, content type, and the pointer (NULL: no
 * pointer member at all). */
static void expect_problem(const rbt_resp *r, long status,
                           const char *pointer, const char *what)
{
    char ct[128], want[256];
    ck_assert_msg(r->status == status, "%s: status %ld, expected %ld: %s",
                  what, r->status, status, r->body);
    ck_assert_msg(rbt_header(r, "Content-Type", ct, sizeof ct) &&
                      strcmp(ct, PROBLEM) == 0,
                  "%s: content type", what);
    snprintf(want, sizeof want, "\"status\":%ld", status);
    ck_assert_msg(strstr(r->body, want), "%s: %s", what, r->body);
    ck_assert_msg(strstr(r->body, "\"type\":\"about:blank\"") &&
                      strstr(r->body, "\"title\":"),
                  "%s: %s", what, r->body);
    if (pointer) {
        snprintf(want, sizeof want, "\"pointer\":\"%s\"", pointer);
        ck_assert_msg(strstr(r->body, want), "%s: pointer %s expected: %s",
                      what, pointer, r->body);
    } else {
        ck_assert_msg(!strstr(r->body, "\"pointer\""), "%s: %s", what,
                      r->body);
    }
}

static void post(const char *path, const char *type, const void *body,
                 size_t len, const char *accept, rbt_resp *r)
{
    rbt_http(NULL, "POST", U(path), type, body, len, accept, NULL, r);
}

static void post_json(const char *path, const char *body, rbt_resp *r)
{
    post(path, JSON, body, strlen(body), NULL, r);
}

static void server_still_fine(void)
{
    rbt_resp r;
    rbt_http(NULL, "GET", U("/v1/health"), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    rbt_resp_free(&r);
}

/* ------------------------------------------------------------------------
 * Endpoints
 */
START_TEST(test_health_devices_metrics)
{
    rbt_resp r;
    char h[128];
    rbt_http(NULL, "GET", U("/v1/health"), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"status\":\"ok\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"backend\":\"cpu\""));
    ck_assert_ptr_nonnull(rbt_header(&r, "X-Request-Id", h, sizeof h));
    ck_assert_str_eq(rbt_header(&r, "Content-Type", h, sizeof h), JSON);
    rbt_resp_free(&r);

    rbt_http(NULL, "HEAD", U("/v1/health"), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 0);
    rbt_resp_free(&r);

    rbt_http(NULL, "GET", U("/v1/devices"), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"serving\":{\"backend\":\"cpu\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"opencl\":{\"devices\":["));
    ck_assert_ptr_nonnull(strstr(r.body, "\"cpu_serving\":true"));
    rbt_resp_free(&r);

    /* One query first, so that the counters have moved. */
    post_json("/v1/intersect",
              "{\"rays\":[[0,0,0,1,0,0],[0,5,0,1,0,0]],"
              "\"boxes\":[[1,-1,-1,2,1,1],[3,-1,-1,4,1,1],[5,-1,-1,6,1,1]]}",
              &r);
    ck_assert_int_eq(r.status, 200);
    rbt_resp_free(&r);
    rbt_metrics_with(U("/metrics"),
                     "raybox_http_requests_total{route=\"/v1/intersect\","
                     "code=\"200\"} ",
                     &r);
    ck_assert_str_eq(rbt_header(&r, "Content-Type", h, sizeof h),
                     "text/plain; version=0.0.4; charset=utf-8");
    static const char *const names[] = {
        "# TYPE raybox_http_requests_total counter",
        "raybox_http_requests_total{route=\"/v1/intersect\",code=\"200\"} ",
        "raybox_http_requests_total{route=\"/v1/health\",code=\"200\"} ",
        "# TYPE raybox_http_request_duration_seconds histogram",
        "raybox_http_request_duration_seconds_bucket{route=\"/v1/intersect\","
        "le=\"+Inf\"} ",
        "raybox_http_request_duration_seconds_count{route=\"/v1/intersect\"}",
        "raybox_queue_wait_seconds_bucket{le=\"0.001\"}",
        "raybox_queue_depth ", "raybox_queue_capacity ",
        "raybox_fallbacks_total ", "raybox_backend_info{backend=\"cpu\",",
        "raybox_scenes ", "raybox_scene_bytes ",
        "raybox_buffer_cache_bytes "};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        ck_assert_msg(strstr(r.body, names[i]), "metrics lack '%s'",
                      names[i]);
    ck_assert_msg(rbt_metric(r.body, "raybox_rays_total") >= 2, "rays");
    ck_assert_msg(rbt_metric(r.body, "raybox_slab_tests_total") >= 6,
                  "slab tests");
    ck_assert_msg(rbt_metric(r.body, "raybox_fallbacks_total") == 0,
                  "fallbacks");
    rbt_resp_free(&r);
}
END_TEST

/* Every mode, 3D and 2D, with and without per-ray ranges, in all four
 * combinations of request and answer form; each answer equals the
 * library's, so JSON and binary agree. */
START_TEST(test_modes_json_and_binary)
{
    rbt_rng rng = {0x5eed + (uint64_t)_i};
    for (unsigned dims = 2; dims <= 3; dims++)
        for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
            rbt_query q;
            rbt_query_random(&q, &rng, (rb_mode)mode, dims, 37, 29, _i,
                             mode == RB_MODE_ALL ? 3 : 0);
            rbt_expect e;
            rbt_expect_run(ctx, &q, NULL, 0, &e);
            size_t jl, bl;
            char *jb = rbt_query_json(&q, 1, &jl);
            void *bb = rbt_query_binary(&q, 1, &bl);
            char why[256];
            for (int k = 0; k < 4; k++) {
                int in_bin = k & 1, out_bin = k >> 1;
                rbt_resp r;
                post("/v1/intersect", in_bin ? BIN : JSON,
                     in_bin ? bb : (void *)jb, in_bin ? bl : jl,
                     out_bin ? BIN : JSON, &r);
                ck_assert_msg(r.status == 200, "%s %uD %s->%s: %ld %s",
                              rb_mode_name(mode), dims, in_bin ? "bin" : "json",
                              out_bin ? "bin" : "json", r.status, r.body);
                int bad = out_bin ? rbt_check_binary(&e, r.body, r.len, why,
                                                     sizeof why)
                                  : rbt_check_json(&e, r.body, r.len, why,
                                                   sizeof why);
                ck_assert_msg(!bad, "%s %uD %s->%s: %s", rb_mode_name(mode),
                              dims, in_bin ? "bin" : "json",
                              out_bin ? "bin" : "json", why);
                rbt_resp_free(&r);
            }
            /* Without Accept, the answer takes the request's form. */
            rbt_resp r;
            post("/v1/intersect", BIN, bb, bl, NULL, &r);
            char ct[64];
            ck_assert_str_eq(rbt_header(&r, "Content-Type", ct, sizeof ct),
                             BIN);
            rbt_resp_free(&r);
            free(jb);
            free(bb);
            rbt_expect_free(&e);
            rbt_query_free(&q);
        }
}
END_TEST

/* The server's JSON bytes are the CLI's, up to "meta", for hand-written
 * bodies with odd numbers (exponents, -0, subnormals, null tmax). */
START_TEST(test_same_as_cli)
{
    static const char *const bodies[] = {
        "{\"mode\":\"%s\",\"max_hits\":2,\"rays\":[[0,0,-0.0,1,0,0],"
        "[1e-40,0,0,1,-0,0,-0,null],[0,0,0,1E0,2e-1,0],[-3,0.5,0,1,0,0,0,4]],"
        "\"boxes\":[[1,-1,-1,2,1,1],[3.0e0,-1,-1,4,1,1],[-1,-1,-1,1e1,1,1],"
        "[0.5,0.25,-0,0.75,0.5,0]]}",
        "{\"dims\":2,\"mode\":\"%s\",\"tmin\":0.5,\"tmax\":20,"
        "\"rays\":[[0,0,1,0],[0,0,0,1,0,null],[-5,-5,1,1]],"
        "\"boxes\":[[1,-1,2,1],[-1,1,1,2],[2,2,3,3]]}",
    };
    char dir[] = "/tmp/raybox-http-cli-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (size_t b = 0; b < 2; b++)
        for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
            char body[1024], path[128], out[128], cmd[512];
            snprintf(body, sizeof body, bodies[b], rb_mode_name(mode));
            if (mode == RB_MODE_PAIRS) /* equal counts: cut the boxes */
                continue;
            snprintf(path, sizeof path, "%s/req.json", dir);
            snprintf(out, sizeof out, "%s/out.json", dir);
            FILE *f = fopen(path, "w");
            ck_assert_ptr_nonnull(f);
            fputs(body, f);
            fclose(f);
            snprintf(cmd, sizeof cmd, "'%s' intersect --backend cpu '%s' >'%s'",
                     RAYBOX_CLI, path, out);
            int st = system(cmd);
            ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                          "%s failed", cmd);
            size_t cli_len;
            char *cli = rbt_read_file(out, &cli_len);
            ck_assert_ptr_nonnull(cli);
            rbt_resp r;
            post_json("/v1/intersect", body, &r);
            ck_assert_msg(r.status == 200, "%s: %s", body, r.body);
            size_t a = rbt_strip_meta(r.body, r.len);
            size_t c = rbt_strip_meta(cli, cli_len);
            ck_assert_msg(a == c && memcmp(r.body, cli, a) == 0,
                          "server and CLI differ for %s:\n%.*s\n%.*s", body,
                          (int)a, r.body, (int)c, cli);
            rbt_resp_free(&r);
            free(cli);
            unlink(path);
            unlink(out);
        }
    rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------------------
 * Scenes
 */

/* Creates a scene from q's boxes (JSON or binary body); returns its id
 * and checks the 201 answer. */
static void create_scene(const rbt_query *q, int binary, char *id)
{
    size_t len;
    void *body = binary ? rbt_scene_binary(q, &len)
                        : (void *)rbt_scene_json(q, &len);
    rbt_resp r;
    post("/v1/scenes", binary ? BIN : JSON, body, len, NULL, &r);
    free(body);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    const char *p = strstr(r.body, "\"id\":\"");
    ck_assert_ptr_nonnull(p);
    size_t n = strcspn(p + 6, "\"");
    memcpy(id, p + 6, n);
    id[n] = '\0';
    char loc[256], want[256];
    snprintf(want, sizeof want, "/v1/scenes/%s", id);
    ck_assert_str_eq(rbt_header(&r, "Location", loc, sizeof loc), want);
    ck_assert_ptr_nonnull(strstr(r.body, "\"version\":1"));
    rbt_resp_free(&r);
}

/* Queries the stored scene with q's rays (every every-box mode, JSON and
 * binary) and compares with the library on `mirror` at `version`. */
static void check_scene_queries(const char *id, rbt_query *q,
                                const rb_scene *mirror, uint64_t version)
{
    char path[256], why[256];
    snprintf(path, sizeof path, "/v1/scenes/%s/intersect", id);
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++) {
        q->mode = (rb_mode)mode;
        q->max_hits = mode == RB_MODE_ALL ? 4 : 0;
        rbt_expect e;
        rbt_expect_run(ctx, q, mirror, version, &e);
        size_t jl, bl;
        char *jb = rbt_query_json(q, 0, &jl);
        void *bb = rbt_query_binary(q, 0, &bl);
        rbt_resp r;
        post(path, JSON, jb, jl, NULL, &r);
        ck_assert_msg(r.status == 200, "%s: %s", path, r.body);
        ck_assert_msg(!rbt_check_json(&e, r.body, r.len, why, sizeof why),
                      "scene %s json: %s", rb_mode_name(mode), why);
        rbt_resp_free(&r);
        post(path, BIN, bb, bl, NULL, &r);
        ck_assert_msg(r.status == 200, "%s: %s", path, r.body);
        ck_assert_msg(!rbt_check_binary(&e, r.body, r.len, why, sizeof why),
                      "scene %s binary: %s", rb_mode_name(mode), why);
        rbt_resp_free(&r);
        free(jb);
        free(bb);
        rbt_expect_free(&e);
    }
}

static long scene_version(const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    rbt_resp r;
    rbt_http(NULL, "GET", U(path), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    const char *v = strstr(r.body, "\"version\":");
    ck_assert_ptr_nonnull(v);
    long version = atol(v + 10);
    rbt_resp_free(&r);
    return version;
}

static void patch(const char *id, const char *body, rbt_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    rbt_http(NULL, "PATCH", U(path), JSON, body, strlen(body), NULL, NULL, r);
}

/* --bvh-build fast: a scene's GET says which builder made its hierarchy,
 * and its answers are the library's (which the SAH build gives too). The
 * suite's helpers talk to `srv`, so it points at the second server for
 * the duration. */
START_TEST(test_bvh_build_option)
{
    static const char *const args[] = {"--bvh-build", "fast", NULL};
    rbt_server fast, saved = srv;
    rbt_server_start(&fast, args);
    rbt_rng rng = {78};
    rbt_query q;
    rbt_query_random(&q, &rng, RB_MODE_NEAREST, 3, 300, 3000, 1, 0);
    rb_scene *mirror = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, q.boxes, q.n_boxes, &mirror),
                     RB_OK);
    for (int k = 0; k < 2; k++) {
        srv = k ? fast : saved;
        char id[160], path[256];
        create_scene(&q, 0, id);
        rbt_resp r;
        snprintf(path, sizeof path, "/v1/scenes/%s", id);
        rbt_http(NULL, "GET", U(path), NULL, NULL, 0, NULL, NULL, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_msg(strstr(r.body, k ? "\"builder\":\"fast\""
                                       : "\"builder\":\"sah\""),
                      "%s", r.body);
        rbt_resp_free(&r);
        check_scene_queries(id, &q, mirror, 1);
    }
    srv = saved;
    rb_scene_destroy(mirror);
    rbt_query_free(&q);
    ck_assert_int_eq(rbt_server_stop(&fast), 0);

    /* A bad value is a start-up error naming the option. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' --port 0 --bvh-build quick 2>&1",
             RAYBOXD);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[2048] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "exit %d", st);
    ck_assert_msg(strstr(out, "--bvh-build 'quick'"), "%s", out);
}
END_TEST

START_TEST(test_scenes)
{
    rbt_rng rng = {77};
    rbt_query q;
    rbt_query_random(&q, &rng, RB_MODE_NEAREST, 3, 50, 40, 1, 0);
    char id[160], path[256];
    create_scene(&q, 0, id);
    rb_scene *mirror = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, q.boxes, q.n_boxes, &mirror),
                     RB_OK);

    /* GET one and the list. */
    rbt_resp r;
    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    rbt_http(NULL, "GET", U(path), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"boxes\":40"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"dims\":3"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"bounds\":{\"min\":["));
    ck_assert_ptr_nonnull(strstr(r.body, "\"host_bytes\":"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"build\":{"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"structure\":\"bvh8\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"refits\":0"));
    rbt_resp_free(&r);
    rbt_http(NULL, "GET", U("/v1/scenes"), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, id));
    rbt_resp_free(&r);

    check_scene_queries(id, &q, mirror, 1);

    /* "scene" in the body of /v1/intersect, same answer. */
    {
        q.mode = RB_MODE_COUNT;
        size_t jl;
        char *jb = rbt_query_json(&q, 0, &jl);
        char *body = malloc(jl + 200);
        snprintf(body, jl + 200, "{\"scene\":\"%s\",%s", id, jb + 1);
        rbt_expect e;
        rbt_expect_run(ctx, &q, mirror, 1, &e);
        post_json("/v1/intersect", body, &r);
        char why[256];
        ck_assert_msg(!rbt_check_json(&e, r.body, r.len, why, sizeof why),
                      "%s", why);
        rbt_resp_free(&r);
        rbt_expect_free(&e);
        free(body);
        free(jb);
    }

    /* PATCH: set and append in one, version + 1, answers follow. */
    patch(id, "{\"set\":[[3,0,0,0,1,1,1],[0,-2,-2,-2,-1,-1,-1]],"
              "\"append\":[[5,5,5,6,6,6]]}",
          &r);
    ck_assert_msg(r.status == 200, "%s", r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "\"version\":2"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"boxes\":41"));
    rbt_resp_free(&r);
    uint32_t idx[2] = {3, 0};
    rb_box set[2] = {{{0, 0, 0}, {1, 1, 1}}, {{-2, -2, -2}, {-1, -1, -1}}};
    rb_box app = {{5, 5, 5}, {6, 6, 6}};
    ck_assert_int_eq(rb_scene_set(ctx, mirror, idx, set, 2), RB_OK);
    ck_assert_int_eq(rb_scene_append(ctx, mirror, &app, 1), RB_OK);
    ck_assert_int_eq(scene_version(id), 2);
    check_scene_queries(id, &q, mirror, 2);
    /* the append rebuilt the hierarchy (a set alone refits it) */
    rbt_http(NULL, "GET", U(path), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.body, "\"rebuilds\":1") &&
                      strstr(r.body, "\"nodes\":"),
                  "%s", r.body);
    rbt_resp_free(&r);

    /* Failed PATCHes change nothing: an index out of range after a good
     * entry, a bad box in append after a good set, malformed JSON, a
     * binary body. */
    static const struct {
        const char *body;
        long status;
        const char *pointer;
    } bad[] = {
        {"{\"set\":[[0,0,0,0,1,1,1],[41,0,0,0,1,1,1]]}", 422, "/set/1/0"},
        {"{\"set\":[[1,0,0,0,1,1,1]],\"append\":[[0,0,0,1,1,1],"
         "[2,0,0,1,1,1]]}", 422, "/append/1/0"},
        {"{\"set\":[[1,0,0,0,1,1,1]],\"append\":[[0,0,0,1,1", 400, NULL},
        {"{\"set\":[[-1,0,0,0,1,1,1]]}", 422, "/set/0/0"},
        {"{\"set\":[[1.5,0,0,0,1,1,1]]}", 422, "/set/0/0"},
        {"{\"append\":[[0,0,0,1,1]]}", 422, "/append/0"},
        {"{\"boxes\":[]}", 422, "/boxes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        patch(id, bad[i].body, &r);
        ck_assert_msg(r.status == bad[i].status, "%s: %ld %s", bad[i].body,
                      r.status, r.body);
        if (bad[i].pointer)
            expect_problem(&r, bad[i].status, bad[i].pointer, bad[i].body);
        rbt_resp_free(&r);
    }
    {
        size_t bl;
        void *bb = rbt_scene_binary(&q, &bl);
        rbt_http(NULL, "PATCH", U(path), BIN, bb, bl, NULL, NULL, &r);
        expect_problem(&r, 415, NULL, "binary PATCH");
        rbt_resp_free(&r);
        free(bb);
    }
    ck_assert_int_eq(scene_version(id), 2);
    check_scene_queries(id, &q, mirror, 2);

    /* Scene queries that cannot be: pairs, other dims, boxes. */
    snprintf(path, sizeof path, "/v1/scenes/%s/intersect", id);
    post_json(path, "{\"mode\":\"pairs\",\"rays\":[[0,0,0,1,0,0]]}", &r);
    expect_problem(&r, 422, "/mode", "pairs on a scene");
    rbt_resp_free(&r);
    post_json(path, "{\"dims\":2,\"rays\":[[0,0,1,0]]}", &r);
    expect_problem(&r, 422, "/dims", "2D query of a 3D scene");
    rbt_resp_free(&r);
    post_json(path, "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[]}", &r);
    expect_problem(&r, 422, "/boxes", "boxes with a scene");
    rbt_resp_free(&r);

    /* A 2D scene from a binary body. */
    rbt_query q2;
    rbt_query_random(&q2, &rng, RB_MODE_NEAREST, 2, 30, 25, 0, 0);
    char id2[160];
    create_scene(&q2, 1, id2);
    rb_scene *mirror2 = NULL;
    rb_box2 b2[25];
    for (int i = 0; i < 25; i++)
        b2[i] = (rb_box2){{q2.boxes[i].min[0], q2.boxes[i].min[1]},
                          {q2.boxes[i].max[0], q2.boxes[i].max[1]}};
    ck_assert_int_eq(rb_scene_create(ctx, 2, b2, 25, &mirror2), RB_OK);
    check_scene_queries(id2, &q2, mirror2, 1);

    /* DELETE: 204, then 404 everywhere. */
    snprintf(path, sizeof path, "/v1/scenes/%s", id2);
    rbt_http(NULL, "DELETE", U(path), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 204);
    rbt_resp_free(&r);
    rbt_http(NULL, "DELETE", U(path), NULL, NULL, 0, NULL, NULL, &r);
    expect_problem(&r, 404, NULL, "DELETE twice");
    rbt_resp_free(&r);
    rbt_http(NULL, "GET", U(path), NULL, NULL, 0, NULL, NULL, &r);
    expect_problem(&r, 404, NULL, "GET deleted");
    rbt_resp_free(&r);
    snprintf(path, sizeof path, "/v1/scenes/%s/intersect", id2);
    post_json(path, "{\"rays\":[[0,0,1,0]]}", &r);
    expect_problem(&r, 404, NULL, "query deleted");
    rbt_resp_free(&r);
    char body[256];
    snprintf(body, sizeof body, "{\"scene\":\"%s\",\"rays\":[[0,0,0,1,0,0]]}",
             id2);
    post_json("/v1/intersect", body, &r);
    expect_problem(&r, 404, "/scene", "\"scene\" deleted");
    rbt_resp_free(&r);

    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    rbt_http(NULL, "DELETE", U(path), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 204);
    rbt_resp_free(&r);
    rb_scene_destroy(mirror);
    rb_scene_destroy(mirror2);
    rbt_query_free(&q);
    rbt_query_free(&q2);
}
END_TEST

/* ------------------------------------------------------------------------
 * Errors
 */
START_TEST(test_error_statuses)
{
    static const struct {
        const char *path, *type, *body;
        long status;
        const char *pointer;
    } cases[] = {
        /* 400 */
        {"/v1/intersect", JSON, "{\"rays\":[[0,0,0,1,0,0]],", 400, ""},
        {"/v1/intersect", JSON, "{\"rays\":[[0,0,0,1,0,0]] \"boxes\"", 400,
         ""},
        {"/v1/intersect", JSON, "", 400, ""},
        {"/v1/intersect", JSON, "{\"rays\":[[0,0,0,1,0,x]]}", 400,
         "/rays/0/5"},
        /* 404 */
        {"/v1/nothing", JSON, "{}", 404, NULL},
        {"/v1/scenes/no-such-scene/intersect", JSON, "{\"rays\":[]}", 404,
         NULL},
        {"/v1/intersect", JSON, "{\"scene\":\"nope\",\"rays\":[]}", 404,
         "/scene"},
        /* 413 */
        {"/v1/intersect", JSON, "@rays5001", 413, "/rays/5000"},
        {"/v1/intersect", JSON,
         "{\"mode\":\"all\",\"max_hits\":100,\"rays\":@rays1001}", 413,
         "/rays/1000"},
        /* 415 */
        {"/v1/intersect", "text/plain", "{}", 415, NULL},
        {"/v1/intersect", NULL, "{}", 415, NULL},
        {"/v1/scenes", "application/octet-stream", "{}", 415, NULL},
        /* 422 */
        {"/v1/intersect", JSON,
         "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[[1,1,1,0,2,2]]}", 422,
         "/boxes/0/0"},
        {"/v1/intersect", JSON,
         "{\"rays\":[[0,0,0,1,0,0,5,1]],\"boxes\":[]}", 422, "/rays/0/6"},
        {"/v1/intersect", JSON,
         "{\"rays\":[[0,0,\"1\",1,0,0]],\"boxes\":[]}", 422, "/rays/0/2"},
        {"/v1/intersect", JSON,
         "{\"rays\":[[[0,0,0,1,0,0]]],\"boxes\":[]}", 422, "/rays/0/0"},
        {"/v1/intersect", JSON, "{\"rays\":[[0,0,0,1,0]],\"boxes\":[]}", 422,
         "/rays/0"},
        {"/v1/intersect", JSON,
         "{\"rays\":[],\"rays\":[],\"boxes\":[]}", 422, "/rays"},
        {"/v1/intersect", JSON, "{\"rays\":[],\"boxes\":[],\"foo\":1}", 422,
         "/foo"},
        {"/v1/intersect", JSON, "{\"mode\":\"closest\",\"rays\":[]}", 422,
         "/mode"},
        {"/v1/intersect", JSON,
         "{\"mode\":\"pairs\",\"rays\":[[0,0,0,1,0,0]],\"boxes\":[]}", 422,
         "/boxes"},
        {"/v1/intersect", JSON,
         "{\"rays\":[[1e39,0,0,1,0,0]],\"boxes\":[]}", 422, "/rays/0/0"},
        {"/v1/intersect", JSON,
         "{\"tmin\":2,\"tmax\":1,\"rays\":[],\"boxes\":[]}", 422, "/tmin"},
        {"/v1/intersect", JSON, "{\"dims\":4,\"rays\":[],\"boxes\":[]}", 422,
         "/dims"},
        {"/v1/intersect", JSON, "{\"max_hits\":0,\"rays\":[],\"boxes\":[]}",
         422, "/max_hits"},
        {"/v1/intersect", JSON, "[1,2,3]", 422, ""},
        {"/v1/intersect", JSON, "{\"rays\":[[0,0,0,1,0,0]]}", 422, ""},
        {"/v1/scenes", JSON, "{\"boxes\":[[0,0,0,1,1,1],[0,0,0,-1,1,1]]}",
         422, "/boxes/1/0"},
        {"/v1/scenes", JSON, "{\"boxes\":[[0,0,0,1,1,true]]}", 422,
         "/boxes/0/5"},
    };
    static char big[5001 * 16 + 64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *body = cases[i].body;
        if (body[0] == '@' || strstr(body, "@rays")) {
            /* n copies of a ray: over the 5000-ray or 100000-result
             * limits. */
            const char *at = strstr(body, "@rays");
            int n = atoi(at + 5);
            size_t k = (size_t)(at - body);
            memcpy(big, body, k);
            if (body[0] == '@') {
                k = (size_t)snprintf(big, sizeof big, "{\"rays\":");
            }
            big[k++] = '[';
            for (int j = 0; j < n; j++)
                k += (size_t)snprintf(big + k, sizeof big - k, "%s[0,0,0,1,0,0]",
                                      j ? "," : "");
            k += (size_t)snprintf(big + k, sizeof big - k, "]%s",
                                  body[0] == '@' ? ",\"boxes\":[]}" : "}");
            body = big;
        }
        rbt_resp r;
        post(cases[i].path, cases[i].type, body, strlen(body), NULL, &r);
        char what[96];
        snprintf(what, sizeof what, "case %zu (%.60s)", i, cases[i].body);
        expect_problem(&r, cases[i].status, cases[i].pointer, what);
        rbt_resp_free(&r);
    }

    /* 405, with Allow. */
    static const struct {
        const char *method, *path, *allow;
    } m405[] = {
        {"GET", "/v1/intersect", "POST"},
        {"DELETE", "/v1/scenes", "GET, HEAD, POST"},
        {"POST", "/v1/health", "GET, HEAD"},
        {"PUT", "/metrics", "GET, HEAD"},
        {"POST", "/v1/devices", "GET, HEAD"},
        {"GET", "/v1/scenes/abc/intersect", "POST"},
        {"POST", "/v1/scenes/abc", "GET, HEAD, PATCH, DELETE"},
    };
    for (size_t i = 0; i < sizeof m405 / sizeof *m405; i++) {
        rbt_resp r;
        char allow[64];
        rbt_http(NULL, m405[i].method, U(m405[i].path), NULL, NULL, 0, NULL,
                 NULL, &r);
        expect_problem(&r, 405, NULL, m405[i].path);
        ck_assert_str_eq(rbt_header(&r, "Allow", allow, sizeof allow),
                         m405[i].allow);
        rbt_resp_free(&r);
    }

    /* 406 */
    rbt_resp r;
    post("/v1/intersect", JSON, "{\"rays\":[],\"boxes\":[]}", 22, "text/html",
         &r);
    expect_problem(&r, 406, NULL, "Accept text/html");
    rbt_resp_free(&r);
    post("/v1/intersect", JSON, "{\"rays\":[],\"boxes\":[]}", 22,
         "application/json;q=0, " BIN ";q=0.5", &r);
    char ct[64];
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(rbt_header(&r, "Content-Type", ct, sizeof ct), BIN);
    rbt_resp_free(&r);

    /* 413 while a chunked body streams in (4 MiB limit). */
    size_t n = (5u << 20);
    char *huge = malloc(n);
    memset(huge, ' ', n);
    huge[0] = '{';
    rbt_http_chunked(NULL, U("/v1/intersect"), JSON, huge, n, 65536, &r);
    expect_problem(&r, 413, NULL, "chunked over the limit");
    rbt_resp_free(&r);
    free(huge);
    server_still_fine();
}
END_TEST

/* Binary bodies that are wrong in every way the header can be. */
START_TEST(test_binary_errors)
{
    rbt_rng rng = {5};
    rbt_query q;
    rbt_query_random(&q, &rng, RB_MODE_NEAREST, 3, 4, 3, 1, 0);
    size_t len;
    uint8_t *good = rbt_query_binary(&q, 1, &len);
    uint8_t *b = malloc(len + 64);
    float nan = NAN, two = 2, one = 1;
    static const char *const what[] = {
        "magic", "version", "header size", "kind", "reserved", "mode",
        "dims", "flags", "NaN in a ray", "tmin > tmax", "rays over limit",
        "short body", "long body", "pairs count", "empty"};
    for (int k = 0; k < 15; k++) {
        memcpy(b, good, len);
        size_t send = len;
        long status = 400;
        const char *ptr = "";
        switch (k) {
        case 0: b[0] = 'X'; break;
        case 1: b[4] = 2; break;
        case 2: b[6] = 32; break;
        case 3: b[8] = RBB_KIND_SCENE; break;
        case 4: b[60] = 1; break;
        case 5: b[9] = 9; status = 422; ptr = "/mode"; break;
        case 6: b[10] = 4; status = 422; ptr = "/dims"; break;
        case 7: b[11] = 0x80; break;
        case 8:
            memcpy(b + 64 + 32 + 12, &nan, 4); /* ray 1, dir x */
            status = 422;
            ptr = "/rays/1/3";
            break;
        case 9:
            b[11] = 0; /* no ranges: the header's apply */
            memcpy(b + 32, &two, 4);
            memcpy(b + 36, &one, 4);
            status = 422;
            ptr = "/tmin";
            break;
        case 10: {
            uint64_t nr = 6000;
            memcpy(b + 16, &nr, 8);
            status = 413;
            ptr = "/rays";
            break;
        }
        case 11: send = len - 5; break; /* Content-Length != announced */
        case 12: send = len + 4; b[len] = b[len + 1] = b[len + 2] = b[len + 3] = 0; break;
        case 13: b[9] = RB_MODE_PAIRS; status = 422; ptr = "/boxes"; break;
        case 14: send = 0; break;
        }
        rbt_resp r;
        post("/v1/intersect", BIN, b, send, NULL, &r);
        expect_problem(&r, status, ptr, what[k]);
        rbt_resp_free(&r);
    }
    free(b);
    free(good);
    rbt_query_free(&q);
    server_still_fine();
}
END_TEST

/* Lengths that lie, bodies cut short, gigantic declared sizes: raw
 * sockets, since curl will not send them. */
START_TEST(test_lengths)
{
    static char out[65536];
    char req[1024];
    int closed;

    /* 413 from Content-Length alone, before any body byte: the answer
     * comes although nothing follows the headers, and the connection is
     * closed. */
    static const char *const giants[] = {"1000000000000000",
                                         "18446744073709551615"};
    for (int i = 0; i < 2; i++) {
        int n = snprintf(req, sizeof req,
                         "POST /v1/intersect HTTP/1.1\r\nHost: localhost\r\n"
                         "Content-Type: application/json\r\n"
                         "Content-Length: %s\r\n\r\n", giants[i]);
        rbt_raw(srv.port, req, (size_t)n, 0, out, sizeof out, 20000, &closed);
        ck_assert_msg(strncmp(out, "HTTP/1.1 413", 12) == 0, "%s: %s",
                      giants[i], out);
        ck_assert_msg(strstr(out, PROBLEM), "%s", out);
        ck_assert_msg(closed, "connection left open after 413");
    }
    /* A Content-Length beyond 64 bits is MHD's to refuse. */
    int n = snprintf(req, sizeof req,
                     "POST /v1/intersect HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\n"
                     "Content-Length: 99999999999999999999999\r\n\r\n");
    rbt_raw(srv.port, req, (size_t)n, 0, out, sizeof out, 20000, &closed);
    ck_assert_msg(strncmp(out, "HTTP/1.1 4", 10) == 0, "%s", out);
    ck_assert(closed);

    /* Both Transfer-Encoding and Content-Length. */
    n = snprintf(req, sizeof req,
                 "POST /v1/intersect HTTP/1.1\r\nHost: localhost\r\n"
                 "Content-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
                 "5\r\n{\"a\":\r\n0\r\n\r\n");
    rbt_raw(srv.port, req, (size_t)n, 0, out, sizeof out, 20000, &closed);
    ck_assert_msg(strncmp(out, "HTTP/1.1 400", 12) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "Transfer-Encoding"));

    /* A body cut short by the client: it announced 1000 bytes, sent 40
     * and closed its side. No answer, and the connection is closed -
     * at once, or (MHD 0.9.75 with epoll may miss the peer's close) at
     * the connection timeout, 3 s here. The server goes on. */
    n = snprintf(req, sizeof req,
                 "POST /v1/intersect HTTP/1.1\r\nHost: localhost\r\n"
                 "Content-Type: application/json\r\nContent-Length: 1000\r\n"
                 "\r\n{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[[1,1,1,2");
    size_t got = rbt_raw(srv.port, req, (size_t)n, 1, out, sizeof out, 20000,
                         &closed);
    ck_assert_msg(closed && got == 0, "answer to a cut body: %s", out);

    /* A Content-Length shorter than the JSON: the parser sees a cut
     * document (400, pointer where it stood); the rest is not HTTP. */
    const char *doc = "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[[1,-1,-1,2,1,1]]}";
    n = snprintf(req, sizeof req,
                 "POST /v1/intersect HTTP/1.1\r\nHost: localhost\r\n"
                 "Content-Type: application/json\r\nContent-Length: 20\r\n"
                 "\r\n%s", doc);
    rbt_raw(srv.port, req, (size_t)n, 1, out, sizeof out, 20000, &closed);
    ck_assert_msg(strncmp(out, "HTTP/1.1 400", 12) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"pointer\":\"/rays/0/5\""));
    ck_assert_ptr_nonnull(strstr(out, "cut short"));

    /* A binary body shorter than its header: 400 from the headers. */
    n = snprintf(req, sizeof req,
                 "POST /v1/intersect HTTP/1.1\r\nHost: localhost\r\n"
                 "Content-Type: " BIN "\r\nContent-Length: 10\r\n\r\n"
                 "RBOX123456");
    rbt_raw(srv.port, req, (size_t)n, 1, out, sizeof out, 20000, &closed);
    ck_assert_msg(strncmp(out, "HTTP/1.1 400", 12) == 0, "%s", out);

    /* Deep nesting in many forms: refused at the first level too deep,
     * without recursion. */
    size_t deep = 200000;
    char *body = malloc(deep + 64);
    strcpy(body, "{\"rays\":");
    memset(body + 8, '[', deep);
    body[8 + deep] = '\0';
    rbt_resp r;
    post("/v1/intersect", JSON, body, strlen(body), NULL, &r);
    expect_problem(&r, 422, "/rays/0/0", "deep nesting");
    rbt_resp_free(&r);
    memset(body, '[', deep);
    body[deep] = '\0';
    post("/v1/intersect", JSON, body, deep, NULL, &r);
    expect_problem(&r, 422, "", "a deep array as the body");
    rbt_resp_free(&r);
    free(body);
    server_still_fine();
}
END_TEST

/* Numbers JSON allows that are easy to get wrong: exponents, -0, a
 * subnormal, integers as floats; duplicated keys are refused. */
START_TEST(test_odd_json)
{
    rbt_resp r;
    post_json("/v1/intersect",
              "{\"mode\":\"pairs\",\"rays\":[[-0.0,0,0,1E+0,0,0,-0,"
              "1e1],[0,0,0,-1,0,0,0,null],[1e-45,0,0,1,0,0]],"
              "\"boxes\":[[0.5e1,-1,-1,6,1,1],[-2,-1,-1,-1,1,1],"
              "[-0,-0,-0,0,0,0]]}",
              &r);
    ck_assert_msg(r.status == 200, "%s", r.body);
    /* t = 5 and 6 for the first, 1 and 2 for the second; the third ray
     * starts inside a point box at the origin (its subnormal x is
     * flushed to 0): t_enter = tmin = 0, never -0. */
    ck_assert_msg(strstr(r.body, "\"hit\":[true,true,true]") &&
                      strstr(r.body, "\"t_enter\":[5.0,1.0,0.0]") &&
                      strstr(r.body, "\"t_exit\":[6.0,2.0,0.0]"),
                  "%s", r.body);
    rbt_resp_free(&r);
    post_json("/v1/intersect",
              "{\"mode\":\"any\",\"mode\":\"any\",\"rays\":[],\"boxes\":[]}",
              &r);
    expect_problem(&r, 422, "/mode", "duplicated key");
    rbt_resp_free(&r);
    post_json("/v1/intersect", "{\"rays\":[[\"0\",0,0,1,0,0]],\"boxes\":[]}",
              &r);
    expect_problem(&r, 422, "/rays/0/0", "string for a number");
    rbt_resp_free(&r);
    post_json("/v1/intersect", "{\"rays\":{},\"boxes\":[]}", &r);
    expect_problem(&r, 422, "/rays", "object for an array");
    rbt_resp_free(&r);
    post_json("/v1/intersect", "{\"rays\":[[NaN,0,0,1,0,0]],\"boxes\":[]}",
              &r);
    expect_problem(&r, 400, "/rays/0/0", "NaN literal");
    rbt_resp_free(&r);
    /* No ray at all: max_hits is not limited by --max-results then, and
     * must not size an allocation (found by fuzz_binary_request). */
    post_json("/v1/intersect", "{\"mode\":\"all\",\"max_hits\":4000000000,"
              "\"rays\":[],\"boxes\":[[0,0,0,1,1,1]]}", &r);
    ck_assert_msg(r.status == 200, "%s", r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "\"count\":0,\"hits\":[],"
                                         "\"total\":[],\"truncated\":[]"));
    rbt_resp_free(&r);
}
END_TEST

/* X-Request-Id is echoed (or made), and each request has a log line. */
START_TEST(test_request_id_and_log)
{
    static const char *const id[] = {"X-Request-Id: test-id-4711", NULL};
    static const char *const bad_id[] = {"X-Request-Id: has spaces\"q", NULL};
    rbt_resp r;
    char h[128];
    const char *body = "{\"rays\":[[0,0,0,1,0,0],[0,0,0,0,1,0],[0,9,0,1,0,0]],"
                       "\"boxes\":[[1,-1,-1,2,1,1],[3,-1,-1,4,1,1]]}";
    rbt_http(NULL, "POST", U("/v1/intersect"), JSON, body, strlen(body), NULL,
             id, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(rbt_header(&r, "X-Request-Id", h, sizeof h),
                     "test-id-4711");
    rbt_resp_free(&r);
    rbt_http(NULL, "GET", U("/v1/health"), NULL, NULL, 0, NULL, bad_id, &r);
    ck_assert_ptr_nonnull(rbt_header(&r, "X-Request-Id", h, sizeof h));
    ck_assert_uint_eq(strlen(h), 16);
    rbt_resp_free(&r);

    /* The log line comes when the request completes: wait for it. */
    char *line = NULL;
    for (int tries = 0; tries < 2000 && !line; tries++) {
        char *log = rbt_server_log(&srv);
        char *at = log ? strstr(log, "\"request_id\":\"test-id-4711\"") : NULL;
        if (at) {
            char *start = at;
            while (start > log && start[-1] != '\n')
                start--;
            size_t n = strcspn(start, "\n");
            line = strndup(start, n);
        }
        free(log);
        if (!line)
            nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    ck_assert_ptr_nonnull(line);
    static const char *const fields[] = {
        "\"msg\":\"request\"", "\"route\":\"/v1/intersect\"",
        "\"status\":200", "\"rays\":3", "\"boxes\":2", "\"queue_ms\":",
        "\"run_ms\":", "\"duration_ms\":", "\"method\":\"POST\""};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        ck_assert_msg(strstr(line, fields[i]), "log line lacks %s: %s",
                      fields[i], line);
    ck_assert_msg(line[0] == '{' && line[strlen(line) - 1] == '}', "%s",
                  line);
    free(line);
}
END_TEST

/* Every path and method of docs/openapi.yaml answers (not 404 or 405). */
START_TEST(test_openapi_paths)
{
    char *spec = rbt_read_file(RAYBOX_SOURCE_DIR "/docs/openapi.yaml", NULL);
    ck_assert_ptr_nonnull(spec);
    const char *p = strstr(spec, "\npaths:\n");
    ck_assert_ptr_nonnull(p);
    p += 8;
    char path[128] = "";
    int checked = 0;
    while (*p && !(p[0] != ' ' && p[0] != '\n')) {
        size_t n = strcspn(p, "\n");
        if (n > 3 && p[0] == ' ' && p[1] == ' ' && p[2] == '/') {
            snprintf(path, sizeof path, "%.*s", (int)(n - 3), p + 2);
        } else if (n > 5 && strncmp(p, "    ", 4) == 0 && p[4] != ' ' &&
                   path[0]) {
            char method[16];
            snprintf(method, sizeof method, "%.*s", (int)strcspn(p + 4, ":"),
                     p + 4);
            static const char *const verbs[] = {"get", "head", "post",
                                                "patch", "delete"};
            int verb = -1;
            for (int v = 0; v < 5; v++)
                if (strcmp(method, verbs[v]) == 0)
                    verb = v;
            if (verb >= 0) {
                /* A scene for each use of {id}, so DELETE is harmless. */
                char real[256], id[160] = "";
                const char *brace = strstr(path, "{id}");
                if (brace) {
                    rbt_query q;
                    rbt_rng rng = {1};
                    rbt_query_random(&q, &rng, RB_MODE_NEAREST, 3, 1, 3, 0, 0);
                    create_scene(&q, 0, id);
                    rbt_query_free(&q);
                    snprintf(real, sizeof real, "%.*s%s%s",
                             (int)(brace - path), path, id, brace + 4);
                } else {
                    snprintf(real, sizeof real, "%s", path);
                }
                const char *body = NULL;
                if (verb == 2)
                    body = strcmp(path, "/v1/scenes") == 0
                               ? "{\"boxes\":[[0,0,0,1,1,1]]}"
                           : strstr(path, "/visibility")
                               ? "{\"observers\":[[0,0,0]],"
                                 "\"targets\":[[1,1,1]]}"
                           : strstr(path, "/render")
                               ? "{\"camera\":{\"view\":[1,0,0,0,0,1,0,"
                                 "0,0,0,1,0,0,0,0,1],\"projection\":[1,0,"
                                 "0,0,0,1,0,0,0,0,1,0,0,0,0,1],"
                                 "\"viewport\":[0,0,2,2]}}"
                           : brace ? "{\"rays\":[[0,0,0,1,0,0]]}"
                                   : "{\"rays\":[[0,0,0,1,0,0]],"
                                     "\"boxes\":[[1,-1,-1,2,1,1]]}";
                if (verb == 3)
                    body = "{\"append\":[[0,0,0,1,1,1]]}";
                const char *const M[] = {"GET", "HEAD", "POST", "PATCH",
                                         "DELETE"};
                rbt_resp r;
                rbt_http(NULL, M[verb], U(real), body ? JSON : NULL, body,
                         body ? strlen(body) : 0, NULL, NULL, &r);
                ck_assert_msg(r.status >= 200 && r.status < 300,
                              "%s %s (documented): %ld %s", M[verb], real,
                              r.status, r.body);
                rbt_resp_free(&r);
                if (brace && verb != 4) {
                    snprintf(real, sizeof real, "/v1/scenes/%s", id);
                    rbt_http(NULL, "DELETE", U(real), NULL, NULL, 0, NULL,
                             NULL, &r);
                    rbt_resp_free(&r);
                }
                checked++;
            }
        }
        p += n + (p[n] == '\n');
    }
    free(spec);
    ck_assert_msg(checked >= 10, "only %d documented operations found",
                  checked);
}
END_TEST

/* docs/http.md holds the option table exactly as rayboxd --help-markdown
 * writes it (the one table in server/config.h is the source). */
START_TEST(test_docs_option_table)
{
    char cmd[512], out[] = "/tmp/rayboxd-options-XXXXXX";
    int fd = mkstemp(out);
    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s' --help-markdown >'%s'", RAYBOXD, out);
    ck_assert_int_eq(system(cmd), 0);
    char *table = rbt_read_file(out, NULL);
    char *doc = rbt_read_file(RAYBOX_SOURCE_DIR "/docs/http.md", NULL);
    ck_assert_ptr_nonnull(table);
    ck_assert_ptr_nonnull(doc);
    ck_assert_msg(strstr(doc, "| `--bind TEXT`"), "no table in docs/http.md");
    ck_assert_msg(strstr(doc, table), "docs/http.md has an old option table; "
                  "paste `rayboxd --help-markdown`");
    /* --help comes from the same table. */
    snprintf(cmd, sizeof cmd, "'%s' --help >'%s'", RAYBOXD, out);
    ck_assert_int_eq(system(cmd), 0);
    char *help = rbt_read_file(out, NULL);
    ck_assert_ptr_nonnull(strstr(help, "--max-scene-bytes N"));
    ck_assert_ptr_nonnull(strstr(help, "RAYBOX_QUEUE_DEPTH"));
    free(help);
    free(table);
    free(doc);
    unlink(out);
}
END_TEST

/* A second rayboxd on a port in use stops at once with status 1 and says
 * why; the first goes on serving. */
START_TEST(test_port_in_use)
{
    rbt_server s;
    rbt_server_start(&s, NULL);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' --port %d --backend cpu 2>&1", RAYBOXD,
             s.port);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s",
                  st, out);
    char want[128];
    snprintf(want, sizeof want, "cannot listen on 127.0.0.1 port %d: "
             "Address already in use", s.port);
    ck_assert_msg(strstr(out, want), "no '%s' in: %s", want, out);

    rbt_resp r;
    rbt_get(NULL, &s, "/v1/health", &r);
    ck_assert_int_eq(r.status, 200);
    rbt_resp_free(&r);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* cmd's exit status, its stdout and stderr together in out. */
static int run_capture(const char *cmd, char *out, size_t cap)
{
    char full[1024];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* rayboxd --healthcheck [URL] (the image's HEALTHCHECK): 0 with health's
 * answer on a 200 from the suite's server, with the URL given and from
 * RAYBOX_PORT; 1, saying why, on another status, a closed port, https
 * and a host name that is not an address. */
START_TEST(test_healthcheck_mode)
{
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "'%s' --healthcheck '%s/v1/health'", RAYBOXD,
             srv.base);
    ck_assert_int_eq(run_capture(cmd, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "HTTP/1.1 200") &&
                  strstr(out, "\"status\":\"ok\""), "%s", out);
    snprintf(cmd, sizeof cmd, "RAYBOX_PORT=%d '%s' --healthcheck", srv.port,
             RAYBOXD);
    ck_assert_msg(run_capture(cmd, out, sizeof out) == 0, "%s", out);

    snprintf(cmd, sizeof cmd, "'%s' --healthcheck http://localhost:%d/v1/nope",
             RAYBOXD, srv.port);
    ck_assert_int_eq(run_capture(cmd, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "404 Not Found"), "%s", out);

    /* A port that was free a moment ago: nothing listens there. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s' --healthcheck http://127.0.0.1:%u/v1/health",
             RAYBOXD, (unsigned)ntohs(a.sin_port));
    ck_assert_int_eq(run_capture(cmd, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "connect: Connection refused"), "%s", out);

    snprintf(cmd, sizeof cmd, "'%s' --healthcheck https://127.0.0.1:%d/",
             RAYBOXD, srv.port);
    ck_assert_int_eq(run_capture(cmd, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "https is not supported"), "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' --healthcheck http://raybox:%d/",
             RAYBOXD, srv.port);
    ck_assert_int_eq(run_capture(cmd, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "host 'raybox' is not an IPv4"), "%s", out);
}
END_TEST

/* --poll picks libmicrohttpd's poll loop (the first log line says which
 * loop runs), and queries, which suspend and resume their connection,
 * are answered in both. Flags, so that the RAYBOX_POLL=1 rerun of this
 * suite checks the same. */
START_TEST(test_event_loop)
{
    static const char *const epoll_args[] = {"--poll=false", NULL};
    static const char *const poll_args[] = {"--poll", NULL};
    for (int k = 0; k < 2; k++) {
        rbt_server s;
        rbt_server_start(&s, k ? poll_args : epoll_args);
        char *log = rbt_server_log(&s);
        ck_assert_ptr_nonnull(log);
        ck_assert_msg(strstr(log, k ? "\"event_loop\":\"poll\""
                                    : "\"event_loop\":\"epoll\""),
                      "%s", log);
        free(log);
        char u[256];
        snprintf(u, sizeof u, "%s/v1/intersect", s.base);
        for (int i = 0; i < 20; i++) {
            rbt_resp r;
            const char *q = "{\"rays\":[[0,0,0,1,0,0]],"
                            "\"boxes\":[[1,-1,-1,2,1,1]]}";
            rbt_http(NULL, "POST", u, JSON, q, strlen(q), NULL, NULL, &r);
            ck_assert_int_eq(r.status, 200);
            ck_assert_ptr_nonnull(strstr(r.body, "\"t_enter\":[1.0]"));
            rbt_resp_free(&r);
        }
        ck_assert_int_eq(rbt_server_stop(&s), 0);
        unlink(s.log_path);
    }
}
END_TEST

/* Options: flags beat the environment, which beats the default; bad
 * values stop the server with exit status 2 and a message. */
START_TEST(test_config_sources)
{
    static const char *const bad[] = {
        "--port 70000", "--backend gpu", "--nope", "--queue-depth 0",
        "--max-body-bytes 12X", "--quiet=maybe", "--bind not-an-address"};
    static const int status[] = {2, 2, 2, 2, 2, 2, 1};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", RAYBOXD, bad[i]);
        int st = system(cmd);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == status[i],
                      "%s: status %d", bad[i], WEXITSTATUS(st));
    }
    setenv("RAYBOX_PORT", "70000", 1);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' 2>/dev/null", RAYBOXD);
    int st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    unsetenv("RAYBOX_PORT");

    /* --bind localhost is 127.0.0.1 (no other name is resolved). */
    static const char *const local[] = {"--bind", "localhost", NULL};
    rbt_server ls;
    rbt_server_start(&ls, local);
    rbt_resp lr;
    rbt_get(NULL, &ls, "/v1/health", &lr);
    ck_assert_int_eq(lr.status, 200);
    rbt_resp_free(&lr);
    ck_assert_int_eq(rbt_server_stop(&ls), 0);
    unlink(ls.log_path);

    static const char *const with_flag[] = {"--queue-depth", "9", NULL};
    for (int k = 0; k < 2; k++) {
        setenv("RAYBOX_QUEUE_DEPTH", "7", 1);
        rbt_server s;
        rbt_server_start(&s, k ? with_flag : NULL);
        unsetenv("RAYBOX_QUEUE_DEPTH");
        rbt_resp r;
        rbt_get(NULL, &s, "/v1/health", &r);
        ck_assert_ptr_nonnull(strstr(r.body, k ? "\"queue_capacity\":9"
                                               : "\"queue_capacity\":7"));
        rbt_resp_free(&r);
        ck_assert_int_eq(rbt_server_stop(&s), 0);
        unlink(s.log_path);
    }
}
END_TEST

/* --buffer-cache: the arrays of a large binary request (1 MiB and more)
 * are kept after it, shown by raybox_buffer_cache_bytes, and the next
 * requests, which reuse them uninitialised, still get exact answers; with
 * --buffer-cache 0 nothing is kept. */
START_TEST(test_buffer_cache)
{
    rbt_rng rng = {77};
    rbt_query q;
    /* 70000 rays: 2.24 MB of rb_ray and 1.12 MB of rb_hit. */
    enum { N = 70000 };
    rbt_query_random(&q, &rng, RB_MODE_NEAREST, 3, N, 64, 0, 0);
    rbt_expect e;
    rbt_expect_run(ctx, &q, NULL, 0, &e);
    size_t blen;
    void *bin = rbt_query_binary(&q, 1, &blen);
    static const char *const kept[] = {"--max-rays", "100000",
                                       "--buffer-cache", "64M", NULL};
    static const char *const none[] = {"--max-rays", "100000",
                                       "--buffer-cache", "0", NULL};
    for (int k = 0; k < 2; k++) {
        rbt_server s;
        rbt_server_start(&s, k ? none : kept);
        char u[256], m[256];
        snprintf(u, sizeof u, "%s/v1/intersect", s.base);
        snprintf(m, sizeof m, "%s/metrics", s.base);
        for (int round = 0; round < 3; round++) {
            rbt_resp r;
            rbt_http(NULL, "POST", u, BIN, bin, blen, BIN, NULL, &r);
            ck_assert_int_eq(r.status, 200);
            char why[256];
            ck_assert_msg(!rbt_check_binary(&e, r.body, r.len, why,
                                            sizeof why),
                          "round %d: %s", round, why);
            rbt_resp_free(&r);
            /* The request's arrays are freed when libmicrohttpd reports it
             * complete, which may come just after the answer arrived. */
            double per_ray = (double)(sizeof(rb_ray) + sizeof(rb_hit));
            double held = 0, want = k ? 0 : N * per_ray;
            for (int tries = 0; tries < 300; tries++) {
                rbt_http(NULL, "GET", m, NULL, NULL, 0, NULL, NULL, &r);
                held = rbt_metric(r.body, "raybox_buffer_cache_bytes");
                rbt_resp_free(&r);
                if (k || held >= want)
                    break;
                nanosleep(&(struct timespec){0, 10000000}, NULL);
            }
            if (k)
                ck_assert_msg(held == 0, "--buffer-cache 0 kept %.0f", held);
            else
                ck_assert_msg(held >= want, "kept %.0f of %.0f", held, want);
        }
        ck_assert_int_eq(rbt_server_stop(&s), 0);
        unlink(s.log_path);
    }
    free(bin);
    rbt_expect_free(&e);
    rbt_query_free(&q);
}
END_TEST

/* The example client (scripts/raybox_client.py) sends binary requests
 * and its decoded answers agree with the JSON ones, every mode. */
START_TEST(test_python_client)
{
    ck_assert_msg(system("python3 -c 'import struct, http.client' "
                         ">/dev/null 2>&1") == 0,
                  "python3 is needed (make deps installs it)");
    char dir[] = "/tmp/raybox-client-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    rbt_rng rng = {31};
    for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
        rbt_query q;
        rbt_query_random(&q, &rng, (rb_mode)mode, 3, 20, 15, mode & 1,
                         mode == RB_MODE_ALL ? 2 : 0);
        size_t len;
        char *body = rbt_query_json(&q, 1, &len);
        char path[128], cmd[512];
        snprintf(path, sizeof path, "%s/req.json", dir);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fwrite(body, 1, len, f);
        fclose(f);
        snprintf(cmd, sizeof cmd,
                 "python3 '%s/scripts/raybox_client.py' --url %s --compare "
                 "'%s' >/dev/null 2>'%s/err'",
                 RAYBOX_SOURCE_DIR, srv.base, path, dir);
        int st = system(cmd);
        snprintf(path, sizeof path, "%s/err", dir);
        char *err = rbt_read_file(path, NULL);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: %s",
                      rb_mode_name(mode), err ? err : "");
        ck_assert_ptr_nonnull(strstr(err, "agree"));
        free(err);
        unlink(path);
        snprintf(path, sizeof path, "%s/req.json", dir);
        unlink(path);
        free(body);
        rbt_query_free(&q);
    }
    rmdir(dir);
}
END_TEST

/* The store's limits: 507, and nothing changes. */
START_TEST(test_store_full_507)
{
    static const char *const args[] = {"--max-scenes", "2",
                                        "--max-scene-bytes", "4096", NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    char u[256], id[64] = "";
    rbt_resp r;
    const char *small = "{\"boxes\":[[0,0,0,1,1,1]]}";
    /* 300 boxes: about 7 KiB, over the byte limit alone. */
    char *big = malloc(300 * 20 + 64);
    size_t k = (size_t)sprintf(big, "{\"boxes\":[");
    for (int i = 0; i < 300; i++)
        k += (size_t)sprintf(big + k, "%s[0,0,0,1,1,1]", i ? "," : "");
    sprintf(big + k, "]}");
    snprintf(u, sizeof u, "%s/v1/scenes", s.base);
    rbt_http(NULL, "POST", u, JSON, big, strlen(big), NULL, NULL, &r);
    expect_problem(&r, 507, NULL, "scene over the byte limit");
    ck_assert_ptr_nonnull(strstr(r.body, "max-scene-bytes"));
    rbt_resp_free(&r);
    for (int i = 0; i < 3; i++) {
        rbt_http(NULL, "POST", u, JSON, small, strlen(small), NULL, NULL, &r);
        if (i < 2) {
            ck_assert_int_eq(r.status, 201);
            if (!id[0]) /* up to the closing quote, whatever the id form */
                sscanf(strstr(r.body, "\"id\":\"") + 6, "%63[^\"]", id);
        } else {
            expect_problem(&r, 507, NULL, "third scene");
            ck_assert_ptr_nonnull(strstr(r.body, "max-scenes"));
        }
        rbt_resp_free(&r);
    }
    /* A PATCH that would pass the byte limit: refused, version kept. */
    char *patch_body = malloc(strlen(big) + 16);
    sprintf(patch_body, "{\"append\":%s", strchr(big, '['));
    snprintf(u, sizeof u, "%s/v1/scenes/%s", s.base, id);
    rbt_http(NULL, "PATCH", u, JSON, patch_body, strlen(patch_body), NULL,
             NULL, &r);
    expect_problem(&r, 507, NULL, "PATCH over the byte limit");
    rbt_resp_free(&r);
    rbt_http(NULL, "GET", u, NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_ptr_nonnull(strstr(r.body, "\"boxes\":1,\"version\":1"));
    rbt_resp_free(&r);
    /* Room again after a DELETE. */
    rbt_http(NULL, "DELETE", u, NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 204);
    rbt_resp_free(&r);
    snprintf(u, sizeof u, "%s/v1/scenes", s.base);
    rbt_http(NULL, "POST", u, JSON, small, strlen(small), NULL, NULL, &r);
    ck_assert_int_eq(r.status, 201);
    rbt_resp_free(&r);
    free(big);
    free(patch_body);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
    unlink(s.log_path);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("server");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_health_devices_metrics);
    tcase_add_loop_test(tc, test_modes_json_and_binary, 0, 2);
    tcase_add_test(tc, test_same_as_cli);
    tcase_add_test(tc, test_scenes);
    tcase_add_test(tc, test_bvh_build_option);
    tcase_add_test(tc, test_error_statuses);
    tcase_add_test(tc, test_binary_errors);
    tcase_add_test(tc, test_lengths);
    tcase_add_test(tc, test_odd_json);
    tcase_add_test(tc, test_request_id_and_log);
    tcase_add_test(tc, test_openapi_paths);
    tcase_add_test(tc, test_docs_option_table);
    tcase_add_test(tc, test_event_loop);
    tcase_add_test(tc, test_config_sources);
    tcase_add_test(tc, test_port_in_use);
    tcase_add_test(tc, test_healthcheck_mode);
    tcase_add_test(tc, test_buffer_cache);
    tcase_add_test(tc, test_python_client);
    tcase_add_test(tc, test_store_full_507);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
