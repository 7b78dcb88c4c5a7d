/* test_http_binary_shapes.c - the binary form's version 2 through
 * rayboxd: a mixed query (boxes, obbs in either form, xboxes, spheres,
 * planes; normals asked for or not) in every mode, sent as JSON and as a
 * binary body, each answered in JSON and in binary; all four answers must
 * equal the library's, run in-process, bit for bit (JSON: the same bytes
 * as the server's writer gives the library's arrays). Then version 1
 * bodies still get version 1 answers, and the binary form's refusals
 * carry the JSON form's status and pointer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binary_codec.h"
#include "http_util.h"
#include "json_response.h"
#include "sbuf.h"
#include "testutil.h"

#define JSON "application/json"
#define BIN RBB_MEDIA_TYPE

static rbt_server srv;
static rb_context *ctx;
static char url[512];

static const char *U(const char *path)
{
    snprintf(url, sizeof url, "%s%s", srv.base, path);
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
 * A mixed query in the test's own arrays: the oracle's input.
 */
#define MAX_RAYS 2560 /* and elements of each kind */

typedef struct mixed {
    rb_mode mode;
    int quaternion; /* obbs sent as center, half extents, quaternion */
    int normals;
    uint32_t max_hits; /* 0: not sent */
    size_t nr, nb, no, nx, ns, np;
    rb_ray rays[MAX_RAYS];
    rb_box boxes[MAX_RAYS];
    float quat[MAX_RAYS][10];
    rb_obb obbs[MAX_RAYS]; /* the library's form of quat when quaternion */
    rb_xbox xboxes[MAX_RAYS];
    rb_sphere spheres[MAX_RAYS];
    rb_plane planes[MAX_RAYS];
} mixed;

static void random_obb(rbt_rng *g, float q[10])
{
    for (int k = 0; k < 3; k++)
        q[k] = rbt_uniform(g, -5, 5);
    for (int k = 3; k < 6; k++)
        q[k] = rbt_uniform(g, 0.25f, 2);
    do {
        for (int k = 6; k < 10; k++)
            q[k] = rbt_uniform(g, -1, 1);
    } while (fabsf(q[6]) + fabsf(q[7]) + fabsf(q[8]) + fabsf(q[9]) < 0.1f);
}

/* Counts per kind; pairs gets n rays and one list of n. */
static void mixed_make(mixed *m, rbt_rng *g, rb_mode mode, int quaternion,
                       int normals, size_t nr, const size_t counts[5])
{
    memset(m, 0, sizeof *m);
    m->mode = mode;
    m->quaternion = quaternion;
    m->normals = normals;
    m->max_hits = mode == RB_MODE_ALL ? 3 : 0;
    m->nr = nr;
    m->nb = counts[0];
    m->no = counts[1];
    m->nx = counts[2];
    m->ns = counts[3];
    m->np = counts[4];
    for (size_t i = 0; i < nr; i++) {
        rb_ray *r = &m->rays[i];
        for (int k = 0; k < 3; k++) {
            r->origin[k] = rbt_uniform(g, -9, 9);
            r->dir[k] = rbt_uniform(g, -3, 3) - r->origin[k];
        }
        r->tmin = 0;
        r->tmax = INFINITY;
    }
    for (size_t i = 0; i < m->nb; i++)
        for (int k = 0; k < 3; k++) {
            m->boxes[i].min[k] = rbt_uniform(g, -6, 5);
            m->boxes[i].max[k] = m->boxes[i].min[k] + rbt_uniform(g, 0, 2);
        }
    for (size_t i = 0; i < m->no; i++) {
        random_obb(g, m->quat[i]);
        ck_assert_int_eq(rb_obb_from_quaternion(m->quat[i], m->quat[i] + 3,
                                                m->quat[i] + 6, &m->obbs[i]),
                         RB_OK);
    }
    for (size_t i = 0; i < m->nx; i++) {
        rb_xbox *x = &m->xboxes[i];
        for (int k = 0; k < 3; k++) {
            x->min[k] = rbt_uniform(g, -1, 0);
            x->max[k] = rbt_uniform(g, 0, 1);
            for (int j = 0; j < 3; j++)
                x->a[k][j] = (j == k ? 1.5f : 0.0f) + rbt_uniform(g, -0.3f,
                                                                 0.3f);
            x->a[k][3] = rbt_uniform(g, -4, 4);
        }
    }
    for (size_t i = 0; i < m->ns; i++) {
        for (int k = 0; k < 3; k++)
            m->spheres[i].center[k] = rbt_uniform(g, -5, 5);
        m->spheres[i].radius = i == 1 ? 0 : rbt_uniform(g, 0.5f, 2.5f);
    }
    for (size_t i = 0; i < m->np; i++) {
        m->planes[i] = (rb_plane){{rbt_uniform(g, -0.2f, 0.2f), 1,
                                   rbt_uniform(g, -0.2f, 0.2f)},
                                  -7.0f - (float)i};
    }
}

