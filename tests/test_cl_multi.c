/* test_cl_multi.c - one batch over several OpenCL devices
 * (rb_context_options.devices, host/opencl/cl_multi.c): every mode, 2D
 * and 3D, inline boxes, scenes walked through their hierarchy, a scene of
 * boxes and shapes walked through its joint tree, shapes,
 * visibility and an invalid ray in the second device's run give the
 * answers of one device bit for bit, with the rays split over both; bad
 * device lists are refused naming the problem; a device failure falls
 * back to the CPU with the same answers. Needs two OpenCL devices:
 * tests/CMakeLists.txt runs it with POCL_DEVICES="pthread pthread", and
 * with fewer it fails (it is not skipped). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "opencl/cl_testhook.h"
#include "scenes.h"
#include "testutil.h"

static rb_context *multi(const char *devices, int fallback)
{
    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_OPENCL;
    o.devices = devices;
    o.cpu_fallback = fallback;
    rb_context *ctx = NULL;
    char why[256] = "";
    int rc = rb_context_create(&o, &ctx, why, sizeof why);
    ck_assert_msg(rc == RB_OK, "devices %s: %s (%s)", devices,
                  rb_status_name(rc), why);
    ck_assert_uint_eq(rb_cl_device_count(ctx), 2);
    return ctx;
}

static rb_context *one_device(void)
{
    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_OPENCL;
    o.device_index = 0;
    rb_context *ctx = NULL;
    ck_assert_int_eq(rb_context_create(&o, &ctx, NULL, 0), RB_OK);
    ck_assert_uint_eq(rb_cl_device_count(ctx), 1);
    return ctx;
}

/* The run was split over both devices, shares adding up to one. */
static void assert_split(const rb_run_info *info, const char *what)
{
    ck_assert_msg(info->devices == 2, "%s: %u devices", what, info->devices);
    ck_assert_msg(info->device_share[0] > 0 && info->device_share[1] > 0,
                  "%s: split %.3f / %.3f", what, info->device_share[0],
                  info->device_share[1]);
    double sum = info->device_share[0] + info->device_share[1];
    ck_assert_msg(sum > 0.999 && sum < 1.001, "%s: shares add to %f", what,
                  sum);
    ck_assert_msg(strstr(info->device, " + "), "%s: device \"%s\"", what,
                  info->device);
}

/* b in `mode` (against scene, or b's boxes) on one device and on two:
 * the same answers bit for bit, the run split over both. */
static void same_split(rb_context *one, rb_context *two, const rbt_batch *b,
                       rb_mode mode, const rb_scene *scene,
                       uint32_t max_hits, const char *what)
{
    rbt_out want, got;
    rbt_out_init(&want, b->n_rays, max_hits);
    rbt_out_init(&got, b->n_rays, max_hits);
    ck_assert_int_eq(rbt_run(one, b, mode, scene, &want), RB_OK);
    ck_assert_int_eq(rbt_run(two, b, mode, scene, &got), RB_OK);
    rbt_assert_same(mode, &want, &got, what);
    assert_split(&got.info, what);
    rbt_out_free(&want);
    rbt_out_free(&got);
}

/* n spheres in the cube [-50, 50]^3, radii 0.5 to 4. */
static void random_spheres(rbt_rng *g, rb_sphere *out, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = (rb_sphere){{rbt_uniform(g, -50, 50), rbt_uniform(g, -50, 50),
                              rbt_uniform(g, -50, 50)},
                             rbt_uniform(g, 0.5f, 4)};
}

START_TEST(test_devices_refused)
{
    static const struct {
        const char *spec;
        int rc;
        const char *says;
    } bad[] = {{"0,0", RB_EINVAL, "listed twice"},
               {"7", RB_ENODEV, "no device 7"},
               {"one", RB_EINVAL, "not \"all\""},
               {"0,", RB_EINVAL, "not \"all\""},
               {"-1", RB_EINVAL, "not \"all\""}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rb_context_options o;
        rb_context_options_init(&o);
        o.backend = RB_BACKEND_OPENCL;
        o.devices = bad[i].spec;
        rb_context *ctx = NULL;
        char why[256] = "";
        int rc = rb_context_create(&o, &ctx, why, sizeof why);
        ck_assert_msg(rc == bad[i].rc, "%s: %s", bad[i].spec,
                      rb_status_name(rc));
        ck_assert_msg(strstr(why, bad[i].says), "%s: \"%s\"", bad[i].spec,
                      why);
        ck_assert_ptr_null(ctx);
        /* auto refuses a malformed list too, rather than hiding it */
        o.backend = RB_BACKEND_AUTO;
        rc = rb_context_create(&o, &ctx, why, sizeof why);
        if (bad[i].rc == RB_EINVAL)
            ck_assert_int_eq(rc, RB_EINVAL);
        rb_context_destroy(ctx);
    }
    rb_context *ctx = multi("0,1", 1);
    rb_context_destroy(ctx);
}
END_TEST

