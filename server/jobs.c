/*
 * jobs.c - the work a worker does for a request, with the worker's own
 * rb_context: run the query (or build / patch the scene) and leave the
 * answer in r->reply, ready for the I/O thread to send. Answers are
 * rendered here, off the I/O threads: a binary answer is the library's
 * arrays behind its header (no copy; a small one is copied into one
 * buffer, see binary_answer), a JSON answer is rendered up
 * to PRE_RENDER_MAX bytes and the rest, if any, as it is sent (by the I/O
 * thread, 64 KiB at a time, so memory stays bounded for huge answers).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "block_cache.h"
#include "deadline.h"
#include "render_image.h"
#include "request.h"
#include "sbuf.h"

#define PRE_RENDER_MAX (4u << 20)
/* Binary answers up to this size are copied into one buffer. */
#define BINARY_COPY_MAX (64u << 10)

static void set_error(rbd_request *r, int status, const char *detail)
{
    rbd_reply *y = &r->reply;
    memset(&y->err, 0, sizeof y->err);
    y->err.status = y->status = status;
    snprintf(y->err.detail, sizeof y->err.detail, "%s", detail);
}

static void set_lib_error(rbd_request *r, rbq_source src, rb_context *ctx)
{
    rbd_reply *y = &r->reply;
    rbq_error_from_library(r->body, src, rb_context_error(ctx), &y->err);
    y->status = y->err.status;
}

/* Bytes of JSON per ray, roughly, to size the first buffer. */
static size_t per_ray(const rbq_request *b)
{
    switch (b->mode) {
    case RB_MODE_PAIRS: return 48;
    case RB_MODE_NEAREST: return 56;
    case RB_MODE_ALL: return 16;
    default: return 8;
    }
}

static int render_json(rbd_payload *p, const rbq_request *b,
                       int has_version, uint64_t version)
{
    rbj_response resp = {.mode = b->mode, .n_rays = b->n_rays,
                         .max_hits = b->max_hits, .results = &p->res,
                         .has_scene_version = has_version,
                         .scene_version = version};
    rbj_meta_from_run(&resp.meta, &p->res.info);
    rbj_writer_init(&p->w, &resp);
    size_t cap = 1024 + b->n_rays * per_ray(b);
    if (cap > PRE_RENDER_MAX)
        cap = PRE_RENDER_MAX;
    size_t len = 0;
    for (;;) {
        char *grown = realloc(p->pre, cap);
        if (!grown)
            return -1;
        p->pre = grown;
        len += rbj_writer_fill(&p->w, p->pre + len, cap - len);
        if (rbj_writer_done(&p->w) || cap == PRE_RENDER_MAX)
            break;
        cap = cap * 2 < PRE_RENDER_MAX ? cap * 2 : PRE_RENDER_MAX;
    }
    p->pre_len = len;
    return 0;
}

/* The binary answer: the library's arrays behind the header. Returns 0,
 * or -1 out of memory. */
