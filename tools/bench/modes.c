/* modes.c - every mode at several sizes on one device, through the
 * library:
 *
 *   pairs                      ray i against box i, a ladder of batch sizes;
 *   nearest/any/count/all      against boxes sent with each query
 *                              ("inline", --boxes of them), a ladder of rays;
 *   the same four modes        against stored scenes of each named shape
 *                              (rb_scene_create, --scene-boxes), a ladder.
 *
 * Each size is timed end to end (rb_intersect's wall time: validation,
 * transfers, launches) and, on OpenCL, kernel only (the profiling events'
 * sum, rb_run_info.kernel_ms), from the same calls. Each figure comes as
 * rays/s, slab tests/s and the fraction of the device's bandwidth bound:
 * the least time moving the query's bytes could take (inputs read once,
 * answers written once) at the device's own copy bandwidth, plus for the
 * end-to-end path of a discrete device the host<->device transfers. A size
 * whose call is predicted (from the previous size) to exceed --max-call is
 * skipped with that reason, so slow devices and brute force stop early and
 * fast ones (or a hierarchy) go on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define EVERY_BOX_MODES 4

static const rb_mode every_box[EVERY_BOX_MODES] = {
    RB_MODE_NEAREST, RB_MODE_ANY, RB_MODE_COUNT, RB_MODE_ALL};

double rbench_answer_bytes(rb_mode mode, uint32_t max_hits)
{
    switch (mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST: return sizeof(rb_hit);
    case RB_MODE_ANY: return 1;
    case RB_MODE_COUNT: return 4;
    case RB_MODE_ALL: return 4 + (double)max_hits * sizeof(rb_list_hit);
    }
    return 0;
}

double rbench_query_bytes(rb_mode mode, size_t rays, size_t boxes,
                       uint32_t max_hits, int boxes_count)
{
    double b = (double)rays * (sizeof(rb_ray) + rbench_answer_bytes(mode,
                                                                 max_hits));
    if (boxes_count)
        b += (double)boxes * sizeof(rb_box);
    return b;
}

static int want(const rbench_options *o, rb_mode m)
{
    return (o->modes >> m) & 1;
}

size_t rbench_modes_steps(const rbench_options *o)
{
    size_t every = 0;
    for (int i = 0; i < EVERY_BOX_MODES; i++)
        every += (size_t)want(o, every_box[i]);
    size_t n = want(o, RB_MODE_PAIRS) ? o->n_pairs : 0;
    n += every * o->n_rays;
    if (every)
        n += o->n_shapes * (1 + every * o->n_scene_rays);
    return n;
}

/* ------------------------------------------------------------------------
 * One timed query.
 */
typedef struct query_arg {
    rb_context *ctx;
    const rbench_pool *pool;
    const rb_scene *scene;
    rb_mode mode;
    uint32_t max_hits;
    int is_cl;
    rb_results res;
    rb_run_info last;
    int status;
    char error[256];
} query_arg;

static int query_call(void *p, uint64_t call, double *device_s)
{
    query_arg *a = p;
    const rbench_pool *pool = a->pool;
    size_t k = call % pool->sets;
    rb_query q = {.mode = a->mode, .dims = 3,
                  .rays = pool->rays + k * pool->n_rays,
                  .n_rays = pool->n_rays, .scene = a->scene,
                  .max_hits = a->max_hits};
    if (pool->boxes) {
        q.boxes = pool->boxes + k * pool->n_boxes;
        q.n_boxes = pool->n_boxes;
    }
    int rc = rb_intersect(a->ctx, &q, &a->res);
    if (rc) {
        a->status = rc;
        snprintf(a->error, sizeof a->error, "%s: %.200s", rb_status_name(rc),
                 rb_context_error(a->ctx)->message);
        return rc;
    }
    if (a->res.info.fell_back) {
        a->status = RB_EDEVICE;
        snprintf(a->error, sizeof a->error, "fell back to the CPU: %.200s",
                 a->res.info.fallback_reason);
        return RB_EDEVICE;
    }
    if (a->is_cl)
        *device_s = a->res.info.kernel_ms * 1e-3;
    a->last = a->res.info;
    return 0;
}

