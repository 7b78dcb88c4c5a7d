/*
 * query.c - rb_intersect: checks the query's shape, prepares the boxes of
 * every-box modes, runs the active backend and, when an OpenCL launch
 * fails, the CPU backend (R8 makes their answers identical).
 */
#include <string.h>

#include "bvh/bvh.h"
#include "internal.h"

/* Inline boxes go through a transient hierarchy when building it and
 * walking it costs less than testing every ray against every box. Measured
 * on the 2-core development machine (CPU backend, 2 threads, random boxes
 * in a cube and random rays from inside it, nearest and count modes, 16
 * to 65536 boxes x 16 to 100000 rays): brute force costs ~0.3 ns per
 * ray-box test; the hierarchy ~450 ns per box to build plus ~250 ns per
 * ray to walk. So it pays when R * (0.3 B - 250) > 450 B: never below
 * ~1000 boxes, from ~7000 rays at 1K boxes and from ~1500 rays at 4K to
 * 64K boxes (measured crossovers: 1K boxes between 1000 and 10000 rays,
 * brute 3.4 ms vs 2.1 ms at 10000; 64K boxes x 10000 rays: 163 ms vs 32
 * ms). Both sides scale with the processor, so the ratio travels. */
#define BRUTE_NS_PER_TEST 0.3
#define BUILD_NS_PER_BOX 450.0
#define WALK_NS_PER_RAY 250.0

/* A scene's own hierarchy is already built, but for a few boxes testing
 * them all is still faster than a walk. Measured the same way (scenes of
 * 4 to 1024 boxes, 100000 rays): 16 boxes 8 ms brute vs 11 ms walk
 * (nearest), the two even between 256 and 512 boxes, 1024 boxes 80 ms vs
 * 40 ms. */
#define SCENE_MIN_BOXES 256

static const rb_bvh *scene_bvh(const rb_context *ctx, const rb_scene *s)
{
    const rb_bvh *bvh = rb_scene_bvh(s);
    if (!bvh || ctx->bvh_use == RB_BVH_USE_OFF)
        return NULL;
    if (ctx->bvh_use == RB_BVH_USE_AUTO && bvh->n_boxes < SCENE_MIN_BOXES)
        return NULL;
    return bvh;
}

static int transient_pays(const rb_context *ctx, size_t n_rays,
                          size_t n_boxes)
{
    if (ctx->bvh_use == RB_BVH_USE_OFF || !ctx->active->ops->bvh ||
        n_boxes == 0)
        return 0;
    if (ctx->bvh_use == RB_BVH_USE_ALWAYS)
        return 1;
    double saved = BRUTE_NS_PER_TEST * (double)n_boxes - WALK_NS_PER_RAY;
    return (double)n_rays * saved > BUILD_NS_PER_BOX * (double)n_boxes;
}

/* The context's transient hierarchy rebuilt over its scratch boxes, or
 * NULL when memory is short (brute force then answers the same). */
static const rb_bvh *transient_bvh(rb_context *ctx)
{
    if (!ctx->scratch_bvh) {
        ctx->scratch_bvh = rb_calloc(ctx, sizeof *ctx->scratch_bvh, 16);
        if (!ctx->scratch_bvh)
            return NULL;
    }
    if (rb_bvh_build(ctx->pool, &ctx->alloc, &ctx->scratch_boxes,
                     ctx->scratch_bvh) != RB_OK)
        return NULL;
    return ctx->scratch_bvh;
}

