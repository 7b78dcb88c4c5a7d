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
 *   the library's to check; rbq_error_from_library turns its verdict into
 *   the same kind of error.
 * - Threads: a parser is used by one thread at a time; parsers are
 *   independent.
 */
#ifndef RB_JSON_REQUEST_H
#define RB_JSON_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"
#include "request_model.h"

typedef struct rbj_options {
    rbq_body body;
    rbq_limits limits;
    unsigned patch_dims;           /* RBQ_SCENE_PATCH: the scene's dims */
    /* RBQ_INTERSECT of POST /v1/scenes/{id}/intersect: the boxes are the
     * scene's of the path, so "boxes" and "scene" are refused (422) and
     * not required, pairs mode is refused (422 at "/mode"), and "dims"
     * defaults to scene_dims and must equal it (422 at "/dims"). */
    int scene_in_path;
    unsigned scene_dims;           /* 2 or 3 when scene_in_path */
    const rb_allocator *allocator; /* NULL = malloc; copied */
} rbj_options;

/* Fills defaults for a body kind: default limits, patch_dims 3, no scene
 * in the path. */
void rbj_options_init(rbj_options *opt, rbq_body body);

/* The longest JSON token (a number, string or literal) a body may hold;
 * no value of the API is near it, and a longer one would have to be held
 * whole while it arrives (413). */
#define RBJ_IN_TOKEN_MAX 65536

typedef struct rbj_parser rbj_parser;

/* RB_OK, RB_EINVAL (bad options: dims, zero limits, scene_in_path with a
 * body other than RBQ_INTERSECT) or RB_ENOMEM. */
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
const rbq_error *rbj_parser_error(const rbj_parser *p);

/* The request, after rbj_parser_finish returned 0; NULL before. */
const rbq_request *rbj_parser_request(const rbj_parser *p);

#endif
