/* test_json.c - the streaming JSON request parser (server/json_request.c):
 * every body form, defaults, member order, exact float32 conversion,
 * chunking invariance, every error class with its exact pointer, limits,
 * out of memory, and the mapping of library errors to pointers. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "float_text.h"
#include "json_text.h"
#include "json_request.h"
#include "testutil.h"

/* How a body is fed: whole, byte by byte, in random chunk sizes, or in
 * random chunks with the last one through rbj_parser_feed_last (the
 * server's way when a Content-Length tells it). */
enum { WHOLE = 0, BYTES = 1, RANDOM = 2, LAST = 3, FEEDS = 4 };

static rbj_parser *feed(const rbj_options *opt, const char *body, size_t len,
                        int how, uint64_t seed, int *rc)
{
    rbj_parser *p = NULL;
    ck_assert_int_eq(rbj_parser_create(opt, &p), RB_OK);
    rbt_rng rng = {seed};
    size_t at = 0;
    *rc = 0;
    while (at < len && *rc == 0) {
        size_t n = len - at;
        if (how == BYTES)
            n = 1;
        else if ((how == RANDOM || how == LAST) && n > 1)
            n = 1 + rbt_below(&rng, n < 97 ? (uint32_t)n : 97);
        *rc = how == LAST && at + n == len
                  ? rbj_parser_feed_last(p, body + at, n)
                  : rbj_parser_feed(p, body + at, n);
        at += n;
    }
    if (*rc == 0)
        *rc = rbj_parser_finish(p);
    return p;
}

static rbj_parser *parse_opt(const rbj_options *opt, const char *body)
{
    int rc;
    rbj_parser *p = feed(opt, body, strlen(body), WHOLE, 1, &rc);
    const rbq_error *e = rbj_parser_error(p);
    ck_assert_msg(rc == 0, "body %s: %d %s: %s", body, e->status, e->pointer,
                  e->detail);
    ck_assert_ptr_nonnull(rbj_parser_request(p));
    return p;
}

static rbj_parser *parse(rbq_body kind, const char *body)
{
    rbj_options opt;
    rbj_options_init(&opt, kind);
    return parse_opt(&opt, body);
}

/* The body fails the same way however it is fed: status, pointer and the
 * start of the detail. */
static void expect_error_opt(const rbj_options *opt, const char *body,
                             size_t len, int status, const char *pointer,
                             const char *detail)
{
    rbq_error first;
    for (int how = 0; how < FEEDS; how++) {
        int rc;
        rbj_parser *p = feed(opt, body, len, how, 7, &rc);
        const rbq_error *e = rbj_parser_error(p);
        ck_assert_msg(rc == -1, "%.80s: accepted (feed %d)", body, how);
        ck_assert_ptr_null(rbj_parser_request(p));
        ck_assert_msg(e->status == status, "%.80s: status %d, want %d (%s)",
                      body, e->status, status, e->detail);
        if (pointer)
            ck_assert_msg(e->has_pointer && strcmp(e->pointer, pointer) == 0,
                          "%.80s: pointer '%s', want '%s' (%s)", body,
                          e->pointer, pointer, e->detail);
        else
            ck_assert_msg(!e->has_pointer, "%.80s: has pointer %s", body,
                          e->pointer);
        ck_assert_msg(strstr(e->detail, detail) != NULL,
                      "%.80s: detail '%s' lacks '%s'", body, e->detail,
                      detail);
        if (how == WHOLE)
            first = *e;
        else
            ck_assert_msg(memcmp(&first, e, sizeof first) == 0,
                          "%.80s: feed %d differs: '%s' vs '%s' @%llu/%llu",
                          body, how, first.detail, e->detail,
                          (unsigned long long)first.offset,
                          (unsigned long long)e->offset);
        rbj_parser_destroy(p);
    }
}

static void expect_error(rbq_body kind, const char *body, int status,
                         const char *pointer, const char *detail)
{
    rbj_options opt;
    rbj_options_init(&opt, kind);
    expect_error_opt(&opt, body, strlen(body), status, pointer, detail);
}

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

#define ASSERT_BITS(got, want)                                                 \
    ck_assert_msg(bits(got) == bits(want), "%s = %.9g (0x%08x), want %.9g "  \
                  "(0x%08x)", #got, (double)(got), bits(got), (double)(want), \
                  bits(want))

/* ------------------------------------------------------------------------
 * Body forms
 */
START_TEST(test_intersect_all_members)
{
    rbj_parser *p = parse(RBQ_INTERSECT,
        "{\"mode\":\"all\",\"dims\":3,"
        "\"rays\":[[0,0,0,1,0,0],[1,2,3,4,5,6,0.5,9],[0,0,0,1,0,0,1,null]],"
        "\"boxes\":[[4,-1,-1,6,1,1],[-1,-2,-3,1,2,3]],"
        "\"tmin\":0.25,\"tmax\":100,\"max_hits\":5}");
    const rbq_request *r = rbj_parser_request(p);
    ck_assert_int_eq(r->body, RBQ_INTERSECT);
    ck_assert_int_eq(r->mode, RB_MODE_ALL);
    ck_assert_uint_eq(r->dims, 3);
    ck_assert_uint_eq(r->max_hits, 5);
    ASSERT_BITS(r->tmin, 0.25f);
    ASSERT_BITS(r->tmax, 100.0f);
    ck_assert_uint_eq(r->n_rays, 3);
    ck_assert_uint_eq(r->n_boxes, 2);
    ck_assert_ptr_null(r->scene);
    const rb_ray *ray = r->rays;
    rb_ray want0 = {{0, 0, 0}, {1, 0, 0}, 0.25f, 100.0f};
    rb_ray want1 = {{1, 2, 3}, {4, 5, 6}, 0.5f, 9.0f};
    rb_ray want2 = {{0, 0, 0}, {1, 0, 0}, 1.0f, INFINITY};
    ck_assert(memcmp(&ray[0], &want0, sizeof want0) == 0);
    ck_assert(memcmp(&ray[1], &want1, sizeof want1) == 0);
    ck_assert(memcmp(&ray[2], &want2, sizeof want2) == 0);
    ck_assert_uint_eq(r->ray_arity[0], 6);
    ck_assert_uint_eq(r->ray_arity[1], 8);
    const rb_box *box = r->boxes;
    rb_box b1 = {{-1, -2, -3}, {1, 2, 3}};
    ck_assert(memcmp(&box[1], &b1, sizeof b1) == 0);
    rbj_parser_destroy(p);
}
END_TEST

START_TEST(test_defaults)
{
    rbj_parser *p = parse(RBQ_INTERSECT,
                          "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[]}");
    const rbq_request *r = rbj_parser_request(p);
    ck_assert_int_eq(r->mode, RB_MODE_NEAREST);
    ck_assert_uint_eq(r->dims, 3);
    ck_assert_uint_eq(r->max_hits, 64);
    ASSERT_BITS(r->tmin, 0.0f);
    ck_assert(isinf(r->tmax) && r->tmax > 0);
    const rb_ray *ray = r->rays;
    ASSERT_BITS(ray[0].tmin, 0.0f);
    ck_assert(isinf(ray[0].tmax));
    ck_assert_uint_eq(r->n_boxes, 0);
    rbj_parser_destroy(p);

    /* The default max_hits is the caller's; tmax null is +inf. */
    rbj_options opt;
    rbj_options_init(&opt, RBQ_INTERSECT);
    opt.limits.default_max_hits = 7;
    p = parse_opt(&opt, "{\"rays\":[],\"boxes\":[],\"tmax\":null,"
                        "\"mode\":\"all\"}");
    r = rbj_parser_request(p);
    ck_assert_uint_eq(r->max_hits, 7);
    ck_assert(isinf(r->tmax) && r->tmax > 0);
    ck_assert_uint_eq(r->n_rays, 0);
    rbj_parser_destroy(p);
}
END_TEST

START_TEST(test_2d)
{
    rbj_parser *p = parse(RBQ_INTERSECT,
        "{\"rays\":[[1,2,3,4],[5,6,7,8,0.5,null],[9,10,11,12,1,2]],"
        "\"boxes\":[[0,1,2,3],[-4,-3,-2,-1],[0,0,0,0]],\"tmax\":50,"
        "\"tmin\":-1,\"mode\":\"pairs\",\"dims\":2}");
    const rbq_request *r = rbj_parser_request(p);
    ck_assert_uint_eq(r->dims, 2);
    ck_assert_int_eq(r->mode, RB_MODE_PAIRS);
    ck_assert_uint_eq(r->n_rays, 3);
    const rb_ray2 *ray = r->rays;
    rb_ray2 want[3] = {{{1, 2}, {3, 4}, -1.0f, 50.0f},
                       {{5, 6}, {7, 8}, 0.5f, INFINITY},
                       {{9, 10}, {11, 12}, 1.0f, 2.0f}};
    ck_assert(memcmp(ray, want, sizeof want) == 0);
    const rb_box2 *box = r->boxes;
    rb_box2 wantb[3] = {{{0, 1}, {2, 3}}, {{-4, -3}, {-2, -1}},
                        {{0, 0}, {0, 0}}};
    ck_assert(memcmp(box, wantb, sizeof wantb) == 0);
    rbj_parser_destroy(p);
}
END_TEST

/* The same request with its members in several orders gives the same
 * records. */
