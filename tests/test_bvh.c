/* test_bvh.c - the hierarchy (host/bvh) never changes an answer (SPEC R9):
 * every query through it equals brute force bit for bit (hit flags, box,
 * t, faces, any, counts, sorted all lists), over scene shapes chosen to
 * break node tests (shared planes, flat and point boxes, identical boxes,
 * huge and tiny coordinates, deep trees) and rays chosen to graze them
 * (aimed at faces, edges and corners, axis-parallel with +0/-0 and
 * origins on planes, zero directions, origins inside, segments), in 3D
 * and 2D, for scenes after refits, rebuilds and appends, and for inline
 * boxes through a transient hierarchy.
 *
 * Brute force is the same CPU backend with the hierarchy switched off
 * (bvh_use = RB_BVH_USE_OFF, what RAYBOX_BVH=off sets). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bvh/bvh.h"
#include "internal.h"
#include "testutil.h"

enum shape {
    UNIFORM, CLUSTERED, THIN, FLAT_POINTS, OVERLAP, IDENTICAL, GRID, HUGE,
    TINY, DEEP, SINGLE, EMPTY, N_SHAPES
};
static const char *shape_name[N_SHAPES] = {
    "uniform", "clustered", "thin", "flat+points", "overlapping",
    "identical", "grid", "huge", "tiny", "deep", "single", "empty"};

static size_t rays_checked;

/* ---- contexts */

static rb_context *make_ctx(int use, unsigned threads)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.threads = threads;
    rb_context *ctx = rbt_context_opts(RBT_CPU, &opt);
    ctx->bvh_use = use;
    return ctx;
}

/* ---- boxes */

static float pick(rbt_rng *g, const float *v, int n)
{
    return v[rbt_below(g, (uint32_t)n)];
}

static void box_around(rb_box *b, const float c[3], const float h[3])
{
    for (int a = 0; a < 3; a++) {
        b->min[a] = c[a] - h[a];
        b->max[a] = c[a] + h[a];
    }
}

static size_t gen_boxes(int shape, size_t n, rbt_rng *g, rb_box *out)
{
    float cl[8][3];
    for (int k = 0; k < 8; k++)
        for (int a = 0; a < 3; a++)
            cl[k][a] = rbt_uniform(g, -100, 100);
    static const float ext[] = {0, 0, 0, 1, 2};
    int long_axis = (int)rbt_below(g, 3);
    if (shape == SINGLE)
        n = 1;
    if (shape == EMPTY)
        n = 0;
    for (size_t i = 0; i < n; i++) {
        float c[3], h[3];
        rb_box *b = &out[i];
        for (int a = 0; a < 3; a++) {
            c[a] = rbt_uniform(g, -100, 100);
            h[a] = rbt_uniform(g, 0.1f, 5);
        }
        switch (shape) {
        case UNIFORM:
        case SINGLE:
            box_around(b, c, h);
            break;
        case CLUSTERED: {
            const float *k = cl[rbt_below(g, 8)];
            for (int a = 0; a < 3; a++) {
                c[a] = k[a] + rbt_uniform(g, -3, 3);
                h[a] = rbt_uniform(g, 0.01f, 0.5f);
            }
            box_around(b, c, h);
            break;
        }
        case THIN:
            for (int a = 0; a < 3; a++)
                h[a] = a == long_axis || rbt_below(g, 8) == 0
                           ? 30.0f
                           : rbt_uniform(g, 0.001f, 0.05f);
            box_around(b, c, h);
            break;
        case FLAT_POINTS: {
            int point = rbt_below(g, 3) == 0;
            for (int a = 0; a < 3; a++) {
                b->min[a] = (float)((int)rbt_below(g, 41) - 20);
                b->max[a] = b->min[a] + (point ? 0 : pick(g, ext, 5));
            }
            break;
        }
        case OVERLAP:
            for (int a = 0; a < 3; a++) {
                c[a] = rbt_uniform(g, -5, 5);
                h[a] = rbt_uniform(g, 20, 60);
            }
            box_around(b, c, h);
            break;
        case IDENTICAL: {
            static const rb_box same = {{-1, -3, 0}, {2, 1, 4}};
            *b = same;
            break;
        }
        case GRID:
            for (int a = 0; a < 3; a++) {
                b->min[a] = (float)((int)rbt_below(g, 21) - 10);
                b->max[a] = b->min[a] + (float)(1 + rbt_below(g, 3));
            }
            break;
        case HUGE:
            for (int a = 0; a < 3; a++) {
                c[a] *= 1e30f;
                h[a] *= 1e30f;
            }
            box_around(b, c, h);
            if (rbt_below(g, 16) == 0) {
                /* Reaching the ends of the float range. */
                int a = (int)rbt_below(g, 3);
                if (rbt_below(g, 2))
                    b->max[a] = FLT_MAX;
                else
                    b->min[a] = -FLT_MAX;
            }
            break;
        case TINY:
            for (int a = 0; a < 3; a++) {
                c[a] *= 1e-33f;
                h[a] *= 1e-33f;
            }
            box_around(b, c, h);
            if (rbt_below(g, 16) == 0)
                b->min[0] = -1e-39f; /* subnormal: flushed to -0 */
            if (b->min[0] > b->max[0])
                b->max[0] = b->min[0];
            break;
        case DEEP: {
            /* Centres spread exponentially: SAH peels a few boxes off per
             * level, so the depth limit and count halving kick in. */
            float x = powf(1.02f, (float)i);
            float cc[3] = {x, c[1] * 0.01f, c[2] * 0.01f};
            float hh[3] = {x * 0.001f, 0.5f, 0.5f};
            box_around(b, cc, hh);
            break;
        }
        }
    }
    return n;
}

