/*
 * bvh_build.c - binned SAH build on the context's thread pool.
 *
 * The boxes are copied into prims (32-byte records that keep their
 * original index) and reordered by recursive partitioning, which copies a
 * range into the other of two prim arrays (left side from the front,
 * right side from the back: one read and one write per box, no branch);
 * each range knows which array holds it, and leaves end up in the first.
 * A range is split where the surface area heuristic, evaluated at NBINS
 * centroid bins per axis, is cheapest. Ranges of at least SHARE_MIN boxes
 * go to a queue that every pool thread drains; smaller ones are finished
 * by the thread that made them. Binary nodes go to a scratch array in
 * allocation order (sibling pairs allocated together through an atomic
 * counter), which bvh_collapse.c then turns into the wide nodes.
 *
 * Each range is split the same way whichever thread splits it, so the
 * tree does not depend on the thread count. Node bounds are exact unions
 * of box corners (min/max only, no rounding), which is what makes the
 * conservative node test of bvh_walk.inc sound. Split positions only
 * affect speed, so centroid and area arithmetic need not be exact; areas
 * are computed in double so that huge coordinates cannot overflow them.
 * Binning uses SSE where there is SSE2 (x86-64 always has it); the
 * vector and scalar forms compute the same bins, and partitioning uses
 * the scalar form, so both agree on every box's side.
 */
#include <math.h>
#include <pthread.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdatomic.h>
#include <string.h>

#include "../threadpool.h"
#include "bvh.h"

#define NBINS 16
#define ONE_AXIS_BELOW 1024
#define SHARE_MIN 4096
/* Ranges of RB_BVH_SAMPLE_MIN boxes or more choose their split from
 * every k-th box only (SAMPLES to 2 * SAMPLES of them: the SAH costs of
 * the candidate splits hardly move, and the binning of big ranges runs
 * from memory), and the partition then computes the two sides' exact
 * bounds and centre bounds as it copies them. */
#define SAMPLES 1024

typedef struct range {
    uint32_t node, begin, end, depth;
    uint32_t buf;         /* which prims array holds the range */
    float clo[3], chi[3]; /* bounds of the box centres */
} range;

typedef struct bin {
    _Alignas(16) float lo[4]; /* x, y, z; the fourth lane is unused */
    float hi[4];
    float clo[4], chi[4];     /* bounds of the centres */
    uint32_t n;
} bin;

/* Maps a centre coordinate to its bin along each axis. */
typedef struct binner {
    float base[3], scale[3];
} binner;

typedef struct split {
    int axis, k;        /* boxes whose bin along axis is < k go left */
    int sampled;        /* the bounds below are a sample's: recompute */
    float lo[2][3], hi[2][3];
    float clo[2][3], chi[2][3];
} split;

typedef struct builder {
    rb_bvh_prim *prims;   /* leaves end up here */
    rb_bvh_prim *other;   /* the second array ranges move through */
    rb_bvh2_node *tmp;
    atomic_size_t next; /* next free node of tmp */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    range *queue;
    size_t len, cap;
    unsigned busy;      /* threads working on a range taken from queue */
} builder;

static inline float centre(const rb_bvh_prim *p, int a)
{
    return rb_bvh_centre(p->lo[a], p->hi[a]);
}

static inline void grow(float lo[3], float hi[3], const float plo[3],
                        const float phi[3])
{
    for (int a = 0; a < 3; a++) {
        lo[a] = plo[a] < lo[a] ? plo[a] : lo[a];
        hi[a] = phi[a] > hi[a] ? phi[a] : hi[a];
    }
}

static inline void empty_bounds(float lo[3], float hi[3])
{
    for (int a = 0; a < 3; a++) {
        lo[a] = INFINITY;
        hi[a] = -INFINITY;
    }
}

/* Half the surface area, or the sum of extents for a box flat in two
 * axes, where area cannot tell splits apart. */
