/* test_cl_bvh.c - the OpenCL hierarchy walk (kernels/bvh.cl) answers bit
 * for bit as the CPU walk and as brute force (SPEC R8, R9): nearest (box,
 * t, faces), any, count and sorted all lists, on the scene shapes of
 * test_bvh (tests/support/scenes.c), in 3D and 2D, for scenes after
 * refits, rebuilds and appends, and for inline boxes through a transient
 * hierarchy; invalid rays deep in a batch are reported with the lowest
 * index; a node array over the device limits falls back to the
 * brute-force kernels, and a failing OpenCL call to the CPU, with the
 * same answers; count, and any of unsorted rays, on CPU devices as ray
 * streams, whose lists may run short.
 *
 * Three contexts answer each query: brute force (CPU, hierarchy off, the
 * reference), the CPU walk and the OpenCL walk (both with the hierarchy
 * forced on: RB_BVH_USE_ALWAYS). The suite runs twice under CTest, with
 * the device's default kernels and with the GPU configuration
 * (test_cl_bvh_gpu_path: tiled kernels, copies through device buffers),
 * and twice more with a walk stack of one and of two entries
 * (test_cl_bvh_short_stack*: RAYBOX_CL_BVH_STACK), so that nearly every
 * push overflows and the walks resume from their paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bvh/bvh.h"
#include "cpu/ray_order.h"
#include "internal.h"
#include "opencl/cl_internal.h"
#include "opencl/cl_testhook.h"
#include "batch.h"
#include "scenes.h"
#include "testutil.h"

enum { REF, CPU_BVH, CL_BVH, N_CTX };
static const char *const ctx_names[N_CTX] = {"brute", "cpu bvh",
                                             "opencl bvh"};

typedef struct trio {
    rb_context *c[N_CTX];
} trio;

static rb_context *make_ctx(int which, int use, uint64_t max_buf,
                            uint64_t budget, int fallback)
{
    rb_context *ctx = rbt_context_limited(which, max_buf, budget, fallback);
    ctx->bvh_use = use;
    return ctx;
}

static trio trio_make(uint64_t max_buf, uint64_t budget)
{
    trio t;
    t.c[REF] = make_ctx(RBT_CPU, RB_BVH_USE_OFF, 0, 0, 1);
    t.c[CPU_BVH] = make_ctx(RBT_CPU, RB_BVH_USE_ALWAYS, 0, 0, 1);
    t.c[CL_BVH] = make_ctx(RBT_OPENCL, RB_BVH_USE_ALWAYS, max_buf, budget,
                           1);
    /* A CPU device walks big batches in Morton order only over big trees
     * (RB_ORDER_MIN_BYTES); the suite's trees are small, and their big
     * batches take the sorted path too. */
    t.c[CL_BVH]->walk_order = RB_WALK_ORDER_ALWAYS;
    /* The stack the suite asked for is the one the program was built
     * with (else the overflow runs would test nothing new). */
    const char *stack = getenv("RAYBOX_CL_BVH_STACK");
    unsigned have = rb_cl_bvh_stack(t.c[CL_BVH]);
    if (stack)
        ck_assert_msg(have == (unsigned)atoi(stack),
                      "walk stack %u, RAYBOX_CL_BVH_STACK=%s", have, stack);
    else
        ck_assert_msg(have >= 16 && (have & (have - 1)) == 0,
                      "walk stack %u entries", have);
    return t;
}

static void trio_free(trio *t)
{
    for (int k = 0; k < N_CTX; k++)
        rb_context_destroy(t->c[k]);
}

/* Every every-box mode of q on the three contexts, bitwise equal; the
 * OpenCL context must walk (one launch per mode at least) when `walk`. */
