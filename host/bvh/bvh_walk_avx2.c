/*
 * bvh_walk_avx2.c - the hierarchy walk with a node's 8 slots in one AVX2
 * register per plane. _mm256_max_ps(n, e) returns its second operand when
 * either is NaN, which is exactly "take n only when n > e" of the scalar
 * node test; likewise _mm256_min_ps(f, x). Compiled with -mavx2 only (no
 * FMA, -ffp-contract=off) and chosen at run time.
 */
#ifdef RB_HAVE_AVX2
#include <float.h>
#include <immintrin.h>

#include "bvh.h"
#include "bvh_node_avx2.h"

typedef struct wray {
    rb_ray_prep r;
    /* Byte offsets in a node of the near and far plane rows of each axis:
     * loads without a branch on the ray's signs. */
    unsigned near_row[3], far_row[3];
    __m256 o[3], inv[3], tmin, tmax;
} wray;

static inline void wray_init(wray *w, const rb_ray_prep *r)
{
    w->r = *r;
    for (int a = 0; a < 3; a++) {
        unsigned row = (unsigned)(a * sizeof(float[RB_BVH_WIDTH]));
        unsigned lo = (unsigned)offsetof(rb_bvh_node, lo) + row;
        unsigned hi = (unsigned)offsetof(rb_bvh_node, hi) + row;
        int s = signbit(r->inv[a]) ? 1 : 0;
        w->near_row[a] = s ? hi : lo;
        w->far_row[a] = s ? lo : hi;
        w->o[a] = _mm256_set1_ps(r->o[a]);
        w->inv[a] = _mm256_set1_ps(r->inv[a]);
    }
    w->tmin = _mm256_set1_ps(r->tmin);
    w->tmax = _mm256_set1_ps(r->tmax);
}

static inline unsigned test_node(const wray *w, const rb_bvh_node *n,
                                 float limit, float e_out[RB_BVH_WIDTH],
                                 float x_out[RB_BVH_WIDTH],
                                 unsigned *boxes_hit, unsigned *shapes_hit,
                                 const int tree)
{
    __m256 near[3], far[3], e, x;
    for (int a = 0; a < 3; a++) {
        near[a] = _mm256_load_ps(
            (const float *)((const char *)n + w->near_row[a]));
        far[a] = _mm256_load_ps(
            (const float *)((const char *)n + w->far_row[a]));
    }
    rb_node8_span(near, far, w->o, w->inv, w->tmin, &e, &x);
    __m256 xe = _mm256_min_ps(x, w->tmax);
    /* One compare for every slot: e <= x and e <= limit (limit <= tmax:
     * a box entered past it cannot improve nearest) and e finite (x and
     * limit are never NaN, and FLT_MAX stands in for the finiteness
     * test). A box tree's distances are those of rb_slab_hit, operation
     * for operation (no FMA in this file), so a subtree slot's entry is
     * never above and its exit never below those of a box inside it (see
     * the top of bvh_walk.inc): it passes whenever one of its boxes does,
     * unpadded. A shape tree pads the exit for the shape tests' own
     * rounding, and every slot there is only a candidate; a joint tree
     * pads every slot but its boxes, which get the unpadded compare. */
    float cap = limit < FLT_MAX ? limit : FLT_MAX;
    __m256 capv = _mm256_set1_ps(cap);
    unsigned pass = 0;
    if (tree != RB_TREE_SHAPES)
        pass = rb_node8_pass(e, x, capv);
    unsigned padded = 0;
    if (tree != RB_TREE_BOXES)
        padded = rb_node8_padded(e, x, capv);
    _mm256_storeu_ps(e_out, e);
    if (tree == RB_TREE_SHAPES) {
        *shapes_hit = padded & n->boxes & ~n->exact;
        return padded & ~n->boxes;
    }
    _mm256_storeu_ps(x_out, xe);
    if (tree == RB_TREE_BOXES) {
        *boxes_hit = pass & n->boxes;
        return pass & ~n->boxes;
    }
    *boxes_hit = pass & n->exact;
    *shapes_hit = padded & n->boxes & ~n->exact;
    return padded & ~n->boxes;
}

static inline unsigned lanes_gt(const float e[RB_BVH_WIDTH], float t)
{
    return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(
        _mm256_loadu_ps(e), _mm256_set1_ps(t), _CMP_GT_OQ));
}

static inline unsigned lanes_eq(const float e[RB_BVH_WIDTH], float t)
{
    return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(
        _mm256_loadu_ps(e), _mm256_set1_ps(t), _CMP_EQ_OQ));
}

#define WALK_TABLE rb_bvh_walk_avx2
#define WALK_STREAM rb_bvh_stream_avx2
#define WALK_SIMD "avx2"
#include "bvh_walk.inc"
#else
/* Keeps the translation unit non-empty on other processors. */
typedef int rb_bvh_walk_avx2_unused;
#endif
