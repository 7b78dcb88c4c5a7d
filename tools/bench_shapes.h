/* bench_shapes.h - what raybox-bench-shapes' two halves (raybox, Embree)
 * share: one scene of every kind in id order, the rays, and what each
 * Embree setup reports. */
#ifndef RB_BENCH_SHAPES_H
#define RB_BENCH_SHAPES_H

#include <stddef.h>
#include <stdint.h>

#include "bench_common.h"
#include "raybox.h"

struct rb_pool;
struct rb_shapeset;

/* A scene's elements: ids follow boxes ++ obbs ++ xboxes ++ spheres (the
 * concatenation of SPEC section 7). prep holds the same obbs, xboxes and
 * spheres as raybox prepares them (host/shapes.c's rb_shapeset_build) and
 * their conservative world boxes (the shape hierarchy's bounds), which the
 * Embree user geometries test and bound with. */
typedef struct bench_scene {
    const rb_box *boxes;
    size_t n_boxes;
    rb_shapes shapes;
    const struct rb_shapeset *prep;
} bench_scene;

/* The Embree setups of a figure. */
enum {
    EM_NATIVE = 0, /* boxes as 6 quads, obbs and xboxes as 12 triangles,
                      spheres as RTC_GEOMETRY_TYPE_SPHERE_POINT */
    EM_USER = 1,   /* one user geometry per kind whose callbacks run
                      kernels/exact.h's tests on the prepared records */
    EM_TRIS = 2,   /* as EM_NATIVE, but boxes as 12 triangles too */
    EM_SETUPS = 3
};

typedef struct em_result {
    int ok;
    char error[160];
    int quality;            /* RTC_BUILD_QUALITY_* of the figures below */
    /* rtcCommitScene: the median of `repeat` builds (2 * repeat + 1 with
     * a turn, below; the first, then rebuilds of the same scene after
     * rtcCommitGeometry of each geometry, which reuse its memory), and
     * the first alone. */
    double build_ms, cold_build_ms;
    double nearest_ms, any_ms; /* medians of `repeat` runs */
    /* Per ray: the nearest element's id (-1: none) and any (0/1). */
    int32_t *nearest_id;
    uint8_t *any;
    double bytes_per_element; /* Embree's allocations (memory monitor) */
    /* Optional, set by the caller: the other side's build, timed in turn
     * with Embree's. When set, each of 2 * repeat + 1 rounds (at most 64)
     * calls turn(turn_user), which returns its build's ms (< 0: failed,
     * no rounds taken), then commits Embree's; turn_speedup is the
     * median over the rounds of Embree's ms / the other's (0 if none).
     * Why: the two sides' builds timed minutes apart on a shared machine
     * moved the ratio by 1.3-2.4x between runs of one binary. */
    double (*turn)(void *turn_user);
    void *turn_user;
    double turn_speedup;
    /* Optional, the same for the traces: when set, each mode in
     * query_modes (bit 0 nearest, bit 1 any) runs 2 * repeat + 1 rounds
     * that call query_turn(turn_user, occluded) (the other side's
     * nearest, occluded 0, or any, 1: its ms, < 0 failed) before one
     * trace of Embree's, and query_speedup[occluded] is the median of
     * (Embree's ms + query_charge_ms) / the other's; that mode's ms is
     * then the median of those rounds' traces. The charge is a cost
     * Embree's figure bears (raybox's ray sort, for rays given in its
     * walk order). */
    double (*query_turn)(void *turn_user, int occluded);
    unsigned query_modes;
    double query_charge_ms;
    double query_speedup[2];
} em_result;

/* Gives out->nearest_id and out->any room for n rays (at least one
 * entry); 0, or -1 out of memory (bench_em_answers_give still frees what
 * was taken). */
int bench_em_answers_take(em_result *out, size_t n);
void bench_em_answers_give(em_result *out);

/* Builds the scene in Embree 3 as `setup` (EM_NATIVE, EM_USER, EM_TRIS) with build
 * quality `quality` (RTC_BUILD_QUALITY_*), scene flags NONE and `threads`
 * build threads (`repeat` times, out->build_ms), then traces every ray with
 * rtcIntersect1 / rtcOccluded1 on the pool (the threads raybox uses),
 * `repeat` times per mode: rays[k], or with an order rays[order[k]], as
 * the k-th (raybox's walks read their rays through their order the same
 * way, fetching ahead, with no sorted copy); the answers of the last run
 * go to out->nearest_id[k] / out->any[k] (arrays of n_rays the caller
 * owns). Returns 0, or -1 with out->error. */
int bench_embree_shapes(struct rb_pool *pool, unsigned threads, int repeat,
                        int setup, int quality, const bench_scene *sc,
                        const rb_ray *rays, const uint32_t *order,
                        size_t n_rays, em_result *out);


#endif
