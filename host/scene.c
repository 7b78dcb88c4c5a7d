/* scene.c - stored element sets. A scene keeps its boxes prepared
 * (rb_boxset) with a hierarchy over them (bvh/), and its elements of the
 * other kinds (SPEC section 7) prepared (rb_shapeset) with a hierarchy of
 * their own (bvh/bvh_shapes.c), so queries against it skip validation and
 * layout work and cost about log(elements) per ray. The hierarchies are
 * built when the scene is created (so the first query pays nothing and a
 * server builds outside its request path); the box tree is refit when
 * boxes move and rebuilt on append or when refits have degraded it; the
 * shape tree is rebuilt by every change of its kinds. Changes check
 * everything before they write anything.
 *
 * Ids. While a scene has only ever held boxes, box i is id i and nothing
 * else is kept (such a scene behaves exactly as before shapes existed).
 * Once it holds another kind it keeps id -> (kind, index within the kind)
 * and, per kind, the ids of its elements, which ascend with the index
 * (elements are only ever appended), so that ties broken by the lower
 * index are ties broken by the lower id (R10). */
#include <stddef.h>
#include <stdio.h>
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
    /* Every kind. n_ids counts the elements of all kinds. The rest is
     * NULL/empty while the scene has only ever held boxes. */
    size_t n_ids;
    rb_shapeset shapes;  /* prepared; shapes.ids = shape_ids; its tree */
    uint32_t *shape_ids; /* shape index j -> id */
    uint32_t *box_ids;   /* box index -> id; NULL while box i is id i */
    uint8_t *id_kind;    /* id -> rb_kind; NULL while there is no shape */
    uint32_t *id_index;  /* id -> index within its kind */
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

const rb_shapeset *rb_scene_shapeset(const rb_scene *scene)
{
    return rb_shapeset_size(&scene->shapes) ? &scene->shapes : NULL;
}

const uint32_t *rb_scene_box_ids(const rb_scene *scene)
{
    return scene->box_ids;
}

/* Where the elements of kind k start in the shape index j. */
static size_t shape_offset(const rb_shapeset *s, rb_kind k)
{
    switch (k) {
    case RB_KIND_OBB:
        return 0;
    case RB_KIND_XBOX:
        return s->n_obb;
    case RB_KIND_SPHERE:
        return s->n_obb + s->n_xbox;
    default:
        return s->n_obb + s->n_xbox + s->n_ball;
    }
}

static size_t kind_size(const rb_scene *scene, rb_kind k)
{
    const rb_shapeset *s = &scene->shapes;
    switch (k) {
    case RB_KIND_BOX:
        return scene->set.n;
    case RB_KIND_OBB:
        return s->n_obb;
    case RB_KIND_XBOX:
        return s->n_xbox;
    case RB_KIND_SPHERE:
        return s->n_ball;
    default:
        return s->n_half;
    }
}

/* id (< n_ids) -> kind and index within it. */
static rb_kind lookup(const rb_scene *scene, size_t id, size_t *index)
{
    if (!scene->id_kind) {
        *index = id;
        return RB_KIND_BOX;
    }
    *index = scene->id_index[id];
    return (rb_kind)scene->id_kind[id];
}

int rb_scene_element_kind(const rb_scene *scene, uint64_t id, size_t *index)
{
    size_t i;
    if (!scene || id >= scene->n_ids)
        return -1;
    rb_kind k = lookup(scene, (size_t)id, &i);
    if (index)
        *index = i;
    return (int)k;
}

int rb_scene_shape_index(const rb_scene *scene, uint32_t id, size_t *j)
{
    size_t i;
    if (!scene->id_kind || id >= scene->n_ids)
        return 0;
    rb_kind k = lookup(scene, id, &i);
    if (k == RB_KIND_BOX)
        return 0;
    *j = shape_offset(&scene->shapes, k) + i;
    return 1;
}

static int check_dims(rb_context *ctx, unsigned dims)
{
    if (dims != 2 && dims != 3)
        return rb_fail(ctx, RB_EINVAL, "dims must be 2 or 3, not %u", dims);
    return RB_OK;
}

/* Copies of the scene's arrays go through its own allocator: a scene
 * outlives the contexts that change it. */
static void *scene_alloc(const rb_scene *scene, size_t bytes)
{
    return bytes ? rb_alloc_with(&scene->alloc, bytes, 64) : NULL;
}

static void free_shape_parts(rb_scene *scene)
{
    const rb_allocator *a = &scene->alloc;
    rb_shapeset_free(a, &scene->shapes);
    rb_free_with(a, scene->shape_ids);
    rb_free_with(a, scene->box_ids);
    rb_free_with(a, scene->id_kind);
    rb_free_with(a, scene->id_index);
    scene->shape_ids = scene->box_ids = scene->id_index = NULL;
    scene->id_kind = NULL;
}

