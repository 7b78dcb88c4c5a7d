/*
 * bvh_stream_avx2.c - a task's rays walk a tree together, for `any`,
 * `count` and `nearest`: each node is read once for all the task's rays
 * that reach it, not once per ray. Box trees, and shape and joint trees
 * (bvh_shapes.c) for the rays their widening covers, with the slot rules
 * of bvh_walk.inc.
 *
 * Why: a ray's walk reads ~10 nodes of 256 bytes, most of them missing
 * the L2 cache once the tree outgrows it, and the one-ray walk
 * (bvh_walk.inc) waits on them: a ray has few children to prefetch. Here
 * a node is popped with the list of the task's rays that entered it,
 * tested against each of them from registers, and each child gets the
 * list of the rays that enter it (breadth within a node, depth first
 * over the tree: Barringer and Akenine-Moller 2014, "Dynamic ray stream
 * traversal"). docs/benchmarks.md, "Ray streams", has the figures.
 *
 * `nearest` keeps each ray's best hit so far (rb_joint_best), and a ray's
 * slots pass against its own limit, min(best t, tmax), as in the one-ray
 * walk. It loses that walk's near-to-far order, so a ray may take a far
 * hit before a near one; measured, sharing the node reads pays more:
 * 1.25-1.5x the one-ray walk's rate over box trees of 300 to 1M boxes,
 * ~1.8x over shape trees (docs/benchmarks.md, "`nearest` as a ray
 * stream").
 *
 * Shape candidates wait: a ray's candidates are not tested when their
 * slots pass but added to a batch (eight lanes at a time, with no branch
 * on whether there are any); when the batch holds TESTS_WAITING_MAX its
 * records are fetched and the batch filled before it is tested, while
 * the stream goes on to other nodes (the rest at the end). A record's
 * first load used to miss (half the exact tests' time in perf); now the
 * fetch has the time of a batch's node visits. The cost: a ray whose
 * waiting candidate is a hit walks on until its batch is tested (`any`
 * skips it from then on; `nearest` skips a waiting test whose slot it
 * entered past its best t since). Measured: obb and xbox `any` 1.3x the
 * rate, spheres 1.05x; the mixed scene's `nearest` cost against the box
 * scene's ~1.56x against ~1.65x with a branch a candidate and no second
 * batch (docs/benchmarks-shapes.md).
 *
 * Exactness: a slot's distances are those of test_node in
 * bvh_walk_avx2.c, operation for operation (each axis's near and far
 * plane chosen by the sign bit of the ray's inverse as there, here by a
 * blend instead of row offsets), and a slot passes by the same compare
 * with the same limit (padded where that walk pads). For `any` and
 * `count` the limit is tmax, so a ray enters exactly the subtrees, hits
 * exactly the boxes and tests exactly the shape candidates (with
 * rb_shape_hit, as there) that its own walk does (`any` may test more of
 * them, and enter more subtrees, while a hit waits; `count` tests each
 * once, later), and the answers are the same. For `nearest` a slot is
 * dropped only when it is entered strictly past the ray's best t so far,
 * which no element inside can beat (the one-ray walk's rule: a box's
 * entry is its slot's, a shape's exact entry is never before its
 * widened slot's), and hits compare by (t_enter, id) as there; so the
 * least (t_enter, id) is found whatever the order, and its answer comes
 * from its slot or record after the walk, as the one-ray walk's does.
 * Compiled with -mavx2 only, no FMA, -ffp-contract=off.
 *
 * Memory: the rays' indexes live in one arena used as a stack. A popped
 * node's list ends at the arena's top. Each of its rays' mask of passed
 * slots is kept (a byte a ray, above the room the children's lists may
 * take), each inner slot's rays are counted from the masks, and then
 * packed into their child's list at the top, eight rays at a time (their
 * masks' bits for the slot pick the lanes, a table gives the permutation
 * that moves those lanes to the front: no branch and no store for a ray
 * a slot it does not enter). The children's lists lie in order of their
 * length, the child with the most rays last, so that it is popped first
 * (its rays are the likeliest to end `any` early; measured better than
 * slot order or the rays' mean entry distance). A level thus adds at most
 * eight times its list, which bounds the arena (rb_bvh_stream_words).
 */