START_TEST(test_every_mode)
{
    rb_context *one = one_device(), *two = multi("all", 0);
    static const rb_mode modes[] = {RB_MODE_PAIRS, RB_MODE_NEAREST,
                                    RB_MODE_ANY, RB_MODE_COUNT, RB_MODE_ALL};
    for (unsigned dims = 2; dims <= 3; dims++) {
        for (size_t mi = 0; mi < 5; mi++) {
            size_t nr = 20011, nb = modes[mi] == RB_MODE_PAIRS ? nr : 300;
            rbt_batch b;
            rbt_batch_make(&b, dims, nr, nb, 100 + dims * 10 + mi);
            char what[64];
            snprintf(what, sizeof what, "%uD %s", dims,
                     rb_mode_name(modes[mi]));
            same_split(one, two, &b, modes[mi], NULL, 4, what);
            rbt_batch_free(&b);
        }
    }
    rb_context_destroy(one);
    rb_context_destroy(two);
}
END_TEST

/* Scenes through their hierarchy, every scene shape, and a scene with
 * shapes beyond boxes. */
START_TEST(test_scenes)
{
    rb_context *one = one_device(), *two = multi("all", 0);
    rbt_rng g = {31};
    enum { NB = 2000, NR = 20000 }; /* deep: at most 2000 */
    rb_box *boxes = malloc(NB * sizeof *boxes);
    rb_ray *rays = malloc(NR * sizeof *rays);
    for (int kind = 0; kind < RBT_SC_KINDS; kind++) {
        memset(boxes, 0, NB * sizeof *boxes); /* as the generators expect */
        size_t nb = rbt_scene_boxes(kind, NB, &g, boxes);
        rbt_scene_rays(&g, boxes, nb, rays, NR);
        rb_scene *scene = NULL;
        int src = rb_scene_create(one, 3, boxes, nb, &scene);
        ck_assert_msg(src == RB_OK, "%s: %s", rbt_scene_kind_name[kind],
                      rb_context_error(one)->message);
        rbt_batch b = {.dims = 3, .n_rays = NR, .rays = rays};
        static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                        RB_MODE_COUNT, RB_MODE_ALL};
        for (int mi = 0; mi < 4; mi++) {
            unsigned long long walks = rb_cl_walks(two);
            same_split(one, two, &b, modes[mi], scene, 8,
                       rbt_scene_kind_name[kind]);
            if (nb >= 256) /* auto walks scenes from 256 boxes on */
                ck_assert_uint_ge(rb_cl_walks(two), walks + 2);
        }
        rb_scene_destroy(scene);
    }
    /* too few shapes to walk (query.c): the box pass and the shape pass
     * (brute force) are split too */
    rb_sphere sph[50];
    random_spheres(&g, sph, 50);
    rb_shapes sh = {.spheres = sph, .n_spheres = 50};
    size_t nb = rbt_scene_boxes(0, 400, &g, boxes);
    rbt_scene_rays(&g, boxes, nb, rays, NR);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(one, 3, boxes, nb, &sh, &scene),
                     RB_OK);
    rbt_batch b = {.dims = 3, .n_rays = NR, .rays = rays};
    same_split(one, two, &b, RB_MODE_NEAREST, scene, 8, "shapes");
    rb_scene_destroy(scene);
    /* pairs of shapes: ray i of the second device's part against
     * element i of the whole batch, not of its part */
    rb_sphere *many = malloc(NR * sizeof *many);
    for (size_t i = 0; i < NR; i++)
        many[i] = (rb_sphere){{rays[i].origin[0] + rays[i].dir[0],
                               rays[i].origin[1] + rays[i].dir[1],
                               rays[i].origin[2] + rays[i].dir[2]},
                              i % 2 ? 0.5f : 0.0f};
    rb_query q = {.mode = RB_MODE_PAIRS, .dims = 3, .rays = rays,
                  .n_rays = NR, .shapes = {.spheres = many, .n_spheres = NR}};
    rbt_out want, got;
    rbt_out_init(&want, NR, 8);
    rbt_out_init(&got, NR, 8);
    rb_results r1 = {.hits = want.hits, .capacity = NR};
    rb_results r2 = {.hits = got.hits, .capacity = NR};
    ck_assert_int_eq(rb_intersect(one, &q, &r1), RB_OK);
    ck_assert_int_eq(rb_intersect(two, &q, &r2), RB_OK);
    assert_split(&r2.info, "shape pairs");
    rbt_assert_same(RB_MODE_PAIRS, &want, &got, "shapes");
    size_t hits = 0;
    for (size_t i = 0; i < NR; i++)
        hits += want.hits[i].hit != 0;
    ck_assert_uint_gt(hits, NR / 4);
    rbt_out_free(&want);
    rbt_out_free(&got);
    free(many);
    rb_context_destroy(one);
    rb_context_destroy(two);
    free(boxes);
    free(rays);
}
END_TEST

