/*
 * cpu_backend.c - the native backend: the reference and the fallback.
 *
 * Work is split into tasks of consecutive rays that the context's thread
 * pool hands out. A task validates and prepares its rays (so a batch is
 * read from memory once), then, for every-box modes, walks the boxes in
 * blocks that stay in the L1 cache while every ray of the task is tested
 * against them (cache blocking: one pass over the boxes serves many rays).
 * When the job carries a hierarchy (a scene's, or a transient one over
 * inline boxes), each ray walks it instead (bvh/bvh_walk.inc), or for
 * `any`, `count` and `nearest` a task's rays walk it together as a ray
 * stream (bvh/bvh_stream_avx2.c): about log(boxes) tests per ray, same
 * answers (R9). Big batches are walked in
 * the order of ray_order.h, so that consecutive rays share cached nodes;
 * each answer still goes to its ray's own index.
 * Each ray's answer depends only on that ray, so results do not depend on
 * the thread count (R10).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../bvh/bvh.h"
#include "../threadpool.h"
#include "blockers.h"
#include "cpu_visibility.h"
#include "ray_order.h"
#include "scan.h"
#include "stream_scratch.h"

#define RAYS_PER_TASK_MAX 64    /* rays sharing one walk over the boxes */
#define BOX_BLOCK 1024          /* 24 KiB of box planes: fits L1 */
/* pairs: tasks of a quarter of a worker's share of the batch, at least
 * PAIRS_MIN_PER_TASK and at most PAIRS_MAX_PER_TASK pairs. Long runs of
 * consecutive pairs a thread: with tasks of 2048 pairs, 16M pairs ran at
 * about two thirds the rate of 64K-pair tasks and more, and so did 1M
 * pairs, whose output stays in the cache (presumably the hardware
 * prefetchers: the two threads' tasks interleave in memory, and each
 * task's three streams start cold). docs/benchmarks.md. */
#define PAIRS_MIN_PER_TASK 2048
#define PAIRS_MAX_PER_TASK (256u << 10)
#define STREAM_OUT_BYTES (32u << 20) /* pairs output beyond any cache */
#define SMALL_BVH_RAYS 256      /* the same for hierarchy walks (~1 us/ray) */
#define WALK_PER_TASK 256       /* rays per task of a hierarchy walk */
/* Rays fetched ahead in walk order: by the one-ray walks (4 measured
 * faster than 8 for nearest, 2 alike, 16 and 32 slower) and by the
 * streams' gather loop (24: 1.04-1.07x the rate of 8 ahead, 16 between
 * them, 32 no better than 8; docs/benchmarks.md). */
#define WALK_PREFETCH 4
#define GATHER_PREFETCH 24
#define EMPTY_PER_TASK 16384    /* no boxes: rays checked per task */
/* `any` walks a task's first STREAM_TRIAL_RAYS one by one with the
 * blockers list of blockers.h; if the list answered at least 1 in
 * STREAM_BLOCKERS_RATE of its trial's lookups (coherent rays: a
 * line-of-sight batch answers 19-32 of 32, random rays 4-9), the rest go
 * one by one too, which is faster there than a stream (1.08x the
 * explicit segments' rate against streaming them, docs/benchmarks.md). */
#define STREAM_TRIAL_RAYS (2 * RB_BLOCKERS_TRIAL)
#define STREAM_BLOCKERS_RATE 2

typedef struct worker_scratch {
    rb_ray_prep prep[RAYS_PER_TASK_MAX];
    float best_t[RAYS_PER_TASK_MAX];
    int32_t best_box[RAYS_PER_TASK_MAX];
    uint8_t done[RAYS_PER_TASK_MAX];
    uint32_t idx[BOX_BLOCK];
} worker_scratch;

typedef struct cpu_backend {
    rb_backend base;
    rb_context *ctx;
    const rb_scan_kernels *k;
    const rb_bvh_walkers *walk;
    unsigned workers;
    worker_scratch *scratch; /* one per worker */
    char cpu_name[128];
} cpu_backend;

typedef struct cpu_run {
    cpu_backend *be;
    const rb_job *job;
    rb_results *res;
    size_t per_task;
    const uint32_t *order;   /* walks: ray order, or NULL for 0..n-1 */
    rb_streams streams;      /* walks: their scratch, or none */
    /* Lowest invalid element seen, as index * 2 + (1 for a box). */
    atomic_uint_fast64_t bad;
    atomic_int stopped;      /* the job's stop callback said stop */
} cpu_run;

