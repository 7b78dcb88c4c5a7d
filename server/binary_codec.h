/*
 * binary_codec.h - the binary form of requests and responses
 * (application/x-raybox), for rayboxd, its clients and the load tools.
 * docs/binary-format.md is the byte-level description; this header is the
 * code's side of it.
 *
 * Every message starts with the same 64-byte little-endian header:
 *
 *   off size field
 *    0   4   magic "RBOX"
 *    4   2   version (1)
 *    6   2   header_size (64)
 *    8   1   kind: 1 intersect request, 2 scene (create), 129 result
 *    9   1   mode (rb_mode: 0 pairs, 1 nearest, 2 any, 3 count, 4 all)
 *   10   1   dims (2 or 3)
 *   11   1   flags (request: bit 0 = each ray record carries tmin, tmax;
 *                   result: bit 0 = scene_version is set, bit 1 = the
 *                   query fell back from OpenCL to the CPU)
 *   12   4   u32 max_hits (request: 0 = the server's default; result: the
 *                   list length per ray that was used)
 *   16   8   u64 ray count
 *   24   8   u64 box count (result: number of `all` list entries)
 *   32   4   f32 tmin  (request: range of rays without their own)
 *   36   4   f32 tmax  (+inf allowed)
 *   40   8   u64 scene_version (result; 0 in requests)
 *   48   8   f64 elapsed_ms (result; 0 in requests)
 *   56   8   reserved, 0
 *
 * Requests continue with the ray records (float32: origin, dir and, with
 * flag bit 0, tmin tmax: 6/8 floats in 3D, 4/6 in 2D), then the box
 * records (min, max: 6 floats in 3D, 4 in 2D). A scene body has only
 * boxes. Results continue with per-mode arrays (see rbb_result_layout).
 *
 * Numbers are little-endian on the wire; this code supports little-endian
 * hosts only (checked at compile time), where records are copied as they
 * are: a 3D ray with its range is an rb_ray byte for byte, a 2D one an
 * rb_ray2, boxes rb_box / rb_box2, and nearest/pairs results rb_hit.
 *
 * Threads: a decoder is used by one thread at a time; the rest is pure.
 */
#ifndef RB_BINARY_CODEC_H
#define RB_BINARY_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "json_request.h"
#include "raybox.h"

#define RBB_MAGIC "RBOX"
#define RBB_VERSION 1
#define RBB_HEADER_SIZE 64
#define RBB_MEDIA_TYPE "application/x-raybox"

typedef enum rbb_kind {
    RBB_KIND_INTERSECT = 1, /* POST /v1/intersect, /v1/scenes/{id}/intersect */
    RBB_KIND_SCENE = 2,     /* POST /v1/scenes */
    RBB_KIND_RESULT = 129   /* every 200 answer in binary */
} rbb_kind;

#define RBB_FLAG_RANGES 0x01        /* request: rays carry tmin, tmax */
#define RBB_FLAG_SCENE_VERSION 0x01 /* result */
#define RBB_FLAG_FELL_BACK 0x02     /* result */

typedef struct rbb_header {
    uint16_t version;
    uint16_t header_size;
    uint8_t kind;
    uint8_t mode;
    uint8_t dims;
    uint8_t flags;
    uint32_t max_hits;
    uint64_t n_rays;
    uint64_t n_boxes;
    float tmin, tmax;
    uint64_t scene_version;
    double elapsed_ms;
    uint64_t reserved;
    int magic_ok; /* decode only: the first four bytes were "RBOX" */
} rbb_header;

/* Raw conversions, without any check. */
void rbb_header_decode(const uint8_t in[RBB_HEADER_SIZE], rbb_header *out);
void rbb_header_encode(const rbb_header *h, uint8_t out[RBB_HEADER_SIZE]);

/* Bytes of one ray record with the given dims and request flags, and of
 * one box record. */
size_t rbb_ray_record_bytes(unsigned dims, unsigned flags);
size_t rbb_box_record_bytes(unsigned dims);

