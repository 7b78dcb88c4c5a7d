/*
 * bvh.cl - the hierarchy walk (host/bvh): nearest, any, count and all
 * through the 8-wide node array, one work-item per ray, with answers bit
 * for bit those of the CPU walk (host/bvh/bvh_walk.inc) and of brute
 * force (SPEC R9). Uses slab.cl and brute.cl's helpers (concatenated
 * before this file).
 *
 * Nodes are exact.h's rb_bvh_node, RB_NODE_WORDS words each, read as
 * floats at exact.h's offsets: lo[axis][slot] at RB_NODE_LO, hi at
 * RB_NODE_HI, child[slot] at RB_NODE_CHILD (uint: box slot -> original box
 * index, inner slot -> node index, 0 -> empty), the box mask at
 * RB_NODE_BOXES (bit k: slot k is a box), and in a joint shape tree the
 * mask of its boxes at RB_NODE_EXACT (a shape walk skips them, a joint
 * walk takes them as a box tree's). The root is node 0; empty slots hold
 * +inf..-inf, which no ray enters.
 *
 * Why the answers are exact (the argument of bvh_walk.inc, restated):
 * - Box slots hold the boxes' flushed corners and get rb_slab_hit's
 *   operations: entry E starts at tmin and takes near only when near > E,
 *   exit X takes far only when far < X, then min(X, tmax); every reported
 *   distance gets + 0.0f. (X starting at +inf and meeting tmax last gives
 *   the value of X starting at tmax, up to the sign of a zero, which
 *   + 0.0f removes; the hit test does not see it.)
 * - Subtree slots use the same per-plane distances (rounding is monotonic,
 *   so a slot's entry is never above and its exit never below those of a
 *   box inside) and skip NaN planes the same way; computed by the same
 *   instructions as the box slots' (FP_CONTRACT is off, and any rounding
 *   a device used would be monotonic), they need no pad. Shape trees pad
 *   the exit as in Ize 2013: x * (1 + 2^-21) for x >= 0, x * (1 - 2^-21)
 *   below (exact.h's RB_BVH_PAD_UP/DOWN), for the shape tests' own
 *   rounding.
 * - nearest drops a slot or a stack entry only when its entry is strictly
 *   greater than the best so far and breaks ties by original index; the
 *   winner's faces and exit come from rb_slab_full on its corners.
 * - all inserts by (t_enter, original index) into its max_hits slots, so
 *   the kept prefix is that of the index-ordered scan; counts every hit.
 * So the order of the walk never matters, only which boxes it tests.
 *
 * Structure (Aila & Laine 2009, "while-while"): an inner loop tests nodes
 * and descends, nearer children first for nearest and any, until it meets
 * a node with box hits; an outer loop then takes those boxes and resumes,
 * so that the items of a SIMD group tend to be in the same loop (node
 * tests, or box work) at the same time. A box tree's count is only a
 * popcount, taken in the inner loop.
 *
 * The stack is short (RB_BVH_SHORT entries, a ring in private memory, set
 * by the host: a deep tree would need 680, kilobytes of local memory per
 * work-item on a GPU). A push onto a full ring drops the oldest entry, the
 * one the walk would visit last; when the ring runs empty after a drop,
 * the walk resumes from its path (the slot taken at each level, 3 bits a
 * level): it tests the path's nodes again from the root and pushes the
 * children after the path's child in a fixed visit order (rb_wpush_set),
 * which are what an unlimited stack would hold then. So every node is
 * visited once, in the order of a walk without limit (count and all count
 * each box once), and box hits are taken at the first visit only; nearest
 * resumes with its bound as it is (a dropped subtree could only start at
 * or past the best, and ties are kept as in the pops). Each resume moves
 * the walk on, so it ends; a ray resumes at most about
 * (its pushes) / RB_BVH_SHORT times. Tests build a ring of one entry
 * (RAYBOX_CL_BVH_STACK=1) to run the resume everywhere. A ring that
 * cannot overflow (RB_WALK_RESUMES is 0: the wide variant's) keeps no
 * path: it is the plain stack of the deepest tree.
 *
 * Two node tests, chosen with the brute kernels' variant: RB_WIDE (CPU
 * devices) tests a node's 8 slots as float8 vectors, one per plane row;
 * the tiled variant (GPUs) tests two halves of float4, which keeps loads
 * 16 bytes wide without asking a GPU for eight-wide registers.
 *
 * Shape trees (host/bvh/bvh_shapes.c) are walked by the same loop from
 * kernels/shapes.cl: rb_walk_tree with `shapes` set gives their box
 * slots (widened world boxes) the conservative test and hands the slots
 * that pass to rb_take_shapes, the exact shape tests on the leaf records
 * (the CPU's leaf hook, bvh_walk.inc). The stack, its resume and the
 * visit order are the box walk's.
 *
 * Kernel arguments: exact.h's enum rb_walk_arg, the same for the four
 * (a mode's unused outputs are null); bad is R6 as in brute.cl (rb_ray_ok,
 * the lowest bad element with atomic_min). order (may be NULL) is a
 * permutation of the chunk's rays: item k walks ray order[k] and writes
 * that ray's answer.
 */
#if !defined(RB_BVH_SHORT) || !defined(RB_BVH_DEPTH)
#error "RB_BVH_SHORT and RB_BVH_DEPTH must be defined by the host"
#endif
#if RB_BVH_SHORT < 1 || (RB_BVH_SHORT & (RB_BVH_SHORT - 1)) != 0
#error "RB_BVH_SHORT must be a power of two"
#endif


enum { RB_WALK_NEAREST, RB_WALK_ANY, RB_WALK_COUNT, RB_WALK_ALL };

/* The lowest set bit of m != 0 (ctz is OpenCL C 2.0). */
static inline uint rb_ctz(uint m)
{
    return 31 - clz(m & (0u - m));
}

/* A ray for the walk: prepared as in brute.cl, plus the word offsets of
 * the rows it reads as near and far planes (sign of inv). */
typedef struct rb_wray {
    rb_ray_prep r;
    uint near[3];
    uint far[3];
} rb_wray;

static inline rb_wray rb_wray_of(rb_ray_prep r)
{
    rb_wray w;
    w.r = r;
#ifdef RB_WIDE
    #pragma unroll
#endif
    for (int a = 0; a < 3; a++) {
        int s = signbit(w.r.inv[a]) ? 1 : 0;
        w.near[a] = (uint)((s ? RB_NODE_HI : RB_NODE_LO) + 8 * a);
        w.far[a] = (uint)((s ? RB_NODE_LO : RB_NODE_HI) + 8 * a);
    }
    return w;
}

