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
#include <stdatomic.h>
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

static void set_bounds(rb_bvh_node *w, int k, const float lo[3],
                       const float hi[3])
{
    for (int a = 0; a < 3; a++) {
        w->lo[a][k] = lo[a];
        w->hi[a][k] = hi[a];
    }
}

/* Slot k of node w (number wi) becomes prim `prim`'s box slot. */
static void box_slot(rb_bvh_node *w, uint32_t wi, int k,
                     const rb_bvh_prim *prims, uint32_t prim,
                     uint32_t *where)
{
    const rb_bvh_prim *p = &prims[prim];
    set_bounds(w, k, p->lo, p->hi);
    w->child[k] = p->index;
    w->boxes |= 1u << k;
    where[p->index] = wi * RB_BVH_WIDTH + (uint32_t)k;
}

/* Writes slot k of node w (number wi): kid becomes a box slot, or an
 * inner slot pointing at node `child`. */
static void write_slot(rb_bvh_node *w, uint32_t wi, int k,
                       const rb_bvh2_node *bin, const rb_bvh_prim *prims,
                       const kid *kd, uint32_t child, uint32_t *where,
                       rb_bvh_sums *inner)
{
    const rb_bvh2_node *c = &bin[kd->bin];
    if (kd->prim >= 0)
        box_slot(w, wi, k, prims, (uint32_t)kd->prim, where);
    else if (c->count == 1)
        box_slot(w, wi, k, prims, c->first, where);
    else {
        set_bounds(w, k, c->lo, c->hi);
        w->child[k] = child;
        rb_bvh_sums_add(inner, c->lo, c->hi);
    }
}

/* 1 when kid becomes a node of its own (a subtree, or a leaf of several
 * boxes that was not opened into its parent). */
static int is_node(const rb_bvh2_node *bin, const kid *kd)
{
    return kd->prim < 0 && bin[kd->bin].count != 1;
}

/* A wide node as the first pass chose it, for the second to write
 * without choosing again: slot k is prim code[k] when bit k of singles
 * is set, else binary node code[k]; the node children among the slots
 * are numbered first_child, first_child + 1, ... (relative to the
 * subtree's first node). */
typedef struct planned {
    uint32_t code[RB_BVH_WIDTH];
    uint32_t first_child;
    uint8_t n, singles;
} planned;

/* The top two levels are collapsed on the calling thread; the subtrees
 * below them are planned, then written, in parallel, each into its own
 * range of node numbers (assigned in order, so the layout does not depend
 * on the thread count). */
#define MAX_TOP (1 + RB_BVH_WIDTH)
#define MAX_TASKS (RB_BVH_WIDTH * RB_BVH_WIDTH)
/* A task's plan is kept in chunks of this many nodes, taken from one
 * array as the task reaches them: the pages touched are about those the
 * nodes need, not each task's bound (huge pages would touch it all). */
#define PLAN_CHUNK 256
#define NO_CHUNK UINT32_MAX

typedef struct collapsing {
    const rb_bvh2_node *bin;
    const rb_bvh_prim *prims;
    rb_bvh_node *out;
    uint32_t *where;
    planned *plan;   /* chunks of PLAN_CHUNK nodes */
    uint32_t *chunk; /* task t's chunks from chunk_at[t], in node order */
    atomic_size_t next_chunk;
    size_t n_tasks;
    uint32_t task_bin[MAX_TASKS];
    size_t chunk_at[MAX_TASKS], cap[MAX_TASKS];
    uint32_t base[MAX_TASKS];
    size_t count[MAX_TASKS];
    unsigned depth[MAX_TASKS];
    rb_bvh_sums inner[MAX_TASKS]; /* task t's inner slots */
} collapsing;

/* Task t's node i (< cap[t]) in the plan; its chunk is taken on first
 * use (only task t writes its chunk list). */
static planned *plan_entry(collapsing *c, size_t t, size_t i)
{
    uint32_t *ch = &c->chunk[c->chunk_at[t] + i / PLAN_CHUNK];
    if (*ch == NO_CHUNK)
        *ch = (uint32_t)atomic_fetch_add_explicit(&c->next_chunk, 1,
                                                  memory_order_relaxed);
    return &c->plan[(size_t)*ch * PLAN_CHUNK + i % PLAN_CHUNK];
}

/* Plans the collapse of task t's binary subtree: its wide nodes are
 * numbered 0, 1, ... (children together, each above its parent) and
 * node i's choice is kept while i < cap[t] (a subtree over c prims has
 * at most c - 1 wide nodes, each having two slots or more). Sets the
 * count and the subtree's depth in wide levels. */
static void plan_task(void *arg, size_t t, unsigned worker)
{
    collapsing *c = arg;
    (void)worker;
    const rb_bvh2_node *bin = c->bin;
    struct {
        uint32_t bin, wide, depth;
    } stack[RB_BVH_STACK + RB_BVH_WIDTH];
    int sp = 0;
    size_t next = 1;
    unsigned depth = 0;
    stack[sp].bin = c->task_bin[t];
    stack[sp].wide = 0;
    stack[sp++].depth = 1;
    while (sp) {
        sp--;
        uint32_t wi = stack[sp].wide, d = stack[sp].depth;
        if (d > depth)
            depth = d;
        kid kids[RB_BVH_WIDTH];
        int n = gather(bin, stack[sp].bin, kids);
        planned *p = wi < c->cap[t] ? plan_entry(c, t, wi) : NULL;
        if (p) {
            p->n = (uint8_t)n;
            p->singles = 0;
            p->first_child = (uint32_t)next;
        }
        for (int k = 0; k < n; k++) {
            if (p) {
                p->code[k] = kids[k].prim >= 0 ? (uint32_t)kids[k].prim
                                               : kids[k].bin;
                p->singles |= (uint8_t)((kids[k].prim >= 0) << k);
            }
            if (is_node(bin, &kids[k])) {
                stack[sp].bin = kids[k].bin;
                stack[sp].wide = (uint32_t)next++;
                stack[sp++].depth = d + 1;
            }
        }
    }
    c->count[t] = next;
    c->depth[t] = depth;
}

