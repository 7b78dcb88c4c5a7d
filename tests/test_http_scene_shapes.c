/* test_http_scene_shapes.c - scenes of every kind through rayboxd (SPEC
 * section 7, scenes): POST /v1/scenes with obbs (both forms), xboxes,
 * spheres and planes; PATCH "set" entries [id, ...element] of each kind
 * and "append" as an object of lists (and as a bare list of boxes); GET
 * with per-kind counts; queries on the scene in every mode with "kind"
 * and "normal". Every answer must equal the library's, run in-process on
 * a mirror scene changed the same way, byte for byte up to "meta". Then
 * the 422s: an entry whose arity is not its id's kind, an invalid value
 * of each kind, an id out of range, a zero quaternion, a bad element in
 * append's object form, an unknown key there, shapes in a 2D scene; a
 * refused PATCH changes nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_util.h"
#include "json_response.h"
#include "sbuf.h"
#include "testutil.h"

#define JSON "application/json"

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
    static const char *const args[] = {"--workers", "2", "--threads", "2",
                                       NULL};
    rbt_fixture_start(&srv, args, &ctx);
}

static void teardown(void)
{
    rbt_fixture_stop(&srv, ctx);
}

/* ---- elements and their JSON */

/* ",x,y,z": numbers after something. */
static void json_more(sbuf *b, const float *v, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        sbuf_add(b, ",");
        sbuf_json_float(b, v[k]);
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

/* A list of n records of `width` floats each, `stride` bytes apart. */
static void json_list(sbuf *b, const char *name, const void *recs, size_t n,
                      size_t stride, size_t width, int *first)
{
    if (!n)
        return;
    sbuf_printf(b, "%s\"%s\":[", *first ? "" : ",", name);
    *first = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            sbuf_add(b, ",");
        json_floats(b, (const float *)(const void *)((const char *)recs +
                                                     i * stride),
                    width);
    }
    sbuf_add(b, "]");
}

#define MAXN 64

/* One batch of elements of every kind: a create's or an append's. */
typedef struct batch {
    size_t nb, no, nx, ns, np;
    rb_box boxes[MAXN];
    float quat[MAXN][10]; /* obbs as sent, when quaternion */
    rb_obb obbs[MAXN];    /* the library's form */
    rb_xbox xboxes[MAXN];
    rb_sphere spheres[MAXN];
    rb_plane planes[MAXN];
    int quaternion;
} batch;

static void random_box(rbt_rng *g, rb_box *b)
{
    for (int k = 0; k < 3; k++) {
        b->min[k] = rbt_uniform(g, -6, 5);
        b->max[k] = b->min[k] + rbt_uniform(g, 0, 2);
    }
}

static void random_quat(rbt_rng *g, float q[10])
{
    for (int k = 0; k < 3; k++)
        q[k] = rbt_uniform(g, -5, 5);
    for (int k = 3; k < 6; k++)
        q[k] = rbt_uniform(g, 0.25f, 2);
    for (int k = 6; k < 10; k++)
        q[k] = rbt_uniform(g, -1, 1);
    q[6] += 0.2f;
}

static void random_xbox(rbt_rng *g, rb_xbox *x)
{
    for (int k = 0; k < 3; k++) {
        x->min[k] = rbt_uniform(g, -1, 0);
        x->max[k] = rbt_uniform(g, 0, 1);
        for (int j = 0; j < 3; j++)
            x->a[k][j] = (j == k ? 1.5f : 0.0f) + rbt_uniform(g, -0.3f, 0.3f);
        x->a[k][3] = rbt_uniform(g, -4, 4);
    }
}

static void random_sphere(rbt_rng *g, rb_sphere *s)
{
    for (int k = 0; k < 3; k++)
        s->center[k] = rbt_uniform(g, -5, 5);
    s->radius = rbt_uniform(g, 0.5f, 2.5f);
}

static void random_plane(rbt_rng *g, rb_plane *p)
{
    *p = (rb_plane){{rbt_uniform(g, -0.2f, 0.2f), 1,
                     rbt_uniform(g, -0.2f, 0.2f)},
                    rbt_uniform(g, -9, -7)};
}

