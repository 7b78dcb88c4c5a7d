/*
 * exact.h - the exact rules of raybox, written once for both languages:
 * this header compiles as C11 (host/slab.h includes it for the CPU
 * backend, the hierarchy and the tools) and as OpenCL C (it is the first
 * text of the embedded kernel source, see CMakeLists.txt and
 * host/opencl/cl_program.c). Nothing here may differ between the two;
 * the prelude below maps the few names that do.
 *
 * What lives here: the record layouts shared with the kernels (answers,
 * prepared rays, hierarchy nodes), R7's flush, R8's reciprocal, the slab
 * step and the full slab test (R1-R5, R8), R6's predicates, the miss
 * record, the sorted insert of `all` lists, the shape tests of R12-R14
 * and the shape pass of one ray over a shape set. Vector forms (AVX2 in
 * host/cpu/scan_avx2.c and host/bvh/bvh_walk_avx2.c, float8 in the
 * kernels) restate the slab step lane-wise; the differential suites check
 * them against these scalar rules bit for bit.
 *
 * Numerics: compiled without FMA contraction (-ffp-contract=off in C,
 * FP_CONTRACT OFF below for OpenCL) and without any fast-math option:
 * (b - o) * inv must round twice, 1/(+-0) must be +-inf and NaN must
 * compare false, on every device.
 */
#ifndef RB_EXACT_H
#define RB_EXACT_H

/* ---- prelude: the names that differ ---------------------------------- */
#ifdef __OPENCL_VERSION__
#pragma OPENCL FP_CONTRACT OFF
typedef uchar rb_u8;
typedef uint rb_u32;
typedef int rb_i32;
typedef ulong rb_u64;
#define RB_FABS(x) fabs(x)
#define RB_COPYSIGN(x, y) copysign(x, y)
/* Arrays a kernel writes in place (answers, lists) are __global. */
#define RB_GLOBAL __global
/* Compile-time layout checks: C11 has _Static_assert, OpenCL C 1.2 has a
 * negative array size. */
#define RB_LAYOUT(cond, name) typedef char rb_layout_##name[(cond) ? 1 : -1]
#else
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "raybox.h"
typedef uint8_t rb_u8;
typedef uint32_t rb_u32;
typedef int32_t rb_i32;
typedef uint64_t rb_u64;
#define RB_FABS(x) fabsf(x)
#define RB_COPYSIGN(x, y) copysignf(x, y)
#define RB_GLOBAL
#define RB_LAYOUT(cond, name) _Static_assert(cond, #name)
#endif

/* ---- records --------------------------------------------------------- */

#ifdef __OPENCL_VERSION__
/* include/raybox.h's rb_hit and rb_list_hit, for the kernels; the C side
 * checks below pin raybox.h's definitions to the same bytes. */
typedef struct rb_hit {
    float t_enter;
    float t_exit;
    int box;
    uchar hit;
    uchar face;
    uchar exit_face;
    uchar reserved;
} rb_hit;

typedef struct rb_list_hit {
    int box;
    float t_enter;
    float t_exit;
} rb_list_hit;

#define RB_FACE_NONE 0
#else
RB_LAYOUT(offsetof(rb_hit, t_enter) == 0 && offsetof(rb_hit, t_exit) == 4 &&
              offsetof(rb_hit, box) == 8 && offsetof(rb_hit, hit) == 12 &&
              offsetof(rb_hit, face) == 13 &&
              offsetof(rb_hit, exit_face) == 14 &&
              offsetof(rb_hit, reserved) == 15,
          rb_hit_offsets);
RB_LAYOUT(offsetof(rb_list_hit, box) == 0 &&
              offsetof(rb_list_hit, t_enter) == 4 &&
              offsetof(rb_list_hit, t_exit) == 8,
          rb_list_hit_offsets);
#endif
RB_LAYOUT(sizeof(rb_hit) == 16, rb_hit_size);
RB_LAYOUT(sizeof(rb_list_hit) == 12, rb_list_hit_size);

/* A ray ready for slab tests: flushed origin, 1/dir, flushed range. Same
 * size as rb_ray, with dir replaced by its inverse. */
typedef struct rb_ray_prep {
    float o[3];
    float inv[3];
    float tmin;
    float tmax;
} rb_ray_prep;
RB_LAYOUT(sizeof(rb_ray_prep) == 32, rb_ray_prep_size);

/* The hierarchy's 8-wide node (host/bvh/bvh.h explains the tree), read by
 * the CPU walks as this struct and by kernels/bvh.cl as 64 words at the
 * offsets below. */
#define RB_BVH_WIDTH 8
typedef struct rb_bvh_node {
    float lo[3][RB_BVH_WIDTH];
    float hi[3][RB_BVH_WIDTH];
    rb_u32 child[RB_BVH_WIDTH]; /* box slot: original index; inner: node */
    rb_u32 boxes;               /* bit k: slot k is a box (a leaf) */
    /* Shape trees that hold boxes too (joint trees, bvh_shapes.c): bit k
     * set (with its bit in boxes) says leaf k is an axis-aligned box with
     * its exact corners, child[k] its id; the other leaves are shapes.
     * Always 0 in box trees and shape-only trees. */
    rb_u32 exact;
    rb_u32 pad[6];              /* always 0 */
} rb_bvh_node;

#define RB_NODE_WORDS 64
#define RB_NODE_LO 0
#define RB_NODE_HI 24
#define RB_NODE_CHILD 48
#define RB_NODE_BOXES 56
#define RB_NODE_EXACT 57
/* What a walk's tree holds (host/bvh/bvh_walk.inc, kernels/bvh.cl): boxes
 * (a box tree), bounded shapes (a shape tree; a joint tree's boxes are
 * skipped), or both (a joint tree, walked once for both). */