START_TEST(test_member_orders)
{
    static const char *const bodies[] = {
        "{\"dims\":2,\"mode\":\"count\",\"tmin\":1,\"tmax\":9,"
        "\"rays\":[[1,2,3,4],[5,6,7,8,2,3]],\"boxes\":[[0,1,2,3]],"
        "\"max_hits\":3}",
        "{\"rays\":[[1,2,3,4],[5,6,7,8,2,3]],\"boxes\":[[0,1,2,3]],"
        "\"max_hits\":3,\"tmax\":9,\"tmin\":1,\"mode\":\"count\","
        "\"dims\":2}",
        "{\"boxes\":[[0,1,2,3]],\"tmax\":9,\"rays\":[[1,2,3,4],"
        "[5,6,7,8,2,3]],\"dims\":2,\"max_hits\":3,\"mode\":\"count\","
        "\"tmin\":1}",
    };
    rbj_parser *first = parse(RBQ_INTERSECT, bodies[0]);
    const rbq_request *a = rbj_parser_request(first);
    for (size_t k = 1; k < sizeof bodies / sizeof *bodies; k++) {
        rbj_parser *p = parse(RBQ_INTERSECT, bodies[k]);
        const rbq_request *b = rbj_parser_request(p);
        ck_assert_int_eq(a->mode, b->mode);
        ck_assert_uint_eq(a->dims, b->dims);
        ck_assert_uint_eq(a->max_hits, b->max_hits);
        ck_assert_uint_eq(a->n_rays, b->n_rays);
        ck_assert_uint_eq(a->n_boxes, b->n_boxes);
        ck_assert(memcmp(a->rays, b->rays, 2 * sizeof(rb_ray2)) == 0);
        ck_assert(memcmp(a->boxes, b->boxes, sizeof(rb_box2)) == 0);
        rbj_parser_destroy(p);
    }
    const rb_ray2 *ray = a->rays;
    ASSERT_BITS(ray[0].tmin, 1.0f);
    ASSERT_BITS(ray[0].tmax, 9.0f);
    ASSERT_BITS(ray[1].tmin, 2.0f);
    ASSERT_BITS(ray[1].tmax, 3.0f);
    rbj_parser_destroy(first);
}
END_TEST

START_TEST(test_scene_bodies)
{
    rbj_parser *p = parse(RBQ_INTERSECT,
                          "{\"scene\":\"s-1\",\"rays\":[[0,0,0,1,0,0]]}");
    const rbq_request *r = rbj_parser_request(p);
    ck_assert_str_eq(r->scene, "s-1");
    ck_assert_uint_eq(r->n_boxes, 0);
    rbj_parser_destroy(p);

    p = parse(RBQ_SCENE_CREATE,
              "{\"boxes\":[[0,0,1,1],[2,2,3,3]],\"dims\":2}");
    r = rbj_parser_request(p);
    ck_assert_int_eq(r->body, RBQ_SCENE_CREATE);
    ck_assert_uint_eq(r->dims, 2);
    ck_assert_uint_eq(r->n_boxes, 2);
    rb_box2 want[2] = {{{0, 0}, {1, 1}}, {{2, 2}, {3, 3}}};
    ck_assert(memcmp(r->boxes, want, sizeof want) == 0);
    rbj_parser_destroy(p);

    p = parse(RBQ_SCENE_PATCH,
              "{\"set\":[[3,0,0,0,1,1,1],[0,-1,-1,-1,0,0,0]],"
              "\"append\":[[5,5,5,6,6,6]]}");
    r = rbj_parser_request(p);
    ck_assert_uint_eq(r->n_set, 2);
    ck_assert_uint_eq(r->set_index[0], 3);
    ck_assert_uint_eq(r->set_index[1], 0);
    rb_box wset[2] = {{{0, 0, 0}, {1, 1, 1}}, {{-1, -1, -1}, {0, 0, 0}}};
    ck_assert(memcmp(r->set_boxes, wset, sizeof wset) == 0);
    ck_assert_uint_eq(r->n_append, 1);
    rb_box wapp = {{5, 5, 5}, {6, 6, 6}};
    ck_assert(memcmp(r->append_boxes, &wapp, sizeof wapp) == 0);
    rbj_parser_destroy(p);

    /* A 2D scene's patch (dims come from the scene, not the body). */
    rbj_options opt;
    rbj_options_init(&opt, RBQ_SCENE_PATCH);
    opt.patch_dims = 2;
    p = parse_opt(&opt, "{\"set\":[[4294967295,1,2,3,4]]}");
    r = rbj_parser_request(p);
    ck_assert_uint_eq(r->set_index[0], 4294967295u);
    rb_box2 w2 = {{1, 2}, {3, 4}};
    ck_assert(memcmp(r->set_boxes, &w2, sizeof w2) == 0);
    ck_assert_uint_eq(r->n_append, 0);
    rbj_parser_destroy(p);
    p = parse(RBQ_SCENE_PATCH, "{}");
    ck_assert_uint_eq(rbj_parser_request(p)->n_set, 0);
    rbj_parser_destroy(p);
}
END_TEST

/* ------------------------------------------------------------------------
 * Numbers
 */
static float one_number(const char *text)
{
    char body[512];
    snprintf(body, sizeof body, "{\"rays\":[[%s,0,0,1,0,0]],\"boxes\":[]}",
             text);
    rbj_parser *p = parse(RBQ_INTERSECT, body);
    float v = ((const rb_ray *)rbj_parser_request(p)->rays)[0].origin[0];
    rbj_parser_destroy(p);
    return v;
}

START_TEST(test_numbers_exact)
{
    ASSERT_BITS(one_number("-0"), -0.0f);
    ASSERT_BITS(one_number("-0.0e0"), -0.0f);
    ASSERT_BITS(one_number("0"), 0.0f);
    ASSERT_BITS(one_number("1e-3"), 1e-3f);
    ASSERT_BITS(one_number("1E+2"), 100.0f);
    ASSERT_BITS(one_number("2.5E-1"), 0.25f);
    ASSERT_BITS(one_number("-12345.678"), -12345.678f);
    /* Double rounding trap: strtod gives 1 + 2^-24 exactly (a tie), and a
     * cast then rounds to even, 1.0; strtof rounds once, up. */
    ASSERT_BITS(one_number("1.00000005960464477550"), 1.0000001f);
    ck_assert_uint_eq(bits(one_number("1.00000005960464477550")),
                      0x3f800001u);
    /* Subnormal literals are kept as parsed (the library flushes, R7). */
    ASSERT_BITS(one_number("1e-40"), 1e-40f);
    ASSERT_BITS(one_number("1.4e-45"), FLT_TRUE_MIN);
    ASSERT_BITS(one_number("-1.17549421e-38"), -1.17549421e-38f);
    /* Underflow below the least subnormal: signed zero, not an error. */
    ASSERT_BITS(one_number("1e-50"), 0.0f);
    ASSERT_BITS(one_number("-1e-50"), -0.0f);
    /* The extremes of float32, and long texts. */
    ASSERT_BITS(one_number("3.4028235e38"), FLT_MAX);
    ASSERT_BITS(one_number("-3.40282346638528859811704183484516925440e+38"),
                -FLT_MAX);
    ASSERT_BITS(one_number("0.1000000000000000000000000000000000000000000000"
                           "000000000000000000000000000000000000000001"),
                0.1f);
    ASSERT_BITS(one_number("16777217"), 16777216.0f);
    ASSERT_BITS(one_number("16777219"), 16777220.0f);
}
END_TEST

/* rb_float_parse takes a shortcut for short numbers (Clinger's fast
 * path with a midpoint check); it must agree with strtof bit for bit on
 * every text: random float32s in shortest and in %.Ng form, random digit
 * strings with exponents, and midpoints between floats. */
START_TEST(test_float_parse_is_strtof)
{
    rbt_rng rng = {2024};
    char t[64];
    long checked = 0;
    for (long i = 0; i < 400000; i++) {
        uint32_t b = (uint32_t)rbt_next(&rng);
        float f;
        memcpy(&f, &b, 4);
        int kind = (int)rbt_below(&rng, 3);
        if (kind < 2 && !isfinite(f))
            continue;
        if (kind == 0) {
            rb_float_format(f, t);
        } else if (kind == 1) {
            snprintf(t, sizeof t, "%.*g", 1 + (int)rbt_below(&rng, 17),
                     (double)f);
        } else {
            int k = 0, nd = 1 + (int)rbt_below(&rng, 17);
            if (rbt_below(&rng, 2))
                t[k++] = '-';
            t[k++] = (char)('1' + rbt_below(&rng, 9));
            int dot = (int)rbt_below(&rng, (uint32_t)nd + 1);
            for (int j = 1; j < nd; j++) {
                if (j == dot)
                    t[k++] = '.';
                t[k++] = (char)('0' + rbt_below(&rng, 10));
            }
            if (rbt_below(&rng, 2))
                k += snprintf(t + k, sizeof t - (size_t)k, "e%d",
                              (int)rbt_below(&rng, 70) - 35);
            t[k] = '\0';
        }
        float got, want = strtof(t, NULL);
        int rc = rb_float_parse(t, &got);
        if (isinf(want)) {
            ck_assert_int_eq(rc, -1);
            continue;
        }
        ck_assert_int_eq(rc, 0);
        ck_assert_msg(bits(got) == bits(want), "%s: %a, strtof %a", t,
                      (double)got, (double)want);
        checked++;
    }
    ck_assert_int_gt(checked, 300000);
    /* Midpoints between neighbouring floats, written out exactly (ties
     * go to even), and their neighbours one digit away. */
    for (uint32_t m = 1u << 23; m < (1u << 23) + 2000; m++) {
        for (int e = 0; e < 4; e++) {
            snprintf(t, sizeof t, "%llu", (unsigned long long)(2ull * m + 1) << e);
            float got;
            ck_assert_int_eq(rb_float_parse(t, &got), 0);
            ck_assert_msg(bits(got) == bits(strtof(t, NULL)), "%s", t);
        }
    }
}
END_TEST

START_TEST(test_tmax_null_in_ray)
{
    rbj_parser *p = parse(RBQ_INTERSECT,
                          "{\"rays\":[[0,0,0,1,0,0,-2,null]],\"boxes\":[],"
                          "\"tmax\":3}");
    const rb_ray *ray = rbj_parser_request(p)->rays;
    ASSERT_BITS(ray[0].tmin, -2.0f);
    ck_assert(isinf(ray[0].tmax) && ray[0].tmax > 0);
    rbj_parser_destroy(p);
}
END_TEST

