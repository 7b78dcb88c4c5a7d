/*
 * binary_codec.c - see binary_codec.h and docs/binary-format.md.
 */
#include "binary_codec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_cache.h"
#include "float_text.h"

/* Records are copied as they are: the wire is little-endian. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the binary codec copies little-endian records as they are"
#endif

_Static_assert(sizeof(rb_ray) == 32 && sizeof(rb_ray2) == 24,
               "a ray record with its range is the library's record");
_Static_assert(sizeof(rb_box) == 24 && sizeof(rb_box2) == 16,
               "a box record is the library's record");
_Static_assert(sizeof(rb_obb) == 60 && sizeof(rb_xbox) == 72 &&
                   sizeof(rb_sphere) == 16 && sizeof(rb_plane) == 16,
               "a record of another kind is the library's record");
_Static_assert(sizeof(rb_hit) == 16 && sizeof(rb_list_hit) == 12,
               "result records are the library's");

/* ------------------------------------------------------------------------
 * Header
 */
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

void rbb_header_decode(const uint8_t in[RBB_HEADER_SIZE], rbb_header *h)
{
    memset(h, 0, sizeof *h);
    h->magic_ok = memcmp(in, RBB_MAGIC, 4) == 0;
    h->version = get16(in + 4);
    h->header_size = get16(in + 6);
    h->kind = in[8];
    h->mode = in[9];
    h->dims = in[10];
    h->flags = in[11];
    h->max_hits = get32(in + 12);
    h->n_rays = get64(in + 16);
    h->n_boxes = get64(in + 24);
    memcpy(&h->tmin, in + 32, 4);
    memcpy(&h->tmax, in + 36, 4);
    h->scene_version = get64(in + 40);
    memcpy(&h->elapsed_ms, in + 48, 8);
    h->reserved = get64(in + 56);
}

void rbb_header_decode_v2(const uint8_t in[RBB_HEADER_SIZE_2], rbb_header *h)
{
    rbb_header_decode(in, h);
    h->n_obbs = get64(in + 64);
    h->n_xboxes = get64(in + 72);
    h->n_spheres = get64(in + 80);
    h->n_planes = get64(in + 88);
}

size_t rbb_header_encode(const rbb_header *h, uint8_t *out)
{
    memset(out, 0, RBB_HEADER_SIZE);
    memcpy(out, RBB_MAGIC, 4);
    memcpy(out + 4, &h->version, 2);
    memcpy(out + 6, &h->header_size, 2);
    out[8] = h->kind;
    out[9] = h->mode;
    out[10] = h->dims;
    out[11] = h->flags;
    memcpy(out + 12, &h->max_hits, 4);
    memcpy(out + 16, &h->n_rays, 8);
    memcpy(out + 24, &h->n_boxes, 8);
    memcpy(out + 32, &h->tmin, 4);
    memcpy(out + 36, &h->tmax, 4);
    memcpy(out + 40, &h->scene_version, 8);
    memcpy(out + 48, &h->elapsed_ms, 8);
    memcpy(out + 56, &h->reserved, 8);
    if (h->header_size != RBB_HEADER_SIZE_2)
        return RBB_HEADER_SIZE;
    memcpy(out + 64, &h->n_obbs, 8);
    memcpy(out + 72, &h->n_xboxes, 8);
    memcpy(out + 80, &h->n_spheres, 8);
    memcpy(out + 88, &h->n_planes, 8);
    return RBB_HEADER_SIZE_2;
}

size_t rbb_ray_record_bytes(unsigned dims, unsigned flags)
{
    return sizeof(float) * (2 * dims + ((flags & RBB_FLAG_RANGES) ? 2 : 0));
}

size_t rbb_box_record_bytes(unsigned dims)
{
    return sizeof(float) * 2 * dims;
}

