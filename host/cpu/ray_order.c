/* ray_order.c - see ray_order.h. Keys are computed in parallel on the
 * pool, then sorted with an LSD radix sort (three passes of 10 bits for
 * the rays' 30-bit keys), which is stable, so equal keys keep their input
 * order. Each pass runs on the pool too: fixed slices of the keys are
 * counted, the counts are summed bucket by bucket in slice order, and
 * every slice scatters its keys from its own offsets, so the result is
 * the serial sort's whatever thread runs which slice. (Serial, the sort
 * took about half the time of a 1M-ray any query's ordering and left the
 * other cores idle.) */
#include "ray_order.h"

#include <math.h>
#include <string.h>

#include "../internal.h"
#include "../threadpool.h"

#define KEYS_PER_TASK 16384
#define GRID_BITS 9
#define RAY_KEY_BITS 30 /* 3 octant bits + 3 * GRID_BITS */
#define RADIX_BITS_MAX 11 /* a digit's bits: 30-bit keys take 3 passes of 10,
                           * 21-bit ones 2 of 11 */
#define SORT_CHUNKS 8
/* The per-chunk counts, on the stack: 8 chunks of 10-bit digits, 4 of
 * 11-bit ones. */
#define SORT_COUNTS (SORT_CHUNKS << 10)
/* Below this many keys one slice does it all (the pool's hand-off would
 * cost more than it saves). */
#define SORT_PARALLEL_MIN 65536

typedef struct keying {
    const void *rays;
    unsigned dims;
    size_t n;
    float lo[3], scale[3];
    uint64_t *keys;
    int octant_first;
} keying;

static uint32_t cell(const keying *k, int a, float o)
{
    float q = (o - k->lo[a]) * k->scale[a];
    if (!(q > 0)) /* also NaN */
        return 0;
    float top = (float)((1 << GRID_BITS) - 1);
    return q < top ? (uint32_t)q : (uint32_t)top;
}

static void key_task(void *arg, size_t task, unsigned worker)
{
    keying *k = arg;
    (void)worker;
    size_t begin, end;
    rb_pool_task_range(task, KEYS_PER_TASK, k->n, &begin, &end);
    for (size_t i = begin; i < end; i++) {
        float o[3] = {0, 0, 0}, d[3] = {0, 0, 0};
        if (k->dims == 3) {
            const rb_ray *r = &((const rb_ray *)k->rays)[i];
            memcpy(o, r->origin, sizeof o);
            memcpy(d, r->dir, sizeof d);
        } else {
            const rb_ray2 *r = &((const rb_ray2 *)k->rays)[i];
            memcpy(o, r->origin, 2 * sizeof o[0]);
            memcpy(d, r->dir, 2 * sizeof d[0]);
        }
        uint32_t octant = (uint32_t)(signbit(d[0]) ? 1 : 0) |
                          (uint32_t)(signbit(d[1]) ? 2 : 0) |
                          (uint32_t)(signbit(d[2]) ? 4 : 0);
        uint32_t morton = rb_spread3(cell(k, 0, o[0])) |
                          rb_spread3(cell(k, 1, o[1])) << 1 |
                          rb_spread3(cell(k, 2, o[2])) << 2;
        /* Short rays (nearest, any) share nodes with rays that start
         * nearby; long ones (count, all) with rays that also go the same
         * way. */
        uint32_t key = k->octant_first
                           ? octant << (3 * GRID_BITS) | morton
                           : morton << 3 | octant;
        k->keys[i] = (uint64_t)key << 32 | (uint64_t)i;
    }
}

typedef struct sorting {
    const uint64_t *src;
    uint64_t *dst;    /* NULL on the last pass: */
    uint32_t *order;  /* the indices go here instead */
    size_t n, chunks;
    unsigned shift;
    size_t buckets;   /* of a digit */
    uint32_t *offset; /* [chunk * buckets + bucket] */
} sorting;

static void chunk_range(const sorting *s, size_t c, size_t *begin,
                        size_t *end)
{
    *begin = s->n * c / s->chunks;
    *end = s->n * (c + 1) / s->chunks;
}

/* Key k's digit of this pass: its bucket. */
static inline size_t digit_of(const sorting *s, uint64_t k)
{
    return (size_t)(k >> s->shift) & (s->buckets - 1);
}

static void count_task(void *arg, size_t c, unsigned worker)
{
    sorting *s = arg;
    (void)worker;
    size_t begin, end;
    chunk_range(s, c, &begin, &end);
    uint32_t *count = &s->offset[c * s->buckets];
    memset(count, 0, s->buckets * sizeof *count);
    for (size_t i = begin; i < end; i++)
        count[digit_of(s, s->src[i])]++;
}

static void scatter_task(void *arg, size_t c, unsigned worker)
{
    sorting *s = arg;
    (void)worker;
    size_t begin, end;
    chunk_range(s, c, &begin, &end);
    uint32_t *pos = &s->offset[c * s->buckets];
    if (s->dst) {
        for (size_t i = begin; i < end; i++)
            s->dst[pos[digit_of(s, s->src[i])]++] = s->src[i];
    } else {
        for (size_t i = begin; i < end; i++)
            s->order[pos[digit_of(s, s->src[i])]++] = (uint32_t)s->src[i];
    }
}

