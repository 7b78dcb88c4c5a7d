/* bench_bvh.c - raybox-bench-bvh: raybox's hierarchy against Embree 3 on
 * the same random boxes and rays with the same number of threads, and
 * raybox's OpenCL walk (kernels/bvh.cl) on the same scenes.
 *
 *   raybox-bench-bvh [--boxes N[,N...]] [--rays N] [--threads N] [--json]
 *                    [--no-embree] [--no-opencl] [--seed S] [--repeat R]
 *
 * Scenes are N random boxes in the unit cube (sides 0.2-1.0 / cbrt(N), so
 * a ray crosses a few dozen boxes over the cube); rays start at uniform
 * points of the cube in uniform directions, t in [0, inf). raybox answers
 * through rb_intersect on a scene (validation, preparation and threads
 * included); Embree gets each box as six quads (RTC_GEOMETRY_TYPE_QUAD,
 * default build quality) and the rays through rtcIntersect1/rtcOccluded1,
 * traced on the context's thread pool. Build rates count boxes per second
 * of wall time until the scene can be queried (raybox: rb_scene_create,
 * validation included; Embree: rtcCommitScene). Refit moves every box a
 * little: rb_scene_set of all boxes, and the tree refit alone. --repeat R
 * runs every query (both sides) R times and keeps the best time, for
 * shared, noisy machines.
 *
 * OpenCL: a second context on the first OpenCL device (PoCL on a machine
 * without a GPU) queries the same scene objects in all four modes after
 * one ray has put the hierarchy on the device (its time is reported as
 * the upload) and a few rays have warmed every kernel; the answers' sums
 * must equal the CPU's. The OpenCL context has the same threads for its
 * host side; PoCL itself uses every core (POCL_MAX_PTHREAD_COUNT). No
 * OpenCL device is reported with its reason, not an error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_bvh.h"
#include "bvh/bvh.h"
#include "internal.h"

#define MAX_SCENES 8
#define ALL_MAX_HITS 16

typedef struct scene_result {
    size_t boxes;
    rb_scene_stats st;
    bench_side rb, em;
    int have_embree;
    char embree_error[256];
    double count_ms, all_ms, set_ms, refit_ms;
    uint64_t count_sum, all_sum;
    /* OpenCL, modes nearest, any, count, all (rb_mode - 1) */
    int have_cl;
    double cl_ms[4], cl_upload_ms;
    uint64_t cl_sum[4];
    int cl_same; /* every sum equals the CPU's */
} scene_result;

double bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s)
{
    return (float)((double)(rng_next(s) >> 40) / 16777216.0);
}

static void make_boxes(uint64_t *s, rb_box *b, size_t n)
{
    float side = 1.0f / cbrtf((float)n);
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            float w = side * (0.2f + 0.8f * uniform(s));
            b[i].min[a] = uniform(s) * (1 - w);
            b[i].max[a] = b[i].min[a] + w;
        }
    }
}

static void make_rays(uint64_t *s, rb_ray *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            r[i].origin[a] = uniform(s);
            r[i].dir[a] = uniform(s) * 2 - 1;
        }
        r[i].tmin = 0;
        r[i].tmax = INFINITY;
    }
}

static int fail(const char *what, rb_context *ctx, int rc)
{
    fprintf(stderr, "raybox-bench-bvh: %s: %s (%s)\n", what,
            rb_status_name(rc), ctx ? rb_context_error(ctx)->message : "");
    return 1;
}

static int repeat = 1;

/* One mode through the scene: best wall time of `repeat` runs and the
 * sum of its answers. */
static int query(rb_context *ctx, const rb_scene *scene, rb_mode mode,
                 const rb_ray *rays, size_t n, rb_results *res, double *ms,
                 uint64_t *sum)
{
    rb_query q = {.mode = mode, .dims = 3, .rays = rays, .n_rays = n,
                  .scene = scene, .max_hits = ALL_MAX_HITS};
    for (int k = 0; k < repeat; k++) {
        double t0 = bench_now_ms();
        int rc = rb_intersect(ctx, &q, res);
        double t = bench_now_ms() - t0;
        if (rc)
            return fail(rb_mode_name(mode), ctx, rc);
        if (k == 0 || t < *ms)
            *ms = t;
    }
    *sum = 0;
    for (size_t i = 0; i < n; i++) {
        switch (mode) {
        case RB_MODE_NEAREST:
            *sum += res->hits[i].hit;
            break;
        case RB_MODE_ANY:
            *sum += res->any[i];
            break;
        default:
            *sum += res->counts[i];
            break;
        }
    }
    return 0;
}

