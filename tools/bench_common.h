/* bench_common.h - what raybox-bench-bvh and raybox-bench-shapes share:
 * the clock, the median, the generator of their random workloads, and
 * their random rays, raybox's side of queries timed in turn, and the
 * Embree 3 side (bench_shapes.h). */
#ifndef RB_BENCH_COMMON_H
#define RB_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"

double bench_now_ms(void);
/* Sorts v[0..n) in ascending order. */
void bench_sort(double *v, int n);
/* The median of v[0..n) (sorts v); 0 for n <= 0. */
double bench_median(double *v, int n);
/* splitmix64, and a float in [0, 1) from its top 24 bits. */
uint64_t bench_rng_next(uint64_t *s);
float bench_uniform(uint64_t *s);

/* n rays from uniform points of the unit cube in uniform directions of
 * [-1, 1)^3, t in [0, inf): the random rays of both benchmarks. */
void bench_random_rays(uint64_t *s, rb_ray *r, size_t n);

/* The rays in raybox's walk order for nearest and any (origins on a
 * Morton curve over the box lo..hi, host/cpu/ray_order.h) in order[];
 * the median time of `repeat` sorts in *ms, to be charged to the side
 * that needs the order given: the sort alone, on the context's pool, as
 * raybox's walks pay it. With sorted (may be NULL), sorted[i] =
 * rays[order[i]] too, outside the time. 0, or -1 out of memory. */
int bench_walk_order(rb_context *ctx, int repeat, const rb_ray *rays,
                     size_t n, const float lo[3], const float hi[3],
                     rb_ray *sorted, uint32_t *order, double *ms);

/* The rounds of a figure timed in turn with Embree's: 2 * repeat + 1,
 * at most BENCH_TURN_ROUNDS_MAX (the size of the rounds' arrays). */
#define BENCH_TURN_ROUNDS_MAX 64
int bench_turn_rounds(int repeat);

/* Sets *res to capacity n with nearest and any answers (arrays of at
 * least one entry); 0, or -1 out of memory (bench_results_give still
 * frees what was taken). */
int bench_results_take(rb_results *res, size_t n);
void bench_results_give(rb_results *res);

/* raybox's side of a query timed in turn with Embree's traces
 * (em_result.query_turn in bench_shapes.h): bench_query_turn(side,
 * occluded) runs one rb_intersect of side->scene, nearest (occluded 0)
 * or any (1), over side->rays into side->res, and returns its ms (< 0 if
 * it failed). */
typedef struct bench_query_side {
    rb_context *ctx;
    const rb_scene *scene;
    const rb_ray *rays;
    size_t n;
    rb_results *res;
} bench_query_side;

double bench_query_turn(void *side, int occluded);

#endif
