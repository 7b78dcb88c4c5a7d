/*
 * bvh_morton.c - the fast build (RB_HIERARCHY_BUILD_FAST): boxes sorted
 * along a Morton curve through their centres, ranges split where the
 * highest bit of the curve's code changes (Lauterbach et al. 2009, "Fast
 * BVH construction on GPUs"), into the same binary tree that binned SAH
 * makes (bvh_build.c), which bvh_collapse.c then turns into wide nodes.
 *
 * It reads every box a few times instead of once per level - the box
 * set's six arrays twice (the centres' bounds, then the prims and their
 * keys), the keys in the sort's passes, the prims in the gather and the
 * leaves - and splits without looking at areas: a build 1.8-5.5x
 * faster than the SAH build (1M and 100K boxes; that one is parallel
 * too), a tree whose walks are a few percent slower (docs/benchmarks.md,
 * "Hierarchies", has both). Bounds are exact unions of box corners, as
 * in the SAH build, so the walks stay exact.
 * Everything runs on the pool: keys and the gather in slices, the sort as
 * rb_ray_order's, and the tree as subtrees below the top few splits, each
 * numbering its binary nodes in a range of its own (a shared atomic
 * counter made the two threads' splits fight over one cache line: a
 * quarter of the build's time at 100K boxes). Neither the tree nor its
 * numbering depends on the thread count.
 * Codes have 7 bits per axis up to rb_bvh_morton_fine_min boxes (2M),
 * about one cell a box at that size: the sort then takes two passes, not
 * three (5% of a 1M build; the trees' SAH costs at 100K and 1M were the
 * same to the digit shown). Beyond, 10 bits. Depth: the code bits, then
 * halving by count among equal codes, stays within RB_BVH_MAX_DEPTH.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "../cpu/ray_order.h"
#include "../internal.h"
#include "../threadpool.h"
#include "bvh.h"

#define COARSE_BITS 7 /* a code's bits per axis, up to the fine minimum */
#define FINE_BITS 10  /* beyond */
#define SLICE 16384     /* prims per task of the loads and the gather */
#define MAX_SLICES 4096 /* tasks at most: slices grow beyond 64M prims */
#define SUBTREE_MIN 8192 /* ranges split at the top until below this */
#define MAX_SUBTREES 256
#define GATHER_AHEAD 16 /* prims the gather fetches ahead */

size_t rb_bvh_morton_fine_min = (size_t)2 << 20;

static uint32_t cell(float c, float base, float scale, float top)
{
    float x = (c - base) * scale;
    x = x < top ? x : top;
    x = x > 0.0f ? x : 0.0f;
    return (uint32_t)x;
}

typedef struct morton {
    const rb_boxset *boxes;
    size_t slice;     /* prims per task of the loads and the gather */
    float (*cbounds)[2][4]; /* per slice: centre lo, hi (lane 3 unused) */
    rb_bvh_prim *in;  /* original order; pad gets the code */
    rb_bvh_prim *out; /* key order: the leaves index it */
    size_t n;
    unsigned bits;       /* a code's bits per axis */
    float top;           /* the last cell, 2^bits - 1 */
    float base[3], scale[3];
    uint64_t *keys;   /* 2n, in out until the gather */
    uint32_t *order;  /* n */
    uint32_t *codes;  /* n, the codes in key order, over order as the
                       * gather reads it: split_at's searches stay in
                       * cache */
    rb_bvh2_node *tmp;
    size_t n_sub;
    struct {
        size_t at;   /* the subtree's root */
        size_t next; /* its first free node: 2 (e - b) - 2 are its own */
        uint32_t b, e;
    } sub[MAX_SUBTREES];
} morton;

static void run(struct rb_pool *pool, const morton *m, size_t n_tasks,
                rb_task_fn fn, void *arg)
{
    if (m->n >= RB_BVH_MORTON_PARALLEL_MIN) {
        rb_pool_run(pool, n_tasks, fn, arg);
        return;
    }
    for (size_t t = 0; t < n_tasks; t++)
        fn(arg, t, 0);
}

static void slice(const morton *m, size_t t, size_t *b, size_t *e)
{
    *b = t * m->slice;
    *e = *b + m->slice < m->n ? *b + m->slice : m->n;
}

