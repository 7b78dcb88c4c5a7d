/*
 * shapes.c - the kinds beyond boxes (SPEC R11-R15): validation that names
 * the element and field, preparation in double with each stored value
 * rounded once (R12, R14), the quaternion form of an obb, and the normals
 * of R15. The per-ray tests are kernels/exact.h's, shared with the
 * kernels.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "threadpool.h"

/* Axes are orthonormal when every |u_i . u_j - delta_ij| <= this. */
#define ORTHONORMAL_TOLERANCE 1e-4f

static const char *const kind_names[RB_KIND_COUNT] = {"box", "obb", "xbox",
                                                      "sphere", "plane"};

const char *rb_kind_name(int kind)
{
    return kind >= 0 && kind < RB_KIND_COUNT ? kind_names[kind] : NULL;
}

static float flush_round(double x)
{
    return rb_flush((float)x);
}

int rb_obb_from_quaternion(const float center[3], const float half[3],
                           const float q[4], rb_obb *out)
{
    if (!center || !half || !q || !out)
        return RB_EINVAL;
    memcpy(out->center, center, sizeof out->center);
    memcpy(out->half, half, sizeof out->half);
    double w = rb_flush(q[0]), x = rb_flush(q[1]), y = rb_flush(q[2]),
           z = rb_flush(q[3]);
    if (!rb_finite(q[0]) || !rb_finite(q[1]) || !rb_finite(q[2]) ||
        !rb_finite(q[3]))
        return RB_EINPUT;
    double len = sqrt(w * w + x * x + y * y + z * z);
    if (!(len > 0))
        return RB_EINPUT;
    w /= len, x /= len, y /= len, z /= len;
    /* R(q), row-major; the axes are its columns (local x, y, z in world). */
    double r[3][3] = {
        {1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)},
        {2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)},
        {2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)}};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++)
            out->axes[k][i] = (float)r[i][k];
    return RB_OK;
}

/* ---- validation (R6, R11) */

/* The first non-finite number of v[0..n) as a field offset, or -1. */
static int first_nonfinite(const float *v, int n)
{
    for (int f = 0; f < n; f++)
        if (!rb_finite(v[f]))
            return f;
    return -1;
}

static const char *nonfinite_word(float x)
{
    return isnan(x) ? "NaN" : (x > 0 ? "+inf" : "-inf");
}

static int obb_problem(const rb_obb *s, int *field, char *why, size_t len)
{
    float v[15];
    memcpy(v, s->center, sizeof s->center);
    memcpy(v + 3, s->half, sizeof s->half);
    memcpy(v + 6, s->axes, sizeof s->axes);
    int f = first_nonfinite(v, 15);
    if (f >= 0) {
        *field = f;
        snprintf(why, len, "%s is %s",
                 f < 3 ? "center" : f < 6 ? "half extent" : "axis",
                 nonfinite_word(v[f]));
        return 1;
    }
    for (int a = 0; a < 3; a++) {
        if (rb_flush(s->half[a]) < 0) {
            *field = 3 + a;
            snprintf(why, len, "half extent %d is negative (%.9g)", a,
                     (double)s->half[a]);
            return 1;
        }
    }
    /* The dot products of section 7: (x + y) + z in float32. */
    for (int i = 0; i < 3; i++)
        for (int j = i; j < 3; j++) {
            const float *u = s->axes[i], *w = s->axes[j];
            float dot = rb_dot3(rb_flush(u[0]), rb_flush(u[1]), rb_flush(u[2]),
                                rb_flush(w[0]), rb_flush(w[1]),
                                rb_flush(w[2]));
            if (!(fabsf(dot - (float)(i == j)) <= ORTHONORMAL_TOLERANCE)) {
                *field = 6;
                snprintf(why, len,
                         "axes are not orthonormal: %c.%c = %.9g (tolerance "
                         "1e-4)",
                         "uvw"[i], "uvw"[j], (double)dot);
                return 1;
            }
        }
    return 0;
}