static void bounds_of(const rb_box *b, size_t n, float lo[3], float hi[3])
{
    for (int a = 0; a < 3; a++) {
        lo[a] = n ? INFINITY : -1;
        hi[a] = n ? -INFINITY : 1;
    }
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            lo[a] = fminf(lo[a], b[i].min[a]);
            hi[a] = fmaxf(hi[a], b[i].max[a]);
        }
    }
}

/* ---- rays */

static float signed_zero(rbt_rng *g)
{
    return rbt_below(g, 2) ? 0.0f : -0.0f;
}

/* A point in [lo, hi] without overflowing at the ends of the range. */
static float between(rbt_rng *g, float lo, float hi)
{
    float u = rbt_uniform(g, 0, 1);
    return lo * (1 - u) + hi * u;
}

/* lo, hi or the middle: a face, edge or corner coordinate. */
static float plane_of(rbt_rng *g, const rb_box *b, int a)
{
    switch (rbt_below(g, 3)) {
    case 0:
        return b->min[a];
    case 1:
        return b->max[a];
    default:
        return b->min[a] * 0.5f + b->max[a] * 0.5f;
    }
}

static void gen_ray(rbt_rng *g, const rb_box *boxes, size_t nb,
                    const float lo[3], const float hi[3], rb_ray *r)
{
    static const rb_box unit = {{-1, -1, -1}, {1, 1, 1}};
    const rb_box *b = nb ? &boxes[rbt_below(g, (uint32_t)nb)] : &unit;
    float olo[3], ohi[3];
    for (int a = 0; a < 3; a++) {
        /* Origins range a bit past the scene, halves avoid overflow. */
        float m = lo[a] * 0.5f + hi[a] * 0.5f, w = hi[a] * 0.5f - lo[a] * 0.5f;
        olo[a] = m - w * 1.2f;
        ohi[a] = m + w * 1.2f;
        if (!isfinite(olo[a]) || !isfinite(ohi[a])) {
            olo[a] = lo[a];
            ohi[a] = hi[a];
        }
        r->origin[a] = between(g, olo[a], ohi[a]);
        r->dir[a] = rbt_uniform(g, -1, 1);
    }
    switch (rbt_below(g, 6)) {
    case 0: /* random, some components zero */
        for (int a = 0; a < 3; a++)
            if (rbt_below(g, 4) == 0)
                r->dir[a] = signed_zero(g);
        break;
    case 1: /* aimed at a face, edge or corner: t = 1 there */
        for (int a = 0; a < 3; a++) {
            float t = plane_of(g, b, a);
            r->dir[a] = t - r->origin[a];
            if (!isfinite(r->dir[a])) /* huge scenes: aim with t = 2 */
                r->dir[a] = t * 0.5f - r->origin[a] * 0.5f;
        }
        if (rbt_below(g, 4) == 0) {
            float s = ldexpf(1, (int)rbt_below(g, 40) - 20);
            for (int a = 0; a < 3; a++)
                if (isfinite(r->dir[a] * s))
                    r->dir[a] *= s;
        }
        break;
    case 2: { /* axis-parallel, origin on planes of boxes */
        int axis = (int)rbt_below(g, 3);
        for (int a = 0; a < 3; a++) {
            if (a == axis) {
                r->dir[a] = rbt_below(g, 2) ? 1.0f : -1.0f;
                if (rbt_below(g, 2))
                    r->origin[a] = plane_of(g, b, a);
            } else {
                r->dir[a] = signed_zero(g);
                r->origin[a] = rbt_below(g, 4) ? plane_of(g, b, a)
                                                : r->origin[a];
            }
        }
        break;
    }
    case 3: /* zero direction: a point-in-box test */
        for (int a = 0; a < 3; a++) {
            r->dir[a] = signed_zero(g);
            if (rbt_below(g, 2))
                r->origin[a] = plane_of(g, b, a);
        }
        break;
    case 4: /* origin inside a box */
        for (int a = 0; a < 3; a++)
            r->origin[a] = between(g, b->min[a], b->max[a]);
        break;
    default: /* origin on a corner of a box, random direction */
        for (int a = 0; a < 3; a++)
            r->origin[a] = rbt_below(g, 2) ? b->min[a] : b->max[a];
        break;
    }
    r->tmin = 0;
    r->tmax = INFINITY;
    switch (rbt_below(g, 6)) {
    case 0:
        r->tmin = rbt_uniform(g, -1, 1);
        r->tmax = r->tmin + rbt_uniform(g, 0, 2);
        break;
    case 1:
        r->tmin = -0.0f;
        r->tmax = rbt_uniform(g, 0.5f, 1.5f);
        break;
    case 2:
        r->tmin = r->tmax = 1; /* aimed rays: exactly at the target */
        break;
    case 3:
        r->tmin = rbt_uniform(g, -1e6f, 0);
        break;
    default:
        break;
    }
}