/* ------------------------------------------------------------------------
 * Chunking: the same body, however split, gives the same request.
 */
static char *big_body(size_t n_rays, size_t n_boxes, int dims_last)
{
    size_t cap = 256 + 160 * (n_rays + n_boxes);
    char *s = malloc(cap);
    size_t at = 0;
    rbt_rng rng = {42};
    at += (size_t)snprintf(s + at, cap - at, "{%s\"mode\":\"all\",\"rays\":[",
                           dims_last ? "" : "\"dims\":3,");
    for (size_t i = 0; i < n_rays; i++) {
        at += (size_t)snprintf(s + at, cap - at, "%s[", i ? "," : "");
        unsigned k = (i % 3 == 0) ? 8 : 6;
        for (unsigned f = 0; f < k; f++) {
            float v = rbt_uniform(&rng, -1000, 1000);
            if (f == 6)
                v = 0;
            at += (size_t)snprintf(s + at, cap - at, "%s%.9g%s",
                                   f ? "," : "", (double)v,
                                   (f == 7 && i % 2) ? "e0" : "");
        }
        at += (size_t)snprintf(s + at, cap - at, "]");
    }
    at += (size_t)snprintf(s + at, cap - at, "],\"boxes\":[");
    for (size_t i = 0; i < n_boxes; i++) {
        float lo = rbt_uniform(&rng, -100, 100);
        at += (size_t)snprintf(s + at, cap - at,
                               "%s[ %.9g , -1E-3,%.9g,%.9g,1e+2,\n%.9g ]",
                               i ? "," : "", (double)lo, (double)lo,
                               (double)(lo + 1), (double)(lo + 2));
    }
    snprintf(s + at, cap - at, "],\"max_hits\":4%s}",
             dims_last ? ",\"dims\":3" : "");
    return s;
}

START_TEST(test_chunking_same_request)
{
    rbj_options opt;
    rbj_options_init(&opt, RBQ_INTERSECT);
    for (int dims_last = 0; dims_last < 2; dims_last++) {
        char *body = big_body(300, 120, dims_last);
        size_t len = strlen(body);
        int rc;
        rbj_parser *whole = feed(&opt, body, len, WHOLE, 0, &rc);
        ck_assert_msg(rc == 0, "%s", rbj_parser_error(whole)->detail);
        const rbq_request *a = rbj_parser_request(whole);
        ck_assert_uint_eq(a->n_rays, 300);
        ck_assert_uint_eq(a->n_boxes, 120);
        for (int how = BYTES; how < FEEDS; how++) {
            for (uint64_t seed = 1; seed <= (how == RANDOM ? 5u : 1u);
                 seed++) {
                rbj_parser *p = feed(&opt, body, len, how, seed, &rc);
                ck_assert_int_eq(rc, 0);
                const rbq_request *b = rbj_parser_request(p);
                ck_assert_uint_eq(b->n_rays, a->n_rays);
                ck_assert_uint_eq(b->n_boxes, a->n_boxes);
                ck_assert(memcmp(a->rays, b->rays,
                                 a->n_rays * sizeof(rb_ray)) == 0);
                ck_assert(memcmp(a->boxes, b->boxes,
                                 a->n_boxes * sizeof(rb_box)) == 0);
                ck_assert(memcmp(a->ray_arity, b->ray_arity, a->n_rays) == 0);
                ck_assert_uint_eq(b->max_hits, 4);
                rbj_parser_destroy(p);
            }
        }
        /* Spot-check against strtof of the same text. */
        const rb_ray *ray = a->rays;
        ck_assert(isinf(ray[1].tmax) && bits(ray[0].tmin) == 0);
        rbj_parser_destroy(whole);
        free(body);
    }
}
END_TEST

/* Mutated bodies (a byte replaced, inserted or the tail cut) fail or pass
 * the same way, with the same error, whole, byte by byte and in random
 * chunks. */
START_TEST(test_chunking_same_error)
{
    static const char *const bases[] = {
        "{\"mode\":\"all\",\"rays\":[[0,-0.5,1e-3,1,0,0],[1.5E+2,0,0,1,0,0,"
        "0,null]],\"boxes\":[[4,-1,-1,6,1,1]],\"tmin\":0,\"tmax\":12.25,"
        "\"max_hits\":3}",
        "{\"scene\":\"s\\u002e1\\u0041\",\"mode\":\"\\u0061ny\",\"rays\":"
        "[[1,2,3,4,5,6,-7.5e-1,null]], \"tmax\" : null ,\"dims\":3}",
        "{\"camera\":{\"view\":[1,0,0,0,0,1,0,0,0,0,1,-5,0,0,0,1],"
        "\"projection\":[2,0,0,0,0,2,0,0,0,0,-1,-0.2,0,0,-1,0],\"depth\":"
        "\"minus_one_to_one\",\"viewport\":[0,0,4,3],\"pixels\":[[1.5,2],"
        "[0,0.25e1]]},\"boxes\":[[0,0,0,1,1,1]],\"tmax\":9}",
    };
    static const char alphabet[] = ",[]{}\":0123456789-+.eEx \\nul";
    rbj_options opt;
    rbj_options_init(&opt, RBQ_INTERSECT);
    rbt_rng rng = {11};
    char body[256];
    int failed = 0, passed = 0;
    for (size_t b = 0; b < 3; b++)
        rbj_parser_destroy(parse(RBQ_INTERSECT, bases[b]));
    for (int k = 0; k < 6000; k++) {
        const char *base = bases[k % 3];
        size_t len = strlen(base);
        memcpy(body, base, len + 1);
        for (uint32_t m = 1 + rbt_below(&rng, 2); m > 0 && len; m--) {
            size_t at = rbt_below(&rng, (uint32_t)len);
            char ch = alphabet[rbt_below(&rng, sizeof alphabet - 1)];
            switch (rbt_below(&rng, 3)) {
            case 0:
                body[at] = ch;
                break;
            case 1:
                memmove(body + at + 1, body + at, len - at + 1);
                body[at] = ch;
                len++;
                break;
            default:
                len = at;
                body[len] = '\0';
            }
        }
        rbq_error first = {0};
        int first_rc = 0;
        for (int how = 0; how < FEEDS; how++) {
            int rc;
            rbj_parser *p = feed(&opt, body, len, how, (uint64_t)k, &rc);
            if (how == WHOLE) {
                first = *rbj_parser_error(p);
                first_rc = rc;
                failed += rc != 0;
                passed += rc == 0;
            } else {
                const rbq_error *e = rbj_parser_error(p);
                ck_assert_msg(rc == first_rc &&
                                  memcmp(&first, e, sizeof first) == 0,
                              "%s: feed %d: '%s' %s vs '%s' %s", body, how,
                              first.detail, first.pointer, e->detail,
                              e->pointer);
            }
            rbj_parser_destroy(p);
        }
    }
    /* Both outcomes occur: most mutations break the body, some not. */
    ck_assert_int_gt(failed, 3000);
    ck_assert_int_gt(passed, 30);
}
END_TEST

/* "camera" (SPEC section 8): doubles kept exactly, counted, checked by
 * the library, and render bodies. */
START_TEST(test_camera_members)
{
    rbj_parser *p = parse(
        RBQ_INTERSECT,
        "{\"tmin\":0.5,\"camera\":{\"pixels\":[[0.1,2.5],[3,"
        "0.30000000000000004]],\"view\":[1,0,0,0,0,1,0,0,0,0,1,-5,0,0,0,"
        "1],\"viewport\":[-1,2,640.5,480],\"projection\":[1,0,0,0,0,1,0,"
        "0,0,0,1,0,0,0,0,1]},\"spheres\":[[0,0,0,1]]}");
    const rbq_request *r = rbj_parser_request(p);
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_nonnull(r->camera);
    ck_assert_uint_eq(r->n_camera_rays, 2);
    ck_assert_uint_eq(r->n_rays, 0);
    ck_assert(r->camera->view[11] == -5.0 && r->camera->viewport[2] == 640.5);
    ck_assert(r->camera->pixels[3] == 0.30000000000000004); /* not 0.3 */
    ck_assert(r->camera->pixels[0] == 0.1);
    ck_assert_int_eq(r->camera->depth, RB_DEPTH_ZERO_TO_ONE);
    ck_assert(r->camera->tmin == 0.5f && isinf(r->camera->tmax));
    rbj_parser_destroy(p);
    /* The grid: width x height. */
    p = parse(RBQ_INTERSECT,
              "{\"camera\":{\"view\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],"
              "\"projection\":[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1],\"viewport\":"
              "[0,0,7,3],\"depth\":\"minus_one_to_one\"},\"boxes\":[]}");
    r = rbj_parser_request(p);
    ck_assert_uint_eq(r->n_camera_rays, 21);
    ck_assert_ptr_null(r->camera->pixels);
    ck_assert_int_eq(r->camera->depth, RB_DEPTH_MINUS_ONE_TO_ONE);
    rbj_parser_destroy(p);
    /* Render bodies. */
    rbj_options opt;
    rbj_options_init(&opt, RBQ_RENDER);
    opt.scene_in_path = 1;
    opt.scene_dims = 3;
    const char *body = "{\"image\":\"normal\",\"camera\":{\"view\":[1,0,0,"
                       "0,0,1,0,0,0,0,1,0,0,0,0,1],\"projection\":[1,0,0,0,"
                       "0,1,0,0,0,0,1,0,0,0,0,1],\"viewport\":[0,0,2,2]}}";
    int rc;
    p = feed(&opt, body, strlen(body), WHOLE, 0, &rc);
    ck_assert_int_eq(rc, 0);
    r = rbj_parser_request(p);
    ck_assert_int_eq(r->image, RBQ_IMAGE_NORMAL);
    ck_assert_int_eq(r->mode, RB_MODE_NEAREST);
    ck_assert_uint_eq(r->n_camera_rays, 4);
    rbj_parser_destroy(p);
    opt.scene_dims = 2; /* a 2D scene has no pictures */
    p = feed(&opt, body, strlen(body), WHOLE, 0, &rc);
    ck_assert_int_eq(rc, -1);
    ck_assert_str_eq(rbj_parser_error(p)->pointer, "/camera");
    rbj_parser_destroy(p);
}
END_TEST