/* A's inverse in double (adjugate over determinant); 0 when singular: the
 * determinant is 0 or an entry of the inverse is not finite in float. */
static int invert3(const double a[3][3], double inv[3][3])
{
    double c00 = a[1][1] * a[2][2] - a[1][2] * a[2][1];
    double c01 = a[1][2] * a[2][0] - a[1][0] * a[2][2];
    double c02 = a[1][0] * a[2][1] - a[1][1] * a[2][0];
    double det = a[0][0] * c00 + a[0][1] * c01 + a[0][2] * c02;
    if (!(det != 0) || !isfinite(det))
        return 0;
    inv[0][0] = c00 / det;
    inv[0][1] = (a[0][2] * a[2][1] - a[0][1] * a[2][2]) / det;
    inv[0][2] = (a[0][1] * a[1][2] - a[0][2] * a[1][1]) / det;
    inv[1][0] = c01 / det;
    inv[1][1] = (a[0][0] * a[2][2] - a[0][2] * a[2][0]) / det;
    inv[1][2] = (a[0][2] * a[1][0] - a[0][0] * a[1][2]) / det;
    inv[2][0] = c02 / det;
    inv[2][1] = (a[0][1] * a[2][0] - a[0][0] * a[2][1]) / det;
    inv[2][2] = (a[0][0] * a[1][1] - a[0][1] * a[1][0]) / det;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if (!(fabs(inv[i][j]) <= FLT_MAX))
                return 0;
    return 1;
}

static void xbox_linear(const rb_xbox *s, double a[3][3])
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            a[i][j] = rb_flush(s->a[i][j]);
}

static int xbox_problem(const rb_xbox *s, int *field, char *why, size_t len)
{
    float v[18];
    memcpy(v, s->min, sizeof s->min);
    memcpy(v + 3, s->max, sizeof s->max);
    memcpy(v + 6, s->a, sizeof s->a);
    int f = first_nonfinite(v, 18);
    if (f >= 0) {
        *field = f;
        snprintf(why, len, "%s is %s",
                 f < 3 ? "min" : f < 6 ? "max" : "matrix entry",
                 nonfinite_word(v[f]));
        return 1;
    }
    for (int a = 0; a < 3; a++) {
        if (!rb_extent_ok(s->min[a], s->max[a])) {
            *field = a;
            snprintf(why, len, "min %c (%.9g) > max %c (%.9g)", "xyz"[a],
                     (double)s->min[a], "xyz"[a], (double)s->max[a]);
            return 1;
        }
    }
    double a[3][3], inv[3][3];
    xbox_linear(s, a);
    if (!invert3(a, inv)) {
        *field = 6;
        snprintf(why, len, "the matrix is singular");
        return 1;
    }
    return 0;
}

static int sphere_problem(const rb_sphere *s, int *field, char *why,
                          size_t len)
{
    float v[4] = {s->center[0], s->center[1], s->center[2], s->radius};
    int f = first_nonfinite(v, 4);
    if (f >= 0) {
        *field = f;
        snprintf(why, len, "%s is %s", f < 3 ? "center" : "radius",
                 nonfinite_word(v[f]));
        return 1;
    }
    if (rb_flush(s->radius) < 0) {
        *field = 3;
        snprintf(why, len, "radius is negative (%.9g)", (double)s->radius);
        return 1;
    }
    return 0;
}

static double plane_length(const rb_plane *s)
{
    double x = rb_flush(s->normal[0]), y = rb_flush(s->normal[1]),
           z = rb_flush(s->normal[2]);
    return sqrt(x * x + y * y + z * z);
}

static int plane_problem(const rb_plane *s, int *field, char *why,
                         size_t len)
{
    float v[4] = {s->normal[0], s->normal[1], s->normal[2], s->d};
    int f = first_nonfinite(v, 4);
    if (f >= 0) {
        *field = f;
        snprintf(why, len, "%s is %s", f < 3 ? "normal" : "d",
                 nonfinite_word(v[f]));
        return 1;
    }
    if (!(plane_length(s) > 0)) {
        *field = 0;
        snprintf(why, len, "the normal is zero");
        return 1;
    }
    return 0;
}