static void note_bad(cpu_run *run, size_t index, rb_element_kind kind)
{
    rb_atomic_lower(&run->bad, (uint64_t)index * 2 + (kind == RB_ELEMENT_BOX));
}

static void scan_group(cpu_run *run, worker_scratch *w, size_t begin,
                       size_t n)
{
    const rb_job *job = run->job;
    const rb_boxset *b = job->boxes;
    const rb_scan_kernels *k = run->be->k;
    rb_results *res = run->res;

    for (size_t r = 0; r < n; r++) {
        w->best_t[r] = INFINITY;
        w->best_box[r] = -1;
        w->done[r] = 0;
        if (res->counts)
            res->counts[begin + r] = 0;
    }
    uint32_t stored[RAYS_PER_TASK_MAX] = {0};

    for (size_t blk = 0; blk < b->stride; blk += BOX_BLOCK) {
        size_t blk_end = blk + BOX_BLOCK < b->stride ? blk + BOX_BLOCK
                                                     : b->stride;
        for (size_t r = 0; r < n; r++) {
            const rb_ray_prep *p = &w->prep[r];
            switch (job->mode) {
            case RB_MODE_COUNT:
                res->counts[begin + r] += k->count(p, b, blk, blk_end);
                break;
            case RB_MODE_ANY:
                if (!w->done[r])
                    w->done[r] = (uint8_t)k->any(p, b, blk, blk_end);
                break;
            case RB_MODE_NEAREST:
                k->nearest(p, b, blk, blk_end, &w->best_t[r],
                           &w->best_box[r]);
                break;
            case RB_MODE_ALL: {
                size_t m = k->hits(p, b, blk, blk_end, w->idx);
                rb_list_hit *list = res->list + (begin + r) * job->max_hits;
                for (size_t h = 0; h < m; h++) {
                    float lo[3], hi[3], te, tx;
                    for (int a = 0; a < 3; a++) {
                        lo[a] = rb_boxset_lo(b, a)[w->idx[h]];
                        hi[a] = rb_boxset_hi(b, a)[w->idx[h]];
                    }
                    rb_slab_hit(p, lo, hi, &te, &tx);
                    rb_list_insert(list, &stored[r], job->max_hits,
                                (int32_t)w->idx[h], te, tx);
                }
                res->counts[begin + r] += (uint32_t)m;
                break;
            }
            case RB_MODE_PAIRS:
                break;
            }
        }
        if (job->mode == RB_MODE_ANY) {
            size_t open = 0;
            for (size_t r = 0; r < n; r++)
                open += !w->done[r];
            if (open == 0)
                break;
        }
    }

    for (size_t r = 0; r < n; r++) {
        size_t i = begin + r;
        if (job->mode == RB_MODE_ANY) {
            res->any[i] = w->done[r];
        } else if (job->mode == RB_MODE_NEAREST) {
            int32_t j = w->best_box[r];
            if (j < 0) {
                rb_hit_miss(&res->hits[i]);
                continue;
            }
            float lo[3], hi[3];
            for (int a = 0; a < 3; a++) {
                lo[a] = rb_boxset_lo(b, a)[j];
                hi[a] = rb_boxset_hi(b, a)[j];
            }
            rb_slab_full(&w->prep[r], lo, hi, &res->hits[i]);
            res->hits[i].box = j;
        }
    }
}

/* Walks rays [begin, end) of the run's order through the hierarchy one
 * by one; `any` first tests the boxes that stopped the last few rays
 * (blockers.h: neighbours in walk order often share them). */
static void walk_rays(cpu_run *run, size_t begin, size_t end,
                      rb_blockers *recent)
{
    const rb_job *job = run->job;
    const rb_bvh *bvh = job->bvh;
    const rb_bvh_walkers *walk = run->be->walk;
    rb_results *res = run->res;
    size_t ray_size = job->dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
    for (size_t j = begin; j < end; j++) {
        size_t i = run->order ? run->order[j] : j;
        if (run->order && j + WALK_PREFETCH < end) {
            /* In walk order, rays and answers are scattered: fetch them a
             * few rays ahead. */
            size_t ahead = run->order[j + WALK_PREFETCH];
            __builtin_prefetch((const char *)job->rays + ahead * ray_size);
            if (job->mode == RB_MODE_NEAREST)
                __builtin_prefetch(&res->hits[ahead], 1);
            else if (job->mode == RB_MODE_ANY)
                __builtin_prefetch(&res->any[ahead], 1);
            else
                __builtin_prefetch(&res->counts[ahead], 1);
            if (job->mode == RB_MODE_ALL)
                __builtin_prefetch(&res->list[ahead * job->max_hits], 1);
        }
        rb_ray_prep p;
        if (rb_prep_rays(job->rays, job->dims, i, i + 1, &p) != i + 1) {
            note_bad(run, i, RB_ELEMENT_RAY);
            continue;
        }
        switch (job->mode) {
        case RB_MODE_NEAREST:
            walk->nearest(bvh, &p, &res->hits[i]);
            break;
        case RB_MODE_ANY:
            res->any[i] = (uint8_t)rb_blockers_any(recent, bvh, walk, &p);
            break;
        case RB_MODE_COUNT:
            res->counts[i] = walk->count(bvh, &p);
            break;
        case RB_MODE_ALL:
            res->counts[i] = walk->all(bvh, &p, res->list + i * job->max_hits,
                                       job->max_hits);
            break;
        case RB_MODE_PAIRS:
            break;
        }
    }
}

