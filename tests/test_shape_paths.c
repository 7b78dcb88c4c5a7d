/* test_shape_paths.c - SPEC R16: every path that answers shapes gives the
 * same bits. The CPU brute force (hierarchy off) is the reference; the
 * shape hierarchy (bvh_shapes.c: widened node tests over conservative
 * world boxes) and the OpenCL kernels (kernels/shapes.cl, PoCL here, and
 * the box kernels of the box pass) must equal it exactly in every mode,
 * pairs included, for random rays and
 * for the rays that stress the widening: rays aimed at obb and xbox edges
 * and corners, tangent to spheres, grazing within an ulp, from far away,
 * at huge and tiny scales. Ray counts are per case; the suite runs well
 * over a million ray-shape answers in all. RBT_SCALE=N multiplies every
 * case's rays by N (RBT_SCALE=30: over a million rays per case and mode,
 * minutes rather than seconds; not part of make test). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bvh/bvh.h" /* joint trees: builds, refits */
#include "internal.h" /* ctx->walk_order */
#include "opencl/cl_testhook.h"
#include "testutil.h"

typedef struct scene {
    rb_box *boxes;
    rb_obb *obbs;
    rb_xbox *xboxes;
    rb_sphere *spheres;
    rb_plane *planes;
    size_t nb, no, nx, ns, np;
} scene;

static void scene_free(scene *s)
{
    free(s->boxes);
    free(s->obbs);
    free(s->xboxes);
    free(s->spheres);
    free(s->planes);
}

/* A random unit quaternion's obb, center in [-span, span]^3. */
static void random_obb(rbt_rng *g, float span, float size, rb_obb *o)
{
    float c[3], e[3], q[4];
    for (int a = 0; a < 3; a++) {
        c[a] = rbt_uniform(g, -span, span);
        e[a] = rbt_uniform(g, 0.0f, size);
    }
    for (int k = 0; k < 4; k++)
        q[k] = rbt_uniform(g, -1, 1);
    if (rb_obb_from_quaternion(c, e, q, o) != RB_OK) {
        q[0] = 1;
        rb_obb_from_quaternion(c, e, q, o);
    }
}

/* A sheared, scaled, turned box. */
static void random_xbox(rbt_rng *g, float span, float size, rb_xbox *x)
{
    for (int a = 0; a < 3; a++) {
        x->min[a] = rbt_uniform(g, -size, 0);
        x->max[a] = x->min[a] + rbt_uniform(g, 0, size);
        for (int j = 0; j < 3; j++)
            x->a[a][j] = (a == j ? 1.0f : 0.0f) + rbt_uniform(g, -0.6f, 0.6f);
        x->a[a][3] = rbt_uniform(g, -span, span);
    }
}

static void make_scene(rbt_rng *g, size_t per_kind, float span, float size,
                       scene *s)
{
    memset(s, 0, sizeof *s);
    s->nb = s->no = s->nx = s->ns = per_kind;
    s->np = 2;
    s->boxes = calloc(per_kind + 1, sizeof *s->boxes);
    s->obbs = calloc(per_kind + 1, sizeof *s->obbs);
    s->xboxes = calloc(per_kind + 1, sizeof *s->xboxes);
    s->spheres = calloc(per_kind + 1, sizeof *s->spheres);
    s->planes = calloc(2, sizeof *s->planes);
    for (size_t i = 0; i < per_kind; i++) {
        for (int a = 0; a < 3; a++) {
            s->boxes[i].min[a] = rbt_uniform(g, -span, span);
            s->boxes[i].max[a] = s->boxes[i].min[a] + rbt_uniform(g, 0, size);
            s->spheres[i].center[a] = rbt_uniform(g, -span, span);
        }
        s->spheres[i].radius = rbt_uniform(g, 0, size);
        random_obb(g, span, size, &s->obbs[i]);
        random_xbox(g, span, size, &s->xboxes[i]);
    }
    s->planes[0] = (rb_plane){{0.1f, 1.0f, 0.2f}, -2 * span};
    s->planes[1] = (rb_plane){{-0.3f, 0.1f, -1.0f}, -3 * span};
}

/* Rays meant to land on the edges of the shapes: a target on an obb's
 * (which 0) or xbox's (1) edge or corner, on a sphere's (2) silhouette,
 * on a box's (3) edge or corner, nudged by a few ulps; which < 0 picks
 * one at random. The origin far or near, the direction at random. */
static void edge_target(rbt_rng *g, const scene *s, float p[3], int which)
{
    switch (which < 0 ? (int)rbt_below(g, s->nb ? 4 : 3) : which) {
    case 0: {
        const rb_obb *o = &s->obbs[rbt_below(g, (uint32_t)s->no)];
        float sgn[3];
        for (int a = 0; a < 3; a++)
            sgn[a] = rbt_below(g, 2) ? 1.0f : -1.0f;
        /* An edge: two coordinates at the faces, one anywhere. */
        sgn[rbt_below(g, 3)] = rbt_uniform(g, -1, 1);
        for (int a = 0; a < 3; a++) {
            p[a] = o->center[a];
            for (int k = 0; k < 3; k++)
                p[a] += sgn[k] * o->half[k] * o->axes[k][a];
        }
        break;
    }
    case 1: {
        const rb_xbox *x = &s->xboxes[rbt_below(g, (uint32_t)s->nx)];
        float q[3];
        for (int a = 0; a < 3; a++)
            q[a] = rbt_below(g, 2) ? x->max[a] : x->min[a];
        for (int a = 0; a < 3; a++)
            p[a] = x->a[a][0] * q[0] + x->a[a][1] * q[1] + x->a[a][2] * q[2] +
                   x->a[a][3];
        break;
    }
    case 3: {
        /* A box's edge (joint trees test boxes beside the shapes). */
        const rb_box *b = &s->boxes[rbt_below(g, (uint32_t)s->nb)];
        int free_axis = (int)rbt_below(g, 3);
        for (int a = 0; a < 3; a++)
            p[a] = a == free_axis
                       ? rbt_uniform(g, b->min[a], b->max[a])
                       : (rbt_below(g, 2) ? b->max[a] : b->min[a]);
        break;
    }
    default: {
        const rb_sphere *sp = &s->spheres[rbt_below(g, (uint32_t)s->ns)];
        float d[3], len = 0;
        for (int a = 0; a < 3; a++) {
            d[a] = rbt_uniform(g, -1, 1);
            len += d[a] * d[a];
        }
        len = sqrtf(len) + 1e-30f;
        for (int a = 0; a < 3; a++)
            p[a] = sp->center[a] + sp->radius * d[a] / len;
        break;
    }
    }
    for (int a = 0; a < 3; a++) {
        int ulps = (int)rbt_below(g, 9) - 4;
        for (; ulps > 0; ulps--)
            p[a] = nextafterf(p[a], INFINITY);
        for (; ulps < 0; ulps++)
            p[a] = nextafterf(p[a], -INFINITY);
    }
}

enum { RAYS_RANDOM, RAYS_EDGES, RAYS_TANGENT };

static void make_rays(rbt_rng *g, const scene *s, int kind, float span,
                      float far, rb_ray *rays, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rb_ray *r = &rays[i];
        for (int a = 0; a < 3; a++)
            r->origin[a] = rbt_uniform(g, -far, far);
        float target[3];
        if (kind == RAYS_RANDOM) {
            for (int a = 0; a < 3; a++)
                target[a] = rbt_uniform(g, -span, span);
        } else if (kind == RAYS_EDGES) {
            edge_target(g, s, target, -1);
        } else {
            /* Tangent to a sphere: from a point on its surface along a
             * direction perpendicular to the radius there. */
            const rb_sphere *sp = &s->spheres[rbt_below(g, (uint32_t)s->ns)];
            float nv[3], t[3], len = 0;
            for (int a = 0; a < 3; a++) {
                nv[a] = rbt_uniform(g, -1, 1);
                len += nv[a] * nv[a];
            }
            len = sqrtf(len) + 1e-30f;
            for (int a = 0; a < 3; a++) {
                nv[a] /= len;
                target[a] = sp->center[a] + sp->radius * nv[a];
            }
            t[0] = nv[1], t[1] = -nv[0], t[2] = 0; /* perpendicular to nv */
            float back = rbt_uniform(g, 0.5f, far / 4 + 1);
            for (int a = 0; a < 3; a++)
                r->origin[a] = target[a] - back * t[a];
        }
        for (int a = 0; a < 3; a++)
            r->dir[a] = target[a] - r->origin[a];
        r->tmin = 0;
        r->tmax = rbt_below(g, 4) ? INFINITY : rbt_uniform(g, 0.2f, 2.0f);
    }
}

