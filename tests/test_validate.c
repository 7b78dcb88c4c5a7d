/*
 * test_validate.c - SPEC R6 and R7 through the public API: every invalid
 * value in every field of rays and boxes (3D and 2D) is refused with the
 * element, index and field it must name, on every backend and in every
 * mode; legal edge values (subnormals, +inf tmax, -0) are accepted; and
 * malformed queries are refused with RB_EINVAL.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "testutil.h"

#define N 300

static void fill(rb_ray *rays, rb_box *boxes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rays[i] = (rb_ray){{-5, 0.1f * (float)i, 0}, {1, 0, 0}, 0, INFINITY};
        boxes[i] = (rb_box){{-1, -1, -1}, {1, 40, 1}};
    }
}

static float *ray_field(rb_ray *r, int f)
{
    return f < 3 ? &r->origin[f] : f < 6 ? &r->dir[f - 3]
                                 : f == 6 ? &r->tmin
                                          : &r->tmax;
}

static float *box_field(rb_box *b, int f)
{
    return f < 3 ? &b->min[f] : &b->max[f - 3];
}

static void expect_invalid(rb_context *ctx, rb_mode mode, const rb_ray *rays,
                           const rb_box *boxes, rb_element_kind element,
                           size_t index, int field, const char *what)
{
    static rb_hit hits[N];
    static uint8_t any[N];
    static uint32_t counts[N];
    static rb_list_hit list[N * 2];
    rb_query q = {.mode = mode, .dims = 3, .rays = rays, .n_rays = N,
                  .boxes = boxes, .n_boxes = N, .max_hits = 2};
    rb_results r = {.hits = hits, .any = any, .counts = counts,
                    .list = list, .capacity = N};
    int rc = rb_intersect(ctx, &q, &r);
    const rb_error *e = rb_context_error(ctx);
    ck_assert_msg(rc == RB_EINPUT, "%s (%s): expected invalid_input, got %s",
                  what, rb_mode_name(mode), rb_status_name(rc));
    ck_assert_msg(e->status == RB_EINPUT && e->element == element &&
                      e->index == index && e->field == field,
                  "%s (%s): error names element %d index %llu field %d: %s",
                  what, rb_mode_name(mode), e->element,
                  (unsigned long long)e->index, e->field, e->message);
    ck_assert_msg(strstr(e->message, element == RB_ELEMENT_RAY ? "ray "
                                                                : "box ") &&
                      strlen(e->message) > 8,
                  "%s: message '%s' does not name the element", what,
                  e->message);
}

START_TEST(test_ray_fields)
{
    static rb_ray rays[N];
    static rb_box boxes[N];
    rb_context *ctx = rbt_context(_i);
    if (!ctx)
        return;
    const float bad_any[] = {NAN, INFINITY, -INFINITY};
    for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
        for (int f = 0; f < 8; f++) {
            for (int k = 0; k < 3; k++) {
                float v = bad_any[k];
                if (f == 7 && v == INFINITY)
                    continue; /* tmax = +inf is the default, legal */
                fill(rays, boxes, N);
                size_t at = (size_t)(37 * f + 11 * k) % N;
                *ray_field(&rays[at], f) = v;
                char what[96];
                snprintf(what, sizeof what, "%s ray field %d = %g",
                         rbt_backend_name(_i), f, (double)v);
                expect_invalid(ctx, (rb_mode)mode, rays, boxes,
                               RB_ELEMENT_RAY, at, f, what);
            }
        }
        /* tmin > tmax names tmin */
        fill(rays, boxes, N);
        rays[123].tmin = 2.0f;
        rays[123].tmax = 1.0f;
        expect_invalid(ctx, (rb_mode)mode, rays, boxes, RB_ELEMENT_RAY, 123,
                       6, "tmin > tmax");
        /* the lowest index wins, whatever the field */
        fill(rays, boxes, N);
        rays[200].origin[0] = NAN;
        rays[150].tmax = -INFINITY;
        rays[151].dir[1] = NAN;
        expect_invalid(ctx, (rb_mode)mode, rays, boxes, RB_ELEMENT_RAY, 150,
                       7, "lowest of several");
        /* two bad fields in one ray: the first field is named */
        fill(rays, boxes, N);
        rays[9].tmin = NAN;
        rays[9].dir[0] = INFINITY;
        expect_invalid(ctx, (rb_mode)mode, rays, boxes, RB_ELEMENT_RAY, 9, 3,
                       "first field");
    }
    rb_context_destroy(ctx);
}
END_TEST

