/*
 * bvh_collapse.c - the builder's binary tree becomes the 8-wide tree that
 * queries walk. Each wide node starts from the two children of a binary
 * node and keeps opening the child with the largest surface area (the one
 * most rays enter) while its slots allow: an inner child adds one slot, a
 * leaf of c boxes adds c - 1 (its boxes become box slots of this node).
 * An unopened leaf of several boxes becomes a wide node of box slots; a
 * single box is always a box slot. Bounds are copied, not recomputed, so
 * they stay exact unions of box corners.
 *
 * Wide nodes are numbered as they are created, the children of a node
 * together (except at the top, see below), so a child's index is always
 * above its parent's (refit walks the array backwards) and siblings share
 * pages.
 */
#include <math.h>
#include <string.h>

#include "../threadpool.h"
#include "bvh.h"

/* A candidate slot: binary node `bin`, or its prim `prim` alone. */
typedef struct kid {
    uint32_t bin;
    int64_t prim; /* -1: the whole binary node */
    double area;  /* of bin; -1 when it cannot be opened */
} kid;

static double area(const rb_bvh2_node *n)
{
    double dx = (double)n->hi[0] - n->lo[0];
    double dy = (double)n->hi[1] - n->lo[1];
    double dz = (double)n->hi[2] - n->lo[2];
    /* The perimeter term orders flat boxes, whose area is zero. */
    return dx * dy + dy * dz + dz * dx + (dx + dy + dz) * 1e-30;
}

static kid whole(const rb_bvh2_node *bin, uint32_t b)
{
    kid k = {b, -1, bin[b].count == 1 ? -1.0 : area(&bin[b])};
    return k;
}

static kid single(uint32_t b, uint32_t prim)
{
    kid k = {b, prim, -1.0};
    return k;
}

/* The slots of the wide node made from binary node b. */
static int gather(const rb_bvh2_node *bin, uint32_t b, kid kids[RB_BVH_WIDTH])
{
    int n = 0;
    if (bin[b].count) {
        /* A leaf that was not opened into its parent: all its boxes. */
        for (uint32_t j = 0; j < bin[b].count; j++)
            kids[n++] = single(b, bin[b].first + j);
        return n;
    }
    kids[n++] = whole(bin, bin[b].first);
    kids[n++] = whole(bin, bin[b].first + 1);
    for (;;) {
        int best = -1;
        double best_area = -1;
        for (int k = 0; k < n; k++) {
            if (kids[k].area <= best_area)
                continue;
            const rb_bvh2_node *c = &bin[kids[k].bin];
            int grows = c->count ? (int)c->count - 1 : 1;
            if (n + grows > RB_BVH_WIDTH)
                continue;
            best_area = kids[k].area;
            best = k;
        }
        if (best < 0)
            return n;
        const rb_bvh2_node *c = &bin[kids[best].bin];
        if (c->count) {
            uint32_t leaf = kids[best].bin;
            kids[best] = single(leaf, c->first);
            for (uint32_t j = 1; j < c->count; j++)
                kids[n++] = single(leaf, c->first + j);
        } else {
            kids[best] = whole(bin, c->first);
            kids[n++] = whole(bin, c->first + 1);
        }
    }
}

static void empty_slot(rb_bvh_node *w, int k)
{
    for (int a = 0; a < 3; a++) {
        w->lo[a][k] = INFINITY;
        w->hi[a][k] = -INFINITY;
    }
    w->child[k] = 0;
}

/* Writes slot k of node w (number wi): kid becomes a box slot, or an
 * inner slot pointing at node `child`. */
static void write_slot(rb_bvh_node *w, uint32_t wi, int k,
                       const rb_bvh2_node *bin, const rb_bvh_prim *prims,
                       const kid *kd, uint32_t child, uint32_t *where)
{
    const rb_bvh2_node *c = &bin[kd->bin];
    const float *lo = c->lo, *hi = c->hi;
    int64_t prim = kd->prim;
    if (prim < 0 && c->count == 1)
        prim = c->first;
    if (prim >= 0) {
        const rb_bvh_prim *p = &prims[prim];
        lo = p->lo;
        hi = p->hi;
        child = p->index;
        w->boxes |= 1u << k;
        where[child] = wi * RB_BVH_WIDTH + (uint32_t)k;
    }
    for (int a = 0; a < 3; a++) {
        w->lo[a][k] = lo[a];
        w->hi[a][k] = hi[a];
    }
    w->child[k] = child;
}

/* 1 when kid becomes a node of its own (a subtree, or a leaf of several
 * boxes that was not opened into its parent). */
static int is_node(const rb_bvh2_node *bin, const kid *kd)
{
    return kd->prim < 0 && bin[kd->bin].count != 1;
}

/* Collapses the binary subtree under b into nodes base, base + 1, ...
 * (only counts them when out is NULL). Returns the count; *depth gets
 * the subtree's depth in wide levels. */