static void json_floats(sbuf *b, const float *v, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        sbuf_add(b, k ? "," : "[");
        sbuf_json_float(b, v[k]);
    }
    sbuf_add(b, "]");
}

static void json_list(sbuf *b, const char *name, const void *recs,
                      size_t n, size_t stride, size_t width)
{
    if (!n)
        return;
    sbuf_printf(b, ",\"%s\":[", name);
    for (size_t i = 0; i < n; i++) {
        if (i)
            sbuf_add(b, ",");
        json_floats(b, (const float *)(const void *)((const char *)recs +
                                                     i * stride),
                    width);
    }
    sbuf_add(b, "]");
}

static char *mixed_json(const mixed *m, size_t *len)
{
    sbuf b;
    sbuf_init(&b);
    sbuf_printf(&b, "{\"mode\":\"%s\"", rb_mode_name(m->mode));
    if (m->max_hits)
        sbuf_printf(&b, ",\"max_hits\":%u", m->max_hits);
    if (m->normals)
        sbuf_add(&b, ",\"outputs\":[\"normal\"]");
    sbuf_add(&b, ",\"rays\":[");
    for (size_t i = 0; i < m->nr; i++) {
        if (i)
            sbuf_add(&b, ",");
        json_floats(&b, m->rays[i].origin, 6);
    }
    sbuf_add(&b, "]");
    json_list(&b, "boxes", m->boxes, m->nb, sizeof(rb_box), 6);
    if (m->quaternion)
        json_list(&b, "obbs", m->quat, m->no, sizeof m->quat[0], 10);
    else
        json_list(&b, "obbs", m->obbs, m->no, sizeof(rb_obb), 15);
    json_list(&b, "xboxes", m->xboxes, m->nx, sizeof(rb_xbox), 18);
    json_list(&b, "spheres", m->spheres, m->ns, sizeof(rb_sphere), 4);
    json_list(&b, "planes", m->planes, m->np, sizeof(rb_plane), 4);
    sbuf_add(&b, "}");
    char *out = sbuf_take(&b, len);
    ck_assert_ptr_nonnull(out);
    return out;
}

static uint8_t *put(uint8_t *p, const void *src, size_t n)
{
    if (n)
        memcpy(p, src, n);
    return p + n;
}

static void *mixed_binary(const mixed *m, size_t *len)
{
    unsigned flags = (m->normals ? RBB_FLAG_NORMALS : 0) |
                     (m->quaternion ? RBB_FLAG_OBB_QUATERNION : 0);
    size_t ob = rbb_shape_record_bytes(RB_KIND_OBB, flags);
    *len = RBB_HEADER_SIZE_2 + m->nr * 24 + m->nb * 24 + m->no * ob +
           m->nx * sizeof(rb_xbox) + m->ns * sizeof(rb_sphere) +
           m->np * sizeof(rb_plane);
    uint8_t *out = malloc(*len);
    ck_assert_ptr_nonnull(out);
    rbb_header h = {.version = RBB_VERSION_2,
                    .header_size = RBB_HEADER_SIZE_2,
                    .kind = RBB_KIND_INTERSECT, .mode = (uint8_t)m->mode,
                    .dims = 3, .flags = (uint8_t)flags,
                    .max_hits = m->max_hits, .n_rays = m->nr,
                    .n_boxes = m->nb, .tmin = 0, .tmax = INFINITY,
                    .n_obbs = m->no, .n_xboxes = m->nx, .n_spheres = m->ns,
                    .n_planes = m->np};
    uint8_t *p = out + rbb_header_encode(&h, out);
    for (size_t i = 0; i < m->nr; i++)
        p = put(p, &m->rays[i], 24);
    p = put(p, m->boxes, m->nb * sizeof(rb_box));
    for (size_t i = 0; i < m->no; i++)
        p = put(p, m->quaternion ? (const void *)m->quat[i]
                                 : (const void *)&m->obbs[i],
                ob);
    p = put(p, m->xboxes, m->nx * sizeof(rb_xbox));
    p = put(p, m->spheres, m->ns * sizeof(rb_sphere));
    p = put(p, m->planes, m->np * sizeof(rb_plane));
    ck_assert_uint_eq((size_t)(p - out), *len);
    return out;
}