int rb_describe_shape(const rb_shapes *in, rb_element_kind kind, size_t i,
                      int *field, char *why, size_t len)
{
    *field = -1;
    if (len)
        why[0] = '\0';
    switch (kind) {
    case RB_ELEMENT_OBB:
        return obb_problem(&in->obbs[i], field, why, len);
    case RB_ELEMENT_XBOX:
        return xbox_problem(&in->xboxes[i], field, why, len);
    case RB_ELEMENT_SPHERE:
        return sphere_problem(&in->spheres[i], field, why, len);
    case RB_ELEMENT_PLANE:
        return plane_problem(&in->planes[i], field, why, len);
    default:
        return 0;
    }
}

/* ---- preparation (R12-R14) */

static void prep_obb(const rb_obb *s, rb_lbox *out)
{
    for (int a = 0; a < 3; a++) {
        out->hi[a] = rb_flush(s->half[a]);
        out->lo[a] = -out->hi[a];
        out->b[a] = rb_flush(s->center[a]);
        for (int k = 0; k < 3; k++)
            out->m[3 * a + k] = rb_flush(s->axes[a][k]);
    }
}

static void prep_xbox(const rb_xbox *s, rb_lbox *out)
{
    double a[3][3], inv[3][3];
    xbox_linear(s, a);
    invert3(a, inv); /* validated: not singular */
    for (int i = 0; i < 3; i++) {
        out->lo[i] = rb_flush(s->min[i]);
        out->hi[i] = rb_flush(s->max[i]);
        out->b[i] = rb_flush(s->a[i][3]);
        for (int j = 0; j < 3; j++)
            out->m[3 * i + j] = flush_round(inv[i][j]);
    }
}

static void prep_sphere(const rb_sphere *s, rb_ball *out)
{
    for (int a = 0; a < 3; a++)
        out->c[a] = rb_flush(s->center[a]);
    out->r = rb_flush(s->radius) + 0.0f; /* -0 is a point, as +0 */
}

static void prep_plane(const rb_plane *s, rb_halfspace *out)
{
    double len = plane_length(s);
    for (int a = 0; a < 3; a++)
        out->n[a] = flush_round(rb_flush(s->normal[a]) / len);
    out->d = flush_round(rb_flush(s->d) / len);
}

size_t rb_shapes_count(const rb_shapes *s)
{
    return s->n_obbs + s->n_xboxes + s->n_spheres + s->n_planes;
}

void rb_shapeset_free(const rb_allocator *alloc, rb_shapeset *set)
{
    rb_shape_tree_free(alloc, set);
    rb_free_with(alloc, set->lbox);
    rb_free_with(alloc, set->ball);
    rb_free_with(alloc, set->half);
    memset(set, 0, sizeof *set);
}

/* Element i of `kind` fails R6/R11: the error names it. */
static int report(rb_context *ctx, const rb_shapes *in, rb_element_kind kind,
                  size_t i)
{
    int field;
    char why[256];
    rb_describe_shape(in, kind, i, &field, why, sizeof why);
    static const char *const names[] = {
        [RB_ELEMENT_OBB] = "obb", [RB_ELEMENT_XBOX] = "xbox",
        [RB_ELEMENT_SPHERE] = "sphere", [RB_ELEMENT_PLANE] = "plane"};
    rb_fail(ctx, RB_EINPUT, "%s %zu: %s", names[kind], i, why);
    ctx->err.element = kind;
    ctx->err.index = i;
    ctx->err.field = field;
    return RB_EINPUT;
}

/* Sets of this many shapes or more are checked and prepared on the
 * context's pool, in slices of BUILD_SLICE: a query's inline shapes are
 * built anew each call, and serially that build took about as long as the
 * pairs themselves on two threads (4M obbs: validation and preparation
 * ~35% of a profile, the exact tests ~38%). */
