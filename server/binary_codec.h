/*
 * binary_codec.h - the binary form of requests and responses
 * (application/x-raybox), for rayboxd, its clients and the load tools.
 * docs/binary-format.md is the byte-level description; this header is the
 * code's side of it.
 *
 * Every message starts with the same 64 little-endian header bytes;
 * version 2 adds 32 more (a 96-byte header):
 *
 *   off size field
 *    0   4   magic "RBOX"
 *    4   2   version (1 or 2)
 *    6   2   header_size (64 for version 1, 96 for version 2)
 *    8   1   kind: 1 intersect request, 2 scene (create), 129 result
 *    9   1   mode (rb_mode: 0 pairs, 1 nearest, 2 any, 3 count, 4 all)
 *   10   1   dims (2 or 3)
 *   11   1   flags (request: bit 0 = each ray record carries tmin, tmax;
 *                   version 2 also bit 1 = normals wanted, bit 2 = obb
 *                   records are quaternion-form, bit 3 = a camera record
 *                   in place of the rays (see RBB_FLAG_CAMERA);
 *                   result: bit 0 = scene_version is set, bit 1 = the
 *                   query fell back from OpenCL to the CPU; version 2
 *                   also bit 2 = kinds follow, bit 3 = normals follow)
 *   12   4   u32 max_hits (request: 0 = the server's default; result: the
 *                   list length per ray that was used)
 *   16   8   u64 ray count
 *   24   8   u64 box count (result: number of `all` list entries)
 *   32   4   f32 tmin  (request: range of rays without their own)
 *   36   4   f32 tmax  (+inf allowed)
 *   40   8   u64 scene_version (result; 0 in requests)
 *   48   8   f64 elapsed_ms (result; 0 in requests)
 *   56   8   reserved, 0
 *   version 2:
 *   64   8   u64 obb count      (result: 0)
 *   72   8   u64 xbox count     (result: 0)
 *   80   8   u64 sphere count   (result: 0)
 *   88   8   u64 plane count    (result: 0)
 *
 * Requests continue with the ray records (float32: origin, dir and, with
 * flag bit 0, tmin tmax: 6/8 floats in 3D, 4/6 in 2D), then the box
 * records (min, max: 6 floats in 3D, 4 in 2D), then (version 2, 3D) the
 * obb records (15 floats: rb_obb; with flag bit 2, 10: center, half
 * extents, quaternion w x y z), xbox (18: rb_xbox), sphere (4: rb_sphere)
 * and plane records (4: rb_plane). A scene body has only boxes. Results
 * continue with per-mode arrays (see rbb_result_layout).
 *
 * Numbers are little-endian on the wire; this code supports little-endian
 * hosts only (checked at compile time), where records are copied as they
 * are: a 3D ray with its range is an rb_ray byte for byte, a 2D one an
 * rb_ray2, boxes rb_box / rb_box2, the other kinds their rb_* record, and
 * nearest/pairs results rb_hit.
 *
 * Threads: a decoder is used by one thread at a time; the rest is pure.
 */
#ifndef RB_BINARY_CODEC_H
#define RB_BINARY_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "request_model.h"
#include "raybox.h"

#define RBB_MAGIC "RBOX"
#define RBB_VERSION 1        /* boxes only */
#define RBB_HEADER_SIZE 64   /* version 1's header, and every header's
                                first part */
#define RBB_VERSION_2 2      /* every element kind, normals */
#define RBB_HEADER_SIZE_2 96 /* version 2's header */
#define RBB_HEADER_MAX RBB_HEADER_SIZE_2
#define RBB_MEDIA_TYPE "application/x-raybox"

typedef enum rbb_kind {
    RBB_KIND_INTERSECT = 1, /* POST /v1/intersect, /v1/scenes/{id}/intersect */
    RBB_KIND_SCENE = 2,     /* POST /v1/scenes */
    RBB_KIND_RESULT = 129,  /* every 200 answer in binary */
    RBB_KIND_VISIBILITY = 130 /* a visibility answer (observers x targets
                                 bits; docs/binary-format.md) */
} rbb_kind;