START_TEST(test_box_fields)
{
    static rb_ray rays[N];
    static rb_box boxes[N];
    rb_context *ctx = rbt_context(_i);
    if (!ctx)
        return;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
        for (int f = 0; f < 6; f++) {
            for (int k = 0; k < 3; k++) {
                fill(rays, boxes, N);
                size_t at = (size_t)(41 * f + 13 * k + 5) % N;
                *box_field(&boxes[at], f) = bad[k];
                char what[96];
                snprintf(what, sizeof what, "%s box field %d = %g",
                         rbt_backend_name(_i), f, (double)bad[k]);
                expect_invalid(ctx, (rb_mode)mode, rays, boxes,
                               RB_ELEMENT_BOX, at, f, what);
            }
        }
        for (int a = 0; a < 3; a++) {
            fill(rays, boxes, N);
            boxes[77].min[a] = 2.0f;
            boxes[77].max[a] = 1.5f;
            expect_invalid(ctx, (rb_mode)mode, rays, boxes, RB_ELEMENT_BOX,
                           77, a, "min > max");
        }
        /* every-box modes check boxes before rays; pairs reports the lower
         * index, the ray first at the same index */
        fill(rays, boxes, N);
        rays[3].origin[0] = NAN;
        boxes[250].max[0] = NAN;
        if (mode == RB_MODE_PAIRS)
            expect_invalid(ctx, (rb_mode)mode, rays, boxes, RB_ELEMENT_RAY,
                           3, 0, "ray before box");
        else
            expect_invalid(ctx, (rb_mode)mode, rays, boxes, RB_ELEMENT_BOX,
                           250, 3, "boxes first");
        if (mode == RB_MODE_PAIRS) {
            fill(rays, boxes, N);
            rays[60].origin[0] = NAN;
            boxes[60].max[0] = NAN;
            expect_invalid(ctx, (rb_mode)mode, rays, boxes, RB_ELEMENT_RAY,
                           60, 0, "ray wins at the same index");
        }
    }
    rb_context_destroy(ctx);
}
END_TEST

/* 2D fields are named in the 2D layout: [ox,oy,dx,dy,tmin,tmax] and
 * [minx,miny,maxx,maxy]. */
START_TEST(test_fields_2d)
{
    rb_context *ctx = rbt_context(_i);
    if (!ctx)
        return;
    rb_ray2 rays[4];
    rb_box2 boxes[4];
    rb_hit hits[4];
    for (int f = 0; f < 6 + 4; f++) {
        for (int i = 0; i < 4; i++) {
            rays[i] = (rb_ray2){{-5, 0}, {1, 0}, 0, INFINITY};
            boxes[i] = (rb_box2){{-1, -1}, {1, 1}};
        }
        int is_box = f >= 6, field = is_box ? f - 6 : f;
        float *p = is_box ? (field < 2 ? &boxes[2].min[field]
                                       : &boxes[2].max[field - 2])
                          : (field < 2   ? &rays[2].origin[field]
                             : field < 4 ? &rays[2].dir[field - 2]
                             : field == 4 ? &rays[2].tmin
                                          : &rays[2].tmax);
        *p = field == 5 && !is_box ? -INFINITY : NAN;
        rb_query q = {.mode = RB_MODE_PAIRS, .dims = 2, .rays = rays,
                      .n_rays = 4, .boxes = boxes, .n_boxes = 4};
        rb_results r = {.hits = hits, .capacity = 4};
        ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_EINPUT);
        const rb_error *e = rb_context_error(ctx);
        ck_assert_msg(e->index == 2 && e->field == field &&
                          e->element == (is_box ? RB_ELEMENT_BOX
                                                : RB_ELEMENT_RAY),
                      "2D field %d: got element %d field %d (%s)", f,
                      e->element, e->field, e->message);
    }
    rb_context_destroy(ctx);
}
END_TEST

