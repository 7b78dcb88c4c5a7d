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

const rb_bvh *rb_query_scene_bvh(const rb_context *ctx, const rb_scene *s)
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
    if (rb_bvh_build(ctx->pool, &ctx->alloc, &ctx->workmem,
                     &ctx->scratch_boxes, ctx->bvh_build,
                     ctx->scratch_bvh) != RB_OK)
        return NULL;
    return ctx->scratch_bvh;
}

/* The shapes of a query: 3D, no scene beside them, arrays present, and
 * for pairs exactly one kind (boxes included) as long as the rays. */
static int check_shapes(rb_context *ctx, const rb_query *q)
{
    const rb_shapes *sh = &q->shapes;
    size_t n = rb_shapes_count(sh);
    if ((sh->n_obbs && !sh->obbs) || (sh->n_xboxes && !sh->xboxes) ||
        (sh->n_spheres && !sh->spheres) || (sh->n_planes && !sh->planes))
        return rb_fail(ctx, RB_EINVAL, "a shape array is NULL");
    if (!n)
        return RB_OK;
    if (q->dims != 3)
        return rb_fail(ctx, RB_EINVAL, "shapes other than boxes are 3D "
                                       "only");
    if (q->scene)
        return rb_fail(ctx, RB_EINVAL, "a query on a scene takes no shapes "
                                       "of its own");
    if ((uint64_t)q->n_boxes + n > INT32_MAX)
        return rb_fail(ctx, RB_EINVAL, "%zu elements: at most %d per query",
                       q->n_boxes + n, INT32_MAX);
    if (q->mode == RB_MODE_PAIRS) {
        size_t sizes[] = {q->n_boxes, sh->n_obbs, sh->n_xboxes,
                          sh->n_spheres, sh->n_planes};
        int kinds = 0;
        for (int k = 0; k < RB_KIND_COUNT; k++)
            kinds += sizes[k] != 0;
        if (kinds != 1 || n != q->n_rays)
            return rb_fail(ctx, RB_EINVAL,
                           "pairs mode needs exactly one kind of element, as "
                           "many as rays (%zu rays)",
                           q->n_rays);
    }
    return RB_OK;
}

/* The same question for the bounded shapes of a query (obbs, xboxes,
 * spheres): a test costs ~10 ns against a box's ~0.3, a build ~600 ns a
 * shape (bounds and tree), a walk ~400 ns a ray (raybox-bench shapes,
 * 2-core development machine). */
#define SHAPE_NS_PER_TEST 10.0
#define SHAPE_BUILD_NS 600.0
#define SHAPE_WALK_NS 400.0

static int shape_tree_pays(const rb_context *ctx, size_t n_rays,
                           size_t n_bounded)
{
    if (ctx->bvh_use == RB_BVH_USE_OFF || n_bounded == 0)
        return 0;
    if (ctx->bvh_use == RB_BVH_USE_ALWAYS)
        return 1;
    double saved = SHAPE_NS_PER_TEST * (double)n_bounded - SHAPE_WALK_NS;
    return (double)n_rays * saved > SHAPE_BUILD_NS * (double)n_bounded;
}

/* A scene's shape hierarchy is built with the scene; a walk pays over
 * testing every bounded shape from ~40 of them (SHAPE_WALK_NS against
 * SHAPE_NS_PER_TEST a shape). */
#define SCENE_MIN_SHAPES 64

/* The shapes a query on a scene tests: the scene's, walked through their
 * hierarchy (on the CPU or, where the backend runs the shape pass itself,
 * on its device) or (in *view, without it) one by one, as for inline
 * shapes. NULL: none. */
static const rb_shapeset *scene_shapes(const rb_context *ctx,
                                       const rb_scene *scene,
                                       rb_shapeset *view)
{
    const rb_shapeset *s = rb_scene_shapeset(scene);
    if (!s)
        return NULL;
    size_t bounded = s->n_obb + s->n_xbox + s->n_ball;
    int walk = ctx->bvh_use == RB_BVH_USE_ALWAYS ||
               (ctx->bvh_use == RB_BVH_USE_AUTO &&
                bounded >= SCENE_MIN_SHAPES);
    if (!s->tree || walk)
        return s;
    *view = *s;
    view->tree = NULL;
    return view;
}