static double measure(const float lo[3], const float hi[3], int perimeter)
{
    double dx = (double)hi[0] - lo[0];
    double dy = (double)hi[1] - lo[1];
    double dz = (double)hi[2] - lo[2];
    return perimeter ? dx + dy + dz : dx * dy + dy * dz + dz * dx;
}

/* Bounds of x, y, z in one register where there is SSE2 (the fourth lane
 * is carried along and ignored), for the SAH sweeps; the same values as
 * grow() and measure(). */
#ifdef __SSE2__
typedef __m128 v4;
static inline v4 v4_load(const float p[4]) { return _mm_load_ps(p); }
static inline v4 v4_min(v4 a, v4 b) { return _mm_min_ps(a, b); }
static inline v4 v4_max(v4 a, v4 b) { return _mm_max_ps(a, b); }
static inline v4 v4_add(v4 a, v4 b) { return _mm_add_ps(a, b); }
static inline v4 v4_mul(v4 a, v4 b) { return _mm_mul_ps(a, b); }
static inline void v4_store3(float out[3], v4 a)
{
    float t[4];
    _mm_storeu_ps(t, a);
    memcpy(out, t, 3 * sizeof *out);
}

static inline double v4_measure(v4 lo, v4 hi, int perimeter)
{
    __m128d d01 = _mm_sub_pd(_mm_cvtps_pd(hi), _mm_cvtps_pd(lo));
    __m128d d2 = _mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(hi, hi)),
                            _mm_cvtps_pd(_mm_movehl_ps(lo, lo)));
    double dx = _mm_cvtsd_f64(d01);
    double dy = _mm_cvtsd_f64(_mm_unpackhi_pd(d01, d01));
    double dz = _mm_cvtsd_f64(d2);
    return perimeter ? dx + dy + dz : dx * dy + dy * dz + dz * dx;
}
#else
typedef struct v4 {
    float v[4];
} v4;
static inline v4 v4_load(const float p[4])
{
    v4 r;
    memcpy(r.v, p, sizeof r.v);
    return r;
}
static inline v4 v4_min(v4 a, v4 b)
{
    for (int i = 0; i < 4; i++)
        a.v[i] = b.v[i] < a.v[i] ? b.v[i] : a.v[i];
    return a;
}
static inline v4 v4_max(v4 a, v4 b)
{
    for (int i = 0; i < 4; i++)
        a.v[i] = b.v[i] > a.v[i] ? b.v[i] : a.v[i];
    return a;
}
static inline v4 v4_add(v4 a, v4 b)
{
    for (int i = 0; i < 4; i++)
        a.v[i] += b.v[i];
    return a;
}
static inline v4 v4_mul(v4 a, v4 b)
{
    for (int i = 0; i < 4; i++)
        a.v[i] *= b.v[i];
    return a;
}
static inline void v4_store3(float out[3], v4 a)
{
    memcpy(out, a.v, 3 * sizeof *out);
}
static inline double v4_measure(v4 lo, v4 hi, int perimeter)
{
    return measure(lo.v, hi.v, perimeter);
}
#endif

static inline v4 v4_splat(float x)
{
    const float p[4] = {x, x, x, x};
    return v4_load(p);
}

static inline int bin_of(const binner *b, float c, int a)
{
    /* Clamped before the conversion, so that both compile to minss and
     * maxss: which bin a box falls in is not predictable. */
    float x = (c - b->base[a]) * b->scale[a];
    x = x < (float)(NBINS - 1) ? x : (float)(NBINS - 1);
    x = x > 0.0f ? x : 0.0f;
    return (int)x;
}

/* bin_of(b, c, a) < k for 1 <= k < NBINS, without the clamps: the
 * clamped value is below k exactly when the unclamped one is (a NaN is
 * neither, and goes to the last bin). */
static inline uint32_t left_of(const binner *b, float c, int a, float k)
{
    return (c - b->base[a]) * b->scale[a] < k;
}