/* ------------------------------------------------------------------------
 * The oracle: the library in-process, its JSON and its binary answer.
 */
typedef struct expect {
    rb_results res;
    uint32_t max_hits;
    int kinds;       /* the answer carries kinds */
    char *json;      /* up to ",\"meta\":" */
    size_t json_len;
    uint64_t entries; /* all: list entries after compaction */
} expect;

static void expect_run(const mixed *m, expect *e)
{
    memset(e, 0, sizeof *e);
    size_t n = m->nr ? m->nr : 1;
    e->max_hits = m->max_hits ? m->max_hits : 64;
    int hits = m->mode == RB_MODE_PAIRS || m->mode == RB_MODE_NEAREST;
    e->kinds = hits && (m->no || m->nx || m->ns || m->np);
    rb_results *r = &e->res;
    r->capacity = m->nr;
    r->hits = calloc(n, sizeof *r->hits);
    r->any = calloc(n, 1);
    r->counts = calloc(n, sizeof *r->counts);
    r->list = calloc(n * e->max_hits, sizeof *r->list);
    if (e->kinds)
        r->kinds = calloc(n, 1);
    if (hits && m->normals)
        r->normals = calloc(3 * n, sizeof *r->normals);
    rb_query q = {.mode = m->mode, .dims = 3, .rays = m->rays,
                  .n_rays = m->nr, .boxes = m->boxes, .n_boxes = m->nb,
                  .max_hits = e->max_hits,
                  .shapes = {.obbs = m->obbs, .n_obbs = m->no,
                             .xboxes = m->xboxes, .n_xboxes = m->nx,
                             .spheres = m->spheres, .n_spheres = m->ns,
                             .planes = m->planes, .n_planes = m->np},
                  .outputs = m->normals ? RB_OUTPUT_NORMAL : 0};
    ck_assert_msg(rb_intersect(ctx, &q, r) == RB_OK, "in-process: %s",
                  rb_context_error(ctx)->message);
    rbj_response resp = {.mode = m->mode, .n_rays = m->nr,
                         .max_hits = e->max_hits, .results = r};
    rbj_meta_from_run(&resp.meta, &r->info);
    rbj_writer w;
    rbj_writer_init(&w, &resp);
    sbuf b;
    sbuf_init(&b);
    char buf[4096];
    size_t k;
    while ((k = rbj_writer_fill(&w, buf, sizeof buf)) > 0)
        sbuf_addn(&b, buf, k);
    e->json = sbuf_take(&b, &e->json_len);
    ck_assert_ptr_nonnull(e->json);
    const char *meta = strstr(e->json, ",\"meta\":");
    ck_assert_ptr_nonnull(meta);
    e->json_len = (size_t)(meta - e->json);
    if (m->mode == RB_MODE_ALL)
        e->entries = rbb_compact_lists(r, m->nr, e->max_hits);
}

static void expect_free(expect *e)
{
    free(e->json);
    free(e->res.hits);
    free(e->res.any);
    free(e->res.counts);
    free(e->res.list);
    free(e->res.kinds);
    free(e->res.normals);
}

static void check_json(const expect *e, const rbt_resp *r, const char *what)
{
    ck_assert_msg(r->status == 200, "%s: %ld %s", what, r->status, r->body);
    ck_assert_msg(r->len >= e->json_len &&
                      memcmp(r->body, e->json, e->json_len) == 0 &&
                      strncmp(r->body + e->json_len, ",\"meta\":", 8) == 0,
                  "%s: JSON answer\n  %.300s\nexpected\n  %.300s", what,
                  r->body, e->json);
}

static void check_part(const uint8_t **at, const uint8_t *end,
                       const void *want, size_t bytes, const char *what,
                       const char *part)
{
    ck_assert_msg((size_t)(end - *at) >= bytes, "%s: %s cut short", what,
                  part);
    ck_assert_msg(bytes == 0 || memcmp(*at, want, bytes) == 0,
                  "%s: %s differ", what, part);
    *at += bytes;
}