static inline rb_wray rb_wray_load(__global const float *rays, uint dims,
                                   size_t i)
{
    return rb_wray_of(rb_load_ray(rays, dims, i));
}

/* The leaf slots a node test passes: a box tree's boxes; a shape tree's
 * shapes (its boxes, if joint, are the box pass's); a joint walk's every
 * leaf, by the padded compare (its walk then holds boxes to the unpadded
 * one, rb_joint_boxes). */
static inline uint rb_leaf_hits(__global const float *n, uint pass,
                                uint boxes, const int tree)
{
    if (tree == RB_TREE_SHAPES)
        return pass & boxes & ~as_uint(n[RB_NODE_EXACT]);
    return pass & boxes;
}

/* The boxes (slots `exact`) of a joint walk's leaf hits that the box
 * tree's own compare passes: a padded pass gave e <= limit <= tmax and e
 * finite, so it is e <= min(x, tmax) (xv) that is left to check. */
static inline uint rb_joint_boxes(uint hits, uint exact, const float ev[8],
                                  const float xv[8])
{
    uint boxes = 0;
    for (uint m = hits & exact; m; m &= m - 1) {
        uint k = rb_ctz(m);
        if (ev[k] <= xv[k])
            boxes |= 1u << k;
    }
    return boxes;
}

/* On the wide variant (CPU devices) the short loops over axes carry
 * "#pragma unroll": PoCL 3.1 (LLVM 15) leaves them rolled, which keeps
 * the per-axis offsets and vectors in memory (brute_wide.cl says the same
 * of its loops); unrolled, its walk's any ran 10-30% faster, count 0-9%,
 * nearest and all within noise (two sets of alternating runs,
 * raybox-bench-bvh --boxes 100000 --rays 262144). The tiled variant keeps
 * its loops: on sm_90 the unrolled shape walk's stack frame grew
 * (scripts/gpu-report.sh). */
#ifdef RB_WIDE
/* Lanes of an int8 comparison result (-1 / 0) as bits 0..7: one movemask
 * where clang targets AVX (PoCL on x86: its count walk 1.11x faster, the
 * others 1.03-1.05x), else an or of the lanes' bits, which LLVM 15 left
 * as a dozen shuffles and ors. */
#if defined(__clang__) && defined(__AVX__)
typedef float rb_v8sf __attribute__((__vector_size__(32)));
static inline uint rb_mask8(int8 m)
{
    return (uint)__builtin_ia32_movmskps256(__builtin_bit_cast(rb_v8sf, m));
}
#else
static inline uint rb_mask8(int8 m)
{
    int8 b = m & (int8)(1, 2, 4, 8, 16, 32, 64, 128);
    return (uint)(b.s0 | b.s1 | b.s2 | b.s3 | b.s4 | b.s5 | b.s6 | b.s7);
}
#endif

/* Entries (*e_out) and exits (*x_out, before tmax) of the eight slots
 * whose near and far plane rows of each axis are near[a] and far[a], as
 * rb_slab_hit computes them (before + 0.0f): the one-ray walk's node test
 * below and the ray streams' (rb_stream_walk) share it. */
static inline void rb_node8_span(const float8 near[3], const float8 far[3],
                                 const rb_ray_prep *r, float8 *e_out,
                                 float8 *x_out)
{
    float8 e = (float8)(r->tmin), x = (float8)(INFINITY);
    #pragma unroll
    for (int a = 0; a < 3; a++) {
        float8 o = (float8)(r->o[a]), inv = (float8)(r->inv[a]);
        float8 ne = (near[a] - o) * inv;
        float8 fa = (far[a] - o) * inv;
        e = select(e, ne, ne > e);
        x = select(x, fa, fa < x);
    }
    *e_out = e;
    *x_out = x;
}

/* The slots with e <= min(x, limit) and e finite (x: padded or not). */
static inline uint rb_node8_pass(float8 e, float8 x, float limit)
{
    float8 xp = select((float8)(limit), x, x < (float8)(limit));
    return rb_mask8((e <= xp) & (e < (float8)(INFINITY)));
}

/* Node n: e[k] and x[k] are slot k's t_enter and t_exit as rb_slab_hit
 * computes them (before + 0.0f); one compare, e <= min(x, limit) with e
 * finite, gives *boxes_hit, the box slots hit at or before limit (limit
 * is tmax but for nearest, whose boxes past its best cannot win), and the
 * return value, the subtree slots that may hold such a hit. A box tree
 * needs no pad: its box and subtree slots go through these very
 * operations, each monotonic in the plane, so a subtree slot passes
 * whenever a box inside it does (host/bvh/bvh_walk.inc). In a shape tree
 * (tree, a constant RB_TREE_*) the leaf slots hold widened world boxes
 * and the exact shape test decides (shapes.cl); there the exit is padded
 * for the shape tests' own rounding, and *boxes_hit is the candidates. A
 * joint tree's test is the shape tree's, and *boxes_hit holds its boxes
 * (RB_NODE_EXACT) too: the walk holds those to the box tree's compare. */