static void make_binner(const range *r, binner *b, int live[3])
{
    double longest = 0;
    int at = -1;
    for (int a = 0; a < 3; a++) {
        double ext = (double)r->chi[a] - r->clo[a];
        double scale = ext > 0 ? NBINS * (1.0 - 1e-6) / ext : 0.0;
        b->base[a] = r->clo[a];
        b->scale[a] = scale < FLT_MAX ? (float)scale : FLT_MAX;
        live[a] = ext > 0;
        if (ext > longest) {
            longest = ext;
            at = a;
        }
    }
    /* Small ranges: the longest axis only, a third of the binning. */
    if (r->end - r->begin < ONE_AXIS_BELOW && at >= 0)
        for (int a = 0; a < 3; a++)
            live[a] = a == at;
}

/* Counts prims begin, begin + step, ... below end into bins along each
 * axis and grows the bins' bounds and centre bounds. */
static void bin_prims(const rb_bvh_prim *p, uint32_t begin, uint32_t end,
                      uint32_t step, const binner *bn, const int live[3],
                      bin bins[3][NBINS])
{
#ifdef __SSE2__
    /* bin_of for three axes at once: the same operations, lane by lane
     * (the fourth lane, the index bits, is computed and ignored). */
    const __m128 half = _mm_set1_ps(0.5f);
    const __m128 base = _mm_setr_ps(bn->base[0], bn->base[1], bn->base[2], 0);
    const __m128 scale = _mm_setr_ps(bn->scale[0], bn->scale[1],
                                     bn->scale[2], 0);
    const __m128 top = _mm_set1_ps((float)(NBINS - 1));
    const __m128 zero = _mm_setzero_ps();
    for (uint32_t i = begin; i < end; i += step) {
        __m128 lo = _mm_load_ps(p[i].lo), hi = _mm_load_ps(p[i].hi);
        __m128 c = _mm_add_ps(_mm_mul_ps(lo, half), _mm_mul_ps(hi, half));
        __m128 x = _mm_mul_ps(_mm_sub_ps(c, base), scale);
        x = _mm_max_ps(_mm_min_ps(x, top), zero);
        /* Lanes out through registers: a vector store read back as
         * scalars stalls store forwarding. */
        __m128i q = _mm_cvttps_epi32(x);
        int k[3] = {_mm_cvtsi128_si32(q),
                    _mm_cvtsi128_si32(_mm_shuffle_epi32(q, 1)),
                    _mm_cvtsi128_si32(_mm_shuffle_epi32(q, 2))};
        for (int a = 0; a < 3; a++) {
            if (!live[a])
                continue;
            bin *b = &bins[a][k[a]];
            _mm_store_ps(b->lo, _mm_min_ps(lo, _mm_load_ps(b->lo)));
            _mm_store_ps(b->hi, _mm_max_ps(hi, _mm_load_ps(b->hi)));
            _mm_store_ps(b->clo, _mm_min_ps(c, _mm_load_ps(b->clo)));
            _mm_store_ps(b->chi, _mm_max_ps(c, _mm_load_ps(b->chi)));
            b->n++;
        }
    }
#else
    for (uint32_t i = begin; i < end; i += step) {
        float c[3] = {centre(&p[i], 0), centre(&p[i], 1), centre(&p[i], 2)};
        for (int a = 0; a < 3; a++) {
            if (!live[a])
                continue;
            bin *b = &bins[a][bin_of(bn, c[a], a)];
            grow(b->lo, b->hi, p[i].lo, p[i].hi);
            grow(b->clo, b->chi, c, c);
            b->n++;
        }
    }
#endif
}

