/* http.c - the same queries through rayboxd over loopback (--http URL),
 * with the JSON API of SPEC sections 4-5: pairs through POST /v1/intersect,
 * the every-box modes against scenes of each shape created with
 * POST /v1/scenes and queried with POST /v1/scenes/{id}/intersect, then
 * deleted. One client, one kept-alive connection, requests one after
 * another: the figure is what a single client sees, request bodies
 * prepared beforehand (two per size, alternated), the response received
 * whole but not parsed. The server's device is what its responses' "meta"
 * names.
 *
 * A server that is not there, or refuses a request (413 over its limits,
 * 503 busy), gives skipped rows that carry the reason; nothing aborts. */
#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "bench.h"

#define HEALTH_TIMEOUT_S 3L
#define REQUEST_TIMEOUT_S 120L

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t len)
{
    if (b->oom)
        return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + len + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* %.9g reads back as the same float32 (FLT_DECIMAL_DIG). */
static void sb_floats(sbuf *b, const float *v, int n)
{
    char tmp[32];
    sb_put(b, "[", 1);
    for (int i = 0; i < n; i++) {
        int len = snprintf(tmp, sizeof tmp, "%s%.9g", i ? "," : "",
                           (double)v[i]);
        sb_put(b, tmp, (size_t)len);
    }
    sb_put(b, "]", 1);
}

static void sb_rays(sbuf *b, const rb_ray *r, size_t n)
{
    sb_str(b, "\"rays\":[");
    for (size_t i = 0; i < n; i++) {
        float v[8];
        memcpy(v, r[i].origin, sizeof r[i].origin);
        memcpy(v + 3, r[i].dir, sizeof r[i].dir);
        v[6] = r[i].tmin;
        v[7] = r[i].tmax;
        if (i)
            sb_put(b, ",", 1);
        /* An unbounded ray leaves its range to the request's default
         * (JSON has no infinity). */
        sb_floats(b, v, isfinite(r[i].tmax) ? 8 : 6);
    }
    sb_put(b, "]", 1);
}

static void sb_boxes(sbuf *b, const rb_box *x, size_t n)
{
    sb_str(b, "\"boxes\":[");
    for (size_t i = 0; i < n; i++) {
        float v[6];
        memcpy(v, x[i].min, sizeof x[i].min);
        memcpy(v + 3, x[i].max, sizeof x[i].max);
        if (i)
            sb_put(b, ",", 1);
        sb_floats(b, v, 6);
    }
    sb_put(b, "]", 1);
}

/* ------------------------------------------------------------------------
 * The client.
 */
typedef struct client {
    CURL *curl;
    struct curl_slist *json_headers;
    const char *base;
    sbuf resp;
    long code;
    char curl_error[CURL_ERROR_SIZE];
    char error[320]; /* of the last failed request */
} client;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user)
{
    sbuf *b = user;
    sb_put(b, ptr, size * nmemb);
    return b->oom ? 0 : size * nmemb;
}

/* Explains a non-2xx answer from its problem+json title and detail. */
static void problem_text(client *c)
{
    char detail[256] = "";
    yajl_val doc = c->resp.p ? yajl_tree_parse(c->resp.p, NULL, 0) : NULL;
    if (doc) {
        const char *dp[] = {"detail", NULL}, *tp[] = {"title", NULL};
        yajl_val d = yajl_tree_get(doc, dp, yajl_t_string);
        yajl_val t = yajl_tree_get(doc, tp, yajl_t_string);
        snprintf(detail, sizeof detail, "%s%s%s", t ? t->u.string : "",
                 t && d ? ": " : "", d ? d->u.string : "");
        yajl_tree_free(doc);
    }
    snprintf(c->error, sizeof c->error, "rayboxd answered HTTP %ld%s%s",
             c->code, detail[0] ? ": " : "", detail);
}

/* One request; 0 when the server answered 2xx. */
static int request(client *c, const char *method, const char *path,
                   const sbuf *body, long timeout_s)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", c->base, path);
    c->resp.n = 0;
    c->resp.oom = 0;
    if (c->resp.p)
        c->resp.p[0] = '\0';
    c->code = 0;
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, timeout_s);
    if (body) {
        curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body->p);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)body->n);
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->json_headers);
    } else {
        curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, NULL);
    }
    CURLcode rc = curl_easy_perform(c->curl);
    if (rc != CURLE_OK) {
        snprintf(c->error, sizeof c->error, "rayboxd not reachable at %s: %s",
                 c->base, c->curl_error[0] ? c->curl_error
                                           : curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->code);
    if (c->code < 200 || c->code > 299) {
        problem_text(c);
        return -1;
    }
    return 0;
}

