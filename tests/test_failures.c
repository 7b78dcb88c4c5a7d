/* test_failures.c - the OpenCL backend's hard paths: batches cut into
 * many chunks (rays and boxes) by tiny buffer limits and budgets, OpenCL
 * calls that fail on purpose (fault injection at every call of a query),
 * with and without the CPU fallback, and an invalid element deep inside a
 * large multi-chunk batch. The CPU backend is the oracle throughout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "batch.h"
#include "opencl/cl_testhook.h"

/* One mode of one batch on ctx against the CPU; returns the run info. */
static rb_run_info same_as_cpu(rb_context *ctx, rb_context *cpu,
                               const rbt_batch *b, rb_mode mode,
                               const rb_scene *scene, uint32_t max_hits,
                               const char *what)
{
    rbt_out want, got;
    rbt_out_init(&want, b->n_rays, max_hits);
    rbt_out_init(&got, b->n_rays, max_hits);
    ck_assert_int_eq(rbt_run(cpu, b, mode, scene, &want), RB_OK);
    int rc = rbt_run(ctx, b, mode, scene, &got);
    ck_assert_msg(rc == RB_OK, "%s %s: %s: %s", what, rb_mode_name(mode),
                  rb_status_name(rc), rb_context_error(ctx)->message);
    char label[160];
    snprintf(label, sizeof label, "%s %uD", what, b->dims);
    rbt_assert_same(mode, &want, &got, label);
    rb_run_info info = got.info;
    rbt_out_free(&want);
    rbt_out_free(&got);
    return info;
}

/* ---- (1) chunking */

/* 4 KiB buffers: 50 rays fit one chunk, 700 boxes (16.8 KB) do not, so
 * every launch beyond the first is a box chunk; then many rays too. */
START_TEST(test_tiny_buffers)
{
    unsigned dims = _i == 0 ? 3 : 2;
    rb_context *ctx = rbt_context_limited(RBT_OPENCL, 4096, 0, 0);
    rb_context *cpu = rbt_context(RBT_CPU);
    rbt_batch few, many, pairs;
    rbt_batch_make(&few, dims, 50, 700, 101);
    rbt_batch_make(&many, dims, 1500, 700, 102);
    rbt_batch_make(&pairs, dims, 1500, 1500, 103);
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++) {
        rb_run_info info = same_as_cpu(ctx, cpu, &few, (rb_mode)mode, NULL,
                                       3, "few rays, split boxes");
        ck_assert_msg(info.chunks >= 5, "%s: %llu launches for 700 boxes "
                                        "in 4 KiB buffers",
                      rb_mode_name(mode), (unsigned long long)info.chunks);
        info = same_as_cpu(ctx, cpu, &many, (rb_mode)mode, NULL, 3,
                           "split rays and boxes");
        /* At least: ray chunks that fit 4 KiB times box chunks that do. */
        size_t ray_rec = dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
        uint64_t ray_min = (many.n_rays * ray_rec + 4095) / 4096;
        uint64_t box_min = (many.n_boxes * 24 + 4095) / 4096;
        ck_assert_msg(info.chunks >= ray_min * box_min,
                      "%s: %llu launches, expected >= %llu x %llu",
                      rb_mode_name(mode), (unsigned long long)info.chunks,
                      (unsigned long long)ray_min,
                      (unsigned long long)box_min);
        /* all with every hit kept: longer lists, fewer rays per chunk. */
        if (mode == RB_MODE_ALL)
            same_as_cpu(ctx, cpu, &many, (rb_mode)mode, NULL, 40,
                        "split, max_hits 40");
    }
    rb_run_info info = same_as_cpu(ctx, cpu, &pairs, RB_MODE_PAIRS, NULL, 1,
                                   "pairs in 4 KiB buffers");
    size_t ray_rec = dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
    ck_assert_uint_ge(info.chunks, (pairs.n_rays * ray_rec + 4095) / 4096);

    /* A scene cut into box chunks, queried twice. */
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(cpu, dims, many.boxes, many.n_boxes,
                                     &scene),
                     RB_OK);
    for (int round = 0; round < 2; round++)
        for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++)
            same_as_cpu(ctx, cpu, &few, (rb_mode)mode, scene, 4,
                        "split scene");
    rb_scene_destroy(scene);
    rbt_batch_free(&few);
    rbt_batch_free(&many);
    rbt_batch_free(&pairs);
    rb_context_destroy(cpu);
    rb_context_destroy(ctx);
}
END_TEST

