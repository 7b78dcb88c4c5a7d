/* test_visibility.c - rb_visibility (SPEC section 9) against `any` over
 * the explicit segments, bit for bit: the segments are built here, on
 * their own, and answered by a brute-force CPU context (hierarchy off);
 * rb_visibility runs on the CPU backend with its hierarchies and on
 * OpenCL with the segments made on the device (kernels/visibility.cl, by
 * brute force and through the hierarchy, checked to have run) and
 * explicit (RAYBOX_CL_VISIBILITY=segments), over the hierarchy suites'
 * scene shapes, a city, a scene of every kind (explicit segments), an
 * empty one, more pairs than one tile holds, a margin range, subnormal
 * and huge points. Then the errors on both backends: points that are not
 * finite (named), a direction that overflows, a bit matrix too small, a
 * 2D scene, a stopped query; and an OpenCL failure at every call of the
 * device path. tests/CMakeLists.txt runs it again with the walk's short
 * stack (wide and tiled kernels). */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opencl/cl_testhook.h"
#include "scenes.h"
#include "testutil.h"

/* Explicit segments of every pair, answered by `ref`: the expected bits. */
static uint8_t *expected_bits(rb_context *ref, const rb_scene *scene,
                              const float *obs, size_t n, const float *tgt,
                              size_t m, float tmin, float tmax,
                              uint64_t *visible)
{
    size_t pairs = n * m, stride = (m + 7) / 8;
    rb_ray *rays = malloc((pairs ? pairs : 1) * sizeof *rays);
    uint8_t *any = malloc(pairs ? pairs : 1);
    uint8_t *bits = calloc(n * stride + 1, 1);
    ck_assert(rays && any && bits);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++) {
            rb_ray *r = &rays[i * m + j];
            for (int a = 0; a < 3; a++) {
                r->origin[a] = obs[3 * i + a];
                r->dir[a] = tgt[3 * j + a] - obs[3 * i + a];
            }
            r->tmin = tmin;
            r->tmax = tmax;
        }
    rb_query q = {.mode = RB_MODE_ANY, .dims = 3, .rays = rays,
                  .n_rays = pairs, .scene = scene};
    rb_results res = {.any = any, .capacity = pairs};
    ck_assert_int_eq(rb_intersect(ref, &q, &res), RB_OK);
    *visible = 0;
    for (size_t k = 0; k < pairs; k++)
        if (!any[k]) {
            bits[(k / m) * stride + (k % m) / 8] |= (uint8_t)(1u << (k % m % 8));
            ++*visible;
        }
    free(rays);
    free(any);
    return bits;
}

/* Points over the bounds and a little beyond, kept within +-1e38 so that
 * no target - observer overflows (that error has its own test). */
static void random_points(rbt_rng *g, float *p, size_t n, const float lo[3],
                          const float hi[3])
{
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            float c = lo[a] / 2 + hi[a] / 2, h = hi[a] / 2 - lo[a] / 2;
            float v = c + 1.2f * h * rbt_uniform(g, -1, 1) +
                      rbt_uniform(g, -0.1f, 0.1f);
            p[3 * i + a] = fmaxf(-1e38f, fminf(1e38f, v));
        }
}

static rb_context *brute_cpu(void)
{
    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_CPU;
    o.hierarchy = RB_HIERARCHY_OFF;
    return rbt_context_opts(RBT_CPU, &o);
}

/* An OpenCL context with the given hierarchy setting (NULL when OpenCL is
 * absent on purpose); segments = 1 builds it with
 * RAYBOX_CL_VISIBILITY=segments (the explicit segments, for comparison). */
static rb_context *opencl(int hierarchy, int segments)
{
    rb_context_options o;
    rb_context_options_init(&o);
    o.hierarchy = hierarchy;
    if (segments)
        setenv("RAYBOX_CL_VISIBILITY", "segments", 1);
    rb_context *ctx = rbt_context_opts(RBT_OPENCL, &o);
    if (segments)
        unsetenv("RAYBOX_CL_VISIBILITY");
    return ctx;
}