static void to_2d(const rb_box *b3, size_t nb, const rb_ray *r3, size_t nr,
                  rb_box2 *b2, rb_ray2 *r2)
{
    for (size_t i = 0; i < nb; i++) {
        for (int a = 0; a < 2; a++) {
            b2[i].min[a] = b3[i].min[a];
            b2[i].max[a] = b3[i].max[a];
        }
    }
    for (size_t i = 0; i < nr; i++) {
        for (int a = 0; a < 2; a++) {
            r2[i].origin[a] = r3[i].origin[a];
            r2[i].dir[a] = r3[i].dir[a];
        }
        r2[i].tmin = r3[i].tmin;
        r2[i].tmax = r3[i].tmax;
    }
}

/* ---- comparison */

typedef struct answers {
    rb_hit *hits;
    uint8_t *any;
    uint32_t *counts;
    rb_list_hit *list;
} answers;

static void answers_alloc(answers *a, size_t nr, uint32_t max_hits)
{
    size_t n = nr ? nr : 1;
    a->hits = calloc(n, sizeof *a->hits);
    a->any = calloc(n, sizeof *a->any);
    a->counts = calloc(n, sizeof *a->counts);
    a->list = calloc(n * max_hits, sizeof *a->list);
    ck_assert(a->hits && a->any && a->counts && a->list);
}

static void answers_free(answers *a)
{
    free(a->hits);
    free(a->any);
    free(a->counts);
    free(a->list);
}

static void run(rb_context *ctx, const rb_query *q, answers *a)
{
    rb_results res = {.hits = a->hits, .any = a->any, .counts = a->counts,
                      .list = a->list, .capacity = q->n_rays};
    int rc = rb_intersect(ctx, q, &res);
    ck_assert_msg(rc == RB_OK, "rb_intersect: %s (%s)", rb_status_name(rc),
                  rb_context_error(ctx)->message);
}

static const char *ray_str(unsigned dims, const void *rays, size_t i,
                           char *buf, size_t len)
{
    if (dims == 3) {
        const rb_ray *r = &((const rb_ray *)rays)[i];
        snprintf(buf, len, "o=(%a, %a, %a) d=(%a, %a, %a) t=[%a, %a]",
                 (double)r->origin[0], (double)r->origin[1],
                 (double)r->origin[2], (double)r->dir[0], (double)r->dir[1],
                 (double)r->dir[2], (double)r->tmin, (double)r->tmax);
    } else {
        const rb_ray2 *r = &((const rb_ray2 *)rays)[i];
        snprintf(buf, len, "o=(%a, %a) d=(%a, %a) t=[%a, %a]",
                 (double)r->origin[0], (double)r->origin[1],
                 (double)r->dir[0], (double)r->dir[1], (double)r->tmin,
                 (double)r->tmax);
    }
    return buf;
}

/* Every every-box mode of q on fast (hierarchy) and ref (brute force):
 * the answers must be bitwise equal. */
