/*
 * test_scene_shapes.c - scenes holding every kind (SPEC section 7, the
 * paragraph on scenes): ids given at creation in the concatenation order
 * and by appends in the append's own order, never changing; set per kind
 * (another kind refused, nothing applied); clones; stats.
 *
 * The oracle is a model: a plain array of elements by id, queried inline
 * (boxes ++ obbs ++ xboxes ++ spheres ++ planes, ids mapped back to the
 * scene's) on the CPU with the hierarchy off. Inline ids order the kinds
 * differently from a scene whose appends interleave them, so where ties
 * decide (nearest, the truncation of all lists) the expected answer is
 * derived from the full inline list by (t_enter, scene id), and the
 * winner's own answer (faces, normal) from a query of that one element.
 * Scene queries run with the hierarchy off, auto and always (box tree
 * and shape tree), and on OpenCL where there is one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define SPAN 10.0f
#define SIZE 3.0f
#define MAX_HITS 5

/* ---- the model: elements by id */

typedef struct model {
    rb_element *e;
    size_t n, cap;
} model;

static void model_add(model *m, const rb_element *e)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->e = realloc(m->e, m->cap * sizeof *m->e);
        ck_assert_ptr_nonnull(m->e);
    }
    m->e[m->n++] = *e;
}

static void model_copy(model *to, const model *from)
{
    free(to->e);
    to->cap = from->cap ? from->cap : 1;
    to->n = from->n;
    to->e = malloc(to->cap * sizeof *to->e);
    if (from->n)
        memcpy(to->e, from->e, from->n * sizeof *from->e);
}

static void random_element(rbt_rng *g, rb_kind kind, rb_element *e)
{
    memset(e, 0, sizeof *e);
    e->kind = kind;
    switch (kind) {
    case RB_KIND_BOX:
        for (int a = 0; a < 3; a++) {
            e->as.box.min[a] = rbt_uniform(g, -SPAN, SPAN);
            e->as.box.max[a] = e->as.box.min[a] + rbt_uniform(g, 0, SIZE);
        }
        break;
    case RB_KIND_OBB: {
        float c[3], h[3], q[4];
        for (int a = 0; a < 3; a++) {
            c[a] = rbt_uniform(g, -SPAN, SPAN);
            h[a] = rbt_uniform(g, 0, SIZE / 2);
        }
        for (int k = 0; k < 4; k++)
            q[k] = rbt_uniform(g, -1, 1);
        q[0] += 0.1f; /* never all zero */
        ck_assert_int_eq(rb_obb_from_quaternion(c, h, q, &e->as.obb), RB_OK);
        break;
    }
    case RB_KIND_XBOX:
        for (int a = 0; a < 3; a++) {
            e->as.xbox.min[a] = rbt_uniform(g, -SIZE / 2, 0);
            e->as.xbox.max[a] = e->as.xbox.min[a] + rbt_uniform(g, 0, SIZE);
            for (int j = 0; j < 3; j++)
                e->as.xbox.a[a][j] =
                    (a == j ? 1.0f : 0.0f) + rbt_uniform(g, -0.4f, 0.4f);
            e->as.xbox.a[a][3] = rbt_uniform(g, -SPAN, SPAN);
        }
        break;
    case RB_KIND_SPHERE:
        for (int a = 0; a < 3; a++)
            e->as.sphere.center[a] = rbt_uniform(g, -SPAN, SPAN);
        e->as.sphere.radius = rbt_uniform(g, 0, SIZE / 2);
        break;
    default:
        for (int a = 0; a < 3; a++)
            e->as.plane.normal[a] = rbt_uniform(g, -1, 1);
        e->as.plane.normal[1] += 2.0f;
        e->as.plane.d = rbt_uniform(g, -3 * SPAN, -SPAN);
        break;
    }
}

/* Planes are hit by most rays: keep them rare. */
static rb_kind random_kind(rbt_rng *g)
{
    uint32_t r = rbt_below(g, 40);
    return r < 12 ? RB_KIND_BOX
           : r < 21 ? RB_KIND_OBB
           : r < 30 ? RB_KIND_XBOX
           : r < 39 ? RB_KIND_SPHERE
                    : RB_KIND_PLANE;
}

/* Per-kind arrays of a list of elements, in its order within each kind. */
typedef struct packed {
    rb_box *boxes;
    rb_obb *obbs;
    rb_xbox *xboxes;
    rb_sphere *spheres;
    rb_plane *planes;
    size_t n_boxes;
    rb_shapes sh;
    uint32_t *to_id; /* inline id (the concatenation) -> model index */
} packed;

static void pack(const rb_element *e, size_t n, const uint32_t *ids,
                 packed *p)
{
    memset(p, 0, sizeof *p);
    p->boxes = calloc(n + 1, sizeof *p->boxes);
    p->obbs = calloc(n + 1, sizeof *p->obbs);
    p->xboxes = calloc(n + 1, sizeof *p->xboxes);
    p->spheres = calloc(n + 1, sizeof *p->spheres);
    p->planes = calloc(n + 1, sizeof *p->planes);
    p->to_id = calloc(n + 1, sizeof *p->to_id);
    size_t at = 0;
    for (int k = 0; k < RB_KIND_COUNT; k++)
        for (size_t i = 0; i < n; i++) {
            if ((int)e[i].kind != k)
                continue;
            p->to_id[at++] = ids ? ids[i] : (uint32_t)i;
            switch (e[i].kind) {
            case RB_KIND_BOX:
                p->boxes[p->n_boxes++] = e[i].as.box;
                break;
            case RB_KIND_OBB:
                p->obbs[p->sh.n_obbs++] = e[i].as.obb;
                break;
            case RB_KIND_XBOX:
                p->xboxes[p->sh.n_xboxes++] = e[i].as.xbox;
                break;
            case RB_KIND_SPHERE:
                p->spheres[p->sh.n_spheres++] = e[i].as.sphere;
                break;
            default:
                p->planes[p->sh.n_planes++] = e[i].as.plane;
                break;
            }
        }
    p->sh.obbs = p->obbs;
    p->sh.xboxes = p->xboxes;
    p->sh.spheres = p->spheres;
    p->sh.planes = p->planes;
}