static rb_context *context(int hierarchy)
{
    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_CPU;
    o.hierarchy = hierarchy;
    rb_context *ctx = NULL;
    ck_assert_int_eq(rb_context_create(&o, &ctx, NULL, 0), RB_OK);
    return ctx;
}

/* The OpenCL backend without the CPU fallback: a failed launch fails the
 * test instead of hiding behind the CPU's answers. */
static rb_context *cl_context_with(int hierarchy)
{
    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_OPENCL;
    o.cpu_fallback = 0;
    o.hierarchy = hierarchy;
    return rbt_context_opts(RBT_OPENCL, &o);
}

/* Brute force on the device (kernels/shapes.cl's rb_shapes_*). */
static rb_context *cl_context(void)
{
    return cl_context_with(RB_HIERARCHY_OFF);
}

typedef struct answer {
    rb_hit *hits;
    uint8_t *any, *kinds;
    uint32_t *counts;
    rb_list_hit *list;
    float *normals;
    rb_run_info info;
} answer;

enum { MAX_HITS = 6 };

/* The query on scene `on` (NULL: s's elements inline). */
static void run_on(rb_context *ctx, const scene *s, const rb_scene *on,
                   rb_mode mode, const rb_ray *rays, size_t n, answer *a)
{
    memset(a, 0, sizeof *a);
    a->hits = calloc(n, sizeof *a->hits);
    a->any = calloc(n, 1);
    a->kinds = calloc(n, 1);
    a->counts = calloc(n, sizeof *a->counts);
    a->list = calloc(n * MAX_HITS, sizeof *a->list);
    a->normals = calloc(3 * n, sizeof *a->normals);
    rb_query q = {.mode = mode, .dims = 3, .rays = rays, .n_rays = n,
                  .boxes = s->boxes, .n_boxes = s->nb, .max_hits = MAX_HITS,
                  .outputs = RB_OUTPUT_NORMAL,
                  .shapes = {s->obbs, s->no, s->xboxes, s->nx, s->spheres,
                             s->ns, s->planes, s->np}};
    if (on) {
        memset(&q.shapes, 0, sizeof q.shapes);
        q.boxes = NULL;
        q.n_boxes = 0;
        q.scene = on;
    }
    rb_results r = {.hits = a->hits, .any = a->any, .counts = a->counts,
                    .list = a->list, .kinds = a->kinds, .normals = a->normals,
                    .capacity = n};
    int rc = rb_intersect(ctx, &q, &r);
    ck_assert_msg(rc == RB_OK, "rb_intersect: %s",
                  rb_context_error(ctx)->message);
    a->info = r.info;
}

static void run(rb_context *ctx, const scene *s, rb_mode mode,
                const rb_ray *rays, size_t n, answer *a)
{
    run_on(ctx, s, NULL, mode, rays, n, a);
}

static void answer_free(answer *a)
{
    free(a->hits);
    free(a->any);
    free(a->kinds);
    free(a->counts);
    free(a->list);
    free(a->normals);
}

/* The two answers are the same bits, ray for ray. Checked with plain
 * ifs: a passing ck_assert marks its point through check's pipe, which
 * made million-ray comparisons take seconds each. */
static void same(rb_mode mode, const answer *x, const answer *y, size_t n,
                 const char *what)
{
    for (size_t i = 0; i < n; i++) {
        switch (mode) {
        case RB_MODE_NEAREST:
            if (!rbt_same_hit(&x->hits[i], &y->hits[i]) ||
                x->kinds[i] != y->kinds[i] ||
                memcmp(x->normals + 3 * i, y->normals + 3 * i, 12) != 0) {
                char b1[128], b2[128];
                ck_abort_msg("%s nearest ray %zu: brute %s, walk %s", what, i,
                             rbt_hit_str(&x->hits[i], b1, sizeof b1),
                             rbt_hit_str(&y->hits[i], b2, sizeof b2));
            }
            break;
        case RB_MODE_ANY:
            if (x->any[i] != y->any[i])
                ck_abort_msg("%s any ray %zu: %d vs %d", what, i, x->any[i],
                             y->any[i]);
            break;
        case RB_MODE_COUNT:
            if (x->counts[i] != y->counts[i])
                ck_abort_msg("%s count ray %zu: %u vs %u", what, i,
                             x->counts[i], y->counts[i]);
            break;
        default: {
            if (x->counts[i] != y->counts[i])
                ck_abort_msg("%s all ray %zu: %u vs %u hits", what, i,
                             x->counts[i], y->counts[i]);
            size_t k = x->counts[i] < MAX_HITS ? x->counts[i] : MAX_HITS;
            if (memcmp(x->list + i * MAX_HITS, y->list + i * MAX_HITS,
                       k * sizeof *x->list) != 0)
                ck_abort_msg("%s all ray %zu: lists differ", what, i);
        }
        }
    }
}

/* RBT_SCALE from the environment, 1 when unset. */
static size_t scale(void)
{
    const char *v = getenv("RBT_SCALE");
    long k = v ? strtol(v, NULL, 10) : 1;
    return k >= 1 ? (size_t)k : 1;
}

/* Set by test_walk_variants: compare_paths also runs the walk in ray
 * order (ray_order.h, forced on small trees) and the portable scalar
 * walk (RAYBOX_SIMD=scalar), against the same brute force. */
static int variants;

/* Every mode of n rays against a random scene of every kind (its boxes
 * dropped unless keep_boxes): the hierarchy walk, and with `variants`
 * the other walks, the same bits as brute force. */
static void compare_scene_paths(uint64_t seed, size_t per_kind, float span,
                                float size, float far, int rays_kind,
                                size_t n, int keep_boxes, const char *what)
{
    n *= scale();
    rbt_rng g = {seed};
    scene s;
    make_scene(&g, per_kind, span, size, &s);
    if (!keep_boxes)
        s.nb = 0;
    rb_ray *rays = malloc(n * sizeof *rays);
    make_rays(&g, &s, rays_kind, span, far, rays, n);
    rb_context *brute = context(RB_HIERARCHY_OFF);
    rb_context *tree = context(RB_HIERARCHY_ALWAYS);
    rb_context *ordered = NULL, *scalar = NULL;
    if (variants) {
        ordered = context(RB_HIERARCHY_ALWAYS);
        ordered->walk_order = RB_WALK_ORDER_ALWAYS;
        ck_assert_int_eq(setenv("RAYBOX_SIMD", "scalar", 1), 0);
        scalar = context(RB_HIERARCHY_ALWAYS);
    }
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    uint64_t hits = 0;
    for (int m = 0; m < 4; m++) {
        answer x, y;
        run(brute, &s, modes[m], rays, n, &x);
        if (variants) {
            char label[128];
            /* The shape pass picks its walk per query: scalar while the
             * variable is set, the best one otherwise. */
            run(scalar, &s, modes[m], rays, n, &y);
            snprintf(label, sizeof label, "%s (scalar walk)", what);
            same(modes[m], &x, &y, n, label);
            answer_free(&y);
            ck_assert_int_eq(unsetenv("RAYBOX_SIMD"), 0);
            run(ordered, &s, modes[m], rays, n, &y);
            snprintf(label, sizeof label, "%s (ray order)", what);
            same(modes[m], &x, &y, n, label);
            answer_free(&y);
            ck_assert_int_eq(setenv("RAYBOX_SIMD", "scalar", 1), 0);
        }
        run(tree, &s, modes[m], rays, n, &y);
        same(modes[m], &x, &y, n, what);
        /* the CPU's tasks, whichever passes ran (rb_run_info.chunks) */
        ck_assert_uint_gt(y.info.chunks, 0);
        if (modes[m] == RB_MODE_COUNT)
            for (size_t i = 0; i < n; i++)
                hits += x.counts[i];
        answer_free(&x);
        answer_free(&y);
    }
    /* The case means something only if rays do hit. */
    ck_assert_msg(hits > n / 20, "%s: only %llu hits for %zu rays", what,
                  (unsigned long long)hits, n);
    rb_context_destroy(brute);
    rb_context_destroy(tree);
    rb_context_destroy(ordered);
    rb_context_destroy(scalar);
    if (variants)
        ck_assert_int_eq(unsetenv("RAYBOX_SIMD"), 0);
    free(rays);
    scene_free(&s);
}

