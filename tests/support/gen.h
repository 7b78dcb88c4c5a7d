/* gen.h - ray and box generators for the differential suites: uniform
 * scenes and the hard cases of SPEC section 2 (faces, edges, corners,
 * axis-parallel rays with +-0, origins on planes, flat and point boxes,
 * huge, tiny and subnormal coordinates, zero directions, segments). */
#ifndef RB_GEN_H
#define RB_GEN_H

#include "testutil.h"

typedef enum rbt_shape {
    RBT_UNIFORM = 0,    /* random origins, directions and boxes */
    RBT_AIMED,          /* aimed exactly at box faces, edges, corners */
    RBT_PARALLEL,       /* +-0 direction components, origins on planes */
    RBT_FLAT,           /* flat and point boxes */
    RBT_EXTREME,        /* huge, tiny and subnormal values */
    RBT_DEGENERATE,     /* zero directions, tmin == tmax, inside origins */
    RBT_DYADIC,         /* small integers and powers of two: exact math */
    RBT_SHAPES
} rbt_shape;

const char *rbt_shape_name(int shape);

/* Fills boxes first, then rays aimed at them (3D records). */
void rbt_gen_boxes(rbt_rng *rng, int shape, rb_box *boxes, size_t n);
void rbt_gen_rays(rbt_rng *rng, int shape, const rb_box *boxes,
                  size_t n_boxes, rb_ray *rays, size_t n);

/* 2D copies of 3D records (z dropped). */
void rbt_to_2d_rays(const rb_ray *in, rb_ray2 *out, size_t n);
void rbt_to_2d_boxes(const rb_box *in, rb_box2 *out, size_t n);

#endif
