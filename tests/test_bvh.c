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
#include <string.h>

#include "bvh/bvh.h"
#include "cpu/ray_order.h"
#include "internal.h"
#include "threadpool.h"
#include "scenes.h"
#include "testutil.h"

/* ---- contexts */

static rb_context *make_ctx_built(int use, unsigned threads, int build)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.threads = threads;
    opt.hierarchy_build = build;
    rb_context *ctx = rbt_context_opts(RBT_CPU, &opt);
    ctx->bvh_use = use;
    /* Big batches in ray_order.h's order even over these small trees (by
     * default only trees of 4 MiB and more are walked in that order;
     * test_cl_bvh's CPU walk compares the input order). */
    ctx->walk_order = RB_WALK_ORDER_ALWAYS;
    return ctx;
}

static rb_context *make_ctx(int use, unsigned threads)
{
    return make_ctx_built(use, threads, RB_HIERARCHY_BUILD_SAH);
}

/* ---- comparison */

/* fast (hierarchy) against ref (brute force), every every-box mode:
 * bitwise equal answers. */
static void compare_query(rb_context *fast, rb_context *ref, rb_query q,
                          const char *what)
{
    rb_context *const ctxs[2] = {ref, fast};
    static const char *const names[2] = {"brute", "bvh"};
    rbt_compare_query(ctxs, names, 2, q, what);
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
    nb = rbt_scene_boxes(shape, nb, &g, boxes);
    rbt_scene_rays(&g, boxes, nb, rays, nr);
    rbt_scene_to_2d(boxes, nb, rays, nr, b2, r2);
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
                      rbt_scene_kind_name[shape], st.bvh_depth);
        snprintf(what, sizeof what, "%s %uD scene (%zu boxes, depth %u)",
                 rbt_scene_kind_name[shape], dims, nb, st.bvh_depth);
        compare_scene(fast, ref, scene, dims, rx, nr, max_hits, what);
        rb_scene_destroy(scene);

        /* Inline boxes through the transient hierarchy, fewer rays. */
        snprintf(what, sizeof what, "%s %uD inline", rbt_scene_kind_name[shape],
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
    size_t nb = shape == RBT_SC_IDENTICAL ? 300 : 1500;
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
    rbt_scene_boxes(RBT_SC_UNIFORM, NB, &g, boxes);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(fast, 3, boxes, NB, &scene), RB_OK);

    rb_scene_stats st;
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < MOVE; k++) {
            idx[k] = rbt_below(&g, NB);
            if (k > 0 && rbt_below(&g, 8) == 0)
                idx[k] = idx[k - 1]; /* the same box twice: last wins */
            moved[k] = boxes[idx[k]];
            rbt_box_jitter(&g, &moved[k], 0.5f);
            boxes[idx[k]] = moved[k];
        }
        ck_assert_int_eq(rb_scene_set(fast, scene, idx, moved, MOVE), RB_OK);
        rb_scene_stats_get(scene, &st);
        ck_assert_uint_eq(st.bvh_refits, (uint64_t)round + 1);
        ck_assert_uint_eq(st.bvh_rebuilds, 0);
        ck_assert_msg(st.bvh_sah <= 1.5 * st.bvh_sah_built, "sah %g vs %g",
                      st.bvh_sah, st.bvh_sah_built);
        rbt_scene_rays(&g, boxes, NB, rays, NR);
        compare_scene(fast, ref, scene, 3, rays, NR, 8, "after refit");
    }

    /* Every box at once, through the same path. */
    {
        uint32_t *all = calloc(NB, sizeof *all);
        for (uint32_t i = 0; i < NB; i++) {
            all[i] = i;
            rbt_box_jitter(&g, &boxes[i], 0.2f);
        }
        ck_assert_int_eq(rb_scene_set(fast, scene, all, boxes, NB), RB_OK);
        free(all);
        rbt_scene_rays(&g, boxes, NB, rays, NR);
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
            rbt_box_around(&moved[k], c, h);
            boxes[idx[k]] = moved[k];
        }
        ck_assert_int_eq(rb_scene_set(fast, scene, idx, moved, MOVE), RB_OK);
        rb_scene_stats_get(scene, &st);
        rebuilt = st.bvh_rebuilds > rebuilds_before;
        if (round % 4 == 0 || rebuilt) {
            rbt_scene_rays(&g, boxes, NB, rays, NR / 4);
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
    rbt_scene_rays(&g, boxes, NB, rays, NR);
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
    rbt_scene_boxes(RBT_SC_CLUSTERED, NB, &g, boxes);
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
        rbt_scene_rays(&g, boxes, have, rays, NR / 4);
        compare_scene(fast, ref, scene, 3, rays, NR / 4, 6, "after append");
    }
    rbt_scene_rays(&g, boxes, NB, rays, NR);
    compare_scene(fast, ref, scene, 3, rays, NR, 6, "after appends");
    rb_scene_destroy(scene);
    free(boxes);
    free(rays);
    rb_context_destroy(fast);
    rb_context_destroy(ref);
}
END_TEST

