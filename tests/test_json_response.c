/* test_json_response.c - the response generator (server/json_response.c),
 * exact float32 text (server/float_text.c), JSON string helpers and the
 * problem+json writer: byte-exact output per mode, any buffer size gives
 * the same bytes, every float32 reads back exactly. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <yajl/yajl_tree.h>

#include "float_text.h"
#include "json_request.h"
#include "json_response.h"
#include "json_text.h"
#include "problem.h"
#include "testutil.h"

/* The whole response, generated with buffers of `cap` bytes. */
static char *generate(const rbj_response *resp, size_t cap, size_t *len)
{
    rbj_writer w;
    rbj_writer_init(&w, resp);
    size_t size = 1 << 16, at = 0;
    char *out = malloc(size);
    char *buf = malloc(cap);
    size_t n;
    while ((n = rbj_writer_fill(&w, buf, cap)) > 0) {
        ck_assert_uint_le(n, cap);
        if (at + n + 1 > size)
            out = realloc(out, size *= 2);
        memcpy(out + at, buf, n);
        at += n;
    }
    ck_assert(rbj_writer_done(&w));
    ck_assert_uint_eq(rbj_writer_fill(&w, buf, cap), 0);
    out[at] = '\0';
    free(buf);
    *len = at;
    return out;
}

static const rbj_meta test_meta = {"cpu", "dev", 1.5, 0, NULL};
#define META ",\"meta\":{\"backend\":\"cpu\",\"device\":\"dev\"," \
             "\"elapsed_ms\":1.500,\"fell_back\":false}}"

static void expect_json(const rbj_response *resp, const char *want)
{
    size_t len;
    char *got = generate(resp, 1 << 16, &len);
    ck_assert_msg(strcmp(got, want) == 0, "\n got %s\nwant %s", got, want);
    ck_assert_uint_eq(len, strlen(want));
    free(got);
}

static const rb_hit MISS = {INFINITY, INFINITY, -1, 0, 0, 0, 0};

/* ------------------------------------------------------------------------
 * Byte-exact output per mode
 */
START_TEST(test_nearest_exact)
{
    rb_hit hits[2] = {{4.0f, 6.0f, 0, 1, RB_FACE_NEG_X, RB_FACE_POS_X, 0},
                      MISS};
    rb_results res = {.hits = hits, .capacity = 2};
    rbj_response resp = {RB_MODE_NEAREST, 2, 64, &res, 0, 0, test_meta};
    expect_json(&resp,
                "{\"mode\":\"nearest\",\"count\":2,\"hit\":[true,false],"
                "\"box\":[0,-1],\"t_enter\":[4.0,null],\"t_exit\":[6.0,null],"
                "\"face\":[\"-x\",null],\"exit_face\":[\"+x\",null]" META);
    /* No rays: empty columns. */
    resp.n_rays = 0;
    expect_json(&resp, "{\"mode\":\"nearest\",\"count\":0,\"hit\":[],"
                       "\"box\":[],\"t_enter\":[],\"t_exit\":[],\"face\":[],"
                       "\"exit_face\":[]" META);
}
END_TEST

START_TEST(test_pairs_exact)
{
    /* Inside at tmin and never leaving: no faces, t_exit +inf -> null. */
    rb_hit hits[3] = {{0.5f, INFINITY, 0, 1, 0, 0, 0},
                      {-0.0f, 1e-7f, 1, 1, RB_FACE_NEG_Y, RB_FACE_POS_Z, 0},
                      MISS};
    rb_results res = {.hits = hits, .capacity = 3};
    rbj_response resp = {RB_MODE_PAIRS, 3, 64, &res, 0, 0, test_meta};
    expect_json(&resp,
                "{\"mode\":\"pairs\",\"count\":3,\"hit\":[true,true,false],"
                "\"t_enter\":[0.5,-0.0,null],\"t_exit\":[null,1e-7,null],"
                "\"face\":[null,\"-y\",null],\"exit_face\":[null,\"+z\",null]"
                META);
}
END_TEST

