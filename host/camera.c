/*
 * camera.c - rays from a camera (SPEC section 8): the one place where a
 * view, a projection, a viewport and pixels become rb_ray records, for
 * the server's JSON and binary requests and the CLI alike.
 *
 * Everything is computed in double and each ray number is rounded once to
 * float32 at the end. The project compiles with -ffp-contract=off, so no
 * product and sum here is fused: the same camera gives the same bits on
 * every machine and whatever chunks the rays are asked for in.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "raybox.h"

/* rb_error.field of the camera's numbers (see rb_camera_count). */
enum {
    F_VIEW = 0,
    F_PROJECTION = 16,
    F_VIEWPORT = 32,
    F_DEPTH = 36,
    F_RANGE = 37,
    F_VIEW_SINGULAR = 38,
    F_PROJECTION_SINGULAR = 39
};

/* Largest pixel count of a grid: beyond it width * height is not exact in
 * double (and no batch is near it). */
#define GRID_MAX 9007199254740992.0 /* 2^53 */

static int fault(rb_error *err, rb_element_kind element, uint64_t index,
                 int field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int fault(rb_error *err, rb_element_kind element, uint64_t index,
                 int field, const char *fmt, ...)
{
    if (err) {
        memset(err, 0, sizeof *err);
        err->status = RB_EINPUT;
        err->element = element;
        err->index = index;
        err->field = field;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return RB_EINPUT;
}

/* c = a * b, row-major 4x4. */
static void mul4(const double a[16], const double b[16], double c[16])
{
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double s = a[4 * i] * b[j];
            for (int k = 1; k < 4; k++)
                s += a[4 * i + k] * b[4 * k + j];
            c[4 * i + j] = s;
        }
}

/* Gauss-Jordan elimination with partial pivoting (the first row of the
 * largest magnitude wins a tie). 0, or -1 when a pivot is zero (or not
 * finite) or the inverse has a number that is not finite: singular. */
static int invert4(const double m[16], double out[16])
{
    double a[4][8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            a[i][j] = m[4 * i + j];
            a[i][4 + j] = i == j ? 1.0 : 0.0;
        }
    for (int c = 0; c < 4; c++) {
        int p = c;
        for (int r = c + 1; r < 4; r++)
            if (fabs(a[r][c]) > fabs(a[p][c]))
                p = r;
        if (a[p][c] == 0.0 || !isfinite(a[p][c]))
            return -1;
        if (p != c)
            for (int j = 0; j < 8; j++) {
                double t = a[c][j];
                a[c][j] = a[p][j];
                a[p][j] = t;
            }
        double pivot = a[c][c];
        for (int j = 0; j < 8; j++)
            a[c][j] /= pivot;
        for (int r = 0; r < 4; r++) {
            double f = a[r][c];
            if (r == c || f == 0.0)
                continue;
            for (int j = 0; j < 8; j++)
                a[r][j] -= f * a[c][j];
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            out[4 * i + j] = a[i][4 + j];
            if (!isfinite(out[4 * i + j]))
                return -1;
        }
    return 0;
}

/* Everything but the pixels; *w gets (P*V)^-1 when w is not NULL. */
static int check(const rb_camera *cam, uint64_t *count, double *w,
                 rb_error *err)
{
    for (int i = 0; i < 16; i++) {
        if (!isfinite(cam->view[i]))
            return fault(err, RB_ELEMENT_CAMERA, 0, F_VIEW + i,
                         "camera: view number %d is %g", i, cam->view[i]);
        if (!isfinite(cam->projection[i]))
            return fault(err, RB_ELEMENT_CAMERA, 0, F_PROJECTION + i,
                         "camera: projection number %d is %g", i,
                         cam->projection[i]);
    }
    const double *vp = cam->viewport;
    for (int i = 0; i < 4; i++)
        if (!isfinite(vp[i]))
            return fault(err, RB_ELEMENT_CAMERA, 0, F_VIEWPORT + i,
                         "camera: viewport number %d is %g", i, vp[i]);
    if (!(vp[2] > 0))
        return fault(err, RB_ELEMENT_CAMERA, 0, F_VIEWPORT + 2,
                     "camera: the viewport is empty: width %g", vp[2]);
    if (!(vp[3] > 0))
        return fault(err, RB_ELEMENT_CAMERA, 0, F_VIEWPORT + 3,
                     "camera: the viewport is empty: height %g", vp[3]);
    if (cam->depth != RB_DEPTH_ZERO_TO_ONE &&
        cam->depth != RB_DEPTH_MINUS_ONE_TO_ONE)
        return fault(err, RB_ELEMENT_CAMERA, 0, F_DEPTH,
                     "camera: unknown depth convention %d", cam->depth);
    if (!rb_ray_range_valid(cam->tmin, cam->tmax))
        return fault(err, RB_ELEMENT_CAMERA, 0, F_RANGE,
                     "camera: the range [%g, %g] breaks R6",
                     (double)cam->tmin, (double)cam->tmax);
    if (cam->pixels) {
        *count = cam->n_pixels;
    } else {
        for (int i = 2; i < 4; i++)
            if (vp[i] != floor(vp[i]))
                return fault(err, RB_ELEMENT_CAMERA, 0, F_VIEWPORT + i,
                             "camera: a viewport without pixels needs a "
                             "whole width and height, not %g", vp[i]);
        if (vp[2] * vp[3] > GRID_MAX)
            return fault(err, RB_ELEMENT_CAMERA, 0, F_VIEWPORT + 2,
                         "camera: the viewport has more than 2^53 "
                         "pixels (%g x %g)", vp[2], vp[3]);
        *count = (uint64_t)vp[2] * (uint64_t)vp[3];
    }
    double inv[16], pv[16];
    if (invert4(cam->view, inv))
        return fault(err, RB_ELEMENT_CAMERA, 0, F_VIEW_SINGULAR,
                     "camera: the view matrix is singular");
    if (invert4(cam->projection, inv))
        return fault(err, RB_ELEMENT_CAMERA, 0, F_PROJECTION_SINGULAR,
                     "camera: the projection matrix is singular");
    mul4(cam->projection, cam->view, pv);
    if (invert4(pv, w ? w : inv))
        return fault(err, RB_ELEMENT_CAMERA, 0, -1,
                     "camera: projection * view is singular");
    return RB_OK;
}

int rb_camera_count(const rb_camera *cam, uint64_t *count, rb_error *err)
{
    if (!cam || !count || (cam->n_pixels && !cam->pixels)) {
        if (err) {
            memset(err, 0, sizeof *err);
            err->status = RB_EINVAL;
            snprintf(err->message, sizeof err->message,
                     "rb_camera_count: NULL camera, count or pixels");
        }
        return RB_EINVAL;
    }
    uint64_t n = 0;
    int st = check(cam, &n, NULL, err);
    if (st)
        return st;
    for (size_t k = 0; cam->pixels && k < cam->n_pixels; k++)
        for (int f = 0; f < 2; f++)
            if (!isfinite(cam->pixels[2 * k + f]))
                return fault(err, RB_ELEMENT_PIXEL, k, f,
                             "pixel %zu: number %d is %g", k, f,
                             cam->pixels[2 * k + f]);
    *count = n;
    return RB_OK;
}

/* W * (x, y, z, 1), each row summed left to right. */
static void unproject(const double w[16], double x, double y, double z,
                      double out[4])
{
    for (int i = 0; i < 4; i++)
        out[i] = w[4 * i] * x + w[4 * i + 1] * y + w[4 * i + 2] * z +
                 w[4 * i + 3];
}

int rb_camera_rays(const rb_camera *cam, uint64_t first, size_t n,
                   rb_ray *out, rb_error *err)
{
    if (!cam || (n && !out) || (cam->n_pixels && !cam->pixels)) {
        if (err) {
            memset(err, 0, sizeof *err);
            err->status = RB_EINVAL;
            snprintf(err->message, sizeof err->message,
                     "rb_camera_rays: NULL camera, output or pixels");
        }
        return RB_EINVAL;
    }
    uint64_t count = 0;
    double w[16];
    int st = check(cam, &count, w, err);
    if (st)
        return st;
    if (first > count || n > count - first) {
        if (err) {
            memset(err, 0, sizeof *err);
            err->status = RB_EINVAL;
            snprintf(err->message, sizeof err->message,
                     "rb_camera_rays: pixels %llu..%llu of %llu",
                     (unsigned long long)first,
                     (unsigned long long)(first + n),
                     (unsigned long long)count);
        }
        return RB_EINVAL;
    }
    const double *vp = cam->viewport;
    uint64_t width = cam->pixels ? 0 : (uint64_t)vp[2];
    double z0 = cam->depth == RB_DEPTH_MINUS_ONE_TO_ONE ? -1.0 : 0.0;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = first + i;
        double px, py;
        if (cam->pixels) {
            px = cam->pixels[2 * k];
            py = cam->pixels[2 * k + 1];
            if (!isfinite(px) || !isfinite(py))
                return fault(err, RB_ELEMENT_PIXEL, k, isfinite(px) ? 1 : 0,
                             "pixel %llu: a number is %g",
                             (unsigned long long)k, isfinite(px) ? py : px);
        } else {
            px = vp[0] + (double)(k % width) + 0.5;
            py = vp[1] + (double)(k / width) + 0.5;
        }
        double nx = 2.0 * (px - vp[0]) / vp[2] - 1.0;
        double ny = 1.0 - 2.0 * (py - vp[1]) / vp[3];
        double hn[4], hf[4];
        unproject(w, nx, ny, z0, hn);
        unproject(w, nx, ny, 1.0, hf);
        if (hn[3] == 0.0 || hf[3] == 0.0)
            return fault(err, RB_ELEMENT_PIXEL, k, -1,
                         "pixel %llu: its %s point has w = 0 after "
                         "the transform (a plane at infinity)",
                         (unsigned long long)k,
                         hn[3] == 0.0 ? "near" : "far");
        rb_ray *r = &out[i];
        int finite = 1;
        for (int a = 0; a < 3; a++) {
            double near = hn[a] / hn[3], far = hf[a] / hf[3];
            r->origin[a] = (float)near;
            r->dir[a] = (float)(far - near);
            finite &= isfinite(r->origin[a]) && isfinite(r->dir[a]);
        }
        if (!finite)
            return fault(err, RB_ELEMENT_PIXEL, k, -1,
                         "pixel %llu: its ray is beyond float32 (near "
                         "w %g, far w %g)", (unsigned long long)k, hn[3],
                         hf[3]);
        r->tmin = cam->tmin;
        r->tmax = cam->tmax;
    }
    return RB_OK;
}
