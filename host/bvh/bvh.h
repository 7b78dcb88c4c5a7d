/*
 * bvh.h - the bounding volume hierarchy over a box set (SPEC R9).
 *
 * An 8-wide tree built with binned SAH on the context's thread pool: the
 * builder makes a binary tree with leaves of up to 8 boxes (bvh_build.c),
 * which is then collapsed into wide nodes (bvh_collapse.c) that one AVX2
 * instruction sequence tests at once (bvh_walk_avx2.c; bvh_walk_scalar.c
 * elsewhere). Boxes are their own leaves: a box sits in a slot of a node,
 * its bounds stored exactly, so the test that visits a node also runs the
 * exact formula of slab.h on its boxes, lane by lane, and no separate leaf
 * array is read. Slots that hold subtrees get a conservative test
 * (bvh_walk.inc), so results equal brute force bit for bit.
 *
 * Layout (plain floats and 32-bit words, read as is by the OpenCL walk,
 * kernels/bvh.cl; see docs/architecture.md):
 *   nodes[0] is the root. A node holds up to 8 slots as structure of
 *   arrays (lo[axis][slot], hi[axis][slot]: one 32-byte row per plane)
 *   plus child[slot] and the mask `boxes`. A slot whose bit is set in
 *   boxes is a box: its bounds are the box's flushed corners and child is
 *   its original index. Otherwise child > 0 is an inner node nodes[child]
 *   with the slot holding its bounds, and child == 0 is an empty slot with
 *   empty bounds (lo = +inf, hi = -inf) that no ray can enter. Children
 *   always sit at higher indices than their parent (refit relies on it);
 *   below the top two levels, the children of a node are consecutive.
 *
 * Threads: a built rb_bvh is read-only for traversal and may be shared by
 * any number of threads; refit and rebuild need exclusive access.
 */
#ifndef RB_BVH_H
#define RB_BVH_H

#include <stddef.h>
#include <stdint.h>

#include "../internal.h"
#include "../slab.h" /* rb_bvh_node, RB_BVH_WIDTH, the exit padding */

struct rb_pool;
struct rb_workmem;

/* Most boxes in a leaf of the binary tree; the collapse puts a leaf's
 * boxes in the slots of one wide node. */
#define RB_BVH_LEAF 8
/* The binary builder splits by SAH down to this depth, and halves ranges
 * by count below it, so the binary tree has at most RB_BVH_MAX_DEPTH
 * levels (a range holds at most 2^31 boxes). A wide level spans at least
 * one binary level, and a visit pushes at most WIDTH - 1 entries per
 * level, which bounds the traversal stack. */
#define RB_BVH_SAH_DEPTH 64
#define RB_BVH_MAX_DEPTH (RB_BVH_SAH_DEPTH + 33)
#define RB_BVH_STACK ((RB_BVH_WIDTH - 1) * RB_BVH_MAX_DEPTH + 1)
/* Ranges of this many boxes or more choose their split from a sample
 * (bvh_build.c); test_bvh builds trees that have such ranges. */
#define RB_BVH_SAMPLE_MIN 4096


/* The builder's scratch copy of a box: corners and original index. */
typedef struct rb_bvh_prim {
    float lo[3];
    uint32_t index;
    float hi[3];
    uint32_t pad;
} rb_bvh_prim;

/* A box's centre along one axis, as both builders split and key on it.
 * Halves first: lo + hi may overflow for huge coordinates. */
static inline float rb_bvh_centre(float lo, float hi)
{
    return lo * 0.5f + hi * 0.5f;
}

/* The builder's binary tree (scratch): root at 0, the children of an
 * inner node (count == 0) at first and first + 1; a leaf holds the
 * builder's prims [first, first + count). */
typedef struct rb_bvh2_node {
    float lo[3];
    uint32_t first;
    float hi[3];
    uint32_t count;
} rb_bvh2_node;

_Static_assert(sizeof(rb_bvh_prim) == 32, "rb_bvh_prim is 32 bytes");
_Static_assert(sizeof(rb_bvh2_node) == 32, "rb_bvh2_node is 32 bytes");

