/* bench_shapes.c - raybox-bench-shapes: scenes of obbs, xboxes, spheres,
 * boxes and an equal mix of the four against Embree 3 given the same
 * elements, the same rays in the same order and the same threads (the
 * shapes benchmark of SPEC section 7's issue).
 *
 *   raybox-bench-shapes [--elements N[,N...]] [--rays N] [--threads N]
 *                       [--repeat R] [--kinds K[,K...]] [--fill F]
 *                       [--embree-quality Q[,Q...]] [--no-embree]
 *                       [--opencl] [--cl-rays N] [--cl-brute-rays N]
 *                       [--sort-rays] [--seed S] [--json] [--rows FILE]
 *
 * Scenes: N random elements of one kind (box, obb, xbox, sphere) or N/4
 * of each (mixed; ids boxes ++ obbs ++ xboxes ++ spheres) in the unit
 * cube. Element sizes follow the scene size so that a ray path of unit
 * length crosses about --fill elements (default 2): most rays, which
 * start inside the cube, hit something, and not all of them. Per axis an
 * element spans side * (0.2 .. 1.0), side = sqrt(fill / (0.54 N)) (0.54
 * side^2 is a box's mean projected area); an obb has those sides turned
 * by a uniform random rotation, an xbox is the local box [-0.5, 0.5]^3
 * under A = R * diag(sides) * shear (one off-diagonal in -0.25..0.25)
 * and a translation, a sphere has the radius side * (0.15 .. 0.68).
 * Rays: uniform origins in the cube, directions uniform in [-1, 1]^3,
 * t in [0, inf) (raybox-bench-bvh's rays).
 *
 * raybox: rb_scene_create_shapes, then rb_intersect (nearest, any) on the
 * CPU backend; --opencl adds a second context on the first OpenCL device,
 * queried with the first --cl-rays rays (default 4096) and checked equal
 * to the CPU's answers; it walks the shape tree on the device.
 * --cl-brute-rays N adds a third, with the hierarchies off (every ray
 * tests every shape, and every box: the OpenCL shape pass before the
 * device walked the tree), on the first N rays, checked likewise.
 * Embree (bench_shapes_embree.c): native primitives (quads, 12 triangles
 * per obb/xbox, RTC_GEOMETRY_TYPE_SPHERE_POINT), the same with boxes as
 * 12 triangles too, and user geometry running raybox's exact tests,
 * each at every build quality of --embree-quality (default medium,high;
 * scene flags none), keeping the fastest per figure. Times are medians
 * of --repeat runs (default 3). The fastest Embree setup of each figure
 * is the yardstick of the ratio.
 *
 * Cross-checks: user geometry must give raybox's answers exactly (nearest
 * ids, any flags); native primitives follow other rules (a ray that
 * starts inside an element reports its exit surface; edges), so the
 * fraction that agrees is reported.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_scenes.h"
#include "bench_shapes.h"
#include "rbench_version.h"
#include "rows.h"
#include "internal.h"

#define MAX_SIZES 8
#define MAX_QUALITIES 3
#define MAX_REPEAT 64
/* bench_in_turn's least rounds (at most 2 * MAX_REPEAT + 1) */
#define TURN_ROUNDS_MIN 21

static const char *const setup_names[EM_SETUPS] = {"native", "user",
                                                   "triangles"};
static const char *const quality_names[3] = {"low", "medium", "high"};

typedef struct figure {
    int kind;
    size_t elements;
    /* raybox, CPU */
    double build_ms, nearest_ms, any_ms;
    /* mixed: its cost over the box-only scene's of the same size, nearest
     * and any, measured in turn (bench_in_turn) */
    int have_turn;
    double turn_ratio[2];
    int turn_rounds;
    uint64_t nearest_hits, any_hits, shape_nodes;
    double bytes_per_element;
    /* Embree, per setup: the fastest quality per mode */
    int have_em[EM_SETUPS];
    char em_error[EM_SETUPS][160];
    double em_build_ms[EM_SETUPS], em_nearest_ms[EM_SETUPS],
        em_any_ms[EM_SETUPS], em_bytes[EM_SETUPS];
    int em_q_nearest[EM_SETUPS], em_q_any[EM_SETUPS];
    /* the fastest had the rays in raybox's walk order (its sort charged) */
    int em_wo_nearest[EM_SETUPS], em_wo_any[EM_SETUPS];
    uint64_t em_nearest_hits[EM_SETUPS], em_any_hits[EM_SETUPS];
    double agree_nearest[EM_SETUPS], agree_any[EM_SETUPS];
    /* nearest (0) and any (1) timed in turn with the fastest Embree setup
     * of each (em_result.query_turn): the median of the rounds' Embree ms
     * (charged) / raybox's; 0 when not measured */
    double em_turn[2];
    /* OpenCL */
    int have_cl;
    size_t cl_rays;
    double cl_nearest_ms, cl_any_ms;
    int cl_same;
    /* OpenCL with the hierarchies off (--cl-brute-rays): every ray tests
     * every shape, as before the device walked the shape tree */
    int have_clb;
    size_t clb_rays;
    double clb_nearest_ms, clb_any_ms;
    int clb_same;
} figure;

/* ---- raybox --------------------------------------------------------------- */

static int fail(const char *what, rb_context *ctx, int rc)
{
    fprintf(stderr, "raybox-bench-shapes: %s: %s (%s)\n", what,
            rb_status_name(rc), ctx ? rb_context_error(ctx)->message : "");
    return 1;
}