/* The memory budget, not the buffer limit, forces the split. */
START_TEST(test_tiny_budget)
{
    rb_context *ctx = rbt_context_limited(RBT_OPENCL, 0, 24 * 1024, 0);
    rb_context *cpu = rbt_context(RBT_CPU);
    rbt_batch b;
    rbt_batch_make(&b, 3, 2000, 1200, 111);
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++) {
        rb_run_info info = same_as_cpu(ctx, cpu, &b, (rb_mode)mode, NULL, 2,
                                       "24 KiB budget");
        ck_assert_uint_gt(info.chunks, 2);
    }
    rbt_batch_free(&b);
    rb_context_destroy(cpu);
    rb_context_destroy(ctx);
}
END_TEST

/* One ray's list does not fit a buffer: the device refuses the query
 * (RB_EDEVMEM), the CPU answers when fallback is on. */
START_TEST(test_over_limit)
{
    rb_context *cpu = rbt_context(RBT_CPU);
    rbt_batch b;
    rbt_batch_make(&b, 3, 30, 64, 121);
    rb_context *ctx = rbt_context_limited(RBT_OPENCL, 4096, 0, 0);
    rbt_out o;
    rbt_out_init(&o, b.n_rays, 1000); /* 12 KB of list per ray */
    ck_assert_int_eq(rbt_run(ctx, &b, RB_MODE_ALL, NULL, &o), RB_EDEVMEM);
    ck_assert_msg(rb_context_error(ctx)->message[0], "no reason");
    rbt_out_free(&o);
    same_as_cpu(ctx, cpu, &b, RB_MODE_ALL, NULL, 8, "after RB_EDEVMEM");
    rb_context_destroy(ctx);

    ctx = rbt_context_limited(RBT_OPENCL, 4096, 0, 1);
    rbt_out want, got;
    rbt_out_init(&want, b.n_rays, 1000);
    rbt_out_init(&got, b.n_rays, 1000);
    ck_assert_int_eq(rbt_run(cpu, &b, RB_MODE_ALL, NULL, &want), RB_OK);
    ck_assert_int_eq(rbt_run(ctx, &b, RB_MODE_ALL, NULL, &got), RB_OK);
    ck_assert_int_eq(got.info.fell_back, 1);
    ck_assert_str_eq(got.info.backend, "cpu");
    ck_assert_msg(got.info.fallback_reason[0], "no fallback reason");
    rbt_assert_same(RB_MODE_ALL, &want, &got, "fallback over limit");
    rbt_out_free(&want);
    rbt_out_free(&got);
    rb_context_destroy(ctx);
    rbt_batch_free(&b);
    rb_context_destroy(cpu);
}
END_TEST

/* ---- (2) injected OpenCL failures */

/* Makes call n of one query fail, for n over all of the query's checked
 * calls (every `step`-th), in one mode. */