static inline uint rb_node_test(const rb_wray *w, __global const float *n,
                                float limit, float e_out[8], float x_out[8],
                                uint *boxes_hit, const int tree)
{
    float8 near[3], far[3], e, x;
    #pragma unroll
    for (int a = 0; a < 3; a++) {
        near[a] = vload8(0, n + w->near[a]);
        far[a] = vload8(0, n + w->far[a]);
    }
    rb_node8_span(near, far, &w->r, &e, &x);
    float8 tmax = (float8)(w->r.tmax);
    float8 xe = select(tmax, x, x < tmax);
    float8 xp = x;
    if (tree != RB_TREE_BOXES)
        xp = x * select((float8)(RB_BVH_PAD_DOWN), (float8)(RB_BVH_PAD_UP),
                        x >= (float8)(0.0f));
    uint pass = rb_node8_pass(e, xp, limit);
    vstore8(e, 0, e_out);
    vstore8(xe, 0, x_out);
    uint boxes = as_uint(n[RB_NODE_BOXES]);
    *boxes_hit = rb_leaf_hits(n, pass, boxes, tree);
    return pass & ~boxes;
}
#else
/* The same test on two halves of four slots. */
static inline uint rb_node_test(const rb_wray *w, __global const float *n,
                                float limit, float e_out[8], float x_out[8],
                                uint *boxes_hit, const int tree)
{
    uint pass = 0;
    for (int h = 0; h < 2; h++) {
        float4 e = (float4)(w->r.tmin), x = (float4)(INFINITY);
        for (int a = 0; a < 3; a++) {
            float4 o = (float4)(w->r.o[a]), inv = (float4)(w->r.inv[a]);
            /* The rows from inv's sign here rather than w's offsets:
             * six registers fewer across the walk on sm_90. */
            int neg = signbit(w->r.inv[a]);
            uint nr = (uint)((neg ? RB_NODE_HI : RB_NODE_LO) + 8 * a);
            uint fr = (uint)((neg ? RB_NODE_LO : RB_NODE_HI) + 8 * a);
            float4 ne = (vload4(h, n + nr) - o) * inv;
            float4 fa = (vload4(h, n + fr) - o) * inv;
            e = select(e, ne, ne > e);
            x = select(x, fa, fa < x);
        }
        float4 tmax = (float4)(w->r.tmax);
        float4 xe = select(tmax, x, x < tmax);
        float4 xp = x;
        if (tree != RB_TREE_BOXES)
            xp = x * select((float4)(RB_BVH_PAD_DOWN),
                            (float4)(RB_BVH_PAD_UP), x >= (float4)(0.0f));
        xp = select((float4)(limit), xp, xp < (float4)(limit));
        int4 b = (int4)(1, 2, 4, 8) << (4 * h);
        int4 mb = ((e <= xp) & (e < (float4)(INFINITY))) & b;
        pass |= (uint)(mb.s0 | mb.s1 | mb.s2 | mb.s3);
        vstore4(e, h, e_out);
        vstore4(xe, h, x_out);
    }
    uint boxes = as_uint(n[RB_NODE_BOXES]);
    *boxes_hit = rb_leaf_hits(n, pass, boxes, tree);
    return pass & ~boxes;
}
#endif /* RB_WIDE */

/* Prefetches on CPU devices: a walk waits on memory most of its time.
 * OpenCL's prefetch() is a no-op on PoCL; clang's builtin reaches the
 * processor's instruction. Nothing elsewhere (a GPU hides latency with
 * other work-items, and its compiler need not know the builtin). */
#if defined(RB_WIDE) && defined(__clang__) &&                                \
    (defined(__x86_64__) || defined(__aarch64__))
#define RB_PREFETCH(p) __builtin_prefetch(p)
#else
#define RB_PREFETCH(p) ((void)0)
#endif

/* The four cache lines of a node the walk will visit, so that the misses
 * of siblings overlap (measured on PoCL: count and all 10-15% faster, as
 * on the CPU walk). */
static inline void rb_prefetch_node(__global const float *n)
{
    RB_PREFETCH(n);
    RB_PREFETCH(n + 16);
    RB_PREFETCH(n + 32);
    RB_PREFETCH(n + 48);
}

/* What a walk has found so far. */
typedef struct rb_walk {
    float best_t;    /* nearest: least entry so far (+inf: none) */
    uint best_i;     /* its original index (shape trees: its id) */
    uint best_j;     /* shape trees: the winner's leaf (0xffffffff: none) */
    uint best_node;  /* where its corners are */
    uint best_slot;
    int found;       /* nearest: a best exists; any: a hit */
    uint count;      /* count and all: every hit */
    uint stored;     /* all: entries in the list */
} rb_walk;

/* The short stack: a ring of RB_BVH_SHORT subtrees still to visit. A push
 * onto a full ring overwrites the oldest entry (the one the walk would
 * visit last) and notes the loss; rb_wpop resumes from the path when the
 * ring runs empty after a loss. */
#define RB_SHORT_MASK ((uint)RB_BVH_SHORT - 1u)
/* Whether the ring can overflow at all: a walk holds at most WIDTH - 1
 * entries a level, plus one (host/bvh/bvh.h). When it cannot (the wide
 * variant's 1024), the path is not kept and the walk is the plain one. */
#define RB_WALK_NEED (7 * RB_BVH_DEPTH + 1)
#define RB_WALK_RESUMES (RB_BVH_SHORT < RB_WALK_NEED)
#if RB_WALK_RESUMES
#define RB_WALK_CAP RB_BVH_SHORT
#define RB_WALK_DCAP RB_BVH_SHORT
#else
#define RB_WALK_CAP RB_WALK_NEED
#define RB_WALK_DCAP 1
#endif
typedef struct rb_wstack {
    uint ns[RB_WALK_CAP];  /* node << 3 | its slot in its parent */
    float t[RB_WALK_CAP];  /* nearest and any: the slot's entry */
    uchar d[RB_WALK_DCAP]; /* the node's depth (root 0) */
    uint top;               /* pushes minus pops (the ring index) */
    uint n;                 /* entries held */
    int lost;               /* an entry was overwritten since the resume */
} rb_wstack;

/* Where the walk is: the slot of each node of the path from the root to
 * the node last taken, 3 bits a level, ten levels a word; depth is that
 * node's depth (root 0). */
#define RB_PATH_WORDS (RB_BVH_DEPTH / 10 + 1)
typedef struct rb_wpos {
    uint path[RB_PATH_WORDS];
    uint depth;
} rb_wpos;

static inline uint rb_path_get(const rb_wpos *p, uint d)
{
    return (p->path[d / 10] >> (3 * (d % 10))) & 7u;
}

static inline void rb_path_take(rb_wpos *p, uint d, uint slot)
{
    uint w = d / 10, sh = 3 * (d % 10);
    p->path[w] = (p->path[w] & ~(7u << sh)) | (slot << sh);
    p->depth = d;
}

/* ns: node << 3 | slot; t only where with_t (nearest and any read it). */
static inline void rb_wpush(rb_wstack *st, uint ns, float t, uint depth,
                            const int with_t)
{
    if (!RB_WALK_RESUMES) {
        st->ns[st->n] = ns;
        if (with_t)
            st->t[st->n] = t;
        st->n++;
        return;
    }
    uint j = st->top++ & RB_SHORT_MASK;
    st->ns[j] = ns;
    if (with_t)
        st->t[j] = t;
    st->d[j] = (uchar)depth;
    if (st->n < RB_BVH_SHORT)
        st->n++;
    else
        st->lost = 1;
}

/* The visit order of a node's children, which the resume relies on: for
 * nearest and any by entry, then by higher slot; for count and all by
 * higher slot. Pushes the subtree slots of m (children at depth d) so
 * that the first to visit is on top; with `keep` that first one is not
 * pushed but returned (its slot). Returns 8 when none was kept. */
