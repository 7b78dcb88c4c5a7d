/*
 * json_request_end.c - the end of a request body: what needs the whole
 * document (members may come in any order, so "dims" may follow "rays"),
 * and the mapping of the library's verdict on the data back to the body.
 *
 * Rays were kept in rb_ray-sized slots with the count of their numbers;
 * here they get their range (their own, or the request's) and, in 2D, are
 * packed in place into rb_ray2 records (a 2D record is smaller than its
 * slot, so writing record i never reaches slot i + 1). Boxes likewise.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "float_text.h"
#include "json_request_impl.h"
#include "problem.h"

/* rbj_fail returns 0, which stops yajl; here failure is -1. */
#define FAIL(...) (rbj_fail(p, __VA_ARGS__), -1)

/* A request without "dims" whose ray or box has a 2D arity probably
 * meant dims 2: say so after the arity rule. */
static const char *dims_hint(const rbj_parser *p, unsigned dims,
                             unsigned arity)
{
    if (dims != 3 || (p->seen & (1u << M_DIMS)) || arity != 4)
        return "";
    return " (a 2D request says \"dims\": 2)";
}

static int settle_rays(rbj_parser *p, rbq_request *r)
{
    rbj_list *l = &p->lists[M_RAYS];
    unsigned axes = r->dims, tmax_field = 2 * axes + 1;
    for (size_t i = 0; i < l->n; i++) {
        unsigned arity = l->arity[i];
        if (!rbj_arity_ok(M_RAYS, r->dims, arity))
            return FAIL(422, M_RAYS, (long long)i, -1,
                            "%u numbers: %s%s", arity,
                            rbj_arity_text(M_RAYS, r->dims),
                            dims_hint(p, r->dims, arity));
        float v[8];
        memcpy(v, l->slots + i * l->width, sizeof v);
        for (unsigned f = 0; f < arity; f++) {
            if (!isnan(v[f]))
                continue;
            if (f != tmax_field) /* a null that turned out not to be tmax */
                return FAIL(422, M_RAYS, (long long)i, (int)f,
                                "expected a number, got null (only a ray's "
                                "tmax may be null)");
            v[f] = INFINITY;
        }
        if (arity == 2 * axes) {
            v[2 * axes] = r->tmin;
            v[2 * axes + 1] = r->tmax;
        }
        if (axes == 3) {
            memcpy(l->slots + i * l->width, v, sizeof(rb_ray));
        } else {
            rb_ray2 r2 = {{v[0], v[1]}, {v[2], v[3]}, v[4], v[5]};
            memcpy((rb_ray2 *)(void *)l->slots + i, &r2, sizeof r2);
        }
    }
    r->rays = l->slots;
    r->n_rays = l->n;
    r->ray_arity = l->arity;
    return 0;
}

/* Boxes of "boxes", "set" (whose slots hold the box; the index has its
 * own array) and "append". */
static int settle_boxes(rbj_parser *p, rbj_member m, unsigned dims)
{
    rbj_list *l = &p->lists[m];
    for (size_t i = 0; i < l->n; i++) {
        unsigned arity = l->arity[i];
        if (!rbj_arity_ok(m, dims, arity))
            return FAIL(422, (int)m, (long long)i, -1,
                            "%u numbers: %s%s", arity, rbj_arity_text(m, dims),
                            m == M_BOXES ? dims_hint(p, dims, arity) : "");
        if (dims == 2) {
            const float *v = l->slots + i * l->width;
            rb_box2 b2 = {{v[0], v[1]}, {v[2], v[3]}};
            memcpy((rb_box2 *)(void *)l->slots + i, &b2, sizeof b2);
        }
    }
    return 0;
}

/* An obb given by a quaternion (10 numbers at v), turned into the axes
 * form in place (the slot has room for an rb_obb). 0, or -1 when the
 * quaternion is zero. */
static int obb_in_place(float *v)
{
    float q[10];
    memcpy(q, v, sizeof q);
    rb_obb obb;
    if (rb_obb_from_quaternion(q, q + 3, q + 6, &obb) != RB_OK)
        return -1;
    memcpy(v, &obb, sizeof obb);
    return 0;
}