/* Rays sampled by rb_order_pays; how thin and how wide (fractions of the
 * tree's extent) the slab of their origins must be; and how far apart
 * (a fraction of the slab's narrower width) consecutive origins must lie
 * on average for the input order to count as scattered. */
#define SLAB_SAMPLES 1024
#define SLAB_THIN 16
#define SLAB_WIDE 4
#define SLAB_SCATTERED 16

/* Whether origin o is usable (NaN and infinities are reported later by
 * the walk; they take no part here). */
static int finite3(const float o[3])
{
    return rb_finite(o[0]) && rb_finite(o[1]) && rb_finite(o[2]);
}

int rb_order_pays(const void *rays, unsigned dims, size_t n,
                  const float lo[3], const float hi[3], size_t bytes)
{
    if (n < RB_ORDER_MIN_RAYS)
        return 0;
    if (bytes >= RB_ORDER_MIN_BYTES)
        return 1;
    /* 2D rays all start at z = 0 over a flat tree: the slab rule was
     * measured on 3D batches only. */
    if (dims != 3)
        return 0;
    const rb_ray *r = rays;
    float olo[3] = {INFINITY, INFINITY, INFINITY};
    float ohi[3] = {-INFINITY, -INFINITY, -INFINITY};
    double steps = 0;
    size_t pairs = 0;
    size_t stride = n / SLAB_SAMPLES;
    for (size_t k = 0; k < SLAB_SAMPLES; k++) {
        /* One ray of each stride, at a scrambled place in it: an even
         * spacing could fall in step with a grid's rows and see one
         * column. */
        size_t i = k * stride + (size_t)(k * 2654435761u) % stride;
        const float *o = r[i].origin;
        if (!finite3(o))
            continue;
        for (int a = 0; a < 3; a++) {
            olo[a] = o[a] < olo[a] ? o[a] : olo[a];
            ohi[a] = o[a] > ohi[a] ? o[a] : ohi[a];
        }
        const float *next = i + 1 < n ? r[i + 1].origin : NULL;
        if (next && finite3(next)) {
            double d = 0;
            for (int a = 0; a < 3; a++) {
                double da = fabs((double)next[a] - o[a]);
                d = da > d ? da : d;
            }
            steps += d;
            pairs++;
        }
    }
    int thin = 0, wide = 0;
    double width = INFINITY;
    for (int a = 0; a < 3; a++) {
        double tree = (double)hi[a] - lo[a];
        double spread = (double)ohi[a] - olo[a];
        if (!(tree > 0) || !(spread >= 0))
            return 0;
        thin += spread * SLAB_THIN <= tree;
        if (spread * SLAB_WIDE >= tree) {
            wide++;
            width = spread < width ? spread : width;
        }
    }
    /* A slab walked in an order that is already coherent (a grid of rays
     * row by row, a block of rays from each observer) would only pay for
     * the sort. */
    return thin == 1 && wide == 2 && pairs &&
           steps / (double)pairs * SLAB_SCATTERED >= width;
}

void rb_ray_order(struct rb_pool *pool, const void *rays, unsigned dims,
                  size_t n, const float lo[3], const float hi[3],
                  int octant_first, uint64_t *scratch, uint32_t *order)
{
    keying k = {.rays = rays, .dims = dims, .n = n, .keys = scratch,
                .octant_first = octant_first};
    for (int a = 0; a < 3; a++) {
        double ext = (double)hi[a] - lo[a];
        double s = ext > 0 ? (1 << GRID_BITS) / ext : 0;
        k.lo[a] = lo[a];
        k.scale[a] = s < FLT_MAX ? (float)s : FLT_MAX;
    }
    rb_pool_run(pool, (n + KEYS_PER_TASK - 1) / KEYS_PER_TASK, key_task, &k);
    /* n <= UINT32_MAX: indices are 32-bit (rb_intersect limits rays to
     * INT32_MAX). */
    rb_key_order(pool, scratch, n, RAY_KEY_BITS, order);
}

void rb_key_order(struct rb_pool *pool, uint64_t *scratch, size_t n,
                  unsigned bits, uint32_t *order)
{
    uint32_t offset[SORT_COUNTS];
    unsigned passes = (bits + RADIX_BITS_MAX - 1) / RADIX_BITS_MAX;
    unsigned digit = (bits + passes - 1) / passes;
    size_t buckets = (size_t)1 << digit;
    size_t chunks = SORT_COUNTS / buckets;
    if (chunks > SORT_CHUNKS)
        chunks = SORT_CHUNKS;
    sorting srt = {.n = n, .order = order, .offset = offset,
                   .chunks = n < SORT_PARALLEL_MIN ? 1 : chunks,
                   .buckets = buckets};
    uint64_t *src = scratch, *dst = scratch + n;
    for (unsigned pass = 0; pass < passes; pass++) {
        srt.src = src;
        srt.dst = pass + 1 < passes ? dst : NULL;
        srt.shift = 32 + pass * digit;
        rb_pool_run(pool, srt.chunks, count_task, &srt);
        uint32_t sum = 0;
        for (size_t b = 0; b < srt.buckets; b++) {
            for (size_t c = 0; c < srt.chunks; c++) {
                uint32_t here = offset[c * buckets + b];
                offset[c * buckets + b] = sum;
                sum += here;
            }
        }
        rb_pool_run(pool, srt.chunks, scatter_task, &srt);
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
}