static void check_binary(const mixed *m, const expect *e, const rbt_resp *r,
                         const char *what)
{
    ck_assert_msg(r->status == 200, "%s: %ld %s", what, r->status, r->body);
    ck_assert_msg(r->len >= RBB_HEADER_SIZE_2, "%s: %zu bytes", what,
                  r->len);
    rbb_header h;
    rbb_header_decode_v2((const uint8_t *)r->body, &h);
    int hits = m->mode == RB_MODE_PAIRS || m->mode == RB_MODE_NEAREST;
    unsigned want_flags = (e->kinds ? RBB_FLAG_KINDS : 0) |
                          (hits && m->normals ? RBB_FLAG_HAS_NORMALS : 0);
    ck_assert_msg(h.magic_ok && h.version == 2 && h.header_size == 96 &&
                      h.kind == RBB_KIND_RESULT && h.mode == m->mode &&
                      h.dims == 3 && h.n_rays == m->nr &&
                      (h.flags & ~RBB_FLAG_FELL_BACK) == want_flags &&
                      h.n_obbs == 0 && h.n_xboxes == 0 && h.n_spheres == 0 &&
                      h.n_planes == 0,
                  "%s: header v%u size %u flags 0x%x", what, h.version,
                  h.header_size, h.flags);
    const uint8_t *at = (const uint8_t *)r->body + 96,
                  *end = (const uint8_t *)r->body + r->len;
    size_t n = m->nr;
    const rb_results *x = &e->res;
    switch (m->mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        check_part(&at, end, x->hits, n * sizeof(rb_hit), what, "hits");
        if (e->kinds)
            check_part(&at, end, x->kinds, n, what, "kinds");
        if (m->normals)
            check_part(&at, end, x->normals, 12 * n, what, "normals");
        break;
    case RB_MODE_ANY:
        check_part(&at, end, x->any, n, what, "any");
        break;
    case RB_MODE_COUNT:
        check_part(&at, end, x->counts, 4 * n, what, "counts");
        break;
    case RB_MODE_ALL:
        ck_assert_uint_eq(h.max_hits, e->max_hits);
        ck_assert_uint_eq(h.n_boxes, e->entries);
        check_part(&at, end, x->counts, 4 * n, what, "counts");
        check_part(&at, end, x->list, e->entries * sizeof(rb_list_hit),
                   what, "lists");
        break;
    }
    ck_assert_msg(at == end, "%s: %zu bytes after the arrays", what,
                  (size_t)(end - at));
}

/* The four exchanges of one query. */
static void run_mixed(const mixed *m, const char *what)
{
    expect e;
    expect_run(m, &e);
    size_t jl, bl;
    char *jb = mixed_json(m, &jl);
    void *bb = mixed_binary(m, &bl);
    char w[128];
    rbt_resp r;
    static const struct {
        int in_binary, out_binary;
        const char *name;
    } ways[] = {{0, 0, "JSON->JSON"},
                {0, 1, "JSON->binary"},
                {1, 1, "binary->binary"},
                {1, 0, "binary->JSON"}};
    for (int k = 0; k < 4; k++) {
        snprintf(w, sizeof w, "%s %s", what, ways[k].name);
        rbt_http(NULL, "POST", U("/v1/intersect"),
                 ways[k].in_binary ? BIN : JSON,
                 ways[k].in_binary ? bb : (const void *)jb,
                 ways[k].in_binary ? bl : jl,
                 ways[k].out_binary ? BIN : JSON, NULL, &r);
        if (ways[k].out_binary)
            check_binary(m, &e, &r, w);
        else
            check_json(&e, &r, w);
        rbt_resp_free(&r);
    }
    free(jb);
    free(bb);
    expect_free(&e);
}

