/*
 * cl_multi.c - one batch over several OpenCL devices
 * (rb_context_options.devices).
 *
 * Each device gets a context of its own (rb_context_create with that
 * device index: its own queue, program, buffers, thread pool, error
 * state), so that the devices run at once without sharing anything that
 * is written. A query's rays are cut into one contiguous run per device,
 * sized in proportion to the device's speed, and each run is the job of
 * that device's backend, started from one host thread a device (the
 * calling thread takes the first). Every ray's answer is computed by one
 * device alone and lands at the ray's own place in the caller's arrays,
 * and every device gives the same bits (SPEC R8, R9), so the answers are
 * those of one device, in order. A joint tree (a scene's boxes and shapes
 * in one tree) is walked the same way, each device its run of rays.
 * Visibility splits its observers the same way, each device writing its
 * own rows of the bit matrix.
 *
 * Speed: rays (or segments) per millisecond of each device's own run,
 * first from a probe at creation (the same brute-force count on each
 * device, one after the other), then averaged with every split query's
 * measured times, so that the split follows what the devices do under
 * the real load.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

/* Below this many rays (or observers x targets / 64) one device, the
 * fastest, takes the whole query: the threads and launches of a split
 * would cost more than they save. */
#define MULTI_MIN_RAYS 4096
/* Runs are multiples of this many rays (the work-group size), but for
 * the last one. */
#define MULTI_GRAIN 64

typedef struct rb_cl_multi {
    rb_backend base;
    rb_context *ctx;
    size_t n;
    rb_context *dev[RB_MAX_DEVICES]; /* one OpenCL device each */
    double speed[RB_MAX_DEVICES];    /* units per ms, > 0 */
    int index[RB_MAX_DEVICES];       /* rb_devices_list() positions */
} rb_cl_multi;

/* What one device does for a query, on its thread. */
typedef struct part {
    rb_cl_multi *m;
    size_t k;                /* the device */
    size_t first, count;     /* its run of rays or observers */
    int what;                /* PART_RUN, _SHAPES, _JOINT, _VIS */
    rb_job job;              /* PART_RUN, _SHAPES, _JOINT: its rays */
    rb_results res;          /* their answers */
    const rb_shapeset *set;  /* PART_SHAPES, PART_JOINT */
    rb_vis_job vis;          /* PART_VIS: its observers */
    uint8_t *bits;           /* PART_VIS: its rows */
    rb_run_info vis_info;
    rb_bad_input bad;
    int rc;
    double ms;
} part;

enum { PART_RUN, PART_SHAPES, PART_JOINT, PART_VIS };

static void *run_part(void *arg)
{
    part *p = arg;
    rb_context *c = p->m->dev[p->k];
    rb_backend *b = c->cl;
    rb_clear_error(c);
    double t0 = rb_now_ms();
    if (p->what == PART_RUN)
        p->rc = b->ops->run(b, c, &p->job, &p->res, &p->bad);
    else if (p->what == PART_SHAPES)
        p->rc = b->ops->run_shapes(b, c, &p->job, p->set, &p->res);
    else if (p->what == PART_JOINT)
        p->rc = b->ops->run_joint(b, c, &p->job, p->set, &p->res, &p->bad);
    else
        p->rc = b->ops->run_visibility(b, c, &p->vis, p->bits, &p->vis_info);
    p->ms = rb_now_ms() - t0;
    return NULL;
}

/* Cuts n units into runs by speed: first[k], count[k] (count 0: the
 * device sits this one out). Small queries go to the fastest device. */
static void split(const rb_cl_multi *m, size_t n, size_t min_split,
                  size_t grain, size_t *first, size_t *count)
{
    size_t fastest = 0;
    double total = 0;
    for (size_t k = 0; k < m->n; k++) {
        total += m->speed[k];
        if (m->speed[k] > m->speed[fastest])
            fastest = k;
        count[k] = 0;
    }
    if (n < min_split) {
        for (size_t k = 0; k < m->n; k++)
            first[k] = 0;
        count[fastest] = n;
        return;
    }
    size_t at = 0;
    double acc = 0;
    for (size_t k = 0; k < m->n; k++) {
        acc += m->speed[k];
        size_t end = n;
        if (k + 1 < m->n)
            end = (size_t)((double)n * (acc / total)) / grain * grain;
        if (end < at)
            end = at;
        if (end > n)
            end = n;
        first[k] = at;
        count[k] = end - at;
        at = end;
    }
}

