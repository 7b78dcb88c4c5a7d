/* test_cl_warm_up.c - rb_context_warm_up launches every kernel of the
 * OpenCL program (so that PoCL's compile-on-first-launch happens before a
 * server reports ready), in both kernel variants, and leaves the context
 * answering as before; on the CPU backend it has nothing to do. */
#include <stdlib.h>

#include "opencl/cl_testhook.h"
#include "testutil.h"

static void check_variant(const char *variant)
{
    setenv("RAYBOX_CL_KERNELS", variant, 1);
    rb_context *ctx = rbt_context_limited(RBT_OPENCL, 0, 0, 0);
    char names[512];
    /* A new context has launched nothing yet. */
    ck_assert_uint_gt(rb_cl_kernels_unlaunched(ctx, names, sizeof names), 0);
    ck_assert_int_eq(rb_context_warm_up(ctx), RB_OK);
    size_t left = rb_cl_kernels_unlaunched(ctx, names, sizeof names);
    ck_assert_msg(left == 0, "%s kernels: %zu never launched by the warm-up: "
                  "%s", variant, left, names);
    /* Still answering: one ray through two boxes. */
    const rb_ray ray = {{0, 0, 0}, {1, 0, 0}, 0, 1e30f};
    const rb_box boxes[2] = {{{4, -1, -1}, {5, 1, 1}},
                             {{1, -1, -1}, {2, 1, 1}}};
    rb_hit hit;
    rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = &ray,
                  .n_rays = 1, .boxes = boxes, .n_boxes = 2};
    rb_results r = {.hits = &hit, .capacity = 1};
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);
    ck_assert_int_eq(r.info.fell_back, 0);
    ck_assert_int_eq(hit.hit, 1);
    ck_assert_int_eq(hit.box, 1);
    ck_assert_float_eq(hit.t_enter, 1.0f);
    rb_context_destroy(ctx);
    unsetenv("RAYBOX_CL_KERNELS");
}

START_TEST(test_every_kernel_wide)
{
    check_variant("wide");
}
END_TEST

START_TEST(test_every_kernel_tiled)
{
    check_variant("tiled");
}
END_TEST

START_TEST(test_cpu_nothing_to_do)
{
    rb_context *ctx = rbt_context(RBT_CPU);
    ck_assert_int_eq(rb_context_warm_up(ctx), RB_OK);
    ck_assert_uint_eq(rb_cl_kernels_unlaunched(ctx, NULL, 0), 0);
    rb_context_destroy(ctx);
    ck_assert_int_eq(rb_context_warm_up(NULL), RB_EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cl_warm_up");
    TCase *tc = tcase_create("warm_up");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_every_kernel_wide);
    tcase_add_test(tc, test_every_kernel_tiled);
    tcase_add_test(tc, test_cpu_nothing_to_do);
    suite_add_tcase(s, tc);
    return rbt_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