#define BUILD_MIN_POOL (32u << 10)
#define BUILD_SLICE (16u << 10)

/* The shapes of a build as one index range over obbs ++ xboxes ++
 * spheres ++ planes (the order of the checks: the lowest bad index is the
 * element the serial checks named). */
typedef struct build_run {
    const rb_shapes *in;
    rb_shapeset *set;
    size_t n;
    atomic_uint_fast64_t bad; /* the lowest bad index so far, or UINT64_MAX */
} build_run;

/* Index g's kind and its index within the kind. */
static rb_element_kind kind_of(const rb_shapes *in, size_t g, size_t *i)
{
    if (g < in->n_obbs) {
        *i = g;
        return RB_ELEMENT_OBB;
    }
    g -= in->n_obbs;
    if (g < in->n_xboxes) {
        *i = g;
        return RB_ELEMENT_XBOX;
    }
    g -= in->n_xboxes;
    if (g < in->n_spheres) {
        *i = g;
        return RB_ELEMENT_SPHERE;
    }
    *i = g - in->n_spheres;
    return RB_ELEMENT_PLANE;
}

static int shape_problem(const rb_shapes *in, rb_element_kind kind, size_t i)
{
    int field;
    char why[8]; /* the reason is written again by report() */
    switch (kind) {
    case RB_ELEMENT_OBB:
        return obb_problem(&in->obbs[i], &field, why, sizeof why);
    case RB_ELEMENT_XBOX:
        return xbox_problem(&in->xboxes[i], &field, why, sizeof why);
    case RB_ELEMENT_SPHERE:
        return sphere_problem(&in->spheres[i], &field, why, sizeof why);
    default:
        return plane_problem(&in->planes[i], &field, why, sizeof why);
    }
}

/* The first bad shape of a slice lowers run->bad; a slice above a bad
 * one already found is skipped. */
static void check_slice(void *arg, size_t t, unsigned worker)
{
    build_run *run = arg;
    (void)worker;
    size_t b, e;
    rb_pool_task_range(t, BUILD_SLICE, run->n, &b, &e);
    if (b > atomic_load_explicit(&run->bad, memory_order_relaxed))
        return;
    for (size_t g = b; g < e; g++) {
        size_t i;
        rb_element_kind kind = kind_of(run->in, g, &i);
        if (shape_problem(run->in, kind, i)) {
            rb_atomic_lower(&run->bad, g);
            return;
        }
    }
}

static void prep_slice(void *arg, size_t t, unsigned worker)
{
    build_run *run = arg;
    const rb_shapes *in = run->in;
    rb_shapeset *set = run->set;
    (void)worker;
    size_t b, e;
    rb_pool_task_range(t, BUILD_SLICE, run->n, &b, &e);
    for (size_t g = b; g < e; g++) {
        size_t i;
        switch (kind_of(in, g, &i)) {
        case RB_ELEMENT_OBB:
            prep_obb(&in->obbs[i], &set->lbox[i]);
            break;
        case RB_ELEMENT_XBOX:
            prep_xbox(&in->xboxes[i], &set->lbox[in->n_obbs + i]);
            break;
        case RB_ELEMENT_SPHERE:
            prep_sphere(&in->spheres[i], &set->ball[i]);
            break;
        default:
            prep_plane(&in->planes[i], &set->half[i]);
            break;
        }
    }
}

/* fn on every slice of run: on the pool for big sets. */
static void run_slices(rb_context *ctx, build_run *run,
                       void (*fn)(void *, size_t, unsigned))
{
    size_t slices = (run->n + BUILD_SLICE - 1) / BUILD_SLICE;
    if (run->n < BUILD_MIN_POOL) {
        for (size_t t = 0; t < slices; t++)
            fn(run, t, 0);
    } else {
        rb_pool_run(ctx->pool, slices, fn, run);
    }
}