/* The same with the scene's boxes. */
static void compare_paths(uint64_t seed, size_t per_kind, float span,
                          float size, float far, int rays_kind, size_t n,
                          const char *what)
{
    compare_scene_paths(seed, per_kind, span, size, far, rays_kind, n, 1,
                        what);
}

/* pairs (ray i against element i) of query q: the same bits on a and on
 * b. Returns how many rays hit on a. */
static size_t pairs_same(rb_context *a, rb_context *b, const rb_query *q,
                         const char *what)
{
    size_t n = q->n_rays, hits = 0;
    rb_hit *x = calloc(n, sizeof *x), *y = calloc(n, sizeof *y);
    float *nx = calloc(3 * n, sizeof *nx), *ny = calloc(3 * n, sizeof *ny);
    rb_results rx = {.hits = x, .normals = nx, .capacity = n};
    rb_results ry = {.hits = y, .normals = ny, .capacity = n};
    ck_assert_int_eq(rb_intersect(a, q, &rx), RB_OK);
    ck_assert_msg(rb_intersect(b, q, &ry) == RB_OK, "%s: %s", what,
                  rb_context_error(b)->message);
    for (size_t i = 0; i < n; i++) {
        hits += x[i].hit != 0;
        if (rbt_same_hit(&x[i], &y[i]) &&
            memcmp(nx + 3 * i, ny + 3 * i, 12) == 0)
            continue;
        char b1[128], b2[128];
        ck_abort_msg("%s pairs ray %zu: %s vs %s", what, i,
                     rbt_hit_str(&x[i], b1, sizeof b1),
                     rbt_hit_str(&y[i], b2, sizeof b2));
    }
    free(x);
    free(y);
    free(nx);
    free(ny);
    return hits;
}

/* pairs of n rays against the n shapes of sh (one kind). */
static rb_query pairs_query(const rb_ray *rays, size_t n, rb_shapes sh)
{
    return (rb_query){.mode = RB_MODE_PAIRS, .dims = 3, .rays = rays,
                      .n_rays = n, .shapes = sh,
                      .outputs = RB_OUTPUT_NORMAL};
}

/* The CPU (brute force and walk) against OpenCL, every mode and pairs of
 * each kind, on edge-aimed rays. */
static void compare_backends(uint64_t seed, int rays_kind, const char *what)
{
    enum { PER_KIND = 120 };
    size_t N = 6000 * scale();
    rbt_rng g = {seed};
    scene s;
    make_scene(&g, PER_KIND, 20, 3, &s);
    rb_ray *rays = malloc(N * sizeof *rays);
    make_rays(&g, &s, rays_kind, 20, 25, rays, N);
    rb_context *cpu = context(RB_HIERARCHY_OFF);
    rb_context *cl = cl_context();
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    for (int m = 0; m < 4; m++) {
        answer x, y;
        run(cpu, &s, modes[m], rays, N, &x);
        run(cl, &s, modes[m], rays, N, &y);
        same(modes[m], &x, &y, N, what);
        answer_free(&x);
        answer_free(&y);
    }
    size_t n = PER_KIND;
    const rb_query pq[] = {
        pairs_query(rays, n, (rb_shapes){.obbs = s.obbs, .n_obbs = n}),
        pairs_query(rays, n, (rb_shapes){.xboxes = s.xboxes, .n_xboxes = n}),
        pairs_query(rays, n,
                    (rb_shapes){.spheres = s.spheres, .n_spheres = n}),
        pairs_query(rays, 2, (rb_shapes){.planes = s.planes, .n_planes = 2})};
    for (size_t k = 0; k < sizeof pq / sizeof pq[0]; k++)
        pairs_same(cpu, cl, &pq[k], what);
    rb_context_destroy(cpu);
    rb_context_destroy(cl);
    free(rays);
    scene_free(&s);
}

START_TEST(test_opencl_random)
{
    compare_backends(11, RAYS_RANDOM, "opencl random");
}
END_TEST

START_TEST(test_opencl_edges)
{
    compare_backends(12, RAYS_EDGES, "opencl edges");
    compare_backends(13, RAYS_TANGENT, "opencl tangent");
}
END_TEST

START_TEST(test_random_rays)
{
    compare_paths(1, 300, 20, 3, 25, RAYS_RANDOM, 40000, "random");
}
END_TEST

START_TEST(test_edge_rays)
{
    compare_paths(2, 300, 20, 3, 25, RAYS_EDGES, 40000, "edges");
}
END_TEST

START_TEST(test_tangent_rays)
{
    compare_paths(3, 300, 20, 3, 25, RAYS_TANGENT, 40000, "tangent");
}
END_TEST

/* Origins thousands of scene sizes away: the widening grows with them. */
START_TEST(test_far_origins)
{
    compare_paths(4, 200, 10, 2, 1e5f, RAYS_EDGES, 20000, "far edges");
    compare_paths(5, 200, 10, 2, 1e5f, RAYS_RANDOM, 20000, "far random");
}
END_TEST

/* Shapes and no boxes: the CPU's box pass only checks the rays and
 * clears the answers (cpu_backend.c), the shape pass answers; rays near
 * (the tree's own walk) and far (the widened walk after it). */
START_TEST(test_no_boxes)
{
    compare_scene_paths(16, 200, 20, 3, 25, RAYS_EDGES, 12000, 0,
                        "no boxes, near");
    compare_scene_paths(17, 200, 10, 2, 1e5f, RAYS_RANDOM, 12000, 0,
                        "no boxes, far");
}
END_TEST

/* The walk in ray order and the scalar walk; near and far origins (the
 * tree's own widening, and the extra widening of far rays). */
START_TEST(test_walk_variants)
{
    variants = 1;
    compare_paths(14, 200, 20, 3, 25, RAYS_EDGES, 12000, "variants near");
    compare_paths(15, 200, 10, 2, 1e3f, RAYS_EDGES, 12000, "variants far");
    variants = 0;
}
END_TEST

/* The same scene scaled to huge and to tiny coordinates. */
START_TEST(test_scales)
{
    compare_paths(6, 200, 2e30f, 3e29f, 3e30f, RAYS_EDGES, 20000, "huge");
    compare_paths(7, 200, 2e-30f, 3e-31f, 3e-30f, RAYS_EDGES, 20000,
                  "tiny");
    compare_paths(8, 200, 1e6f, 1.0f, 1e6f, RAYS_EDGES, 20000,
                  "small shapes far out");
}
END_TEST

/* ---- joint trees: a scene's boxes in its shape tree ------------------
 * A mixed scene's shape tree holds its boxes too (bvh_shapes.c), and the
 * CPU answers boxes and shapes in one walk of it (rb_joint_run). A moved
 * box refits that tree, a refit that degrades it rebuilds it, appended
 * boxes rebuild it; after each change the scene answers as a scene with
 * the same changes in a context without hierarchies, on rays near and far
 * (far ones take their boxes from the joint walk and their shapes from
 * the shape walk's own routes). */

