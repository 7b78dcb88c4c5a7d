/*
 * handlers.c - what each route does once its request is complete, on the
 * I/O thread: small answers (health, devices, metrics, scene listings,
 * DELETE) at once, small CPU queries at once too (--inline-max-tests),
 * other queries and scene changes as jobs for the workers.
 */
#include <stdio.h>
#include <string.h>

#include "request.h"
#include "sbuf.h"

/* Scene builds and refits over this many boxes use the context's threads. */
#define HEAVY_BOXES 65536u

static void on_queue(void *arg)
{
    rbd_request *r = arg;
    /* Before any worker can see the job: the connection is suspended
     * before anyone can resume it. */
    MHD_suspend_connection(r->conn);
    r->phase = PH_QUEUED;
    atomic_fetch_add(&r->srv->suspended, 1);
}

static enum MHD_Result submit(rbd_request *r,
                              void (*run)(rbd_job *, rb_context *))
{
    rbd_server *s = r->srv;
    r->job.run = run;
    r->job.done = job_done;
    if (executor_submit(s->ex, &r->job, on_queue, r) == 0)
        return MHD_YES;
    atomic_fetch_add_explicit(&s->metrics.rejected_full, 1,
                              memory_order_relaxed);
    char detail[128];
    snprintf(detail, sizeof detail, "the server is saturated: %llu requests "
             "are waiting (--queue-depth)",
             (unsigned long long)s->cfg.queue_depth);
    return respond_problem(r, 503, NULL, detail);
}

static enum MHD_Result health(rbd_request *r)
{
    rbd_server *s = r->srv;
    if (atomic_load(&s->draining))
        return respond_problem(r, 503, NULL, "shutting down");
    const rb_backend_info *b = executor_backend(s->ex);
    rbd_executor_stats st;
    executor_stats(s->ex, &st);
    sbuf o;
    sbuf_init(&o);
    sbuf_add(&o, "{\"status\":\"ok\",\"version\":");
    sbuf_json_str(&o, RB_VERSION_STRING);
    sbuf_add(&o, ",\"backend\":");
    sbuf_json_str(&o, b->backend);
    sbuf_add(&o, ",\"device\":");
    sbuf_json_str(&o, b->device);
    sbuf_printf(&o,
                ",\"workers\":%llu,\"queue_depth\":%llu,"
                "\"queue_capacity\":%llu,\"uptime_s\":%.3f}",
                (unsigned long long)st.workers,
                (unsigned long long)st.queued,
                (unsigned long long)st.capacity,
                (rbd_now_ms() - s->t_start) / 1e3);
    return respond_sbuf(r, 200, &o, NULL);
}

static enum MHD_Result metrics_page(rbd_request *r)
{
    rbd_gauges g;
    server_gauges(r->srv, &g);
    sbuf o;
    sbuf_init(&o);
    metrics_render(&r->srv->metrics, &g, &o);
    return respond_sbuf(r, 200, &o,
                        "text/plain; version=0.0.4; charset=utf-8");
}

static enum MHD_Result devices(rbd_request *r)
{
    sbuf o;
    sbuf_init(&o);
    sbuf_add(&o, r->srv->devices_json);
    return respond_sbuf(r, 200, &o, NULL);
}

static enum MHD_Result scene_get(rbd_request *r)
{
    sbuf o;
    sbuf_init(&o);
    if (store_describe_json(r->srv->store, r->scene_id, r->owner, &o)) {
        sbuf_free(&o);
        char detail[200];
        snprintf(detail, sizeof detail, "no scene '%s'", r->scene_id);
        return respond_problem(r, 404, NULL, detail);
    }
    return respond_sbuf(r, 200, &o, NULL);
}

static enum MHD_Result scene_delete(rbd_request *r)
{
    if (r->srv->disk)
        return submit(r, job_scene_delete);
    char detail[300];
    int rc = store_delete(r->srv->store, r->scene_id, r->owner, detail,
                          sizeof detail);
    if (rc == 404)
        snprintf(detail, sizeof detail, "no scene '%s'", r->scene_id);
    if (rc)
        return respond_problem(r, rc, NULL, detail);
    return respond_empty(r, 204);
}

static enum MHD_Result scene_list(rbd_request *r)
{
    sbuf o;
    sbuf_init(&o);
    store_list_json(r->srv->store, r->owner, &o);
    return respond_sbuf(r, 200, &o, NULL);
}

static enum MHD_Result scene_create(rbd_request *r)
{
    char why[256];
    const rb_shapes *sh = &r->body->shapes;
    r->boxes = r->body->n_boxes + sh->n_obbs + sh->n_xboxes + sh->n_spheres +
               sh->n_planes;
    if (store_precheck(r->srv->store, r->boxes, why, sizeof why))
        return respond_problem(r, 507, NULL, why);
    r->job.heavy = r->boxes >= HEAVY_BOXES;
    return submit(r, job_scene_create);
}

