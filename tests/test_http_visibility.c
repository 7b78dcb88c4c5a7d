/* test_http_visibility.c - POST /v1/scenes/{id}/visibility through a real
 * rayboxd: the JSON lists and the binary bit matrix equal rb_visibility
 * in this process (a city with more pairs than one tile, a scene of every
 * kind, a margin range, no targets; test_visibility checks OpenCL);
 * then the refusals, each with its pointer: a coordinate that is not a
 * number, an observer of 2 numbers, a direction that overflows, missing
 * members, tmin > tmax, a 2D scene, an unknown scene, a binary body, an
 * Accept it cannot meet, and the limits (--max-observers,
 * --max-visibility-bytes, --max-results for JSON) before any work. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_util.h"
#include "testutil.h"

static rbt_server srv;
static rb_context *oracle;

static char *create_scene(const char *body)
{
    char url[128];
    snprintf(url, sizeof url, "%s/v1/scenes", srv.base);
    rbt_resp r;
    rbt_http(NULL, "POST", url, "application/json", body, strlen(body),
             NULL, NULL, &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    const char *id = strstr(r.body, "\"id\":\"");
    ck_assert_ptr_nonnull(id);
    char *out = strndup(id + 6, 32);
    rbt_resp_free(&r);
    return out;
}

static void post_vis(const char *id, const char *body, const char *accept,
                     rbt_resp *r)
{
    char url[160];
    snprintf(url, sizeof url, "%s/v1/scenes/%s/visibility", srv.base, id);
    rbt_http(NULL, "POST", url, "application/json", body, strlen(body),
             accept, NULL, r);
}

/* Points as a JSON list, written with %.9g (float32 round trips). */
static size_t put_points(char *out, const float *p, size_t n)
{
    size_t at = (size_t)sprintf(out, "[");
    for (size_t i = 0; i < n; i++)
        at += (size_t)sprintf(out + at, "%s[%.9g,%.9g,%.9g]", i ? "," : "",
                              p[3 * i], p[3 * i + 1], p[3 * i + 2]);
    at += (size_t)sprintf(out + at, "]");
    return at;
}

/* The server's JSON and binary answers against rb_visibility of the same
 * scene (made here from the same elements). */
static void check_against_library(const char *id, const rb_scene *scene,
                                  const float *obs, size_t n,
                                  const float *tgt, size_t m, float tmin,
                                  float tmax, int ranged)
{
    char *body = malloc(64 * (n + m) + 256);
    size_t at = (size_t)sprintf(body, "{\"observers\":");
    at += put_points(body + at, obs, n);
    at += (size_t)sprintf(body + at, ",\"targets\":");
    at += put_points(body + at, tgt, m);
    if (ranged)
        at += (size_t)sprintf(body + at, ",\"tmin\":%.9g,\"tmax\":%.9g", tmin,
                              tmax);
    sprintf(body + at, "}");

    size_t bytes = (size_t)rb_visibility_bytes(n, m), stride = (m + 7) / 8;
    uint8_t *want = malloc(bytes + 1);
    rb_visibility_query q = {.scene = scene, .observers = obs,
                             .n_observers = n, .targets = tgt,
                             .n_targets = m, .tmin = tmin, .tmax = tmax};
    uint64_t visible;
    ck_assert_int_eq(rb_visibility(oracle, &q, want, bytes, &visible, NULL),
                     RB_OK);

    rbt_resp r;
    post_vis(id, body, "application/x-raybox", &r);
    ck_assert_msg(r.status == 200, "binary: %ld %.300s", r.status, r.body);
    ck_assert_uint_eq(r.len, 64 + bytes);
    uint64_t hn, hm;
    memcpy(&hn, r.body + 16, 8);
    memcpy(&hm, r.body + 24, 8);
    ck_assert_int_eq((unsigned char)r.body[8], 130);
    ck_assert_uint_eq(hn, n);
    ck_assert_uint_eq(hm, m);
    ck_assert_msg(memcmp(r.body + 64, want, bytes) == 0,
                  "binary bits differ from rb_visibility");
    rbt_resp_free(&r);

    /* JSON: the same bits as lists. */
    char *lists = malloc(16 * n * m + 64 * n + 256);
    at = (size_t)sprintf(lists, "{\"observers\":%zu,\"targets\":%zu,"
                                "\"visible\":[", n, m);
    for (size_t i = 0; i < n; i++) {
        at += (size_t)sprintf(lists + at, i ? ",[" : "[");
        int first = 1;
        for (size_t j = 0; j < m; j++)
            if (want[i * stride + j / 8] >> (j % 8) & 1) {
                at += (size_t)sprintf(lists + at, first ? "%zu" : ",%zu", j);
                first = 0;
            }
        at += (size_t)sprintf(lists + at, "]");
    }
    sprintf(lists + at, "]");
    post_vis(id, body, NULL, &r);
    ck_assert_msg(r.status == 200, "json: %ld %.300s", r.status, r.body);
    ck_assert_msg(strncmp(r.body, lists, strlen(lists)) == 0,
                  "json lists differ:\n got %.300s\nwant %.300s", r.body,
                  lists);
    rbt_resp_free(&r);
    free(lists);
    free(want);
    free(body);
}