static void compare3(trio *t, rb_query q, int walk, const char *what)
{
    unsigned long long w0 = rb_cl_walks(t->c[CL_BVH]);
    rbt_compare_query(t->c, ctx_names, N_CTX, q, what);
    unsigned long long w = rb_cl_walks(t->c[CL_BVH]) - w0;
    if (walk && q.n_rays)
        ck_assert_msg(w >= 4, "%s: %llu walk launches for 4 modes", what, w);
    else
        ck_assert_msg(w == 0, "%s: %llu walk launches, none expected", what,
                      w);
}

static void compare_scene(trio *t, const rb_scene *scene, unsigned dims,
                          const void *rays, size_t nr, uint32_t max_hits,
                          const char *what)
{
    rb_query q = {.dims = dims, .rays = rays, .n_rays = nr, .scene = scene,
                  .max_hits = max_hits};
    compare3(t, q, rb_scene_bvh(scene) != NULL, what);
}

/* ---- scene shapes */

START_TEST(test_shapes)
{
    int kind = _i;
    trio t = trio_make(0, 0);
    rbt_rng g = {2000 + (uint64_t)kind};
    size_t nb = kind == RBT_SC_IDENTICAL ? 300 : 2000, nr = 40000;
    rb_box *boxes = calloc(nb, sizeof *boxes);
    rb_ray *rays = calloc(nr, sizeof *rays);
    rb_box2 *b2 = calloc(nb, sizeof *b2);
    rb_ray2 *r2 = calloc(nr, sizeof *r2);
    ck_assert(boxes && rays && b2 && r2);
    nb = rbt_scene_boxes(kind, nb, &g, boxes);
    rbt_scene_rays(&g, boxes, nb, rays, nr);
    rbt_scene_to_2d(boxes, nb, rays, nr, b2, r2);
    uint32_t max_hits = (uint32_t)(1 + rbt_below(&g, 12));

    char what[96];
    for (unsigned dims = 3; dims >= 2; dims--) {
        const void *bx = dims == 3 ? (const void *)boxes : (const void *)b2;
        const void *rx = dims == 3 ? (const void *)rays : (const void *)r2;
        rb_scene *scene = NULL;
        ck_assert_int_eq(
            rb_scene_create(t.c[CPU_BVH], dims, bx, nb, &scene), RB_OK);
        snprintf(what, sizeof what, "%s %uD scene (%zu boxes)",
                 rbt_scene_kind_name[kind], dims, nb);
        unsigned long long up = rb_cl_node_uploads(t.c[CL_BVH]);
        compare_scene(&t, scene, dims, rx, nr, max_hits, what);
        /* Four queries, one upload: the device keeps the hierarchy. */
        ck_assert_uint_eq(rb_cl_node_uploads(t.c[CL_BVH]) - up,
                          nb ? 1 : 0);
        rb_scene_destroy(scene);

        /* Inline boxes: a transient hierarchy, built (and uploaded) for
         * every query. */
        snprintf(what, sizeof what, "%s %uD inline",
                 rbt_scene_kind_name[kind], dims);
        rb_query q = {.dims = dims, .rays = rx, .n_rays = nr / 8,
                      .boxes = bx, .n_boxes = nb, .max_hits = max_hits};
        compare3(&t, q, nb > 0, what);
    }
    free(boxes);
    free(rays);
    free(b2);
    free(r2);
    trio_free(&t);
}
END_TEST

/* A bigger scene in several ray chunks (a small buffer limit), so that
 * ray_base and the chunk loop are walked too. */
