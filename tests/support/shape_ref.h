/* shape_ref.h - an independent double-precision reference for every kind
 * of SPEC section 7 (R11-R15), for the shape suites.
 *
 * Written from the spec's definitions, not from kernels/exact.h: local
 * coordinates by a matrix product in double (obb: rows u, v, w as given;
 * the quaternion form: the rotation built here by turning the unit
 * vectors with q; xbox: A inverted here by Gauss-Jordan elimination),
 * explicit parallel-axis branches, the sphere's quadratic in double, the
 * plane as a signed distance. The answers are those of exact arithmetic
 * on the (flushed, R7) float inputs, up to double rounding.
 *
 * The float formulas of the library round in the transform and in the
 * products, so a test compares with a margin: rbt_ref_judge evaluates the
 * solid as given and grown and shrunk by a small distance (relative to
 * the scale of the numbers involved). Where the grown and shrunk solids
 * disagree on hit or miss, the ray is grazing and the float formula may
 * go either way (R8a); elsewhere hit and miss must agree, t_enter and
 * t_exit must lie between the grown and shrunk solids' values, and faces
 * must agree unless another candidate plane is within the margin. */
#ifndef RB_SHAPE_REF_H
#define RB_SHAPE_REF_H

#include "raybox.h"

/* A ray in double: the flushed (R7) float inputs, widened. */
typedef struct rbt_dray {
    double o[3], d[3];
    double tmin, tmax;
} rbt_dray;

void rbt_dray_of(const rb_ray *r, rbt_dray *out);

/* One element of any kind, as given in the public records. For an obb
 * made by rb_obb_from_quaternion, has_quat = 1 and quat holds the
 * quaternion (w, x, y, z) it came from: the reference then ignores
 * obb.axes and turns the box by the quaternion itself. */
typedef struct rbt_elem {
    rb_kind kind;
    int has_quat;
    float quat[4];
    union {
        rb_box box;
        rb_obb obb;
        rb_xbox xbox;
        rb_sphere sphere;
        rb_plane plane;
    } u;
} rbt_elem;

/* The exact answer of one ray against one solid. */
typedef struct rbt_ref {
    int hit;
    double t_enter, t_exit; /* +inf for a miss */
    int face, exit_face;    /* rb_face; none when tmin/tmax decided */
    /* Unit outward world normal at t_enter when face != none, else NaN. */
    double normal[3];
    /* Box kinds: 0 when another plane (or tmin, tmax) is within the
     * margin given to rbt_ref_answer of deciding the face instead. */
    int face_sure, exit_face_sure;
    /* |d| * the largest finite |t| the solid decides (0 if none): how far
     * along the ray the answer lies, for the margin. */
    double reach;
} rbt_ref;

/* The answer for the solid grown by `grow` (negative: shrunk) and the
 * face ambiguity for planes within `margin`, both in the solid's own
 * units: local coordinates for box, obb and xbox (each face moved out by
 * grow), world units for spheres (radius + grow) and planes (the plane
 * moved grow along its unit normal, away from the solid). */
void rbt_ref_answer(const rbt_dray *r, const rbt_elem *e, double grow,
                    double margin, rbt_ref *out);

/* The magnitude of the numbers the float formula rounds for this ray and
 * element, in the same units as grow: the margin is rel times this plus
 * the reach. */
double rbt_ref_scale(const rbt_dray *r, const rbt_elem *e);

/* The verdict on one ray-element pair. */
typedef struct rbt_judged {
    rbt_ref exact, grown, shrunk;
    double margin;    /* the grow used, in the solid's units */
    int grazing;      /* hit/miss not decided at this margin */
    int face_sure;    /* the entry face is decided (exit: below) */
    int exit_face_sure;
} rbt_judged;

/* Judges with margin rel * (scale + reach). */
void rbt_ref_judge(const rbt_dray *r, const rbt_elem *e, double rel,
                   rbt_judged *out);

/* Checks a library answer against a verdict: hit and miss when not
 * grazing, t_enter and t_exit within the grown/shrunk bracket (plus
 * 2^-22 relative for the final rounding), faces when sure. Returns 1 when
 * consistent; otherwise 0 with a description in why. A grazing pair is
 * still checked for a hit's own sanity (t_enter <= t_exit, no NaN). */
int rbt_ref_check(const rbt_judged *j, int hit, float t_enter, float t_exit,
                  int face, int exit_face, char *why, size_t len);

#endif