/* Legal edge values: subnormals are flushed (R7) and accepted, even when
 * the raw tmin exceeds the raw tmax by a subnormal; -0 and +inf tmax. */
START_TEST(test_legal_edges)
{
    rb_context *ctx = rbt_context(_i);
    if (!ctx)
        return;
    const float sub = 1e-42f;
    rb_ray rays[4] = {
        {{-5, sub, -sub}, {1, -sub, sub}, sub, -sub}, /* flush: [0, -0] */
        {{-5, 0, 0}, {1, -0.0f, 0}, -0.0f, INFINITY},
        {{-5, 0, 0}, {1, 0, 0}, -3.0f, 4.5f},
        {{0, 0, 0}, {0, 0, 0}, 0, 0},
    };
    rb_box boxes[4] = {
        {{-1, sub, -1}, {1, -sub, 1}}, /* min > max only by subnormals */
        {{-1, -1, -1}, {1, 1, 1}},
        {{-1, -1, -1}, {1, 1, 1}},
        {{-0.0f, -0.0f, -0.0f}, {0, 0, 0}},
    };
    rb_hit hits[4];
    rb_query q = {.mode = RB_MODE_PAIRS, .dims = 3, .rays = rays,
                  .n_rays = 4, .boxes = boxes, .n_boxes = 4};
    rb_results r = {.hits = hits, .capacity = 4};
    ck_assert_msg(rb_intersect(ctx, &q, &r) == RB_OK, "%s",
                  rb_context_error(ctx)->message);
    /* ray 0 is the segment [0, 0] at x = -5: outside the box. */
    ck_assert_int_eq(hits[0].hit, 0);
    ck_assert(hits[1].hit && hits[1].t_enter == 4.0f &&
              !signbit(hits[1].t_enter));
    ck_assert(hits[2].hit && hits[2].t_enter == 4.0f &&
              hits[2].t_exit == 4.5f && hits[2].exit_face == RB_FACE_NONE);
    /* point-in-box at the point box, t in [0, 0], never -0 */
    ck_assert(hits[3].hit && hits[3].t_enter == 0 && hits[3].t_exit == 0 &&
              !signbit(hits[3].t_enter) && !signbit(hits[3].t_exit));
    rb_context_destroy(ctx);
}
END_TEST

/* The CPU backend's fast checks (host/validate.c: magnitude bits, no
 * branches) agree with the rules of kernels/exact.h, which the kernels
 * use as they are, on every pair of special values. */
START_TEST(test_fast_checks_match_exact_rules)
{
    const float v[] = {NAN, -NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX,
                       1.0f, -1.0f, 0.0f, -0.0f, FLT_MIN, -FLT_MIN,
                       FLT_MIN / 2, -FLT_MIN / 2, FLT_TRUE_MIN,
                       -FLT_TRUE_MIN, 3e-39f, -3e-39f, 1e30f, -1e30f};
    const size_t n = sizeof v / sizeof *v;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            rb_ray r = {{1, 2, 3}, {0, 1, 0}, v[i], v[j]};
            int want = rb_range_ok(v[i], v[j]);
            ck_assert_msg((rb_check_rays(&r, 3, 0, 1) == 1) == want,
                          "range [%a, %a]", (double)v[i], (double)v[j]);
            ck_assert_int_eq(rb_ray_range_valid(v[i], v[j]), want);
            rb_box b = {{0, v[i], 0}, {1, v[j], 1}};
            want = rb_extent_ok(v[i], v[j]);
            ck_assert_msg((rb_check_boxes(&b, 3, 0, 1) == 1) == want,
                          "extent [%a, %a]", (double)v[i], (double)v[j]);
            rb_ray o = {{v[i], 0, 0}, {0, 0, v[j]}, 0, 1};
            want = rb_finite(v[i]) && rb_finite(v[j]);
            ck_assert_msg((rb_check_rays(&o, 3, 0, 1) == 1) == want,
                          "origin %a dir %a", (double)v[i], (double)v[j]);
        }
}
END_TEST