static void compare_query(rb_context *fast, rb_context *ref, rb_query q,
                          const char *what)
{
    answers a, b;
    answers_alloc(&a, q.n_rays, q.max_hits);
    answers_alloc(&b, q.n_rays, q.max_hits);
    char rs[256], h1[160], h2[160];
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++) {
        q.mode = (rb_mode)mode;
        run(fast, &q, &a);
        run(ref, &q, &b);
        for (size_t i = 0; i < q.n_rays; i++) {
            switch (mode) {
            case RB_MODE_NEAREST:
                if (!rbt_same_hit(&a.hits[i], &b.hits[i]))
                    ck_abort_msg("%s nearest ray %zu %s: bvh %s, brute %s",
                                 what, i, ray_str(q.dims, q.rays, i, rs, 256),
                                 rbt_hit_str(&a.hits[i], h1, 160),
                                 rbt_hit_str(&b.hits[i], h2, 160));
                break;
            case RB_MODE_ANY:
                if (a.any[i] != b.any[i])
                    ck_abort_msg("%s any ray %zu %s: bvh %d, brute %d", what,
                                 i, ray_str(q.dims, q.rays, i, rs, 256),
                                 a.any[i], b.any[i]);
                break;
            default: {
                if (a.counts[i] != b.counts[i])
                    ck_abort_msg("%s %s ray %zu %s: bvh %u, brute %u", what,
                                 rb_mode_name(mode), i,
                                 ray_str(q.dims, q.rays, i, rs, 256),
                                 a.counts[i], b.counts[i]);
                if (mode != RB_MODE_ALL)
                    break;
                uint32_t n = a.counts[i] < q.max_hits ? a.counts[i]
                                                      : q.max_hits;
                const rb_list_hit *la = a.list + i * q.max_hits;
                const rb_list_hit *lb = b.list + i * q.max_hits;
                for (uint32_t k = 0; k < n; k++) {
                    if (la[k].box != lb[k].box ||
                        !rbt_same_float(la[k].t_enter, lb[k].t_enter) ||
                        !rbt_same_float(la[k].t_exit, lb[k].t_exit))
                        ck_abort_msg("%s all ray %zu %s entry %u: bvh box %d "
                                     "t=[%a, %a], brute box %d t=[%a, %a]",
                                     what, i,
                                     ray_str(q.dims, q.rays, i, rs, 256), k,
                                     la[k].box, (double)la[k].t_enter,
                                     (double)la[k].t_exit, lb[k].box,
                                     (double)lb[k].t_enter,
                                     (double)lb[k].t_exit);
                }
                break;
            }
            }
        }
    }
    rays_checked += q.n_rays;
    answers_free(&a);
    answers_free(&b);
}

static void compare_scene(rb_context *fast, rb_context *ref,
                          const rb_scene *scene, unsigned dims,
                          const void *rays, size_t nr, uint32_t max_hits,
                          const char *what)
{
    rb_query q = {.dims = dims, .rays = rays, .n_rays = nr, .scene = scene,
                  .max_hits = max_hits};
    compare_query(fast, ref, q, what);
}

/* One shape: a scene and inline boxes, 3D and 2D. */
static void check_shape(rb_context *fast, rb_context *ref, int shape,
                        size_t nb, size_t nr, uint64_t seed)
{
    rbt_rng g = {seed};
    rb_box *boxes = calloc(nb ? nb : 1, sizeof *boxes);
    rb_ray *rays = calloc(nr, sizeof *rays);
    rb_box2 *b2 = calloc(nb ? nb : 1, sizeof *b2);
    rb_ray2 *r2 = calloc(nr, sizeof *r2);
    ck_assert(boxes && rays && b2 && r2);
    nb = gen_boxes(shape, nb, &g, boxes);
    float lo[3], hi[3];
    bounds_of(boxes, nb, lo, hi);
    for (size_t i = 0; i < nr; i++)
        gen_ray(&g, boxes, nb, lo, hi, &rays[i]);
    to_2d(boxes, nb, rays, nr, b2, r2);
    uint32_t max_hits = (uint32_t)(1 + rbt_below(&g, 12));

    char what[96];
    for (unsigned dims = 3; dims >= 2; dims--) {
        const void *bx = dims == 3 ? (const void *)boxes : (const void *)b2;
        const void *rx = dims == 3 ? (const void *)rays : (const void *)r2;
        rb_scene *scene = NULL;
        ck_assert_int_eq(rb_scene_create(fast, dims, bx, nb, &scene), RB_OK);
        rb_scene_stats st;
        rb_scene_stats_get(scene, &st);
        ck_assert_msg(st.bvh_depth <= RB_BVH_MAX_DEPTH, "%s: depth %u",
                      shape_name[shape], st.bvh_depth);
        snprintf(what, sizeof what, "%s %uD scene (%zu boxes, depth %u)",
                 shape_name[shape], dims, nb, st.bvh_depth);
        compare_scene(fast, ref, scene, dims, rx, nr, max_hits, what);
        rb_scene_destroy(scene);

        /* Inline boxes through the transient hierarchy, fewer rays. */
        snprintf(what, sizeof what, "%s %uD inline", shape_name[shape],
                 dims);
        rb_query q = {.dims = dims, .rays = rx, .n_rays = nr / 8,
                      .boxes = bx, .n_boxes = nb, .max_hits = max_hits};
        compare_query(fast, ref, q, what);
    }
    free(boxes);
    free(rays);
    free(b2);
    free(r2);
}

