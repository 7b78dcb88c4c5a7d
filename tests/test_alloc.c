/*
 * test_alloc.c - out of memory on purpose: an allocator that fails from
 * its Nth allocation on. For every N until the whole scenario succeeds,
 * each call must return an error (never crash), and once everything is
 * destroyed no allocation may remain live: the allocator counts them, so
 * this holds without LeakSanitizer too (CI runs it under ASan/LSan as
 * well). Every backend.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

typedef struct failing {
    long n_allocs;   /* allocations attempted */
    long fail_from;  /* the first one to fail (-1: never) */
    long live;       /* allocated and not freed */
    long failures;
} failing;

static void *f_alloc(void *user, size_t size, size_t align)
{
    failing *f = user;
    if (f->fail_from >= 0 && f->n_allocs++ >= f->fail_from) {
        f->failures++;
        return NULL;
    }
    void *p = rbt_aligned_alloc(size, align);
    if (!p)
        return NULL;
    f->live++;
    return p;
}

static void f_free(void *user, void *ptr)
{
    failing *f = user;
    if (ptr) {
        f->live--;
        free(ptr);
    }
}

enum { R = 3000, B = 200 };

/* The scenario: a context, a scene, one query per mode (inline boxes, the
 * scene, pairs), a scene change, teardown. Returns 1 if every step
 * succeeded. A failed step must say RB_ENOMEM (or, for a context, fail
 * cleanly). */
static int scenario(int which, failing *f, const rb_ray *rays,
                    const rb_box *boxes)
{
    rb_allocator a = {f_alloc, f_free, f};
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.allocator = &a;
    opt.backend = which == RBT_CPU ? RB_BACKEND_CPU : RB_BACKEND_OPENCL;
    rb_context *ctx = NULL;
    char why[256];
    int rc = rb_context_create(&opt, &ctx, why, sizeof why);
    if (rc != RB_OK) {
        ck_assert_msg(ctx == NULL, "a failed create returned a context");
        ck_assert_msg(f->failures > 0, "create failed without an allocation "
                      "failure: %s (%s)", rb_status_name(rc), why);
        return 0;
    }
    int ok = 1;
    rb_scene *scene = NULL;
    rc = rb_scene_create(ctx, 3, boxes, B, &scene);
    if (rc) {
        ck_assert_int_eq(rc, RB_ENOMEM);
        ck_assert_ptr_null(scene);
        ok = 0;
    }
    static rb_hit hits[R];
    static uint8_t any[R];
    static uint32_t counts[R];
    static rb_list_hit list[R * 4];
    rb_results res = {.hits = hits, .any = any, .counts = counts,
                      .list = list, .capacity = R};
    for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
        rb_query q = {.mode = (rb_mode)mode, .dims = 3, .rays = rays,
                      .n_rays = R, .boxes = boxes,
                      .n_boxes = mode == RB_MODE_PAIRS ? R : B,
                      .max_hits = 4};
        rc = rb_intersect(ctx, &q, &res);
        if (rc) {
            ck_assert_msg(rc == RB_ENOMEM, "%s: %s (%s)", rb_mode_name(mode),
                          rb_status_name(rc),
                          rb_context_error(ctx)->message);
            ok = 0;
        }
        if (scene && mode != RB_MODE_PAIRS) {
            q.scene = scene;
            rc = rb_intersect(ctx, &q, &res);
            if (rc) {
                ck_assert_int_eq(rc, RB_ENOMEM);
                ok = 0;
            }
        }
    }
    if (scene) {
        rb_scene *copy = NULL;
        rc = rb_scene_clone(ctx, scene, &copy);
        if (rc) {
            ck_assert_int_eq(rc, RB_ENOMEM);
            ok = 0;
        }
        rc = rb_scene_append(ctx, scene, boxes, B);
        if (rc) {
            ck_assert_int_eq(rc, RB_ENOMEM);
            rb_scene_stats st;
            rb_scene_stats_get(scene, &st);
            ck_assert_msg(st.boxes == B && st.version == 1,
                          "a failed append changed the scene");
            ok = 0;
        }
        rb_scene_destroy(copy);
    }
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    return ok;
}

START_TEST(test_fail_after_n)
{
    rb_ray *rays = malloc(R * sizeof *rays);
    rb_box *boxes = malloc(R * sizeof *boxes);
    rbt_rng rng = {3};
    for (size_t i = 0; i < R; i++) {
        for (int a = 0; a < 3; a++) {
            rays[i].origin[a] = rbt_uniform(&rng, -10, 10);
            rays[i].dir[a] = rbt_uniform(&rng, -1, 1);
            boxes[i].min[a] = rbt_uniform(&rng, -10, 9);
            boxes[i].max[a] = boxes[i].min[a] + 1;
        }
        rays[i].tmin = 0;
        rays[i].tmax = INFINITY;
    }
    /* Skip OpenCL only where the test environment says it has none. */
    rb_context *probe = rbt_context(_i);
    if (!probe) {
        free(rays);
        free(boxes);
        return;
    }
    rb_context_destroy(probe);

    long n;
    for (n = 0; n < 10000; n++) {
        failing f = {.fail_from = n};
        int ok = scenario(_i, &f, rays, boxes);
        ck_assert_msg(f.live == 0, "%s: %ld allocations leaked when the "
                      "allocator failed from #%ld",
                      rbt_backend_name(_i), f.live, n);
        if (ok) {
            ck_assert_msg(f.failures == 0, "%s: the scenario succeeded "
                          "although allocation #%ld failed",
                          rbt_backend_name(_i), n);
            break;
        }
    }
    ck_assert_msg(n > 3, "%s: only %ld allocations: the hooks are not used",
                  rbt_backend_name(_i), n);
    fprintf(stderr, "%s: every one of %ld allocation failures handled\n",
            rbt_backend_name(_i), n);
    free(rays);
    free(boxes);
}
END_TEST

START_TEST(test_allocator_required_fields)
{
    rb_allocator bad = {NULL, f_free, NULL};
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    opt.allocator = &bad;
    rb_context *ctx = (rb_context *)1;
    char why[128] = "";
    ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why),
                     RB_EINVAL);
    ck_assert_ptr_null(ctx);
    ck_assert(why[0]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("alloc");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, test_fail_after_n, 0, RBT_BACKENDS);
    tcase_add_test(tc, test_allocator_required_fields);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
