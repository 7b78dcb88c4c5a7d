/* test_camera.c - rays from a camera (SPEC section 8, host/camera.c):
 * exact rays of identity cameras in both depth conventions, perspective
 * and orthographic cameras against an independent long double
 * computation from the camera's geometry (eye, basis, planes), the same
 * bits whatever the chunking and for a grid as for its pixel centres
 * sent as a list, and every refusal with the field it names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const double I4[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

static void identity_camera(rb_camera *c, double w, double h)
{
    memset(c, 0, sizeof *c);
    memcpy(c->view, I4, sizeof I4);
    memcpy(c->projection, I4, sizeof I4);
    c->viewport[2] = w;
    c->viewport[3] = h;
    c->tmax = INFINITY;
}

/* ------------------------------------------------------------------------
 * Matrices of a right-handed camera looking down -z (row-major, column
 * vectors), and the same geometry computed without them.
 */
typedef struct geom {
    long double eye[3], s[3], u[3], f[3]; /* f: forward */
    long double near, far, tan_half, aspect;
    int ortho;
    long double half_h; /* ortho: half height of the view volume */
} geom;

static void normalize(long double v[3])
{
    long double l = sqrtl(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int k = 0; k < 3; k++)
        v[k] /= l;
}

static void cross(const long double a[3], const long double b[3],
                  long double c[3])
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

static void look_at(geom *g, const double eye[3], const double at[3],
                    const double up[3], double view[16])
{
    long double upl[3];
    for (int k = 0; k < 3; k++) {
        g->eye[k] = eye[k];
        g->f[k] = (long double)at[k] - eye[k];
        upl[k] = up[k];
    }
    normalize(g->f);
    cross(g->f, upl, g->s);
    normalize(g->s);
    cross(g->s, g->f, g->u);
    const long double *rows[3] = {g->s, g->u, g->f};
    for (int r = 0; r < 3; r++) {
        long double sign = r == 2 ? -1 : 1, dot = 0;
        for (int k = 0; k < 3; k++) {
            view[4 * r + k] = (double)(sign * rows[r][k]);
            dot += sign * rows[r][k] * g->eye[k];
        }
        view[4 * r + 3] = (double)-dot;
    }
    view[12] = view[13] = view[14] = 0;
    view[15] = 1;
}

static void perspective(geom *g, double fovy, double aspect, double n,
                        double f, int depth, double p[16])
{
    memset(p, 0, 16 * sizeof *p);
    double t = 1.0 / tan(fovy / 2);
    p[0] = t / aspect;
    p[5] = t;
    if (depth == RB_DEPTH_ZERO_TO_ONE) {
        p[10] = f / (n - f);
        p[11] = f * n / (n - f);
    } else {
        p[10] = (f + n) / (n - f);
        p[11] = 2 * f * n / (n - f);
    }
    p[14] = -1;
    g->near = n;
    g->far = f;
    g->tan_half = tanl((long double)fovy / 2);
    g->aspect = aspect;
    g->ortho = 0;
}

static void orthographic(geom *g, double half_h, double aspect, double n,
                         double f, int depth, double p[16])
{
    memset(p, 0, 16 * sizeof *p);
    p[0] = 1 / (half_h * aspect);
    p[5] = 1 / half_h;
    if (depth == RB_DEPTH_ZERO_TO_ONE) {
        p[10] = 1 / (n - f);
        p[11] = n / (n - f);
    } else {
        p[10] = 2 / (n - f);
        p[11] = (f + n) / (n - f);
    }
    p[15] = 1;
    g->near = n;
    g->far = f;
    g->half_h = half_h;
    g->aspect = aspect;
    g->ortho = 1;
}

/* The world point at distance z in front of the eye under NDC (nx, ny). */
static void point_at(const geom *g, long double nx, long double ny,
                     long double z, long double out[3])
{
    long double x, y;
    if (g->ortho) {
        x = nx * g->half_h * g->aspect;
        y = ny * g->half_h;
    } else {
        x = nx * z * g->tan_half * g->aspect;
        y = ny * z * g->tan_half;
    }
    for (int k = 0; k < 3; k++)
        out[k] = g->eye[k] + x * g->s[k] + y * g->u[k] + z * g->f[k];
}

