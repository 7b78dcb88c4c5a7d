/* test_http_camera.c - cameras through rayboxd (SPEC section 8): a
 * "camera" in place of "rays", JSON and binary, in every mode, on
 * /v1/intersect and /v1/scenes/{id}/intersect, must answer the same bytes
 * as its rays sent explicitly (made in-process by rb_camera_rays and
 * sent as exact float text / float32 records); the same on the OpenCL
 * backend, whose answers must also equal the CPU backend's. Then
 * POST /v1/scenes/{id}/render: its PNGs, decoded with libpng, against
 * the nearest answer pixel by pixel, its binary answer, and the
 * refusals (422/413/406/415) with their pointers. */
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "binary_codec.h"
#include "http_expect.h"
#include "http_util.h"
#include "sbuf.h"
#include "testutil.h"

#define JSON "application/json"
#define ID4 "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1]"
#define BIN RBB_MEDIA_TYPE

static rbt_server srv;
static rb_context *ctx;
static char url[512];

static const char *U(const rbt_server *s, const char *path)
{
    snprintf(url, sizeof url, "%s%s", s->base, path);
    return url;
}

static void setup(void)
{
    static const char *const args[] = {
        "--max-rays", "5000", "--max-boxes", "3000", "--max-body-bytes", "4M",
        "--max-results", "100000", "--workers", "2", "--threads", "2", NULL};
    rbt_fixture_start(&srv, args, &ctx);
}

static void teardown(void)
{
    rbt_fixture_stop(&srv, ctx);
}

/* ------------------------------------------------------------------------
 * A camera looking at the random boxes of rbt_query_random ([-10, 10]^3)
 */
#define GRID_W 24
#define GRID_H 16

static void test_camera(rb_camera *c, int depth, int ortho)
{
    memset(c, 0, sizeof *c);
    /* Eye (4, 6, 30) looking at the origin, y up (right-handed). */
    double eye[3] = {4, 6, 30}, f[3], s[3], u[3], l = 0;
    for (int k = 0; k < 3; k++)
        l += eye[k] * eye[k];
    for (int k = 0; k < 3; k++)
        f[k] = -eye[k] / sqrt(l);
    double up[3] = {0, 1, 0};
    s[0] = f[1] * up[2] - f[2] * up[1];
    s[1] = f[2] * up[0] - f[0] * up[2];
    s[2] = f[0] * up[1] - f[1] * up[0];
    double sl = sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
    for (int k = 0; k < 3; k++)
        s[k] /= sl;
    u[0] = s[1] * f[2] - s[2] * f[1];
    u[1] = s[2] * f[0] - s[0] * f[2];
    u[2] = s[0] * f[1] - s[1] * f[0];
    const double *rows[3] = {s, u, f};
    for (int r = 0; r < 3; r++) {
        double sign = r == 2 ? -1 : 1, dot = 0;
        for (int k = 0; k < 3; k++) {
            c->view[4 * r + k] = sign * rows[r][k];
            dot += sign * rows[r][k] * eye[k];
        }
        c->view[4 * r + 3] = -dot;
    }
    c->view[15] = 1;
    double n = 1, fa = 80, aspect = (double)GRID_W / GRID_H;
    if (ortho) {
        c->projection[0] = 1 / (12 * aspect);
        c->projection[5] = 1.0 / 12;
        c->projection[10] = depth ? 2 / (n - fa) : 1 / (n - fa);
        c->projection[11] = depth ? (fa + n) / (n - fa) : n / (n - fa);
        c->projection[15] = 1;
    } else {
        double t = 1 / tan(0.35);
        c->projection[0] = t / aspect;
        c->projection[5] = t;
        c->projection[10] = depth ? (fa + n) / (n - fa) : fa / (n - fa);
        c->projection[11] = depth ? 2 * fa * n / (n - fa) : fa * n / (n - fa);
        c->projection[14] = -1;
    }
    c->viewport[0] = 3;
    c->viewport[1] = 5;
    c->viewport[2] = GRID_W;
    c->viewport[3] = GRID_H;
    c->depth = depth;
    c->tmin = 0;
    c->tmax = INFINITY;
}

static void put_doubles(sbuf *b, const double *v, size_t n)
{
    sbuf_add(b, "[");
    for (size_t i = 0; i < n; i++)
        sbuf_printf(b, "%s%.17g", i ? "," : "", v[i]);
    sbuf_add(b, "]");
}

static void put_boxes(sbuf *b, const rb_box *boxes, size_t n)
{
    sbuf_add(b, "[");
    for (size_t i = 0; i < n; i++) {
        sbuf_add(b, i ? ",[" : "[");
        for (int k = 0; k < 6; k++) {
            if (k)
                sbuf_add(b, ",");
            sbuf_json_float(b, k < 3 ? boxes[i].min[k] : boxes[i].max[k - 3]);
        }
        sbuf_add(b, "]");
    }
    sbuf_add(b, "]");
}

