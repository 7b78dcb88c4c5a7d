/* test_cancel.c - rb_query.stop: a query whose stop callback says stop
 * returns RB_ECANCELED on every backend and path (brute force, hierarchy
 * walk, shape pass, and on the CPU the joint walk of boxes and spheres),
 * soon after (the callback is asked between pieces of work), and the
 * context answers the next query exactly as before. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct stopper {
    atomic_int calls;
    int stop_after; /* calls answered "go on" before "stop" */
} stopper;

static int stop_cb(void *user)
{
    stopper *s = user;
    return atomic_fetch_add(&s->calls, 1) >= s->stop_after;
}

enum { RAYS = 50000, BOXES = 2000 };

static void fill(rb_ray *rays, rb_box *boxes, rb_sphere *spheres)
{
    rbt_rng g = {5};
    for (size_t i = 0; i < RAYS; i++) {
        for (int a = 0; a < 3; a++) {
            rays[i].origin[a] = rbt_uniform(&g, -10, 10);
            rays[i].dir[a] = rbt_uniform(&g, -1, 1);
        }
        rays[i].tmin = 0;
        rays[i].tmax = INFINITY;
    }
    for (size_t i = 0; i < BOXES; i++)
        for (int a = 0; a < 3; a++) {
            boxes[i].min[a] = rbt_uniform(&g, -10, 10);
            boxes[i].max[a] = boxes[i].min[a] + 0.5f;
            spheres[i].center[a] = rbt_uniform(&g, -10, 10);
            spheres[i].radius = 0.3f;
        }
}

static void check(int backend, int hierarchy, int with_spheres)
{
    rb_context_options o;
    rb_context_options_init(&o);
    o.hierarchy = hierarchy;
    o.cpu_fallback = 0;
    o.backend = backend == RBT_CPU ? RB_BACKEND_CPU : RB_BACKEND_OPENCL;
    /* OpenCL asks between launches: small buffers make several. */
    o.max_buffer_bytes = 256 << 10;
    rb_context *ctx = rbt_context_opts(backend, &o);
    rb_ray *rays = malloc(RAYS * sizeof *rays);
    rb_box *boxes = malloc(BOXES * sizeof *boxes);
    rb_sphere *spheres = malloc(BOXES * sizeof *spheres);
    fill(rays, boxes, spheres);
    uint32_t *a = calloc(RAYS, sizeof *a), *b = calloc(RAYS, sizeof *b);
    rb_query q = {.mode = RB_MODE_COUNT, .dims = 3, .rays = rays,
                  .n_rays = RAYS, .boxes = boxes, .n_boxes = BOXES};
    if (with_spheres) {
        q.shapes.spheres = spheres;
        q.shapes.n_spheres = BOXES;
    }
    rb_results r = {.counts = a, .capacity = RAYS};
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);

    /* Stopped at once, and stopped after some work. */
    for (int after = 0; after <= 3; after += 3) {
        stopper s = {.stop_after = after};
        atomic_init(&s.calls, 0);
        q.stop = stop_cb;
        q.stop_user = &s;
        rb_results rs = {.counts = b, .capacity = RAYS};
        int rc = rb_intersect(ctx, &q, &rs);
        ck_assert_msg(rc == RB_ECANCELED, "%s, hierarchy %d, spheres %d, "
                      "stop after %d: %s (%d calls)",
                      rbt_backend_name(backend), hierarchy, with_spheres,
                      after, rb_status_name(rc), atomic_load(&s.calls));
        ck_assert_int_eq(rb_context_error(ctx)->status, RB_ECANCELED);
        ck_assert_int_gt(atomic_load(&s.calls), after);
    }
    /* A callback that never stops changes nothing. */
    stopper never = {.stop_after = 1 << 30};
    atomic_init(&never.calls, 0);
    q.stop_user = &never;
    memset(b, 0, RAYS * sizeof *b);
    rb_results rn = {.counts = b, .capacity = RAYS};
    ck_assert_int_eq(rb_intersect(ctx, &q, &rn), RB_OK);
    ck_assert(memcmp(a, b, RAYS * sizeof *a) == 0);
    ck_assert_int_gt(atomic_load(&never.calls), 0);
    free(a);
    free(b);
    free(rays);
    free(boxes);
    free(spheres);
    rb_context_destroy(ctx);
}

START_TEST(test_stop_every_path)
{
    int backend = _i;
    check(backend, RB_HIERARCHY_OFF, 0);
    check(backend, RB_HIERARCHY_ALWAYS, 0);
    check(backend, RB_HIERARCHY_OFF, 1);
    check(backend, RB_HIERARCHY_ALWAYS, 1);
}
END_TEST

/* A stream of `count` over a hierarchy (bvh_stream_avx2.c) can hold
 * seconds of work in one task: every ray in every box. It asks the
 * callback as it goes, not only between tasks. */
START_TEST(test_stop_inside_stream)
{
    enum { NR = 20000, NB = 4000 };
    rb_context_options o;
    rb_context_options_init(&o);
    o.threads = 1;
    o.hierarchy = RB_HIERARCHY_ALWAYS;
    o.backend = RB_BACKEND_CPU;
    rb_context *ctx = rbt_context_opts(RBT_CPU, &o);
    rb_backend_info info;
    rb_context_info(ctx, &info);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rb_box *boxes = calloc(NB, sizeof *boxes);
    uint32_t *counts = calloc(NR, sizeof *counts);
    ck_assert(rays && boxes && counts);
    for (size_t i = 0; i < NR; i++) {
        rb_ray r = {{-10, 0.5f, 0.5f}, {1, 0, 0}, 0, INFINITY};
        rays[i] = r;
    }
    for (size_t i = 0; i < NB; i++) {
        rb_box b = {{0, 0, 0}, {1, 1, 1}};
        boxes[i] = b;
    }
    rb_query q = {.mode = RB_MODE_COUNT, .dims = 3, .rays = rays,
                  .n_rays = NR, .boxes = boxes, .n_boxes = NB};
    stopper never = {.stop_after = 1 << 30};
    atomic_init(&never.calls, 0);
    q.stop = stop_cb;
    q.stop_user = &never;
    rb_results r = {.counts = counts, .capacity = NR};
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);
    for (size_t i = 0; i < NR; i++)
        ck_assert_uint_eq(counts[i], NB);
    int calls = atomic_load(&never.calls);
    if (strcmp(info.simd, "avx2") == 0)
        ck_assert_msg(calls > 2 * (int)r.info.chunks,
                      "%d calls for %zu tasks", calls,
                      (size_t)r.info.chunks);
    else
        fprintf(stderr, "test_stop_inside_stream: %s walkers have no "
                        "streams (%d calls, %zu tasks)\n",
                info.simd, calls, (size_t)r.info.chunks);

    stopper soon = {.stop_after = 2};
    atomic_init(&soon.calls, 0);
    q.stop_user = &soon;
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_ECANCELED);
    free(rays);
    free(boxes);
    free(counts);
    rb_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cancel");
    TCase *tc = tcase_create("cancel");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_stop_every_path, 0, RBT_BACKENDS);
    tcase_add_test(tc, test_stop_inside_stream);
    suite_add_tcase(s, tc);
    return rbt_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
