/* batch.c - see batch.h. */
#include "batch.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A coordinate: mostly on the integer grid of [-8, 8] (shared planes and
 * equal t values), else anywhere in it. */
static float coord(rbt_rng *r)
{
    if (rbt_below(r, 3) != 0)
        return (float)((int)rbt_below(r, 17) - 8);
    return rbt_uniform(r, -8.0f, 8.0f);
}

static float direction(rbt_rng *r)
{
    switch (rbt_below(r, 12)) {
    case 0:
        return 0.0f;
    case 1:
        return -0.0f;
    case 2:
        return FLT_MIN / 4; /* subnormal: flushed to +0 (R7) */
    case 3:
        return -FLT_MIN / 8;
    case 4:
        return (float)((int)rbt_below(r, 5) - 2);
    case 5:
        /* Normal, but 1/d is huge: entries overflow to +inf (R5). */
        return rbt_below(r, 2) ? 2e-38f : -3e-38f;
    default:
        return rbt_uniform(r, -1.0f, 1.0f);
    }
}

static void make_ray(rbt_rng *r, unsigned dims, float *o, float *d,
                     float *tmin, float *tmax)
{
    int zero = rbt_below(r, 40) == 0; /* a point-in-box test */
    for (unsigned a = 0; a < dims; a++) {
        o[a] = rbt_below(r, 4) == 0 ? rbt_uniform(r, -12.0f, 12.0f)
                                    : coord(r);
        if (rbt_below(r, 30) == 0)
            o[a] = rbt_below(r, 2) ? FLT_MIN / 2 : -FLT_MIN / 3;
        d[a] = zero ? 0.0f : direction(r);
    }
    switch (rbt_below(r, 6)) {
    case 0:
        *tmin = rbt_uniform(r, -4.0f, 2.0f);
        *tmax = *tmin + rbt_uniform(r, 0.0f, 10.0f);
        break;
    case 1:
        *tmin = -3.0f;
        *tmax = INFINITY;
        break;
    case 2:
        *tmin = 1.0f;
        *tmax = 1.0f;
        break;
    default:
        *tmin = 0.0f;
        *tmax = INFINITY;
        break;
    }
}

static void make_box(rbt_rng *r, unsigned dims, float *lo, float *hi)
{
    int kind = (int)rbt_below(r, 10);
    for (unsigned a = 0; a < dims; a++) {
        float x = coord(r);
        float ext = kind == 0   ? 0.0f /* point box */
                    : kind == 1 && a == 0 ? 0.0f /* flat box */
                    : rbt_below(r, 2) ? (float)(1 + rbt_below(r, 4))
                                      : rbt_uniform(r, 0.0f, 5.0f);
        lo[a] = x;
        hi[a] = x + ext;
        if (rbt_below(r, 30) == 0) { /* flushes to [-0, +0] (R7) */
            lo[a] = -FLT_MIN / 2;
            hi[a] = FLT_MIN / 4;
        }
    }
}

void rbt_batch_make(rbt_batch *b, unsigned dims, size_t n_rays,
                    size_t n_boxes, uint64_t seed)
{
    rbt_rng rng = {seed};
    b->dims = dims;
    b->n_rays = n_rays;
    b->n_boxes = n_boxes;
    size_t rsz = dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
    size_t bsz = dims == 3 ? sizeof(rb_box) : sizeof(rb_box2);
    b->rays = malloc(n_rays ? n_rays * rsz : 1);
    b->boxes = malloc(n_boxes ? n_boxes * bsz : 1);
    ck_assert(b->rays && b->boxes);
    for (size_t i = 0; i < n_rays; i++) {
        if (dims == 3) {
            rb_ray *r = (rb_ray *)b->rays + i;
            make_ray(&rng, 3, r->origin, r->dir, &r->tmin, &r->tmax);
        } else {
            rb_ray2 *r = (rb_ray2 *)b->rays + i;
            make_ray(&rng, 2, r->origin, r->dir, &r->tmin, &r->tmax);
        }
    }
    for (size_t i = 0; i < n_boxes; i++) {
        /* Some boxes repeat an earlier one: ties must go to the lower
         * index in nearest and come first in all. */
        int dup = i > 0 && rbt_below(&rng, 16) == 0;
        size_t j = dup ? rbt_below(&rng, (uint32_t)i) : i;
        if (dims == 3) {
            rb_box *x = (rb_box *)b->boxes;
            if (dup)
                x[i] = x[j];
            else
                make_box(&rng, 3, x[i].min, x[i].max);
        } else {
            rb_box2 *x = (rb_box2 *)b->boxes;
            if (dup)
                x[i] = x[j];
            else
                make_box(&rng, 2, x[i].min, x[i].max);
        }
    }
}