START_TEST(test_chunks)
{
    enum { NB = 30000, NR = 60000 };
    /* The nodes (~1.7 MB) fit one buffer; the all lists of 16 hits (192
     * bytes a ray) do not fit for all rays at once. */
    trio t = trio_make(4u << 20, 0);
    rbt_rng g = {4242};
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rbt_scene_boxes(RBT_SC_CLUSTERED, NB / 2, &g, boxes);
    rbt_scene_boxes(RBT_SC_UNIFORM, NB / 2, &g, boxes + NB / 2);
    rbt_scene_rays(&g, boxes, NB, rays, NR);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(t.c[CPU_BVH], 3, boxes, NB, &scene),
                     RB_OK);
    ck_assert_uint_le(rb_scene_bvh(scene)->n_nodes * sizeof(rb_bvh_node),
                      4u << 20);
    unsigned long long w0 = rb_cl_walks(t.c[CL_BVH]);
    compare_scene(&t, scene, 3, rays, NR, 16, "chunked");
    ck_assert_msg(rb_cl_walks(t.c[CL_BVH]) - w0 > 4,
                  "all mode should need several ray chunks");
    rb_scene_destroy(scene);
    free(boxes);
    free(rays);
    trio_free(&t);
}
END_TEST

/* ---- scenes that change */

/* Refits (small moves), degraded refits and a rebuild (teleports): each
 * version is a new hierarchy on the device, never the stale one. */
START_TEST(test_refit)
{
    trio t = trio_make(0, 0);
    rbt_rng g = {77};
    enum { NB = 3000, NR = 30000, MOVE = 300 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rb_box moved[MOVE];
    uint32_t idx[MOVE];
    rbt_scene_boxes(RBT_SC_UNIFORM, NB, &g, boxes);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(t.c[CPU_BVH], 3, boxes, NB, &scene),
                     RB_OK);
    rbt_scene_rays(&g, boxes, NB, rays, NR);
    compare_scene(&t, scene, 3, rays, NR, 8, "before moves");

    rb_scene_stats st;
    rb_scene_stats_get(scene, &st);
    uint64_t rebuilds_before = st.bvh_rebuilds;
    int rebuilt = 0;
    for (int round = 0; round < 40 && !rebuilt; round++) {
        int teleport = round >= 2;
        for (int k = 0; k < MOVE; k++) {
            idx[k] = rbt_below(&g, NB);
            moved[k] = boxes[idx[k]];
            if (teleport) {
                float c[3], h[3];
                for (int a = 0; a < 3; a++) {
                    c[a] = rbt_uniform(&g, -100, 100);
                    h[a] = rbt_uniform(&g, 0.1f, 5);
                }
                rbt_box_around(&moved[k], c, h);
            } else {
                rbt_box_jitter(&g, &moved[k], 0.5f);
            }
            boxes[idx[k]] = moved[k];
        }
        ck_assert_int_eq(
            rb_scene_set(t.c[CPU_BVH], scene, idx, moved, MOVE), RB_OK);
        rb_scene_stats_get(scene, &st);
        rebuilt = st.bvh_rebuilds > rebuilds_before;
        if (round < 2 || round % 4 == 0 || rebuilt) {
            /* The same rays: only the new version explains a change. */
            unsigned long long up = rb_cl_node_uploads(t.c[CL_BVH]);
            compare_scene(&t, scene, 3, rays, round < 2 ? NR : NR / 4, 8,
                          rebuilt     ? "after rebuild"
                          : !teleport ? "after refit"
                                      : "after degraded refit");
            ck_assert_uint_eq(rb_cl_node_uploads(t.c[CL_BVH]) - up, 1);
        }
    }
    ck_assert_msg(rebuilt, "teleports never triggered a rebuild");
    rb_scene_destroy(scene);
    free(boxes);
    free(rays);
    trio_free(&t);
}
END_TEST

START_TEST(test_append)
{
    trio t = trio_make(0, 0);
    rbt_rng g = {91};
    enum { NB = 2400, NR = 20000 };
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rbt_scene_boxes(RBT_SC_CLUSTERED, NB, &g, boxes);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(t.c[CPU_BVH], 3, NULL, 0, &scene),
                     RB_OK);
    size_t have = 0;
    for (size_t step = 1; have < NB; step *= 4) {
        size_t n = have + step <= NB ? step : NB - have;
        ck_assert_int_eq(
            rb_scene_append(t.c[CPU_BVH], scene, boxes + have, n), RB_OK);
        have += n;
        rbt_scene_rays(&g, boxes, have, rays, NR / 4);
        compare_scene(&t, scene, 3, rays, NR / 4, 6, "after append");
    }
    rbt_scene_rays(&g, boxes, NB, rays, NR);
    compare_scene(&t, scene, 3, rays, NR, 6, "after appends");
    rb_scene_destroy(scene);
    free(boxes);
    free(rays);
    trio_free(&t);
}
END_TEST