static void packed_free(packed *p)
{
    free(p->boxes);
    free(p->obbs);
    free(p->xboxes);
    free(p->spheres);
    free(p->planes);
    free(p->to_id);
}

/* ---- answers */

typedef struct answer {
    rb_hit *hits;
    uint8_t *any, *kinds;
    uint32_t *counts;
    rb_list_hit *list;
    float *normals;
    uint32_t max_hits;
} answer;

static void answer_init(answer *a, size_t n, uint32_t max_hits)
{
    a->hits = calloc(n + 1, sizeof *a->hits);
    a->any = calloc(n + 1, 1);
    a->kinds = calloc(n + 1, 1);
    a->counts = calloc(n + 1, sizeof *a->counts);
    a->list = calloc((n + 1) * max_hits, sizeof *a->list);
    a->normals = calloc(3 * (n + 1), sizeof *a->normals);
    a->max_hits = max_hits;
}

static void answer_free(answer *a)
{
    free(a->hits);
    free(a->any);
    free(a->kinds);
    free(a->counts);
    free(a->list);
    free(a->normals);
}

static int run(rb_context *ctx, rb_mode mode, const rb_ray *rays, size_t n,
               const rb_scene *scene, const packed *p, uint32_t max_hits,
               answer *a)
{
    rb_query q = {.mode = mode, .dims = 3, .rays = rays, .n_rays = n,
                  .scene = scene, .max_hits = max_hits,
                  .outputs = mode == RB_MODE_NEAREST ? RB_OUTPUT_NORMAL : 0};
    if (p) {
        q.boxes = p->boxes;
        q.n_boxes = p->n_boxes;
        q.shapes = p->sh;
    }
    rb_results r = {.hits = a->hits, .any = a->any, .counts = a->counts,
                    .list = a->list, .kinds = a->kinds,
                    .normals = a->normals, .capacity = n};
    return rb_intersect(ctx, &q, &r);
}

static void random_rays(rbt_rng *g, rb_ray *rays, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rb_ray *r = &rays[i];
        for (int a = 0; a < 3; a++) {
            r->origin[a] = rbt_uniform(g, -1.5f * SPAN, 1.5f * SPAN);
            r->dir[a] = rbt_uniform(g, -1, 1);
        }
        r->tmin = 0;
        r->tmax = INFINITY;
        if (rbt_below(g, 4) == 0) {
            r->tmin = rbt_uniform(g, 0, 2);
            r->tmax = r->tmin + rbt_uniform(g, 0, 30);
        }
    }
}

static int list_cmp(const void *x, const void *y)
{
    const rb_list_hit *a = x, *b = y;
    if (a->t_enter != b->t_enter)
        return a->t_enter < b->t_enter ? -1 : 1;
    return (a->box > b->box) - (a->box < b->box);
}

static int same_entry(const rb_list_hit *a, const rb_list_hit *b)
{
    return a->box == b->box && rbt_same_float(a->t_enter, b->t_enter) &&
           rbt_same_float(a->t_exit, b->t_exit);
}

/* Every hit of ray i by the model, ids mapped, sorted by (t, scene id). */
typedef struct full {
    answer all;   /* max_hits = the model's size: never truncated */
    uint32_t cap;
} full;

/* The expected answers of one batch, from the model inline. */
typedef struct expect {
    full f;
    answer nearest; /* per ray: the winner's own answer, id mapped */
} expect;

static void expect_make(rb_context *ref, const model *m, const rb_ray *rays,
                        size_t n, expect *x)
{
    packed p;
    pack(m->e, m->n, NULL, &p);
    x->f.cap = m->n ? (uint32_t)m->n : 1;
    answer_init(&x->f.all, n, x->f.cap);
    answer_init(&x->nearest, n, 1);
    ck_assert_int_eq(run(ref, RB_MODE_ALL, rays, n, NULL, &p, x->f.cap,
                         &x->f.all),
                     RB_OK);
    for (size_t i = 0; i < n; i++) {
        rb_list_hit *l = x->f.all.list + i * x->f.cap;
        ck_assert_uint_le(x->f.all.counts[i], x->f.cap);
        for (uint32_t k = 0; k < x->f.all.counts[i]; k++)
            l[k].box = (int32_t)p.to_id[l[k].box];
        qsort(l, x->f.all.counts[i], sizeof *l, list_cmp);
        /* nearest: the least (t, id); its own answer from a query of that
         * one element. */
        rb_hit *h = &x->nearest.hits[i];
        if (!x->f.all.counts[i]) {
            answer one;
            answer_init(&one, 1, 1);
            packed none;
            pack(NULL, 0, NULL, &none);
            ck_assert_int_eq(run(ref, RB_MODE_NEAREST, &rays[i], 1, NULL,
                                 &none, 1, &one),
                             RB_OK);
            *h = one.hits[0];
            x->nearest.kinds[i] = RB_KIND_NONE;
            memcpy(x->nearest.normals + 3 * i, one.normals, 12);
            packed_free(&none);
            answer_free(&one);
            continue;
        }
        uint32_t id = (uint32_t)l[0].box;
        packed single;
        pack(&m->e[id], 1, &id, &single);
        answer one;
        answer_init(&one, 1, 1);
        ck_assert_int_eq(run(ref, RB_MODE_NEAREST, &rays[i], 1, NULL,
                             &single, 1, &one),
                         RB_OK);
        ck_assert(one.hits[0].hit);
        *h = one.hits[0];
        h->box = (int32_t)id;
        x->nearest.kinds[i] = (uint8_t)m->e[id].kind;
        memcpy(x->nearest.normals + 3 * i, one.normals, 12);
        ck_assert(rbt_same_float(h->t_enter, l[0].t_enter));
        packed_free(&single);
        answer_free(&one);
    }
    packed_free(&p);
}

