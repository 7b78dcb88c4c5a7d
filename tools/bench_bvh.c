/* bench_bvh.c - raybox-bench-bvh: raybox's hierarchy against Embree 3 on
 * the same random boxes and rays with the same number of threads, and
 * raybox's OpenCL walk (kernels/bvh.cl) on the same scenes; then a
 * line-of-sight workload (a city, observers x targets) the same way.
 *
 *   raybox-bench-bvh [--boxes N[,N...]] [--rays N] [--threads N] [--json]
 *                    [--rows FILE]
 *                    [--no-embree] [--no-opencl] [--seed S] [--repeat R]
 *                    [--embree-quality low|medium|high[,...]]
 *                    [--los BOXES,OBSERVERS,TARGETS | --no-los]
 *
 * Scenes are N random boxes in the unit cube (sides 0.2-1.0 / cbrt(N), so
 * a ray crosses a few dozen boxes over the cube); rays start at uniform
 * points of the cube in uniform directions, t in [0, inf). raybox answers
 * through rb_intersect on a scene (validation, preparation, its own ray
 * sort and threads included). Embree (bench_shapes_embree.c) gets the
 * boxes three ways - 6 quads per box, 12 triangles per box, and one
 * user-geometry primitive per box whose callbacks run raybox's slab test
 * (its answers must equal raybox's) - at every --embree-quality (default
 * low,medium,high: low is Embree's fastest builder, so the build ratio
 * must face it), and the rays two ways: in input order, and in raybox's
 * walk order (host/cpu/ray_order.h, the order raybox's walk follows);
 * the sort's time is reported and charged to Embree's walk-order
 * figures, since raybox pays its own. Every ratio is against the fastest
 * Embree configuration of that figure (the uncharged best is printed
 * too). Build rates count boxes per second of wall time until the scene
 * can be queried (raybox: rb_scene_create, validation included; Embree:
 * rtcCommitScene). Memory: raybox's scene (boxes and hierarchy) against
 * Embree's own allocations, plus the boxes its user geometry reads.
 * Refit moves every box a little: rb_scene_set of all boxes, and the tree
 * refit alone. Times are medians of --repeat runs (default 1), builds
 * too (raybox creates the scene again, Embree commits it again after
 * rtcCommitGeometry; the first builds, on fresh memory, are printed
 * apart). raybox's fast build is also timed in turn with each Embree
 * setup's builds (input order; 2 * repeat + 1 rounds of one build each,
 * the median of the rounds' ratios): on a shared machine the two sides'
 * builds timed a minute apart moved the ratio more than the code did,
 * and the least of these ratios over the setups is the build figure the
 * target is judged on.
 *
 * Line of sight (--los, default 200000,2000,2000): a city of BOXES
 * buildings on a street grid, OBSERVERS and TARGETS at street level, and
 * the OBSERVERS x TARGETS segments (o = observer, d = target - observer,
 * t in [0, 1], observer-major) through `any` / rtcOccluded1, Embree's
 * segments in input order and in the walk order over the city's bounds
 * (its sort charged as above).
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
#include "bench_shapes.h"
#include "bvh/bvh.h"
#include "cpu/ray_order.h"
#include "internal.h"
#include "rbench_version.h"
#include "rows.h"

#define MAX_SCENES 8
#define ALL_MAX_HITS 16
#define MAX_QUALITIES 3
#define MAX_CONFIGS (EM_SETUPS * MAX_QUALITIES * 2)

static const char *const setup_names[EM_SETUPS] = {"6 quads", "user",
                                                   "12 triangles"};
static const char *const quality_names[MAX_QUALITIES] = {"low", "medium",
                                                         "high"};

/* One Embree configuration's figures on a scene. */
typedef struct em_config {
    int setup, quality; /* EM_*, RTC_BUILD_QUALITY_* */
    int walk_order;     /* the rays read in raybox's walk order */
    double build_ms, nearest_ms, any_ms, bytes_per_box;
    double cold_build_ms; /* the first of the `repeat` builds */
    /* raybox's fast build timed in turn with this configuration's
     * (em_result.turn_speedup): Embree's ms / raybox's, the median of the
     * rounds; 0 when not measured (walk order: builds take no rays) */
    double turn_speedup;
    /* rays answered as raybox did (user geometry: must be all) */
    double agree_nearest, agree_any;
} em_config;

typedef struct scene_result {
    size_t boxes;
    rb_scene_stats st;
    bench_side rb;
    int32_t *rb_nearest; /* raybox's answers in input order (for the */
    uint8_t *rb_any;     /* Embree cross-check), the caller's arrays */
    em_config em[MAX_CONFIGS];
    int n_em;
    char embree_error[256];
    double count_ms, all_ms, set_ms, refit_ms;
    uint64_t count_sum, all_sum;
    /* The same scene built the fast way (RB_HIERARCHY_BUILD_FAST) */
    double fast_build_ms, fast_nearest_ms, fast_any_ms, fast_sah;
    double cold_build_ms, fast_cold_build_ms; /* the first of `repeat` */
    int fast_same; /* its nearest and any hit counts equal the SAH tree's */
    /* nearest (0) and any (1) timed in turn with the fastest Embree
     * configuration of each (bench_queries_in_turn): the median of the
     * rounds' Embree ms (charged) / raybox's, and that configuration;
     * 0 / NULL when not measured */
    double query_turn[2];
    const em_config *query_turn_cfg[2];
    /* OpenCL, modes nearest, any, count, all (rb_mode - 1) */
    int have_cl;
    double cl_ms[4], cl_upload_ms;
    uint64_t cl_sum[4];
    int cl_same; /* every sum equals the CPU's */
} scene_result;

static void make_boxes(uint64_t *s, rb_box *b, size_t n)
{
    float side = 1.0f / cbrtf((float)n);
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            float w = side * (0.2f + 0.8f * bench_uniform(s));
            b[i].min[a] = bench_uniform(s) * (1 - w);
            b[i].max[a] = b[i].min[a] + w;
        }
    }
}

static int fail(const char *what, rb_context *ctx, int rc)
{
    fprintf(stderr, "raybox-bench-bvh: %s: %s (%s)\n", what,
            rb_status_name(rc), ctx ? rb_context_error(ctx)->message : "");
    return 1;
}

static int repeat = 1;

/* One mode through the scene: the median wall time of `repeat` runs (as
 * the Embree side reports) and the sum of its answers. */