/* A scene's shape tree holds its boxes too (a joint tree, walked once for
 * both) while there are at most this many boxes a bounded shape. Beyond,
 * the one walk saves little against the second tree's memory and build
 * time, the boxes being in the box tree as well. Measured on the CPU (1M
 * random rays, 2-core development machine, old and new library in turn;
 * boxes + spheres): 100K + 10K nearest 1.29x, any 1.14x faster; 1M +
 * 100K 1.31x, 1.36x; 100K + 1K 1.09x, 1.08x; 1M + 10K 0.97x, 1.10x;
 * while memory per element went from ~84 to ~157 bytes and the build
 * took 2.1x as long. */
#define JOINT_MAX_BOXES_PER_SHAPE 8

static int wants_joint(const rb_scene *scene, const rb_shapeset *set)
{
    size_t bounded = rb_shapeset_bounded(set);
    return scene->dims == 3 &&
           scene->set.n <= JOINT_MAX_BOXES_PER_SHAPE * bounded;
}

/* (Re)builds set->tree for a scene: the tree is the scene's and is freed
 * with its allocator, so the build borrows ctx with that allocator (a
 * context is used by one thread at a time). Joint (above) with the
 * scene's boxes by their ids when they are few enough. Without memory the
 * set keeps no tree: every shape is tested, the answers are the same
 * (R16). */
static void build_shape_tree(rb_context *ctx, const rb_scene *scene,
                             rb_shapeset *set)
{
    rb_shape_tree_free(&scene->alloc, set);
    if (!rb_shapeset_bounded(set))
        return;
    int joint = wants_joint(scene, set);
    rb_allocator own = ctx->alloc;
    rb_error err = ctx->err;
    ctx->alloc = scene->alloc;
    (void)rb_shape_tree_build(ctx, set, joint ? &scene->set : NULL,
                              scene->box_ids);
    ctx->alloc = own;
    ctx->err = err;
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
    if (rc == RB_OK && rb_bvh_build(ctx->pool, &s->alloc, &ctx->workmem,
                                    &s->set, ctx->bvh_build, &s->bvh))
        rc = rb_fail(ctx, RB_ENOMEM, "no memory for the hierarchy of %zu "
                                     "boxes", n);
    if (rc) {
        rb_scene_destroy(s);
        return rc;
    }
    s->n_ids = n;
    *out = s;
    return RB_OK;
}

static int append_all(rb_context *ctx, rb_scene *scene, const void *boxes,
                      size_t n_boxes, const rb_shapeset *add);

/* The shapes of a create or append, 3D only, validated and prepared into
 * *add (ctx's allocator) after the boxes were checked. */
static int prepare_shapes(rb_context *ctx, unsigned dims, size_t n_old,
                          const void *boxes, size_t n_boxes,
                          const rb_shapes *shapes, rb_shapeset *add)
{
    memset(add, 0, sizeof *add);
    size_t n_shapes = shapes ? rb_shapes_count(shapes) : 0;
    if (n_shapes &&
        ((shapes->n_obbs && !shapes->obbs) ||
         (shapes->n_xboxes && !shapes->xboxes) ||
         (shapes->n_spheres && !shapes->spheres) ||
         (shapes->n_planes && !shapes->planes)))
        return rb_fail(ctx, RB_EINVAL, "a shape array is NULL");
    if (n_shapes && dims != 3)
        return rb_fail(ctx, RB_EINVAL, "shapes other than boxes are 3D "
                                       "only");
    if (n_boxes > (size_t)INT32_MAX - n_old ||
        n_shapes > (size_t)INT32_MAX - n_old - n_boxes)
        return rb_fail(ctx, RB_EINVAL, "a scene holds at most %d elements",
                       INT32_MAX);
    size_t bad = rb_check_boxes(boxes, dims, 0, n_boxes);
    if (bad < n_boxes) {
        rb_bad_input where = {bad, RB_ELEMENT_BOX};
        return rb_report_bad_input(ctx, dims, NULL, boxes, &where);
    }
    return n_shapes ? rb_shapeset_build(ctx, add, shapes, 0) : RB_OK;
}