static int results_alloc(rb_results *r, size_t rays, rb_mode mode,
                         uint32_t max_hits)
{
    memset(r, 0, sizeof *r);
    r->capacity = rays;
    switch (mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        r->hits = aligned_alloc(4096, (rays * sizeof(rb_hit) + 4095) / 4096 *
                                          4096);
        return r->hits ? 0 : -1;
    case RB_MODE_ANY:
        r->any = aligned_alloc(4096, (rays + 4095) / 4096 * 4096);
        return r->any ? 0 : -1;
    case RB_MODE_COUNT:
    case RB_MODE_ALL:
        r->counts = aligned_alloc(4096, (rays * 4 + 4095) / 4096 * 4096);
        if (mode == RB_MODE_ALL)
            r->list = malloc(rays * max_hits * sizeof(rb_list_hit));
        return r->counts && (mode != RB_MODE_ALL || r->list) ? 0 : -1;
    }
    return -1;
}

static void results_free(rb_results *r)
{
    free(r->hits);
    free(r->any);
    free(r->counts);
    free(r->list);
}

/* Half the machine's memory: what one test's data may take. */
static double memory_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? 0.5 * (double)pages * (double)size : 4e9;
}

/* ------------------------------------------------------------------------
 * One ladder: a mode on one kind of boxes at increasing ray counts.
 */
typedef struct ladder {
    rbench_device *d;
    rb_mode mode;
    const char *category;    /* "modes" or "scenes" */
    const char *shape_name;  /* "inline" or the scene's shape */
    const rbench_shape *shape;  /* scenes */
    const rb_scene *scene;
    size_t boxes;            /* boxes per query (pairs: = rays) */
    double prev_s, prev_tests; /* the last size that ran */
} ladder;

static void where_of(const ladder *l, size_t rays, char *size, size_t len,
                     rbench_where *w)
{
    *w = l->d->where;
    w->category = l->category;
    w->test = rb_mode_name(l->mode);
    w->shape = l->shape_name;
    w->rays = rays;
    w->boxes = l->mode == RB_MODE_PAIRS ? rays : l->boxes;
    if (l->mode == RB_MODE_PAIRS)
        snprintf(size, len, "%zu", rays);
    else
        snprintf(size, len, "%zux%zu", rays, l->boxes);
    w->size = size;
}

static void skip_paths(const ladder *l, rbench_where *w, const char *status,
                       const char *why)
{
    w->path = "e2e";
    rbench_add_status(l->d->rows, w, "rays_per_s", status, why);
    if (l->d->is_cl) {
        w->path = "kernel";
        rbench_add_status(l->d->rows, w, "rays_per_s", status, why);
    }
}

/* rays/s, tests/s and the fraction of the bound for one path; times are
 * seconds per call (median, fastest, slowest). */
static void figures(const ladder *l, rbench_where *w, const char *path,
                    double rays, double tests, double bound_s, double med,
                    double fast, double slow, int repeats)
{
    rbench_rows *rows = l->d->rows;
    w->path = path;
    rbench_add(rows, w, "rays_per_s", "rays/s", rays / med, rays / slow,
            rays / fast, repeats);
    rbench_add(rows, w, "tests_per_s", "tests/s", tests / med, tests / slow,
            tests / fast, repeats);
    if (bound_s > 0)
        rbench_add(rows, w, "fraction_of_bound", "", bound_s / med,
                bound_s / slow, bound_s / fast, repeats);
}

