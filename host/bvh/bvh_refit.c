/*
 * bvh_refit.c - moved boxes keep the tree's shape: their new corners go
 * into their slots and every inner slot's bounds are recomputed
 * bottom-up. The SAH cost, summed on the way, tells the scene when the
 * tree has degraded enough to be rebuilt.
 *
 * Moved boxes are written to their slots through where[]. (Re-reading
 * every box slot from the box set during the pass instead was measured
 * slower even when every box moves: 1M boxes, ~100 ms against ~70 ms.)
 *
 * Children always sit at higher indices than their parent (bvh.h), so one
 * pass from the last node to the root sees every child before its parent,
 * streaming through memory; it measured faster (1M boxes: ~20 ms) than
 * refitting subtrees recursively on two threads (~35 ms), so it runs on
 * the calling thread.
 */
#include <math.h>
#include <string.h>

#include "bvh.h"

#define UPDATE_PREFETCH 16 /* slots fetched ahead: the writes scatter */

/* Union of a node's slots (empty slots add nothing). */
static void node_bounds(const rb_bvh_node *n, float lo[3], float hi[3])
{
    for (int a = 0; a < 3; a++) {
        float l = INFINITY, h = -INFINITY;
        for (int k = 0; k < RB_BVH_WIDTH; k++) {
            l = n->lo[a][k] < l ? n->lo[a][k] : l;
            h = n->hi[a][k] > h ? n->hi[a][k] : h;
        }
        lo[a] = l;
        hi[a] = h;
    }
}

/* The SAH cost from the root's bounds and the sums over inner slots:
 * every node but the root is the bounds of one inner slot. */
double rb_bvh_sah_of(const rb_bvh *bvh, const rb_bvh_sums *s)
{
    float lo[3], hi[3];
    rb_bvh_sums root = {0, 0};
    node_bounds(&bvh->nodes[0], lo, hi);
    rb_bvh_sums_add(&root, lo, hi);
    if (root.area > 0)
        return 1 + s->area / root.area;
    if (root.perimeter > 0)
        return 1 + s->perimeter / root.perimeter;
    /* Every box is one point: a ray reaching the root sees every node. */
    return (double)bvh->n_nodes;
}

void rb_bvh_refit(rb_bvh *bvh)
{
    rb_bvh_node *nodes = bvh->nodes;
    rb_bvh_sums total = {0, 0};
    for (size_t i = bvh->n_nodes; i-- > 0;) {
        rb_bvh_node *n = &nodes[i];
        for (int k = 0; k < RB_BVH_WIDTH; k++) {
            uint32_t c = n->child[k];
            if ((n->boxes >> k) & 1 || !c)
                continue; /* boxes are up to date; empty slots stay empty */
            float lo[3], hi[3];
            node_bounds(&nodes[c], lo, hi);
            for (int a = 0; a < 3; a++) {
                n->lo[a][k] = lo[a];
                n->hi[a][k] = hi[a];
            }
            rb_bvh_sums_add(&total, lo, hi);
        }
    }
    if (bvh->n_nodes) {
        bvh->refits++;
        bvh->sah = rb_bvh_sah_of(bvh, &total);
    }
}

void rb_bvh_update(rb_bvh *bvh, const rb_boxset *boxes, size_t first,
                   const uint32_t *indices, size_t n)
{
    if (!bvh->n_nodes)
        return;
    for (size_t j = 0; j < n; j++) {
        if (j + UPDATE_PREFETCH < n) {
            uint32_t w = bvh->where[first + indices[j + UPDATE_PREFETCH]];
            rb_bvh_node *ahead = &bvh->nodes[w / RB_BVH_WIDTH];
            __builtin_prefetch(&ahead->lo[0][w % RB_BVH_WIDTH], 1);
            __builtin_prefetch(&ahead->hi[0][w % RB_BVH_WIDTH], 1);
        }
        size_t i = first + indices[j];
        uint32_t w = bvh->where[i];
        rb_bvh_node *node = &bvh->nodes[w / RB_BVH_WIDTH];
        unsigned k = w % RB_BVH_WIDTH;
        for (int a = 0; a < 3; a++) {
            node->lo[a][k] = rb_boxset_lo(boxes, a)[i];
            node->hi[a][k] = rb_boxset_hi(boxes, a)[i];
        }
    }
    rb_bvh_refit(bvh);
}

void rb_bvh_bounds(const rb_bvh *bvh, float lo[3], float hi[3])
{
    if (bvh->n_nodes) {
        node_bounds(&bvh->nodes[0], lo, hi);
        return;
    }
    for (int a = 0; a < 3; a++) {
        lo[a] = INFINITY;
        hi[a] = -INFINITY;
    }
}
