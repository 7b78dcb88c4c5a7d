/*
 * bvh.h - the bounding volume hierarchy over a box set (SPEC R9).
 *
 * A binary tree of 32-byte nodes built with binned SAH on the context's
 * thread pool. Boxes are their own leaf primitives: a leaf holds a run of
 * boxes (reordered copies that keep their original index), and only those
 * are tested with the exact formula of slab.h. Node tests are conservative
 * (see bvh_traverse.c), so results equal brute force bit for bit.
 *
 * Layout (shared with a later OpenCL kernel, so plain 32-bit words only):
 *   nodes[0]      the root
 *   nodes[1]      unused (zeroed), so that every sibling pair starts at an
 *                 even index: with a 64-byte aligned array the two children
 *                 of a node share one cache line
 *   nodes[2k], nodes[2k+1]  sibling pairs, in depth-first order; a child
 *                 always has a higher index than its parent (refit relies
 *                 on it)
 * A node is { lo[3], first, hi[3], count }: count == 0 is an inner node
 * whose children are nodes[first] and nodes[first + 1]; count > 0 is a
 * leaf holding prims[first .. first + count).
 *
 * Threads: a built rb_bvh is read-only for traversal and may be shared by
 * any number of threads; refit and rebuild need exclusive access.
 */
#ifndef RB_BVH_H
#define RB_BVH_H

#include <stddef.h>
#include <stdint.h>

#include "../internal.h"

struct rb_pool;

/* Most boxes in one leaf. The builder makes leaves smaller when SAH says
 * so. */
#define RB_BVH_MAX_LEAF 8
/* Below this depth the builder splits by SAH; deeper ranges are split in
 * half by count, so the depth never exceeds RB_BVH_SAH_DEPTH + 32 (a
 * range holds at most 2^31 boxes) and a traversal stack of RB_BVH_STACK
 * entries (one per level) cannot overflow. */
#define RB_BVH_SAH_DEPTH 64
#define RB_BVH_STACK 128

/* SAH constants: a node visit and a box test cost about the same (both are
 * one slab test), so leaves are cheap and shallow trees are preferred. */
#define RB_BVH_COST_NODE 1.0
#define RB_BVH_COST_BOX 1.0

typedef struct rb_bvh_node {
    float lo[3];
    uint32_t first; /* inner: left child (right = first + 1); leaf: prim */
    float hi[3];
    uint32_t count; /* 0: inner node; > 0: boxes in the leaf */
} rb_bvh_node;

/* A box in leaf order: its flushed corners and its original index. */
typedef struct rb_bvh_prim {
    float lo[3];
    uint32_t index;
    float hi[3];
    uint32_t pad; /* always 0 */
} rb_bvh_prim;

_Static_assert(sizeof(rb_bvh_node) == 32, "rb_bvh_node is 32 bytes");
_Static_assert(sizeof(rb_bvh_prim) == 32, "rb_bvh_prim is 32 bytes");

typedef struct rb_bvh {
    rb_allocator alloc;
    rb_bvh_node *nodes; /* n_nodes, 64-byte aligned; NULL when empty */
    size_t n_nodes;     /* 0 for an empty box set, else root + pad + pairs */
    rb_bvh_prim *prims; /* n_prims boxes in leaf order */
    size_t n_prims;
    uint32_t *slot;     /* slot[i]: position of original box i in prims */
    unsigned depth;     /* levels; 1 for a single leaf, 0 when empty */
    double sah_built;   /* SAH cost right after the last build */
    double sah;         /* SAH cost now (after refits) */
    double build_ms;    /* wall time of the last build */
    uint64_t refits;
    uint64_t builds;    /* the first build and every rebuild */
} rb_bvh;

/* Builds a hierarchy over the n real boxes of `boxes` with the pool's
 * threads and replaces *bvh's arrays with it (counters are kept; builds is
 * incremented). alloc is used for every array and kept in *bvh. On
 * RB_ENOMEM *bvh is unchanged. */
int rb_bvh_build(struct rb_pool *pool, const rb_allocator *alloc,
                 const rb_boxset *boxes, rb_bvh *bvh);
/* Frees the arrays and zeroes *bvh (counters included); NULL-safe. */
void rb_bvh_free(rb_bvh *bvh);
/* Deep copy into *out (which must not hold arrays) with alloc. */
int rb_bvh_clone(const rb_allocator *alloc, const rb_bvh *src, rb_bvh *out);
/* Bytes held by the arrays. */
size_t rb_bvh_bytes(const rb_bvh *bvh);

/* Copies boxes indices[0..n) (original indices) from `boxes`, which holds
 * their new corners, into the leaf prims, then refits. */
void rb_bvh_update(rb_bvh *bvh, const rb_boxset *boxes,
                   const uint32_t *indices, size_t n);
/* Recomputes every node's bounds bottom-up from the prims (the tree shape
 * stays) and bvh->sah. */
void rb_bvh_refit(rb_bvh *bvh);
/* SAH cost of the tree as it is: expected slab tests of a random ray that
 * hits the root (node visits * RB_BVH_COST_NODE + box tests *
 * RB_BVH_COST_BOX), areas relative to the root. Uses surface area, or
 * the sum of extents when every box is flat in two axes. */
double rb_bvh_sah(const rb_bvh *bvh);

/* ---- traversal (bvh_traverse.c), one prepared ray; same answers as the
 * every-box scans. Each needs bvh->depth < RB_BVH_STACK. */
/* The least (t_enter, original index) hit, with faces from rb_slab_full;
 * out->box is the original index, or a miss. */
void rb_bvh_nearest(const rb_bvh *bvh, const rb_ray_prep *r, rb_hit *out);
int rb_bvh_any(const rb_bvh *bvh, const rb_ray_prep *r);
uint32_t rb_bvh_count(const rb_bvh *bvh, const rb_ray_prep *r);
/* Every hit; the cap least by (t_enter, original index) go to list,
 * sorted. Returns the number of hits (may exceed cap). */
uint32_t rb_bvh_all(const rb_bvh *bvh, const rb_ray_prep *r,
                    rb_list_hit *list, uint32_t cap);

#endif /* RB_BVH_H */