/* Writes task t's planned nodes as nodes base[t], base[t] + 1, ... */
static void write_task(void *arg, size_t t, unsigned worker)
{
    collapsing *c = arg;
    (void)worker;
    const rb_bvh2_node *bin = c->bin;
    const rb_bvh_prim *prims = c->prims;
    uint32_t base = c->base[t];
    rb_bvh_sums inner = {0, 0};
    for (size_t i = 0; i < c->count[t]; i++) {
        const planned *p = plan_entry(c, t, i);
        uint32_t wi = base + (uint32_t)i;
        uint32_t child = base + p->first_child;
        rb_bvh_node *w = &c->out[wi];
        memset(w, 0, sizeof *w);
        for (int k = 0; k < RB_BVH_WIDTH; k++) {
            if (k >= p->n) {
                empty_slot(w, k);
                continue;
            }
            /* the kid as gather() made it (a single's leaf is not read) */
            kid kd = p->singles >> k & 1 ? single(0, p->code[k])
                                         : (kid){p->code[k], -1, 0.0};
            write_slot(w, wi, k, bin, prims, &kd,
                       is_node(bin, &kd) ? child++ : 0, c->where, &inner);
        }
    }
    c->inner[t] = inner;
}

/* The prims under binary node b: [first, end) (a subtree's leaves hold
 * consecutive prims, as both builders make them). */
static size_t prims_under(const rb_bvh2_node *bin, uint32_t b)
{
    uint32_t l = b, r = b;
    while (bin[l].count == 0)
        l = bin[l].first;
    while (bin[r].count == 0)
        r = bin[r].first + 1;
    return (size_t)bin[r].first + bin[r].count - bin[l].first;
}

int rb_bvh_collapse(struct rb_pool *pool, const rb_allocator *alloc,
                    struct rb_workmem *work, const rb_bvh2_node *bin,
                    const rb_bvh_prim *prims, uint32_t *where,
                    rb_bvh_node **out, size_t *n_nodes,
                    unsigned *depth, rb_bvh_sums *inner)
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

    /* Room for each task's bound (prims - 1) in chunks. */
    size_t chunks = 0;
    for (size_t t = 0; t < c.n_tasks; t++) {
        c.chunk_at[t] = chunks;
        c.cap[t] = prims_under(bin, c.task_bin[t]) - 1;
        chunks += c.cap[t] / PLAN_CHUNK + 1;
    }
    atomic_init(&c.next_chunk, 0);
    size_t plan_bytes = chunks * PLAN_CHUNK * sizeof *c.plan;
    if (c.n_tasks) {
        c.plan = rb_workmem_take(work, &plan_bytes);
        c.chunk = rb_alloc_with(alloc, chunks * sizeof *c.chunk, 64);
        if (!c.plan || !c.chunk) {
            rb_workmem_give(work, c.plan, plan_bytes);
            rb_free_with(alloc, c.chunk);
            return RB_ENOMEM;
        }
        memset(c.chunk, 0xff, chunks * sizeof *c.chunk); /* NO_CHUNK */
    }
    rb_pool_run(pool, c.n_tasks, plan_task, &c);
    size_t total = n_top;
    int rc = RB_OK;
    for (size_t t = 0; t < c.n_tasks; t++) {
        c.base[t] = (uint32_t)total;
        total += c.count[t];
        if (total > UINT32_MAX / RB_BVH_WIDTH)
            rc = RB_ENOMEM; /* where[] packs node * 8 + slot in 32 bits */
        if (c.count[t] > c.cap[t])
            rc = RB_EINVAL; /* a builder broke the consecutive prims */
    }
    if (rc == RB_OK) {
        c.out = rb_alloc_with(alloc, total * sizeof *c.out, 64);
        if (!c.out)
            rc = RB_ENOMEM;
    }
    if (rc != RB_OK) {
        rb_workmem_give(work, c.plan, plan_bytes);
        rb_free_with(alloc, c.chunk);
        return rc;
    }

    size_t task = 0;
    uint32_t next_top = 1;
    rb_bvh_sums sums = {0, 0};
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
                       where, &sums);
        }
    }
    rb_pool_run(pool, c.n_tasks, write_task, &c);
    rb_workmem_give(work, c.plan, plan_bytes);
    rb_free_with(alloc, c.chunk);
    /* Summed in task order: the cost does not depend on the threads. */
    for (size_t t = 0; t < c.n_tasks; t++) {
        if (c.depth[t] + 2 > *depth)
            *depth = c.depth[t] + 2;
        sums.area += c.inner[t].area;
        sums.perimeter += c.inner[t].perimeter;
    }
    *inner = sums;
    *out = c.out;
    *n_nodes = total;
    return RB_OK;
}
