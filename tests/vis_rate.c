/* vis_rate.c - visibility segments per second on the OpenCL device, the
 * segments made in work-items (kernels/visibility.cl) against the
 * explicit segments of host/visibility.c's tiles
 * (RAYBOX_CL_VISIBILITY=segments), alternating in the same run, with the
 * bits of the two compared. A measuring tool for docs/gpu.md, not a test.
 *
 *   vis_rate [--boxes N] [--observers N] [--targets N] [--rounds R]
 *            [--hierarchy auto|off]
 *
 * The scene is a city (a grid of buildings 0.5 to 4 high), the points at
 * street level, as in raybox-bench-bvh's line of sight. Per way: the
 * median wall-clock rate over the rounds, and the process CPU time per
 * segment (which other processes on a shared machine do not inflate). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opencl/cl_testhook.h"
#include "raybox.h"

static double now_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1u << 24);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vis_rate [--boxes N] [--observers N] [--targets N]\n"
            "                [--rounds R] [--hierarchy auto|off]\n"
            "Visibility segments/s on the OpenCL device: segments made in\n"
            "work-items against explicit segments (RAYBOX_CL_VISIBILITY=\n"
            "segments), alternating, same bits checked. Defaults: a city of\n"
            "10000 boxes, 1000 x 2000 points, 5 rounds, hierarchy auto.\n");
}

int main(int argc, char **argv)
{
    size_t nb = 10000, n = 1000, m = 2000;
    int rounds = 5, hierarchy = RB_HIERARCHY_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "vis_rate: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--boxes") == 0)
            nb = strtoul(v, NULL, 10);
        else if (strcmp(a, "--observers") == 0)
            n = strtoul(v, NULL, 10);
        else if (strcmp(a, "--targets") == 0)
            m = strtoul(v, NULL, 10);
        else if (strcmp(a, "--rounds") == 0)
            rounds = atoi(v);
        else if (strcmp(a, "--hierarchy") == 0 && strcmp(v, "off") == 0)
            hierarchy = RB_HIERARCHY_OFF;
        else if (strcmp(a, "--hierarchy") != 0 || strcmp(v, "auto") != 0) {
            fprintf(stderr, "vis_rate: bad option %s %s\n", a, v);
            usage(stderr);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64 || !n || !m) {
        fprintf(stderr, "vis_rate: rounds 1..64, points >= 1\n");
        return 2;
    }
    size_t g = 1;
    while (g * g < nb)
        g++;
    rb_box *boxes = malloc((nb ? nb : 1) * sizeof *boxes);
    float *pts = malloc(3 * (n + m) * sizeof *pts);
    size_t bytes = (size_t)rb_visibility_bytes(n, m);
    uint8_t *bits[2] = {malloc(bytes), malloc(bytes)};
    if (!boxes || !pts || !bits[0] || !bits[1]) {
        fprintf(stderr, "vis_rate: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nb; i++) {
        float x = (float)(i % g), y = (float)(i / g);
        boxes[i] = (rb_box){{x, y, 0}, {x + 0.8f, y + 0.8f,
                                        0.5f + 3.5f * uniform()}};
    }
    for (size_t i = 0; i < n + m; i++) {
        float along = uniform() * (float)g;
        float gap = (float)(rng % g) + 0.8f + 0.2f * uniform();
        int swap = uniform() < 0.5f;
        pts[3 * i] = swap ? gap : along;
        pts[3 * i + 1] = swap ? along : gap;
        pts[3 * i + 2] = 0.1f + 1.9f * uniform();
    }
    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_OPENCL;
    o.hierarchy = hierarchy;
    o.cpu_fallback = 0;
    rb_context *ctx[2] = {NULL, NULL};
    const char *name[2] = {"kernel", "segments"};
    for (int w = 0; w < 2; w++) {
        char why[512] = "";
        if (w)
            setenv("RAYBOX_CL_VISIBILITY", "segments", 1);
        int rc = rb_context_create(&o, &ctx[w], why, sizeof why);
        unsetenv("RAYBOX_CL_VISIBILITY");
        if (rc) {
            fprintf(stderr, "vis_rate: OpenCL: %s (%s)\n", rb_status_name(rc),
                    why);
            return 1;
        }
    }
    rb_scene *scene = NULL;
    if (rb_scene_create(ctx[0], 3, boxes, nb, &scene)) {
        fprintf(stderr, "vis_rate: %s\n", rb_context_error(ctx[0])->message);
        return 1;
    }
    rb_visibility_query q = {.scene = scene, .observers = pts,
                             .n_observers = n, .targets = pts + 3 * n,
                             .n_targets = m, .tmin = 0, .tmax = 1};
    double wall[2][64], cpu[2] = {0, 0};
    uint64_t visible[2] = {0, 0};
    for (int r = -1; r < rounds; r++) { /* round -1: builds, uploads */
        for (int w = 0; w < 2; w++) {
            unsigned long long l0 = rb_cl_vis_launches(ctx[w]);
            double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
            double t0 = now_s(CLOCK_MONOTONIC);
            int rc = rb_visibility(ctx[w], &q, bits[w], bytes, &visible[w],
                                   NULL);
            double t1 = now_s(CLOCK_MONOTONIC);
            double c1 = now_s(CLOCK_PROCESS_CPUTIME_ID);
            if (rc) {
                fprintf(stderr, "vis_rate: %s: %s\n", name[w],
                        rb_context_error(ctx[w])->message);
                return 1;
            }
            if ((rb_cl_vis_launches(ctx[w]) > l0) != (w == 0)) {
                fprintf(stderr, "vis_rate: %s did not take its path\n",
                        name[w]);
                return 1;
            }
            if (r < 0)
                continue;
            wall[w][r] = t1 - t0;
            cpu[w] += c1 - c0;
        }
    }
    int same = visible[0] == visible[1] && !memcmp(bits[0], bits[1], bytes);
    double segs = (double)n * (double)m;
    printf("city of %zu boxes, %zu x %zu = %.0f segments, %llu visible, "
           "hierarchy %s, %d rounds; bits %s\n",
           nb, n, m, segs, (unsigned long long)visible[0],
           hierarchy == RB_HIERARCHY_OFF ? "off" : "auto", rounds,
           same ? "the same" : "DIFFER");
    double med[2];
    for (int w = 0; w < 2; w++) {
        qsort(wall[w], (size_t)rounds, sizeof(double), cmp_double);
        med[w] = wall[w][rounds / 2];
        printf("  %-9s %9.3f Msegs/s (median wall), %8.1f ns CPU time a "
               "segment\n",
               name[w], segs / med[w] / 1e6, cpu[w] * 1e9 / segs / rounds);
    }
    printf("  kernel / segments: %.2fx (wall), %.2fx (CPU time)\n",
           med[1] / med[0], cpu[1] / cpu[0]);
    rb_scene_destroy(scene);
    rb_context_destroy(ctx[0]);
    rb_context_destroy(ctx[1]);
    free(boxes);
    free(pts);
    free(bits[0]);
    free(bits[1]);
    return same ? 0 : 1;
}