typedef struct rb_bvh {
    rb_allocator alloc;
    rb_bvh_node *nodes; /* n_nodes, 64-byte aligned; NULL when empty */
    size_t n_nodes;     /* 0 for an empty box set */
    size_t n_boxes;
    uint32_t *where;    /* where[i] = node * 8 + slot of original box i */
    unsigned depth;     /* wide levels; 0 when empty */
    double sah_built;   /* SAH cost right after the last build */
    double sah;         /* SAH cost now (after refits) */
    double build_ms;    /* wall time of the last build */
    uint64_t refits;
    uint64_t builds;    /* the first build and every rebuild */
    int build;          /* RB_HIERARCHY_BUILD_* of the last build */
} rb_bvh;

/* Builds a hierarchy over the n real boxes of `boxes` with the pool's
 * threads, by binned SAH or (build == RB_HIERARCHY_BUILD_FAST) along a
 * Morton curve, and replaces *bvh's arrays with it (counters are kept;
 * builds is incremented). alloc is used for the tree's arrays and kept in
 * *bvh; the work arrays come from work (the context's, workmem.h). On
 * RB_ENOMEM *bvh is unchanged. */
int rb_bvh_build(struct rb_pool *pool, const rb_allocator *alloc,
                 struct rb_workmem *work, const rb_boxset *boxes, int build,
                 rb_bvh *bvh);
/* bvh_morton.c: the binary tree of RB_HIERARCHY_BUILD_FAST over the
 * boxes' n real boxes, read from their six arrays, into tmp (root at 0;
 * at most 2n nodes), on the pool's threads, its leaves over `out`, which
 * receives the prims in tree order (and holds the sort's keys before);
 * `in` (n prims) is scratch. RB_OK or RB_ENOMEM. */
/* Below this many prims it runs on the calling thread. (It was 262144
 * while rb_pool_run waited for every worker to wake, which on a busy
 * machine cost more than the threads saved; now that a late worker skips
 * the job, 100K boxes build in 7-9 ms on two threads against 12-17 on
 * one when the 2-core machine is quiet, and 10-19 against 23-27 with two
 * busy loops beside them.) */
#define RB_BVH_MORTON_PARALLEL_MIN 16384
/* Up to this many boxes its codes have 7 bits per axis, beyond 10
 * (bvh_morton.c says why). Tests lower it to build fine codes over a few
 * thousand boxes; nothing else writes it. */
extern size_t rb_bvh_morton_fine_min;
int rb_bvh_morton(struct rb_pool *pool, const rb_allocator *alloc,
                  struct rb_workmem *work, const rb_boxset *boxes,
                  rb_bvh_prim *in, rb_bvh_prim *out, rb_bvh2_node *tmp);
/* Frees the arrays and zeroes *bvh (counters included); NULL-safe. */
void rb_bvh_free(rb_bvh *bvh);
/* Deep copy into *out (which must not hold arrays) with alloc. */
int rb_bvh_clone(const rb_allocator *alloc, const rb_bvh *src, rb_bvh *out);
/* Bytes held by the arrays. */
size_t rb_bvh_bytes(const rb_bvh *bvh);

/* Sums over inner slots (every node but the root is the bounds of one)
 * for the SAH cost: half surface areas and, for flat scenes, extents. */
typedef struct rb_bvh_sums {
    double area, perimeter;
} rb_bvh_sums;

/* Adds the box lo..hi to *s. */
static inline void rb_bvh_sums_add(rb_bvh_sums *s, const float lo[3],
                                   const float hi[3])
{
    double dx = (double)hi[0] - lo[0];
    double dy = (double)hi[1] - lo[1];
    double dz = (double)hi[2] - lo[2];
    s->area += dx * dy + dy * dz + dz * dx;
    s->perimeter += dx + dy + dz;
}

/* Collapses a binary tree (bvh_build.c) whose leaves are prims into wide
 * nodes, in an exactly sized array allocated with alloc (*out, *n_nodes),
 * on the pool's threads; where[i] gets the slot of original box i and
 * *depth the wide depth. The leaves under any binary node must hold
 * consecutive prims (both builders split ranges). Returns RB_OK,
 * RB_ENOMEM, or RB_EINVAL for a tree that breaks that rule. */
