/* http_expect.c - see http_expect.h. */
#include "http_expect.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binary_codec.h"
#include "float_text.h"
#include "json_response.h"
#include "sbuf.h"

void rbt_query_random(rbt_query *q, rbt_rng *rng, rb_mode mode,
                      unsigned dims, size_t n_rays, size_t n_boxes,
                      int ranges, uint32_t max_hits)
{
    memset(q, 0, sizeof *q);
    q->mode = mode;
    q->dims = dims;
    q->ranges = ranges;
    q->max_hits = max_hits;
    if (mode == RB_MODE_PAIRS)
        n_boxes = n_rays;
    q->n_rays = n_rays;
    q->n_boxes = n_boxes;
    q->rays = calloc(n_rays ? n_rays : 1, sizeof *q->rays);
    q->boxes = calloc(n_boxes ? n_boxes : 1, sizeof *q->boxes);
    ck_assert_ptr_nonnull(q->rays);
    ck_assert_ptr_nonnull(q->boxes);
    for (size_t i = 0; i < n_boxes; i++) {
        rb_box *b = &q->boxes[i];
        for (unsigned a = 0; a < dims; a++) {
            float c = rbt_uniform(rng, -8, 8), h = rbt_uniform(rng, 0.1f, 2);
            b->min[a] = c - h;
            b->max[a] = c + h;
        }
    }
    for (size_t i = 0; i < n_rays; i++) {
        rb_ray *r = &q->rays[i];
        for (unsigned a = 0; a < dims; a++) {
            r->origin[a] = rbt_uniform(rng, -10, 10);
            /* Some axis-parallel rays: zero components are an edge case. */
            r->dir[a] = rbt_below(rng, 8) == 0 ? 0.0f
                                               : rbt_uniform(rng, -1, 1);
        }
        if (mode == RB_MODE_PAIRS && rbt_below(rng, 2)) {
            /* Aim at the ray's own box half of the time. */
            for (unsigned a = 0; a < dims; a++)
                r->dir[a] = (q->boxes[i].min[a] + q->boxes[i].max[a]) / 2 -
                            r->origin[a];
        }
        r->tmin = 0;
        r->tmax = INFINITY;
        if (ranges) {
            r->tmin = rbt_below(rng, 2) ? 0 : rbt_uniform(rng, 0, 2);
            r->tmax = rbt_below(rng, 3) == 0 ? INFINITY
                                              : r->tmin + rbt_uniform(rng, 0, 30);
        }
    }
}

void rbt_query_free(rbt_query *q)
{
    free(q->rays);
    free(q->boxes);
    q->rays = NULL;
    q->boxes = NULL;
}

static void put_float(sbuf *b, float x)
{
    char t[RB_FLOAT_TEXT_MAX];
    if (isinf(x)) {
        sbuf_add(b, "null");
        return;
    }
    rb_float_format(x, t);
    sbuf_add(b, t);
}

static void put_boxes(sbuf *b, const rbt_query *q)
{
    sbuf_add(b, "[");
    for (size_t i = 0; i < q->n_boxes; i++) {
        sbuf_add(b, i ? ",[" : "[");
        for (unsigned k = 0; k < 2 * q->dims; k++) {
            if (k)
                sbuf_add(b, ",");
            unsigned a = k % q->dims;
            put_float(b, k < q->dims ? q->boxes[i].min[a] : q->boxes[i].max[a]);
        }
        sbuf_add(b, "]");
    }
    sbuf_add(b, "]");
}

char *rbt_query_json(const rbt_query *q, int with_boxes, size_t *len)
{
    sbuf b;
    sbuf_init(&b);
    sbuf_printf(&b, "{\"mode\":\"%s\",\"dims\":%u", rb_mode_name(q->mode),
                 q->dims);
    if (q->max_hits)
        sbuf_printf(&b, ",\"max_hits\":%u", q->max_hits);
    sbuf_add(&b, ",\"rays\":[");
    for (size_t i = 0; i < q->n_rays; i++) {
        const rb_ray *r = &q->rays[i];
        sbuf_add(&b, i ? ",[" : "[");
        for (unsigned a = 0; a < q->dims; a++) {
            put_float(&b, r->origin[a]);
            sbuf_add(&b, ",");
        }
        for (unsigned a = 0; a < q->dims; a++) {
            put_float(&b, r->dir[a]);
            if (a + 1 < q->dims || q->ranges)
                sbuf_add(&b, ",");
        }
        if (q->ranges) {
            put_float(&b, r->tmin);
            sbuf_add(&b, ",");
            put_float(&b, r->tmax);
        }
        sbuf_add(&b, "]");
    }
    sbuf_add(&b, "]");
    if (with_boxes) {
        sbuf_add(&b, ",\"boxes\":");
        put_boxes(&b, q);
    }
    sbuf_add(&b, "}");
    return sbuf_take(&b, len);
}