#define RBB_FLAG_RANGES 0x01         /* request: rays carry tmin, tmax */
#define RBB_FLAG_NORMALS 0x02        /* request v2: outputs ["normal"] */
#define RBB_FLAG_OBB_QUATERNION 0x04 /* request v2: 10-float obb records */
#define RBB_FLAG_CAMERA 0x08         /* request v2: a camera record (and
                                        ray count pixels) in place of rays */
#define RBB_FLAG_SCENE_VERSION 0x01  /* result */
#define RBB_FLAG_FELL_BACK 0x02      /* result */
#define RBB_FLAG_KINDS 0x04          /* result v2: ray count u8 kinds */
#define RBB_FLAG_HAS_NORMALS 0x08    /* result v2: ray count x 3 f32 */

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
    /* Version 2 (bytes 64-95): element counts of a request, 0 in a
     * result. */
    uint64_t n_obbs, n_xboxes, n_spheres, n_planes;
    int magic_ok; /* decode only: the first four bytes were "RBOX" */
} rbb_header;

/* Raw conversions, without any check. decode reads the 64 bytes every
 * header has (the version 2 counts become 0); decode_v2 reads a whole
 * 96-byte header. encode writes 96 bytes when h->header_size is
 * RBB_HEADER_SIZE_2, else 64, and returns how many. */
void rbb_header_decode(const uint8_t in[RBB_HEADER_SIZE], rbb_header *out);
void rbb_header_decode_v2(const uint8_t in[RBB_HEADER_SIZE_2],
                          rbb_header *out);
size_t rbb_header_encode(const rbb_header *h, uint8_t *out);

/* With RBB_FLAG_CAMERA (version 2, 3D, not with RBB_FLAG_RANGES) the
 * ray records are replaced by one camera record (SPEC section 8), all
 * little-endian:
 *     0  128  f64 view[16]        row-major, column vectors
 *   128  128  f64 projection[16]
 *   256   32  f64 viewport[4]     x, y, width, height
 *   288    4  u32 depth           0 zero_to_one, 1 minus_one_to_one
 *   292    4  u32 pixels          1: ray count pixel records follow;
 *                                 0: the whole viewport (ray count 0)
 * then ray count pixel records of 16 bytes (f64 px, f64 py). The rays
 * are then made as for a JSON "camera" (rb_camera_rays). */
#define RBB_CAMERA_RECORD_BYTES 296
#define RBB_PIXEL_RECORD_BYTES 16

/* Bytes of one ray record with the given dims and request flags, of one
 * box record, and of one record of a kind beyond boxes (rb_kind; obbs
 * depend on RBB_FLAG_OBB_QUATERNION in flags; 0 for RB_KIND_BOX or an
 * unknown kind). */
size_t rbb_ray_record_bytes(unsigned dims, unsigned flags);
size_t rbb_box_record_bytes(unsigned dims);
size_t rbb_shape_record_bytes(int kind, unsigned flags);

/* ------------------------------------------------------------------------
 * Request decoder: streaming, like the JSON parser, and with its errors
 * (rbq_error: 400 malformed, 413 over a limit, 422 invalid, 500 memory).
 */