/* The parts with work on their threads (the first on this one), then
 * the speeds updated from their times. RB_OK, or the first failing
 * part's status with its device's message in ctx. */
static int run_parts(rb_cl_multi *m, part *parts, rb_run_info *info,
                     uint64_t units_per_count)
{
    pthread_t th[RB_MAX_DEVICES];
    int started[RB_MAX_DEVICES] = {0};
    size_t mine = m->n;
    for (size_t k = 0; k < m->n; k++) {
        if (!parts[k].count)
            continue;
        if (mine == m->n) {
            mine = k; /* the calling thread's */
            continue;
        }
        if (pthread_create(&th[k], NULL, run_part, &parts[k]) == 0)
            started[k] = 1;
        else
            run_part(&parts[k]); /* no thread: in turn, same answers */
    }
    if (mine < m->n)
        run_part(&parts[mine]);
    for (size_t k = 0; k < m->n; k++)
        if (started[k])
            pthread_join(th[k], NULL);

    int rc = RB_OK;
    size_t n_total = 0;
    for (size_t k = 0; k < m->n; k++)
        n_total += parts[k].count;
    info->devices = (unsigned)m->n;
    for (size_t k = 0; k < m->n; k++) {
        part *p = &parts[k];
        info->device_share[k] =
            n_total ? (double)p->count / (double)n_total : 0;
        if (!p->count)
            continue;
        /* RB_EINPUT is named by the caller from the lowest bad element,
         * RB_VIS_DECLINED and RB_JOINT_DECLINED handled by it */
        if (p->rc < 0 && p->rc != RB_EINPUT && rc == RB_OK)
            rc = rb_fail(m->ctx, p->rc, "%s", m->dev[k]->err.message);
        /* A device's own time for its part, when long enough to mean
         * something, moves its speed halfway there. */
        uint64_t units = (uint64_t)p->count * units_per_count;
        if (!p->rc && p->ms > 1.0 && units >= MULTI_MIN_RAYS)
            m->speed[k] = 0.5 * m->speed[k] + 0.5 * ((double)units / p->ms);
    }
    return rc;
}

/* The device names joined with " + " (rb_run_info.device, describe). */
static void joined_names(const rb_cl_multi *m, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t k = 0; k < m->n; k++) {
        const rb_cl_backend *be = (const rb_cl_backend *)m->dev[k]->cl;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", k ? " + " : "",
                 be->dev.desc.name);
    }
}

/* The rays of part p of job: a job of their own, answers at their place. */
static void cut_job(const rb_job *job, const rb_results *res, part *p)
{
    size_t ray_rec = job->dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
    size_t box_rec = job->dims == 3 ? sizeof(rb_box) : sizeof(rb_box2);
    p->job = *job;
    p->job.rays = (const char *)job->rays + p->first * ray_rec;
    p->job.n_rays = p->count;
    if (job->pair_boxes)
        p->job.pair_boxes = (const char *)job->pair_boxes + p->first * box_rec;
    p->job.pair_first = job->pair_first + p->first; /* pairs of shapes */
    memset(&p->res, 0, sizeof p->res);
    p->res.capacity = p->count;
    if (res->hits)
        p->res.hits = res->hits + p->first;
    if (res->any)
        p->res.any = res->any + p->first;
    if (res->counts)
        p->res.counts = res->counts + p->first;
    if (res->list)
        p->res.list = res->list + p->first * job->max_hits;
    p->bad.index = UINT64_MAX;
    p->bad.element = RB_ELEMENT_NONE;
}