static void scene_pair_same(rb_context *tree, const rb_scene *sc,
                            rb_context *brute, const rb_scene *ref,
                            const scene *s, const rb_ray *rays, size_t n,
                            const char *what)
{
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    for (int m = 0; m < 4; m++) {
        answer x, y;
        run_on(brute, s, ref, modes[m], rays, n, &x);
        run_on(tree, s, sc, modes[m], rays, n, &y);
        same(modes[m], &x, &y, n, what);
        answer_free(&x);
        answer_free(&y);
    }
}

/* The same change on both scenes. */
static void set_both(rb_context *a, rb_scene *sa, rb_context *b,
                     rb_scene *sb, const uint32_t *ids, const rb_element *e,
                     size_t n)
{
    ck_assert_int_eq(rb_scene_set_elements(a, sa, ids, e, n), RB_OK);
    ck_assert_int_eq(rb_scene_set_elements(b, sb, ids, e, n), RB_OK);
}

START_TEST(test_joint_scene)
{
    enum { PER_KIND = 200, N = 8000 };
    rbt_rng g = {41};
    scene s;
    make_scene(&g, PER_KIND, 20, 3, &s);
    rb_ray *rays = malloc(2 * N * sizeof *rays);
    make_rays(&g, &s, RAYS_EDGES, 20, 25, rays, N);
    make_rays(&g, &s, RAYS_EDGES, 20, 1e4f, rays + N, N); /* far */
    rb_context *brute = context(RB_HIERARCHY_OFF);
    rb_context *tree = context(RB_HIERARCHY_ALWAYS);
    rb_shapes sh = {s.obbs, s.no, s.xboxes, s.nx, s.spheres, s.ns, s.planes,
                    s.np};
    rb_scene *sc = NULL, *ref = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(tree, 3, s.boxes, s.nb, &sh, &sc),
                     RB_OK);
    ck_assert_int_eq(
        rb_scene_create_shapes(brute, 3, s.boxes, s.nb, &sh, &ref), RB_OK);
    const rb_shapeset *set = rb_scene_shapeset(sc);
    ck_assert_ptr_nonnull(set->tree);
    ck_assert_uint_eq(set->n_tree_boxes, s.nb);
    scene_pair_same(tree, sc, brute, ref, &s, rays, 2 * N, "joint scene");

    /* Three boxes move a little: the joint tree is refit, not rebuilt (a
     * build refits once, to widen its shape slots; a rebuild makes a new
     * tree). */
    uint64_t refits = set->tree->refits;
    ck_assert_uint_eq(refits, 1);
    uint32_t ids[PER_KIND];
    rb_element e[PER_KIND];
    for (int k = 0; k < 3; k++) {
        ids[k] = (uint32_t)(7 * k + 1);
        e[k].kind = RB_KIND_BOX;
        e[k].as.box = s.boxes[ids[k]];
        e[k].as.box.min[1] -= 0.5f;
        e[k].as.box.max[0] += 0.75f;
    }
    set_both(tree, sc, brute, ref, ids, e, 3);
    set = rb_scene_shapeset(sc);
    ck_assert_uint_eq(set->tree->refits, refits + 1);
    scene_pair_same(tree, sc, brute, ref, &s, rays, 2 * N,
                    "joint scene after a refit");

    /* Half the boxes jump across the scene: the refit degrades the tree
     * past the rebuild ratio, and it is built again. */
    for (int k = 0; k < PER_KIND / 2; k++) {
        ids[k] = (uint32_t)(2 * k);
        e[k].kind = RB_KIND_BOX;
        for (int a = 0; a < 3; a++) {
            e[k].as.box.min[a] = rbt_uniform(&g, -20, 20);
            e[k].as.box.max[a] = e[k].as.box.min[a] + rbt_uniform(&g, 0, 6);
        }
    }
    set_both(tree, sc, brute, ref, ids, e, PER_KIND / 2);
    set = rb_scene_shapeset(sc);
    ck_assert_uint_eq(set->tree->refits, 1);
    scene_pair_same(tree, sc, brute, ref, &s, rays, 2 * N,
                    "joint scene after a rebuild");

    /* Boxes appended (ids after every element so far) join the tree. */
    rb_box more[30];
    for (int i = 0; i < 30; i++)
        for (int a = 0; a < 3; a++) {
            more[i].min[a] = rbt_uniform(&g, -20, 20);
            more[i].max[a] = more[i].min[a] + rbt_uniform(&g, 0, 3);
        }
    ck_assert_int_eq(rb_scene_append(tree, sc, more, 30), RB_OK);
    ck_assert_int_eq(rb_scene_append(brute, ref, more, 30), RB_OK);
    set = rb_scene_shapeset(sc);
    ck_assert_uint_eq(set->n_tree_boxes, s.nb + 30);
    scene_pair_same(tree, sc, brute, ref, &s, rays, 2 * N,
                    "joint scene after appended boxes");

    /* An appended box moves (its id is not its index), then a sphere. */
    ids[0] = (uint32_t)(s.nb + s.no + s.nx + s.ns + s.np + 4);
    e[0].kind = RB_KIND_BOX;
    e[0].as.box = more[4];
    e[0].as.box.min[2] -= 2;
    ids[1] = (uint32_t)(s.nb + s.no + s.nx + 3);
    e[1].kind = RB_KIND_SPHERE;
    e[1].as.sphere = s.spheres[3];
    e[1].as.sphere.radius += 1;
    set_both(tree, sc, brute, ref, ids, e, 1);
    scene_pair_same(tree, sc, brute, ref, &s, rays, 2 * N,
                    "joint scene after an appended box moved");
    set_both(tree, sc, brute, ref, ids + 1, e + 1, 1);
    scene_pair_same(tree, sc, brute, ref, &s, rays, 2 * N,
                    "joint scene after a sphere moved");

    /* A copy-on-write clone keeps its own joint tree. */
    rb_scene *copy = NULL;
    ck_assert_int_eq(rb_scene_clone(tree, sc, &copy), RB_OK);
    e[0].as.box.max[1] += 5;
    ck_assert_int_eq(rb_scene_set_elements(tree, copy, ids, e, 1), RB_OK);
    scene_pair_same(tree, sc, brute, ref, &s, rays, 2 * N,
                    "joint scene beside a changed clone");
    rb_scene_destroy(copy);
    rb_scene_destroy(sc);
    rb_scene_destroy(ref);

    /* Far more boxes than shapes: a shape tree of its own (not joint),
     * walked beside the box tree. */
    rb_shapes few = {.spheres = s.spheres, .n_spheres = 20};
    ck_assert_int_eq(rb_scene_create_shapes(tree, 3, s.boxes, s.nb, &few,
                                            &sc),
                     RB_OK);
    ck_assert_int_eq(rb_scene_create_shapes(brute, 3, s.boxes, s.nb, &few,
                                            &ref),
                     RB_OK);
    set = rb_scene_shapeset(sc);
    ck_assert_ptr_nonnull(set->tree);
    ck_assert_uint_eq(set->n_tree_boxes, 0);
    scene_pair_same(tree, sc, brute, ref, &s, rays, 2 * N,
                    "scene of boxes and a few spheres");
    ids[0] = 3;
    e[0].kind = RB_KIND_BOX;
    e[0].as.box = s.boxes[3];
    e[0].as.box.max[0] += 4;
    set_both(tree, sc, brute, ref, ids, e, 1);
    scene_pair_same(tree, sc, brute, ref, &s, rays, 2 * N,
                    "scene of boxes and a few spheres, a box moved");
    rb_scene_destroy(sc);
    rb_scene_destroy(ref);
    rb_context_destroy(brute);
    rb_context_destroy(tree);
    free(rays);
    scene_free(&s);
}
END_TEST

/* In one walk, invalid rays are still refused by the lowest index, as
 * the box pass refuses them: on the CPU, and (_i = 1) in the device's
 * joint walk, in ray order there too. Without boxes too, where the box
 * pass (over no boxes) refuses it. */