/* The box pass answers by box index; a scene whose boxes are not ids
 * 0..n-1 (shapes came before some of them) gets its ids here, before the
 * shape pass combines by (t_enter, id). Box ids ascend with the index, so
 * the lists stay sorted. */
static void map_box_ids(const rb_query *q, rb_results *r)
{
    const uint32_t *ids = q->scene ? rb_scene_box_ids(q->scene) : NULL;
    if (!ids)
        return;
    if (q->mode == RB_MODE_NEAREST) {
        for (size_t i = 0; i < q->n_rays; i++)
            if (r->hits[i].hit)
                r->hits[i].box = (int32_t)ids[r->hits[i].box];
    } else if (q->mode == RB_MODE_ALL) {
        for (size_t i = 0; i < q->n_rays; i++) {
            rb_list_hit *l = r->list + i * (size_t)q->max_hits;
            uint32_t n = r->counts[i] < q->max_hits ? r->counts[i]
                                                    : q->max_hits;
            for (uint32_t e = 0; e < n; e++)
                l[e].box = (int32_t)ids[l[e].box];
        }
    }
}

static int check_query(rb_context *ctx, const rb_query *q,
                       const rb_results *r)
{
    int rc;
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
        if (q->n_boxes != q->n_rays && !rb_shapes_count(&q->shapes))
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
    rc = check_shapes(ctx, q);
    if (rc)
        return rc;
    if (q->outputs & ~RB_OUTPUT_NORMAL)
        return rb_fail(ctx, RB_EINVAL, "unknown outputs 0x%x", q->outputs);
    if ((q->outputs & RB_OUTPUT_NORMAL) && !r->normals && q->n_rays &&
        (q->mode == RB_MODE_NEAREST || q->mode == RB_MODE_PAIRS))
        return rb_fail(ctx, RB_EINVAL, "normals asked for, but the normals "
                                       "array is NULL");

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

/* A device failure that the CPU now answers for (fallback is on): its
 * message becomes the answer's fallback reason, and the error is cleared
 * for the CPU's run. */
static void fall_back(rb_context *ctx, rb_results *r)
{
    r->info.fell_back = 1;
    rb_copy_str(r->info.fallback_reason, sizeof r->info.fallback_reason,
                ctx->err.message);
    rb_clear_error(ctx);
}

/* The box pass on the active backend, and on the CPU when an OpenCL
 * launch fails and fallback is on. */
static int run_boxes(rb_context *ctx, const rb_job *job, rb_results *r,
                     rb_bad_input *bad)
{
    rb_backend *b = ctx->active;
    int rc = b->ops->run(b, ctx, job, r, bad);
    if (is_device_failure(rc) && b != ctx->cpu && ctx->opt.cpu_fallback) {
        fall_back(ctx, r);
        bad->index = UINT64_MAX;
        b = ctx->cpu;
        rc = b->ops->run(b, ctx, job, r, bad);
    }
    /* Named whether it answered or refused (a bad ray, a device error),
     * as the joint run and shape pairs name theirs. */
    rb_copy_str(r->info.backend, sizeof r->info.backend, b->ops->name);
    return rc;
}

/* The shape pass on backend b (the CPU's when b has none; OpenCL's walks
 * set->tree where there is one, cl_shapes.c). When the device fails and
 * fallback is on, both passes run again on the CPU: the failed pass may
 * have combined part of the answers already. */
static int run_shapes(rb_context *ctx, rb_backend *b, const rb_query *q,
                      const rb_job *job, const rb_shapeset *set,
                      int shape_pairs, rb_bad_input *bad, rb_results *r)
{
    if (!b->ops->run_shapes)
        return rb_shapes_run(ctx, job, set, r);
    int rc = b->ops->run_shapes(b, ctx, job, set, r);
    if (!is_device_failure(rc) || !ctx->opt.cpu_fallback)
        return rc;
    fall_back(ctx, r);
    rc = shape_pairs ? RB_OK : ctx->cpu->ops->run(ctx->cpu, ctx, job, r, bad);
    if (!rc && !shape_pairs)
        map_box_ids(q, r);
    if (!rc)
        rc = rb_shapes_run(ctx, job, set, r);
    rb_copy_str(r->info.backend, sizeof r->info.backend, "cpu");
    return rc;
}

/* Both passes in one walk of the joint tree of `set` (rb_joint_run's
 * contract): on the CPU, or on the active backend, which may decline
 * (RB_JOINT_DECLINED: the two passes run instead) or fail, and then the
 * CPU answers when fallback is on. */
static int run_joint(rb_context *ctx, const rb_job *job,
                     const rb_shapeset *set, rb_results *r,
                     rb_bad_input *bad)
{
    rb_backend *b = ctx->active;
    int rc;
    if (b == ctx->cpu) {
        rc = rb_joint_run(ctx, job, set, r, bad);
    } else {
        rc = b->ops->run_joint(b, ctx, job, set, r, bad);
        if (rc == RB_JOINT_DECLINED)
            return rc;
        if (is_device_failure(rc) && ctx->opt.cpu_fallback) {
            fall_back(ctx, r);
            bad->index = UINT64_MAX;
            b = ctx->cpu;
            rc = rb_joint_run(ctx, job, set, r, bad);
        }
    }
    rb_backend_info info = {0};
    b->ops->describe(b, &info);
    rb_copy_str(r->info.backend, sizeof r->info.backend, info.backend);
    rb_copy_str(r->info.device, sizeof r->info.device, info.device);
    return rc;
}

/* kinds and normals of nearest and pairs answers. Inline elements: ids
 * below n_boxes are boxes, the rest shape j = id - n_boxes (pairs: the
 * ray's own element of the one kind). A scene: its id lookup says. */
static void answer_kinds(const rb_query *q, const rb_shapeset *set,
                         size_t n_boxes, rb_results *r)
{
    int normals = (q->outputs & RB_OUTPUT_NORMAL) != 0;
    int shape_pairs = q->mode == RB_MODE_PAIRS && !q->n_boxes;
    for (size_t i = 0; i < q->n_rays; i++) {
        const rb_hit *h = &r->hits[i];
        int is_box;
        size_t j = 0;
        if (shape_pairs) {
            is_box = 0;
            j = i;
        } else if (q->scene) {
            is_box = h->hit &&
                     !rb_scene_shape_index(q->scene, (uint32_t)h->box, &j);
        } else {
            is_box = h->hit && (size_t)h->box < n_boxes;
            j = (size_t)h->box - n_boxes;
        }
        if (r->kinds)
            r->kinds[i] = !h->hit ? RB_KIND_NONE
                          : is_box ? RB_KIND_BOX
                                   : (uint8_t)rb_shapeset_kind(set, j);
        if (!normals)
            continue;
        float *n = r->normals + 3 * i;
        if (!h->hit || is_box) {
            rb_box_normal(h, n);
        } else {
            const rb_ray *ray = (const rb_ray *)q->rays + i;
            rb_ray_raw w = rb_raw_ray(ray->origin[0], ray->origin[1],
                                      ray->origin[2], ray->dir[0],
                                      ray->dir[1], ray->dir[2], ray->tmin,
                                      ray->tmax);
            rb_shape_normal(set, j, &w, h, n);
        }
    }
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
        .stop = q->stop,
        .stop_user = q->stop_user,
    };
    size_t n_inline = rb_shapes_count(&q->shapes);
    int shape_pairs = q->mode == RB_MODE_PAIRS && n_inline;
    size_t n_boxes;
    if (q->mode == RB_MODE_PAIRS) {
        job.pair_boxes = q->boxes;
        n_boxes = 1;
    } else if (q->scene) {
        job.boxes = rb_scene_boxset(q->scene);
        n_boxes = job.boxes->n;
        job.bvh = rb_query_scene_bvh(ctx, q->scene);
    } else {
        /* Elements are checked before any ray: a bad one fails every ray.
         * Boxes first, then the other kinds in id order. */
        rc = rb_boxset_build(ctx, &ctx->scratch_boxes, &ctx->scratch_cap,
                             q->boxes, q->dims, q->n_boxes);
        if (rc)
            return rc;
        job.boxes = &ctx->scratch_boxes;
        n_boxes = q->n_boxes;
    }
    rb_shapeset set = {0}, view;
    const rb_shapeset *shapes = NULL;
    /* Whether the backend walks joint trees (one walk for boxes and
     * shapes; a device may still decline one). */
    int joint_walks = ctx->active == ctx->cpu || ctx->active->ops->run_joint;
    if (n_inline) {
        rc = rb_shapeset_build(ctx, &set, &q->shapes,
                               shape_pairs ? 0 : (uint32_t)q->n_boxes);
        if (rc)
            return rc;
        /* Without memory for it, every shape is tested: same answers.
         * The tree takes the boxes too (a joint tree: one walk for both)
         * where the backend walks joint trees. */
        if (!shape_pairs &&
            shape_tree_pays(ctx, q->n_rays, rb_shapeset_bounded(&set)))
            rb_shape_tree_build(ctx, &set, joint_walks ? job.boxes : NULL,
                                NULL);
        rb_clear_error(ctx);
        shapes = &set;
    } else if (q->scene) {
        shapes = scene_shapes(ctx, q->scene, &view);
    }
    size_t n_shapes = shapes ? rb_shapeset_size(shapes) : 0;
    /* One walk for boxes and shapes over a joint tree, where the backend
     * walks them; the box pass and the shape pass when it declines. */
    int joint = !shape_pairs && q->mode != RB_MODE_PAIRS && shapes &&
                shapes->tree && shapes->n_tree_boxes &&
                shapes->n_tree_boxes == job.boxes->n && joint_walks;

    rb_bad_input bad = {UINT64_MAX, RB_ELEMENT_NONE};
    rb_backend *shape_backend = ctx->active;
    if (joint) {
        rc = run_joint(ctx, &job, shapes, r, &bad);
        if (rc == RB_JOINT_DECLINED) {
            joint = 0;
            rc = RB_OK;
        }
    }
    if (!q->scene && q->mode != RB_MODE_PAIRS && !joint &&
        transient_pays(ctx, q->n_rays, q->n_boxes))
        job.bvh = transient_bvh(ctx);
    if (shape_pairs) {
        size_t first_bad = rb_check_rays(q->rays, 3, 0, q->n_rays);
        if (first_bad < q->n_rays) {
            bad.index = first_bad;
            bad.element = RB_ELEMENT_RAY;
            rc = RB_EINPUT;
        }
        rb_backend_info info = {0};
        shape_backend->ops->describe(shape_backend, &info);
        rb_copy_str(r->info.backend, sizeof r->info.backend, info.backend);
        rb_copy_str(r->info.device, sizeof r->info.device, info.device);
    } else if (!joint) {
        rc = run_boxes(ctx, &job, r, &bad);
        if (r->info.fell_back)
            shape_backend = ctx->cpu;
        if (!rc)
            map_box_ids(q, r);
    }
    if (!rc && n_shapes && !joint)
        rc = run_shapes(ctx, shape_backend, q, &job, shapes, shape_pairs,
                        &bad, r);
    if (!rc && (q->mode == RB_MODE_NEAREST || q->mode == RB_MODE_PAIRS) &&
        (r->kinds || (q->outputs & RB_OUTPUT_NORMAL)))
        answer_kinds(q, shapes ? shapes : &set,
                     q->mode == RB_MODE_PAIRS ? q->n_boxes : n_boxes, r);
    rb_shapeset_free(&ctx->alloc, &set);
    if (rc == RB_EINPUT)
        return rb_report_bad_input(ctx, q->dims, q->rays, q->boxes, &bad);
    if (rc)
        return rc;
    r->info.slab_tests =
        (uint64_t)q->n_rays * (shape_pairs ? 1 : n_boxes + n_shapes);
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