START_TEST(test_malformed_queries)
{
    rb_context *ctx = rbt_context(RBT_CPU);
    rb_ray rays[2] = {{{0, 0, 0}, {1, 0, 0}, 0, INFINITY},
                      {{0, 0, 0}, {1, 0, 0}, 0, INFINITY}};
    rb_box boxes[3] = {{{1, -1, -1}, {2, 1, 1}}};
    rb_hit hits[2];
    uint32_t counts[2];
    rb_list_hit list[4];
    rb_query good = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = rays,
                     .n_rays = 2, .boxes = boxes, .n_boxes = 1};
    rb_results res = {.hits = hits, .counts = counts, .list = list,
                      .capacity = 2};
    ck_assert_int_eq(rb_intersect(ctx, &good, &res), RB_OK);
    ck_assert_int_eq(rb_intersect(NULL, &good, &res), RB_EINVAL);
    ck_assert_int_eq(rb_intersect(ctx, NULL, &res), RB_EINVAL);
    ck_assert_int_eq(rb_intersect(ctx, &good, NULL), RB_EINVAL);

    rb_query q = good;
    q.mode = (rb_mode)9;
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINVAL);
    q = good;
    q.dims = 4;
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINVAL);
    q = good;
    q.rays = NULL;
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINVAL);
    q = good;
    q.boxes = NULL;
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINVAL);
    q = good;
    q.mode = RB_MODE_PAIRS; /* 2 rays, 1 box */
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINVAL);
    ck_assert(strstr(rb_context_error(ctx)->message, "as many boxes"));
    q = good;
    q.mode = RB_MODE_ALL;
    q.max_hits = 0;
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINVAL);
    q.max_hits = 2;
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_OK);
    q = good;
    q.mode = RB_MODE_ANY; /* res.any is NULL */
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINVAL);
    rb_results small = res;
    small.capacity = 1;
    ck_assert_int_eq(rb_intersect(ctx, &good, &small), RB_EINVAL);
    q = good;
    q.n_rays = (size_t)INT32_MAX + 1;
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINVAL);

    /* zero rays and zero boxes are fine */
    q = good;
    q.n_rays = 0;
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_OK);
    q = good;
    q.n_boxes = 0;
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_OK);
    ck_assert(!hits[0].hit && hits[0].box == -1);
    rb_context_destroy(ctx);

    /* names and parsers */
    ck_assert_str_eq(rb_status_name(RB_EINPUT), "invalid_input");
    ck_assert_str_eq(rb_status_name(12345), "unknown");
    ck_assert_str_eq(rb_face_name(RB_FACE_POS_Y), "+y");
    ck_assert_ptr_null(rb_face_name(RB_FACE_NONE));
    rb_mode m;
    ck_assert_int_eq(rb_mode_parse("count", &m), RB_OK);
    ck_assert_int_eq(m, RB_MODE_COUNT);
    ck_assert_int_eq(rb_mode_parse("Count", &m), RB_EINVAL);
    rb_backend_kind k;
    ck_assert_int_eq(rb_backend_kind_parse("OpenCL", &k), RB_OK);
    ck_assert_int_eq(k, RB_BACKEND_OPENCL);
    ck_assert_int_eq(rb_backend_kind_parse("gpu", &k), RB_EINVAL);
}
END_TEST

/* Scenes: validated at creation, changes are all-or-nothing, versions
 * count changes, queries see the new boxes. */