static int query(rb_context *ctx, const rb_scene *scene, rb_mode mode,
                 const rb_ray *rays, size_t n, rb_results *res, double *ms,
                 uint64_t *sum)
{
    rb_query q = {.mode = mode, .dims = 3, .rays = rays, .n_rays = n,
                  .scene = scene, .max_hits = ALL_MAX_HITS};
    double t[64];
    int runs = repeat < 64 ? repeat : 64;
    for (int k = 0; k < runs; k++) {
        double t0 = bench_now_ms();
        int rc = rb_intersect(ctx, &q, res);
        t[k] = bench_now_ms() - t0;
        if (rc)
            return fail(rb_mode_name(mode), ctx, rc);
    }
    *ms = bench_median(t, runs);
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

/* The scene built `repeat` times (all but the last destroyed): *ms the
 * median build time, *cold the first build's. A rebuild in the same
 * context reuses the work arrays the builds before kept (host/workmem.h)
 * and small blocks the C library got back, as Embree's rebuilds of a
 * scene reuse its own memory (bench_shapes_embree.c). */
static int build_scene(rb_context *ctx, const rb_box *boxes, size_t nb,
                       rb_scene **out, double *ms, double *cold)
{
    double t[64];
    int runs = repeat < 64 ? repeat : 64;
    *out = NULL;
    for (int k = 0; k < runs; k++) {
        rb_scene_destroy(*out);
        *out = NULL;
        double t0 = bench_now_ms();
        int st = rb_scene_create(ctx, 3, boxes, nb, out);
        t[k] = bench_now_ms() - t0;
        if (st)
            return st;
    }
    *cold = t[0];
    *ms = bench_median(t, runs);
    return RB_OK;
}

/* The fast build of the same boxes: its build time, its walks, and that
 * it hits what the SAH tree hits. */
static int bench_fast_build(rb_context *ctx, const rb_box *boxes, size_t nb,
                            const rb_ray *rays, size_t nr, rb_results *res,
                            scene_result *out)
{
    int saved = ctx->bvh_build;
    ctx->bvh_build = RB_HIERARCHY_BUILD_FAST;
    rb_scene *scene = NULL;
    int st = build_scene(ctx, boxes, nb, &scene, &out->fast_build_ms,
                         &out->fast_cold_build_ms);
    ctx->bvh_build = saved;
    if (st)
        return fail("rb_scene_create (fast build)", ctx, st);
    rb_scene_stats fs;
    rb_scene_stats_get(scene, &fs);
    out->fast_sah = fs.bvh_sah;
    uint64_t near_hits = 0, any_hits = 0;
    int rc = query(ctx, scene, RB_MODE_NEAREST, rays, nr, res,
                   &out->fast_nearest_ms, &near_hits) ||
             query(ctx, scene, RB_MODE_ANY, rays, nr, res, &out->fast_any_ms,
                   &any_hits);
    out->fast_same = near_hits == out->rb.nearest_hits &&
                     any_hits == out->rb.any_hits;
    rb_scene_destroy(scene);
    return rc;
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
    int st = build_scene(ctx, boxes, nb, &scene, &out->rb.build_ms,
                         &out->cold_build_ms);
    if (st) {
        rc = fail("rb_scene_create", ctx, st);
        goto done;
    }
    rb_scene_stats_get(scene, &out->st);
    out->rb.bytes_per_box = out->st.bytes_per_box;

    if (query(ctx, scene, RB_MODE_NEAREST, rays, nr, &res,
              &out->rb.nearest_ms, &out->rb.nearest_hits))
        goto done;
    for (size_t i = 0; i < nr && out->rb_nearest; i++)
        out->rb_nearest[i] = res.hits[i].hit ? res.hits[i].box : -1;
    if (query(ctx, scene, RB_MODE_ANY, rays, nr, &res, &out->rb.any_ms,
              &out->rb.any_hits))
        goto done;
    if (out->rb_any)
        memcpy(out->rb_any, res.any, nr);
    if (query(ctx, scene, RB_MODE_COUNT, rays, nr, &res, &out->count_ms,
              &out->count_sum) ||
        query(ctx, scene, RB_MODE_ALL, rays, nr, &res, &out->all_ms,
              &out->all_sum))
        goto done;
    if (cl && bench_opencl(cl, scene, rays, nr, &res, out))
        goto done;
    if (bench_fast_build(ctx, boxes, nb, rays, nr, &res, out))
        goto done;

    /* Refit: every box moves by up to a tenth of its size. */
    uint64_t s = 99;
    for (size_t i = 0; i < nb; i++) {
        idx[i] = (uint32_t)i;
        for (int a = 0; a < 3; a++) {
            float d = (bench_uniform(&s) - 0.5f) * 0.2f *
                      (boxes[i].max[a] - boxes[i].min[a]);
            boxes[i].min[a] += d;
            boxes[i].max[a] += d;
        }
    }
    double t0 = bench_now_ms();
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

/* ---- Embree ------------------------------------------------------------ */

typedef struct run_options {
    int qualities[MAX_QUALITIES];
    int n_qualities;
    unsigned threads;
} run_options;

/* raybox's fast build as the other side of Embree's builds in turn: the
 * scene built again (the one before destroyed first, as build_scene
 * does), its ms; the last one is destroyed by the caller. */
typedef struct build_turn {
    rb_context *ctx;
    const rb_box *boxes;
    size_t n;
    rb_scene *scene;
} build_turn;

static double fast_build_turn(void *user)
{
    build_turn *b = user;
    rb_scene_destroy(b->scene);
    b->scene = NULL;
    int saved = b->ctx->bvh_build;
    b->ctx->bvh_build = RB_HIERARCHY_BUILD_FAST;
    double t0 = bench_now_ms();
    int st = rb_scene_create(b->ctx, 3, b->boxes, b->n, &b->scene);
    double ms = bench_now_ms() - t0;
    b->ctx->bvh_build = saved;
    return st == RB_OK ? ms : -1;
}

/* Every Embree setup at every quality, the rays in input order and, with
 * an order, in walk order (read through it); answers checked against
 * raybox's (out->rb_nearest, rb_any). With in_turn, each setup's builds
 * (input order) alternate with raybox's fast build (turn_speedup). */
static void bench_embree_all(rb_context *ctx, const run_options *o,
                             const rb_box *boxes, size_t nb,
                             const rb_ray *rays, const uint32_t *order,
                             size_t nr, int in_turn,
                             scene_result *out)
{
    bench_scene bs = {.boxes = boxes, .n_boxes = nb};
    em_result em = {0};
    if (bench_em_answers_take(&em, nr)) {
        snprintf(out->embree_error, sizeof out->embree_error,
                 "out of memory");
        goto done;
    }
    build_turn turn = {.ctx = ctx, .boxes = boxes, .n = nb};
    for (int setup = 0; setup < EM_SETUPS; setup++)
        for (int qi = 0; qi < o->n_qualities; qi++)
            for (int wo = 0; wo < (order ? 2 : 1); wo++) {
                em.turn = wo || !in_turn ? NULL : fast_build_turn;
                em.turn_user = &turn;
                em.turn_speedup = 0;
                if (bench_embree_shapes(ctx->pool, o->threads, repeat, setup,
                                        o->qualities[qi], &bs, rays,
                                        wo ? order : NULL, nr, &em)) {
                    snprintf(out->embree_error, sizeof out->embree_error,
                             "%s", em.error);
                    continue;
                }
                em_config *c = &out->em[out->n_em++];
                c->setup = setup;
                c->quality = o->qualities[qi];
                c->walk_order = wo;
                c->build_ms = em.build_ms;
                c->cold_build_ms = em.cold_build_ms;
                c->turn_speedup = em.turn_speedup;
                c->nearest_ms = em.nearest_ms;
                c->any_ms = em.any_ms;
                /* the user geometry reads our boxes: they count too */
                c->bytes_per_box = em.bytes_per_element +
                                   (setup == EM_USER ? sizeof(rb_box) : 0);
                uint64_t same_n = 0, same_a = 0;
                for (size_t i = 0; i < nr; i++) {
                    size_t j = wo ? order[i] : i;
                    same_n += em.nearest_id[i] == out->rb_nearest[j];
                    same_a += em.any[i] == out->rb_any[j];
                }
                c->agree_nearest = nr ? (double)same_n / (double)nr : 1;
                c->agree_any = nr ? (double)same_a / (double)nr : 1;
            }
done:
    rb_scene_destroy(turn.scene);
    bench_em_answers_give(&em);
}

/* The least in-turn speedup of raybox's fast build over the Embree
 * configurations measured so (the one it leads least), with *c_out that
 * configuration; 0 when none was. */
static double least_turn_speedup(const scene_result *r, const em_config **c_out)
{
    double least = 0;
    *c_out = NULL;
    for (int k = 0; k < r->n_em; k++)
        if (r->em[k].turn_speedup > 0 &&
            (least == 0 || r->em[k].turn_speedup < least)) {
            least = r->em[k].turn_speedup;
            *c_out = &r->em[k];
        }
    return least;
}

static const em_config *fastest(const scene_result *r, int fig,
                                double sort_ms, int charged);

/* nearest and any against the fastest Embree configuration of each (the
 * sort charged to walk order, as in the table), timed in turn: Embree's
 * scene built again in that configuration, then 2 * repeat + 1 rounds of
 * one raybox query (a scene of the same boxes, SAH build) and one Embree
 * trace, the median of the rounds' ratios (em_result.query_turn). Why:
 * the separate medians are minutes apart, and the machine's phases moved
 * the `nearest` ratio 0.92-1.54x between runs of one binary. */
static void bench_queries_in_turn(rb_context *ctx, const run_options *o,
                                  const rb_box *boxes, size_t nb,
                                  const rb_ray *rays, const uint32_t *order,
                                  size_t nr, double sort_ms,
                                  scene_result *out)
{
    rb_scene *scene = NULL;
    rb_results res;
    em_result em = {0};
    bench_scene bs = {.boxes = boxes, .n_boxes = nb};
    int no_memory = bench_results_take(&res, nr);
    no_memory |= bench_em_answers_take(&em, nr);
    if (no_memory || rb_scene_create(ctx, 3, boxes, nb, &scene) != RB_OK)
        goto done;
    /* raybox takes the rays in input order and sorts them itself, as in
     * the table; Embree's walk-order rays are charged the sort */
    bench_query_side side = {.ctx = ctx, .scene = scene, .rays = rays,
                            .n = nr, .res = &res};
    const em_config *cfg[2] = {fastest(out, 0, sort_ms, 1),
                               fastest(out, 1, sort_ms, 1)};
    for (int fig = 0; fig < 2; fig++) {
        const em_config *c = cfg[fig];
        if (!c || (fig == 1 && c == cfg[0]))
            continue; /* none, or any's rounds ran with nearest's */
        em.query_turn = bench_query_turn;
        em.query_modes = fig == 0 && c == cfg[1] ? 3u : 1u << fig;
        em.turn_user = &side;
        em.query_charge_ms = c->walk_order ? sort_ms : 0;
        if (bench_embree_shapes(ctx->pool, o->threads, repeat, c->setup,
                                c->quality, &bs, rays,
                                c->walk_order ? order : NULL, nr, &em))
            continue;
        for (int m = 0; m < 2; m++)
            if (em.query_modes >> m & 1u) {
                out->query_turn[m] = em.query_speedup[m];
                out->query_turn_cfg[m] = c;
            }
    }
done:
    rb_scene_destroy(scene);
    bench_results_give(&res);
    bench_em_answers_give(&em);
}

/* The fastest configuration of a figure (0 nearest, 1 any, 2 build),
 * walk-order times charged with sort_ms when `charged`; NULL if none. */
static const em_config *fastest(const scene_result *r, int fig,
                                double sort_ms, int charged)
{
    const em_config *best = NULL;
    double best_ms = 0;
    for (int k = 0; k < r->n_em; k++) {
        const em_config *c = &r->em[k];
        double ms = fig == 0 ? c->nearest_ms : fig == 1 ? c->any_ms
                                                         : c->build_ms;
        if (fig < 2 && charged && c->walk_order)
            ms += sort_ms;
        if (!best || ms < best_ms) {
            best = c;
            best_ms = ms;
        }
    }
    return best;
}

static double config_ms(const em_config *c, int fig, double sort_ms,
                        int charged)
{
    double ms = fig == 0 ? c->nearest_ms : fig == 1 ? c->any_ms
                                                     : c->build_ms;
    return ms + (fig < 2 && charged && c->walk_order ? sort_ms : 0);
}

static const char *config_name(const em_config *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s, %s, %s", setup_names[c->setup],
             quality_names[c->quality], c->walk_order ? "walk order"
                                                      : "input order");
    return buf;
}

/* ---- reports ------------------------------------------------------------ */

static double rate(double n, double ms)
{
    return ms > 0 ? n / ms / 1e3 : 0; /* millions per second */
}

/* Whether Embree configuration c answered otherwise than raybox. For the
 * user geometry (raybox's own box test behind Embree's hierarchy) that is
 * a bug in one of the two walks, never a matter of rules. */
static int user_differs(const em_config *c, int with_nearest)
{
    return c->setup == EM_USER &&
           ((with_nearest && c->agree_nearest < 1) || c->agree_any < 1);
}

/* The user-geometry configurations of r that differ from raybox. */
static int count_user_differs(const scene_result *r, int with_nearest)
{
    int n = 0;
    for (int k = 0; k < r->n_em; k++)
        n += user_differs(&r->em[k], with_nearest);
    return n;
}

static void print_embree(const scene_result *r, size_t nr, double sort_ms,
                         double rb_nearest_ms, double rb_any_ms,
                         double rb_build_ms, int with_nearest)
{
    if (!r->n_em) {
        printf("  embree: %s\n", r->embree_error[0] ? r->embree_error
                                                      : "not run");
        return;
    }
    printf("  %-40s %9s %9s %9s %7s %s\n", "embree [M/s]", "build",
           "nearest", "any", "B/box", "agreement nearest/any");
    for (int k = 0; k < r->n_em; k++) {
        const em_config *c = &r->em[k];
        char name[96], near[16] = "-", agree[16] = "-";
        if (with_nearest) {
            snprintf(near, sizeof near, "%.3f",
                     rate((double)nr, c->nearest_ms));
            snprintf(agree, sizeof agree, "%.4f", c->agree_nearest);
        }
        printf("  %-40s %9.3f %9s %9.3f %7.1f %s/%.4f%s\n",
               config_name(c, name, sizeof name),
               rate((double)r->boxes, c->build_ms), near,
               rate((double)nr, c->any_ms), c->bytes_per_box, agree,
               c->agree_any,
               user_differs(c, with_nearest) ? "  DIFFERS FROM RAYBOX" : "");
    }
    if (sort_ms > 0)
        printf("  walk-order sort of the rays: %.1f ms (charged to Embree's "
               "walk-order figures below; raybox's own sort is in its "
               "times)\n", sort_ms);
    static const char *const figs[3] = {"nearest", "any", "build"};
    const double mine[3] = {rb_nearest_ms, rb_any_ms, rb_build_ms};
    for (int fig = with_nearest ? 0 : 1; fig < 3; fig++) {
        const em_config *b = fastest(r, fig, sort_ms, 1);
        const em_config *u = fastest(r, fig, sort_ms, 0);
        char name[96], uname[96];
        double n = fig == 2 ? (double)r->boxes : (double)nr;
        printf("  %-8s raybox %8.3f vs fastest embree %8.3f (%s): %.2fx",
               figs[fig], rate(n, mine[fig]),
               rate(n, config_ms(b, fig, sort_ms, 1)),
               config_name(b, name, sizeof name),
               config_ms(b, fig, sort_ms, 1) / mine[fig]);
        if (fig < 2 && u != b)
            printf("; sort not charged: %.2fx (%s)",
                   config_ms(u, fig, sort_ms, 0) / mine[fig],
                   config_name(u, uname, sizeof uname));
        printf("\n");
    }
}

static void print_table(const scene_result *r, size_t nr, double sort_ms)
{
    const rb_scene_stats *st = &r->st;
    printf("\n%zu boxes: hierarchy %llu nodes, depth %u, SAH %.1f, "
           "%.1f B/box, %llu rebuilds after the refit\n",
           r->boxes, (unsigned long long)st->bvh_nodes, st->bvh_depth,
           st->bvh_sah, st->bytes_per_box,
           (unsigned long long)st->bvh_rebuilds);
    printf("  %-24s %12s\n", "raybox", "");
    printf("  %-24s %12.3f\n", "build [Mboxes/s]",
           rate((double)r->boxes, r->rb.build_ms));
    printf("  %-24s %12.3f\n", "nearest [Mrays/s]",
           rate((double)nr, r->rb.nearest_ms));
    printf("  %-24s %12.3f\n", "any [Mrays/s]", rate((double)nr, r->rb.any_ms));
    printf("  %-24s %12.3f\n", "count [Mrays/s]", rate((double)nr, r->count_ms));
    printf("  %-24s %12.3f\n", "all [Mrays/s]", rate((double)nr, r->all_ms));
    printf("  %-24s %12.1f\n", "refit, tree only [ms]", r->refit_ms);
    printf("  %-24s %12.1f\n", "rb_scene_set, all [ms]", r->set_ms);
    printf("  %-24s %12.1f\n", "memory [B/box]", r->rb.bytes_per_box);
    printf("  %-24s %12llu / %llu\n", "nearest / any hits",
           (unsigned long long)r->rb.nearest_hits,
           (unsigned long long)r->rb.any_hits);
    printf("  %-24s %12.2f\n", "mean count",
           (double)r->count_sum / (double)nr);
    print_embree(r, nr, sort_ms, r->rb.nearest_ms, r->rb.any_ms,
                 r->rb.build_ms, 1);
    static const char *const turn_figs[2] = {"nearest", "any"};
    for (int fig = 0; fig < 2; fig++)
        if (r->query_turn[fig] > 0) {
            char name[96];
            printf("  %-8s in turn with the fastest embree (%s), %d "
                   "rounds: %.2fx\n", turn_figs[fig],
                   config_name(r->query_turn_cfg[fig], name, sizeof name),
                   bench_turn_rounds(repeat), r->query_turn[fig]);
        }
    printf("  fast build (RB_HIERARCHY_BUILD_FAST): %.3f Mboxes/s, SAH %.1f, "
           "nearest %.3f, any %.3f Mrays/s, hits %s",
           rate((double)r->boxes, r->fast_build_ms), r->fast_sah,
           rate((double)nr, r->fast_nearest_ms),
           rate((double)nr, r->fast_any_ms),
           r->fast_same ? "the same" : "DIFFER FROM THE SAH TREE'S");
    const em_config *eb = r->n_em ? fastest(r, 2, 0, 0) : NULL;
    if (eb) {
        char name[96];
        printf("; build vs fastest embree (%s): %.2fx",
               config_name(eb, name, sizeof name),
               eb->build_ms / r->fast_build_ms);
    }
    printf("\n");
    const em_config *et;
    double turn = least_turn_speedup(r, &et);
    if (turn > 0) {
        char name[96];
        printf("  fast build in turn with each embree setup (%d rounds): "
               "least %.2fx (vs %s)\n", bench_turn_rounds(repeat), turn,
               config_name(et, name, sizeof name));
    }
    if (repeat > 1 && eb) {
        /* The first builds alone: fresh memory, every page faulted in. */
        const em_config *ec = &r->em[0];
        for (int k = 1; k < r->n_em; k++)
            if (r->em[k].cold_build_ms < ec->cold_build_ms)
                ec = &r->em[k];
        char name[96];
        printf("  first build of %d: SAH %.3f, fast %.3f, fastest embree "
               "%.3f Mboxes/s (%s): fast %.2fx\n", repeat,
               rate((double)r->boxes, r->cold_build_ms),
               rate((double)r->boxes, r->fast_cold_build_ms),
               rate((double)r->boxes, ec->cold_build_ms),
               config_name(ec, name, sizeof name),
               ec->cold_build_ms / r->fast_cold_build_ms);
    }
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

static void print_json_embree(const scene_result *r, size_t nr,
                              double sort_ms, const double *mine,
                              int with_nearest)
{
    printf(", \"embree\": {\"sort_ms\": %.3f, \"configs\": [", sort_ms);
    for (int k = 0; k < r->n_em; k++) {
        const em_config *c = &r->em[k];
        printf("%s{\"setup\": \"%s\", \"quality\": \"%s\", \"order\": "
               "\"%s\", \"build_mboxes_s\": %.4f, \"nearest_mrays_s\": "
               "%.4f, \"any_mrays_s\": %.4f, \"bytes_per_box\": %.2f, "
               "\"agree_nearest\": %.6f, \"agree_any\": %.6f}",
               k ? ", " : "", setup_names[c->setup],
               quality_names[c->quality],
               c->walk_order ? "walk" : "input",
               rate((double)r->boxes, c->build_ms),
               rate((double)nr, c->nearest_ms), rate((double)nr, c->any_ms),
               c->bytes_per_box, c->agree_nearest, c->agree_any);
    }
    printf("]");
    static const char *const figs[3] = {"nearest", "any", "build"};
    int first = with_nearest ? 0 : 1;
    printf(", \"ratio_vs_fastest\": {");
    for (int fig = first; fig < 3 && r->n_em; fig++) {
        const em_config *b = fastest(r, fig, sort_ms, 1);
        printf("%s\"%s\": %.3f", fig > first ? ", " : "", figs[fig],
               config_ms(b, fig, sort_ms, 1) / mine[fig]);
    }
    printf("}, \"ratio_vs_fastest_sort_not_charged\": {");
    for (int fig = first; fig < 2 && r->n_em; fig++) {
        const em_config *b = fastest(r, fig, sort_ms, 0);
        printf("%s\"%s\": %.3f", fig > first ? ", " : "", figs[fig],
               config_ms(b, fig, sort_ms, 0) / mine[fig]);
    }
    printf("}}");
}

typedef struct los_result {
    int ran;
    size_t boxes, observers, targets;
    double build_ms, any_ms;
    uint64_t visible;
    /* rb_visibility on the same pairs: its time, its answer's agreement
     * with the explicit segments, and the memory each way holds */
    double vis_ms;
    int vis_same;
    double explicit_mb, vis_mb;
    scene_result em; /* its Embree configurations (any only) */
    double sort_ms;  /* the segments into walk order, charged to Embree */
} los_result;

static void print_json(const scene_result *r, size_t n, size_t nr,
                       unsigned threads, const char *cl_device,
                       const char *cl_skipped, double sort_ms,
                       const los_result *los)
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
               "\"raybox\": {\"build_mboxes_s\": %.4f, "
               "\"nearest_mrays_s\": %.4f, \"any_mrays_s\": %.4f, "
               "\"nearest_hits\": %llu, \"any_hits\": %llu, "
               "\"bytes_per_box\": %.2f}",
               k ? "," : "", s->boxes,
               (unsigned long long)s->st.bvh_nodes, s->st.bvh_depth,
               s->st.bvh_sah, s->refit_ms, s->set_ms,
               rate((double)nr, s->count_ms), rate((double)nr, s->all_ms),
               rate((double)s->boxes, s->rb.build_ms),
               rate((double)nr, s->rb.nearest_ms),
               rate((double)nr, s->rb.any_ms),
               (unsigned long long)s->rb.nearest_hits,
               (unsigned long long)s->rb.any_hits, s->rb.bytes_per_box);
        printf(", \"raybox_fast_build\": {\"build_mboxes_s\": %.4f, "
               "\"bvh_sah\": %.3f, \"nearest_mrays_s\": %.4f, "
               "\"any_mrays_s\": %.4f, \"same_hits\": %s",
               rate((double)s->boxes, s->fast_build_ms), s->fast_sah,
               rate((double)nr, s->fast_nearest_ms),
               rate((double)nr, s->fast_any_ms),
               s->fast_same ? "true" : "false");
        const em_config *eb = s->n_em ? fastest(s, 2, 0, 0) : NULL;
        if (eb)
            printf(", \"build_ratio_vs_fastest\": %.3f",
                   eb->build_ms / s->fast_build_ms);
        const em_config *et;
        double turn = least_turn_speedup(s, &et);
        if (turn > 0)
            printf(", \"build_in_turn_vs_embree\": %.3f", turn);
        printf("}");
        if (s->query_turn[0] > 0 || s->query_turn[1] > 0)
            printf(", \"in_turn_vs_fastest_embree\": {\"nearest\": %.3f, "
                   "\"any\": %.3f}", s->query_turn[0], s->query_turn[1]);
        const double mine[3] = {s->rb.nearest_ms, s->rb.any_ms,
                                s->rb.build_ms};
        if (s->n_em)
            print_json_embree(s, nr, sort_ms, mine, 1);
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
    printf("\n]");
    if (los->ran) {
        size_t segs = los->observers * los->targets;
        printf(",\n\"line_of_sight\": {\"boxes\": %zu, \"observers\": %zu, "
               "\"targets\": %zu, \"raybox\": {\"build_mboxes_s\": %.4f, "
               "\"any_msegments_s\": %.4f, \"visible\": %llu, "
               "\"explicit_mb\": %.2f}, \"rb_visibility\": "
               "{\"msegments_s\": %.4f, \"same_answers\": %s, "
               "\"mb\": %.2f}",
               los->boxes, los->observers, los->targets,
               rate((double)los->boxes, los->build_ms),
               rate((double)segs, los->any_ms),
               (unsigned long long)los->visible, los->explicit_mb,
               rate((double)segs, los->vis_ms),
               los->vis_same ? "true" : "false", los->vis_mb);
        const double mine[3] = {los->any_ms, los->any_ms, los->build_ms};
        if (los->em.n_em)
            print_json_embree(&los->em, segs, los->sort_ms, mine, 0);
        printf("}");
    }
    printf("}\n");
}