/* A scene of boxes and spheres, whose tree holds both (a joint tree):
 * each device walks it for its run of rays, once for boxes and shapes
 * (shape walks, no box walk), in every mode, with the answers of one
 * device; the lowest invalid ray is named; a device failure falls back to
 * the CPU's joint walk with the same answers. */
START_TEST(test_joint_scene)
{
    rb_context *one = one_device(), *two = multi("all", 0);
    rbt_rng g = {47};
    /* 8 boxes a shape: joint; 64 shapes: walked (query.c) */
    enum { NB = 512, NS = 64, NR = 20000 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = malloc(NR * sizeof *rays);
    rb_sphere sph[NS];
    random_spheres(&g, sph, NS);
    rb_shapes sh = {.spheres = sph, .n_spheres = NS};
    size_t nb = rbt_scene_boxes(0, NB, &g, boxes);
    rbt_scene_rays(&g, boxes, nb, rays, NR);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(one, 3, boxes, nb, &sh, &scene),
                     RB_OK);
    rbt_batch b = {.dims = 3, .n_rays = NR, .rays = rays};
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    for (int mi = 0; mi < 4; mi++) {
        unsigned long long walks = rb_cl_walks(two);
        unsigned long long shape_walks = rb_cl_shape_walks(two);
        same_split(one, two, &b, modes[mi], scene, 8, "joint");
        ck_assert_uint_eq(rb_cl_walks(two), walks); /* no box pass */
        ck_assert_uint_ge(rb_cl_shape_walks(two), shape_walks + 2);
    }
    /* two invalid rays: the lower is named, whichever run holds it */
    rb_ray keep[2] = {rays[15000], rays[19000]};
    rays[19000].dir[1] = NAN;
    rays[15000].origin[2] = INFINITY;
    rbt_out o;
    rbt_out_init(&o, NR, 8);
    ck_assert_int_eq(rbt_run(two, &b, RB_MODE_COUNT, scene, &o), RB_EINPUT);
    const rb_error *e = rb_context_error(two);
    ck_assert_int_eq(e->element, RB_ELEMENT_RAY);
    ck_assert_uint_eq(e->index, 15000);
    ck_assert_int_eq(e->field, 2);
    rays[15000] = keep[0];
    rays[19000] = keep[1];
    /* a failing device: the CPU's joint walk answers */
    rb_context *fb = multi("all", 1);
    rbt_out want;
    rbt_out_init(&want, NR, 8);
    ck_assert_int_eq(rbt_run(one, &b, RB_MODE_ALL, scene, &want), RB_OK);
    rb_cl_fail_after(fb, 0);
    ck_assert_int_eq(rbt_run(fb, &b, RB_MODE_ALL, scene, &o), RB_OK);
    ck_assert_int_eq(o.info.fell_back, 1);
    rbt_assert_same(RB_MODE_ALL, &want, &o, "joint, fallen back");
    rbt_out_free(&want);
    rbt_out_free(&o);
    rb_context_destroy(fb);
    rb_scene_destroy(scene);
    rb_context_destroy(one);
    rb_context_destroy(two);
    free(boxes);
    free(rays);
}
END_TEST

/* Invalid rays in both runs: the lowest is named, as on one device. */
START_TEST(test_invalid_ray)
{
    rb_context *two = multi("all", 0);
    rbt_batch b;
    rbt_batch_make(&b, 3, 20000, 100, 9);
    rbt_batch_set_ray(&b, 19000, 4, NAN);
    rbt_batch_set_ray(&b, 15000, 1, INFINITY);
    rbt_out o;
    rbt_out_init(&o, b.n_rays, 2);
    ck_assert_int_eq(rbt_run(two, &b, RB_MODE_COUNT, NULL, &o), RB_EINPUT);
    const rb_error *e = rb_context_error(two);
    ck_assert_int_eq(e->element, RB_ELEMENT_RAY);
    ck_assert_uint_eq(e->index, 15000);
    ck_assert_int_eq(e->field, 1);
    ck_assert_msg(strstr(e->message, "ray 15000"), "%s", e->message);
    rbt_out_free(&o);
    rbt_batch_free(&b);
    rb_context_destroy(two);
}
END_TEST