/* One mode on the scene: the median of `repeat` runs. */
static int query(rb_context *ctx, const rb_scene *scene, rb_mode mode,
                 const rb_ray *rays, size_t n, int repeat, rb_results *res,
                 double *ms)
{
    rb_query q = {.mode = mode, .dims = 3, .rays = rays, .n_rays = n,
                  .scene = scene, .max_hits = 1};
    double t[MAX_REPEAT];
    for (int k = 0; k < repeat; k++) {
        double t0 = bench_now_ms();
        int rc = rb_intersect(ctx, &q, res);
        t[k] = bench_now_ms() - t0;
        if (rc)
            return fail(rb_mode_name(mode), ctx, rc);
    }
    *ms = bench_median(t, repeat);
    return 0;
}

typedef struct options {
    size_t sizes[MAX_SIZES];
    size_t n_sizes, n_rays, cl_rays, cl_brute_rays;
    unsigned threads;
    int repeat, json, embree, opencl, sort_rays;
    const char *rows;   /* --rows FILE: the ratio rows, raybox-bench's form */
    int kinds[K_KINDS];
    int qualities[MAX_QUALITIES], n_qualities;
    float fill;
    uint64_t seed;
} options;

/* The OpenCL rates on the first cl_rays rays, checked against the CPU's
 * answers (res holds the CPU's nearest hits, any_cpu its any flags). */
static int bench_opencl(rb_context *cl, const rb_scene *scene,
                        const rb_ray *rays, const options *o, size_t n,
                        const rb_hit *hits_cpu, const uint8_t *any_cpu,
                        double *nearest_ms, double *any_ms, int *same)
{
    n = n < o->n_rays ? n : o->n_rays;
    rb_results res;
    int rc = 1;
    if (bench_results_take(&res, n))
        goto done;
    /* A few rays first: PoCL compiles a kernel at its first launch. */
    rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = rays,
                  .n_rays = n < 64 ? n : 64, .scene = scene, .max_hits = 1};
    int st = rb_intersect(cl, &q, &res);
    q.mode = RB_MODE_ANY;
    if (!st)
        st = rb_intersect(cl, &q, &res);
    if (st) {
        rc = fail("opencl warm-up", cl, st);
        goto done;
    }
    if (query(cl, scene, RB_MODE_NEAREST, rays, n, o->repeat, &res,
              nearest_ms))
        goto done;
    *same = strcmp(res.info.backend, "opencl") == 0;
    for (size_t i = 0; i < n; i++)
        *same &= res.hits[i].box == hits_cpu[i].box &&
                 res.hits[i].t_enter == hits_cpu[i].t_enter;
    if (query(cl, scene, RB_MODE_ANY, rays, n, o->repeat, &res, any_ms))
        goto done;
    *same &= strcmp(res.info.backend, "opencl") == 0;
    for (size_t i = 0; i < n; i++)
        *same &= res.any[i] == any_cpu[i];
    rc = 0;
done:
    bench_results_give(&res);
    return rc;
}

/* walk: raybox's walk order of the rays (Embree's runs in that order read
 * rays[order[k]]) and the sort's time, charged to those runs; NULL with
 * --sort-rays, when both sides get sorted rays. */
typedef struct walk_rays {
    const uint32_t *order;
    double sort_ms;
} walk_rays;

static int fastest(const figure *f, int mode);