enum { RB_TREE_BOXES, RB_TREE_SHAPES, RB_TREE_JOINT };
RB_LAYOUT(sizeof(rb_bvh_node) == 4 * RB_NODE_WORDS, rb_bvh_node_size);
#ifndef __OPENCL_VERSION__
RB_LAYOUT(offsetof(rb_bvh_node, lo) == 4 * RB_NODE_LO &&
              offsetof(rb_bvh_node, hi) == 4 * RB_NODE_HI &&
              offsetof(rb_bvh_node, child) == 4 * RB_NODE_CHILD &&
              offsetof(rb_bvh_node, boxes) == 4 * RB_NODE_BOXES &&
              offsetof(rb_bvh_node, exact) == 4 * RB_NODE_EXACT,
          rb_bvh_node_offsets);
#endif

/* Shape trees' node tests pad a slot's exit (box trees need none: their
 * slots share the leaf test's operations) as in Ize 2013 / pbrt: exit *
 * (1 + 2 gamma_3), 1 + 3.58e-7 rounded up to 1 + 2^-21 so that the rounded
 * product still pads by at least 2 gamma_3; a negative exit is scaled by
 * the factor below 1 instead, so padding never shrinks it. */
#define RB_BVH_PAD_UP (1.0f + 4.0f * FLT_EPSILON)
#define RB_BVH_PAD_DOWN (1.0f - 4.0f * FLT_EPSILON)

/* ---- R7, R8: flush and reciprocal ------------------------------------ */

/* R7: subnormals become zero of the same sign. */
static inline float rb_flush(float x)
{
    return RB_FABS(x) < FLT_MIN ? RB_COPYSIGN(0.0f, x) : x;
}

/* R8: 1/d correctly rounded, never a reciprocal estimate; +0 and -0 give
 * +inf and -inf, which the slab test's sign choice relies on. A device
 * without correctly rounded float division but with fp64 (the host
 * defines RB_RECIP_VIA_DOUBLE for it) divides in double: 53 >= 2*24 + 2
 * bits make the double rounding exact, and 1/(+-0) is still +-inf. */
#if defined(__OPENCL_VERSION__) && defined(RB_RECIP_VIA_DOUBLE)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
static inline float rb_recip(float d)
{
    return (float)(1.0 / (double)d);
}
/* The same holds for a quotient and a square root computed in double and
 * rounded once to float (R13's divisions and sqrt). */
static inline float rb_div(float x, float y)
{
    return (float)((double)x / (double)y);
}
static inline float rb_sqrt(float x)
{
    return (float)sqrt((double)x);
}
#else
static inline float rb_recip(float d)
{
    return 1.0f / d;
}
static inline float rb_div(float x, float y)
{
    return x / y;
}
#ifdef __OPENCL_VERSION__
static inline float rb_sqrt(float x)
{
    return sqrt(x);
}
#else
static inline float rb_sqrt(float x)
{
    return sqrtf(x);
}
#endif
#endif

/* A ray's raw numbers, flushed, with 1/dir. A 2D ray is the 3D ray with
 * z = 0 and dz = +0: the z axis then never constrains it against a box
 * with z in [0, 0] (near and far are 0 * inf = NaN), so faces are only
 * x/y and t is unchanged. */
static inline rb_ray_prep rb_prep_ray(float ox, float oy, float oz, float dx,
                                      float dy, float dz, float tmin,
                                      float tmax)
{
    rb_ray_prep p;
    p.o[0] = rb_flush(ox);
    p.o[1] = rb_flush(oy);
    p.o[2] = rb_flush(oz);
    p.inv[0] = rb_recip(rb_flush(dx));
    p.inv[1] = rb_recip(rb_flush(dy));
    p.inv[2] = rb_recip(rb_flush(dz));
    p.tmin = rb_flush(tmin);
    p.tmax = rb_flush(tmax);
    return p;
}

/* SPEC section 9: the segment of a visibility pair, observer o to target
 * t, has origin o and direction t - o, one float32 subtraction per axis
 * of the raw (unflushed) coordinates, range [tmin, tmax]. The host's
 * explicit segments (host/visibility.c) and the kernels that make them in
 * work-items (kernels/visibility.cl) both take their numbers from here.
 * On a device without denormals a subnormal coordinate would be flushed
 * before the subtraction, which IEEE arithmetic does not do: the host
 * sends such points to the explicit segments instead. */
static inline float rb_segment_dir(float o, float t)
{
    return t - o;
}

/* The prepared ray of that segment (rb_prep_ray of its raw numbers). */
static inline rb_ray_prep rb_segment_prep(const float o[3], const float t[3],
                                          float tmin, float tmax)
{
    return rb_prep_ray(o[0], o[1], o[2], rb_segment_dir(o[0], t[0]),
                       rb_segment_dir(o[1], t[1]), rb_segment_dir(o[2], t[2]),
                       tmin, tmax);
}

/* ---- R6: what is refused --------------------------------------------- */
/* Written so that NaN fails: a comparison with NaN is false. Checked on
 * the raw numbers, in R7's order (flush first) where an order matters. */

/* Finite: false for NaN and +-inf. */
static inline int rb_finite(float x)
{
    return RB_FABS(x) <= FLT_MAX;
}

/* A ray's range: tmin finite, tmax neither NaN nor -inf, and flushed
 * tmin <= flushed tmax. */
static inline int rb_range_ok(float tmin, float tmax)
{
    return rb_finite(tmin) && tmax > -INFINITY &&
           rb_flush(tmin) <= rb_flush(tmax);
}

/* One axis of a box: both corners finite, flushed min <= flushed max. */
static inline int rb_extent_ok(float lo, float hi)
{
    return rb_finite(lo) && rb_finite(hi) && rb_flush(lo) <= rb_flush(hi);
}

/* ---- R1-R5, R8: the slab test ---------------------------------------- */