START_TEST(test_shapes)
{
    rb_context *fast = make_ctx(RB_BVH_USE_ALWAYS, 0);
    rb_context *ref = make_ctx(RB_BVH_USE_OFF, 0);
    int shape = _i;
    size_t nb = shape == IDENTICAL ? 300 : 1500;
    check_shape(fast, ref, shape, nb, 40000, 1000 + (uint64_t)shape);
    rb_context_destroy(fast);
    rb_context_destroy(ref);
}
END_TEST

/* A tiny hand-made case: ties in nearest must go to the lowest original
 * index wherever the builder put the boxes. */
START_TEST(test_ties)
{
    rb_context *fast = make_ctx(RB_BVH_USE_ALWAYS, 0);
    rb_box boxes[64];
    for (int i = 0; i < 64; i++) {
        /* Pairs of boxes share their entry plane x = 4; deeper ones
         * first in index order so the builder must reorder them. */
        float x1 = 5.0f + (float)((63 - i) % 7);
        rb_box b = {{4, -1.0f - (float)i, -1}, {x1, 1, 1}};
        boxes[i] = b;
    }
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(fast, 3, boxes, 64, &scene), RB_OK);
    rb_ray ray = {{0, 0, 0}, {1, 0, 0}, 0, INFINITY};
    rb_hit hit;
    rb_results res = {.hits = &hit, .capacity = 1};
    rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = &ray,
                  .n_rays = 1, .scene = scene};
    ck_assert_int_eq(rb_intersect(fast, &q, &res), RB_OK);
    ck_assert_int_eq(hit.box, 0);
    ck_assert(hit.t_enter == 4.0f && hit.face == RB_FACE_NEG_X);
    rb_scene_destroy(scene);
    rb_context_destroy(fast);
}
END_TEST

static void jitter(rbt_rng *g, rb_box *b, float amount)
{
    for (int a = 0; a < 3; a++) {
        float d = rbt_uniform(g, -amount, amount);
        b->min[a] += d;
        b->max[a] += d;
    }
}

static void make_rays(rbt_rng *g, const rb_box *boxes, size_t nb,
                      rb_ray *rays, size_t nr)
{
    float lo[3], hi[3];
    bounds_of(boxes, nb, lo, hi);
    for (size_t i = 0; i < nr; i++)
        gen_ray(g, boxes, nb, lo, hi, &rays[i]);
}

/* Moves: small jitter refits (no rebuild), teleports degrade the tree
 * until it is rebuilt; results stay exact throughout. */