/* The camera's JSON members (without braces around the whole body). */
static void put_camera(sbuf *b, const rb_camera *c)
{
    sbuf_add(b, "\"camera\":{\"view\":");
    put_doubles(b, c->view, 16);
    sbuf_add(b, ",\"projection\":");
    put_doubles(b, c->projection, 16);
    sbuf_add(b, ",\"viewport\":");
    put_doubles(b, c->viewport, 4);
    sbuf_printf(b, ",\"depth\":\"%s\"",
                c->depth ? "minus_one_to_one" : "zero_to_one");
    if (c->pixels) {
        sbuf_add(b, ",\"pixels\":[");
        for (size_t k = 0; k < c->n_pixels; k++) {
            if (k)
                sbuf_add(b, ",");
            put_doubles(b, c->pixels + 2 * k, 2);
        }
        sbuf_add(b, "]");
    }
    sbuf_add(b, "}");
}

static char *camera_json(const rb_camera *c, rb_mode mode, uint32_t max_hits,
                         const rb_box *boxes, size_t nb, size_t *len)
{
    sbuf b;
    sbuf_init(&b);
    sbuf_printf(&b, "{\"mode\":\"%s\"", rb_mode_name(mode));
    if (max_hits)
        sbuf_printf(&b, ",\"max_hits\":%u", max_hits);
    if (c->tmin != 0) {
        sbuf_add(&b, ",\"tmin\":");
        sbuf_json_float(&b, c->tmin);
    }
    if (!isinf(c->tmax)) {
        sbuf_add(&b, ",\"tmax\":");
        sbuf_json_float(&b, c->tmax);
    }
    sbuf_add(&b, ",");
    put_camera(&b, c);
    if (boxes) {
        sbuf_add(&b, ",\"boxes\":");
        put_boxes(&b, boxes, nb);
    }
    sbuf_add(&b, "}");
    char *out = sbuf_take(&b, len);
    ck_assert_ptr_nonnull(out);
    return out;
}

/* A version 2 header (docs/binary-format.md). */
static void v2_header(uint8_t out[RBB_HEADER_SIZE_2], rb_mode mode,
                      unsigned flags, uint32_t max_hits, uint64_t n_rays,
                      uint64_t n_boxes, float tmin, float tmax)
{
    rbb_header h = {.version = RBB_VERSION_2,
                    .header_size = RBB_HEADER_SIZE_2,
                    .kind = RBB_KIND_INTERSECT,
                    .mode = (uint8_t)mode,
                    .dims = 3,
                    .flags = (uint8_t)flags,
                    .max_hits = max_hits,
                    .n_rays = n_rays,
                    .n_boxes = n_boxes,
                    .tmin = tmin,
                    .tmax = tmax};
    ck_assert_uint_eq(rbb_header_encode(&h, out), RBB_HEADER_SIZE_2);
}

static void *camera_binary(const rb_camera *c, rb_mode mode,
                           uint32_t max_hits, const rb_box *boxes, size_t nb,
                           size_t *len)
{
    size_t np = c->pixels ? c->n_pixels : 0;
    *len = RBB_HEADER_SIZE_2 + RBB_CAMERA_RECORD_BYTES +
           np * RBB_PIXEL_RECORD_BYTES + nb * sizeof(rb_box);
    uint8_t *b = malloc(*len), *p = b;
    ck_assert_ptr_nonnull(b);
    v2_header(p, mode, RBB_FLAG_CAMERA, max_hits, np, nb, c->tmin, c->tmax);
    p += RBB_HEADER_SIZE_2;
    memcpy(p, c->view, 128);
    memcpy(p + 128, c->projection, 128);
    memcpy(p + 256, c->viewport, 32);
    uint32_t depth = (uint32_t)c->depth, pixels = c->pixels != NULL;
    memcpy(p + 288, &depth, 4);
    memcpy(p + 292, &pixels, 4);
    p += RBB_CAMERA_RECORD_BYTES;
    if (np)
        memcpy(p, c->pixels, np * RBB_PIXEL_RECORD_BYTES);
    p += np * RBB_PIXEL_RECORD_BYTES;
    if (nb)
        memcpy(p, boxes, nb * sizeof(rb_box));
    return b;
}

/* The explicit form of the camera's rays, version 2 (RANGES: each ray
 * its rb_ray record). */
static void *rays_binary(const rb_ray *rays, size_t n, rb_mode mode,
                         uint32_t max_hits, const rb_box *boxes, size_t nb,
                         size_t *len)
{
    *len = RBB_HEADER_SIZE_2 + n * sizeof(rb_ray) + nb * sizeof(rb_box);
    uint8_t *b = malloc(*len);
    ck_assert_ptr_nonnull(b);
    v2_header(b, mode, RBB_FLAG_RANGES, max_hits, n, nb, 0, INFINITY);
    memcpy(b + RBB_HEADER_SIZE_2, rays, n * sizeof(rb_ray));
    if (nb)
        memcpy(b + RBB_HEADER_SIZE_2 + n * sizeof(rb_ray), boxes,
               nb * sizeof(rb_box));
    return b;
}