int rb_scene_create_shapes(rb_context *ctx, unsigned dims, const void *boxes,
                           size_t n_boxes, const rb_shapes *shapes,
                           rb_scene **out)
{
    if (!ctx || !out || (n_boxes && !boxes))
        return ctx ? rb_fail(ctx, RB_EINVAL, "NULL argument") : RB_EINVAL;
    *out = NULL;
    rb_clear_error(ctx);
    int rc = check_dims(ctx, dims);
    if (rc)
        return rc;
    rb_shapeset add;
    rc = prepare_shapes(ctx, dims, 0, boxes, n_boxes, shapes, &add);
    if (rc)
        return rc;
    rb_scene *s = NULL;
    rc = rb_scene_create(ctx, dims, boxes, n_boxes, &s);
    if (rc == RB_OK && rb_shapeset_size(&add)) {
        rc = append_all(ctx, s, NULL, 0, &add);
        s->version = 1;
    }
    rb_shapeset_free(&ctx->alloc, &add);
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
    free_shape_parts(scene);
    rb_free_with(&alloc, scene->set.data);
    rb_free_with(&alloc, scene);
}

/* *out = a copy of bytes at src (NULL for none); 0, or -1 out of memory. */
static int dup_array(const rb_scene *scene, void *out, const void *src,
                     size_t bytes)
{
    void *p = NULL;
    if (src && bytes) {
        p = scene_alloc(scene, bytes);
        if (!p)
            return -1;
        memcpy(p, src, bytes);
    }
    memcpy(out, &p, sizeof p);
    return 0;
}