enum { N_CTX = 7 };

/* rb_visibility on every backend (the CPU with its hierarchy forced on;
 * OpenCL with the hierarchy setting as it comes, off and forced on, and
 * with the explicit segments) equals the explicit segments' bits.
 * kernel: the OpenCL contexts other than the explicit one must have made
 * the segments on the device (kernels/visibility.cl), by brute force with
 * the hierarchy off and by the walk with it forced on; 0: they must have
 * taken the explicit segments (shapes beyond boxes, huge points). */
static void check_scene(rb_scene *scene, const float *obs, size_t n,
                        const float *tgt, size_t m, float tmin, float tmax,
                        int kernel, const char *what)
{
    rb_context *ref = brute_cpu();
    uint64_t want_visible;
    uint8_t *want = expected_bits(ref, scene, obs, n, tgt, m, tmin, tmax,
                                  &want_visible);
    size_t bytes = (size_t)rb_visibility_bytes(n, m);
    ck_assert_uint_eq(bytes, n * ((m + 7) / 8));
    uint8_t *got = malloc(bytes + 1);
    rb_context_options always;
    rb_context_options_init(&always);
    always.backend = RB_BACKEND_CPU;
    always.hierarchy = RB_HIERARCHY_ALWAYS;
    rb_context *ctxs[N_CTX] = {
        rbt_context(RBT_CPU),
        opencl(RB_HIERARCHY_AUTO, 0),
        opencl(RB_HIERARCHY_OFF, 0),
        opencl(RB_HIERARCHY_ALWAYS, 0),
        opencl(RB_HIERARCHY_AUTO, 1),
        rbt_context_opts(RBT_CPU, &always),
        ref};
    const char *names[N_CTX] = {"cpu", "opencl", "opencl, brute force",
                                "opencl, hierarchy always",
                                "opencl, explicit segments",
                                "cpu, hierarchy always", "cpu, brute force"};
    for (int c = 0; c < N_CTX; c++) {
        if (!ctxs[c])
            continue; /* OpenCL absent on purpose (RAYBOX_TEST_NO_OPENCL) */
        rb_visibility_query q = {.scene = scene, .observers = obs,
                                 .n_observers = n, .targets = tgt,
                                 .n_targets = m, .tmin = tmin, .tmax = tmax};
        uint64_t visible = 0;
        rb_run_info info;
        memset(got, 0xAB, bytes + 1);
        unsigned long long launches = rb_cl_vis_launches(ctxs[c]);
        unsigned long long walks = rb_cl_walks(ctxs[c]);
        int rc = rb_visibility(ctxs[c], &q, got, bytes, &visible, &info);
        ck_assert_msg(rc == RB_OK, "%s, %s: %s (%s)", what, names[c],
                      rb_status_name(rc),
                      rb_context_error(ctxs[c])->message);
        ck_assert_msg(memcmp(got, want, bytes) == 0,
                      "%s, %s: bits differ from the explicit segments",
                      what, names[c]);
        ck_assert_msg(got[bytes] == 0xAB, "%s: wrote past the matrix", what);
        ck_assert_uint_eq(visible, want_visible);
        int is_cl = c >= 1 && c <= 4;
        if (is_cl && n && m)
            ck_assert_str_eq(info.backend, "opencl");
        if (!is_cl)
            continue;
        /* the short-stack runs (tests/CMakeLists.txt) walk with that stack */
        const char *stack = getenv("RAYBOX_CL_BVH_STACK");
        if (stack)
            ck_assert_uint_eq(rb_cl_bvh_stack(ctxs[c]),
                              (unsigned)strtoul(stack, NULL, 10));
        int on_device = rb_cl_vis_launches(ctxs[c]) > launches;
        int want_device = kernel && c != 4 && n && m;
        ck_assert_msg(on_device == want_device,
                      "%s, %s: segments %s on the device", what, names[c],
                      on_device ? "made" : "not made");
        if (want_device && c == 2)
            ck_assert_msg(rb_cl_walks(ctxs[c]) == walks,
                          "%s: brute force walked", what);
        rb_scene_stats st;
        rb_scene_stats_get(scene, &st);
        if (want_device && c == 3 && st.boxes)
            ck_assert_msg(rb_cl_walks(ctxs[c]) > walks,
                          "%s: the hierarchy was not walked", what);
    }
    for (int c = 0; c < N_CTX - 1; c++)
        rb_context_destroy(ctxs[c]);
    rb_context_destroy(ref);
    free(want);
    free(got);
}