START_TEST(test_visibility_split)
{
    rb_context *one = one_device(), *two = multi("all", 0);
    rbt_rng g = {4};
    rb_box boxes[2000];
    size_t nb = rbt_scene_boxes(0, 2000, &g, boxes);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(one, 3, boxes, nb, &scene), RB_OK);
    enum { N = 301, M = 203 };
    float obs[3 * N], tgt[3 * M];
    for (int i = 0; i < 3 * N; i++)
        obs[i] = rbt_uniform(&g, -60, 60);
    for (int i = 0; i < 3 * M; i++)
        tgt[i] = rbt_uniform(&g, -60, 60);
    rb_visibility_query q = {.scene = scene, .observers = obs,
                             .n_observers = N, .targets = tgt,
                             .n_targets = M, .tmin = 0, .tmax = 1};
    size_t bytes = (size_t)rb_visibility_bytes(N, M);
    uint8_t *want = malloc(bytes), *got = malloc(bytes);
    uint64_t v1 = 0, v2 = 0;
    rb_run_info info;
    ck_assert_int_eq(rb_visibility(one, &q, want, bytes, &v1, NULL), RB_OK);
    unsigned long long launches = rb_cl_vis_launches(two);
    ck_assert_int_eq(rb_visibility(two, &q, got, bytes, &v2, &info), RB_OK);
    ck_assert(memcmp(want, got, bytes) == 0);
    ck_assert_uint_eq(v1, v2);
    ck_assert_uint_ge(rb_cl_vis_launches(two), launches + 2);
    assert_split(&info, "visibility");
    free(want);
    free(got);
    rb_scene_destroy(scene);
    rb_context_destroy(one);
    rb_context_destroy(two);
}
END_TEST

/* A failed call on the first device: with fallback the CPU answers the
 * whole batch the same; without, the device's status. */
/* rb_context_warm_up over several devices launches every kernel on each
 * of them (a one-ray query would reach only one). */
START_TEST(test_warm_up_every_device)
{
    rb_context *ctx = multi("all", 0);
    char names[512];
    ck_assert_int_eq(rb_context_warm_up(ctx), RB_OK);
    size_t left = rb_cl_kernels_unlaunched(ctx, names, sizeof names);
    ck_assert_msg(left == 0, "%zu kernels not launched on every device: %s",
                  left, names);
    rb_context_destroy(ctx);
}
END_TEST

START_TEST(test_device_failure)
{
    rb_context *cpu = rbt_context(RBT_CPU);
    rbt_batch b;
    rbt_batch_make(&b, 3, 20000, 200, 17);
    rbt_out want, got;
    rbt_out_init(&want, b.n_rays, 4);
    rbt_out_init(&got, b.n_rays, 4);
    ck_assert_int_eq(rbt_run(cpu, &b, RB_MODE_NEAREST, NULL, &want), RB_OK);
    for (int fallback = 1; fallback >= 0; fallback--) {
        rb_context *two = multi("all", fallback);
        rb_cl_fail_after(two, 0);
        int rc = rbt_run(two, &b, RB_MODE_NEAREST, NULL, &got);
        if (fallback) {
            ck_assert_int_eq(rc, RB_OK);
            ck_assert_int_eq(got.info.fell_back, 1);
            rbt_assert_same(RB_MODE_NEAREST, &want, &got, "fallback");
        } else {
            ck_assert_msg(rc == RB_EDEVICE || rc == RB_EDEVMEM, "%s",
                          rb_status_name(rc));
            ck_assert_msg(strstr(rb_context_error(two)->message,
                                 "CL_OUT_OF_RESOURCES"),
                          "%s", rb_context_error(two)->message);
        }
        ck_assert_int_eq(rbt_run(two, &b, RB_MODE_NEAREST, NULL, &got),
                         RB_OK);
        rbt_assert_same(RB_MODE_NEAREST, &want, &got, "after the failure");
        rb_context_destroy(two);
    }
    rbt_out_free(&want);
    rbt_out_free(&got);
    rbt_batch_free(&b);
    rb_context_destroy(cpu);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cl_multi");
    TCase *tc = tcase_create("cl_multi");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_devices_refused);
    tcase_add_test(tc, test_every_mode);
    tcase_add_test(tc, test_scenes);
    tcase_add_test(tc, test_joint_scene);
    tcase_add_test(tc, test_invalid_ray);
    tcase_add_test(tc, test_visibility_split);
    tcase_add_test(tc, test_device_failure);
    tcase_add_test(tc, test_warm_up_every_device);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