#ifdef RB_HAVE_AVX2
#include <float.h>
#include <immintrin.h>
#include <string.h>

#include "bvh.h"
#include "bvh_node_avx2.h"

typedef struct pending {
    uint32_t node, off, cnt; /* the node; its rays' list in the arena */
} pending;

/* kernels/exact.h's table: the lanes of each 8-bit mask, packed. */
static const rb_u64 compress_lut[256] = {RB_PACK_LUT};

/* The number of mask bytes mk[0, cnt) with bit `slot` set; reads mk up to
 * the next multiple of 32 (zero there). */
static inline uint32_t count_slot(const uint8_t *mk, uint32_t cnt,
                                  unsigned slot)
{
    const __m128i shift = _mm_cvtsi32_si128(7 - (int)slot); /* as below */
    uint32_t n = 0;
    for (uint32_t q = 0; q < cnt; q += 32) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(mk + q));
        n += (uint32_t)__builtin_popcount(
            (unsigned)_mm256_movemask_epi8(_mm256_sll_epi16(b, shift)));
    }
    return n;
}

/* Packs the rays of list[0, cnt) whose mask byte has bit `slot` into dst,
 * in list order; returns how many. Reads list and mk up to the next
 * multiple of eight (mk zero there, so those lanes are never kept) and
 * writes dst up to seven words past the last ray it keeps. */
static inline uint32_t pack_slot(const uint32_t *list, const uint8_t *mk,
                                 uint32_t cnt, unsigned slot, uint32_t *dst)
{
    /* Shifting each 16-bit lane left by 7 - slot takes bit `slot` of each
     * of its two bytes to that byte's top bit (the low byte's other bits
     * land below the high byte's top), where movemask reads it. */
    const __m128i shift = _mm_cvtsi32_si128(7 - (int)slot);
    uint32_t *w = dst;
    for (uint32_t q = 0; q < cnt; q += 8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(mk + q));
        unsigned bits = (unsigned)_mm_movemask_epi8(_mm_sll_epi16(b, shift));
        __m256i ids = _mm256_loadu_si256((const __m256i *)(list + q));
        __m256i order = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64((const __m128i *)&compress_lut[bits]));
        _mm256_storeu_si256((__m256i *)w,
                            _mm256_permutevar8x32_epi32(ids, order));
        w += __builtin_popcount(bits);
    }
    return (uint32_t)(w - dst);
}

/* The slots of a node (its planes lo, hi) that ray rp passes, as
 * test_node computes them with the same limit (tmax, or nearest's best t
 * below it; bvh_node_avx2.h, shared): unpadded (the box tree's compare,
 * and a joint tree's boxes') and, for shape and joint trees, padded in
 * *padded (the shape trees' slots). *e_out: the slots' entries. */
static inline unsigned pass_mask(const rb_ray_prep *rp, float limit,
                                 const __m256 lo[3], const __m256 hi[3],
                                 const int tree, unsigned *padded,
                                 __m256 *e_out)
{
    __m256 near[3], far[3], o[3], inv[3], e, x;
    for (int a = 0; a < 3; a++) {
        o[a] = _mm256_broadcast_ss(&rp->o[a]);
        inv[a] = _mm256_broadcast_ss(&rp->inv[a]);
        /* blendv takes its second operand where the mask's sign bit is
         * set: the hi plane is the near one when inv is negative. */
        near[a] = _mm256_blendv_ps(lo[a], hi[a], inv[a]);
        far[a] = _mm256_blendv_ps(hi[a], lo[a], inv[a]);
    }
    rb_node8_span(near, far, o, inv, _mm256_broadcast_ss(&rp->tmin), &e, &x);
    *e_out = e;
    /* test_node's cap: the limit (tmax, or nearest's best t below it), or
     * FLT_MAX for an infinite one (e finite) */
    __m256 cap = _mm256_min_ps(_mm256_set1_ps(limit), _mm256_set1_ps(FLT_MAX));
    unsigned pass = 0;
    if (tree != RB_TREE_SHAPES)
        pass = rb_node8_pass(e, x, cap);
    if (tree != RB_TREE_BOXES)
        *padded = rb_node8_padded(e, x, cap);
    return pass;
}

/* Candidates wait in batches of this many (16 and 64 measured the same). */
#define TESTS_WAITING_MAX 32