START_TEST(test_scenes)
{
    rb_context *ctx = rbt_context(_i);
    if (!ctx)
        return;
    rb_box boxes[3] = {{{1, -1, -1}, {2, 1, 1}},
                       {{5, -1, -1}, {6, 1, 1}},
                       {{3, -1, -1}, {4, 1, 1}}};
    rb_scene *s = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, 3, &s), RB_OK);
    rb_scene_stats st;
    rb_scene_stats_get(s, &st);
    ck_assert(st.boxes == 3 && st.version == 1 && st.dims == 3);
    ck_assert(st.bounds_min[0] == 1 && st.bounds_max[0] == 6);

    rb_ray ray = {{0, 0, 0}, {1, 0, 0}, 0, INFINITY};
    rb_hit hit;
    rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = &ray,
                  .n_rays = 1, .scene = s};
    rb_results r = {.hits = &hit, .capacity = 1};
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);
    ck_assert(hit.hit && hit.box == 0 && hit.t_enter == 1);

    /* a bad box in a set changes nothing */
    rb_box moved[2] = {{{10, -1, -1}, {11, 1, 1}}, {{0, 0, 0}, {NAN, 1, 1}}};
    uint32_t idx[2] = {0, 1};
    ck_assert_int_eq(rb_scene_set(ctx, s, idx, moved, 2), RB_EINPUT);
    ck_assert(rb_context_error(ctx)->index == 1 &&
              rb_context_error(ctx)->field == 3);
    idx[1] = 3; /* out of range */
    moved[1] = moved[0];
    ck_assert_int_eq(rb_scene_set(ctx, s, idx, moved, 2), RB_EINVAL);
    rb_scene_stats_get(s, &st);
    ck_assert(st.version == 1);
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);
    ck_assert(hit.box == 0 && hit.t_enter == 1);

    /* a good set moves box 0 behind box 2 */
    ck_assert_int_eq(rb_scene_set(ctx, s, idx, moved, 1), RB_OK);
    rb_scene_stats_get(s, &st);
    ck_assert(st.version == 2);
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);
    ck_assert(hit.box == 2 && hit.t_enter == 3);
    rb_box back;
    ck_assert_int_eq(rb_scene_box(s, 0, &back), RB_OK);
    ck_assert(back.min[0] == 10 && back.max[0] == 11);
    ck_assert_int_eq(rb_scene_box(s, 3, &back), RB_EINVAL);

    /* appends: a bad one changes nothing; many small ones grow the
     * arrays; the new boxes are hit */
    rb_box bad = {{0, 0, 0}, {-1, 1, 1}};
    ck_assert_int_eq(rb_scene_append(ctx, s, &bad, 1), RB_EINPUT);
    rb_scene_stats_get(s, &st);
    ck_assert(st.boxes == 3 && st.version == 2);
    for (int k = 0; k < 40; k++) {
        rb_box near_box = {{0.5f - 0.01f * (float)k, -1, -1}, {0.9f, 1, 1}};
        ck_assert_int_eq(rb_scene_append(ctx, s, &near_box, 1), RB_OK);
    }
    rb_scene_stats_get(s, &st);
    ck_assert(st.boxes == 43 && st.version == 42);
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);
    /* box 42 starts at 0.5 - 0.39 = 0.11, the nearest */
    ck_assert_msg(hit.box == 42, "box %d", hit.box);

    /* clones are independent */
    rb_scene *c = NULL;
    ck_assert_int_eq(rb_scene_clone(ctx, s, &c), RB_OK);
    ck_assert_int_eq(rb_scene_set(ctx, c, idx, moved, 1), RB_OK);
    rb_scene_stats cs;
    rb_scene_stats_get(c, &cs);
    rb_scene_stats_get(s, &st);
    ck_assert(cs.version == st.version + 1 && cs.boxes == st.boxes);

    /* dims must match the query */
    q.dims = 2;
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_EINVAL);
    q.dims = 3;
    q.mode = RB_MODE_PAIRS;
    ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_EINVAL);

    rb_scene_destroy(c);
    rb_scene_destroy(s);
    rb_scene_destroy(NULL);
    ck_assert_int_eq(rb_scene_create(ctx, 4, boxes, 3, &s), RB_EINVAL);
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, 0, &s), RB_OK);
    ck_assert_int_eq(rb_intersect(ctx, &(rb_query){.mode = RB_MODE_COUNT,
                                                   .dims = 3, .rays = &ray,
                                                   .n_rays = 1, .scene = s},
                                  &(rb_results){.counts = (uint32_t[1]){7},
                                                .capacity = 1}),
                     RB_OK);
    rb_scene_destroy(s);
    rb_context_destroy(ctx);
}
END_TEST

