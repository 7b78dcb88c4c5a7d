/* test_binary_codec.c - the binary form (server/binary_codec.h): header
 * round trip and offsets as docs/binary-format.md gives them, the
 * decoder's answer independent of how the body is split, every header
 * check with its status and pointer (before any allocation: counts far
 * beyond memory are refused, not attempted), and the result layout -
 * for version 1 (boxes; its example bytes unchanged) and version 2 (every
 * element kind, normals, kinds in the answer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "binary_codec.h"
#include "testutil.h"

/* A header alone (64 bytes at out). */
static void header(uint8_t *out, uint8_t kind, uint8_t mode, uint8_t dims,
                   uint8_t flags, uint32_t max_hits, uint64_t nr, uint64_t nb,
                   float tmin, float tmax)
{
    rbb_header h = {.version = 1, .header_size = 64, .kind = kind,
                    .mode = mode, .dims = dims, .flags = flags,
                    .max_hits = max_hits, .n_rays = nr, .n_boxes = nb,
                    .tmin = tmin, .tmax = tmax};
    rbb_header_encode(&h, out);
}

/* A header and its records. */
static size_t build(uint8_t *out, uint8_t kind, uint8_t mode, uint8_t dims,
                    uint8_t flags, uint32_t max_hits, uint64_t nr,
                    uint64_t nb, float tmin, float tmax)
{
    header(out, kind, mode, dims, flags, max_hits, nr, nb, tmin, tmax);
    size_t at = 64;
    size_t rw = rbb_ray_record_bytes(dims, flags) / 4;
    for (uint64_t i = 0; i < nr; i++)
        for (size_t k = 0; k < rw; k++) {
            float v = (float)(i * 10 + k) * 0.5f;
            if (rw > 2u * dims && k == rw - 1)
                v = INFINITY; /* tmax */
            if (rw > 2u * dims && k == rw - 2)
                v = 0.25f;    /* tmin */
            memcpy(out + at, &v, 4);
            at += 4;
        }
    for (uint64_t i = 0; i < nb; i++)
        for (unsigned k = 0; k < 2u * dims; k++) {
            float v = (float)i + (k < dims ? 0.0f : 1.0f);
            memcpy(out + at, &v, 4);
            at += 4;
        }
    return at;
}

START_TEST(test_header_layout)
{
    uint8_t b[64];
    rbb_header h = {.version = 1, .header_size = 64, .kind = 1, .mode = 4,
                    .dims = 3, .flags = 1, .max_hits = 0x01020304,
                    .n_rays = 0x1122334455667788ull, .n_boxes = 9,
                    .tmin = 1.5f, .tmax = INFINITY, .scene_version = 7,
                    .elapsed_ms = 2.5};
    rbb_header_encode(&h, b);
    ck_assert(memcmp(b, "RBOX", 4) == 0);
    ck_assert_int_eq(b[4], 1);   /* version, little-endian */
    ck_assert_int_eq(b[5], 0);
    ck_assert_int_eq(b[6], 64);  /* header size */
    ck_assert_int_eq(b[8], 1);   /* kind */
    ck_assert_int_eq(b[9], 4);   /* mode */
    ck_assert_int_eq(b[10], 3);  /* dims */
    ck_assert_int_eq(b[11], 1);  /* flags */
    ck_assert_int_eq(b[12], 4);  /* max_hits LE */
    ck_assert_int_eq(b[15], 1);
    ck_assert_int_eq(b[16], 0x88); /* ray count LE */
    ck_assert_int_eq(b[23], 0x11);
    ck_assert_int_eq(b[24], 9);
    float f;
    memcpy(&f, b + 32, 4);
    ck_assert(f == 1.5f);
    memcpy(&f, b + 36, 4);
    ck_assert(isinf(f) && f > 0);
    ck_assert_int_eq(b[40], 7);
    double d;
    memcpy(&d, b + 48, 8);
    ck_assert(d == 2.5);
    for (int i = 56; i < 64; i++)
        ck_assert_int_eq(b[i], 0);
    rbb_header back;
    rbb_header_decode(b, &back);
    ck_assert(back.magic_ok && back.n_rays == h.n_rays &&
              back.max_hits == h.max_hits && back.scene_version == 7);
    ck_assert_uint_eq(rbb_ray_record_bytes(3, 0), 24);
    ck_assert_uint_eq(rbb_ray_record_bytes(3, 1), 32);
    ck_assert_uint_eq(rbb_ray_record_bytes(2, 0), 16);
    ck_assert_uint_eq(rbb_ray_record_bytes(2, 1), 24);
    ck_assert_uint_eq(rbb_box_record_bytes(3), 24);
    ck_assert_uint_eq(rbb_box_record_bytes(2), 16);
}
END_TEST

static rbb_decoder *decoder(rbb_kind kind, uint64_t content_length)
{
    rbb_options o;
    rbb_options_init(&o, kind);
    o.limits.max_rays = 1000;
    o.limits.max_boxes = 1000;
    o.limits.max_results = 5000;
    o.content_length = content_length;
    o.max_body = 100000;
    rbb_decoder *d = NULL;
    ck_assert_int_eq(rbb_decoder_create(&o, &d), RB_OK);
    return d;
}

/* Every split of the body gives the same records; with and without the
 * per-ray range, 3D and 2D. */