static void batch_make(batch *b, rbt_rng *g, const size_t n[5], int quat)
{
    memset(b, 0, sizeof *b);
    b->nb = n[0];
    b->no = n[1];
    b->nx = n[2];
    b->ns = n[3];
    b->np = n[4];
    b->quaternion = quat;
    for (size_t i = 0; i < b->nb; i++)
        random_box(g, &b->boxes[i]);
    for (size_t i = 0; i < b->no; i++) {
        random_quat(g, b->quat[i]);
        ck_assert_int_eq(rb_obb_from_quaternion(b->quat[i], b->quat[i] + 3,
                                                b->quat[i] + 6, &b->obbs[i]),
                         RB_OK);
    }
    for (size_t i = 0; i < b->nx; i++)
        random_xbox(g, &b->xboxes[i]);
    for (size_t i = 0; i < b->ns; i++)
        random_sphere(g, &b->spheres[i]);
    for (size_t i = 0; i < b->np; i++)
        random_plane(g, &b->planes[i]);
}

static rb_shapes batch_shapes(const batch *b)
{
    return (rb_shapes){.obbs = b->obbs, .n_obbs = b->no,
                       .xboxes = b->xboxes, .n_xboxes = b->nx,
                       .spheres = b->spheres, .n_spheres = b->ns,
                       .planes = b->planes, .n_planes = b->np};
}

/* The lists of a batch as object members, without braces. */
static void batch_members(sbuf *s, const batch *b, int *first)
{
    json_list(s, "boxes", b->boxes, b->nb, sizeof(rb_box), 6, first);
    if (b->quaternion)
        json_list(s, "obbs", b->quat, b->no, sizeof b->quat[0], 10, first);
    else
        json_list(s, "obbs", b->obbs, b->no, sizeof(rb_obb), 15, first);
    json_list(s, "xboxes", b->xboxes, b->nx, sizeof(rb_xbox), 18, first);
    json_list(s, "spheres", b->spheres, b->ns, sizeof(rb_sphere), 4, first);
    json_list(s, "planes", b->planes, b->np, sizeof(rb_plane), 4, first);
}

static char *take(sbuf *s)
{
    size_t len;
    char *out = sbuf_take(s, &len);
    ck_assert_ptr_nonnull(out);
    return out;
}

/* ---- requests */

static long request(const char *method, const char *path, const char *body,
                    rbt_resp *r)
{
    memset(r, 0, sizeof *r);
    rbt_http(NULL, method, U(path), JSON, body, body ? strlen(body) : 0,
             NULL, NULL, r);
    return r->status;
}

/* Creates a scene from the body; its id into id. */
static void create(const char *body, char id[64], rbt_resp *r)
{
    ck_assert_msg(request("POST", "/v1/scenes", body, r) == 201, "%ld %s",
                  r->status, r->body);
    const char *at = strstr(r->body, "\"id\":\"");
    ck_assert_ptr_nonnull(at);
    at += 6;
    size_t n = strcspn(at, "\"");
    ck_assert(n < 64);
    memcpy(id, at, n);
    id[n] = '\0';
}

static void expect_problem(const rbt_resp *r, long status,
                           const char *pointer, const char *what)
{
    ck_assert_msg(r->status == status, "%s: %ld, want %ld: %s", what,
                  r->status, status, r->body);
    if (!pointer)
        return;
    char want[200];
    snprintf(want, sizeof want, "\"pointer\":\"%s\"", pointer);
    ck_assert_msg(strstr(r->body, want) != NULL, "%s: want %s in %s", what,
                  want, r->body);
}

/* ---- queries: rayboxd against the mirror */

#define NR 300

static void make_rays(rbt_rng *g, rb_ray *rays, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rb_ray *r = &rays[i];
        for (int k = 0; k < 3; k++) {
            r->origin[k] = rbt_uniform(g, -9, 9);
            r->dir[k] = rbt_uniform(g, -3, 3) - r->origin[k];
        }
        r->tmin = 0;
        r->tmax = INFINITY;
    }
}

