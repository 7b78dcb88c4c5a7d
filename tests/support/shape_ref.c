/* shape_ref.c - see shape_ref.h. Deliberately shares no code with
 * kernels/exact.h or host/shapes.c: a mistake copied into both would pass
 * every comparison. */
#include "shape_ref.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* R7, restated: subnormal floats become zero of the same sign. */
static double flushed(float x)
{
    return fabsf(x) < FLT_MIN ? copysign(0.0, (double)x) : (double)x;
}

void rbt_dray_of(const rb_ray *r, rbt_dray *out)
{
    for (int i = 0; i < 3; i++) {
        out->o[i] = flushed(r->origin[i]);
        out->d[i] = flushed(r->dir[i]);
    }
    out->tmin = flushed(r->tmin);
    out->tmax = flushed(r->tmax);
}

static void set_miss(rbt_ref *out)
{
    out->hit = 0;
    out->t_enter = out->t_exit = INFINITY;
    out->face = out->exit_face = RB_FACE_NONE;
    out->normal[0] = out->normal[1] = out->normal[2] = NAN;
    out->face_sure = out->exit_face_sure = 1;
    out->reach = 0;
}

static double max_abs3(const double v[3])
{
    double m = fabs(v[0]);
    if (fabs(v[1]) > m)
        m = fabs(v[1]);
    if (fabs(v[2]) > m)
        m = fabs(v[2]);
    return m;
}

/* An interval [lo, hi] of the line inside a solid (lo may be -inf, hi
 * +inf), clipped to the ray's range as R2 says: the range decides an end
 * when the solid's end lies outside it. R5: an entry beyond float32 is a
 * miss. */
static void clip(const rbt_dray *r, double lo, double hi, int lo_face,
                 int hi_face, rbt_ref *out)
{
    double te = lo >= r->tmin ? lo : r->tmin;
    double tx = hi <= r->tmax ? hi : r->tmax;
    if (!(te <= tx) || !(te <= FLT_MAX)) {
        set_miss(out);
        return;
    }
    out->hit = 1;
    out->t_enter = te;
    out->t_exit = tx;
    out->face = lo >= r->tmin && isfinite(lo) ? lo_face : RB_FACE_NONE;
    out->exit_face = hi <= r->tmax && isfinite(hi) ? hi_face : RB_FACE_NONE;
    double dn = max_abs3(r->d), reach = 0;
    if (isfinite(lo))
        reach = fabs(lo) * dn;
    if (isfinite(hi) && fabs(hi) * dn > reach)
        reach = fabs(hi) * dn;
    out->reach = reach;
    out->face_sure = out->exit_face_sure = 1;
}

/* ---- box kinds: a slab test in local coordinates */

typedef struct local_box {
    double m[3][3]; /* world -> local */
    double b[3];    /* local origin in world */
    double lo[3], hi[3];
} local_box;

static void unit(double v[3])
{
    double len = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int i = 0; i < 3; i++)
        v[i] /= len;
}

/* The world direction of a local unit vector under the unit quaternion
 * (w, x, y, z): v' = v + 2w (q x v) + 2 q x (q x v). */
static void turn(const double q[4], const double v[3], double out[3])
{
    const double *u = q + 1;
    double c[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                   u[0] * v[1] - u[1] * v[0]};
    double cc[3] = {u[1] * c[2] - u[2] * c[1], u[2] * c[0] - u[0] * c[2],
                    u[0] * c[1] - u[1] * c[0]};
    for (int i = 0; i < 3; i++)
        out[i] = v[i] + 2 * q[0] * c[i] + 2 * cc[i];
}