START_TEST(test_joint_bad_ray)
{
    enum { PER_KIND = 100, N = 20000 };
    rbt_rng g = {43};
    scene s;
    make_scene(&g, PER_KIND, 20, 3, &s);
    rb_ray *rays = malloc(N * sizeof *rays);
    make_rays(&g, &s, RAYS_RANDOM, 20, 25, rays, N);
    rays[15000].dir[1] = NAN;
    rays[9000].tmin = 5;
    rays[9000].tmax = 1;
    rb_context *ctx = _i ? cl_context_with(RB_HIERARCHY_ALWAYS)
                         : context(RB_HIERARCHY_ALWAYS);
    ctx->walk_order = RB_WALK_ORDER_ALWAYS;
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    for (int m = 0; m < 8; m++) {
        answer a;
        memset(&a, 0, sizeof a);
        a.hits = calloc(N, sizeof *a.hits);
        a.any = calloc(N, 1);
        a.counts = calloc(N, sizeof *a.counts);
        a.list = calloc((size_t)N * MAX_HITS, sizeof *a.list);
        rb_query q = {.mode = modes[m % 4], .dims = 3, .rays = rays,
                      .n_rays = N, .boxes = s.boxes,
                      .n_boxes = m < 4 ? s.nb : 0,
                      .max_hits = MAX_HITS,
                      .shapes = {s.obbs, s.no, s.xboxes, s.nx, s.spheres,
                                 s.ns, s.planes, s.np}};
        rb_results r = {.hits = a.hits, .any = a.any, .counts = a.counts,
                        .list = a.list, .capacity = N};
        ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_EINPUT);
        const rb_error *err = rb_context_error(ctx);
        ck_assert_int_eq(err->element, RB_ELEMENT_RAY);
        ck_assert_uint_eq(err->index, 9000);
        /* the joint walk (m < 4) or the box pass (no boxes) of the
         * context's backend refused it, and the answer names it */
        ck_assert_str_eq(r.info.backend, _i ? "opencl" : "cpu");
        ck_assert_int_eq(r.info.fell_back, 0);
        answer_free(&a);
    }
    rb_context_destroy(ctx);
    free(rays);
    scene_free(&s);
}
END_TEST

/* The OpenCL walk of the shape tree (kernels/shapes.cl's
 * rb_shape_walk_*, bvh.cl's loop) against the CPU brute force and the CPU
 * walk, every mode, on a mixed scene (boxes, every kind, planes). Every
 * query must have walked on the device (a walk that skipped a shape
 * differs from brute force on the edge-aimed rays). With
 * expect_tree 0 (huge scenes: no tree is built, bvh_shapes.c) the
 * device's brute force answers instead, and must agree all the same. Far
 * and tiny cases test the rays the kernels test leaf by leaf. */
static void compare_cl_walk(uint64_t seed, size_t per_kind, float span,
                            float size, float far, int rays_kind, size_t n,
                            int expect_tree, const char *what)
{
    n *= scale();
    rbt_rng g = {seed};
    scene s;
    make_scene(&g, per_kind, span, size, &s);
    rb_ray *rays = malloc(n * sizeof *rays);
    make_rays(&g, &s, rays_kind, span, far, rays, n);
    rb_context *brute = context(RB_HIERARCHY_OFF);
    rb_context *tree = context(RB_HIERARCHY_ALWAYS);
    rb_context *cl = cl_context_with(RB_HIERARCHY_ALWAYS);
    /* The stack the test asked for is the one the program was built
     * with (else the short-stack run would test nothing new). */
    const char *stack = getenv("RAYBOX_CL_BVH_STACK");
    if (stack)
        ck_assert_uint_eq(rb_cl_bvh_stack(cl), (unsigned)atoi(stack));
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    uint64_t hits = 0;
    for (int m = 0; m < 4; m++) {
        answer x, y, z;
        unsigned long long walks = rb_cl_shape_walks(cl);
        run(brute, &s, modes[m], rays, n, &x);
        run(tree, &s, modes[m], rays, n, &y);
        run(cl, &s, modes[m], rays, n, &z);
        /* huge scenes get no tree (bvh_shapes.c): brute force on the
         * device instead, which must agree all the same */
        ck_assert_msg(rb_cl_shape_walks(cl) == walks + (expect_tree ? 1 : 0),
                      "%s: %llu OpenCL shape walks, expected %d", what,
                      rb_cl_shape_walks(cl) - walks, expect_tree);
        char label[160];
        snprintf(label, sizeof label, "%s (CPU brute / OpenCL walk)", what);
        same(modes[m], &x, &z, n, label);
        snprintf(label, sizeof label, "%s (CPU walk / OpenCL walk)", what);
        same(modes[m], &y, &z, n, label);
        if (modes[m] == RB_MODE_COUNT)
            for (size_t i = 0; i < n; i++)
                hits += x.counts[i];
        answer_free(&x);
        answer_free(&y);
        answer_free(&z);
    }
    ck_assert_msg(hits > n / 20, "%s: only %llu hits for %zu rays", what,
                  (unsigned long long)hits, n);
    rb_context_destroy(brute);
    rb_context_destroy(tree);
    rb_context_destroy(cl);
    free(rays);
    scene_free(&s);
}

START_TEST(test_cl_walk_near)
{
    compare_cl_walk(21, 300, 20, 3, 25, RAYS_RANDOM, 12000, 1,
                    "cl walk random");
    compare_cl_walk(22, 300, 20, 3, 25, RAYS_EDGES, 12000, 1,
                    "cl walk edges");
    compare_cl_walk(23, 300, 20, 3, 25, RAYS_TANGENT, 12000, 1,
                    "cl walk tangent");
}
END_TEST

/* Far origins (the CPU's own widening; the kernels test every leaf),
 * huge (no tree), tiny (directions below 2^-60: every leaf) and small
 * shapes far out. */
START_TEST(test_cl_walk_far_and_scales)
{
    compare_cl_walk(24, 200, 10, 2, 1e5f, RAYS_EDGES, 6000, 1,
                    "cl walk far edges");
    compare_cl_walk(25, 200, 10, 2, 1e3f, RAYS_RANDOM, 6000, 1,
                    "cl walk far random");
    compare_cl_walk(26, 200, 2e30f, 3e29f, 3e30f, RAYS_EDGES, 6000, 0,
                    "cl walk huge");
    compare_cl_walk(27, 200, 2e-30f, 3e-31f, 3e-30f, RAYS_EDGES, 6000, 1,
                    "cl walk tiny");
    compare_cl_walk(28, 200, 1e6f, 1.0f, 1e6f, RAYS_EDGES, 6000, 1,
                    "cl walk small shapes far out");
}
END_TEST

/* A scene's shape tree on the device: walked (hierarchy auto, over
 * SCENE_MIN_SHAPES), uploaded once per version, and renewed by a PATCH
 * set (a moved sphere and obb) and an append; the CPU brute force of the
 * same elements is the reference after each change. */
static void scene_same(rb_context *cl, rb_context *brute, const scene *s,
                       const rb_scene *sc, const rb_ray *rays, size_t n,
                       const char *what)
{
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    for (int m = 0; m < 4; m++) {
        answer x, y;
        unsigned long long walks = rb_cl_shape_walks(cl);
        run(brute, s, modes[m], rays, n, &x);
        run_on(cl, s, sc, modes[m], rays, n, &y);
        ck_assert_msg(rb_cl_shape_walks(cl) == walks + 1,
                      "%s: the scene's shapes were not walked on the device",
                      what);
        same(modes[m], &x, &y, n, what);
        answer_free(&x);
        answer_free(&y);
    }
}

