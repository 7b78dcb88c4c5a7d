/*
 * blockers.h - `any` through a hierarchy with a short list of the boxes
 * that stopped recent walks, tested first. Rays that start near each other
 * and go the same way (one observer's segments to nearby targets, rays in
 * ray_order.h's order) are mostly stopped by the same few boxes, and one
 * exact box test costs a few nanoseconds against a walk's microsecond.
 *
 * The answer is the walk's: a box that rb_slab_hit hits on its flushed
 * corners (a box slot holds them exactly, bvh.h; the every-box scans'
 * test, which the walk equals: SPEC R9)
 * makes `any` 1 whichever path finds it, and a ray no listed box stops
 * is walked as before. Used by one thread at a time (a task's own list),
 * zero-initialised.
 */
#ifndef RB_CPU_BLOCKERS_H
#define RB_CPU_BLOCKERS_H

#include "../bvh/bvh.h"

#define RB_BLOCKERS 4

/* Lookups after which a list that answered fewer than one in
 * RB_BLOCKERS_RATE of them is given up for the rest of its rays (random
 * directions from nearby origins rarely share a box: then its tests
 * would only cost). */
#define RB_BLOCKERS_TRIAL 32
#define RB_BLOCKERS_RATE 4

typedef struct rb_blocker {
    float lo[3], hi[3]; /* its box slot's bounds: the flushed corners */
} rb_blocker;

typedef struct rb_blockers {
    rb_blocker box[RB_BLOCKERS]; /* the latest first */
    unsigned n;
    unsigned tries, hits; /* lookups of a non-empty list; answered */
    int off;              /* given up: plain walks */
} rb_blockers;

/* `any` of p over bvh. */
static inline int rb_blockers_any(rb_blockers *l, const rb_bvh *bvh,
                                  const rb_bvh_walkers *walk,
                                  const rb_ray_prep *p)
{
    if (l->off)
        return walk->any(bvh, p);
    unsigned c;
    int hit = 0;
    float te, tx;
    for (c = 0; c < l->n && !hit; c++)
        hit = rb_slab_hit(p, l->box[c].lo, l->box[c].hi, &te, &tx);
    if (l->n && ++l->tries <= RB_BLOCKERS_TRIAL) {
        l->hits += (unsigned)hit;
        if (l->tries == RB_BLOCKERS_TRIAL &&
            l->hits * RB_BLOCKERS_RATE < RB_BLOCKERS_TRIAL)
            l->off = 1;
    }
    rb_blocker b;
    if (hit) {
        c--;
        b = l->box[c];
    } else {
        uint32_t at = walk->any_box(bvh, p);
        if (at == UINT32_MAX)
            return 0;
        /* the node was just read: its slot, not the boxset, is cached */
        const rb_bvh_node *n = &bvh->nodes[at / RB_BVH_WIDTH];
        for (int a = 0; a < 3; a++) {
            b.lo[a] = n->lo[a][at % RB_BVH_WIDTH];
            b.hi[a] = n->hi[a][at % RB_BVH_WIDTH];
        }
        c = l->n < RB_BLOCKERS ? l->n++ : RB_BLOCKERS - 1;
    }
    for (; c > 0; c--)
        l->box[c] = l->box[c - 1];
    l->box[0] = b;
    return 1;
}

#endif