static int bench_figure(rb_context *ctx, rb_context *cl, rb_context *clb,
                        const options *o, const bench_elements *e,
                        const rb_ray *rays, const walk_rays *walk,
                        figure *f)
{
    size_t nr = o->n_rays;
    rb_results res;
    em_result em = {0};
    int no_memory = bench_results_take(&res, nr);
    no_memory |= bench_em_answers_take(&em, nr);
    rb_scene *scene = NULL;
    rb_shapeset prep = {0};
    int have_prep = 0, rc = 1;
    if (no_memory) {
        fprintf(stderr, "raybox-bench-shapes: out of memory\n");
        goto done;
    }
    rb_shapes sh = bench_shapes_of(e);
    /* Built `repeat` times, as Embree's scene is (bench_shapes_embree.c). */
    double build[64];
    int builds = o->repeat < 64 ? o->repeat : 64, st = RB_OK;
    for (int k = 0; k < builds && st == RB_OK; k++) {
        rb_scene_destroy(scene);
        scene = NULL;
        double t0 = bench_now_ms();
        st = rb_scene_create_shapes(ctx, 3, e->boxes, e->n[0], &sh, &scene);
        build[k] = bench_now_ms() - t0;
    }
    f->build_ms = bench_median(build, builds);
    if (st) {
        rc = fail("rb_scene_create_shapes", ctx, st);
        goto done;
    }
    rb_scene_stats stats;
    rb_scene_stats_get(scene, &stats);
    f->shape_nodes = stats.shape_nodes;
    f->bytes_per_element = stats.bytes_per_box;

    if (query(ctx, scene, RB_MODE_NEAREST, rays, nr, o->repeat, &res,
              &f->nearest_ms))
        goto done;
    /* Keep the nearest answers: any reuses res.any only. */
    if (query(ctx, scene, RB_MODE_ANY, rays, nr, o->repeat, &res,
              &f->any_ms))
        goto done;
    for (size_t i = 0; i < nr; i++) {
        f->nearest_hits += res.hits[i].hit;
        f->any_hits += res.any[i];
    }
    if (cl) {
        if (bench_opencl(cl, scene, rays, o, o->cl_rays, res.hits, res.any,
                         &f->cl_nearest_ms, &f->cl_any_ms, &f->cl_same))
            goto done;
        f->cl_rays = o->cl_rays < nr ? o->cl_rays : nr;
        f->have_cl = 1;
    }
    if (clb) {
        if (bench_opencl(clb, scene, rays, o, o->cl_brute_rays, res.hits,
                         res.any, &f->clb_nearest_ms, &f->clb_any_ms,
                         &f->clb_same))
            goto done;
        f->clb_rays = o->cl_brute_rays < nr ? o->cl_brute_rays : nr;
        f->have_clb = 1;
    }

    if (o->embree) {
        /* The records raybox prepares, and the bounds of its shape tree,
         * for the user geometries. */
        if (rb_shapes_count(&sh)) {
            st = rb_shapeset_build(ctx, &prep, &sh, (uint32_t)e->n[0]);
            have_prep = st == RB_OK;
            if (!st)
                st = rb_shape_tree_build(ctx, &prep, NULL, NULL);
            if (!st && !prep.tree)
                st = RB_ENOMEM;
            if (st) {
                rc = fail("rb_shapeset_build", ctx, st);
                goto done;
            }
        }
        bench_scene bs = {.boxes = e->boxes, .n_boxes = e->n[0],
                          .shapes = sh, .prep = &prep};
        for (int s = 0; s < EM_SETUPS; s++) {
            for (int qi = 0; qi < o->n_qualities; qi++)
            for (int wo = 0; wo < (walk ? 2 : 1); wo++) {
                int qual = o->qualities[qi];
                if (bench_embree_shapes(ctx->pool, o->threads, o->repeat, s,
                                        qual, &bs, rays,
                                        wo ? walk->order : NULL, nr, &em)) {
                    snprintf(f->em_error[s], sizeof f->em_error[s], "%s",
                             em.error);
                    continue;
                }
                double charge = wo ? walk->sort_ms : 0;
                if (!f->have_em[s] ||
                    em.nearest_ms + charge < f->em_nearest_ms[s]) {
                    f->em_nearest_ms[s] = em.nearest_ms + charge;
                    f->em_q_nearest[s] = qual;
                    f->em_wo_nearest[s] = wo;
                    f->em_build_ms[s] = em.build_ms;
                    f->em_bytes[s] = em.bytes_per_element;
                }
                if (!f->have_em[s] || em.any_ms + charge < f->em_any_ms[s]) {
                    f->em_any_ms[s] = em.any_ms + charge;
                    f->em_q_any[s] = qual;
                    f->em_wo_any[s] = wo;
                }
                uint64_t nh = 0, ah = 0, same_n = 0, same_a = 0;
                for (size_t i = 0; i < nr; i++) {
                    size_t j = wo ? walk->order[i] : i;
                    nh += em.nearest_id[i] >= 0;
                    ah += em.any[i];
                    same_n += em.nearest_id[i] == res.hits[j].box;
                    same_a += em.any[i] == res.any[j];
                }
                /* The agreement of the worst quality tried. */
                double an = nr ? (double)same_n / (double)nr : 1,
                       aa = nr ? (double)same_a / (double)nr : 1;
                if (!f->have_em[s] || an < f->agree_nearest[s])
                    f->agree_nearest[s] = an;
                if (!f->have_em[s] || aa < f->agree_any[s])
                    f->agree_any[s] = aa;
                f->em_nearest_hits[s] = nh;
                f->em_any_hits[s] = ah;
                f->have_em[s] = 1;
            }
        }
        /* Each mode again against its fastest setup, in turn with
         * raybox's queries (2 * repeat + 1 rounds, the median of the
         * rounds' ratios): the separate medians above are a minute or
         * more apart on a shared machine. */
        bench_query_side side = {.ctx = ctx, .scene = scene, .rays = rays,
                                .n = nr, .res = &res};
        int setup[2] = {fastest(f, 0), fastest(f, 1)};
        int quality[2], wo[2];
        for (int m = 0; m < 2; m++) {
            int s = setup[m] < 0 ? 0 : setup[m];
            quality[m] = m ? f->em_q_any[s] : f->em_q_nearest[s];
            wo[m] = m ? f->em_wo_any[s] : f->em_wo_nearest[s];
        }
        /* one scene for both modes when they share their configuration */
        int shared = setup[0] == setup[1] && quality[0] == quality[1] &&
                     wo[0] == wo[1];
        for (int m = 0; m < 2; m++) {
            if (setup[m] < 0 || (m == 1 && shared))
                continue;
            em.query_turn = bench_query_turn;
            em.query_modes = shared ? 3u : 1u << m;
            em.turn_user = &side;
            em.query_charge_ms = wo[m] ? walk->sort_ms : 0;
            if (!bench_embree_shapes(ctx->pool, o->threads, o->repeat,
                                     setup[m], quality[m], &bs, rays,
                                     wo[m] ? walk->order : NULL, nr, &em))
                for (int k = 0; k < 2; k++)
                    if (em.query_modes >> k & 1u)
                        f->em_turn[k] = em.query_speedup[k];
            em.query_turn = NULL;
        }
    }
    rc = 0;
done:
    if (have_prep) {
        rb_shape_tree_free(&ctx->alloc, &prep);
        rb_shapeset_free(&ctx->alloc, &prep);
    }
    rb_scene_destroy(scene);
    bench_results_give(&res);
    bench_em_answers_give(&em);
    return rc;
}

/* ---- reports ---------------------------------------------------------- */

static double rate(double n, double ms)
{
    return ms > 0 ? n / ms / 1e3 : 0; /* millions per second */
}