/* Two builds of the same boxes made the same tree: nodes and where[]. */
static void check_same_tree(const rb_bvh *a, const rb_bvh *b,
                            const char *what)
{
    ck_assert_msg(a->n_nodes == b->n_nodes && a->n_boxes == b->n_boxes,
                  "%s: %zu / %zu nodes, %zu / %zu boxes", what, a->n_nodes,
                  b->n_nodes, a->n_boxes, b->n_boxes);
    ck_assert_msg(memcmp(a->nodes, b->nodes, a->n_nodes * sizeof *a->nodes)
                      == 0, "%s: the nodes differ", what);
    ck_assert_msg(memcmp(a->where, b->where, a->n_boxes * sizeof *a->where)
                      == 0, "%s: where[] differs", what);
}

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
    rbt_scene_boxes(RBT_SC_CLUSTERED, NB / 2, &g, boxes);
    rbt_scene_boxes(RBT_SC_UNIFORM, NB / 2, &g, boxes + NB / 2);
    rb_scene *s1 = NULL, *s2 = NULL;
    ck_assert_int_eq(rb_scene_create(one, 3, boxes, NB, &s1), RB_OK);
    ck_assert_int_eq(rb_scene_create(two, 3, boxes, NB, &s2), RB_OK);
    const rb_bvh *b1 = rb_scene_bvh(s1), *b2 = rb_scene_bvh(s2);
    ck_assert(b1 && b2);
    check_same_tree(b1, b2, "parallel build");
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

    rbt_scene_rays(&g, boxes, NB, rays, NR);
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

/* Every inner slot holds the exact union of its child node's slots (the
 * builder computes the bounds of ranges split from a sample as it
 * partitions them, the others from their bins). */
static void check_unions(const rb_bvh *b, const char *what)
{
    for (size_t i = 0; i < b->n_nodes; i++) {
        const rb_bvh_node *n = &b->nodes[i];
        for (unsigned k = 0; k < RB_BVH_WIDTH; k++) {
            if (!n->child[k] || ((n->boxes >> k) & 1))
                continue;
            const rb_bvh_node *c = &b->nodes[n->child[k]];
            for (int a = 0; a < 3; a++) {
                float lo = INFINITY, hi = -INFINITY;
                for (unsigned j = 0; j < RB_BVH_WIDTH; j++) {
                    lo = c->lo[a][j] < lo ? c->lo[a][j] : lo;
                    hi = c->hi[a][j] > hi ? c->hi[a][j] : hi;
                }
                if (n->lo[a][k] != lo || n->hi[a][k] != hi)
                    ck_abort_msg("%s: node %zu slot %u axis %d holds "
                                 "[%a, %a], its child's union is [%a, %a]",
                                 what, i, k, a, (double)n->lo[a][k],
                                 (double)n->hi[a][k], (double)lo,
                                 (double)hi);
            }
        }
    }
}

/* Scenes big enough that the builder splits their top ranges from a
 * sample (RB_BVH_SAMPLE_MIN): exact unions in every node, and answers
 * equal to brute force. */