START_TEST(test_any_split)
{
    static uint8_t body[64 + 7 * 32 + 5 * 24];
    unsigned dims = _i & 1 ? 2 : 3, flags = _i & 2 ? 1 : 0;
    size_t len = build(body, 1, 1, (uint8_t)dims, (uint8_t)flags, 0, 7, 5,
                       0.125f, 40.0f);
    rbt_rng rng = {(uint64_t)_i + 1};
    void *first_rays = NULL, *first_boxes = NULL;
    size_t ray_mem = dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
    for (int round = 0; round < 50; round++) {
        rbb_decoder *d = decoder(RBB_KIND_INTERSECT,
                                 round % 2 ? len : RBB_LENGTH_UNKNOWN);
        size_t at = 0;
        while (at < len) {
            size_t n = round == 0 ? len : 1 + rbt_below(&rng, 40);
            if (n > len - at)
                n = len - at;
            ck_assert_int_eq(rbb_decoder_feed(d, body + at, n), 0);
            at += n;
        }
        ck_assert_int_eq(rbb_decoder_finish(d), 0);
        const rbq_request *r = rbb_decoder_request(d);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->n_rays, 7);
        ck_assert_uint_eq(r->n_boxes, 5);
        ck_assert_uint_eq(r->dims, dims);
        ck_assert_int_eq(r->mode, RB_MODE_NEAREST);
        ck_assert_uint_eq(r->max_hits, 64);
        if (!first_rays) {
            first_rays = malloc(7 * ray_mem);
            first_boxes = malloc(5 * 24);
            memcpy(first_rays, r->rays, 7 * ray_mem);
            memcpy(first_boxes, r->boxes, 5 * 4 * 2 * dims);
            /* Records as sent; the range from the header when the rays
             * carry none. */
            const float *f = first_rays;
            size_t per = ray_mem / 4;
            for (size_t i = 0; i < 7; i++) {
                ck_assert(f[i * per + 0] == (float)(i * 10) * 0.5f);
                ck_assert(f[i * per + 2 * dims] == (flags ? 0.25f : 0.125f));
                ck_assert(f[i * per + 2 * dims + 1] ==
                          (flags ? INFINITY : 40.0f));
            }
        } else {
            ck_assert(memcmp(first_rays, r->rays, 7 * ray_mem) == 0);
            ck_assert(memcmp(first_boxes, r->boxes, 5 * 4 * 2 * dims) == 0);
        }
        rbb_decoder_destroy(d);
    }
    free(first_rays);
    free(first_boxes);
}
END_TEST