START_TEST(test_cl_walk_scene_versions)
{
    enum { PER_KIND = 150, N = 6000 };
    rbt_rng g = {31};
    scene s;
    make_scene(&g, PER_KIND, 20, 3, &s);
    rb_ray *rays = malloc(N * sizeof *rays);
    make_rays(&g, &s, RAYS_EDGES, 20, 25, rays, N);
    rb_context *brute = context(RB_HIERARCHY_OFF);
    rb_context *cl = cl_context_with(RB_HIERARCHY_AUTO);
    rb_shapes sh = {s.obbs, s.no, s.xboxes, s.nx, s.spheres, s.ns, s.planes,
                    s.np};
    rb_scene *sc = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(cl, 3, s.boxes, s.nb, &sh, &sc),
                     RB_OK);
    unsigned long long up = rb_cl_shape_uploads(cl);
    scene_same(cl, brute, &s, sc, rays, N, "scene");
    ck_assert_msg(rb_cl_shape_uploads(cl) == up + 1,
                  "%llu uploads of one shape tree over four queries",
                  rb_cl_shape_uploads(cl) - up);

    /* PATCH set: sphere 0 and obb 1 move (ids: boxes, obbs, xboxes,
     * spheres, planes). */
    rb_element e[2];
    uint32_t ids[2] = {(uint32_t)(s.nb + s.no + s.nx), (uint32_t)(s.nb + 1)};
    s.spheres[0].center[0] += 5;
    s.spheres[0].radius = 4;
    s.obbs[1].center[1] -= 7;
    e[0].kind = RB_KIND_SPHERE;
    e[0].as.sphere = s.spheres[0];
    e[1].kind = RB_KIND_OBB;
    e[1].as.obb = s.obbs[1];
    ck_assert_int_eq(rb_scene_set_elements(cl, sc, ids, e, 2), RB_OK);
    up = rb_cl_shape_uploads(cl);
    scene_same(cl, brute, &s, sc, rays, N, "scene after set");
    ck_assert_int_eq(rb_cl_shape_uploads(cl), up + 1);

    /* Append: more spheres, whose ids follow every old one (planes
     * included); the reference is a CPU scene with the same append. */
    rb_sphere more[40];
    for (int i = 0; i < 40; i++) {
        for (int a = 0; a < 3; a++)
            more[i].center[a] = rbt_uniform(&g, -20, 20);
        more[i].radius = rbt_uniform(&g, 0, 3);
    }
    rb_shapes add = {.spheres = more, .n_spheres = 40};
    ck_assert_int_eq(rb_scene_append_shapes(cl, sc, NULL, 0, &add), RB_OK);
    rb_context *cpu_scene = context(RB_HIERARCHY_OFF);
    rb_scene *ref = NULL;
    ck_assert_int_eq(
        rb_scene_create_shapes(cpu_scene, 3, s.boxes, s.nb, &sh, &ref),
        RB_OK);
    ck_assert_int_eq(rb_scene_append_shapes(cpu_scene, ref, NULL, 0, &add),
                     RB_OK);
    up = rb_cl_shape_uploads(cl);
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    for (int m = 0; m < 4; m++) {
        answer x, y;
        run_on(cpu_scene, &s, ref, modes[m], rays, N, &x);
        run_on(cl, &s, sc, modes[m], rays, N, &y);
        same(modes[m], &x, &y, N, "scene after append");
        answer_free(&x);
        answer_free(&y);
    }
    ck_assert_int_eq(rb_cl_shape_uploads(cl), up + 1);
    rb_scene_destroy(ref);
    rb_scene_destroy(sc);
    rb_context_destroy(cpu_scene);
    rb_context_destroy(brute);
    rb_context_destroy(cl);
    free(rays);
    scene_free(&s);
}
END_TEST

/* A failing OpenCL call anywhere in a shape walk query (cl_testhook.h's
 * fault injection): the query falls back to the CPU with the brute
 * force's answers, and the next query walks on the device again (the
 * tree uploaded afresh where the failure hit its upload). Then a budget
 * too small for the tree: brute force on the device, same answers. */
START_TEST(test_cl_walk_failures)
{
    enum { PER_KIND = 100, N = 300 };
    rbt_rng g = {41};
    scene s;
    make_scene(&g, PER_KIND, 20, 3, &s);
    rb_ray *rays = malloc(N * sizeof *rays);
    make_rays(&g, &s, RAYS_EDGES, 20, 25, rays, N);
    rb_context *brute = context(RB_HIERARCHY_OFF);
    rb_context *cl = rbt_context_limited(RBT_OPENCL, 0, 0, 1);
    rb_shapes sh = {s.obbs, s.no, s.xboxes, s.nx, s.spheres, s.ns, s.planes,
                    s.np};
    rb_scene *sc = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(cl, 3, s.boxes, s.nb, &sh, &sc),
                     RB_OK);
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    for (int m = 0; m < 4; m++) {
        answer want, got;
        run(brute, &s, modes[m], rays, N, &want);
        run_on(cl, &s, sc, modes[m], rays, N, &got);
        answer_free(&got);
        unsigned long long c0 = rb_cl_calls(cl), w0 = rb_cl_shape_walks(cl);
        run_on(cl, &s, sc, modes[m], rays, N, &got);
        answer_free(&got);
        unsigned long long calls = rb_cl_calls(cl) - c0;
        ck_assert_uint_eq(rb_cl_shape_walks(cl) - w0, 1);
        ck_assert_uint_ge(calls, 5);
        for (unsigned long long n = 0; n < calls; n++) {
            rb_cl_fail_after(cl, (long)n);
            run_on(cl, &s, sc, modes[m], rays, N, &got);
            ck_assert_msg(got.info.fell_back == 1 &&
                              strcmp(got.info.backend, "cpu") == 0,
                          "%s call %llu: no fallback", rb_mode_name(modes[m]),
                          n);
            same(modes[m], &want, &got, N, "after a failed call");
            answer_free(&got);
            w0 = rb_cl_shape_walks(cl);
            run_on(cl, &s, sc, modes[m], rays, N, &got);
            ck_assert_msg(!got.info.fell_back &&
                              rb_cl_shape_walks(cl) - w0 == 1,
                          "%s after call %llu: fell_back %d",
                          rb_mode_name(modes[m]), n, got.info.fell_back);
            same(modes[m], &want, &got, N, "the walk after a failure");
            answer_free(&got);
        }
        answer_free(&want);
    }
    rb_scene_destroy(sc);
    /* The tree over the budget (its nodes and leaf records beside one
     * work-group of rays), the shapes within it: the device's brute
     * force answers. */
    const uint64_t budget = 26 << 10;
    rb_context *small = rbt_context_limited(RBT_OPENCL, 0, budget, 0);
    ck_assert_int_eq(
        rb_scene_create_shapes(small, 3, s.boxes, s.nb, &sh, &sc), RB_OK);
    rb_scene_stats st;
    rb_scene_stats_get(sc, &st);
    ck_assert_uint_gt(st.shape_nodes * sizeof(rb_bvh_node) +
                          (s.no + s.nx) * sizeof(rb_lbox) +
                          s.ns * sizeof(rb_ball),
                      budget);
    for (int m = 0; m < 4; m++) {
        answer want, got;
        run(brute, &s, modes[m], rays, N, &want);
        unsigned long long w0 = rb_cl_shape_walks(small);
        run_on(small, &s, sc, modes[m], rays, N, &got);
        ck_assert_uint_eq(rb_cl_shape_walks(small), w0);
        ck_assert_int_eq(got.info.fell_back, 0);
        same(modes[m], &want, &got, N, "the tree over the budget");
        answer_free(&want);
        answer_free(&got);
    }
    rb_scene_destroy(sc);
    rb_context_destroy(small);
    /* Not even the shapes fit: the device says so, and with fallback
     * the CPU answers. */
    for (int fallback = 0; fallback < 2; fallback++) {
        small = rbt_context_limited(RBT_OPENCL, 0, 12 << 10, fallback);
        ck_assert_int_eq(
            rb_scene_create_shapes(small, 3, s.boxes, s.nb, &sh, &sc), RB_OK);
        answer want, got;
        run(brute, &s, RB_MODE_NEAREST, rays, N, &want);
        if (fallback) {
            run_on(small, &s, sc, RB_MODE_NEAREST, rays, N, &got);
            ck_assert_int_eq(got.info.fell_back, 1);
            same(RB_MODE_NEAREST, &want, &got, N, "shapes over the budget");
            answer_free(&got);
        } else {
            rb_hit *h = calloc(N, sizeof *h);
            rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = rays,
                          .n_rays = N, .scene = sc};
            rb_results r = {.hits = h, .capacity = N};
            ck_assert_int_eq(rb_intersect(small, &q, &r), RB_EDEVMEM);
            const char *msg = rb_context_error(small)->message;
            ck_assert_msg(strstr(msg, "do not fit the device memory budget"),
                          "%s", msg);
            free(h);
        }
        answer_free(&want);
        rb_scene_destroy(sc);
        rb_context_destroy(small);
    }
    rb_context_destroy(brute);
    rb_context_destroy(cl);
    free(rays);
    scene_free(&s);
}
END_TEST