/* One axis of the slab test, with the ray's near and far planes of that
 * axis already chosen by the sign of inv (near = min when inv >= +0):
 * the entry e takes the near distance only when it is greater, the exit
 * x the far distance only when it is less. A NaN distance (0 * inf: the
 * origin on a plane of an axis the ray is parallel to) passes neither
 * comparison, which is exactly "this axis does not constrain the ray",
 * and strict comparisons let the lowest axis win ties (R3). Explicit
 * comparisons, never fmax/fmin, whose NaN rule differs. */
static inline void rb_slab_step(float near_plane, float far_plane, float o,
                                float inv, float *e, float *x)
{
    float n = (near_plane - o) * inv;
    float f = (far_plane - o) * inv;
    *e = n > *e ? n : *e;
    *x = f < *x ? f : *x;
}

/* The hit decision of the reduced test (e started at tmin, x at tmax):
 * a non-empty interval with a finite entry (R5). */
static inline int rb_slab_accept(float e, float x)
{
    return e <= x && e < INFINITY;
}

/* Plane a of `when` if s, else of `other`, for the slab test below. With
 * `spread` (a constant: the signs of s change from one call to the next,
 * as a ray's do in the local frames of turned shapes, R12) the host takes
 * it by bits: a branch there mispredicted half the time (obb walks took
 * 2-11% less CPU time without it; docs/benchmarks-shapes.md). Otherwise,
 * and in kernels, the plain choice: a ray's own signs are the same for
 * every box it meets, and predicted. */
#ifdef __OPENCL_VERSION__
#define RB_PICK(spread, s, when, other, a) ((s) ? (when)[a] : (other)[a])
#else
static inline float rb_pick_bits(int s, float when, float other)
{
    union { float f; rb_u32 u; } w, o;
    w.f = when;
    o.f = other;
    rb_u32 m = 0u - (rb_u32)(s != 0);
    w.u = (w.u & m) | (o.u & ~m);
    return w.f;
}
#define RB_PICK(spread, s, when, other, a)                                     \
    ((spread) ? rb_pick_bits((s), (when)[a], (other)[a])                      \
              : ((s) ? (when)[a] : (other)[a]))
#endif

/* Hit test only, with t_enter/t_exit: the form the every-box scans use.
 * Starting e at tmin and x at tmax gives the same values as clamping
 * afterwards (the comparisons ignore NaN planes either way). Reported
 * distances get "+ 0.0f": it turns -0 (from 0 * -inv, or a user's tmin of
 * -0) into +0 and changes nothing else, so t is never -0 on any path.
 * spread: see RB_PICK. */
static inline int rb_slab_hit_by(const rb_ray_prep *r, const float lo[3],
                                 const float hi[3], float *t_enter,
                                 float *t_exit, const int spread)
{
    float e = r->tmin, x = r->tmax;
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        rb_slab_step(RB_PICK(spread, s, hi, lo, a),
                     RB_PICK(spread, s, lo, hi, a), r->o[a], r->inv[a], &e,
                     &x);
    }
    *t_enter = e + 0.0f;
    *t_exit = x + 0.0f;
    return rb_slab_accept(e, x);
}

/* The same for a ray against boxes in its own frame. */
static inline int rb_slab_hit(const rb_ray_prep *r, const float lo[3],
                              const float hi[3], float *t_enter,
                              float *t_exit)
{
    return rb_slab_hit_by(r, lo, hi, t_enter, t_exit, 0);
}

/* The miss record: hit 0, box -1, both distances +inf, faces none. */
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

/* The full answer for one prepared ray and one box given by its flushed
 * corners: every field of *out except box. The entry face is the plane
 * that decides t_enter (1 + 2 * axis + (entered through max)), the exit
 * face likewise; none when tmin (tmax) decided instead. */
static inline void rb_slab_full(const rb_ray_prep *r, const float lo[3],
                                const float hi[3], rb_hit *out)
{
    float e = -INFINITY, x = INFINITY;
    rb_u8 ef = RB_FACE_NONE, xf = RB_FACE_NONE;
    /* Selects, not branches: a ray's signs and which plane decides are
     * unpredictable from one call to the next (as branches they cost the
     * hierarchy's nearest 1.7 mispredicts a ray); same values. */
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        float pl[2];
        pl[0] = lo[a];
        pl[1] = hi[a];
        float n = (pl[s] - r->o[a]) * r->inv[a];
        float f = (pl[1 - s] - r->o[a]) * r->inv[a];
#ifdef __OPENCL_VERSION__
        /* Kernels keep the plain selects: the masks below cost GPU
         * kernels registers (scripts/gpu-report.sh's occupancy limit). */
        int take_n = n > e, take_f = f < x;
        e = take_n ? n : e;
        ef = take_n ? (rb_u8)(1 + 2 * a + s) : ef;
        x = take_f ? f : x;
        xf = take_f ? (rb_u8)(2 + 2 * a - s) : xf;
#else
        /* Faces by masks, distances by the max/min idiom (maxss/minss
         * on x86: the same values, NaN included); GCC 12 turned the
         * ternaries that set both from one condition into branches. */
        rb_u8 mn = (rb_u8)(0u - (rb_u32)(n > e));
        rb_u8 mf = (rb_u8)(0u - (rb_u32)(f < x));
        ef = (rb_u8)((ef & ~mn) | ((1 + 2 * a + s) & mn));
        xf = (rb_u8)((xf & ~mf) | ((2 + 2 * a - s) & mf));
        e = n > e ? n : e;
        x = f < x ? f : x;
#endif
    }
    float t_enter = (e >= r->tmin ? e : r->tmin) + 0.0f;
    float t_exit = (x <= r->tmax ? x : r->tmax) + 0.0f;
    if (t_enter <= t_exit && t_enter < INFINITY) {
        out->hit = 1;
        out->t_enter = t_enter;
        out->t_exit = t_exit;
#ifdef __OPENCL_VERSION__
        out->face = e >= r->tmin ? ef : (rb_u8)RB_FACE_NONE;
        out->exit_face = x <= r->tmax ? xf : (rb_u8)RB_FACE_NONE;
#else
        /* Masks again (RB_FACE_NONE is 0): whether the origin lies in
         * the box is as unpredictable as the planes. */
        out->face = (rb_u8)(ef & (0u - (rb_u32)(e >= r->tmin)));
        out->exit_face = (rb_u8)(xf & (0u - (rb_u32)(x <= r->tmax)));
#endif
        out->reserved = 0;
    } else {
        int box = out->box;
        rb_hit_miss(out);
        out->box = box;
    }
}