static inline uint rb_wpush_set(const int mode, rb_wstack *st, uint m,
                                const float ev[8],
                                __global const uint *child, uint d, int keep)
{
    if (!m)
        return 8;
    if (mode == RB_WALK_NEAREST || mode == RB_WALK_ANY) {
#if defined(RB_WIDE) && !RB_WALK_RESUMES
        /* Each child straight to its place in the order below, its rank:
         * how many come before it (farther, or as far at a lower slot),
         * as in the CPU walk (bvh_walk.inc); no insertion sort. */
        float8 e8 = vload8(0, ev);
        uint h = popcount(m), base = st->n, kept = 8;
        for (uint mm = m; mm; mm &= mm - 1) {
            uint k = rb_ctz(mm);
            float t = ev[k];
            uint before = rb_mask8(e8 > (float8)(t)) |
                          (rb_mask8(e8 == (float8)(t)) & ((1u << k) - 1u));
            uint r = popcount(m & before);
            if (keep && r == h - 1) {
                kept = k;
                continue;
            }
            st->ns[base + r] = child[k] << 3 | k;
            st->t[base + r] = t;
        }
        st->n = base + (keep ? h - 1 : h);
        return kept;
#else
        /* Far to near: entries non-increasing, equal entries by slot
         * (hk: node << 3 | slot). */
        uint hk[8];
        float ht[8];
        int h = 0;
        while (m) {
            uint k = rb_ctz(m);
            m &= m - 1;
            float t = ev[k];
            int pos = h++;
            while (pos > 0 && ht[pos - 1] < t) {
                hk[pos] = hk[pos - 1];
                ht[pos] = ht[pos - 1];
                pos--;
            }
            hk[pos] = child[k] << 3 | k;
            ht[pos] = t;
        }
        int last = keep ? h - 1 : h;
        for (int j = 0; j < last; j++)
            rb_wpush(st, hk[j], ht[j], d, 1);
        return keep ? hk[h - 1] & 7u : 8;
#endif
    }
    uint first = keep ? 31 - clz(m) : 8;
    if (keep)
        m &= ~(1u << first);
    while (m) {
        uint k = rb_ctz(m);
        m &= m - 1;
        rb_wpush(st, child[k] << 3 | k, 0.0f, d, 0);
    }
    return first;
}

/* After a loss, with the ring empty: walks the path from the root again,
 * testing each node of it (with the bound the walk has now), and pushes
 * the children that come after the path's child in the visit order,
 * deepest last, which are the subtrees a stack without limit would hold.
 * For nearest, a path child that now fails the test (its entry beyond the
 * best) holds nothing left to visit, so the path ends there. Box hits of
 * the path's nodes were taken when the walk first met them. The node test
 * is the walk's own (tree: the tree's kind), so the path's masks are the
 * ones the walk saw. */
static inline void rb_wresume(const rb_wray *w, __global const float *nodes,
                              const int mode, const int tree, float limit,
                              rb_wstack *st, const rb_wpos *pos)
{
    __global const uint *words = (__global const uint *)nodes;
    st->lost = 0;
    uint node = 0;
    for (uint d = 1; d <= pos->depth; d++) {
        float ev[8], xv[8];
        uint hits;
        uint m = rb_node_test(w, nodes + (size_t)node * RB_NODE_WORDS, limit,
                              ev, xv, &hits, tree);
        __global const uint *child = words + (size_t)node * RB_NODE_WORDS +
                                     RB_NODE_CHILD;
        uint c = rb_path_get(pos, d);
        uint after = 0;
        if (mode == RB_WALK_NEAREST || mode == RB_WALK_ANY) {
            for (uint mm = m; mm; mm &= mm - 1) {
                uint k = rb_ctz(mm);
                if (ev[k] > ev[c] || (ev[k] == ev[c] && k < c))
                    after |= 1u << k;
            }
        } else {
            after = m & ((1u << c) - 1u);
        }
        rb_wpush_set(mode, st, after, ev, child, d, 0);
        if (!((m >> c) & 1u))
            break;
        node = child[c];
    }
}

/* The next subtree to visit into *cur (1), or 0 when the walk is over;
 * nearest skips entries that start past its best. */
static inline int rb_wpop(const rb_wray *w, __global const float *nodes,
                          const int mode, const int tree, const rb_walk *s,
                          rb_wstack *st, rb_wpos *pos, uint *cur)
{
    for (;;) {
        if (st->n == 0) {
            if (!RB_WALK_RESUMES || !st->lost)
                return 0;
            float limit = w->r.tmax;
            if (mode == RB_WALK_NEAREST && s->best_t < limit)
                limit = s->best_t;
            rb_wresume(w, nodes, mode, tree, limit, st, pos);
            continue;
        }
        uint j = --st->n;
        if (RB_WALK_RESUMES)
            j = --st->top & RB_SHORT_MASK;
        uint ns = st->ns[j];
        if (RB_WALK_RESUMES)
            rb_path_take(pos, st->d[j], ns & 7u);
        if (mode != RB_WALK_NEAREST || st->t[j] <= s->best_t) {
            *cur = ns >> 3;
            return 1;
        }
    }
}

/* The candidate slots `hits` of a shape tree's node (child: its child
 * words) against the raw ray sw with exact.h's rb_shape_hit on the leaves
 * sv, as the CPU's leaf hook (bvh_walk.inc, take_shapes) does. Returns 1
 * when the walk can stop (any). */
static inline int rb_take_shapes(const int mode, uint hits,
                                 __global const uint *child,
                                 const rb_shape_view *sv,
                                 const rb_ray_raw *sw, rb_walk *s,
                                 __global rb_list_hit *list, uint cap)
{
    while (hits) {
        uint k = rb_ctz(hits);
        hits &= hits - 1;
        uint j = child[k];
        float te, tx;
        if (!rb_shape_hit(sv, j, sw, &te, &tx))
            continue;
        if (mode == RB_WALK_NEAREST) {
            uint id = rb_shape_id(sv, j);
            if (rb_nearer(te, id, s->best_t, s->best_i)) {
                s->best_t = te;
                s->best_i = id;
                s->best_j = j;
                s->found = 0; /* a joint walk's box is no longer the best */
            }
        } else if (mode == RB_WALK_ANY) {
            s->found = 1;
            return 1;
        } else if (mode == RB_WALK_COUNT) {
            s->count++;
        } else {
            s->count++;
            rb_list_insert(list, &s->stored, cap, (int)rb_shape_id(sv, j), te,
                           tx);
        }
    }
    return 0;
}

