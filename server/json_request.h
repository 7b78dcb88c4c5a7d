/*
 * json_request.h - streaming parser of the JSON request bodies of SPEC
 * sections 4, 5 and 7, for the CLI and for rayboxd.
 *
 *   intersect     {"mode", "dims", "rays", "boxes" | "scene", "obbs",
 *                  "xboxes", "spheres", "planes", "tmin", "tmax",
 *                  "max_hits", "outputs"}
 *   scene create  {"boxes", "obbs", "xboxes", "spheres", "planes", "dims"}
 *   scene patch   {"set": [[id, ...element], ...],
 *                  "append": [[box], ...] | {"boxes", "obbs", ...}}
 *   render        {"camera", "image", "tmin", "tmax"}
 *   ("camera": {"view", "projection", "viewport", "depth", "pixels"} in
 *   place of "rays" in intersect; numbers read as doubles)
 *
 * Contract:
 * - Feed the body in chunks of any size, as they arrive (rbj_parser_feed),
 *   then call rbj_parser_finish. No document tree is built: numbers go
 *   straight into grow-only float32 record arrays, so memory is about the
 *   size of the records (32 bytes a ray, 24 a box), whatever the text.
 *   The same body gives the same request, or the same error, however it
 *   is split.
 * - Members may come in any order ("dims" after "rays"): each ray is kept
 *   positionally in an rb_ray-sized slot with the count of its numbers;
 *   layout (2D), per-ray ranges and defaults are settled at the end.
 *   Defaults: mode "nearest", dims 3, tmin 0, tmax +inf (also for null),
 *   max_hits from the limits (64). A ray's own tmax may be null (+inf).
 * - Numbers become float32 with one rounding (strtof of yajl's number
 *   text, C locale). A value beyond float32's range (1e39) is refused;
 *   underflow to a subnormal or zero is kept (the library flushes it, R7);
 *   -0 stays -0. Integers ("dims", "max_hits", a "set" index) must be
 *   written as plain digits.
 * - The first problem in document order stops the parse, with an HTTP-ish
 *   class and a JSON Pointer (RFC 6901) to the element:
 *     400  malformed JSON (yajl's message and byte offset), empty body,
 *          body cut short;
 *     413  over a limit (rays, boxes, numbers, all-mode results), detected
 *          while streaming, before memory grows past the limit;
 *     422  well-formed but invalid: unknown or repeated member, wrong type,
 *          shapes other than boxes in 2D or beside a scene, an obb whose
 *          quaternion is zero, an unknown "outputs" entry,
 *          wrong arity, nesting too deep, unknown mode, dims not 2 or 3,
 *          max_hits < 1, "boxes" with "scene", a scene id that is empty
 *          or longer than 128 bytes, pairs count mismatch,
 *          request-level tmin/tmax breaking R6, a number beyond float32,
 *          a "set" index that is not a non-negative integer;
 *     500  out of memory.
 *   The values of rays and boxes (R6: min > max, a ray's tmin > tmax) are
 *   the library's to check; rbj_error_from_library turns its verdict into
 *   the same kind of error.
 * - Threads: a parser is used by one thread at a time; parsers are
 *   independent.
 */
#ifndef RB_JSON_REQUEST_H
#define RB_JSON_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"

typedef enum rbj_body {
    RBJ_INTERSECT = 0,    /* POST /v1/intersect, /v1/scenes/{id}/intersect */
    RBJ_SCENE_CREATE = 1, /* POST /v1/scenes */
    RBJ_SCENE_PATCH = 2,  /* PATCH /v1/scenes/{id} */
    RBJ_VISIBILITY = 3,   /* POST /v1/scenes/{id}/visibility */
    RBJ_RENDER = 4        /* POST /v1/scenes/{id}/render */
} rbj_body;

/* The picture of a render body ("image"). */
typedef enum rbj_image {
    RBJ_IMAGE_DEPTH = 0,
    RBJ_IMAGE_NORMAL = 1,
    RBJ_IMAGE_ID = 2
} rbj_image;