/* ---- shapes beyond boxes (R11-R16) ---------------------------------- */
/* Prepared on the host (host/shapes.c: validation, double-precision
 * preparation, each value rounded once); every path tests them with the
 * functions below. Faces of spheres and planes are RB_FACE_SURFACE. */
#define RB_FACE_SURFACE_CODE 7
#ifndef __OPENCL_VERSION__
RB_LAYOUT(RB_FACE_SURFACE_CODE == RB_FACE_SURFACE, rb_face_surface);
#endif

/* A ray as given, flushed (R7): the form the shape tests read (they need
 * the direction itself, not its inverse). Same layout as rb_ray. */
typedef struct rb_ray_raw {
    float o[3];
    float d[3];
    float tmin;
    float tmax;
} rb_ray_raw;
RB_LAYOUT(sizeof(rb_ray_raw) == 32, rb_ray_raw_size);

static inline rb_ray_raw rb_raw_ray(float ox, float oy, float oz, float dx,
                                    float dy, float dz, float tmin,
                                    float tmax)
{
    rb_ray_raw w;
    w.o[0] = rb_flush(ox);
    w.o[1] = rb_flush(oy);
    w.o[2] = rb_flush(oz);
    w.d[0] = rb_flush(dx);
    w.d[1] = rb_flush(dy);
    w.d[2] = rb_flush(dz);
    w.tmin = rb_flush(tmin);
    w.tmax = rb_flush(tmax);
    return w;
}

/* The prepared ray of a flushed ray: rb_prep_ray of the same numbers
 * (rb_flush is idempotent, so nothing is flushed twice), for a kernel
 * that needs both forms without holding two copies of o, tmin, tmax. */
static inline rb_ray_prep rb_prep_raw(const rb_ray_raw *w)
{
    rb_ray_prep p; /* written out: PoCL leaves short loops rolled */
    p.o[0] = w->o[0];
    p.o[1] = w->o[1];
    p.o[2] = w->o[2];
    p.inv[0] = rb_recip(w->d[0]);
    p.inv[1] = rb_recip(w->d[1]);
    p.inv[2] = rb_recip(w->d[2]);
    p.tmin = w->tmin;
    p.tmax = w->tmax;
    return p;
}

/* obb and xbox (R12): the local box [lo, hi], the world point b and the
 * world->local matrix m (row-major 3x3). 18 floats. */
typedef struct rb_lbox {
    float lo[3];
    float hi[3];
    float b[3];
    float m[9];
} rb_lbox;
RB_LAYOUT(sizeof(rb_lbox) == 72, rb_lbox_size);

/* sphere (R13): center and radius. */
typedef struct rb_ball {
    float c[3];
    float r;
} rb_ball;
RB_LAYOUT(sizeof(rb_ball) == 16, rb_ball_size);

/* plane (R14): the half-space n.p <= d with |n| = 1 (rounded once). */
typedef struct rb_halfspace {
    float n[3];
    float d;
} rb_halfspace;
RB_LAYOUT(sizeof(rb_halfspace) == 16, rb_halfspace_size);

/* Dot products of sections 7-9: (x + y) + z in float32, no FMA. */
static inline float rb_dot3(float ax, float ay, float az, float bx, float by,
                            float bz)
{
    return (ax * bx + ay * by) + az * bz;
}

/* Shape records are read where they lie: RB_GLOBAL (device memory in a
 * kernel, any memory on the host). */

/* R12: the world ray in the box's local frame, as a ray ready for the
 * slab test. t keeps its meaning (the map is affine). */
static inline rb_ray_prep rb_lbox_local(const rb_ray_raw *w,
                                        RB_GLOBAL const rb_lbox *s)
{
    float q0 = w->o[0] - s->b[0], q1 = w->o[1] - s->b[1],
          q2 = w->o[2] - s->b[2];
    rb_ray_prep p;
    for (int i = 0; i < 3; i++) {
        float mx = s->m[3 * i], my = s->m[3 * i + 1], mz = s->m[3 * i + 2];
        p.o[i] = rb_flush(rb_dot3(mx, my, mz, q0, q1, q2));
        p.inv[i] = rb_recip(
            rb_flush(rb_dot3(mx, my, mz, w->d[0], w->d[1], w->d[2])));
    }
    p.tmin = w->tmin;
    p.tmax = w->tmax;
    return p;
}

static inline int rb_lbox_hit(const rb_ray_raw *w, RB_GLOBAL const rb_lbox *s,
                              float *t_enter, float *t_exit)
{
    rb_ray_prep p = rb_lbox_local(w, s);
    float lo[3] = {s->lo[0], s->lo[1], s->lo[2]};
    float hi[3] = {s->hi[0], s->hi[1], s->hi[2]};
    return rb_slab_hit_by(&p, lo, hi, t_enter, t_exit, 1);
}

