/*
 * test_differential.c - every backend against every other and against
 * independent references, on more than a million rays per mode:
 *
 *  - the portable scalar CPU kernels (RAYBOX_SIMD=scalar), the SIMD CPU
 *    kernels and OpenCL (PoCL) must agree bit for bit (R8, R10), in every
 *    mode, in 3D and 2D, on uniform scenes and on the hard cases of gen.h;
 *  - a brute-force oracle built only from rb_intersect_one (the scalar
 *    formula) checks the every-box modes' bookkeeping: nearest ties, counts,
 *    sorted and truncated `all` lists;
 *  - an exact reference in double, written from SPEC section 2's
 *    definitions (division, explicit parallel-axis branch, no inverse),
 *    checks the formula itself on dyadic inputs where every float operation
 *    is exact, and, within a tolerance, on uniform inputs.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "batch.h"
#include "gen.h"

#define BOXES 48          /* every-box scenes */
#define RAYS_PER_SHAPE 160000 /* x 7 shapes = 1.12 M rays per mode (3D) */
#define RAYS_PER_SHAPE_2D 40000
#define ORACLE_RAYS 8000  /* per shape: rays checked against the oracle */
#define MAX_HITS 5        /* small, so that truncation happens */

enum { V_SCALAR, V_SIMD, V_OPENCL, VARIANTS };
static const char *const variant_names[] = {"cpu-scalar", "cpu-simd",
                                            "opencl"};

static rb_context *contexts[VARIANTS];

static void open_contexts(void)
{
    /* The scalar kernels are chosen when a CPU backend is created. */
    setenv("RAYBOX_SIMD", "scalar", 1);
    contexts[V_SCALAR] = rbt_context(RBT_CPU);
    unsetenv("RAYBOX_SIMD");
    contexts[V_SIMD] = rbt_context(RBT_CPU);
    contexts[V_OPENCL] = rbt_context(RBT_OPENCL);
    rb_backend_info a, b;
    rb_context_info(contexts[V_SCALAR], &a);
    rb_context_info(contexts[V_SIMD], &b);
    ck_assert_str_eq(a.simd, "scalar");
    if (strcmp(b.simd, "scalar") == 0)
        fprintf(stderr, "NOTICE: this processor has no SIMD kernels; "
                        "cpu-simd runs the scalar ones\n");
}

static void close_contexts(void)
{
    for (int v = 0; v < VARIANTS; v++) {
        rb_context_destroy(contexts[v]);
        contexts[v] = NULL;
    }
}

static void run(rb_context *ctx, rb_mode mode, unsigned dims,
                const void *rays, size_t n, const void *boxes,
                size_t n_boxes, rbt_out *out, const char *what)
{
    rb_query q = {.mode = mode, .dims = dims, .rays = rays, .n_rays = n,
                  .boxes = boxes, .n_boxes = n_boxes, .max_hits = MAX_HITS};
    rb_results r = {.hits = out->hits, .any = out->any,
                    .counts = out->counts, .list = out->list, .capacity = n};
    int rc = rb_intersect(ctx, &q, &r);
    ck_assert_msg(rc == RB_OK, "%s: %s", what,
                  rb_context_error(ctx)->message);
    ck_assert_msg(!r.info.fell_back, "%s fell back: %s", what,
                  r.info.fallback_reason);
}

/* The first n answers of a and b, bit for bit. */
static void compare(rb_mode mode, size_t n, const rbt_out *a,
                    const rbt_out *b, const char *what)
{
    rbt_out a_n = *a, b_n = *b;
    a_n.n = b_n.n = n;
    rbt_assert_same(mode, &a_n, &b_n, what);
}

/* The oracle: every-box answers assembled from rb_intersect_one alone. */
static void oracle(const rb_ray *rays, size_t n, const rb_box *boxes,
                   size_t n_boxes, rb_mode mode, rbt_out *out)
{
    for (size_t i = 0; i < n; i++) {
        rb_hit best;
        memset(&best, 0, sizeof best);
        best.hit = 0;
        best.box = -1;
        best.t_enter = best.t_exit = INFINITY;
        uint32_t count = 0;
        rb_list_hit *list = &out->list[i * MAX_HITS];
        for (size_t j = 0; j < n_boxes; j++) {
            rb_hit h;
            rb_intersect_one(&rays[i], &boxes[j], &h);
            if (!h.hit)
                continue;
            if (!best.hit || h.t_enter < best.t_enter) {
                best = h;
                best.box = (int32_t)j;
            }
            /* insertion into (t_enter, box) order, at most MAX_HITS */
            uint32_t stored = count < MAX_HITS ? count : MAX_HITS;
            uint32_t pos = stored;
            while (pos > 0 && h.t_enter < list[pos - 1].t_enter)
                pos--;
            if (pos < MAX_HITS) {
                uint32_t last = stored < MAX_HITS ? stored : MAX_HITS - 1;
                memmove(&list[pos + 1], &list[pos],
                        (last - pos) * sizeof *list);
                list[pos] = (rb_list_hit){(int32_t)j, h.t_enter, h.t_exit};
            }
            count++;
        }
        out->hits[i] = best;
        out->any[i] = count > 0;
        out->counts[i] = count;
        (void)mode;
    }
}