START_TEST(test_hierarchy_scene_shapes)
{
    rbt_rng g = {1234};
    rb_box *boxes = malloc(3000 * sizeof *boxes);
    float obs[3 * 37], tgt[3 * 53];
    rb_context *ctx = rbt_context(RBT_CPU);
    for (int kind = 0; kind < RBT_SC_KINDS; kind++) {
        size_t nb = rbt_scene_boxes(kind, 3000, &g, boxes);
        float lo[3], hi[3];
        rbt_scene_bounds(boxes, nb, lo, hi);
        random_points(&g, obs, 37, lo, hi);
        random_points(&g, tgt, 53, lo, hi);
        /* some targets on observers: zero-length segments */
        memcpy(tgt, obs, 3 * sizeof(float));
        rb_scene *scene = NULL;
        ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, nb, &scene), RB_OK);
        check_scene(scene, obs, 37, tgt, 53, 0, 1, 1,
                    rbt_scene_kind_name[kind]);
        check_scene(scene, obs, 37, tgt, 53, 1e-4f, 0.9999f, 1,
                    rbt_scene_kind_name[kind]);
        rb_scene_destroy(scene);
    }
    rb_context_destroy(ctx);
    free(boxes);
}
END_TEST

/* A city (a grid of buildings), street-level points, and more pairs than
 * one tile holds (600 x 500 = 300,000 > 262,144); then one and three
 * observers against the same targets. */
START_TEST(test_city_across_tiles)
{
    enum { G = 40, N = 600, M = 500 };
    rb_box *boxes = malloc(G * G * sizeof *boxes);
    rbt_rng g = {99};
    for (int i = 0; i < G * G; i++) {
        float x = (float)(i % G), y = (float)(i / G);
        boxes[i] = (rb_box){{x, y, 0}, {x + 0.8f, y + 0.8f,
                                        rbt_uniform(&g, 0.5f, 4)}};
    }
    float *obs = malloc(3 * N * sizeof *obs), *tgt = malloc(3 * M * sizeof *tgt);
    for (int i = 0; i < N + M; i++) {
        float *p = i < N ? &obs[3 * i] : &tgt[3 * (i - N)];
        float gap = (float)rbt_below(&g, G) + 0.9f, along = rbt_uniform(&g, 0, G);
        int swap = rbt_below(&g, 2);
        p[0] = swap ? gap : along;
        p[1] = swap ? along : gap;
        p[2] = rbt_uniform(&g, 0.1f, 2);
    }
    rb_context *ctx = rbt_context(RBT_CPU);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, G * G, &scene), RB_OK);
    check_scene(scene, obs, N, tgt, M, 0, 1, 1, "city");
    /* Fewer observers than the CPU has tasks: its rows are split, and
     * tasks share the bytes of a row (host/cpu/cpu_visibility.c). */
    check_scene(scene, obs, 3, tgt, M, 0, 1, 1, "city, three observers");
    check_scene(scene, obs, 1, tgt, M, 1e-4f, 0.9999f, 1,
                "city, one observer");
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    free(boxes);
    free(obs);
    free(tgt);
}
END_TEST