/* The library's JSON answer for the mirror, up to ",\"meta\":". */
static char *expected(const rb_scene *mirror, uint64_t version, rb_mode mode,
                      int normals, const rb_ray *rays, size_t n,
                      size_t *len)
{
    rb_scene_stats st;
    rb_scene_stats_get(mirror, &st);
    uint32_t max_hits = 4;
    rb_results r = {.capacity = n};
    r.hits = calloc(n + 1, sizeof *r.hits);
    r.any = calloc(n + 1, 1);
    r.counts = calloc(n + 1, sizeof *r.counts);
    r.list = calloc((n + 1) * max_hits, sizeof *r.list);
    if (mode == RB_MODE_NEAREST && st.elements != st.boxes)
        r.kinds = calloc(n + 1, 1);
    if (mode == RB_MODE_NEAREST && normals)
        r.normals = calloc(3 * (n + 1), sizeof *r.normals);
    rb_query q = {.mode = mode, .dims = 3, .rays = rays, .n_rays = n,
                  .scene = mirror, .max_hits = max_hits,
                  .outputs = normals ? RB_OUTPUT_NORMAL : 0};
    ck_assert_msg(rb_intersect(ctx, &q, &r) == RB_OK, "in-process: %s",
                  rb_context_error(ctx)->message);
    rbj_response resp = {.mode = mode, .n_rays = n, .max_hits = max_hits,
                         .results = &r, .has_scene_version = 1,
                         .scene_version = version};
    rbj_meta_from_run(&resp.meta, &r.info);
    rbj_writer w;
    rbj_writer_init(&w, &resp);
    sbuf b;
    sbuf_init(&b);
    char buf[4096];
    size_t k;
    while ((k = rbj_writer_fill(&w, buf, sizeof buf)) > 0)
        sbuf_addn(&b, buf, k);
    char *out = sbuf_take(&b, len);
    ck_assert_ptr_nonnull(out);
    const char *meta = strstr(out, ",\"meta\":");
    ck_assert_ptr_nonnull(meta);
    *len = (size_t)(meta - out);
    free(r.hits);
    free(r.any);
    free(r.counts);
    free(r.list);
    free(r.kinds);
    free(r.normals);
    return out;
}

/* Every mode through the server equals the mirror. */
static void compare_queries(const char *id, const rb_scene *mirror,
                            uint64_t version, rbt_rng *g, const char *what)
{
    rb_ray rays[NR];
    make_rays(g, rays, NR);
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_NEAREST,
                                    RB_MODE_ANY, RB_MODE_COUNT, RB_MODE_ALL};
    for (int m = 0; m < 5; m++) {
        int normals = m == 1;
        sbuf s;
        sbuf_init(&s);
        sbuf_printf(&s, "{\"mode\":\"%s\",\"max_hits\":4%s,\"rays\":[",
                    rb_mode_name(modes[m]),
                    normals ? ",\"outputs\":[\"normal\"]" : "");
        for (size_t i = 0; i < NR; i++) {
            if (i)
                sbuf_add(&s, ",");
            json_floats(&s, rays[i].origin, 6);
        }
        sbuf_add(&s, "]}");
        char *body = take(&s);
        char path[128];
        snprintf(path, sizeof path, "/v1/scenes/%s/intersect", id);
        rbt_resp r;
        request("POST", path, body, &r);
        size_t len;
        char *want = expected(mirror, version, modes[m], normals, rays, NR,
                              &len);
        ck_assert_msg(r.status == 200, "%s: %ld %s", what, r.status, r.body);
        ck_assert_msg(r.len >= len && memcmp(r.body, want, len) == 0,
                      "%s %s%s: answer\n  %.400s\nexpected\n  %.400s", what,
                      rb_mode_name(modes[m]), normals ? " normals" : "",
                      r.body, want);
        free(want);
        free(body);
        rbt_resp_free(&r);
    }
}