/* ---- limits and failures */

/* Nodes over the buffer limit, or over the budget beside one work-group
 * of rays: the job scans the boxes with the brute-force kernels instead,
 * on the device, with the same answers. */
START_TEST(test_nodes_too_big)
{
    enum { NB = 4000, NR = 6000 };
    rbt_rng g = {606};
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rbt_scene_boxes(RBT_SC_OVERLAP, NB, &g, boxes);
    rbt_scene_rays(&g, boxes, NB, rays, NR);
    rb_context *cpu = make_ctx(RBT_CPU, RB_BVH_USE_ALWAYS, 0, 0, 1);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(cpu, 3, boxes, NB, &scene), RB_OK);
    size_t node_bytes = rb_scene_bvh(scene)->n_nodes * sizeof(rb_bvh_node);
    /* 4000 boxes are 96000 bytes of planes: they fit where the nodes do
     * not. */
    ck_assert_uint_gt(node_bytes, 100000);
    for (int by_budget = 0; by_budget < 2; by_budget++) {
        trio t = by_budget ? trio_make(0, node_bytes)
                           : trio_make(node_bytes - 256, 0);
        rb_query sq = {.dims = 3, .rays = rays, .n_rays = NR,
                       .scene = scene, .max_hits = 5};
        compare3(&t, sq, 0, by_budget ? "scene, over the budget"
                                      : "scene, over the buffer limit");
        ck_assert_uint_eq(rb_cl_node_uploads(t.c[CL_BVH]), 0);
        /* The transient hierarchy of inline boxes likewise. */
        rb_query q = {.dims = 3, .rays = rays, .n_rays = NR, .boxes = boxes,
                      .n_boxes = NB, .max_hits = 5};
        compare3(&t, q, 0, by_budget ? "inline, over the budget"
                                     : "inline, over the buffer limit");
        trio_free(&t);
    }
    rb_scene_destroy(scene);
    rb_context_destroy(cpu);
    free(boxes);
    free(rays);
}
END_TEST

/* Invalid rays deep in a batch, in later ray chunks: the lowest index is
 * reported, on the walk as on brute force, for a scene and inline
 * boxes. */
START_TEST(test_invalid_rays)
{
    enum { NB = 1000, NR = 200000 };
    /* 1 MiB buffers: 32768 rays (3D) a chunk. */
    trio t = trio_make(1u << 20, 0);
    rbt_rng g = {31};
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rb_hit *hits = calloc(NR, sizeof *hits);
    uint32_t *counts_out = calloc(NR, sizeof *counts_out);
    rbt_scene_boxes(RBT_SC_UNIFORM, NB, &g, boxes);
    rbt_scene_rays(&g, boxes, NB, rays, NR);
    rays[190001].dir[1] = NAN;
    rays[150003].tmin = 2;
    rays[150003].tmax = 1;
    rays[170000].origin[2] = INFINITY;
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(t.c[CPU_BVH], 3, boxes, NB, &scene),
                     RB_OK);
    static const size_t counts[] = {NR, 160000};
    /* nearest: one ray an item; count: the ray streams on CPU devices */
    for (int c = 0; c < 4; c++) {
        for (int inline_boxes = 0; inline_boxes < 2; inline_boxes++) {
            rb_query q = {.mode = c < 2 ? RB_MODE_NEAREST : RB_MODE_COUNT,
                          .dims = 3, .rays = rays, .n_rays = counts[c % 2]};
            if (inline_boxes) {
                q.boxes = boxes;
                q.n_boxes = NB;
            } else {
                q.scene = scene;
            }
            for (int k = 0; k < N_CTX; k++) {
                unsigned long long w0 = rb_cl_walks(t.c[k]);
                rb_results res = {.hits = hits, .counts = counts_out,
                                  .capacity = NR};
                ck_assert_int_eq(rb_intersect(t.c[k], &q, &res), RB_EINPUT);
                const rb_error *e = rb_context_error(t.c[k]);
                ck_assert_int_eq(e->element, RB_ELEMENT_RAY);
                ck_assert_uint_eq(e->index, 150003);
                ck_assert_int_eq(e->field, 6);
                if (k == CL_BVH)
                    ck_assert_uint_gt(rb_cl_walks(t.c[k]) - w0, 1);
            }
        }
    }
    /* The device is fine afterwards. */
    rays[190001].dir[1] = 1;
    rays[150003].tmin = 0;
    rays[170000].origin[2] = 0;
    compare_scene(&t, scene, 3, rays, NR / 4, 3, "after invalid rays");
    rb_scene_destroy(scene);
    free(boxes);
    free(rays);
    free(hits);
    free(counts_out);
    trio_free(&t);
}
END_TEST