/* The Morton code of a centre. */
static inline uint32_t code_of(const morton *m, const float c[3])
{
    uint32_t code = 0;
    for (int a = 0; a < 3; a++)
        code |= rb_spread3(cell(c[a], m->base[a], m->scale[a], m->top))
                << (2 - a);
    return code;
}

/* The bounds of the boxes' centres in slice t, read from the box set's
 * six arrays. */
static void centre_task(void *arg, size_t t, unsigned worker)
{
    morton *m = arg;
    (void)worker;
    size_t b, e;
    slice(m, t, &b, &e);
    float *lo = m->cbounds[t][0], *hi = m->cbounds[t][1];
    for (int a = 0; a < 3; a++) {
        const float *l = rb_boxset_lo(m->boxes, a);
        const float *h = rb_boxset_hi(m->boxes, a);
        size_t i = b;
        float cl = INFINITY, ch = -INFINITY;
#ifdef __SSE2__
        /* rb_bvh_centre four at a time. b is a multiple of the slice, so
         * of 4: the loads are aligned. */
        __m128 vl = _mm_set1_ps(INFINITY), vh = _mm_set1_ps(-INFINITY);
        const __m128 half = _mm_set1_ps(0.5f);
        for (; i + 4 <= e; i += 4) {
            __m128 c = _mm_add_ps(_mm_mul_ps(_mm_load_ps(&l[i]), half),
                                  _mm_mul_ps(_mm_load_ps(&h[i]), half));
            vl = _mm_min_ps(c, vl);
            vh = _mm_max_ps(c, vh);
        }
        float fl[4], fh[4];
        _mm_storeu_ps(fl, vl);
        _mm_storeu_ps(fh, vh);
        for (int k = 0; k < 4; k++) {
            cl = fl[k] < cl ? fl[k] : cl;
            ch = fh[k] > ch ? fh[k] : ch;
        }
#endif
        for (; i < e; i++) {
            float c = rb_bvh_centre(l[i], h[i]);
            cl = c < cl ? c : cl;
            ch = c > ch ? c : ch;
        }
        lo[a] = cl;
        hi[a] = ch;
    }
}

/* Slice t of the boxes into prims (original order, the code in pad) and
 * their keys: the code in the high half, the prim's position in the low
 * half (the sort is stable on the code). */
static void load_task(void *arg, size_t t, unsigned worker)
{
    morton *m = arg;
    (void)worker;
    size_t b, e;
    slice(m, t, &b, &e);
    const float *lo[3], *hi[3];
    for (int a = 0; a < 3; a++) {
        lo[a] = rb_boxset_lo(m->boxes, a);
        hi[a] = rb_boxset_hi(m->boxes, a);
    }
    for (size_t i = b; i < e; i++) {
        rb_bvh_prim *p = &m->in[i];
        float c[3];
        for (int a = 0; a < 3; a++) {
            p->lo[a] = lo[a][i];
            p->hi[a] = hi[a][i];
            c[a] = rb_bvh_centre(lo[a][i], hi[a][i]);
        }
        uint32_t code = code_of(m, c);
        p->index = (uint32_t)i;
        p->pad = code;
        m->keys[i] = (uint64_t)code << 32 | (uint64_t)i;
    }
}

static void gather_task(void *arg, size_t t, unsigned worker)
{
    morton *m = arg;
    (void)worker;
    size_t b, e;
    slice(m, t, &b, &e);
    for (size_t i = b; i < e; i++) {
        /* The reads are random: fetch a few ahead. */
        if (i + GATHER_AHEAD < e)
            __builtin_prefetch(&m->in[m->order[i + GATHER_AHEAD]]);
        const rb_bvh_prim *p = &m->in[m->order[i]];
        m->out[i] = *p;
        m->codes[i] = p->pad; /* order[i] is read: its word is free */
    }
}

/* Where [b, e) (sorted, more than RB_BVH_LEAF prims) is split: the first
 * position whose code has the highest bit in which the range's codes
 * differ, or the middle when they are all equal. */