static rb_ray *camera_rays(const rb_camera *c, size_t *n)
{
    uint64_t count = 0;
    ck_assert_int_eq(rb_camera_count(c, &count, NULL), RB_OK);
    rb_ray *rays = malloc((count ? count : 1) * sizeof *rays);
    ck_assert_ptr_nonnull(rays);
    ck_assert_int_eq(rb_camera_rays(c, 0, (size_t)count, rays, NULL), RB_OK);
    *n = (size_t)count;
    return rays;
}

/* Two binary answers are the same but for the time they took. */
static void same_binary(const rbt_resp *a, const rbt_resp *b, const char *what)
{
    ck_assert_msg(a->status == 200 && b->status == 200, "%s: %ld / %ld: %s",
                  what, a->status, b->status, a->status == 200 ? b->body
                                                               : a->body);
    ck_assert_msg(a->len == b->len, "%s: %zu / %zu bytes", what, a->len,
                  b->len);
    ck_assert_msg(a->len >= 64 && memcmp(a->body, b->body, 48) == 0 &&
                      memcmp(a->body + 56, b->body + 56, a->len - 56) == 0,
                  "%s: the binary answers differ", what);
}

static void same_json(const rbt_resp *a, const rbt_resp *b, const char *what)
{
    ck_assert_msg(a->status == 200 && b->status == 200, "%s: %ld / %ld: %s",
                  what, a->status, b->status, a->status == 200 ? b->body
                                                               : a->body);
    size_t la = rbt_strip_meta(a->body, a->len),
           lb = rbt_strip_meta(b->body, b->len);
    ck_assert_msg(la == lb && memcmp(a->body, b->body, la) == 0,
                  "%s: the JSON answers differ:\n%.300s\n%.300s", what,
                  a->body, b->body);
}

/* One camera query, both forms in and out, against its explicit rays:
 * on s's /v1/intersect with the boxes, or on path (a scene's intersect)
 * without them. */
static void check_camera_query(const rbt_server *s, const char *path,
                               const rb_camera *c, rb_mode mode,
                               uint32_t max_hits, const rb_box *boxes,
                               size_t nb)
{
    char what[160];
    snprintf(what, sizeof what, "%s %s %s%s", path, rb_mode_name(mode),
             c->pixels ? "pixels" : "grid", c->depth ? " (OpenGL depth)" : "");
    size_t n;
    rb_ray *rays = camera_rays(c, &n);
    rbt_query q = {.mode = mode, .dims = 3, .max_hits = max_hits,
                   .ranges = 1, .n_rays = n, .n_boxes = nb, .rays = rays,
                   .boxes = (rb_box *)boxes};
    size_t lj, le, lb, lr;
    char *cj = camera_json(c, mode, max_hits, boxes, nb, &lj);
    char *ej = rbt_query_json(&q, boxes != NULL, &le);
    void *cb = camera_binary(c, mode, max_hits, boxes, nb, &lb);
    void *eb = rays_binary(rays, n, mode, max_hits, boxes, nb, &lr);
    rbt_resp a, b;
    const char *u = U(s, path);
    char full[512];
    snprintf(full, sizeof full, "%s", u);
    /* JSON in, JSON out; JSON in, binary out; binary in and out. */
    rbt_http(NULL, "POST", full, JSON, cj, lj, NULL, NULL, &a);
    rbt_http(NULL, "POST", full, JSON, ej, le, NULL, NULL, &b);
    same_json(&a, &b, what);
    ck_assert_msg(strstr(a.body, "\"count\":") != NULL, "%s", a.body);
    rbt_resp_free(&a);
    rbt_resp_free(&b);
    rbt_http(NULL, "POST", full, JSON, cj, lj, BIN, NULL, &a);
    rbt_http(NULL, "POST", full, JSON, ej, le, BIN, NULL, &b);
    same_binary(&a, &b, what);
    rbt_resp_free(&a);
    rbt_resp_free(&b);
    rbt_http(NULL, "POST", full, BIN, cb, lb, BIN, NULL, &a);
    rbt_http(NULL, "POST", full, BIN, eb, lr, BIN, NULL, &b);
    same_binary(&a, &b, what);
    rbt_resp_free(&a);
    rbt_resp_free(&b);
    rbt_http(NULL, "POST", full, BIN, cb, lb, JSON, NULL, &a);
    rbt_http(NULL, "POST", full, BIN, eb, lr, JSON, NULL, &b);
    same_json(&a, &b, what);
    rbt_resp_free(&a);
    rbt_resp_free(&b);
    free(cj);
    free(ej);
    free(cb);
    free(eb);
    free(rays);
}