/* ------------------------------------------------------------------------
 * Errors: class, pointer, detail
 */
START_TEST(test_errors_syntax)
{
    expect_error(RBQ_INTERSECT, "", 400, "", "empty body");
    expect_error(RBQ_INTERSECT, " \n\t ", 400, "", "empty body");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0", 400, "/rays/0/2",
                 "body cut short");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,0]]", 400, "",
                 "body cut short");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,0]], x}", 400, "",
                 "malformed JSON at byte 26");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,]]}", 400, "/rays/0/5",
                 "malformed JSON");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,0] [", 400, "/rays/1",
                 "malformed JSON");
    expect_error(RBQ_INTERSECT, "{\"boxes\":[],\"rays\":[[0,0,0,1,0,NaN]]}",
                 400, "/rays/0/5", "malformed JSON at byte 32");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[Infinity,0,0,1,0,0]]}", 400,
                 "/rays/0/0", "malformed JSON");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[-Infinity,0,0,1,0,0]]}", 400,
                 "/rays/0/0", "malformed JSON");
    /* "01": yajl reads 0, then finds 1 where ',' belongs. */
    expect_error(RBQ_INTERSECT, "{\"tmin\":01}", 400, "",
                 "malformed JSON at byte 9");
    expect_error(RBQ_INTERSECT, "{\"tmin\":-}", 400, "/tmin",
                 "malformed JSON");
    expect_error(RBQ_INTERSECT, "{} {}", 400, "", "malformed JSON");
    expect_error(RBQ_INTERSECT, "{\"mode\":\"all\"", 400, "",
                 "body cut short");
}
END_TEST

START_TEST(test_errors_shape)
{
    expect_error(RBQ_INTERSECT, "[1]", 422, "", "must be a JSON object");
    expect_error(RBQ_INTERSECT, "42", 422, "", "must be a JSON object");
    expect_error(RBQ_INTERSECT, "\"x\"", 422, "", "must be a JSON object");
    expect_error(RBQ_INTERSECT, "null", 422, "", "must be a JSON object");
    expect_error(RBQ_INTERSECT, "{\"rays\":[],\"foo\":1}", 422, "/foo",
                 "unknown member");
    expect_error(RBQ_INTERSECT, "{\"a/b~c\":1}", 422, "/a~1b~0c",
                 "unknown member");
    expect_error(RBQ_INTERSECT, "{\"set\":[]}", 422, "/set",
                 "unknown member");
    expect_error(RBQ_SCENE_CREATE, "{\"rays\":[]}", 422, "/rays",
                 "unknown member");
    expect_error(RBQ_SCENE_PATCH, "{\"dims\":3}", 422, "/dims",
                 "unknown member");
    expect_error(RBQ_INTERSECT, "{\"mode\":\"any\",\"mode\":\"any\"}", 422,
                 "/mode", "appears twice");
    expect_error(RBQ_INTERSECT, "{\"rays\":[],\"rays\":[]}", 422, "/rays",
                 "appears twice");
    expect_error(RBQ_INTERSECT, "{\"boxes\":[],\"scene\":\"a\"}", 422,
                 "/scene", "exclude each other");
    expect_error(RBQ_INTERSECT, "{\"scene\":\"a\",\"boxes\":[]}", 422,
                 "/boxes", "exclude each other");
    /* Wrong types. */
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,\"1\",0,1,0,0]]}", 422,
                 "/rays/0/1", "expected a number, got a string");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,0],[0,true]]}", 422,
                 "/rays/1/1", "expected a number, got true");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,{}]]}", 422, "/rays/0/1",
                 "expected a number, got an object");
    expect_error(RBQ_INTERSECT, "{\"rays\":[1]}", 422, "/rays/0",
                 "expected an array of numbers, got a number");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,0],{}]}", 422,
                 "/rays/1", "expected an array of numbers, got an object");
    expect_error(RBQ_INTERSECT, "{\"rays\":{}}", 422, "/rays",
                 "expected an array, got an object");
    expect_error(RBQ_INTERSECT, "{\"mode\":3}", 422, "/mode",
                 "expected a string, got a number");
    expect_error(RBQ_INTERSECT, "{\"tmin\":\"0\"}", 422, "/tmin",
                 "expected a number, got a string");
    expect_error(RBQ_INTERSECT, "{\"tmin\":null}", 422, "/tmin",
                 "expected a number, got null");
    expect_error(RBQ_INTERSECT, "{\"tmax\":[]}", 422, "/tmax",
                 "expected a number or null, got an array");
    expect_error(RBQ_INTERSECT, "{\"scene\":7}", 422, "/scene",
                 "expected a string");
    expect_error(RBQ_INTERSECT, "{\"scene\":\"\"}", 422, "/scene",
                 "1 to 128 bytes");
    /* Nesting. */
    expect_error(RBQ_INTERSECT, "{\"rays\":[[[[1]]]]}", 422, "/rays/0/0",
                 "nested too deep");
    expect_error(RBQ_INTERSECT, "{\"boxes\":[[0,0,[1]]]}", 422, "/boxes/0/2",
                 "nested too deep");
    /* Missing members. */
    expect_error(RBQ_INTERSECT, "{\"boxes\":[]}", 422, "", "missing \"rays\"");
    expect_error(RBQ_INTERSECT, "{\"rays\":[]}", 422, "", "missing \"boxes\"");
    expect_error(RBQ_SCENE_CREATE, "{\"dims\":2}", 422, "",
                 "missing \"boxes\"");
}
END_TEST

START_TEST(test_errors_deep_nesting)
{
    /* 10000 '[' at the top and inside an element: refused at the first
     * level too deep, never recursed into (no stack to blow). */
    size_t n = 10000;
    char *s = malloc(n + 64);
    memset(s, '[', n);
    s[n] = '\0';
    expect_error(RBQ_INTERSECT, s, 422, "", "must be a JSON object");
    memcpy(s, "{\"rays\":", 8);
    expect_error(RBQ_INTERSECT, s, 422, "/rays/0/0", "nested too deep");
    memset(s, '{', n);
    expect_error(RBQ_INTERSECT, s, 400, "", "malformed JSON");
    free(s);
}
END_TEST

START_TEST(test_errors_arity)
{
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0]],\"boxes\":[]}", 422,
                 "/rays/0", "5 numbers: a 3D ray has 6 numbers, or 8");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0,1]],\"boxes\":[]}",
                 422, "/rays/1", "7 numbers");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[]],\"boxes\":[]}", 422,
                 "/rays/0", "0 numbers");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,0,0,1,2]]}", 422,
                 "/rays/0/8", "too many numbers");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[[0,0,0,1,1]]}", 422,
                 "/boxes/0", "5 numbers: a 3D box has 6 numbers");
    expect_error(RBQ_INTERSECT, "{\"boxes\":[[0,0,0,1,1,1,1]]}", 422,
                 "/boxes/0/6", "too many numbers");
    /* dims known first: checked per element as it ends. */
    expect_error(RBQ_INTERSECT, "{\"dims\":2,\"rays\":[[0,0,1,0],[0,0,0]]",
                 422, "/rays/1", "3 numbers: a 2D ray has 4 numbers, or 6");
    expect_error(RBQ_INTERSECT, "{\"dims\":2,\"rays\":[[0,0,1,0,0,1,2]]}",
                 422, "/rays/0/6", "too many numbers: a 2D ray");
    /* dims known last: checked at the end, lowest index first. */
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,1,0],[0,0,0,1,0,0,0,1]],\"boxes\":[],"
                 "\"dims\":2}",
                 422, "/rays/1", "8 numbers: a 2D ray");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[],\"boxes\":[[0,0,1,1],[0,0,0,1,1,1]],"
                 "\"dims\":2}",
                 422, "/boxes/1", "6 numbers: a 2D box has 4");
    /* null only as a ray's tmax. */
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,null,1,0,0]]}", 422,
                 "/rays/0/2", "got null");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,0,null,1]]}", 422,
                 "/rays/0/6", "got null");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,null]],\"boxes\":[]}",
                 422, "/rays/0/5", "got null");
    expect_error(RBQ_INTERSECT,
                 "{\"dims\":3,\"rays\":[[0,0,0,1,0,null]],\"boxes\":[]}", 422,
                 "/rays/0/5", "got null");
    expect_error(RBQ_INTERSECT, "{\"boxes\":[[0,null]]}", 422, "/boxes/0/1",
                 "got null");
    /* Patch entries. */
    expect_error(RBQ_SCENE_PATCH, "{\"set\":[[0,0,0,0,1,1]]}", 422, "/set/0",
                 "6 numbers: a 3D set entry has 7");
    expect_error(RBQ_SCENE_PATCH, "{\"append\":[[0,0,0,1,1,1,1]]}", 422,
                 "/append/0/6", "too many numbers");
    rbj_options opt;
    rbj_options_init(&opt, RBQ_SCENE_PATCH);
    opt.patch_dims = 2;
    const char *b = "{\"set\":[[0,0,0,1,1,1,1]]}";
    expect_error_opt(&opt, b, strlen(b), 422, "/set/0/5",
                     "too many numbers: a 2D set entry");
}
END_TEST