int rb_bvh_collapse(struct rb_pool *pool, const rb_allocator *alloc,
                    struct rb_workmem *work, const rb_bvh2_node *bin,
                    const rb_bvh_prim *prims, uint32_t *where,
                    rb_bvh_node **out, size_t *n_nodes,
                    unsigned *depth, rb_bvh_sums *inner);

/* Copies boxes first + indices[0..n) (original indices: a shape tree's
 * boxes come after its shapes) from `boxes`, which holds their new
 * corners, into their slots, then refits. */
void rb_bvh_update(rb_bvh *bvh, const rb_boxset *boxes, size_t first,
                   const uint32_t *indices, size_t n);
/* Recomputes the bounds of every inner slot bottom-up from the box slots
 * (the tree shape stays) and bvh->sah. */
void rb_bvh_refit(rb_bvh *bvh);
/* The union of every box; empty bounds (+inf..-inf) for an empty tree. */
void rb_bvh_bounds(const rb_bvh *bvh, float lo[3], float hi[3]);
/* SAH cost of the tree: expected node visits of a random ray that hits
 * the root's bounds (areas relative to the root), from the sums over its
 * inner slots (rb_bvh_collapse's, as it writes them). Uses surface area,
 * or the sum of extents when the root is flat in two axes. */
double rb_bvh_sah_of(const rb_bvh *bvh, const rb_bvh_sums *inner);

/* Starts fetching the four cache lines of node c (the walks' and the
 * streams' fetch of a child they will read next). Inline: as a call of
 * its own GCC 12 found such a function const and deleted its calls. */
static inline void rb_bvh_fetch_node(const rb_bvh_node *nodes, uint32_t c)
{
    const char *p = (const char *)&nodes[c];
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
    __builtin_prefetch(p + 128);
    __builtin_prefetch(p + 192);
}

/* Starts fetching what rb_bvh_best_box_full reads of best b's slot: its
 * node's planes (the first three lines). */
static inline void rb_bvh_fetch_slot(const rb_bvh *bvh, uint32_t slot)
{
    const char *p = (const char *)&bvh->nodes[slot / RB_BVH_WIDTH];
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
    __builtin_prefetch(p + 128);
}

/* The full answer of ray r against the box in slot k of node n (a box
 * slot's bounds are its flushed corners): rb_slab_full's, box unset. */
static inline void rb_bvh_slot_full(const rb_bvh_node *n, unsigned k,
                                    const rb_ray_prep *r, rb_hit *out)
{
    float lo[3], hi[3];
    for (int a = 0; a < 3; a++) {
        lo[a] = n->lo[a][k];
        hi[a] = n->hi[a][k];
    }
    rb_slab_full(r, lo, hi, out);
}

/* The best hit of a joint walk so far: (t, id), and where it lies: a
 * shape's index j in the tree's view, or a box's slot (node *
 * RB_BVH_WIDTH + slot, whose bounds are the box's corners); UINT32_MAX
 * in both when it is not the walk's (none yet, or the caller's). */
typedef struct rb_joint_best {
    float t;
    uint32_t id;
    uint32_t j;
    uint32_t slot;
} rb_joint_best;

/* A walk's best before any hit: infinite t, no id, shape or slot. */
static inline rb_joint_best rb_joint_best_none(void)
{
    return (rb_joint_best){INFINITY, UINT32_MAX, UINT32_MAX, UINT32_MAX};
}

/* The full answer of ray r when b, a walk's best, is a box of bvh
 * (b->slot set): its slot's rb_bvh_slot_full, box = b->id. */
static inline void rb_bvh_best_box_full(const rb_bvh *bvh,
                                        const rb_joint_best *b,
                                        const rb_ray_prep *r, rb_hit *out)
{
    rb_bvh_slot_full(&bvh->nodes[b->slot / RB_BVH_WIDTH],
                     b->slot % RB_BVH_WIDTH, r, out);
    out->box = (int32_t)b->id;
}

/* ---- traversal of one prepared ray; the same answers as the every-box
 * scans. One table per instruction set, like host/cpu/scan.h. */