/* Whether the kernels are the wide variant (CPU devices), which alone
 * has the ray streams; test_cl_bvh_gpu_path runs the tiled one. */
static int wide_kernels(void)
{
    const char *variant = getenv("RAYBOX_CL_KERNELS");
    return !(variant && strcmp(variant, "tiled") == 0);
}

/* count, any and nearest as ray streams (CPU devices, the wide kernels): the
 * answers of the CPU, with the streams' lists as the bound sizes them
 * and capped so that they run short (the kernel then walks its tasks'
 * rays one by one), and with the streams off (one ray an item); in
 * several ray chunks, the rays sorted and in input order (both stream). */
START_TEST(test_streams)
{
    enum { NB = 20000, NR = 70000 };
    /* 1 MiB buffers: 32768 rays a chunk */
    trio t = trio_make(1u << 20, 0);
    int wide = wide_kernels();
    rbt_rng g = {5150};
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rbt_scene_boxes(RBT_SC_CLUSTERED, NB, &g, boxes);
    rbt_scene_rays(&g, boxes, NB, rays, NR);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(t.c[CPU_BVH], 3, boxes, NB, &scene),
                     RB_OK);
    rb_query q = {.dims = 3, .rays = rays, .n_rays = NR, .scene = scene,
                  .max_hits = 4};
    /* AUTO leaves this batch in input order (a small tree, origins not
     * in a slab); ALWAYS sorts it. Both stream any and count. */
    float lo[3], hi[3];
    const rb_bvh *bvh = rb_scene_bvh(scene);
    rb_bvh_bounds(bvh, lo, hi);
    ck_assert(!rb_order_pays(rays, 3, NR, lo, hi,
                             bvh->n_nodes * sizeof(rb_bvh_node)));
    /* list words a ray: the bound (0: no cap); 20, just over what the
     * root's list needs (17); the bound again with the streams off */
    static const size_t caps[] = {0, 20, 0};
    for (int run = 0; run < 3; run++) {
        for (int order = 0; order < 2; order++) {
            t.c[CL_BVH]->walk_order =
                order ? RB_WALK_ORDER_ALWAYS : RB_WALK_ORDER_AUTO;
            t.c[CL_BVH]->cl_streams = run < 2;
            rb_cl_stream_cap(t.c[CL_BVH], caps[run]);
            unsigned long long a0 =
                rb_cl_stream_launches(t.c[CL_BVH], RB_MODE_ANY);
            unsigned long long c0 =
                rb_cl_stream_launches(t.c[CL_BVH], RB_MODE_COUNT);
            unsigned long long n0 =
                rb_cl_stream_launches(t.c[CL_BVH], RB_MODE_NEAREST);
            char what[64];
            snprintf(what, sizeof what, "streams, cap %zu, order %d%s",
                     caps[run], order, run == 2 ? ", streams off" : "");
            rbt_compare_query(t.c, ctx_names, N_CTX, q, what);
            unsigned long long a =
                rb_cl_stream_launches(t.c[CL_BVH], RB_MODE_ANY) - a0;
            unsigned long long c =
                rb_cl_stream_launches(t.c[CL_BVH], RB_MODE_COUNT) - c0;
            unsigned long long nn =
                rb_cl_stream_launches(t.c[CL_BVH], RB_MODE_NEAREST) - n0;
            /* several chunks: a launch each at least */
            int streams = wide && run < 2;
            ck_assert_msg(streams ? c >= 3 : c == 0,
                          "%s: %llu count stream launches", what, c);
            ck_assert_msg(streams ? nn >= 3 : nn == 0,
                          "%s: %llu nearest stream launches", what, nn);
            ck_assert_msg(streams ? a >= 3 : a == 0,
                          "%s: %llu any stream launches", what, a);
        }
    }
    rb_scene_destroy(scene);

    /* Lists that run short deep in the walk, after rays have counted
     * boxes: a few rays, each many times over, through overlapping boxes
     * (every copy passes the same slots, so the lists grow fast), under
     * caps from the root's need (17 words a ray) up. A task must then
     * count its rays again from nothing. */
    enum { NB2 = 4000, NR2 = 8192 };
    rbt_scene_boxes(RBT_SC_OVERLAP, NB2, &g, boxes);
    rbt_scene_rays(&g, boxes, NB2, rays, 16);
    for (size_t i = 16; i < NR2; i++)
        rays[i] = rays[i % 16];
    ck_assert_int_eq(rb_scene_create(t.c[CPU_BVH], 3, boxes, NB2, &scene),
                     RB_OK);
    q.scene = scene;
    q.n_rays = NR2;
    t.c[CL_BVH]->cl_streams = 1;
    t.c[CL_BVH]->walk_order = RB_WALK_ORDER_AUTO; /* any streams too */
    for (size_t cap = 17; cap <= 80; cap += 3) {
        char what[64];
        snprintf(what, sizeof what, "repeated rays, cap %zu", cap);
        rb_cl_stream_cap(t.c[CL_BVH], cap);
        rbt_compare_query(t.c, ctx_names, N_CTX, q, what);
    }
    rb_cl_stream_cap(t.c[CL_BVH], 0);
    rb_scene_destroy(scene);
    free(boxes);
    free(rays);
    trio_free(&t);
}
END_TEST