/* Every field of *out but box; faces are the local ones. */
static inline void rb_lbox_full(const rb_ray_raw *w,
                                RB_GLOBAL const rb_lbox *s, rb_hit *out)
{
    rb_ray_prep p = rb_lbox_local(w, s);
    float lo[3] = {s->lo[0], s->lo[1], s->lo[2]};
    float hi[3] = {s->hi[0], s->hi[1], s->hi[2]};
    rb_slab_full(&p, lo, hi, out);
}

/* A solid's span [lo, hi] of the line clipped to [tmin, tmax] as in R2:
 * the answer for spheres and planes. An end is a surface face only when
 * it, not the ray's range, decides (an infinite end never does); a NaN
 * anywhere (an overflow of huge coordinates) is a miss. */
static inline void rb_span_answer(const rb_ray_raw *w, float lo, float hi,
                                  rb_hit *out)
{
    float t_enter = (lo >= w->tmin ? lo : w->tmin) + 0.0f;
    float t_exit = (hi <= w->tmax ? hi : w->tmax) + 0.0f;
    if (t_enter <= t_exit && t_enter < INFINITY && hi == hi && lo == lo) {
        out->hit = 1;
        out->t_enter = t_enter;
        out->t_exit = t_exit;
        out->face = lo >= w->tmin ? (rb_u8)RB_FACE_SURFACE_CODE
                                  : (rb_u8)RB_FACE_NONE;
        out->exit_face = hi <= w->tmax && hi < INFINITY
                             ? (rb_u8)RB_FACE_SURFACE_CODE
                             : (rb_u8)RB_FACE_NONE;
        out->reserved = 0;
    } else {
        int box = out->box;
        rb_hit_miss(out);
        out->box = box;
    }
}

/* R13, operation for operation: f = o - c, a = d.d, beta = -(f.d); a = 0
 * is a point test; else l = f + (beta / a) d, delta = r.r - l.l, and the
 * roots t0 = (f.f - r.r) / q, t1 = q / a with q = beta + copysign(
 * sqrt(a delta), beta) (no cancellation: both terms share a sign). */
static inline void rb_ball_full(const rb_ray_raw *w,
                                RB_GLOBAL const rb_ball *s, rb_hit *out)
{
    float f0 = w->o[0] - s->c[0], f1 = w->o[1] - s->c[1],
          f2 = w->o[2] - s->c[2];
    float a = rb_dot3(w->d[0], w->d[1], w->d[2], w->d[0], w->d[1], w->d[2]);
    float rr = s->r * s->r;
    float ff = rb_dot3(f0, f1, f2, f0, f1, f2);
    float lo = INFINITY, hi = -INFINITY; /* empty: a miss */
    if (a == 0.0f) {
        if (ff <= rr) {
            lo = -INFINITY;
            hi = INFINITY;
        }
    } else {
        float beta = -rb_dot3(f0, f1, f2, w->d[0], w->d[1], w->d[2]);
        float k = rb_div(beta, a);
        float l0 = f0 + k * w->d[0], l1 = f1 + k * w->d[1],
              l2 = f2 + k * w->d[2];
        float delta = rr - rb_dot3(l0, l1, l2, l0, l1, l2);
        if (delta >= 0.0f) {
            float q = beta + RB_COPYSIGN(rb_sqrt(a * delta), beta);
            float t0 = 0.0f, t1 = 0.0f;
            if (q != 0.0f) {
                t0 = rb_div(ff - rr, q);
                t1 = rb_div(q, a);
            }
            lo = t0 <= t1 ? t0 : t1;
            hi = t0 <= t1 ? t1 : t0;
            if (t0 != t0 || t1 != t1) { /* overflow: inf - inf */
                lo = INFINITY;
                hi = -INFINITY;
            }
        }
    }
    rb_span_answer(w, lo, hi, out);
}

/* R14: nd = n.dir, no = n.o; nd = 0: inside for every t when no <= d;
 * else t* = (d - no) / nd bounds the solid, from below when the ray
 * enters (nd < 0), from above when it leaves (nd > 0). */
static inline void rb_halfspace_full(const rb_ray_raw *w,
                                     RB_GLOBAL const rb_halfspace *s,
                                     rb_hit *out)
{
    float nd = rb_dot3(s->n[0], s->n[1], s->n[2], w->d[0], w->d[1], w->d[2]);
    float no = rb_dot3(s->n[0], s->n[1], s->n[2], w->o[0], w->o[1], w->o[2]);
    float lo = INFINITY, hi = -INFINITY;
    if (nd == 0.0f) {
        if (no <= s->d) {
            lo = -INFINITY;
            hi = INFINITY;
        }
    } else {
        float t = rb_div(s->d - no, nd);
        if (nd < 0.0f) {
            lo = t;
            hi = INFINITY;
        } else {
            lo = -INFINITY;
            hi = t;
        }
    }
    rb_span_answer(w, lo, hi, out);
}

/* ---- R10: `all` lists ------------------------------------------------ */

/* nearest's order (R10): whether a hit at t with id comes before the best
 * so far (best_t, best_id), i.e. the least (t_enter, id) wins. Every
 * path's nearest compares with this. */
static inline int rb_nearer(float t, rb_u32 id, float best_t, rb_u32 best_id)
{
    return t < best_t || (t == best_t && id < best_id);
}

/* Inserts (id, t_enter, t_exit) into a list sorted by (t_enter, id) that
 * holds *stored of at most cap entries; a full list drops what sorts last.
 * Ids may arrive in any order (the hierarchy walks visit them in tree
 * order), so the kept prefix is that of an index-ordered scan. Distances
 * are stored + 0.0f (never -0). */
