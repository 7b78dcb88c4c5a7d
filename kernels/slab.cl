/*
 * slab.cl - the OpenCL twin of host/slab.h: the one slab formula (SPEC
 * R1-R5, R8), operation for operation. Keep the two files in step.
 *
 * Per axis a with s = signbit(inv[a]):
 *   near = (B[s][a]   - o[a]) * inv[a]      B[0] = min, B[1] = max
 *   far  = (B[1-s][a] - o[a]) * inv[a]
 * E takes near only when near > E, X takes far only when far < X, axes in
 * x, y, z order, so a NaN plane (0 * inf) never passes and the lowest axis
 * wins ties. Explicit comparisons, never fmax/fmin: their NaN rule differs
 * from the C code's and the results must be bit-identical.
 *
 * Reported distances get "+ 0.0f" (never -0), as in slab.h.
 *
 * Built with -cl-fp32-correctly-rounded-divide-sqrt where the device has
 * it (1/d must be the IEEE quotient) and never with a fast-math option:
 * the formula relies on 1/(+-0) = +-inf and on NaN comparing false.
 */
#pragma OPENCL FP_CONTRACT OFF

/* Same layout as rb_hit in include/raybox.h (16 bytes). */
typedef struct rb_hit {
    float t_enter;
    float t_exit;
    int box;
    uchar hit;
    uchar face;
    uchar exit_face;
    uchar reserved;
} rb_hit;

/* Same layout as rb_list_hit (12 bytes). */
typedef struct rb_list_hit {
    int box;
    float t_enter;
    float t_exit;
} rb_list_hit;

/* A ray ready for slab tests (rb_ray_prep). */
typedef struct rb_prep {
    float o[3];
    float inv[3];
    float tmin;
    float tmax;
} rb_prep;

#define RB_FACE_NONE 0

/* R7: subnormals become zero of the same sign, as the host flush does. */
static inline float rb_flush(float x)
{
    return fabs(x) < FLT_MIN ? copysign(0.0f, x) : x;
}

/* The correctly rounded 1/d. A device without correctly rounded float
 * division but with fp64 divides in double: 53 >= 2*24 + 2 bits make the
 * double rounding exact (the float result equals the directly rounded
 * quotient), and 1/(+-0) is still +-inf. */
#ifdef RB_RECIP_VIA_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
static inline float rb_recip(float d)
{
    return (float)(1.0 / (double)d);
}
#else
static inline float rb_recip(float d)
{
    return 1.0f / d;
}
#endif

/* Ray i of a raw array of rb_ray (dims 3, 8 floats) or rb_ray2 (dims 2, 6
 * floats). A 2D ray is the 3D ray with z = 0 and dz = +0 (rb_prep_ray2). */
static inline rb_prep rb_load_ray(__global const float *rays, uint dims,
                                  size_t i)
{
    rb_prep p;
    if (dims == 3) {
        __global const float *r = rays + i * 8;
        for (int a = 0; a < 3; a++) {
            p.o[a] = rb_flush(r[a]);
            p.inv[a] = rb_recip(rb_flush(r[3 + a]));
        }
        p.tmin = rb_flush(r[6]);
        p.tmax = rb_flush(r[7]);
    } else {
        __global const float *r = rays + i * 6;
        for (int a = 0; a < 2; a++) {
            p.o[a] = rb_flush(r[a]);
            p.inv[a] = rb_recip(rb_flush(r[2 + a]));
        }
        p.o[2] = 0.0f;
        p.inv[2] = INFINITY;
        p.tmin = rb_flush(r[4]);
        p.tmax = rb_flush(r[5]);
    }
    return p;
}

/* Box i of a raw array of rb_box (6 floats) or rb_box2 (4 floats), flushed;
 * a 2D box spans z in [0, 0] (rb_box_corners). */