static int close_to(float got, long double want)
{
    long double err = fabsl((long double)got - want);
    return err <= 2e-6L * (1 + fabsl(want));
}

static void check_against_geometry(const rb_camera *c, const geom *g)
{
    uint64_t n = 0;
    ck_assert_int_eq(rb_camera_count(c, &n, NULL), RB_OK);
    rb_ray *rays = malloc(n * sizeof *rays);
    ck_assert_ptr_nonnull(rays);
    rb_error e;
    ck_assert_int_eq(rb_camera_rays(c, 0, (size_t)n, rays, &e), RB_OK);
    unsigned w = (unsigned)c->viewport[2];
    for (uint64_t k = 0; k < n; k++) {
        long double px = c->pixels ? c->pixels[2 * k]
                                   : c->viewport[0] + (long double)(k % w) +
                                         0.5L;
        long double py = c->pixels ? c->pixels[2 * k + 1]
                                   : c->viewport[1] + (long double)(k / w) +
                                         0.5L;
        long double nx = 2 * (px - c->viewport[0]) / c->viewport[2] - 1;
        long double ny = 1 - 2 * (py - c->viewport[1]) / c->viewport[3];
        long double a[3], b[3];
        point_at(g, nx, ny, g->near, a);
        point_at(g, nx, ny, g->far, b);
        for (int i = 0; i < 3; i++) {
            ck_assert_msg(close_to(rays[k].origin[i], a[i]),
                          "pixel %llu origin %d: %.9g, want %.9Lg",
                          (unsigned long long)k, i, rays[k].origin[i], a[i]);
            ck_assert_msg(close_to(rays[k].dir[i], b[i] - a[i]),
                          "pixel %llu dir %d: %.9g, want %.9Lg",
                          (unsigned long long)k, i, rays[k].dir[i],
                          b[i] - a[i]);
        }
        ck_assert(rays[k].tmin == c->tmin && rays[k].tmax == c->tmax);
    }
    free(rays);
}

/* ------------------------------------------------------------------------
 * Tests
 */
START_TEST(test_identity_exact)
{
    rb_camera c;
    identity_camera(&c, 4, 2);
    c.tmin = 0.25f;
    c.tmax = 1;
    uint64_t n = 0;
    ck_assert_int_eq(rb_camera_count(&c, &n, NULL), RB_OK);
    ck_assert_uint_eq(n, 8);
    rb_ray r[8];
    for (int depth = 0; depth < 2; depth++) {
        c.depth = depth;
        ck_assert_int_eq(rb_camera_rays(&c, 0, 8, r, NULL), RB_OK);
        for (int k = 0; k < 8; k++) {
            /* NDC of pixel centres: x -0.75 -0.25 0.25 0.75, y 0.5 -0.5;
             * all exact in binary. */
            float x = -0.75f + 0.5f * (float)(k % 4);
            float y = k < 4 ? 0.5f : -0.5f;
            ck_assert(r[k].origin[0] == x && r[k].origin[1] == y);
            ck_assert(r[k].origin[2] == (depth ? -1.0f : 0.0f));
            ck_assert(r[k].dir[0] == 0 && r[k].dir[1] == 0);
            ck_assert(r[k].dir[2] == (depth ? 2.0f : 1.0f));
            ck_assert(r[k].tmin == 0.25f && r[k].tmax == 1);
        }
    }
}
END_TEST

START_TEST(test_perspective_both_depths)
{
    static const double eye[3] = {3, 2, 5}, at[3] = {0, 0.5, -1},
                        up[3] = {0, 1, 0};
    for (int depth = 0; depth < 2; depth++) {
        geom g;
        rb_camera c;
        identity_camera(&c, 40, 30);
        c.viewport[0] = 10;
        c.viewport[1] = 20;
        c.depth = depth;
        look_at(&g, eye, at, up, c.view);
        perspective(&g, 1.0, 40.0 / 30.0, 0.5, 200, depth, c.projection);
        check_against_geometry(&c, &g);
        /* Picking: pixels anywhere, outside the viewport too. */
        static const double px[] = {10, 20, 50, 50, 23.25, 31.5, 0, -4, 77, 99};
        c.pixels = px;
        c.n_pixels = 5;
        check_against_geometry(&c, &g);
    }
}
END_TEST