static int multi_rays(rb_cl_multi *m, int what, const rb_job *job,
                      const rb_shapeset *set, rb_results *res,
                      rb_bad_input *bad)
{
    part parts[RB_MAX_DEVICES];
    size_t first[RB_MAX_DEVICES], count[RB_MAX_DEVICES];
    split(m, job->n_rays, MULTI_MIN_RAYS, MULTI_GRAIN, first, count);
    for (size_t k = 0; k < m->n; k++) {
        memset(&parts[k], 0, sizeof parts[k]);
        parts[k].m = m;
        parts[k].k = k;
        parts[k].what = what;
        parts[k].first = first[k];
        parts[k].count = count[k];
        parts[k].set = set;
        cut_job(job, res, &parts[k]);
    }
    rb_run_info info = res->info;
    int rc = run_parts(m, parts, &info, 1);
    /* A device that cannot walk the joint tree declines it for the whole
     * batch: the two passes then run over every ray and write every
     * answer again, the other devices' included. */
    for (size_t k = 0; k < m->n && what == PART_JOINT && !rc; k++)
        if (parts[k].count && parts[k].rc == RB_JOINT_DECLINED)
            return RB_JOINT_DECLINED;
    /* R6: the lowest invalid element over every device's run */
    for (size_t k = 0; k < m->n && bad; k++) {
        const part *p = &parts[k];
        if (p->count && p->rc == RB_EINPUT &&
            p->bad.index + p->first < bad->index) {
            bad->index = p->bad.index + p->first;
            bad->element = p->bad.element;
        }
    }
    if (!rc && bad && bad->index != UINT64_MAX)
        rc = RB_EINPUT;
    /* pairs answer box i for ray i: indices of the whole batch (pairs of
     * shapes answer with them already, job.pair_first) */
    for (size_t k = 0;
         k < m->n && !rc && job->mode == RB_MODE_PAIRS && what == PART_RUN;
         k++)
        for (size_t i = 0; i < parts[k].count; i++)
            if (parts[k].res.hits[i].hit)
                parts[k].res.hits[i].box += (int32_t)parts[k].first;
    info.chunks = 0;
    info.kernel_ms = 0;
    for (size_t k = 0; k < m->n; k++) {
        info.chunks += parts[k].res.info.chunks;
        if (parts[k].res.info.kernel_ms > info.kernel_ms)
            info.kernel_ms = parts[k].res.info.kernel_ms; /* at once */
    }
    joined_names(m, info.device, sizeof info.device);
    res->info = info;
    return rc;
}

static int multi_run(rb_backend *self, rb_context *ctx, const rb_job *job,
                     rb_results *res, rb_bad_input *bad)
{
    (void)ctx;
    rb_cl_multi *m = (rb_cl_multi *)self;
    return multi_rays(m, PART_RUN, job, NULL, res, bad);
}

static int multi_run_shapes(rb_backend *self, rb_context *ctx,
                            const rb_job *job, const rb_shapeset *set,
                            rb_results *res)
{
    (void)ctx;
    rb_cl_multi *m = (rb_cl_multi *)self;
    return multi_rays(m, PART_SHAPES, job, set, res, NULL);
}

/* Boxes and shapes in one walk of the joint tree, the rays split as for
 * run (rb_cl_run_joint on each device). */
static int multi_run_joint(rb_backend *self, rb_context *ctx,
                           const rb_job *job, const rb_shapeset *set,
                           rb_results *res, rb_bad_input *bad)
{
    (void)ctx;
    rb_cl_multi *m = (rb_cl_multi *)self;
    return multi_rays(m, PART_JOINT, job, set, res, bad);
}

static int multi_run_visibility(rb_backend *self, rb_context *ctx,
                                const rb_vis_job *job, uint8_t *bits,
                                rb_run_info *info)
{
    (void)ctx;
    rb_cl_multi *m = (rb_cl_multi *)self;
    size_t stride = (job->n_targets + 7) / 8;
    part parts[RB_MAX_DEVICES];
    size_t first[RB_MAX_DEVICES], count[RB_MAX_DEVICES];
    /* as many segments as MULTI_MIN_RAYS rays, at least */
    size_t min_rows = MULTI_MIN_RAYS / job->n_targets + 1;
    split(m, job->n_observers, min_rows, 1, first, count);
    for (size_t k = 0; k < m->n; k++) {
        part *p = &parts[k];
        memset(p, 0, sizeof *p);
        p->m = m;
        p->k = k;
        p->what = PART_VIS;
        p->first = first[k];
        p->count = count[k];
        p->vis = *job;
        p->vis.observers = job->observers + 3 * first[k];
        p->vis.n_observers = count[k];
        p->bits = bits + first[k] * stride;
    }
    int rc = run_parts(m, parts, info, job->n_targets);
    int declined = 0;
    for (size_t k = 0; k < m->n; k++)
        declined |= parts[k].count && parts[k].rc == RB_VIS_DECLINED;
    if (declined) {
        /* the explicit segments start from zeroed bits */
        memset(bits, 0, job->n_observers * stride);
        return RB_VIS_DECLINED;
    }
    rb_copy_str(info->backend, sizeof info->backend, "opencl");
    joined_names(m, info->device, sizeof info->device);
    for (size_t k = 0; k < m->n; k++) {
        info->chunks += parts[k].vis_info.chunks;
        if (parts[k].vis_info.kernel_ms > info->kernel_ms)
            info->kernel_ms = parts[k].vis_info.kernel_ms;
    }
    return rc;
}