START_TEST(test_sampled_build)
{
    rb_context *fast = make_ctx(RB_BVH_USE_ALWAYS, 2);
    rb_context *ref = make_ctx(RB_BVH_USE_OFF, 0);
    static const int shapes[] = {RBT_SC_UNIFORM, RBT_SC_CLUSTERED,
                                 RBT_SC_HUGE,    RBT_SC_FLAT_POINTS,
                                 RBT_SC_OVERLAP, RBT_SC_IDENTICAL};
    enum { NB = 5 * RB_BVH_SAMPLE_MIN, NR = 4000 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        rbt_rng g = {77 + s};
        size_t nb = rbt_scene_boxes(shapes[s], NB, &g, boxes);
        ck_assert_uint_ge(nb, 2 * RB_BVH_SAMPLE_MIN);
        rb_scene *scene = NULL;
        ck_assert_int_eq(rb_scene_create(fast, 3, boxes, nb, &scene), RB_OK);
        char what[96];
        snprintf(what, sizeof what, "sampled build, %s (%zu boxes)",
                 rbt_scene_kind_name[shapes[s]], nb);
        check_unions(rb_scene_bvh(scene), what);
        rbt_scene_rays(&g, boxes, nb, rays, NR);
        compare_scene(fast, ref, scene, 3, rays, NR, 8, what);
        rb_scene_destroy(scene);
    }
    free(boxes);
    free(rays);
    rb_context_destroy(fast);
    rb_context_destroy(ref);
}
END_TEST

/* The fast build (a Morton curve): every scene shape answers as brute
 * force, its nodes hold exact unions, and a rebuild after refits keeps
 * building the same way. */