/* The fastest Embree setup of a mode (0 nearest, 1 any): its index, or -1. */
static int fastest(const figure *f, int mode)
{
    int best = -1;
    for (int s = 0; s < EM_SETUPS; s++) {
        if (!f->have_em[s])
            continue;
        double ms = mode ? f->em_any_ms[s] : f->em_nearest_ms[s];
        double bm = best < 0 ? 0 : mode ? f->em_any_ms[best]
                                        : f->em_nearest_ms[best];
        if (best < 0 || ms < bm)
            best = s;
    }
    return best;
}

static double ratio_vs_embree(const figure *f, int mode)
{
    int s = fastest(f, mode);
    if (s < 0)
        return 0;
    return mode ? f->em_any_ms[s] / f->any_ms
                : f->em_nearest_ms[s] / f->nearest_ms;
}

static const figure *find(const figure *fs, size_t n, int kind,
                          size_t n_elements)
{
    for (size_t i = 0; i < n; i++)
        if (fs[i].kind == kind && fs[i].elements == n_elements)
            return &fs[i];
    return NULL;
}

static void print_figure(const figure *f, size_t nr)
{
    printf("\n%s, %zu elements: raybox build %.1f ms, shape tree %llu "
           "nodes, %.1f B/element\n",
           bench_kind_names[f->kind], f->elements, f->build_ms,
           (unsigned long long)f->shape_nodes, f->bytes_per_element);
    printf("  %-34s %10s %10s %10s %10s\n", "[M rays/s]", "nearest", "any",
           "nearest", "any");
    printf("  %-34s %10s %10s %10s %10s\n", "", "", "", "hits", "hits");
    printf("  %-34s %10.3f %10.3f %10llu %10llu\n", "raybox cpu",
           rate((double)nr, f->nearest_ms), rate((double)nr, f->any_ms),
           (unsigned long long)f->nearest_hits,
           (unsigned long long)f->any_hits);
    for (int s = 0; s < EM_SETUPS; s++) {
        char label[64];
        if (!f->have_em[s]) {
            if (f->em_error[s][0])
                printf("  embree %-19s %s\n", setup_names[s], f->em_error[s]);
            continue;
        }
        snprintf(label, sizeof label, "embree %s (%s%s/%s%s)",
                 setup_names[s], quality_names[f->em_q_nearest[s]],
                 f->em_wo_nearest[s] ? "+w" : "",
                 quality_names[f->em_q_any[s]],
                 f->em_wo_any[s] ? "+w" : "");
        printf("  %-34s %10.3f %10.3f %10llu %10llu\n", label,
               rate((double)nr, f->em_nearest_ms[s]),
               rate((double)nr, f->em_any_ms[s]),
               (unsigned long long)f->em_nearest_hits[s],
               (unsigned long long)f->em_any_hits[s]);
    }
    if (fastest(f, 0) >= 0)
        printf("  %-34s %9.2fx %9.2fx   (vs %s / %s)\n",
               "raybox / fastest embree", ratio_vs_embree(f, 0),
               ratio_vs_embree(f, 1), setup_names[fastest(f, 0)],
               setup_names[fastest(f, 1)]);
    if (f->em_turn[0] > 0 || f->em_turn[1] > 0)
        printf("  %-34s %9.2fx %9.2fx\n", "the same, in turn",
               f->em_turn[0], f->em_turn[1]);
    for (int s = 0; s < EM_SETUPS; s++)
        if (f->have_em[s])
            printf("  agreement with embree %-6s nearest id %.6f, any "
                   "%.6f%s\n",
                   setup_names[s], f->agree_nearest[s], f->agree_any[s],
                   s == EM_USER && (f->agree_nearest[s] < 1 ||
                                    f->agree_any[s] < 1)
                       ? "  (EXPECTED 1: the same exact test)"
                       : "");
    for (int s = 0; s < EM_SETUPS; s++)
        if (f->have_em[s])
            printf("  embree %-6s build %.1f ms, %.1f B/element\n",
                   setup_names[s], f->em_build_ms[s], f->em_bytes[s]);
    if (f->have_cl)
        printf("  %-26s %10.4g %10.4g   (%zu rays; answers %s)\n",
               "raybox opencl", rate((double)f->cl_rays, f->cl_nearest_ms),
               rate((double)f->cl_rays, f->cl_any_ms), f->cl_rays,
               f->cl_same ? "equal the cpu's" : "DIFFER from the cpu's");
    if (f->have_clb)
        printf("  %-26s %10.4g %10.4g   (%zu rays; answers %s)\n",
               "raybox opencl brute", rate((double)f->clb_rays,
                                           f->clb_nearest_ms),
               rate((double)f->clb_rays, f->clb_any_ms), f->clb_rays,
               f->clb_same ? "equal the cpu's" : "DIFFER from the cpu's");
}

/* The mixed scene's cost over the box-only scene's (mx->turn_ratio),
 * measured in turn: mx->turn_rounds rounds (2 * repeat + 1, at least
 * TURN_ROUNDS_MIN) of one query on each scene in each mode, the box scene
 * first in even rounds and the mixed one in odd rounds, and the median of
 * the rounds' ratios. The figures above measure the two scenes a minute
 * or more apart, and on this shared 2-core machine the box scene's `any`
 * moved from 5.0 to 7.6 M rays/s between runs of one binary; rounds in
 * turn see the same load. With 7 rounds six runs of one binary gave
 * 1.38x to 1.57x for `any`; with 21 eight runs of the next one gave 1.41x
 * to 1.48x (docs/benchmarks-shapes.md). The scenes are made again from
 * the figures' seeds. */