/* The four modes on `cl`, against the scene the CPU context has just
 * measured. */
static int bench_opencl(rb_context *cl, const rb_scene *scene,
                        const rb_ray *rays, size_t nr, rb_results *res,
                        scene_result *out)
{
    /* One ray uploads the hierarchy; then a few rays per mode, so that
     * no timed query pays for a lazy compile (PoCL builds a kernel's
     * work-group function at its first launch). */
    rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = rays,
                  .n_rays = 1, .scene = scene, .max_hits = ALL_MAX_HITS};
    double t0 = bench_now_ms();
    int rc = rb_intersect(cl, &q, res);
    out->cl_upload_ms = bench_now_ms() - t0;
    q.n_rays = nr < 64 ? nr : 64;
    for (int m = 0; m < 4 && !rc; m++) {
        q.mode = (rb_mode)(RB_MODE_NEAREST + m);
        rc = rb_intersect(cl, &q, res);
    }
    if (rc)
        return fail("opencl warm-up", cl, rc);
    const uint64_t cpu_sum[4] = {out->rb.nearest_hits, out->rb.any_hits,
                                 out->count_sum, out->all_sum};
    out->cl_same = 1;
    for (int m = 0; m < 4; m++) {
        rb_mode mode = (rb_mode)(RB_MODE_NEAREST + m);
        if (query(cl, scene, mode, rays, nr, res, &out->cl_ms[m],
                  &out->cl_sum[m]))
            return 1;
        if (strcmp(res->info.backend, "opencl") != 0) {
            fprintf(stderr, "raybox-bench-bvh: opencl %s answered by %s: "
                            "%s\n",
                    rb_mode_name(mode), res->info.backend,
                    res->info.fallback_reason);
            return 1;
        }
        out->cl_same &= out->cl_sum[m] == cpu_sum[m];
    }
    out->have_cl = 1;
    return 0;
}

static int bench_raybox(rb_context *ctx, rb_context *cl, rb_box *boxes,
                        size_t nb, const rb_ray *rays, size_t nr,
                        scene_result *out)
{
    rb_results res = {.capacity = nr};
    res.hits = malloc(nr * sizeof *res.hits);
    res.any = malloc(nr);
    res.counts = malloc(nr * sizeof *res.counts);
    res.list = malloc(nr * ALL_MAX_HITS * sizeof *res.list);
    uint32_t *idx = malloc(nb * sizeof *idx);
    rb_scene *scene = NULL;
    int rc = 1;
    if (!res.hits || !res.any || !res.counts || !res.list || !idx) {
        fprintf(stderr, "raybox-bench-bvh: out of memory\n");
        goto done;
    }
    double t0 = bench_now_ms();
    int st = rb_scene_create(ctx, 3, boxes, nb, &scene);
    out->rb.build_ms = bench_now_ms() - t0;
    if (st) {
        rc = fail("rb_scene_create", ctx, st);
        goto done;
    }
    rb_scene_stats_get(scene, &out->st);
    out->rb.bytes_per_box = out->st.bytes_per_box;

    if (query(ctx, scene, RB_MODE_NEAREST, rays, nr, &res,
              &out->rb.nearest_ms, &out->rb.nearest_hits) ||
        query(ctx, scene, RB_MODE_ANY, rays, nr, &res, &out->rb.any_ms,
              &out->rb.any_hits) ||
        query(ctx, scene, RB_MODE_COUNT, rays, nr, &res, &out->count_ms,
              &out->count_sum) ||
        query(ctx, scene, RB_MODE_ALL, rays, nr, &res, &out->all_ms,
              &out->all_sum))
        goto done;
    if (cl && bench_opencl(cl, scene, rays, nr, &res, out))
        goto done;

    /* Refit: every box moves by up to a tenth of its size. */
    uint64_t s = 99;
    for (size_t i = 0; i < nb; i++) {
        idx[i] = (uint32_t)i;
        for (int a = 0; a < 3; a++) {
            float d = (uniform(&s) - 0.5f) * 0.2f *
                      (boxes[i].max[a] - boxes[i].min[a]);
            boxes[i].min[a] += d;
            boxes[i].max[a] += d;
        }
    }
    t0 = bench_now_ms();
    st = rb_scene_set(ctx, scene, idx, boxes, nb);
    out->set_ms = bench_now_ms() - t0;
    if (st) {
        rc = fail("rb_scene_set", ctx, st);
        goto done;
    }
    rb_bvh copy;
    if (rb_bvh_clone(&ctx->alloc, rb_scene_bvh(scene), &copy) == RB_OK) {
        t0 = bench_now_ms();
        rb_bvh_refit(&copy);
        out->refit_ms = bench_now_ms() - t0;
        rb_bvh_free(&copy);
    }
    rb_scene_stats after;
    rb_scene_stats_get(scene, &after);
    out->st.bvh_rebuilds = after.bvh_rebuilds;
    rc = 0;
done:
    rb_scene_destroy(scene);
    free(res.hits);
    free(res.any);
    free(res.counts);
    free(res.list);
    free(idx);
    return rc;
}