/* ---- ratio rows (--rows FILE) ----------------------------------------------
 * The run's ratios in raybox-bench's row format, for `raybox-bench --from
 * FILE --ratios --compare BASELINE` (rows.h): raybox against the fastest
 * Embree configuration (sort charged) per figure, on the SAH tree and on
 * the fast build's (bvh_fast_build_*), memory against Embree's
 * smallest, OpenCL against the CPU backend per mode, and on the city
 * rb_visibility against explicit segments and against the fastest
 * Embree any. Larger is better in each. */

static rbench_where ratio_where(const rb_backend_info *info, const char *backend,
                             const char *test, const char *shape,
                             uint64_t rays, uint64_t boxes, char *size,
                             size_t size_len)
{
    snprintf(size, size_len, "%llux%llu", (unsigned long long)rays,
             (unsigned long long)boxes);
    return (rbench_where){.backend = backend, .device = info->device,
                       .type = strcmp(backend, "cpu") == 0 || !info->is_gpu
                                   ? "cpu"
                                   : "gpu",
                       .driver = "raybox-bench-bvh", .category = "ratios",
                       .test = test, .shape = shape, .path = "e2e",
                       .rays = rays, .boxes = boxes, .size = size};
}

static double smallest_embree_bytes(const scene_result *r)
{
    double best = 0;
    for (int k = 0; k < r->n_em; k++)
        if (r->em[k].bytes_per_box > 0 &&
            (best == 0 || r->em[k].bytes_per_box < best))
            best = r->em[k].bytes_per_box;
    return best;
}