static inline void rb_load_box(__global const float *boxes, uint dims,
                               size_t i, float lo[3], float hi[3])
{
    if (dims == 3) {
        __global const float *b = boxes + i * 6;
        for (int a = 0; a < 3; a++) {
            lo[a] = rb_flush(b[a]);
            hi[a] = rb_flush(b[3 + a]);
        }
    } else {
        __global const float *b = boxes + i * 4;
        for (int a = 0; a < 2; a++) {
            lo[a] = rb_flush(b[a]);
            hi[a] = rb_flush(b[2 + a]);
        }
        lo[2] = 0.0f;
        hi[2] = 0.0f;
    }
}

/* SPEC R6 after the R7 flush, rule for rule as host/validate.c: kernels
 * check every ray (and the pairs' boxes) as they load it and keep the
 * lowest invalid element in *bad, coded index * 2 (+ 1 for a box), so a
 * batch is read once and the host need not scan it first. An invalid
 * element's own answer is garbage; the host then reports RB_EINPUT. */
static inline int rb_finite(float x)
{
    return fabs(x) <= FLT_MAX; /* false for NaN and +-inf */
}

static inline int rb_ray_ok(__global const float *rays, uint dims, size_t i)
{
    uint fields = dims == 3 ? 6 : 4; /* origin and dir */
    __global const float *r = rays + i * (fields + 2);
    int ok = 1;
    for (uint f = 0; f < fields; f++)
        ok &= rb_finite(r[f]);
    float tmin = r[fields], tmax = r[fields + 1];
    /* tmax > -inf is false for NaN too */
    return ok && rb_finite(tmin) && tmax > -INFINITY &&
           rb_flush(tmin) <= rb_flush(tmax);
}

static inline int rb_box_ok(__global const float *boxes, uint dims,
                            size_t i)
{
    __global const float *b = boxes + i * 2 * dims;
    int ok = 1;
    for (uint a = 0; a < dims; a++)
        ok &= rb_finite(b[a]) & rb_finite(b[dims + a]) &
              (rb_flush(b[a]) <= rb_flush(b[dims + a]));
    return ok;
}

static inline void rb_note_bad(__global uint *bad, uint code)
{
    atomic_min(bad, code);
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

/* rb_slab_full: every field of *out except box. */
static inline void rb_slab_full(const rb_prep *r, const float lo[3],
                                const float hi[3], rb_hit *out)
{
    float e = -INFINITY, x = INFINITY;
    uchar ef = RB_FACE_NONE, xf = RB_FACE_NONE;
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        float nb = s ? hi[a] : lo[a];
        float fb = s ? lo[a] : hi[a];
        float n = (nb - r->o[a]) * r->inv[a];
        float f = (fb - r->o[a]) * r->inv[a];
        if (n > e) {
            e = n;
            ef = (uchar)(1 + 2 * a + s);
        }
        if (f < x) {
            x = f;
            xf = (uchar)(2 + 2 * a - s);
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
        out->face = e >= r->tmin ? ef : (uchar)RB_FACE_NONE;
        out->exit_face = x <= r->tmax ? xf : (uchar)RB_FACE_NONE;
    } else {
        out->hit = 0;
        out->t_enter = INFINITY;
        out->t_exit = INFINITY;
        out->face = RB_FACE_NONE;
        out->exit_face = RB_FACE_NONE;
    }
}

/* rb_slab_hit with the ray's planes already chosen: near[a] / far[a] are
 * the offsets (in floats) of the arrays this ray reads first / second in a
 * tile of six arrays (lo x y z, hi x y z). E starts at tmin and X at tmax,
 * which gives the same values as clamping afterwards. */
static inline int rb_tile_hit(const rb_prep *r, __local const float *tile,
                              const uint near[3], const uint far[3], uint k,
                              float *t_enter, float *t_exit)
{
    float e = r->tmin, x = r->tmax;
    for (int a = 0; a < 3; a++) {
        float n = (tile[near[a] + k] - r->o[a]) * r->inv[a];
        float f = (tile[far[a] + k] - r->o[a]) * r->inv[a];
        e = n > e ? n : e;
        x = f < x ? f : x;
    }
    *t_enter = e + 0.0f;
    *t_exit = x + 0.0f;
    return e <= x && e < INFINITY;
}