static double rate(double n, double ms)
{
    return ms > 0 ? n / ms / 1e3 : 0; /* millions per second */
}

static void print_table(const scene_result *r, size_t nr)
{
    const rb_scene_stats *st = &r->st;
    printf("\n%zu boxes: hierarchy %llu nodes, depth %u, SAH %.1f, "
           "%.1f B/box, %llu rebuilds after the refit\n",
           r->boxes, (unsigned long long)st->bvh_nodes, st->bvh_depth,
           st->bvh_sah, st->bytes_per_box,
           (unsigned long long)st->bvh_rebuilds);
    printf("  %-24s %12s %12s %8s\n", "", "raybox", "embree", "ratio");
#define ROW(name, a, b)                                                        \
    do {                                                                       \
        if (r->have_embree)                                                    \
            printf("  %-24s %12.3f %12.3f %7.2fx\n", name, a, b,               \
                   (b) > 0 ? (a) / (b) : 0);                                   \
        else                                                                   \
            printf("  %-24s %12.3f %12s %8s\n", name, a, "-", "-");           \
    } while (0)
    ROW("build [Mboxes/s]", rate((double)r->boxes, r->rb.build_ms),
        rate((double)r->boxes, r->em.build_ms));
    ROW("nearest [Mrays/s]", rate((double)nr, r->rb.nearest_ms),
        rate((double)nr, r->em.nearest_ms));
    ROW("any [Mrays/s]", rate((double)nr, r->rb.any_ms),
        rate((double)nr, r->em.any_ms));
#undef ROW
    printf("  %-24s %12.3f %12s\n", "count [Mrays/s]",
           rate((double)nr, r->count_ms), "-");
    printf("  %-24s %12.3f %12s\n", "all [Mrays/s]",
           rate((double)nr, r->all_ms), "-");
    printf("  %-24s %12.1f %12s\n", "build [ms]", r->rb.build_ms,
           r->have_embree ? "" : "-");
    if (r->have_embree)
        printf("  %-24s %12s %12.1f\n", "embree build [ms]", "",
               r->em.build_ms);
    printf("  %-24s %12.1f\n", "refit, tree only [ms]", r->refit_ms);
    printf("  %-24s %12.1f\n", "rb_scene_set, all [ms]", r->set_ms);
    printf("  %-24s %12.1f %12.1f\n", "memory [B/box]", r->rb.bytes_per_box,
           r->have_embree ? r->em.bytes_per_box : 0.0);
    printf("  %-24s %12llu %12llu\n", "nearest hits",
           (unsigned long long)r->rb.nearest_hits,
           (unsigned long long)r->em.nearest_hits);
    printf("  %-24s %12llu %12llu\n", "any hits",
           (unsigned long long)r->rb.any_hits,
           (unsigned long long)r->em.any_hits);
    printf("  %-24s %12.2f\n", "mean count",
           (double)r->count_sum / (double)nr);
    if (!r->have_embree && r->embree_error[0])
        printf("  embree: %s\n", r->embree_error);
    if (!r->have_cl)
        return;
    static const char *const names[4] = {"nearest", "any", "count", "all"};
    const double cpu_ms[4] = {r->rb.nearest_ms, r->rb.any_ms, r->count_ms,
                              r->all_ms};
    printf("  %-24s %12s %12s %8s\n", "OpenCL walk", "raybox cpu", "opencl",
           "ratio");
    for (int m = 0; m < 4; m++) {
        char label[32];
        snprintf(label, sizeof label, "%s [Mrays/s]", names[m]);
        double a = rate((double)nr, cpu_ms[m]), b = rate((double)nr,
                                                         r->cl_ms[m]);
        printf("  %-24s %12.3f %12.3f %7.2fx\n", label, a, b,
               a > 0 ? b / a : 0);
    }
    printf("  %-24s %12s %12.1f\n", "upload + 1 ray [ms]", "",
           r->cl_upload_ms);
    printf("  %-24s %12s %12s\n", "answers (sums)", "",
           r->cl_same ? "same" : "DIFFER");
}