static void setup(void)
{
    const char *const args[] = {"--quiet", "--max-observers", "5000",
                                "--max-visibility-bytes", "1M", NULL};
    rbt_fixture_start(&srv, args, &oracle);
}

static void teardown(void)
{
    rbt_fixture_stop(&srv, oracle);
}

START_TEST(test_city_matches_library)
{
    enum { G = 20, N = 700, M = 400 }; /* 280,000 pairs: two tiles */
    rb_box *boxes = malloc(G * G * sizeof *boxes);
    rbt_rng g = {42};
    char *body = malloc(G * G * 80 + 64);
    size_t at = (size_t)sprintf(body, "{\"boxes\":[");
    for (int i = 0; i < G * G; i++) {
        float x = (float)(i % G), y = (float)(i / G);
        boxes[i] = (rb_box){{x, y, 0}, {x + 0.8f, y + 0.8f,
                                        rbt_uniform(&g, 0.5f, 4)}};
        at += (size_t)sprintf(body + at, "%s[%.9g,%.9g,0,%.9g,%.9g,%.9g]",
                              i ? "," : "", x, y, x + 0.8f, y + 0.8f,
                              boxes[i].max[2]);
    }
    sprintf(body + at, "]}");
    char *id = create_scene(body);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(oracle, 3, boxes, G * G, &scene), RB_OK);
    float *pts = malloc(3 * (N + M) * sizeof *pts);
    for (int i = 0; i < N + M; i++) {
        pts[3 * i] = (float)rbt_below(&g, G) + 0.9f;
        pts[3 * i + 1] = rbt_uniform(&g, 0, G);
        pts[3 * i + 2] = rbt_uniform(&g, 0.1f, 2);
    }
    check_against_library(id, scene, pts, N, pts + 3 * N, M, 0, 1, 0);
    check_against_library(id, scene, pts, 30, pts + 3 * N, 20, 1e-4f,
                          0.9999f, 1);
    check_against_library(id, scene, pts, 3, pts, 0, 0, 1, 0);
    rb_scene_destroy(scene);
    free(id);
    free(pts);
    free(body);
    free(boxes);
}
END_TEST

START_TEST(test_every_kind_matches_library)
{
    const char *body =
        "{\"boxes\":[[0,0,0,1,1,1]],\"obbs\":[[3.5,0.5,0.5,0.5,0.4,0.4,"
        "1,0,0,0,0.8,0.6,0,-0.6,0.8]],\"spheres\":[[6.5,0.5,0.5,0.45]],"
        "\"xboxes\":[[0,0,0,1,1,1,1,0,0,9,0,1,0,0,0,0,1,0]],"
        "\"planes\":[[0,0,1,-5]]}";
    char *id = create_scene(body);
    rb_box box = {{0, 0, 0}, {1, 1, 1}};
    rb_obb obb = {{3.5f, 0.5f, 0.5f}, {0.5f, 0.4f, 0.4f},
                  {{1, 0, 0}, {0, 0.8f, 0.6f}, {0, -0.6f, 0.8f}}};
    rb_sphere sph = {{6.5f, 0.5f, 0.5f}, 0.45f};
    rb_xbox xb = {{0, 0, 0}, {1, 1, 1}, {{1, 0, 0, 9}, {0, 1, 0, 0},
                                         {0, 0, 1, 0}}};
    rb_plane pl = {{0, 0, 1}, -5};
    rb_shapes sh = {.obbs = &obb, .n_obbs = 1, .xboxes = &xb, .n_xboxes = 1,
                    .spheres = &sph, .n_spheres = 1, .planes = &pl,
                    .n_planes = 1};
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(oracle, 3, &box, 1, &sh, &scene),
                     RB_OK);
    rbt_rng g = {3};
    float pts[3 * 40];
    for (int i = 0; i < 40; i++) {
        pts[3 * i] = rbt_uniform(&g, -1, 11);
        pts[3 * i + 1] = rbt_uniform(&g, -1, 2);
        pts[3 * i + 2] = rbt_uniform(&g, -6, 2);
    }
    check_against_library(id, scene, pts, 25, pts + 75, 15, 0, 1, 0);
    rb_scene_destroy(scene);
    free(id);
}
END_TEST