static void embree_ratios(rbench_rows *rows, const rb_backend_info *info,
                          const scene_result *r, const char *prefix,
                          const char *shape, uint64_t n, double sort_ms,
                          const double mine[3], int with_nearest)
{
    static const char *const figs[3] = {"nearest", "any", "build"};
    char test[32], size[48];
    for (int fig = with_nearest ? 0 : 1; fig < 3 && r->n_em; fig++) {
        const em_config *b = fastest(r, fig, sort_ms, 1);
        snprintf(test, sizeof test, "%s_%s", prefix, figs[fig]);
        rbench_where w = ratio_where(info, "cpu", test, shape,
                                  fig == 2 ? 0 : n, r->boxes, size,
                                  sizeof size);
        if (mine[fig] > 0)
            rbench_add_ratio(rows, &w, "speed_vs_fastest_embree",
                          config_ms(b, fig, sort_ms, 1) / mine[fig]);
    }
}

static int write_rows(const char *path, const rb_backend_info *info,
                      const rb_backend_info *cl_info, const scene_result *res,
                      size_t n, size_t nr, double sort_ms,
                      const los_result *los)
{
    rbench_rows rows = {0};
    snprintf(rows.version, sizeof rows.version, "%s", RB_VERSION_STRING);
    snprintf(rows.git, sizeof rows.git, "%s", RBENCH_GIT_REVISION);
    char size[48];
    static const char *const modes[4] = {"bvh_nearest", "bvh_any",
                                         "bvh_count", "bvh_all"};
    for (size_t k = 0; k < n; k++) {
        const scene_result *s = &res[k];
        const double mine[3] = {s->rb.nearest_ms, s->rb.any_ms,
                                s->rb.build_ms};
        embree_ratios(&rows, info, s, "bvh", "random", nr, sort_ms, mine, 1);
        const double fast[3] = {s->fast_nearest_ms, s->fast_any_ms,
                                s->fast_build_ms};
        embree_ratios(&rows, info, s, "bvh_fast_build", "random", nr, sort_ms,
                      fast, 1);
        const em_config *et;
        double turn = least_turn_speedup(s, &et);
        if (turn > 0) {
            rbench_where w = ratio_where(info, "cpu", "bvh_fast_build_in_turn",
                                         "random", 0, s->boxes, size,
                                         sizeof size);
            rbench_add_ratio(&rows, &w, "speed_vs_embree_in_turn", turn);
        }
        static const char *const turn_tests[2] = {"bvh_nearest_in_turn",
                                                  "bvh_any_in_turn"};
        for (int fig = 0; fig < 2; fig++)
            if (s->query_turn[fig] > 0) {
                rbench_where w = ratio_where(info, "cpu", turn_tests[fig],
                                             "random", nr, s->boxes, size,
                                             sizeof size);
                rbench_add_ratio(&rows, &w, "speed_vs_embree_in_turn",
                                 s->query_turn[fig]);
            }
        double em_bytes = smallest_embree_bytes(s);
        if (em_bytes > 0 && s->rb.bytes_per_box > 0) {
            rbench_where w = ratio_where(info, "cpu", "bvh_memory", "random", 0,
                                      s->boxes, size, sizeof size);
            rbench_add_ratio(&rows, &w, "memory_vs_smallest_embree",
                          em_bytes / s->rb.bytes_per_box);
        }
        const double cpu_ms[4] = {s->rb.nearest_ms, s->rb.any_ms, s->count_ms,
                                  s->all_ms};
        for (int m = 0; s->have_cl && m < 4; m++) {
            rbench_where w = ratio_where(cl_info, "opencl", modes[m], "random",
                                      nr, s->boxes, size, sizeof size);
            if (s->cl_ms[m] > 0)
                rbench_add_ratio(&rows, &w, "speed_vs_native",
                              cpu_ms[m] / s->cl_ms[m]);
        }
    }
    if (los->ran) {
        uint64_t segs = (uint64_t)los->observers * los->targets;
        const double mine[3] = {los->any_ms, los->any_ms, los->build_ms};
        scene_result em = los->em;
        em.boxes = los->boxes;
        embree_ratios(&rows, info, &em, "los", "city", segs, los->sort_ms,
                      mine, 0);
        rbench_where w = ratio_where(info, "cpu", "los_visibility", "city", segs,
                                  los->boxes, size, sizeof size);
        if (los->vis_ms > 0)
            rbench_add_ratio(&rows, &w, "speed_vs_explicit",
                          los->any_ms / los->vis_ms);
        if (los->vis_mb > 0)
            rbench_add_ratio(&rows, &w, "memory_vs_explicit",
                          los->explicit_mb / los->vis_mb);
        if (los->vis_ms > 0 && em.n_em)
            rbench_add_ratio(&rows, &w, "speed_vs_fastest_embree",
                          config_ms(fastest(&em, 1, los->sort_ms, 1), 1,
                                    los->sort_ms, 1) / los->vis_ms);
    }
    int rc = rbench_write_file(&rows, path, rbench_write_json);
    if (rc)
        perror(path);
    rbench_rows_free(&rows);
    return rc ? 1 : 0;
}

