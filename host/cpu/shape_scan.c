/*
 * shape_scan.c - the shape pass of the CPU backend (internal.h,
 * rb_shapes_run): every ray against every obb, xbox, sphere and plane with
 * kernels/exact.h's tests, combined with the answers the box pass left in
 * the outputs. Scalar: one shape after another, in id order per kind.
 */
#include <math.h>

#include "../internal.h"
#include "../threadpool.h"

#define RAYS_PER_TASK 256

typedef struct shape_run {
    rb_mode mode;
    const rb_ray *rays;
    size_t n_rays;
    const rb_shapeset *set;
    uint32_t max_hits;
    rb_results *res;
} shape_run;

static rb_ray_raw raw_of(const rb_ray *r)
{
    return rb_raw_ray(r->origin[0], r->origin[1], r->origin[2], r->dir[0],
                      r->dir[1], r->dir[2], r->tmin, r->tmax);
}

/* Shape j's full answer (box untouched). */
static void shape_full(const rb_shapeset *s, size_t j, const rb_ray_raw *w,
                       rb_hit *h)
{
    size_t n_lbox = s->n_obb + s->n_xbox;
    if (j < n_lbox)
        rb_lbox_full(w, &s->lbox[j], h);
    else if (j < n_lbox + s->n_ball)
        rb_ball_full(w, &s->ball[j - n_lbox], h);
    else
        rb_halfspace_full(w, &s->half[j - n_lbox - s->n_ball], h);
}

/* Shape j hit within the ray's range: its t_enter and t_exit. */
static int shape_hit(const rb_shapeset *s, size_t j, const rb_ray_raw *w,
                     float *t_enter, float *t_exit)
{
    if (j < s->n_obb + s->n_xbox)
        return rb_lbox_hit(w, &s->lbox[j], t_enter, t_exit);
    rb_hit h;
    h.box = -1;
    shape_full(s, j, w, &h);
    *t_enter = h.t_enter;
    *t_exit = h.t_exit;
    return h.hit;
}

/* The shapes a ray tests one by one: all of them, or with a hierarchy
 * only the planes (the walk does the rest). */
static size_t first_scanned(const rb_shapeset *s)
{
    return s->tree ? s->n_obb + s->n_xbox + s->n_ball : 0;
}

static void nearest(const shape_run *run, size_t i, const rb_ray_raw *w)
{
    const rb_shapeset *s = run->set;
    rb_hit *out = &run->res->hits[i];
    float best_t = out->hit ? out->t_enter : INFINITY;
    uint32_t best_id = out->hit ? (uint32_t)out->box : UINT32_MAX;
    size_t best_j = SIZE_MAX, n = rb_shapeset_size(s);
    if (s->tree)
        rb_shape_walk_nearest(s, w, &best_t, &best_id, &best_j);
    for (size_t j = first_scanned(s); j < n; j++) {
        float te, tx;
        if (!shape_hit(s, j, w, &te, &tx))
            continue;
        uint32_t id = rb_shapeset_id(s, j);
        if (te < best_t || (te == best_t && id < best_id)) {
            best_t = te;
            best_id = id;
            best_j = j;
        }
    }
    if (best_j != SIZE_MAX) {
        shape_full(s, best_j, w, out);
        out->box = (int32_t)best_id;
    }
}

static void every(const shape_run *run, size_t i, const rb_ray_raw *w)
{
    const rb_shapeset *s = run->set;
    rb_results *res = run->res;
    size_t n = rb_shapeset_size(s), first = first_scanned(s);
    float te, tx;
    switch (run->mode) {
    case RB_MODE_ANY:
        if (!res->any[i] && s->tree)
            res->any[i] = (uint8_t)rb_shape_walk_any(s, w);
        for (size_t j = first; j < n && !res->any[i]; j++)
            res->any[i] = (uint8_t)shape_hit(s, j, w, &te, &tx);
        break;
    case RB_MODE_COUNT:
        if (s->tree)
            res->counts[i] += rb_shape_walk_count(s, w);
        for (size_t j = first; j < n; j++)
            res->counts[i] += (uint32_t)shape_hit(s, j, w, &te, &tx);
        break;
    case RB_MODE_ALL: {
        rb_list_hit *list = res->list + i * run->max_hits;
        uint32_t stored = res->counts[i] < run->max_hits ? res->counts[i]
                                                          : run->max_hits;
        if (s->tree)
            res->counts[i] +=
                rb_shape_walk_all(s, w, list, &stored, run->max_hits);
        for (size_t j = first; j < n; j++) {
            if (!shape_hit(s, j, w, &te, &tx))
                continue;
            rb_list_insert(list, &stored, run->max_hits,
                           (int32_t)rb_shapeset_id(s, j), te, tx);
            res->counts[i]++;
        }
        break;
    }
    default:
        break;
    }
}

static void shape_task(void *arg, size_t task, unsigned worker)
{
    (void)worker;
    const shape_run *run = arg;
    size_t begin = task * RAYS_PER_TASK;
    size_t end = begin + RAYS_PER_TASK < run->n_rays ? begin + RAYS_PER_TASK
                                                     : run->n_rays;
    for (size_t i = begin; i < end; i++) {
        rb_ray_raw w = raw_of(&run->rays[i]);
        switch (run->mode) {
        case RB_MODE_PAIRS: {
            rb_hit *h = &run->res->hits[i];
            shape_full(run->set, i, &w, h);
            h->box = h->hit ? (int32_t)i : -1;
            break;
        }
        case RB_MODE_NEAREST:
            nearest(run, i, &w);
            break;
        default:
            every(run, i, &w);
            break;
        }
    }
}

int rb_shapes_run(rb_context *ctx, rb_mode mode, const rb_ray *rays,
                  size_t n_rays, const rb_shapeset *set, uint32_t max_hits,
                  rb_results *res)
{
    shape_run run = {mode, rays, n_rays, set, max_hits, res};
    size_t tasks = (n_rays + RAYS_PER_TASK - 1) / RAYS_PER_TASK;
    uint64_t tests = (uint64_t)n_rays *
                     (mode == RB_MODE_PAIRS ? 1
                      : set->tree           ? 64 + set->n_half
                                            : rb_shapeset_size(set));
    if (tests < RB_SMALL_JOB_TESTS) {
        for (size_t t = 0; t < tasks; t++)
            shape_task(&run, t, 0);
    } else {
        rb_pool_run(ctx->pool, tasks, shape_task, &run);
    }
    return RB_OK;
}