START_TEST(test_mixed_every_mode)
{
    rbt_rng g = {(uint64_t)_i + 7};
    static const size_t every[5] = {4, 3, 2, 4, 1};
    mixed *m = malloc(sizeof *m);
    ck_assert_ptr_nonnull(m);
    char what[96];
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++)
        for (int quat = 0; quat < 2; quat++) {
            int normals = quat == (_i & 1);
            mixed_make(m, &g, (rb_mode)mode, quat, normals, 48, every);
            snprintf(what, sizeof what, "%s quaternion %d normals %d",
                     rb_mode_name(mode), quat, normals);
            run_mixed(m, what);
        }
    /* pairs: one list of each kind in turn, as long as the rays. */
    for (int kind = 0; kind < 5; kind++) {
        size_t counts[5] = {0};
        counts[kind] = 40;
        mixed_make(m, &g, RB_MODE_PAIRS, kind == 1 && (_i & 1), 1, 40,
                   counts);
        snprintf(what, sizeof what, "pairs of %s",
                 rb_kind_name(kind));
        run_mixed(m, what);
    }
    /* Boxes alone with normals: version 2 for the normals, no kinds. */
    size_t boxes_only[5] = {6, 0, 0, 0, 0};
    mixed_make(m, &g, RB_MODE_NEAREST, 0, 1, 30, boxes_only);
    run_mixed(m, "boxes with normals");
    /* No rays at all. */
    mixed_make(m, &g, RB_MODE_NEAREST, 1, 1, 0, every);
    run_mixed(m, "no rays");
    free(m);
}
END_TEST

/* Answers over 64 KiB go out from the library's arrays (jobs.c): the
 * hits uncopied, the 96-byte header, kinds and normals copied. */
START_TEST(test_large_answers)
{
    rbt_rng g = {5};
    mixed *m = malloc(sizeof *m);
    ck_assert_ptr_nonnull(m);
    static const size_t every[5] = {4, 3, 2, 4, 1};
    mixed_make(m, &g, RB_MODE_NEAREST, 1, 1, 2500, every);
    run_mixed(m, "large nearest");
    static const size_t spheres[5] = {0, 0, 0, 2500, 0};
    mixed_make(m, &g, RB_MODE_PAIRS, 0, 1, 2500, spheres);
    run_mixed(m, "large pairs of spheres");
    mixed_make(m, &g, RB_MODE_PAIRS, 0, 0, 2500, spheres);
    run_mixed(m, "large pairs without normals");
    mixed_make(m, &g, RB_MODE_ALL, 0, 0, 2500, every);
    run_mixed(m, "large all");
    free(m);
}
END_TEST

/* The example client (scripts/raybox_client.py) sends these requests in
 * version 2, decodes kinds and normals, and its answers agree with the
 * JSON ones. */
START_TEST(test_python_client)
{
    ck_assert_msg(system("python3 -c 'import struct, http.client' "
                         ">/dev/null 2>&1") == 0,
                  "python3 is needed (make deps installs it)");
    char dir[] = "/tmp/raybox-client-v2-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    rbt_rng g = {17};
    mixed *m = malloc(sizeof *m);
    ck_assert_ptr_nonnull(m);
    static const size_t every[5] = {3, 3, 2, 3, 1};
    static const size_t obbs[5] = {0, 20, 0, 0, 0};
    for (int k = 0; k < 7; k++) {
        if (k < 5)
            mixed_make(m, &g, (rb_mode)(k == 0 ? RB_MODE_PAIRS : k), k & 1,
                       k < 2, 20, k == 0 ? obbs : every);
        else /* pairs of quaternion obbs; nearest without normals */
            mixed_make(m, &g, k == 5 ? RB_MODE_PAIRS : RB_MODE_NEAREST,
                       k == 5, k == 5, 20, k == 5 ? obbs : every);
        size_t len;
        char *body = mixed_json(m, &len);
        char path[128], err[128], cmd[640];
        snprintf(path, sizeof path, "%s/req.json", dir);
        snprintf(err, sizeof err, "%s/err", dir);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fwrite(body, 1, len, f);
        fclose(f);
        snprintf(cmd, sizeof cmd,
                 "python3 '%s/scripts/raybox_client.py' --url %s --compare "
                 "'%s' >/dev/null 2>'%s'",
                 RAYBOX_SOURCE_DIR, srv.base, path, err);
        int st = system(cmd);
        char *text = rbt_read_file(err, NULL);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "case %d: %s",
                      k, text ? text : "");
        ck_assert_ptr_nonnull(strstr(text, "agree"));
        free(text);
        unlink(err);
        unlink(path);
        free(body);
    }
    rmdir(dir);
    free(m);
}
END_TEST

/* Version 1: a box body gets a version 1 answer, as before, and a JSON
 * body without other kinds or outputs asked in binary does too. */
