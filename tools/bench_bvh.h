/* bench_bvh.h - what raybox-bench-bvh's two halves (raybox, Embree) share:
 * the generated workload and the numbers each side reports. */
#ifndef RB_BENCH_BVH_H
#define RB_BENCH_BVH_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"

struct rb_pool;

typedef struct bench_side {
    double build_ms;        /* scene ready to query */
    double nearest_ms, any_ms;
    uint64_t nearest_hits, any_hits;
    double bytes_per_box;   /* boxes + hierarchy (Embree: its allocations) */
} bench_side;

/* Embree 3: one quad geometry, six quads per box, default build quality,
 * `threads` build threads; rays traced by the pool's threads with
 * rtcIntersect1 / rtcOccluded1, best of `repeat` runs. Returns 0, or -1
 * with a message. */
int bench_embree(struct rb_pool *pool, unsigned threads, int repeat,
                 const rb_box *boxes, size_t n_boxes, const rb_ray *rays,
                 size_t n_rays, bench_side *out, char *err, size_t err_len);

double bench_now_ms(void);

#endif