/* The walk's functions: always inlined on GPUs (rb_walk_tree says why). */
#ifdef RB_WIDE
#define RB_WALK_INLINE
#else
#define RB_WALK_INLINE __attribute__((always_inline))
#endif

/* The leaf hits `hits` of node `leaf` (their entries and exits in ev and
 * xv): a box tree's boxes, a shape tree's candidates, a joint tree's
 * both (its shapes only when take_shapes is set). Returns 1 when the walk
 * can stop (any). */
static inline RB_WALK_INLINE int
rb_take_leaves(const int mode, const int tree, uint hits, uint leaf,
               __global const uint *words, const float ev[8],
               const float xv[8], rb_walk *s, __global rb_list_hit *list,
               uint cap, const rb_shape_view *sv, const rb_ray_raw *sw,
               int take_shapes)
{
    __global const uint *child = words + (size_t)leaf * RB_NODE_WORDS +
                                 RB_NODE_CHILD;
    uint shape_hits = 0;
    if (tree == RB_TREE_SHAPES) {
        shape_hits = hits;
        hits = 0;
    } else if (tree == RB_TREE_JOINT) {
        uint exact = words[(size_t)leaf * RB_NODE_WORDS + RB_NODE_EXACT];
        shape_hits = take_shapes ? hits & ~exact : 0;
        hits = rb_joint_boxes(hits, exact, ev, xv);
    }
    if (shape_hits &&
        rb_take_shapes(mode, shape_hits, child, sv, sw, s, list, cap))
        return 1;
    switch (mode) {
    case RB_WALK_NEAREST:
        while (hits) {
            uint k = rb_ctz(hits);
            hits &= hits - 1;
            uint idx = child[k];
            if (rb_nearer(ev[k], idx, s->best_t, s->best_i)) {
                s->best_t = ev[k];
                s->best_i = idx;
                s->best_node = leaf;
                s->best_slot = k;
                s->found = 1;
                if (tree == RB_TREE_JOINT)
                    s->best_j = 0xffffffffu;
            }
        }
        return 0;
    case RB_WALK_ANY:
        if (tree != RB_TREE_BOXES && !hits)
            return 0; /* only shapes, none hit */
        s->found = 1;
        return 1;
    case RB_WALK_COUNT:
        s->count += popcount(hits);
        return 0;
    default:
        while (hits) {
            uint k = rb_ctz(hits);
            hits &= hits - 1;
            s->count++;
            rb_list_insert(list, &s->stored, cap, (int)child[k], ev[k], xv[k]);
        }
        return 0;
    }
}

/* One ray through the tree. mode is a constant at every call site, so
 * each kernel gets its own loop; so is tree: RB_TREE_BOXES for a box tree
 * (sv and sw unused), RB_TREE_SHAPES for a shape tree, whose leaf slots
 * are candidates for rb_take_shapes on the leaves sv (the leaf hook; the
 * loop, the short stack and its resume are the same), RB_TREE_JOINT for
 * a joint tree, whose boxes are taken as a box tree's and whose shapes
 * as a shape tree's when take_shapes is set (at run time: a ray the
 * tree's widening does not cover takes only its boxes here). Always
 * inlined in the tiled variant (GPUs): clang-14 otherwise kept one copy
 * for the four shape walks, mode and tree passed at run time, its state
 * in memory through a call (sm_90: 80-96 registers and 464 B of stack
 * frame inlined, 123-128 and 584 B not, docs/gpu.md). The wide variant
 * leaves it to the compiler: forced on PoCL, the shape walks ran 1-2 %
 * more instructions. */
static inline RB_WALK_INLINE void
rb_walk_tree(const rb_wray *w, __global const float *nodes, const int mode,
             rb_walk *s, __global rb_list_hit *list, uint cap,
             const int tree, const rb_shape_view *sv, const rb_ray_raw *sw,
             int take_shapes)
{
    __global const uint *words = (__global const uint *)nodes;
    rb_wstack st;
    st.top = 0;
    st.n = 0;
    st.lost = 0;
    rb_wpos pos;
    for (int j = 0; j < RB_PATH_WORDS; j++)
        pos.path[j] = 0;
    pos.depth = 0;
    uint cur = 0;
    int walking = 1;
    while (walking) {
        /* Inner loop: node tests, descending, until a node has leaf hits
         * to take (their e and x stay in ev/xv) or the walk is over. */
        float ev[8], xv[8];
        uint leaf = 0, hits = 0;
        while (walking && !hits) {
            __global const float *n = nodes + (size_t)cur * RB_NODE_WORDS;
            __global const uint *child = words +
                                         (size_t)cur * RB_NODE_WORDS +
                                         RB_NODE_CHILD;
            float limit = w->r.tmax;
            if (mode == RB_WALK_NEAREST && s->best_t < limit)
                limit = s->best_t;
            uint m = rb_node_test(w, n, limit, ev, xv, &hits, tree);
            leaf = cur;
            if (mode == RB_WALK_COUNT && tree == RB_TREE_BOXES) {
                /* A popcount, taken at once: the walk stays in this loop
                 * (PoCL's count over 16K boxes ran 1.28x faster; taking
                 * every mode's hits here gained the others nothing). */
                s->count += popcount(hits);
                hits = 0;
            }
            if (m) {
                /* (any stops so early that fetching costs more, as on
                 * the CPU.) */
                for (uint pm = mode == RB_WALK_ANY ? 0 : m; pm;
                     pm &= pm - 1)
                    rb_prefetch_node(nodes + (size_t)child[rb_ctz(pm)] *
                                                 RB_NODE_WORDS);
                /* The first child in the visit order is walked now, the
                 * others wait on the stack. */
                uint d = pos.depth + 1;
                uint k = m & (m - 1) ? rb_wpush_set(mode, &st, m, ev, child,
                                                    d, 1)
                                     : rb_ctz(m);
                cur = child[k];
                if (RB_WALK_RESUMES)
                    rb_path_take(&pos, d, k);
            } else {
                walking = rb_wpop(w, nodes, mode, tree, s, &st, &pos,
                                  &cur);
            }
        }
        if (!hits)
            break;
        /* Box loop: the hit boxes of node `leaf`. */
        if (rb_take_leaves(mode, tree, hits, leaf, words, ev, xv, s, list,
                           cap, sv, sw, take_shapes))
            return;
    }
}

/* The full answer of the box a nearest walk found (s->found): its slot's
 * bounds are its flushed corners, rb_slab_full's faces and exit. */