START_TEST(test_errors_values)
{
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1e39,0,0]]}", 422,
                 "/rays/0/3", "1e39 is beyond the float32 range");
    expect_error(RBQ_INTERSECT, "{\"rays\":[[0,0,0,1,0,0,0,-3.5e38]]}", 422,
                 "/rays/0/7", "beyond the float32 range");
    expect_error(RBQ_INTERSECT, "{\"boxes\":[[0,0,0,1,1,3.4028236e38]]}",
                 422, "/boxes/0/5", "beyond the float32 range");
    expect_error(RBQ_INTERSECT, "{\"tmin\":-1e39}", 422, "/tmin",
                 "beyond the float32 range");
    expect_error(RBQ_INTERSECT, "{\"mode\":\"bogus\"}", 422, "/mode",
                 "unknown mode \"bogus\"");
    expect_error(RBQ_INTERSECT, "{\"mode\":\"Nearest\"}", 422, "/mode",
                 "unknown mode");
    expect_error(RBQ_INTERSECT, "{\"mode\":\"any\\u0000\"}", 422, "/mode",
                 "unknown mode");
    expect_error(RBQ_INTERSECT, "{\"dims\":4}", 422, "/dims",
                 "dims must be 2 or 3, not 4");
    expect_error(RBQ_INTERSECT, "{\"dims\":3.5}", 422, "/dims",
                 "dims must be 2 or 3");
    expect_error(RBQ_INTERSECT, "{\"dims\":25e-1}", 422, "/dims",
                 "dims must be 2 or 3");
    expect_error(RBQ_SCENE_CREATE, "{\"dims\":-3}", 422, "/dims",
                 "dims must be 2 or 3");
    expect_error(RBQ_INTERSECT, "{\"max_hits\":0}", 422, "/max_hits",
                 "max_hits must be an integer >= 1, not 0");
    expect_error(RBQ_INTERSECT, "{\"max_hits\":-1}", 422, "/max_hits",
                 "max_hits must be an integer >= 1");
    expect_error(RBQ_INTERSECT, "{\"max_hits\":1.5}", 422, "/max_hits",
                 "max_hits must be an integer >= 1");
    expect_error(RBQ_INTERSECT, "{\"max_hits\":4294967296}", 422,
                 "/max_hits", "at most 4294967295");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[],\"tmin\":5,"
                 "\"tmax\":1}",
                 422, "/tmin", "tmin (5.0) > tmax (1.0)");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[],\"boxes\":[],\"tmin\":2,\"tmax\":1e-40}",
                 422, "/tmin", "tmin (2.0) > tmax (1e-40)");
    /* R7: the comparison is on flushed values, as in the library. */
    rbj_parser *p = parse(RBQ_INTERSECT, "{\"rays\":[],\"boxes\":[],"
                                         "\"tmin\":1e-40,\"tmax\":-1e-40}");
    rbj_parser_destroy(p);
    /* pairs needs equal counts and boxes of its own. */
    expect_error(RBQ_INTERSECT,
                 "{\"mode\":\"pairs\",\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0]],"
                 "\"boxes\":[[0,0,0,1,1,1]]}",
                 422, "/boxes", "as many boxes as rays (2 rays, 1 boxes)");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"scene\":\"x\","
                 "\"mode\":\"pairs\"}",
                 422, "/scene", "pairs mode takes \"boxes\"");
    /* A set index is a non-negative integer below 2^32. */
    expect_error(RBQ_SCENE_PATCH, "{\"set\":[[-1,0,0,0,1,1,1]]}", 422,
                 "/set/0/0", "non-negative integer");
    expect_error(RBQ_SCENE_PATCH,
                 "{\"set\":[[0,0,0,0,1,1,1],[1,0,0,0,1,1,1],"
                 "[1.5,0,0,0,1,1,1]]}",
                 422, "/set/2/0", "not 1.5");
    expect_error(RBQ_SCENE_PATCH, "{\"set\":[[4294967296,0,0,0,1,1,1]]}",
                 422, "/set/0/0", "non-negative integer");
    expect_error(RBQ_SCENE_PATCH, "{\"set\":[[1e-1,0,0,0,1,1,1]]}", 422,
                 "/set/0/0", "non-negative integer");
    expect_error(RBQ_SCENE_PATCH, "{\"set\":[[-2.0,0,0,0,1,1,1]]}", 422,
                 "/set/0/0", "non-negative integer");
    expect_error(RBQ_SCENE_PATCH, "{\"set\":[[4.294967296e9,0,0,0,1,1,1]]}",
                 422, "/set/0/0", "non-negative integer");
    expect_error(RBQ_INTERSECT, "{\"max_hits\":1e10}", 422, "/max_hits",
                 "at most 4294967295");
    expect_error(RBQ_INTERSECT, "{\"max_hits\":0.0e7}", 422, "/max_hits",
                 "max_hits must be an integer >= 1, not 0.0e7");
    expect_error(RBQ_SCENE_PATCH, "{\"set\":[[\"1\",0,0,0,1,1,1]]}", 422,
                 "/set/0/0", "got a string");
}
END_TEST

/* JSON has one number type: a whole number is an integer however it is
 * written (JSON Schema's "integer"; a client's float writes 3.0). */