static void print_side(const bench_side *s, size_t boxes, size_t nr)
{
    printf("{\"build_ms\": %.3f, \"build_mboxes_s\": %.4f, "
           "\"nearest_mrays_s\": %.4f, \"any_mrays_s\": %.4f, "
           "\"nearest_hits\": %llu, \"any_hits\": %llu, "
           "\"bytes_per_box\": %.2f",
           s->build_ms, rate((double)boxes, s->build_ms),
           rate((double)nr, s->nearest_ms), rate((double)nr, s->any_ms),
           (unsigned long long)s->nearest_hits,
           (unsigned long long)s->any_hits, s->bytes_per_box);
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void print_json_text(const char *t)
{
    putchar('"');
    for (; *t; t++) {
        unsigned char c = (unsigned char)*t;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const scene_result *r, size_t n, size_t nr,
                       unsigned threads, const char *cl_device,
                       const char *cl_skipped)
{
    printf("{\"threads\": %u, \"rays\": %zu, ", threads, nr);
    printf(cl_device ? "\"opencl_device\": " : "\"opencl_skipped\": ");
    print_json_text(cl_device ? cl_device : cl_skipped);
    printf(", ");
    printf("\"scenes\": [");
    for (size_t k = 0; k < n; k++) {
        const scene_result *s = &r[k];
        printf("%s\n  {\"boxes\": %zu, \"bvh_nodes\": %llu, "
               "\"bvh_depth\": %u, \"bvh_sah\": %.3f, "
               "\"refit_ms\": %.3f, \"scene_set_all_ms\": %.3f, "
               "\"count_mrays_s\": %.4f, \"all_mrays_s\": %.4f, "
               "\"raybox\": ",
               k ? "," : "", s->boxes,
               (unsigned long long)s->st.bvh_nodes, s->st.bvh_depth,
               s->st.bvh_sah, s->refit_ms, s->set_ms,
               rate((double)nr, s->count_ms), rate((double)nr, s->all_ms));
        print_side(&s->rb, s->boxes, nr);
        printf("}");
        if (s->have_embree) {
            const bench_side *a = &s->rb, *b = &s->em;
            printf(", \"embree\": ");
            print_side(b, s->boxes, nr);
            printf("}, \"ratio\": {\"build\": %.3f, \"nearest\": %.3f, "
                   "\"any\": %.3f}",
                   b->build_ms / a->build_ms, b->nearest_ms / a->nearest_ms,
                   b->any_ms / a->any_ms);
        }
        if (s->have_cl)
            printf(", \"opencl\": {\"nearest_mrays_s\": %.4f, "
                   "\"any_mrays_s\": %.4f, \"count_mrays_s\": %.4f, "
                   "\"all_mrays_s\": %.4f, \"upload_ms\": %.3f, "
                   "\"same_sums\": %s}",
                   rate((double)nr, s->cl_ms[0]), rate((double)nr, s->cl_ms[1]),
                   rate((double)nr, s->cl_ms[2]), rate((double)nr, s->cl_ms[3]),
                   s->cl_upload_ms, s->cl_same ? "true" : "false");
        printf("}");
    }
    printf("\n]}\n");
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SCENES] = {100000, 1000000};
    size_t n_sizes = 2, nr = 1000000;
    unsigned threads = 0;
    int json = 0, embree = 1, opencl = 1;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--no-embree")) {
            embree = 0;
        } else if (!strcmp(a, "--no-opencl")) {
            opencl = 0;
        } else if (!strcmp(a, "--rays") && v) {
            nr = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            threads = (unsigned)strtoul(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--repeat") && v) {
            repeat = atoi(v) > 0 ? atoi(v) : 1;
            i++;
        } else if (!strcmp(a, "--seed") && v) {
            seed = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--boxes") && v) {
            n_sizes = 0;
            for (char *p = argv[++i]; *p && n_sizes < MAX_SCENES;) {
                sizes[n_sizes++] = strtoull(p, &p, 10);
                if (*p == ',')
                    p++;
            }
        } else {
            fprintf(stderr, "usage: %s [--boxes N[,N...]] [--rays N] "
                            "[--threads N] [--json] [--no-embree] "
                            "[--no-opencl] [--seed S] [--repeat R]\n",
                    argv[0]);
            return 2;
        }
    }

    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    opt.threads = threads;
    rb_context *ctx = NULL;
    char why[256];
    int rc = rb_context_create(&opt, &ctx, why, sizeof why);
    if (rc) {
        fprintf(stderr, "raybox-bench-bvh: %s\n", why);
        return 1;
    }
    rb_backend_info info;
    rb_context_info(ctx, &info);
    threads = info.threads;

    /* The first OpenCL device, whatever its kind (auto would take GPUs
     * only). Without one the rates are skipped, with the reason. */
    rb_context *cl = NULL;
    char cl_why[256] = "--no-opencl";
    rb_backend_info cl_info;
    if (opencl) {
        rb_context_options clo;
        rb_context_options_init(&clo);
        clo.backend = RB_BACKEND_OPENCL;
        clo.threads = threads;
        clo.cpu_fallback = 0; /* a failure is reported, never hidden */
        if (rb_context_create(&clo, &cl, cl_why, sizeof cl_why) == RB_OK)
            rb_context_info(cl, &cl_info);
        else
            cl = NULL;
    }

    rb_ray *rays = malloc(nr * sizeof *rays);
    scene_result res[MAX_SCENES];
    memset(res, 0, sizeof res);
    if (!rays)
        return fail("rays", NULL, RB_ENOMEM);
    uint64_t s = seed;
    make_rays(&s, rays, nr);
    if (!json) {
        printf("raybox-bench-bvh: %u threads, %zu rays, %s (%s)\n", threads,
               nr, info.device, info.simd);
        if (cl)
            printf("opencl: %s (%s, %u compute units)\n", cl_info.device,
                   cl_info.platform, cl_info.compute_units);
        else
            printf("opencl: skipped (%s)\n", cl_why);
    }
    for (size_t k = 0; k < n_sizes; k++) {
        size_t nb = sizes[k];
        rb_box *boxes = malloc((nb ? nb : 1) * sizeof *boxes);
        if (!boxes)
            return fail("boxes", NULL, RB_ENOMEM);
        s = seed * 1000 + k;
        make_boxes(&s, boxes, nb);
        res[k].boxes = nb;
        if (embree)
            res[k].have_embree =
                bench_embree(ctx->pool, threads, repeat, boxes, nb, rays, nr,
                             &res[k].em, res[k].embree_error,
                             sizeof res[k].embree_error) == 0;
        if (bench_raybox(ctx, cl, boxes, nb, rays, nr, &res[k]))
            return 1;
        free(boxes);
        if (!json)
            print_table(&res[k], nr);
    }
    if (json)
        print_json(res, n_sizes, nr, threads, cl ? cl_info.device : NULL,
                   cl_why);
    free(rays);
    rb_context_destroy(cl);
    rb_context_destroy(ctx);
    return 0;
}