static inline void rb_list_insert(RB_GLOBAL rb_list_hit *list,
                                  rb_u32 *stored, rb_u32 cap, rb_i32 id,
                                  float t_enter, float t_exit)
{
    rb_u32 n = *stored;
#define RB_BEFORE(p)                                                           \
    (t_enter < list[p].t_enter ||                                              \
     (t_enter == list[p].t_enter && id < list[p].box))
    if (n == cap && !RB_BEFORE(n - 1))
        return;
    rb_u32 pos = n < cap ? n : cap - 1;
    while (pos > 0 && RB_BEFORE(pos - 1)) {
        list[pos] = list[pos - 1];
        pos--;
    }
#undef RB_BEFORE
    list[pos].box = id;
    list[pos].t_enter = t_enter + 0.0f;
    list[pos].t_exit = t_exit + 0.0f;
    if (n < cap)
        *stored = n + 1;
}


/* ---- the shape pass, one ray (R10, R11) ------------------------------ */
/* The prepared shapes of a query or scene as every path reads them: shape
 * index j runs over the lboxes (obbs, then xboxes), the balls, the
 * half-spaces; its id is ids[j], or first_id + j when ids is null. Ids
 * ascend with j within each kind, so a lower j wins a tie within a kind;
 * across kinds the comparisons below use the ids. */
typedef struct rb_shape_view {
    RB_GLOBAL const rb_lbox *lbox;
    RB_GLOBAL const rb_ball *ball;
    RB_GLOBAL const rb_halfspace *hspace;
    RB_GLOBAL const rb_u32 *ids;
    rb_u32 n_lbox, n_ball, n_half;
    rb_u32 first_id;
} rb_shape_view;

static inline rb_u32 rb_shape_id(const rb_shape_view *v, rb_u32 j)
{
    return v->ids ? v->ids[j] : v->first_id + j;
}

/* Shape j's full answer (all fields but box). */
static inline void rb_shape_full(const rb_shape_view *v, rb_u32 j,
                                 const rb_ray_raw *w, rb_hit *h)
{
    if (j < v->n_lbox)
        rb_lbox_full(w, v->lbox + j, h);
    else if (j < v->n_lbox + v->n_ball)
        rb_ball_full(w, v->ball + (j - v->n_lbox), h);
    else
        rb_halfspace_full(w, v->hspace + (j - v->n_lbox - v->n_ball), h);
}

/* Shape j hit within the ray's range, with its t_enter and t_exit. */
static inline int rb_shape_hit(const rb_shape_view *v, rb_u32 j,
                               const rb_ray_raw *w, float *t_enter,
                               float *t_exit)
{
    if (j < v->n_lbox)
        return rb_lbox_hit(w, v->lbox + j, t_enter, t_exit);
    rb_hit h;
    h.box = -1;
    rb_shape_full(v, j, w, &h);
    *t_enter = h.t_enter;
    *t_exit = h.t_exit;
    return h.hit;
}

/* nearest over shapes [j0, j1): improves (*best_t, *best_id) by the least
 * (t_enter, id) and sets *best_j to the winner's index. */
static inline void rb_shape_scan_nearest(const rb_shape_view *v, rb_u32 j0,
                                     rb_u32 j1, const rb_ray_raw *w,
                                     float *best_t, rb_u32 *best_id,
                                     rb_u32 *best_j)
{
    for (rb_u32 j = j0; j < j1; j++) {
        float te, tx;
        if (!rb_shape_hit(v, j, w, &te, &tx))
            continue;
        rb_u32 id = rb_shape_id(v, j);
        if (rb_nearer(te, id, *best_t, *best_id)) {
            *best_t = te;
            *best_id = id;
            *best_j = j;
        }
    }
}

static inline int rb_shape_scan_any(const rb_shape_view *v, rb_u32 j0, rb_u32 j1,
                                const rb_ray_raw *w)
{
    float te, tx;
    for (rb_u32 j = j0; j < j1; j++)
        if (rb_shape_hit(v, j, w, &te, &tx))
            return 1;
    return 0;
}

static inline rb_u32 rb_shape_scan_count(const rb_shape_view *v, rb_u32 j0,
                                         rb_u32 j1, const rb_ray_raw *w)
{
    rb_u32 n = 0;
    float te, tx;
    for (rb_u32 j = j0; j < j1; j++)
        n += (rb_u32)rb_shape_hit(v, j, w, &te, &tx);
    return n;
}

/* all: every hit into the ray's list (*stored of cap entries); returns the
 * hits found. */
static inline rb_u32 rb_shape_scan_all(const rb_shape_view *v, rb_u32 j0,
                                   rb_u32 j1, const rb_ray_raw *w,
                                   RB_GLOBAL rb_list_hit *list,
                                   rb_u32 *stored, rb_u32 cap)
{
    rb_u32 n = 0;
    float te, tx;
    for (rb_u32 j = j0; j < j1; j++) {
        if (!rb_shape_hit(v, j, w, &te, &tx))
            continue;
        rb_list_insert(list, stored, cap, (rb_i32)rb_shape_id(v, j), te, tx);
        n++;
    }
    return n;
}

/* ---- the shape hierarchy's routes (R16) ------------------------------ */
/* Which rays walk the shape tree as built (host/bvh/bvh_shapes.c says
 * why): the tree is built only when every coordinate is within
 * RB_SHAPE_TREE_REACH of the origin; a ray whose origin or direction is
 * beyond it, or whose direction is below RB_SHAPE_DIR_MIN, is tested
 * against every shape (SCAN); of the others, one whose origin is within
 * the tree's cover takes the tree's slots as they are (FAST), one from
 * farther away needs its own widening on top (WIDE). w is the flushed
 * ray; the CPU walk and kernels/shapes.cl both route by this. */
#define RB_SHAPE_TREE_REACH 0x1p31f
#define RB_SHAPE_DIR_MIN 0x1p-60f
enum { RB_SHAPE_ROUTE_FAST, RB_SHAPE_ROUTE_WIDE, RB_SHAPE_ROUTE_SCAN };