static uint32_t split_at(const morton *m, uint32_t b, uint32_t e)
{
    const uint32_t *codes = m->codes;
    uint32_t first = codes[b], last = codes[e - 1];
    if (first == last)
        return b + (e - b) / 2;
    uint32_t bit = 1u << (31 - __builtin_clz(first ^ last));
    uint32_t lo = b, hi = e - 1; /* code(lo) lacks the bit, code(hi) has it */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (codes[mid] & bit)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* Makes node `at` an inner node; returns the first of its two children,
 * allocated together at *next. */
static size_t split_node(morton *m, size_t at, size_t *next)
{
    size_t pair = *next;
    *next += 2;
    m->tmp[at].first = (uint32_t)pair;
    m->tmp[at].count = 0;
    return pair;
}

static void unite(rb_bvh2_node *node, const rb_bvh2_node *l,
                  const rb_bvh2_node *r)
{
    for (int a = 0; a < 3; a++) {
        node->lo[a] = l->lo[a] < r->lo[a] ? l->lo[a] : r->lo[a];
        node->hi[a] = l->hi[a] > r->hi[a] ? l->hi[a] : r->hi[a];
    }
}

/* The union of prims [0, n) (n >= 1) into node's lo and hi. Each lane
 * keeps `p < bound ? p : bound` (and the mirror for hi), as the scalar
 * loop does, so both give the same bits. */
static void leaf_bounds(const rb_bvh_prim *p, uint32_t n, rb_bvh2_node *node)
{
#ifdef __SSE2__
    /* lanes 0-2 are the corners; lane 3 (index, pad) is not stored */
    __m128 lo = _mm_loadu_ps(p[0].lo), hi = _mm_loadu_ps(p[0].hi);
    for (uint32_t i = 1; i < n; i++) {
        lo = _mm_min_ps(_mm_loadu_ps(p[i].lo), lo);
        hi = _mm_max_ps(_mm_loadu_ps(p[i].hi), hi);
    }
    float l[4], h[4];
    _mm_storeu_ps(l, lo);
    _mm_storeu_ps(h, hi);
    memcpy(node->lo, l, sizeof node->lo);
    memcpy(node->hi, h, sizeof node->hi);
#else
    for (int a = 0; a < 3; a++) {
        node->lo[a] = p[0].lo[a];
        node->hi[a] = p[0].hi[a];
    }
    for (uint32_t i = 1; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            node->lo[a] = p[i].lo[a] < node->lo[a] ? p[i].lo[a] : node->lo[a];
            node->hi[a] = p[i].hi[a] > node->hi[a] ? p[i].hi[a] : node->hi[a];
        }
    }
#endif
}

/* Makes node `at` over prims [b, e), subtree and bounds, its descendants
 * numbered from *next on. */
static void build(morton *m, size_t at, uint32_t b, uint32_t e,
                  size_t *next)
{
    rb_bvh2_node *node = &m->tmp[at];
    if (e - b <= RB_BVH_LEAF) {
        leaf_bounds(&m->out[b], e - b, node);
        node->first = b;
        node->count = e - b;
        return;
    }
    uint32_t mid = split_at(m, b, e);
    size_t pair = split_node(m, at, next);
    build(m, pair, b, mid, next);
    build(m, pair + 1, mid, e, next);
    unite(&m->tmp[at], &m->tmp[pair], &m->tmp[pair + 1]);
}

static void subtree_task(void *arg, size_t t, unsigned worker)
{
    morton *m = arg;
    (void)worker;
    size_t next = m->sub[t].next;
    build(m, m->sub[t].at, m->sub[t].b, m->sub[t].e, &next);
}

/* The top of the tree on the calling thread: ranges of SUBTREE_MIN or
 * more are split (in creation order, parents before children) until
 * none is left or the subtree list is full; the rest become subtrees
 * built on the pool; then the top nodes' bounds, children first.
 * Node numbers: the root and the top's pairs first, then each subtree's
 * range. A tree over c prims, leaves of 1 to RB_BVH_LEAF, has at most
 * 2c - 1 nodes, so a subtree's descendants fit in 2c - 2 and the whole
 * in the 2n of tmp. */