static char *create_scene(const rbt_server *s, const rb_box *boxes, size_t n,
                          char *id, size_t cap)
{
    sbuf b;
    sbuf_init(&b);
    sbuf_add(&b, "{\"boxes\":");
    put_boxes(&b, boxes, n);
    sbuf_add(&b, "}");
    rbt_resp r;
    rbt_http(NULL, "POST", U(s, "/v1/scenes"), JSON, b.data, b.len, NULL,
             NULL, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    const char *p = strstr(r.body, "\"id\":\"");
    ck_assert_ptr_nonnull(p);
    p += 6;
    size_t k = strcspn(p, "\"");
    ck_assert(k < cap);
    memcpy(id, p, k);
    id[k] = '\0';
    rbt_resp_free(&r);
    sbuf_free(&b);
    return id;
}

static void random_pixels(rbt_rng *g, const rb_camera *c, double *px,
                          size_t n)
{
    for (size_t k = 0; k < n; k++) {
        /* Inside the viewport mostly, some outside; quarters and odd
         * fractions. */
        px[2 * k] = c->viewport[0] - 2 + rbt_uniform(g, 0, GRID_W + 4);
        px[2 * k + 1] = c->viewport[1] - 2 + rbt_uniform(g, 0, GRID_H + 4);
    }
}

/* Every mode, grid and pixels, both routes, on server s. */
static void check_every_mode(const rbt_server *s, int depth, int ortho)
{
    rbt_rng g = {0xca3e7a + (uint64_t)depth * 7 + (uint64_t)ortho};
    rbt_query scene_q;
    rbt_query_random(&scene_q, &g, RB_MODE_NEAREST, 3, 1, 300, 0, 0);
    char id[160], path[200];
    create_scene(s, scene_q.boxes, scene_q.n_boxes, id, sizeof id);
    snprintf(path, sizeof path, "/v1/scenes/%s/intersect", id);
    rb_camera c;
    test_camera(&c, depth, ortho);
    double px[2 * 40];
    random_pixels(&g, &c, px, 40);
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    for (int list = 0; list < 2; list++) {
        c.pixels = list ? px : NULL;
        c.n_pixels = list ? 40 : 0;
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            uint32_t mh = modes[m] == RB_MODE_ALL ? 3 : 0;
            check_camera_query(s, "/v1/intersect", &c, modes[m], mh,
                               scene_q.boxes, scene_q.n_boxes);
            check_camera_query(s, path, &c, modes[m], mh, NULL, 0);
        }
    }
    /* A range of the request's own. */
    c.pixels = NULL;
    c.n_pixels = 0;
    c.tmin = 0.25f;
    c.tmax = 0.5f;
    check_camera_query(s, path, &c, RB_MODE_NEAREST, 0, NULL, 0);
    /* pairs: as many boxes as pixels. */
    c.tmin = 0;
    c.tmax = INFINITY;
    c.pixels = px;
    c.n_pixels = 40;
    check_camera_query(s, "/v1/intersect", &c, RB_MODE_PAIRS, 0,
                       scene_q.boxes, 40);
    rbt_query_free(&scene_q);
}

START_TEST(test_camera_equals_explicit_rays)
{
    check_every_mode(&srv, RB_DEPTH_ZERO_TO_ONE, 0);
    check_every_mode(&srv, RB_DEPTH_MINUS_ONE_TO_ONE, 0);
    check_every_mode(&srv, RB_DEPTH_ZERO_TO_ONE, 1);
}
END_TEST

/* The OpenCL backend: the same check, and its answers equal the CPU
 * backend's. No OpenCL is a failure (PoCL is installed by make test). */
