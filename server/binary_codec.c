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

void rbb_header_encode(const rbb_header *h, uint8_t out[RBB_HEADER_SIZE])
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
}

size_t rbb_ray_record_bytes(unsigned dims, unsigned flags)
{
    return sizeof(float) * (2 * dims + ((flags & RBB_FLAG_RANGES) ? 2 : 0));
}

size_t rbb_box_record_bytes(unsigned dims)
{
    return sizeof(float) * 2 * dims;
}

/* ------------------------------------------------------------------------
 * Decoder
 */
struct rbb_decoder {
    rbb_options opt;
    uint8_t head[RBB_HEADER_SIZE];
    size_t head_len;
    rbb_header h;
    uint64_t pos;        /* bytes after the header taken so far */
    uint64_t ray_bytes;  /* wire bytes of the ray section */
    uint64_t box_bytes;
    size_t ray_wire;     /* wire bytes of one ray record */
    size_t ray_mem;      /* its rb_ray / rb_ray2 in memory */
    uint8_t *rays;
    uint8_t *boxes;
    uint8_t partial[32]; /* a ray record split across two feeds */
    rbj_error err;
    int ready;
    rbj_request req;
};

void rbb_options_init(rbb_options *opt, rbb_kind kind)
{
    memset(opt, 0, sizeof *opt);
    opt->kind = kind;
    rbj_limits_default(&opt->limits);
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
    *out = d;
    return RB_OK;
}

void rbb_decoder_destroy(rbb_decoder *d)
{
    if (!d)
        return;
    rbc_block_free(d->rays);
    rbc_block_free(d->boxes);
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
    d->err.offset = RBB_HEADER_SIZE + d->pos;
    return -1;
}

/* The fields of the header that the request kind does not use must be 0:
 * a later version may give them a meaning. */
static int check_structure(rbb_decoder *d, const rbb_header *h)
{
    if (!h->magic_ok)
        return fail(d, 400, "", "not a raybox binary body: the first four "
                                "bytes must be \"RBOX\"");
    if (h->version != RBB_VERSION)
        return fail(d, 400, "", "binary format version %u is not "
                                "supported (this server reads %d)",
                    h->version, RBB_VERSION);
    if (h->header_size != RBB_HEADER_SIZE)
        return fail(d, 400, "", "header_size %u: version 1 has a %d-byte "
                                "header",
                    h->header_size, RBB_HEADER_SIZE);
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
    } else if (h->flags & ~RBB_FLAG_RANGES) {
        return fail(d, 400, "", "unknown flags 0x%02x", h->flags);
    }
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

static int check_values(rbb_decoder *d, const rbb_header *h)
{
    const rbj_limits *lim = &d->opt.limits;
    if (h->dims != 2 && h->dims != 3)
        return fail(d, 422, "/dims", "dims must be 2 or 3, not %u", h->dims);
    if (d->opt.kind == RBB_KIND_SCENE) {
        if (h->n_boxes > lim->max_boxes)
            return fail(d, 413, "/boxes", "%llu boxes: at most %llu",
                        (unsigned long long)h->n_boxes,
                        (unsigned long long)lim->max_boxes);
        return 0;
    }
    if (h->mode > RB_MODE_ALL)
        return fail(d, 422, "/mode", "unknown mode %u: 0 pairs, 1 nearest, "
                                     "2 any, 3 count, 4 all",
                    h->mode);
    if (check_range(d, h))
        return -1;
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
    }
    if (h->n_rays > lim->max_rays)
        return fail(d, 413, "/rays", "%llu rays: at most %llu",
                    (unsigned long long)h->n_rays,
                    (unsigned long long)lim->max_rays);
    if (h->n_boxes > lim->max_boxes)
        return fail(d, 413, "/boxes", "%llu boxes: at most %llu",
                    (unsigned long long)h->n_boxes,
                    (unsigned long long)lim->max_boxes);
    uint32_t max_hits = h->max_hits ? h->max_hits : lim->default_max_hits;
    if (h->mode == RB_MODE_ALL && h->n_rays > lim->max_results / max_hits)
        return fail(d, 413, "/rays", "more than %llu results: max_hits %u "
                                     "per ray",
                    (unsigned long long)lim->max_results, max_hits);
    if (h->mode == RB_MODE_PAIRS && h->n_boxes != h->n_rays)
        return fail(d, 422, "/boxes", "pairs mode needs as many boxes as "
                                      "rays (%llu rays, %llu boxes)",
                    (unsigned long long)h->n_rays,
                    (unsigned long long)h->n_boxes);
    return 0;
}

