/*
 * request_model.h - a parsed request, whichever form it came in: what the
 * JSON parser (json_request.h) and the binary decoder (binary_codec.h)
 * fill, and what rayboxd's handlers and jobs and the batch CLI read.
 * Also the limits both forms enforce while reading, the error they
 * report (an HTTP-ish status and a JSON Pointer to the element), the
 * mapping of a library refusal to such an error, and the output arrays
 * a request's answer needs.
 */
#ifndef RB_REQUEST_MODEL_H
#define RB_REQUEST_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"

typedef enum rbq_body {
    RBQ_INTERSECT = 0,    /* POST /v1/intersect, /v1/scenes/{id}/intersect */
    RBQ_SCENE_CREATE = 1, /* POST /v1/scenes */
    RBQ_SCENE_PATCH = 2,  /* PATCH /v1/scenes/{id} */
    RBQ_VISIBILITY = 3,   /* POST /v1/scenes/{id}/visibility */
    RBQ_RENDER = 4        /* POST /v1/scenes/{id}/render */
} rbq_body;

/* The picture of a render body ("image"). */
typedef enum rbq_image {
    RBQ_IMAGE_DEPTH = 0,
    RBQ_IMAGE_NORMAL = 1,
    RBQ_IMAGE_ID = 2
} rbq_image;

typedef struct rbq_limits {
    uint64_t max_rays;         /* rays of an intersect */
    uint64_t max_boxes;        /* elements (boxes and the other kinds) of
                                  an intersect or a create; set + append
                                  of a patch */
    uint64_t max_results;      /* all mode: n_rays * max_hits */
    uint64_t max_numbers;      /* numbers in the whole body */
    uint64_t max_observers;    /* visibility: observers, and targets */
    uint64_t max_targets;
    uint32_t default_max_hits; /* when the request has no "max_hits" */
} rbq_limits;

/* Defaults: 4M rays, 1M boxes, 16M results, 64M numbers, max_hits 64,
 * 1M observers and 1M targets. */
void rbq_limits_default(rbq_limits *limits);

#define RBQ_POINTER_MAX 160
#define RBQ_DETAIL_MAX 512

typedef struct rbq_error {
    int status;      /* 0 when none; else 400, 413, 422 or 500 */
    int has_pointer; /* 0: the error is about no element (out of memory) */
    char pointer[RBQ_POINTER_MAX]; /* "/rays/17/4"; "" = the whole body */
    char detail[RBQ_DETAIL_MAX];   /* one line, without the pointer */
    uint64_t offset; /* 400: byte offset in the body where parsing stopped */
} rbq_error;

/* The parsed body. Arrays belong to the parser and live until it is
 * destroyed; the caller may read (and modify) them. */
typedef struct rbq_request {
    rbq_body body;
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
     * holds entry k's element at set_values + k * RBQ_SET_STRIDE: a box,
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
    rbq_image image;            /* render */
} rbq_request;

/* Floats per "set" entry in rbq_request.set_values. */
#define RBQ_SET_STRIDE 18

/* Which call of the library rejected the request's data. */
typedef enum rbq_source {
    RBQ_FROM_INTERSECT = 0, /* rb_intersect with req->rays/boxes */
    RBQ_FROM_CREATE = 1,    /* rb_scene_create with req->boxes */
    RBQ_FROM_SET = 2,       /* rb_scene_set with req->set_* */
    RBQ_FROM_APPEND = 3,    /* rb_scene_append with req->append_boxes */
    RBQ_FROM_CAMERA = 4     /* rb_camera_count / rb_camera_rays with
                               req->camera */
} rbq_source;

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
 * 0, or -1 when out of memory; either way rbq_results_free releases what
 * was allocated. */
int rbq_results_alloc(const rbq_request *req, rb_results *res);
/* The bytes rbq_results_alloc takes for req (and a nearest answer's
 * kinds), for a memory budget to decide on before it allocates. */
uint64_t rbq_results_bytes(const rbq_request *req);
void rbq_results_free(rb_results *res);

void rbq_error_from_library(const rbq_request *req, rbq_source source,
                            const rb_error *lib, rbq_error *out);

#endif