START_TEST(test_refit)
{
    rb_context *fast = make_ctx(RB_BVH_USE_ALWAYS, 0);
    rb_context *ref = make_ctx(RB_BVH_USE_OFF, 0);
    rbt_rng g = {77};
    enum { NB = 3000, NR = 30000, MOVE = 300 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rb_box moved[MOVE];
    uint32_t idx[MOVE];
    gen_boxes(UNIFORM, NB, &g, boxes);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(fast, 3, boxes, NB, &scene), RB_OK);

    rb_scene_stats st;
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < MOVE; k++) {
            idx[k] = rbt_below(&g, NB);
            if (k > 0 && rbt_below(&g, 8) == 0)
                idx[k] = idx[k - 1]; /* the same box twice: last wins */
            moved[k] = boxes[idx[k]];
            jitter(&g, &moved[k], 0.5f);
            boxes[idx[k]] = moved[k];
        }
        ck_assert_int_eq(rb_scene_set(fast, scene, idx, moved, MOVE), RB_OK);
        rb_scene_stats_get(scene, &st);
        ck_assert_uint_eq(st.bvh_refits, (uint64_t)round + 1);
        ck_assert_uint_eq(st.bvh_rebuilds, 0);
        ck_assert_msg(st.bvh_sah <= 1.5 * st.bvh_sah_built, "sah %g vs %g",
                      st.bvh_sah, st.bvh_sah_built);
        make_rays(&g, boxes, NB, rays, NR);
        compare_scene(fast, ref, scene, 3, rays, NR, 8, "after refit");
    }

    /* Every box at once, through the same path. */
    {
        uint32_t *all = calloc(NB, sizeof *all);
        for (uint32_t i = 0; i < NB; i++) {
            all[i] = i;
            jitter(&g, &boxes[i], 0.2f);
        }
        ck_assert_int_eq(rb_scene_set(fast, scene, all, boxes, NB), RB_OK);
        free(all);
        make_rays(&g, boxes, NB, rays, NR);
        compare_scene(fast, ref, scene, 3, rays, NR, 8, "after moving all");
        rb_scene_stats_get(scene, &st);
    }
    uint64_t rebuilds_before = st.bvh_rebuilds;

    /* Teleports: boxes jump across the scene and grow, so node bounds
     * blow up until the SAH check rebuilds. */
    int rebuilt = 0;
    for (int round = 0; round < 40 && !rebuilt; round++) {
        for (int k = 0; k < MOVE; k++) {
            idx[k] = rbt_below(&g, NB);
            float c[3], h[3];
            for (int a = 0; a < 3; a++) {
                c[a] = rbt_uniform(&g, -100, 100);
                h[a] = rbt_uniform(&g, 0.1f, 5);
            }
            box_around(&moved[k], c, h);
            boxes[idx[k]] = moved[k];
        }
        ck_assert_int_eq(rb_scene_set(fast, scene, idx, moved, MOVE), RB_OK);
        rb_scene_stats_get(scene, &st);
        rebuilt = st.bvh_rebuilds > rebuilds_before;
        if (round % 4 == 0 || rebuilt) {
            make_rays(&g, boxes, NB, rays, NR / 4);
            compare_scene(fast, ref, scene, 3, rays, NR / 4, 5,
                          rebuilt ? "after rebuild" : "after degraded refit");
        }
    }
    ck_assert_msg(rebuilt, "teleporting boxes never triggered a rebuild "
                           "(sah %g, built %g)",
                  st.bvh_sah, st.bvh_sah_built);
    ck_assert_msg(st.bvh_sah <= 1.5 * st.bvh_sah_built, "sah %g vs %g",
                  st.bvh_sah, st.bvh_sah_built);

    /* A clone answers the same and owns its tree. */
    rb_scene *copy = NULL;
    ck_assert_int_eq(rb_scene_clone(fast, scene, &copy), RB_OK);
    rb_scene_destroy(scene);
    make_rays(&g, boxes, NB, rays, NR);
    compare_scene(fast, ref, copy, 3, rays, NR, 8, "clone");
    rb_scene_destroy(copy);
    free(boxes);
    free(rays);
    rb_context_destroy(fast);
    rb_context_destroy(ref);
}
END_TEST

START_TEST(test_append)
{
    rb_context *fast = make_ctx(RB_BVH_USE_ALWAYS, 0);
    rb_context *ref = make_ctx(RB_BVH_USE_OFF, 0);
    rbt_rng g = {91};
    enum { NB = 2400, NR = 20000 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    gen_boxes(CLUSTERED, NB, &g, boxes);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(fast, 3, NULL, 0, &scene), RB_OK);
    rb_scene_stats st;
    size_t have = 0;
    uint64_t rebuilds = 0;
    for (size_t step = 1; have < NB; step *= 4) {
        size_t n = have + step <= NB ? step : NB - have;
        ck_assert_int_eq(rb_scene_append(fast, scene, boxes + have, n),
                         RB_OK);
        have += n;
        rb_scene_stats_get(scene, &st);
        ck_assert_uint_eq(st.boxes, have);
        ck_assert_msg(st.bvh_rebuilds > rebuilds || have == n,
                      "append did not rebuild");
        rebuilds = st.bvh_rebuilds;
        make_rays(&g, boxes, have, rays, NR / 4);
        compare_scene(fast, ref, scene, 3, rays, NR / 4, 6, "after append");
    }
    make_rays(&g, boxes, NB, rays, NR);
    compare_scene(fast, ref, scene, 3, rays, NR, 6, "after appends");
    rb_scene_destroy(scene);
    free(boxes);
    free(rays);
    rb_context_destroy(fast);
    rb_context_destroy(ref);
}
END_TEST

/* The parallel build (work shared between threads) gives the tree of the
 * one-thread build, and a big scene still answers exactly. */