START_TEST(test_camera_opencl)
{
    rbt_server cl;
    static const char *const args[] = {"--backend", "opencl", "--workers",
                                       "1", "--threads", "2", NULL};
    rbt_server_start(&cl, args);
    rbt_resp r;
    rbt_get(NULL, &cl, "/v1/health", &r);
    ck_assert_msg(strstr(r.body, "\"backend\":\"opencl\"") != NULL, "%s",
                  r.body);
    rbt_resp_free(&r);
    check_every_mode(&cl, RB_DEPTH_ZERO_TO_ONE, 0);
    /* Across backends: the same camera body on both servers. */
    rbt_rng g = {77};
    rbt_query q;
    rbt_query_random(&q, &g, RB_MODE_NEAREST, 3, 1, 200, 0, 0);
    rb_camera c;
    test_camera(&c, 0, 0);
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_COUNT,
                                    RB_MODE_ALL};
    for (int m = 0; m < 3; m++) {
        size_t len;
        char *body = camera_json(&c, modes[m], 0, q.boxes, q.n_boxes, &len);
        rbt_resp a, b;
        rbt_http(NULL, "POST", U(&srv, "/v1/intersect"), JSON, body, len,
                 BIN, NULL, &a);
        rbt_http(NULL, "POST", U(&cl, "/v1/intersect"), JSON, body, len,
                 BIN, NULL, &b);
        same_binary(&a, &b, "cpu vs opencl");
        rbt_resp_free(&a);
        rbt_resp_free(&b);
        free(body);
    }
    /* A picture large enough that the server makes its rays in pieces
     * (--threads 2, 65536 rays a piece at least). */
    char id[160], path[200];
    create_scene(&cl, q.boxes, q.n_boxes, id, sizeof id);
    snprintf(path, sizeof path, "/v1/scenes/%s/intersect", id);
    c.viewport[2] = 512;
    c.viewport[3] = 300;
    size_t n, lb, lr;
    rb_ray *rays = camera_rays(&c, &n);
    ck_assert_uint_eq(n, 153600);
    void *cb = camera_binary(&c, RB_MODE_NEAREST, 0, NULL, 0, &lb);
    void *eb = rays_binary(rays, n, RB_MODE_NEAREST, 0, NULL, 0, &lr);
    rbt_resp a, b;
    rbt_http(NULL, "POST", U(&cl, path), BIN, cb, lb, BIN, NULL, &a);
    rbt_http(NULL, "POST", U(&cl, path), BIN, eb, lr, BIN, NULL, &b);
    same_binary(&a, &b, "a picture in pieces");
    rbt_resp_free(&a);
    rbt_resp_free(&b);
    free(cb);
    free(eb);
    free(rays);
    rbt_query_free(&q);
    ck_assert_int_eq(rbt_server_stop(&cl), 0);
}
END_TEST

/* ------------------------------------------------------------------------
 * Render
 */
static uint8_t *decode_png(const rbt_resp *r, uint32_t *w, uint32_t *h)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    ck_assert_msg(png_image_begin_read_from_memory(&img, r->body, r->len),
                  "not a PNG: %s", img.message);
    ck_assert_msg(img.format == PNG_FORMAT_RGB, "format 0x%x", img.format);
    uint8_t *rgb = malloc(PNG_IMAGE_SIZE(img));
    ck_assert_ptr_nonnull(rgb);
    ck_assert(png_image_finish_read(&img, NULL, rgb, 0, NULL));
    *w = img.width;
    *h = img.height;
    return rgb;
}

static rbt_resp render(const char *path, const char *body, const char *accept)
{
    rbt_resp r;
    rbt_http(NULL, "POST", U(&srv, path), JSON, body, strlen(body), accept,
             NULL, &r);
    return r;
}

/* The face's unit outward normal, as colour: (n + 1) / 2 * 255. */
static void face_colour(int face, uint8_t c[3])
{
    c[0] = c[1] = c[2] = 128; /* 127.5 rounds up */
    if (face >= RB_FACE_NEG_X && face <= RB_FACE_POS_Z)
        c[(face - 1) / 2] = (face % 2) ? 0 : 255;
}

