/*
 * slab.h - the one slab formula (SPEC R1-R5, R8), shared by the scalar
 * reference, the CPU backend and the benchmark. kernels/slab.cl is its
 * OpenCL twin; both must stay operation-for-operation identical.
 *
 * Per axis a with s = signbit(inv[a]):
 *   near = (B[s][a]   - o[a]) * inv[a]      B[0] = min, B[1] = max
 *   far  = (B[1-s][a] - o[a]) * inv[a]
 * E (entry) takes near only when near > E, X (exit) takes far only when
 * far < X, axes in x, y, z order. A NaN (0 * inf: origin on a plane of an
 * axis the ray is parallel to) never passes either test, which is exactly
 * "that axis does not constrain the ray"; strict comparisons make the
 * lowest axis win ties (R3). A hit needs t_enter <= t_exit and a finite
 * t_enter (R5).
 *
 * Reported distances get "+ 0.0f": it turns -0 (from 0 * -inv, or a user's
 * tmin of -0) into +0 and changes nothing else, so that t is never -0 on any
 * path (the scans below start E at tmin and would keep +0 where the full
 * form keeps -0).
 *
 * This file must be compiled without FMA contraction (-ffp-contract=off):
 * (b - o) * inv has to round twice, as it does on every OpenCL device.
 */
#ifndef RB_SLAB_H
#define RB_SLAB_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "raybox.h"

/* A ray ready for slab tests: flushed origin, 1/dir, flushed range.
 * Same size and layout as rb_ray, with dir replaced by its inverse. */
typedef struct rb_ray_prep {
    float o[3];
    float inv[3];
    float tmin;
    float tmax;
} rb_ray_prep;

_Static_assert(sizeof(rb_ray_prep) == 32, "rb_ray_prep is 32 bytes");

/* R7: subnormals become zero of the same sign. */
static inline float rb_flush(float x)
{
    return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x;
}

/* 1/d correctly rounded: an IEEE division, never a reciprocal estimate.
 * +0 and -0 give +inf and -inf, which the sign selection below relies on. */
static inline void rb_prep_ray3(const rb_ray *r, rb_ray_prep *p)
{
    for (int a = 0; a < 3; a++) {
        p->o[a] = rb_flush(r->origin[a]);
        p->inv[a] = 1.0f / rb_flush(r->dir[a]);
    }
    p->tmin = rb_flush(r->tmin);
    p->tmax = rb_flush(r->tmax);
}

/* A 2D ray is the 3D ray with z = 0 and dz = +0: the z axis then never
 * constrains the ray against a box with z in [0, 0] (its near and far are
 * 0 * inf = NaN), so faces are only x/y and t is unchanged. */
static inline void rb_prep_ray2(const rb_ray2 *r, rb_ray_prep *p)
{
    for (int a = 0; a < 2; a++) {
        p->o[a] = rb_flush(r->origin[a]);
        p->inv[a] = 1.0f / rb_flush(r->dir[a]);
    }
    p->o[2] = 0.0f;
    p->inv[2] = INFINITY;
    p->tmin = rb_flush(r->tmin);
    p->tmax = rb_flush(r->tmax);
}

/* The full answer for one prepared ray and one box given by its flushed
 * corners. Writes every field of *out except box. */
static inline void rb_slab_full(const rb_ray_prep *r, const float lo[3],
                                const float hi[3], rb_hit *out)
{
    float e = -INFINITY, x = INFINITY;
    uint8_t ef = RB_FACE_NONE, xf = RB_FACE_NONE;
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        float nb = s ? hi[a] : lo[a];
        float fb = s ? lo[a] : hi[a];
        float n = (nb - r->o[a]) * r->inv[a];
        float f = (fb - r->o[a]) * r->inv[a];
        if (n > e) {
            e = n;
            ef = (uint8_t)(1 + 2 * a + s);
        }
        if (f < x) {
            x = f;
            xf = (uint8_t)(2 + 2 * a - s);
        }
    }
    float t_enter = (e >= r->tmin ? e : r->tmin) + 0.0f;
    float t_exit = (x <= r->tmax ? x : r->tmax) + 0.0f;
    int hit = t_enter <= t_exit && t_enter < INFINITY;
    out->reserved = 0;
    if (hit) {
        out->hit = 1;
        out->t_enter = t_enter;
        out->t_exit = t_exit;
        out->face = e >= r->tmin ? ef : RB_FACE_NONE;
        out->exit_face = x <= r->tmax ? xf : RB_FACE_NONE;
    } else {
        out->hit = 0;
        out->t_enter = INFINITY;
        out->t_exit = INFINITY;
        out->face = RB_FACE_NONE;
        out->exit_face = RB_FACE_NONE;
    }
}

/* Hit test only, with t_enter/t_exit: the reduced form the every-box scans
 * use. Starting E at tmin and X at tmax gives the same values as clamping
 * afterwards (max and min ignore the NaN planes either way). */
static inline int rb_slab_hit(const rb_ray_prep *r, const float lo[3],
                              const float hi[3], float *t_enter,
                              float *t_exit)
{
    float e = r->tmin, x = r->tmax;
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        float n = ((s ? hi[a] : lo[a]) - r->o[a]) * r->inv[a];
        float f = ((s ? lo[a] : hi[a]) - r->o[a]) * r->inv[a];
        e = n > e ? n : e;
        x = f < x ? f : x;
    }
    *t_enter = e + 0.0f;
    *t_exit = x + 0.0f;
    return e <= x && e < INFINITY;
}

static inline void rb_hit_miss(rb_hit *h)
{
    h->t_enter = INFINITY;
    h->t_exit = INFINITY;
    h->box = -1;
    h->hit = 0;
    h->face = RB_FACE_NONE;
    h->exit_face = RB_FACE_NONE;
    h->reserved = 0;
}

#endif /* RB_SLAB_H */