typedef struct rbb_options {
    rbb_kind kind;        /* RBB_KIND_INTERSECT or RBB_KIND_SCENE */
    rbq_limits limits;    /* the JSON parser's limits, the same meaning */
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
 * (version 2: 96) bytes are in: structure (400), values (422: mode,
 * dims, tmin/tmax R6, pairs' one element list as long as the rays, a
 * scene query with elements, kinds beyond boxes in 2D or in a scene
 * body), counts against the limits (413; max_boxes covers every kind
 * together), and the size it announces against content_length (400) or
 * max_body (413) - all before the record arrays are allocated. Records
 * are then copied straight into them. Returns 0, or -1 once the body is
 * known to be bad (later calls return -1 at once). */
int rbb_decoder_feed(rbb_decoder *d, const void *data, size_t len);

/* Ends the body: 0 when exactly the announced bytes came, else -1 (400:
 * short header, body cut short). Quaternion-form obbs are turned into
 * rb_obb here (rb_obb_from_quaternion): a quaternion component that is
 * not finite is 422 at /obbs/i/6..9, a zero quaternion 422 at
 * /obbs/i/6. */
int rbb_decoder_finish(rbb_decoder *d);

const rbq_error *rbb_decoder_error(const rbb_decoder *d);

/* The request after rbb_decoder_finish returned 0, in the JSON parser's
 * form (body RBQ_INTERSECT or RBQ_SCENE_CREATE; ray_arity NULL, scene
 * NULL; shapes, outputs and camera from a version 2 body); arrays belong
 * to the decoder. NULL before. */
const rbq_request *rbb_decoder_request(const rbb_decoder *d);

/* The header as received (valid once the whole header came; NULL
 * before). */
const rbb_header *rbb_decoder_header(const rbb_decoder *d);

/* The version of the binary answer to a request: the request's own when
 * it came in binary (request_version 1 or 2), else (JSON, 0) version 2
 * when the request has kinds beyond boxes or outputs - what version 1
 * cannot carry - and 1 otherwise. */
unsigned rbb_result_version(const rbq_request *req,
                            unsigned request_version);

/* ------------------------------------------------------------------------
 * Results. After the header, per mode:
 *   pairs, nearest  n_rays rb_hit (16 bytes: f32 t_enter, f32 t_exit,
 *                   i32 box, u8 hit, u8 face, u8 exit_face, u8 0);
 *                   version 2 then, with RBB_FLAG_KINDS, n_rays u8
 *                   (rb_kind, RB_KIND_NONE for a miss) and, with
 *                   RBB_FLAG_HAS_NORMALS, n_rays x 3 f32 (NaN x 3: none)
 *   any             n_rays u8 (0 or 1)
 *   count           n_rays u32
 *   all             n_rays u32 (hits per ray, may exceed max_hits: the
 *                   list was truncated), then the lists one after the
 *                   other, min(count, max_hits) rb_list_hit (12 bytes:
 *                   i32 box, f32 t_enter, f32 t_exit) per ray.
 */
typedef struct rbb_result_info {
    unsigned version;         /* RBB_VERSION or RBB_VERSION_2; 0 = 1 */
    rb_mode mode;
    unsigned dims;
    size_t n_rays;
    uint32_t max_hits;
    uint64_t list_entries;    /* all: after rbb_compact_lists */
    int has_scene_version;
    uint64_t scene_version;
    int fell_back;
    double elapsed_ms;
    int has_kinds;            /* version 2, pairs/nearest: res->kinds */
    int has_normals;          /* version 2, pairs/nearest: res->normals */
} rbb_result_info;

/* Writes the answer's header at out (64 bytes for version 1, 96 for 2:
 * room for RBB_HEADER_MAX does for both) and returns its size. */
size_t rbb_result_header(const rbb_result_info *info, uint8_t *out);

/* all mode: moves each ray's valid entries of res->list (stride max_hits)
 * next to each other, in place, and returns how many there are. */
uint64_t rbb_compact_lists(rb_results *res, size_t n_rays,
                           uint32_t max_hits);

/* The result's arrays after the header, in order: (pointer, bytes)
 * pairs in part[] and bytes[]; returns how many. At most RBB_PARTS_MAX,
 * and at most 2 for a version 1 answer. all mode expects compacted
 * lists. */
#define RBB_PARTS_MAX 3
int rbb_result_layout(const rbb_result_info *info, const rb_results *res,
                      const void **part, size_t *bytes);

#endif
