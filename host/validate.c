/*
 * validate.c - SPEC R6 (invalid input is refused) after R7 (subnormals are
 * flushed). The checks are written so that NaN fails them: a comparison
 * with NaN is false, so "|x| <= FLT_MAX" means finite and "tmax > -inf"
 * means neither NaN nor -inf.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"


/* The checks below work on magnitude bits: NaN and +-inf have the largest
 * magnitudes as integers, so one integer max over a record's fields and
 * one compare tell "all finite" without branches, and a block of records
 * is checked without a branch per record (the compiler can vectorise it);
 * only a block with a bad record is searched record by record. */
static inline uint32_t mag_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u & 0x7fffffffu;
}

static inline uint32_t max_u32(uint32_t a, uint32_t b)
{
    return a > b ? a : b;
}

#define INF_BITS 0x7f800000u
#define MIN_NORMAL_BITS 0x00800000u

/* flush(a) <= flush(b) (R7 before R6) without flushing: a flush moves a
 * subnormal to a zero of its sign, which keeps its order against every
 * normal number, so the two orders differ only when both are tiny (and
 * then the flushed values are zeros: equal). NaNs compare false either
 * way. */
static inline int flushed_le(float a, float b)
{
    return (a <= b) | (max_u32(mag_bits(a), mag_bits(b)) < MIN_NORMAL_BITS);
}

/* tmin finite (in m), tmax neither NaN nor -inf, flushed tmin <= tmax. */
static inline int range_ok_bits(float tmin, float tmax)
{
    return (mag_bits(tmax) <= INF_BITS) & (tmax != -INFINITY) &
           flushed_le(tmin, tmax);
}

static inline int range_ok(float tmin, float tmax)
{
    return rb_finite(tmin) && range_ok_bits(tmin, tmax);
}

static inline int ray3_ok(const rb_ray *r)
{
    uint32_t m = mag_bits(r->tmin);
    for (int a = 0; a < 3; a++)
        m = max_u32(m, max_u32(mag_bits(r->origin[a]), mag_bits(r->dir[a])));
    return (m < INF_BITS) & range_ok_bits(r->tmin, r->tmax);
}

static inline int ray2_ok(const rb_ray2 *r)
{
    uint32_t m = mag_bits(r->tmin);
    for (int a = 0; a < 2; a++)
        m = max_u32(m, max_u32(mag_bits(r->origin[a]), mag_bits(r->dir[a])));
    return (m < INF_BITS) & range_ok_bits(r->tmin, r->tmax);
}

static inline int box_ok(const float *lo, const float *hi, int axes)
{
    uint32_t m = 0;
    int ordered = 1;
    for (int a = 0; a < axes; a++) {
        m = max_u32(m, max_u32(mag_bits(lo[a]), mag_bits(hi[a])));
        ordered &= flushed_le(lo[a], hi[a]);
    }
    return (m < INF_BITS) & ordered;
}

#define CHECK_BLOCK 64

/* The first i in [begin, end) with !OK(i): blocks of CHECK_BLOCK records
 * are checked without branching, a failed block record by record. */
#define FIND_FIRST_BAD(OK, begin, end)                                             do {                                                                               for (size_t b0 = (begin); b0 < (end); b0 += CHECK_BLOCK) {                         size_t b1 = b0 + CHECK_BLOCK < (end) ? b0 + CHECK_BLOCK : (end);               int all = 1;                                                                   for (size_t i = b0; i < b1; i++)                                                   all &= OK(i);                                                              if (all)                                                                           continue;                                                                  for (size_t i = b0; i < b1; i++)                                                   if (!OK(i))                                                                        return i;                                                          }                                                                              return (end);                                                              } while (0)

size_t rb_check_rays(const void *rays, unsigned dims, size_t begin,
                     size_t end)
{
    if (dims == 3) {
        const rb_ray *r = rays;
#define RAY3_OK(i) ray3_ok(&r[i])
        FIND_FIRST_BAD(RAY3_OK, begin, end);
#undef RAY3_OK
    }
    const rb_ray2 *r = rays;
#define RAY2_OK(i) ray2_ok(&r[i])
    FIND_FIRST_BAD(RAY2_OK, begin, end);
#undef RAY2_OK
}