/* A big pairs batch, cut into tasks of many pairs, written with
 * streaming stores past STREAM_OUT_BYTES: the lowest bad element is named
 * wherever the bad ones fall (the first and last task, and between), with
 * any number of threads; and without bad ones, the answers match the
 * scalar path's, pair for pair. */
START_TEST(test_big_pairs_batches)
{
    enum { R = 2200000 }; /* 35 MB of answers */
    rbt_rng rng = {77};
    rb_ray *rays = malloc(R * sizeof *rays);
    rb_box *boxes = malloc(R * sizeof *boxes);
    rb_hit *hits = malloc(R * sizeof *hits), *ref = malloc(R * sizeof *ref);
    ck_assert(rays && boxes && hits && ref);
    for (size_t i = 0; i < R; i++) {
        for (int a = 0; a < 3; a++) {
            rays[i].origin[a] = rbt_uniform(&rng, -4, 4);
            rays[i].dir[a] = rbt_uniform(&rng, -1, 1);
            boxes[i].min[a] = rbt_uniform(&rng, -3, 2);
            boxes[i].max[a] = boxes[i].min[a] + rbt_uniform(&rng, 0, 2);
        }
        rays[i].tmin = 0;
        rays[i].tmax = INFINITY;
    }
    rb_query q = {.mode = RB_MODE_PAIRS, .dims = 3, .rays = rays,
                  .n_rays = R, .boxes = boxes, .n_boxes = R};
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.threads = 1;
    /* the scalar kernels are chosen when a CPU backend is created */
    setenv("RAYBOX_SIMD", "scalar", 1);
    rb_context *scalar = rbt_context_opts(RBT_CPU, &opt);
    unsetenv("RAYBOX_SIMD");
    rb_backend_info info;
    rb_context_info(scalar, &info);
    ck_assert_str_eq(info.simd, "scalar");
    rb_results r = {.hits = ref, .capacity = R};
    ck_assert_int_eq(rb_intersect(scalar, &q, &r), RB_OK);
    rb_context_destroy(scalar);
    const unsigned threads[] = {2, 3, 8};
    for (size_t t = 0; t < 3; t++) {
        rb_context_options_init(&opt);
        opt.threads = threads[t];
        rb_context *ctx = rbt_context_opts(RBT_CPU, &opt);
        r.hits = hits;
        ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);
        ck_assert_msg(memcmp(hits, ref, R * sizeof *hits) == 0,
                      "%u threads: pairs differ from the scalar path",
                      threads[t]);
        /* bad elements in the last task, the middle and the first */
        const rb_ray ray_last = rays[R - 3], ray_first = rays[5];
        const rb_box box_mid = boxes[R / 2 + 1];
        rays[R - 3].dir[2] = NAN;
        ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_EINPUT);
        ck_assert_uint_eq(rb_context_error(ctx)->index, R - 3);
        boxes[R / 2 + 1].max[1] = -INFINITY;
        ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_EINPUT);
        ck_assert_int_eq(rb_context_error(ctx)->element, RB_ELEMENT_BOX);
        ck_assert_uint_eq(rb_context_error(ctx)->index, R / 2 + 1);
        rays[5].tmin = NAN;
        ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_EINPUT);
        ck_assert_int_eq(rb_context_error(ctx)->element, RB_ELEMENT_RAY);
        ck_assert_uint_eq(rb_context_error(ctx)->index, 5);
        rays[R - 3] = ray_last;
        boxes[R / 2 + 1] = box_mid;
        rays[5] = ray_first;
        rb_context_destroy(ctx);
    }
    free(rays);
    free(boxes);
    free(hits);
    free(ref);
}
END_TEST