static inline float rb_max_abs3(const float *v)
{
    float m = RB_FABS(v[0]);
    m = RB_FABS(v[1]) > m ? RB_FABS(v[1]) : m;
    return RB_FABS(v[2]) > m ? RB_FABS(v[2]) : m;
}

static inline int rb_shape_route(const rb_ray_raw *w, float cover)
{
    float o = rb_max_abs3(w->o), d = rb_max_abs3(w->d);
    if (!(o <= RB_SHAPE_TREE_REACH && d <= RB_SHAPE_TREE_REACH &&
          d >= RB_SHAPE_DIR_MIN))
        return RB_SHAPE_ROUTE_SCAN;
    return o <= cover ? RB_SHAPE_ROUTE_FAST : RB_SHAPE_ROUTE_WIDE;
}

/* Kernel arguments by position, named once: the kernels' parameter lists
 * follow these orders and the host (host/opencl/cl_run.c, cl_shapes.c)
 * sets arguments by these names. */

/* brute.cl and brute_wide.cl, rb_nearest/any/count/all (RB_SCAN_PARAMS);
 * a mode's unused outputs are null. */
enum rb_scan_arg {
    RB_SCARG_RAYS,
    RB_SCARG_DIMS,
    RB_SCARG_N_RAYS,
    RB_SCARG_BOXES,    /* six arrays of stride floats */
    RB_SCARG_STRIDE,
    RB_SCARG_NB,       /* boxes in this chunk */
    RB_SCARG_BOX_BASE, /* the chunk's first box */
    RB_SCARG_TILE,     /* __local */
    RB_SCARG_TILE_N,
    RB_SCARG_FIRST,    /* this chunk starts the answer */
    RB_SCARG_MAX_HITS,
    RB_SCARG_HITS,
    RB_SCARG_ANY,
    RB_SCARG_COUNTS,
    RB_SCARG_LISTS,
    RB_SCARG_RAY_BASE,
    RB_SCARG_BAD,
    RB_SCARG_COUNT
};

/* rb_pairs of both variants. */
enum rb_pairs_arg {
    RB_PAARG_RAYS,
    RB_PAARG_BOXES,
    RB_PAARG_DIMS,
    RB_PAARG_N,
    RB_PAARG_BASE,
    RB_PAARG_HITS,
    RB_PAARG_BAD,
    RB_PAARG_COUNT
};

/* bvh.cl, rb_bvh_nearest/any/count/all. */
enum rb_walk_arg {
    RB_WAARG_RAYS,
    RB_WAARG_DIMS,
    RB_WAARG_N_RAYS,
    RB_WAARG_NODES,
    RB_WAARG_ORDER,
    RB_WAARG_MAX_HITS,
    RB_WAARG_HITS,
    RB_WAARG_ANY,
    RB_WAARG_COUNTS,
    RB_WAARG_LISTS,
    RB_WAARG_RAY_BASE,
    RB_WAARG_BAD,
    RB_WAARG_COUNT
};

/* The words before the lists in a ray stream task's arena (bvh.cl's
 * rb_bvh_stream_kernel) of n rays and a pending stack of `stack`
 * entries: the prepared rays (8 words each), their answers (3 each:
 * any's or count's in the first; nearest's best t, id and slot), the
 * stack (3 words an entry). */
#define RB_STREAM_HEAD_WORDS(n, stack) (11 * (n) + 3 * (stack))

/* The words before the first task arena in a ray streams' launch: word 0
 * counts the tasks taken (the host zeroes it before the launch), the
 * rest keeps the arenas on 64-byte lines. */
#define RB_STREAM_ARENA_HEAD 16

/* bvh.cl, rb_bvh_stream_any/count/nearest (CPU devices' ray streams). */
enum rb_stream_arg {
    RB_STARG_RAYS,
    RB_STARG_DIMS,
    RB_STARG_N_RAYS,
    RB_STARG_NODES,
    RB_STARG_ORDER,
    RB_STARG_ANY,
    RB_STARG_COUNTS,
    RB_STARG_RAY_BASE,
    RB_STARG_BAD,
    RB_STARG_ARENA,      /* the task counter, then an arena an item */
    RB_STARG_TASK_RAYS,  /* rays a task (the last of a chunk may hold fewer) */
    RB_STARG_TASK_WORDS, /* an item's arena */
    RB_STARG_HITS,       /* nearest: rb_hit records */
    RB_STARG_COUNT
};

RB_LAYOUT(RB_SCARG_ANY == RB_SCARG_HITS + 1 &&
              RB_SCARG_COUNTS == RB_SCARG_HITS + 2 &&
              RB_SCARG_LISTS == RB_SCARG_HITS + 3 &&
              RB_WAARG_ANY == RB_WAARG_HITS + 1 &&
              RB_WAARG_COUNTS == RB_WAARG_HITS + 2 &&
              RB_WAARG_LISTS == RB_WAARG_HITS + 3,
          rb_outputs_follow_each_other);

/* shapes.cl, rb_shapes_*. */
enum rb_shape_arg {
    RB_SHARG_RAYS,     /* rb_ray records of the chunk */
    RB_SHARG_N_RAYS,
    RB_SHARG_LBOX,
    RB_SHARG_N_LBOX,
    RB_SHARG_BALL,
    RB_SHARG_N_BALL,
    RB_SHARG_HALF,
    RB_SHARG_N_HALF,
    RB_SHARG_IDS,      /* null: ids are first_id + j */
    RB_SHARG_FIRST_ID,
    RB_SHARG_HITS,     /* pairs, nearest: in (the box pass's) and out */
    RB_SHARG_ANY,
    RB_SHARG_COUNTS,
    RB_SHARG_LISTS,
    RB_SHARG_MAX_HITS,
    RB_SHARG_PAIR_BASE, /* pairs: the chunk's first ray, so its element */
    RB_SHARG_COUNT
};