START_TEST(test_whole_numbers)
{
    static const struct {
        const char *text;
        uint32_t value;
    } cases[] = {{"3", 3},          {"3.0", 3},          {"3e0", 3},
                 {"0.3e1", 3},      {"30e-1", 3},        {"300.000E-2", 3},
                 {"4294967295", 4294967295u},
                 {"4294967295.0", 4294967295u},
                 {"4.294967295e9", 4294967295u},
                 {"1e9", 1000000000u}, {"0", 0},          {"-0", 0},
                 {"-0.0e5", 0},     {"0.0", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[160];
        snprintf(body, sizeof body, "{\"rays\":[],\"boxes\":[],"
                 "\"max_hits\":%s}", cases[i].text);
        if (cases[i].value) {
            rbj_parser *p = parse(RBQ_INTERSECT, body);
            ck_assert_uint_eq(rbj_parser_request(p)->max_hits,
                              cases[i].value);
            rbj_parser_destroy(p);
        }
        snprintf(body, sizeof body, "{\"set\":[[%s,0,0,0,1,1,1]]}",
                 cases[i].text);
        rbj_parser *p = parse(RBQ_SCENE_PATCH, body);
        ck_assert_uint_eq(rbj_parser_request(p)->n_set, 1);
        ck_assert_uint_eq(rbj_parser_request(p)->set_index[0],
                          cases[i].value);
        rbj_parser_destroy(p);
    }
    rbj_parser *p = parse(RBQ_INTERSECT, "{\"dims\":2.0,\"rays\":[],"
                                         "\"boxes\":[[0,0,1,1]]}");
    ck_assert_uint_eq(rbj_parser_request(p)->dims, 2);
    rbj_parser_destroy(p);
}
END_TEST

/* ------------------------------------------------------------------------
 * Limits (413), checked while streaming; out of memory (500)
 */

/* Counts the bytes the parser holds, to see that it never grows past a
 * limit, and fails once `fail_after` allocations were made. */
typedef struct counting {
    size_t live, peak, allocs, fail_after;
} counting;

static void *count_alloc(void *user, size_t size, size_t align)
{
    counting *c = user;
    if (c->fail_after && c->allocs >= c->fail_after)
        return NULL;
    c->allocs++;
    size_t *p = aligned_alloc(64, 64 + ((size + 63) & ~(size_t)63));
    (void)align;
    p[0] = size;
    c->live += size;
    if (c->live > c->peak)
        c->peak = c->live;
    return (char *)p + 64;
}

static void count_free(void *user, void *ptr)
{
    counting *c = user;
    if (!ptr)
        return;
    size_t *p = (size_t *)(void *)((char *)ptr - 64);
    c->live -= p[0];
    free(p);
}

START_TEST(test_limits)
{
    rbj_options opt;
    rbj_options_init(&opt, RBQ_INTERSECT);
    opt.limits.max_rays = 2;
    const char *b = "{\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0],[0,0,0,1,0,0]]}";
    expect_error_opt(&opt, b, strlen(b), 413, "/rays/2", "more than 2 rays");

    rbj_options_init(&opt, RBQ_INTERSECT);
    opt.limits.max_boxes = 1;
    b = "{\"boxes\":[[0,0,0,1,1,1],[0,0,0,1,1,1]]}";
    expect_error_opt(&opt, b, strlen(b), 413, "/boxes/1", "more than 1 boxes");

    rbj_options_init(&opt, RBQ_SCENE_PATCH);
    opt.limits.max_boxes = 2;
    b = "{\"set\":[[0,0,0,0,1,1,1]],\"append\":[[0,0,0,1,1,1],[0,0,0,1,1,1]]}";
    expect_error_opt(&opt, b, strlen(b), 413, "/append/1", "more than 2");

    rbj_options_init(&opt, RBQ_INTERSECT);
    opt.limits.max_numbers = 10;
    b = "{\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0]]}";
    expect_error_opt(&opt, b, strlen(b), 413, "/rays/1/4",
                     "more than 10 numbers");

    /* all mode: rays * max_hits results, while streaming when mode and
     * max_hits come first, at the end otherwise; the same pointer. */
    rbj_options_init(&opt, RBQ_INTERSECT);
    opt.limits.max_results = 25;
    b = "{\"mode\":\"all\",\"max_hits\":10,\"boxes\":[],"
        "\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0],[0,0,0,1,0,0]]}";
    expect_error_opt(&opt, b, strlen(b), 413, "/rays/2",
                     "more than 25 results");
    b = "{\"boxes\":[],\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0],"
        "[0,0,0,1,0,0]],\"max_hits\":10,\"mode\":\"all\"}";
    expect_error_opt(&opt, b, strlen(b), 413, "/rays/2",
                     "more than 25 results");
    /* Two rays fit; other modes ignore max_hits. */
    b = "{\"boxes\":[],\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0]],"
        "\"max_hits\":10,\"mode\":\"all\"}";
    rbj_parser_destroy(parse_opt(&opt, b));
    b = "{\"boxes\":[],\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0],"
        "[0,0,0,1,0,0]],\"max_hits\":10,\"mode\":\"any\"}";
    rbj_parser_destroy(parse_opt(&opt, b));
}
END_TEST

/* A 413 comes before the parser holds more than the limit's records. */
START_TEST(test_limit_bounds_memory)
{
    counting c = {0};
    rb_allocator a = {count_alloc, count_free, &c};
    rbj_options opt;
    rbj_options_init(&opt, RBQ_INTERSECT);
    opt.allocator = &a;
    opt.limits.max_rays = 1000;
    size_t n = 5000;
    char *body = malloc(32 * n + 64);
    size_t at = (size_t)sprintf(body, "{\"rays\":[");
    for (size_t i = 0; i < n; i++)
        at += (size_t)sprintf(body + at, "%s[0,0,0,1,0,0]", i ? "," : "");
    strcpy(body + at, "]}");
    int rc;
    rbj_parser *p = feed(&opt, body, strlen(body), RANDOM, 3, &rc);
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(rbj_parser_error(p)->status, 413);
    ck_assert_str_eq(rbj_parser_error(p)->pointer, "/rays/1000");
    /* Slots (32 B) and arities (1 B) of 1000 rays, the parser, scratch. */
    size_t bound = 1000 * 33 + sizeof(rbq_request) + 64 * 1024;
    ck_assert_msg(c.peak < bound, "peak %zu bytes, bound %zu", c.peak, bound);
    rbj_parser_destroy(p);
    ck_assert_uint_eq(c.live, 0);
    free(body);
}
END_TEST

START_TEST(test_out_of_memory)
{
    const char *b = "{\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0]],"
                    "\"boxes\":[[0,0,0,1,1,1]]}";
    int failures = 0;
    for (size_t k = 1; k < 20; k++) {
        counting c = {.fail_after = k};
        rb_allocator a = {count_alloc, count_free, &c};
        rbj_options opt;
        rbj_options_init(&opt, RBQ_INTERSECT);
        opt.allocator = &a;
        rbj_parser *p = NULL;
        if (rbj_parser_create(&opt, &p) != RB_OK) {
            ck_assert_ptr_null(p);
            continue;
        }
        int rc = rbj_parser_feed(p, b, strlen(b));
        if (!rc)
            rc = rbj_parser_finish(p);
        if (rc) {
            const rbq_error *e = rbj_parser_error(p);
            ck_assert_int_eq(e->status, 500);
            ck_assert_int_eq(e->has_pointer, 0);
            ck_assert_str_eq(e->detail, "out of memory");
            failures++;
        }
        rbj_parser_destroy(p);
        ck_assert_uint_eq(c.live, 0);
    }
    ck_assert_int_gt(failures, 0);
}
END_TEST

/* ------------------------------------------------------------------------
 * Library errors -> pointers
 */
static void lib_error_to(const rbq_request *r, rbq_source src,
                         rb_element_kind el, uint64_t index, int field,
                         int status, const char *msg, const char *pointer)
{
    rb_error lib = {.status = status, .element = el, .index = index,
                    .field = field};
    snprintf(lib.message, sizeof lib.message, "%s", msg);
    rbq_error e;
    rbq_error_from_library(r, src, &lib, &e);
    ck_assert_int_eq(e.status, 422);
    ck_assert_int_eq(e.has_pointer, 1);
    ck_assert_msg(strcmp(e.pointer, pointer) == 0, "pointer %s, want %s",
                  e.pointer, pointer);
}

START_TEST(test_library_error_mapping)
{
    rbj_parser *p = parse(RBQ_INTERSECT,
                          "{\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0,2,3]],"
                          "\"boxes\":[]}");
    const rbq_request *r = rbj_parser_request(p);
    lib_error_to(r, RBQ_FROM_INTERSECT, RB_ELEMENT_RAY, 1, 6, RB_EINPUT,
                 "ray 1: tmin (2) > tmax (3)", "/rays/1/6");
    lib_error_to(r, RBQ_FROM_INTERSECT, RB_ELEMENT_RAY, 1, 4, RB_EINPUT,
                 "ray 1: x", "/rays/1/4");
    /* Ray 0 inherited the request's range. */
    lib_error_to(r, RBQ_FROM_INTERSECT, RB_ELEMENT_RAY, 0, 6, RB_EINPUT,
                 "ray 0: x", "/tmin");
    lib_error_to(r, RBQ_FROM_INTERSECT, RB_ELEMENT_RAY, 0, 7, RB_EINPUT,
                 "ray 0: x", "/tmax");
    lib_error_to(r, RBQ_FROM_INTERSECT, RB_ELEMENT_RAY, 0, 2, RB_EINPUT,
                 "ray 0: x", "/rays/0/2");
    lib_error_to(r, RBQ_FROM_INTERSECT, RB_ELEMENT_BOX, 3, 0, RB_EINPUT,
                 "box 3: x", "/boxes/3/0");
    lib_error_to(r, RBQ_FROM_INTERSECT, RB_ELEMENT_BOX, 3, -1, RB_EINPUT,
                 "box 3: x", "/boxes/3");
    lib_error_to(r, RBQ_FROM_CREATE, RB_ELEMENT_BOX, 2, 5, RB_EINPUT,
                 "box 2: x", "/boxes/2/5");
    lib_error_to(r, RBQ_FROM_SET, RB_ELEMENT_BOX, 2, 3, RB_EINPUT,
                 "box 2: x", "/set/2/4");
    lib_error_to(r, RBQ_FROM_SET, RB_ELEMENT_BOX, 2, -1, RB_EINVAL,
                 "set 2: index 9 is out of range (5 boxes)", "/set/2/0");
    lib_error_to(r, RBQ_FROM_APPEND, RB_ELEMENT_BOX, 0, 4, RB_EINPUT,
                 "box 0: x", "/append/0/4");
    rbj_parser_destroy(p);

    /* 2D: the range fields are 4 and 5. */
    p = parse(RBQ_INTERSECT, "{\"dims\":2,\"rays\":[[0,0,1,0],[0,0,1,0,1,2]],"
                             "\"boxes\":[]}");
    r = rbj_parser_request(p);
    lib_error_to(r, RBQ_FROM_INTERSECT, RB_ELEMENT_RAY, 0, 4, RB_EINPUT,
                 "ray 0: x", "/tmin");
    lib_error_to(r, RBQ_FROM_INTERSECT, RB_ELEMENT_RAY, 1, 5, RB_EINPUT,
                 "ray 1: x", "/rays/1/5");

    /* Failures that name no element keep the library's message. */
    rb_error lib = {.status = RB_ENOMEM, .field = -1};
    snprintf(lib.message, sizeof lib.message, "out of host memory");
    rbq_error e;
    rbq_error_from_library(r, RBQ_FROM_INTERSECT, &lib, &e);
    ck_assert_int_eq(e.status, 503);
    ck_assert_int_eq(e.has_pointer, 0);
    ck_assert_str_eq(e.detail, "out of host memory");
    lib.status = RB_EDEVICE;
    rbq_error_from_library(r, RBQ_FROM_INTERSECT, &lib, &e);
    ck_assert_int_eq(e.status, 500);
    rbj_parser_destroy(p);
}
END_TEST

/* The real library's verdicts, through the mapping. */
START_TEST(test_library_errors_end_to_end)
{
    rb_context *ctx = rbt_context(RBT_CPU);
    rbj_parser *p = parse(RBQ_INTERSECT,
                          "{\"mode\":\"count\",\"rays\":[[0,0,0,1,0,0],"
                          "[0,0,0,1,0,0,0,1],[0,0,0,1,0,0,5,-1]],"
                          "\"boxes\":[[0,0,0,1,1,1]]}");
    const rbq_request *r = rbj_parser_request(p);
    uint32_t counts[3];
    rb_results res = {.counts = counts, .capacity = 3};
    rb_query q = {.mode = r->mode, .dims = r->dims, .rays = r->rays,
                  .n_rays = r->n_rays, .boxes = r->boxes,
                  .n_boxes = r->n_boxes, .max_hits = r->max_hits};
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINPUT);
    rbq_error e;
    rbq_error_from_library(r, RBQ_FROM_INTERSECT, rb_context_error(ctx), &e);
    ck_assert_int_eq(e.status, 422);
    ck_assert_str_eq(e.pointer, "/rays/2/6");
    ck_assert_msg(strncmp(e.detail, "tmin (5) > tmax (-1)", 20) == 0, "%s",
                  e.detail);
    rbj_parser_destroy(p);

    p = parse(RBQ_INTERSECT, "{\"mode\":\"any\",\"rays\":[[0,0,0,1,0,0]],"
                             "\"boxes\":[[0,0,0,1,1,1],[0,2,0,1,1,1]]}");
    r = rbj_parser_request(p);
    q = (rb_query){.mode = r->mode, .dims = r->dims, .rays = r->rays,
                   .n_rays = r->n_rays, .boxes = r->boxes,
                   .n_boxes = r->n_boxes, .max_hits = r->max_hits};
    uint8_t any[1];
    res = (rb_results){.any = any, .capacity = 1};
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_EINPUT);
    rbq_error_from_library(r, RBQ_FROM_INTERSECT, rb_context_error(ctx), &e);
    ck_assert_str_eq(e.pointer, "/boxes/1/1");
    rbj_parser_destroy(p);

    /* A scene patch: an index out of range, then a bad box. */
    rb_box boxes[2] = {{{0, 0, 0}, {1, 1, 1}}, {{0, 0, 0}, {1, 1, 1}}};
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, 2, &scene), RB_OK);
    p = parse(RBQ_SCENE_PATCH, "{\"set\":[[1,0,0,0,1,1,1],[2,0,0,0,1,1,1]]}");
    r = rbj_parser_request(p);
    ck_assert_int_ne(rb_scene_set(ctx, scene, r->set_index, r->set_boxes,
                                  r->n_set), RB_OK);
    rbq_error_from_library(r, RBQ_FROM_SET, rb_context_error(ctx), &e);
    ck_assert_int_eq(e.status, 422);
    ck_assert_str_eq(e.pointer, "/set/1/0");
    rbj_parser_destroy(p);
    p = parse(RBQ_SCENE_PATCH, "{\"set\":[[1,0,0,0,1,1,1],[0,0,3,0,1,1,1]],"
                               "\"append\":[[0,0,0,1,-1,1]]}");
    r = rbj_parser_request(p);
    ck_assert_int_eq(rb_scene_set(ctx, scene, r->set_index, r->set_boxes,
                                  r->n_set), RB_EINPUT);
    rbq_error_from_library(r, RBQ_FROM_SET, rb_context_error(ctx), &e);
    ck_assert_str_eq(e.pointer, "/set/1/2");
    ck_assert_int_eq(rb_scene_append(ctx, scene, r->append_boxes,
                                     r->n_append), RB_EINPUT);
    rbq_error_from_library(r, RBQ_FROM_APPEND, rb_context_error(ctx), &e);
    ck_assert_str_eq(e.pointer, "/append/0/1");
    rbj_parser_destroy(p);
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
}
END_TEST