static size_t collapse(const rb_bvh2_node *bin, const rb_bvh_prim *prims,
                       uint32_t b, uint32_t base, rb_bvh_node *out,
                       uint32_t *where, unsigned *depth)
{
    struct {
        uint32_t bin, wide, depth;
    } stack[RB_BVH_STACK + RB_BVH_WIDTH];
    int sp = 0;
    size_t next = (size_t)base + 1;
    stack[sp].bin = b;
    stack[sp].wide = base;
    stack[sp++].depth = 1;
    *depth = 0;
    while (sp) {
        sp--;
        uint32_t wi = stack[sp].wide, d = stack[sp].depth;
        if (d > *depth)
            *depth = d;
        kid kids[RB_BVH_WIDTH];
        int n = gather(bin, stack[sp].bin, kids);
        rb_bvh_node *w = out ? &out[wi] : NULL;
        if (w)
            memset(w, 0, sizeof *w);
        for (int k = 0; k < RB_BVH_WIDTH; k++) {
            if (k >= n) {
                if (w)
                    empty_slot(w, k);
                continue;
            }
            uint32_t child = 0;
            if (is_node(bin, &kids[k])) {
                child = (uint32_t)next++;
                stack[sp].bin = kids[k].bin;
                stack[sp].wide = child;
                stack[sp++].depth = d + 1;
            }
            if (w)
                write_slot(w, wi, k, bin, prims, &kids[k], child, where);
        }
    }
    return next - base;
}

/* The top two levels are collapsed on the calling thread; the subtrees
 * below them are counted, then filled, in parallel, each into its own
 * range of node numbers (assigned in order, so the layout does not depend
 * on the thread count). */
#define MAX_TOP (1 + RB_BVH_WIDTH)
#define MAX_TASKS (RB_BVH_WIDTH * RB_BVH_WIDTH)

typedef struct collapsing {
    const rb_bvh2_node *bin;
    const rb_bvh_prim *prims;
    rb_bvh_node *out;
    uint32_t *where;
    size_t n_tasks;
    uint32_t task_bin[MAX_TASKS];
    uint32_t base[MAX_TASKS];
    size_t count[MAX_TASKS];
    unsigned depth[MAX_TASKS];
} collapsing;

static void collapse_task(void *arg, size_t t, unsigned worker)
{
    collapsing *c = arg;
    (void)worker;
    c->count[t] = collapse(c->bin, c->prims, c->task_bin[t], c->base[t],
                           c->out, c->where, &c->depth[t]);
}

int rb_bvh_collapse(struct rb_pool *pool, const rb_allocator *alloc,
                    const rb_bvh2_node *bin, const rb_bvh_prim *prims,
                    uint32_t *where, rb_bvh_node **out, size_t *n_nodes,
                    unsigned *depth)
{
    collapsing c = {.bin = bin, .prims = prims, .where = where};
    /* Top nodes: the root (0) and its node children (1..), numbered in
     * slot order; their node children are the tasks. */
    kid top[MAX_TOP][RB_BVH_WIDTH];
    int top_n[MAX_TOP];
    uint32_t top_bin[MAX_TOP] = {0};
    size_t n_top = 1;
    top_n[0] = gather(bin, 0, top[0]);
    for (int k = 0; k < top_n[0]; k++) {
        if (is_node(bin, &top[0][k])) {
            top_bin[n_top] = top[0][k].bin;
            top_n[n_top] = gather(bin, top_bin[n_top], top[n_top]);
            n_top++;
        }
    }
    for (size_t j = 1; j < n_top; j++)
        for (int k = 0; k < top_n[j]; k++)
            if (is_node(bin, &top[j][k]))
                c.task_bin[c.n_tasks++] = top[j][k].bin;

    rb_pool_run(pool, c.n_tasks, collapse_task, &c);
    size_t total = n_top;
    for (size_t t = 0; t < c.n_tasks; t++) {
        c.base[t] = (uint32_t)total;
        total += c.count[t];
        if (total > UINT32_MAX / RB_BVH_WIDTH)
            return RB_ENOMEM; /* where[] packs node * 8 + slot in 32 bits */
    }
    c.out = rb_alloc_with(alloc, total * sizeof *c.out, 64);
    if (!c.out)
        return RB_ENOMEM;

    size_t task = 0;
    uint32_t next_top = 1;
    *depth = n_top > 1 ? 2 : 1;
    for (size_t j = 0; j < n_top; j++) {
        rb_bvh_node *w = &c.out[j];
        memset(w, 0, sizeof *w);
        for (int k = 0; k < RB_BVH_WIDTH; k++) {
            if (k >= top_n[j]) {
                empty_slot(w, k);
                continue;
            }
            uint32_t child = 0;
            if (is_node(bin, &top[j][k]))
                child = j == 0 ? next_top++ : c.base[task++];
            write_slot(w, (uint32_t)j, k, bin, prims, &top[j][k], child,
                       where);
        }
    }
    rb_pool_run(pool, c.n_tasks, collapse_task, &c);
    for (size_t t = 0; t < c.n_tasks; t++)
        if (c.depth[t] + 2 > *depth)
            *depth = c.depth[t] + 2;
    *out = c.out;
    *n_nodes = total;
    return RB_OK;
}