/* The budget bounds what the backend keeps between queries: a shape tree
 * left on the device by a scene's walk, then a big box query, then the
 * walk again (the tree goes, and comes back). */
START_TEST(test_cl_walk_budget)
{
    enum { PER_KIND = 600, N = 3000, NB = 4000 };
    const uint64_t budget = 320 << 10;
    rbt_rng g = {42};
    scene s;
    make_scene(&g, PER_KIND, 20, 3, &s);
    rb_ray *rays = malloc(N * sizeof *rays);
    make_rays(&g, &s, RAYS_RANDOM, 20, 25, rays, N);
    rb_box *boxes = calloc(NB, sizeof *boxes);
    for (size_t i = 0; i < NB; i++)
        for (int a = 0; a < 3; a++) {
            boxes[i].min[a] = rbt_uniform(&g, -20, 20);
            boxes[i].max[a] = boxes[i].min[a] + rbt_uniform(&g, 0, 3);
        }
    rb_context *brute = context(RB_HIERARCHY_OFF);
    rb_context *cl = rbt_context_limited(RBT_OPENCL, 0, budget, 0);
    rb_shapes sh = {s.obbs, s.no, s.xboxes, s.nx, s.spheres, s.ns, s.planes,
                    s.np};
    rb_scene *sc = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(cl, 3, NULL, 0, &sh, &sc), RB_OK);
    scene only = s;
    only.nb = 0;
    answer want, got;
    run(brute, &only, RB_MODE_NEAREST, rays, N, &want);
    for (int round = 0; round < 2; round++) {
        unsigned long long w0 = rb_cl_shape_walks(cl);
        run_on(cl, &only, sc, RB_MODE_NEAREST, rays, N, &got);
        ck_assert_uint_eq(rb_cl_shape_walks(cl), w0 + 1);
        same(RB_MODE_NEAREST, &want, &got, N, "walk within the budget");
        answer_free(&got);
        ck_assert_uint_le(rb_cl_kept_bytes(cl), budget);
        /* every box against every ray: the box pass's buffers grow */
        rb_hit *h = calloc(N, sizeof *h);
        rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = rays,
                      .n_rays = N, .boxes = boxes, .n_boxes = NB};
        rb_results r = {.hits = h, .capacity = N};
        ck_assert_int_eq(rb_intersect(cl, &q, &r), RB_OK);
        ck_assert_uint_le(rb_cl_kept_bytes(cl), budget);
        free(h);
    }
    answer_free(&want);
    rb_scene_destroy(sc);
    rb_context_destroy(brute);
    rb_context_destroy(cl);
    free(boxes);
    free(rays);
    scene_free(&s);
}
END_TEST

/* ---- a million rays per kind and mode --------------------------------
 *
 * One scene per kind (its elements only, big beside the span so that most
 * rays cross several), a million rays each: a third at random, a third
 * aimed at the kind's hard places (obb and xbox edges and corners, within
 * a few ulps; sphere silhouettes and centers; box corners; for planes,
 * origins on the plane and directions along it), a third from origins
 * inside the elements. Sphere scenes hold zero-radius spheres, xbox
 * scenes near-singular matrices. Every path must give the CPU brute
 * force's bits in every mode: the hierarchy's SIMD and portable scalar
 * walks, the scalar box scan (the shape scan is one code for every
 * instruction set), the OpenCL brute force and the OpenCL walk of the
 * shape tree; pairs (ray i against element i of a million) on the CPU's
 * scalar and SIMD code and on OpenCL. */
enum { KIND_BOX, KIND_OBB, KIND_XBOX, KIND_SPHERE, KIND_PLANE, N_KINDS };
static const char *const kind_names[N_KINDS] = {"box", "obb", "xbox",
                                                "sphere", "plane"};

/* n elements of one kind in s (the other arrays empty). */
static void kind_scene(rbt_rng *g, int kind, size_t n, float span,
                       float size, scene *s)
{
    memset(s, 0, sizeof *s);
    switch (kind) {
    case KIND_BOX:
        s->nb = n;
        s->boxes = calloc(n, sizeof *s->boxes);
        for (size_t i = 0; i < n; i++)
            for (int a = 0; a < 3; a++) {
                s->boxes[i].min[a] = rbt_uniform(g, -span, span);
                s->boxes[i].max[a] =
                    s->boxes[i].min[a] + rbt_uniform(g, 0, size);
            }
        break;
    case KIND_OBB:
        s->no = n;
        s->obbs = calloc(n, sizeof *s->obbs);
        for (size_t i = 0; i < n; i++)
            random_obb(g, span, size, &s->obbs[i]);
        break;
    case KIND_XBOX:
        s->nx = n;
        s->xboxes = calloc(n, sizeof *s->xboxes);
        for (size_t i = 0; i < n; i++) {
            random_xbox(g, span, size, &s->xboxes[i]);
            if (i % 8 == 7) /* near-singular: one column almost gone */
                for (int a = 0; a < 3; a++)
                    s->xboxes[i].a[a][i % 3] *= 1e-5f;
        }
        break;
    case KIND_SPHERE:
        s->ns = n;
        s->spheres = calloc(n, sizeof *s->spheres);
        for (size_t i = 0; i < n; i++) {
            for (int a = 0; a < 3; a++)
                s->spheres[i].center[a] = rbt_uniform(g, -span, span);
            s->spheres[i].radius = i % 8 == 3 ? 0 : rbt_uniform(g, 0, size);
        }
        break;
    default:
        s->np = n;
        s->planes = calloc(n, sizeof *s->planes);
        for (size_t i = 0; i < n; i++) {
            for (int a = 0; a < 3; a++)
                s->planes[i].normal[a] = rbt_uniform(g, -1, 1);
            /* an axis plane now and then: rays along it are exact */
            if (i % 4 == 0)
                for (int a = 0; a < 3; a++)
                    s->planes[i].normal[a] = a == (int)(i / 4 % 3);
            s->planes[i].d = rbt_uniform(g, -span, span);
        }
    }
}

/* A point on a plane: p = -d n / |n|^2, then nudged along it. */
static void plane_point(rbt_rng *g, const rb_plane *pl, float span, float p[3])
{
    float nn = 0;
    for (int a = 0; a < 3; a++)
        nn += pl->normal[a] * pl->normal[a];
    for (int a = 0; a < 3; a++)
        p[a] = -pl->d * pl->normal[a] / nn;
    /* move within the plane: along n x e for a random axis e */
    int e = (int)rbt_below(g, 3);
    float u[3] = {0, 0, 0}, k = rbt_uniform(g, -span, span);
    u[(e + 1) % 3] = pl->normal[(e + 2) % 3];
    u[(e + 2) % 3] = -pl->normal[(e + 1) % 3];
    for (int a = 0; a < 3; a++)
        p[a] += k * u[a];
}