static void inject_all_calls(rb_context *ctx, rb_context *cpu,
                             const rbt_batch *b, rb_mode mode, int fallback,
                             unsigned long long step, const char *what)
{
    rbt_out want, got;
    rbt_out_init(&want, b->n_rays, 3);
    rbt_out_init(&got, b->n_rays, 3);
    ck_assert_int_eq(rbt_run(cpu, b, mode, NULL, &want), RB_OK);
    /* Calls of one warm query (buffers exist). A failed query releases
     * its buffers, so the next query makes at least as many calls. */
    ck_assert_int_eq(rbt_run(ctx, b, mode, NULL, &got), RB_OK);
    unsigned long long c0 = rb_cl_calls(ctx);
    ck_assert_int_eq(rbt_run(ctx, b, mode, NULL, &got), RB_OK);
    unsigned long long calls = rb_cl_calls(ctx) - c0;
    ck_assert_msg(calls >= 5, "%s: only %llu checked calls", what, calls);
    if (getenv("RBT_VERBOSE"))
        fprintf(stderr, "%s %s: %llu calls\n", what, rb_mode_name(mode),
                calls);

    for (unsigned long long n = 0; n < calls; n += step) {
        memset(got.hits, 0xab, b->n_rays * sizeof *got.hits);
        memset(got.counts, 0xab, b->n_rays * sizeof *got.counts);
        rb_cl_fail_after(ctx, (long)n);
        int rc = rbt_run(ctx, b, mode, NULL, &got);
        if (fallback) {
            ck_assert_msg(rc == RB_OK, "%s %s call %llu: %s", what,
                          rb_mode_name(mode), n, rb_status_name(rc));
            ck_assert_msg(got.info.fell_back == 1,
                          "%s %s call %llu: no fallback", what,
                          rb_mode_name(mode), n);
            ck_assert_str_eq(got.info.backend, "cpu");
            ck_assert_msg(strstr(got.info.fallback_reason,
                                 "CL_OUT_OF_RESOURCES"),
                          "reason \"%s\"", got.info.fallback_reason);
            rbt_assert_same(mode, &want, &got, what);
        } else {
            ck_assert_msg(rc == RB_EDEVICE || rc == RB_EDEVMEM,
                          "%s %s call %llu: %s", what, rb_mode_name(mode),
                          n, rb_status_name(rc));
            ck_assert_msg(strstr(rb_context_error(ctx)->message,
                                 "CL_OUT_OF_RESOURCES"),
                          "error \"%s\"", rb_context_error(ctx)->message);
        }
        /* The next query works on the device again. */
        memset(got.hits, 0xab, b->n_rays * sizeof *got.hits);
        rc = rbt_run(ctx, b, mode, NULL, &got);
        ck_assert_msg(rc == RB_OK && got.info.fell_back == 0 &&
                          strcmp(got.info.backend, "opencl") == 0,
                      "%s %s after call %llu: %s, fell_back %d", what,
                      rb_mode_name(mode), n, rb_status_name(rc),
                      got.info.fell_back);
        rbt_assert_same(mode, &want, &got, what);
    }
    rbt_out_free(&want);
    rbt_out_free(&got);
}

START_TEST(test_injected_failures)
{
    int fallback = _i;
    rb_context *cpu = rbt_context(RBT_CPU);
    rbt_batch b, p;
    rbt_batch_make(&b, 3, 200, 100, 131);
    rbt_batch_make(&p, 2, 200, 200, 132);
    /* One chunk: every call. */
    rb_context *ctx = rbt_context_limited(RBT_OPENCL, 0, 0, fallback);
    inject_all_calls(ctx, cpu, &p, RB_MODE_PAIRS, fallback, 1, "pairs");
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++)
        inject_all_calls(ctx, cpu, &b, (rb_mode)mode, fallback, 1,
                         "one chunk");
    rb_context_destroy(ctx);
    /* Many ray and box chunks: a sample of the calls. */
    ctx = rbt_context_limited(RBT_OPENCL, 2048, 0, fallback);
    inject_all_calls(ctx, cpu, &p, RB_MODE_PAIRS, fallback, 7,
                     "chunked pairs");
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++)
        inject_all_calls(ctx, cpu, &b, (rb_mode)mode, fallback, 13,
                         "chunked");
    rb_context_destroy(ctx);
    rbt_batch_free(&b);
    rbt_batch_free(&p);
    rb_context_destroy(cpu);
}
END_TEST

/* An injection armed on a CPU context is a no-op, and a disarmed one
 * never fires. */
START_TEST(test_injection_disarm)
{
    rb_context *cpu = rbt_context(RBT_CPU);
    rb_cl_fail_after(cpu, 0);
    ck_assert_uint_eq(rb_cl_calls(cpu), 0);
    rb_context *ctx = rbt_context_limited(RBT_OPENCL, 0, 0, 0);
    rbt_batch b;
    rbt_batch_make(&b, 3, 20, 20, 141);
    rb_cl_fail_after(ctx, 0);
    rb_cl_fail_after(ctx, -1);
    rbt_out o;
    rbt_out_init(&o, b.n_rays, 1);
    ck_assert_int_eq(rbt_run(ctx, &b, RB_MODE_COUNT, NULL, &o), RB_OK);
    rbt_out_free(&o);
    rbt_batch_free(&b);
    rb_context_destroy(ctx);
    rb_context_destroy(cpu);
}
END_TEST