/* Sorted rays stream any, count and nearest too, in chunks: under a budget that
 * splits the batch into six chunks or more and leaves room for the arenas
 * of tasks of 256 rays (RB_CL_STREAM_MIN_RAYS), each chunk is one stream
 * launch whose work-items take many tasks each from the arena's counter
 * (zeroed before every launch: were it not, later chunks would go
 * unanswered), and the answers are the CPU's. */
START_TEST(test_stream_chunks)
{
    enum { NB = 20000 };
    rbt_rng g = {8080};
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rbt_scene_boxes(RBT_SC_CLUSTERED, NB, &g, boxes);
    rb_context *cpu = make_ctx(RBT_CPU, RB_BVH_USE_ALWAYS, 0, 0, 1);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(cpu, 3, boxes, NB, &scene), RB_OK);
    const rb_bvh *bvh = rb_scene_bvh(scene);
    /* the items and arena as cl_run.c and cl_plan.c size them */
    rb_context *probe = make_ctx(RBT_OPENCL, RB_BVH_USE_ALWAYS, 0, 0, 1);
    rb_backend_info info;
    ck_assert_int_eq(rb_context_info(probe, &info), RB_OK);
    rb_context_destroy(probe);
    uint64_t arena = (RB_STREAM_ARENA_HEAD +
                      (uint64_t)4 * (info.compute_units ? info.compute_units
                                                        : 1) *
                          rb_cl_stream_words(256, bvh->depth, 0)) *
                     sizeof(uint32_t);
    uint64_t rest = 6 * arena; /* room: a quarter, 1.5 arenas */
    uint64_t per_ray = sizeof(rb_ray) + sizeof(uint32_t) + sizeof(uint32_t);
    size_t nr = (size_t)(6 * rest / per_ray + 1); /* 6 chunks or more */
    uint64_t budget = bvh->n_nodes * sizeof(rb_bvh_node) + rest +
                      (64u << 10); /* the first rays' share and more */
    rb_context *cl = make_ctx(RBT_OPENCL, RB_BVH_USE_ALWAYS, 0, budget, 1);
    cl->walk_order = RB_WALK_ORDER_ALWAYS;
    int wide = wide_kernels();
    rb_ray *rays = calloc(nr, sizeof *rays);
    rbt_scene_rays(&g, boxes, NB, rays, nr);
    uint8_t *any[2] = {malloc(nr), malloc(nr)};
    uint32_t *counts[2] = {malloc(nr * sizeof(uint32_t)),
                           malloc(nr * sizeof(uint32_t))};
    rb_hit *hits[2] = {calloc(nr, sizeof(rb_hit)), calloc(nr, sizeof(rb_hit))};
    static const rb_mode modes[] = {RB_MODE_ANY, RB_MODE_COUNT,
                                    RB_MODE_NEAREST};
    for (int mode = 0; mode < 3; mode++) {
        rb_query q = {.mode = modes[mode], .dims = 3,
                      .rays = rays, .n_rays = nr, .scene = scene};
        for (int dev = 0; dev < 2; dev++) {
            rb_results r = {.any = any[dev], .counts = counts[dev],
                            .hits = hits[dev], .capacity = nr};
            unsigned long long w0 = rb_cl_walks(cl);
            unsigned long long s0 = rb_cl_stream_launches(cl, q.mode);
            ck_assert_int_eq(rb_intersect(dev ? cl : cpu, &q, &r), RB_OK);
            if (!dev)
                continue;
            ck_assert_msg(!r.info.fell_back, "%s", r.info.fallback_reason);
            unsigned long long walks = rb_cl_walks(cl) - w0;
            unsigned long long streams = rb_cl_stream_launches(cl, q.mode) - s0;
            ck_assert_msg(walks >= 6, "%llu chunks", walks);
            ck_assert_msg(streams == (wide ? walks : 0),
                          "mode %d: %llu stream launches, %llu chunks", mode,
                          streams, walks);
        }
        if (mode == 2)
            ck_assert(memcmp(hits[0], hits[1], nr * sizeof(rb_hit)) == 0);
        else if (mode)
            ck_assert(memcmp(counts[0], counts[1],
                             nr * sizeof(uint32_t)) == 0);
        else
            ck_assert(memcmp(any[0], any[1], nr) == 0);
    }
    rb_scene_destroy(scene);
    rb_context_destroy(cl);
    rb_context_destroy(cpu);
    for (int k = 0; k < 2; k++) {
        free(any[k]);
        free(counts[k]);
        free(hits[k]);
    }
    free(boxes);
    free(rays);
}
END_TEST