START_TEST(test_every_kind_and_empty)
{
    rb_context *ctx = rbt_context(RBT_CPU);
    rb_box boxes[2] = {{{0, 0, 0}, {1, 1, 1}}, {{3, 0, 0}, {4, 1, 1}}};
    rb_obb obb = {{6.5f, 0.5f, 0.5f}, {0.5f, 0.4f, 0.4f},
                  {{1, 0, 0}, {0, 0.8f, 0.6f}, {0, -0.6f, 0.8f}}};
    rb_sphere sph = {{9.5f, 0.5f, 0.5f}, 0.45f};
    rb_xbox xb = {{0, 0, 0}, {1, 1, 1}, {{1, 0, 0, 12}, {0, 1, 0, 0},
                                         {0, 0, 1, 0}}};
    rb_plane pl = {{0, 0, 1}, -5}; /* z <= -5: below everything */
    rb_shapes sh = {.obbs = &obb, .n_obbs = 1, .xboxes = &xb, .n_xboxes = 1,
                    .spheres = &sph, .n_spheres = 1, .planes = &pl,
                    .n_planes = 1};
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 3, boxes, 2, &sh, &scene),
                     RB_OK);
    rbt_rng g = {7};
    float obs[3 * 20], tgt[3 * 30];
    const float lo[3] = {-1, -1, -6}, hi[3] = {14, 2, 2};
    random_points(&g, obs, 20, lo, hi);
    random_points(&g, tgt, 30, lo, hi);
    /* shapes beyond boxes: the explicit segments on every backend */
    check_scene(scene, obs, 20, tgt, 30, 0, 1, 0, "every kind");
    rb_scene_destroy(scene);
    ck_assert_int_eq(rb_scene_create(ctx, 3, NULL, 0, &scene), RB_OK);
    check_scene(scene, obs, 20, tgt, 30, 0, 1, 1, "empty scene");
    check_scene(scene, obs, 0, tgt, 30, 0, 1, 1, "no observers");
    check_scene(scene, obs, 20, tgt, 0, 0, 1, 1, "no targets");
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
}
END_TEST

/* Points the device path must treat as the host does: subnormal
 * coordinates (the subtraction takes them unflushed; a device without
 * denormals leaves them to the explicit segments) and -0; points far
 * apart enough for a direction to overflow (|t| + |o| near 2^128 on an
 * axis) go to the explicit segments, and 1e38 on both sides does not. */
START_TEST(test_tiny_and_huge_points)
{
    rb_context *ctx = rbt_context(RBT_CPU);
    rbt_rng g = {5};
    rb_box boxes[300];
    size_t nb = rbt_scene_boxes(0, 300, &g, boxes);
    /* boxes touching the origin planes, so that flushed and unflushed
     * coordinates meet their faces */
    boxes[0] = (rb_box){{0, 0, 0}, {1e-38f, 1, 1}};
    boxes[1] = (rb_box){{-1, -1, -1}, {0, 0, 0}};
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, nb, &scene), RB_OK);
    static const float tiny[] = {1e-39f, -1e-39f, 1e-45f, 1.2e-38f,
                                 2e-38f, -0.0f, 0.0f, 1e-38f};
    enum { N = 24, M = 40 };
    float obs[3 * N], tgt[3 * M];
    for (int i = 0; i < 3 * N; i++)
        obs[i] = rbt_below(&g, 2) ? tiny[rbt_below(&g, 8)]
                                  : rbt_uniform(&g, -2, 2);
    for (int i = 0; i < 3 * M; i++)
        tgt[i] = rbt_below(&g, 2) ? tiny[rbt_below(&g, 8)]
                                  : rbt_uniform(&g, -2, 2);
    check_scene(scene, obs, N, tgt, M, 0, 1, 1, "subnormal points");
    obs[3] = 1e38f;
    tgt[0] = -1e38f;
    check_scene(scene, obs, N, tgt, M, 0, 1, 1, "large points");
    /* FLT_MAX - (-(2^103 - 2^79)) is just below the rounding to inf: a
     * finite direction, but too close to tell from the magnitudes */
    obs[3] = -(0x1p103f - 0x1p79f);
    tgt[0] = FLT_MAX;
    check_scene(scene, obs, N, tgt, M, 0, 1, 0, "huge points");
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
}
END_TEST

