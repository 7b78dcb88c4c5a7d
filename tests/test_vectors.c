/* test_vectors.c - every worked example of SPEC section 2
 * (tests/vectors/public.json, a copy of shared/vectors/public.json) on the
 * scalar reference and on every backend, in every mode, in 3D and, where
 * the example lies in the z = 0 plane, in 2D. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

static rbt_vector *vectors;
static size_t n_vectors;

static void load(void)
{
    n_vectors = rbt_load_vectors(&vectors);
}

static void unload(void)
{
    free(vectors);
}

static void check_hit(const rbt_vector *v, const rb_hit *h, int32_t box,
                      const char *where)
{
    char got[160];
    rbt_hit_str(h, got, sizeof got);
    if (v->expect == 0) {
        ck_assert_msg(!h->hit && h->box == -1, "%s %s (%s): expected miss, "
                      "got %s", where, v->id, v->what, got);
        return;
    }
    ck_assert_msg(h->hit && h->box == box &&
                      rbt_same_float(h->t_enter, v->t_enter) &&
                      rbt_same_float(h->t_exit, v->t_exit) &&
                      h->face == v->face && h->exit_face == v->exit_face,
                  "%s %s (%s): expected t=[%.9g, %.9g] faces %s/%s, got %s",
                  where, v->id, v->what, (double)v->t_enter,
                  (double)v->t_exit,
                  rb_face_name(v->face) ? rb_face_name(v->face) : "none",
                  rb_face_name(v->exit_face) ? rb_face_name(v->exit_face)
                                             : "none",
                  got);
}

START_TEST(test_reference)
{
    load();
    for (size_t i = 0; i < n_vectors; i++) {
        if (vectors[i].expect < 0)
            continue;
        rb_hit h;
        rb_intersect_one(&vectors[i].ray, &vectors[i].box, &h);
        check_hit(&vectors[i], &h, 0, "rb_intersect_one");
    }
    unload();
}
END_TEST

/* One query per vector and mode; the box appears twice so that nearest
 * must break the tie to index 0, count must say 2 and all must list both. */
static void run_vector(rb_context *ctx, const rbt_vector *v, unsigned dims,
                       const char *backend)
{
    char where[64];
    rb_ray2 r2 = {{v->ray.origin[0], v->ray.origin[1]},
                  {v->ray.dir[0], v->ray.dir[1]}, v->ray.tmin, v->ray.tmax};
    rb_box2 b2[2] = {{{v->box.min[0], v->box.min[1]},
                      {v->box.max[0], v->box.max[1]}}};
    b2[1] = b2[0];
    rb_box b3[2] = {v->box, v->box};
    const void *rays = dims == 3 ? (const void *)&v->ray : (const void *)&r2;
    const void *boxes = dims == 3 ? (const void *)b3 : (const void *)b2;

    rb_hit hit;
    uint8_t any;
    uint32_t count;
    rb_list_hit list[2];
    rb_results res = {.hits = &hit, .any = &any, .counts = &count,
                      .list = list, .capacity = 1};

    rb_query q = {.mode = RB_MODE_PAIRS, .dims = dims, .rays = rays,
                  .n_rays = 1, .boxes = boxes, .n_boxes = 1, .max_hits = 2};
    int rc = rb_intersect(ctx, &q, &res);
    snprintf(where, sizeof where, "%s %uD pairs", backend, dims);
    if (v->expect < 0) {
        const rb_error *e = rb_context_error(ctx);
        ck_assert_msg(rc == RB_EINPUT, "%s %s: expected invalid, got %s",
                      where, v->id, rb_status_name(rc));
        ck_assert_msg(e->index == 0 && e->element != RB_ELEMENT_NONE &&
                          e->message[0],
                      "%s %s: error does not name the element", where,
                      v->id);
        return;
    }
    ck_assert_msg(rc == RB_OK, "%s %s: %s", where, v->id,
                  rb_context_error(ctx)->message);
    check_hit(v, &hit, 0, where);

    q.n_boxes = 2;
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++) {
        q.mode = (rb_mode)mode;
        snprintf(where, sizeof where, "%s %uD %s", backend, dims,
                 rb_mode_name(mode));
        rc = rb_intersect(ctx, &q, &res);
        ck_assert_msg(rc == RB_OK, "%s %s: %s", where, v->id,
                      rb_context_error(ctx)->message);
        switch (mode) {
        case RB_MODE_NEAREST:
            check_hit(v, &hit, 0, where);
            break;
        case RB_MODE_ANY:
            ck_assert_msg(any == (v->expect == 1), "%s %s: any=%d", where,
                          v->id, any);
            break;
        case RB_MODE_COUNT:
            ck_assert_msg(count == (v->expect == 1 ? 2u : 0u),
                          "%s %s: count=%u", where, v->id, count);
            break;
        case RB_MODE_ALL:
            ck_assert_msg(count == (v->expect == 1 ? 2u : 0u),
                          "%s %s: count=%u", where, v->id, count);
            for (int k = 0; k < (int)count; k++) {
                ck_assert_msg(list[k].box == k &&
                                  rbt_same_float(list[k].t_enter,
                                                 v->t_enter) &&
                                  rbt_same_float(list[k].t_exit, v->t_exit),
                              "%s %s: list[%d] = box %d t=[%g, %g]", where,
                              v->id, k, list[k].box,
                              (double)list[k].t_enter,
                              (double)list[k].t_exit);
            }
            break;
        }
    }
}