static void expect_problem(const char *id, const char *body,
                           const char *accept, long status,
                           const char *pointer, const char *text)
{
    rbt_resp r;
    post_vis(id, body, accept, &r);
    ck_assert_msg(r.status == status, "%s: %ld %s", body, r.status, r.body);
    if (pointer) {
        char want[96];
        snprintf(want, sizeof want, "\"pointer\":\"%s\"", pointer);
        ck_assert_msg(strstr(r.body, want), "%s: %s", body, r.body);
    }
    ck_assert_msg(strstr(r.body, text), "%s: '%s' not in %s", body, text,
                  r.body);
    rbt_resp_free(&r);
}

START_TEST(test_refusals)
{
    char *id = create_scene("{\"boxes\":[[0,0,0,1,1,1]]}");
    const char *t = ",\"targets\":[[2,0.5,0.5]]}";
    char b[256];
    snprintf(b, sizeof b, "{\"observers\":[[0,0,0],[1,\"x\",0]]%s", t);
    expect_problem(id, b, NULL, 422, "/observers/1/1", "expected a number");
    snprintf(b, sizeof b, "{\"observers\":[[0,0]]%s", t);
    expect_problem(id, b, NULL, 422, "/observers/0",
                   "an observer has 3 numbers");
    expect_problem(id, "{\"observers\":[[3e38,0,0]],\"targets\":"
                       "[[0,0,0],[-3e38,0,0]]}",
                   NULL, 422, "/targets/1", "overflows float32");
    expect_problem(id, "{\"targets\":[]}", NULL, 422, "",
                   "missing \\\"observers\\\"");
    snprintf(b, sizeof b, "{\"observers\":[],\"tmin\":2%s", t);
    expect_problem(id, b, NULL, 422, "/tmin", "tmin (2.0) > tmax (1.0)");
    snprintf(b, sizeof b, "{\"observers\":[],\"rays\":[]%s", t);
    expect_problem(id, b, NULL, 422, "/rays", "this body takes");
    expect_problem("0123456789abcdef0123456789abcdef",
                   "{\"observers\":[],\"targets\":[]}", NULL, 404, NULL,
                   "no scene");
    expect_problem(id, "{\"observers\":[],\"targets\":[]}", "text/html", 406,
                   NULL, "Accept");
    char *flat = create_scene("{\"dims\":2,\"boxes\":[[0,0,1,1]]}");
    expect_problem(flat, "{\"observers\":[],\"targets\":[]}", NULL, 422,
                   NULL, "3D scene");
    /* Limits, from the counts, before any work. */
    char *big = malloc(8001 * 12 + 200);
    size_t at = (size_t)sprintf(big, "{\"observers\":[");
    for (int i = 0; i <= 5000; i++)
        at += (size_t)sprintf(big + at, "%s[0,0,0]", i ? "," : "");
    sprintf(big + at, "],\"targets\":[]}");
    expect_problem(id, big, NULL, 413, "/observers/5000",
                   "more than 5000 observers");
    /* 4000 x 4000 pairs: 2 MB of bits over --max-visibility-bytes 1M */
    at = (size_t)sprintf(big, "{\"observers\":[");
    for (int i = 0; i < 4000; i++)
        at += (size_t)sprintf(big + at, "%s[0,0,0]", i ? "," : "");
    at += (size_t)sprintf(big + at, "],\"targets\":[");
    for (int i = 0; i < 4000; i++)
        at += (size_t)sprintf(big + at, "%s[0,0,0]", i ? "," : "");
    sprintf(big + at, "]}");
    expect_problem(id, big, "application/x-raybox", 413, "/targets",
                   "--max-visibility-bytes");
    free(big);
    free(flat);
    free(id);
}
END_TEST

START_TEST(test_binary_body_refused)
{
    char *id = create_scene("{\"boxes\":[[0,0,0,1,1,1]]}");
    char url[160];
    snprintf(url, sizeof url, "%s/v1/scenes/%s/visibility", srv.base, id);
    rbt_resp r;
    rbt_http(NULL, "POST", url, "application/x-raybox", "RBOX", 4, NULL,
             NULL, &r);
    ck_assert_msg(r.status == 415 && strstr(r.body, "JSON only"), "%ld %s",
                  r.status, r.body);
    rbt_resp_free(&r);
    free(id);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_visibility");
    TCase *tc = tcase_create("http_visibility");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_city_matches_library);
    tcase_add_test(tc, test_every_kind_matches_library);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_binary_body_refused);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