static enum MHD_Result scene_patch(rbd_request *r)
{
    const rb_shapes *sh = &r->body->append_shapes;
    r->boxes = r->body->n_set + r->body->n_append + sh->n_obbs +
               sh->n_xboxes + sh->n_spheres + sh->n_planes;
    r->job.heavy = r->boxes >= HEAVY_BOXES;
    return submit(r, job_scene_patch);
}

int request_take_memory(rbd_request *r, uint64_t bytes, const char *what,
                        char *detail, size_t len)
{
    rbd_budget *b = &r->srv->budget;
    if (budget_take(b, bytes) == 0) {
        r->held += bytes;
        return 0;
    }
    snprintf(detail, len, "the server's memory is taken: %s needs about "
             "%llu bytes, and %llu of --max-memory %llu are held by "
             "requests in progress, answers not yet read and scene versions "
             "still being read; retry later",
             what, (unsigned long long)bytes,
             (unsigned long long)atomic_load(&b->used),
             (unsigned long long)b->limit);
    return -1;
}

/* A query answered here, on the I/O thread (--inline-max-tests): the
 * job a worker would run, with this thread's own context, then its reply
 * queued at once - no suspend, no worker wake-up, no resume, which cost
 * a small query two thread wake-ups. Everything else is as on a worker:
 * the memory was taken and the scene version pinned before, and the
 * query's stop checks (--max-query-ms from t_started, the drain, a gone
 * client) are the same. */
static enum MHD_Result answer_inline(rbd_request *r, rb_context *ctx)
{
    rbd_job *job = &r->job;
    job->t_queued = job->t_started = rbd_now_ms();
    job->run(job, ctx);
    job->t_finished = rbd_now_ms();
    r->inlined = 1;
    atomic_fetch_add_explicit(&r->srv->metrics.inline_answers, 1,
                              memory_order_relaxed);
    return respond_reply(r);
}

/* Both intersect routes: the scene, if any, is taken now, at the version
 * current when the query starts; the query keeps that version. */
static enum MHD_Result intersect(rbd_request *r)
{
    const rbq_request *b = r->body;
    char detail[400];
    int scene_path = r->route == ROUTE_SCENE_INTERSECT ||
                     r->route == ROUTE_SCENE_RENDER;
    if (b->camera) {
        /* From here the request is the one with the camera's rays (the
         * job makes them): every later step is an explicit rays
         * request's, so the answers are the same bytes. The rays take
         * their share of the memory budget before they exist. */
        r->cam_body = *b;
        r->cam_body.rays = NULL;
        r->cam_body.n_rays = (size_t)b->n_camera_rays;
        r->cam_body.ray_arity = NULL;
        if (r->route == ROUTE_SCENE_RENDER && !r->out_binary &&
            b->image == RBQ_IMAGE_NORMAL)
            r->cam_body.outputs |= RB_OUTPUT_NORMAL;
        r->body = b = &r->cam_body;
        /* A picture: its RGB bytes, and about as many again for the
         * PNG (libpng's worst case is a little over the raw bytes). */
        uint64_t picture = r->route == ROUTE_SCENE_RENDER && !r->out_binary
                               ? 7 * (uint64_t)b->n_rays
                               : 0;
        if (request_take_memory(r,
                                (uint64_t)b->n_rays * sizeof(rb_ray) +
                                    picture,
                                "the camera's rays", detail, sizeof detail))
            return respond_problem(r, 503, NULL, detail);
    }
    const char *id = scene_path ? r->scene_id : b->scene;
    if (id) {
        r->ver = store_acquire(r->srv->store, id, r->owner);
        if (!r->ver) {
            snprintf(detail, sizeof detail, "no scene '%.128s'", id);
            return respond_problem(
                r, 404, scene_path ? NULL : "/scene",
                detail);
        }
        if (scene_ver_dims(r->ver) != b->dims) {
            snprintf(detail, sizeof detail, "the scene has %u dims, the "
                     "request %u", scene_ver_dims(r->ver), b->dims);
            return respond_problem(r, 422, "/dims", detail);
        }
        r->boxes = scene_ver_elements(r->ver);
    } else {
        r->boxes = b->n_boxes + b->shapes.n_obbs + b->shapes.n_xboxes +
                   b->shapes.n_spheres + b->shapes.n_planes;
    }
    r->rays = b->n_rays;
    if (request_take_memory(r, rbq_results_bytes(b), "the answer", detail,
                            sizeof detail)) {
        scene_ver_release(r->ver);
        r->ver = NULL;
        return respond_problem(r, 503, NULL, detail);
    }
    /* The library's own threshold for spreading a query over its
     * threads. */
    uint64_t tests = b->mode == RB_MODE_PAIRS ? r->rays : r->rays * r->boxes;
    r->job.heavy = tests >= RB_SMALL_JOB_TESTS;
    /* Small scene queries may share one backend call (--merge): those
     * the scene answers alone (no elements of their own), not pictures.
     * Few rays on a large scene count as heavy (rays x elements) and
     * merge too, with heavy ones only (executor.c). */
    if (r->srv->merging && r->ver &&
        r->route != ROUTE_SCENE_RENDER && b->mode != RB_MODE_PAIRS &&
        !b->n_boxes && !(b->shapes.n_obbs | b->shapes.n_xboxes |
                         b->shapes.n_spheres | b->shapes.n_planes) &&
        r->rays && r->rays <= r->srv->cfg.merge_max_rays) {
        r->job.merge = &rbd_intersect_merge;
        r->job.weight = r->rays;
    }
    /* Below the line a query costs less than its hand-off to a worker;
     * above it, it would hold the I/O thread's other connections. Every
     * ray counts (its answer is made and rendered), elements or not. */
    uint64_t cost = b->mode == RB_MODE_PAIRS || !r->boxes ? r->rays : tests;
    rb_context *here;
    if (!r->job.merge && cost <= r->srv->cfg.inline_max_tests &&
        (here = server_inline_context(r->srv))) {
        r->job.run = job_intersect;
        r->job.done = NULL;
        return answer_inline(r, here);
    }
    return submit(r, job_intersect);
}

