/*
 * bvh_morton.c - the fast build (RB_HIERARCHY_BUILD_FAST): boxes sorted
 * along a Morton curve through their centres, ranges split where the
 * highest bit of the curve's code changes (Lauterbach et al. 2009, "Fast
 * BVH construction on GPUs"), into the same binary tree that binned SAH
 * makes (bvh_build.c), which bvh_collapse.c then turns into wide nodes.
 *
 * It reads every box about four times (keys, three sort passes, the
 * gather, the bounds) instead of once per level, and splits without
 * looking at areas: a build several times faster, a tree whose walks are
 * slower (docs/benchmarks.md, "Hierarchies", has both). Bounds are exact
 * unions of box corners, as in the SAH build, so the walks stay exact;
 * the tree does not depend on the thread count (this build uses one).
 * Depth: 30 code bits, then halving by count among equal codes, stays
 * within RB_BVH_MAX_DEPTH.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "bvh.h"

#define GRID 1024 /* cells per axis: 10 bits each, a 30-bit code */
#define RADIX_BITS 10

/* x's 10 low bits spread to every third bit. */
static uint32_t spread(uint32_t x)
{
    x &= 0x3ff;
    x = (x | x << 16) & 0x030000ff;
    x = (x | x << 8) & 0x0300f00f;
    x = (x | x << 4) & 0x030c30c3;
    x = (x | x << 2) & 0x09249249;
    return x;
}

static uint32_t cell(float c, float base, float scale)
{
    float x = (c - base) * scale;
    x = x < (float)(GRID - 1) ? x : (float)(GRID - 1);
    x = x > 0.0f ? x : 0.0f;
    return (uint32_t)x;
}

/* Key: the code in the high half, the prim's position in the low half
 * (so sorting is stable and the tree deterministic). */
static void make_keys(const rb_bvh_prim *p, size_t n, const float clo[3],
                      const float chi[3], uint64_t *keys)
{
    float base[3], scale[3];
    for (int a = 0; a < 3; a++) {
        double ext = (double)chi[a] - clo[a];
        double s = ext > 0 ? GRID * (1.0 - 1e-6) / ext : 0.0;
        base[a] = clo[a];
        scale[a] = s < FLT_MAX ? (float)s : FLT_MAX;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t code = 0;
        for (int a = 0; a < 3; a++) {
            float c = p[i].lo[a] * 0.5f + p[i].hi[a] * 0.5f;
            code |= spread(cell(c, base[a], scale[a])) << (2 - a);
        }
        keys[i] = (uint64_t)code << 32 | (uint64_t)i;
    }
}

/* LSD radix sort of the codes (bits 32..61), stable; the result ends in
 * keys (tmp is scratch of n). */
static void sort_keys(uint64_t *keys, uint64_t *tmp, size_t n)
{
    uint64_t *src = keys, *dst = tmp;
    for (int shift = 32; shift < 62; shift += RADIX_BITS) {
        size_t count[1u << RADIX_BITS] = {0};
        for (size_t i = 0; i < n; i++)
            count[(src[i] >> shift) & ((1u << RADIX_BITS) - 1)]++;
        size_t at = 0;
        for (size_t b = 0; b < (1u << RADIX_BITS); b++) {
            size_t c = count[b];
            count[b] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i] >> shift) & ((1u << RADIX_BITS) - 1)]++] =
                src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != keys)
        memcpy(keys, src, n * sizeof *keys);
}

typedef struct morton {
    const uint64_t *keys;
    const rb_bvh_prim *prims; /* in key order */
    rb_bvh2_node *tmp;
    size_t next; /* next free node of tmp */
} morton;

static inline uint32_t code_of(const morton *m, uint32_t i)
{
    return (uint32_t)(m->keys[i] >> 32);
}

/* Where [b, e) (sorted, more than one code) changes its highest
 * differing bit: the first position with that bit set. */
static uint32_t split_at(const morton *m, uint32_t b, uint32_t e)
{
    uint32_t first = code_of(m, b), last = code_of(m, e - 1);
    if (first == last)
        return b + (e - b) / 2;
    uint32_t bit = 1u << (31 - __builtin_clz(first ^ last));
    uint32_t lo = b, hi = e - 1; /* code(lo) lacks the bit, code(hi) has it */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (code_of(m, mid) & bit)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* Makes node `at` over prims [b, e) and fills its bounds. */
static void build(morton *m, size_t at, uint32_t b, uint32_t e)
{
    rb_bvh2_node *node = &m->tmp[at];
    if (e - b <= RB_BVH_LEAF) {
        for (int a = 0; a < 3; a++) {
            node->lo[a] = INFINITY;
            node->hi[a] = -INFINITY;
        }
        for (uint32_t i = b; i < e; i++)
            for (int a = 0; a < 3; a++) {
                const rb_bvh_prim *p = &m->prims[i];
                node->lo[a] = p->lo[a] < node->lo[a] ? p->lo[a] : node->lo[a];
                node->hi[a] = p->hi[a] > node->hi[a] ? p->hi[a] : node->hi[a];
            }
        node->first = b;
        node->count = e - b;
        return;
    }
    uint32_t mid = split_at(m, b, e);
    size_t pair = m->next;
    m->next += 2;
    build(m, pair, b, mid);
    build(m, pair + 1, mid, e);
    const rb_bvh2_node *l = &m->tmp[pair], *r = &m->tmp[pair + 1];
    node = &m->tmp[at];
    for (int a = 0; a < 3; a++) {
        node->lo[a] = l->lo[a] < r->lo[a] ? l->lo[a] : r->lo[a];
        node->hi[a] = l->hi[a] > r->hi[a] ? l->hi[a] : r->hi[a];
    }
    node->first = (uint32_t)pair;
    node->count = 0;
}

int rb_bvh_morton(const rb_allocator *alloc, const rb_bvh_prim *in,
                  rb_bvh_prim *out, size_t n, const float clo[3],
                  const float chi[3], rb_bvh2_node *tmp)
{
    uint64_t *keys = rb_alloc_with(alloc, 2 * n * sizeof *keys, 64);
    if (!keys)
        return RB_ENOMEM;
    make_keys(in, n, clo, chi, keys);
    sort_keys(keys, keys + n, n);
    for (size_t i = 0; i < n; i++)
        out[i] = in[(uint32_t)keys[i]];
    morton m = {keys, out, tmp, 1};
    build(&m, 0, 0, (uint32_t)n);
    rb_free_with(alloc, keys);
    return RB_OK;
}