static void differential(int shape, unsigned dims, size_t n, uint64_t seed)
{
    rbt_rng rng = {seed};
    rb_box *boxes = malloc(BOXES * sizeof *boxes);
    rb_ray *rays = malloc(n * sizeof *rays);
    rb_box *pair_boxes = malloc(n * sizeof *pair_boxes);
    rb_ray2 *rays2 = malloc(n * sizeof *rays2);
    rb_box2 *boxes2 = malloc(BOXES * sizeof *boxes2);
    rb_box2 *pair_boxes2 = malloc(n * sizeof *pair_boxes2);
    ck_assert(boxes && rays && pair_boxes && rays2 && boxes2 && pair_boxes2);

    rbt_gen_boxes(&rng, shape, boxes, BOXES);
    rbt_gen_rays(&rng, shape, boxes, BOXES, rays, n);
    rbt_gen_boxes(&rng, shape, pair_boxes, n);
    /* pairs: half the rays aimed at their own box */
    for (size_t i = 0; i < n; i += 2)
        rbt_gen_rays(&rng, shape, &pair_boxes[i], 1, &rays[i], 1);
    rbt_to_2d_rays(rays, rays2, n);
    rbt_to_2d_boxes(boxes, boxes2, BOXES);
    rbt_to_2d_boxes(pair_boxes, pair_boxes2, n);
    const void *r = dims == 3 ? (const void *)rays : (const void *)rays2;
    const void *b = dims == 3 ? (const void *)boxes : (const void *)boxes2;
    const void *pb = dims == 3 ? (const void *)pair_boxes
                               : (const void *)pair_boxes2;

    rbt_out ans[VARIANTS], ref;
    for (int v = 0; v < VARIANTS; v++)
        rbt_out_init(&ans[v], n, MAX_HITS);
    rbt_out_init(&ref, ORACLE_RAYS, MAX_HITS);

    for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
        char what[128];
        for (int v = 0; v < VARIANTS; v++) {
            if (!contexts[v])
                continue;
            snprintf(what, sizeof what, "%s %uD %s %s", variant_names[v],
                     dims, rbt_shape_name(shape), rb_mode_name(mode));
            run(contexts[v], (rb_mode)mode, dims, r, n,
                mode == RB_MODE_PAIRS ? pb : b,
                mode == RB_MODE_PAIRS ? n : BOXES, &ans[v], what);
        }
        for (int v = V_SIMD; v < VARIANTS; v++) {
            if (!contexts[v])
                continue;
            snprintf(what, sizeof what, "%s vs %s, %uD %s %s",
                     variant_names[V_SCALAR], variant_names[v], dims,
                     rbt_shape_name(shape), rb_mode_name(mode));
            compare((rb_mode)mode, n, &ans[V_SCALAR], &ans[v], what);
        }
        if (mode != RB_MODE_PAIRS && dims == 3) {
            size_t m = n < ORACLE_RAYS ? n : ORACLE_RAYS;
            oracle(rays, m, boxes, BOXES, (rb_mode)mode, &ref);
            snprintf(what, sizeof what, "oracle vs cpu-scalar, %s %s",
                     rbt_shape_name(shape), rb_mode_name(mode));
            compare((rb_mode)mode, m, &ref, &ans[V_SCALAR], what);
        }
    }
    for (int v = 0; v < VARIANTS; v++)
        rbt_out_free(&ans[v]);
    rbt_out_free(&ref);
    free(boxes);
    free(rays);
    free(pair_boxes);
    free(rays2);
    free(boxes2);
    free(pair_boxes2);
}

START_TEST(test_shapes_3d)
{
    open_contexts();
    differential(_i, 3, RAYS_PER_SHAPE, 1000 + (uint64_t)_i);
    close_contexts();
}
END_TEST

START_TEST(test_shapes_2d)
{
    open_contexts();
    differential(_i, 2, RAYS_PER_SHAPE_2D, 2000 + (uint64_t)_i);
    close_contexts();
}
END_TEST