/* The kinds beyond boxes (3D only) of the lists first..first+3 (obbs,
 * xboxes, spheres, planes of a query or create, or of append's object
 * form): arity per element, quaternions turned into axes. */
static int settle_shapes(rbj_parser *p, rbq_request *r, int first,
                         rb_shapes *out)
{
    for (int m = first; m < first + 4; m++) {
        rbj_list *l = &p->lists[m];
        if (l->n && r->dims != 3)
            return FAIL(422, m, -1, -1,
                        "2D %s take boxes only; \"%s\" are 3D",
                        r->body == RBQ_INTERSECT ? "requests" : "scenes",
                        rbj_member_names[m - first + M_OBBS]);
        for (size_t i = 0; i < l->n; i++) {
            unsigned arity = l->arity[i];
            if (!rbj_arity_ok((rbj_member)m, 3, arity))
                return FAIL(422, m, (long long)i, -1, "%u numbers: %s", arity,
                            rbj_arity_text((rbj_member)m, 3));
            if (m == first && arity == 10 &&
                obb_in_place(l->slots + i * l->width))
                return FAIL(422, m, (long long)i, 6,
                            "the quaternion is zero");
        }
    }
    out->obbs = (const rb_obb *)(void *)p->lists[first].slots;
    out->n_obbs = p->lists[first].n;
    out->xboxes = (const rb_xbox *)(void *)p->lists[first + 1].slots;
    out->n_xboxes = p->lists[first + 1].n;
    out->spheres = (const rb_sphere *)(void *)p->lists[first + 2].slots;
    out->n_spheres = p->lists[first + 2].n;
    out->planes = (const rb_plane *)(void *)p->lists[first + 3].slots;
    out->n_planes = p->lists[first + 3].n;
    return 0;
}

/* "set": [id, ...element] entries. The id's kind is the scene's to know;
 * here the arity (checked as the entries ended) and quaternions; boxes
 * are packed as before when every entry is one. */
static int settle_set(rbj_parser *p, rbq_request *r)
{
    rbj_list *l = &p->lists[M_SET];
    unsigned box_arity = 2 * r->dims + 1;
    int all_boxes = 1;
    for (size_t i = 0; i < l->n; i++) {
        if (l->arity[i] != box_arity)
            all_boxes = 0;
        if (r->dims == 3 && l->arity[i] == 11 &&
            obb_in_place(l->slots + i * l->width))
            return FAIL(422, M_SET, (long long)i, 7,
                        "the quaternion is zero");
    }
    r->set_index = l->index;
    r->set_arity = l->arity;
    r->n_set = l->n;
    if (!all_boxes) {
        r->set_values = l->slots;
        return 0;
    }
    /* A box record is smaller than a slot: record i never reaches slot
     * i + 1. */
    for (size_t i = 0; i < l->n; i++) {
        const float *v = l->slots + i * l->width;
        if (r->dims == 3) {
            rb_box b = {{v[0], v[1], v[2]}, {v[3], v[4], v[5]}};
            memcpy((rb_box *)(void *)l->slots + i, &b, sizeof b);
        } else {
            rb_box2 b2 = {{v[0], v[1]}, {v[2], v[3]}};
            memcpy((rb_box2 *)(void *)l->slots + i, &b2, sizeof b2);
        }
    }
    r->set_boxes = l->slots;
    return 0;
}

/* "camera" (SPEC section 8): its members into p->camera, checked and
 * counted by the library (the same checks the binary form gets). */