/* The cheapest binned split of r, if any axis can be split at all. */
static int find_split(const builder *bld, const range *r,
                      const rb_bvh2_node *node, split *best)
{
    binner bn;
    int live[3];
    make_binner(r, &bn, live);
    if (!live[0] && !live[1] && !live[2])
        return 0;

    bin bins[3][NBINS];
    const v4 inf = v4_splat(INFINITY), ninf = v4_splat(-INFINITY);
    for (int a = 0; a < 3; a++) {
        if (!live[a])
            continue; /* never read */
        for (int k = 0; k < NBINS; k++) {
            memcpy(bins[a][k].lo, &inf, sizeof inf);
            memcpy(bins[a][k].hi, &ninf, sizeof ninf);
            memcpy(bins[a][k].clo, &inf, sizeof inf);
            memcpy(bins[a][k].chi, &ninf, sizeof ninf);
            bins[a][k].n = 0;
        }
    }
    uint32_t n_range = r->end - r->begin;
    uint32_t step = n_range >= RB_BVH_SAMPLE_MIN ? n_range / SAMPLES : 1;
    bin_prims(r->buf ? bld->other : bld->prims, r->begin, r->end, step, &bn,
              live, bins);
    best->sampled = step > 1;

    int perimeter = measure(node->lo, node->hi, 0) <= 0;
    int found = 0;
    double best_sum = 0;
    for (int a = 0; a < 3; a++) {
        if (!live[a])
            continue;
        /* Right sides, swept from the last bin down. */
        double right_area[NBINS];
        uint32_t right_n[NBINS];
        v4 lo = inf, hi = ninf;
        uint32_t n = 0;
        for (int k = NBINS - 1; k > 0; k--) {
            lo = v4_min(lo, v4_load(bins[a][k].lo));
            hi = v4_max(hi, v4_load(bins[a][k].hi));
            n += bins[a][k].n;
            right_area[k] = n ? v4_measure(lo, hi, perimeter) : 0;
            right_n[k] = n;
        }
        lo = inf;
        hi = ninf;
        n = 0;
        for (int k = 1; k < NBINS; k++) {
            lo = v4_min(lo, v4_load(bins[a][k - 1].lo));
            hi = v4_max(hi, v4_load(bins[a][k - 1].hi));
            n += bins[a][k - 1].n;
            if (n == 0 || right_n[k] == 0)
                continue;
            /* The SAH cost without its constant factors (the parent's
             * area, costs per node and per box), which do not change
             * which split is cheapest. */
            double sum = v4_measure(lo, hi, perimeter) * n +
                         right_area[k] * right_n[k];
            if (!found || sum < best_sum) {
                found = 1;
                best->axis = a;
                best->k = k;
                best_sum = sum;
            }
        }
    }
    if (!found)
        return 0;
    if (best->sampled)
        return 1; /* partition() computes the sides' bounds */
    v4 acc[2][4];
    for (int side = 0; side < 2; side++) {
        acc[side][0] = acc[side][2] = inf;
        acc[side][1] = acc[side][3] = ninf;
    }
    for (int k = 0; k < NBINS; k++) {
        const bin *b = &bins[best->axis][k];
        v4 *t = acc[k >= best->k];
        t[0] = v4_min(t[0], v4_load(b->lo));
        t[1] = v4_max(t[1], v4_load(b->hi));
        t[2] = v4_min(t[2], v4_load(b->clo));
        t[3] = v4_max(t[3], v4_load(b->chi));
    }
    for (int side = 0; side < 2; side++) {
        v4_store3(best->lo[side], acc[side][0]);
        v4_store3(best->hi[side], acc[side][1]);
        v4_store3(best->clo[side], acc[side][2]);
        v4_store3(best->chi[side], acc[side][3]);
    }
    return 1;
}

static inline v4 prim_lo(const rb_bvh_prim *t)
{
    return v4_load((const float *)t); /* the fourth lane is the index */
}

static inline v4 prim_hi(const rb_bvh_prim *t)
{
    return v4_load((const float *)t + 4);
}

/* partition()'s loop; with `sampled` (a constant where it is inlined)
 * it also grows acc[left] by each box: [lo, hi, centre lo, centre hi]. */