/* The shape parts of `to` (a shallow copy of `from`) made its own. */
static int clone_shapes(const rb_scene *from, rb_scene *to)
{
    const rb_shapeset *a = &from->shapes;
    rb_shapeset *b = &to->shapes;
    b->lbox = NULL;
    b->ball = NULL;
    b->half = NULL;
    b->tree = NULL;
    b->bounds.data = NULL;
    memset(&b->leaves, 0, sizeof b->leaves);
    to->shape_ids = to->box_ids = to->id_index = NULL;
    to->id_kind = NULL;
    size_t n_lbox = a->n_obb + a->n_xbox, n = rb_shapeset_size(a);
    int bad = dup_array(to, &b->lbox, a->lbox, n_lbox * sizeof *a->lbox) ||
              dup_array(to, &b->ball, a->ball, a->n_ball * sizeof *a->ball) ||
              dup_array(to, &b->half, a->half, a->n_half * sizeof *a->half) ||
              dup_array(to, &to->shape_ids, from->shape_ids,
                        n * sizeof *from->shape_ids) ||
              dup_array(to, &to->box_ids, from->box_ids,
                        from->set.n * sizeof *from->box_ids) ||
              dup_array(to, &to->id_kind, from->id_kind, from->n_ids) ||
              dup_array(to, &to->id_index, from->id_index,
                        from->n_ids * sizeof *from->id_index);
    b->ids = to->shape_ids;
    if (!bad && a->tree) {
        rb_bvh *tree = scene_alloc(to, sizeof *tree);
        if (!tree || rb_bvh_clone(&to->alloc, a->tree, tree) != RB_OK) {
            rb_free_with(&to->alloc, tree);
            bad = 1;
        } else {
            b->tree = tree;
            bad = dup_array(to, &b->bounds.data, a->bounds.data,
                            6 * a->bounds.stride * sizeof(float)) ||
                  dup_array(to, &b->leaves.lbox, a->leaves.lbox,
                            n_lbox * sizeof *a->leaves.lbox) ||
                  dup_array(to, &b->leaves.ball, a->leaves.ball,
                            a->n_ball * sizeof *a->leaves.ball) ||
                  dup_array(to, &b->leaves.ids, a->leaves.ids,
                            (n_lbox + a->n_ball) * sizeof *a->leaves.ids);
        }
    }
    if (bad) {
        free_shape_parts(to);
        return RB_ENOMEM;
    }
    return RB_OK;
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
    if (clone_shapes(scene, s) != RB_OK) {
        rb_bvh_free(&s->bvh);
        rb_free(ctx, s->set.data);
        rb_free(ctx, s);
        return rb_fail(ctx, RB_ENOMEM, "no memory to copy a scene");
    }
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

/* After boxes [indices] were written: refit, and rebuild when the refits
 * have degraded the tree. */
static void refit_boxes(rb_context *ctx, rb_scene *scene,
                        const uint32_t *indices, size_t n)
{
    if (!scene->bvh.n_nodes)
        return;
    rb_bvh_update(&scene->bvh, &scene->set, 0, indices, n);
    /* Out of memory for the rebuild is not an error: the refit tree is
     * exact, only slower. */
    if (scene->bvh.sah > REBUILD_RATIO * scene->bvh.sah_built)
        (void)rb_bvh_build(ctx->pool, &scene->alloc, &ctx->workmem,
                           &scene->set, scene->bvh.build, &scene->bvh);
}

int rb_scene_set(rb_context *ctx, rb_scene *scene, const uint32_t *indices,
                 const void *boxes, size_t n)
{
    if (!ctx || !scene || (n && (!indices || !boxes)))
        return ctx ? rb_fail(ctx, RB_EINVAL, "NULL argument") : RB_EINVAL;
    rb_clear_error(ctx);
    if (scene->id_kind) {
        /* Ids are not box indices: the general path. */
        rb_element *e = rb_alloc(ctx, (n ? n : 1) * sizeof *e, 64);
        if (!e)
            return rb_fail(ctx, RB_ENOMEM, "no memory to set %zu boxes", n);
        for (size_t k = 0; k < n; k++) {
            memset(&e[k], 0, sizeof e[k]);
            e[k].kind = RB_KIND_BOX;
            if (scene->dims == 3)
                e[k].as.box = ((const rb_box *)boxes)[k];
            else
                e[k].as.box2 = ((const rb_box2 *)boxes)[k];
        }
        int rc = rb_scene_set_elements(ctx, scene, indices, e, n);
        rb_free(ctx, e);
        return rc;
    }
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
    refit_boxes(ctx, scene, indices, n);
    scene->version++;
    scene->set.uid = rb_next_uid();
    return RB_OK;
}

static const rb_element_kind element_of_kind[RB_KIND_COUNT] = {
    RB_ELEMENT_BOX, RB_ELEMENT_OBB, RB_ELEMENT_XBOX, RB_ELEMENT_SPHERE,
    RB_ELEMENT_PLANE};

/* Set entry k, named: status, the given element's kind, index k. */
static int set_fail(rb_context *ctx, int status, rb_kind kind, size_t k,
                    int field, const char *text)
{
    rb_fail(ctx, status, "%s", text);
    ctx->err.element = element_of_kind[kind];
    ctx->err.index = k;
    ctx->err.field = field;
    return status;
}

/* Why element e is invalid, with its field; 0 if valid. */
static int element_problem(const rb_scene *scene, const rb_element *e,
                           int *field, char *why, size_t len)
{
    rb_shapes one = {0};
    switch (e->kind) {
    case RB_KIND_BOX:
        return rb_describe_box(&e->as, scene->dims, 0, field, why, len);
    case RB_KIND_OBB:
        one.obbs = &e->as.obb;
        one.n_obbs = 1;
        return rb_describe_shape(&one, RB_ELEMENT_OBB, 0, field, why, len);
    case RB_KIND_XBOX:
        one.xboxes = &e->as.xbox;
        one.n_xboxes = 1;
        return rb_describe_shape(&one, RB_ELEMENT_XBOX, 0, field, why, len);
    case RB_KIND_SPHERE:
        one.spheres = &e->as.sphere;
        one.n_spheres = 1;
        return rb_describe_shape(&one, RB_ELEMENT_SPHERE, 0, field, why,
                                 len);
    default:
        one.planes = &e->as.plane;
        one.n_planes = 1;
        return rb_describe_shape(&one, RB_ELEMENT_PLANE, 0, field, why, len);
    }
}

/* Set entries that are shapes, grouped by kind for rb_shapeset_build
 * (the prepared record of entry k is then at slot[k] of that build). */
typedef struct set_plan {
    rb_obb *obbs;
    rb_xbox *xboxes;
    rb_sphere *spheres;
    rb_plane *planes;
    size_t *slot;        /* per entry: its shape index j in `prepared` */
    uint32_t *box_index; /* box entries' box indices, for the refit */
    size_t n_box;
    rb_shapeset prepared;
} set_plan;

static void plan_free(rb_context *ctx, set_plan *p)
{
    rb_free(ctx, p->obbs);
    rb_free(ctx, p->xboxes);
    rb_free(ctx, p->spheres);
    rb_free(ctx, p->planes);
    rb_free(ctx, p->slot);
    rb_free(ctx, p->box_index);
    rb_shapeset_free(&ctx->alloc, &p->prepared);
}

static int plan_set(rb_context *ctx, const rb_element *e, size_t n,
                    set_plan *p)
{
    size_t count[RB_KIND_COUNT] = {0};
    for (size_t k = 0; k < n; k++)
        count[e[k].kind]++;
    p->obbs = rb_alloc(ctx, (count[RB_KIND_OBB] + 1) * sizeof *p->obbs, 64);
    p->xboxes = rb_alloc(ctx, (count[RB_KIND_XBOX] + 1) * sizeof *p->xboxes,
                         64);
    p->spheres = rb_alloc(
        ctx, (count[RB_KIND_SPHERE] + 1) * sizeof *p->spheres, 64);
    p->planes = rb_alloc(ctx, (count[RB_KIND_PLANE] + 1) * sizeof *p->planes,
                         64);
    p->slot = rb_alloc(ctx, (n + 1) * sizeof *p->slot, 64);
    p->box_index = rb_alloc(ctx, (count[RB_KIND_BOX] + 1) *
                                     sizeof *p->box_index, 64);
    if (!p->obbs || !p->xboxes || !p->spheres || !p->planes || !p->slot ||
        !p->box_index)
        return rb_fail(ctx, RB_ENOMEM, "no memory to set %zu elements", n);
    size_t at[RB_KIND_COUNT] = {0};
    size_t first[RB_KIND_COUNT] = {
        0, 0, count[RB_KIND_OBB], count[RB_KIND_OBB] + count[RB_KIND_XBOX],
        count[RB_KIND_OBB] + count[RB_KIND_XBOX] + count[RB_KIND_SPHERE]};
    for (size_t k = 0; k < n; k++) {
        rb_kind kind = e[k].kind;
        size_t i = at[kind]++;
        p->slot[k] = first[kind] + i;
        switch (kind) {
        case RB_KIND_OBB:
            p->obbs[i] = e[k].as.obb;
            break;
        case RB_KIND_XBOX:
            p->xboxes[i] = e[k].as.xbox;
            break;
        case RB_KIND_SPHERE:
            p->spheres[i] = e[k].as.sphere;
            break;
        case RB_KIND_PLANE:
            p->planes[i] = e[k].as.plane;
            break;
        default:
            break;
        }
    }
    rb_shapes grouped = {p->obbs,    count[RB_KIND_OBB],
                         p->xboxes,  count[RB_KIND_XBOX],
                         p->spheres, count[RB_KIND_SPHERE],
                         p->planes,  count[RB_KIND_PLANE]};
    /* Valid by now: this only prepares. */
    return rb_shapeset_build(ctx, &p->prepared, &grouped, 0);
}

int rb_scene_set_elements(rb_context *ctx, rb_scene *scene,
                          const uint32_t *ids, const rb_element *elements,
                          size_t n)
{
    if (!ctx || !scene || (n && (!ids || !elements)))
        return ctx ? rb_fail(ctx, RB_EINVAL, "NULL argument") : RB_EINVAL;
    rb_clear_error(ctx);
    for (size_t k = 0; k < n; k++) {
        const rb_element *e = &elements[k];
        if ((unsigned)e->kind >= RB_KIND_COUNT)
            return rb_fail(ctx, RB_EINVAL, "set %zu: unknown kind %d", k,
                           (int)e->kind);
        char text[160];
        if (ids[k] >= scene->n_ids) {
            snprintf(text, sizeof text,
                     "set %zu: id %u is out of range (%zu elements)", k,
                     ids[k], scene->n_ids);
            return set_fail(ctx, RB_EINVAL, e->kind, k, -1, text);
        }
        size_t i;
        rb_kind have = lookup(scene, ids[k], &i);
        if (have != e->kind) {
            snprintf(text, sizeof text,
                     "set %zu: id %u is of kind %s, the element given is "
                     "of kind %s",
                     k, ids[k], rb_kind_name(have), rb_kind_name(e->kind));
            return set_fail(ctx, RB_EINVAL, e->kind, k, -1, text);
        }
    }
    for (size_t k = 0; k < n; k++) {
        int field;
        char why[256];
        if (element_problem(scene, &elements[k], &field, why, sizeof why)) {
            char text[320];
            snprintf(text, sizeof text, "%s %zu: %s",
                     rb_kind_name(elements[k].kind), k, why);
            return set_fail(ctx, RB_EINPUT, elements[k].kind, k, field,
                            text);
        }
    }
    set_plan plan = {0};
    int rc = plan_set(ctx, elements, n, &plan);
    if (rc) {
        plan_free(ctx, &plan);
        return rc;
    }
    /* Everything is checked and prepared: nothing below can fail. */
    int shapes_moved = 0;
    for (size_t k = 0; k < n; k++) {
        const rb_element *e = &elements[k];
        size_t i;
        rb_kind kind = lookup(scene, ids[k], &i);
        if (kind == RB_KIND_BOX) {
            float lo[3], hi[3];
            rb_box_corners(&e->as, scene->dims, 0, lo, hi);
            write_box(&scene->set, i, lo, hi);
            plan.box_index[plan.n_box++] = (uint32_t)i;
            continue;
        }
        shapes_moved = 1;
        rb_shapeset *s = &scene->shapes;
        size_t j = shape_offset(s, kind) + i, from = plan.slot[k];
        size_t n_lbox = s->n_obb + s->n_xbox;
        const rb_shapeset *pr = &plan.prepared;
        size_t pr_lbox = pr->n_obb + pr->n_xbox;
        if (kind == RB_KIND_OBB || kind == RB_KIND_XBOX)
            s->lbox[j] = pr->lbox[from];
        else if (kind == RB_KIND_SPHERE)
            s->ball[j - n_lbox] = pr->ball[from - pr_lbox];
        else
            s->half[j - n_lbox - s->n_ball] =
                pr->half[from - pr_lbox - pr->n_ball];
    }
    if (plan.n_box) {
        refit_boxes(ctx, scene, plan.box_index, plan.n_box);
        scene->set.uid = rb_next_uid();
    }
    rb_shapeset *ss = &scene->shapes;
    if (!shapes_moved && plan.n_box && ss->tree && ss->n_tree_boxes) {
        /* Moved boxes only: the joint tree is refit like the box tree,
         * and rebuilt as it would be when refits have degraded it. */
        rb_shape_tree_move_boxes(ss, &scene->set, plan.box_index,
                                 plan.n_box);
        shapes_moved = ss->tree->sah > REBUILD_RATIO * ss->tree->sah_built;
    }
    if (shapes_moved)
        build_shape_tree(ctx, scene, ss);
    plan_free(ctx, &plan);
    scene->version++;
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

/* Appends n valid boxes and rebuilds the hierarchy; on RB_ENOMEM the
 * boxes are taken back out (the old hierarchy still matches). */
static int append_boxes(rb_context *ctx, rb_scene *scene, const void *boxes,
                        size_t n)
{
    size_t old_n = scene->set.n;
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
    if (rb_bvh_build(ctx->pool, &scene->alloc, &ctx->workmem, &scene->set,
                     scene->bvh.build, &scene->bvh)) {
        pad_from(&scene->set, old_n);
        scene->set.n = old_n;
        return rb_fail(ctx, RB_ENOMEM, "no memory to rebuild the hierarchy "
                                       "of %zu boxes", total);
    }
    scene->set.uid = rb_next_uid();
    return RB_OK;
}

/* The arrays of a scene after an append that involves shapes. */
typedef struct grown {
    rb_shapeset shapes;
    uint32_t *shape_ids, *box_ids, *id_index;
    uint8_t *id_kind;
} grown;

static void grown_free(const rb_scene *scene, grown *g)
{
    rb_free_with(&scene->alloc, g->shapes.lbox);
    rb_free_with(&scene->alloc, g->shapes.ball);
    rb_free_with(&scene->alloc, g->shapes.half);
    rb_free_with(&scene->alloc, g->shape_ids);
    rb_free_with(&scene->alloc, g->box_ids);
    rb_free_with(&scene->alloc, g->id_kind);
    rb_free_with(&scene->alloc, g->id_index);
}

/* Fills the lookups for `count` elements of kind k from id `first` on, the
 * first of them at index `index` within the kind. */
static void name_ids(grown *g, size_t first, size_t count, rb_kind k,
                     size_t index)
{
    for (size_t c = 0; c < count; c++) {
        g->id_kind[first + c] = (uint8_t)k;
        g->id_index[first + c] = (uint32_t)(index + c);
    }
}

/* Builds the grown arrays: the scene's elements, n_boxes new boxes and the
 * prepared shapes `add` (ids in the append's order). */
static int grow_arrays(const rb_scene *scene, size_t n_boxes,
                       const rb_shapeset *add, grown *g)
{
    const rb_shapeset *o = &scene->shapes;
    size_t n_add = rb_shapeset_size(add), n_old = rb_shapeset_size(o);
    size_t n0 = scene->n_ids, n1 = n0 + n_boxes + n_add;
    size_t nb0 = scene->set.n;
    memset(g, 0, sizeof *g);
    g->id_kind = scene_alloc(scene, n1);
    g->id_index = scene_alloc(scene, n1 * sizeof *g->id_index);
    int need_box_ids = scene->box_ids || (n_boxes && n0 != nb0);
    if (need_box_ids)
        g->box_ids = scene_alloc(scene, (nb0 + n_boxes) * sizeof *g->box_ids);
    if (!g->id_kind || !g->id_index || (need_box_ids && !g->box_ids))
        return RB_ENOMEM;
    if (scene->id_kind) {
        memcpy(g->id_kind, scene->id_kind, n0);
        memcpy(g->id_index, scene->id_index, n0 * sizeof *g->id_index);
    } else {
        name_ids(g, 0, n0, RB_KIND_BOX, 0); /* every id so far a box */
    }
    name_ids(g, n0, n_boxes, RB_KIND_BOX, nb0);
    if (g->box_ids) {
        for (size_t i = 0; i < nb0; i++)
            g->box_ids[i] = scene->box_ids ? scene->box_ids[i] : (uint32_t)i;
        for (size_t i = 0; i < n_boxes; i++)
            g->box_ids[nb0 + i] = (uint32_t)(n0 + i);
    }
    if (!n_add) {
        g->shapes = *o;
        return RB_OK;
    }
    /* Shapes: per kind the old ones, then the new (ids ascend). */
    rb_shapeset *s = &g->shapes;
    s->n_obb = o->n_obb + add->n_obb;
    s->n_xbox = o->n_xbox + add->n_xbox;
    s->n_ball = o->n_ball + add->n_ball;
    s->n_half = o->n_half + add->n_half;
    size_t n_lbox = s->n_obb + s->n_xbox;
    s->lbox = scene_alloc(scene, n_lbox * sizeof *s->lbox);
    s->ball = scene_alloc(scene, s->n_ball * sizeof *s->ball);
    s->half = scene_alloc(scene, s->n_half * sizeof *s->half);
    g->shape_ids = scene_alloc(scene, (n_old + n_add) * sizeof *g->shape_ids);
    if ((n_lbox && !s->lbox) || (s->n_ball && !s->ball) ||
        (s->n_half && !s->half) || !g->shape_ids)
        return RB_ENOMEM;
    size_t next = n0 + n_boxes; /* the first new shape's id */
    const size_t add_first[RB_KIND_COUNT] = {
        0, next, next + add->n_obb, next + add->n_obb + add->n_xbox,
        next + add->n_obb + add->n_xbox + add->n_ball};
    const size_t old_n[RB_KIND_COUNT] = {0, o->n_obb, o->n_xbox, o->n_ball,
                                         o->n_half};
    const size_t add_n[RB_KIND_COUNT] = {0, add->n_obb, add->n_xbox,
                                         add->n_ball, add->n_half};
    for (int k = RB_KIND_OBB; k < RB_KIND_COUNT; k++) {
        size_t oj = shape_offset(o, (rb_kind)k),
               nj = shape_offset(s, (rb_kind)k);
        for (size_t i = 0; i < old_n[k]; i++)
            g->shape_ids[nj + i] = o->ids[oj + i];
        for (size_t i = 0; i < add_n[k]; i++)
            g->shape_ids[nj + old_n[k] + i] = (uint32_t)(add_first[k] + i);
        name_ids(g, add_first[k], add_n[k], (rb_kind)k, old_n[k]);
    }
    /* The records, kind by kind in the same order. */
    size_t at = 0;
    if (o->n_obb)
        memcpy(s->lbox, o->lbox, o->n_obb * sizeof *s->lbox);
    at += o->n_obb;
    if (add->n_obb)
        memcpy(s->lbox + at, add->lbox, add->n_obb * sizeof *s->lbox);
    at += add->n_obb;
    if (o->n_xbox)
        memcpy(s->lbox + at, o->lbox + o->n_obb, o->n_xbox * sizeof *s->lbox);
    at += o->n_xbox;
    if (add->n_xbox)
        memcpy(s->lbox + at, add->lbox + add->n_obb,
               add->n_xbox * sizeof *s->lbox);
    if (o->n_ball)
        memcpy(s->ball, o->ball, o->n_ball * sizeof *s->ball);
    if (add->n_ball)
        memcpy(s->ball + o->n_ball, add->ball, add->n_ball * sizeof *s->ball);
    if (o->n_half)
        memcpy(s->half, o->half, o->n_half * sizeof *s->half);
    if (add->n_half)
        memcpy(s->half + o->n_half, add->half, add->n_half * sizeof *s->half);
    s->ids = g->shape_ids;
    return RB_OK;
}

/* Appends valid boxes and prepared shapes; all or nothing. */
static int append_all(rb_context *ctx, rb_scene *scene, const void *boxes,
                      size_t n_boxes, const rb_shapeset *add)
{
    if (!rb_shapeset_size(add) && !scene->id_kind) {
        int rc = append_boxes(ctx, scene, boxes, n_boxes); /* ids = indices */
        if (rc == RB_OK)
            scene->n_ids = scene->set.n;
        return rc;
    }
    grown g;
    int rc = grow_arrays(scene, n_boxes, add, &g);
    if (rc == RB_OK && n_boxes)
        rc = append_boxes(ctx, scene, boxes, n_boxes);
    else if (rc)
        rc = rb_fail(ctx, RB_ENOMEM, "no memory to append %zu elements",
                     n_boxes + rb_shapeset_size(add));
    int new_shapes = rb_shapeset_size(add) != 0;
    if (rc) {
        if (!new_shapes) /* g.shapes is the scene's own */
            memset(&g.shapes, 0, sizeof g.shapes);
        grown_free(scene, &g);
        return rc;
    }
    /* Nothing can fail from here. */
    if (new_shapes) {
        g.shapes.tree = NULL;
        g.shapes.bounds.data = NULL;
        memset(&g.shapes.leaves, 0, sizeof g.shapes.leaves);
        g.shapes.n_tree_boxes = 0;
        rb_shapeset_free(&scene->alloc, &scene->shapes);
        rb_free_with(&scene->alloc, scene->shape_ids);
        scene->shapes = g.shapes;
        scene->shape_ids = g.shape_ids;
    }
    rb_free_with(&scene->alloc, scene->id_kind);
    rb_free_with(&scene->alloc, scene->id_index);
    scene->id_kind = g.id_kind;
    scene->id_index = g.id_index;
    if (g.box_ids) {
        rb_free_with(&scene->alloc, scene->box_ids);
        scene->box_ids = g.box_ids;
    }
    scene->n_ids += n_boxes + rb_shapeset_size(add);
    /* New shapes, or new boxes for a joint tree (or one that becomes or
     * stops being joint): built with the ids set above. */
    rb_shapeset *ss = &scene->shapes;
    if (new_shapes ||
        (n_boxes && (ss->n_tree_boxes || wants_joint(scene, ss))))
        build_shape_tree(ctx, scene, ss);
    return RB_OK;
}

int rb_scene_append_shapes(rb_context *ctx, rb_scene *scene,
                           const void *boxes, size_t n_boxes,
                           const rb_shapes *shapes)
{
    if (!ctx || !scene || (n_boxes && !boxes))
        return ctx ? rb_fail(ctx, RB_EINVAL, "NULL argument") : RB_EINVAL;
    rb_clear_error(ctx);
    rb_shapeset add;
    int rc = prepare_shapes(ctx, scene->dims, scene->n_ids, boxes, n_boxes,
                            shapes, &add);
    if (rc == RB_OK)
        rc = append_all(ctx, scene, boxes, n_boxes, &add);
    rb_shapeset_free(&ctx->alloc, &add);
    if (rc)
        return rc;
    scene->version++;
    return RB_OK;
}

int rb_scene_append(rb_context *ctx, rb_scene *scene, const void *boxes,
                    size_t n)
{
    if (!ctx || !scene || (n && !boxes))
        return ctx ? rb_fail(ctx, RB_EINVAL, "NULL argument") : RB_EINVAL;
    rb_clear_error(ctx);
    if (n > (size_t)INT32_MAX - scene->n_ids)
        return rb_fail(ctx, RB_EINVAL, "a scene holds at most %d boxes",
                       INT32_MAX);
    return rb_scene_append_shapes(ctx, scene, boxes, n, NULL);
}

static uint64_t shape_bytes(const rb_scene *scene)
{
    const rb_shapeset *s = &scene->shapes;
    uint64_t b = (s->n_obb + s->n_xbox) * sizeof(rb_lbox) +
                 s->n_ball * sizeof(rb_ball) + s->n_half * sizeof(rb_halfspace) +
                 rb_shapeset_size(s) * sizeof(uint32_t);
    if (scene->box_ids)
        b += scene->set.n * sizeof(uint32_t);
    if (scene->id_kind)
        b += scene->n_ids * (sizeof(uint8_t) + sizeof(uint32_t));
    if (s->tree)
        b += sizeof *s->tree + rb_bvh_bytes(s->tree) +
             6 * s->bounds.stride * sizeof(float) +
             (s->n_obb + s->n_xbox) * sizeof(rb_lbox) +
             s->n_ball * sizeof(rb_ball) +
             (s->n_obb + s->n_xbox + s->n_ball) * sizeof(uint32_t);
    return b;
}

void rb_scene_stats_get(const rb_scene *scene, rb_scene_stats *out)
{
    memset(out, 0, sizeof *out);
    out->dims = scene->dims;
    out->boxes = scene->set.n;
    out->version = scene->version;
    const rb_bvh *bvh = &scene->bvh;
    out->bvh_bytes = rb_bvh_bytes(bvh);
    /* The fields of the other kinds count once there is one: a scene of
     * boxes reports the bytes it did before scenes held other kinds. */
    size_t head = scene->id_kind ? sizeof *scene
                                 : offsetof(struct rb_scene, n_ids);
    out->host_bytes = head + scene->cap * sizeof(float) + out->bvh_bytes +
                      shape_bytes(scene);
    out->bytes_per_box = scene->n_ids ? (double)out->host_bytes /
                                            (double)scene->n_ids
                                      : 0;
    out->bvh_nodes = bvh->n_nodes;
    out->bvh_depth = bvh->depth;
    out->bvh_sah = bvh->sah;
    out->bvh_sah_built = bvh->sah_built;
    out->bvh_build = bvh->build;
    out->bvh_build_ms = bvh->build_ms;
    out->bvh_refits = bvh->refits;
    out->bvh_rebuilds = bvh->builds ? bvh->builds - 1 : 0;
    out->elements = scene->n_ids;
    for (int k = 0; k < RB_KIND_COUNT; k++)
        out->kinds[k] = kind_size(scene, (rb_kind)k);
    out->shape_nodes = scene->shapes.tree ? scene->shapes.tree->n_nodes : 0;
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