static void expect_free(expect *x)
{
    answer_free(&x->f.all);
    answer_free(&x->nearest);
}

static void check_mode(rb_context *ctx, const char *ctx_name, rb_mode mode,
                       const rb_scene *scene, const rb_ray *rays, size_t n,
                       const expect *x, const char *what)
{
    answer a;
    answer_init(&a, n, MAX_HITS);
    int rc = run(ctx, mode, rays, n, scene, NULL, MAX_HITS, &a);
    ck_assert_msg(rc == RB_OK, "%s %s %s: %s", what, ctx_name,
                  rb_mode_name(mode), rb_context_error(ctx)->message);
    for (size_t i = 0; i < n; i++) {
        uint32_t cnt = x->f.all.counts[i];
        const rb_list_hit *l = x->f.all.list + i * x->f.cap;
        switch (mode) {
        case RB_MODE_NEAREST: {
            char b1[160], b2[160];
            ck_assert_msg(rbt_same_hit(&a.hits[i], &x->nearest.hits[i]),
                          "%s %s ray %zu: %s, want %s", what, ctx_name, i,
                          rbt_hit_str(&a.hits[i], b1, sizeof b1),
                          rbt_hit_str(&x->nearest.hits[i], b2, sizeof b2));
            ck_assert_msg(a.kinds[i] == x->nearest.kinds[i],
                          "%s %s ray %zu: kind %d, want %d", what, ctx_name,
                          i, a.kinds[i], x->nearest.kinds[i]);
            for (int c = 0; c < 3; c++)
                ck_assert_msg(rbt_same_float(a.normals[3 * i + c],
                                             x->nearest.normals[3 * i + c]),
                              "%s %s ray %zu: normal", what, ctx_name, i);
            break;
        }
        case RB_MODE_ANY:
            ck_assert_msg(a.any[i] == (cnt > 0), "%s %s ray %zu: any %d",
                          what, ctx_name, i, a.any[i]);
            break;
        case RB_MODE_COUNT:
            ck_assert_msg(a.counts[i] == cnt, "%s %s ray %zu: count %u, want "
                          "%u", what, ctx_name, i, a.counts[i], cnt);
            break;
        default: {
            ck_assert_msg(a.counts[i] == cnt, "%s %s ray %zu: all count %u, "
                          "want %u", what, ctx_name, i, a.counts[i], cnt);
            uint32_t k = cnt < MAX_HITS ? cnt : MAX_HITS;
            for (uint32_t e = 0; e < k; e++)
                ck_assert_msg(same_entry(&a.list[i * MAX_HITS + e], &l[e]),
                              "%s %s ray %zu entry %u: [%d %g %g], want "
                              "[%d %g %g]", what, ctx_name, i, e,
                              a.list[i * MAX_HITS + e].box,
                              (double)a.list[i * MAX_HITS + e].t_enter,
                              (double)a.list[i * MAX_HITS + e].t_exit,
                              l[e].box, (double)l[e].t_enter,
                              (double)l[e].t_exit);
            break;
        }
        }
    }
    answer_free(&a);
}

/* ---- contexts */

static rb_context *cpu_context(int hierarchy)
{
    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_CPU;
    o.hierarchy = hierarchy;
    rb_context *ctx = NULL;
    ck_assert_int_eq(rb_context_create(&o, &ctx, NULL, 0), RB_OK);
    return ctx;
}

typedef struct contexts {
    rb_context *ref; /* CPU, hierarchy off: the model's */
    rb_context *c[4];
    const char *name[4];
    int n;
} contexts;

static void contexts_make(contexts *cs, int with_opencl)
{
    memset(cs, 0, sizeof *cs);
    cs->ref = cpu_context(RB_HIERARCHY_OFF);
    cs->c[0] = cs->ref;
    cs->name[0] = "cpu/off";
    cs->c[1] = cpu_context(RB_HIERARCHY_AUTO);
    cs->name[1] = "cpu/auto";
    cs->c[2] = cpu_context(RB_HIERARCHY_ALWAYS);
    cs->name[2] = "cpu/always";
    cs->n = 3;
    if (with_opencl) {
        rb_context_options o;
        rb_context_options_init(&o);
        o.backend = RB_BACKEND_OPENCL;
        o.cpu_fallback = 0;
        o.hierarchy = RB_HIERARCHY_ALWAYS;
        rb_context *cl = rbt_context_opts(RBT_OPENCL, &o);
        if (cl) {
            cs->c[cs->n] = cl;
            cs->name[cs->n++] = "opencl";
        }
    }
}

static void contexts_free(contexts *cs)
{
    for (int k = 0; k < cs->n; k++)
        rb_context_destroy(cs->c[k]);
}

/* The scene answers as the model in every mode and context. */
static void check_scene(const contexts *cs, const rb_scene *scene,
                        const model *m, rbt_rng *g, size_t n_rays,
                        const char *what)
{
    rb_scene_stats st;
    rb_scene_stats_get(scene, &st);
    ck_assert_uint_eq(st.elements, m->n);
    uint64_t kinds[RB_KIND_COUNT] = {0};
    for (size_t i = 0; i < m->n; i++) {
        kinds[m->e[i].kind]++;
        size_t idx;
        ck_assert_int_eq(rb_scene_element_kind(scene, i, &idx),
                         (int)m->e[i].kind);
    }
    ck_assert_int_eq(rb_scene_element_kind(scene, m->n, NULL), -1);
    for (int k = 0; k < RB_KIND_COUNT; k++)
        ck_assert_uint_eq(st.kinds[k], kinds[k]);
    ck_assert_uint_eq(st.boxes, kinds[RB_KIND_BOX]);

    rb_ray *rays = calloc(n_rays, sizeof *rays);
    random_rays(g, rays, n_rays);
    expect x;
    expect_make(cs->ref, m, rays, n_rays, &x);
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};
    for (int c = 0; c < cs->n; c++)
        for (int k = 0; k < 4; k++)
            check_mode(cs->c[c], cs->name[c], modes[k], scene, rays, n_rays,
                       &x, what);
    expect_free(&x);
    free(rays);
}

