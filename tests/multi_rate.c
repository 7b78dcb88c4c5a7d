/* multi_rate.c - one batch on one OpenCL device against the same batch
 * split over several (rb_context_options.devices), alternating in the
 * same run, answers compared; prints the split (each device's share and
 * measured speed) and the speedup. A measuring tool for docs/gpu.md, not
 * a test.
 *
 *   multi_rate [--devices all|LIST] [--one INDEX] [--rays N] [--boxes N]
 *              [--rounds R]
 *
 * --one: the single device to compare with (default 0).
 *
 * Scene: uniform random boxes in a cube (tests/support/scenes.c), rays
 * through it; nearest and count through the hierarchy, then visibility
 * (sqrt(N) x sqrt(N) points). Run it with POCL_DEVICES="pthread pthread"
 * to get two PoCL devices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opencl/cl_testhook.h"
#include "scenes.h"
#include "testutil.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int one_index = 0;

static rb_context *make(const char *devices)
{
    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_OPENCL;
    o.device_index = one_index;
    o.devices = devices;
    o.cpu_fallback = 0;
    rb_context *ctx = NULL;
    char why[256] = "";
    int rc = rb_context_create(&o, &ctx, why, sizeof why);
    if (rc) {
        fprintf(stderr, "multi_rate: %s: %s (%s)\n",
                devices ? devices : "device 0", rb_status_name(rc), why);
        exit(1);
    }
    return ctx;
}

static void report(const char *what, double *t1, double *t2, int rounds,
                   double units, const rb_run_info *info, rb_context *two)
{
    qsort(t1, (size_t)rounds, sizeof(double), cmp_double);
    qsort(t2, (size_t)rounds, sizeof(double), cmp_double);
    double m1 = t1[rounds / 2], m2 = t2[rounds / 2];
    printf("%-10s one device %8.3f M/s, split %8.3f M/s: %.2fx; shares",
           what, units / m1 / 1e6, units / m2 / 1e6, m1 / m2);
    for (unsigned k = 0; k < info->devices; k++)
        printf(" %.3f", info->device_share[k]);
    double sp[RB_MAX_DEVICES];
    size_t n = rb_cl_device_speeds(two, sp, RB_MAX_DEVICES);
    printf("; speeds");
    for (size_t k = 0; k < n; k++)
        printf(" %.0f", sp[k]);
    printf(" /ms\n");
}

int main(int argc, char **argv)
{
    const char *devices = "all";
    size_t nr = 1000000, nb = 100000;
    int rounds = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            printf("usage: multi_rate [--devices all|LIST] [--one INDEX] "
                   "[--rays N] [--boxes N] [--rounds R]\n"
                   "One OpenCL device against a batch split over several: "
                   "rates, split, speedup.\nDefaults: all, 1000000 rays, "
                   "100000 boxes, 5 rounds.\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "multi_rate: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--devices") == 0)
            devices = v;
        else if (strcmp(a, "--one") == 0)
            one_index = atoi(v);
        else if (strcmp(a, "--rays") == 0)
            nr = strtoul(v, NULL, 10);
        else if (strcmp(a, "--boxes") == 0)
            nb = strtoul(v, NULL, 10);
        else if (strcmp(a, "--rounds") == 0)
            rounds = atoi(v);
        else {
            fprintf(stderr, "multi_rate: unknown option %s\n", a);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64 || nr < 1) {
        fprintf(stderr, "multi_rate: rounds 1..64, rays >= 1\n");
        return 2;
    }
    rb_context *one = make(NULL), *two = make(devices);
    rbt_rng g = {42};
    rb_box *boxes = calloc(nb ? nb : 1, sizeof *boxes);
    rb_ray *rays = calloc(nr, sizeof *rays);
    rb_hit *h1 = calloc(nr, sizeof *h1), *h2 = calloc(nr, sizeof *h2);
    uint32_t *c1 = calloc(nr, sizeof *c1), *c2 = calloc(nr, sizeof *c2);
    if (!boxes || !rays || !h1 || !h2 || !c1 || !c2)
        return 1;
    nb = rbt_scene_boxes(RBT_SC_UNIFORM, nb, &g, boxes);
    rbt_scene_rays(&g, boxes, nb, rays, nr);
    rb_scene *scene = NULL;
    if (rb_scene_create(one, 3, boxes, nb, &scene))
        return 1;
    printf("%zu boxes (uniform), %zu rays, %d rounds\n", nb, nr, rounds);
    int same = 1;
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_COUNT};
    for (int mi = 0; mi < 2; mi++) {
        double t1[64], t2[64];
        rb_run_info info = {0};
        for (int r = -1; r < rounds; r++) {
            for (int w = 0; w < 2; w++) {
                rb_query q = {.mode = modes[mi], .dims = 3, .rays = rays,
                              .n_rays = nr, .scene = scene};
                rb_results res = {.hits = w ? h2 : h1,
                                  .counts = w ? c2 : c1, .capacity = nr};
                double t0 = now_s();
                int rc = rb_intersect(w ? two : one, &q, &res);
                double t = now_s() - t0;
                if (rc) {
                    fprintf(stderr, "multi_rate: %s\n",
                            rb_context_error(w ? two : one)->message);
                    return 1;
                }
                if (r < 0)
                    continue;
                (w ? t2 : t1)[r] = t;
                if (w)
                    info = res.info;
            }
        }
        same &= modes[mi] == RB_MODE_NEAREST
                    ? memcmp(h1, h2, nr * sizeof *h1) == 0
                    : memcmp(c1, c2, nr * sizeof *c1) == 0;
        report(rb_mode_name(modes[mi]), t1, t2, rounds, (double)nr, &info,
               two);
    }
    size_t side = (size_t)sqrt((double)nr);
    float *pts = malloc(6 * side * sizeof *pts);
    size_t bytes = (size_t)rb_visibility_bytes(side, side);
    uint8_t *b1 = malloc(bytes), *b2 = malloc(bytes);
    if (!pts || !b1 || !b2)
        return 1;
    float lo[3], hi[3];
    rbt_scene_bounds(boxes, nb, lo, hi);
    for (size_t i = 0; i < 2 * side; i++)
        for (int a = 0; a < 3; a++)
            pts[3 * i + (size_t)a] = rbt_uniform(&g, lo[a], hi[a]);
    rb_visibility_query vq = {.scene = scene, .observers = pts,
                              .n_observers = side, .targets = pts + 3 * side,
                              .n_targets = side, .tmin = 0, .tmax = 1};
    double t1[64], t2[64];
    rb_run_info info = {0};
    for (int r = -1; r < rounds; r++) {
        for (int w = 0; w < 2; w++) {
            rb_run_info in;
            double t0 = now_s();
            int rc = rb_visibility(w ? two : one, &vq, w ? b2 : b1, bytes,
                                   NULL, &in);
            double t = now_s() - t0;
            if (rc)
                return 1;
            if (r < 0)
                continue;
            (w ? t2 : t1)[r] = t;
            if (w)
                info = in;
        }
    }
    same &= memcmp(b1, b2, bytes) == 0;
    report("visibility", t1, t2, rounds, (double)side * (double)side, &info,
           two);
    printf("answers %s\n", same ? "the same" : "DIFFER");
    rb_scene_destroy(scene);
    rb_context_destroy(one);
    rb_context_destroy(two);
    return same ? 0 : 1;
}
