/*
 * bvh_traverse.c - one ray through the hierarchy on the CPU: ordered
 * (nearer child first), stack based; nearest stops at nodes that start
 * past the best hit, any stops at the first hit, count and all visit every
 * leaf the ray overlaps.
 *
 * Why results equal brute force exactly (SPEC R9):
 * - Leaves test their boxes with rb_slab_hit/rb_slab_full, the formula
 *   the every-box scans use, so every reported value is the same.
 * - A node's bounds contain its boxes' bounds exactly (min/max only). The
 *   node test computes the same per-plane distances, (b - o) * inv, each
 *   correctly rounded; rounding is monotonic, so a node's entry is <= and
 *   its exit >= the exact values of any box inside. A NaN plane (0 * inf,
 *   origin on a plane of an axis the ray is parallel to) is skipped by the
 *   node test exactly as by the box test, and a box's NaN plane faces a
 *   node plane that is either the same (NaN too) or behind the origin
 *   (-inf entry / +inf exit), which does not constrain the node either.
 *   So a node is never rejected when a box inside it is hit.
 * - On top of that the node's exit is padded as in Ize 2013 / pbrt
 *   (exit * (1 + 2 gamma_3), rounded up; negative exits are scaled by
 *   1 - 2 gamma_3 so that padding never shrinks them), so the test stays
 *   conservative even if a future node kernel computes the distances with
 *   a different rounding (e.g. an FMA form), which brute force never does.
 * - nearest prunes a node only when its entry is strictly greater than
 *   the best t so far, and compares (t_enter, original index): a box tied
 *   with the best t and a lower index is still found (R10).
 * - all inserts by (t_enter, original index), so the kept prefix and its
 *   order are those of the index-ordered scan.
 */
#include <stddef.h>
#include <string.h>

#include "bvh.h"

/* 1 + 2 gamma_3 = 1 + 3.58e-7, rounded up to 1 + 2^-21 (and likewise
 * below 1), so that the rounded product still pads by at least 2 gamma_3. */
#define PAD_UP (1.0f + 4.0f * FLT_EPSILON)
#define PAD_DOWN (1.0f - 4.0f * FLT_EPSILON)

_Static_assert(offsetof(rb_bvh_node, lo) == offsetof(rb_bvh_prim, lo) &&
                   offsetof(rb_bvh_node, hi) == offsetof(rb_bvh_prim, hi),
               "nodes and prims share their plane offsets");

enum { WALK_NEAREST, WALK_ANY, WALK_COUNT, WALK_ALL };

/* A prepared ray plus, per axis, the byte offsets of its near and far
 * planes in a node or prim record (fixed by the sign of inv). */
typedef struct tray {
    rb_ray_prep r;
    unsigned near[3], far[3];
} tray;

typedef struct walk {
    float best_t;
    uint32_t best_i;
    const rb_bvh_prim *best;
    int found;
    uint32_t count;
    rb_list_hit *list;
    uint32_t cap, stored;
} walk;

static inline float plane(const void *rec, unsigned off)
{
    float v;
    memcpy(&v, (const char *)rec + off, sizeof v);
    return v;
}

static inline void tray_init(tray *t, const rb_ray_prep *r)
{
    t->r = *r;
    for (unsigned a = 0; a < 3; a++) {
        unsigned lo = (unsigned)offsetof(rb_bvh_node, lo) + 4 * a;
        unsigned hi = (unsigned)offsetof(rb_bvh_node, hi) + 4 * a;
        int s = signbit(r->inv[a]) ? 1 : 0;
        t->near[a] = s ? hi : lo;
        t->far[a] = s ? lo : hi;
    }
}

/* Conservative: 1 whenever some box inside n may be hit within
 * [tmin, limit]; *entry gets a lower bound of their t_enter. */
static inline int node_hit(const tray *t, const rb_bvh_node *n, float limit,
                           float *entry)
{
    float e = t->r.tmin, x = INFINITY;
    for (int a = 0; a < 3; a++) {
        float ne = (plane(n, t->near[a]) - t->r.o[a]) * t->r.inv[a];
        float fa = (plane(n, t->far[a]) - t->r.o[a]) * t->r.inv[a];
        e = ne > e ? ne : e;
        x = fa < x ? fa : x;
    }
    x *= x >= 0.0f ? PAD_UP : PAD_DOWN;
    x = x < limit ? x : limit;
    *entry = e;
    return e <= x && e < INFINITY;
}