/* Rays [begin, end) of the run's order through the hierarchy as one
 * stream (bvh_stream_avx2.c). Returns 0; -1 when the stream could not
 * run (its answers are then to be walked again); 1 when the job was
 * stopped. */
static int stream_rays(cpu_run *run, unsigned worker, size_t begin,
                       size_t end)
{
    const rb_job *job = run->job;
    rb_results *res = run->res;
    size_t ray_size = job->dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
    rb_stream_scratch w = {0};
    rb_streams_worker(&run->streams, worker, &w);
    uint32_t n = 0;
    for (size_t j = begin; j < end; j++) {
        size_t i = run->order ? run->order[j] : j;
        if (run->order && j + GATHER_PREFETCH < end)
            __builtin_prefetch((const char *)job->rays +
                               run->order[j + GATHER_PREFETCH] * ray_size);
        if (rb_prep_rays(job->rays, job->dims, i, i + 1, &w.prep[n]) !=
            i + 1) {
            note_bad(run, i, RB_ELEMENT_RAY);
            continue;
        }
        w.index[n] = (uint32_t)i;
        w.any[n] = 0;
        w.count[n] = 0;
        w.best[n] = rb_joint_best_none();
        n++;
    }
    rb_bvh_stream s = {.tree = RB_TREE_BOXES,
                       .prep = w.prep,
                       .n = n,
                       .any = w.any,
                       .count = w.count,
                       .best = w.best,
                       .arena = w.arena,
                       .words = w.words,
                       .stop = job->stop ? rb_job_stop_cb : NULL,
                       .stop_user = (void *)job};
    int rc = run->be->walk->stream(job->bvh, &s, job->mode);
    if (rc != 0)
        return rc;
    for (uint32_t q = 0; q < n; q++) {
        if (job->mode == RB_MODE_ANY) {
            res->any[w.index[q]] = w.any[q];
        } else if (job->mode == RB_MODE_NEAREST) {
            rb_hit *out = &res->hits[w.index[q]];
            const rb_joint_best *b = &w.best[q];
            if (b->slot == UINT32_MAX) {
                rb_hit_miss(out);
                continue;
            }
            rb_bvh_best_box_full(job->bvh, b, &w.prep[q], out);
        } else {
            res->counts[w.index[q]] = w.count[q];
        }
    }
    return 0;
}

/* Rays [begin, end) of the run's order through the hierarchy: as a
 * stream where the run has one (after `any`'s trial of the blockers
 * list), else one by one. */
static void walk_range(cpu_run *run, unsigned worker, size_t begin,
                       size_t end)
{
    rb_blockers recent = {.n = 0};
    if (run->streams.mem && run->job->mode == RB_MODE_ANY) {
        size_t trial = end - begin < STREAM_TRIAL_RAYS ? end - begin
                                                       : STREAM_TRIAL_RAYS;
        walk_rays(run, begin, begin + trial, &recent);
        begin += trial;
    }
    int blockers_pay = recent.tries >= RB_BLOCKERS_TRIAL &&
                       recent.hits * STREAM_BLOCKERS_RATE >= RB_BLOCKERS_TRIAL;
    if (run->streams.mem && begin < end && !blockers_pay) {
        int rc = stream_rays(run, worker, begin, end);
        if (rc == 1)
            atomic_store(&run->stopped, 1);
        if (rc >= 0)
            return;
    }
    walk_rays(run, begin, end, &recent);
}

/* No boxes: once rays [begin, end) are checked (R6), every answer is
 * empty. (A shape query without boxes makes this pass before its shape
 * pass; as a scan over zero boxes, 64 rays a task, it took about 5% of a
 * sphere scene's time.) */