static int settle_camera(rbj_parser *p, rbq_request *r)
{
    static const double no_pixels[2];
    const rbq_limits *lim = &p->opt.limits;
    static const char *const parts[] = {"view", "projection", "viewport"};
    for (int k = 0; k < 3; k++)
        if (!(p->seen & (1u << (M_CAM_VIEW + k))))
            return FAIL(422, M_CAMERA, -1, -1, "missing \"%s\"", parts[k]);
    if (r->dims != 3)
        return FAIL(422, p->opt.scene_in_path ? M_CAMERA : M_DIMS, -1, -1,
                    "a camera makes 3D rays; the %s is 2D",
                    p->opt.scene_in_path ? "scene" : "request");
    rb_camera *c = &p->camera;
    memset(c, 0, sizeof *c);
    memcpy(c->view, p->cam_vec[0], sizeof c->view);
    memcpy(c->projection, p->cam_vec[1], sizeof c->projection);
    memcpy(c->viewport, p->cam_vec[2], sizeof c->viewport);
    c->depth = p->cam_depth;
    if (p->seen & (1u << M_CAM_PIXELS)) {
        rbj_list *l = &p->lists[M_CAM_PIXELS];
        /* Slots of 4 floats hold the two doubles of a pixel. */
        c->pixels = l->n ? (const double *)(void *)l->slots : no_pixels;
        c->n_pixels = l->n;
    }
    c->tmin = r->tmin;
    c->tmax = r->tmax;
    r->camera = c;
    rb_error e;
    uint64_t n = 0;
    if (rb_camera_count(c, &n, &e) != RB_OK) {
        rbq_error_from_library(r, RBQ_FROM_CAMERA, &e, &p->err);
        p->state = ST_FAILED;
        return -1;
    }
    if (n > lim->max_rays)
        return FAIL(413, M_CAM_VIEWPORT, -1, -1,
                    "the viewport has %llu pixels: more than %llu rays",
                    (unsigned long long)n,
                    (unsigned long long)lim->max_rays);
    r->n_camera_rays = n;
    return 0;
}

/* pairs: exactly one element list, as long as "rays". */
static int settle_pairs(rbj_parser *p, const rbq_request *r)
{
    int lists = 0, which = M_BOXES;
    for (int m = M_BOXES; m <= M_PLANES; m++) {
        if ((m == M_BOXES || RBJ_IS_SHAPE(m)) && p->lists[m].n) {
            lists++;
            which = m;
        }
    }
    if (lists > 1)
        return FAIL(422, M_MODE, -1, -1,
                    "pairs mode takes exactly one element list (boxes, "
                    "obbs, xboxes, spheres or planes)");
    size_t n = p->lists[which].n;
    uint64_t rays = r->camera ? r->n_camera_rays : r->n_rays;
    if (n != rays)
        return FAIL(422, which, -1, -1,
                    "pairs mode needs as many %s as rays (%llu rays, %zu "
                    "%s)",
                    rbj_member_names[which], (unsigned long long)rays, n,
                    rbj_member_names[which]);
    return 0;
}

static int settle_intersect(rbj_parser *p, rbq_request *r)
{
    const rbq_limits *lim = &p->opt.limits;
    int camera = (p->seen & (1u << M_CAMERA)) != 0;
    if (camera && (p->seen & (1u << M_RAYS)))
        return FAIL(422, M_CAMERA, -1, -1,
                    "\"camera\" takes the place of \"rays\": send one of "
                    "them");
    if (!camera && !(p->seen & (1u << M_RAYS)))
        return FAIL(422, M_COUNT, -1, -1,
                    "missing \"rays\" (or \"camera\")");
    unsigned elements = (1u << M_BOXES) | (1u << M_SCENE) |
                        (1u << M_OBBS) | (1u << M_XBOXES) |
                        (1u << M_SPHERES) | (1u << M_PLANES);
    if (!p->opt.scene_in_path && !(p->seen & elements))
        return FAIL(422, M_COUNT, -1, -1,
                        "missing \"boxes\" (or \"scene\", or another "
                        "element list)");
    r->mode = p->have_mode ? p->mode : RB_MODE_NEAREST;
    if (p->opt.scene_in_path) {
        if (r->mode == RB_MODE_PAIRS)
            return FAIL(422, M_MODE, -1, -1,
                            "pairs mode needs \"boxes\"; a scene query is "
                            "nearest, any, count or all");
        if (p->dims && p->dims != p->opt.scene_dims)
            return FAIL(422, M_DIMS, -1, -1,
                            "the scene has %u dims, the request %u",
                            p->opt.scene_dims, p->dims);
    }
    r->max_hits = p->max_hits ? p->max_hits : lim->default_max_hits;
    r->tmin = p->tmin;
    r->tmax = p->tmax;
    /* R6 for the request-level range, here rather than in the library, so
     * that the error names "/tmin" and not some ray that inherited it.
     * Parsing already excluded NaN and infinities other than tmax = +inf,
     * so what is left is the library's flushed comparison (R7). */
    if (!rb_ray_range_valid(r->tmin, r->tmax)) {
        char lo[RB_FLOAT_TEXT_MAX], hi[RB_FLOAT_TEXT_MAX];
        rb_float_format(r->tmin, lo);
        rb_float_format(r->tmax, hi);
        return FAIL(422, M_TMIN, -1, -1, "tmin (%s) > tmax (%s)", lo, hi);
    }
    if (settle_rays(p, r) || (camera && settle_camera(p, r)) ||
        settle_boxes(p, M_BOXES, r->dims) ||
        settle_shapes(p, r, M_OBBS, &r->shapes))
        return -1;
    r->outputs = p->outputs;
    r->boxes = p->lists[M_BOXES].slots;
    r->n_boxes = p->lists[M_BOXES].n;
    if (p->scene[0])
        r->scene = p->scene;
    if (r->mode == RB_MODE_PAIRS) {
        if (r->scene)
            return FAIL(422, M_SCENE, -1, -1,
                            "pairs mode takes \"boxes\", not a scene");
        if (settle_pairs(p, r))
            return -1;
    }
    if (r->mode == RB_MODE_ALL) {
        uint64_t most = lim->max_results / r->max_hits;
        if (r->camera && r->n_camera_rays > most)
            return FAIL(413, r->camera->pixels ? M_CAM_PIXELS : M_CAM_VIEWPORT,
                        -1, -1,
                        "more than %llu results: max_hits %u per ray",
                        (unsigned long long)lim->max_results, r->max_hits);
        if (r->n_rays > most)
            return FAIL(413, M_RAYS, (long long)most, -1,
                            "more than %llu results: max_hits %u per ray",
                            (unsigned long long)lim->max_results,
                            r->max_hits);
    }
    return 0;
}

