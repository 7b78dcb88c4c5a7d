/* scene.c - stored box sets. A scene keeps its boxes prepared (rb_boxset)
 * and a hierarchy over them (bvh/), so queries against it skip validation
 * and layout work and cost about log(boxes) per ray. The hierarchy is
 * built when the scene is created (so the first query pays nothing and a
 * server builds outside its request path), refit when boxes move, and
 * rebuilt on append or when refits have degraded it. Changes check
 * everything before they write anything. */
#include <string.h>

#include "bvh/bvh.h"
#include "internal.h"

/* Rebuild after a refit when the SAH cost has grown past this factor of
 * the cost right after the last build. Measured (200K random boxes, one
 * thread, 50K random rays, 20% of the boxes moved by up to a box size per
 * step): nearest and count times grew about in proportion to the SAH
 * ratio (1.5x: ~1.5x slower; 2.4x: 2-2.5x slower), while a rebuild cost
 * as much as ~65 refits (160 ms against 2.4 ms). Boxes that jump across
 * the scene degrade a tree at once (0.5% of them: SAH x7, nearest x11)
 * and trigger the rebuild on the spot. 1.5x bounds the slowdown without
 * rebuilding on every small move. */
#define REBUILD_RATIO 1.5

struct rb_scene {
    rb_allocator alloc;
    unsigned dims;
    rb_boxset set;
    size_t cap;        /* floats allocated in set.data */
    uint64_t version;
    rb_bvh bvh;
};

const rb_boxset *rb_scene_boxset(const rb_scene *scene)
{
    return &scene->set;
}

unsigned rb_scene_dims(const rb_scene *scene)
{
    return scene->dims;
}

const struct rb_bvh *rb_scene_bvh(const rb_scene *scene)
{
    return scene->bvh.n_nodes ? &scene->bvh : NULL;
}

static int check_dims(rb_context *ctx, unsigned dims)
{
    if (dims != 2 && dims != 3)
        return rb_fail(ctx, RB_EINVAL, "dims must be 2 or 3, not %u", dims);
    return RB_OK;
}

int rb_scene_create(rb_context *ctx, unsigned dims, const void *boxes,
                    size_t n, rb_scene **out)
{
    if (!ctx || !out || (n && !boxes))
        return ctx ? rb_fail(ctx, RB_EINVAL, "NULL argument") : RB_EINVAL;
    *out = NULL;
    rb_clear_error(ctx);
    int rc = check_dims(ctx, dims);
    if (rc)
        return rc;
    if (n > INT32_MAX)
        return rb_fail(ctx, RB_EINVAL, "%zu boxes: at most %d", n,
                       INT32_MAX);
    rb_scene *s = rb_calloc(ctx, sizeof *s, 16);
    if (!s)
        return rb_fail(ctx, RB_ENOMEM, "no memory for a scene");
    s->alloc = ctx->alloc;
    s->dims = dims;
    s->version = 1;
    rc = rb_boxset_build(ctx, &s->set, &s->cap, boxes, dims, n);
    if (rc == RB_OK && rb_bvh_build(ctx->pool, &s->alloc, &s->set, &s->bvh))
        rc = rb_fail(ctx, RB_ENOMEM, "no memory for the hierarchy of %zu "
                                     "boxes", n);
    if (rc) {
        rb_scene_destroy(s);
        return rc;
    }
    *out = s;
    return RB_OK;
}

void rb_scene_destroy(rb_scene *scene)
{
    if (!scene)
        return;
    rb_allocator alloc = scene->alloc;
    rb_bvh_free(&scene->bvh);
    rb_free_with(&alloc, scene->set.data);
    rb_free_with(&alloc, scene);
}