/* ---- line of sight -------------------------------------------------------- */

/* A city: n buildings on a square grid of blocks (cell 1, street 0.2
 * wide), each 0.5..4 high; observers and targets at street level (0.1
 * to 2 up, on the streets between blocks). */
static void make_city(uint64_t *s, rb_box *b, size_t n, rb_ray *ends,
                      size_t n_ends, size_t *grid_out)
{
    size_t g = 1;
    while (g * g < n)
        g++;
    for (size_t i = 0; i < n; i++) {
        float x = (float)(i % g), y = (float)(i / g);
        float h = 0.5f + 3.5f * bench_uniform(s);
        b[i] = (rb_box){{x, y, 0}, {x + 0.8f, y + 0.8f, h}};
    }
    for (size_t i = 0; i < n_ends; i++) {
        /* on a street: one coordinate in a gap, the other anywhere */
        float along = bench_uniform(s) * (float)g;
        float gap = (float)(bench_rng_next(s) % g) + 0.8f +
                    0.2f * bench_uniform(s);
        int swap = bench_uniform(s) < 0.5f;
        ends[i].origin[0] = swap ? gap : along;
        ends[i].origin[1] = swap ? along : gap;
        ends[i].origin[2] = 0.1f + 1.9f * bench_uniform(s);
    }
    *grid_out = g;
}