START_TEST(test_fast_build)
{
    rb_context *fast = make_ctx_built(RB_BVH_USE_ALWAYS, 2,
                                      RB_HIERARCHY_BUILD_FAST);
    rb_context *ref = make_ctx(RB_BVH_USE_OFF, 0);
    ck_assert_int_eq(fast->bvh_build, RB_HIERARCHY_BUILD_FAST);
    for (int shape = 0; shape < RBT_SC_KINDS; shape++) {
        size_t nb = shape == RBT_SC_IDENTICAL ? 300 : 1500;
        check_shape(fast, ref, shape, nb, 8000, 2000 + (uint64_t)shape);
    }
    enum { NB = 40000, NR = 6000 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    static const int shapes[] = {RBT_SC_CLUSTERED, RBT_SC_HUGE,
                                 RBT_SC_IDENTICAL};
    /* Each scene with the codes of small scenes (7 bits per axis), then
     * with those of big ones (10 bits), which would take 2M boxes. */
    size_t fine_min = rb_bvh_morton_fine_min;
    const size_t n_shapes = sizeof shapes / sizeof shapes[0];
    for (size_t k = 0; k < 2 * n_shapes; k++) {
        int fine = k >= n_shapes;
        rb_bvh_morton_fine_min = fine ? 0 : fine_min;
        rbt_rng g = {91 + k};
        size_t nb = rbt_scene_boxes(shapes[k % n_shapes], NB, &g, boxes);
        rb_scene *scene = NULL;
        ck_assert_int_eq(rb_scene_create(fast, 3, boxes, nb, &scene), RB_OK);
        const rb_bvh *b = rb_scene_bvh(scene);
        ck_assert_int_eq(b->build, RB_HIERARCHY_BUILD_FAST);
        ck_assert_uint_le(b->depth, RB_BVH_MAX_DEPTH);
        char what[96];
        snprintf(what, sizeof what, "fast build, %s (%zu boxes, %s codes)",
                 rbt_scene_kind_name[shapes[k % n_shapes]], nb,
                 fine ? "fine" : "coarse");
        check_unions(b, what);
        rbt_scene_rays(&g, boxes, nb, rays, NR);
        compare_scene(fast, ref, scene, 3, rays, NR, 8, what);
        /* An append rebuilds the way the scene was built, whichever
         * context asks. */
        ck_assert_int_eq(rb_scene_append(ref, scene, boxes, nb / 2), RB_OK);
        b = rb_scene_bvh(scene);
        ck_assert_int_eq(b->build, RB_HIERARCHY_BUILD_FAST);
        check_unions(b, what);
        rb_scene_destroy(scene);
    }
    rb_bvh_morton_fine_min = fine_min;
    free(boxes);
    free(rays);

    /* Big enough to run on the pool: the tree of one thread, exact. */
    size_t big = RB_BVH_MORTON_PARALLEL_MIN + 1000;
    boxes = calloc(big, sizeof *boxes);
    rays = calloc(NR, sizeof *rays);
    rbt_rng g = {93};
    big = rbt_scene_boxes(RBT_SC_UNIFORM, big, &g, boxes);
    ck_assert_uint_ge(big, RB_BVH_MORTON_PARALLEL_MIN);
    rb_context *one = make_ctx_built(RB_BVH_USE_ALWAYS, 1,
                                     RB_HIERARCHY_BUILD_FAST);
    rb_scene *s1 = NULL, *s2 = NULL;
    ck_assert_int_eq(rb_scene_create(one, 3, boxes, big, &s1), RB_OK);
    ck_assert_int_eq(rb_scene_create(fast, 3, boxes, big, &s2), RB_OK);
    const rb_bvh *b1 = rb_scene_bvh(s1), *b2 = rb_scene_bvh(s2);
    check_same_tree(b1, b2, "fast build on the pool");
    check_unions(b2, "fast build on the pool");
    rbt_scene_rays(&g, boxes, big, rays, 2000);
    compare_scene(fast, ref, s2, 3, rays, 2000, 8, "fast build on the pool");
    rb_scene_destroy(s1);
    rb_scene_destroy(s2);
    rb_context_destroy(one);
    free(boxes);
    free(rays);
    rb_context_destroy(fast);
    rb_context_destroy(ref);

    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    opt.hierarchy_build = 2;
    rb_context *bad = NULL;
    char err[128] = "";
    ck_assert_int_eq(rb_context_create(&opt, &bad, err, sizeof err),
                     RB_EINVAL);
    ck_assert_ptr_null(bad);
    ck_assert_str_eq(err, "unknown hierarchy_build setting");
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
    static const int shapes[] = {RBT_SC_FLAT_POINTS, RBT_SC_GRID, RBT_SC_HUGE, RBT_SC_IDENTICAL, RBT_SC_THIN};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        check_shape(fast, ref, shapes[k], 800, 12000, 500 + k);
    rb_context_destroy(fast);
    rb_context_destroy(ref);
}
END_TEST

/* The ray streams of `any`, `count` and `nearest` (bvh_stream_avx2.c)
 * against the same tree's one-ray walks, ray by ray (nearest: the full
 * answer built from the stream's best slot, as cpu_backend.c builds it);
 * and a stream whose arena is too short says so instead of answering
 * (the backend then walks its rays one by one). The query suites above
 * reach streams through the backend too (tasks of 64 rays or more,
 * nearest 1024). */
START_TEST(test_streams)
{
    const rb_bvh_walkers *walk = rb_bvh_walk_pick();
    if (!walk->stream) {
        fprintf(stderr, "test_streams: this processor's walkers (%s) have "
                        "no streams; nothing to compare\n", walk->simd);
        return;
    }
    rb_context *ctx = make_ctx(RB_BVH_USE_ALWAYS, 0);
    rbt_rng g = {41};
    enum { NB = 3000, NR = 6000 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rb_ray_prep *prep = calloc(NR, sizeof *prep);
    uint8_t *any = calloc(NR, 1);
    uint32_t *count = calloc(NR, sizeof *count);
    rb_joint_best *best = calloc(NR, sizeof *best);
    ck_assert(boxes && rays && prep && any && count && best);
    size_t nb = rbt_scene_boxes(RBT_SC_CLUSTERED, NB, &g, boxes);
    rbt_scene_rays(&g, boxes, nb, rays, NR);
    ck_assert_uint_eq(rb_prep_rays(rays, 3, 0, NR, prep), NR);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, nb, &scene), RB_OK);
    const rb_bvh *bvh = rb_scene_bvh(scene);
    ck_assert(bvh && bvh->depth >= 2);
    size_t words = rb_bvh_stream_words(NR, bvh->depth);
    uint32_t *arena = malloc(words * sizeof *arena);
    ck_assert(arena);
    for (size_t i = 0; i < NR; i++)
        best[i] = rb_joint_best_none();
    rb_bvh_stream st = {.prep = prep, .n = NR, .any = any, .count = count,
                        .best = best, .arena = arena, .words = words};
    ck_assert_int_eq(walk->stream(bvh, &st, RB_MODE_ANY), 0);
    ck_assert_int_eq(walk->stream(bvh, &st, RB_MODE_COUNT), 0);
    ck_assert_int_eq(walk->stream(bvh, &st, RB_MODE_NEAREST), 0);
    size_t hits = 0, several = 0;
    for (size_t i = 0; i < NR; i++) {
        ck_assert_msg(any[i] == walk->any(bvh, &prep[i]), "any, ray %zu", i);
        ck_assert_msg(count[i] == walk->count(bvh, &prep[i]), "count, ray %zu",
                      i);
        rb_hit one, streamed;
        walk->nearest(bvh, &prep[i], &one);
        if (best[i].slot == UINT32_MAX) {
            rb_hit_miss(&streamed);
        } else {
            rb_bvh_best_box_full(bvh, &best[i], &prep[i], &streamed);
        }
        ck_assert_msg(memcmp(&one, &streamed, sizeof one) == 0,
                      "nearest, ray %zu: box %d / %d", i, one.box,
                      streamed.box);
        hits += any[i];
        several += count[i] > 1;
    }
    /* Both answers occur, so neither mode can pass by saying one thing. */
    ck_assert(hits > NR / 10 && hits < NR);
    ck_assert(several > NR / 20);

    /* Every ray the same, one that hits a box (so it enters a subtree of
     * the root): each level's lists are as long as the stream, so an
     * arena for the root alone runs out at the next level. */
    size_t first = 0;
    while (!count[first])
        first++;
    for (size_t i = 0; i < NR; i++) {
        prep[i] = prep[first];
        any[i] = 0;
    }
    st.words = (size_t)NR * (2 * RB_BVH_WIDTH + 1);
    ck_assert_int_eq(walk->stream(bvh, &st, RB_MODE_ANY), -1);
    ck_assert_int_eq(walk->stream(bvh, &st, RB_MODE_NEAREST), -1);

    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    free(arena);
    free(boxes);
    free(rays);
    free(prep);
    free(any);
    free(count);
    free(best);
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
    rbt_scene_boxes(RBT_SC_UNIFORM, NB, &g, boxes);
    rbt_scene_rays(&g, boxes, NB, rays, NR);
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
    return rbt_aligned_alloc(size, align);
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
    rbt_scene_boxes(RBT_SC_CLUSTERED, NB, &g, boxes);
    rbt_scene_rays(&g, boxes, NB, rays, NR);
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
            rbt_rays_checked());
}