/* Answers do not depend on the number of threads (R10). */
START_TEST(test_thread_counts)
{
    enum { R = 20000, B = 300 };
    rbt_rng rng = {5};
    rb_ray *rays = malloc(R * sizeof *rays);
    rb_box *boxes = malloc(B * sizeof *boxes);
    for (size_t i = 0; i < B; i++) {
        for (int a = 0; a < 3; a++) {
            boxes[i].min[a] = rbt_uniform(&rng, -10, 9);
            boxes[i].max[a] = boxes[i].min[a] + rbt_uniform(&rng, 0, 2);
        }
    }
    for (size_t i = 0; i < R; i++) {
        for (int a = 0; a < 3; a++) {
            rays[i].origin[a] = rbt_uniform(&rng, -12, 12);
            rays[i].dir[a] = rbt_uniform(&rng, -1, 1);
        }
        rays[i].tmin = 0;
        rays[i].tmax = INFINITY;
    }
    rb_hit *base = malloc(R * sizeof *base), *hits = malloc(R * sizeof *hits);
    const unsigned threads[] = {1, 2, 3, 8};
    for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_NEAREST; mode++) {
        for (size_t t = 0; t < 4; t++) {
            rb_context_options opt;
            rb_context_options_init(&opt);
            opt.threads = threads[t];
            rb_context *ctx = rbt_context_opts(RBT_CPU, &opt);
            rb_backend_info info;
            rb_context_info(ctx, &info);
            ck_assert_uint_eq(info.threads, threads[t]);
            rb_query q = {.mode = (rb_mode)mode, .dims = 3, .rays = rays,
                          .n_rays = R, .boxes = boxes,
                          .n_boxes = mode == RB_MODE_PAIRS ? R : B};
            rb_box *pb = NULL;
            if (mode == RB_MODE_PAIRS) {
                pb = malloc(R * sizeof *pb);
                for (size_t i = 0; i < R; i++)
                    pb[i] = boxes[i % B];
                q.boxes = pb;
            }
            rb_results r = {.hits = t ? hits : base, .capacity = R};
            ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);
            if (t)
                ck_assert_msg(memcmp(base, hits, R * sizeof *hits) == 0,
                              "%s differs with %u threads",
                              rb_mode_name(mode), threads[t]);
            free(pb);
            rb_context_destroy(ctx);
        }
    }
    free(rays);
    free(boxes);
    free(base);
    free(hits);
}
END_TEST

/* rb_context_options.hierarchy: checked, and the same answers whether
 * queries walk a hierarchy or test every box (R9). */
START_TEST(test_hierarchy_option)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    opt.hierarchy = 7;
    rb_context *ctx = NULL;
    char why[128] = "";
    ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why),
                     RB_EINVAL);
    ck_assert_ptr_null(ctx);

    enum { R = 3000, B = 2000 };
    rbt_rng rng = {41};
    rb_ray *rays = malloc(R * sizeof *rays);
    rb_box *boxes = malloc(B * sizeof *boxes);
    for (size_t i = 0; i < B; i++) {
        for (int a = 0; a < 3; a++) {
            boxes[i].min[a] = rbt_uniform(&rng, -20, 19);
            boxes[i].max[a] = boxes[i].min[a] + rbt_uniform(&rng, 0, 1);
        }
    }
    for (size_t i = 0; i < R; i++) {
        for (int a = 0; a < 3; a++) {
            rays[i].origin[a] = rbt_uniform(&rng, -20, 20);
            rays[i].dir[a] = rbt_uniform(&rng, -1, 1);
        }
        rays[i].tmin = 0;
        rays[i].tmax = INFINITY;
    }
    rb_hit *h[2] = {malloc(R * sizeof(rb_hit)), malloc(R * sizeof(rb_hit))};
    const int settings[2] = {RB_HIERARCHY_OFF, RB_HIERARCHY_ALWAYS};
    for (int k = 0; k < 2; k++) {
        opt.hierarchy = settings[k];
        ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why),
                         RB_OK);
        rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = rays,
                      .n_rays = R, .boxes = boxes, .n_boxes = B};
        rb_results r = {.hits = h[k], .capacity = R};
        ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_OK);
        rb_context_destroy(ctx);
    }
    ck_assert(memcmp(h[0], h[1], R * sizeof(rb_hit)) == 0);
    free(h[0]);
    free(h[1]);
    free(rays);
    free(boxes);
}
END_TEST