static inline __attribute__((always_inline)) uint32_t
partition_loop(const rb_bvh_prim *src, rb_bvh_prim *dst, uint32_t begin,
               uint32_t end, const binner *b, int axis, float k,
               const int sampled, v4 acc[2][4])
{
    const v4 half = v4_splat(0.5f);
    uint32_t left_end = begin, right_begin = end;
    for (uint32_t i = begin; i < end; i++) {
        const rb_bvh_prim *t = &src[i];
        uint32_t left = left_of(b, centre(t, axis), axis, k);
        right_begin -= 1 - left;
        dst[left ? left_end : right_begin] = *t;
        left_end += left;
        if (sampled) {
            v4 lo = prim_lo(t), hi = prim_hi(t);
            v4 c = v4_add(v4_mul(lo, half), v4_mul(hi, half));
            v4 *a = acc[left];
            a[0] = v4_min(a[0], lo);
            a[1] = v4_max(a[1], hi);
            a[2] = v4_min(a[2], c);
            a[3] = v4_max(a[3], c);
        }
    }
    return left_end;
}

/* Copies the boxes of r into the other array, those left of s to the
 * front and the others to the back; returns where the right side starts.
 * Which side a box goes to is unpredictable, so the destination is
 * computed, not branched on. A split chosen from a sample gets the two
 * sides' exact bounds and centre bounds here, from the boxes copied. */
static uint32_t partition(builder *bld, const range *r, split *s)
{
    binner bn;
    int live[3];
    make_binner(r, &bn, live);
    const rb_bvh_prim *src = r->buf ? bld->other : bld->prims;
    rb_bvh_prim *dst = r->buf ? bld->prims : bld->other;
    /* Locals: the stores into dst could alias *s for the compiler. */
    const int axis = s->axis;
    const float k = (float)s->k;
    if (!s->sampled)
        return partition_loop(src, dst, r->begin, r->end, &bn, axis, k, 0,
                              NULL);
    v4 acc[2][4];
    for (int side = 0; side < 2; side++) {
        acc[side][0] = acc[side][2] = v4_splat(INFINITY);
        acc[side][1] = acc[side][3] = v4_splat(-INFINITY);
    }
    uint32_t mid = partition_loop(src, dst, r->begin, r->end, &bn, axis, k, 1,
                                  acc);
    for (int side = 0; side < 2; side++) { /* side 0 is the left one */
        v4_store3(s->lo[side], acc[1 - side][0]);
        v4_store3(s->hi[side], acc[1 - side][1]);
        v4_store3(s->clo[side], acc[1 - side][2]);
        v4_store3(s->chi[side], acc[1 - side][3]);
    }
    return mid;
}

/* Bounds and centre bounds of prims [begin, end). */
static void bounds_of(const rb_bvh_prim *p, uint32_t begin, uint32_t end,
                      float lo[3], float hi[3], range *r)
{
    empty_bounds(lo, hi);
    empty_bounds(r->clo, r->chi);
    for (uint32_t i = begin; i < end; i++) {
        float c[3] = {centre(&p[i], 0), centre(&p[i], 1), centre(&p[i], 2)};
        grow(lo, hi, p[i].lo, p[i].hi);
        grow(r->clo, r->chi, c, c);
    }
}

static void set_bounds(rb_bvh2_node *n, const float lo[3],
                       const float hi[3])
{
    memcpy(n->lo, lo, sizeof n->lo);
    memcpy(n->hi, hi, sizeof n->hi);
}

/* Splits r into kids (returns 1) or makes it a leaf (returns 0). A range
 * of up to RB_BVH_LEAF boxes is a leaf: one wide node tests them all at
 * the cost of one test, which no split of them can beat. */
