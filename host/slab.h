/*
 * slab.h - the exact rules (kernels/exact.h, shared with the OpenCL
 * kernels) for the C side, plus the preparation of the public ray records.
 * The CPU backend, the hierarchy and the tools include this file.
 *
 * This file and everything including it must be compiled without FMA
 * contraction (-ffp-contract=off): (b - o) * inv has to round twice, as it
 * does on every OpenCL device.
 */
#ifndef RB_SLAB_H
#define RB_SLAB_H

#include "exact.h"

static inline void rb_prep_ray3(const rb_ray *r, rb_ray_prep *p)
{
    *p = rb_prep_ray(r->origin[0], r->origin[1], r->origin[2], r->dir[0],
                     r->dir[1], r->dir[2], r->tmin, r->tmax);
}

/* A 2D ray is the 3D ray with z = 0 and dz = +0 (see rb_prep_ray). */
static inline void rb_prep_ray2(const rb_ray2 *r, rb_ray_prep *p)
{
    *p = rb_prep_ray(r->origin[0], r->origin[1], 0.0f, r->dir[0], r->dir[1],
                     0.0f, r->tmin, r->tmax);
}

#endif /* RB_SLAB_H */