static void multi_describe(const rb_backend *self, rb_backend_info *out)
{
    const rb_cl_multi *m = (const rb_cl_multi *)self;
    rb_backend_info one;
    memset(out, 0, sizeof *out);
    for (size_t k = 0; k < m->n; k++) {
        memset(&one, 0, sizeof one);
        m->dev[k]->cl->ops->describe(m->dev[k]->cl, &one);
        if (k == 0) {
            *out = one;
            continue;
        }
        out->is_gpu &= one.is_gpu;
        out->exact_division &= one.exact_division;
        out->denormals &= one.denormals;
        out->compute_units += one.compute_units;
        out->global_mem += one.global_mem;
        if (one.max_buffer_bytes < out->max_buffer_bytes)
            out->max_buffer_bytes = one.max_buffer_bytes;
    }
    joined_names(m, out->device, sizeof out->device);
}

static void multi_destroy(rb_backend *self)
{
    rb_cl_multi *m = (rb_cl_multi *)self;
    if (!m)
        return;
    for (size_t k = 0; k < m->n; k++)
        rb_context_destroy(m->dev[k]);
    rb_free(m->ctx, m);
}

static const struct rb_backend_ops multi_ops = {
    .name = "opencl",
    .bvh = 1,
    .run = multi_run,
    .run_shapes = multi_run_shapes,
    .run_joint = multi_run_joint,
    .run_visibility = multi_run_visibility,
    .describe = multi_describe,
    .destroy = multi_destroy,
};

int rb_cl_is_multi(const rb_backend *b)
{
    return b && b->ops == &multi_ops;
}

size_t rb_cl_multi_devices(const rb_backend *b, rb_context **out, size_t cap)
{
    if (!rb_cl_is_multi(b))
        return 0;
    const rb_cl_multi *m = (const rb_cl_multi *)b;
    for (size_t k = 0; k < m->n && k < cap; k++)
        out[k] = m->dev[k];
    return m->n;
}

int rb_cl_multi_speeds(const rb_backend *b, double *out, size_t cap)
{
    if (!rb_cl_is_multi(b))
        return 0;
    const rb_cl_multi *m = (const rb_cl_multi *)b;
    for (size_t k = 0; k < m->n && k < cap; k++)
        out[k] = m->speed[k];
    return (int)m->n;
}

/* The devices of spec ("all" or "i,j,..."): their positions in *idx. */
static int parse_devices(const rb_cl_device *devs, size_t n_devs,
                         const char *spec, int *idx, size_t *n, char *why,
                         size_t why_len)
{
    *n = 0;
    if (strcmp(spec, "all") == 0) {
        for (size_t i = 0; i < n_devs; i++) {
            if (!devs[i].available || !devs[i].compiler)
                continue;
            if (*n == RB_MAX_DEVICES) {
                snprintf(why, why_len, "--devices all: more than %d "
                         "devices", RB_MAX_DEVICES);
                return RB_EINVAL;
            }
            idx[(*n)++] = (int)i;
        }
        if (!*n) {
            snprintf(why, why_len, "--devices all: no available OpenCL "
                                   "device with a compiler");
            return RB_ENODEV;
        }
        return RB_OK;
    }
    const char *s = spec;
    for (;;) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || (*end && *end != ',') || *s == '-' || *s == '+') {
            snprintf(why, why_len, "devices \"%s\": not \"all\" or device "
                     "indices separated by commas", spec);
            return RB_EINVAL;
        }
        if (v >= n_devs) {
            snprintf(why, why_len, "devices \"%s\": no device %lu (%zu "
                     "OpenCL devices)", spec, v, n_devs);
            return RB_ENODEV;
        }
        for (size_t k = 0; k < *n; k++)
            if (idx[k] == (int)v) {
                snprintf(why, why_len, "devices \"%s\": device %lu listed "
                         "twice", spec, v);
                return RB_EINVAL;
            }
        if (*n == RB_MAX_DEVICES) {
            snprintf(why, why_len, "devices \"%s\": more than %d devices",
                     spec, RB_MAX_DEVICES);
            return RB_EINVAL;
        }
        idx[(*n)++] = (int)v;
        if (!*end)
            break;
        s = end + 1;
    }
    return RB_OK;
}