/* ---- the walk order (host/cpu/ray_order.c): a permutation, sorted by
 * the origin's cell, stable, and the same on any number of threads; big
 * enough for the parallel radix passes. */

typedef struct cell_index {
    uint32_t cell, index;
} cell_index;

static int by_cell_then_index(const void *a, const void *b)
{
    const cell_index *x = a, *y = b;
    if (x->cell != y->cell)
        return x->cell < y->cell ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* rb_spread3's table against the bits of its contract, every input. */
START_TEST(test_spread3)
{
    for (uint32_t x = 0; x < 1024; x++) {
        uint32_t want = 0;
        for (int b = 0; b < 10; b++)
            want |= (x >> b & 1u) << (3 * b);
        ck_assert_uint_eq(rb_spread3(x), want);
        ck_assert_uint_eq(rb_spread3(x | 0xfffffc00u), want);
    }
}
END_TEST

START_TEST(test_ray_order)
{
    enum { N = 300000 };
    rb_ray *rays = calloc(N, sizeof *rays);
    uint64_t *scratch = calloc(2 * (size_t)N, sizeof *scratch);
    uint32_t *order = calloc(N, sizeof *order);
    uint32_t *again = calloc(N, sizeof *again);
    cell_index *want = calloc(N, sizeof *want);
    /* Origins on the x axis, decreasing with the index, directions all
     * in one octant: the key is the x cell (of 512 over [0, 1]), so the
     * order must be by cell, and by index within a cell. */
    for (uint32_t i = 0; i < N; i++) {
        rays[i].origin[0] = (float)(N - 1 - i) / (float)N;
        rays[i].dir[0] = rays[i].dir[1] = rays[i].dir[2] = 1;
        rays[i].tmax = INFINITY;
        float q = rays[i].origin[0] * 512.0f; /* exact: a power of two */
        want[i].cell = q < 511.0f ? (uint32_t)q : 511u;
        want[i].index = i;
    }
    qsort(want, N, sizeof *want, by_cell_then_index);
    rb_ray *flat = calloc(N, sizeof *flat);
    for (uint32_t i = 0; i < N; i++)
        flat[i] = rays[0];
    const float lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1};
    static const unsigned threads[] = {1, 2, 3};
    rb_allocator heap;
    rb_allocator_default(&heap);
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        struct rb_pool *pool = NULL;
        ck_assert_int_eq(rb_pool_create(&heap, threads[t], &pool), RB_OK);
        for (int octant_first = 0; octant_first < 2; octant_first++) {
            rb_ray_order(pool, rays, 3, N, lo, hi, octant_first, scratch,
                         order);
            for (uint32_t j = 0; j < N; j++)
                ck_assert_msg(order[j] == want[j].index,
                              "threads %u: order[%u] = %u, want %u",
                              threads[t], j, order[j], want[j].index);
        }
        /* Every key equal: a stable sort keeps the input order. */
        rb_ray_order(pool, flat, 3, N, lo, hi, 0, scratch, again);
        for (uint32_t j = 0; j < N; j++)
            ck_assert_uint_eq(again[j], j);
        rb_pool_destroy(pool);
    }
    free(rays);
    free(flat);
    free(scratch);
    free(order);
    free(again);
    free(want);
}
END_TEST

