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
 * together, so a child's index is always above its parent's (refit walks
 * the array backwards) and siblings share pages.
 */
#include <math.h>
#include <string.h>

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
        /* Only the root can be a leaf here: all its boxes. */
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

size_t rb_bvh_collapse(const rb_bvh2_node *bin, const rb_bvh_prim *prims,
                       rb_bvh_node *out, uint32_t *where, unsigned *depth)
{
    struct {
        uint32_t bin, wide, depth;
    } stack[RB_BVH_STACK + RB_BVH_WIDTH];
    int sp = 0;
    size_t next = 1;
    stack[sp].bin = 0;
    stack[sp].wide = 0;
    stack[sp++].depth = 1;
    *depth = 0;
    while (sp) {
        sp--;
        uint32_t b = stack[sp].bin, wi = stack[sp].wide;
        uint32_t d = stack[sp].depth;
        if (d > *depth)
            *depth = d;
        kid kids[RB_BVH_WIDTH];
        int n = gather(bin, b, kids);
        rb_bvh_node *w = out ? &out[wi] : NULL;
        if (w)
            memset(w, 0, sizeof *w);
        for (int k = 0; k < RB_BVH_WIDTH; k++) {
            if (k >= n) {
                if (w)
                    empty_slot(w, k);
                continue;
            }
            const rb_bvh2_node *c = &bin[kids[k].bin];
            int64_t prim = kids[k].prim;
            if (prim < 0 && c->count == 1)
                prim = c->first;
            const float *lo = c->lo, *hi = c->hi;
            uint32_t child;
            if (prim >= 0) {
                const rb_bvh_prim *p = &prims[prim];
                lo = p->lo;
                hi = p->hi;
                child = p->index;
                if (w) {
                    w->boxes |= 1u << k;
                    where[child] = wi * RB_BVH_WIDTH + (uint32_t)k;
                }
            } else {
                /* A subtree, or a leaf of several boxes that becomes a
                 * node of box slots when it is popped. */
                child = (uint32_t)next++;
                stack[sp].bin = kids[k].bin;
                stack[sp].wide = child;
                stack[sp++].depth = d + 1;
            }
            if (w) {
                for (int a = 0; a < 3; a++) {
                    w->lo[a][k] = lo[a];
                    w->hi[a][k] = hi[a];
                }
                w->child[k] = child;
            }
        }
    }
    return next;
}