/* A^-1 by Gauss-Jordan elimination with partial pivoting; 0 if singular. */
static int gauss_jordan(const double a_in[3][3], double inv[3][3])
{
    double a[3][6];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            a[i][j] = a_in[i][j];
            a[i][3 + j] = i == j;
        }
    for (int col = 0; col < 3; col++) {
        int p = col;
        for (int i = col + 1; i < 3; i++)
            if (fabs(a[i][col]) > fabs(a[p][col]))
                p = i;
        if (a[p][col] == 0)
            return 0;
        for (int j = 0; j < 6; j++) {
            double t = a[col][j];
            a[col][j] = a[p][j];
            a[p][j] = t;
        }
        double piv = a[col][col];
        for (int j = 0; j < 6; j++)
            a[col][j] /= piv;
        for (int i = 0; i < 3; i++) {
            if (i == col || a[i][col] == 0)
                continue;
            double f = a[i][col];
            for (int j = 0; j < 6; j++)
                a[i][j] -= f * a[col][j];
        }
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            inv[i][j] = a[i][3 + j];
    return 1;
}

static void local_of(const rbt_elem *e, local_box *lb)
{
    memset(lb, 0, sizeof *lb);
    switch (e->kind) {
    case RB_KIND_BOX:
        for (int i = 0; i < 3; i++) {
            lb->m[i][i] = 1;
            lb->lo[i] = flushed(e->u.box.min[i]);
            lb->hi[i] = flushed(e->u.box.max[i]);
        }
        break;
    case RB_KIND_OBB:
        if (e->has_quat) {
            double q[4];
            for (int i = 0; i < 4; i++)
                q[i] = flushed(e->quat[i]);
            double len = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] +
                              q[3] * q[3]);
            for (int i = 0; i < 4; i++)
                q[i] /= len;
            for (int k = 0; k < 3; k++) {
                double ek[3] = {k == 0, k == 1, k == 2};
                turn(q, ek, lb->m[k]); /* row k: local axis k in world */
            }
        } else {
            for (int k = 0; k < 3; k++)
                for (int i = 0; i < 3; i++)
                    lb->m[k][i] = flushed(e->u.obb.axes[k][i]);
        }
        for (int i = 0; i < 3; i++) {
            lb->b[i] = flushed(e->u.obb.center[i]);
            lb->hi[i] = flushed(e->u.obb.half[i]);
            lb->lo[i] = -lb->hi[i];
        }
        break;
    case RB_KIND_XBOX: {
        double a[3][3];
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++)
                a[i][j] = flushed(e->u.xbox.a[i][j]);
            lb->b[i] = flushed(e->u.xbox.a[i][3]);
            lb->lo[i] = flushed(e->u.xbox.min[i]);
            lb->hi[i] = flushed(e->u.xbox.max[i]);
        }
        if (!gauss_jordan(a, lb->m))
            for (int i = 0; i < 3; i++)
                lb->m[i][0] = lb->m[i][1] = lb->m[i][2] = NAN;
        break;
    }
    default:
        break;
    }
}

static void to_local(const local_box *lb, const rbt_dray *r, double o[3],
                     double d[3])
{
    double q[3] = {r->o[0] - lb->b[0], r->o[1] - lb->b[1],
                   r->o[2] - lb->b[2]};
    for (int i = 0; i < 3; i++) {
        o[i] = lb->m[i][0] * q[0] + lb->m[i][1] * q[1] + lb->m[i][2] * q[2];
        d[i] = lb->m[i][0] * r->d[0] + lb->m[i][1] * r->d[1] +
               lb->m[i][2] * r->d[2];
    }
}

/* Face code of axis a entered (or left) through its low (high) plane. */
static int face_code(int axis, int high)
{
    return 1 + 2 * axis + high;
}