static void run_size(ladder *l, size_t rays)
{
    rbench_device *d = l->d;
    const rbench_options *o = d->o;
    size_t boxes = l->mode == RB_MODE_PAIRS ? rays : l->boxes;
    char size[48], what[256];
    rbench_where w;
    where_of(l, rays, size, sizeof size, &w);
    snprintf(what, sizeof what, "%s %.40s %s %s %s", w.backend, w.device,
             w.test, l->shape_name, size);
    rbench_progress(what);

    double tests_est = l->mode == RB_MODE_PAIRS ? (double)rays
                                                : (double)rays * boxes;
    if (l->prev_s > 0) {
        double predicted = l->prev_s * tests_est / l->prev_tests;
        if (predicted > o->max_call_s) {
            char why[160];
            snprintf(why, sizeof why, "predicted %.2g s per call (from the "
                                      "previous size) is over --max-call "
                                      "%.2g s", predicted, o->max_call_s);
            skip_paths(l, &w, "skipped", why);
            return;
        }
    }
    rbench_pool_kind kind = l->mode == RB_MODE_PAIRS ? RBENCH_POOL_PAIRS
                         : l->scene               ? RBENCH_POOL_SCENE
                                                  : RBENCH_POOL_INLINE;
    double need = rbench_pool_bytes(kind, rays, boxes) +
                  (double)rays * rbench_answer_bytes(l->mode, o->max_hits);
    if (need > memory_limit()) {
        char why[160];
        snprintf(why, sizeof why, "needs %.1f GiB of host memory, over half "
                                  "of this machine's", need / 1073741824.0);
        skip_paths(l, &w, "skipped", why);
        return;
    }
    rbench_pool pool;
    query_arg a = {.ctx = l->scene ? d->scene_ctx : d->ctx,
                   .pool = &pool, .scene = l->scene,
                   .mode = l->mode, .max_hits = o->max_hits,
                   .is_cl = d->is_cl};
    if (rbench_pool_make(&pool, kind, l->shape, rays, boxes,
                      (uint64_t)l->mode * 100 + 1) ||
        results_alloc(&a.res, rays, l->mode, o->max_hits)) {
        rbench_pool_free(&pool);
        results_free(&a.res);
        skip_paths(l, &w, "skipped", "out of host memory for the data");
        return;
    }
    rbench_timing t;
    if (rbench_time(&o->plan, query_call, &a, &t)) {
        /* Running out of memory on a device is a limit, not a fault. */
        int limit = a.status == RB_EDEVMEM || a.status == RB_ENOMEM ||
                    a.status == RB_ELIMIT;
        skip_paths(l, &w, limit ? "skipped" : "failed", a.error);
    } else {
        double tests = a.last.slab_tests ? (double)a.last.slab_tests
                                         : tests_est;
        /* The bound: every input byte read and every answer written once
         * at the device's copy bandwidth; a discrete device must also move
         * the rays (and boxes sent with the query) in and answers out. */
        double bytes = rbench_query_bytes(l->mode, rays, boxes, o->max_hits, 1);
        double kernel_bound = d->copy_Bps > 0 ? bytes / d->copy_Bps : 0;
        double e2e_bound = kernel_bound;
        if (d->is_cl && !d->host_unified && d->h2d_Bps > 0 &&
            d->d2h_Bps > 0) {
            double in = rbench_query_bytes(l->mode, rays, boxes, o->max_hits,
                                        !l->scene) -
                        (double)rays * rbench_answer_bytes(l->mode, o->max_hits);
            double out = (double)rays * rbench_answer_bytes(l->mode,
                                                         o->max_hits);
            double xfer = in / d->h2d_Bps + out / d->d2h_Bps;
            if (xfer > e2e_bound)
                e2e_bound = xfer;
        }
        figures(l, &w, "e2e", (double)rays, tests, e2e_bound, t.median,
                t.min, t.max, t.repeats);
        if (d->is_cl && t.has_device && t.dev_median > 0)
            figures(l, &w, "kernel", (double)rays, tests, kernel_bound,
                    t.dev_median, t.dev_min, t.dev_max, t.repeats);
        else if (d->is_cl) {
            w.path = "kernel";
            rbench_add_status(d->rows, &w, "rays_per_s", "skipped",
                           "the device reported no profiling times");
        }
        l->prev_s = t.median;
        l->prev_tests = tests_est;
    }
    results_free(&a.res);
    rbench_pool_free(&pool);
}

static void run_ladder(ladder *l, const size_t *sizes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        run_size(l, sizes[i]);
}