static int client_open(client *c, const char *url)
{
    memset(c, 0, sizeof *c);
    c->base = url;
    c->curl = curl_easy_init();
    if (!c->curl)
        return -1;
    /* No "Expect: 100-continue": libcurl would wait for it on big bodies. */
    c->json_headers = curl_slist_append(NULL,
                                        "Content-Type: application/json");
    c->json_headers = curl_slist_append(c->json_headers, "Expect:");
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &c->resp);
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->curl_error);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, HEALTH_TIMEOUT_S);
    curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
    /* Loopback only: never through a proxy from the environment. */
    curl_easy_setopt(c->curl, CURLOPT_NOPROXY, "*");
    return c->json_headers ? 0 : -1;
}

static void client_close(client *c)
{
    curl_slist_free_all(c->json_headers);
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->resp.p);
}

/* A string member of the last response ("meta.device" as {"meta",
 * "device"}), copied to out; "" when absent. */
static void response_string(client *c, const char **path, char *out,
                            size_t len)
{
    out[0] = '\0';
    yajl_val doc = c->resp.p ? yajl_tree_parse(c->resp.p, NULL, 0) : NULL;
    if (!doc)
        return;
    yajl_val v = yajl_tree_get(doc, path, yajl_t_string);
    if (v)
        snprintf(out, len, "%s", v->u.string);
    yajl_tree_free(doc);
}

/* ------------------------------------------------------------------------
 * Tests.
 */
typedef struct http_run {
    const rbench_options *o;
    client c;
    rbench_rows *rows;
    rbench_where where;
    char device[128], driver[64];
} http_run;

typedef struct post_arg {
    client *c;
    const char *path;
    sbuf body[2];
} post_arg;

static int post_call(void *p, uint64_t call, double *device_s)
{
    post_arg *a = p;
    (void)device_s;
    return request(a->c, "POST", a->path, &a->body[call % 2],
                   REQUEST_TIMEOUT_S);
}

typedef struct get_arg {
    client *c;
} get_arg;

static int health_call(void *p, uint64_t call, double *device_s)
{
    get_arg *a = p;
    (void)call;
    (void)device_s;
    return request(a->c, "GET", "/v1/health", NULL, HEALTH_TIMEOUT_S);
}

/* "413 ..." and "503 ..." are the server's limits, not a fault. */
static const char *refusal_status(const client *c)
{
    return c->code == 413 || c->code == 503 || c->code == 0 ? "skipped"
                                                            : "failed";
}

static void timed(http_run *h, const char *test, const char *shape,
                  const char *path, size_t rays, size_t boxes,
                  post_arg *a)
{
    char size[48];
    if (strcmp(test, "pairs") == 0)
        snprintf(size, sizeof size, "%zu", rays);
    else
        snprintf(size, sizeof size, "%zux%zu", rays, boxes);
    rbench_where w = h->where;
    w.category = "http";
    w.test = test;
    w.shape = shape;
    w.path = "http";
    w.rays = rays;
    w.boxes = boxes;
    w.size = size;
    a->path = path;
    rbench_timing t;
    if (a->body[0].oom || a->body[1].oom) {
        rbench_add_status(h->rows, &w, "rays_per_s", "skipped",
                       "out of memory for the request bodies");
        return;
    }
    if (rbench_time(&h->o->plan, post_call, a, &t)) {
        rbench_add_status(h->rows, &w, "rays_per_s", refusal_status(&h->c),
                       h->c.error);
        return;
    }
    double tests = strcmp(test, "pairs") == 0 ? (double)rays
                                              : (double)rays * boxes;
    rbench_add(h->rows, &w, "rays_per_s", "rays/s", rays / t.median,
            rays / t.max, rays / t.min, t.repeats);
    rbench_add(h->rows, &w, "tests_per_s", "tests/s", tests / t.median,
            tests / t.max, tests / t.min, t.repeats);
    rbench_add(h->rows, &w, "request_ms", "ms", t.median * 1e3, t.min * 1e3,
            t.max * 1e3, t.repeats);
}