START_TEST(test_render_png)
{
    rbt_rng g = {4242};
    rbt_query q;
    rbt_query_random(&q, &g, RB_MODE_NEAREST, 3, 1, 120, 0, 0);
    char id[160], path[200], ipath[200];
    create_scene(&srv, q.boxes, q.n_boxes, id, sizeof id);
    snprintf(path, sizeof path, "/v1/scenes/%s/render", id);
    snprintf(ipath, sizeof ipath, "/v1/scenes/%s/intersect", id);
    rb_camera c;
    test_camera(&c, 0, 0);
    sbuf cam;
    sbuf_init(&cam);
    put_camera(&cam, &c);

    /* The nearest answer of every pixel: the render's binary answer,
     * which is the scene query's with the same camera. */
    char body[8192];
    snprintf(body, sizeof body, "{%s}", cam.data);
    rbt_resp nb = render(path, body, BIN);
    ck_assert_msg(nb.status == 200, "%ld %s", nb.status, nb.body);
    char ct[128];
    ck_assert_str_eq(rbt_header(&nb, "Content-Type", ct, sizeof ct), BIN);
    rbt_resp qb = render(ipath, body, BIN);
    /* The render's answer has no scene version flag: compare the hits. */
    ck_assert_uint_eq(nb.len, qb.len);
    ck_assert_uint_eq(nb.len, RBB_HEADER_SIZE + GRID_W * GRID_H * 16);
    ck_assert_int_eq(memcmp(nb.body + RBB_HEADER_SIZE,
                            qb.body + RBB_HEADER_SIZE,
                            nb.len - RBB_HEADER_SIZE), 0);
    const rb_hit *hits = (const rb_hit *)(void *)(nb.body + RBB_HEADER_SIZE);
    size_t n = GRID_W * GRID_H, n_hit = 0;
    float lo = INFINITY, hi = -INFINITY;
    for (size_t k = 0; k < n; k++)
        if (hits[k].hit) {
            n_hit++;
            lo = fminf(lo, hits[k].t_enter);
            hi = fmaxf(hi, hits[k].t_enter);
        }
    ck_assert_msg(n_hit > n / 8 && n_hit < n, "%zu of %zu pixels hit: the "
                  "test camera should see boxes and background", n_hit, n);
    ck_assert(hi > lo);

    static const char *const images[] = {"depth", "normal", "id"};
    for (int im = 0; im < 3; im++) {
        snprintf(body, sizeof body, "{%s,\"image\":\"%s\"}", cam.data,
                 images[im]);
        rbt_resp r = render(path, body, im == 2 ? "image/png" : NULL);
        ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
        ck_assert_str_eq(rbt_header(&r, "Content-Type", ct, sizeof ct),
                         "image/png");
        uint32_t w, h;
        uint8_t *rgb = decode_png(&r, &w, &h);
        ck_assert_uint_eq(w, GRID_W);
        ck_assert_uint_eq(h, GRID_H);
        uint8_t id_rgb[256][3];
        uint8_t seen_id[256] = {0};
        for (size_t k = 0; k < n; k++) {
            const uint8_t *p = rgb + 3 * k;
            const rb_hit *t = &hits[k];
            int black = !p[0] && !p[1] && !p[2];
            ck_assert_msg(black == !t->hit, "%s pixel %zu: hit %d, colour "
                          "%u %u %u", images[im], k, t->hit, p[0], p[1],
                          p[2]);
            if (!t->hit)
                continue;
            if (im == 0) {
                double v = 32 + 223 * ((double)hi - t->t_enter) /
                                    ((double)hi - lo);
                uint8_t want = (uint8_t)lround(v);
                ck_assert_msg(p[0] == want && p[1] == want && p[2] == want,
                              "depth pixel %zu: %u, want %u", k, p[0], want);
                if (t->t_enter == lo)
                    ck_assert_uint_eq(p[0], 255);
                if (t->t_enter == hi)
                    ck_assert_uint_eq(p[0], 32);
            } else if (im == 1) {
                uint8_t want[3];
                face_colour(t->face, want);
                ck_assert_msg(memcmp(p, want, 3) == 0,
                              "normal pixel %zu (face %d): %u %u %u", k,
                              t->face, p[0], p[1], p[2]);
            } else {
                /* One colour per id. */
                ck_assert(t->box >= 0 && t->box < 256);
                if (seen_id[t->box])
                    ck_assert_msg(memcmp(p, id_rgb[t->box], 3) == 0,
                                  "id %d has two colours", t->box);
                seen_id[t->box] = 1;
                memcpy(id_rgb[t->box], p, 3);
            }
        }
        free(rgb);
        rbt_resp_free(&r);
    }
    /* raybox render: the same PNG, byte for byte, from the files. */
    char dir[] = "/tmp/rbcamXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char scene_path[64], cam_path[64], png_path[64], cmd[512];
    snprintf(scene_path, sizeof scene_path, "%s/scene.json", dir);
    snprintf(cam_path, sizeof cam_path, "%s/camera.json", dir);
    snprintf(png_path, sizeof png_path, "%s/out.png", dir);
    FILE *f = fopen(scene_path, "w");
    ck_assert_ptr_nonnull(f);
    sbuf sb;
    sbuf_init(&sb);
    sbuf_add(&sb, "{\"boxes\":");
    put_boxes(&sb, q.boxes, q.n_boxes);
    sbuf_add(&sb, "}");
    fputs(sb.data, f);
    fclose(f);
    sbuf_free(&sb);
    f = fopen(cam_path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{%s,\"image\":\"depth\"}", cam.data);
    fclose(f);
    snprintf(body, sizeof body, "{%s,\"image\":\"normal\"}", cam.data);
    rbt_resp want = render(path, body, NULL);
    ck_assert_int_eq(want.status, 200);
    snprintf(cmd, sizeof cmd, "%s render %s --camera %s -o %s --image normal "
             "--backend cpu", RAYBOX_CLI, scene_path, cam_path, png_path);
    ck_assert_int_eq(system(cmd), 0);
    size_t got_len;
    char *got = rbt_read_file(png_path, &got_len);
    ck_assert_msg(got_len == want.len && memcmp(got, want.body, got_len) == 0,
                  "raybox render wrote another PNG (%zu / %zu bytes)",
                  got_len, want.len);
    free(got);
    rbt_resp_free(&want);
    /* A bad camera file: exit 2, the file and the pointer named. */
    f = fopen(cam_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
          ",\"viewport\":[0,0,0,4]}}", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s render %s --camera %s -o %s 2>%s/err",
             RAYBOX_CLI, scene_path, cam_path, png_path, dir);
    int st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    snprintf(cmd, sizeof cmd, "%s/err", dir);
    char *err = rbt_read_file(cmd, &got_len);
    ck_assert_msg(strstr(err, "camera.json: /camera/viewport/2:") != NULL,
                  "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);

    rbt_resp_free(&nb);
    rbt_resp_free(&qb);
    sbuf_free(&cam);
    rbt_query_free(&q);
}
END_TEST

/* ------------------------------------------------------------------------
 * Refusals
 */
static void expect_problem(const char *path, const char *ctype,
                           const void *body, size_t len, const char *accept,
                           long status, const char *pointer)
{
    rbt_resp r;
    rbt_http(NULL, "POST", U(&srv, path), ctype, body, len, accept, NULL, &r);
    ck_assert_msg(r.status == status, "%s: %ld, want %ld: %s", path, r.status,
                  status, r.body);
    if (pointer) {
        char want[200];
        snprintf(want, sizeof want, "\"pointer\":\"%s\"", pointer);
        ck_assert_msg(strstr(r.body, want) != NULL, "want %s: %s", want,
                      r.body);
    }
    rbt_resp_free(&r);
}

#define BOX ",\"boxes\":[[0,0,0,1,1,1]]}"

static void expect_json(const char *body, long status, const char *pointer)
{
    expect_problem("/v1/intersect", JSON, body, strlen(body), NULL, status,
                   pointer);
}

START_TEST(test_refusals)
{
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":"
                "[1,0,0,0,0,1,0,0,0,0,1,0,0,0,1,0],\"viewport\":[0,0,4,4]}" BOX,
                422, "/camera/projection");
    expect_json("{\"camera\":{\"view\":[1,0,0,0,0,0,0,0,0,0,1,0,0,0,0,1],"
                "\"projection\":" ID4 ",\"viewport\":[0,0,4,4]}" BOX,
                422, "/camera/view");
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                ",\"viewport\":[0,0,0,4]}" BOX,
                422, "/camera/viewport/2");
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                ",\"viewport\":[0,0,4,2.5]}" BOX,
                422, "/camera/viewport/3");
    expect_json("{\"camera\":{\"view\":[1,0,0],\"projection\":" ID4
                ",\"viewport\":[0,0,4,4]}" BOX,
                422, "/camera/view");
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                ",\"viewport\":[0,0,4,4,5]}" BOX,
                422, "/camera/viewport/4");
    expect_json("{\"camera\":{\"view\":" ID4 ",\"viewport\":[0,0,4,4]}" BOX,
                422, "/camera");
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                ",\"viewport\":[0,0,4,4],\"depth\":\"gl\"}" BOX,
                422, "/camera/depth");
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                ",\"viewport\":[0,0,4,4],\"fov\":1}" BOX,
                422, "/camera/fov");
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                ",\"viewport\":[0,0,4,4],\"pixels\":[[1,2],[3]]}" BOX,
                422, "/camera/pixels/1");
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                ",\"viewport\":[0,0,4,4],\"pixels\":[[1,2],[3,1e999]]}" BOX,
                422, "/camera/pixels/1/1");
    expect_json("{\"rays\":[],\"camera\":{\"view\":" ID4 ",\"projection\":"
                ID4 ",\"viewport\":[0,0,4,4]}" BOX,
                422, "/camera");
    expect_json("{\"dims\":2,\"camera\":{\"view\":" ID4 ",\"projection\":"
                ID4 ",\"viewport\":[0,0,4,4]},\"boxes\":[[0,0,1,1]]}",
                422, "/dims");
    /* Over --max-rays 5000: the grid, and a list (while it streams). */
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                ",\"viewport\":[0,0,100,51]}" BOX,
                413, "/camera/viewport");
    sbuf b;
    sbuf_init(&b);
    sbuf_add(&b, "{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                 ",\"viewport\":[0,0,4,4],\"pixels\":[");
    for (int k = 0; k < 5001; k++)
        sbuf_add(&b, k ? ",[1,1]" : "[1,1]");
    sbuf_add(&b, "]}" BOX);
    expect_problem("/v1/intersect", JSON, b.data, b.len, NULL, 413,
                   "/camera/pixels/5000");
    sbuf_free(&b);
    /* all mode: rays x max_hits over --max-results 100000. */
    expect_json("{\"mode\":\"all\",\"max_hits\":64,\"camera\":{\"view\":" ID4
                ",\"projection\":" ID4 ",\"viewport\":[0,0,50,40]}" BOX,
                413, "/camera/viewport");
    /* w = 0: an OpenGL projection with its far plane at infinity. */
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":"
                "[1,0,0,0,0,1,0,0,0,0,-1,-0.2,0,0,-1,0],\"viewport\":[0,0,4,4],"
                "\"depth\":\"minus_one_to_one\",\"pixels\":[[1,1]]}" BOX,
                422, "/camera/pixels/0");
    expect_json("{\"camera\":{\"view\":" ID4 ",\"projection\":"
                "[1,0,0,0,0,1,0,0,0,0,-1,-0.2,0,0,-1,0],\"viewport\":[0,0,4,4],"
                "\"depth\":\"minus_one_to_one\"}" BOX,
                422, "/camera");
    /* pairs with as many boxes as pixels only. */
    expect_json("{\"mode\":\"pairs\",\"camera\":{\"view\":" ID4
                ",\"projection\":" ID4 ",\"viewport\":[0,0,2,1]}" BOX,
                422, "/boxes");

    /* Binary: the same faults, the same pointers. */
    rb_camera c;
    test_camera(&c, 0, 0);
    rb_box box = {{0, 0, 0}, {1, 1, 1}};
    size_t len;
    uint8_t *bin = camera_binary(&c, RB_MODE_NEAREST, 0, &box, 1, &len);
    uint8_t *rec = bin + RBB_HEADER_SIZE_2;
    double zero = 0, nan = NAN;
    memcpy(rec + 256 + 16, &zero, 8); /* width 0 */
    expect_problem("/v1/intersect", BIN, bin, len, NULL, 422,
                   "/camera/viewport/2");
    memcpy(rec + 256 + 16, &c.viewport[2], 8);
    memcpy(rec + 8 * 3, &nan, 8);
    expect_problem("/v1/intersect", BIN, bin, len, NULL, 422,
                   "/camera/view/3");
    memcpy(rec + 8 * 3, &c.view[3], 8);
    memset(rec + 128 + 8 * 12, 0, 32); /* last projection row 0 */
    expect_problem("/v1/intersect", BIN, bin, len, NULL, 422,
                   "/camera/projection");
    memcpy(rec + 128, c.projection, 128);
    uint32_t two = 2;
    memcpy(rec + 288, &two, 4);
    expect_problem("/v1/intersect", BIN, bin, len, NULL, 422,
                   "/camera/depth");
    memset(rec + 288, 0, 4);
    double big[2] = {1000, 1000};
    memcpy(rec + 256 + 16, big, 16); /* 10^6 pixels */
    expect_problem("/v1/intersect", BIN, bin, len, NULL, 413,
                   "/camera/viewport");
    memcpy(rec + 256 + 16, &c.viewport[2], 16);
    bin[11] |= RBB_FLAG_RANGES;
    expect_problem("/v1/intersect", BIN, bin, len, NULL, 400, "");
    bin[11] = RBB_FLAG_CAMERA;
    bin[10] = 2;
    expect_problem("/v1/intersect", BIN, bin, len, NULL, 422, "/dims");
    free(bin);
    /* Version 1 has no camera flag. */
    bin = camera_binary(&c, RB_MODE_NEAREST, 0, &box, 1, &len);
    memset(bin + 64, 0, 32);
    uint16_t v1 = 1, hs = 64;
    memcpy(bin + 4, &v1, 2);
    memcpy(bin + 6, &hs, 2);
    memmove(bin + 64, bin + 96, len - 96);
    expect_problem("/v1/intersect", BIN, bin, len - 32, NULL, 400, "");
    free(bin);

    /* Render. */
    rbt_rng g = {1};
    rbt_query q;
    rbt_query_random(&q, &g, RB_MODE_NEAREST, 3, 1, 10, 0, 0);
    char id[160], path[200];
    create_scene(&srv, q.boxes, q.n_boxes, id, sizeof id);
    rbt_query_free(&q);
    snprintf(path, sizeof path, "/v1/scenes/%s/render", id);
    const char *ok = "{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                     ",\"viewport\":[0,0,4,4]}}";
    const char *pixels = "{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                         ",\"viewport\":[0,0,4,4],\"pixels\":[[1,1]]}}";
    const char *image = "{\"camera\":{\"view\":" ID4 ",\"projection\":" ID4
                        ",\"viewport\":[0,0,4,4]},\"image\":\"z\"}";
    const char *mode = "{\"mode\":\"any\",\"camera\":{\"view\":" ID4
                       ",\"projection\":" ID4 ",\"viewport\":[0,0,4,4]}}";
    expect_problem(path, JSON, pixels, strlen(pixels), NULL, 422,
                   "/camera/pixels");
    expect_problem(path, JSON, image, strlen(image), NULL, 422, "/image");
    expect_problem(path, JSON, mode, strlen(mode), NULL, 422, "/mode");
    expect_problem(path, JSON, "{}", 2, NULL, 422, "");
    expect_problem(path, JSON, ok, strlen(ok), "text/plain", 406, NULL);
    expect_problem(path, BIN, ok, strlen(ok), NULL, 415, NULL);
    expect_problem("/v1/scenes/nosuch/render", JSON, ok, strlen(ok), NULL,
                   404, NULL);
    rbt_resp r;
    rbt_http(NULL, "GET", U(&srv, path), NULL, NULL, 0, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 405);
    rbt_resp_free(&r);
    rbt_http(NULL, "POST", U(&srv, path), JSON, ok, strlen(ok), "image/*",
             NULL, &r);
    ck_assert_int_eq(r.status, 200);
    rbt_resp_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http_camera");
    TCase *t = tcase_create("camera");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_camera_equals_explicit_rays);
    tcase_add_test(t, test_camera_opencl);
    tcase_add_test(t, test_render_png);
    tcase_add_test(t, test_refusals);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