/* A visibility body: observers and targets of x y z, the range [0, 1]
 * unless given. */
static int settle_visibility(rbj_parser *p, rbq_request *r)
{
    for (int m = M_OBSERVERS; m <= M_TARGETS; m++) {
        if (!(p->seen & (1u << m)))
            return FAIL(422, M_COUNT, -1, -1, "missing \"%s\"",
                        rbj_member_names[m]);
        rbj_list *l = &p->lists[m];
        for (size_t i = 0; i < l->n; i++)
            if (l->arity[i] != 3)
                return FAIL(422, m, (long long)i, -1, "%u numbers: %s",
                            l->arity[i], rbj_arity_text((rbj_member)m, 3));
    }
    r->tmin = (p->seen & (1u << M_TMIN)) ? p->tmin : 0;
    r->tmax = (p->seen & (1u << M_TMAX)) ? p->tmax : 1;
    if (!rb_ray_range_valid(r->tmin, r->tmax)) {
        char lo[RB_FLOAT_TEXT_MAX], hi[RB_FLOAT_TEXT_MAX];
        rb_float_format(r->tmin, lo);
        rb_float_format(r->tmax, hi);
        return FAIL(422, M_TMIN, -1, -1, "tmin (%s) > tmax (%s)", lo, hi);
    }
    r->observers = p->lists[M_OBSERVERS].slots;
    r->n_observers = p->lists[M_OBSERVERS].n;
    r->targets = p->lists[M_TARGETS].slots;
    r->n_targets = p->lists[M_TARGETS].n;
    return 0;
}