/* ---- the exact reference, from SPEC section 2's words, in double */

typedef struct exact {
    int hit;
    double t_enter, t_exit;
    int face, exit_face;
} exact;

static exact exact_slab(const rb_ray *r, const rb_box *b)
{
    double near = -INFINITY, far = INFINITY;
    int nf = 0, ff = 0;
    exact out = {0, 0, 0, 0, 0};
    for (int a = 0; a < 3; a++) {
        double o = r->origin[a], d = r->dir[a];
        double lo = b->min[a], hi = b->max[a];
        if (d == 0) { /* R4: a parallel axis passes or fails outright */
            if (o < lo || o > hi)
                return out;
            continue;
        }
        /* Entering through min when moving +, through max when moving -. */
        double t_in = ((d > 0 ? lo : hi) - o) / d;
        double t_out = ((d > 0 ? hi : lo) - o) / d;
        if (t_in > near) { /* strict: the lowest axis wins ties (R3) */
            near = t_in;
            nf = 1 + 2 * a + (d < 0);
        }
        if (t_out < far) {
            far = t_out;
            ff = 1 + 2 * a + (d > 0);
        }
    }
    out.t_enter = near >= r->tmin ? near : r->tmin;
    out.face = near >= r->tmin ? nf : 0;
    out.t_exit = far <= r->tmax ? far : r->tmax;
    out.exit_face = far <= r->tmax ? ff : 0;
    out.hit = out.t_enter <= out.t_exit && isfinite(out.t_enter);
    return out;
}

START_TEST(test_exact_dyadic)
{
    /* Integer coordinates and power-of-two directions: every subtraction
     * and product of the slab formula is exact in float32, so the float
     * answer must equal the exact one exactly. */
    rbt_rng rng = {77};
    enum { N = 400000 };
    rb_ray *rays = malloc(N * sizeof *rays);
    rb_box *boxes = malloc(N * sizeof *boxes);
    rb_hit *hits = malloc(N * sizeof *hits);
    rbt_gen_boxes(&rng, RBT_DYADIC, boxes, N);
    for (size_t i = 0; i < N; i++)
        rbt_gen_rays(&rng, RBT_DYADIC, &boxes[i], 1, &rays[i], 1);
    open_contexts();
    size_t n_hits = 0;
    for (int v = 0; v < VARIANTS; v++) {
        if (!contexts[v])
            continue;
        rb_query q = {.mode = RB_MODE_PAIRS, .dims = 3, .rays = rays,
                      .n_rays = N, .boxes = boxes, .n_boxes = N};
        rb_results res = {.hits = hits, .capacity = N};
        ck_assert_int_eq(rb_intersect(contexts[v], &q, &res), RB_OK);
        for (size_t i = 0; i < N; i++) {
            exact e = exact_slab(&rays[i], &boxes[i]);
            char got[160];
            ck_assert_msg(hits[i].hit == e.hit, "%s ray %zu: exact hit=%d, "
                          "got %s", variant_names[v], i, e.hit,
                          rbt_hit_str(&hits[i], got, sizeof got));
            if (!e.hit)
                continue;
            n_hits += v == 0;
            ck_assert_msg((double)hits[i].t_enter == e.t_enter &&
                              (double)hits[i].t_exit == e.t_exit &&
                              hits[i].face == e.face &&
                              hits[i].exit_face == e.exit_face,
                          "%s ray %zu: exact t=[%.17g, %.17g] faces %d/%d, "
                          "got %s",
                          variant_names[v], i, e.t_enter, e.t_exit, e.face,
                          e.exit_face, rbt_hit_str(&hits[i], got, sizeof got));
        }
    }
    ck_assert_msg(n_hits > N / 10, "only %zu hits: the sample is too easy",
                  n_hits);
    close_contexts();
    free(rays);
    free(boxes);
    free(hits);
}
END_TEST