static int split_one(builder *bld, const range *r, range kids[2])
{
    rb_bvh2_node *node = &bld->tmp[r->node];
    uint32_t n = r->end - r->begin;
    float lo[2][3], hi[2][3];
    uint32_t mid;
    split s;

    if (n <= RB_BVH_LEAF)
        goto leaf;
    if (r->depth < RB_BVH_SAH_DEPTH && find_split(bld, r, node, &s)) {
        mid = partition(bld, r, &s);
        memcpy(lo, s.lo, sizeof lo);
        memcpy(hi, s.hi, sizeof hi);
        for (int c = 0; c < 2; c++) {
            memcpy(kids[c].clo, s.clo[c], sizeof kids[c].clo);
            memcpy(kids[c].chi, s.chi[c], sizeof kids[c].chi);
            kids[c].buf = !r->buf;
        }
    } else {
        /* Every centre equal, or too deep for SAH: halve by count. */
        const rb_bvh_prim *p = r->buf ? bld->other : bld->prims;
        mid = r->begin + n / 2;
        bounds_of(p, r->begin, mid, lo[0], hi[0], &kids[0]);
        bounds_of(p, mid, r->end, lo[1], hi[1], &kids[1]);
        kids[0].buf = kids[1].buf = r->buf;
    }
    size_t pair = atomic_fetch_add_explicit(&bld->next, 2,
                                            memory_order_relaxed);
    node->first = (uint32_t)pair;
    node->count = 0;
    for (int c = 0; c < 2; c++) {
        rb_bvh2_node *child = &bld->tmp[pair + (size_t)c];
        set_bounds(child, lo[c], hi[c]);
        kids[c].node = (uint32_t)(pair + (size_t)c);
        kids[c].depth = r->depth + 1;
    }
    kids[0].begin = r->begin;
    kids[0].end = mid;
    kids[1].begin = mid;
    kids[1].end = r->end;
    return 1;
leaf:
    if (r->buf)
        memcpy(&bld->prims[r->begin], &bld->other[r->begin],
               n * sizeof *bld->prims);
    node->first = r->begin;
    node->count = n;
    return 0;
}

static void share(builder *bld, const range *r)
{
    pthread_mutex_lock(&bld->lock);
    bld->queue[bld->len++] = *r;
    pthread_cond_signal(&bld->cond);
    pthread_mutex_unlock(&bld->lock);
}

/* Finishes r: left children are kept, right children of SHARE_MIN boxes
 * or more are offered to the other threads. */
static void build_range(builder *bld, const range *r)
{
    /* One entry per level at most: each split pushes two and pops one. */
    range stack[RB_BVH_MAX_DEPTH + 2];
    int sp = 0;
    stack[sp++] = *r;
    while (sp) {
        range cur = stack[--sp];
        range kids[2];
        if (!split_one(bld, &cur, kids))
            continue;
        if (kids[1].end - kids[1].begin >= SHARE_MIN)
            share(bld, &kids[1]);
        else
            stack[sp++] = kids[1];
        stack[sp++] = kids[0];
    }
}

static void build_worker(void *arg, size_t task, unsigned worker)
{
    builder *bld = arg;
    (void)task;
    (void)worker;
    pthread_mutex_lock(&bld->lock);
    for (;;) {
        while (bld->len == 0 && bld->busy > 0)
            pthread_cond_wait(&bld->cond, &bld->lock);
        if (bld->len == 0)
            break; /* nothing queued and nobody can queue more */
        range r = bld->queue[--bld->len];
        bld->busy++;
        pthread_mutex_unlock(&bld->lock);
        build_range(bld, &r);
        pthread_mutex_lock(&bld->lock);
        if (--bld->busy == 0 && bld->len == 0)
            pthread_cond_broadcast(&bld->cond);
    }
    pthread_mutex_unlock(&bld->lock);
}

/* Copying the boxes into prims, in chunks on the pool. */
#define LOAD_TASKS_MAX 256
#define LOAD_CHUNK_MIN 65536

typedef struct loading {
    const rb_boxset *boxes;
    rb_bvh_prim *prims, *other;
    size_t chunk;
    float lo[LOAD_TASKS_MAX][3], hi[LOAD_TASKS_MAX][3];
    range part[LOAD_TASKS_MAX]; /* centre bounds per chunk */
} loading;