static int check_query(rb_context *ctx, const rb_query *q,
                       const rb_results *r)
{
    if (!rb_mode_name(q->mode))
        return rb_fail(ctx, RB_EINVAL, "unknown mode %d", (int)q->mode);
    if (q->dims != 2 && q->dims != 3)
        return rb_fail(ctx, RB_EINVAL, "dims must be 2 or 3, not %u",
                       q->dims);
    if (q->n_rays > INT32_MAX)
        return rb_fail(ctx, RB_EINVAL, "%zu rays: at most %d per query",
                       q->n_rays, INT32_MAX);
    if (q->n_rays && !q->rays)
        return rb_fail(ctx, RB_EINVAL, "rays is NULL");
    if (r->capacity < q->n_rays)
        return rb_fail(ctx, RB_EINVAL,
                       "results hold %zu rays, the query has %zu",
                       r->capacity, q->n_rays);
    if (q->mode == RB_MODE_PAIRS) {
        if (q->scene)
            return rb_fail(ctx, RB_EINVAL, "pairs mode takes boxes, not a "
                                           "scene");
        if (q->n_boxes != q->n_rays)
            return rb_fail(ctx, RB_EINVAL,
                           "pairs mode needs as many boxes as rays "
                           "(%zu rays, %zu boxes)",
                           q->n_rays, q->n_boxes);
    } else if (q->scene) {
        if (rb_scene_dims(q->scene) != q->dims)
            return rb_fail(ctx, RB_EINVAL,
                           "the scene has %u dims, the query %u",
                           rb_scene_dims(q->scene), q->dims);
    } else if (q->n_boxes > INT32_MAX) {
        return rb_fail(ctx, RB_EINVAL, "%zu boxes: at most %d per query",
                       q->n_boxes, INT32_MAX);
    }
    if (!q->scene && q->n_boxes && !q->boxes)
        return rb_fail(ctx, RB_EINVAL, "boxes is NULL");

    int missing = 0;
    switch (q->mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        missing = !r->hits;
        break;
    case RB_MODE_ANY:
        missing = !r->any;
        break;
    case RB_MODE_COUNT:
        missing = !r->counts;
        break;
    case RB_MODE_ALL:
        if (q->max_hits == 0)
            return rb_fail(ctx, RB_EINVAL, "all mode needs max_hits >= 1");
        if (q->n_rays && q->max_hits > SIZE_MAX / sizeof(rb_list_hit) /
                                           q->n_rays)
            return rb_fail(ctx, RB_EINVAL, "n_rays * max_hits overflows");
        missing = !r->counts || !r->list;
        break;
    }
    if (missing && q->n_rays)
        return rb_fail(ctx, RB_EINVAL, "the output array for %s mode is "
                                       "NULL",
                       rb_mode_name(q->mode));
    return RB_OK;
}

static int is_device_failure(int rc)
{
    return rc == RB_EDEVICE || rc == RB_EDEVMEM || rc == RB_EBUILD;
}

int rb_intersect(rb_context *ctx, const rb_query *q, rb_results *r)
{
    if (!ctx)
        return RB_EINVAL;
    rb_clear_error(ctx);
    if (!q || !r)
        return rb_fail(ctx, RB_EINVAL, "query or results is NULL");
    double t0 = rb_now_ms();
    memset(&r->info, 0, sizeof r->info);
    int rc = check_query(ctx, q, r);
    if (rc)
        return rc;

    rb_job job = {
        .mode = q->mode,
        .dims = q->dims,
        .rays = q->rays,
        .n_rays = q->n_rays,
        .max_hits = q->max_hits,
    };
    size_t n_boxes;
    if (q->mode == RB_MODE_PAIRS) {
        job.pair_boxes = q->boxes;
        n_boxes = 1;
    } else if (q->scene) {
        job.boxes = rb_scene_boxset(q->scene);
        n_boxes = job.boxes->n;
        job.bvh = scene_bvh(ctx, q->scene);
    } else {
        /* Boxes are checked before any ray: a bad box fails every ray. */
        rc = rb_boxset_build(ctx, &ctx->scratch_boxes, &ctx->scratch_cap,
                             q->boxes, q->dims, q->n_boxes);
        if (rc)
            return rc;
        job.boxes = &ctx->scratch_boxes;
        n_boxes = q->n_boxes;
        if (transient_pays(ctx, q->n_rays, q->n_boxes))
            job.bvh = transient_bvh(ctx);
    }

    rb_backend *b = ctx->active;
    rb_bad_input bad = {UINT64_MAX, RB_ELEMENT_NONE};
    rc = b->ops->run(b, ctx, &job, r, &bad);
    if (is_device_failure(rc) && b != ctx->cpu && ctx->opt.cpu_fallback) {
        char reason[sizeof r->info.fallback_reason];
        rb_copy_str(reason, sizeof reason, ctx->err.message);
        rb_clear_error(ctx);
        bad.index = UINT64_MAX;
        b = ctx->cpu;
        rc = b->ops->run(b, ctx, &job, r, &bad);
        r->info.fell_back = 1;
        rb_copy_str(r->info.fallback_reason, sizeof r->info.fallback_reason,
                    reason);
    }
    if (rc == RB_EINPUT)
        return rb_report_bad_input(ctx, q->dims, q->rays, q->boxes, &bad);
    if (rc)
        return rc;
    rb_copy_str(r->info.backend, sizeof r->info.backend, b->ops->name);
    r->info.slab_tests = (uint64_t)q->n_rays * n_boxes;
    r->info.elapsed_ms = rb_now_ms() - t0;
    return RB_OK;
}

void rb_intersect_one(const rb_ray *ray, const rb_box *box, rb_hit *out)
{
    rb_ray_prep p;
    float lo[3], hi[3];
    rb_prep_ray3(ray, &p);
    rb_box_corners(box, 3, 0, lo, hi);
    rb_slab_full(&p, lo, hi, out);
    out->box = out->hit ? 0 : -1;
}