static int bench_in_turn(rb_context *ctx, const options *o, size_t si,
                         const rb_ray *rays, figure *mx)
{
    static const int kinds[2] = {K_BOX, K_MIXED};
    size_t nr = o->n_rays;
    rb_scene *sc[2] = {NULL, NULL};
    rb_results res;
    int rc = bench_results_take(&res, nr) != 0;
    for (int j = 0; j < 2 && !rc; j++) {
        bench_elements e;
        if (bench_make_elements(kinds[j], o->sizes[si], o->fill,
                                bench_scene_seed(o->seed, si, kinds[j]), &e))
            rc = 1;
        if (!rc) {
            rb_shapes sh = bench_shapes_of(&e);
            int st = rb_scene_create_shapes(ctx, 3, e.boxes, e.n[0], &sh,
                                            &sc[j]);
            bench_elements_free(&e);
            if (st)
                rc = fail("rb_scene_create_shapes", ctx, st);
        }
    }
    int rounds = 2 * o->repeat + 1;
    if (rounds < TURN_ROUNDS_MIN)
        rounds = TURN_ROUNDS_MIN;
    double r[2][2 * MAX_REPEAT + 1];
    for (int k = 0; k < rounds && !rc; k++) {
        for (int m = 0; m < 2 && !rc; m++) {
            double ms[2];
            for (int i = 0; i < 2 && !rc; i++) {
                int j = k % 2 ? 1 - i : i;
                rc = query(ctx, sc[j], m ? RB_MODE_ANY : RB_MODE_NEAREST,
                           rays, nr, 1, &res, &ms[j]);
            }
            if (!rc)
                r[m][k] = ms[0] > 0 ? ms[1] / ms[0] : 0;
        }
    }
    if (!rc) {
        for (int m = 0; m < 2; m++)
            mx->turn_ratio[m] = bench_median(r[m], rounds);
        mx->have_turn = 1;
        mx->turn_rounds = rounds;
    }
    rb_scene_destroy(sc[0]);
    rb_scene_destroy(sc[1]);
    bench_results_give(&res);
    return rc;
}

/* The targets, one line each: label, measured, target, met. */
typedef struct target {
    char label[96];
    double value;
    const char *rule;
    int met;
} target;

static size_t targets(const figure *fs, size_t n, const options *o,
                      target *out, size_t cap)
{
    size_t k = 0;
    static const char *const modes[2] = {"nearest", "any"};
    for (size_t si = 0; si < o->n_sizes; si++) {
        size_t ne = o->sizes[si];
        for (int kind = K_OBB; kind <= K_SPHERE; kind++) {
            const figure *f = find(fs, n, kind, ne);
            if (!f || fastest(f, 0) < 0)
                continue;
            for (int m = 0; m < 2 && k < cap; m++) {
                target *t = &out[k++];
                snprintf(t->label, sizeof t->label,
                         "%s %zu %s vs fastest embree",
                         bench_kind_names[kind], ne, modes[m]);
                /* in turn where measured (see bench_figure) */
                t->value = f->em_turn[m] > 0 ? f->em_turn[m]
                                              : ratio_vs_embree(f, m);
                if (f->em_turn[m] > 0)
                    strncat(t->label, " (in turn)",
                            sizeof t->label - strlen(t->label) - 1);
                t->rule = ">= 1.5x";
                t->met = t->value >= 1.5;
            }
        }
        const figure *mx = find(fs, n, K_MIXED, ne),
                     *bx = find(fs, n, K_BOX, ne);
        if (mx && bx) {
            for (int m = 0; m < 2 && k < cap; m++) {
                target *t = &out[k++];
                snprintf(t->label, sizeof t->label,
                         "mixed %zu %s cost / box-only cost%s", ne, modes[m],
                         mx->have_turn ? " (in turn)" : "");
                t->value = mx->have_turn ? mx->turn_ratio[m]
                           : m           ? mx->any_ms / bx->any_ms
                                         : mx->nearest_ms / bx->nearest_ms;
                t->rule = "<= 1.5x";
                t->met = t->value <= 1.5;
            }
        }
    }
    return k;
}

/* ---- ratio rows (--rows FILE) -------------------------------------------
 * The run's ratios in raybox-bench's row format, for `raybox-bench --from
 * FILE --ratios --compare BASELINE` (rows.h): each kind against the
 * fastest Embree setup, and the box-only scene's cost against the mixed
 * one's. Larger is better in each. */
static int write_rows(const figure *fs, size_t n, const options *o,
                      const rb_backend_info *info)
{
    rbench_rows rows = {0};
    snprintf(rows.version, sizeof rows.version, "%s", RB_VERSION_STRING);
    snprintf(rows.git, sizeof rows.git, "%s", RBENCH_GIT_REVISION);
    static const char *const modes[2] = {"nearest", "any"};
    for (size_t i = 0; i < n; i++) {
        const figure *f = &fs[i];
        const figure *bx = find(fs, n, K_BOX, f->elements);
        for (int m = 0; m < 2; m++) {
            char test[32], size[48];
            snprintf(test, sizeof test, "%s_%s", bench_kind_names[f->kind],
                     modes[m]);
            snprintf(size, sizeof size, "%zux%zu", o->n_rays, f->elements);
            rbench_where w = {.backend = "cpu", .device = info->device,
                           .type = "cpu", .driver = "raybox-bench-shapes",
                           .category = "ratios", .test = test,
                           .shape = bench_kind_names[f->kind], .path = "e2e",
                           .rays = o->n_rays, .boxes = f->elements,
                           .size = size};
            if (fastest(f, m) >= 0)
                rbench_add_ratio(&rows, &w, "speed_vs_fastest_embree",
                              ratio_vs_embree(f, m));
            if (f->em_turn[m] > 0)
                rbench_add_ratio(&rows, &w, "speed_vs_embree_in_turn",
                                 f->em_turn[m]);
            double mine = m ? f->any_ms : f->nearest_ms;
            if (f->kind == K_MIXED && f->have_turn && f->turn_ratio[m] > 0)
                rbench_add_ratio(&rows, &w, "speed_vs_box_only",
                                 1 / f->turn_ratio[m]);
            else if (f->kind == K_MIXED && bx && mine > 0)
                rbench_add_ratio(&rows, &w, "speed_vs_box_only",
                              (m ? bx->any_ms : bx->nearest_ms) / mine);
        }
    }
    int rc = rbench_write_file(&rows, o->rows, rbench_write_json);
    if (rc)
        perror(o->rows);
    rbench_rows_free(&rows);
    return rc ? 1 : 0;
}

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

