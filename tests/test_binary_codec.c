/* test_binary_codec.c - the binary form (server/binary_codec.h): header
 * round trip and offsets as docs/binary-format.md gives them, the
 * decoder's answer independent of how the body is split, every header
 * check with its status and pointer (before any allocation: counts far
 * beyond memory are refused, not attempted), and the result layout. */
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
        const rbj_request *r = rbb_decoder_request(d);
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
        const rbj_error *e = rbb_decoder_error(d);
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
    const rbj_request *r = rbb_decoder_request(d);
    ck_assert_int_eq(r->body, RBJ_SCENE_CREATE);
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
    uint8_t head[64];
    rbb_result_header(&info, head);
    rbb_header h;
    rbb_header_decode(head, &h);
    ck_assert(h.magic_ok && h.kind == RBB_KIND_RESULT && h.mode == 4 &&
              h.n_rays == 4 && h.n_boxes == 6 && h.max_hits == 3 &&
              h.flags == RBB_FLAG_SCENE_VERSION && h.scene_version == 5 &&
              h.elapsed_ms == 1.25);
    const void *part[2];
    size_t bytes[2];
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