static int bench_los(rb_context *ctx, const run_options *o, size_t nb,
                     size_t n_obs, size_t n_tgt, uint64_t seed, int embree,
                     los_result *out)
{
    size_t segs = n_obs * n_tgt, g;
    rb_box *boxes = malloc((nb ? nb : 1) * sizeof *boxes);
    rb_ray *ends = malloc((n_obs + n_tgt) * sizeof *ends);
    rb_ray *rays = malloc((segs ? segs : 1) * sizeof *rays);
    rb_results res = {.capacity = segs};
    res.any = malloc(segs ? segs : 1);
    rb_scene *scene = NULL;
    int rc = 1;
    if (!boxes || !ends || !rays || !res.any) {
        fprintf(stderr, "raybox-bench-bvh: out of memory for the city\n");
        goto done;
    }
    uint64_t s = seed * 7919 + 3;
    make_city(&s, boxes, nb, ends, n_obs + n_tgt, &g);
    for (size_t i = 0; i < n_obs; i++)
        for (size_t j = 0; j < n_tgt; j++) {
            rb_ray *r = &rays[i * n_tgt + j];
            const float *a = ends[i].origin, *b = ends[n_obs + j].origin;
            for (int k = 0; k < 3; k++) {
                r->origin[k] = a[k];
                r->dir[k] = b[k] - a[k]; /* float32 per component */
            }
            r->tmin = 0;
            r->tmax = 1;
        }
    double t0 = bench_now_ms();
    int st = rb_scene_create(ctx, 3, boxes, nb, &scene);
    out->build_ms = bench_now_ms() - t0;
    if (st) {
        rc = fail("rb_scene_create (city)", ctx, st);
        goto done;
    }
    uint64_t hit = 0;
    if (query(ctx, scene, RB_MODE_ANY, rays, segs, &res, &out->any_ms, &hit))
        goto done;
    out->visible = segs - hit;
    /* The same pairs through rb_visibility: segments made a tile at a
     * time, answered as bits. */
    {
        float *obs = malloc(3 * n_obs * sizeof *obs);
        float *tgt = malloc(3 * n_tgt * sizeof *tgt);
        size_t bytes = (size_t)rb_visibility_bytes(n_obs, n_tgt);
        uint8_t *bits = malloc(bytes ? bytes : 1);
        if (!obs || !tgt || !bits) {
            free(obs);
            free(tgt);
            free(bits);
            fprintf(stderr, "raybox-bench-bvh: out of memory\n");
            goto done;
        }
        for (size_t i = 0; i < n_obs + n_tgt; i++) {
            float *p = i < n_obs ? &obs[3 * i] : &tgt[3 * (i - n_obs)];
            memcpy(p, ends[i].origin, 3 * sizeof(float));
        }
        rb_visibility_query vq = {.scene = scene, .observers = obs,
                                  .n_observers = n_obs, .targets = tgt,
                                  .n_targets = n_tgt, .tmin = 0, .tmax = 1};
        double t[64];
        int runs = repeat < 64 ? repeat : 64;
        uint64_t vis = 0;
        for (int k = 0; k < runs && !st; k++) {
            double v0 = bench_now_ms();
            st = rb_visibility(ctx, &vq, bits, bytes, &vis, NULL);
            t[k] = bench_now_ms() - v0;
        }
        if (st) {
            free(obs);
            free(tgt);
            free(bits);
            rc = fail("rb_visibility", ctx, st);
            goto done;
        }
        out->vis_ms = bench_median(t, runs);
        size_t stride = (n_tgt + 7) / 8;
        out->vis_same = vis == out->visible;
        for (size_t k = 0; k < segs && out->vis_same; k++) {
            size_t i = k / n_tgt, j = k % n_tgt;
            int bit = (bits[i * stride + j / 8] >> (j % 8)) & 1;
            out->vis_same = bit == !res.any[k];
        }
        /* What each way holds besides the scene: the explicit rays and
         * their answers, against the points, the CPU path's orders (4 B
         * a point), sorted copy of the targets (12 B) and sort scratch
         * (48 B a point of the larger side: a ray and two keys), and the
         * bits (host/cpu/cpu_visibility.c). */
        size_t most = n_obs > n_tgt ? n_obs : n_tgt;
        out->explicit_mb = (double)segs * (sizeof(rb_ray) + 1) / 1e6;
        out->vis_mb = ((double)(n_obs + n_tgt) * (12 + 4) +
                       (double)n_tgt * 12 + (double)most * 48 +
                       (double)bytes) / 1e6;
        free(obs);
        free(tgt);
        free(bits);
    }
    out->boxes = nb;
    out->observers = n_obs;
    out->targets = n_tgt;
    out->ran = 1;
    if (embree) {
        /* Embree's nearest is not measured here; its nearest_id answers
         * are compared with "no answer" and ignored. */
        int32_t *none = malloc(segs * sizeof *none);
        if (none) {
            for (size_t i = 0; i < segs; i++)
                none[i] = -2;
            out->em.boxes = nb;
            out->em.rb_nearest = none;
            out->em.rb_any = res.any;
            /* Embree also gets the segments in raybox's walk order, over
             * the city's bounds (raybox sorts inside its own time). */
            float lo[3] = {INFINITY, INFINITY, INFINITY};
            float hi[3] = {-INFINITY, -INFINITY, -INFINITY};
            for (size_t i = 0; i < nb; i++)
                for (int k = 0; k < 3; k++) {
                    lo[k] = fminf(lo[k], boxes[i].min[k]);
                    hi[k] = fmaxf(hi[k], boxes[i].max[k]);
                }
            uint32_t *order = malloc((segs ? segs : 1) * sizeof *order);
            int order_ok = order &&
                           !bench_walk_order(ctx, repeat, rays, segs, lo, hi,
                                             NULL, order, &out->sort_ms);
            bench_embree_all(ctx, o, boxes, nb, rays,
                             order_ok ? order : NULL, segs, 0, &out->em);
            free(order);
            free(none);
            out->em.rb_nearest = NULL;
            out->em.rb_any = NULL;
        }
    }
    rc = 0;
done:
    rb_scene_destroy(scene);
    free(boxes);
    free(ends);
    free(rays);
    free(res.any);
    return rc;
}