static int binary_answer(rbd_payload *p, const rbd_request *r,
                         int has_version, uint64_t version)
{
    const rbq_request *b = r->body;
    const rbb_header *in = r->bd ? rbb_decoder_header(r->bd) : NULL;
    rbb_result_info info = {.version = rbb_result_version(b, in ? in->version
                                                                : 0),
                            .mode = b->mode, .dims = b->dims,
                            .n_rays = b->n_rays, .max_hits = b->max_hits,
                            .has_scene_version = has_version,
                            .scene_version = version,
                            .fell_back = p->res.info.fell_back,
                            .elapsed_ms = p->res.info.elapsed_ms,
                            .has_kinds = p->res.kinds != NULL,
                            .has_normals = p->res.normals != NULL};
    if (b->mode == RB_MODE_ALL)
        info.list_entries = rbb_compact_lists(&p->res, b->n_rays,
                                              b->max_hits);
    uint8_t head[RBB_HEADER_MAX];
    size_t head_len = rbb_result_header(&info, head);
    if (head_len > sizeof head) /* never: RBB_HEADER_MAX; says so to gcc */
        return -1;
    const void *part[RBB_PARTS_MAX];
    size_t bytes[RBB_PARTS_MAX];
    int n = rbb_result_layout(&info, &p->res, part, bytes);
    size_t total = head_len;
    for (int i = 0; i < n; i++)
        total += bytes[i];
    /* A small answer goes out as one buffer: libmicrohttpd 0.9.75 sends an
     * iovec answer's headers with a system call and a TCP segment of their
     * own, which cost a small binary request about a quarter of its rate
     * (make load); copying a few KiB costs far less. */
    if (total <= BINARY_COPY_MAX && (p->pre = malloc(total))) {
        memcpy(p->pre, head, head_len);
        p->pre_len = head_len;
        for (int i = 0; i < n; i++)
            if (bytes[i]) {
                memcpy(p->pre + p->pre_len, part[i], bytes[i]);
                p->pre_len += bytes[i];
            }
        return 0;
    }
    /* Larger ones are sent from the arrays. A version 1 header fits
     * p->header; a version 2 one goes in p->pre, and so do the parts that
     * would overflow p->iov (kinds and normals after the hits: 13 of 29
     * bytes a ray are copied, the hits are not). */
    size_t room = sizeof p->iov / sizeof *p->iov;
    int copied_from = 1 + n > (int)room ? (int)room - 2 : n;
    size_t extra = 0;
    for (int i = copied_from; i < n; i++)
        extra += bytes[i];
    uint8_t *first = p->header;
    if (head_len > sizeof p->header || extra) {
        if (!(p->pre = malloc(head_len + extra)))
            return -1;
        first = (uint8_t *)p->pre;
    }
    memcpy(first, head, head_len);
    p->iov[0].iov_base = first;
    p->iov[0].iov_len = head_len;
    p->n_iov = 1;
    for (int i = 0; i < copied_from; i++)
        if (bytes[i]) {
            p->iov[p->n_iov].iov_base = part[i];
            p->iov[p->n_iov].iov_len = bytes[i];
            p->n_iov++;
        }
    if (extra) {
        uint8_t *at = (uint8_t *)p->pre + head_len;
        p->iov[p->n_iov].iov_base = at;
        p->iov[p->n_iov].iov_len = extra;
        p->n_iov++;
        for (int i = copied_from; i < n; i++) {
            memcpy(at, part[i], bytes[i]);
            at += bytes[i];
        }
    }
    return 0;
}

/* rb_query.stop of a request's query, from any of the context's
 * threads: the first reason to stop is kept for the answer. */
static int query_should_stop(void *user)
{
    rbd_request *r = user;
    rbd_server *s = r->srv;
    if (atomic_load(&r->stop_why))
        return 1;
    double now = rbd_now_ms();
    int64_t drain_at = atomic_load(&s->stop_queries_at);
    int why = -1;
    if (s->cfg.max_query_ms &&
        now - r->job.t_started > (double)s->cfg.max_query_ms)
        why = RBD_STOP_DEADLINE;
    else if (drain_at && now >= (double)drain_at)
        why = RBD_STOP_DRAIN;
    else if (deadlines_client_gone(r->conn))
        why = RBD_STOP_CLIENT;
    if (why < 0)
        return 0;
    int none = 0;
    atomic_compare_exchange_strong(&r->stop_why, &none, 1 + why);
    return 1;
}

/* The 503 of a stopped query. */
static void set_stopped(rbd_request *r)
{
    int why = atomic_load(&r->stop_why) - 1;
    char detail[200];
    double ran = rbd_now_ms() - r->job.t_started;
    if (why == RBD_STOP_DEADLINE)
        snprintf(detail, sizeof detail,
                 "the query ran longer than --max-query-ms (%llu ms) and was "
                 "stopped after %.0f ms; send fewer rays or elements a "
                 "request",
                 (unsigned long long)r->srv->cfg.max_query_ms, ran);
    else if (why == RBD_STOP_DRAIN)
        snprintf(detail, sizeof detail,
                 "the server is shutting down; the query was stopped");
    else
        snprintf(detail, sizeof detail,
                 "the client closed the connection; the query was stopped");
    if (why >= 0 && why < 3)
        atomic_fetch_add(&r->srv->metrics.stopped[why], 1);
    set_error(r, 503, detail);
}

/* A piece of a camera's rays, for one thread. */
typedef struct ray_piece {
    const rb_camera *cam;
    uint64_t first;
    size_t n;
    rb_ray *out;
    rb_error err;
    int status;
    pthread_t thread;
    int started;
} ray_piece;

static void *make_piece(void *arg)
{
    ray_piece *k = arg;
    k->status = rb_camera_rays(k->cam, k->first, k->n, k->out + k->first,
                               &k->err);
    return NULL;
}

/* Rays per thread below which one thread makes them all. */
#define CAMERA_PIECE_MIN 65536u
#define CAMERA_PIECES_MAX 64u