static void build_tree(struct rb_pool *pool, morton *m)
{
    /* Each split turns one subtree into two, so the top nodes are fewer
     * than the subtrees. */
    size_t top[MAX_SUBTREES];
    size_t n_top = 0, next = 1;
    m->n_sub = 0;
    m->sub[m->n_sub].at = 0;
    m->sub[m->n_sub].b = 0;
    m->sub[m->n_sub++].e = (uint32_t)m->n;
    for (size_t k = 0; k < m->n_sub;) {
        uint32_t b = m->sub[k].b, e = m->sub[k].e;
        if (e - b < SUBTREE_MIN || m->n_sub == MAX_SUBTREES) {
            k++;
            continue;
        }
        /* Split sub[k] into two subtrees: it becomes a top node. */
        size_t at = m->sub[k].at;
        uint32_t mid = split_at(m, b, e);
        size_t pair = split_node(m, at, &next);
        top[n_top++] = at;
        m->sub[k].at = pair;
        m->sub[k].e = mid;
        m->sub[m->n_sub].at = pair + 1;
        m->sub[m->n_sub].b = mid;
        m->sub[m->n_sub++].e = e;
    }
    for (size_t k = 0; k < m->n_sub; k++) {
        m->sub[k].next = next;
        next += 2 * (size_t)(m->sub[k].e - m->sub[k].b) - 2;
    }
    run(pool, m, m->n_sub, subtree_task, m);
    for (size_t k = n_top; k-- > 0;) {
        rb_bvh2_node *node = &m->tmp[top[k]];
        unite(node, &m->tmp[node->first], &m->tmp[node->first + 1]);
    }
}

int rb_bvh_morton(struct rb_pool *pool, const rb_allocator *alloc,
                  struct rb_workmem *work, const rb_boxset *boxes,
                  rb_bvh_prim *in, rb_bvh_prim *out, rb_bvh2_node *tmp)
{
    _Static_assert(sizeof(rb_bvh_prim) >= 2 * sizeof(uint64_t),
                   "the sort's keys fit in out");
    size_t n = boxes->n;
    morton *m = rb_alloc_with(alloc, sizeof *m, 64);
    uint64_t *keys = (uint64_t *)(void *)out; /* written by the gather after */
    size_t order_bytes = n * sizeof(uint32_t);
    uint32_t *order = rb_workmem_take(work, &order_bytes);
    size_t slice = SLICE;
    while ((n + slice - 1) / slice > MAX_SLICES)
        slice *= 2;
    size_t slices = (n + slice - 1) / slice;
    float(*cbounds)[2][4] =
        rb_alloc_with(alloc, slices * sizeof *cbounds, 64);
    if (!m || !order || !cbounds) {
        rb_free_with(alloc, m);
        rb_workmem_give(work, order, order_bytes);
        rb_free_with(alloc, cbounds);
        return RB_ENOMEM;
    }
    memset(m, 0, sizeof *m);
    m->boxes = boxes;
    m->slice = slice;
    m->cbounds = cbounds;
    m->in = in;
    m->out = out;
    m->n = n;
    m->keys = keys;
    m->order = order;
    m->tmp = tmp;
    m->bits = n <= rb_bvh_morton_fine_min ? COARSE_BITS : FINE_BITS;
    m->top = (float)((1u << m->bits) - 1);
    run(pool, m, slices, centre_task, m);
    float clo[3] = {INFINITY, INFINITY, INFINITY};
    float chi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t t = 0; t < slices; t++) {
        for (int a = 0; a < 3; a++) {
            clo[a] = cbounds[t][0][a] < clo[a] ? cbounds[t][0][a] : clo[a];
            chi[a] = cbounds[t][1][a] > chi[a] ? cbounds[t][1][a] : chi[a];
        }
    }
    for (int a = 0; a < 3; a++) {
        double ext = (double)chi[a] - clo[a];
        double s = ext > 0 ? (double)(1u << m->bits) * (1.0 - 1e-6) / ext
                           : 0.0;
        m->base[a] = clo[a];
        m->scale[a] = s < FLT_MAX ? (float)s : FLT_MAX;
    }
    run(pool, m, slices, load_task, m);
    rb_key_order(pool, keys, n, 3 * m->bits, order);
    m->codes = order;
    run(pool, m, slices, gather_task, m);
    build_tree(pool, m);
    rb_free_with(alloc, cbounds);
    rb_workmem_give(work, order, order_bytes);
    rb_free_with(alloc, m);
    return RB_OK;
}