START_TEST(test_any_count_exact)
{
    uint8_t any[3] = {1, 0, 1};
    rb_results res = {.any = any, .capacity = 3};
    rbj_meta meta = {"opencl", "GPU \"7\"\n", 0.0004, 1,
                     "CL_OUT_OF_RESOURCES"};
    rbj_response resp = {RB_MODE_ANY, 3, 64, &res, 1, 3, meta};
    expect_json(&resp,
                "{\"mode\":\"any\",\"count\":3,\"hit\":[true,false,true],"
                "\"scene_version\":3,\"meta\":{\"backend\":\"opencl\","
                "\"device\":\"GPU \\\"7\\\"\\n\",\"elapsed_ms\":0.000,"
                "\"fell_back\":true,\"fallback_reason\":"
                "\"CL_OUT_OF_RESOURCES\"}}");

    uint32_t counts[3] = {0, 3, 4294967295u};
    rb_results rc = {.counts = counts, .capacity = 3};
    rbj_response resp2 = {RB_MODE_COUNT, 3, 64, &rc, 0, 0, test_meta};
    expect_json(&resp2, "{\"mode\":\"count\",\"count\":3,"
                        "\"hits\":[0,3,4294967295]" META);
}
END_TEST

START_TEST(test_all_exact)
{
    uint32_t counts[3] = {0, 1, 3};
    rb_list_hit list[6] = {{0}, {0}, {5, 1.25f, 2.0f}, {0},
                           {0, 0.1f, INFINITY}, {7, 0.1f, 3.0f}};
    rb_results res = {.counts = counts, .list = list, .capacity = 3};
    rbj_response resp = {RB_MODE_ALL, 3, 2, &res, 0, 0, test_meta};
    expect_json(&resp,
                "{\"mode\":\"all\",\"count\":3,"
                "\"hits\":[[],[[5,1.25,2.0]],[[0,0.1,null],[7,0.1,3.0]]],"
                "\"total\":[0,1,3],\"truncated\":[false,false,true]" META);
}
END_TEST

/* Request text -> parser -> CPU backend -> generator. */
START_TEST(test_end_to_end)
{
    const char *body = "{\"mode\":\"all\",\"rays\":[[0,0,0,1,0,0],"
                       "[0,0,0,-1,0,0],[5,0,0,-1,0,0,0,null]],"
                       "\"boxes\":[[4,-1,-1,6,1,1],[2,-1,-1,4.5,1,1]]}";
    rbj_options opt;
    rbj_options_init(&opt, RBQ_INTERSECT);
    rbj_parser *p = NULL;
    ck_assert_int_eq(rbj_parser_create(&opt, &p), RB_OK);
    ck_assert_int_eq(rbj_parser_feed(p, body, strlen(body)), 0);
    ck_assert_int_eq(rbj_parser_finish(p), 0);
    const rbq_request *r = rbj_parser_request(p);
    rb_context *ctx = rbt_context(RBT_CPU);
    uint32_t counts[3];
    rb_list_hit list[3 * 64];
    rb_results res = {.counts = counts, .list = list, .capacity = 3};
    rb_query q = {.mode = r->mode, .dims = r->dims, .rays = r->rays,
                  .n_rays = r->n_rays, .boxes = r->boxes,
                  .n_boxes = r->n_boxes, .max_hits = r->max_hits};
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_OK);
    rbj_response resp = {r->mode, r->n_rays, r->max_hits, &res, 0, 0,
                         test_meta};
    expect_json(&resp,
                "{\"mode\":\"all\",\"count\":3,"
                "\"hits\":[[[1,2.0,4.5],[0,4.0,6.0]],[],"
                "[[0,0.0,1.0],[1,0.5,3.0]]],"
                "\"total\":[2,0,2],\"truncated\":[false,false,false]" META);
    rb_context_destroy(ctx);
    rbj_parser_destroy(p);
}
END_TEST

/* ------------------------------------------------------------------------
 * Any buffer size gives the same bytes
 */