/* ------------------------------------------------------------------------
 * Scenes: built once per shape and device, then queried; the build is a
 * figure too (it includes the hierarchy once there is one).
 */
typedef struct build_arg {
    rb_context *ctx;
    const rb_box *boxes;
    size_t n;
} build_arg;

static int build_call(void *p, uint64_t call, double *device_s)
{
    build_arg *a = p;
    (void)call;
    (void)device_s;
    rb_scene *s = NULL;
    int rc = rb_scene_create(a->ctx, 3, a->boxes, a->n, &s);
    rb_scene_destroy(s);
    return rc;
}

static void run_shape(rbench_device *d, const rbench_shape *shape, int every)
{
    const rbench_options *o = d->o;
    size_t n = o->scene_boxes;
    char size[48], what[160];
    snprintf(size, sizeof size, "%zu boxes", n);
    rbench_where w = d->where;
    w.category = "scenes";
    w.test = "scene_create";
    w.shape = shape->name;
    w.path = "e2e";
    w.boxes = n;
    w.size = size;
    snprintf(what, sizeof what, "%s scene %s (%zu boxes)", w.backend,
             shape->name, n);
    rbench_progress(what);
    rb_box *boxes = malloc((n ? n : 1) * sizeof *boxes);
    rb_scene *scene = NULL;
    if (!boxes) {
        rbench_add_status(d->rows, &w, "build_ms", "skipped",
                       "out of host memory for the scene");
        rbench_progress_skip((size_t)every * o->n_scene_rays);
        return;
    }
    shape->boxes(7, boxes, n);
    build_arg b = {d->ctx, boxes, n};
    rbench_timing t;
    int rc = rbench_time(&o->plan, build_call, &b, &t);
    if (rc == 0)
        rc = rb_scene_create(d->ctx, 3, boxes, n, &scene);
    if (rc) {
        char why[300];
        snprintf(why, sizeof why, "rb_scene_create: %s: %.200s",
                 rb_status_name(rc), rb_context_error(d->ctx)->message);
        rbench_add_status(d->rows, &w, "build_ms", "failed", why);
        rbench_progress_skip((size_t)every * o->n_scene_rays);
        free(boxes);
        return;
    }
    rbench_add(d->rows, &w, "build_ms", "ms", t.median * 1e3, t.min * 1e3,
            t.max * 1e3, t.repeats);
    for (int i = 0; i < EVERY_BOX_MODES; i++) {
        if (!want(o, every_box[i]))
            continue;
        ladder l = {.d = d, .mode = every_box[i], .category = "scenes",
                    .shape_name = shape->name, .shape = shape,
                    .scene = scene, .boxes = n};
        run_ladder(&l, o->scene_rays, o->n_scene_rays);
    }
    rb_scene_destroy(scene);
    free(boxes);
}

void rbench_run_modes(rbench_device *d)
{
    const rbench_options *o = d->o;
    if (!d->is_cl) {
        rbench_where w = d->where;
        w.category = "modes";
        w.test = "every mode";
        w.path = "kernel";
        rbench_add_status(d->rows, &w, "rays_per_s", "skipped",
                       "the native CPU backend has no separate kernel "
                       "time: its e2e time is the computation");
    }
    if (want(o, RB_MODE_PAIRS)) {
        ladder l = {.d = d, .mode = RB_MODE_PAIRS, .category = "modes",
                    .shape_name = "inline"};
        run_ladder(&l, o->pairs, o->n_pairs);
    }
    int every = 0;
    for (int i = 0; i < EVERY_BOX_MODES; i++) {
        if (!want(o, every_box[i]))
            continue;
        every++;
        ladder l = {.d = d, .mode = every_box[i], .category = "modes",
                    .shape_name = "inline", .boxes = o->boxes};
        run_ladder(&l, o->rays, o->n_rays);
    }
    if (!every)
        return;
    for (size_t s = 0; s < o->n_shapes; s++)
        run_shape(d, rbench_shape_find(o->shapes[s]), every);
}