/* The size the header announces against what the body can be. */
static int check_size(rbb_decoder *d, const rbb_header *h)
{
    /* The counts are within the limits (at most 2^32 or so in practice);
     * the products are still checked, limits being configurable. */
    uint64_t rays, boxes, total;
    if (__builtin_mul_overflow(h->n_rays, (uint64_t)d->ray_wire, &rays) ||
        __builtin_mul_overflow(h->n_boxes,
                               (uint64_t)rbb_box_record_bytes(h->dims),
                               &boxes) ||
        __builtin_add_overflow(rays, boxes, &total) ||
        __builtin_add_overflow(total, (uint64_t)RBB_HEADER_SIZE, &total))
        return fail(d, 413, "", "the header announces more bytes than "
                                "fit in 64 bits");
    uint64_t cl = d->opt.content_length;
    if (cl != RBB_LENGTH_UNKNOWN && total != cl)
        return fail(d, 400, "", "the header announces %llu bytes (%llu "
                                "rays, %llu boxes); Content-Length is %llu",
                    (unsigned long long)total,
                    (unsigned long long)h->n_rays,
                    (unsigned long long)h->n_boxes,
                    (unsigned long long)cl);
    if (cl == RBB_LENGTH_UNKNOWN && total > d->opt.max_body)
        return fail(d, 413, "", "the header announces %llu bytes: at most "
                                "%llu",
                    (unsigned long long)total,
                    (unsigned long long)d->opt.max_body);
    d->ray_bytes = rays;
    d->box_bytes = boxes;
    return 0;
}

static int take_header(rbb_decoder *d)
{
    rbb_header *h = &d->h;
    rbb_header_decode(d->head, h);
    unsigned dims = h->dims == 2 ? 2 : 3;
    d->ray_wire = rbb_ray_record_bytes(dims, h->flags);
    d->ray_mem = dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
    if (check_structure(d, h) || check_values(d, h) || check_size(d, h))
        return -1;
    /* Only now, with every count checked, is memory taken. */
    size_t box_mem = rbb_box_record_bytes(dims);
    if (h->n_rays &&
        !(d->rays = rbc_block_alloc((size_t)h->n_rays * d->ray_mem)))
        return fail(d, 500, NULL, "out of memory for %llu rays",
                    (unsigned long long)h->n_rays);
    if (h->n_boxes &&
        !(d->boxes = rbc_block_alloc((size_t)h->n_boxes * box_mem)))
        return fail(d, 500, NULL, "out of memory for %llu boxes",
                    (unsigned long long)h->n_boxes);
    return 0;
}

/* Completes ray k from its wire record: the request's range when the
 * record has none. */
static void put_ray(rbb_decoder *d, size_t k, const uint8_t *wire)
{
    uint8_t *dst = d->rays + k * d->ray_mem;
    memcpy(dst, wire, d->ray_wire);
    if (d->ray_wire != d->ray_mem) {
        memcpy(dst + d->ray_wire, &d->h.tmin, 4);
        memcpy(dst + d->ray_wire + 4, &d->h.tmax, 4);
    }
}

/* Ray section bytes [off, off + len). */
static void take_rays(rbb_decoder *d, uint64_t off, const uint8_t *p,
                      size_t len)
{
    if (d->ray_wire == d->ray_mem) { /* the records are rb_ray already */
        memcpy(d->rays + off, p, len);
        return;
    }
    size_t k = (size_t)(off / d->ray_wire), within = (size_t)(off % d->ray_wire);
    while (len) {
        if (within == 0 && len >= d->ray_wire) {
            put_ray(d, k++, p);
            p += d->ray_wire;
            len -= d->ray_wire;
            continue;
        }
        size_t take = d->ray_wire - within < len ? d->ray_wire - within : len;
        memcpy(d->partial + within, p, take);
        within += take;
        p += take;
        len -= take;
        if (within == d->ray_wire) {
            put_ray(d, k++, d->partial);
            within = 0;
        }
    }
}