static void empty_task(cpu_run *run, size_t begin, size_t end)
{
    const rb_job *job = run->job;
    rb_results *res = run->res;
    size_t bad = rb_check_rays(job->rays, job->dims, begin, end);
    if (bad < end) {
        note_bad(run, bad, RB_ELEMENT_RAY);
        return;
    }
    for (size_t i = begin; i < end; i++) {
        switch (job->mode) {
        case RB_MODE_NEAREST:
            rb_hit_miss(&res->hits[i]);
            break;
        case RB_MODE_ANY:
            res->any[i] = 0;
            break;
        case RB_MODE_COUNT:
        case RB_MODE_ALL:
            res->counts[i] = 0;
            break;
        case RB_MODE_PAIRS:
            break;
        }
    }
}

static void cpu_task(void *arg, size_t task, unsigned worker)
{
    cpu_run *run = arg;
    const rb_job *job = run->job;
    size_t begin, end;
    rb_pool_task_range(task, run->per_task, job->n_rays, &begin, &end);
    if (atomic_load_explicit(&run->stopped, memory_order_relaxed))
        return;
    if (rb_job_stopped(job)) {
        atomic_store(&run->stopped, 1);
        return;
    }
    if (job->mode != RB_MODE_PAIRS && !job->boxes->n) {
        empty_task(run, begin, end);
        return;
    }
    if (job->bvh && job->mode != RB_MODE_PAIRS) {
        walk_range(run, worker, begin, end);
        return;
    }
    /* An earlier element is already known bad: this task cannot matter. */
    if ((uint64_t)begin * 2 > atomic_load_explicit(&run->bad,
                                                   memory_order_relaxed))
        return;

    if (job->mode == RB_MODE_PAIRS) {
        rb_element_kind kind = RB_ELEMENT_NONE;
        int stream = job->n_rays * sizeof(rb_hit) >= STREAM_OUT_BYTES;
        size_t bad = run->be->k->pairs(job->rays, job->pair_boxes, job->dims,
                                       begin, end, run->res->hits, stream,
                                       &kind);
        if (bad < end)
            note_bad(run, bad, kind);
        return;
    }
    worker_scratch *w = &run->be->scratch[worker];
    size_t bad = rb_prep_rays(job->rays, job->dims, begin, end, w->prep);
    if (bad < end) {
        note_bad(run, bad, RB_ELEMENT_RAY);
        return;
    }
    scan_group(run, w, begin, end - begin);
}

static int cpu_run_job(rb_backend *self, rb_context *ctx, const rb_job *job,
                       rb_results *res, rb_bad_input *bad)
{
    cpu_backend *be = (cpu_backend *)self;
    cpu_run run = {.be = be, .job = job, .res = res};
    atomic_init(&run.bad, UINT64_MAX);
    atomic_init(&run.stopped, 0);

    size_t boxes = job->mode == RB_MODE_PAIRS ? 1 : job->boxes->n;
    int small = job->bvh ? job->n_rays < SMALL_BVH_RAYS
                         : (uint64_t)job->n_rays * (boxes ? boxes : 1) <
                               RB_SMALL_JOB_TESTS;
    uint32_t *order = NULL;
    uint64_t *keys = NULL;
    rb_workmem *work = &be->ctx->workmem;
    size_t order_bytes = job->n_rays * sizeof *order;
    size_t keys_bytes = 2 * job->n_rays * sizeof *keys;
    if (job->mode == RB_MODE_PAIRS) {
        /* a multiple of 64: every task's output starts 32-byte aligned
         * for the streaming stores */
        run.per_task = rb_pool_share_per_task(job->n_rays, be->workers, 64,
                                              PAIRS_MIN_PER_TASK,
                                              PAIRS_MAX_PER_TASK);
    } else if (!boxes) {
        run.per_task = EMPTY_PER_TASK;
    } else if (job->bvh) {
        size_t per = job->n_rays / ((size_t)be->workers * 8);
        size_t stream = be->walk->stream && rb_bvh_streams_for(job->mode, per)
                            ? rb_streams_take(&run.streams, work,
                                              be->workers, per,
                                              job->bvh->depth, 0)
                            : 0;
        run.per_task = stream      ? stream
                       : per < 1   ? 1
                       : per > WALK_PER_TASK ? WALK_PER_TASK
                                             : per;
        float lo[3], hi[3];
        rb_bvh_bounds(job->bvh, lo, hi);
        int sort = be->ctx->walk_order == RB_WALK_ORDER_ALWAYS
                       ? job->n_rays >= RB_ORDER_MIN_RAYS
                       : rb_order_pays(job->rays, job->dims, job->n_rays, lo,
                                       hi, job->bvh->n_nodes *
                                               sizeof(rb_bvh_node));
        if (sort) {
            /* Without memory for the order, rays go in input order. */
            order = rb_workmem_take(work, &order_bytes);
            keys = rb_workmem_take(work, &keys_bytes);
            if (order && keys) {
                int far = job->mode == RB_MODE_COUNT ||
                          job->mode == RB_MODE_ALL;
                rb_ray_order(be->ctx->pool, job->rays, job->dims,
                             job->n_rays, lo, hi, far, keys, order);
                run.order = order;
            }
            rb_workmem_give(work, keys, keys_bytes);
        }
    } else {
        /* Enough tasks for the threads to balance, few enough rays per
         * task that each walk over the boxes serves many rays. */
        size_t per = job->n_rays / ((size_t)be->workers * 8);
        run.per_task = per < 1 ? 1 : per > RAYS_PER_TASK_MAX
                                           ? RAYS_PER_TASK_MAX
                                           : per;
    }
    size_t tasks = (job->n_rays + run.per_task - 1) / run.per_task;
    if (small) {
        for (size_t t = 0; t < tasks; t++)
            cpu_task(&run, t, 0);
    } else {
        rb_pool_run(be->ctx->pool, tasks, cpu_task, &run);
    }
    rb_workmem_give(work, order, order_bytes);
    rb_streams_give(&run.streams, work);

    res->info.chunks = tasks;
    rb_copy_str(res->info.device, sizeof res->info.device, be->cpu_name);
    if (atomic_load(&run.stopped))
        return rb_fail(ctx, RB_ECANCELED, "the query was stopped");
    uint64_t code = atomic_load(&run.bad);
    if (code != UINT64_MAX) {
        bad->index = code / 2;
        bad->element = (code & 1) ? RB_ELEMENT_BOX : RB_ELEMENT_RAY;
        return RB_EINPUT;
    }
    return RB_OK;
}