static void print_json(const figure *fs, size_t n, const options *o,
                       const char *cpu, const char *cl_device,
                       const target *ts, size_t nt)
{
    size_t nr = o->n_rays;
    printf("{\"tool\": \"raybox-bench-shapes\", \"threads\": %u, "
           "\"rays\": %zu, \"repeat\": %d, \"fill\": %.3f, "
           "\"sorted_rays\": %s, \"cpu\": ",
           o->threads, nr, o->repeat, (double)o->fill,
           o->sort_rays ? "true" : "false");
    print_json_text(cpu);
    printf(", \"opencl_device\": ");
    if (cl_device)
        print_json_text(cl_device);
    else
        printf("null");
    printf(",\n \"figures\": [");
    for (size_t i = 0; i < n; i++) {
        const figure *f = &fs[i];
        printf("%s\n  {\"kind\": \"%s\", \"elements\": %zu, "
               "\"raybox\": {\"build_ms\": %.3f, \"nearest_mrays_s\": %.4f, "
               "\"any_mrays_s\": %.4f, \"nearest_hits\": %llu, "
               "\"any_hits\": %llu, \"shape_nodes\": %llu, "
               "\"bytes_per_element\": %.2f}",
               i ? "," : "", bench_kind_names[f->kind], f->elements,
               f->build_ms,
               rate((double)nr, f->nearest_ms), rate((double)nr, f->any_ms),
               (unsigned long long)f->nearest_hits,
               (unsigned long long)f->any_hits,
               (unsigned long long)f->shape_nodes, f->bytes_per_element);
        for (int s = 0; s < EM_SETUPS; s++) {
            if (!f->have_em[s])
                continue;
            printf(", \"embree_%s\": {\"build_ms\": %.3f, "
                   "\"nearest_mrays_s\": %.4f, \"any_mrays_s\": %.4f, "
                   "\"nearest_quality\": \"%s\", \"any_quality\": \"%s\", "
                   "\"nearest_walk_order\": %s, \"any_walk_order\": %s, "
                   "\"nearest_hits\": %llu, \"any_hits\": %llu, "
                   "\"bytes_per_element\": %.2f, \"agree_nearest\": %.6f, "
                   "\"agree_any\": %.6f}",
                   setup_names[s], f->em_build_ms[s],
                   rate((double)nr, f->em_nearest_ms[s]),
                   rate((double)nr, f->em_any_ms[s]),
                   quality_names[f->em_q_nearest[s]],
                   quality_names[f->em_q_any[s]],
                   f->em_wo_nearest[s] ? "true" : "false",
                   f->em_wo_any[s] ? "true" : "false",
                   (unsigned long long)f->em_nearest_hits[s],
                   (unsigned long long)f->em_any_hits[s], f->em_bytes[s],
                   f->agree_nearest[s], f->agree_any[s]);
        }
        if (fastest(f, 0) >= 0)
            printf(", \"ratio_vs_fastest_embree\": {\"nearest\": %.3f, "
                   "\"any\": %.3f}",
                   ratio_vs_embree(f, 0), ratio_vs_embree(f, 1));
        if (f->em_turn[0] > 0 || f->em_turn[1] > 0)
            printf(", \"in_turn_vs_fastest_embree\": {\"nearest\": %.3f, "
                   "\"any\": %.3f}", f->em_turn[0], f->em_turn[1]);
        if (f->have_cl)
            printf(", \"opencl\": {\"rays\": %zu, \"nearest_mrays_s\": %.6g, "
                   "\"any_mrays_s\": %.6g, \"same_as_cpu\": %s}",
                   f->cl_rays, rate((double)f->cl_rays, f->cl_nearest_ms),
                   rate((double)f->cl_rays, f->cl_any_ms),
                   f->cl_same ? "true" : "false");
        if (f->have_clb)
            printf(", \"opencl_brute\": {\"rays\": %zu, "
                   "\"nearest_mrays_s\": %.6g, \"any_mrays_s\": %.6g, "
                   "\"same_as_cpu\": %s}",
                   f->clb_rays, rate((double)f->clb_rays, f->clb_nearest_ms),
                   rate((double)f->clb_rays, f->clb_any_ms),
                   f->clb_same ? "true" : "false");
        printf("}");
    }
    printf("\n ],\n \"targets\": [");
    for (size_t i = 0; i < nt; i++) {
        printf("%s\n  {\"figure\": ", i ? "," : "");
        print_json_text(ts[i].label);
        printf(", \"value\": %.3f, \"rule\": \"%s\", \"met\": %s}",
               ts[i].value, ts[i].rule, ts[i].met ? "true" : "false");
    }
    printf("\n ]}\n");
}

/* ---- options ------------------------------------------------------------ */