static void local_answer(const rbt_dray *r, const local_box *lb,
                         double grow, double margin, rbt_ref *out)
{
    double o[3], d[3], tn[3], tf[3];
    int ax_n = -1, ax_f = -1;
    to_local(lb, r, o, d);
    double e = -INFINITY, x = INFINITY;
    for (int a = 0; a < 3; a++) {
        double lo = lb->lo[a] - grow, hi = lb->hi[a] + grow;
        if (lo > hi) {
            set_miss(out);
            return;
        }
        if (d[a] == 0) {
            if (o[a] < lo || o[a] > hi) {
                set_miss(out);
                return;
            }
            tn[a] = -INFINITY;
            tf[a] = INFINITY;
            continue;
        }
        /* Moving up the axis the ray meets lo first. */
        tn[a] = ((d[a] > 0 ? lo : hi) - o[a]) / d[a];
        tf[a] = ((d[a] > 0 ? hi : lo) - o[a]) / d[a];
        if (tn[a] > e) { /* strict: the lowest axis wins ties (R3) */
            e = tn[a];
            ax_n = a;
        }
        if (tf[a] < x) {
            x = tf[a];
            ax_f = a;
        }
    }
    int ef = ax_n < 0 ? RB_FACE_NONE : face_code(ax_n, d[ax_n] < 0);
    int xf = ax_f < 0 ? RB_FACE_NONE : face_code(ax_f, d[ax_f] > 0);
    clip(r, e, x, ef, xf, out);
    if (!out->hit)
        return;
    double dn = max_abs3(d), reach = 0;
    if (isfinite(e))
        reach = fabs(e) * dn;
    if (isfinite(x) && fabs(x) * dn > reach)
        reach = fabs(x) * dn;
    out->reach = reach;

    /* A candidate plane's t moves by about margin / |d_a| under the float
     * formula's rounding; the face is sure when no other candidate (the
     * range's end included) is that close to the winner. */
    if (ax_n >= 0) {
        double ew = margin / fabs(d[ax_n]);
        int sure = fabs(e - r->tmin) > ew;
        for (int a = 0; a < 3; a++)
            if (a != ax_n && isfinite(tn[a]) &&
                fabs(tn[a] - e) <= ew + margin / fabs(d[a]))
                sure = 0;
        out->face_sure = sure;
    }
    if (ax_f >= 0) {
        double ew = margin / fabs(d[ax_f]);
        int sure = !(fabs(x - r->tmax) <= ew);
        for (int a = 0; a < 3; a++)
            if (a != ax_f && isfinite(tf[a]) &&
                fabs(tf[a] - x) <= ew + margin / fabs(d[a]))
                sure = 0;
        out->exit_face_sure = sure;
    }
    if (out->face != RB_FACE_NONE) {
        int a = (out->face - 1) / 2;
        double sign = (out->face & 1) ? -1.0 : 1.0; /* odd: the low face */
        for (int i = 0; i < 3; i++)
            out->normal[i] = sign * lb->m[a][i];
        unit(out->normal);
    }
}

/* ---- spheres: the quadratic in double */

static void sphere_answer(const rbt_dray *r, const rb_sphere *s, double grow,
                          rbt_ref *out)
{
    double c[3], f[3];
    for (int i = 0; i < 3; i++) {
        c[i] = flushed(s->center[i]);
        f[i] = r->o[i] - c[i];
    }
    double rad = flushed(s->radius) + grow;
    if (rad < 0) {
        set_miss(out);
        return;
    }
    double a = r->d[0] * r->d[0] + r->d[1] * r->d[1] + r->d[2] * r->d[2];
    double ff = f[0] * f[0] + f[1] * f[1] + f[2] * f[2];
    if (a == 0) { /* a point: inside or not, for every t */
        if (ff <= rad * rad)
            clip(r, -INFINITY, INFINITY, RB_FACE_NONE, RB_FACE_NONE, out);
        else
            set_miss(out);
        return;
    }
    double fd = f[0] * r->d[0] + f[1] * r->d[1] + f[2] * r->d[2];
    /* The squared distance from the center to the line, without the
     * cancellation of ff - fd^2/a. */
    double l[3], ll = 0;
    for (int i = 0; i < 3; i++) {
        l[i] = f[i] - (fd / a) * r->d[i];
        ll += l[i] * l[i];
    }
    double dl = sqrt(ll);
    if (dl > rad) {
        set_miss(out);
        return;
    }
    double half_chord = sqrt((rad - dl) * (rad + dl)); /* in world units */
    double len = sqrt(a);
    double mid = -fd / a; /* t of the point nearest the center */
    double t0 = mid - half_chord / len, t1 = mid + half_chord / len;
    clip(r, t0, t1, RB_FACE_SURFACE, RB_FACE_SURFACE, out);
    if (out->hit && out->face != RB_FACE_NONE) {
        for (int i = 0; i < 3; i++)
            out->normal[i] = (r->o[i] + out->t_enter * r->d[i] - c[i]) / rad;
        if (!(rad > 0))
            out->normal[0] = out->normal[1] = out->normal[2] = NAN;
    }
}