/* ---- scenes from the model */

static rb_scene *create_from(rb_context *ctx, const rb_element *e, size_t n)
{
    /* A creation's elements must come in kind order. */
    for (size_t i = 1; i < n; i++)
        ck_assert_int_le(e[i - 1].kind, e[i].kind);
    packed p;
    pack(e, n, NULL, &p);
    rb_scene *s = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 3, p.boxes, p.n_boxes,
                                            &p.sh, &s),
                     RB_OK);
    packed_free(&p);
    return s;
}

static int append_to(rb_context *ctx, rb_scene *s, model *m,
                     const rb_element *e, size_t n)
{
    packed p;
    pack(e, n, NULL, &p);
    int rc = rb_scene_append_shapes(ctx, s, p.boxes, p.n_boxes, &p.sh);
    if (rc == RB_OK)
        for (int k = 0; k < RB_KIND_COUNT; k++)
            for (size_t i = 0; i < n; i++)
                if ((int)e[i].kind == k)
                    model_add(m, &e[i]);
    packed_free(&p);
    return rc;
}

/* n elements of random kinds, sorted by kind (the order of a create). */
static size_t random_elements(rbt_rng *g, size_t n, rb_element *out)
{
    size_t at = 0;
    rb_kind kinds[256];
    for (size_t i = 0; i < n; i++)
        kinds[i] = random_kind(g);
    for (int k = 0; k < RB_KIND_COUNT; k++)
        for (size_t i = 0; i < n; i++)
            if ((int)kinds[i] == k)
                random_element(g, kinds[i], &out[at++]);
    return at;
}

/* ---- tests */

START_TEST(test_create_equals_inline)
{
    contexts cs;
    contexts_make(&cs, 1);
    rbt_rng g = {11};
    /* Sizes around the thresholds: a few of each kind; 300 boxes and 100
     * shapes (auto walks both trees). */
    static const size_t sizes[][5] = {{3, 2, 2, 2, 1},
                                      {0, 4, 0, 3, 0},
                                      {0, 0, 0, 0, 2},
                                      {300, 40, 30, 30, 2}};
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        model m = {0};
        for (int k = 0; k < RB_KIND_COUNT; k++)
            for (size_t i = 0; i < sizes[t][k]; i++) {
                rb_element e;
                random_element(&g, (rb_kind)k, &e);
                model_add(&m, &e);
            }
        rb_scene *s = create_from(cs.ref, m.e, m.n);
        char what[64];
        snprintf(what, sizeof what, "create %zu", t);
        check_scene(&cs, s, &m, &g, 300, what);
        rb_scene_destroy(s);
        free(m.e);
    }
    contexts_free(&cs);
}
END_TEST

START_TEST(test_boxes_only_unchanged)
{
    /* A scene of boxes made either way is the same scene. */
    rb_context *ctx = cpu_context(RB_HIERARCHY_AUTO);
    rbt_rng g = {5};
    rb_box boxes[40];
    for (int i = 0; i < 40; i++) {
        rb_element e;
        random_element(&g, RB_KIND_BOX, &e);
        boxes[i] = e.as.box;
    }
    rb_scene *a = NULL, *b = NULL, *c = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, 40, &a), RB_OK);
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 3, boxes, 40, NULL, &b),
                     RB_OK);
    rb_shapes none = {0};
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 3, boxes, 40, &none, &c),
                     RB_OK);
    rb_scene_stats sa, sb, sc;
    rb_scene_stats_get(a, &sa);
    rb_scene_stats_get(b, &sb);
    rb_scene_stats_get(c, &sc);
    ck_assert_uint_eq(sa.host_bytes, sb.host_bytes);
    ck_assert_uint_eq(sa.host_bytes, sc.host_bytes);
    ck_assert_uint_eq(sa.elements, 40);
    ck_assert_uint_eq(sa.kinds[RB_KIND_BOX], 40);
    ck_assert_uint_eq(sa.shape_nodes, 0);
    /* Appends of boxes alone keep box i = id i. */
    ck_assert_int_eq(rb_scene_append_shapes(ctx, b, boxes, 5, NULL), RB_OK);
    ck_assert_int_eq(rb_scene_append(ctx, a, boxes, 5), RB_OK);
    rb_scene_stats_get(a, &sa);
    rb_scene_stats_get(b, &sb);
    ck_assert_uint_eq(sa.host_bytes, sb.host_bytes);
    ck_assert_uint_eq(sa.version, 2);
    ck_assert_uint_eq(sb.version, 2);
    uint32_t idx[2] = {44, 3};
    ck_assert_int_eq(rb_scene_set(ctx, a, idx, boxes, 2), RB_OK);
    rb_element el[2] = {{.kind = RB_KIND_BOX}, {.kind = RB_KIND_BOX}};
    el[0].as.box = boxes[0];
    el[1].as.box = boxes[1];
    ck_assert_int_eq(rb_scene_set_elements(ctx, b, idx, el, 2), RB_OK);
    rb_ray rays[64];
    random_rays(&g, rays, 64);
    answer x, y;
    answer_init(&x, 64, MAX_HITS);
    answer_init(&y, 64, MAX_HITS);
    ck_assert_int_eq(run(ctx, RB_MODE_ALL, rays, 64, a, NULL, MAX_HITS, &x),
                     RB_OK);
    ck_assert_int_eq(run(ctx, RB_MODE_ALL, rays, 64, b, NULL, MAX_HITS, &y),
                     RB_OK);
    ck_assert(memcmp(x.counts, y.counts, 64 * sizeof *x.counts) == 0);
    ck_assert(memcmp(x.list, y.list, 64 * MAX_HITS * sizeof *x.list) == 0);
    /* The old messages: an index out of range in a box scene. */
    idx[0] = 45;
    ck_assert_int_eq(rb_scene_set(ctx, a, idx, boxes, 1), RB_EINVAL);
    ck_assert_str_eq(rb_context_error(ctx)->message,
                     "set 0: index 45 is out of range (45 boxes)");
    /* 2D scenes take boxes only. */
    rb_box2 b2 = {{0, 0}, {1, 1}};
    rb_scene *s2 = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 2, &b2, 1, &s2), RB_OK);
    rb_sphere sp = {{0, 0, 0}, 1};
    rb_shapes one = {.spheres = &sp, .n_spheres = 1};
    ck_assert_int_eq(rb_scene_append_shapes(ctx, s2, NULL, 0, &one),
                     RB_EINVAL);
    rb_scene *s3 = NULL;
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 2, &b2, 1, &one, &s3),
                     RB_EINVAL);
    ck_assert_ptr_null(s3);
    answer_free(&x);
    answer_free(&y);
    rb_scene_destroy(a);
    rb_scene_destroy(b);
    rb_scene_destroy(c);
    rb_scene_destroy(s2);
    rb_context_destroy(ctx);
}
END_TEST