/* A camera's rays (SPEC section 8) into r->cam_body, whose memory the
 * handler took; a large picture's are made by up to --threads threads
 * (rb_camera_rays gives the same bits whatever the pieces). 0, or -1
 * with the reply set (422 w = 0 or a ray beyond float32 at some pixel:
 * the lowest such pixel; 503 out of memory). */
static int camera_rays(rbd_request *r)
{
    rbq_request *b = &r->cam_body;
    size_t n = b->n_rays;
    r->cam_rays = rbc_block_alloc((n ? n : 1) * sizeof(rb_ray));
    if (!r->cam_rays) {
        set_error(r, 503, "out of memory for the camera's rays");
        return -1;
    }
    size_t pieces = n / CAMERA_PIECE_MIN;
    uint64_t threads = r->srv->cfg.threads;
    pieces = pieces > threads ? (size_t)threads : pieces;
    pieces = pieces > CAMERA_PIECES_MAX ? CAMERA_PIECES_MAX
             : pieces ? pieces
                      : 1;
    ray_piece k[CAMERA_PIECES_MAX];
    for (size_t i = 0; i < pieces; i++) {
        k[i] = (ray_piece){.cam = b->camera, .first = n * i / pieces,
                           .out = r->cam_rays};
        k[i].n = (size_t)(n * (i + 1) / pieces - k[i].first);
        /* Piece 0 runs here; a thread that cannot start runs here too. */
        k[i].started = i > 0 && pthread_create(&k[i].thread, NULL,
                                               make_piece, &k[i]) == 0;
    }
    for (size_t i = 0; i < pieces; i++)
        if (!k[i].started)
            make_piece(&k[i]);
    int failed = -1;
    for (size_t i = 0; i < pieces; i++) {
        if (k[i].started)
            pthread_join(k[i].thread, NULL);
        if (k[i].status != RB_OK && failed < 0)
            failed = (int)i; /* the pieces are in pixel order */
    }
    rb_error e;
    if (failed >= 0) {
        e = k[failed].err;
        scene_ver_release(r->ver);
        r->ver = NULL;
        rbq_error_from_library(b, RBQ_FROM_CAMERA, &e, &r->reply.err);
        r->reply.status = r->reply.err.status;
        return -1;
    }
    b->rays = r->cam_rays;
    return 0;
}

/* A render's picture: the colours of the nearest answer as a PNG. */
static int png_answer(rbd_request *r, const rb_results *res)
{
    const rbq_request *b = r->body;
    size_t n = b->n_rays;
    uint8_t *rgb = malloc(3 * (n ? n : 1));
    if (!rgb) {
        set_error(r, 503, "out of memory for the picture");
        return -1;
    }
    rbr_image_rgb(b->image, res, n, rgb);
    void *png;
    size_t len;
    char why[200];
    int rc = rbr_png_encode(rgb, (uint32_t)b->camera->viewport[2],
                            (uint32_t)b->camera->viewport[3], &png, &len, why,
                            sizeof why);
    free(rgb);
    if (rc) {
        set_error(r, 503, why);
        return -1;
    }
    r->reply.body = png;
    r->reply.len = len;
    r->reply.kind = OUT_BUFFER;
    r->reply.content_type = "image/png";
    r->reply.status = 200;
    return 0;
}

static rb_query query_of(rbd_request *r)
{
    const rbq_request *b = r->body;
    return (rb_query){.mode = b->mode, .dims = b->dims, .rays = b->rays,
                      .n_rays = b->n_rays, .boxes = b->boxes,
                      .n_boxes = b->n_boxes, .max_hits = b->max_hits,
                      .scene = r->ver ? scene_ver_scene(r->ver) : NULL,
                      .shapes = b->shapes, .outputs = b->outputs,
                      .stop = query_should_stop, .stop_user = r};
}

/* The up-front cost estimate of --max-query-ms (SPEC 11). A query that
 * spreads over the context's threads (job.heavy), on the CPU backend,
 * first runs a trial: TRIAL_RAYS of its rays, evenly spread, through the
 * same path. The estimate is the trial's time x rays / TRIAL_RAYS /
 * --threads, the time if every thread went at the trial's pace (a trial
 * that itself used several threads makes it lower still: no false
 * refusal from that). Past --query-estimate-margin x --max-query-ms the
 * query is answered 413 with the estimate and not run. OpenCL is left to
 * the between-launch 503: a trial of a few rays says little about a full
 * device. */