/* Each device's probe: a brute-force count of PROBE_RAYS rays against
 * PROBE_BOXES boxes, its wall time after a first run (which builds and
 * uploads). */
#define PROBE_RAYS 16384
#define PROBE_BOXES 256

static double probe(rb_context *c)
{
    rb_ray *rays = rb_alloc(c, PROBE_RAYS * sizeof *rays, 64);
    rb_box *boxes = rb_alloc(c, PROBE_BOXES * sizeof *boxes, 64);
    uint32_t *counts = rb_alloc(c, PROBE_RAYS * sizeof *counts, 64);
    double speed = 1.0;
    if (rays && boxes && counts) {
        uint64_t s = 12345;
        for (size_t i = 0; i < PROBE_BOXES; i++) {
            float x = (float)(i % 16), y = (float)(i / 16);
            boxes[i] = (rb_box){{x, y, 0}, {x + 0.5f, y + 0.5f, 1}};
        }
        for (size_t i = 0; i < PROBE_RAYS; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            float a = (float)(s >> 40) / (float)(1u << 24) * 16;
            rays[i] = (rb_ray){{a, -1, 0.5f}, {0.3f, 1, 0.01f}, 0, 100};
        }
        rb_query q = {.mode = RB_MODE_COUNT, .dims = 3, .rays = rays,
                      .n_rays = PROBE_RAYS, .boxes = boxes,
                      .n_boxes = PROBE_BOXES};
        rb_results r = {.counts = counts, .capacity = PROBE_RAYS};
        if (rb_intersect(c, &q, &r) == RB_OK) {
            double t0 = rb_now_ms();
            if (rb_intersect(c, &q, &r) == RB_OK) {
                double ms = rb_now_ms() - t0;
                speed = PROBE_RAYS / (ms > 1e-3 ? ms : 1e-3);
            }
        }
    }
    rb_free(c, rays);
    rb_free(c, boxes);
    rb_free(c, counts);
    return speed;
}

int rb_cl_multi_create(rb_context *ctx, const char *spec, rb_backend **out,
                       char *why, size_t why_len)
{
    rb_cl_device *devs = NULL;
    size_t n_devs = 0;
    int idx[RB_MAX_DEVICES];
    size_t n = 0;
    int rc = rb_cl_discover(&ctx->alloc, &devs, &n_devs, why, why_len);
    if (!rc)
        rc = parse_devices(devs, n_devs, spec, idx, &n, why, why_len);
    rb_free_with(&ctx->alloc, devs);
    if (rc)
        return rc;
    rb_cl_multi *m = rb_calloc(ctx, sizeof *m, 64);
    if (!m) {
        rb_copy_str(why, why_len, "out of memory");
        return RB_ENOMEM;
    }
    m->base.ops = &multi_ops;
    m->ctx = ctx;
    for (size_t k = 0; k < n; k++) {
        rb_context_options o = ctx->opt;
        o.backend = RB_BACKEND_OPENCL;
        o.device_index = idx[k];
        o.device_name = NULL;
        o.devices = NULL;
        o.allocator = &ctx->alloc;
        o.cpu_fallback = 0; /* the parent's fallback covers the batch */
        char dwhy[256] = "";
        rc = rb_context_create(&o, &m->dev[k], dwhy, sizeof dwhy);
        if (rc) {
            snprintf(why, why_len, "device %d: %s", idx[k], dwhy);
            break;
        }
        m->dev[k]->bvh_use = ctx->bvh_use;
        m->n = k + 1;
        m->index[k] = idx[k];
    }
    if (rc) {
        multi_destroy(&m->base);
        return rc;
    }
    for (size_t k = 0; k < n; k++)
        m->speed[k] = probe(m->dev[k]);
    *out = &m->base;
    return RB_OK;
}