START_TEST(test_append_interleaves)
{
    contexts cs;
    contexts_make(&cs, 0);
    rbt_rng g = {23};
    model m = {0};
    rb_element e[64];
    size_t n = random_elements(&g, 12, e);
    for (size_t i = 0; i < n; i++)
        model_add(&m, &e[i]);
    rb_scene *s = create_from(cs.ref, m.e, m.n);
    check_scene(&cs, s, &m, &g, 200, "created");
    /* Spheres after boxes, then boxes after spheres, then a mix: kinds
     * interleave in id order, old ids keep their elements. */
    static const rb_kind steps[][3] = {
        {RB_KIND_SPHERE, RB_KIND_SPHERE, RB_KIND_SPHERE},
        {RB_KIND_BOX, RB_KIND_BOX, RB_KIND_BOX},
        {RB_KIND_PLANE, RB_KIND_OBB, RB_KIND_BOX},
        {RB_KIND_XBOX, RB_KIND_XBOX, RB_KIND_SPHERE},
        {RB_KIND_BOX, RB_KIND_OBB, RB_KIND_OBB}};
    for (size_t t = 0; t < sizeof steps / sizeof *steps; t++) {
        rb_element add[3];
        size_t at = 0;
        for (int k = 0; k < RB_KIND_COUNT; k++)
            for (int i = 0; i < 3; i++)
                if ((int)steps[t][i] == k)
                    random_element(&g, steps[t][i], &add[at++]);
        size_t before = m.n;
        ck_assert_int_eq(append_to(cs.ref, s, &m, add, 3), RB_OK);
        ck_assert_uint_eq(m.n, before + 3);
        rb_scene_stats st;
        rb_scene_stats_get(s, &st);
        ck_assert_uint_eq(st.version, 2 + t);
        char what[64];
        snprintf(what, sizeof what, "append %zu", t);
        check_scene(&cs, s, &m, &g, 200, what);
    }
    /* The ids of the append's own order: boxes ++ obbs ++ ... */
    size_t idx;
    ck_assert_int_eq(rb_scene_element_kind(s, m.n - 3, &idx), RB_KIND_BOX);
    ck_assert_int_eq(rb_scene_element_kind(s, m.n - 2, &idx), RB_KIND_OBB);
    ck_assert_int_eq(rb_scene_element_kind(s, m.n - 1, &idx), RB_KIND_OBB);
    /* A bad element in an append changes nothing, named within its kind
     * of the append. */
    rb_element add[3];
    random_element(&g, RB_KIND_BOX, &add[0]);
    random_element(&g, RB_KIND_SPHERE, &add[1]);
    random_element(&g, RB_KIND_SPHERE, &add[2]);
    add[2].as.sphere.radius = -1;
    ck_assert_int_eq(append_to(cs.ref, s, &m, add, 3), RB_EINPUT);
    const rb_error *err = rb_context_error(cs.ref);
    ck_assert_int_eq(err->element, RB_ELEMENT_SPHERE);
    ck_assert_uint_eq(err->index, 1);
    ck_assert_int_eq(err->field, 3);
    add[2].as.sphere.radius = 1;
    add[0].as.box.min[1] = NAN;
    ck_assert_int_eq(append_to(cs.ref, s, &m, add, 3), RB_EINPUT);
    ck_assert_int_eq(err->element, RB_ELEMENT_BOX);
    ck_assert_uint_eq(err->index, 0);
    ck_assert_int_eq(err->field, 1);
    rb_scene_stats st;
    rb_scene_stats_get(s, &st);
    ck_assert_uint_eq(st.version, 1 + sizeof steps / sizeof *steps);
    check_scene(&cs, s, &m, &g, 200, "after failed appends");
    rb_scene_destroy(s);
    free(m.e);
    contexts_free(&cs);
}
END_TEST

/* Sets n random ids of the model to new random elements of their kinds. */
static int set_random(rb_context *ctx, rb_scene *s, model *m, rbt_rng *g,
                      size_t n)
{
    uint32_t ids[16];
    rb_element e[16];
    for (size_t k = 0; k < n; k++) {
        ids[k] = rbt_below(g, (uint32_t)m->n);
        random_element(g, m->e[ids[k]].kind, &e[k]);
    }
    int rc = rb_scene_set_elements(ctx, s, ids, e, n);
    if (rc == RB_OK)
        for (size_t k = 0; k < n; k++)
            m->e[ids[k]] = e[k];
    return rc;
}

