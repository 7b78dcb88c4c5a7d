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
#include <stddef.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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

/* A slot's corners are read from an 8-word record with lo at words 0-2
 * and hi at words 4-6: a prim, a binary node, or this empty slot (which
 * no ray enters). */
_Static_assert(offsetof(rb_bvh_prim, lo) == 0 &&
                   offsetof(rb_bvh_prim, hi) == 4 * sizeof(float) &&
                   offsetof(rb_bvh2_node, lo) == 0 &&
                   offsetof(rb_bvh2_node, hi) == 4 * sizeof(float),
               "prims and binary nodes share the corners' layout");
static const float empty_corners[8] = {INFINITY,  INFINITY,  INFINITY,  0,
                                       -INFINITY, -INFINITY, -INFINITY, 0};

/* A wide node's slots as chosen, before it is stored. */
typedef struct node_slots {
    const float *corners[RB_BVH_WIDTH];
    uint32_t child[RB_BVH_WIDTH];
    uint32_t boxes;
} node_slots;

/* Slot k of node wi: kid becomes a box slot, or an inner slot pointing at
 * node `child`. */
static void choose_slot(node_slots *s, uint32_t wi, int k,
                        const rb_bvh2_node *bin, const rb_bvh_prim *prims,
                        const kid *kd, uint32_t child, uint32_t *where,
                        rb_bvh_sums *inner)
{
    const rb_bvh_prim *p = NULL;
    const rb_bvh2_node *c = NULL;
    if (kd->prim >= 0) {
        p = &prims[kd->prim];
    } else {
        c = &bin[kd->bin];
        if (c->count == 1)
            p = &prims[c->first];
    }
    if (p) {
        s->corners[k] = p->lo;
        s->child[k] = p->index;
        s->boxes |= 1u << k;
        where[p->index] = wi * RB_BVH_WIDTH + (uint32_t)k;
    } else {
        s->corners[k] = c->lo;
        s->child[k] = child;
        rb_bvh_sums_add(inner, c->lo, c->hi);
    }
}

/* Stores the node of slots [0, n) (the rest empty) at *to, 64-byte
 * aligned. With SSE2 the slots' corners are transposed four at a time
 * into the node's rows and streamed past the caches: a node is written
 * once here and read by later queries, and plain stores first read every
 * line in (with them, and the node assembled in place, this was a third
 * of a 100K-box build). Streamed stores must be fenced (fence_nodes)
 * before another thread reads them. */
static void store_node(rb_bvh_node *to, node_slots *s, int n)
{
    for (int k = n; k < RB_BVH_WIDTH; k++) {
        s->corners[k] = empty_corners;
        s->child[k] = 0;
    }
#ifdef __SSE2__
    for (int h = 0; h < RB_BVH_WIDTH; h += 4) {
        __m128 l0 = _mm_loadu_ps(s->corners[h]);
        __m128 l1 = _mm_loadu_ps(s->corners[h + 1]);
        __m128 l2 = _mm_loadu_ps(s->corners[h + 2]);
        __m128 l3 = _mm_loadu_ps(s->corners[h + 3]);
        __m128 h0 = _mm_loadu_ps(s->corners[h] + 4);
        __m128 h1 = _mm_loadu_ps(s->corners[h + 1] + 4);
        __m128 h2 = _mm_loadu_ps(s->corners[h + 2] + 4);
        __m128 h3 = _mm_loadu_ps(s->corners[h + 3] + 4);
        _MM_TRANSPOSE4_PS(l0, l1, l2, l3);
        _MM_TRANSPOSE4_PS(h0, h1, h2, h3);
        _mm_stream_ps(&to->lo[0][h], l0);
        _mm_stream_ps(&to->lo[1][h], l1);
        _mm_stream_ps(&to->lo[2][h], l2);
        _mm_stream_ps(&to->hi[0][h], h0);
        _mm_stream_ps(&to->hi[1][h], h1);
        _mm_stream_ps(&to->hi[2][h], h2);
        _mm_stream_si128((__m128i *)(void *)&to->child[h],
                         _mm_setr_epi32((int)s->child[h],
                                        (int)s->child[h + 1],
                                        (int)s->child[h + 2],
                                        (int)s->child[h + 3]));
    }
    /* boxes, then exact and the 6 words of padding, all 0 */
    _mm_stream_si128((__m128i *)(void *)&to->boxes,
                     _mm_cvtsi32_si128((int)s->boxes));
    _mm_stream_si128((__m128i *)(void *)&to->pad[2], _mm_setzero_si128());
#else
    memset(to, 0, sizeof *to);
    for (int k = 0; k < RB_BVH_WIDTH; k++) {
        for (int a = 0; a < 3; a++) {
            to->lo[a][k] = s->corners[k][a];
            to->hi[a][k] = s->corners[k][4 + a];
        }
        to->child[k] = s->child[k];
    }
    to->boxes = s->boxes;
#endif
}

static void fence_nodes(void)
{
#ifdef __SSE2__
    _mm_sfence();
#endif
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
    uint32_t first_prim[MAX_TASKS]; /* task t's prims: [first_prim, */
    size_t n_prims[MAX_TASKS];      /* first_prim + n_prims) */
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
    /* The nodes below reach the task's prims in no order the hardware
     * foresees, and most are in the other cores' caches (the gather that
     * wrote them ran in slices): fetch them all first. */
    const char *from = (const char *)&prims[c->first_prim[t]];
    for (size_t o = 0; o < c->n_prims[t] * sizeof *prims; o += 64)
        __builtin_prefetch(from + o);
    for (size_t i = 0; i < c->count[t]; i++) {
        const planned *p = plan_entry(c, t, i);
        uint32_t wi = base + (uint32_t)i;
        uint32_t child = base + p->first_child;
        node_slots slots = {.boxes = 0};
        for (int k = 0; k < p->n; k++) {
            /* the kid as gather() made it (a single's leaf is not read) */
            kid kd = p->singles >> k & 1 ? single(0, p->code[k])
                                         : (kid){p->code[k], -1, 0.0};
            choose_slot(&slots, wi, k, bin, prims, &kd,
                        is_node(bin, &kd) ? child++ : 0, c->where, &inner);
        }
        store_node(&c->out[wi], &slots, p->n);
    }
    fence_nodes(); /* before the pool reports the task done */
    c->inner[t] = inner;
}

/* The prims under binary node b: [first, end) (a subtree's leaves hold
 * consecutive prims, as both builders make them). */
static size_t prims_under(const rb_bvh2_node *bin, uint32_t b,
                          uint32_t *first)
{
    uint32_t l = b, r = b;
    while (bin[l].count == 0)
        l = bin[l].first;
    while (bin[r].count == 0)
        r = bin[r].first + 1;
    *first = bin[l].first;
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
        c.n_prims[t] = prims_under(bin, c.task_bin[t], &c.first_prim[t]);
        c.cap[t] = c.n_prims[t] - 1;
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
        node_slots slots = {.boxes = 0};
        for (int k = 0; k < top_n[j]; k++) {
            uint32_t child = 0;
            if (is_node(bin, &top[j][k]))
                child = j == 0 ? next_top++ : c.base[task++];
            choose_slot(&slots, (uint32_t)j, k, bin, prims, &top[j][k],
                        child, where, &sums);
        }
        store_node(&c.out[j], &slots, top_n[j]);
    }
    fence_nodes();
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