/* A failing OpenCL call anywhere in a hierarchy query (the node upload
 * included: inline boxes get a new transient hierarchy every query): the
 * CPU answers instead (fell_back, the reason named), exactly as the walk
 * would have; the next queries walk on the device again, a scene's
 * hierarchy uploaded anew. */
START_TEST(test_injected_failures)
{
    enum { NB = 1500, NR = 400 };
    rb_context *ref = make_ctx(RBT_CPU, RB_BVH_USE_OFF, 0, 0, 1);
    rb_context *cl = make_ctx(RBT_OPENCL, RB_BVH_USE_ALWAYS, 0, 0, 1);
    rbt_rng g = {808};
    rb_box *boxes = calloc(NB, sizeof *boxes);
    rb_ray *rays = calloc(NR, sizeof *rays);
    rbt_scene_boxes(RBT_SC_GRID, NB, &g, boxes);
    rbt_scene_rays(&g, boxes, NB, rays, NR);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(ref, 3, boxes, NB, &scene), RB_OK);
    rbt_batch inl = {.dims = 3, .n_rays = NR, .n_boxes = NB, .rays = rays,
                     .boxes = boxes};
    rbt_batch on_scene = {.dims = 3, .n_rays = NR, .rays = rays};
    rbt_out want, got;
    rbt_out_init(&want, NR, 4);
    rbt_out_init(&got, NR, 4);
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++) {
        const char *name = rb_mode_name(mode);
        ck_assert_int_eq(rbt_run(ref, &inl, mode, NULL, &want), RB_OK);
        ck_assert_int_eq(rbt_run(cl, &inl, mode, NULL, &got), RB_OK);
        unsigned long long c0 = rb_cl_calls(cl), w0 = rb_cl_walks(cl);
        ck_assert_int_eq(rbt_run(cl, &inl, mode, NULL, &got), RB_OK);
        unsigned long long calls = rb_cl_calls(cl) - c0;
        ck_assert_uint_eq(rb_cl_walks(cl) - w0, 1);
        ck_assert_uint_ge(calls, 5);
        for (unsigned long long n = 0; n < calls; n++) {
            memset(got.hits, 0xab, NR * sizeof *got.hits);
            memset(got.counts, 0xab, NR * sizeof *got.counts);
            rb_cl_fail_after(cl, (long)n);
            int rc = rbt_run(cl, &inl, mode, NULL, &got);
            ck_assert_msg(rc == RB_OK, "%s call %llu: %s", name, n,
                          rb_status_name(rc));
            ck_assert_msg(got.info.fell_back == 1 &&
                              strcmp(got.info.backend, "cpu") == 0,
                          "%s call %llu: no fallback", name, n);
            ck_assert_msg(strstr(got.info.fallback_reason,
                                 "CL_OUT_OF_RESOURCES"),
                          "reason \"%s\"", got.info.fallback_reason);
            rbt_assert_same(mode, &want, &got, "fallback");
            /* The device walks again, inline boxes and a scene. */
            for (int k = 0; k < 2; k++) {
                w0 = rb_cl_walks(cl);
                memset(got.hits, 0xab, NR * sizeof *got.hits);
                rc = rbt_run(cl, k ? &on_scene : &inl, mode,
                             k ? scene : NULL, &got);
                ck_assert_msg(rc == RB_OK && !got.info.fell_back &&
                                  rb_cl_walks(cl) - w0 == 1,
                              "%s after call %llu: %s, fell_back %d", name,
                              n, rb_status_name(rc), got.info.fell_back);
                rbt_assert_same(mode, &want, &got, "after a failure");
            }
        }
    }
    rbt_out_free(&want);
    rbt_out_free(&got);
    rb_scene_destroy(scene);
    free(boxes);
    free(rays);
    rb_context_destroy(ref);
    rb_context_destroy(cl);
}
END_TEST

static Suite *cl_bvh_suite(void)
{
    Suite *s = suite_create("cl_bvh");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_shapes, 0, RBT_SC_KINDS);
    tcase_add_test(tc, test_chunks);
    tcase_add_test(tc, test_refit);
    tcase_add_test(tc, test_append);
    tcase_add_test(tc, test_nodes_too_big);
    tcase_add_test(tc, test_invalid_rays);
    tcase_add_test(tc, test_streams);
    tcase_add_test(tc, test_stream_chunks);
    tcase_add_test(tc, test_injected_failures);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    rbt_rays_count_init();
    int failed = rbt_run_suite(cl_bvh_suite());
    fprintf(stderr, "test_cl_bvh: %zu rays compared (4 modes, 3 contexts)\n",
            rbt_rays_checked());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