static float random_t(rbt_rng *rng)
{
    switch (rbt_below(rng, 6)) {
    case 0:
        return INFINITY;
    case 1:
        return (float)rbt_below(rng, 100);
    case 2:
        return -0.0f;
    default: {
        uint32_t u = (uint32_t)rbt_next(rng) & 0x7f7fffffu;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    }
}

static void check_caps(const rbj_response *resp)
{
    size_t len;
    char *whole = generate(resp, 1 << 20, &len);
    /* Valid JSON, whatever the content. */
    char err[256];
    yajl_val root = yajl_tree_parse(whole, err, sizeof err);
    ck_assert_msg(root != NULL, "invalid JSON: %s", err);
    yajl_tree_free(root);
    static const size_t caps[] = {1,  2,  3,  4,   5,    6,    7,    8,
                                  9,  10, 11, 12,  13,   14,   15,   16,
                                  17, 63, 64, 1023, 1024, 1025, 4093, 65536};
    for (size_t k = 0; k < sizeof caps / sizeof *caps; k++) {
        size_t n;
        char *got = generate(resp, caps[k], &n);
        ck_assert_msg(n == len && memcmp(got, whole, len) == 0,
                      "cap %zu gives other bytes", caps[k]);
        free(got);
    }
    free(whole);
}

START_TEST(test_tiny_buffers)
{
    rbt_rng rng = {99};
    enum { N = 120, MAXH = 5 };
    rb_hit *hits = calloc(N, sizeof *hits);
    uint8_t any[N];
    uint32_t counts[N];
    rb_list_hit *list = calloc(N * MAXH, sizeof *list);
    for (int i = 0; i < N; i++) {
        if (rbt_below(&rng, 3) == 0) {
            hits[i] = MISS;
        } else {
            hits[i] = (rb_hit){random_t(&rng), random_t(&rng),
                               (int32_t)rbt_below(&rng, 1000), 1,
                               (uint8_t)rbt_below(&rng, 7),
                               (uint8_t)rbt_below(&rng, 7), 0};
        }
        any[i] = (uint8_t)rbt_below(&rng, 2);
        counts[i] = rbt_below(&rng, MAXH + 3);
        for (int j = 0; j < MAXH; j++)
            list[i * MAXH + j] = (rb_list_hit){(int32_t)rbt_below(&rng, 50),
                                               random_t(&rng),
                                               random_t(&rng)};
    }
    rb_results res = {.hits = hits, .any = any, .counts = counts,
                      .list = list, .capacity = N};
    char device[200];
    memset(device, 'd', sizeof device - 1);
    device[sizeof device - 1] = '\0';
    device[5] = '"';
    device[9] = '\t';
    rbj_meta meta = {"cpu", device, 12.25, 1, "reason \\ with \x01 bytes"};
    for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
        rbj_response resp = {(rb_mode)mode, N, MAXH, &res, mode & 1, 77,
                             meta};
        check_caps(&resp);
    }
    free(hits);
    free(list);
}
END_TEST

/* Every t written reads back exactly through a JSON parser and strtof. */
START_TEST(test_response_floats_read_back)
{
    rbt_rng rng = {5};
    enum { N = 2000 };
    rb_hit *hits = calloc(N, sizeof *hits);
    for (int i = 0; i < N; i++)
        hits[i] = (rb_hit){random_t(&rng), random_t(&rng), i, 1, 1, 2, 0};
    rb_results res = {.hits = hits, .capacity = N};
    rbj_response resp = {RB_MODE_PAIRS, N, 1, &res, 0, 0, test_meta};
    size_t len;
    char *text = generate(&resp, 4096, &len);
    char err[256];
    yajl_val root = yajl_tree_parse(text, err, sizeof err);
    ck_assert_msg(root != NULL, "%s", err);
    const char *pe[] = {"t_enter", NULL}, *px[] = {"t_exit", NULL};
    yajl_val te = yajl_tree_get(root, pe, yajl_t_array);
    yajl_val tx = yajl_tree_get(root, px, yajl_t_array);
    ck_assert_uint_eq(te->u.array.len, N);
    for (int i = 0; i < N; i++) {
        yajl_val a = te->u.array.values[i], b = tx->u.array.values[i];
        float want_a = hits[i].t_enter, want_b = hits[i].t_exit;
        if (isinf(want_a))
            ck_assert(YAJL_IS_NULL(a));
        else
            ck_assert(rbt_same_float(strtof(a->u.number.r, NULL), want_a));
        if (isinf(want_b))
            ck_assert(YAJL_IS_NULL(b));
        else
            ck_assert(rbt_same_float(strtof(b->u.number.r, NULL), want_b));
    }
    yajl_tree_free(root);
    free(text);
    free(hits);
}
END_TEST