typedef struct rbj_limits {
    uint64_t max_rays;         /* rays of an intersect */
    uint64_t max_boxes;        /* elements (boxes and the other kinds) of
                                  an intersect or a create; set + append
                                  of a patch */
    uint64_t max_results;      /* all mode: n_rays * max_hits */
    uint64_t max_numbers;      /* numbers in the whole body */
    uint64_t max_observers;    /* visibility: observers, and targets */
    uint64_t max_targets;
    uint32_t default_max_hits; /* when the request has no "max_hits" */
} rbj_limits;

/* Defaults: 4M rays, 1M boxes, 16M results, 64M numbers, max_hits 64,
 * 1M observers and 1M targets. */
void rbj_limits_default(rbj_limits *limits);

typedef struct rbj_options {
    rbj_body body;
    rbj_limits limits;
    unsigned patch_dims;           /* RBJ_SCENE_PATCH: the scene's dims */
    /* RBJ_INTERSECT of POST /v1/scenes/{id}/intersect: the boxes are the
     * scene's of the path, so "boxes" and "scene" are refused (422) and
     * not required, pairs mode is refused (422 at "/mode"), and "dims"
     * defaults to scene_dims and must equal it (422 at "/dims"). */
    int scene_in_path;
    unsigned scene_dims;           /* 2 or 3 when scene_in_path */
    const rb_allocator *allocator; /* NULL = malloc; copied */
} rbj_options;

/* Fills defaults for a body kind: default limits, patch_dims 3, no scene
 * in the path. */
void rbj_options_init(rbj_options *opt, rbj_body body);

/* The longest JSON token (a number, string or literal) a body may hold;
 * no value of the API is near it, and a longer one would have to be held
 * whole while it arrives (413). */
#define RBJ_IN_TOKEN_MAX 65536

#define RBJ_POINTER_MAX 160
#define RBJ_DETAIL_MAX 512

typedef struct rbj_error {
    int status;      /* 0 when none; else 400, 413, 422 or 500 */
    int has_pointer; /* 0: the error is about no element (out of memory) */
    char pointer[RBJ_POINTER_MAX]; /* "/rays/17/4"; "" = the whole body */
    char detail[RBJ_DETAIL_MAX];   /* one line, without the pointer */
    uint64_t offset; /* 400: byte offset in the body where parsing stopped */
} rbj_error;

/* The parsed body. Arrays belong to the parser and live until it is
 * destroyed; the caller may read (and modify) them. */
typedef struct rbj_request {
    rbj_body body;
    rb_mode mode;
    unsigned dims;
    uint32_t max_hits;
    float tmin, tmax;           /* request-level range, checked (R6) */
    void *rays;                 /* n_rays rb_ray (dims 3) or rb_ray2 (2),
                                   ranges filled in */
    size_t n_rays;
    const uint8_t *ray_arity;   /* numbers each ray carried: tells which
                                   rays had their own range */
    void *boxes;                /* intersect, create: rb_box or rb_box2 */
    size_t n_boxes;
    const char *scene;          /* intersect: scene id, or NULL */
    const float *observers;     /* visibility: n_observers x (x, y, z) */
    size_t n_observers;
    const float *targets;       /* visibility: n_targets x (x, y, z) */
    size_t n_targets;
    rb_shapes shapes;           /* intersect: the other kinds (3D), obbs in
                                   the axes form (quaternions converted) */
    unsigned outputs;           /* intersect: RB_OUTPUT_* */
    const uint32_t *set_index;  /* patch "set": indices ... */
    void *set_boxes;            /* ... and their new boxes */
    size_t n_set;
    void *append_boxes;         /* patch "append": its boxes (a bare list,
                                   or "boxes" of the object form) */
    size_t n_append;
    /* patch, every kind (SPEC section 7). A "set" entry is [id,
     * ...element] and the parser cannot know the id's kind: set_arity[k]
     * is the count of numbers of entry k, id included. When every entry
     * has a box's arity, set_boxes holds the boxes packed (rb_box or
     * rb_box2) as before; otherwise set_boxes is NULL and set_values
     * holds entry k's element at set_values + k * RBJ_SET_STRIDE: a box,
     * an rb_obb (quaternions converted), an rb_xbox, or 4 numbers (an
     * rb_sphere or an rb_plane: the id's kind decides). */
    const uint8_t *set_arity;
    const float *set_values;
    int append_object;          /* "append" came as an object */
    rb_shapes append_shapes;    /* its obbs, xboxes, spheres, planes (3D) */
    /* intersect, render: "camera" in place of "rays" (SPEC section 8),
     * checked with rb_camera_count (its range is the request's). rays is
     * then NULL and n_rays 0: the caller makes the n_camera_rays rays
     * with rb_camera_rays and puts them in a copy of the request (a
     * camera's request with its rays is, from then on, the same as one
     * that sent them). NULL when there is none. */
    const rb_camera *camera;
    uint64_t n_camera_rays;
    rbj_image image;            /* render */
} rbj_request;

