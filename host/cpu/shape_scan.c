/*
 * shape_scan.c - the shape pass of the CPU backend (internal.h,
 * rb_shapes_run): every ray against the obbs, xboxes, spheres and planes
 * with kernels/exact.h's shape pass (the same code the OpenCL kernels
 * run), or against the bounded ones through their hierarchy
 * (bvh/bvh_shapes.c), combined with the answers the box pass left in the
 * outputs. Big batches over a big tree walk in the Morton order of
 * ray_order.h, as the box walk does (cpu_backend.c says why).
 *
 * rb_joint_run is both passes at once over a joint tree (boxes and
 * bounded shapes in one hierarchy): a mixed scene then costs one walk a
 * ray instead of a walk of the box tree and one of the shape tree.
 *
 * `any`, `count` and `nearest` walk a task's rays through the tree as
 * one ray stream (bvh/bvh_stream_avx2.c, where the walkers have one), as
 * the box walk does (cpu_backend.c); rays outside the tree's widening,
 * and every other mode, go one by one.
 */
#include <math.h>
#include <stdatomic.h>

#include "../bvh/bvh.h"
#include "../internal.h"
#include "../threadpool.h"
#include "ray_order.h"
#include "stream_scratch.h"

#define RAYS_PER_TASK 256
#define PAIRS_PER_TASK_MAX 65536 /* about 2 ms of obb pairs a thread */
#define PREFETCH 8 /* rays fetched ahead in walk order */
/* Rays fetched ahead by the joint stream's gather, whose first loads of
 * a ray missed more than its checks and preparation cost. Measured, the
 * queries of two builds in turn (21 rounds, 100K mixed elements, 262144
 * rays): 24 against 8 ahead 1.02-1.03x the rate, `any` on two threads
 * alike; a shape stream, which fetches the box pass's answers too, ran
 * 0.95-0.99x with 24. Further is worse: with 32 and 64 ahead the
 * gather's first load held 4x and 6x its samples at 24 in perf, as if
 * the fetches outran what the core keeps in flight. */
#define JOINT_PREFETCH 24

typedef struct shape_run {
    rb_mode mode;
    const rb_ray *rays;
    size_t n_rays;
    const rb_shapeset *set;
    rb_shape_view view;
    rb_shape_view tree_view; /* the tree's records (internal.h) */
    const rb_bvh_walkers *walk;
    const uint32_t *order; /* NULL: input order */
    uint32_t max_hits;
    rb_results *res;
    const rb_job *job;
    atomic_int stopped;
    int joint;                 /* rb_joint_run: boxes in the same walk */
    atomic_uint_fast64_t bad;  /* joint: the lowest invalid ray */
    size_t per_task;
    rb_streams streams; /* streamed modes: their scratch, or none */
} shape_run;

static rb_ray_raw raw_of(const rb_ray *r)
{
    return rb_raw_ray(r->origin[0], r->origin[1], r->origin[2], r->dir[0],
                      r->dir[1], r->dir[2], r->tmin, r->tmax);
}

/* The shapes a ray tests one by one: all of them, or with a hierarchy
 * only the planes (the walk does the rest). */
static rb_u32 first_scanned(const shape_run *run)
{
    return run->set->tree ? run->view.n_lbox + run->view.n_ball : 0;
}

static void nearest(const shape_run *run, size_t i, const rb_ray_raw *w)
{
    const rb_shapeset *s = run->set;
    rb_hit *out = &run->res->hits[i];
    float best_t = out->hit ? out->t_enter : INFINITY;
    uint32_t best_id = out->hit ? (uint32_t)out->box : UINT32_MAX;
    uint32_t best_p = UINT32_MAX; /* in tree_view */
    if (s->tree)
        rb_shape_walk_nearest(s, &run->tree_view, run->walk, w, &best_t,
                              &best_id, &best_p);
    rb_u32 j = UINT32_MAX;
    rb_shape_scan_nearest(&run->view, first_scanned(run),
                      (rb_u32)rb_shapeset_size(s), w, &best_t, &best_id, &j);
    if (j != UINT32_MAX) {
        rb_shape_full(&run->view, j, w, out);
        out->box = (int32_t)best_id;
    } else if (best_p != UINT32_MAX) {
        rb_shape_full(&run->tree_view, best_p, w, out);
        out->box = (int32_t)best_id;
    }
}