static uint64_t scene_version_of(const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    rbt_resp r;
    ck_assert_int_eq(request("GET", path, NULL, &r), 200);
    const char *v = strstr(r.body, "\"version\":");
    ck_assert_ptr_nonnull(v);
    uint64_t out = strtoull(v + 10, NULL, 10);
    rbt_resp_free(&r);
    return out;
}

/* "elements":N,"obbs":..  of a GET, a create or a patch answer. */
static void expect_counts(const char *body, const rb_scene *mirror)
{
    rb_scene_stats st;
    rb_scene_stats_get(mirror, &st);
    char want[256];
    snprintf(want, sizeof want,
             "\"boxes\":%llu,\"elements\":%llu,\"obbs\":%llu,\"xboxes\":%llu,"
             "\"spheres\":%llu,\"planes\":%llu",
             (unsigned long long)st.boxes, (unsigned long long)st.elements,
             (unsigned long long)st.kinds[RB_KIND_OBB],
             (unsigned long long)st.kinds[RB_KIND_XBOX],
             (unsigned long long)st.kinds[RB_KIND_SPHERE],
             (unsigned long long)st.kinds[RB_KIND_PLANE]);
    ck_assert_msg(strstr(body, want) != NULL, "want %s in %s", want, body);
}

/* ---- tests */

START_TEST(test_create_patch_query)
{
    rbt_rng g = {101};
    batch b;
    static const size_t n0[5] = {20, 6, 5, 7, 1};
    batch_make(&b, &g, n0, 1);
    sbuf s;
    sbuf_init(&s);
    sbuf_add(&s, "{");
    int first = 1;
    batch_members(&s, &b, &first);
    sbuf_add(&s, "}");
    char *body = take(&s);
    char id[64];
    rbt_resp r;
    create(body, id, &r);
    free(body);
    rb_scene *mirror = NULL;
    rb_shapes sh = batch_shapes(&b);
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 3, b.boxes, b.nb, &sh,
                                            &mirror),
                     RB_OK);
    expect_counts(r.body, mirror);
    rbt_resp_free(&r);
    compare_queries(id, mirror, 1, &g, "created");

    char path[128];
    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    ck_assert_int_eq(request("GET", path, NULL, &r), 200);
    expect_counts(r.body, mirror);
    ck_assert_ptr_nonnull(strstr(r.body, "\"shape_nodes\":"));
    rbt_resp_free(&r);

    /* PATCH: set one element of each kind (ids: boxes 0-19, obbs 20-25,
     * xboxes 26-30, spheres 31-37, plane 38), the obb in its quaternion
     * form, then append an object of every kind. */
    float q[10];
    random_quat(&g, q);
    rb_element el[5];
    uint32_t ids[5] = {3, 22, 27, 35, 38};
    memset(el, 0, sizeof el);
    el[0].kind = RB_KIND_BOX;
    random_box(&g, &el[0].as.box);
    el[1].kind = RB_KIND_OBB;
    ck_assert_int_eq(rb_obb_from_quaternion(q, q + 3, q + 6, &el[1].as.obb),
                     RB_OK);
    el[2].kind = RB_KIND_XBOX;
    random_xbox(&g, &el[2].as.xbox);
    el[3].kind = RB_KIND_SPHERE;
    random_sphere(&g, &el[3].as.sphere);
    el[4].kind = RB_KIND_PLANE;
    random_plane(&g, &el[4].as.plane);
    batch add;
    static const size_t n1[5] = {4, 2, 1, 3, 1};
    batch_make(&add, &g, n1, 0);
    sbuf_init(&s);
    sbuf_add(&s, "{\"set\":[");
    sbuf_printf(&s, "[%u", ids[0]);
    json_more(&s, el[0].as.box.min, 6);
    sbuf_printf(&s, "],[%u", ids[1]);
    json_more(&s, q, 10);
    sbuf_printf(&s, "],[%u", ids[2]);
    json_more(&s, &el[2].as.xbox.min[0], 18);
    sbuf_printf(&s, "],[%u", ids[3]);
    json_more(&s, el[3].as.sphere.center, 4);
    sbuf_printf(&s, "],[%u", ids[4]);
    json_more(&s, el[4].as.plane.normal, 4);
    sbuf_add(&s, "]],\"append\":{");
    first = 1;
    batch_members(&s, &add, &first);
    sbuf_add(&s, "}}");
    body = take(&s);
    ck_assert_int_eq(request("PATCH", path, body, &r), 200);
    free(body);
    ck_assert_int_eq(rb_scene_set_elements(ctx, mirror, ids, el, 5), RB_OK);
    sh = batch_shapes(&add);
    ck_assert_int_eq(rb_scene_append_shapes(ctx, mirror, add.boxes, add.nb,
                                            &sh),
                     RB_OK);
    ck_assert_ptr_nonnull(strstr(r.body, "\"version\":2"));
    expect_counts(r.body, mirror);
    rbt_resp_free(&r);
    compare_queries(id, mirror, 2, &g, "patched");

    /* A bare list still appends boxes; they take the next ids. */
    rb_box more[2];
    random_box(&g, &more[0]);
    random_box(&g, &more[1]);
    sbuf_init(&s);
    sbuf_add(&s, "{\"append\":[");
    json_floats(&s, more[0].min, 6);
    sbuf_add(&s, ",");
    json_floats(&s, more[1].min, 6);
    sbuf_add(&s, "]}");
    body = take(&s);
    ck_assert_int_eq(request("PATCH", path, body, &r), 200);
    free(body);
    rbt_resp_free(&r);
    ck_assert_int_eq(rb_scene_append(ctx, mirror, more, 2), RB_OK);
    compare_queries(id, mirror, 3, &g, "boxes appended");
    /* Set the last box (its id is the last one) with a plain box entry. */
    uint32_t last = 39 + 11 + 1;
    ck_assert_int_eq(rb_scene_element_kind(mirror, last, NULL), RB_KIND_BOX);
    sbuf_init(&s);
    sbuf_printf(&s, "{\"set\":[[%u,0,0,0,1,1,1]]}", last);
    body = take(&s);
    ck_assert_int_eq(request("PATCH", path, body, &r), 200);
    free(body);
    rbt_resp_free(&r);
    rb_box unit = {{0, 0, 0}, {1, 1, 1}};
    ck_assert_int_eq(rb_scene_set(ctx, mirror, &last, &unit, 1), RB_OK);
    compare_queries(id, mirror, 4, &g, "last box set");
    rb_scene_destroy(mirror);
}
END_TEST