START_TEST(test_set_each_kind)
{
    contexts cs;
    contexts_make(&cs, 0);
    rbt_rng g = {31};
    model m = {0};
    rb_element e[64];
    size_t n = random_elements(&g, 30, e);
    for (size_t i = 0; i < n; i++)
        model_add(&m, &e[i]);
    rb_scene *s = create_from(cs.ref, m.e, m.n);
    rb_element add[8];
    size_t na = random_elements(&g, 8, add);
    ck_assert_int_eq(append_to(cs.ref, s, &m, add, na), RB_OK);
    for (int k = 0; k < RB_KIND_COUNT; k++) {
        /* Every element of kind k gets a new one. */
        for (uint32_t id = 0; id < m.n; id++) {
            if ((int)m.e[id].kind != k)
                continue;
            rb_element ne;
            random_element(&g, (rb_kind)k, &ne);
            ck_assert_int_eq(rb_scene_set_elements(cs.ref, s, &id, &ne, 1),
                             RB_OK);
            m.e[id] = ne;
        }
        char what[64];
        snprintf(what, sizeof what, "set %s", rb_kind_name(k));
        check_scene(&cs, s, &m, &g, 200, what);
    }
    /* Boxes through rb_scene_set address ids too. */
    for (uint32_t id = 0; id < m.n; id++) {
        if (m.e[id].kind != RB_KIND_BOX)
            continue;
        rb_element ne;
        random_element(&g, RB_KIND_BOX, &ne);
        ck_assert_int_eq(rb_scene_set(cs.ref, s, &id, &ne.as.box, 1), RB_OK);
        m.e[id] = ne;
    }
    check_scene(&cs, s, &m, &g, 200, "rb_scene_set");
    /* A mixed set; the same id twice: the last wins. */
    for (int r = 0; r < 20; r++)
        ck_assert_int_eq(set_random(cs.ref, s, &m, &g, 1 + rbt_below(&g, 8)),
                         RB_OK);
    uint32_t twice[2] = {3, 3};
    rb_element two[2];
    random_element(&g, m.e[3].kind, &two[0]);
    random_element(&g, m.e[3].kind, &two[1]);
    ck_assert_int_eq(rb_scene_set_elements(cs.ref, s, twice, two, 2), RB_OK);
    m.e[3] = two[1];
    check_scene(&cs, s, &m, &g, 200, "mixed sets");
    rb_scene_destroy(s);
    free(m.e);
    contexts_free(&cs);
}
END_TEST

START_TEST(test_set_refused)
{
    contexts cs;
    contexts_make(&cs, 0);
    rb_context *ctx = cs.ref;
    rbt_rng g = {41};
    model m = {0};
    rb_element e[64];
    size_t n = random_elements(&g, 20, e);
    for (size_t i = 0; i < n; i++)
        model_add(&m, &e[i]);
    rb_scene *s = create_from(ctx, m.e, m.n);
    rb_scene_stats st0;
    rb_scene_stats_get(s, &st0);
    /* Find an id of each kind there is. */
    uint32_t of[RB_KIND_COUNT];
    for (int k = 0; k < RB_KIND_COUNT; k++)
        of[k] = UINT32_MAX;
    for (uint32_t id = 0; id < m.n; id++)
        if (of[m.e[id].kind] == UINT32_MAX)
            of[m.e[id].kind] = id;
    for (int have = 0; have < RB_KIND_COUNT; have++) {
        if (of[have] == UINT32_MAX)
            continue;
        for (int given = 0; given < RB_KIND_COUNT; given++) {
            if (given == have)
                continue;
            /* A good first entry, then the wrong kind. */
            uint32_t ids[2] = {of[have], of[have]};
            rb_element el[2];
            random_element(&g, (rb_kind)have, &el[0]);
            random_element(&g, (rb_kind)given, &el[1]);
            ck_assert_int_eq(rb_scene_set_elements(ctx, s, ids, el, 2),
                             RB_EINVAL);
            const rb_error *err = rb_context_error(ctx);
            ck_assert_uint_eq(err->index, 1);
            ck_assert_int_eq(err->field, -1);
            ck_assert_msg(strstr(err->message, rb_kind_name(have)) &&
                              strstr(err->message, rb_kind_name(given)),
                          "%s", err->message);
        }
    }
    /* rb_scene_set on an id that is not a box. */
    for (int k = 1; k < RB_KIND_COUNT; k++) {
        if (of[k] == UINT32_MAX)
            continue;
        rb_box b = {{0, 0, 0}, {1, 1, 1}};
        ck_assert_int_eq(rb_scene_set(ctx, s, &of[k], &b, 1), RB_EINVAL);
    }
    /* Out of range, and invalid values of each kind (R11), named by set
     * entry, kind and field. */
    uint32_t ids[2] = {0, (uint32_t)m.n};
    rb_element el[2];
    random_element(&g, m.e[0].kind, &el[0]);
    random_element(&g, RB_KIND_SPHERE, &el[1]);
    ck_assert_int_eq(rb_scene_set_elements(ctx, s, ids, el, 2), RB_EINVAL);
    ck_assert_uint_eq(rb_context_error(ctx)->index, 1);
    struct {
        rb_kind kind;
        int field;
    } bad[] = {{RB_KIND_BOX, 4},    {RB_KIND_OBB, 3},   {RB_KIND_OBB, 6},
               {RB_KIND_XBOX, 6},   {RB_KIND_SPHERE, 3}, {RB_KIND_PLANE, 0},
               {RB_KIND_PLANE, 3}};
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        rb_kind k = bad[b].kind;
        if (of[k] == UINT32_MAX)
            continue;
        uint32_t two[2] = {of[k], of[k]};
        random_element(&g, k, &el[0]);
        random_element(&g, k, &el[1]);
        switch (b) {
        case 0:
            el[1].as.box.max[1] = el[1].as.box.min[1] - 1; /* min y > max y */
            bad[b].field = 1;
            break;
        case 1:
            el[1].as.obb.half[0] = -1;
            break;
        case 2:
            el[1].as.obb.axes[1][0] += 0.5f;
            break;
        case 3:
            memset(el[1].as.xbox.a, 0, sizeof el[1].as.xbox.a);
            break;
        case 4:
            el[1].as.sphere.radius = -2;
            break;
        case 5:
            memset(el[1].as.plane.normal, 0, sizeof el[1].as.plane.normal);
            break;
        default:
            el[1].as.plane.d = INFINITY;
            break;
        }
        ck_assert_int_eq(rb_scene_set_elements(ctx, s, two, el, 2),
                         RB_EINPUT);
        const rb_error *err = rb_context_error(ctx);
        static const rb_element_kind ek[] = {
            RB_ELEMENT_BOX, RB_ELEMENT_OBB, RB_ELEMENT_XBOX,
            RB_ELEMENT_SPHERE, RB_ELEMENT_PLANE};
        ck_assert_int_eq(err->element, ek[k]);
        ck_assert_uint_eq(err->index, 1);
        ck_assert_msg(err->field == bad[b].field, "%s: field %d, want %d",
                      err->message, err->field, bad[b].field);
    }
    /* Nothing was applied. */
    rb_scene_stats st;
    rb_scene_stats_get(s, &st);
    ck_assert_uint_eq(st.version, st0.version);
    check_scene(&cs, s, &m, &g, 300, "after refused sets");
    rb_scene_destroy(s);
    free(m.e);
    contexts_free(&cs);
}
END_TEST