#define TRIAL_RAYS 64u
/* Queries of fewer rays than this are not tried first (the trial would
 * be too much of the work). */
#define TRIAL_MIN_RAYS (16u * TRIAL_RAYS)

/* 1 with the reply set (413, or 503 when the trial was stopped) when the
 * query is refused; 0 to run it. */
static int estimate_refuses(rbd_request *r, rb_context *ctx)
{
    rbd_server *s = r->srv;
    const rbq_request *b = r->body;
    if (!s->cfg.max_query_ms || !s->cfg.query_estimate_margin ||
        !r->job.heavy || b->mode == RB_MODE_PAIRS ||
        b->n_rays < TRIAL_MIN_RAYS ||
        strcmp(executor_backend(s->ex)->backend, "cpu") != 0)
        return 0;
    rbq_request trial = *b;
    trial.n_rays = TRIAL_RAYS;
    size_t ray_size = b->dims == 2 ? sizeof(rb_ray2) : sizeof(rb_ray);
    /* The trial's arrays are a 16th of the query's at most, and take
     * their share of --max-memory too; without it, or without memory,
     * no trial: the query runs, bounded by the 503. */
    uint64_t share = TRIAL_RAYS * ray_size + rbq_results_bytes(&trial);
    if (budget_try(&s->budget, share))
        return 0;
    uint8_t *rays = malloc(TRIAL_RAYS * ray_size);
    rb_results res;
    memset(&res, 0, sizeof res);
    if (!rays || rbq_results_alloc(&trial, &res)) {
        free(rays);
        rbq_results_free(&res);
        budget_give(&s->budget, share);
        return 0;
    }
    for (size_t i = 0; i < TRIAL_RAYS; i++)
        memcpy(rays + i * ray_size,
               (const uint8_t *)b->rays + (i * b->n_rays / TRIAL_RAYS) *
                                              ray_size,
               ray_size);
    rb_query q = query_of(r);
    q.rays = rays;
    q.n_rays = TRIAL_RAYS;
    double t0 = rbd_now_ms();
    int st = rb_intersect(ctx, &q, &res);
    double took = rbd_now_ms() - t0;
    free(rays);
    rbq_results_free(&res);
    budget_give(&s->budget, share);
    if (st == RB_ECANCELED) {
        set_stopped(r);
        return 1;
    }
    if (st != RB_OK)
        return 0; /* the full run reports it */
    double estimate = took * (double)b->n_rays / TRIAL_RAYS /
                      (double)(s->cfg.threads ? s->cfg.threads : 1);
    double limit = (double)s->cfg.max_query_ms;
    if (estimate <= (double)s->cfg.query_estimate_margin * limit)
        return 0;
    char detail[400];
    snprintf(detail, sizeof detail,
             "the query would run about %.0f ms (a trial of %u of its %zu "
             "rays took %.3f ms, on %llu threads), more than %llu times "
             "--max-query-ms (%llu ms, --query-estimate-margin); send fewer "
             "rays or elements a request",
             estimate, TRIAL_RAYS, b->n_rays, took,
             (unsigned long long)s->cfg.threads,
             (unsigned long long)s->cfg.query_estimate_margin,
             (unsigned long long)s->cfg.max_query_ms);
    atomic_fetch_add_explicit(&s->metrics.refused_estimate, 1,
                              memory_order_relaxed);
    set_error(r, 413, detail);
    return 1;
}

/* The answer's arrays for r's query into a new payload (NULL out of
 * memory). A scene with kinds beyond boxes names them in nearest
 * answers, as a query with such elements of its own does. */
static rbd_payload *payload_for(const rbq_request *b, const scene_ver *ver)
{
    rbd_payload *p = calloc(1, sizeof *p);
    int scene_kinds = ver && b->mode == RB_MODE_NEAREST &&
                      scene_ver_elements(ver) != scene_ver_boxes(ver);
    if (!p || rbq_results_alloc(b, &p->res) ||
        (scene_kinds && !p->res.kinds &&
         !(p->res.kinds = rbc_block_alloc(b->n_rays ? b->n_rays : 1)))) {
        payload_free(p);
        return NULL;
    }
    return p;
}

/* After the query ran (st its status, p->res its answer, slab_tests what
 * the metrics count for it): the answer or the error into r->reply; p is
 * taken over. */