char *rbt_scene_json(const rbt_query *q, size_t *len)
{
    sbuf b;
    sbuf_init(&b);
    sbuf_printf(&b, "{\"dims\":%u,\"boxes\":", q->dims);
    put_boxes(&b, q);
    sbuf_add(&b, "}");
    return sbuf_take(&b, len);
}

static void *binary(const rbt_query *q, int kind, int with_rays,
                    int with_boxes, size_t *len)
{
    size_t rw = rbb_ray_record_bytes(q->dims, q->ranges ? RBB_FLAG_RANGES : 0);
    size_t bw = rbb_box_record_bytes(q->dims);
    size_t nr = with_rays ? q->n_rays : 0, nb = with_boxes ? q->n_boxes : 0;
    *len = RBB_HEADER_SIZE + nr * rw + nb * bw;
    uint8_t *out = malloc(*len);
    ck_assert_ptr_nonnull(out);
    rbb_header h = {.version = RBB_VERSION, .header_size = RBB_HEADER_SIZE,
                    .kind = (uint8_t)kind, .dims = (uint8_t)q->dims,
                    .n_rays = nr, .n_boxes = nb};
    if (kind == RBB_KIND_INTERSECT) {
        h.mode = (uint8_t)q->mode;
        h.flags = q->ranges ? RBB_FLAG_RANGES : 0;
        h.max_hits = q->max_hits;
        h.tmin = 0;
        h.tmax = INFINITY;
    }
    rbb_header_encode(&h, out);
    uint8_t *p = out + RBB_HEADER_SIZE;
    for (size_t i = 0; i < nr; i++) {
        float v[8];
        unsigned k = 0, d = q->dims;
        for (unsigned a = 0; a < d; a++)
            v[k++] = q->rays[i].origin[a];
        for (unsigned a = 0; a < d; a++)
            v[k++] = q->rays[i].dir[a];
        if (q->ranges) {
            v[k++] = q->rays[i].tmin;
            v[k++] = q->rays[i].tmax;
        }
        memcpy(p, v, rw);
        p += rw;
    }
    for (size_t i = 0; i < nb; i++) {
        float v[6];
        unsigned k = 0, d = q->dims;
        for (unsigned a = 0; a < d; a++)
            v[k++] = q->boxes[i].min[a];
        for (unsigned a = 0; a < d; a++)
            v[k++] = q->boxes[i].max[a];
        memcpy(p, v, bw);
        p += bw;
    }
    return out;
}

void *rbt_query_binary(const rbt_query *q, int with_boxes, size_t *len)
{
    return binary(q, RBB_KIND_INTERSECT, 1, with_boxes, len);
}

void *rbt_scene_binary(const rbt_query *q, size_t *len)
{
    return binary(q, RBB_KIND_SCENE, 0, 1, len);
}

/* ------------------------------------------------------------------------
 * Expected answers
 */
static int alloc_results(const rbt_query *q, uint32_t max_hits,
                         rb_results *res)
{
    size_t n = q->n_rays ? q->n_rays : 1;
    memset(res, 0, sizeof *res);
    res->capacity = q->n_rays;
    res->hits = calloc(n, sizeof *res->hits);
    res->any = calloc(n, 1);
    res->counts = calloc(n, sizeof *res->counts);
    res->list = calloc(n * max_hits, sizeof *res->list);
    return res->hits && res->any && res->counts && res->list ? 0 : -1;
}

void rbt_expect_run(rb_context *ctx, const rbt_query *q,
                    const rb_scene *scene, uint64_t version, rbt_expect *e)
{
    memset(e, 0, sizeof *e);
    e->q = *q;
    e->q.rays = NULL;
    e->q.boxes = NULL;
    e->q.max_hits = q->max_hits ? q->max_hits : 64;
    e->has_version = scene != NULL;
    e->version = version;
    ck_assert_int_eq(alloc_results(q, e->q.max_hits, &e->res), 0);

    /* The library's records for the query's dims. */
    size_t nr = q->n_rays ? q->n_rays : 1, nb = q->n_boxes ? q->n_boxes : 1;
    void *rays = q->rays, *boxes = q->boxes;
    rb_ray2 *r2 = NULL;
    rb_box2 *b2 = NULL;
    if (q->dims == 2) {
        r2 = calloc(nr, sizeof *r2);
        b2 = calloc(nb, sizeof *b2);
        for (size_t i = 0; i < q->n_rays; i++)
            r2[i] = (rb_ray2){{q->rays[i].origin[0], q->rays[i].origin[1]},
                              {q->rays[i].dir[0], q->rays[i].dir[1]},
                              q->rays[i].tmin, q->rays[i].tmax};
        for (size_t i = 0; i < q->n_boxes; i++)
            b2[i] = (rb_box2){{q->boxes[i].min[0], q->boxes[i].min[1]},
                              {q->boxes[i].max[0], q->boxes[i].max[1]}};
        rays = r2;
        boxes = b2;
    }
    rb_query lq = {.mode = q->mode, .dims = q->dims, .rays = rays,
                   .n_rays = q->n_rays, .boxes = boxes,
                   .n_boxes = q->n_boxes, .scene = scene,
                   .max_hits = e->q.max_hits};
    int st = rb_intersect(ctx, &lq, &e->res);
    free(r2);
    free(b2);
    ck_assert_msg(st == RB_OK, "in-process query failed: %s",
                  rb_context_error(ctx)->message);
    e->status = 200;

    rbj_response resp = {.mode = q->mode, .n_rays = q->n_rays,
                         .max_hits = e->q.max_hits, .results = &e->res,
                         .has_scene_version = e->has_version,
                         .scene_version = version};
    rbj_meta_from_run(&resp.meta, &e->res.info);
    rbj_writer w;
    rbj_writer_init(&w, &resp);
    sbuf b;
    sbuf_init(&b);
    char buf[4096];
    size_t n;
    while ((n = rbj_writer_fill(&w, buf, sizeof buf)) > 0)
        sbuf_addn(&b, buf, n);
    e->json = sbuf_take(&b, &e->json_len);
    const char *m = strstr(e->json, ",\"meta\":");
    ck_assert_ptr_nonnull(m);
    e->json_len = (size_t)(m - e->json);
}

