/*
 * bvh_refit.c - moved boxes keep the tree's shape: their new corners go
 * into the leaves and every node's bounds are recomputed bottom-up. The
 * SAH cost, recomputed after each refit, tells the scene when the tree
 * has degraded enough to be rebuilt.
 *
 * Children always sit at higher indices than their parent (bvh.h), so one
 * pass from the last node to the root sees every child before its parent;
 * the pass streams through memory backwards, which prefetchers handle.
 */
#include <string.h>

#include "bvh.h"

void rb_bvh_update(rb_bvh *bvh, const rb_boxset *boxes,
                   const uint32_t *indices, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint32_t i = indices[k];
        rb_bvh_prim *p = &bvh->prims[bvh->slot[i]];
        for (int a = 0; a < 3; a++) {
            p->lo[a] = rb_boxset_lo(boxes, a)[i];
            p->hi[a] = rb_boxset_hi(boxes, a)[i];
        }
    }
    rb_bvh_refit(bvh);
}

void rb_bvh_refit(rb_bvh *bvh)
{
    rb_bvh_node *nodes = bvh->nodes;
    for (size_t i = bvh->n_nodes; i-- > 0;) {
        if (i == 1)
            continue; /* the unused slot */
        rb_bvh_node *node = &nodes[i];
        float lo[3], hi[3];
        const float *blo, *bhi;
        size_t first = node->first, count = node->count;
        if (count) {
            blo = bvh->prims[first].lo;
            bhi = bvh->prims[first].hi;
        } else {
            blo = nodes[first].lo;
            bhi = nodes[first].hi;
            count = 2;
        }
        memcpy(lo, blo, sizeof lo);
        memcpy(hi, bhi, sizeof hi);
        for (size_t k = 1; k < count; k++) {
            if (node->count) {
                blo = bvh->prims[first + k].lo;
                bhi = bvh->prims[first + k].hi;
            } else {
                blo = nodes[first + k].lo;
                bhi = nodes[first + k].hi;
            }
            for (int a = 0; a < 3; a++) {
                lo[a] = blo[a] < lo[a] ? blo[a] : lo[a];
                hi[a] = bhi[a] > hi[a] ? bhi[a] : hi[a];
            }
        }
        memcpy(node->lo, lo, sizeof lo);
        memcpy(node->hi, hi, sizeof hi);
    }
    bvh->refits++;
    bvh->sah = rb_bvh_sah(bvh);
}

static double measure(const rb_bvh_node *n, int perimeter)
{
    double dx = (double)n->hi[0] - n->lo[0];
    double dy = (double)n->hi[1] - n->lo[1];
    double dz = (double)n->hi[2] - n->lo[2];
    return perimeter ? dx + dy + dz : dx * dy + dy * dz + dz * dx;
}

double rb_bvh_sah(const rb_bvh *bvh)
{
    if (!bvh->n_nodes)
        return 0;
    const rb_bvh_node *nodes = bvh->nodes;
    int perimeter = measure(&nodes[0], 0) <= 0;
    double root = measure(&nodes[0], perimeter);
    double sum = 0;
    for (size_t i = 0; i < bvh->n_nodes; i++) {
        if (i == 1)
            continue;
        /* A root of measure zero: every ray that reaches it sees all. */
        double m = root > 0 ? measure(&nodes[i], perimeter) / root : 1.0;
        sum += nodes[i].count ? RB_BVH_COST_BOX * nodes[i].count * m
                              : RB_BVH_COST_NODE * m;
    }
    return sum;
}