static void finish_intersect(rbd_request *r, rbd_payload *p, int st,
                             rb_context *ctx, uint64_t slab_tests)
{
    const rbq_request *b = r->body;
    int has_version = r->ver != NULL;
    uint64_t version = has_version ? scene_ver_version(r->ver) : 0;
    /* The version is not needed any more: a DELETE or PATCH may free it. */
    scene_ver_release(r->ver);
    r->ver = NULL;
    if (st == RB_ECANCELED) {
        payload_free(p);
        set_stopped(r);
        return;
    }
    if (st != RB_OK) {
        payload_free(p);
        set_lib_error(r, RBQ_FROM_INTERSECT, ctx);
        return;
    }
    metrics_query(&r->srv->metrics, b->n_rays, slab_tests,
                  p->res.info.fell_back);
    if (r->route == ROUTE_SCENE_RENDER && !r->out_binary) {
        png_answer(r, &p->res);
        payload_free(p);
        return;
    }
    if (r->out_binary ? binary_answer(p, r, has_version, version)
                      : render_json(p, b, has_version, version)) {
        payload_free(p);
        set_error(r, 503, "out of memory for the answer");
        return;
    }
    r->reply.binary = r->out_binary;
    r->reply.payload = p;
    r->reply.kind = OUT_PAYLOAD;
    r->reply.status = 200;
}

void job_intersect(rbd_job *job, rb_context *ctx)
{
    rbd_request *r = (rbd_request *)job;
    if (r->body == &r->cam_body && !r->cam_body.rays && camera_rays(r))
        return;
    rbd_payload *p = payload_for(r->body, r->ver);
    if (!p) {
        set_error(r, 503, "out of memory for the results");
        return;
    }
    if (estimate_refuses(r, ctx)) {
        payload_free(p);
        scene_ver_release(r->ver);
        r->ver = NULL;
        return;
    }
    rb_query q = query_of(r);
    atomic_fetch_add_explicit(&r->srv->metrics.launches, 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&r->srv->metrics.launch_requests, 1,
                              memory_order_relaxed);
    int st = rb_intersect(ctx, &q, &p->res);
    finish_intersect(r, p, st, ctx, p->res.info.slab_tests);
}

/* Merged queries (rbd_merge_ops, executor.h) ---------------------------
 *
 * Small queries on the same scene version, mode and outputs (and, in
 * `all`, max_hits) are one rb_intersect call over their rays one after
 * another; each answer is then its slice of the merged arrays, which
 * are per ray (`all`: max_hits entries a ray), so it is the lone run's
 * answer bit for bit. The call stops only when every member would have
 * stopped (each keeps its own reason: its client gone, the deadline, the
 * drain); a member stopped alone gets its 503 and the others their
 * answers. A call that fails (an invalid ray, out of memory, a device
 * error) runs each member alone, so that each gets the answer or error
 * of its own lone run. */

static int merge_same(const rbd_job *ja, const rbd_job *jb)
{
    const rbd_request *a = (const rbd_request *)ja;
    const rbd_request *c = (const rbd_request *)jb;
    const rbq_request *x = a->body, *y = c->body;
    return a->ver && c->ver && scene_ver_scene(a->ver) ==
                                   scene_ver_scene(c->ver) &&
           a->route == c->route && x->mode == y->mode && x->dims == y->dims &&
           x->outputs == y->outputs &&
           (x->mode != RB_MODE_ALL || x->max_hits == y->max_hits);
}

typedef struct merged {
    rbd_request **m;
    unsigned n;
} merged;

/* rb_query.stop of a merged call: asks every member (each records its
 * own reason) and stops when all would stop. */
static int merged_should_stop(void *user)
{
    merged *g = user;
    int all = 1;
    for (unsigned i = 0; i < g->n; i++)
        all &= query_should_stop(g->m[i]) != 0;
    return all;
}

/* Copies rays [at, at + n) of the merged answer into one member's. */
static void scatter(const rb_results *all, size_t at, size_t n,
                    uint32_t max_hits, rb_results *one)
{
    if (one->hits)
        memcpy(one->hits, all->hits + at, n * sizeof *one->hits);
    if (one->kinds)
        memcpy(one->kinds, all->kinds + at, n);
    if (one->normals)
        memcpy(one->normals, all->normals + 3 * at,
               3 * n * sizeof *one->normals);
    if (one->any)
        memcpy(one->any, all->any + at, n);
    if (one->counts)
        memcpy(one->counts, all->counts + at, n * sizeof *one->counts);
    if (one->list)
        memcpy(one->list, all->list + at * max_hits,
               n * max_hits * sizeof *one->list);
    one->info = all->info;
}