size_t rb_check_boxes(const void *boxes, unsigned dims, size_t begin,
                      size_t end)
{
    if (dims == 3) {
        const rb_box *b = boxes;
#define BOX3_OK(i) box_ok(b[i].min, b[i].max, 3)
        FIND_FIRST_BAD(BOX3_OK, begin, end);
#undef BOX3_OK
    }
    const rb_box2 *b = boxes;
#define BOX2_OK(i) box_ok(b[i].min, b[i].max, 2)
    FIND_FIRST_BAD(BOX2_OK, begin, end);
#undef BOX2_OK
}

size_t rb_prep_rays(const void *rays, unsigned dims, size_t begin,
                    size_t end, rb_ray_prep *out)
{
    if (dims == 3) {
        const rb_ray *r = rays;
        for (size_t i = begin; i < end; i++) {
            if (!ray3_ok(&r[i]))
                return i;
            rb_prep_ray3(&r[i], &out[i - begin]);
        }
    } else {
        const rb_ray2 *r = rays;
        for (size_t i = begin; i < end; i++) {
            if (!ray2_ok(&r[i]))
                return i;
            rb_prep_ray2(&r[i], &out[i - begin]);
        }
    }
    return end;
}

int rb_ray_range_valid(float tmin, float tmax)
{
    return rb_range_ok(tmin, tmax);
}

static const char *const axis_names[] = {"x", "y", "z"};

static const char *nonfinite_word(float x)
{
    return isnan(x) ? "NaN" : (x > 0 ? "+inf" : "-inf");
}

int rb_describe_ray(const void *rays, unsigned dims, size_t i, int *field,
                    char *reason, size_t len)
{
    float v[8];
    int axes = dims == 3 ? 3 : 2;
    if (dims == 3) {
        const rb_ray *r = (const rb_ray *)rays + i;
        for (int a = 0; a < 3; a++) {
            v[a] = r->origin[a];
            v[3 + a] = r->dir[a];
        }
        v[6] = r->tmin;
        v[7] = r->tmax;
    } else {
        const rb_ray2 *r = (const rb_ray2 *)rays + i;
        for (int a = 0; a < 2; a++) {
            v[a] = r->origin[a];
            v[2 + a] = r->dir[a];
        }
        v[4] = r->tmin;
        v[5] = r->tmax;
    }
    int f_tmin = 2 * axes, f_tmax = 2 * axes + 1;
    for (int f = 0; f < 2 * axes; f++) {
        if (!rb_finite(v[f])) {
            *field = f;
            snprintf(reason, len, "%s %s is %s", f < axes ? "origin" : "dir",
                     axis_names[f % axes], nonfinite_word(v[f]));
            return 1;
        }
    }
    float tmin = v[f_tmin], tmax = v[f_tmax];
    if (!rb_finite(tmin)) {
        *field = f_tmin;
        snprintf(reason, len, "tmin is %s", nonfinite_word(tmin));
        return 1;
    }
    if (!(tmax > -INFINITY)) {
        *field = f_tmax;
        snprintf(reason, len, "tmax is %s", nonfinite_word(tmax));
        return 1;
    }
    if (!(rb_flush(tmin) <= rb_flush(tmax))) {
        *field = f_tmin;
        snprintf(reason, len, "tmin (%.9g) > tmax (%.9g)", (double)tmin,
                 (double)tmax);
        return 1;
    }
    *field = -1;
    if (len)
        reason[0] = '\0';
    return 0;
}

int rb_describe_box(const void *boxes, unsigned dims, size_t i, int *field,
                    char *reason, size_t len)
{
    int axes = dims == 3 ? 3 : 2;
    const float *lo, *hi;
    if (dims == 3) {
        lo = ((const rb_box *)boxes)[i].min;
        hi = ((const rb_box *)boxes)[i].max;
    } else {
        lo = ((const rb_box2 *)boxes)[i].min;
        hi = ((const rb_box2 *)boxes)[i].max;
    }
    for (int f = 0; f < 2 * axes; f++) {
        float x = f < axes ? lo[f] : hi[f - axes];
        if (!rb_finite(x)) {
            *field = f;
            snprintf(reason, len, "%s %s is %s", f < axes ? "min" : "max",
                     axis_names[f % axes], nonfinite_word(x));
            return 1;
        }
    }
    for (int a = 0; a < axes; a++) {
        if (!(rb_flush(lo[a]) <= rb_flush(hi[a]))) {
            *field = a;
            snprintf(reason, len, "min %s (%.9g) > max %s (%.9g)",
                     axis_names[a], (double)lo[a], axis_names[a],
                     (double)hi[a]);
            return 1;
        }
    }
    *field = -1;
    if (len)
        reason[0] = '\0';
    return 0;
}