int rb_scene_clone(rb_context *ctx, const rb_scene *scene, rb_scene **out)
{
    if (!ctx || !scene || !out)
        return ctx ? rb_fail(ctx, RB_EINVAL, "NULL argument") : RB_EINVAL;
    *out = NULL;
    rb_clear_error(ctx);
    rb_scene *s = rb_calloc(ctx, sizeof *s, 16);
    if (!s)
        return rb_fail(ctx, RB_ENOMEM, "no memory for a scene");
    *s = *scene;
    s->alloc = ctx->alloc;
    s->cap = 6 * scene->set.stride;
    s->set.data = rb_alloc(ctx, s->cap * sizeof(float), 64);
    if (!s->set.data ||
        rb_bvh_clone(&s->alloc, &scene->bvh, &s->bvh) != RB_OK) {
        rb_free(ctx, s->set.data);
        rb_free(ctx, s);
        return rb_fail(ctx, RB_ENOMEM, "no memory to copy a scene");
    }
    memcpy(s->set.data, scene->set.data, s->cap * sizeof(float));
    *out = s;
    return RB_OK;
}

static void write_box(rb_boxset *set, size_t i, const float lo[3],
                      const float hi[3])
{
    for (int a = 0; a < 3; a++) {
        set->data[(size_t)a * set->stride + i] = lo[a];
        set->data[(size_t)(3 + a) * set->stride + i] = hi[a];
    }
}

int rb_scene_set(rb_context *ctx, rb_scene *scene, const uint32_t *indices,
                 const void *boxes, size_t n)
{
    if (!ctx || !scene || (n && (!indices || !boxes)))
        return ctx ? rb_fail(ctx, RB_EINVAL, "NULL argument") : RB_EINVAL;
    rb_clear_error(ctx);
    for (size_t k = 0; k < n; k++) {
        if (indices[k] >= scene->set.n) {
            ctx->err.element = RB_ELEMENT_BOX;
            ctx->err.index = k;
            ctx->err.field = -1;
            return rb_fail(ctx, RB_EINVAL,
                           "set %zu: index %u is out of range (%zu boxes)", k,
                           indices[k], scene->set.n);
        }
    }
    size_t bad = rb_check_boxes(boxes, scene->dims, 0, n);
    if (bad < n) {
        rb_bad_input where = {bad, RB_ELEMENT_BOX};
        return rb_report_bad_input(ctx, scene->dims, NULL, boxes,
                                   &where);
    }
    for (size_t k = 0; k < n; k++) {
        float lo[3], hi[3];
        rb_box_corners(boxes, scene->dims, k, lo, hi);
        write_box(&scene->set, indices[k], lo, hi);
    }
    if (scene->bvh.n_nodes) {
        rb_bvh_update(&scene->bvh, &scene->set, indices, n);
        /* Out of memory for the rebuild is not an error: the refit tree
         * is exact, only slower. */
        if (scene->bvh.sah > REBUILD_RATIO * scene->bvh.sah_built)
            (void)rb_bvh_build(ctx->pool, &scene->alloc, &scene->set,
                               &scene->bvh);
    }
    scene->version++;
    scene->set.uid = rb_next_uid();
    return RB_OK;
}

/* Boxes [from, stride) become padding that no ray can hit. */
static void pad_from(rb_boxset *set, size_t from)
{
    static const float never_lo[3] = {INFINITY, INFINITY, INFINITY};
    static const float never_hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = from; i < set->stride; i++)
        write_box(set, i, never_lo, never_hi);
}