/* Floats per "set" entry in rbj_request.set_values. */
#define RBJ_SET_STRIDE 18

typedef struct rbj_parser rbj_parser;

/* RB_OK, RB_EINVAL (bad options: dims, zero limits, scene_in_path with a
 * body other than RBJ_INTERSECT) or RB_ENOMEM. */
int rbj_parser_create(const rbj_options *opt, rbj_parser **out);
void rbj_parser_destroy(rbj_parser *p);

/* Parses the next len bytes. Returns 0, or -1 once the body is known to be
 * bad (rbj_parser_error says why); later calls then return -1 at once. */
int rbj_parser_feed(rbj_parser *p, const void *data, size_t len);
/* The same for bytes known to end the body (a Content-Length says so):
 * skips the token-boundary scan when no earlier token is still open.
 * rbj_parser_finish must still follow. */
int rbj_parser_feed_last(rbj_parser *p, const void *data, size_t len);

/* Ends the body: checks what needs the whole document and settles
 * defaults. Returns 0 and the request is ready, or -1. */
int rbj_parser_finish(rbj_parser *p);

/* The error (status 0 when none). Never NULL. */
const rbj_error *rbj_parser_error(const rbj_parser *p);

/* The request, after rbj_parser_finish returned 0; NULL before. */
const rbj_request *rbj_parser_request(const rbj_parser *p);

/* Which call of the library rejected the request's data. */
typedef enum rbj_source {
    RBJ_FROM_INTERSECT = 0, /* rb_intersect with req->rays/boxes */
    RBJ_FROM_CREATE = 1,    /* rb_scene_create with req->boxes */
    RBJ_FROM_SET = 2,       /* rb_scene_set with req->set_* */
    RBJ_FROM_APPEND = 3,    /* rb_scene_append with req->append_boxes */
    RBJ_FROM_CAMERA = 4     /* rb_camera_count / rb_camera_rays with
                               req->camera */
} rbj_source;

/* Turns a library error (rb_context_error() after the failed call) into a
 * request error. An invalid element (RB_EINPUT; a "set" index out of range)
 * becomes 422 with the pointer to the number in the body: "/rays/17/6",
 * "/boxes/3/0", "/obbs/1/6", "/set/2/0" (the id: out of range, or of
 * another kind than the element), "/set/2/4" (a value of any kind),
 * "/append/0/4" (a bare list), "/append/spheres/0/3" (the object form),
 * "/camera/view/5", "/camera/pixels/3/1", "/camera/viewport/2",
 * "/camera" (P*V singular; the w = 0 or overflow of a grid pixel, which
 * the detail names by column and row);
 * a range problem of a ray that carried no range of its own points at
 * "/tmin" or "/tmax".
 * Other statuses map through rb_http_status_of, without a pointer. The
 * detail is the library's reason without its "ray 17: " prefix. */
/* Output arrays (malloc) of the request's mode, capacity n_rays, with at
 * least one record each so that an empty batch still has arrays. Returns
 * 0, or -1 when out of memory; either way rbj_results_free releases what
 * was allocated. */
int rbj_results_alloc(const rbj_request *req, rb_results *res);
/* The bytes rbj_results_alloc takes for req (and a nearest answer's
 * kinds), for a memory budget to decide on before it allocates. */
uint64_t rbj_results_bytes(const rbj_request *req);
void rbj_results_free(rb_results *res);

void rbj_error_from_library(const rbj_request *req, rbj_source source,
                            const rb_error *lib, rbj_error *out);

#endif