START_TEST(test_parallel_build)
{
    rb_context *one = make_ctx(RB_BVH_USE_AUTO, 1);
    rb_context *two = make_ctx(RB_BVH_USE_AUTO, 2);
    rb_context *ref = make_ctx(RB_BVH_USE_OFF, 0);
    rbt_rng g = {5};
    enum { NB = 40000, NR = 20000 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    gen_boxes(CLUSTERED, NB / 2, &g, boxes);
    gen_boxes(UNIFORM, NB / 2, &g, boxes + NB / 2);
    rb_scene *s1 = NULL, *s2 = NULL;
    ck_assert_int_eq(rb_scene_create(one, 3, boxes, NB, &s1), RB_OK);
    ck_assert_int_eq(rb_scene_create(two, 3, boxes, NB, &s2), RB_OK);
    const rb_bvh *b1 = rb_scene_bvh(s1), *b2 = rb_scene_bvh(s2);
    ck_assert(b1 && b2);
    ck_assert_uint_eq(b1->n_nodes, b2->n_nodes);
    ck_assert(memcmp(b1->nodes, b2->nodes, b1->n_nodes * sizeof *b1->nodes)
              == 0);
    ck_assert(memcmp(b1->where, b2->where, NB * sizeof *b1->where) == 0);
    /* Every box sits in exactly the slot where[] names, with its own
     * corners; no other slot claims it. */
    size_t box_slots = 0;
    for (size_t i = 0; i < b2->n_nodes; i++)
        box_slots += (size_t)__builtin_popcount(b2->nodes[i].boxes);
    ck_assert_uint_eq(box_slots, NB);
    for (size_t i = 0; i < NB; i++) {
        const rb_bvh_node *n = &b2->nodes[b2->where[i] / RB_BVH_WIDTH];
        unsigned k = b2->where[i] % RB_BVH_WIDTH;
        int ok = ((n->boxes >> k) & 1) && n->child[k] == i;
        for (int a = 0; a < 3; a++)
            ok &= n->lo[a][k] == boxes[i].min[a] &&
                  n->hi[a][k] == boxes[i].max[a];
        if (!ok)
            ck_abort_msg("box %zu is not in slot %u as where[] says", i,
                         b2->where[i]);
    }

    rb_scene_stats st;
    rb_scene_stats_get(s2, &st);
    ck_assert_uint_eq(st.bvh_nodes, b2->n_nodes);
    ck_assert_uint_eq(st.bvh_rebuilds, 0);
    ck_assert(st.bvh_bytes > 0 && st.host_bytes > st.bvh_bytes);
    ck_assert(st.bytes_per_box * NB == (double)st.host_bytes);
    ck_assert(st.bvh_sah > 1 && st.bvh_sah == st.bvh_sah_built);

    make_rays(&g, boxes, NB, rays, NR);
    compare_scene(two, ref, s2, 3, rays, NR, 16, "parallel build");
    rb_scene_destroy(s1);
    rb_scene_destroy(s2);
    free(boxes);
    free(rays);
    rb_context_destroy(one);
    rb_context_destroy(two);
    rb_context_destroy(ref);
}
END_TEST

/* The portable walker (RAYBOX_SIMD=scalar) on the shapes that stress
 * node tests most. */
START_TEST(test_scalar_walker)
{
    setenv("RAYBOX_SIMD", "scalar", 1);
    rb_context *fast = make_ctx(RB_BVH_USE_ALWAYS, 0);
    unsetenv("RAYBOX_SIMD");
    rb_context *ref = make_ctx(RB_BVH_USE_OFF, 0);
    rb_backend_info info;
    rb_context_info(fast, &info);
    ck_assert_str_eq(info.simd, "scalar");
    static const int shapes[] = {FLAT_POINTS, GRID, HUGE, IDENTICAL, THIN};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        check_shape(fast, ref, shapes[k], 800, 12000, 500 + k);
    rb_context_destroy(fast);
    rb_context_destroy(ref);
}
END_TEST

/* Invalid rays are found on the hierarchy path as on brute force: the
 * lowest index, whatever order the walk takes (big batches are walked in
 * ray_order.h's order). */
START_TEST(test_invalid_rays)
{
    rb_context *fast = make_ctx(RB_BVH_USE_ALWAYS, 0);
    rb_context *ref = make_ctx(RB_BVH_USE_OFF, 0);
    rbt_rng g = {31};
    enum { NB = 500, NR = 20000 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rb_hit *hits = calloc(NR, sizeof *hits);
    gen_boxes(UNIFORM, NB, &g, boxes);
    make_rays(&g, boxes, NB, rays, NR);
    rays[17000].dir[1] = NAN;
    rays[9000].tmin = 2;
    rays[9000].tmax = 1;
    rays[12000].origin[2] = INFINITY;
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(fast, 3, boxes, NB, &scene), RB_OK);
    static const size_t counts[] = {NR, 9500};
    for (int c = 0; c < 2; c++) {
        for (int inline_boxes = 0; inline_boxes < 2; inline_boxes++) {
            rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = rays,
                          .n_rays = counts[c]};
            if (inline_boxes) {
                q.boxes = boxes;
                q.n_boxes = NB;
            } else {
                q.scene = scene;
            }
            rb_results res = {.hits = hits, .capacity = NR};
            rb_context *ctxs[2] = {fast, ref};
            for (int k = 0; k < 2; k++) {
                ck_assert_int_eq(rb_intersect(ctxs[k], &q, &res), RB_EINPUT);
                const rb_error *e = rb_context_error(ctxs[k]);
                ck_assert_int_eq(e->element, RB_ELEMENT_RAY);
                ck_assert_uint_eq(e->index, 9000);
                ck_assert_int_eq(e->field, 6);
            }
        }
    }
    rb_scene_destroy(scene);
    free(boxes);
    free(rays);
    free(hits);
    rb_context_destroy(fast);
    rb_context_destroy(ref);
}
END_TEST