static void every(const shape_run *run, size_t i, const rb_ray_raw *w)
{
    const rb_shapeset *s = run->set;
    rb_results *res = run->res;
    rb_u32 n = (rb_u32)rb_shapeset_size(s), first = first_scanned(run);
    switch (run->mode) {
    case RB_MODE_ANY:
        if (!res->any[i] && s->tree)
            res->any[i] =
                (uint8_t)rb_shape_walk_any(s, &run->tree_view, run->walk, w);
        if (!res->any[i])
            res->any[i] = (uint8_t)rb_shape_scan_any(&run->view, first, n, w);
        break;
    case RB_MODE_COUNT:
        if (s->tree)
            res->counts[i] +=
                rb_shape_walk_count(s, &run->tree_view, run->walk, w);
        res->counts[i] += rb_shape_scan_count(&run->view, first, n, w);
        break;
    case RB_MODE_ALL: {
        rb_list_hit *list = res->list + i * run->max_hits;
        uint32_t stored = res->counts[i] < run->max_hits ? res->counts[i]
                                                          : run->max_hits;
        if (s->tree)
            res->counts[i] +=
                rb_shape_walk_all(s, &run->tree_view, run->walk, w, list,
                                  &stored, run->max_hits);
        res->counts[i] += rb_shape_scan_all(&run->view, first, n, w, list,
                                        &stored, run->max_hits);
        break;
    }
    default:
        break;
    }
}

/* ---- both passes in one walk (rb_joint_run) ---- */

/* Ray i's answer from *b, the best of its tree walk (rb_joint_best),
 * after the planes: the full answer of the winner (shape_hit: a stream's
 * answer of b's shape, or NULL to compute it). A joint run answers every
 * ray (a miss where nothing won); a shape run leaves the box pass's
 * answer where no shape improved it. */
static void nearest_answer(const shape_run *run, size_t i,
                           const rb_ray_prep *p, const rb_ray_raw *w,
                           rb_joint_best *b, const rb_hit *shape_hit)
{
    const rb_shapeset *s = run->set;
    rb_u32 plane = UINT32_MAX;
    rb_shape_scan_nearest(&run->view, first_scanned(run),
                          (rb_u32)rb_shapeset_size(s), w, &b->t, &b->id,
                          &plane);
    rb_hit *out = &run->res->hits[i];
    if (plane != UINT32_MAX) {
        rb_shape_full(&run->view, plane, w, out);
    } else if (b->j != UINT32_MAX && shape_hit) {
        *out = *shape_hit;
    } else if (b->j != UINT32_MAX) {
        rb_shape_full(&run->tree_view, b->j, w, out);
    } else if (b->slot != UINT32_MAX) {
        rb_bvh_best_box_full(s->tree, b, p, out);
    } else {
        if (run->joint)
            rb_hit_miss(out);
        return;
    }
    out->box = (int32_t)b->id;
}

/* nearest of ray i (p: its prepared form, fast: the tree's widening
 * covers it): the joint walk, the shape walk's own route for the bounded
 * shapes when not fast, the planes; the full answer of the winner. */
static void joint_nearest(const shape_run *run, size_t i,
                          const rb_ray_prep *p, const rb_ray_raw *w, int fast)
{
    const rb_shapeset *s = run->set;
    rb_joint_best b = rb_joint_best_none();
    run->walk->joint_nearest(s->tree, p, &run->tree_view, w, fast, &b);
    if (!fast) {
        uint32_t j = UINT32_MAX;
        rb_shape_walk_nearest(s, &run->tree_view, run->walk, w, &b.t, &b.id,
                              &j);
        if (j != UINT32_MAX) {
            b.j = j;
            b.slot = UINT32_MAX;
        }
    }
    nearest_answer(run, i, p, w, &b, NULL);
}

