/* walk_cputime.c - process CPU time per ray of the four hierarchy walks on
 * the OpenCL device, for A/B runs of kernel sources on a shared machine
 * (docs/gpu.md): wall-clock rates there swing by 3x with other load, CPU
 * time much less. Fixed work: uniform and clustered scenes of 16384 boxes
 * (tests/support/scenes.c), 64K rays, every query forced to walk; kernels
 * from RAYBOX_KERNEL_DIR as the library reads them. Runs inside a Check
 * runner (no fork) because the test support asserts with Check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "internal.h"
#include "scenes.h"
#include "testutil.h"

static int reps = 3;

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

START_TEST(measure)
{
    enum { NB = 16384, NR = 65536 };
    rb_context *ctx = rbt_context_limited(RBT_OPENCL, 0, 0, 0);
    ctx->bvh_use = RB_BVH_USE_ALWAYS;
    const int kinds[] = {RBT_SC_UNIFORM, RBT_SC_CLUSTERED};
    const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY, RB_MODE_COUNT,
                             RB_MODE_ALL};
    const char *const names[] = {"nearest", "any", "count", "all"};
    for (int ki = 0; ki < 2; ki++) {
        rbt_rng g = {77u + (unsigned)ki};
        rb_box *boxes = calloc(NB, sizeof *boxes);
        rb_ray *rays = calloc(NR, sizeof *rays);
        ck_assert(boxes && rays);
        size_t nb = rbt_scene_boxes(kinds[ki], NB, &g, boxes);
        rbt_scene_rays(&g, boxes, nb, rays, NR);
        rb_scene *scene = NULL;
        ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, nb, &scene), RB_OK);
        rbt_batch b = {.dims = 3, .n_rays = NR, .rays = rays};
        for (int mi = 0; mi < 4; mi++) {
            rbt_out o;
            rbt_out_init(&o, NR, 16);
            ck_assert_int_eq(rbt_run(ctx, &b, modes[mi], scene, &o), RB_OK);
            double kernel_ms = 0, c0 = cpu_seconds();
            for (int r = 0; r < reps; r++) {
                ck_assert_int_eq(rbt_run(ctx, &b, modes[mi], scene, &o),
                                 RB_OK);
                ck_assert(!o.info.fell_back);
                kernel_ms += o.info.kernel_ms;
            }
            double per = (double)reps * NR;
            printf("%s %s kernel_ns_per_ray %.1f cpu_ns_per_ray %.1f\n",
                   rbt_scene_kind_name[kinds[ki]], names[mi],
                   kernel_ms * 1e6 / per, (cpu_seconds() - c0) * 1e9 / per);
            rbt_out_free(&o);
        }
        rb_scene_destroy(scene);
        free(boxes);
        free(rays);
    }
    rb_context_destroy(ctx);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("usage: walk_cputime [REPEATS]\n"
               "Prints, per scene and mode, the OpenCL kernel time and the\n"
               "process CPU time per ray of REPEATS (default 3) walks of 64K\n"
               "rays (kernels from RAYBOX_KERNEL_DIR when set). Run it with\n"
               "POCL_MAX_PTHREAD_COUNT=1 so that CPU time is the walk's.\n");
        return 0;
    }
    if (argc > 1 && (reps = atoi(argv[1])) < 1) {
        fprintf(stderr, "walk_cputime: REPEATS '%s' is not a count\n",
                argv[1]);
        return 2;
    }
    Suite *s = suite_create("walk_cputime");
    TCase *tc = tcase_create("measure");
    tcase_set_timeout(tc, 3000);
    tcase_add_test(tc, measure);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