int rbj_settle(rbj_parser *p)
{
    rbq_request *r = &p->req;
    memset(r, 0, sizeof *r);
    r->body = p->opt.body;
    r->dims = p->dims                ? p->dims
              : p->opt.scene_in_path ? p->opt.scene_dims
                                     : 3;
    r->tmax = INFINITY;
    switch (p->opt.body) {
    case RBQ_INTERSECT:
        return settle_intersect(p, r);
    case RBQ_VISIBILITY:
        return settle_visibility(p, r);
    case RBQ_RENDER:
        if (!(p->seen & (1u << M_CAMERA)))
            return FAIL(422, M_COUNT, -1, -1, "missing \"camera\"");
        r->mode = RB_MODE_NEAREST;
        r->tmin = p->tmin;
        r->tmax = p->tmax;
        r->max_hits = p->opt.limits.default_max_hits;
        if (!rb_ray_range_valid(r->tmin, r->tmax))
            return FAIL(422, M_TMIN, -1, -1, "tmin > tmax");
        r->image = (rbq_image)p->image;
        return settle_camera(p, r);
    case RBQ_SCENE_CREATE: {
        unsigned lists = (1u << M_BOXES) | (1u << M_OBBS) |
                         (1u << M_XBOXES) | (1u << M_SPHERES) |
                         (1u << M_PLANES);
        if (!(p->seen & lists)) {
            return FAIL(422, M_COUNT, -1, -1,
                        "missing \"boxes\" (or \"obbs\", \"xboxes\", "
                        "\"spheres\", \"planes\")");
        }
        if (settle_boxes(p, M_BOXES, r->dims) ||
            settle_shapes(p, r, M_OBBS, &r->shapes))
            return -1;
        r->boxes = p->lists[M_BOXES].slots;
        r->n_boxes = p->lists[M_BOXES].n;
        return 0;
    }
    case RBQ_SCENE_PATCH: {
        /* "append" is a bare list of boxes, or an object of lists. */
        int object = p->append_object;
        rbj_member boxes = object ? M_APPEND_BOXES : M_APPEND;
        if (settle_set(p, r) || settle_boxes(p, boxes, r->dims) ||
            settle_shapes(p, r, M_APPEND_OBBS, &r->append_shapes))
            return -1;
        r->append_object = object;
        r->append_boxes = p->lists[boxes].slots;
        r->n_append = p->lists[boxes].n;
        return 0;
    }
    }
    return -1;
}

/* ------------------------------------------------------------------------
 * Library errors -> request errors
 */
/* A fault of a camera or of one of its pixels (rb_camera_count,
 * rb_camera_rays). */
static void camera_error(const rbq_request *req, const rb_error *lib,
                         rbq_error *out)
{
    const char *msg = lib->message;
    const char *colon = strstr(msg, ": ");
    if (colon && lib->element == RB_ELEMENT_CAMERA)
        msg = colon + 2; /* "camera: " */
    int f = lib->field;
    out->status = 422;
    out->has_pointer = 1;
    snprintf(out->detail, sizeof out->detail, "%s", msg);
    if (lib->element == RB_ELEMENT_PIXEL) {
        const rb_camera *c = req->camera;
        if (c && c->pixels) {
            if (f >= 0)
                snprintf(out->pointer, sizeof out->pointer,
                         "/camera/pixels/%llu/%d",
                         (unsigned long long)lib->index, f);
            else
                snprintf(out->pointer, sizeof out->pointer,
                         "/camera/pixels/%llu",
                         (unsigned long long)lib->index);
            return;
        }
        /* A grid pixel has no element of its own: the camera as a whole,
         * and the detail says where. */
        uint64_t w = c ? (uint64_t)c->viewport[2] : 0;
        snprintf(out->pointer, sizeof out->pointer, "/camera");
        if (w && colon)
            snprintf(out->detail, sizeof out->detail,
                     "pixel %llu (column %llu, row %llu): %s",
                     (unsigned long long)lib->index,
                     (unsigned long long)(lib->index % w),
                     (unsigned long long)(lib->index / w), colon + 2);
        return;
    }
    if (f >= 0 && f < 16)
        snprintf(out->pointer, sizeof out->pointer, "/camera/view/%d", f);
    else if (f >= 16 && f < 32)
        snprintf(out->pointer, sizeof out->pointer, "/camera/projection/%d",
                 f - 16);
    else if (f >= 32 && f < 36)
        snprintf(out->pointer, sizeof out->pointer, "/camera/viewport/%d",
                 f - 32);
    else if (f == 36)
        snprintf(out->pointer, sizeof out->pointer, "/camera/depth");
    else if (f == 37)
        snprintf(out->pointer, sizeof out->pointer, "/tmin");
    else if (f == 38)
        snprintf(out->pointer, sizeof out->pointer, "/camera/view");
    else if (f == 39)
        snprintf(out->pointer, sizeof out->pointer, "/camera/projection");
    else
        snprintf(out->pointer, sizeof out->pointer, "/camera");
}