static void pairs_ladder(http_run *h)
{
    for (size_t i = 0; i < h->o->n_http_rays; i++) {
        size_t n = h->o->http_rays[i];
        char what[96];
        snprintf(what, sizeof what, "http pairs %zu", n);
        rbench_progress(what);
        rbench_pool pool;
        post_arg a = {.c = &h->c};
        if (rbench_pool_make(&pool, RBENCH_POOL_PAIRS, NULL, n, n, 31)) {
            rbench_where w = h->where;
            w.category = "http";
            w.test = "pairs";
            w.path = "http";
            rbench_add_status(h->rows, &w, "rays_per_s", "skipped",
                           "out of host memory for the data");
            continue;
        }
        for (int k = 0; k < 2; k++) {
            sb_str(&a.body[k], "{\"mode\":\"pairs\",\"dims\":3,");
            sb_rays(&a.body[k], pool.rays + (size_t)k * n, n);
            sb_put(&a.body[k], ",", 1);
            sb_boxes(&a.body[k], pool.boxes + (size_t)k * n, n);
            sb_put(&a.body[k], "}", 1);
        }
        timed(h, "pairs", "inline", "/v1/intersect", n, n, &a);
        free(a.body[0].p);
        free(a.body[1].p);
        rbench_pool_free(&pool);
    }
}

static const rb_mode every_box[] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                    RB_MODE_COUNT, RB_MODE_ALL};

static int every_count(const rbench_options *o)
{
    int n = 0;
    for (size_t i = 0; i < sizeof every_box / sizeof *every_box; i++)
        n += (o->modes >> every_box[i]) & 1;
    return n;
}

static void scene_ladders(http_run *h, const rbench_shape *shape)
{
    const rbench_options *o = h->o;
    int every = every_count(o);
    size_t nb = o->scene_boxes;
    char what[96], path[256], size[48];
    snprintf(what, sizeof what, "http scene %s (%zu boxes)", shape->name, nb);
    rbench_progress(what);
    snprintf(size, sizeof size, "%zu boxes", nb);
    rbench_where w = h->where;
    w.category = "http";
    w.test = "scene_create";
    w.shape = shape->name;
    w.path = "http";
    w.boxes = nb;
    w.size = size;
    rb_box *boxes = malloc((nb ? nb : 1) * sizeof *boxes);
    sbuf body = {0};
    if (boxes) {
        shape->boxes(7, boxes, nb);
        sb_str(&body, "{\"dims\":3,");
        sb_boxes(&body, boxes, nb);
        sb_put(&body, "}", 1);
    }
    free(boxes);
    double t0 = rbench_now();
    if (!boxes || body.oom ||
        request(&h->c, "POST", "/v1/scenes", &body, REQUEST_TIMEOUT_S)) {
        rbench_add_status(h->rows, &w, "create_ms", refusal_status(&h->c),
                       !boxes || body.oom ? "out of host memory"
                                          : h->c.error);
        free(body.p);
        rbench_progress_skip((size_t)every * o->n_http_rays);
        return;
    }
    double took = rbench_now() - t0;
    free(body.p);
    char id[160];
    const char *id_path[] = {"id", NULL};
    response_string(&h->c, id_path, id, sizeof id);
    if (!id[0]) {
        rbench_add_status(h->rows, &w, "create_ms", "failed",
                       "POST /v1/scenes answered without an \"id\"");
        rbench_progress_skip((size_t)every * o->n_http_rays);
        return;
    }
    /* One creation, not a calibrated figure: a scene is made once. */
    rbench_add(h->rows, &w, "create_ms", "ms", took * 1e3, took * 1e3,
            took * 1e3, 1);
    snprintf(path, sizeof path, "/v1/scenes/%s/intersect", id);
    for (size_t m = 0; m < sizeof every_box / sizeof *every_box; m++) {
        if (!((o->modes >> every_box[m]) & 1))
            continue;
        for (size_t i = 0; i < o->n_http_rays; i++) {
            size_t n = o->http_rays[i];
            snprintf(what, sizeof what, "http %s %s %zu",
                     rb_mode_name(every_box[m]), shape->name, n);
            rbench_progress(what);
            rbench_pool pool;
            post_arg a = {.c = &h->c};
            if (rbench_pool_make(&pool, RBENCH_POOL_SCENE, shape, n, 0, 37))
                continue;
            for (int k = 0; k < 2; k++) {
                char head[96];
                snprintf(head, sizeof head, "{\"mode\":\"%s\",\"dims\":3,"
                                            "\"max_hits\":%u,",
                         rb_mode_name(every_box[m]), (unsigned)o->max_hits);
                sb_str(&a.body[k], head);
                sb_rays(&a.body[k], pool.rays + (size_t)k * n, n);
                sb_put(&a.body[k], "}", 1);
            }
            timed(h, rb_mode_name(every_box[m]), shape->name, path, n, nb,
                  &a);
            free(a.body[0].p);
            free(a.body[1].p);
            rbench_pool_free(&pool);
        }
    }
    char del[256];
    snprintf(del, sizeof del, "/v1/scenes/%s", id);
    request(&h->c, "DELETE", del, NULL, HEALTH_TIMEOUT_S);
}