size_t rbb_shape_record_bytes(int kind, unsigned flags)
{
    switch (kind) {
    case RB_KIND_OBB:
        return (flags & RBB_FLAG_OBB_QUATERNION) ? 10 * sizeof(float)
                                                 : sizeof(rb_obb);
    case RB_KIND_XBOX:
        return sizeof(rb_xbox);
    case RB_KIND_SPHERE:
        return sizeof(rb_sphere);
    case RB_KIND_PLANE:
        return sizeof(rb_plane);
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------------
 * Decoder
 *
 * The body after the header is a run of sections, one per record array,
 * in this order; each is copied into an array of its library records.
 * Where a wire record is shorter than its record (a ray without its
 * range, an obb by quaternion) it is the record's first bytes, and the
 * rest is filled when the record is complete (rays) or at the end
 * (quaternions, which may be refused).
 */
enum { SEC_CAMERA, SEC_PIXELS, SEC_RAYS, SEC_BOXES, SEC_OBBS, SEC_XBOXES,
       SEC_SPHERES, SEC_PLANES, SEC_COUNT };

/* The JSON member of each section, for pointers and messages. */
static const char *const section_names[SEC_COUNT] = {
    "camera", "camera/pixels", "rays", "boxes", "obbs", "xboxes", "spheres",
    "planes"};

typedef struct section {
    uint64_t n;     /* records */
    size_t wire;    /* bytes of one record on the wire */
    size_t mem;     /* ... and in memory */
    uint64_t bytes; /* n * wire */
    uint8_t *data;  /* n * mem */
} section;

struct rbb_decoder {
    rbb_options opt;
    uint8_t head[RBB_HEADER_MAX];
    size_t head_len;
    size_t head_size;    /* 64 until the version says otherwise */
    rbb_header h;
    uint64_t pos;        /* bytes after the header taken so far */
    uint64_t end;        /* bytes after the header the header announces */
    section sec[SEC_COUNT];
    int cur;             /* the section pos is in */
    uint64_t sec_start;  /* pos where it starts */
    rbq_error err;
    rb_camera camera;    /* RBB_FLAG_CAMERA, at the end */
    int have_header;     /* h is decoded */
    int ready;
    rbq_request req;
};

void rbb_options_init(rbb_options *opt, rbb_kind kind)
{
    memset(opt, 0, sizeof *opt);
    opt->kind = kind;
    rbq_limits_default(&opt->limits);
    opt->content_length = RBB_LENGTH_UNKNOWN;
    opt->max_body = 256u << 20;
}

int rbb_decoder_create(const rbb_options *opt, rbb_decoder **out)
{
    *out = NULL;
    if ((opt->kind != RBB_KIND_INTERSECT && opt->kind != RBB_KIND_SCENE) ||
        !opt->limits.max_rays || !opt->limits.max_boxes ||
        !opt->limits.max_results || !opt->limits.default_max_hits ||
        (opt->scene_in_path &&
         (opt->kind != RBB_KIND_INTERSECT ||
          (opt->scene_dims != 2 && opt->scene_dims != 3))))
        return RB_EINVAL;
    rbb_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return RB_ENOMEM;
    d->opt = *opt;
    d->head_size = RBB_HEADER_SIZE;
    *out = d;
    return RB_OK;
}

void rbb_decoder_destroy(rbb_decoder *d)
{
    if (!d)
        return;
    for (int s = 0; s < SEC_COUNT; s++)
        rbc_block_free(d->sec[s].data);
    free(d);
}

__attribute__((format(printf, 4, 5)))
static int fail(rbb_decoder *d, int status, const char *pointer,
                const char *fmt, ...)
{
    if (d->err.status)
        return -1;
    d->err.status = status;
    d->err.has_pointer = pointer != NULL;
    snprintf(d->err.pointer, sizeof d->err.pointer, "%s",
             pointer ? pointer : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err.detail, sizeof d->err.detail, fmt, ap);
    va_end(ap);
    d->err.offset = d->head_size + d->pos;
    return -1;
}

/* "/obbs" and the like. */
static const char *list_pointer(int sec, char *buf, size_t cap)
{
    snprintf(buf, cap, "/%s", section_names[sec]);
    return buf;
}

/* Magic, version and header size, from the first 64 bytes: they say how
 * long the header is. */
static int check_version(rbb_decoder *d)
{
    const uint8_t *in = d->head;
    uint16_t version = get16(in + 4), size = get16(in + 6);
    if (memcmp(in, RBB_MAGIC, 4) != 0)
        return fail(d, 400, "", "not a raybox binary body: the first four "
                                "bytes must be \"RBOX\"");
    if (version != RBB_VERSION && version != RBB_VERSION_2)
        return fail(d, 400, "", "binary format version %u is not "
                                "supported (this server reads %d and %d)",
                    version, RBB_VERSION, RBB_VERSION_2);
    unsigned want = version == RBB_VERSION ? RBB_HEADER_SIZE
                                           : RBB_HEADER_SIZE_2;
    if (size != want)
        return fail(d, 400, "", "header_size %u: version %u has a %u-byte "
                                "header",
                    size, version, want);
    d->head_size = want;
    return 0;
}

/* The fields of the header that the request kind does not use must be 0:
 * a later version may give them a meaning. */
static int check_structure(rbb_decoder *d, const rbb_header *h)
{
    if (h->kind != d->opt.kind)
        return fail(d, 400, "", "kind %u: this route takes kind %d (%s)",
                    h->kind, (int)d->opt.kind,
                    d->opt.kind == RBB_KIND_SCENE ? "scene" : "intersect");
    static const uint8_t zeros[24];
    if (memcmp(d->head + 40, zeros, sizeof zeros) != 0)
        return fail(d, 400, "", "header bytes 40-63 are reserved and "
                                "must be 0 in a request");
    if (d->opt.kind == RBB_KIND_SCENE) {
        uint32_t tmin_bits, tmax_bits;
        memcpy(&tmin_bits, d->head + 32, 4);
        memcpy(&tmax_bits, d->head + 36, 4);
        if (h->mode || h->flags || h->max_hits || h->n_rays || tmin_bits ||
            tmax_bits)
            return fail(d, 400, "", "a scene body uses only dims and the "
                                    "box count; header bytes 9, 11-23 and "
                                    "32-39 must be 0");
        return 0;
    }
    unsigned known = h->version == RBB_VERSION
                         ? RBB_FLAG_RANGES
                         : RBB_FLAG_RANGES | RBB_FLAG_NORMALS |
                               RBB_FLAG_OBB_QUATERNION | RBB_FLAG_CAMERA;
    if (h->flags & ~known)
        return fail(d, 400, "", "unknown flags 0x%02x for version %u",
                    h->flags & ~known, h->version);
    if ((h->flags & RBB_FLAG_CAMERA) && (h->flags & RBB_FLAG_RANGES))
        return fail(d, 400, "", "flags CAMERA and RANGES exclude each "
                                "other: a camera's rays take the header's "
                                "range");
    return 0;
}

/* R6 for the request-level range, as the JSON parser checks it. */
static int check_range(rbb_decoder *d, const rbb_header *h)
{
    char a[RB_FLOAT_TEXT_MAX], b[RB_FLOAT_TEXT_MAX];
    if (!isfinite(h->tmin))
        return fail(d, 422, "/tmin", "tmin must be finite");
    if (isnan(h->tmax) || h->tmax == -INFINITY)
        return fail(d, 422, "/tmax", "tmax must be a number or +inf");
    if (!rb_ray_range_valid(h->tmin, h->tmax)) { /* flushed, R7 */
        rb_float_format(h->tmin, a);
        rb_float_format(h->tmax, b);
        return fail(d, 422, "/tmin", "tmin (%s) > tmax (%s)", a, b);
    }
    return 0;
}

/* The element counts against --max-boxes, all kinds together, in id
 * order: the list that goes over is named, as the JSON parser does. */
static int check_elements(rbb_decoder *d)
{
    uint64_t max = d->opt.limits.max_boxes, sum = 0;
    char ptr[16];
    for (int s = SEC_BOXES; s < SEC_COUNT; s++) {
        uint64_t n = d->sec[s].n;
        if (n > max - sum)
            return s == SEC_BOXES
                       ? fail(d, 413, "/boxes", "%llu boxes: at most %llu",
                              (unsigned long long)n,
                              (unsigned long long)max)
                       : fail(d, 413, list_pointer(s, ptr, sizeof ptr),
                              "more than %llu elements (boxes, obbs, "
                              "xboxes, spheres and planes together)",
                              (unsigned long long)max);
        sum += n;
    }
    return 0;
}

/* pairs: exactly one element list, as long as the rays. */
static int check_pairs(rbb_decoder *d, const rbb_header *h)
{
    int lists = 0, which = SEC_BOXES;
    char ptr[16];
    for (int s = SEC_BOXES; s < SEC_COUNT; s++)
        if (d->sec[s].n) {
            lists++;
            which = s;
        }
    if (lists > 1)
        return fail(d, 422, "/mode", "pairs mode takes exactly one element "
                                     "list (boxes, obbs, xboxes, spheres "
                                     "or planes)");
    if (d->sec[which].n != h->n_rays)
        return fail(d, 422, list_pointer(which, ptr, sizeof ptr),
                    "pairs mode needs as many %s as rays (%llu rays, %llu "
                    "%s)",
                    section_names[which], (unsigned long long)h->n_rays,
                    (unsigned long long)d->sec[which].n,
                    section_names[which]);
    return 0;
}

static int check_values(rbb_decoder *d, const rbb_header *h)
{
    const rbq_limits *lim = &d->opt.limits;
    char ptr[16];
    int shape = 0; /* the first kind beyond boxes the body has */
    for (int s = SEC_OBBS; s < SEC_COUNT && !shape; s++)
        if (d->sec[s].n)
            shape = s;
    if (h->dims != 2 && h->dims != 3)
        return fail(d, 422, "/dims", "dims must be 2 or 3, not %u", h->dims);
    if (d->opt.kind == RBB_KIND_SCENE) {
        if (shape)
            return fail(d, 422, list_pointer(shape, ptr, sizeof ptr),
                        "a scene body takes boxes only, not %s",
                        section_names[shape]);
        return check_elements(d);
    }
    if (h->mode > RB_MODE_ALL)
        return fail(d, 422, "/mode", "unknown mode %u: 0 pairs, 1 nearest, "
                                     "2 any, 3 count, 4 all",
                    h->mode);
    if (check_range(d, h))
        return -1;
    int camera = (h->flags & RBB_FLAG_CAMERA) != 0;
    if (camera && h->dims != 3)
        return fail(d, 422, "/dims", "a camera makes 3D rays; dims must be "
                                     "3, not %u", h->dims);
    if (shape && h->dims != 3)
        return fail(d, 422, list_pointer(shape, ptr, sizeof ptr),
                    "2D requests take boxes only; \"%s\" are 3D",
                    section_names[shape]);
    if (d->opt.scene_in_path) {
        if (h->mode == RB_MODE_PAIRS)
            return fail(d, 422, "/mode", "pairs mode needs boxes; a scene "
                                         "query is nearest, any, count or "
                                         "all");
        if (h->dims != d->opt.scene_dims)
            return fail(d, 422, "/dims", "the scene has %u dims, the "
                                         "request %u",
                        d->opt.scene_dims, h->dims);
        if (h->n_boxes)
            return fail(d, 422, "/boxes", "the boxes are the scene's of the "
                                          "path; the box count must be 0");
        if (shape)
            return fail(d, 422, list_pointer(shape, ptr, sizeof ptr),
                        "the elements are the scene's of the path; the %s "
                        "count must be 0",
                        section_names[shape]);
    }
    if (h->n_rays > lim->max_rays)
        return fail(d, 413, camera ? "/camera/pixels" : "/rays",
                    "%llu %s: at most %llu", (unsigned long long)h->n_rays,
                    camera ? "pixels" : "rays",
                    (unsigned long long)lim->max_rays);
    if (check_elements(d))
        return -1;
    uint32_t max_hits = h->max_hits ? h->max_hits : lim->default_max_hits;
    if (h->mode == RB_MODE_ALL && h->n_rays > lim->max_results / max_hits)
        return fail(d, 413, camera ? "/camera/pixels" : "/rays",
                    "more than %llu results: max_hits %u per ray",
                    (unsigned long long)lim->max_results, max_hits);
    /* A camera's ray count is known at the end (settle_camera). */
    if (h->mode == RB_MODE_PAIRS && !camera && check_pairs(d, h))
        return -1;
    return 0;
}

/* The size the header announces against what the body can be. */
static int check_size(rbb_decoder *d, const rbb_header *h)
{
    /* The counts are within the limits (at most 2^32 or so in practice);
     * the products are still checked, limits being configurable. */
    uint64_t total = 0;
    for (int s = 0; s < SEC_COUNT; s++) {
        section *c = &d->sec[s];
        if (__builtin_mul_overflow(c->n, (uint64_t)c->wire, &c->bytes) ||
            __builtin_add_overflow(total, c->bytes, &total))
            return fail(d, 413, "", "the header announces more bytes than "
                                    "fit in 64 bits");
    }
    uint64_t all;
    if (__builtin_add_overflow(total, (uint64_t)d->head_size, &all))
        return fail(d, 413, "", "the header announces more bytes than "
                                "fit in 64 bits");
    uint64_t cl = d->opt.content_length;
    if (cl != RBB_LENGTH_UNKNOWN && all != cl)
        return fail(d, 400, "", "the header announces %llu bytes (%llu "
                                "rays, %llu boxes, %llu other elements); "
                                "Content-Length is %llu",
                    (unsigned long long)all,
                    (unsigned long long)h->n_rays,
                    (unsigned long long)h->n_boxes,
                    (unsigned long long)(h->n_obbs + h->n_xboxes +
                                         h->n_spheres + h->n_planes),
                    (unsigned long long)cl);
    if (cl == RBB_LENGTH_UNKNOWN && all > d->opt.max_body)
        return fail(d, 413, "", "the header announces %llu bytes: at most "
                                "%llu",
                    (unsigned long long)all,
                    (unsigned long long)d->opt.max_body);
    d->end = total;
    return 0;
}

static int take_header(rbb_decoder *d)
{
    rbb_header *h = &d->h;
    if (d->head_size == RBB_HEADER_SIZE_2)
        rbb_header_decode_v2(d->head, h);
    else
        rbb_header_decode(d->head, h);
    d->have_header = 1;
    unsigned dims = h->dims == 2 ? 2 : 3;
    int camera = d->opt.kind == RBB_KIND_INTERSECT &&
                 (h->flags & RBB_FLAG_CAMERA);
    const uint64_t counts[SEC_COUNT] = {
        camera ? 1 : 0, camera ? h->n_rays : 0, camera ? 0 : h->n_rays,
        h->n_boxes,     h->n_obbs,  h->n_xboxes, h->n_spheres, h->n_planes};
    const size_t mem[SEC_COUNT] = {
        RBB_CAMERA_RECORD_BYTES, RBB_PIXEL_RECORD_BYTES,
        dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2),
        rbb_box_record_bytes(dims), sizeof(rb_obb), sizeof(rb_xbox),
        sizeof(rb_sphere), sizeof(rb_plane)};
    for (int s = 0; s < SEC_COUNT; s++) {
        section *c = &d->sec[s];
        c->n = counts[s];
        c->mem = mem[s];
        c->wire = s <= SEC_PIXELS  ? mem[s]
                  : s == SEC_RAYS  ? rbb_ray_record_bytes(dims, h->flags)
                  : s == SEC_BOXES ? rbb_box_record_bytes(dims)
                                   : rbb_shape_record_bytes(
                                         RB_KIND_OBB + (s - SEC_OBBS),
                                         h->flags);
    }
    if (check_structure(d, h) || check_values(d, h) || check_size(d, h))
        return -1;
    /* Only now, with every count checked, is memory taken. */
    for (int s = 0; s < SEC_COUNT; s++) {
        section *c = &d->sec[s];
        if (c->n && !(c->data = rbc_block_alloc((size_t)c->n * c->mem)))
            return fail(d, 500, NULL, "out of memory for %llu %s",
                        (unsigned long long)c->n, section_names[s]);
    }
    return 0;
}

/* Record k of a section has all its wire bytes: a ray without its own
 * range gets the request's. */
static void complete_record(rbb_decoder *d, int s, size_t k)
{
    const section *c = &d->sec[s];
    if (s != SEC_RAYS || c->wire == c->mem)
        return;
    uint8_t *dst = c->data + k * c->mem;
    memcpy(dst + c->wire, &d->h.tmin, 4);
    memcpy(dst + c->wire + 4, &d->h.tmax, 4);
}

/* Section s's wire bytes [off, off + len). */
static void take_section(rbb_decoder *d, int s, uint64_t off,
                         const uint8_t *p, size_t len)
{
    const section *c = &d->sec[s];
    if (c->wire == c->mem) { /* the records are the library's already */
        memcpy(c->data + off, p, len);
        return;
    }
    size_t k = (size_t)(off / c->wire), within = (size_t)(off % c->wire);
    while (len) {
        size_t take = c->wire - within < len ? c->wire - within : len;
        memcpy(c->data + k * c->mem + within, p, take);
        within += take;
        p += take;
        len -= take;
        if (within == c->wire) {
            complete_record(d, s, k++);
            within = 0;
        }
    }
}

int rbb_decoder_feed(rbb_decoder *d, const void *data, size_t len)
{
    const uint8_t *p = data;
    if (d->err.status || d->ready)
        return -1;
    while (d->head_len < d->head_size) {
        size_t take = d->head_size - d->head_len;
        if (take > len)
            take = len;
        memcpy(d->head + d->head_len, p, take);
        d->head_len += take;
        p += take;
        len -= take;
        if (d->head_len < d->head_size)
            return 0;
        /* The first 64 bytes say how long the header is. */
        if (d->head_len == RBB_HEADER_SIZE && check_version(d))
            return -1;
        if (d->head_len == d->head_size && take_header(d))
            return -1;
    }
    if (len > d->end - d->pos)
        return fail(d, 400, "", "the body is longer than the %llu bytes "
                                "the header announces",
                    (unsigned long long)(d->head_size + d->end));
    while (len) {
        while (d->pos - d->sec_start >= d->sec[d->cur].bytes) {
            d->sec_start += d->sec[d->cur].bytes;
            d->cur++;
        }
        const section *c = &d->sec[d->cur];
        uint64_t off = d->pos - d->sec_start, left = c->bytes - off;
        size_t take = left < len ? (size_t)left : len;
        take_section(d, d->cur, off, p, take);
        d->pos += take;
        p += take;
        len -= take;
    }
    return 0;
}

/* Quaternion-form obbs into the axes form, in place (the slot is an
 * rb_obb whose first ten floats came from the wire). */
static int settle_quaternions(rbb_decoder *d)
{
    const section *c = &d->sec[SEC_OBBS];
    if (!(d->h.flags & RBB_FLAG_OBB_QUATERNION))
        return 0;
    char ptr[48];
    for (size_t i = 0; i < c->n; i++) {
        rb_obb *obb = (rb_obb *)(void *)(c->data + i * c->mem);
        float v[10];
        memcpy(v, obb, sizeof v);
        for (int k = 6; k < 10; k++)
            if (!isfinite(v[k])) {
                snprintf(ptr, sizeof ptr, "/obbs/%zu/%d", i, k);
                return fail(d, 422, ptr, "the quaternion's %c is %s",
                            "wxyz"[k - 6], isnan(v[k]) ? "NaN" : "infinite");
            }
        if (rb_obb_from_quaternion(v, v + 3, v + 6, obb) != RB_OK) {
            snprintf(ptr, sizeof ptr, "/obbs/%zu/6", i);
            return fail(d, 422, ptr, "the quaternion is zero");
        }
    }
    return 0;
}

/* The camera record into d->camera, checked as a JSON "camera" is
 * (rb_camera_count), with the checks that needed its ray count. */
static int settle_camera(rbb_decoder *d, rbq_request *r)
{
    const uint8_t *rec = d->sec[SEC_CAMERA].data;
    rb_camera *c = &d->camera;
    memset(c, 0, sizeof *c);
    memcpy(c->view, rec, 128);
    memcpy(c->projection, rec + 128, 128);
    memcpy(c->viewport, rec + 256, 32);
    uint32_t depth = get32(rec + 288), pixels = get32(rec + 292);
    if (depth > 1)
        return fail(d, 422, "/camera/depth", "camera depth %u: 0 "
                                             "zero_to_one or 1 "
                                             "minus_one_to_one", depth);
    if (pixels > 1 || (!pixels && d->h.n_rays))
        return fail(d, 422, "/camera/pixels",
                    "camera pixels %u with ray count %llu: 1 for a list of "
                    "ray count pixels, 0 for the whole viewport (ray count "
                    "0)",
                    pixels, (unsigned long long)d->h.n_rays);
    static const double no_pixels[2];
    c->depth = (int)depth;
    if (pixels) {
        c->pixels = d->h.n_rays ? (const double *)(void *)d->sec[SEC_PIXELS]
                                      .data
                                : no_pixels;
        c->n_pixels = (size_t)d->h.n_rays;
    }
    c->tmin = d->h.tmin;
    c->tmax = d->h.tmax;
    r->camera = c;
    rb_error e;
    uint64_t n = 0;
    if (rb_camera_count(c, &n, &e) != RB_OK) {
        rbq_error_from_library(r, RBQ_FROM_CAMERA, &e, &d->err);
        return -1;
    }
    const rbq_limits *lim = &d->opt.limits;
    if (n > lim->max_rays)
        return fail(d, 413, "/camera/viewport", "the viewport has %llu "
                    "pixels: more than %llu rays",
                    (unsigned long long)n,
                    (unsigned long long)lim->max_rays);
    uint32_t max_hits = d->h.max_hits ? d->h.max_hits
                                      : lim->default_max_hits;
    if (d->h.mode == RB_MODE_ALL && n > lim->max_results / max_hits)
        return fail(d, 413, "/camera/viewport", "more than %llu results: "
                    "max_hits %u per ray",
                    (unsigned long long)lim->max_results, max_hits);
    r->n_camera_rays = n;
    if (d->h.mode == RB_MODE_PAIRS) {
        rbb_header h = d->h;
        h.n_rays = n;
        if (check_pairs(d, &h))
            return -1;
    }
    return 0;
}

int rbb_decoder_finish(rbb_decoder *d)
{
    if (d->err.status || d->ready)
        return d->ready ? 0 : -1;
    if (d->head_len == 0)
        return fail(d, 400, "", "empty body: a binary body starts with a "
                                "%d-byte header", RBB_HEADER_SIZE);
    if (d->head_len < d->head_size)
        return fail(d, 400, "", "body cut short: %zu bytes, less than the "
                                "%zu-byte header",
                    d->head_len, d->head_size);
    if (d->pos < d->end)
        return fail(d, 400, "", "body cut short at byte %llu: the header "
                                "announces %llu",
                    (unsigned long long)(d->head_size + d->pos),
                    (unsigned long long)(d->head_size + d->end));
    if (settle_quaternions(d))
        return -1;
    rbq_request *r = &d->req;
    memset(r, 0, sizeof *r);
    const rbb_header *h = &d->h;
    r->dims = h->dims;
    r->boxes = d->sec[SEC_BOXES].data;
    r->n_boxes = (size_t)h->n_boxes;
    if (d->opt.kind == RBB_KIND_SCENE) {
        r->body = RBQ_SCENE_CREATE;
        r->tmax = INFINITY;
    } else {
        r->body = RBQ_INTERSECT;
        r->mode = (rb_mode)h->mode;
        r->max_hits = h->max_hits ? h->max_hits
                                  : d->opt.limits.default_max_hits;
        r->tmin = h->tmin;
        r->tmax = h->tmax;
        r->rays = d->sec[SEC_RAYS].data;
        r->n_rays = (size_t)h->n_rays;
        r->outputs = (h->flags & RBB_FLAG_NORMALS) ? RB_OUTPUT_NORMAL : 0;
        r->shapes = (rb_shapes){
            .obbs = (const rb_obb *)(void *)d->sec[SEC_OBBS].data,
            .n_obbs = (size_t)h->n_obbs,
            .xboxes = (const rb_xbox *)(void *)d->sec[SEC_XBOXES].data,
            .n_xboxes = (size_t)h->n_xboxes,
            .spheres = (const rb_sphere *)(void *)d->sec[SEC_SPHERES].data,
            .n_spheres = (size_t)h->n_spheres,
            .planes = (const rb_plane *)(void *)d->sec[SEC_PLANES].data,
            .n_planes = (size_t)h->n_planes};
        if (h->flags & RBB_FLAG_CAMERA) {
            r->rays = NULL;
            r->n_rays = 0;
            if (settle_camera(d, r))
                return -1;
        }
    }
    d->ready = 1;
    return 0;
}

const rbq_error *rbb_decoder_error(const rbb_decoder *d)
{
    return &d->err;
}

const rbq_request *rbb_decoder_request(const rbb_decoder *d)
{
    return d->ready ? &d->req : NULL;
}

const rbb_header *rbb_decoder_header(const rbb_decoder *d)
{
    return d->have_header ? &d->h : NULL;
}

unsigned rbb_result_version(const rbq_request *req, unsigned request_version)
{
    if (request_version)
        return request_version;
    const rb_shapes *s = &req->shapes;
    return (s->n_obbs | s->n_xboxes | s->n_spheres | s->n_planes) ||
                   req->outputs
               ? RBB_VERSION_2
               : RBB_VERSION;
}

/* ------------------------------------------------------------------------
 * Results
 */
size_t rbb_result_header(const rbb_result_info *info, uint8_t *out)
{
    int v2 = info->version == RBB_VERSION_2;
    int hits = info->mode == RB_MODE_PAIRS || info->mode == RB_MODE_NEAREST;
    rbb_header h = {
        .version = v2 ? RBB_VERSION_2 : RBB_VERSION,
        .header_size = v2 ? RBB_HEADER_SIZE_2 : RBB_HEADER_SIZE,
        .kind = RBB_KIND_RESULT,
        .mode = (uint8_t)info->mode,
        .dims = (uint8_t)info->dims,
        .flags = (uint8_t)((info->has_scene_version ? RBB_FLAG_SCENE_VERSION
                                                    : 0) |
                           (info->fell_back ? RBB_FLAG_FELL_BACK : 0) |
                           (v2 && hits && info->has_kinds ? RBB_FLAG_KINDS
                                                          : 0) |
                           (v2 && hits && info->has_normals
                                ? RBB_FLAG_HAS_NORMALS
                                : 0)),
        .max_hits = info->mode == RB_MODE_ALL ? info->max_hits : 0,
        .n_rays = info->n_rays,
        .n_boxes = info->mode == RB_MODE_ALL ? info->list_entries : 0,
        .scene_version = info->has_scene_version ? info->scene_version : 0,
        .elapsed_ms = info->elapsed_ms,
    };
    return rbb_header_encode(&h, out);
}

uint64_t rbb_compact_lists(rb_results *res, size_t n_rays, uint32_t max_hits)
{
    uint64_t at = 0;
    for (size_t i = 0; i < n_rays; i++) {
        size_t n = res->counts[i] < max_hits ? res->counts[i] : max_hits;
        /* The destination never passes the source: at <= i * max_hits. */
        if (n && at != (uint64_t)i * max_hits)
            memmove(&res->list[at], &res->list[i * (size_t)max_hits],
                    n * sizeof *res->list);
        at += n;
    }
    return at;
}

int rbb_result_layout(const rbb_result_info *info, const rb_results *res,
                      const void **part, size_t *bytes)
{
    size_t n = info->n_rays;
    int k = 0;
    switch (info->mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        part[k] = res->hits;
        bytes[k++] = n * sizeof(rb_hit);
        if (info->version != RBB_VERSION_2)
            return k;
        if (info->has_kinds) {
            part[k] = res->kinds;
            bytes[k++] = n;
        }
        if (info->has_normals) {
            part[k] = res->normals;
            bytes[k++] = 3 * n * sizeof(float);
        }
        return k;
    case RB_MODE_ANY:
        part[0] = res->any;
        bytes[0] = n;
        return 1;
    case RB_MODE_COUNT:
        part[0] = res->counts;
        bytes[0] = n * sizeof(uint32_t);
        return 1;
    case RB_MODE_ALL:
        part[0] = res->counts;
        bytes[0] = n * sizeof(uint32_t);
        part[1] = res->list;
        bytes[1] = (size_t)info->list_entries * sizeof(rb_list_hit);
        return 2;
    }
    return 0;
}