START_TEST(test_refusals)
{
    rbt_rng g = {202};
    batch b;
    static const size_t n0[5] = {3, 2, 2, 2, 1};
    batch_make(&b, &g, n0, 0);
    sbuf s;
    sbuf_init(&s);
    sbuf_add(&s, "{");
    int first = 1;
    batch_members(&s, &b, &first);
    sbuf_add(&s, "}");
    char *body = take(&s);
    char id[64];
    rbt_resp r;
    create(body, id, &r);
    free(body);
    rbt_resp_free(&r);
    rb_scene *mirror = NULL;
    rb_shapes sh = batch_shapes(&b);
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 3, b.boxes, b.nb, &sh,
                                            &mirror),
                     RB_OK);
    char path[128];
    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    /* ids: boxes 0-2, obbs 3-4, xboxes 5-6, spheres 7-8, plane 9. Each
     * PATCH starts with a good entry; none applies. */
    static const struct {
        const char *body, *pointer, *what;
    } bad[] = {
        {"{\"set\":[[0,0,0,0,1,1,1],[7,0,0,0,1,1,1]]}", "/set/1",
         "a box for a sphere"},
        {"{\"set\":[[0,0,0,0,1,1,1],[1,0,0,0,1]]}", "/set/1",
         "a sphere's arity for a box"},
        {"{\"set\":[[0,0,0,0,1,1,1],[3,0,0,0,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0]]}",
         "/set/1", "an xbox for an obb"},
        {"{\"set\":[[0,0,0,0,1,1,1],[9,0,0,0,1,1,1,1,0,0,0]]}", "/set/1",
         "an obb for a plane"},
        {"{\"set\":[[0,0,0,0,1,1,1],[8,0,0,0,-1]]}", "/set/1/4",
         "a negative radius"},
        {"{\"set\":[[0,0,0,0,1,1,1],[9,0,0,0,1]]}", "/set/1/1",
         "a zero normal"},
        {"{\"set\":[[0,0,0,0,1,1,1],[4,0,0,0,1,1,1,0,0,0,0]]}", "/set/1/7",
         "a zero quaternion"},
        {"{\"set\":[[0,0,0,0,1,1,1],[5,0,0,0,1,1,1,1,0,0,0,0,1,0,0,1,0,0,0]]}",
         "/set/1/7", "a singular matrix"},
        {"{\"set\":[[0,0,0,0,1,1,1],[10,0,0,0,1]]}", "/set/1/0",
         "an id out of range"},
        {"{\"set\":[[0,0,0,0,1,1,1]],\"append\":{\"spheres\":[[0,0,0,1],"
         "[0,0,0,-1]]}}",
         "/append/spheres/1/3", "a bad sphere in append"},
        {"{\"append\":{\"boxes\":[[0,0,0,1,1,1],[0,0,0,1,-1,1]]}}",
         "/append/boxes/1/1", "a bad box in append's object"},
        {"{\"append\":{\"obbs\":[[0,0,0,1,1,1,0,0,0,0]]}}",
         "/append/obbs/0/6", "a zero quaternion in append"},
        {"{\"append\":{\"cones\":[]}}", "/append/cones", "an unknown key"},
        {"{\"append\":{\"spheres\":[[0,0,0]]}}", "/append/spheres/0",
         "a sphere's arity"},
        {"{\"append\":{\"boxes\":[],\"boxes\":[]}}", "/append/boxes",
         "a key twice"},
        {"{\"set\":[[0,0,0,0,1,1]]}", "/set/0", "no kind has 5 numbers"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        request("PATCH", path, bad[k].body, &r);
        expect_problem(&r, 422, bad[k].pointer, bad[k].what);
        rbt_resp_free(&r);
    }
    ck_assert_uint_eq(scene_version_of(id), 1);
    compare_queries(id, mirror, 1, &g, "after the refusals");

    /* Creates: shapes in 2D, bad values named in their lists. */
    request("POST", "/v1/scenes", "{\"dims\":2,\"spheres\":[[0,0,0,1]]}", &r);
    expect_problem(&r, 422, "/spheres", "2D spheres");
    rbt_resp_free(&r);
    request("POST", "/v1/scenes",
            "{\"boxes\":[[0,0,0,1,1,1]],\"xboxes\":[[0,0,0,1,1,1,1,0,0,0,0,0,"
            "0,0,0,0,1,0]]}",
            &r);
    expect_problem(&r, 422, "/xboxes/0/6", "a singular xbox");
    rbt_resp_free(&r);
    /* A PATCH of a 2D scene takes no shapes. */
    request("POST", "/v1/scenes", "{\"dims\":2,\"boxes\":[[0,0,1,1]]}", &r);
    ck_assert_int_eq(r.status, 201);
    ck_assert_ptr_null(strstr(r.body, "\"elements\""));
    const char *at = strstr(r.body, "\"id\":\"") + 6;
    char id2[64];
    size_t n = strcspn(at, "\"");
    memcpy(id2, at, n);
    id2[n] = '\0';
    rbt_resp_free(&r);
    snprintf(path, sizeof path, "/v1/scenes/%s", id2);
    request("PATCH", path, "{\"append\":{\"planes\":[[0,1,0,1]]}}", &r);
    expect_problem(&r, 422, "/append/planes", "planes in 2D");
    rbt_resp_free(&r);
    request("PATCH", path, "{\"append\":{\"boxes\":[[0,0,2,2]]}}", &r);
    ck_assert_msg(r.status == 200, "%s", r.body);
    ck_assert_ptr_null(strstr(r.body, "\"elements\""));
    rbt_resp_free(&r);
    rb_scene_destroy(mirror);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_scene_shapes");
    TCase *tc = tcase_create("scenes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_create_patch_query);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return rbt_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