static int usage_to(FILE *f, const char *argv0)
{
    fprintf(f,
            "usage: %s [--elements N[,N...]] [--rays N] [--threads N] "
            "[--repeat R] [--kinds box,obb,xbox,sphere,mixed] [--fill F] "
            "[--embree-quality low|medium|high[,...]] [--no-embree] "
            "[--opencl] [--cl-rays N] [--cl-brute-rays N] [--sort-rays] "
            "[--seed S] [--json] "
            "[--rows FILE]\n",
            argv0);
    return 2;
}

static int usage(const char *argv0)
{
    return usage_to(stderr, argv0);
}

static int parse_list(char *p, int (*item)(const char *, void *), void *u)
{
    for (char *tok = strtok(p, ","); tok; tok = strtok(NULL, ","))
        if (item(tok, u))
            return -1;
    return 0;
}

static int kind_item(const char *t, void *u)
{
    options *o = u;
    int k = bench_kind_of(t);
    if (k < 0)
        return -1;
    o->kinds[k] = 1;
    return 0;
}

static int quality_item(const char *t, void *u)
{
    options *o = u;
    for (int q = 0; q < 3; q++)
        if (!strcmp(t, quality_names[q]) && o->n_qualities < MAX_QUALITIES) {
            o->qualities[o->n_qualities++] = q;
            return 0;
        }
    return -1;
}

static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->sizes[0] = 100000;
    o->sizes[1] = 1000000;
    o->n_sizes = 2;
    o->n_rays = 1000000;
    o->cl_rays = 4096;
    o->repeat = 3;
    o->embree = 1;
    o->fill = 2.0f;
    o->seed = 1;
    for (int k = 0; k < K_KINDS; k++)
        o->kinds[k] = 1;
    o->qualities[0] = 1; /* medium */
    o->qualities[1] = 2; /* high */
    o->n_qualities = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("raybox-bench-shapes: obbs, xboxes, spheres and a mix "
                   "through raybox's CPU backend (and --opencl) against "
                   "Embree 3's native primitives, 12 triangles and user "
                   "geometry running raybox's exact tests, at every "
                   "--embree-quality; the fastest Embree setup is the "
                   "yardstick (docs/benchmarks-shapes.md).\n");
            usage_to(stdout, argv[0]);
            return -1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--rows") && v) {
            o->rows = v;
            i++;
        } else if (!strcmp(a, "--no-embree")) {
            o->embree = 0;
        } else if (!strcmp(a, "--opencl")) {
            o->opencl = 1;
        } else if (!strcmp(a, "--sort-rays")) {
            o->sort_rays = 1;
        } else if (!v) {
            return usage(argv[0]);
        } else if (!strcmp(a, "--rays")) {
            o->n_rays = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--cl-rays")) {
            o->cl_rays = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--cl-brute-rays")) {
            o->cl_brute_rays = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--threads")) {
            o->threads = (unsigned)strtoul(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--repeat")) {
            o->repeat = atoi(v);
            if (o->repeat < 1 || o->repeat > MAX_REPEAT)
                return usage(argv[0]);
            i++;
        } else if (!strcmp(a, "--fill")) {
            o->fill = strtof(v, NULL);
            if (!(o->fill > 0))
                return usage(argv[0]);
            i++;
        } else if (!strcmp(a, "--seed")) {
            o->seed = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--kinds")) {
            memset(o->kinds, 0, sizeof o->kinds);
            if (parse_list(argv[++i], kind_item, o))
                return usage(argv[0]);
        } else if (!strcmp(a, "--embree-quality")) {
            o->n_qualities = 0;
            if (parse_list(argv[++i], quality_item, o))
                return usage(argv[0]);
        } else if (!strcmp(a, "--elements")) {
            o->n_sizes = 0;
            for (char *p = argv[++i]; *p && o->n_sizes < MAX_SIZES;) {
                o->sizes[o->n_sizes++] = strtoull(p, &p, 10);
                if (*p == ',')
                    p++;
                else if (*p)
                    return usage(argv[0]);
            }
        } else {
            return usage(argv[0]);
        }
    }
    return 0;
}

/* --sort-rays: the rays along raybox's own walk order
 * (bench_walk_order), given to both sides. */