START_TEST(test_bad_options)
{
    rbj_options opt;
    rbj_parser *p = (rbj_parser *)&opt;
    rbj_options_init(&opt, RBQ_SCENE_PATCH);
    opt.patch_dims = 4;
    ck_assert_int_eq(rbj_parser_create(&opt, &p), RB_EINVAL);
    ck_assert_ptr_null(p);
    rbj_options_init(&opt, RBQ_INTERSECT);
    opt.limits.max_rays = 0;
    ck_assert_int_eq(rbj_parser_create(&opt, &p), RB_EINVAL);
    rbj_parser_destroy(NULL);
    /* After an error, feeding more is refused at once. */
    rbj_options_init(&opt, RBQ_INTERSECT);
    ck_assert_int_eq(rbj_parser_create(&opt, &p), RB_OK);
    ck_assert_int_eq(rbj_parser_feed(p, "[", 1), -1);
    ck_assert_int_eq(rbj_parser_feed(p, "{}", 2), -1);
    ck_assert_int_eq(rbj_parser_finish(p), -1);
    ck_assert_int_eq(rbj_parser_error(p)->status, 422);
    rbj_parser_destroy(p);
}
END_TEST

/* JSON strings are written from client bytes (headers, paths, methods):
 * what is not well-formed UTF-8 becomes U+FFFD, the rest passes. */
START_TEST(test_quote_utf8)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "\"plain\""},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", /* 2, 3, 4 bytes */
         "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        {"a\xffz", "\"a\xef\xbf\xbdz\""},                 /* stray byte */
        {"\xfe\xff", "\"\xef\xbf\xbd\xef\xbf\xbd\""},
        {"x\xc3", "\"x\xef\xbf\xbd\""},                   /* cut at the end */
        {"\xc3(", "\"\xef\xbf\xbd(\""},                   /* cut before ( */
        {"\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\""},     /* overlong / */
        {"\xe0\x80\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""}, /* D800 */
        {"\xf4\x90\x80\x80", /* above U+10FFFF */
         "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\""},     /* U+10FFFF */
        {"q\"\\\x01", "\"q\\\"\\\\\\u0001\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[64];
        size_t n = rbj_quote(out, sizeof out, cases[i].in);
        ck_assert_str_eq(out, cases[i].out);
        ck_assert_uint_eq(n, strlen(cases[i].out));
    }
    /* Cut short to fit: never inside a character, always closed. */
    char small[8];
    rbj_quote(small, sizeof small, "ab\xe2\x82\xac\xe2\x82\xac");
    ck_assert_str_eq(small, "\"ab\xe2\x82\xac\"");
}
END_TEST

/* POST /v1/scenes/{id}/intersect: the boxes come from the path. */
START_TEST(test_scene_in_path)
{
    rbj_options opt;
    rbj_options_init(&opt, RBQ_INTERSECT);
    opt.scene_in_path = 1;
    opt.scene_dims = 2;
    /* No "boxes" needed; dims defaults to the scene's. */
    rbj_parser *p = parse_opt(&opt, "{\"rays\":[[0,0,1,0],[1,1,0,1,0,5]]}");
    const rbq_request *r = rbj_parser_request(p);
    ck_assert_uint_eq(r->dims, 2);
    ck_assert_uint_eq(r->n_rays, 2);
    ck_assert_uint_eq(r->n_boxes, 0);
    ck_assert_ptr_null(r->scene);
    ck_assert_int_eq(r->mode, RB_MODE_NEAREST);
    rbj_parser_destroy(p);
    p = parse_opt(&opt, "{\"dims\":2,\"mode\":\"all\",\"rays\":[]}");
    rbj_parser_destroy(p);
    static const char *const bodies[] = {
        "{\"rays\":[],\"boxes\":[]}",
        "{\"scene\":\"abc\",\"rays\":[]}",
        "{\"mode\":\"pairs\",\"rays\":[]}",
        "{\"dims\":3,\"rays\":[]}",
        "{\"rays\":[[0,0,0,1,0]]}",
    };
    static const char *const pointers[] = {"/boxes", "/scene", "/mode",
                                           "/dims", "/rays/0"};
    for (int i = 0; i < 5; i++)
        expect_error_opt(&opt, bodies[i], strlen(bodies[i]), 422,
                         pointers[i], "");
    /* Only intersect bodies, and only 2 or 3 dims. */
    rbj_parser *q = NULL;
    opt.scene_dims = 4;
    ck_assert_int_eq(rbj_parser_create(&opt, &q), RB_EINVAL);
    rbj_options_init(&opt, RBQ_SCENE_CREATE);
    opt.scene_in_path = 1;
    opt.scene_dims = 3;
    ck_assert_int_eq(rbj_parser_create(&opt, &q), RB_EINVAL);
    ck_assert_ptr_null(q);
}
END_TEST

/* ------------------------------------------------------------------------
 * Kinds beyond boxes
 */
START_TEST(test_shape_lists)
{
    rbj_parser *p = parse(
        RBQ_INTERSECT,
        "{\"rays\":[[0,0,0,1,0,0]],\"obbs\":[[1,2,3,4,5,6,1,0,0,0],"
        "[1,2,3,1,1,1,0,0,1,1,0,0,0,1,0]],\"xboxes\":[[0,0,0,1,1,1,"
        "2,0,0,5,0,2,0,6,0,0,2,7]],\"spheres\":[[1,2,3,0.5]],"
        "\"planes\":[[0,0,2,4]],\"outputs\":[\"normal\"]}");
    const rbq_request *r = rbj_parser_request(p);
    ck_assert_uint_eq(r->n_boxes, 0);
    ck_assert_uint_eq(r->shapes.n_obbs, 2);
    ck_assert_uint_eq(r->shapes.n_xboxes, 1);
    ck_assert_uint_eq(r->shapes.n_spheres, 1);
    ck_assert_uint_eq(r->shapes.n_planes, 1);
    ck_assert_uint_eq(r->outputs, RB_OUTPUT_NORMAL);
    /* The identity quaternion became the identity axes, in place. */
    const rb_obb *o = &r->shapes.obbs[0];
    ASSERT_BITS(o->center[2], 3.0f);
    ASSERT_BITS(o->half[0], 4.0f);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            ASSERT_BITS(o->axes[i][j], i == j ? 1.0f : 0.0f);
    /* The axes form is kept as given. */
    ASSERT_BITS(r->shapes.obbs[1].axes[0][2], 1.0f);
    ASSERT_BITS(r->shapes.obbs[1].axes[1][0], 1.0f);
    ASSERT_BITS(r->shapes.xboxes[0].a[2][3], 7.0f);
    ASSERT_BITS(r->shapes.spheres[0].radius, 0.5f);
    ASSERT_BITS(r->shapes.planes[0].d, 4.0f);
    rbj_parser_destroy(p);
}
END_TEST

START_TEST(test_shape_errors)
{
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"obbs\":[[1,2,3,4,5,6,1,0,0]]}",
                 422, "/obbs/0", "an obb has 10 numbers");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"obbs\":[[1,2,3,4,5,6,0,0,0,0]]}",
                 422, "/obbs/0/6", "the quaternion is zero");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"spheres\":[[1,2,3,4,5]]}", 422,
                 "/spheres/0/4", "too many numbers");
    expect_error(RBQ_INTERSECT,
                 "{\"dims\":2,\"rays\":[[0,0,1,0]],\"planes\":[[0,0,1,0]]}",
                 422, "/planes", "2D requests take boxes only");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"scene\":\"s\",\"spheres\":[]}",
                 422, "/spheres", "exclude each other");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"spheres\":[],\"scene\":\"s\"}",
                 422, "/scene", "exclude each other");
    expect_error(RBQ_INTERSECT,
                 "{\"mode\":\"pairs\",\"rays\":[[0,0,0,1,0,0]],"
                 "\"boxes\":[[0,0,0,1,1,1]],\"spheres\":[[0,0,0,1]]}",
                 422, "/mode", "exactly one element list");
    expect_error(RBQ_INTERSECT,
                 "{\"mode\":\"pairs\",\"rays\":[[0,0,0,1,0,0]],"
                 "\"spheres\":[[0,0,0,1],[0,0,0,2]]}",
                 422, "/spheres", "as many spheres as rays");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[],"
                 "\"outputs\":[\"normal\",\"color\"]}",
                 422, "/outputs/1", "unknown output");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[],\"outputs\":[[1]]}",
                 422, "/outputs/0", "expected a string");
    /* Scenes take every kind, in 3D. */
    expect_error(RBQ_SCENE_CREATE, "{\"dims\":2,\"spheres\":[[0,0,0,1]]}",
                 422, "/spheres", "2D scenes take boxes only");
    expect_error(RBQ_SCENE_CREATE, "{\"boxes\":[],\"outputs\":[]}", 422,
                 "/outputs", "unknown member");
    rbj_options opt;
    rbj_options_init(&opt, RBQ_INTERSECT);
    opt.limits.max_boxes = 2;
    const char *b = "{\"rays\":[],\"boxes\":[[0,0,0,1,1,1]],"
                    "\"spheres\":[[0,0,0,1],[0,0,0,1]]}";
    expect_error_opt(&opt, b, strlen(b), 413, "/spheres/1",
                     "more than 2 elements");
}
END_TEST

