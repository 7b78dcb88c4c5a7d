/* batch.h - random batches full of edge cases, one query runner for every
 * mode, and bitwise comparison of two backends' answers (the CPU backend
 * is the oracle). */
#ifndef RB_TEST_BATCH_H
#define RB_TEST_BATCH_H

#include "testutil.h"

/* Valid (R6) rays and boxes of `dims`: integer-aligned boxes (shared
 * planes, ties in t), flat and point boxes, duplicates; rays with origins
 * on planes, +0/-0 and subnormal direction components, zero directions,
 * finite and infinite ranges. */
typedef struct rbt_batch {
    unsigned dims;
    size_t n_rays, n_boxes;
    void *rays;  /* rb_ray or rb_ray2 */
    void *boxes; /* rb_box or rb_box2 */
} rbt_batch;

void rbt_batch_make(rbt_batch *b, unsigned dims, size_t n_rays,
                    size_t n_boxes, uint64_t seed);
void rbt_batch_free(rbt_batch *b);
/* Overwrites one coordinate of ray i (field as in rb_error.field). */
void rbt_batch_set_ray(rbt_batch *b, size_t i, int field, float v);
void rbt_batch_set_box(rbt_batch *b, size_t i, int field, float v);

/* The output arrays of one query of n rays. */
typedef struct rbt_out {
    size_t n;
    uint32_t max_hits;
    rb_hit *hits;
    uint8_t *any;
    uint32_t *counts;
    rb_list_hit *list;
    rb_run_info info;
} rbt_out;

void rbt_out_init(rbt_out *o, size_t n, uint32_t max_hits);
void rbt_out_free(rbt_out *o);

/* Runs `mode` on the batch (pairs: ray i against box i, needs n_boxes ==
 * n_rays) or, when scene is not NULL, on the scene. Returns the status;
 * o->info holds the run info. */
int rbt_run(rb_context *ctx, const rbt_batch *b, rb_mode mode,
            const rb_scene *scene, rbt_out *o);

/* Fails the test unless a and b hold bit-identical answers for mode
 * (all: counts, and the min(count, max_hits) valid list entries). */
void rbt_assert_same(rb_mode mode, const rbt_out *a, const rbt_out *b,
                     const char *what);

#endif