/* A task's rays for rb_bvh_walkers.stream (bvh_stream_avx2.c): the
 * answers of `any`, `count` or `nearest` for n rays walked together,
 * through a tree
 * of kind `tree` (RB_TREE_*: a shape or joint tree as the walks of
 * bvh_walk.inc take them, for rays the tree's widening covers). */
typedef struct rb_bvh_stream {
    int tree;
    const rb_ray_prep *prep; /* the n rays */
    const rb_ray_raw *raw;   /* shape and joint trees: the same rays raw */
    const rb_shape_view *view; /* shape and joint trees: their records */
    uint32_t n;
    uint8_t *any;            /* any: n zeros in; 1 where a leaf is hit */
    uint32_t *count;         /* count: n zeros in; the hits */
    /* nearest (shape and joint trees): each ray's best so far in, its
     * best hit of the tree improving it out (rb_joint_best: slot for a
     * joint tree's box, j for a shape, UINT32_MAX for neither) */
    rb_joint_best *best;
    /* nearest over shape and joint trees: where best's j is the tree's,
     * its shape's full answer (rb_shape_full, box unset), written by the
     * test that found it, so that the answer is not computed again */
    rb_hit *shape_hits;
    uint32_t *arena;         /* scratch of `words` words */
    size_t words;
    /* Asked every RB_BVH_STREAM_POLL ray-node tests (a stream can hold
     * seconds of work: every ray in every box); NULL: never. */
    int (*stop)(void *user);
    void *stop_user;
} rb_bvh_stream;

/* About 1 ms of stream work on the AMD EPYC of docs/benchmarks.md (`any`
 * over 100K boxes: ~8.6 ray-node tests a ray at 7.3 M rays/s on one
 * thread, ~16 ns a test), less where the nodes stay in L1. */
#define RB_BVH_STREAM_POLL 65536u

/* Arena words that a stream of n rays needs over a tree of `depth` wide
 * levels: a level's lists take at most eight times its parent's, and a
 * node being split needs sixteen times its own and 2 * RB_BVH_WIDTH words
 * more (bvh_stream_avx2.c: its lists' packs and its rays' masks). */
static inline size_t rb_bvh_stream_words(size_t n, unsigned depth)
{
    return n * (2 * RB_BVH_WIDTH + 1 + RB_BVH_WIDTH * (size_t)depth) +
           2 * RB_BVH_WIDTH;
}

/* Whether rb_bvh_walkers.stream answers mode: `any`, `count` and
 * `nearest` (1.25-1.5x the one-ray walk's rate over box trees of 300 to
 * 1M boxes, ~1.8x over shape trees, whose exact tests it batches), not
 * `all`: 0.92-0.95x at 100K boxes (its lists, scattered over the task,
 * leave the cache between a ray's nodes). docs/benchmarks.md. */
static inline int rb_bvh_streams(rb_mode mode)
{
    return mode == RB_MODE_ANY || mode == RB_MODE_COUNT ||
           mode == RB_MODE_NEAREST;
}

/* `nearest` streams only where a task gets this many rays or more: with
 * fewer, its rays share too few nodes to make up for their own
 * near-to-far order. raybox-bench, 16K boxes (docs/benchmarks.md): tasks
 * of 64 and 256 rays ran at 0.3-0.75x the one-ray walk's rate on the
 * CPU, 0.55-0.8x on PoCL; tasks of 1024 at 0.95-1.3x, of 4096 and more
 * up to 1.75x (the CPU; PoCL's city rays stay at 0.9x). */
#define RB_BVH_NEAREST_STREAM_MIN 1024

/* Whether mode streams when each task gets task_rays rays. */
static inline int rb_bvh_streams_for(rb_mode mode, size_t task_rays)
{
    return rb_bvh_streams(mode) &&
           (mode != RB_MODE_NEAREST || task_rays >= RB_BVH_NEAREST_STREAM_MIN);
}