/* shapes.cl, rb_shape_walk_*, rb_joint_walk_* and rb_shape_rest_*: the
 * shape tree's walk (a joint tree's: boxes too, no box pass before it)
 * and the launch after it, with the same arguments (the walks read no
 * planes, the rest no nodes nor order, only the joint walk BAD and
 * RAY_BASE). Leaves are the tree's records (rb_shapeset.leaves, a shape
 * slot's child indexes them) with their ids; planes are the set's
 * half-spaces with theirs (null: first id + p). Every ray tests every
 * plane. */
enum rb_shape_walk_arg {
    RB_SWARG_RAYS,      /* rb_ray records of the chunk */
    RB_SWARG_N_RAYS,
    RB_SWARG_NODES,     /* the tree's rb_bvh_node array */
    RB_SWARG_ORDER,     /* null: item k answers ray k */
    RB_SWARG_COVER,     /* rb_shapeset.cover (rb_shape_route) */
    RB_SWARG_LBOX,      /* leaves */
    RB_SWARG_N_LBOX,
    RB_SWARG_BALL,
    RB_SWARG_N_BALL,
    RB_SWARG_LEAF_IDS,
    RB_SWARG_HALF,      /* planes */
    RB_SWARG_N_HALF,
    RB_SWARG_HALF_IDS,  /* null: ids are HALF_FIRST + p */
    RB_SWARG_HALF_FIRST,
    RB_SWARG_HITS,      /* nearest: in (the box pass's) and out */
    RB_SWARG_ANY,
    RB_SWARG_COUNTS,
    RB_SWARG_LISTS,
    RB_SWARG_LEAF,      /* nearest: a uint a ray, the walk's leaf winner */
    RB_SWARG_MAX_HITS,
    RB_SWARG_BAD,       /* joint: the lowest invalid ray, as RB_SCARG_BAD */
    RB_SWARG_RAY_BASE,  /* joint: the chunk's first ray in the query */
    RB_SWARG_COUNT
};

/* visibility.cl, rb_vis_brute and rb_vis_bvh: one work-item per byte of
 * the answer, observer row0 + g / stride, targets 8 (g % stride) on. */
enum rb_vis_arg {
    RB_VIARG_OBSERVERS, /* 3 floats each, the whole array */
    RB_VIARG_TARGETS,   /* 3 floats each */
    RB_VIARG_N_TARGETS,
    RB_VIARG_ROW0,      /* the launch's first observer */
    RB_VIARG_ROWS,      /* observers in the launch */
    RB_VIARG_TMIN,
    RB_VIARG_TMAX,
    RB_VIARG_SCENE,     /* brute: six arrays of stride floats; bvh: nodes */
    RB_VIARG_STRIDE,    /* brute: floats per array */
    RB_VIARG_NB,        /* brute: boxes */
    RB_VIARG_BITS,      /* rows x stride bytes, row0's first */
    RB_VIARG_COUNT
};

/* ---- ray streams: packing eight lanes -------------------------------- */
/* The CPU streams (host/bvh/bvh_stream_avx2.c, and bvh.cl's
 * rb_stream_walk on CPU devices) pack the rays that enter a child eight
 * at a time: entry m of this table lists the lanes of the 8-bit mask m,
 * lowest first, one byte each (unused bytes 0), the permutation that
 * moves m's lanes to the front. RB_PACK_BELOW(m, b) counts m's bits
 * below bit b: lane b's place. The preprocessor builds the table:
 * `static const rb_u64 t[256] = {RB_PACK_LUT};` (__constant in a
 * kernel). */
#define RB_PACK_BIT(m, b) (((m) >> (b)) & 1u)
#define RB_PACK_LOW(m, b) ((m) & ((1u << (b)) - 1u))
#define RB_PACK_BELOW(m, b)                                                    \
    (RB_PACK_BIT(RB_PACK_LOW(m, b), 0) + RB_PACK_BIT(RB_PACK_LOW(m, b), 1) +   \
     RB_PACK_BIT(RB_PACK_LOW(m, b), 2) + RB_PACK_BIT(RB_PACK_LOW(m, b), 3) +   \
     RB_PACK_BIT(RB_PACK_LOW(m, b), 4) + RB_PACK_BIT(RB_PACK_LOW(m, b), 5) +   \
     RB_PACK_BIT(RB_PACK_LOW(m, b), 6))
#define RB_PACK_LANE(m, b)                                                     \
    (RB_PACK_BIT(m, b) ? (rb_u64)(b) << (8 * RB_PACK_BELOW(m, b)) : (rb_u64)0)
#define RB_PACK_ENTRY(m)                                                       \
    (RB_PACK_LANE(m, 0) | RB_PACK_LANE(m, 1) | RB_PACK_LANE(m, 2) |            \
     RB_PACK_LANE(m, 3) | RB_PACK_LANE(m, 4) | RB_PACK_LANE(m, 5) |            \
     RB_PACK_LANE(m, 6) | RB_PACK_LANE(m, 7))
#define RB_PACK_4(m)                                                           \
    RB_PACK_ENTRY(m), RB_PACK_ENTRY((m) + 1u), RB_PACK_ENTRY((m) + 2u),        \
        RB_PACK_ENTRY((m) + 3u)
#define RB_PACK_16(m)                                                          \
    RB_PACK_4(m), RB_PACK_4((m) + 4u), RB_PACK_4((m) + 8u), RB_PACK_4((m) + 12u)
#define RB_PACK_64(m)                                                          \
    RB_PACK_16(m), RB_PACK_16((m) + 16u), RB_PACK_16((m) + 32u),               \
        RB_PACK_16((m) + 48u)
#define RB_PACK_LUT                                                            \
    RB_PACK_64(0u), RB_PACK_64(64u), RB_PACK_64(128u), RB_PACK_64(192u)

#endif /* RB_EXACT_H */