/* Ray i of a kind's million (see above). */
static void kind_ray(rbt_rng *g, const scene *s, int kind, float span,
                     float far, rb_ray *r)
{
    uint32_t what = rbt_below(g, 3);
    float target[3];
    for (int a = 0; a < 3; a++) {
        r->origin[a] = rbt_uniform(g, -far, far);
        target[a] = rbt_uniform(g, -span, span);
    }
    if (what == 1 && kind == KIND_PLANE) {
        const rb_plane *pl = &s->planes[rbt_below(g, (uint32_t)s->np)];
        plane_point(g, pl, span, r->origin);
        if (rbt_below(g, 2)) /* along the plane: the target on it too */
            plane_point(g, pl, span, target);
    } else if (what == 1 && kind == KIND_BOX) {
        const rb_box *b = &s->boxes[rbt_below(g, (uint32_t)s->nb)];
        for (int a = 0; a < 3; a++)
            target[a] = rbt_below(g, 2) ? b->max[a] : b->min[a];
    } else if (what == 1 && kind == KIND_SPHERE && rbt_below(g, 2)) {
        const rb_sphere *sp = &s->spheres[rbt_below(g, (uint32_t)s->ns)];
        memcpy(target, sp->center, sizeof target); /* through the center */
    } else if (what == 1) {
        edge_target(g, s, target, kind == KIND_OBB    ? 0
                                  : kind == KIND_XBOX ? 1
                                                      : 2);
    } else if (what == 2 && kind == KIND_BOX) {
        /* from inside (or on) an element */
        const rb_box *b = &s->boxes[rbt_below(g, (uint32_t)s->nb)];
        for (int a = 0; a < 3; a++)
            r->origin[a] = rbt_uniform(g, b->min[a], b->max[a]);
    } else if (what == 2 && kind != KIND_PLANE) {
        edge_target(g, s, r->origin, kind == KIND_OBB    ? 0
                                     : kind == KIND_XBOX ? 1
                                                         : 2);
    }
    for (int a = 0; a < 3; a++)
        r->dir[a] = target[a] - r->origin[a];
    r->tmin = 0;
    r->tmax = rbt_below(g, 4) ? INFINITY : rbt_uniform(g, 0.5f, 4.0f);
}

static void million_same(const char *kind, const char *path, rb_mode mode,
                         const answer *x, const answer *y, size_t n)
{
    char label[96];
    snprintf(label, sizeof label, "%s million, %s", kind, path);
    same(mode, x, y, n, label);
}

/* The million rays of one kind against every path, every mode. */
static void million_kind(int kind)
{
    enum { PER_KIND = 24 }; /* a root and three nodes: a walk, and cheap */
    const size_t n = (size_t)1 << 20;
    const float span = 4, size = 3, far = 8;
    rbt_rng g = {100 + (uint64_t)kind};
    scene s;
    kind_scene(&g, kind, kind == KIND_PLANE ? 6 : PER_KIND, span, size, &s);
    rb_ray *rays = malloc(n * sizeof *rays);
    for (size_t i = 0; i < n; i++)
        kind_ray(&g, &s, kind, span, far, &rays[i]);
    rb_context *brute = context(RB_HIERARCHY_OFF);
    rb_context *tree = context(RB_HIERARCHY_ALWAYS);
    rb_context *cl_brute = cl_context();
    rb_context *cl_tree = cl_context_with(RB_HIERARCHY_ALWAYS);
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    const char *name = kind_names[kind];
    uint64_t hits = 0;
    for (int m = 0; m < 4; m++) {
        answer want, got;
        run(brute, &s, modes[m], rays, n, &want);
        run(tree, &s, modes[m], rays, n, &got);
        million_same(name, "hierarchy", modes[m], &want, &got, n);
        answer_free(&got);
        unsigned long long walks = rb_cl_shape_walks(cl_tree);
        run(cl_tree, &s, modes[m], rays, n, &got);
        /* the bounded kinds walk their tree on the device; boxes take
         * the box walk, planes have no tree */
        int walked = kind != KIND_BOX && kind != KIND_PLANE;
        ck_assert_msg(rb_cl_shape_walks(cl_tree) == walks + (unsigned)walked,
                      "%s million: %llu OpenCL shape walks, expected %d",
                      name, rb_cl_shape_walks(cl_tree) - walks, walked);
        million_same(name, "OpenCL walk", modes[m], &want, &got, n);
        answer_free(&got);
        run(cl_brute, &s, modes[m], rays, n, &got);
        million_same(name, "OpenCL brute force", modes[m], &want, &got, n);
        answer_free(&got);
        /* the portable scalar code, picked per query while set: the
         * walks' node tests, and the box scan (the shape scan is one
         * code for every instruction set) */
        ck_assert_int_eq(setenv("RAYBOX_SIMD", "scalar", 1), 0);
        run(tree, &s, modes[m], rays, n, &got);
        million_same(name, "scalar walk", modes[m], &want, &got, n);
        answer_free(&got);
        if (kind == KIND_BOX) {
            run(brute, &s, modes[m], rays, n, &got);
            million_same(name, "scalar scan", modes[m], &want, &got, n);
            answer_free(&got);
        }
        ck_assert_int_eq(unsetenv("RAYBOX_SIMD"), 0);
        if (modes[m] == RB_MODE_COUNT)
            for (size_t i = 0; i < n; i++)
                hits += want.counts[i];
        answer_free(&want);
    }
    ck_assert_msg(hits > n / 2, "%s million: only %llu hits for %zu rays", name,
                  (unsigned long long)hits, n);
    scene_free(&s);

    /* pairs: ray i against element i of a million of the kind */
    kind_scene(&g, kind, n, span, size, &s);
    rb_shapes sh = {s.obbs, s.no, s.xboxes, s.nx, s.spheres, s.ns,
                    s.planes, s.np};
    rb_query q = pairs_query(rays, n, sh);
    q.boxes = s.boxes;
    q.n_boxes = s.nb;
    char label[64];
    snprintf(label, sizeof label, "%s million, OpenCL", name);
    size_t hit = pairs_same(brute, cl_brute, &q, label);
    ck_assert_msg(hit > n / 100, "%s million pairs: %zu hits", name, hit);
    /* the CPU's portable scalar code against OpenCL, so against the
     * SIMD code too */
    ck_assert_int_eq(setenv("RAYBOX_SIMD", "scalar", 1), 0);
    snprintf(label, sizeof label, "%s million, scalar", name);
    pairs_same(brute, cl_brute, &q, label);
    ck_assert_int_eq(unsetenv("RAYBOX_SIMD"), 0);
    rb_context_destroy(brute);
    rb_context_destroy(tree);
    rb_context_destroy(cl_brute);
    rb_context_destroy(cl_tree);
    free(rays);
    scene_free(&s);
}

START_TEST(test_million)
{
    million_kind(_i);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shape_paths");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_random_rays);
    tcase_add_test(tc, test_edge_rays);
    tcase_add_test(tc, test_tangent_rays);
    tcase_add_test(tc, test_far_origins);
    tcase_add_test(tc, test_no_boxes);
    tcase_add_test(tc, test_scales);
    tcase_add_test(tc, test_walk_variants);
    tcase_add_test(tc, test_joint_scene);
    tcase_add_loop_test(tc, test_joint_bad_ray, 0, 1); /* the CPU */
    suite_add_tcase(s, tc);
    tc = tcase_create("opencl");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_opencl_random);
    tcase_add_test(tc, test_opencl_edges);
    suite_add_tcase(s, tc);
    /* The OpenCL walk alone: tests/CMakeLists.txt runs this case again
     * with the tiled kernels and with a one-entry short stack. */
    tc = tcase_create("opencl_walk");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cl_walk_near);
    tcase_add_test(tc, test_cl_walk_far_and_scales);
    tcase_add_test(tc, test_cl_walk_scene_versions);
    tcase_add_test(tc, test_cl_walk_failures);
    tcase_add_loop_test(tc, test_joint_bad_ray, 1, 2); /* the device */
    tcase_add_test(tc, test_cl_walk_budget);
    suite_add_tcase(s, tc);
    /* A million rays per kind and mode: its own ctest entry
     * (tests/CMakeLists.txt), left out of the others by its tag. */
    tc = tcase_create("million");
    tcase_set_tags(tc, "million");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, test_million, 0, N_KINDS);
    suite_add_tcase(s, tc);
    return rbt_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