typedef struct rb_bvh_walkers {
    const char *simd;
    /* Every ray of s through its tree, for a mode rb_bvh_streams
     * accepts; NULL where the processor has none. Returns 0; -1 when
     * s->words is short of rb_bvh_stream_words(n, bvh->depth); 1 when
     * s->stop said stop; the answers are then partly written. */
    int (*stream)(const rb_bvh *bvh, rb_bvh_stream *s, rb_mode mode);
    /* The least (t_enter, original index) hit, with faces from
     * rb_slab_full; out->box is the original index, or a miss. */
    void (*nearest)(const rb_bvh *bvh, const rb_ray_prep *r, rb_hit *out);
    int (*any)(const rb_bvh *bvh, const rb_ray_prep *r);
    /* any's walk, returning the slot of the box it stopped at (one the
     * ray hits: rb_slab_hit accepts its bounds), as node * RB_BVH_WIDTH +
     * slot like `where`, or UINT32_MAX for none. */
    uint32_t (*any_box)(const rb_bvh *bvh, const rb_ray_prep *r);
    uint32_t (*count)(const rb_bvh *bvh, const rb_ray_prep *r);
    /* Every hit; the cap least by (t_enter, original index) go to list,
     * sorted. Returns the number of hits (may exceed cap). */
    uint32_t (*all)(const rb_bvh *bvh, const rb_ray_prep *r,
                    rb_list_hit *list, uint32_t cap);
    /* The same walk over a shape tree (bvh_shapes.c): a leaf slot is a
     * candidate, shape child[slot] of v, tested exactly (rb_shape_hit on
     * the raw ray w) when the slot's plain conservative test passes, so
     * the slots must already hold widened bounds; a joint tree's boxes
     * (the node's exact mask) are skipped. Answers as the scans of
     * kernels/exact.h over the same shapes give them. nearest improves
     * (*best_t, *best_id) by (t_enter, id) and sets *best_j to the
     * winner's index in v; all inserts into list (*stored of cap) and
     * returns the hits it found. */
    void (*shape_nearest)(const rb_bvh *bvh, const rb_ray_prep *r,
                          const rb_shape_view *v, const rb_ray_raw *w,
                          float *best_t, uint32_t *best_id, uint32_t *best_j);
    int (*shape_any)(const rb_bvh *bvh, const rb_ray_prep *r,
                     const rb_shape_view *v, const rb_ray_raw *w);
    uint32_t (*shape_count)(const rb_bvh *bvh, const rb_ray_prep *r,
                            const rb_shape_view *v, const rb_ray_raw *w);
    uint32_t (*shape_all)(const rb_bvh *bvh, const rb_ray_prep *r,
                          const rb_shape_view *v, const rb_ray_raw *w,
                          rb_list_hit *list, uint32_t *stored, uint32_t cap);
    /* The same over a joint tree (bvh_shapes.c), boxes answered as in a
     * box tree (child[slot] is the box's id) and shapes as above, in one
     * walk; with shapes 0 the shape slots are skipped (a ray outside the
     * tree's widening, rb_shape_route). nearest improves *best; the
     * others as the shape walks. */
    void (*joint_nearest)(const rb_bvh *bvh, const rb_ray_prep *r,
                          const rb_shape_view *v, const rb_ray_raw *w,
                          int shapes, rb_joint_best *best);
    int (*joint_any)(const rb_bvh *bvh, const rb_ray_prep *r,
                     const rb_shape_view *v, const rb_ray_raw *w, int shapes);
    uint32_t (*joint_count)(const rb_bvh *bvh, const rb_ray_prep *r,
                            const rb_shape_view *v, const rb_ray_raw *w,
                            int shapes);
    uint32_t (*joint_all)(const rb_bvh *bvh, const rb_ray_prep *r,
                          const rb_shape_view *v, const rb_ray_raw *w,
                          int shapes, rb_list_hit *list, uint32_t *stored,
                          uint32_t cap);
} rb_bvh_walkers;

extern const rb_bvh_walkers rb_bvh_walk_scalar;
#ifdef RB_HAVE_AVX2
extern const rb_bvh_walkers rb_bvh_walk_avx2;
int rb_bvh_stream_avx2(const rb_bvh *bvh, rb_bvh_stream *s, rb_mode mode);
#endif
/* The best table this processor runs; RAYBOX_SIMD=scalar forces the
 * portable one. */
const rb_bvh_walkers *rb_bvh_walk_pick(void);

#endif /* RB_BVH_H */