/* A vector also holds in 2D when it lies in the plane z = 0. */
static int planar(const rbt_vector *v)
{
    int z_face = v->face == RB_FACE_NEG_Z || v->face == RB_FACE_POS_Z ||
                 v->exit_face == RB_FACE_NEG_Z ||
                 v->exit_face == RB_FACE_POS_Z;
    return v->ray.origin[2] == 0 && v->ray.dir[2] == 0 &&
           v->box.min[2] <= 0 && v->box.max[2] >= 0 && !z_face &&
           isfinite(v->box.min[2]) && isfinite(v->box.max[2]);
}

START_TEST(test_backend)
{
    load();
    rb_context *ctx = rbt_context(_i);
    if (ctx) {
        size_t n2 = 0;
        for (size_t i = 0; i < n_vectors; i++) {
            run_vector(ctx, &vectors[i], 3, rbt_backend_name(_i));
            if (planar(&vectors[i])) {
                run_vector(ctx, &vectors[i], 2, rbt_backend_name(_i));
                n2++;
            }
        }
        ck_assert_msg(n2 >= 20, "only %zu vectors ran in 2D", n2);
    }
    rb_context_destroy(ctx);
    unload();
}
END_TEST

/* All valid vectors in one batch: a ray's answer must not depend on its
 * neighbours or on how the batch is cut into tiles and chunks. */
START_TEST(test_batch)
{
    load();
    rb_context *ctx = rbt_context(_i);
    if (ctx) {
        size_t reps = 3000; /* > one tile and > one thread's share */
        rb_ray *rays = malloc(n_vectors * reps * sizeof *rays);
        rb_box *boxes = malloc(n_vectors * reps * sizeof *boxes);
        rb_hit *hits = malloc(n_vectors * reps * sizeof *hits);
        size_t n = 0;
        for (size_t k = 0; k < reps; k++) {
            for (size_t i = 0; i < n_vectors; i++) {
                if (vectors[i].expect < 0)
                    continue;
                rays[n] = vectors[i].ray;
                boxes[n] = vectors[i].box;
                n++;
            }
        }
        rb_query q = {.mode = RB_MODE_PAIRS, .dims = 3, .rays = rays,
                      .n_rays = n, .boxes = boxes, .n_boxes = n};
        rb_results res = {.hits = hits, .capacity = n};
        ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_OK);
        size_t j = 0;
        for (size_t k = 0; k < reps; k++) {
            for (size_t i = 0; i < n_vectors; i++) {
                if (vectors[i].expect < 0)
                    continue;
                check_hit(&vectors[i], &hits[j], vectors[i].expect == 1
                                                     ? (int32_t)j
                                                     : -1,
                          "batch");
                j++;
            }
        }
        free(rays);
        free(boxes);
        free(hits);
    }
    rb_context_destroy(ctx);
    unload();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("vectors");
    TCase *tc = tcase_create("vectors");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_reference);
    tcase_add_loop_test(tc, test_backend, 0, RBT_BACKENDS);
    tcase_add_loop_test(tc, test_batch, 0, RBT_BACKENDS);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