/* Box sets of 131072 boxes or more are checked and copied on the pool in
 * slices: the error still names the first bad box (with a second bad box
 * in a later slice), for scenes and inline boxes, at 1, 2 and 3 threads;
 * a valid set is stored whole. */
START_TEST(test_large_box_sets)
{
    enum { NB = 400000 };
    rb_box *boxes = malloc(NB * sizeof *boxes);
    ck_assert_ptr_nonnull(boxes);
    for (size_t i = 0; i < NB; i++) {
        for (int a = 0; a < 3; a++) {
            boxes[i].min[a] = (float)(i % 1000) + (float)a;
            boxes[i].max[a] = boxes[i].min[a] + 0.5f;
        }
    }
    const unsigned threads[] = {1, 2, 3};
    static const size_t first[] = {0, 65535, 65536, 200001, NB - 1};
    for (size_t t = 0; t < 3; t++) {
        rb_context_options opt;
        rb_context_options_init(&opt);
        opt.backend = RB_BACKEND_CPU;
        opt.threads = threads[t];
        rb_context *ctx = NULL;
        ck_assert_int_eq(rb_context_create(&opt, &ctx, NULL, 0), RB_OK);
        rb_scene *s = NULL;
        ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, NB, &s), RB_OK);
        rb_scene_stats st;
        rb_scene_stats_get(s, &st);
        ck_assert_uint_eq(st.boxes, NB);
        ck_assert(st.bounds_min[0] == 0 && st.bounds_max[2] == 1001.5f);
        rb_scene_destroy(s);
        for (size_t f = 0; f < sizeof first / sizeof first[0]; f++) {
            size_t bad = first[f], later = bad + 70000 < NB ? bad + 70000 : 0;
            rb_box keep = boxes[bad], keep_later = boxes[later];
            boxes[bad].max[1] = NAN;
            if (later)
                boxes[later].min[0] = boxes[later].max[0] + 1;
            s = NULL;
            ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, NB, &s),
                             RB_EINPUT);
            ck_assert_ptr_null(s);
            const rb_error *e = rb_context_error(ctx);
            ck_assert_int_eq(e->element, RB_ELEMENT_BOX);
            ck_assert_uint_eq(e->index, bad);
            ck_assert_int_eq(e->field, 4);
            rb_ray ray = {{-1, -1, -1}, {1, 1, 1}, 0, INFINITY};
            rb_hit hit;
            rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = &ray,
                          .n_rays = 1, .boxes = boxes, .n_boxes = NB};
            rb_results r = {.hits = &hit, .capacity = 1};
            ck_assert_int_eq(rb_intersect(ctx, &q, &r), RB_EINPUT);
            ck_assert_uint_eq(rb_context_error(ctx)->index, bad);
            boxes[bad] = keep;
            boxes[later] = keep_later;
        }
        rb_context_destroy(ctx);
    }
    free(boxes);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("validate");
    TCase *tc = tcase_create("validate");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_ray_fields, 0, RBT_BACKENDS);
    tcase_add_loop_test(tc, test_box_fields, 0, RBT_BACKENDS);
    tcase_add_loop_test(tc, test_fields_2d, 0, RBT_BACKENDS);
    tcase_add_loop_test(tc, test_legal_edges, 0, RBT_BACKENDS);
    tcase_add_test(tc, test_fast_checks_match_exact_rules);
    tcase_add_test(tc, test_malformed_queries);
    tcase_add_loop_test(tc, test_scenes, 0, RBT_BACKENDS);
    tcase_add_test(tc, test_thread_counts);
    tcase_add_test(tc, test_big_pairs_batches);
    tcase_add_test(tc, test_large_box_sets);
    tcase_add_test(tc, test_hierarchy_option);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