START_TEST(test_orthographic)
{
    static const double eye[3] = {-1, 4, 2}, at[3] = {1, 0, -3},
                        up[3] = {0, 0, 1};
    for (int depth = 0; depth < 2; depth++) {
        geom g;
        rb_camera c;
        identity_camera(&c, 16, 9);
        c.depth = depth;
        look_at(&g, eye, at, up, c.view);
        orthographic(&g, 3, 16.0 / 9.0, 1, 50, depth, c.projection);
        check_against_geometry(&c, &g);
        /* Every ray has the same direction: near and far points differ
         * in position only. */
        rb_ray r[144];
        ck_assert_int_eq(rb_camera_rays(&c, 0, 144, r, NULL), RB_OK);
        for (int k = 1; k < 144; k++)
            for (int i = 0; i < 3; i++)
                ck_assert_float_eq_tol(r[k].dir[i], r[0].dir[i], 1e-5);
    }
}
END_TEST

START_TEST(test_chunks_and_pixels_same_bits)
{
    static const double eye[3] = {0.3, -2, 7}, at[3] = {0, 0, 0},
                        up[3] = {0, 1, 0};
    geom g;
    rb_camera c;
    identity_camera(&c, 33, 17);
    c.viewport[0] = -5.5;
    c.viewport[1] = 3;
    look_at(&g, eye, at, up, c.view);
    perspective(&g, 0.8, 33.0 / 17.0, 0.1, 1000, 0, c.projection);
    size_t n = 33 * 17;
    rb_ray *whole = malloc(n * sizeof *whole), *parts = malloc(n * sizeof *parts),
           *listed = malloc(n * sizeof *listed);
    double *px = malloc(2 * n * sizeof *px);
    ck_assert_int_eq(rb_camera_rays(&c, 0, n, whole, NULL), RB_OK);
    for (size_t at0 = 0; at0 < n; at0 += 7) {
        size_t k = n - at0 < 7 ? n - at0 : 7;
        ck_assert_int_eq(rb_camera_rays(&c, at0, k, parts + at0, NULL),
                         RB_OK);
    }
    ck_assert_int_eq(memcmp(whole, parts, n * sizeof *whole), 0);
    for (size_t k = 0; k < n; k++) {
        px[2 * k] = c.viewport[0] + (double)(k % 33) + 0.5;
        px[2 * k + 1] = c.viewport[1] + (double)(k / 33) + 0.5;
    }
    c.pixels = px;
    c.n_pixels = n;
    ck_assert_int_eq(rb_camera_rays(&c, 0, n, listed, NULL), RB_OK);
    ck_assert_int_eq(memcmp(whole, listed, n * sizeof *whole), 0);
    free(whole);
    free(parts);
    free(listed);
    free(px);
}
END_TEST

static void expect_fault(const rb_camera *c, int element, int field,
                         uint64_t index, int in_rays)
{
    rb_error e;
    uint64_t n;
    rb_ray r[4];
    int st = in_rays ? rb_camera_rays(c, 0, 1, r, &e)
                     : rb_camera_count(c, &n, &e);
    ck_assert_int_eq(st, RB_EINPUT);
    ck_assert_int_eq(e.status, RB_EINPUT);
    ck_assert_int_eq(e.element, element);
    ck_assert_msg(e.field == field, "field %d, want %d (%s)", e.field, field,
                  e.message);
    ck_assert_uint_eq(e.index, index);
    ck_assert(e.message[0]);
}

