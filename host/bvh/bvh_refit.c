/*
 * bvh_refit.c - moved boxes keep the tree's shape: their new corners go
 * into their slots and every inner slot's bounds are recomputed
 * bottom-up. The SAH cost, recomputed after each refit, tells the scene
 * when the tree has degraded enough to be rebuilt.
 *
 * Children always sit at higher indices than their parent (bvh.h), so one
 * pass from the last node to the root sees every child before its parent,
 * streaming through memory backwards.
 */
#include <math.h>
#include <string.h>

#include "bvh.h"

void rb_bvh_update(rb_bvh *bvh, const rb_boxset *boxes,
                   const uint32_t *indices, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        uint32_t i = indices[j];
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

void rb_bvh_refit(rb_bvh *bvh)
{
    rb_bvh_node *nodes = bvh->nodes;
    for (size_t i = bvh->n_nodes; i-- > 0;) {
        rb_bvh_node *n = &nodes[i];
        for (int k = 0; k < RB_BVH_WIDTH; k++) {
            if ((n->boxes >> k) & 1 || !n->child[k])
                continue; /* boxes are up to date; empty stays empty */
            float lo[3], hi[3];
            node_bounds(&nodes[n->child[k]], lo, hi);
            for (int a = 0; a < 3; a++) {
                n->lo[a][k] = lo[a];
                n->hi[a][k] = hi[a];
            }
        }
    }
    bvh->refits++;
    bvh->sah = rb_bvh_sah(bvh);
}

static double measure(const float lo[3], const float hi[3], int perimeter)
{
    double dx = (double)hi[0] - lo[0];
    double dy = (double)hi[1] - lo[1];
    double dz = (double)hi[2] - lo[2];
    return perimeter ? dx + dy + dz : dx * dy + dy * dz + dz * dx;
}

double rb_bvh_sah(const rb_bvh *bvh)
{
    if (!bvh->n_nodes)
        return 0;
    const rb_bvh_node *nodes = bvh->nodes;
    float lo[3], hi[3];
    node_bounds(&nodes[0], lo, hi);
    int perimeter = measure(lo, hi, 0) <= 0;
    double root = measure(lo, hi, perimeter);
    double sum = 0;
    for (size_t i = 0; i < bvh->n_nodes; i++) {
        node_bounds(&nodes[i], lo, hi);
        /* A root of measure zero: every ray that reaches it sees all. */
        sum += root > 0 ? measure(lo, hi, perimeter) / root : 1.0;
    }
    return sum;
}