int rb_scene_append(rb_context *ctx, rb_scene *scene, const void *boxes,
                    size_t n)
{
    if (!ctx || !scene || (n && !boxes))
        return ctx ? rb_fail(ctx, RB_EINVAL, "NULL argument") : RB_EINVAL;
    rb_clear_error(ctx);
    size_t old_n = scene->set.n;
    if (n > (size_t)INT32_MAX - old_n)
        return rb_fail(ctx, RB_EINVAL, "a scene holds at most %d boxes",
                       INT32_MAX);
    size_t bad = rb_check_boxes(boxes, scene->dims, 0, n);
    if (bad < n) {
        rb_bad_input where = {bad, RB_ELEMENT_BOX};
        return rb_report_bad_input(ctx, scene->dims, NULL, boxes,
                                   &where);
    }
    size_t total = old_n + n;
    size_t stride = (total + RB_BOX_PAD - 1) / RB_BOX_PAD * RB_BOX_PAD;
    if (stride > scene->set.stride) {
        /* The six arrays move apart: re-lay them out in a new block, with
         * room to grow so that repeated appends stay amortised O(n). */
        size_t grown = stride + stride / 2;
        grown = (grown + RB_BOX_PAD - 1) / RB_BOX_PAD * RB_BOX_PAD;
        float *data = rb_alloc_with(&scene->alloc,
                                    6 * grown * sizeof(float), 64);
        if (!data)
            return rb_fail(ctx, RB_ENOMEM, "no memory to append %zu boxes",
                           n);
        for (int k = 0; k < 6; k++) {
            memcpy(data + (size_t)k * grown,
                   scene->set.data + (size_t)k * scene->set.stride,
                   old_n * sizeof(float));
        }
        rb_free_with(&scene->alloc, scene->set.data);
        scene->set.data = data;
        scene->set.stride = grown;
        scene->cap = 6 * grown;
    }
    for (size_t k = 0; k < n; k++) {
        float lo[3], hi[3];
        rb_box_corners(boxes, scene->dims, k, lo, hi);
        write_box(&scene->set, old_n + k, lo, hi);
    }
    pad_from(&scene->set, total);
    scene->set.n = total;
    if (rb_bvh_build(ctx->pool, &scene->alloc, &scene->set, &scene->bvh)) {
        /* Take the boxes back out: the old hierarchy still matches. */
        pad_from(&scene->set, old_n);
        scene->set.n = old_n;
        return rb_fail(ctx, RB_ENOMEM, "no memory to rebuild the hierarchy "
                                       "of %zu boxes", total);
    }
    scene->version++;
    scene->set.uid = rb_next_uid();
    return RB_OK;
}

void rb_scene_stats_get(const rb_scene *scene, rb_scene_stats *out)
{
    memset(out, 0, sizeof *out);
    out->dims = scene->dims;
    out->boxes = scene->set.n;
    out->version = scene->version;
    const rb_bvh *bvh = &scene->bvh;
    out->bvh_bytes = rb_bvh_bytes(bvh);
    out->host_bytes = sizeof *scene + scene->cap * sizeof(float) +
                      out->bvh_bytes;
    out->bytes_per_box = scene->set.n ? (double)out->host_bytes /
                                            (double)scene->set.n
                                      : 0;
    out->bvh_nodes = bvh->n_nodes;
    out->bvh_depth = bvh->depth;
    out->bvh_sah = bvh->sah;
    out->bvh_sah_built = bvh->sah_built;
    out->bvh_build_ms = bvh->build_ms;
    out->bvh_refits = bvh->refits;
    out->bvh_rebuilds = bvh->builds ? bvh->builds - 1 : 0;
    for (int a = 0; a < 3; a++) {
        out->bounds_min[a] = INFINITY;
        out->bounds_max[a] = -INFINITY;
        const float *lo = rb_boxset_lo(&scene->set, a);
        const float *hi = rb_boxset_hi(&scene->set, a);
        for (size_t i = 0; i < scene->set.n; i++) {
            if (lo[i] < out->bounds_min[a])
                out->bounds_min[a] = lo[i];
            if (hi[i] > out->bounds_max[a])
                out->bounds_max[a] = hi[i];
        }
    }
}

int rb_scene_box(const rb_scene *scene, size_t i, void *out)
{
    if (!scene || !out || i >= scene->set.n)
        return RB_EINVAL;
    const rb_boxset *set = &scene->set;
    if (scene->dims == 3) {
        rb_box *b = out;
        for (int a = 0; a < 3; a++) {
            b->min[a] = rb_boxset_lo(set, a)[i];
            b->max[a] = rb_boxset_hi(set, a)[i];
        }
    } else {
        rb_box2 *b = out;
        for (int a = 0; a < 2; a++) {
            b->min[a] = rb_boxset_lo(set, a)[i];
            b->max[a] = rb_boxset_hi(set, a)[i];
        }
    }
    return RB_OK;
}