/* Header problems: status, pointer - decided from the 64 header bytes. */
START_TEST(test_header_checks)
{
    static const struct {
        const char *what;
        int offset;     /* byte to change, -1 none */
        uint8_t value;
        uint64_t nr, nb;
        long status;
        const char *pointer;
    } cases[] = {
        {"magic", 1, 'X', 2, 2, 400, ""},
        {"version", 4, 9, 2, 2, 400, ""},
        {"header size", 6, 128, 2, 2, 400, ""},
        {"kind", 8, 2, 2, 2, 400, ""},
        {"mode", 9, 5, 2, 2, 422, "/mode"},
        {"dims", 10, 1, 2, 2, 422, "/dims"},
        {"flags", 11, 2, 2, 2, 400, ""},
        {"reserved 40", 40, 1, 2, 2, 400, ""},
        {"reserved 63", 63, 1, 2, 2, 400, ""},
        {"too many rays", -1, 0, 1001, 2, 413, "/rays"},
        {"too many boxes", -1, 0, 2, 1001, 413, "/boxes"},
        {"rays beyond memory", -1, 0, UINT64_MAX / 2, 0, 413, "/rays"},
        {"pairs count", 9, 0, 2, 3, 422, "/boxes"},
        {"all results", 9, 4, 100, 2, 413, "/rays"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t head[64];
        header(head, 1, 1, 3, 0, 0, 0, 0, 0, INFINITY);
        uint64_t nr = cases[i].nr, nb = cases[i].nb;
        memcpy(head + 16, &nr, 8);
        memcpy(head + 24, &nb, 8);
        if (cases[i].offset >= 0)
            head[cases[i].offset] = cases[i].value;
        if (i == 13) { /* all with max_hits 100: 100 x 100 > 5000 */
            uint32_t mh = 100;
            memcpy(head + 12, &mh, 4);
        }
        rbb_decoder *d = decoder(RBB_KIND_INTERSECT, RBB_LENGTH_UNKNOWN);
        ck_assert_int_eq(rbb_decoder_feed(d, head, 64), -1);
        const rbq_error *e = rbb_decoder_error(d);
        ck_assert_msg(e->status == cases[i].status, "%s: %d %s",
                      cases[i].what, e->status, e->detail);
        ck_assert_msg(strcmp(e->pointer, cases[i].pointer) == 0, "%s: '%s'",
                      cases[i].what, e->pointer);
        ck_assert_int_eq(rbb_decoder_feed(d, head, 1), -1); /* sticky */
        rbb_decoder_destroy(d);
    }
    /* The request range: R6, pointers to /tmin and /tmax. */
    static const float ranges[][2] = {
        {NAN, 1}, {INFINITY, INFINITY}, {0, NAN}, {0, -INFINITY}, {2, 1}};
    static const char *const ptr[] = {"/tmin", "/tmin", "/tmax", "/tmax",
                                      "/tmin"};
    for (int i = 0; i < 5; i++) {
        uint8_t head[64];
        header(head, 1, 1, 3, 0, 0, 0, 0, ranges[i][0], ranges[i][1]);
        rbb_decoder *d = decoder(RBB_KIND_INTERSECT, 64);
        ck_assert_int_eq(rbb_decoder_feed(d, head, 64), -1);
        ck_assert_int_eq(rbb_decoder_error(d)->status, 422);
        ck_assert_str_eq(rbb_decoder_error(d)->pointer, ptr[i]);
        rbb_decoder_destroy(d);
    }
}
END_TEST

/* Lengths: the announced size against Content-Length and max_body, short
 * and long bodies. */
START_TEST(test_lengths)
{
    static uint8_t body[64 + 4 * 24 + 2 * 24 + 8];
    size_t len = build(body, 1, 1, 3, 0, 0, 4, 2, 0, INFINITY);
    /* Content-Length that disagrees: 400 from the header. */
    rbb_decoder *d = decoder(RBB_KIND_INTERSECT, len + 1);
    ck_assert_int_eq(rbb_decoder_feed(d, body, 64), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    rbb_decoder_destroy(d);
    /* Unknown length, cut short: 400 at the end. */
    d = decoder(RBB_KIND_INTERSECT, RBB_LENGTH_UNKNOWN);
    ck_assert_int_eq(rbb_decoder_feed(d, body, len - 3), 0);
    ck_assert_int_eq(rbb_decoder_finish(d), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    ck_assert_ptr_null(rbb_decoder_request(d));
    rbb_decoder_destroy(d);
    /* Longer than announced. */
    d = decoder(RBB_KIND_INTERSECT, RBB_LENGTH_UNKNOWN);
    ck_assert_int_eq(rbb_decoder_feed(d, body, len), 0);
    ck_assert_int_eq(rbb_decoder_feed(d, body, 1), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    rbb_decoder_destroy(d);
    /* Shorter than a header; empty. */
    d = decoder(RBB_KIND_INTERSECT, RBB_LENGTH_UNKNOWN);
    ck_assert_int_eq(rbb_decoder_feed(d, body, 10), 0);
    ck_assert_int_eq(rbb_decoder_finish(d), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    rbb_decoder_destroy(d);
    d = decoder(RBB_KIND_INTERSECT, RBB_LENGTH_UNKNOWN);
    ck_assert_int_eq(rbb_decoder_finish(d), -1);
    ck_assert_ptr_nonnull(strstr(rbb_decoder_error(d)->detail, "empty"));
    rbb_decoder_destroy(d);
    /* Without a length, an announced size over max_body is 413. */
    uint8_t head[64];
    header(head, 1, 1, 3, 0, 0, 999, 999, 0, INFINITY);
    rbb_options o;
    rbb_options_init(&o, RBB_KIND_INTERSECT);
    o.max_body = 1000;
    ck_assert_int_eq(rbb_decoder_create(&o, &d), RB_OK);
    ck_assert_int_eq(rbb_decoder_feed(d, head, 64), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 413);
    rbb_decoder_destroy(d);
}
END_TEST

/* Scene bodies, and intersects on a scene of the path. */
START_TEST(test_scene_bodies)
{
    static uint8_t body[64 + 3 * 24];
    size_t len = build(body, 2, 0, 3, 0, 0, 0, 3, 0, 0);
    rbb_decoder *d = decoder(RBB_KIND_SCENE, len);
    ck_assert_int_eq(rbb_decoder_feed(d, body, len), 0);
    ck_assert_int_eq(rbb_decoder_finish(d), 0);
    const rbq_request *r = rbb_decoder_request(d);
    ck_assert_int_eq(r->body, RBQ_SCENE_CREATE);
    ck_assert_uint_eq(r->n_boxes, 3);
    ck_assert(((const rb_box *)r->boxes)[2].max[0] == 3.0f);
    rbb_decoder_destroy(d);
    /* A scene header with a mode, or rays: 400. */
    body[9] = 1;
    d = decoder(RBB_KIND_SCENE, len);
    ck_assert_int_eq(rbb_decoder_feed(d, body, len), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    rbb_decoder_destroy(d);

    rbb_options o;
    rbb_options_init(&o, RBB_KIND_INTERSECT);
    o.scene_in_path = 1;
    o.scene_dims = 2;
    uint8_t head[64];
    static const struct {
        uint8_t mode, dims;
        uint64_t nb;
        const char *pointer;
    } bad[] = {{0, 2, 0, "/mode"}, {1, 3, 0, "/dims"}, {1, 2, 1, "/boxes"}};
    for (int i = 0; i < 3; i++) {
        header(head, 1, bad[i].mode, bad[i].dims, 0, 0, 0, 0, 0, INFINITY);
        memcpy(head + 24, &bad[i].nb, 8);
        ck_assert_int_eq(rbb_decoder_create(&o, &d), RB_OK);
        ck_assert_int_eq(rbb_decoder_feed(d, head, 64), -1);
        ck_assert_int_eq(rbb_decoder_error(d)->status, 422);
        ck_assert_str_eq(rbb_decoder_error(d)->pointer, bad[i].pointer);
        rbb_decoder_destroy(d);
    }
    /* Bad options. */
    o.scene_dims = 4;
    ck_assert_int_eq(rbb_decoder_create(&o, &d), RB_EINVAL);
    o.kind = RBB_KIND_RESULT;
    ck_assert_int_eq(rbb_decoder_create(&o, &d), RB_EINVAL);
}
END_TEST

START_TEST(test_results)
{
    /* all mode: lists compacted in place, layout counts then entries. */
    uint32_t counts[4] = {0, 5, 2, 1};
    rb_list_hit list[4 * 3];
    for (int i = 0; i < 12; i++)
        list[i] = (rb_list_hit){i, (float)i, (float)i + 1};
    rb_results res = {.counts = counts, .list = list, .capacity = 4};
    uint64_t n = rbb_compact_lists(&res, 4, 3);
    ck_assert_uint_eq(n, 0 + 3 + 2 + 1);
    static const int want[] = {3, 4, 5, 6, 7, 9};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(list[i].box, want[i]);
    rbb_result_info info = {.mode = RB_MODE_ALL, .dims = 3, .n_rays = 4,
                            .max_hits = 3, .list_entries = n,
                            .has_scene_version = 1, .scene_version = 5,
                            .elapsed_ms = 1.25};
    uint8_t head[RBB_HEADER_MAX];
    ck_assert_uint_eq(rbb_result_header(&info, head), 64);
    rbb_header h;
    rbb_header_decode(head, &h);
    ck_assert(h.magic_ok && h.kind == RBB_KIND_RESULT && h.mode == 4 &&
              h.n_rays == 4 && h.n_boxes == 6 && h.max_hits == 3 &&
              h.flags == RBB_FLAG_SCENE_VERSION && h.scene_version == 5 &&
              h.elapsed_ms == 1.25);
    const void *part[RBB_PARTS_MAX];
    size_t bytes[RBB_PARTS_MAX];
    ck_assert_int_eq(rbb_result_layout(&info, &res, part, bytes), 2);
    ck_assert(part[0] == counts && bytes[0] == 16);
    ck_assert(part[1] == list && bytes[1] == 6 * 12);
    rb_hit hits[4];
    rb_results r2 = {.hits = hits};
    info.mode = RB_MODE_NEAREST;
    ck_assert_int_eq(rbb_result_layout(&info, &r2, part, bytes), 1);
    ck_assert(part[0] == hits && bytes[0] == 64);
}
END_TEST

/* ------------------------------------------------------------------------
 * Version 1, byte for byte: docs/binary-format.md's example request and
 * its answer's header.
 */
static const uint8_t doc_request[136] = {
    0x52, 0x42, 0x4f, 0x58, 0x01, 0x00, 0x40, 0x00, 0x01, 0x01, 0x03, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x80, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    /* rays */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x40, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    /* box */
    0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x80, 0xbf, 0x00, 0x00, 0x80, 0xbf,
    0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x80, 0x3f};

START_TEST(test_v1_unchanged)
{
    rbb_decoder *d = decoder(RBB_KIND_INTERSECT, sizeof doc_request);
    ck_assert_int_eq(rbb_decoder_feed(d, doc_request, sizeof doc_request), 0);
    ck_assert_int_eq(rbb_decoder_finish(d), 0);
    const rbq_request *r = rbb_decoder_request(d);
    ck_assert_uint_eq(r->n_rays, 2);
    ck_assert_uint_eq(r->n_boxes, 1);
    ck_assert_int_eq(r->mode, RB_MODE_NEAREST);
    ck_assert_uint_eq(r->outputs, 0);
    ck_assert_uint_eq(r->shapes.n_obbs + r->shapes.n_xboxes +
                          r->shapes.n_spheres + r->shapes.n_planes,
                      0);
    const rb_ray *ray = r->rays;
    ck_assert(ray[1].origin[1] == 5.0f && ray[1].dir[0] == 1.0f &&
              ray[1].tmin == 0.0f && isinf(ray[1].tmax));
    const rb_box *box = r->boxes;
    ck_assert(box[0].min[0] == 1.0f && box[0].max[0] == 2.0f);
    ck_assert_uint_eq(rbb_decoder_header(d)->version, 1);
    /* A version 1 request gets a version 1 answer, 64-byte header. */
    ck_assert_uint_eq(rbb_result_version(r, 1), RBB_VERSION);
    rbb_result_info info = {.version = rbb_result_version(r, 1),
                            .mode = RB_MODE_NEAREST, .dims = 3, .n_rays = 2,
                            .has_kinds = 1, .has_normals = 1};
    uint8_t head[RBB_HEADER_MAX];
    memset(head, 0xee, sizeof head);
    ck_assert_uint_eq(rbb_result_header(&info, head), 64);
    static const uint8_t want[64] = {
        0x52, 0x42, 0x4f, 0x58, 0x01, 0x00, 0x40, 0x00, 0x81, 0x01, 0x03,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x02};
    ck_assert(memcmp(head, want, 64) == 0);
    for (int i = 64; i < RBB_HEADER_MAX; i++)
        ck_assert_int_eq(head[i], 0xee); /* nothing past 64 bytes */
    rb_hit hits[2];
    uint8_t kinds[2];
    float normals[6];
    rb_results res = {.hits = hits, .kinds = kinds, .normals = normals};
    const void *part[RBB_PARTS_MAX];
    size_t bytes[RBB_PARTS_MAX];
    ck_assert_int_eq(rbb_result_layout(&info, &res, part, bytes), 1);
    rbb_decoder_destroy(d);
}
END_TEST

/* ------------------------------------------------------------------------
 * Version 2
 */
typedef struct v2_counts {
    uint64_t rays, boxes, obbs, xboxes, spheres, planes;
} v2_counts;

static void header_v2(uint8_t *out, uint8_t kind, uint8_t mode,
                      uint8_t dims, uint8_t flags, const v2_counts *c)
{
    rbb_header h = {.version = 2, .header_size = 96, .kind = kind,
                    .mode = mode, .dims = dims, .flags = flags,
                    .n_rays = c->rays, .n_boxes = c->boxes,
                    .tmax = kind == RBB_KIND_SCENE ? 0 : INFINITY,
                    .n_obbs = c->obbs, .n_xboxes = c->xboxes,
                    .n_spheres = c->spheres, .n_planes = c->planes};
    ck_assert_uint_eq(rbb_header_encode(&h, out), 96);
}

static size_t put_floats(uint8_t *out, size_t at, const float *v, size_t n)
{
    memcpy(out + at, v, n * sizeof *v);
    return at + n * sizeof *v;
}

/* A 3D intersect body with every kind; obbs in the quaternion form when
 * flags say so. Element values are valid and depend on the index. */
static size_t build_v2(uint8_t *out, uint8_t mode, uint8_t flags,
                       const v2_counts *c)
{
    header_v2(out, RBB_KIND_INTERSECT, mode, 3, flags, c);
    size_t at = 96;
    for (uint64_t i = 0; i < c->rays; i++) {
        float v[8] = {-10.0f, (float)i * 0.25f, 0.5f, 1, 0, 0.125f, 0,
                      INFINITY};
        at = put_floats(out, at, v, (flags & RBB_FLAG_RANGES) ? 8 : 6);
    }
    for (uint64_t i = 0; i < c->boxes; i++) {
        float v[6] = {(float)i, -1, -1, (float)i + 0.5f, 1, 1};
        at = put_floats(out, at, v, 6);
    }
    for (uint64_t i = 0; i < c->obbs; i++) {
        if (flags & RBB_FLAG_OBB_QUATERNION) {
            float v[10] = {(float)i, 2, 3, 0.5f, 1, 1.5f,
                           1, 0.25f * (float)i, -0.5f, 0.125f};
            at = put_floats(out, at, v, 10);
        } else {
            float v[15] = {(float)i, 2, 3, 0.5f, 1, 1.5f,
                           1, 0, 0, 0, 1, 0, 0, 0, 1};
            at = put_floats(out, at, v, 15);
        }
    }
    for (uint64_t i = 0; i < c->xboxes; i++) {
        float v[18] = {-1, -1, -1, 1, 1, 1, 2, 0, 0, (float)i,
                       0, 1, 0, 5, 0, 0, 0.5f, -5};
        at = put_floats(out, at, v, 18);
    }
    for (uint64_t i = 0; i < c->spheres; i++) {
        float v[4] = {3, (float)i, 0, 0.75f};
        at = put_floats(out, at, v, 4);
    }
    for (uint64_t i = 0; i < c->planes; i++) {
        float v[4] = {0, 1, 0, -4.0f - (float)i};
        at = put_floats(out, at, v, 4);
    }
    return at;
}

/* docs/binary-format.md's version 2 example: one ray, one sphere,
 * normals; and its answer's header. */
START_TEST(test_doc_example_v2)
{
    uint8_t body[136] = {0};
    static const uint8_t head[] = {0x52, 0x42, 0x4f, 0x58, 0x02, 0x00, 0x60,
                                   0x00, 0x01, 0x01, 0x03, 0x02};
    memcpy(body, head, sizeof head);
    body[0x10] = 1;                       /* 1 ray */
    body[0x26] = 0x80, body[0x27] = 0x7f; /* tmax +inf */
    body[0x50] = 1;                       /* 1 sphere */
    body[0x6e] = 0x80, body[0x6f] = 0x3f; /* ray dir x 1 */
    body[0x7a] = 0x80, body[0x7b] = 0x40; /* center x 4 */
    body[0x86] = 0x80, body[0x87] = 0x3f; /* radius 1 */
    rbb_decoder *d = decoder(RBB_KIND_INTERSECT, sizeof body);
    ck_assert_int_eq(rbb_decoder_feed(d, body, sizeof body), 0);
    ck_assert_int_eq(rbb_decoder_finish(d), 0);
    const rbq_request *r = rbb_decoder_request(d);
    ck_assert_uint_eq(r->n_rays, 1);
    ck_assert_uint_eq(r->n_boxes, 0);
    ck_assert_uint_eq(r->shapes.n_spheres, 1);
    ck_assert_uint_eq(r->outputs, RB_OUTPUT_NORMAL);
    const rb_ray *ray = r->rays;
    ck_assert(ray->dir[0] == 1.0f && ray->tmin == 0 && isinf(ray->tmax));
    ck_assert(r->shapes.spheres[0].center[0] == 4.0f &&
              r->shapes.spheres[0].radius == 1.0f);
    rbb_result_info info = {.version = rbb_result_version(r, 2),
                            .mode = RB_MODE_NEAREST, .dims = 3, .n_rays = 1,
                            .has_kinds = 1, .has_normals = 1};
    uint8_t out[RBB_HEADER_MAX];
    ck_assert_uint_eq(rbb_result_header(&info, out), 96);
    uint8_t want[96] = {0x52, 0x42, 0x4f, 0x58, 0x02, 0x00, 0x60, 0x00,
                        0x81, 0x01, 0x03, 0x0c, 0, 0, 0, 0, 0x01};
    ck_assert(memcmp(out, want, 96) == 0);
    rbb_decoder_destroy(d);
}
END_TEST

START_TEST(test_header_layout_v2)
{
    uint8_t b[RBB_HEADER_MAX];
    rbb_header h = {.version = 2, .header_size = 96, .kind = 1, .mode = 1,
                    .dims = 3, .flags = 7, .n_rays = 5, .n_boxes = 6,
                    .n_obbs = 0x0102030405060708ull, .n_xboxes = 9,
                    .n_spheres = 10, .n_planes = 11};
    ck_assert_uint_eq(rbb_header_encode(&h, b), 96);
    ck_assert_int_eq(b[4], 2);
    ck_assert_int_eq(b[6], 96);
    ck_assert_int_eq(b[11], 7);
    ck_assert_int_eq(b[64], 0x08); /* obb count LE */
    ck_assert_int_eq(b[71], 0x01);
    ck_assert_int_eq(b[72], 9);
    ck_assert_int_eq(b[80], 10);
    ck_assert_int_eq(b[88], 11);
    rbb_header back;
    rbb_header_decode_v2(b, &back);
    ck_assert(back.magic_ok && back.version == 2 && back.n_obbs == h.n_obbs &&
              back.n_xboxes == 9 && back.n_spheres == 10 &&
              back.n_planes == 11 && back.n_boxes == 6);
    rbb_header_decode(b, &back); /* the common 64 bytes only */
    ck_assert(back.n_obbs == 0 && back.n_planes == 0 && back.n_boxes == 6);
    /* A 64-byte header writes 64 bytes, whatever the counts say. */
    memset(b, 0xee, sizeof b);
    h.version = 1;
    h.header_size = 64;
    ck_assert_uint_eq(rbb_header_encode(&h, b), 64);
    ck_assert_int_eq(b[64], 0xee);
    ck_assert_uint_eq(rbb_shape_record_bytes(RB_KIND_OBB, 0), 60);
    ck_assert_uint_eq(rbb_shape_record_bytes(RB_KIND_OBB,
                                             RBB_FLAG_OBB_QUATERNION), 40);
    ck_assert_uint_eq(rbb_shape_record_bytes(RB_KIND_XBOX, 0), 72);
    ck_assert_uint_eq(rbb_shape_record_bytes(RB_KIND_SPHERE, 0), 16);
    ck_assert_uint_eq(rbb_shape_record_bytes(RB_KIND_PLANE, 0), 16);
    ck_assert_uint_eq(rbb_shape_record_bytes(RB_KIND_BOX, 0), 0);
}
END_TEST

/* Every split of a version 2 body gives the same records: with and
 * without ranges, obbs in both forms, normals asked for or not. */
START_TEST(test_any_split_v2)
{
    static uint8_t body[96 + 7 * 32 + 3 * 24 + 4 * 60 + 2 * 72 + 3 * 16 +
                        2 * 16];
    uint8_t flags = (uint8_t)(((_i & 1) ? RBB_FLAG_RANGES : 0) |
                              ((_i & 2) ? RBB_FLAG_OBB_QUATERNION : 0) |
                              ((_i & 4) ? RBB_FLAG_NORMALS : 0));
    const v2_counts c = {7, 3, 4, 2, 3, 2};
    size_t len = build_v2(body, RB_MODE_NEAREST, flags, &c);
    rbt_rng rng = {(uint64_t)_i + 11};
    rbq_request first;
    void *keep[6] = {0};
    const size_t sizes[6] = {7 * sizeof(rb_ray), 3 * sizeof(rb_box),
                             4 * sizeof(rb_obb), 2 * sizeof(rb_xbox),
                             3 * sizeof(rb_sphere), 2 * sizeof(rb_plane)};
    for (int round = 0; round < 60; round++) {
        rbb_decoder *d = decoder(RBB_KIND_INTERSECT,
                                 round % 2 ? len : RBB_LENGTH_UNKNOWN);
        size_t at = 0;
        while (at < len) {
            size_t n = round == 0 ? len : 1 + rbt_below(&rng, 70);
            if (n > len - at)
                n = len - at;
            ck_assert_int_eq(rbb_decoder_feed(d, body + at, n), 0);
            at += n;
        }
        ck_assert_int_eq(rbb_decoder_finish(d), 0);
        const rbq_request *r = rbb_decoder_request(d);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->n_rays, 7);
        ck_assert_uint_eq(r->n_boxes, 3);
        ck_assert_uint_eq(r->shapes.n_obbs, 4);
        ck_assert_uint_eq(r->shapes.n_xboxes, 2);
        ck_assert_uint_eq(r->shapes.n_spheres, 3);
        ck_assert_uint_eq(r->shapes.n_planes, 2);
        ck_assert_uint_eq(r->outputs, (_i & 4) ? RB_OUTPUT_NORMAL : 0);
        ck_assert_uint_eq(rbb_decoder_header(d)->version, 2);
        ck_assert_uint_eq(rbb_result_version(r, 2), RBB_VERSION_2);
        const void *arrays[6] = {r->rays, r->boxes, r->shapes.obbs,
                                 r->shapes.xboxes, r->shapes.spheres,
                                 r->shapes.planes};
        if (round == 0) {
            first = *r;
            for (int k = 0; k < 6; k++) {
                keep[k] = malloc(sizes[k]);
                memcpy(keep[k], arrays[k], sizes[k]);
            }
            /* Records as sent: rays get the header's range when they
             * carry none, quaternions become axes. */
            const rb_ray *ray = r->rays;
            ck_assert(ray[6].origin[1] == 1.5f && ray[6].dir[2] == 0.125f &&
                      ray[6].tmin == 0 && isinf(ray[6].tmax));
            const rb_obb *o = r->shapes.obbs;
            if (flags & RBB_FLAG_OBB_QUATERNION) {
                float q[4] = {1, 0.25f * 3, -0.5f, 0.125f};
                float cen[3] = {3, 2, 3}, half[3] = {0.5f, 1, 1.5f};
                rb_obb want;
                ck_assert_int_eq(rb_obb_from_quaternion(cen, half, q, &want),
                                 RB_OK);
                ck_assert(memcmp(&o[3], &want, sizeof want) == 0);
            } else {
                ck_assert(o[3].center[0] == 3.0f && o[3].axes[2][2] == 1.0f);
            }
            ck_assert(r->shapes.xboxes[1].a[0][3] == 1.0f);
            ck_assert(r->shapes.spheres[2].center[1] == 2.0f);
            ck_assert(r->shapes.planes[1].d == -5.0f);
        } else {
            ck_assert_uint_eq(r->shapes.n_obbs, first.shapes.n_obbs);
            for (int k = 0; k < 6; k++)
                ck_assert_msg(memcmp(keep[k], arrays[k], sizes[k]) == 0,
                              "round %d, array %d", round, k);
        }
        rbb_decoder_destroy(d);
    }
    for (int k = 0; k < 6; k++)
        free(keep[k]);
}
END_TEST

/* Version 2 header problems: status and pointer, decided from the 96
 * header bytes, before anything is allocated (counts far beyond memory
 * are 413, never an attempt and a 500). */
START_TEST(test_header_checks_v2)
{
    static const struct {
        const char *what;
        uint8_t kind, mode, dims, flags;
        v2_counts c;
        int scene_in_path;
        long status; /* 0: the header is accepted */
        const char *pointer;
    } cases[] = {
        {"accepted", 1, 1, 3, 7, {2, 1, 1, 1, 1, 1}, 0, 0, ""},
        {"unknown flag", 1, 1, 3, 16, {2, 1, 0, 0, 0, 0}, 0, 400, ""},
        {"camera and ranges", 1, 1, 3, 9, {2, 1, 0, 0, 0, 0}, 0, 400, ""},
        {"2D camera", 1, 1, 2, 8, {0, 1, 0, 0, 0, 0}, 0, 422, "/dims"},
        {"camera pixels over", 1, 1, 3, 8, {1001, 1, 0, 0, 0, 0}, 0, 413,
         "/camera/pixels"},
        {"2D obbs", 1, 1, 2, 0, {2, 1, 1, 0, 0, 0}, 0, 422, "/obbs"},
        {"2D xboxes", 1, 1, 2, 0, {2, 1, 0, 1, 0, 0}, 0, 422, "/xboxes"},
        {"2D spheres", 1, 1, 2, 0, {2, 1, 0, 0, 1, 0}, 0, 422, "/spheres"},
        {"2D planes", 1, 1, 2, 0, {2, 1, 0, 0, 0, 1}, 0, 422, "/planes"},
        {"2D boxes", 1, 1, 2, 2, {2, 1, 0, 0, 0, 0}, 0, 0, ""},
        {"elements together", 1, 1, 3, 0, {2, 600, 100, 100, 150, 51}, 0,
         413, "/planes"},
        {"elements at the limit", 1, 1, 3, 0, {2, 600, 100, 100, 150, 50},
         0, 0, ""},
        {"spheres over", 1, 1, 3, 0, {2, 600, 0, 0, 401, 0}, 0, 413,
         "/spheres"},
        {"boxes over", 1, 1, 3, 0, {2, 1001, 5, 0, 0, 0}, 0, 413, "/boxes"},
        {"obbs beyond memory", 1, 1, 3, 0, {2, 0, UINT64_MAX, 0, 0, 0}, 0,
         413, "/obbs"},
        {"xboxes beyond memory", 1, 1, 3, 0,
         {2, 0, 0, UINT64_MAX / 2, 0, 0}, 0, 413, "/xboxes"},
        {"planes after a full list", 1, 1, 3, 0,
         {2, 1000, 0, 0, 0, UINT64_MAX}, 0, 413, "/planes"},
        {"pairs, two lists", 1, 0, 3, 0, {2, 2, 0, 0, 2, 0}, 0, 422,
         "/mode"},
        {"pairs, spheres short", 1, 0, 3, 0, {3, 0, 0, 0, 2, 0}, 0, 422,
         "/spheres"},
        {"pairs, obbs long", 1, 0, 3, 4, {3, 0, 4, 0, 0, 0}, 0, 422,
         "/obbs"},
        {"pairs, no list", 1, 0, 3, 0, {3, 0, 0, 0, 0, 0}, 0, 422,
         "/boxes"},
        {"pairs, xboxes", 1, 0, 3, 2, {3, 0, 0, 3, 0, 0}, 0, 0, ""},
        {"pairs, nothing", 1, 0, 3, 0, {0, 0, 0, 0, 0, 0}, 0, 0, ""},
        {"all results", 1, 4, 3, 0, {100, 0, 0, 0, 1, 0}, 0, 413, "/rays"},
        {"scene path spheres", 1, 1, 3, 0, {2, 0, 0, 0, 1, 0}, 1, 422,
         "/spheres"},
        {"scene path obbs", 1, 2, 3, 4, {2, 0, 3, 0, 0, 0}, 1, 422,
         "/obbs"},
        {"scene path normals", 1, 1, 3, 2, {2, 0, 0, 0, 0, 0}, 1, 0, ""},
        {"scene body", 2, 0, 3, 0, {0, 3, 0, 0, 0, 0}, 0, 0, ""},
        {"scene body obbs", 2, 0, 3, 0, {0, 3, 1, 0, 0, 0}, 0, 422,
         "/obbs"},
        {"scene body planes", 2, 0, 3, 0, {0, 0, 0, 0, 0, 2}, 0, 422,
         "/planes"},
        {"scene body flags", 2, 0, 3, 2, {0, 3, 0, 0, 0, 0}, 0, 400, ""},
        {"scene body over", 2, 0, 3, 0, {0, 1001, 0, 0, 0, 0}, 0, 413,
         "/boxes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t head[96];
        header_v2(head, cases[i].kind, cases[i].mode, cases[i].dims,
                  cases[i].flags, &cases[i].c);
        rbb_options o;
        rbb_options_init(&o, (rbb_kind)cases[i].kind);
        o.limits.max_rays = 1000;
        o.limits.max_boxes = 1000;
        o.limits.max_results = 5000;
        o.max_body = 1u << 20;
        o.scene_in_path = cases[i].scene_in_path;
        o.scene_dims = 3;
        rbb_decoder *d = NULL;
        ck_assert_int_eq(rbb_decoder_create(&o, &d), RB_OK);
        /* 64 bytes decide nothing but the version and size. */
        ck_assert_int_eq(rbb_decoder_feed(d, head, 64), 0);
        ck_assert_ptr_null(rbb_decoder_header(d));
        int rc = rbb_decoder_feed(d, head + 64, 32);
        const rbq_error *e = rbb_decoder_error(d);
        ck_assert_msg(e->status == cases[i].status, "%s: %d %s",
                      cases[i].what, e->status, e->detail);
        ck_assert_int_eq(rc, cases[i].status ? -1 : 0);
        ck_assert_msg(strcmp(e->pointer, cases[i].pointer) == 0, "%s: '%s'",
                      cases[i].what, e->pointer);
        if (!cases[i].status)
            ck_assert_ptr_nonnull(rbb_decoder_header(d));
        rbb_decoder_destroy(d);
    }

    /* Structure from the first 64 bytes: version, header size, and a
     * version 1 header with version 2's flags or size. */
    static const struct {
        const char *what;
        uint16_t version, size;
        uint8_t flags;
    } bad[] = {{"v2 with 64", 2, 64, 0},  {"v1 with 96", 1, 96, 0},
               {"v3", 3, 96, 0},          {"v1 normals", 1, 64, 2},
               {"v1 quaternion", 1, 64, 4}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint8_t head[96];
        const v2_counts c = {1, 1, 0, 0, 0, 0};
        header_v2(head, 1, 1, 3, bad[i].flags, &c);
        memcpy(head + 4, &bad[i].version, 2);
        memcpy(head + 6, &bad[i].size, 2);
        rbb_decoder *d = decoder(RBB_KIND_INTERSECT, RBB_LENGTH_UNKNOWN);
        ck_assert_int_eq(rbb_decoder_feed(d, head, 64), -1);
        ck_assert_msg(rbb_decoder_error(d)->status == 400, "%s: %d",
                      bad[i].what, rbb_decoder_error(d)->status);
        ck_assert_str_eq(rbb_decoder_error(d)->pointer, "");
        rbb_decoder_destroy(d);
    }
    /* Bytes 40-63 stay reserved in version 2. */
    uint8_t head[96];
    const v2_counts c = {1, 1, 0, 0, 0, 0};
    header_v2(head, 1, 1, 3, 0, &c);
    head[50] = 1;
    rbb_decoder *d = decoder(RBB_KIND_INTERSECT, RBB_LENGTH_UNKNOWN);
    ck_assert_int_eq(rbb_decoder_feed(d, head, 96), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    rbb_decoder_destroy(d);

    /* Limits that let any count through: the size the header announces
     * still decides before memory is taken - 413 without a length, 400
     * against one - and products past 64 bits are 413. */
    static const v2_counts huge[] = {{0, 0, 0, 0, 1ull << 40, 0},
                                     {0, 0, 0, UINT64_MAX / 8, 0, 0},
                                     {0, 0, 1ull << 60, 1ull << 60, 0, 0}};
    for (size_t i = 0; i < 3; i++) {
        for (int with_length = 0; with_length < 2; with_length++) {
            header_v2(head, 1, 1, 3, 0, &huge[i]);
            rbb_options o;
            rbb_options_init(&o, RBB_KIND_INTERSECT);
            o.limits.max_boxes = UINT64_MAX;
            o.content_length = with_length ? 96 + 16 : RBB_LENGTH_UNKNOWN;
            o.max_body = 1u << 20;
            ck_assert_int_eq(rbb_decoder_create(&o, &d), RB_OK);
            ck_assert_int_eq(rbb_decoder_feed(d, head, 96), -1);
            long want = with_length && i == 0 ? 400 : 413;
            ck_assert_msg(rbb_decoder_error(d)->status == want,
                          "huge %zu/%d: %d %s", i, with_length,
                          rbb_decoder_error(d)->status,
                          rbb_decoder_error(d)->detail);
            ck_assert_str_eq(rbb_decoder_error(d)->pointer, "");
            rbb_decoder_destroy(d);
        }
    }
}
END_TEST

/* Quaternions are judged at the end, the same however the body came:
 * not finite 422 at its component, zero 422 at /obbs/i/6. */
START_TEST(test_quaternions)
{
    static uint8_t body[96 + 2 * 24 + 3 * 60]; /* room for either form */
    const v2_counts c = {2, 0, 3, 0, 0, 0};
    static const struct {
        int obb, field;
        float value[4]; /* w x y z */
        const char *pointer;
    } cases[] = {
        {1, 6, {0, 0, 0, 0}, "/obbs/1/6"},
        {2, 6, {-0.0f, 0, 0, -0.0f}, "/obbs/2/6"},
        {0, 7, {1, NAN, 0, 0}, "/obbs/0/7"},
        {2, 9, {1, 0, 0, -INFINITY}, "/obbs/2/9"},
        {0, 6, {INFINITY, 0, 0, 0}, "/obbs/0/6"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len = build_v2(body, RB_MODE_NEAREST, RBB_FLAG_OBB_QUATERNION,
                              &c);
        memcpy(body + 96 + 2 * 24 + (size_t)cases[i].obb * 40 + 24,
               cases[i].value, 16);
        for (int split = 0; split < 2; split++) {
            rbb_decoder *d = decoder(RBB_KIND_INTERSECT, len);
            if (split) {
                for (size_t at = 0; at < len; at++)
                    ck_assert_int_eq(rbb_decoder_feed(d, body + at, 1), 0);
            } else {
                ck_assert_int_eq(rbb_decoder_feed(d, body, len), 0);
            }
            ck_assert_int_eq(rbb_decoder_finish(d), -1);
            ck_assert_int_eq(rbb_decoder_error(d)->status, 422);
            ck_assert_str_eq(rbb_decoder_error(d)->pointer, cases[i].pointer);
            ck_assert_ptr_null(rbb_decoder_request(d));
            rbb_decoder_destroy(d);
        }
    }
    /* The axes form is the library's to judge: taken as it is. */
    const v2_counts c2 = {2, 0, 3, 0, 0, 0};
    size_t len = build_v2(body, RB_MODE_NEAREST, 0, &c2);
    rbb_decoder *d = decoder(RBB_KIND_INTERSECT, len);
    ck_assert_int_eq(rbb_decoder_feed(d, body, len), 0);
    ck_assert_int_eq(rbb_decoder_finish(d), 0);
    rbb_decoder_destroy(d);
}
END_TEST

/* Lengths of version 2 bodies: a cut header, Content-Length against the
 * announced size, short and long bodies. */
START_TEST(test_lengths_v2)
{
    static uint8_t body[96 + 2 * 24 + 2 * 16 + 8];
    const v2_counts c = {2, 0, 0, 0, 2, 0};
    size_t len = build_v2(body, RB_MODE_NEAREST, 0, &c);
    ck_assert_uint_eq(len, 96 + 2 * 24 + 2 * 16);
    rbb_decoder *d = decoder(RBB_KIND_INTERSECT, len - 16);
    ck_assert_int_eq(rbb_decoder_feed(d, body, 96), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    ck_assert_ptr_nonnull(strstr(rbb_decoder_error(d)->detail, "2 other"));
    rbb_decoder_destroy(d);
    /* Cut inside the header's version 2 part. */
    d = decoder(RBB_KIND_INTERSECT, RBB_LENGTH_UNKNOWN);
    ck_assert_int_eq(rbb_decoder_feed(d, body, 80), 0);
    ck_assert_int_eq(rbb_decoder_finish(d), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    ck_assert_ptr_nonnull(strstr(rbb_decoder_error(d)->detail, "96-byte"));
    rbb_decoder_destroy(d);
    /* Cut in the sphere records; one byte too many. */
    d = decoder(RBB_KIND_INTERSECT, RBB_LENGTH_UNKNOWN);
    ck_assert_int_eq(rbb_decoder_feed(d, body, len - 1), 0);
    ck_assert_int_eq(rbb_decoder_finish(d), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    rbb_decoder_destroy(d);
    d = decoder(RBB_KIND_INTERSECT, len);
    ck_assert_int_eq(rbb_decoder_feed(d, body, len), 0);
    ck_assert_int_eq(rbb_decoder_feed(d, body, 1), -1);
    ck_assert_int_eq(rbb_decoder_error(d)->status, 400);
    rbb_decoder_destroy(d);
}
END_TEST

START_TEST(test_results_v2)
{
    rb_hit hits[4];
    uint8_t kinds[4];
    float normals[12];
    rb_results res = {.hits = hits, .kinds = kinds, .normals = normals};
    rbb_result_info info = {.version = RBB_VERSION_2,
                            .mode = RB_MODE_NEAREST, .dims = 3, .n_rays = 4,
                            .has_kinds = 1, .has_normals = 1,
                            .fell_back = 1, .elapsed_ms = 0.5};
    uint8_t head[RBB_HEADER_MAX];
    memset(head, 0xee, sizeof head);
    ck_assert_uint_eq(rbb_result_header(&info, head), 96);
    rbb_header h;
    rbb_header_decode_v2(head, &h);
    ck_assert(h.magic_ok && h.version == 2 && h.header_size == 96 &&
              h.kind == RBB_KIND_RESULT && h.mode == 1 && h.n_rays == 4 &&
              h.flags == (RBB_FLAG_FELL_BACK | RBB_FLAG_KINDS |
                          RBB_FLAG_HAS_NORMALS) &&
              h.n_obbs == 0 && h.n_xboxes == 0 && h.n_spheres == 0 &&
              h.n_planes == 0 && h.elapsed_ms == 0.5);
    const void *part[RBB_PARTS_MAX];
    size_t bytes[RBB_PARTS_MAX];
    ck_assert_int_eq(rbb_result_layout(&info, &res, part, bytes), 3);
    ck_assert(part[0] == hits && bytes[0] == 64);
    ck_assert(part[1] == kinds && bytes[1] == 4);
    ck_assert(part[2] == normals && bytes[2] == 48);
    /* Normals alone; neither. */
    info.has_kinds = 0;
    ck_assert_int_eq(rbb_result_layout(&info, &res, part, bytes), 2);
    ck_assert(part[1] == normals && bytes[1] == 48);
    rbb_result_header(&info, head);
    ck_assert_int_eq(head[11], RBB_FLAG_FELL_BACK | RBB_FLAG_HAS_NORMALS);
    info.has_normals = 0;
    ck_assert_int_eq(rbb_result_layout(&info, &res, part, bytes), 1);
    /* Other modes have no kinds or normals, in either version. */
    uint32_t counts[4] = {1, 0, 2, 0};
    rb_list_hit list[4];
    rb_results r2 = {.counts = counts, .list = list};
    info = (rbb_result_info){.version = RBB_VERSION_2, .mode = RB_MODE_ALL,
                             .dims = 3, .n_rays = 4, .max_hits = 2,
                             .list_entries = 3, .has_kinds = 1,
                             .has_normals = 1};
    ck_assert_uint_eq(rbb_result_header(&info, head), 96);
    ck_assert_int_eq(head[11], 0);
    ck_assert_int_eq(rbb_result_layout(&info, &r2, part, bytes), 2);
    ck_assert(part[1] == list && bytes[1] == 36);

    /* Which version answers: a binary request's own; JSON gets 2 only for
     * what version 1 cannot carry. */
    rbq_request req = {.mode = RB_MODE_NEAREST};
    ck_assert_uint_eq(rbb_result_version(&req, 0), 1);
    ck_assert_uint_eq(rbb_result_version(&req, 2), 2);
    req.outputs = RB_OUTPUT_NORMAL;
    ck_assert_uint_eq(rbb_result_version(&req, 0), 2);
    req.outputs = 0;
    req.shapes.n_planes = 1;
    ck_assert_uint_eq(rbb_result_version(&req, 0), 2);
    ck_assert_uint_eq(rbb_result_version(&req, 1), 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("binary_codec");
    TCase *tc = tcase_create("codec");
    tcase_add_test(tc, test_header_layout);
    tcase_add_loop_test(tc, test_any_split, 0, 4);
    tcase_add_test(tc, test_header_checks);
    tcase_add_test(tc, test_lengths);
    tcase_add_test(tc, test_scene_bodies);
    tcase_add_test(tc, test_results);
    tcase_add_test(tc, test_v1_unchanged);
    tcase_add_test(tc, test_doc_example_v2);
    tcase_add_test(tc, test_header_layout_v2);
    tcase_add_loop_test(tc, test_any_split_v2, 0, 8);
    tcase_add_test(tc, test_header_checks_v2);
    tcase_add_test(tc, test_quaternions);
    tcase_add_test(tc, test_lengths_v2);
    tcase_add_test(tc, test_results_v2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