/* A library error about a shape points at its list, element and field. */
/* Errors that help: an unknown member names what the body takes, and a
 * 2D-looking ray or box in a request without "dims" suggests dims 2. */
START_TEST(test_helpful_errors)
{
    expect_error(RBQ_INTERSECT, "{\"ray\":[[0,0,0,1,0,0]]}", 422, "/ray",
                 "this body takes \"mode\", \"dims\", \"rays\"");
    expect_error(RBQ_SCENE_CREATE, "{\"box\":[]}", 422, "/box",
                 "this body takes \"dims\", \"boxes\"");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,1,0]],\"boxes\":[[1,-1,2,1]]}", 422,
                 "/rays/0", "(a 2D request says \"dims\": 2)");
    expect_error(RBQ_INTERSECT,
                 "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[[1,-1,2,1]]}", 422,
                 "/boxes/0", "(a 2D request says \"dims\": 2)");
    /* With "dims": 3 given, no guess. */
    rbj_options opt;
    rbj_options_init(&opt, RBQ_INTERSECT);
    const char *b = "{\"dims\":3,\"rays\":[[0,0,1,0]],\"boxes\":[]}";
    int rc;
    rbj_parser *p = feed(&opt, b, strlen(b), WHOLE, 1, &rc);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_null(strstr(rbj_parser_error(p)->detail, "dims\": 2"));
    rbj_parser_destroy(p);
}
END_TEST

START_TEST(test_shape_library_errors)
{
    rbj_parser *p = parse(RBQ_INTERSECT,
                          "{\"rays\":[[0,0,0,1,0,0]],\"spheres\":[[0,0,0,1]],"
                          "\"planes\":[[0,0,0,1]]}");
    const rbq_request *r = rbj_parser_request(p);
    rb_error lib = {.status = RB_EINPUT, .element = RB_ELEMENT_PLANE,
                    .index = 0, .field = 0};
    snprintf(lib.message, sizeof lib.message, "plane 0: the normal is zero");
    rbq_error e;
    rbq_error_from_library(r, RBQ_FROM_INTERSECT, &lib, &e);
    ck_assert_int_eq(e.status, 422);
    ck_assert_str_eq(e.pointer, "/planes/0/0");
    ck_assert_str_eq(e.detail, "the normal is zero");
    rbj_parser_destroy(p);
}
END_TEST

/* Scene bodies with every kind (SPEC section 7): a create's lists, "set"
 * entries [id, ...element] of any arity, "append" as an object. */
START_TEST(test_scene_kind_bodies)
{
    rbj_parser *p = parse(RBQ_SCENE_CREATE,
                          "{\"spheres\":[[1,2,3,4]],\"obbs\":[[0,0,0,1,1,1,"
                          "1,0,0,0]],\"boxes\":[[0,0,0,1,1,1]]}");
    const rbq_request *r = rbj_parser_request(p);
    ck_assert_uint_eq(r->n_boxes, 1);
    ck_assert_uint_eq(r->shapes.n_spheres, 1);
    ck_assert_uint_eq(r->shapes.n_obbs, 1);
    ck_assert(r->shapes.obbs[0].axes[0][0] == 1.0f); /* the quaternion's */
    ck_assert(r->shapes.spheres[0].radius == 4.0f);
    rbj_parser_destroy(p);

    p = parse(RBQ_SCENE_PATCH,
              "{\"set\":[[3,0,0,0,1,1,1],[7,1,2,3,4],[9,0,0,0,1,1,1,1,0,0,0],"
              "[2,0,0,0,1,1,1,1,0,0,0,1,0,0,0,1]],"
              "\"append\":{\"planes\":[[0,1,0,5]],\"boxes\":[[5,5,5,6,6,6]]}}");
    r = rbj_parser_request(p);
    ck_assert_uint_eq(r->n_set, 4);
    ck_assert_ptr_null(r->set_boxes);
    ck_assert_ptr_nonnull(r->set_values);
    ck_assert_uint_eq(r->set_arity[0], 7);
    ck_assert_uint_eq(r->set_arity[1], 5);
    ck_assert_uint_eq(r->set_arity[2], 11);
    ck_assert_uint_eq(r->set_arity[3], 16);
    ck_assert_uint_eq(r->set_index[3], 2);
    const float *v = r->set_values + 1 * RBQ_SET_STRIDE;
    ck_assert(v[0] == 1 && v[3] == 4);
    const rb_obb *o = (const rb_obb *)(const void *)(r->set_values +
                                                    2 * RBQ_SET_STRIDE);
    ck_assert(o->half[0] == 1 && o->axes[2][2] == 1); /* converted */
    ck_assert_int_eq(r->append_object, 1);
    ck_assert_uint_eq(r->n_append, 1);
    ck_assert_uint_eq(r->append_shapes.n_planes, 1);
    ck_assert(r->append_shapes.planes[0].d == 5);
    rbj_parser_destroy(p);

    /* A bare list is boxes, as before; boxes alone keep set_boxes. */
    p = parse(RBQ_SCENE_PATCH, "{\"append\":[],\"set\":[[1,0,0,0,1,1,1]]}");
    r = rbj_parser_request(p);
    ck_assert_int_eq(r->append_object, 0);
    ck_assert_ptr_nonnull(r->set_boxes);
    rbj_parser_destroy(p);

    expect_error(RBQ_SCENE_PATCH, "{\"append\":{\"rays\":[]}}", 422,
                 "/append/rays", "unknown member");
    expect_error(RBQ_SCENE_PATCH, "{\"append\":{\"obbs\":[[0,0,0,1,1,1,0,0,"
                 "0,0]]}}", 422, "/append/obbs/0/6", "the quaternion is zero");
    expect_error(RBQ_SCENE_PATCH, "{\"set\":[[1,0,0,0,1,1,1,0,0,0,0]]}", 422,
                 "/set/0/7", "the quaternion is zero");
    expect_error(RBQ_SCENE_PATCH, "{\"set\":[[1,0,0,0,1,1,1,0]]}", 422,
                 "/set/0", "8 numbers: a 3D set entry has 7");
    expect_error(RBQ_SCENE_PATCH, "{\"append\":{\"spheres\":{}}}", 422,
                 "/append/spheres", "expected an array");
    expect_error(RBQ_SCENE_PATCH, "{\"append\":5}", 422, "/append",
                 "expected an array or an object");
    rbj_options opt;
    rbj_options_init(&opt, RBQ_SCENE_PATCH);
    opt.patch_dims = 2;
    const char *b = "{\"append\":{\"spheres\":[[0,0,0,1]]}}";
    expect_error_opt(&opt, b, strlen(b), 422, "/append/spheres",
                     "2D scenes take boxes only");
    b = "{\"set\":[[0,0,0,1]]}";
    expect_error_opt(&opt, b, strlen(b), 422, "/set/0",
                     "4 numbers: a 2D set entry");

    /* Library errors of such bodies point into them. */
    p = parse(RBQ_SCENE_PATCH, "{\"append\":{\"boxes\":[[0,0,0,1,1,1]]}}");
    r = rbj_parser_request(p);
    lib_error_to(r, RBQ_FROM_APPEND, RB_ELEMENT_BOX, 0, 4, RB_EINPUT,
                 "box 0: x", "/append/boxes/0/4");
    lib_error_to(r, RBQ_FROM_APPEND, RB_ELEMENT_SPHERE, 2, 3, RB_EINPUT,
                 "sphere 2: x", "/append/spheres/2/3");
    lib_error_to(r, RBQ_FROM_SET, RB_ELEMENT_XBOX, 1, 6, RB_EINPUT,
                 "xbox 1: x", "/set/1/7");
    lib_error_to(r, RBQ_FROM_SET, RB_ELEMENT_SPHERE, 1, -1, RB_EINVAL,
                 "set 1: id 4 is of kind box, the element given is of kind "
                 "sphere",
                 "/set/1/0");
    lib_error_to(r, RBQ_FROM_CREATE, RB_ELEMENT_PLANE, 0, 0, RB_EINPUT,
                 "plane 0: x", "/planes/0/0");
    rbj_parser_destroy(p);
}
END_TEST

static Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("forms");
    tcase_add_test(tc, test_intersect_all_members);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_2d);
    tcase_add_test(tc, test_member_orders);
    tcase_add_test(tc, test_scene_bodies);
    tcase_add_test(tc, test_numbers_exact);
    tcase_add_test(tc, test_tmax_null_in_ray);
    tcase_add_test(tc, test_chunking_same_request);
    tcase_add_test(tc, test_chunking_same_error);
    tcase_add_test(tc, test_camera_members);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_errors_syntax);
    tcase_add_test(tc, test_errors_shape);
    tcase_add_test(tc, test_errors_deep_nesting);
    tcase_add_test(tc, test_errors_arity);
    tcase_add_test(tc, test_errors_values);
    tcase_add_test(tc, test_whole_numbers);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_limit_bounds_memory);
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_bad_options);
    tcase_add_test(tc, test_float_parse_is_strtof);
    tcase_add_test(tc, test_scene_in_path);
    tcase_add_test(tc, test_quote_utf8);
    suite_add_tcase(s, tc);
    tc = tcase_create("library");
    tcase_add_test(tc, test_library_error_mapping);
    tcase_add_test(tc, test_library_errors_end_to_end);
    suite_add_tcase(s, tc);
    tc = tcase_create("shapes");
    tcase_add_test(tc, test_shape_lists);
    tcase_add_test(tc, test_shape_errors);
    tcase_add_test(tc, test_shape_library_errors);
    tcase_add_test(tc, test_helpful_errors);
    tcase_add_test(tc, test_scene_kind_bodies);
    suite_add_tcase(s, tc);
    return s;
}


int main(void)
{
    int failed = rbt_run_suite(json_suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