int rbb_decoder_feed(rbb_decoder *d, const void *data, size_t len)
{
    const uint8_t *p = data;
    if (d->err.status || d->ready)
        return -1;
    if (d->head_len < RBB_HEADER_SIZE) {
        size_t take = RBB_HEADER_SIZE - d->head_len;
        if (take > len)
            take = len;
        memcpy(d->head + d->head_len, p, take);
        d->head_len += take;
        p += take;
        len -= take;
        if (d->head_len < RBB_HEADER_SIZE)
            return 0;
        if (take_header(d))
            return -1;
    }
    uint64_t end = d->ray_bytes + d->box_bytes;
    if (len > end - d->pos)
        return fail(d, 400, "", "the body is longer than the %llu bytes "
                                "the header announces",
                    (unsigned long long)(RBB_HEADER_SIZE + end));
    while (len) {
        size_t take;
        if (d->pos < d->ray_bytes) {
            take = d->ray_bytes - d->pos < len ? (size_t)(d->ray_bytes - d->pos)
                                              : len;
            take_rays(d, d->pos, p, take);
        } else {
            take = len;
            memcpy(d->boxes + (d->pos - d->ray_bytes), p, take);
        }
        d->pos += take;
        p += take;
        len -= take;
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
    if (d->head_len < RBB_HEADER_SIZE)
        return fail(d, 400, "", "body cut short: %zu bytes, less than the "
                                "%d-byte header",
                    d->head_len, RBB_HEADER_SIZE);
    if (d->pos < d->ray_bytes + d->box_bytes)
        return fail(d, 400, "", "body cut short at byte %llu: the header "
                                "announces %llu",
                    (unsigned long long)(RBB_HEADER_SIZE + d->pos),
                    (unsigned long long)(RBB_HEADER_SIZE + d->ray_bytes +
                                         d->box_bytes));
    rbj_request *r = &d->req;
    memset(r, 0, sizeof *r);
    const rbb_header *h = &d->h;
    r->dims = h->dims;
    r->boxes = d->boxes;
    r->n_boxes = (size_t)h->n_boxes;
    if (d->opt.kind == RBB_KIND_SCENE) {
        r->body = RBJ_SCENE_CREATE;
        r->tmax = INFINITY;
    } else {
        r->body = RBJ_INTERSECT;
        r->mode = (rb_mode)h->mode;
        r->max_hits = h->max_hits ? h->max_hits
                                  : d->opt.limits.default_max_hits;
        r->tmin = h->tmin;
        r->tmax = h->tmax;
        r->rays = d->rays;
        r->n_rays = (size_t)h->n_rays;
    }
    d->ready = 1;
    return 0;
}

const rbj_error *rbb_decoder_error(const rbb_decoder *d)
{
    return &d->err;
}

const rbj_request *rbb_decoder_request(const rbb_decoder *d)
{
    return d->ready ? &d->req : NULL;
}

const rbb_header *rbb_decoder_header(const rbb_decoder *d)
{
    return d->head_len == RBB_HEADER_SIZE ? &d->h : NULL;
}

/* ------------------------------------------------------------------------
 * Results
 */
void rbb_result_header(const rbb_result_info *info,
                       uint8_t out[RBB_HEADER_SIZE])
{
    rbb_header h = {
        .version = RBB_VERSION,
        .header_size = RBB_HEADER_SIZE,
        .kind = RBB_KIND_RESULT,
        .mode = (uint8_t)info->mode,
        .dims = (uint8_t)info->dims,
        .flags = (uint8_t)((info->has_scene_version ? RBB_FLAG_SCENE_VERSION
                                                    : 0) |
                           (info->fell_back ? RBB_FLAG_FELL_BACK : 0)),
        .max_hits = info->mode == RB_MODE_ALL ? info->max_hits : 0,
        .n_rays = info->n_rays,
        .n_boxes = info->mode == RB_MODE_ALL ? info->list_entries : 0,
        .scene_version = info->has_scene_version ? info->scene_version : 0,
        .elapsed_ms = info->elapsed_ms,
    };
    rbb_header_encode(&h, out);
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
                      const void *part[2], size_t bytes[2])
{
    size_t n = info->n_rays;
    switch (info->mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        part[0] = res->hits;
        bytes[0] = n * sizeof(rb_hit);
        return 1;
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