static void run_alone(rbd_request **m, unsigned n, rb_context *ctx)
{
    for (unsigned i = 0; i < n; i++)
        job_intersect(&m[i]->job, ctx);
}

static void merge_run(rbd_job **jobs, unsigned n_jobs, rb_context *ctx)
{
    rbd_request *m[RBD_MERGE_JOBS_MAX];
    rbd_payload *p[RBD_MERGE_JOBS_MAX];
    unsigned n = 0;
    size_t rays = 0;
    for (unsigned i = 0; i < n_jobs; i++) {
        rbd_request *r = (rbd_request *)jobs[i];
        /* A camera whose rays fail has its answer (422) already. */
        if (r->body == &r->cam_body && !r->cam_body.rays && camera_rays(r))
            continue;
        m[n++] = r;
        rays += r->body->n_rays;
    }
    if (n < 2 || !rays) {
        run_alone(m, n, ctx);
        return;
    }
    rbd_server *s = m[0]->srv;
    /* The merged arrays take their share of the memory budget too; none
     * left, the members run alone in the shares they hold. */
    rbq_request all_body = *m[0]->body;
    all_body.n_rays = rays;
    size_t ray_size = all_body.dims == 2 ? sizeof(rb_ray2) : sizeof(rb_ray);
    uint64_t scratch = rays * ray_size + rbq_results_bytes(&all_body);
    if (budget_try(&s->budget, scratch)) {
        run_alone(m, n, ctx);
        return;
    }
    rbd_payload *all = NULL;
    uint8_t *all_rays = rbc_block_alloc(rays * ray_size);
    unsigned got = 0;
    if (all_rays && (all = payload_for(&all_body, m[0]->ver)))
        for (; got < n && (p[got] = payload_for(m[got]->body, m[got]->ver));
             got++)
            ;
    if (got < n) {
        for (unsigned i = 0; i < got; i++)
            payload_free(p[i]);
        payload_free(all);
        rbc_block_free(all_rays);
        budget_give(&s->budget, scratch);
        run_alone(m, n, ctx);
        return;
    }
    size_t at = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t k = m[i]->body->n_rays * ray_size;
        if (k)
            memcpy(all_rays + at, m[i]->body->rays, k);
        at += k;
    }
    merged g = {.m = m, .n = n};
    rb_query q = query_of(m[0]);
    q.rays = all_rays;
    q.n_rays = rays;
    q.stop = merged_should_stop;
    q.stop_user = &g;
    int st = rb_intersect(ctx, &q, &all->res);
    rbc_block_free(all_rays);
    rbd_metrics *mt = &s->metrics;
    if (st != RB_OK && st != RB_ECANCELED) {
        /* Each alone gets its own error (the lowest invalid ray of its
         * own rays) or answer. */
        for (unsigned i = 0; i < n; i++)
            payload_free(p[i]);
        payload_free(all);
        budget_give(&s->budget, scratch);
        run_alone(m, n, ctx);
        return;
    }
    atomic_fetch_add_explicit(&mt->launches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->launch_requests, n, memory_order_relaxed);
    at = 0;
    uint64_t tests = all->res.info.slab_tests;
    unsigned again = 0; /* members to run alone, moved to m's front */
    for (unsigned i = 0; i < n; i++) {
        size_t k = m[i]->body->n_rays;
        int mine = RB_OK;
        if (atomic_load(&m[i]->stop_why))
            mine = RB_ECANCELED; /* this member alone would have stopped */
        else if (st == RB_OK)
            scatter(&all->res, at, k, all_body.max_hits, &p[i]->res);
        at += k;
        if (mine == RB_OK && st != RB_OK) {
            /* Stopped, but not for this member's sake (never, as the
             * call stops only when all would): it runs alone. */
            payload_free(p[i]);
            m[again++] = m[i];
            continue;
        }
        finish_intersect(m[i], p[i], mine, ctx,
                         (uint64_t)((double)tests * (double)k /
                                    (double)rays));
    }
    payload_free(all);
    budget_give(&s->budget, scratch);
    run_alone(m, again, ctx);
}

const rbd_merge_ops rbd_intersect_merge = {.same = merge_same,
                                           .run = merge_run};

static void json_reply(rbd_request *r, int status, sbuf *o)
{
    size_t len;
    char *body = sbuf_take(o, &len);
    if (!body) {
        set_error(r, 503, "out of memory");
        return;
    }
    r->reply.body = body;
    r->reply.len = len;
    r->reply.kind = OUT_BUFFER;
    r->reply.status = status;
}