static void print_los(const los_result *l)
{
    size_t segs = l->observers * l->targets;
    printf("\nline of sight: a city of %zu boxes, %zu observers x %zu "
           "targets = %zu segments (t in [0, 1]), %llu visible\n",
           l->boxes, l->observers, l->targets, segs,
           (unsigned long long)l->visible);
    printf("  %-24s %12.3f\n", "raybox any [Msegs/s]",
           rate((double)segs, l->any_ms));
    printf("  %-24s %12.3f\n", "raybox build [Mboxes/s]",
           rate((double)l->boxes, l->build_ms));
    printf("  %-24s %12.3f  (%.2fx the explicit segments' rate; answers "
           "%s; memory %.1f MB against %.1f MB)\n",
           "rb_visibility [Msegs/s]", rate((double)segs, l->vis_ms),
           l->vis_ms > 0 ? l->any_ms / l->vis_ms : 0,
           l->vis_same ? "the same" : "DIFFER", l->vis_mb, l->explicit_mb);
    print_embree(&l->em, segs, l->sort_ms, l->any_ms, l->any_ms,
                 l->build_ms, 0);
    if (l->em.n_em && l->vis_ms > 0) {
        const em_config *b = fastest(&l->em, 1, l->sort_ms, 1);
        char name[96];
        printf("  %-24s %12.2fx the fastest Embree any (%s)\n",
               "rb_visibility", config_ms(b, 1, l->sort_ms, 1) / l->vis_ms,
               config_name(b, name, sizeof name));
    }
}