/* ------------------------------------------------------------------------
 * Float text
 */
static void expect_float_text(float x, const char *want)
{
    char buf[RB_FLOAT_TEXT_MAX];
    size_t n = rb_float_format(x, buf);
    ck_assert_msg(strcmp(buf, want) == 0, "%.9g: got %s, want %s", (double)x,
                  buf, want);
    ck_assert_uint_eq(n, strlen(want));
}

START_TEST(test_float_format_cases)
{
    expect_float_text(4.0f, "4.0");
    expect_float_text(-4.0f, "-4.0");
    expect_float_text(0.0f, "0.0");
    expect_float_text(-0.0f, "-0.0");
    expect_float_text(0.5f, "0.5");
    expect_float_text(0.1f, "0.1");
    expect_float_text(1.0000001f, "1.0000001");
    expect_float_text(123456.0f, "123456.0");
    expect_float_text(999999.0f, "999999.0");
    expect_float_text(1e6f, "1e6");
    expect_float_text(16777216.0f, "16777216.0");
    expect_float_text(1e-7f, "1e-7");
    expect_float_text(1.5e-7f, "1.5e-7");
    expect_float_text(0.0001f, "0.0001");
    expect_float_text(FLT_MAX, "3.4028235e38");
    expect_float_text(-FLT_MAX, "-3.4028235e38");
    expect_float_text(FLT_MIN, "1.1754944e-38");
    expect_float_text(FLT_TRUE_MIN, "1e-45");
    expect_float_text(1e-40f, "1e-40");
    expect_float_text(1.25f, "1.25");
    expect_float_text(INFINITY, "null");
    expect_float_text(NAN, "null");
}
END_TEST

/* JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return 0;
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9'))
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

START_TEST(test_float_roundtrip_random)
{
    rbt_rng rng = {2024};
    char buf[RB_FLOAT_TEXT_MAX];
    size_t tested = 0;
    for (uint32_t k = 0; k < 1000000; k++) {
        uint32_t u = (uint32_t)rbt_next(&rng);
        if (k < 512) /* edges: around 0, subnormals, FLT_MAX, 1.0 */
            u = (k & 1 ? 0x80000000u : 0) +
                (uint32_t[]){0, 1, 0x7fffff, 0x800000, 0x7f7fffff,
                             0x3f800000, 0x3f7fffff, 0x4b800000}[(k >> 1) % 8] +
                (k >> 4);
        float x;
        memcpy(&x, &u, 4);
        if (!isfinite(x))
            continue;
        /* Plain ifs: a passing ck_assert costs a syscall (check records
         * the location), too much a million times over. */
        size_t n = rb_float_format(x, buf);
        if (n >= RB_FLOAT_TEXT_MAX || !json_number(buf))
            ck_abort_msg("0x%08x -> '%s' is not a JSON number", u, buf);
        float back;
        if (rb_float_parse(buf, &back) != 0 || !rbt_same_float(back, x))
            ck_abort_msg("0x%08x -> %s -> %.9g", u, buf, (double)back);
        tested++;
    }
    ck_assert_uint_gt(tested, 990000);
}
END_TEST

/* The search in rb_float_format gives what trying %.6g, %.7g, %.8g, %.9g
 * in turn gives (from %.1g for subnormals), on random floats and on every
 * power of two. */
static void linear_shortest(float x, char *out)
{
    for (int d = fabsf(x) < FLT_MIN ? 1 : 6; d <= 9; d++) {
        snprintf(out, 32, "%.*g", d, (double)x);
        if (d == 9 || rbt_same_float(strtof(out, NULL), x))
            return;
    }
}