START_TEST(test_clone_independent)
{
    contexts cs;
    contexts_make(&cs, 0);
    rbt_rng g = {53};
    model m = {0}, mc = {0};
    rb_element e[200];
    size_t n = random_elements(&g, 150, e);
    for (size_t i = 0; i < n; i++)
        model_add(&m, &e[i]);
    rb_scene *s = create_from(cs.ref, m.e, m.n);
    rb_element add[8];
    size_t na = random_elements(&g, 8, add);
    ck_assert_int_eq(append_to(cs.ref, s, &m, add, na), RB_OK);
    rb_scene *c = NULL;
    ck_assert_int_eq(rb_scene_clone(cs.c[1], s, &c), RB_OK);
    model_copy(&mc, &m);
    rb_scene_stats a, b;
    rb_scene_stats_get(s, &a);
    rb_scene_stats_get(c, &b);
    ck_assert_uint_eq(a.host_bytes, b.host_bytes);
    ck_assert_uint_eq(a.version, b.version);
    ck_assert_uint_eq(a.shape_nodes, b.shape_nodes);
    /* Change the copy: the original stays. */
    ck_assert_int_eq(set_random(cs.c[1], c, &mc, &g, 10), RB_OK);
    na = random_elements(&g, 8, add);
    ck_assert_int_eq(append_to(cs.c[1], c, &mc, add, na), RB_OK);
    check_scene(&cs, s, &m, &g, 200, "original");
    check_scene(&cs, c, &mc, &g, 200, "clone");
    /* And the other way round, with the original gone at the end. */
    ck_assert_int_eq(set_random(cs.ref, s, &m, &g, 10), RB_OK);
    check_scene(&cs, c, &mc, &g, 100, "clone after the original changed");
    rb_scene_destroy(s);
    check_scene(&cs, c, &mc, &g, 100, "clone alone");
    rb_scene_destroy(c);
    free(m.e);
    free(mc.e);
    contexts_free(&cs);
}
END_TEST

/* Random PATCH sequences against the model, as the server runs them:
 * copy, set, append, keep the copy only when everything succeeded. */
START_TEST(test_random_patches)
{
    contexts cs;
    contexts_make(&cs, 0);
    rbt_rng g = {67};
    for (int seq = 0; seq < 12; seq++) {
        model m = {0};
        rb_element e[64];
        size_t n = random_elements(&g, rbt_below(&g, 20), e);
        for (size_t i = 0; i < n; i++)
            model_add(&m, &e[i]);
        rb_scene *s = create_from(cs.ref, m.e, m.n);
        for (int step = 0; step < 10; step++) {
            rb_context *ctx = cs.c[rbt_below(&g, (uint32_t)cs.n)];
            rb_scene *copy = NULL;
            ck_assert_int_eq(rb_scene_clone(ctx, s, &copy), RB_OK);
            model mm = {0};
            model_copy(&mm, &m);
            int ok = 1;
            int spoil = rbt_below(&g, 5) == 0; /* a refused change */
            if (mm.n && rbt_below(&g, 2)) {
                size_t k = 1 + rbt_below(&g, 6);
                uint32_t ids[8];
                rb_element el[8];
                for (size_t j = 0; j < k; j++) {
                    ids[j] = rbt_below(&g, (uint32_t)mm.n);
                    random_element(&g, mm.e[ids[j]].kind, &el[j]);
                }
                if (spoil) {
                    size_t j = rbt_below(&g, (uint32_t)k);
                    rb_kind other =
                        (rb_kind)((el[j].kind + 1 + rbt_below(&g, 4)) %
                                  RB_KIND_COUNT);
                    random_element(&g, other, &el[j]);
                }
                int rc = rb_scene_set_elements(ctx, copy, ids, el, k);
                ck_assert_int_eq(rc, spoil ? RB_EINVAL : RB_OK);
                if (rc == RB_OK)
                    for (size_t j = 0; j < k; j++)
                        mm.e[ids[j]] = el[j];
                ok = rc == RB_OK;
                spoil = 0;
            }
            if (ok && rbt_below(&g, 3)) {
                rb_element add[16];
                size_t na = random_elements(&g, 1 + rbt_below(&g, 12), add);
                if (spoil)
                    add[rbt_below(&g, (uint32_t)na)].as.box.min[0] = NAN;
                int rc = append_to(ctx, copy, &mm, add, na);
                if (spoil)
                    ck_assert_int_eq(rc, RB_EINPUT);
                else
                    ck_assert_int_eq(rc, RB_OK);
                ok = rc == RB_OK;
            }
            if (ok) {
                rb_scene_destroy(s);
                s = copy;
                model_copy(&m, &mm);
            } else {
                rb_scene_destroy(copy);
            }
            free(mm.e);
            char what[64];
            snprintf(what, sizeof what, "sequence %d step %d", seq, step);
            check_scene(&cs, s, &m, &g, 60, what);
        }
        rb_scene_destroy(s);
        free(m.e);
    }
    contexts_free(&cs);
}
END_TEST