static int cpu_run_visibility(rb_backend *self, rb_context *ctx,
                              const rb_vis_job *job, uint8_t *bits,
                              rb_run_info *info)
{
    cpu_backend *be = (cpu_backend *)self;
    return rb_cpu_visibility(ctx, be->walk, be->workers, be->cpu_name, job,
                             bits, info);
}

static void cpu_describe(const rb_backend *self, rb_backend_info *out)
{
    const cpu_backend *be = (const cpu_backend *)self;
    rb_copy_str(out->backend, sizeof out->backend, "cpu");
    rb_copy_str(out->device, sizeof out->device, be->cpu_name);
    rb_copy_str(out->platform, sizeof out->platform, "native");
    rb_copy_str(out->driver, sizeof out->driver, "libraybox "
                                                 RB_VERSION_STRING);
    rb_copy_str(out->simd, sizeof out->simd, be->k->simd);
    out->exact_division = 1;
    out->denormals = 1;
    out->compute_units = rb_online_cpus();
    out->threads = be->workers;
}

static void cpu_destroy(rb_backend *self)
{
    cpu_backend *be = (cpu_backend *)self;
    rb_free(be->ctx, be->scratch);
    rb_free(be->ctx, be);
}

static const struct rb_backend_ops cpu_ops = {
    .name = "cpu",
    .bvh = 1,
    .run = cpu_run_job,
    .run_visibility = cpu_run_visibility,
    .describe = cpu_describe,
    .destroy = cpu_destroy,
};

static void read_cpu_name(char *out, size_t cap)
{
    rb_copy_str(out, cap, "native CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *v = strchr(line, ':');
            if (v) {
                v++;
                while (*v == ' ' || *v == '\t')
                    v++;
                v[strcspn(v, "\n")] = '\0';
                rb_copy_str(out, cap, v);
            }
            break;
        }
    }
    fclose(f);
}

int rb_cpu_backend_create(rb_context *ctx, rb_backend **out)
{
    *out = NULL;
    cpu_backend *be = rb_calloc(ctx, sizeof *be, 64);
    if (!be)
        return RB_ENOMEM;
    be->base.ops = &cpu_ops;
    be->ctx = ctx;
    be->k = rb_scan_pick();
    be->walk = rb_bvh_walk_pick();
    be->workers = rb_pool_size(ctx->pool);
    be->scratch = rb_alloc(ctx, sizeof(worker_scratch) * be->workers, 64);
    if (!be->scratch) {
        rb_free(ctx, be);
        return RB_ENOMEM;
    }
    read_cpu_name(be->cpu_name, sizeof be->cpu_name);
    *out = &be->base;
    return RB_OK;
}