/* Shape candidates waiting for their exact tests, in arrays of their
 * own so that a ray's candidates at a node are written eight lanes at a
 * time: ray, shape index, and the slot's entry (nearest skips the test
 * when the ray's best t is below it). Room for a node's eight past the
 * batch's size. */
typedef struct test_batch {
    uint32_t ray[TESTS_WAITING_MAX + RB_BVH_WIDTH];
    uint32_t shape[TESTS_WAITING_MAX + RB_BVH_WIDTH];
    float e[TESTS_WAITING_MAX + RB_BVH_WIDTH];
} test_batch;

/* Adds ray r's candidates after the n waiting in b: the slots of mask
 * cand, whose shapes are the lanes of child and entries those of e;
 * returns the new count (a value, not a field of b: b's stores could
 * alias it, and it was reloaded after each). No branch on the mask:
 * whether a ray has a candidate at a leaf is as unpredictable as a hit. */
static inline unsigned add_tests(test_batch *b, unsigned n, uint32_t r,
                                 unsigned cand, __m256i child, __m256 e)
{
    __m256i order = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64((const __m128i *)&compress_lut[cand]));
    _mm256_storeu_si256((__m256i *)(b->ray + n), _mm256_set1_epi32((int)r));
    _mm256_storeu_si256((__m256i *)(b->shape + n),
                        _mm256_permutevar8x32_epi32(child, order));
    _mm256_storeu_ps(b->e + n, _mm256_permutevar8x32_ps(e, order));
    return n + (unsigned)__builtin_popcount(cand);
}

/* Starts fetching shape j's record in view v (an lbox spans two cache
 * lines). */
static inline void fetch_record(const rb_shape_view *v, rb_u32 j)
{
    if (j < v->n_lbox) {
        __builtin_prefetch(v->lbox + j);
        __builtin_prefetch((const char *)(v->lbox + j + 1) - 1);
    } else {
        __builtin_prefetch(v->ball + (j - v->n_lbox));
    }
}

/* Runs the n tests of batch b: `any` skips rays already hit. */
static inline void run_tests(const rb_bvh_stream *s, const test_batch *b,
                             unsigned n, const rb_mode mode)
{
    for (unsigned i = 0; i < n; i++) {
        uint32_t r = b->ray[i], j = b->shape[i];
        if (mode == RB_MODE_ANY && s->any[r])
            continue;
        if (mode == RB_MODE_NEAREST && b->e[i] > s->best[r].t)
            continue;
        if (mode == RB_MODE_NEAREST) {
            /* The full answer, kept when it wins: then only the rays
             * whose best is a box compute theirs after the walk (the
             * winners' tests again, their records fetched again, had
             * held 6% of a mixed scene's samples, nearest and any). */
            rb_hit h;
            h.box = -1;
            rb_shape_full(s->view, j, &s->raw[r], &h);
            if (!h.hit)
                continue;
            rb_joint_best *best = &s->best[r];
            rb_u32 id = rb_shape_id(s->view, j);
            if (rb_nearer(h.t_enter, id, best->t, best->id)) {
                *best = (rb_joint_best){h.t_enter, id, j, UINT32_MAX};
                s->shape_hits[r] = h;
            }
            continue;
        }
        float te, tx;
        if (!rb_shape_hit(s->view, j, &s->raw[r], &te, &tx))
            continue;
        if (mode == RB_MODE_ANY) {
            s->any[r] = 1;
        } else {
            s->count[r]++;
        }
    }
}

/* A full batch (*fill, n_fill tests): its records start on their way,
 * and the batch filled before it (*ready, *n_ready tests), whose records
 * have had the time of a batch's node visits to arrive, is tested; the
 * two trade places. */
static inline void batch_full(const rb_bvh_stream *s, test_batch **fill,
                              unsigned n_fill, test_batch **ready,
                              unsigned *n_ready, const rb_mode mode)
{
    test_batch *f = *fill;
    for (unsigned i = 0; i < n_fill; i++)
        fetch_record(s->view, f->shape[i]);
    run_tests(s, *ready, *n_ready, mode);
    *fill = *ready;
    *ready = f;
    *n_ready = n_fill;
}