void job_scene_create(rbd_job *job, rb_context *ctx)
{
    rbd_request *r = (rbd_request *)job;
    const rbq_request *b = r->body;
    double t0 = rbd_now_ms();
    rb_scene *scene = NULL;
    if (rb_scene_create_shapes(ctx, b->dims, b->boxes, b->n_boxes,
                               &b->shapes, &scene)) {
        set_lib_error(r, RBQ_FROM_CREATE, ctx);
        return;
    }
    rb_scene_stats st;
    rb_scene_stats_get(scene, &st);
    char id[RBD_SCENE_ID_MAX + 1], why[256];
    uint8_t key[RBD_OWNER_KEY_BYTES];
    int keyed = r->srv->auth && r->owner &&
                auth_owner_key(r->srv->auth, r->owner, key) == 0;
    disk_chunk elements = {.boxes = b->boxes, .n_boxes = b->n_boxes,
                           .shapes = b->shapes};
    int rc = store_insert(r->srv->store, scene, rbd_now_ms() - t0, r->owner,
                          keyed ? key : NULL, &elements, id, why,
                          sizeof why);
    if (rc) {
        set_error(r, rc, why);
        return;
    }
    memcpy(r->scene_id, id, strlen(id) + 1); /* for the log */
    snprintf(r->reply.location, sizeof r->reply.location, "/v1/scenes/%s",
             id);
    sbuf o;
    sbuf_init(&o);
    sbuf_add(&o, "{\"id\":");
    sbuf_json_str(&o, id);
    sbuf_printf(&o, ",\"version\":1,\"boxes\":%zu", b->n_boxes);
    store_kinds_json(&st, &o);
    sbuf_printf(&o, ",\"dims\":%u}", b->dims);
    json_reply(r, 201, &o);
}

void job_scene_patch(rbd_job *job, rb_context *ctx)
{
    rbd_request *r = (rbd_request *)job;
    uint64_t version = 0;
    rb_scene_stats st;
    int rc = store_patch(r->srv->store, ctx, r->scene_id, r->owner, r->body,
                         &version, &st, &r->reply.err);
    if (rc) {
        r->reply.status = rc;
        return;
    }
    sbuf o;
    sbuf_init(&o);
    sbuf_add(&o, "{\"id\":");
    sbuf_json_str(&o, r->scene_id);
    sbuf_printf(&o, ",\"version\":%llu,\"boxes\":%llu",
                (unsigned long long)version, (unsigned long long)st.boxes);
    store_kinds_json(&st, &o);
    sbuf_add(&o, "}");
    json_reply(r, 200, &o);
}

/* The visibility answer: binary, the header (kind 130) and the bits as
 * one buffer; JSON, the visible targets of each observer. */
static int visibility_json(const rbq_request *b, const uint8_t *bits,
                           uint64_t version, const rb_run_info *info,
                           sbuf *o)
{
    size_t stride = (b->n_targets + 7) / 8;
    sbuf_printf(o, "{\"observers\":%zu,\"targets\":%zu,\"visible\":[",
                b->n_observers, b->n_targets);
    uint64_t *counts = malloc((b->n_observers ? b->n_observers : 1) *
                              sizeof *counts);
    if (!counts)
        return -1;
    for (size_t i = 0; i < b->n_observers; i++) {
        const uint8_t *row = bits + i * stride;
        uint64_t n = 0;
        sbuf_add(o, i ? ",[" : "[");
        for (size_t j = 0; j < b->n_targets; j++)
            if (row[j / 8] >> (j % 8) & 1)
                sbuf_printf(o, n++ ? ",%zu" : "%zu", j);
        sbuf_add(o, "]");
        counts[i] = n;
    }
    sbuf_add(o, "],\"visible_count\":[");
    for (size_t i = 0; i < b->n_observers; i++)
        sbuf_printf(o, i ? ",%llu" : "%llu", (unsigned long long)counts[i]);
    free(counts);
    sbuf_printf(o, "],\"scene_version\":%llu,\"meta\":{\"backend\":",
                (unsigned long long)version);
    sbuf_json_str(o, info->backend);
    sbuf_add(o, ",\"device\":");
    sbuf_json_str(o, info->device);
    sbuf_printf(o, ",\"elapsed_ms\":%.3f,\"fell_back\":%s}}",
                info->elapsed_ms, info->fell_back ? "true" : "false");
    return sbuf_failed(o) ? -1 : 0;
}