/* ------------------------------------------------------------------------
 * Request decoder: streaming, like the JSON parser, and with its errors
 * (rbj_error: 400 malformed, 413 over a limit, 422 invalid, 500 memory).
 */
typedef struct rbb_options {
    rbb_kind kind;        /* RBB_KIND_INTERSECT or RBB_KIND_SCENE */
    rbj_limits limits;    /* the JSON parser's limits, the same meaning */
    int scene_in_path;    /* intersect of /v1/scenes/{id}: no boxes */
    unsigned scene_dims;  /* ... and the scene's dims */
    uint64_t content_length; /* declared body size, or RBB_LENGTH_UNKNOWN */
    uint64_t max_body;    /* bodies without a length: most bytes taken */
} rbb_options;

#define RBB_LENGTH_UNKNOWN UINT64_MAX

/* Defaults: intersect, default limits, length unknown, max_body 256 MiB. */
void rbb_options_init(rbb_options *opt, rbb_kind kind);

typedef struct rbb_decoder rbb_decoder;

/* RB_OK, RB_EINVAL (bad options) or RB_ENOMEM. */
int rbb_decoder_create(const rbb_options *opt, rbb_decoder **out);
void rbb_decoder_destroy(rbb_decoder *d);

/* Takes the next len bytes. The header is checked as soon as its 64
 * bytes are in: structure (400), values (422: mode, dims, tmin/tmax R6,
 * pairs counts, a scene query with boxes), counts against the limits
 * (413), and the size it announces against content_length (400) or
 * max_body (413) - all before the record arrays are allocated. Records
 * are then copied straight into them. Returns 0, or -1 once the body is
 * known to be bad (later calls return -1 at once). */
int rbb_decoder_feed(rbb_decoder *d, const void *data, size_t len);

/* Ends the body: 0 when exactly the announced bytes came, else -1 (400:
 * short header, body cut short). */
int rbb_decoder_finish(rbb_decoder *d);

const rbj_error *rbb_decoder_error(const rbb_decoder *d);

/* The request after rbb_decoder_finish returned 0, in the JSON parser's
 * form (body RBJ_INTERSECT or RBJ_SCENE_CREATE; ray_arity NULL, scene
 * NULL); arrays belong to the decoder. NULL before. */
const rbj_request *rbb_decoder_request(const rbb_decoder *d);

/* The header as received (valid once 64 bytes came; NULL before). */
const rbb_header *rbb_decoder_header(const rbb_decoder *d);

/* ------------------------------------------------------------------------
 * Results. After the header, per mode:
 *   pairs, nearest  n_rays rb_hit (16 bytes: f32 t_enter, f32 t_exit,
 *                   i32 box, u8 hit, u8 face, u8 exit_face, u8 0)
 *   any             n_rays u8 (0 or 1)
 *   count           n_rays u32
 *   all             n_rays u32 (hits per ray, may exceed max_hits: the
 *                   list was truncated), then the lists one after the
 *                   other, min(count, max_hits) rb_list_hit (12 bytes:
 *                   i32 box, f32 t_enter, f32 t_exit) per ray.
 */
typedef struct rbb_result_info {
    rb_mode mode;
    unsigned dims;
    size_t n_rays;
    uint32_t max_hits;
    uint64_t list_entries;    /* all: after rbb_compact_lists */
    int has_scene_version;
    uint64_t scene_version;
    int fell_back;
    double elapsed_ms;
} rbb_result_info;

void rbb_result_header(const rbb_result_info *info,
                       uint8_t out[RBB_HEADER_SIZE]);

/* all mode: moves each ray's valid entries of res->list (stride max_hits)
 * next to each other, in place, and returns how many there are. */
uint64_t rbb_compact_lists(rb_results *res, size_t n_rays,
                           uint32_t max_hits);

/* The result's arrays after the header, in order: up to two (pointer,
 * bytes) pairs; returns how many. all mode expects compacted lists. */
int rbb_result_layout(const rbb_result_info *info, const rb_results *res,
                      const void *part[2], size_t bytes[2]);

#endif