void rbt_batch_free(rbt_batch *b)
{
    free(b->rays);
    free(b->boxes);
    b->rays = b->boxes = NULL;
}

void rbt_batch_set_ray(rbt_batch *b, size_t i, int field, float v)
{
    float *f = (float *)b->rays + i * (b->dims == 3 ? 8 : 6);
    f[field] = v;
}

void rbt_batch_set_box(rbt_batch *b, size_t i, int field, float v)
{
    float *f = (float *)b->boxes + i * (b->dims == 3 ? 6 : 4);
    f[field] = v;
}

void rbt_out_init(rbt_out *o, size_t n, uint32_t max_hits)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    o->max_hits = max_hits ? max_hits : 1;
    size_t m = n ? n : 1;
    o->hits = malloc(m * sizeof *o->hits);
    o->any = malloc(m);
    o->counts = malloc(m * sizeof *o->counts);
    o->list = malloc(m * o->max_hits * sizeof *o->list);
    ck_assert(o->hits && o->any && o->counts && o->list);
}

void rbt_out_free(rbt_out *o)
{
    free(o->hits);
    free(o->any);
    free(o->counts);
    free(o->list);
    memset(o, 0, sizeof *o);
}

int rbt_run(rb_context *ctx, const rbt_batch *b, rb_mode mode,
            const rb_scene *scene, rbt_out *o)
{
    rb_query q = {.mode = mode, .dims = b->dims, .rays = b->rays,
                  .n_rays = b->n_rays, .boxes = b->boxes,
                  .n_boxes = b->n_boxes, .scene = scene,
                  .max_hits = o->max_hits};
    if (mode == RB_MODE_PAIRS)
        ck_assert_msg(b->n_boxes == b->n_rays, "pairs needs n boxes");
    rb_results res = {.hits = o->hits, .any = o->any, .counts = o->counts,
                      .list = o->list, .capacity = o->n};
    int rc = rb_intersect(ctx, &q, &res);
    o->info = res.info;
    return rc;
}

static int same_list_hit(const rb_list_hit *a, const rb_list_hit *b)
{
    return a->box == b->box && rbt_same_float(a->t_enter, b->t_enter) &&
           rbt_same_float(a->t_exit, b->t_exit);
}

/* Plain ifs, ck_abort_msg on the first difference: a passing ck_assert
 * marks its point through check's pipe (a system call each), which made
 * comparisons of big batches take seconds. */
void rbt_assert_same(rb_mode mode, const rbt_out *a, const rbt_out *b,
                     const char *what)
{
    ck_assert_msg(a->n == b->n, "%s: sizes differ", what);
    for (size_t i = 0; i < a->n; i++) {
        char x[160], y[160];
        switch (mode) {
        case RB_MODE_PAIRS:
        case RB_MODE_NEAREST:
            if (!rbt_same_hit(&a->hits[i], &b->hits[i]))
                ck_abort_msg("%s %s ray %zu: %s vs %s", what,
                             rb_mode_name(mode), i,
                             rbt_hit_str(&a->hits[i], x, sizeof x),
                             rbt_hit_str(&b->hits[i], y, sizeof y));
            break;
        case RB_MODE_ANY:
            if (a->any[i] != b->any[i])
                ck_abort_msg("%s any ray %zu: %d vs %d", what, i, a->any[i],
                             b->any[i]);
            break;
        case RB_MODE_COUNT:
            if (a->counts[i] != b->counts[i])
                ck_abort_msg("%s count ray %zu: %u vs %u", what, i,
                             a->counts[i], b->counts[i]);
            break;
        case RB_MODE_ALL: {
            if (a->counts[i] != b->counts[i])
                ck_abort_msg("%s all ray %zu: count %u vs %u", what, i,
                             a->counts[i], b->counts[i]);
            uint32_t m = a->counts[i] < a->max_hits ? a->counts[i]
                                                    : a->max_hits;
            for (uint32_t k = 0; k < m; k++) {
                const rb_list_hit *p = &a->list[i * a->max_hits + k];
                const rb_list_hit *q = &b->list[i * b->max_hits + k];
                if (!same_list_hit(p, q))
                    ck_abort_msg("%s all ray %zu entry %u: box %d t=[%.9g, "
                                 "%.9g] vs box %d t=[%.9g, %.9g]",
                                 what, i, k, p->box, (double)p->t_enter,
                                 (double)p->t_exit, q->box,
                                 (double)q->t_enter, (double)q->t_exit);
            }
            break;
        }
        }
    }
}