static inline __attribute__((always_inline)) int
stream_walk(const rb_bvh *bvh, rb_bvh_stream *s, const rb_mode mode,
            const int tree)
{
    if (!bvh->n_nodes || !s->n)
        return 0;
    if (s->words < (size_t)s->n * (2 * RB_BVH_WIDTH + 1))
        return -1;
    const rb_bvh_node *nodes = bvh->nodes;
    uint32_t *arena = s->arena;
    /* A pop leaves at most 7 siblings a level above it and pushes at
     * most 8 children: at most 7 * depth + 1 entries, RB_BVH_STACK. */
    pending stack[RB_BVH_STACK];
    int sp = 0;
    for (uint32_t i = 0; i < s->n; i++)
        arena[i] = i;
    stack[sp++] = (pending){0, 0, s->n};
    uint32_t work = 0;
    test_batch batches[2];
    test_batch *fill = &batches[0], *ready = &batches[1];
    unsigned n_fill = 0, n_ready = 0;
    while (sp) {
        pending p = stack[--sp];
        work += p.cnt;
        if (work >= RB_BVH_STREAM_POLL) {
            work = 0;
            if (s->stop && s->stop(s->stop_user))
                return 1;
        }
        const rb_bvh_node *nd = &nodes[p.node];
        uint32_t top = p.off + p.cnt;
        const uint32_t *list = arena + p.off;
        /* Never with a tree of the depth it was sized for: then the
         * caller walks the task's rays one by one. */
        if (top + (size_t)2 * RB_BVH_WIDTH * (p.cnt + 1) > s->words)
            return -1;
        /* The children's lists take at most RB_BVH_WIDTH * p.cnt words
         * from the top, and their packs write up to 7 more; the rays'
         * masks lie above those (p.cnt + 32 bytes in RB_BVH_WIDTH *
         * (p.cnt + 1) words). */
        uint8_t *mk =
            (uint8_t *)(arena + top + RB_BVH_WIDTH * ((size_t)p.cnt + 1));
        /* The inner slots (an empty slot's child is 0, the root, never
         * a child): only their lists are written, and a node of boxes
         * only writes none. */
        __m256i child = _mm256_loadu_si256((const __m256i *)nd->child);
        __m256i zero_child =
            _mm256_cmpeq_epi32(child, _mm256_setzero_si256());
        unsigned inner_slots =
            ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(zero_child)) &
            ~nd->boxes & 0xffu;
        __m256 lo[3], hi[3];
        for (int a = 0; a < 3; a++) {
            lo[a] = _mm256_load_ps(nd->lo[a]);
            hi[a] = _mm256_load_ps(nd->hi[a]);
        }
        /* Leaves: a box tree's are boxes; a shape tree's are shapes
         * (a joint tree's boxes among them skipped: the box pass answers
         * them); a joint tree's exact ones are boxes, the rest shapes. */
        unsigned boxes = tree == RB_TREE_BOXES    ? nd->boxes
                         : tree == RB_TREE_JOINT ? nd->exact
                                                  : 0;
        unsigned shapes = tree == RB_TREE_BOXES ? 0 : nd->boxes & ~nd->exact;
        for (uint32_t q = 0; q < p.cnt; q++) {
            uint32_t r = list[q];
            mk[q] = 0;
            if (mode == RB_MODE_ANY && s->any[r])
                continue; /* a leaf was hit under another child */
            unsigned padded = 0;
            const rb_ray_prep *rp = &s->prep[r];
            float limit = rp->tmax;
            if (mode == RB_MODE_NEAREST && s->best[r].t < limit)
                limit = s->best[r].t;
            __m256 ev;
            unsigned m = pass_mask(rp, limit, lo, hi, tree, &padded, &ev);
            unsigned hit = m & boxes;
            if (mode == RB_MODE_NEAREST) {
                float e[RB_BVH_WIDTH];
                _mm256_storeu_ps(e, ev);
                rb_joint_best *b = &s->best[r];
                for (unsigned t = hit; t; t &= t - 1) {
                    unsigned k = (unsigned)__builtin_ctz(t);
                    if (rb_nearer(e[k], nd->child[k], b->t, b->id))
                        *b = (rb_joint_best){
                            e[k], nd->child[k], UINT32_MAX,
                            p.node * RB_BVH_WIDTH + k};
                }
            }
            if (mode == RB_MODE_ANY && hit) {
                s->any[r] = 1;
                continue;
            }
            if (mode == RB_MODE_COUNT)
                s->count[r] += (uint32_t)__builtin_popcount(hit);
            if (tree != RB_TREE_BOXES) {
                /* Candidates get the exact test of every other path,
                 * later; inner slots the padded compare. */
                if (shapes) {
                    n_fill =
                        add_tests(fill, n_fill, r, padded & shapes, child, ev);
                    if (n_fill >= TESTS_WAITING_MAX) {
                        batch_full(s, &fill, n_fill, &ready, &n_ready, mode);
                        n_fill = 0;
                    }
                }
                m = padded;
            }
            mk[q] = (uint8_t)m;
        }
        memset(mk + p.cnt, 0, 32);
        uint32_t c[RB_BVH_WIDTH] = {0};
        unsigned entered = 0; /* the inner slots some ray enters */
        for (unsigned t = inner_slots; t; t &= t - 1) {
            unsigned k = (unsigned)__builtin_ctz(t);
            c[k] = count_slot(mk, p.cnt, k);
            entered |= (c[k] != 0) << k;
        }
        /* The fewest rays first (ties: the lowest slot), so that the
         * most are popped first: each child's place is its rank, the
         * number of entered slots before it in that order (counted, not
         * sorted: a selection sort's compares mispredicted). */
        unsigned ordered[RB_BVH_WIDTH];
        unsigned n_entered = (unsigned)__builtin_popcount(entered);
        __m256i cv = _mm256_loadu_si256((const __m256i *)c);
        for (unsigned t = entered; t; t &= t - 1) {
            unsigned k = (unsigned)__builtin_ctz(t);
            __m256i ck = _mm256_set1_epi32((int)c[k]);
            /* counts are below 2^31: signed compares order them */
            unsigned fewer = (unsigned)_mm256_movemask_ps(
                _mm256_castsi256_ps(_mm256_cmpgt_epi32(ck, cv)));
            unsigned equal = (unsigned)_mm256_movemask_ps(
                _mm256_castsi256_ps(_mm256_cmpeq_epi32(ck, cv)));
            unsigned before = (fewer | (equal & ((1u << k) - 1u))) & entered;
            ordered[__builtin_popcount(before)] = k;
        }
        uint32_t at = top;
        for (unsigned i = 0; i < n_entered; i++) {
            unsigned k = ordered[i];
            /* In address order: a pack's writes past its rays fall
             * where the next list will be packed, or below the masks. */
            pack_slot(list, mk, p.cnt, k, arena + at);
            /* The last one pushed is the next node popped: fetch each
             * child as it is pushed, so that its first read does not
             * wait (it did, ~10% of the stream's samples in perf). */
            rb_bvh_fetch_node(nodes, nd->child[k]);
            stack[sp++] = (pending){nd->child[k], at, c[k]};
            at += c[k];
        }
    }
    if (tree != RB_TREE_BOXES) {
        run_tests(s, ready, n_ready, mode);
        run_tests(s, fill, n_fill, mode);
    }
    return 0;
}

int rb_bvh_stream_avx2(const rb_bvh *bvh, rb_bvh_stream *s, rb_mode mode)
{
#define TREES(m)                                                               \
    switch (s->tree) {                                                         \
    case RB_TREE_BOXES:                                                        \
        return stream_walk(bvh, s, m, RB_TREE_BOXES);                          \
    case RB_TREE_SHAPES:                                                       \
        return stream_walk(bvh, s, m, RB_TREE_SHAPES);                         \
    default:                                                                   \
        return stream_walk(bvh, s, m, RB_TREE_JOINT);                          \
    }
    switch (mode) {
    case RB_MODE_ANY:
        TREES(RB_MODE_ANY)
    case RB_MODE_COUNT:
        TREES(RB_MODE_COUNT)
    case RB_MODE_NEAREST:
        TREES(RB_MODE_NEAREST)
    default:
        return -1; /* not streamed (rb_bvh_streams says which) */
    }
#undef TREES
}
#else
/* Keeps the translation unit non-empty on other processors. */
typedef int rb_bvh_stream_avx2_unused;
#endif