/* ---- planes: the signed distance along the unit normal */

static void plane_unit(const rb_plane *p, double n[3], double *dist)
{
    double len = 0;
    for (int i = 0; i < 3; i++) {
        n[i] = flushed(p->normal[i]);
        len += n[i] * n[i];
    }
    len = sqrt(len);
    for (int i = 0; i < 3; i++)
        n[i] /= len;
    *dist = flushed(p->d) / len;
}

static void plane_answer(const rbt_dray *r, const rb_plane *p, double grow,
                         rbt_ref *out)
{
    double n[3], dist;
    plane_unit(p, n, &dist);
    dist += grow;
    double nd = n[0] * r->d[0] + n[1] * r->d[1] + n[2] * r->d[2];
    double h = n[0] * r->o[0] + n[1] * r->o[1] + n[2] * r->o[2] - dist;
    if (nd == 0) { /* parallel: h <= 0 is inside for every t */
        if (h <= 0)
            clip(r, -INFINITY, INFINITY, RB_FACE_NONE, RB_FACE_NONE, out);
        else
            set_miss(out);
        return;
    }
    double t = -h / nd;
    if (nd < 0)
        clip(r, t, INFINITY, RB_FACE_SURFACE, RB_FACE_NONE, out);
    else
        clip(r, -INFINITY, t, RB_FACE_NONE, RB_FACE_SURFACE, out);
    if (out->hit && out->face != RB_FACE_NONE)
        memcpy(out->normal, n, sizeof n);
}

void rbt_ref_answer(const rbt_dray *r, const rbt_elem *e, double grow,
                    double margin, rbt_ref *out)
{
    set_miss(out);
    switch (e->kind) {
    case RB_KIND_BOX:
    case RB_KIND_OBB:
    case RB_KIND_XBOX: {
        local_box lb;
        local_of(e, &lb);
        local_answer(r, &lb, grow, margin, out);
        break;
    }
    case RB_KIND_SPHERE:
        sphere_answer(r, &e->u.sphere, grow, out);
        break;
    case RB_KIND_PLANE:
        plane_answer(r, &e->u.plane, grow, out);
        break;
    }
}

double rbt_ref_scale(const rbt_dray *r, const rbt_elem *e)
{
    switch (e->kind) {
    case RB_KIND_BOX:
    case RB_KIND_OBB:
    case RB_KIND_XBOX: {
        local_box lb;
        local_of(e, &lb);
        double s = 0;
        for (int i = 0; i < 3; i++) {
            double row = 0;
            for (int j = 0; j < 3; j++)
                row += fabs(lb.m[i][j]) * (fabs(r->o[j]) + fabs(lb.b[j]));
            if (row > s)
                s = row;
        }
        double ext = max_abs3(lb.lo) > max_abs3(lb.hi) ? max_abs3(lb.lo)
                                                       : max_abs3(lb.hi);
        return s + ext;
    }
    case RB_KIND_SPHERE: {
        double c[3];
        for (int i = 0; i < 3; i++)
            c[i] = flushed(e->u.sphere.center[i]);
        return max_abs3(r->o) + max_abs3(c) + flushed(e->u.sphere.radius);
    }
    case RB_KIND_PLANE: {
        double n[3], dist;
        plane_unit(&e->u.plane, n, &dist);
        return fabs(n[0] * r->o[0]) + fabs(n[1] * r->o[1]) +
               fabs(n[2] * r->o[2]) + fabs(dist);
    }
    }
    return 0;
}