START_TEST(test_refusals)
{
    rb_camera c;
    identity_camera(&c, 4, 2);
    c.view[5] = NAN;
    expect_fault(&c, RB_ELEMENT_CAMERA, 5, 0, 0);
    identity_camera(&c, 4, 2);
    c.projection[15] = INFINITY;
    expect_fault(&c, RB_ELEMENT_CAMERA, 31, 0, 0);
    identity_camera(&c, 4, 2);
    c.viewport[0] = NAN;
    expect_fault(&c, RB_ELEMENT_CAMERA, 32, 0, 0);
    identity_camera(&c, 0, 2);
    expect_fault(&c, RB_ELEMENT_CAMERA, 34, 0, 0); /* empty: width */
    identity_camera(&c, 4, -1);
    expect_fault(&c, RB_ELEMENT_CAMERA, 35, 0, 0);
    identity_camera(&c, 4.5, 2); /* a grid needs whole numbers */
    expect_fault(&c, RB_ELEMENT_CAMERA, 34, 0, 0);
    static const double px[2] = {1, 1};
    c.pixels = px; /* ... a list does not */
    c.n_pixels = 1;
    uint64_t n = 0;
    ck_assert_int_eq(rb_camera_count(&c, &n, NULL), RB_OK);
    ck_assert_uint_eq(n, 1);
    identity_camera(&c, 4, 2);
    c.depth = 2;
    expect_fault(&c, RB_ELEMENT_CAMERA, 36, 0, 0);
    identity_camera(&c, 4, 2);
    c.tmin = 2;
    c.tmax = 1;
    expect_fault(&c, RB_ELEMENT_CAMERA, 37, 0, 0);
    identity_camera(&c, 4, 2);
    c.view[10] = 0; /* singular view */
    expect_fault(&c, RB_ELEMENT_CAMERA, 38, 0, 0);
    identity_camera(&c, 4, 2);
    c.projection[14] = 1; /* rows 2 and 3 equal */
    c.projection[15] = 0;
    c.projection[10] = 1;
    expect_fault(&c, RB_ELEMENT_CAMERA, 39, 0, 0);
    identity_camera(&c, 4, 2);
    for (int k = 0; k < 16; k += 5) { /* invertible, but P*V overflows */
        c.view[k] = 1e200;
        c.projection[k] = 1e200;
    }
    expect_fault(&c, RB_ELEMENT_CAMERA, -1, 0, 0);

    /* A pixel that is not finite, in a list. */
    identity_camera(&c, 4, 2);
    static const double bad[6] = {0, 0, 1, NAN, 2, 2};
    c.pixels = bad;
    c.n_pixels = 3;
    expect_fault(&c, RB_ELEMENT_PIXEL, 1, 1, 0);

    /* w = 0: an OpenGL projection with its far plane at infinity puts
     * the far point there. */
    identity_camera(&c, 4, 2);
    memset(c.projection, 0, sizeof c.projection);
    c.projection[0] = 1;
    c.projection[5] = 1;
    c.projection[10] = -1;
    c.projection[11] = -0.2; /* -2 near, near 0.1 */
    c.projection[14] = -1;
    c.depth = RB_DEPTH_MINUS_ONE_TO_ONE;
    ck_assert_int_eq(rb_camera_count(&c, &n, NULL), RB_OK);
    expect_fault(&c, RB_ELEMENT_PIXEL, -1, 0, 1);
    /* Its near points are fine: a far plane that is not at infinity. */
    c.projection[10] = -1.002;
    rb_ray r[8];
    ck_assert_int_eq(rb_camera_rays(&c, 0, 8, r, NULL), RB_OK);
    /* Rays beyond float32. */
    identity_camera(&c, 4, 2);
    c.view[3] = 1e300; /* translation far beyond float32 */
    expect_fault(&c, RB_ELEMENT_PIXEL, -1, 0, 1);

    /* Bad arguments. */
    identity_camera(&c, 4, 2);
    rb_error e;
    ck_assert_int_eq(rb_camera_rays(&c, 6, 3, r, &e), RB_EINVAL);
    ck_assert_int_eq(rb_camera_rays(&c, 9, 0, r, NULL), RB_EINVAL);
    ck_assert_int_eq(rb_camera_rays(&c, 8, 0, NULL, NULL), RB_OK);
    ck_assert_int_eq(rb_camera_count(NULL, &n, NULL), RB_EINVAL);
    ck_assert_int_eq(rb_camera_rays(&c, 0, 1, NULL, NULL), RB_EINVAL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("camera");
    TCase *t = tcase_create("rays");
    tcase_add_test(t, test_identity_exact);
    tcase_add_test(t, test_perspective_both_depths);
    tcase_add_test(t, test_orthographic);
    tcase_add_test(t, test_chunks_and_pixels_same_bits);
    tcase_add_test(t, test_refusals);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