size_t rbench_http_steps(const rbench_options *o)
{
    size_t n = 1;
    if ((o->modes >> RB_MODE_PAIRS) & 1)
        n += o->n_http_rays;
    int every = every_count(o);
    if (every)
        n += o->n_shapes * (1 + (size_t)every * o->n_http_rays);
    return n;
}

/* The server is not there: one skipped row per test it would have run,
 * each with the reason. */
static void skip_all(http_run *h, const char *why)
{
    rbench_where w = h->where;
    w.category = "http";
    w.path = "http";
    w.shape = "inline";
    if ((h->o->modes >> RB_MODE_PAIRS) & 1) {
        w.test = "pairs";
        rbench_add_status(h->rows, &w, "rays_per_s", "skipped", why);
    }
    for (size_t s = 0; s < h->o->n_shapes; s++) {
        w.shape = h->o->shapes[s];
        for (size_t m = 0; m < sizeof every_box / sizeof *every_box; m++) {
            if (!((h->o->modes >> every_box[m]) & 1))
                continue;
            w.test = rb_mode_name(every_box[m]);
            rbench_add_status(h->rows, &w, "rays_per_s", "skipped", why);
        }
    }
}

void rbench_run_http(const rbench_options *o, const char *url, rbench_rows *rows)
{
    http_run h = {.o = o, .rows = rows};
    h.where.backend = "http";
    h.where.type = "server";
    snprintf(h.device, sizeof h.device, "rayboxd");
    h.where.device = h.device;
    h.where.driver = h.driver;
    rbench_progress("http: rayboxd health and request latency");
    if (client_open(&h.c, url)) {
        skip_all(&h, "libcurl could not start a session");
        rbench_progress_skip(rbench_http_steps(o) - 1);
        client_close(&h.c);
        return;
    }
    get_arg g = {&h.c};
    rbench_timing t;
    if (rbench_time(&o->plan, health_call, &g, &t)) {
        skip_all(&h, h.c.error);
        rbench_progress_skip(rbench_http_steps(o) - 1);
        client_close(&h.c);
        return;
    }
    /* Which device serves: the "meta" of a one-ray answer. */
    sbuf probe = {0};
    sb_str(&probe, "{\"mode\":\"nearest\",\"rays\":[[0,0,0,1,0,0]],"
                   "\"boxes\":[[4,-1,-1,6,1,1]]}");
    if (!probe.oom &&
        request(&h.c, "POST", "/v1/intersect", &probe, HEALTH_TIMEOUT_S) ==
            0) {
        const char *dp[] = {"meta", "device", NULL};
        const char *bp[] = {"meta", "backend", NULL};
        char dev[120];
        response_string(&h.c, dp, dev, sizeof dev);
        response_string(&h.c, bp, h.driver, sizeof h.driver);
        if (dev[0])
            snprintf(h.device, sizeof h.device, "rayboxd: %s", dev);
    }
    free(probe.p);
    rbench_where w = h.where;
    w.category = "limits";
    w.test = "request_latency";
    w.size = "GET /v1/health";
    rbench_add(rows, &w, "latency", "us", t.median * 1e6, t.min * 1e6,
            t.max * 1e6, t.repeats);
    if ((o->modes >> RB_MODE_PAIRS) & 1)
        pairs_ladder(&h);
    if (every_count(o))
        for (size_t s = 0; s < o->n_shapes; s++)
            scene_ladders(&h, rbench_shape_find(o->shapes[s]));
    client_close(&h.c);
}