/* ---- (3) invalid input deep in a large batch */

static void expect_bad(rb_context *ctx, const rbt_batch *b, rb_mode mode,
                       rb_element_kind element, uint64_t index, int field)
{
    rbt_out o;
    rbt_out_init(&o, b->n_rays, 2);
    int rc = rbt_run(ctx, b, mode, NULL, &o);
    const rb_error *e = rb_context_error(ctx);
    ck_assert_msg(rc == RB_EINPUT, "%s: %s (%s)", rb_mode_name(mode),
                  rb_status_name(rc), e->message);
    ck_assert_msg(e->element == element && e->index == index &&
                      e->field == field,
                  "%s: expected %s %llu field %d, got \"%s\" (field %d)",
                  rb_mode_name(mode),
                  element == RB_ELEMENT_RAY ? "ray" : "box",
                  (unsigned long long)index, field, e->message, e->field);
    rbt_out_free(&o);
}

START_TEST(test_invalid_deep)
{
    /* 64 KiB buffers: ~2000 rays per chunk, ~100 chunks; and the default
     * limits: one chunk checked in parallel on the thread pool. */
    uint64_t max_buf = _i == 0 ? 65536 : 0;
    rb_context *ctx = rbt_context_limited(RBT_OPENCL, max_buf, 0, 1);
    rb_context *cpu = rbt_context(RBT_CPU);
    size_t n = 200000;
    rbt_batch b, p;
    rbt_batch_make(&b, 3, n, 16, 151);
    rbt_batch_make(&p, 3, n, n, 152);

    rbt_batch_set_ray(&b, 190001, 3, NAN);
    rbt_batch_set_ray(&b, 150001, 6, INFINITY); /* tmin */
    rbt_batch_set_ray(&b, 170000, 0, -INFINITY);
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++)
        expect_bad(ctx, &b, (rb_mode)mode, RB_ELEMENT_RAY, 150001, 6);

    /* pairs: a box before a ray; at the same index the ray wins. */
    rbt_batch_set_ray(&p, 120001, 1, NAN);
    rbt_batch_set_box(&p, 120000, 3, -5e30f); /* max x < min x */
    rbt_batch_set_box(&p, 180000, 0, NAN);
    expect_bad(ctx, &p, RB_MODE_PAIRS, RB_ELEMENT_BOX, 120000, 0);
    rbt_batch_set_box(&p, 120000, 3, 1e30f);
    rbt_batch_set_box(&p, 120001, 2, NAN);
    expect_bad(ctx, &p, RB_MODE_PAIRS, RB_ELEMENT_RAY, 120001, 1);

    /* The backend still answers (the same input, repaired). */
    rbt_batch_free(&p);
    rbt_batch_make(&p, 3, n, n, 152);
    rb_run_info info = same_as_cpu(ctx, cpu, &p, RB_MODE_PAIRS, NULL, 1,
                                   "pairs after invalid input");
    ck_assert_int_eq(info.fell_back, 0);
    if (max_buf)
        ck_assert_uint_gt(info.chunks, 50);
    rbt_batch_free(&b);
    rbt_batch_free(&p);
    rb_context_destroy(cpu);
    rb_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("failures");
    TCase *chunks = tcase_create("chunks");
    tcase_set_timeout(chunks, 600);
    tcase_add_loop_test(chunks, test_tiny_buffers, 0, 2);
    tcase_add_test(chunks, test_tiny_budget);
    tcase_add_test(chunks, test_over_limit);
    suite_add_tcase(s, chunks);
    TCase *inject = tcase_create("inject");
    tcase_set_timeout(inject, 600);
    tcase_add_loop_test(inject, test_injected_failures, 0, 2);
    tcase_add_test(inject, test_injection_disarm);
    suite_add_tcase(s, inject);
    TCase *input = tcase_create("input");
    tcase_set_timeout(input, 600);
    tcase_add_loop_test(input, test_invalid_deep, 0, 2);
    suite_add_tcase(s, input);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