/* An allocator that fails from the Nth allocation on. */
typedef struct failing {
    long left; /* allocations still allowed; < 0: unlimited */
} failing;

static void *failing_alloc(void *user, size_t size, size_t align)
{
    failing *f = user;
    if (f->left == 0)
        return NULL;
    if (f->left > 0)
        f->left--;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align,
                       size ? size : 1))
        return NULL;
    return p;
}

static void failing_free(void *user, void *ptr)
{
    (void)user;
    free(ptr);
}

/* Out of memory anywhere in building, appending, moving or querying
 * through a hierarchy is a status, never a crash or a leak (ASan), and a
 * failed append leaves the scene as it was. */
START_TEST(test_out_of_memory)
{
    failing f = {-1};
    rb_allocator a = {failing_alloc, failing_free, &f};
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.allocator = &a;
    opt.threads = 2;
    rb_context *ctx = rbt_context_opts(RBT_CPU, &opt);
    ctx->bvh_use = RB_BVH_USE_ALWAYS;
    rb_context *ref = make_ctx(RB_BVH_USE_OFF, 0);
    rbt_rng g = {3};
    enum { NB = 12000, NR = 9000 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    gen_boxes(CLUSTERED, NB, &g, boxes);
    make_rays(&g, boxes, NB, rays, NR);
    int ok = 0;
    for (long n = 0; !ok; n++) {
        rb_scene *scene = NULL;
        f.left = n;
        int rc = rb_scene_create(ctx, 3, boxes, NB / 2, &scene);
        if (rc == RB_OK) {
            rc = rb_scene_append(ctx, scene, boxes + NB / 2, NB / 2);
            rb_scene_stats st;
            rb_scene_stats_get(scene, &st);
            ck_assert_uint_eq(st.boxes, rc == RB_OK ? NB : NB / 2);
            ck_assert_uint_eq(st.version, rc == RB_OK ? 2 : 1);
        }
        if (rc == RB_OK) {
            uint32_t idx[64];
            for (uint32_t k = 0; k < 64; k++)
                idx[k] = k * 7;
            rc = rb_scene_set(ctx, scene, idx, boxes, 64);
        }
        if (rc == RB_OK) {
            /* Queries answer exactly even when the walk order or the
             * transient hierarchy cannot be allocated (the inline boxes
             * themselves get their grow-only buffer in the first run). */
            rb_query q = {.dims = 3, .rays = rays, .n_rays = NR,
                          .boxes = boxes, .n_boxes = NB, .max_hits = 4};
            f.left = -1;
            compare_query(ctx, ref, q, "inline");
            for (long k = 0; k < 8; k++) {
                f.left = k % 3; /* the walk order: 2 allocations */
                compare_scene(ctx, ref, scene, 3, rays, k < 3 ? NR : 100, 4,
                              "scene, memory short");
                f.left = k;
                q.n_rays = NR / 8 + (size_t)k * 1000;
                compare_query(ctx, ref, q, "inline, memory short");
            }
            ok = 1;
        } else {
            ck_assert_int_eq(rc, RB_ENOMEM);
        }
        f.left = -1;
        rb_scene_destroy(scene);
    }
    free(boxes);
    free(rays);
    rb_context_destroy(ctx);
    rb_context_destroy(ref);
}
END_TEST

static void report(void)
{
    fprintf(stderr, "test_bvh: %zu rays compared with brute force\n",
            rays_checked);
}

static Suite *bvh_suite(void)
{
    Suite *s = suite_create("bvh");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_shapes, 0, N_SHAPES);
    tcase_add_test(tc, test_ties);
    tcase_add_test(tc, test_refit);
    tcase_add_test(tc, test_append);
    tcase_add_test(tc, test_parallel_build);
    tcase_add_test(tc, test_scalar_walker);
    tcase_add_test(tc, test_invalid_rays);
    tcase_add_test(tc, test_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(bvh_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    report();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