START_TEST(test_stats_counts)
{
    rb_context *ctx = cpu_context(RB_HIERARCHY_AUTO);
    rbt_rng g = {71};
    model m = {0};
    size_t want[RB_KIND_COUNT] = {3, 70, 2, 5, 1};
    for (int k = 0; k < RB_KIND_COUNT; k++)
        for (size_t i = 0; i < want[k]; i++) {
            rb_element e;
            random_element(&g, (rb_kind)k, &e);
            model_add(&m, &e);
        }
    rb_scene *s = create_from(ctx, m.e, m.n);
    rb_scene_stats st;
    rb_scene_stats_get(s, &st);
    ck_assert_uint_eq(st.version, 1);
    ck_assert_uint_eq(st.elements, 81);
    for (int k = 0; k < RB_KIND_COUNT; k++)
        ck_assert_uint_eq(st.kinds[k], want[k]);
    ck_assert_uint_eq(st.boxes, 3);
    ck_assert(st.shape_nodes > 0);
    ck_assert(st.host_bytes > st.bvh_bytes);
    ck_assert(fabs(st.bytes_per_box * 81 - (double)st.host_bytes) < 1e-6);
    /* Ids: boxes 0-2, obbs 3-72, xboxes 73-74, spheres 75-79, plane 80. */
    size_t idx;
    ck_assert_int_eq(rb_scene_element_kind(s, 2, &idx), RB_KIND_BOX);
    ck_assert_int_eq(rb_scene_element_kind(s, 3, &idx), RB_KIND_OBB);
    ck_assert_uint_eq(idx, 0);
    ck_assert_int_eq(rb_scene_element_kind(s, 74, &idx), RB_KIND_XBOX);
    ck_assert_uint_eq(idx, 1);
    ck_assert_int_eq(rb_scene_element_kind(s, 80, &idx), RB_KIND_PLANE);
    ck_assert_int_eq(rb_scene_element_kind(s, 81, &idx), -1);
    rb_sphere sp = {{0, 0, 0}, 1};
    rb_box bx = {{0, 0, 0}, {1, 1, 1}};
    rb_shapes one = {.spheres = &sp, .n_spheres = 1};
    ck_assert_int_eq(rb_scene_append_shapes(ctx, s, &bx, 1, &one), RB_OK);
    rb_scene_stats_get(s, &st);
    ck_assert_uint_eq(st.version, 2);
    ck_assert_uint_eq(st.elements, 83);
    ck_assert_uint_eq(st.kinds[RB_KIND_BOX], 4);
    ck_assert_uint_eq(st.kinds[RB_KIND_SPHERE], 6);
    ck_assert_int_eq(rb_scene_element_kind(s, 81, &idx), RB_KIND_BOX);
    ck_assert_uint_eq(idx, 3);
    ck_assert_int_eq(rb_scene_element_kind(s, 82, &idx), RB_KIND_SPHERE);
    ck_assert_uint_eq(idx, 5);
    /* The box of id 81 is box 3 for rb_scene_box. */
    rb_box back;
    ck_assert_int_eq(rb_scene_box(s, 3, &back), RB_OK);
    ck_assert(memcmp(&back, &bx, sizeof bx) == 0);
    /* Creation errors name the kind, the index within it, the field. */
    rb_scene *t = NULL;
    packed p;
    pack(m.e, m.n, NULL, &p);
    p.spheres[4].radius = NAN;
    p.xboxes[1].a[2][3] = INFINITY;
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 3, p.boxes, p.n_boxes,
                                            &p.sh, &t),
                     RB_EINPUT);
    ck_assert_ptr_null(t);
    const rb_error *err = rb_context_error(ctx);
    ck_assert_int_eq(err->element, RB_ELEMENT_XBOX);
    ck_assert_uint_eq(err->index, 1);
    ck_assert_int_eq(err->field, 17);
    p.boxes[2].min[2] = NAN;
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 3, p.boxes, p.n_boxes,
                                            &p.sh, &t),
                     RB_EINPUT);
    ck_assert_int_eq(err->element, RB_ELEMENT_BOX);
    ck_assert_uint_eq(err->index, 2);
    packed_free(&p);
    rb_scene_destroy(s);
    free(m.e);
    rb_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scene_shapes");
    TCase *tc = tcase_create("scenes");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_create_equals_inline);
    tcase_add_test(tc, test_boxes_only_unchanged);
    tcase_add_test(tc, test_append_interleaves);
    tcase_add_test(tc, test_set_each_kind);
    tcase_add_test(tc, test_set_refused);
    tcase_add_test(tc, test_clone_independent);
    tcase_add_test(tc, test_random_patches);
    tcase_add_test(tc, test_stats_counts);
    suite_add_tcase(s, tc);
    return rbt_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
