/*
 * bvh_walk_scalar.c - the portable hierarchy walk: the 8 slots of a node
 * tested one after another, box slots with rb_slab_hit itself, subtree
 * slots with the conservative test of bvh_walk.inc.
 */
#include <stdlib.h>
#include <string.h>

#include "bvh.h"

typedef struct wray {
    rb_ray_prep r;
    int sign[3]; /* 1: the near plane of that axis is hi */
} wray;

static inline void wray_init(wray *w, const rb_ray_prep *r)
{
    w->r = *r;
    for (int a = 0; a < 3; a++)
        w->sign[a] = signbit(r->inv[a]) ? 1 : 0;
}

static inline unsigned test_node(const wray *w, const rb_bvh_node *n,
                                 float limit, float e_out[RB_BVH_WIDTH],
                                 float x_out[RB_BVH_WIDTH],
                                 unsigned *boxes_hit, unsigned *shapes_hit,
                                 const int tree)
{
    unsigned hit = 0, maybe = 0;
    unsigned exact = tree == RB_TREE_BOXES   ? n->boxes
                     : tree == RB_TREE_JOINT ? n->exact
                                          : 0;
    for (int k = 0; k < RB_BVH_WIDTH; k++) {
        float lo[3] = {n->lo[0][k], n->lo[1][k], n->lo[2][k]};
        float hi[3] = {n->hi[0][k], n->hi[1][k], n->hi[2][k]};
        if ((exact >> k) & 1) {
            /* A box: the reference formula itself. */
            /* Past limit it cannot improve nearest (see test_node in
             * bvh_walk.inc). */
            int h = rb_slab_hit(&w->r, lo, hi, &e_out[k], &x_out[k]);
            hit |= (unsigned)(h && e_out[k] <= limit) << k;
            continue;
        }
        float e = w->r.tmin, x = INFINITY;
        for (int a = 0; a < 3; a++) {
            int s = w->sign[a];
            rb_slab_step(s ? hi[a] : lo[a], s ? lo[a] : hi[a], w->r.o[a],
                         w->r.inv[a], &e, &x);
        }
        if (tree != RB_TREE_BOXES) /* box trees need no pad (bvh_walk.inc) */
            x *= x >= 0.0f ? RB_BVH_PAD_UP : RB_BVH_PAD_DOWN;
        x = x < limit ? x : limit;
        e_out[k] = e;
        maybe |= (unsigned)rb_slab_accept(e, x) << k;
    }
    *boxes_hit = hit;
    /* A shape tree's boxes (a joint tree's, walked for its shapes) are
     * neither candidates nor subtrees. */
    unsigned shapes = n->boxes & ~n->exact;
    if (tree != RB_TREE_BOXES)
        *shapes_hit = maybe & shapes;
    return maybe & ~n->boxes;
}

static inline unsigned lanes_gt(const float e[RB_BVH_WIDTH], float t)
{
    unsigned m = 0;
    for (int k = 0; k < RB_BVH_WIDTH; k++)
        m |= (unsigned)(e[k] > t) << k;
    return m;
}

static inline unsigned lanes_eq(const float e[RB_BVH_WIDTH], float t)
{
    unsigned m = 0;
    for (int k = 0; k < RB_BVH_WIDTH; k++)
        m |= (unsigned)(e[k] == t) << k;
    return m;
}

#define WALK_TABLE rb_bvh_walk_scalar
#define WALK_STREAM NULL
#define WALK_SIMD "scalar"
#include "bvh_walk.inc"

const rb_bvh_walkers *rb_bvh_walk_pick(void)
{
    const char *force = getenv("RAYBOX_SIMD");
    if (force && strcmp(force, "scalar") == 0)
        return &rb_bvh_walk_scalar;
#ifdef RB_HAVE_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        return &rb_bvh_walk_avx2;
#endif
    return &rb_bvh_walk_scalar;
}