static void joint_every(const shape_run *run, size_t i, const rb_ray_prep *p,
                        const rb_ray_raw *w, int fast)
{
    const rb_shapeset *s = run->set;
    const rb_bvh_walkers *walk = run->walk;
    const rb_shape_view *tv = &run->tree_view;
    rb_results *res = run->res;
    rb_u32 n = (rb_u32)rb_shapeset_size(s), first = first_scanned(run);
    switch (run->mode) {
    case RB_MODE_ANY: {
        int hit = walk->joint_any(s->tree, p, tv, w, fast);
        if (!hit && !fast)
            hit = rb_shape_walk_any(s, tv, walk, w);
        if (!hit)
            hit = rb_shape_scan_any(&run->view, first, n, w);
        res->any[i] = (uint8_t)hit;
        break;
    }
    case RB_MODE_COUNT: {
        uint32_t c = walk->joint_count(s->tree, p, tv, w, fast);
        if (!fast)
            c += rb_shape_walk_count(s, tv, walk, w);
        res->counts[i] = c + rb_shape_scan_count(&run->view, first, n, w);
        break;
    }
    case RB_MODE_ALL: {
        rb_list_hit *list = res->list + i * run->max_hits;
        uint32_t stored = 0;
        uint32_t c = walk->joint_all(s->tree, p, tv, w, fast, list, &stored,
                                     run->max_hits);
        if (!fast)
            c += rb_shape_walk_all(s, tv, walk, w, list, &stored,
                                   run->max_hits);
        res->counts[i] = c + rb_shape_scan_all(&run->view, first, n, w, list,
                                               &stored, run->max_hits);
        break;
    }
    default:
        break;
    }
}

static void joint_ray(shape_run *run, size_t i)
{
    if (rb_check_rays(run->rays, 3, i, i + 1) != i + 1) {
        rb_atomic_lower(&run->bad, i);
        return;
    }
    rb_ray_raw w = raw_of(&run->rays[i]);
    rb_ray_prep p = rb_prep_raw(&w); /* rb_prep_rays' values */
    int fast = rb_shape_route(&w, run->set->cover) == RB_SHAPE_ROUTE_FAST;
    if (run->mode == RB_MODE_NEAREST)
        joint_nearest(run, i, &p, &w, fast);
    else
        joint_every(run, i, &p, &w, fast);
}