START_TEST(test_exact_uniform)
{
    /* General inputs: float and exact answers may differ by rounding
     * (3 roundings per slab distance, gamma_3 relative error). Outside
     * that band they must agree. */
    rbt_rng rng = {78};
    enum { N = 400000 };
    rb_ray *rays = malloc(N * sizeof *rays);
    rb_box *boxes = malloc(N * sizeof *boxes);
    rb_hit *hits = malloc(N * sizeof *hits);
    rbt_gen_boxes(&rng, RBT_UNIFORM, boxes, N);
    for (size_t i = 0; i < N; i++)
        rbt_gen_rays(&rng, (i & 1) ? RBT_UNIFORM : RBT_AIMED, &boxes[i], 1,
                     &rays[i], 1);
    rb_context *ctx = rbt_context(RBT_CPU);
    rb_query q = {.mode = RB_MODE_PAIRS, .dims = 3, .rays = rays,
                  .n_rays = N, .boxes = boxes, .n_boxes = N};
    rb_results res = {.hits = hits, .capacity = N};
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_OK);
    size_t checked = 0;
    for (size_t i = 0; i < N; i++) {
        exact e = exact_slab(&rays[i], &boxes[i]);
        double scale = fmax(1.0, fmax(fabs(e.t_enter), fabs(e.t_exit)));
        double tol = 1e-5 * scale;
        if (fabs(e.t_enter - e.t_exit) <= tol)
            continue; /* a graze: either answer is within rounding */
        checked++;
        ck_assert_msg(hits[i].hit == e.hit, "ray %zu: exact hit=%d "
                      "(t %.9g..%.9g), got %d", i, e.hit, e.t_enter,
                      e.t_exit, hits[i].hit);
        if (e.hit) {
            ck_assert_msg(fabs(hits[i].t_enter - e.t_enter) <= tol &&
                              fabs(hits[i].t_exit - e.t_exit) <= tol,
                          "ray %zu: exact t=[%.9g, %.9g], got [%.9g, %.9g]",
                          i, e.t_enter, e.t_exit, (double)hits[i].t_enter,
                          (double)hits[i].t_exit);
        }
    }
    ck_assert(checked > N * 9 / 10);
    rb_context_destroy(ctx);
    free(rays);
    free(boxes);
    free(hits);
}
END_TEST

/* An invalid element anywhere in a batch (inside a SIMD block, at a tile
 * edge, last) is reported the same way by every backend: lowest index,
 * same field. */
START_TEST(test_invalid_everywhere)
{
    enum { N = 50000 };
    rbt_rng rng = {99};
    rb_ray *rays = malloc(N * sizeof *rays);
    rb_box *boxes = malloc(N * sizeof *boxes);
    rb_hit *hits = malloc(N * sizeof *hits);
    open_contexts();
    static const size_t where[] = {0, 1, 7, 8, 9, 2047, 2048, 4100, N - 9,
                                   N - 2, N - 1};
    for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
        for (int kind = 0; kind < 6; kind++) {
            rbt_gen_boxes(&rng, RBT_UNIFORM, boxes, N);
            rbt_gen_rays(&rng, RBT_UNIFORM, boxes, N, rays, N);
            size_t at = where[w];
            int is_box = 0, field = 0;
            switch (kind) {
            case 0: rays[at].origin[1] = NAN; field = 1; break;
            case 1: rays[at].dir[2] = -INFINITY; field = 5; break;
            case 2: rays[at].tmin = 3; rays[at].tmax = 2; field = 6; break;
            case 3: rays[at].tmax = NAN; field = 7; break;
            case 4: boxes[at].max[2] = INFINITY; is_box = 1; field = 5; break;
            case 5: boxes[at].min[0] = boxes[at].max[0] + 1; is_box = 1;
                    field = 0; break;
            }
            /* a second, later error must not hide the first */
            if (at + 3 < N)
                rays[at + 3].origin[0] = NAN;
            for (int v = 0; v < VARIANTS; v++) {
                if (!contexts[v])
                    continue;
                rb_query q = {.mode = RB_MODE_PAIRS, .dims = 3, .rays = rays,
                              .n_rays = N, .boxes = boxes, .n_boxes = N};
                rb_results res = {.hits = hits, .capacity = N};
                int rc = rb_intersect(contexts[v], &q, &res);
                const rb_error *e = rb_context_error(contexts[v]);
                ck_assert_msg(rc == RB_EINPUT && e->index == at &&
                                  e->field == field &&
                                  e->element == (is_box ? RB_ELEMENT_BOX
                                                        : RB_ELEMENT_RAY),
                              "%s: kind %d at %zu: rc=%s index=%llu "
                              "field=%d (%s)",
                              variant_names[v], kind, at, rb_status_name(rc),
                              (unsigned long long)e->index, e->field,
                              e->message);
            }
        }
    }
    close_contexts();
    free(rays);
    free(boxes);
    free(hits);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("differential");
    TCase *tc = tcase_create("differential");
    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, test_shapes_3d, 0, RBT_SHAPES);
    tcase_add_loop_test(tc, test_shapes_2d, 0, RBT_SHAPES);
    tcase_add_test(tc, test_exact_dyadic);
    tcase_add_test(tc, test_exact_uniform);
    tcase_add_test(tc, test_invalid_everywhere);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