void rbt_expect_free(rbt_expect *e)
{
    free(e->json);
    free(e->res.hits);
    free(e->res.any);
    free(e->res.counts);
    free(e->res.list);
    memset(e, 0, sizeof *e);
}

int rbt_check_json(const rbt_expect *e, const char *body, size_t len,
                   char *why, size_t cap)
{
    const char *m = strstr(body, ",\"meta\":");
    size_t n = m ? (size_t)(m - body) : len;
    if (n == e->json_len && memcmp(body, e->json, n) == 0)
        return 0;
    size_t at = 0;
    while (at < n && at < e->json_len && body[at] == e->json[at])
        at++;
    snprintf(why, cap, "JSON answers differ at byte %zu: got '%.60s', "
             "expected '%.60s'", at, body + at, e->json + at);
    return -1;
}

int rbt_check_binary(const rbt_expect *e, const void *data, size_t len,
                     char *why, size_t cap)
{
    const rbt_query *q = &e->q;
    if (len < RBB_HEADER_SIZE) {
        snprintf(why, cap, "binary answer of %zu bytes", len);
        return -1;
    }
    rbb_header h;
    rbb_header_decode(data, &h);
    if (!h.magic_ok || h.version != 1 || h.header_size != 64 ||
        h.kind != RBB_KIND_RESULT || h.mode != q->mode ||
        h.dims != q->dims || h.n_rays != q->n_rays ||
        !!(h.flags & RBB_FLAG_SCENE_VERSION) != e->has_version ||
        (e->has_version && h.scene_version != e->version)) {
        snprintf(why, cap, "binary header: kind %u mode %u dims %u rays "
                 "%llu flags %u version %llu", h.kind, h.mode, h.dims,
                 (unsigned long long)h.n_rays, h.flags,
                 (unsigned long long)h.scene_version);
        return -1;
    }
    const uint8_t *p = (const uint8_t *)data + RBB_HEADER_SIZE;
    size_t body = len - RBB_HEADER_SIZE, n = q->n_rays;
    const void *want = NULL;
    size_t want_len = 0;
    switch (q->mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        want = e->res.hits;
        want_len = n * sizeof(rb_hit);
        break;
    case RB_MODE_ANY:
        want = e->res.any;
        want_len = n;
        break;
    case RB_MODE_COUNT:
        want = e->res.counts;
        want_len = n * 4;
        break;
    case RB_MODE_ALL: {
        if (h.max_hits != q->max_hits) {
            snprintf(why, cap, "max_hits %u, expected %u", h.max_hits,
                     q->max_hits);
            return -1;
        }
        size_t entries = 0;
        for (size_t i = 0; i < n; i++)
            entries += e->res.counts[i] < q->max_hits ? e->res.counts[i]
                                                      : q->max_hits;
        if (h.n_boxes != entries || body != n * 4 + entries * 12 ||
            memcmp(p, e->res.counts, n * 4) != 0) {
            snprintf(why, cap, "all: %llu entries (expected %zu), %zu bytes",
                     (unsigned long long)h.n_boxes, entries, body);
            return -1;
        }
        p += n * 4;
        for (size_t i = 0; i < n; i++) {
            size_t k = e->res.counts[i] < q->max_hits ? e->res.counts[i]
                                                      : q->max_hits;
            if (memcmp(p, &e->res.list[i * q->max_hits], k * 12) != 0) {
                snprintf(why, cap, "all: list of ray %zu differs", i);
                return -1;
            }
            p += k * 12;
        }
        return 0;
    }
    }
    if (body != want_len || memcmp(p, want, want_len) != 0) {
        snprintf(why, cap, "%s: binary arrays differ (%zu bytes, expected "
                 "%zu)", rb_mode_name(q->mode), body, want_len);
        return -1;
    }
    return 0;
}