START_TEST(test_float_format_is_shortest)
{
    rbt_rng rng = {77};
    char got[RB_FLOAT_TEXT_MAX], want[32];
    for (uint32_t k = 0; k < 200000 + 254 * 2; k++) {
        uint32_t u = k < 508 ? ((k / 2 + 1) << 23) | (k & 1 ? 0x80000000u : 0)
                             : (uint32_t)rbt_next(&rng);
        float x;
        memcpy(&x, &u, 4);
        if (!isfinite(x) || (fabsf(x) < 1e6f && x == truncf(x)))
            continue;
        rb_float_format(x, got);
        linear_shortest(x, want);
        /* Compare the digits: got has a tidied exponent ("1e6" for
         * "1e+06") and ".0" after an integral value. */
        float a = strtof(got, NULL);
        size_t dg = strcspn(got, "e"), dw = strcspn(want, "e");
        if (!strchr(want, '.') && dg >= 2 &&
            strncmp(got + dg - 2, ".0", 2) == 0)
            dg -= 2;
        if (!rbt_same_float(a, x) || dg != dw || strncmp(got, want, dg) != 0)
            ck_abort_msg("0x%08x: %s, linear search %s", u, got, want);
    }
}
END_TEST

/* The shortcut in rb_float_format writes exactly what the exact search
 * writes: random bit patterns, every power of two and its neighbours,
 * powers of ten and values next to them. */
START_TEST(test_float_format_fast_equals_exact)
{
    rbt_rng rng = {1234};
    char fast[RB_FLOAT_TEXT_MAX], exact[RB_FLOAT_TEXT_MAX];
    uint32_t checked = 0;
    for (uint32_t k = 0; k < 400000; k++) {
        uint32_t u;
        if (k < 254 * 6) {
            u = ((k / 6 + 1) << 23) + (k % 3) - 1;
            u |= (k % 6) >= 3 ? 0x80000000u : 0;
        } else if (k < 254 * 6 + 200) {
            float p10 = powf(10.0f, (float)((int)(k % 100) - 45));
            memcpy(&u, &p10, 4);
            u += (k / 100) & 1;
        } else {
            u = (uint32_t)rbt_next(&rng);
        }
        float x;
        memcpy(&x, &u, 4);
        if (!isfinite(x))
            continue;
        size_t a = rb_float_format(x, fast);
        size_t b = rb_float_format_exact(x, exact);
        if (a != b || memcmp(fast, exact, a) != 0)
            ck_abort_msg("0x%08x: fast '%s', exact '%s'", u, fast, exact);
        checked++;
    }
    ck_assert_uint_gt(checked, 398000);
}
END_TEST

START_TEST(test_float_parse)
{
    float v = 7;
    ck_assert_int_eq(rb_float_parse("1e39", &v), -1);
    ck_assert_int_eq(rb_float_parse("-1e39", &v), -1);
    ck_assert_int_eq(rb_float_parse("1e-39", &v), 0);
    ck_assert(rbt_same_float(v, 1e-39f));
    ck_assert_int_eq(rb_float_parse("-0", &v), 0);
    ck_assert(rbt_same_float(v, -0.0f));
    ck_assert_int_eq(rb_float_parse("", &v), -2);
    ck_assert_int_eq(rb_float_parse("1x", &v), -2);
    ck_assert_int_eq(rb_float_parse("nan", &v), -2);
}
END_TEST

/* The in-place shortcut yajl's numbers take: the bytes after len are
 * not read, it gives rb_float_parse's float or declines, and it declines
 * anything that is not a plain short number. */