static void list_put(walk *w, int32_t box, float te, float tx)
{
    rb_list_hit *list = w->list;
    uint32_t n = w->stored, cap = w->cap;
#define BEFORE(e) (te < (e).t_enter || (te == (e).t_enter && box < (e).box))
    if (n == cap && !BEFORE(list[n - 1]))
        return;
    uint32_t pos = n < cap ? n : cap - 1;
    while (pos > 0 && BEFORE(list[pos - 1])) {
        list[pos] = list[pos - 1];
        pos--;
    }
#undef BEFORE
    list[pos].box = box;
    list[pos].t_enter = te;
    list[pos].t_exit = tx;
    if (n < cap)
        w->stored = n + 1;
}

/* Exact tests of a leaf's boxes. Returns 1 when the walk can stop. */
static inline int leaf(const rb_bvh *bvh, const tray *t,
                       const rb_bvh_node *n, const int mode, walk *w)
{
    const rb_bvh_prim *p = &bvh->prims[n->first];
    for (uint32_t k = 0; k < n->count; k++, p++) {
        float te, tx;
        if (!rb_slab_hit(&t->r, p->lo, p->hi, &te, &tx))
            continue;
        switch (mode) {
        case WALK_NEAREST:
            if (te < w->best_t || (te == w->best_t && p->index < w->best_i)) {
                w->best_t = te;
                w->best_i = p->index;
                w->best = p;
            }
            break;
        case WALK_ANY:
            w->found = 1;
            return 1;
        case WALK_COUNT:
            w->count++;
            break;
        case WALK_ALL:
            w->count++;
            list_put(w, (int32_t)p->index, te, tx);
            break;
        }
    }
    return 0;
}

/* mode is a constant at every call site, so each mode gets its own
 * specialised loop. */
static inline __attribute__((always_inline)) void
walk_tree(const rb_bvh *bvh, const tray *t, const int mode, walk *w)
{
    const rb_bvh_node *nodes = bvh->nodes;
    struct {
        uint32_t node;
        float t;
    } stack[RB_BVH_STACK];
    int sp = 0;
    float t0, t1;
    if (!bvh->n_nodes || !node_hit(t, &nodes[0], t->r.tmax, &t0))
        return;
    uint32_t cur = 0;
    for (;;) {
        const rb_bvh_node *n = &nodes[cur];
        if (n->count) {
            if (leaf(bvh, t, n, mode, w))
                return;
        } else {
            float limit = t->r.tmax;
            if (mode == WALK_NEAREST && w->best_t < limit)
                limit = w->best_t;
            const rb_bvh_node *c = &nodes[n->first];
            int h0 = node_hit(t, c, limit, &t0);
            int h1 = node_hit(t, c + 1, limit, &t1);
            if (h0 & h1) {
                uint32_t near = n->first, far = near + 1;
                float tf = t1;
                if ((mode == WALK_NEAREST || mode == WALK_ANY) && t1 < t0) {
                    near = far;
                    far = n->first;
                    tf = t0;
                }
                stack[sp].node = far;
                stack[sp++].t = tf;
                cur = near;
                continue;
            }
            if (h0 | h1) {
                cur = n->first + (uint32_t)!h0;
                continue;
            }
        }
        for (;;) {
            if (sp == 0)
                return;
            sp--;
            if (mode != WALK_NEAREST || stack[sp].t <= w->best_t) {
                cur = stack[sp].node;
                break;
            }
        }
    }
}

void rb_bvh_nearest(const rb_bvh *bvh, const rb_ray_prep *r, rb_hit *out)
{
    tray t;
    tray_init(&t, r);
    walk w = {.best_t = INFINITY, .best_i = UINT32_MAX};
    walk_tree(bvh, &t, WALK_NEAREST, &w);
    if (!w.best) {
        rb_hit_miss(out);
        return;
    }
    rb_slab_full(r, w.best->lo, w.best->hi, out);
    out->box = (int32_t)w.best->index;
}

int rb_bvh_any(const rb_bvh *bvh, const rb_ray_prep *r)
{
    tray t;
    tray_init(&t, r);
    walk w = {0};
    walk_tree(bvh, &t, WALK_ANY, &w);
    return w.found;
}

uint32_t rb_bvh_count(const rb_bvh *bvh, const rb_ray_prep *r)
{
    tray t;
    tray_init(&t, r);
    walk w = {0};
    walk_tree(bvh, &t, WALK_COUNT, &w);
    return w.count;
}

uint32_t rb_bvh_all(const rb_bvh *bvh, const rb_ray_prep *r,
                    rb_list_hit *list, uint32_t cap)
{
    tray t;
    tray_init(&t, r);
    walk w = {.list = list, .cap = cap};
    walk_tree(bvh, &t, WALK_ALL, &w);
    return w.count;
}