static int stop_now(void *u)
{
    (void)u;
    return 1;
}

/* A failed OpenCL call at every point of the device path: with fallback
 * on, the explicit segments answer the same bits; with it off, the
 * device's status; either way the next query makes its segments on the
 * device again. A stop callback ends the device path with RB_ECANCELED. */
START_TEST(test_device_failures)
{
    rb_context *cpu = rbt_context(RBT_CPU);
    rbt_rng g = {77};
    rb_box boxes[400];
    size_t nb = rbt_scene_boxes(0, 400, &g, boxes);
    float lo[3], hi[3];
    rbt_scene_bounds(boxes, nb, lo, hi);
    enum { N = 30, M = 45 };
    float obs[3 * N], tgt[3 * M];
    random_points(&g, obs, N, lo, hi);
    random_points(&g, tgt, M, lo, hi);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(cpu, 3, boxes, nb, &scene), RB_OK);
    rb_visibility_query q = {.scene = scene, .observers = obs,
                             .n_observers = N, .targets = tgt,
                             .n_targets = M, .tmin = 0, .tmax = 1};
    size_t bytes = (size_t)rb_visibility_bytes(N, M);
    uint8_t *want = malloc(bytes), *got = malloc(bytes);
    ck_assert_int_eq(rb_visibility(cpu, &q, want, bytes, NULL, NULL), RB_OK);
    for (int fallback = 1; fallback >= 0; fallback--) {
        rb_context *ctx = rbt_context_limited(RBT_OPENCL, 0, 0, fallback);
        ck_assert_int_eq(rb_visibility(ctx, &q, got, bytes, NULL, NULL),
                         RB_OK);
        unsigned long long c0 = rb_cl_calls(ctx);
        ck_assert_int_eq(rb_visibility(ctx, &q, got, bytes, NULL, NULL),
                         RB_OK);
        unsigned long long calls = rb_cl_calls(ctx) - c0;
        ck_assert_uint_gt(calls, 0);
        for (unsigned long long n = 0; n < calls; n++) {
            memset(got, 0xAB, bytes);
            rb_cl_fail_after(ctx, (long)n);
            int rc = rb_visibility(ctx, &q, got, bytes, NULL, NULL);
            if (fallback) {
                ck_assert_msg(rc == RB_OK, "call %llu: %s (%s)", n,
                              rb_status_name(rc),
                              rb_context_error(ctx)->message);
                ck_assert_msg(memcmp(got, want, bytes) == 0,
                              "call %llu: bits differ", n);
            } else {
                ck_assert_msg(rc == RB_EDEVICE || rc == RB_EDEVMEM,
                              "call %llu: %s", n, rb_status_name(rc));
                ck_assert_msg(strstr(rb_context_error(ctx)->message,
                                     "CL_OUT_OF_RESOURCES"),
                              "error \"%s\"",
                              rb_context_error(ctx)->message);
            }
            rb_cl_fail_after(ctx, -1);
            unsigned long long launches = rb_cl_vis_launches(ctx);
            memset(got, 0xAB, bytes);
            ck_assert_int_eq(rb_visibility(ctx, &q, got, bytes, NULL, NULL),
                             RB_OK);
            ck_assert(memcmp(got, want, bytes) == 0);
            ck_assert_uint_gt(rb_cl_vis_launches(ctx), launches);
        }
        q.stop = stop_now;
        ck_assert_int_eq(rb_visibility(ctx, &q, got, bytes, NULL, NULL),
                         RB_ECANCELED);
        q.stop = NULL;
        rb_context_destroy(ctx);
    }
    rb_scene_destroy(scene);
    rb_context_destroy(cpu);
    free(want);
    free(got);
}
END_TEST