START_TEST(test_float_parse_fast_in_place)
{
    float v = 7;
    ck_assert_int_eq(rb_float_parse_fast("-52.722855,1", 10, &v), 1);
    ck_assert(rbt_same_float(v, -52.722855f));
    ck_assert_int_eq(rb_float_parse_fast("12e3]", 4, &v), 1);
    ck_assert(rbt_same_float(v, 12e3f));
    ck_assert_int_eq(rb_float_parse_fast("-0]", 2, &v), 1);
    ck_assert(rbt_same_float(v, -0.0f));
    /* 2^53 + 1 does not fit a double exactly: strtof decides. */
    ck_assert_int_eq(rb_float_parse_fast("9007199254740993", 16, &v), 0);
    ck_assert_int_eq(rb_float_parse_fast("1e39", 4, &v), 0);
    ck_assert_int_eq(rb_float_parse_fast("1.", 2, &v), 0);
    ck_assert_int_eq(rb_float_parse_fast("", 0, &v), 0);
    ck_assert_int_eq(rb_float_parse_fast("1x", 2, &v), 0);
    ck_assert(rbt_same_float(v, -0.0f)); /* untouched when declined */
    /* Against rb_float_parse on random short texts followed by digits
     * that must not be read. */
    rbt_rng rng = {77};
    char t[64];
    long taken = 0;
    for (int i = 0; i < 200000; i++) {
        int k = 0, nd = 1 + (int)rbt_below(&rng, 20);
        if (rbt_below(&rng, 2))
            t[k++] = '-';
        int dot = (int)rbt_below(&rng, (uint32_t)nd + 1);
        for (int j = 0; j < nd; j++) {
            if (j == dot && j)
                t[k++] = '.';
            t[k++] = (char)('0' + rbt_below(&rng, 10));
        }
        if (rbt_below(&rng, 3) == 0)
            k += snprintf(t + k, sizeof t - (size_t)k, "e%d",
                          (int)rbt_below(&rng, 60) - 30);
        t[k] = '\0';
        float want, got;
        if (rb_float_parse(t, &want) != 0)
            continue;
        char padded[80];
        snprintf(padded, sizeof padded, "%s999", t);
        if (rb_float_parse_fast(padded, (size_t)k, &got)) {
            ck_assert_msg(rbt_same_float(got, want), "%s", t);
            taken++;
        }
    }
    ck_assert_int_gt(taken, 100000);
}
END_TEST