/* POST /v1/scenes/{id}/visibility: the answer's size is known from the
 * counts, so the limits and the memory are decided before any work. */
static enum MHD_Result visibility(rbd_request *r)
{
    const rbq_request *b = r->body;
    rbd_server *s = r->srv;
    char detail[400];
    r->ver = store_acquire(s->store, r->scene_id, r->owner);
    if (!r->ver) {
        snprintf(detail, sizeof detail, "no scene '%s'", r->scene_id);
        return respond_problem(r, 404, NULL, detail);
    }
    if (scene_ver_dims(r->ver) != 3) {
        scene_ver_release(r->ver);
        r->ver = NULL;
        return respond_problem(r, 422, NULL, "visibility needs a 3D scene");
    }
    uint64_t pairs = (uint64_t)b->n_observers * b->n_targets;
    uint64_t bits = rb_visibility_bytes(b->n_observers, b->n_targets);
    /* JSON lists each visible target's index: up to 11 bytes a pair. */
    uint64_t need = bits + (r->out_binary ? RBB_HEADER_SIZE
                                          : 11 * pairs + 32 * b->n_observers);
    const char *too_big = NULL;
    if (bits > s->cfg.max_visibility_bytes)
        too_big = "--max-visibility-bytes";
    else if (!r->out_binary && pairs > s->cfg.max_results)
        too_big = "--max-results";
    if (too_big) {
        scene_ver_release(r->ver);
        r->ver = NULL;
        snprintf(detail, sizeof detail,
                 "%zu observers x %zu targets: the answer would hold %llu "
                 "pairs (%llu bytes as bits), more than %s allows (%s); "
                 "send fewer observers a request%s",
                 b->n_observers, b->n_targets, (unsigned long long)pairs,
                 (unsigned long long)bits, too_big,
                 too_big[6] == 'v' ? "bytes" : "JSON pairs",
                 r->out_binary ? "" : ", or ask for the binary answer");
        return respond_problem(r, 413, "/targets", detail);
    }
    if (request_take_memory(r, need, "the answer", detail, sizeof detail)) {
        scene_ver_release(r->ver);
        r->ver = NULL;
        return respond_problem(r, 503, NULL, detail);
    }
    r->rays = pairs;
    r->boxes = scene_ver_elements(r->ver);
    r->job.heavy = pairs >= 65536;
    return submit(r, job_visibility);
}

enum MHD_Result handle_request(rbd_request *r)
{
    switch (r->route) {
    case ROUTE_HEALTH:
        return health(r);
    case ROUTE_DEVICES:
        return devices(r);
    case ROUTE_METRICS:
        return metrics_page(r);
    case ROUTE_SCENES:
        return r->method == METHOD_POST ? scene_create(r) : scene_list(r);
    case ROUTE_SCENE:
        if (r->method == METHOD_PATCH)
            return scene_patch(r);
        if (r->method == METHOD_DELETE)
            return scene_delete(r);
        return scene_get(r);
    case ROUTE_INTERSECT:
    case ROUTE_SCENE_INTERSECT:
    case ROUTE_SCENE_RENDER:
        return intersect(r);
    case ROUTE_SCENE_VISIBILITY:
        return visibility(r);
    default:
        return respond_problem(r, 404, NULL, "no such path");
    }
}