static inline void rb_walk_box_answer(const rb_wray *w,
                                      __global const float *nodes,
                                      const rb_walk *s, rb_hit *h)
{
    __global const float *n = nodes + (size_t)s->best_node * RB_NODE_WORDS;
    float lo[3], hi[3];
    for (int a = 0; a < 3; a++) {
        lo[a] = n[RB_NODE_LO + 8 * a + s->best_slot];
        hi[a] = n[RB_NODE_HI + 8 * a + s->best_slot];
    }
    rb_slab_full(&w->r, lo, hi, h);
    h->box = (int)s->best_i;
}

static inline rb_walk rb_walk_init(void)
{
    rb_walk s;
    s.best_t = INFINITY;
    s.best_i = 0xffffffffu;
    s.best_j = 0xffffffffu;
    s.best_node = 0;
    s.best_slot = 0;
    s.found = 0;
    s.count = 0;
    s.stored = 0;
    return s;
}

/* The ray item g walks: order[g] when the host sent an order (rays whose
 * walks share nodes on neighbouring items), else g. Ordered rays are
 * scattered in memory: a CPU device runs a group's items one after
 * another, so the ray RB_AHEAD items on (of `words` floats a ray) is
 * fetched now (measured on PoCL: any 1.4x faster at 100K boxes). */
#define RB_AHEAD 8
static inline size_t rb_walk_ray(__global const uint *order, size_t g,
                                 uint n_rays, __global const float *rays,
                                 uint words)
{
    if (!order)
        return g;
    if (g + RB_AHEAD < n_rays)
        RB_PREFETCH(rays + (size_t)order[g + RB_AHEAD] * words);
    return order[g];
}

/* The ray of this item (rb_walk_ray), checked (R6) as in brute.cl. Items
 * past the last ray return (no barriers here). */
#define RB_BVH_PROLOGUE()                                                      \
    size_t g = get_global_id(0);                                               \
    if (g >= n_rays)                                                           \
        return;                                                                \
    size_t i = rb_walk_ray(order, g, n_rays, rays, dims == 3 ? 8 : 6);         \
    if (!rb_ray_ok(rays, dims, i))                                             \
        rb_note_bad(bad, (ray_base + (uint)i) * 2);                            \
    rb_wray w = rb_wray_load(rays, dims, i);                                   \
    rb_walk s = rb_walk_init()

/* The four walks, one template (the mode a compile-time constant), with
 * the arguments of exact.h's enum rb_walk_arg. */
static inline void rb_bvh_kernel(const int mode, __global const float *rays,
                                 uint dims, uint n_rays,
                                 __global const float *nodes,
                                 __global const uint *order, uint max_hits,
                                 __global rb_hit *hits,
                                 __global uchar *any_hit,
                                 __global uint *counts,
                                 __global rb_list_hit *lists, uint ray_base,
                                 __global uint *bad)
{
    RB_BVH_PROLOGUE();
    if (mode == RB_WALK_NEAREST) {
        rb_walk_tree(&w, nodes, RB_WALK_NEAREST, &s, 0, 0, RB_TREE_BOXES, 0, 0,
                     0);
        rb_hit h;
        if (s.found)
            rb_walk_box_answer(&w, nodes, &s, &h);
        else
            rb_hit_miss(&h);
        hits[i] = h;
    } else if (mode == RB_WALK_ANY) {
        rb_walk_tree(&w, nodes, RB_WALK_ANY, &s, 0, 0, RB_TREE_BOXES, 0, 0,
                     0);
        any_hit[i] = (uchar)s.found;
    } else if (mode == RB_WALK_COUNT) {
        rb_walk_tree(&w, nodes, RB_WALK_COUNT, &s, 0, 0, RB_TREE_BOXES, 0, 0,
                     0);
        counts[i] = s.count;
    } else {
        rb_walk_tree(&w, nodes, RB_WALK_ALL, &s, lists + i * max_hits,
                     max_hits, RB_TREE_BOXES, 0, 0, 0);
        counts[i] = s.count;
    }
}

#define RB_BVH_KERNEL(name, mode)                                              \
    __kernel void name(__global const float *rays, uint dims, uint n_rays,     \
                       __global const float *nodes,                            \
                       __global const uint *order, uint max_hits,              \
                       __global rb_hit *hits, __global uchar *any_hit,         \
                       __global uint *counts, __global rb_list_hit *lists,     \
                       uint ray_base, __global uint *bad)                      \
    {                                                                          \
        rb_bvh_kernel(mode, rays, dims, n_rays, nodes, order, max_hits, hits,  \
                      any_hit, counts, lists, ray_base, bad);                  \
    }

RB_BVH_KERNEL(rb_bvh_nearest, RB_WALK_NEAREST)
RB_BVH_KERNEL(rb_bvh_any, RB_WALK_ANY)
RB_BVH_KERNEL(rb_bvh_count, RB_WALK_COUNT)
RB_BVH_KERNEL(rb_bvh_all, RB_WALK_ALL)

/* ---- Ray streams (the wide variant: CPU devices)
 *
 * count, any and nearest over a box tree, a task's rays together, as the
 * CPU's own streams (host/bvh/bvh_stream_avx2.c, which explains the
 * method, the arena's bound and why nearest's answers are its walk's): a
 * node is popped with the list of the task's rays that entered it,
 * tested against each of them with the node's rows in registers
 * (rb_node8_span and rb_node8_pass, the one-ray test's own operations,
 * each axis's near and far row chosen by the sign of inv as rb_wray_of
 * does, against the ray's limit: tmax, or nearest's best t below it),
 * each ray counts the boxes it hits there (any: a hit ends the ray,
 * which later lists then skip; nearest: the least (t_enter, index) is
 * kept), and each inner child gets the list of the rays that pass its
 * slot; the child with the most rays is walked first. So every ray of
 * any and count enters exactly the subtrees and hits exactly the boxes
 * that its own walk does, nearest finds the same least hit, and the
 * answers are the walk's.
 *
 * A task is task_rays rays (positions in the chunk's ray order); a
 * launch of a few work-items answers all the chunk's tasks, each item
 * taking the next task from the counter at the arena's start until none
 * is left. Item t's arena, task_words words at RB_STREAM_ARENA_HEAD +
 * t * task_words: the prepared rays (rb_ray_prep, 8 words each), their
 * answers (three arrays of task_rays words: any's or count's in the
 * first; nearest's best t, its index and its node * 8 + slot), the
 * stack of pending nodes (node, list offset, list length),
 * then the lists. The host sizes the lists by rb_bvh_stream_words for
 * the tree's depth; should they run short all the same, the task's rays
 * walk one by one (rb_walk_tree). Kernel arguments: exact.h's enum
 * rb_stream_arg (a mode's unused output is null). */