START_TEST(test_version_1_answers)
{
    static const uint8_t body[136] = {
        0x52, 0x42, 0x4f, 0x58, 0x01, 0x00, 0x40, 0x00, 0x01, 0x01, 0x03,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x7f, [64 + 14] = 0x80,
        [64 + 15] = 0x3f, [64 + 30] = 0xa0, [64 + 31] = 0x40,
        [64 + 38] = 0x80, [64 + 39] = 0x3f, [112 + 2] = 0x80,
        [112 + 3] = 0x3f, [112 + 6] = 0x80, [112 + 7] = 0xbf,
        [112 + 10] = 0x80, [112 + 11] = 0xbf, [112 + 15] = 0x40,
        [112 + 18] = 0x80, [112 + 19] = 0x3f, [112 + 22] = 0x80,
        [112 + 23] = 0x3f};
    static const uint8_t hits[32] = {
        0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x80, 0x7f, 0x00, 0x00,
        0x80, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00};
    const char *json = "{\"rays\":[[0,0,0,1,0,0],[0,5,0,1,0,0]],"
                       "\"boxes\":[[1,-1,-1,2,1,1]]}";
    for (int k = 0; k < 2; k++) {
        rbt_resp r;
        rbt_http(NULL, "POST", U("/v1/intersect"), k ? JSON : BIN,
                 k ? (const void *)json : body, k ? strlen(json) : sizeof body,
                 BIN, NULL, &r);
        ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
        ck_assert_uint_eq(r.len, 64 + 32);
        const uint8_t *b = (const uint8_t *)r.body;
        ck_assert(memcmp(b, "RBOX\x01\x00\x40\x00\x81\x01\x03", 11) == 0);
        ck_assert_int_eq(b[11] & ~RBB_FLAG_FELL_BACK, 0);
        ck_assert(memcmp(b + 64, hits, 32) == 0);
        rbt_resp_free(&r);
    }
}
END_TEST

/* Refusals: the binary body gets the status and pointer that the same
 * request in JSON gets. */
static void expect_pointer(const rbt_resp *r, long status,
                           const char *pointer, const char *what)
{
    char want[96];
    ck_assert_msg(r->status == status, "%s: %ld, expected %ld: %s", what,
                  r->status, status, r->body);
    snprintf(want, sizeof want, "\"pointer\":\"%s\"", pointer);
    ck_assert_msg(strstr(r->body, want) != NULL, "%s: %s", what, r->body);
}

static void both_forms(const mixed *m, long status, const char *pointer,
                       const char *what)
{
    size_t jl, bl;
    char *jb = mixed_json(m, &jl);
    void *bb = mixed_binary(m, &bl);
    char w[128];
    rbt_resp r;
    rbt_http(NULL, "POST", U("/v1/intersect"), JSON, jb, jl, JSON, NULL, &r);
    snprintf(w, sizeof w, "%s (JSON)", what);
    expect_pointer(&r, status, pointer, w);
    rbt_resp_free(&r);
    rbt_http(NULL, "POST", U("/v1/intersect"), BIN, bb, bl, JSON, NULL, &r);
    snprintf(w, sizeof w, "%s (binary)", what);
    expect_pointer(&r, status, pointer, w);
    rbt_resp_free(&r);
    free(jb);
    free(bb);
}

