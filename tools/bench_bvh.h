/* bench_bvh.h - the numbers raybox-bench-bvh reports of each side. The
 * Embree side is bench_shapes_embree.c's (bench_shapes.h), shared with
 * raybox-bench-shapes. */
#ifndef RB_BENCH_BVH_H
#define RB_BENCH_BVH_H

#include <stddef.h>
#include <stdint.h>

#include "bench_common.h"
#include "raybox.h"

typedef struct bench_side {
    double build_ms;        /* scene ready to query */
    double nearest_ms, any_ms;
    uint64_t nearest_hits, any_hits;
    double bytes_per_box;   /* boxes + hierarchy (Embree: its allocations) */
} bench_side;

#endif