static void errors_on(int which)
{
    rb_context *ctx = rbt_context(which);
    if (!ctx)
        return; /* OpenCL absent on purpose (RAYBOX_TEST_NO_OPENCL) */
    rb_box box = {{0, 0, 0}, {1, 1, 1}};
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, &box, 1, &scene), RB_OK);
    float obs[6] = {-1, 0.5f, 0.5f, 2, NAN, 0.5f};
    float tgt[6] = {2, 0.5f, 0.5f, -3e38f, 0, 0};
    uint8_t bits[4];
    rb_visibility_query q = {.scene = scene, .observers = obs,
                             .n_observers = 2, .targets = tgt,
                             .n_targets = 2, .tmin = 0, .tmax = 1};
    ck_assert_int_eq(rb_visibility(ctx, &q, bits, sizeof bits, NULL, NULL),
                     RB_EINPUT);
    const rb_error *e = rb_context_error(ctx);
    ck_assert_int_eq(e->element, RB_ELEMENT_OBSERVER);
    ck_assert_uint_eq(e->index, 1);
    ck_assert_int_eq(e->field, 1);
    ck_assert_str_eq(e->message, "observer 1: y is NaN");
    /* a finite observer, a target 6e38 away: the direction overflows */
    obs[4] = 0.5f;
    obs[3] = 3e38f;
    ck_assert_int_eq(rb_visibility(ctx, &q, bits, sizeof bits, NULL, NULL),
                     RB_EINPUT);
    e = rb_context_error(ctx);
    ck_assert_int_eq(e->element, RB_ELEMENT_TARGET);
    ck_assert_uint_eq(e->index, 1);
    ck_assert_msg(strstr(e->message, "observer 1 to target 1"), "%s",
                  e->message);
    obs[3] = 2;
    ck_assert_int_eq(rb_visibility(ctx, &q, bits, 1, NULL, NULL), RB_EINVAL);
    q.tmin = 2; /* tmin > tmax */
    ck_assert_int_eq(rb_visibility(ctx, &q, bits, sizeof bits, NULL, NULL),
                     RB_EINVAL);
    q.tmin = 0;
    q.stop = stop_now;
    ck_assert_int_eq(rb_visibility(ctx, &q, bits, sizeof bits, NULL, NULL),
                     RB_ECANCELED);
    q.stop = NULL;
    uint64_t visible = 99;
    ck_assert_int_eq(rb_visibility(ctx, &q, bits, sizeof bits, &visible,
                                   NULL),
                     RB_OK);
    /* (0,0) crosses the box, (0,1) points away from it; (1,0) is a
     * zero-length segment outside it, (1,1) crosses it */
    ck_assert_uint_eq(bits[0], 0x2);
    ck_assert_uint_eq(bits[1], 0x1);
    ck_assert_uint_eq(visible, 2);
    rb_scene_destroy(scene);
    rb_box2 b2 = {{0, 0}, {1, 1}};
    ck_assert_int_eq(rb_scene_create(ctx, 2, &b2, 1, &scene), RB_OK);
    q.scene = scene;
    ck_assert_int_eq(rb_visibility(ctx, &q, bits, sizeof bits, NULL, NULL),
                     RB_EINVAL);
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
}

START_TEST(test_errors)
{
    errors_on(RBT_CPU);
    errors_on(RBT_OPENCL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("visibility");
    TCase *tc = tcase_create("visibility");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_hierarchy_scene_shapes);
    tcase_add_test(tc, test_city_across_tiles);
    tcase_add_test(tc, test_every_kind_and_empty);
    tcase_add_test(tc, test_tiny_and_huge_points);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_device_failures);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
