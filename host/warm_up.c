/* warm_up.c - rb_context_warm_up: a query of every kind through the
 * public path (visibility included), so the kernels launched are the ones
 * real queries get, with the same work-group size (PoCL compiles a kernel
 * per work-group size on its first launch: 0.2-0.5 s each on the
 * development machine).
 * Each query has one ray: the launch is one work-group, the cost is the
 * compile alone. cl_testhook.h's rb_cl_kernels_unlaunched lets the test
 * see that no kernel of the program is left out. */
#include <string.h>

#include "bvh/bvh.h"
#include "internal.h"
#include "opencl/cl_internal.h"

/* A scene this large walks its hierarchy (query.c's SCENE_MIN_BOXES). */
#define WARM_SCENE_BOXES 512
/* And this many spheres its shape hierarchy (query.c's SCENE_MIN_SHAPES),
 * on the device (kernels/shapes.cl's rb_shape_walk_*, and with boxes
 * beside them in a joint tree rb_joint_walk_*). */
#define WARM_SCENE_SPHERES 64

static int run(rb_context *ctx, rb_mode mode, const rb_ray *ray,
               const rb_box *boxes, size_t n_boxes, const rb_scene *scene,
               const rb_shapes *shapes)
{
    rb_hit hit;
    uint8_t any;
    uint32_t count;
    rb_list_hit list[4];
    rb_query q = {.mode = mode, .dims = 3, .rays = ray, .n_rays = 1,
                  .boxes = boxes, .n_boxes = n_boxes, .scene = scene,
                  .max_hits = 4};
    if (shapes)
        q.shapes = *shapes;
    rb_results r = {.hits = &hit, .any = &any, .counts = &count,
                    .list = list, .capacity = 1};
    return rb_intersect(ctx, &q, &r);
}

/* Line of sight between one observer and one target: the visibility
 * kernels, brute force on a small scene, the walk on a large one. */
static int run_visibility(rb_context *ctx, const rb_scene *scene)
{
    const float observer[3] = {0.5f, 0.5f, -1}, target[3] = {0.5f, 0.5f, 2};
    uint8_t bits;
    rb_visibility_query q = {.scene = scene, .observers = observer,
                             .n_observers = 1, .targets = target,
                             .n_targets = 1, .tmin = 0, .tmax = 1};
    return rb_visibility(ctx, &q, &bits, 1, NULL, NULL);
}

int rb_context_warm_up(rb_context *ctx)
{
    if (!ctx)
        return RB_EINVAL;
    if (!ctx->cl || ctx->active != ctx->cl)
        return RB_OK;
    /* Over several devices a one-ray query runs on one of them: each
     * device's own context is warmed instead. */
    rb_context *devs[RB_MAX_DEVICES];
    size_t n_devs = rb_cl_multi_devices(ctx->cl, devs, RB_MAX_DEVICES);
    if (n_devs) {
        int rc = RB_OK;
        for (size_t k = 0; k < n_devs && !rc; k++)
            rc = rb_context_warm_up(devs[k]);
        return rc;
    }
    static const rb_mode every_box[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                        RB_MODE_COUNT, RB_MODE_ALL};
    const rb_ray ray = {{0.5f, 0.5f, -1}, {0, 0, 1}, 0, 1e30f};
    rb_box boxes[WARM_SCENE_BOXES];
    for (size_t i = 0; i < WARM_SCENE_BOXES; i++) {
        float x = (float)(i % 32) / 32, y = (float)(i / 32) / 16;
        boxes[i] = (rb_box){{x, y, 0}, {x + 0.02f, y + 0.04f, 1}};
    }
    const rb_sphere sphere = {{0.5f, 0.5f, 0}, 0.25f};
    const rb_shapes shapes = {.spheres = &sphere, .n_spheres = 1};
    rb_sphere balls[WARM_SCENE_SPHERES];
    for (size_t i = 0; i < WARM_SCENE_SPHERES; i++)
        balls[i] = (rb_sphere){{(float)(i % 8) / 8, (float)(i / 8) / 8, 0.5f},
                               0.05f};
    const rb_shapes many = {.spheres = balls,
                            .n_spheres = WARM_SCENE_SPHERES};
    rb_scene *scene = NULL, *small = NULL, *balls_scene = NULL,
             *balls_only = NULL;
    int rc = rb_scene_create(ctx, 3, boxes, WARM_SCENE_BOXES, &scene);
    if (!rc)
        rc = rb_scene_create(ctx, 3, boxes, 2, &small);
    if (!rc)
        rc = rb_scene_create_shapes(ctx, 3, boxes, 2, &many, &balls_scene);
    if (!rc)
        rc = rb_scene_create_shapes(ctx, 3, NULL, 0, &many, &balls_only);
    /* pairs: one box, then one shape, for the one ray */
    if (!rc)
        rc = run(ctx, RB_MODE_PAIRS, &ray, boxes, 1, NULL, NULL);
    if (!rc)
        rc = run(ctx, RB_MODE_PAIRS, &ray, NULL, 0, NULL, &shapes);
    for (size_t m = 0; !rc && m < sizeof every_box / sizeof *every_box;
         m++) {
        rc = run(ctx, every_box[m], &ray, boxes, 2, NULL, NULL);
        /* CPU devices stream the streamed modes over the scene (cl_run.c;
         * nearest only for long enough tasks, so forced here), and a
         * query whose arena does not fit the budget walks one ray an
         * item: both kernels. */
        int streams = ctx->cl_streams, streamed = rb_bvh_streams(every_box[m]);
        if (streams && streamed)
            ctx->cl_streams = RB_CL_STREAMS_ALWAYS;
        if (!rc)
            rc = run(ctx, every_box[m], &ray, NULL, 0, scene, NULL);
        ctx->cl_streams = RB_CL_STREAMS_OFF;
        if (!rc && streamed)
            rc = run(ctx, every_box[m], &ray, NULL, 0, scene, NULL);
        ctx->cl_streams = streams;
        if (!rc)
            rc = run(ctx, every_box[m], &ray, NULL, 0, NULL, &shapes);
        if (!rc)
            rc = run(ctx, every_box[m], &ray, NULL, 0, balls_scene, NULL);
        if (!rc)
            rc = run(ctx, every_box[m], &ray, NULL, 0, balls_only, NULL);
    }
    if (!rc)
        rc = run_visibility(ctx, scene);
    if (!rc)
        rc = run_visibility(ctx, small);
    rb_scene_destroy(balls_only);
    rb_scene_destroy(balls_scene);
    rb_scene_destroy(small);
    rb_scene_destroy(scene);
    return rc;
}