void rbt_ref_judge(const rbt_dray *r, const rbt_elem *e, double rel,
                   rbt_judged *out)
{
    double scale = rbt_ref_scale(r, e);
    rbt_ref_answer(r, e, 0, 0, &out->exact);
    double margin = rel * (scale + out->exact.reach);
    out->margin = margin;
    rbt_ref_answer(r, e, 0, margin, &out->exact);
    rbt_ref_answer(r, e, margin, margin, &out->grown);
    rbt_ref_answer(r, e, -margin, margin, &out->shrunk);
    /* Far along the ray a direction's rounding moves the points more than
     * the margin (and may make a nearly parallel ray exactly parallel in
     * float): such pairs are not judged. */
    int far = out->exact.reach > 1e4 * scale;
    out->grazing = far || out->grown.hit != out->shrunk.hit ||
                   out->exact.hit != out->shrunk.hit;
    out->face_sure = out->exact.face_sure &&
                     out->grown.face == out->exact.face &&
                     out->shrunk.face == out->exact.face;
    out->exit_face_sure = out->exact.exit_face_sure &&
                          out->grown.exit_face == out->exact.exit_face &&
                          out->shrunk.exit_face == out->exact.exit_face;
}

/* lo <= t <= hi, widened by 2^-22 of the magnitude (the final roundings
 * of the float formula); infinite ends bound nothing. */
static int within(double t, double lo, double hi)
{
    double m = fmax(isfinite(lo) ? fabs(lo) : 0, isfinite(hi) ? fabs(hi) : 0);
    double s = m * 0x1p-22;
    return t >= lo - s && t <= hi + s;
}

int rbt_ref_check(const rbt_judged *j, int hit, float t_enter, float t_exit,
                  int face, int exit_face, char *why, size_t len)
{
    const rbt_ref *x = &j->exact;
    if (isnan(t_enter) || isnan(t_exit)) {
        snprintf(why, len, "NaN in the answer");
        return 0;
    }
    if (!hit) {
        if (t_enter != INFINITY || t_exit != INFINITY || face || exit_face) {
            snprintf(why, len, "a miss that is not the miss record");
            return 0;
        }
    } else if (!(t_enter <= t_exit) || !(t_enter < INFINITY)) {
        snprintf(why, len, "a hit with t=[%.9g, %.9g]", (double)t_enter,
                 (double)t_exit);
        return 0;
    }
    if (j->grazing)
        return 1;
    if (hit != x->hit) {
        snprintf(why, len, "hit=%d, the reference says %d (t=[%.17g, %.17g] "
                 "margin %.3g)", hit, x->hit, x->t_enter, x->t_exit,
                 j->margin);
        return 0;
    }
    if (!hit)
        return 1;
    if (!within(t_enter, j->grown.t_enter, j->shrunk.t_enter)) {
        snprintf(why, len, "t_enter %.9g outside [%.17g, %.17g] (exact "
                 "%.17g)", (double)t_enter, j->grown.t_enter,
                 j->shrunk.t_enter, x->t_enter);
        return 0;
    }
    if (!within(t_exit, j->shrunk.t_exit, j->grown.t_exit)) {
        snprintf(why, len, "t_exit %.9g outside [%.17g, %.17g] (exact "
                 "%.17g)", (double)t_exit, j->shrunk.t_exit,
                 j->grown.t_exit, x->t_exit);
        return 0;
    }
    if (j->face_sure && face != x->face) {
        snprintf(why, len, "face %d, the reference says %d", face, x->face);
        return 0;
    }
    if (j->exit_face_sure && exit_face != x->exit_face) {
        snprintf(why, len, "exit face %d, the reference says %d", exit_face,
                 x->exit_face);
        return 0;
    }
    return 1;
}