START_TEST(test_refusals)
{
    rbt_rng g = {99};
    mixed *m = malloc(sizeof *m);
    ck_assert_ptr_nonnull(m);
    static const size_t some[5] = {2, 3, 1, 2, 1};
    /* A zero quaternion; a negative radius and a zero plane normal are
     * the library's verdicts. */
    mixed_make(m, &g, RB_MODE_NEAREST, 1, 0, 4, some);
    memset(m->quat[2] + 6, 0, 4 * sizeof(float));
    both_forms(m, 422, "/obbs/2/6", "zero quaternion");
    mixed_make(m, &g, RB_MODE_NEAREST, 0, 1, 4, some);
    m->spheres[1].radius = -1;
    both_forms(m, 422, "/spheres/1/3", "negative radius");
    mixed_make(m, &g, RB_MODE_ANY, 0, 0, 4, some);
    m->planes[0].normal[0] = m->planes[0].normal[1] = 0;
    m->planes[0].normal[2] = 0;
    both_forms(m, 422, "/planes/0/0", "zero normal");
    mixed_make(m, &g, RB_MODE_COUNT, 1, 0, 4, some);
    m->obbs[0].half[1] = -0.5f;
    m->quat[0][4] = -0.5f;
    both_forms(m, 422, "/obbs/0/4", "negative extent");
    /* pairs: two lists; a list shorter than the rays. */
    static const size_t two[5] = {3, 0, 0, 3, 0};
    mixed_make(m, &g, RB_MODE_PAIRS, 0, 0, 3, two);
    both_forms(m, 422, "/mode", "pairs with two lists");
    static const size_t short_list[5] = {0, 0, 2, 0, 0};
    mixed_make(m, &g, RB_MODE_PAIRS, 0, 0, 3, short_list);
    both_forms(m, 422, "/xboxes", "pairs, xboxes short");
    /* --max-boxes 3000 covers every kind together. */
    static const size_t many[5] = {1000, 1000, 0, 900, 101};
    mixed *big = malloc(sizeof *big);
    ck_assert_ptr_nonnull(big);
    static const size_t none[5] = {0};
    mixed_make(big, &g, RB_MODE_ANY, 0, 0, 1, none);
    big->nb = many[0];
    big->no = many[1];
    big->ns = many[3];
    big->np = many[4];
    size_t bl;
    void *bb = mixed_binary(big, &bl);
    rbt_resp r;
    rbt_http(NULL, "POST", U("/v1/intersect"), BIN, bb, bl, JSON, NULL, &r);
    expect_pointer(&r, 413, "/planes", "elements over --max-boxes");
    rbt_resp_free(&r);
    free(bb);
    free(big);

    /* 2D takes boxes only; a scene query takes no elements. */
    mixed_make(m, &g, RB_MODE_NEAREST, 0, 0, 2, some);
    bb = mixed_binary(m, &bl);
    ((uint8_t *)bb)[10] = 2;
    rbt_http(NULL, "POST", U("/v1/intersect"), BIN, bb, bl, JSON, NULL, &r);
    expect_pointer(&r, 422, "/obbs", "2D obbs");
    rbt_resp_free(&r);
    free(bb);
    const char *scene = "{\"boxes\":[[0,0,0,1,1,1]]}";
    rbt_http(NULL, "POST", U("/v1/scenes"), JSON, scene, strlen(scene), JSON,
             NULL, &r);
    ck_assert_int_eq(r.status, 201);
    char id[80] = "", path[160];
    const char *at = strstr(r.body, "\"id\":\"");
    ck_assert_ptr_nonnull(at);
    sscanf(at + 6, "%79[^\"]", id);
    rbt_resp_free(&r);
    static const size_t spheres_only[5] = {0, 0, 0, 2, 0};
    mixed_make(m, &g, RB_MODE_NEAREST, 0, 1, 2, spheres_only);
    bb = mixed_binary(m, &bl);
    snprintf(path, sizeof path, "/v1/scenes/%s/intersect", id);
    rbt_http(NULL, "POST", U(path), BIN, bb, bl, JSON, NULL, &r);
    expect_pointer(&r, 422, "/spheres", "spheres on a scene route");
    rbt_resp_free(&r);
    /* Normals on the scene route are fine: boxes have normals too. */
    static const size_t nothing[5] = {0};
    mixed_make(m, &g, RB_MODE_NEAREST, 0, 1, 2, nothing);
    free(bb);
    bb = mixed_binary(m, &bl);
    rbt_http(NULL, "POST", U(path), BIN, bb, bl, BIN, NULL, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    ck_assert_uint_eq(r.len, 96 + 2 * 16 + 2 * 12);
    ck_assert_int_eq(((const uint8_t *)r.body)[11] & ~RBB_FLAG_FELL_BACK,
                     RBB_FLAG_SCENE_VERSION | RBB_FLAG_HAS_NORMALS);
    rbt_resp_free(&r);
    /* The announced size must be the Content-Length. */
    rbt_http(NULL, "POST", U("/v1/intersect"), BIN, bb, bl - 4, JSON, NULL,
             &r);
    expect_pointer(&r, 400, "", "Content-Length short of the header's size");
    rbt_resp_free(&r);
    free(bb);
    free(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http_binary_shapes");
    TCase *tc = tcase_create("v2");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_mixed_every_mode, 0, 2);
    tcase_add_test(tc, test_large_answers);
    tcase_add_test(tc, test_python_client);
    tcase_add_test(tc, test_version_1_answers);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