START_TEST(test_ms_format)
{
    char out[64];
    ck_assert_uint_eq(rb_ms_format(0, out, sizeof out), 5);
    ck_assert_str_eq(out, "0.000");
    rb_ms_format(1.5, out, sizeof out);
    ck_assert_str_eq(out, "1.500");
    rb_ms_format(0.0004, out, sizeof out);
    ck_assert_str_eq(out, "0.000");
    rb_ms_format(0.0126, out, sizeof out);
    ck_assert_str_eq(out, "0.013");
    rb_ms_format(12345.6789, out, sizeof out);
    ck_assert_str_eq(out, "12345.679");
    rb_ms_format(-1, out, sizeof out);
    ck_assert_str_eq(out, "-1.000");
    /* Away from ties it writes what %.3f writes. */
    rbt_rng rng = {5};
    for (int i = 0; i < 100000; i++) {
        double ms = (double)rbt_below(&rng, 100000000) / 997.0;
        char want[64];
        snprintf(want, sizeof want, "%.3f", ms);
        rb_ms_format(ms, out, sizeof out);
        ck_assert_msg(strcmp(out, want) == 0, "%.17g: %s, %%.3f %s", ms,
                      out, want);
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * JSON text helpers and problem bodies
 */
START_TEST(test_quote)
{
    char out[64];
    ck_assert_uint_eq(rbj_quote(out, sizeof out, "a\"b\\c\n\x01"), 17);
    ck_assert_str_eq(out, "\"a\\\"b\\\\c\\n\\u0001\"");
    /* Cut short at a character boundary: never half an escape or a
     * UTF-8 sequence. */
    rbj_quote(out, 8, "ab\"cd");
    ck_assert_str_eq(out, "\"ab\\\"c\"");
    rbj_quote(out, 7, "ab\"cd");
    ck_assert_str_eq(out, "\"ab\\\"\"");
    rbj_quote(out, 6, "ab\"cd");
    ck_assert_str_eq(out, "\"ab\"");
    rbj_quote(out, 6, "a\xc3\xa9z");
    ck_assert_str_eq(out, "\"a\xc3\xa9\"");
    rbj_quote(out, 5, "a\xc3\xa9z");
    ck_assert_str_eq(out, "\"a\"");

    char ptr[16] = "";
    rbj_pointer_append(ptr, sizeof ptr, "a/b~c", 5);
    ck_assert_str_eq(ptr, "/a~1b~0c");
    rbj_pointer_append(ptr, sizeof ptr, "0123456789", 10);
    ck_assert_str_eq(ptr, "/a~1b~0c/012345");
}
END_TEST

START_TEST(test_problem)
{
    char out[RB_PROBLEM_MAX];
    size_t n = rb_problem_write(out, sizeof out, 422, "tmin (5) > tmax (1)",
                                "/rays/17/6");
    const char *want = "{\"type\":\"about:blank\",\"title\":\"Unprocessable "
                       "Content\",\"status\":422,\"detail\":\"tmin (5) > "
                       "tmax (1)\",\"pointer\":\"/rays/17/6\"}";
    ck_assert_str_eq(out, want);
    ck_assert_uint_eq(n, strlen(want));
    rb_problem_write(out, sizeof out, 413, NULL, NULL);
    ck_assert_str_eq(out, "{\"type\":\"about:blank\",\"title\":\"Content Too "
                          "Large\",\"status\":413}");
    rb_problem_write(out, sizeof out, 400, "bad \"x\"\n", "");
    ck_assert_str_eq(out, "{\"type\":\"about:blank\",\"title\":\"Bad "
                          "Request\",\"status\":400,\"detail\":\"bad "
                          "\\\"x\\\"\\n\",\"pointer\":\"\"}");
    /* A huge detail of characters that need escaping still gives valid
     * JSON within RB_PROBLEM_MAX, pointer kept. */
    char *detail = malloc(10000);
    memset(detail, '\x02', 9999);
    detail[9999] = '\0';
    n = rb_problem_write(out, sizeof out, 422, detail, "/boxes/3");
    ck_assert_uint_lt(n, RB_PROBLEM_MAX);
    char err[128];
    yajl_val root = yajl_tree_parse(out, err, sizeof err);
    ck_assert_msg(root != NULL, "%s", err);
    const char *pp[] = {"pointer", NULL};
    ck_assert_str_eq(YAJL_GET_STRING(yajl_tree_get(root, pp, yajl_t_string)),
                     "/boxes/3");
    yajl_tree_free(root);
    free(detail);

    ck_assert_int_eq(rb_http_status_of(RB_EINPUT), 422);
    ck_assert_int_eq(rb_http_status_of(RB_ELIMIT), 413);
    ck_assert_int_eq(rb_http_status_of(RB_ENOMEM), 503);
    ck_assert_int_eq(rb_http_status_of(RB_EDEVICE), 500);
    ck_assert_str_eq(rb_http_reason(404), "Not Found");
    ck_assert_str_eq(rb_http_reason(999), "Error");
}
END_TEST

static Suite *response_suite(void)
{
    Suite *s = suite_create("json_response");
    TCase *tc = tcase_create("response");
    tcase_add_test(tc, test_nearest_exact);
    tcase_add_test(tc, test_pairs_exact);
    tcase_add_test(tc, test_any_count_exact);
    tcase_add_test(tc, test_all_exact);
    tcase_add_test(tc, test_end_to_end);
    tcase_add_test(tc, test_tiny_buffers);
    tcase_add_test(tc, test_response_floats_read_back);
    suite_add_tcase(s, tc);
    tc = tcase_create("text");
    tcase_add_test(tc, test_float_format_cases);
    tcase_add_test(tc, test_float_roundtrip_random);
    tcase_add_test(tc, test_float_format_is_shortest);
    tcase_add_test(tc, test_float_format_fast_equals_exact);
    tcase_add_test(tc, test_float_parse);
    tcase_add_test(tc, test_float_parse_fast_in_place);
    tcase_add_test(tc, test_ms_format);
    tcase_add_test(tc, test_quote);
    tcase_add_test(tc, test_problem);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(response_suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