static void load_task(void *arg, size_t t, unsigned worker)
{
    loading *l = arg;
    (void)worker;
    size_t begin = t * l->chunk, end = begin + l->chunk;
    if (end > l->boxes->n)
        end = l->boxes->n;
    rb_bvh_prim *p = l->prims;
    for (size_t i = begin; i < end; i++) {
        for (int a = 0; a < 3; a++) {
            p[i].lo[a] = rb_boxset_lo(l->boxes, a)[i];
            p[i].hi[a] = rb_boxset_hi(l->boxes, a)[i];
        }
        p[i].index = (uint32_t)i;
        p[i].pad = 0;
    }
    bounds_of(p, (uint32_t)begin, (uint32_t)end, l->lo[t], l->hi[t],
              &l->part[t]);
    /* Touch the second array here, in parallel, rather than in the first
     * (single-threaded) partition. */
    memset(&l->other[begin], 0, (end - begin) * sizeof *l->other);
}

/* Copies the boxes into prims in original order; fills the root range. */
static void load_prims(struct rb_pool *pool, const rb_boxset *boxes,
                       rb_bvh_prim *prims, rb_bvh_prim *other, range *root,
                       rb_bvh2_node *node)
{
    size_t n = boxes->n;
    loading l = {.boxes = boxes, .prims = prims, .other = other};
    l.chunk = (n + LOAD_TASKS_MAX - 1) / LOAD_TASKS_MAX;
    if (l.chunk < LOAD_CHUNK_MIN)
        l.chunk = LOAD_CHUNK_MIN;
    size_t tasks = (n + l.chunk - 1) / l.chunk;
    rb_pool_run(pool, tasks, load_task, &l);
    float lo[3], hi[3];
    empty_bounds(lo, hi);
    empty_bounds(root->clo, root->chi);
    for (size_t t = 0; t < tasks; t++) {
        grow(lo, hi, l.lo[t], l.hi[t]);
        grow(root->clo, root->chi, l.part[t].clo, l.part[t].chi);
    }
    set_bounds(node, lo, hi);
    root->node = 0;
    root->begin = 0;
    root->end = (uint32_t)n;
    root->depth = 0;
    root->buf = 0;
}

static void replace(rb_bvh *bvh, const rb_allocator *alloc, int build,
                    rb_bvh_node *nodes, size_t n_nodes, uint32_t *where,
                    size_t n_boxes)
{
    bvh->build = build;
    rb_free_with(&bvh->alloc, bvh->nodes);
    rb_free_with(&bvh->alloc, bvh->where);
    bvh->alloc = *alloc;
    bvh->nodes = nodes;
    bvh->n_nodes = n_nodes;
    bvh->where = where;
    bvh->n_boxes = n_boxes;
    bvh->builds++;
}