void job_visibility(rbd_job *job, rb_context *ctx)
{
    rbd_request *r = (rbd_request *)job;
    const rbq_request *b = r->body;
    size_t bytes = (size_t)rb_visibility_bytes(b->n_observers, b->n_targets);
    size_t head = r->out_binary ? RBB_HEADER_SIZE : 0;
    uint8_t *buf = malloc(head + bytes + 1);
    if (!buf) {
        set_error(r, 503, "out of memory for the answer");
        return;
    }
    rb_visibility_query q = {.scene = scene_ver_scene(r->ver),
                             .observers = b->observers,
                             .n_observers = b->n_observers,
                             .targets = b->targets,
                             .n_targets = b->n_targets,
                             .tmin = b->tmin, .tmax = b->tmax,
                             .stop = query_should_stop, .stop_user = r};
    uint64_t visible = 0;
    rb_run_info info;
    memset(&info, 0, sizeof info);
    double t0 = rbd_now_ms();
    int st = rb_visibility(ctx, &q, buf + head, bytes, &visible, &info);
    info.elapsed_ms = rbd_now_ms() - t0;
    if (!info.backend[0]) { /* no pair: nothing ran, name what would */
        rb_backend_info bi;
        if (rb_context_info(ctx, &bi) == RB_OK) {
            snprintf(info.backend, sizeof info.backend, "%s", bi.backend);
            snprintf(info.device, sizeof info.device, "%s", bi.device);
        }
    }
    uint64_t version = scene_ver_version(r->ver);
    scene_ver_release(r->ver);
    r->ver = NULL;
    if (st == RB_ECANCELED) {
        free(buf);
        set_stopped(r);
        return;
    }
    if (st != RB_OK) {
        free(buf);
        set_lib_error(r, RBQ_FROM_INTERSECT, ctx);
        return;
    }
    metrics_query(&r->srv->metrics, (uint64_t)b->n_observers * b->n_targets,
                  0, info.fell_back);
    if (!r->out_binary) {
        sbuf o;
        sbuf_init(&o);
        int bad = visibility_json(b, buf, version, &info, &o);
        free(buf);
        if (bad) {
            sbuf_free(&o);
            set_error(r, 503, "out of memory for the answer");
            return;
        }
        json_reply(r, 200, &o);
        return;
    }
    /* The header of docs/binary-format.md's visibility answer. */
    rbb_header h = {.version = 1, .header_size = RBB_HEADER_SIZE,
                    .kind = RBB_KIND_VISIBILITY, .mode = RB_MODE_ANY,
                    .dims = 3,
                    .flags = (uint8_t)(RBB_FLAG_SCENE_VERSION |
                                       (info.fell_back ? RBB_FLAG_FELL_BACK
                                                       : 0)),
                    .n_rays = b->n_observers, .n_boxes = b->n_targets,
                    .tmin = b->tmin, .tmax = b->tmax,
                    .scene_version = version,
                    .elapsed_ms = info.elapsed_ms};
    rbb_header_encode(&h, buf);
    rbd_payload *p = calloc(1, sizeof *p);
    if (!p) {
        free(buf);
        set_error(r, 503, "out of memory for the answer");
        return;
    }
    p->pre = (char *)buf;
    p->pre_len = head + bytes;
    r->reply.binary = 1;
    r->reply.payload = p;
    r->reply.kind = OUT_PAYLOAD;
    r->reply.status = 200;
}

void job_scene_delete(rbd_job *job, rb_context *ctx)
{
    (void)ctx;
    rbd_request *r = (rbd_request *)job;
    char why[300];
    int rc = store_delete(r->srv->store, r->scene_id, r->owner, why,
                          sizeof why);
    if (rc == 404)
        snprintf(why, sizeof why, "no scene '%s'", r->scene_id);
    if (rc) {
        set_error(r, rc, why);
        return;
    }
    r->reply.kind = OUT_NONE;
    r->reply.status = 204;
}

void job_done(rbd_job *job)
{
    rbd_request *r = (rbd_request *)job;
    rbd_metrics *m = &r->srv->metrics;
    if (job->aborted) {
        scene_ver_release(r->ver);
        r->ver = NULL;
        set_error(r, 503, "the server is shutting down");
    } else {
        metrics_observe(&m->queue_wait, (job->t_started - job->t_queued) / 1e3);
        metrics_observe(&m->run, (job->t_finished - job->t_started) / 1e3);
    }
    /* The last touch: from here the I/O thread owns r again (and may free
     * it at any moment). */
    MHD_resume_connection(r->conn);
}