/* Ray i alone: every path of the pass. */
static void one_ray(shape_run *run, size_t i)
{
    if (run->joint) {
        joint_ray(run, i);
        return;
    }
    rb_ray_raw w = raw_of(&run->rays[i]);
    switch (run->mode) {
    case RB_MODE_PAIRS: {
        rb_hit *h = &run->res->hits[i];
        rb_u32 e = (rb_u32)(run->job->pair_first + i);
        rb_shape_full(&run->view, e, &w, h);
        h->box = h->hit ? (int32_t)e : -1;
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

/* Starts fetching what nearest_answer reads and writes for ray i with
 * best b after a stream: a winning box's slot, and the answer (in walk
 * order, both are scattered). */
static void fetch_answer(const shape_run *run, const rb_joint_best *b,
                         size_t i)
{
    if (b->slot != UINT32_MAX)
        rb_bvh_fetch_slot(run->set->tree, b->slot);
    __builtin_prefetch(&run->res->hits[i], 1);
}

/* `any`, `count` or `nearest` of rays [begin, end) of the run's order:
 * those the tree's widening covers walk it as one stream
 * (bvh_stream_avx2.c), then test the planes; the others (and all of them
 * if the stream cannot run) go one by one. Answers as one_ray's. */
static void stream_task(shape_run *run, unsigned worker, size_t begin,
                        size_t end)
{
    const rb_shapeset *set = run->set;
    rb_results *res = run->res;
    rb_stream_scratch w = {0};
    rb_streams_worker(&run->streams, worker, &w);
    uint32_t n = 0;
    size_t ahead_by = run->joint ? JOINT_PREFETCH : PREFETCH;
    for (size_t k = begin; k < end; k++) {
        size_t i = run->order ? run->order[k] : k;
        if (run->order && k + ahead_by < end) {
            /* In walk order, rays and the box pass's answers are
             * scattered: a sphere scene's nearest ran 1.18x faster with
             * the answers fetched ahead (`any`'s flags, a byte a ray,
             * gained nothing). */
            size_t ahead = run->order[k + ahead_by];
            __builtin_prefetch(&run->rays[ahead]);
            if (!run->joint && run->mode == RB_MODE_NEAREST)
                __builtin_prefetch(&res->hits[ahead]);
        }
        if (run->joint && rb_check_rays(run->rays, 3, i, i + 1) != i + 1) {
            rb_atomic_lower(&run->bad, i);
            continue;
        }
        if (!run->joint && run->mode == RB_MODE_ANY && res->any[i])
            continue; /* the box pass found a hit */
        rb_ray_raw raw = raw_of(&run->rays[i]);
        if (rb_shape_route(&raw, set->cover) != RB_SHAPE_ROUTE_FAST) {
            one_ray(run, i);
            continue;
        }
        w.raw[n] = raw;
        w.prep[n] = rb_prep_raw(&raw); /* rb_prep_rays' values */
        w.index[n] = (uint32_t)i;
        w.any[n] = 0;
        w.count[n] = 0;
        if (run->mode == RB_MODE_NEAREST) {
            /* a shape walk improves on the box pass's answer */
            const rb_hit *h = &res->hits[i];
            w.best[n] = run->joint || !h->hit
                            ? rb_joint_best_none()
                            : (rb_joint_best){h->t_enter, (uint32_t)h->box,
                                              UINT32_MAX, UINT32_MAX};
        }
        n++;
    }
    rb_bvh_stream st = {.tree = run->joint ? RB_TREE_JOINT : RB_TREE_SHAPES,
                        .prep = w.prep,
                        .raw = w.raw,
                        .view = &run->tree_view,
                        .n = n,
                        .any = w.any,
                        .count = w.count,
                        .best = w.best,
                        .shape_hits = w.shape_hits,
                        .arena = w.arena,
                        .words = w.words,
                        .stop = run->job->stop ? rb_job_stop_cb : NULL,
                        .stop_user = (void *)run->job};
    int rc = run->walk->stream(set->tree, &st, run->mode);
    if (rc == 1) {
        atomic_store(&run->stopped, 1);
        return;
    }
    rb_u32 first = first_scanned(run), all = (rb_u32)rb_shapeset_size(set);
    for (uint32_t q = 0; q < n; q++) {
        size_t i = w.index[q];
        if (rc != 0) {
            one_ray(run, i);
            continue;
        }
        if (run->mode == RB_MODE_ANY) {
            res->any[i] = w.any[q] || rb_shape_scan_any(&run->view, first,
                                                        all, &w.raw[q]);
            continue;
        }
        if (run->mode == RB_MODE_NEAREST) {
            if (q + PREFETCH < n)
                fetch_answer(run, &w.best[q + PREFETCH],
                             w.index[q + PREFETCH]);
            nearest_answer(run, i, &w.prep[q], &w.raw[q], &w.best[q],
                           &w.shape_hits[q]);
            continue;
        }
        uint32_t c = w.count[q] +
                     rb_shape_scan_count(&run->view, first, all, &w.raw[q]);
        if (run->joint)
            res->counts[i] = c;
        else
            res->counts[i] += c;
    }
}

static void shape_task(void *arg, size_t task, unsigned worker)
{
    shape_run *run = arg;
    if (atomic_load_explicit(&run->stopped, memory_order_relaxed))
        return;
    if (rb_job_stopped(run->job)) {
        atomic_store(&run->stopped, 1);
        return;
    }
    size_t begin, end;
    rb_pool_task_range(task, run->per_task, run->n_rays, &begin, &end);
    if (run->streams.mem) {
        stream_task(run, worker, begin, end);
        return;
    }
    for (size_t k = begin; k < end; k++) {
        size_t i = run->order ? run->order[k] : k;
        if (run->order && k + PREFETCH < end) {
            /* In walk order, rays and answers are scattered: fetch them a
             * few rays ahead (measured: the ray loads took ~14% of an
             * obb or sphere walk without). */
            size_t ahead = run->order[k + PREFETCH];
            __builtin_prefetch(&run->rays[ahead]);
            if (run->mode == RB_MODE_NEAREST)
                __builtin_prefetch(&run->res->hits[ahead], 1);
            else if (run->mode == RB_MODE_ANY)
                __builtin_prefetch(&run->res->any[ahead], 1);
            else
                __builtin_prefetch(&run->res->counts[ahead], 1);
        }
        one_ray(run, i);
    }
}

static int run_pass(rb_context *ctx, const rb_job *job,
                    const rb_shapeset *set, rb_results *res, int joint,
                    rb_bad_input *bad)
{
    rb_mode mode = job->mode;
    size_t n_rays = job->n_rays;
    shape_run run = {.mode = mode, .rays = job->rays, .n_rays = n_rays,
                     .set = set, .view = rb_shapeset_view(set),
                     .tree_view = rb_shapeset_tree_view(set),
                     .walk = rb_bvh_walk_pick(),
                     .max_hits = job->max_hits, .res = res, .job = job,
                     .joint = joint};
    atomic_init(&run.stopped, 0);
    atomic_init(&run.bad, UINT64_MAX);
    uint32_t *order = NULL;
    if (set->tree && set->tree->n_nodes && mode != RB_MODE_PAIRS &&
        n_rays >= RB_ORDER_MIN_RAYS) {
        size_t bytes = set->tree->n_nodes * sizeof(rb_bvh_node) +
                       set->n_obb * sizeof(rb_lbox) +
                       set->n_xbox * sizeof(rb_lbox) +
                       set->n_ball * sizeof(rb_ball);
        if (bytes >= RB_ORDER_MIN_BYTES ||
            ctx->walk_order == RB_WALK_ORDER_ALWAYS) {
            /* Without memory for the order, rays go in input order. */
            order = rb_alloc(ctx, n_rays * sizeof *order, 64);
            uint64_t *keys = rb_alloc(ctx, 2 * n_rays * sizeof *keys, 64);
            if (order && keys) {
                float lo[3], hi[3];
                rb_bvh_bounds(set->tree, lo, hi);
                int far = mode == RB_MODE_COUNT || mode == RB_MODE_ALL;
                rb_ray_order(ctx->pool, job->rays, 3, n_rays, lo, hi, far,
                             keys, order);
                run.order = order;
            }
            rb_free(ctx, keys);
        }
    }
    run.per_task = RAYS_PER_TASK;
    if (mode == RB_MODE_PAIRS) {
        /* Long runs of consecutive pairs a thread, as the box pairs
         * (cpu_backend.c): a quarter of a worker's share a task. */
        run.per_task = rb_pool_share_per_task(
            n_rays, rb_pool_size(ctx->pool), 1, RAYS_PER_TASK,
            PAIRS_PER_TASK_MAX);
    }
    unsigned workers = rb_pool_size(ctx->pool);
    size_t per = n_rays / ((size_t)workers * 8);
    if (set->tree && set->tree->n_nodes && run.walk->stream &&
        rb_bvh_streams_for(mode, per)) {
        size_t rays = rb_streams_take(&run.streams, &ctx->workmem, workers,
                                      per, set->tree->depth, 1);
        if (rays)
            run.per_task = rays;
    }
    size_t tasks = (n_rays + run.per_task - 1) / run.per_task;
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
    rb_free(ctx, order);
    rb_streams_give(&run.streams, &ctx->workmem);
    if (joint) /* it stands for the box pass, which counts its tasks */
        res->info.chunks = tasks;
    if (atomic_load(&run.stopped))
        return rb_fail(ctx, RB_ECANCELED, "the query was stopped");
    uint64_t first_bad = atomic_load(&run.bad);
    if (first_bad != UINT64_MAX) {
        bad->index = first_bad;
        bad->element = RB_ELEMENT_RAY;
        return RB_EINPUT;
    }
    return RB_OK;
}

int rb_shapes_run(rb_context *ctx, const rb_job *job, const rb_shapeset *set,
                  rb_results *res)
{
    rb_bad_input unused = {UINT64_MAX, RB_ELEMENT_NONE};
    return run_pass(ctx, job, set, res, 0, &unused);
}

int rb_joint_run(rb_context *ctx, const rb_job *job, const rb_shapeset *set,
                 rb_results *res, rb_bad_input *bad)
{
    return run_pass(ctx, job, set, res, 1, bad);
}