int rb_bvh_build(struct rb_pool *pool, const rb_allocator *alloc,
                 struct rb_workmem *work, const rb_boxset *boxes, int build,
                 rb_bvh *bvh)
{
    double t0 = rb_now_ms();
    size_t n = boxes->n;
    if (n == 0) {
        replace(bvh, alloc, build, NULL, 0, NULL, 0);
        bvh->depth = 0;
        bvh->sah = bvh->sah_built = 0;
        bvh->build_ms = rb_now_ms() - t0;
        return RB_OK;
    }
    builder bld = {0};
    rb_bvh_node *nodes = NULL;
    uint32_t *where = NULL;
    bld.cap = n / SHARE_MIN * 2 + 2;
    /* The work arrays, and the sizes of the blocks they got. */
    size_t prims_bytes = n * sizeof *bld.prims, other_bytes = prims_bytes;
    size_t tmp_bytes = 2 * n * sizeof *bld.tmp;
    size_t queue_bytes = bld.cap * sizeof *bld.queue;
    bld.prims = rb_workmem_take(work, &prims_bytes);
    bld.other = rb_workmem_take(work, &other_bytes);
    bld.tmp = rb_workmem_take(work, &tmp_bytes);
    bld.queue = rb_workmem_take(work, &queue_bytes);
    where = rb_alloc_with(alloc, n * sizeof *where, 64);
    if (!bld.prims || !bld.other || !bld.tmp || !bld.queue || !where)
        goto oom;

    pthread_mutex_init(&bld.lock, NULL);
    pthread_cond_init(&bld.cond, NULL);
    atomic_init(&bld.next, 1);
    if (build == RB_HIERARCHY_BUILD_FAST) {
        if (rb_bvh_morton(pool, alloc, work, boxes, bld.prims, bld.other,
                          bld.tmp) != RB_OK) {
            pthread_cond_destroy(&bld.cond);
            pthread_mutex_destroy(&bld.lock);
            goto oom;
        }
        rb_bvh_prim *sorted = bld.other; /* the leaves index it */
        size_t sorted_bytes = other_bytes;
        bld.other = bld.prims;
        other_bytes = prims_bytes;
        bld.prims = sorted;
        prims_bytes = sorted_bytes;
    } else {
        load_prims(pool, boxes, bld.prims, bld.other, &bld.queue[0],
                   &bld.tmp[0]);
        bld.len = 1;
        if (n >= 2 * SHARE_MIN)
            rb_pool_run(pool, rb_pool_size(pool), build_worker, &bld);
        else
            build_worker(&bld, 0, 0);
    }
    pthread_cond_destroy(&bld.cond);
    pthread_mutex_destroy(&bld.lock);
    rb_workmem_give(work, bld.queue, queue_bytes);
    rb_workmem_give(work, bld.other, other_bytes);
    bld.queue = NULL;
    bld.other = NULL;

    unsigned depth;
    size_t n_nodes;
    rb_bvh_sums inner;
    if (rb_bvh_collapse(pool, alloc, work, bld.tmp, bld.prims, where, &nodes,
                        &n_nodes, &depth, &inner) != RB_OK)
        goto oom;
    rb_workmem_give(work, bld.tmp, tmp_bytes);
    rb_workmem_give(work, bld.prims, prims_bytes);

    replace(bvh, alloc, build, nodes, n_nodes, where, n);
    bvh->depth = depth;
    bvh->sah = bvh->sah_built = rb_bvh_sah_of(bvh, &inner);
    bvh->build_ms = rb_now_ms() - t0;
    return RB_OK;
oom:
    rb_workmem_give(work, bld.prims, prims_bytes);
    rb_workmem_give(work, bld.other, other_bytes);
    rb_workmem_give(work, bld.tmp, tmp_bytes);
    rb_workmem_give(work, bld.queue, queue_bytes);
    rb_free_with(alloc, where);
    return RB_ENOMEM;
}

void rb_bvh_free(rb_bvh *bvh)
{
    if (!bvh)
        return;
    rb_free_with(&bvh->alloc, bvh->nodes);
    rb_free_with(&bvh->alloc, bvh->where);
    memset(bvh, 0, sizeof *bvh);
}

int rb_bvh_clone(const rb_allocator *alloc, const rb_bvh *src, rb_bvh *out)
{
    *out = *src;
    out->alloc = *alloc;
    out->nodes = NULL;
    out->where = NULL;
    if (src->n_nodes) {
        out->nodes = rb_alloc_with(alloc, src->n_nodes * sizeof *out->nodes,
                                   64);
        out->where = rb_alloc_with(alloc, src->n_boxes * sizeof *out->where,
                                   64);
        if (!out->nodes || !out->where) {
            rb_bvh_free(out);
            return RB_ENOMEM;
        }
        memcpy(out->nodes, src->nodes, src->n_nodes * sizeof *out->nodes);
        memcpy(out->where, src->where, src->n_boxes * sizeof *out->where);
    }
    return RB_OK;
}

size_t rb_bvh_bytes(const rb_bvh *bvh)
{
    return bvh->n_nodes * sizeof(rb_bvh_node) +
           bvh->n_boxes * sizeof(uint32_t);
}