#ifdef RB_WIDE
#define RB_STREAM_STACK RB_WALK_NEED
/* how many rays ahead a task's loads fetch their records */
#define RB_STREAM_FETCH_AHEAD 16

__constant rb_u64 rb_pack_lut[256] = {RB_PACK_LUT};

#if defined(__AVX2__) && defined(__clang__)
/* clang's vpermd, which PoCL accepts on an AVX2 host: its `shuffle` with
 * a mask known only at run time moves the elements one by one. */
typedef int rb_v8si __attribute__((vector_size(32)));
#define RB_PERMUTE8(v, order)                                                  \
    __builtin_astype(                                                          \
        __builtin_ia32_permvarsi256(__builtin_astype(v, rb_v8si),              \
                                    __builtin_astype(order, rb_v8si)),         \
        uint8)
#else
#define RB_PERMUTE8(v, order) shuffle(v, order)
#endif

/* Packs the rays of list[0, cnt) whose mask byte has bit `slot` to dst,
 * eight at a time, in list order (the host's pack_slot). Reads list and
 * mk up to the next multiple of eight (mk zero there) and writes up to
 * seven words past the last ray it keeps. */
static inline void rb_stream_pack(__global const uint *list,
                                  __global const uchar *mk, uint cnt,
                                  uint slot, __global uint *dst)
{
    uint w = 0;
    for (uint q = 0; q < cnt; q += 8) {
        /* the eight bytes' bit `slot` to bits 0..7: each byte's bit 0
         * times 0x0102040810204080 lands in the top byte, byte i at bit
         * 56 + i (no two products meet, so nothing carries) */
        ulong x = (as_ulong(vload8(0, mk + q)) >> slot) & 0x0101010101010101UL;
        uint bits = (uint)((x * 0x0102040810204080UL) >> 56);
        uint8 order = convert_uint8(as_uchar8(rb_pack_lut[bits]));
        vstore8(RB_PERMUTE8(vload8(0, list + q), order), 0, dst + w);
        w += popcount(bits);
    }
}

/* 0 when every ray of the task has its answer in state (count: its
 * count; any: 1 for a hit; nearest: state[r], state[n + r] and
 * state[2n + r] the best t's bits, index and node * 8 + slot, 0xffffffff
 * for none); -1 when the lists ran short (the answers are then
 * partial). */
static inline int rb_stream_walk(const int mode, __global const float *nodes,
                                 uint n, __global const rb_ray_prep *prep,
                                 __global uint *state, __global uint *stk,
                                 __global uint *lists, size_t list_words)
{
    __global const uint *words = (__global const uint *)nodes;
    for (uint q = 0; q < n; q++)
        lists[q] = q;
    uint sp = 1;
    stk[0] = 0;
    stk[1] = 0;
    stk[2] = n;
    while (sp) {
        sp--;
        uint node = stk[3 * sp], off = stk[3 * sp + 1], cnt = stk[3 * sp + 2];
        size_t top = (size_t)off + cnt;
        if (top + (size_t)2 * RB_BVH_WIDTH * ((size_t)cnt + 1) > list_words)
            return -1;
        __global const float *nd = nodes + (size_t)node * RB_NODE_WORDS;
        __global const uint *child = words + (size_t)node * RB_NODE_WORDS +
                                     RB_NODE_CHILD;
        uint boxes = words[(size_t)node * RB_NODE_WORDS + RB_NODE_BOXES];
        /* The inner slots (an empty slot's child is 0, the root): only
         * their lists are written. */
        uint inner_slots =
            rb_mask8(as_int8(vload8(0, child) != (uint8)(0))) & ~boxes & 0xffu;
        float8 lo[3], hi[3];
        #pragma unroll
        for (int a = 0; a < 3; a++) {
            lo[a] = vload8(0, nd + RB_NODE_LO + 8 * a);
            hi[a] = vload8(0, nd + RB_NODE_HI + 8 * a);
        }
        __global const uint *list = lists + off;
        /* Each ray's mask of passed slots, above where the children's
         * lists and their packs' spill can reach (as the host's). */
        __global uchar *mk =
            (__global uchar *)(lists + top +
                               (size_t)RB_BVH_WIDTH * ((size_t)cnt + 1));
        for (uint q = 0; q < cnt; q++) {
            uint r = list[q];
            mk[q] = 0;
            if (mode == RB_WALK_ANY && state[r])
                continue; /* a box was hit under another child */
            rb_ray_prep p = prep[r];
            float8 near[3], far[3], e, x;
            /* The rows by a select on inv's sign bit: a branch on it
             * (what LLVM made of `neg ? hi : lo`) mispredicted for rays
             * in input order, and the stream ran at half the rate of
             * the one-ray walk over 16K boxes. */
            #pragma unroll
            for (int a = 0; a < 3; a++) {
                int8 neg = (int8)(as_int(p.inv[a]) >> 31);
                near[a] = select(lo[a], hi[a], neg);
                far[a] = select(hi[a], lo[a], neg);
            }
            rb_node8_span(near, far, &p, &e, &x);
            float limit = p.tmax;
            if (mode == RB_WALK_NEAREST && as_float(state[r]) < limit)
                limit = as_float(state[r]);
            uint m = rb_node8_pass(e, x, limit);
            if (mode == RB_WALK_ANY && (m & boxes)) {
                state[r] = 1;
                continue;
            }
            if (mode == RB_WALK_NEAREST && (m & boxes)) {
                float ev[8];
                vstore8(e, 0, ev);
                for (uint t = m & boxes; t; t &= t - 1) {
                    uint k = rb_ctz(t);
                    if (rb_nearer(ev[k], child[k], as_float(state[r]),
                                  state[n + r])) {
                        state[r] = as_uint(ev[k]);
                        state[n + r] = child[k];
                        state[2 * n + r] = node * RB_BVH_WIDTH + k;
                    }
                }
            }
            if (mode == RB_WALK_COUNT)
                state[r] += popcount(m & boxes);
            mk[q] = (uchar)m;
        }
        vstore8((uchar8)0, 0, mk + cnt);
        /* Each inner slot's rays, counted from the masks eight at a time
         * (as the host's count_slot). */
        uint c[RB_BVH_WIDTH] = {0, 0, 0, 0, 0, 0, 0, 0};
        uint entered = 0;
        for (uint t = inner_slots; t; t &= t - 1) {
            uint k = rb_ctz(t), n_k = 0;
            for (uint q = 0; q < cnt; q += 8)
                n_k += popcount((as_ulong(vload8(0, mk + q)) >> k) &
                                0x0101010101010101UL);
            c[k] = n_k;
            entered |= (uint)(n_k != 0) << k;
        }
        /* The fewest rays pushed first (ties: the lowest slot), so that
         * the most are popped first: each child's place is its rank (as
         * the host's: a selection sort's compares mispredict). */
        uint ordered[RB_BVH_WIDTH];
        uint8 cv = vload8(0, c);
        for (uint t = entered; t; t &= t - 1) {
            uint k = rb_ctz(t);
            uint fewer = rb_mask8(as_int8(cv < (uint8)(c[k])));
            uint equal = rb_mask8(as_int8(cv == (uint8)(c[k])));
            uint before = (fewer | (equal & ((1u << k) - 1u))) & entered;
            ordered[popcount(before)] = k;
        }
        size_t at = top;
        for (uint i = 0, n_entered = popcount(entered); i < n_entered; i++) {
            uint k = ordered[i];
            /* In address order: a pack's spill falls where the next
             * list goes, or below the masks. */
            rb_stream_pack(list, mk, cnt, k, lists + at);
            rb_prefetch_node(nodes + (size_t)child[k] * RB_NODE_WORDS);
            stk[3 * sp] = child[k];
            stk[3 * sp + 1] = (uint)at;
            stk[3 * sp + 2] = c[k];
            sp++;
            at += c[k];
        }
    }
    return 0;
}