void rbq_error_from_library(const rbq_request *req, rbq_source source,
                            const rb_error *lib, rbq_error *out)
{
    memset(out, 0, sizeof *out);
    if (lib->status == RB_EINPUT && (lib->element == RB_ELEMENT_CAMERA ||
                                     lib->element == RB_ELEMENT_PIXEL)) {
        camera_error(req, lib, out);
        return;
    }
    if ((lib->element == RB_ELEMENT_OBSERVER ||
         lib->element == RB_ELEMENT_TARGET) && lib->status == RB_EINPUT) {
        /* "observer 3: y is NaN" names /observers/3/1; a direction that
         * overflows names the target, its message both ends. */
        const char *m = lib->message, *colon = strstr(m, ": ");
        int observer = lib->element == RB_ELEMENT_OBSERVER;
        snprintf(out->detail, sizeof out->detail, "%s",
                 colon && lib->field >= 0 ? colon + 2 : m);
        out->status = 422;
        out->has_pointer = 1;
        if (lib->field >= 0)
            snprintf(out->pointer, sizeof out->pointer, "/%s/%llu/%d",
                     observer ? "observers" : "targets",
                     (unsigned long long)lib->index, lib->field);
        else
            snprintf(out->pointer, sizeof out->pointer, "/%s/%llu",
                     observer ? "observers" : "targets",
                     (unsigned long long)lib->index);
        return;
    }
    int is_box = lib->element == RB_ELEMENT_BOX;
    int is_shape = lib->element >= RB_ELEMENT_OBB &&
                   lib->element <= RB_ELEMENT_PLANE;
    /* A set entry's id out of range, or of another kind than the
     * element: the pointer names the id. */
    int set_index = source == RBQ_FROM_SET && (is_box || is_shape) &&
                    lib->status == RB_EINVAL && lib->field < 0;
    int named = lib->element != RB_ELEMENT_NONE &&
                (lib->status == RB_EINPUT || set_index);
    const char *msg = lib->message[0] ? lib->message
                                      : rb_status_str(lib->status);
    if (!named) {
        out->status = rb_http_status_of(lib->status);
        snprintf(out->detail, sizeof out->detail, "%s", msg);
        return;
    }
    /* The library says "ray 17: tmin is NaN"; the pointer says "ray 17". */
    const char *colon = strstr(msg, ": ");
    if (colon)
        msg = colon + 2;
    snprintf(out->detail, sizeof out->detail, "%s", msg);
    out->status = 422;
    out->has_pointer = 1;

    unsigned long long i = (unsigned long long)lib->index;
    int f = lib->field;
    const char *list = "rays";
    static const char *const shape_lists[] = {
        [RB_ELEMENT_OBB] = "obbs", [RB_ELEMENT_XBOX] = "xboxes",
        [RB_ELEMENT_SPHERE] = "spheres", [RB_ELEMENT_PLANE] = "planes"};
    if (is_shape && source != RBQ_FROM_SET) {
        /* A query's or create's list, or append's object form. */
        list = shape_lists[lib->element];
        snprintf(out->pointer, sizeof out->pointer, "%s/%s/%llu/%d",
                 source == RBQ_FROM_APPEND ? "/append" : "", list, i,
                 f < 0 ? 0 : f);
        return;
    }
    if (is_box || is_shape)
        list = source == RBQ_FROM_SET ? "set"
               : source == RBQ_FROM_APPEND
                   ? (req->append_object ? "append/boxes" : "append")
                   : "boxes";
    if (source == RBQ_FROM_SET)
        f = set_index ? 0 : f + 1; /* the index comes first */
    if (!is_box && f >= 0 && (unsigned)f >= 2 * req->dims && req->ray_arity &&
        i < req->n_rays && req->ray_arity[i] == 2 * req->dims) {
        /* The ray inherited the request's range. */
        snprintf(out->pointer, sizeof out->pointer, "/%s",
                 (unsigned)f == 2 * req->dims ? "tmin" : "tmax");
        return;
    }
    if (f >= 0)
        snprintf(out->pointer, sizeof out->pointer, "/%s/%llu/%d", list, i,
                 f);
    else
        snprintf(out->pointer, sizeof out->pointer, "/%s/%llu", list, i);
}