static int quality_of(const char *t)
{
    for (int q = 0; q < MAX_QUALITIES; q++)
        if (!strcmp(t, quality_names[q]))
            return q;
    return -1;
}

static int usage_to(FILE *f, const char *argv0)
{
    fprintf(f, "usage: %s [--boxes N[,N...]] [--rays N] [--threads N] "
                    "[--json] [--rows FILE] [--no-embree] [--no-opencl] "
                    "[--seed S] "
                    "[--repeat R] [--embree-quality low|medium|high[,...]] "
                    "[--los BOXES,OBSERVERS,TARGETS | --no-los]\n",
            argv0);
    return 2;
}

static int usage(const char *argv0)
{
    return usage_to(stderr, argv0);
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SCENES] = {100000, 1000000};
    size_t n_sizes = 2, nr = 1000000;
    size_t los_boxes = 200000, los_obs = 2000, los_tgt = 2000;
    unsigned threads = 0;
    int json = 0, embree = 1, opencl = 1, los = 1;
    const char *rows_path = NULL;
    uint64_t seed = 1;
    run_options ro = {.qualities = {0, 1, 2}, .n_qualities = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("raybox-bench-bvh: raybox's hierarchy against Embree 3's "
                   "strongest setups (6 quads, 12 triangles, user geometry; "
                   "each --embree-quality; rays in input and in raybox's "
                   "walk order) on random scenes and a line-of-sight city, "
                   "and the OpenCL walk on the same scenes "
                   "(docs/benchmarks.md, \"Hierarchies\").\n");
            usage_to(stdout, argv[0]);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--rows") && v) {
            rows_path = v;
            i++;
        } else if (!strcmp(a, "--no-embree")) {
            embree = 0;
        } else if (!strcmp(a, "--no-opencl")) {
            opencl = 0;
        } else if (!strcmp(a, "--no-los")) {
            los = 0;
        } else if (!strcmp(a, "--los") && v) {
            if (sscanf(v, "%zu,%zu,%zu", &los_boxes, &los_obs, &los_tgt) !=
                    3 ||
                !los_boxes || !los_obs || !los_tgt)
                return usage(argv[0]);
            i++;
        } else if (!strcmp(a, "--embree-quality") && v) {
            ro.n_qualities = 0;
            char list[64];
            snprintf(list, sizeof list, "%s", v);
            for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
                int q = quality_of(t);
                if (q < 0 || ro.n_qualities == MAX_QUALITIES)
                    return usage(argv[0]);
                ro.qualities[ro.n_qualities++] = q;
            }
            i++;
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
            return usage(argv[0]);
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
    ro.threads = threads;

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

    rb_ray *rays = malloc((nr ? nr : 1) * sizeof *rays);
    uint32_t *order = malloc((nr ? nr : 1) * sizeof *order);
    int32_t *rb_nearest = malloc((nr ? nr : 1) * sizeof *rb_nearest);
    uint8_t *rb_any = malloc(nr ? nr : 1);
    scene_result res[MAX_SCENES];
    memset(res, 0, sizeof res);
    if (!rays || !order || !rb_nearest || !rb_any)
        return fail("rays", NULL, RB_ENOMEM);
    uint64_t s = seed;
    bench_random_rays(&s, rays, nr);
    double sort_ms = 0;
    const float unit_lo[3] = {0, 0, 0}, unit_hi[3] = {1, 1, 1};
    if (embree && bench_walk_order(ctx, repeat, rays, nr, unit_lo, unit_hi,
                                   NULL, order, &sort_ms))
        return fail("walk order", NULL, RB_ENOMEM);
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
        res[k].rb_nearest = rb_nearest;
        res[k].rb_any = rb_any;
        /* raybox first: its answers are what Embree's are checked
         * against, and the refit below moves the boxes afterwards. */
        rb_box *copy = malloc((nb ? nb : 1) * sizeof *copy);
        if (!copy)
            return fail("boxes", NULL, RB_ENOMEM);
        memcpy(copy, boxes, nb * sizeof *copy);
        if (bench_raybox(ctx, cl, boxes, nb, rays, nr, &res[k]))
            return 1;
        if (embree) {
            bench_embree_all(ctx, &ro, copy, nb, rays, order, nr, 1,
                             &res[k]);
            bench_queries_in_turn(ctx, &ro, copy, nb, rays, order, nr,
                                  sort_ms, &res[k]);
        }
        free(copy);
        free(boxes);
        if (!json)
            print_table(&res[k], nr, sort_ms);
    }
    los_result lr;
    memset(&lr, 0, sizeof lr);
    if (los) {
        if (bench_los(ctx, &ro, los_boxes, los_obs, los_tgt, seed, embree,
                      &lr))
            return 1;
        if (!json)
            print_los(&lr);
    }
    if (json)
        print_json(res, n_sizes, nr, threads, cl ? cl_info.device : NULL,
                   cl_why, sort_ms, &lr);
    int failed = rows_path && write_rows(rows_path, &info, cl ? &cl_info
                                                               : &info,
                                         res, n_sizes, nr, sort_ms, &lr);
    int differs = count_user_differs(&lr.em, 0);
    for (size_t k = 0; k < n_sizes; k++)
        differs += count_user_differs(&res[k], 1);
    if (differs) {
        fprintf(stderr,
                "raybox-bench-bvh: %d Embree user-geometry configuration(s) "
                "answered otherwise than raybox (DIFFERS FROM RAYBOX above): "
                "raybox's own box test behind Embree's hierarchy must give "
                "raybox's answers, so one of the two walks is wrong\n",
                differs);
        failed = 1;
    }
    free(rays);
    free(order);
    free(rb_nearest);
    free(rb_any);
    rb_context_destroy(cl);
    rb_context_destroy(ctx);
    return failed;
}