int rb_shapeset_build(rb_context *ctx, rb_shapeset *set, const rb_shapes *in,
                      uint32_t first_id)
{
    memset(set, 0, sizeof *set);
    build_run run = {.in = in, .set = set, .n = rb_shapes_count(in)};
    atomic_init(&run.bad, UINT64_MAX);
    run_slices(ctx, &run, check_slice);
    uint64_t bad = atomic_load(&run.bad);
    if (bad != UINT64_MAX) {
        size_t i;
        rb_element_kind kind = kind_of(in, (size_t)bad, &i);
        return report(ctx, in, kind, i);
    }

    size_t n_lbox = in->n_obbs + in->n_xboxes;
    set->lbox = n_lbox ? rb_alloc(ctx, n_lbox * sizeof *set->lbox, 64) : NULL;
    set->ball = in->n_spheres
                    ? rb_alloc(ctx, in->n_spheres * sizeof *set->ball, 64)
                    : NULL;
    set->half = in->n_planes
                    ? rb_alloc(ctx, in->n_planes * sizeof *set->half, 64)
                    : NULL;
    if ((n_lbox && !set->lbox) || (in->n_spheres && !set->ball) ||
        (in->n_planes && !set->half)) {
        rb_shapeset_free(&ctx->alloc, set);
        return rb_fail(ctx, RB_ENOMEM, "no memory for %zu shapes", run.n);
    }
    run_slices(ctx, &run, prep_slice);
    set->n_obb = in->n_obbs;
    set->n_xbox = in->n_xboxes;
    set->n_ball = in->n_spheres;
    set->n_half = in->n_planes;
    set->first_id = first_id;
    return RB_OK;
}

rb_kind rb_shapeset_kind(const rb_shapeset *s, size_t j)
{
    if (j < s->n_obb)
        return RB_KIND_OBB;
    if (j < s->n_obb + s->n_xbox)
        return RB_KIND_XBOX;
    if (j < s->n_obb + s->n_xbox + s->n_ball)
        return RB_KIND_SPHERE;
    return RB_KIND_PLANE;
}

/* ---- normals (R15): one host function after any backend */

static void nan3(float *n)
{
    n[0] = n[1] = n[2] = NAN;
}

/* Row a of m times sign, normalised in double, rounded once. */
static void row_normal(const float *m, int a, double sign, float *n)
{
    double x = m[3 * a], y = m[3 * a + 1], z = m[3 * a + 2];
    double len = sqrt(x * x + y * y + z * z);
    n[0] = (float)(sign * x / len) + 0.0f; /* never -0 */
    n[1] = (float)(sign * y / len) + 0.0f;
    n[2] = (float)(sign * z / len) + 0.0f;
}

void rb_shape_normal(const rb_shapeset *s, size_t j, const rb_ray_raw *w,
                     const rb_hit *h, float *n)
{
    if (!h->hit || h->face == RB_FACE_NONE) {
        nan3(n);
        return;
    }
    size_t n_lbox = s->n_obb + s->n_xbox;
    if (j < n_lbox) {
        int a = (h->face - 1) / 2;
        row_normal(s->lbox[j].m, a, (h->face & 1) ? -1.0 : 1.0, n);
    } else if (j < n_lbox + s->n_ball) {
        const rb_ball *b = &s->ball[j - n_lbox];
        if (b->r == 0.0f) {
            nan3(n);
            return;
        }
        for (int a = 0; a < 3; a++)
            n[a] = ((w->o[a] + h->t_enter * w->d[a]) - b->c[a]) / b->r + 0.0f;
    } else {
        const rb_halfspace *p = &s->half[j - n_lbox - s->n_ball];
        for (int a = 0; a < 3; a++)
            n[a] = p->n[a] + 0.0f;
    }
}

void rb_box_normal(const rb_hit *h, float *n)
{
    if (!h->hit || h->face == RB_FACE_NONE || h->face > RB_FACE_POS_Z) {
        nan3(n);
        return;
    }
    int a = (h->face - 1) / 2;
    n[0] = n[1] = n[2] = 0.0f;
    n[a] = (h->face & 1) ? -1.0f : 1.0f;
}