static inline void rb_bvh_stream_kernel(
    const int mode, __global const float *rays, uint dims, uint n_rays,
    __global const float *nodes, __global const uint *order,
    __global uchar *any_hit, __global uint *counts, uint ray_base,
    __global uint *bad, __global uint *arena, uint task_rays,
    uint task_words, __global rb_hit *hits)
{
    __global uint *base = arena + RB_STREAM_ARENA_HEAD +
                          get_global_id(0) * (size_t)task_words;
    __global rb_ray_prep *prep = (__global rb_ray_prep *)base;
    __global uint *state = base + 8 * (size_t)task_rays;
    __global uint *stk = state + 3 * (size_t)task_rays;
    __global uint *lists = stk + 3 * RB_STREAM_STACK;
    size_t list_words =
        task_words -
        RB_STREAM_HEAD_WORDS((size_t)task_rays, (size_t)RB_STREAM_STACK);
    /* Each item takes the next task until none is left: tasks differ in
     * cost (their rays cross different parts of the scene), and a launch
     * of as many tasks as items left threads idle at its end. */
    for (;;) {
        size_t b = (size_t)atomic_inc(arena) * task_rays;
        if (b >= n_rays)
            return;
        uint n = (uint)min((size_t)task_rays, (size_t)n_rays - b);
        for (uint q = 0; q < n; q++) {
            size_t i = order ? order[b + q] : b + q;
            /* Sorted rays are read scattered over the batch: fetch
             * ahead (as the CPU backend's stream_rays), or every load
             * waits. */
            if (order && q + RB_STREAM_FETCH_AHEAD < n)
                RB_PREFETCH(rays +
                            (size_t)order[b + q + RB_STREAM_FETCH_AHEAD] *
                                rb_ray_floats(dims));
            if (!rb_ray_ok(rays, dims, i))
                rb_note_bad(bad, (ray_base + (uint)i) * 2);
            prep[q] = rb_load_ray(rays, dims, i);
            state[q] = mode == RB_WALK_NEAREST ? as_uint(INFINITY) : 0u;
            state[n + q] = 0xffffffffu;
            state[2 * n + q] = 0xffffffffu;
        }
        if (rb_stream_walk(mode, nodes, n, prep, state, stk, lists,
                           list_words)) {
            for (uint q = 0; q < n; q++) {
                rb_wray w = rb_wray_of(prep[q]);
                rb_walk s = rb_walk_init();
                rb_walk_tree(&w, nodes, mode, &s, 0, 0, RB_TREE_BOXES, 0, 0,
                             0);
                if (mode == RB_WALK_NEAREST) {
                    state[q] = as_uint(s.best_t);
                    state[n + q] = s.best_i;
                    state[2 * n + q] = s.found ? s.best_node * RB_BVH_WIDTH +
                                                     s.best_slot
                                               : 0xffffffffu;
                } else {
                    state[q] = mode == RB_WALK_ANY ? (uint)s.found : s.count;
                }
            }
        }
        for (uint q = 0; q < n; q++) {
            size_t i = order ? order[b + q] : b + q;
            if (mode == RB_WALK_ANY) {
                any_hit[i] = (uchar)state[q];
            } else if (mode == RB_WALK_NEAREST) {
                /* the winner's full answer from its slot, as the one-ray
                 * kernel gives it (rb_walk_box_answer) */
                rb_hit h;
                uint slot = state[2 * n + q];
                if (slot == 0xffffffffu) {
                    rb_hit_miss(&h);
                } else {
                    rb_wray w = rb_wray_of(prep[q]);
                    rb_walk s = rb_walk_init();
                    s.best_i = state[n + q];
                    s.best_node = slot / RB_BVH_WIDTH;
                    s.best_slot = slot % RB_BVH_WIDTH;
                    rb_walk_box_answer(&w, nodes, &s, &h);
                }
                hits[i] = h;
            } else {
                counts[i] = state[q];
            }
        }
    }
}

#define RB_STREAM_KERNEL(name, mode)                                           \
    __kernel void name(__global const float *rays, uint dims, uint n_rays,     \
                       __global const float *nodes,                            \
                       __global const uint *order, __global uchar *any_hit,    \
                       __global uint *counts, uint ray_base,                   \
                       __global uint *bad, __global uint *arena,               \
                       uint task_rays, uint task_words,                        \
                       __global rb_hit *hits)                                  \
    {                                                                          \
        rb_bvh_stream_kernel(mode, rays, dims, n_rays, nodes, order, any_hit,  \
                             counts, ray_base, bad, arena, task_rays,          \
                             task_words, hits);                                \
    }

RB_STREAM_KERNEL(rb_bvh_stream_any, RB_WALK_ANY)
RB_STREAM_KERNEL(rb_bvh_stream_count, RB_WALK_COUNT)
RB_STREAM_KERNEL(rb_bvh_stream_nearest, RB_WALK_NEAREST)
#endif /* RB_WIDE */