/* rb_order_pays: the size rule, and a slab of origins (thin along one
 * axis of the tree, spread along the other two, scattered in input
 * order) over a small tree. */
static void slab_rays(rb_ray *r, size_t n, float z_lo, float z_hi,
                      float xy_span)
{
    rbt_rng s = {7};
    for (size_t i = 0; i < n; i++) {
        r[i].origin[0] = rbt_uniform(&s, 0, xy_span);
        r[i].origin[1] = rbt_uniform(&s, 0, xy_span);
        r[i].origin[2] = rbt_uniform(&s, z_lo, z_hi);
        r[i].dir[0] = rbt_uniform(&s, -1, 1);
        r[i].dir[1] = rbt_uniform(&s, -1, 1);
        r[i].dir[2] = 0;
        r[i].tmax = 1;
    }
}

START_TEST(test_order_pays)
{
    enum { N = 20000 };
    rb_ray *r = calloc(N, sizeof *r);
    const float lo[3] = {0, 0, 0}, hi[3] = {100, 100, 48};
    const size_t small = 1 << 20, big = RB_ORDER_MIN_BYTES;
    /* Eye level over a city: thin in z, spread in x and y. */
    slab_rays(r, N, 1.5f, 1.9f, 100);
    ck_assert_int_eq(rb_order_pays(r, 3, N, lo, hi, small), 1);
    ck_assert_int_eq(rb_order_pays(r, 3, RB_ORDER_MIN_RAYS - 1, lo, hi, big),
                     0);
    /* 2D batches follow the size rule alone. */
    ck_assert_int_eq(rb_order_pays(r, 2, N, lo, hi, small), 0);
    /* Origins through the whole height: the size rule decides. */
    slab_rays(r, N, 0, 48, 100);
    ck_assert_int_eq(rb_order_pays(r, 3, N, lo, hi, small), 0);
    ck_assert_int_eq(rb_order_pays(r, 3, N, lo, hi, big), 1);
    /* Thin in z but also in y (a line of origins), or one point (a
     * camera): no slab. */
    slab_rays(r, N, 1.5f, 1.9f, 100);
    for (size_t i = 0; i < N; i++)
        r[i].origin[1] = 50;
    ck_assert_int_eq(rb_order_pays(r, 3, N, lo, hi, small), 0);
    for (size_t i = 0; i < N; i++)
        memcpy(r[i].origin, (float[3]){10, 20, 1.7f}, sizeof r[i].origin);
    ck_assert_int_eq(rb_order_pays(r, 3, N, lo, hi, small), 0);
    /* Invalid origins among them (reported later by the walk) are left
     * out of the slab, not taken as its corners. */
    slab_rays(r, N, 1.5f, 1.9f, 100);
    for (size_t i = 0; i < N; i += 97)
        r[i].origin[2] = i % 2 ? NAN : INFINITY;
    ck_assert_int_eq(rb_order_pays(r, 3, N, lo, hi, small), 1);
    /* A top-down grid above the city, row by row: a slab, but its input
     * order is coherent already (1000 columns, 1024 rows: rows out of
     * step with the sample's spacing, and in step with it). Shuffled, it
     * is sorted. */
    static const size_t columns[] = {1000, 1024};
    for (size_t c = 0; c < 2; c++) {
        size_t cols = columns[c], n = cols * 20;
        rb_ray *g = calloc(n, sizeof *g);
        for (size_t i = 0; i < n; i++) {
            g[i].origin[0] = 100.0f * (float)(i % cols) / (float)cols;
            g[i].origin[1] = 100.0f * (float)(i / cols) / 20.0f;
            g[i].origin[2] = 60;
            g[i].dir[2] = -1;
            g[i].tmax = INFINITY;
        }
        ck_assert_int_eq(rb_order_pays(g, 3, n, lo, hi, small), 0);
        rbt_rng shuffle = {3};
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = rbt_below(&shuffle, (uint32_t)(i + 1));
            rb_ray t = g[i];
            g[i] = g[j];
            g[j] = t;
        }
        ck_assert_int_eq(rb_order_pays(g, 3, n, lo, hi, small), 1);
        free(g);
    }
    /* Observers' blocks of 64 rays from one eye each: coherent too. */
    slab_rays(r, N, 1.5f, 1.9f, 100);
    for (size_t i = 0; i < N; i++)
        memcpy(r[i].origin, r[i - i % 64].origin, sizeof r[i].origin);
    ck_assert_int_eq(rb_order_pays(r, 3, N, lo, hi, small), 0);
    /* A flat tree (2D boxes) has no axis to be thin along. */
    const float flat_hi[3] = {100, 100, 0};
    slab_rays(r, N, 0, 0, 100);
    ck_assert_int_eq(rb_order_pays(r, 3, N, lo, flat_hi, small), 0);
    free(r);
}
END_TEST

static Suite *bvh_suite(void)
{
    Suite *s = suite_create("bvh");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_shapes, 0, RBT_SC_KINDS);
    tcase_add_test(tc, test_ties);
    tcase_add_test(tc, test_refit);
    tcase_add_test(tc, test_append);
    tcase_add_test(tc, test_parallel_build);
    tcase_add_test(tc, test_sampled_build);
    tcase_add_test(tc, test_fast_build);
    tcase_add_test(tc, test_scalar_walker);
    tcase_add_test(tc, test_streams);
    tcase_add_test(tc, test_invalid_rays);
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_ray_order);
    tcase_add_test(tc, test_spread3);
    tcase_add_test(tc, test_order_pays);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    rbt_rays_count_init();
    int failed = rbt_run_suite(bvh_suite());
    report();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