static int sort_rays(rb_context *ctx, rb_ray *rays, size_t n)
{
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    rb_ray *copy = malloc((n ? n : 1) * sizeof *copy);
    const float lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1};
    double ms;
    int rc = order && copy &&
                     !bench_walk_order(ctx, 1, rays, n, lo, hi, copy, order,
                                       &ms)
                 ? 0
                 : -1;
    if (!rc)
        memcpy(rays, copy, n * sizeof *rays);
    free(order);
    free(copy);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc; /* -1: --help */

    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    opt.threads = o.threads;
    rb_context *ctx = NULL;
    char why[256];
    if (rb_context_create(&opt, &ctx, why, sizeof why)) {
        fprintf(stderr, "raybox-bench-shapes: %s\n", why);
        return 1;
    }
    rb_backend_info info;
    rb_context_info(ctx, &info);
    o.threads = info.threads;

    rb_context *cl = NULL, *clb = NULL;
    rb_backend_info cl_info;
    char cl_why[256] = "not asked (--opencl)";
    if (o.opencl) {
        rb_context_options clo;
        rb_context_options_init(&clo);
        clo.backend = RB_BACKEND_OPENCL;
        clo.threads = o.threads;
        clo.cpu_fallback = 0; /* a failure is reported, never hidden */
        if (rb_context_create(&clo, &cl, cl_why, sizeof cl_why) == RB_OK)
            rb_context_info(cl, &cl_info);
        else
            cl = NULL;
        clo.hierarchy = RB_HIERARCHY_OFF;
        if (cl && o.cl_brute_rays &&
            rb_context_create(&clo, &clb, cl_why, sizeof cl_why) != RB_OK)
            clb = NULL;
    }

    rb_ray *rays = malloc((o.n_rays ? o.n_rays : 1) * sizeof *rays);
    figure *fs = calloc(K_KINDS * MAX_SIZES, sizeof *fs);
    if (!rays || !fs)
        return fail("rays", NULL, RB_ENOMEM);
    uint64_t s = o.seed;
    bench_random_rays(&s, rays, o.n_rays);
    if (o.sort_rays && sort_rays(ctx, rays, o.n_rays))
        return fail("--sort-rays", NULL, RB_ENOMEM);
    /* Without --sort-rays Embree also gets the rays in the order raybox's
     * walks take them, the sort charged to it (as in raybox-bench-bvh),
     * and the faster order counts. */
    walk_rays walk = {0};
    uint32_t *order = NULL;
    if (!o.sort_rays && o.embree) {
        const float lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1};
        order = malloc((o.n_rays ? o.n_rays : 1) * sizeof *order);
        if (!order ||
            bench_walk_order(ctx, o.repeat, rays, o.n_rays, lo, hi, NULL,
                             order, &walk.sort_ms))
            return fail("walk order", NULL, RB_ENOMEM);
        walk.order = order;
    }
    if (!o.json) {
        printf("raybox-bench-shapes: %u threads, %zu rays, %s (%s), "
               "fill %.2f, medians of %d runs\n",
               o.threads, o.n_rays, info.device, info.simd, (double)o.fill,
               o.repeat);
        if (o.sort_rays)
            printf("ray order: both sides get the rays sorted along "
                   "raybox's walk order (--sort-rays)\n");
        else {
            printf("ray order: raybox gets the rays as generated (random) "
                   "and its walks sort big batches along a Morton curve "
                   "(host/cpu/ray_order.h)");
            if (walk.order)
                printf("; Embree gets them both as generated and read "
                       "through that order, the sort (%.1f ms) charged to "
                       "it, and the faster counts (+w: in walk order)",
                       walk.sort_ms);
            printf("\n");
        }
        if (cl)
            printf("opencl: %s (%s, %u compute units), first %zu rays\n",
                   cl_info.device, cl_info.platform, cl_info.compute_units,
                   o.cl_rays < o.n_rays ? o.cl_rays : o.n_rays);
        else if (o.opencl)
            printf("opencl: skipped (%s)\n", cl_why);
        fflush(stdout);
    }
    size_t nf = 0;
    for (size_t si = 0; si < o.n_sizes; si++) {
        for (int kind = 0; kind < K_KINDS; kind++) {
            if (!o.kinds[kind])
                continue;
            bench_elements e;
            if (bench_make_elements(kind, o.sizes[si], o.fill,
                                    bench_scene_seed(o.seed, si, kind), &e))
                return fail("elements", NULL, RB_ENOMEM);
            figure *f = &fs[nf++];
            f->kind = kind;
            f->elements = o.sizes[si];
            int rc = bench_figure(ctx, cl, clb, &o, &e, rays,
                                  walk.order ? &walk : NULL, f);
            bench_elements_free(&e);
            if (rc)
                return 1;
            if (!o.json) {
                print_figure(f, o.n_rays);
                fflush(stdout);
            }
        }
    }
    /* The mixed scenes' cost, measured in turn with the box scenes. */
    for (size_t si = 0; si < o.n_sizes; si++) {
        figure *mx = NULL;
        for (size_t i = 0; i < nf; i++)
            if (fs[i].kind == K_MIXED && fs[i].elements == o.sizes[si])
                mx = &fs[i];
        if (!mx || !find(fs, nf, K_BOX, o.sizes[si]))
            continue;
        if (bench_in_turn(ctx, &o, si, rays, mx))
            return 1;
        if (!o.json)
            printf("\nmixed %zu against box-only %zu, in turn (%d rounds): "
                   "cost %.2fx (nearest), %.2fx (any)\n",
                   o.sizes[si], o.sizes[si], mx->turn_rounds,
                   mx->turn_ratio[0], mx->turn_ratio[1]);
    }
    target ts[64];
    size_t nt = targets(fs, nf, &o, ts, 64);
    if (o.json) {
        print_json(fs, nf, &o, info.device, cl ? cl_info.device : NULL, ts,
                   nt);
    } else if (nt) {
        printf("\ntargets (ratios of medians measured in this run):\n");
        for (size_t i = 0; i < nt; i++)
            printf("  %-56s %7.2fx  %-8s %s\n", ts[i].label, ts[i].value,
                   ts[i].rule, ts[i].met ? "met" : "MISSED");
    }
    int failed = o.rows && write_rows(fs, nf, &o, &info);
    /* The user geometry runs raybox's own exact tests behind Embree's
     * hierarchy: any answer of it other than raybox's is a bug in one of
     * the two walks, never a matter of rules. */
    int differs = 0;
    for (size_t i = 0; i < nf; i++)
        differs += fs[i].have_em[EM_USER] &&
                   (fs[i].agree_nearest[EM_USER] < 1 ||
                    fs[i].agree_any[EM_USER] < 1);
    if (differs) {
        fprintf(stderr,
                "raybox-bench-shapes: Embree's user geometry answered "
                "otherwise than raybox in %d scene(s) (EXPECTED 1 above): "
                "the same exact tests must give the same answers, so one "
                "of the two walks is wrong\n",
                differs);
        failed = 1;
    }
    free(fs);
    free(rays);
    free(order);
    rb_context_destroy(cl);
    rb_context_destroy(clb);
    rb_context_destroy(ctx);
    return failed;
}
