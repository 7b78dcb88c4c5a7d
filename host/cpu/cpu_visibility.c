/*
 * cpu_visibility.c - observers x targets on the native backend with the
 * segments made where they are walked (the CPU's run_visibility; see
 * cpu_visibility.h).
 *
 * The explicit segments (host/visibility.c's tiles through rb_intersect)
 * write 32 bytes a segment, validate and sort each tile, and then walk
 * one observer's segments to its targets in their input order, which
 * in a scene of any size sends consecutive rays through unrelated parts of
 * the tree. Here the targets are put in a Morton order once (the order of
 * ray_order.h over the points: O(targets) memory, copied in that order so
 * a row reads them sequentially), and so are the observers; a task is one
 * observer against a block of consecutive sorted targets. Consecutive
 * segments then share an origin and nearly share a direction, so they
 * visit nearly the same nodes, which stay in L1. Tasks go out in the
 * observers' order, so the threads work on neighbouring rows.
 *
 * Each segment is exact.h's rb_segment_prep (the rule of the explicit
 * segments and of kernels/visibility.cl) walked by the table's `any`: the
 * bit is the one `any` gives for the explicit segment; before each walk
 * the boxes that stopped the task's last few segments are tested
 * (blockers.h), which answers most segments of a city without a walk.
 * Nothing here changes the arithmetic; only the order the walks run in
 * and which hit box is found first.
 *
 * Bits: a task that covers a whole row is the only writer of its bytes.
 * With few observers a row is split into several tasks, whose targets
 * (in sorted order) share bytes: then bytes are set with an atomic or.
 */
#include <stdatomic.h>
#include <string.h>

#include "../bvh/bvh.h"
#include "../threadpool.h"
#include "blockers.h"
#include "cpu_visibility.h"
#include "ray_order.h"

/* Tasks per worker the rows are cut into when there are few observers,
 * and the fewest targets a task gets then (a walk takes ~0.3-1 us). */
#define TASKS_PER_WORKER 8
#define MIN_BLOCK 256

typedef struct vis_run {
    const rb_vis_job *job;
    const rb_bvh_walkers *walk;
    const uint32_t *obs_order; /* n_observers: sorted position -> index */
    const uint32_t *tgt_order; /* n_targets: sorted position -> index */
    const float *tgt_sorted;   /* 3 * n_targets: the targets in that order */
    size_t block, blocks_per_row, stride;
    uint8_t *bits;
    atomic_int stopped;
} vis_run;

static void vis_task(void *arg, size_t task, unsigned worker)
{
    vis_run *run = arg;
    const rb_vis_job *job = run->job;
    (void)worker;
    if (atomic_load_explicit(&run->stopped, memory_order_relaxed))
        return;
    if (job->stop && job->stop(job->stop_user)) {
        atomic_store(&run->stopped, 1);
        return;
    }
    size_t row = task / run->blocks_per_row;
    size_t begin = (task % run->blocks_per_row) * run->block;
    size_t end = begin + run->block < job->n_targets ? begin + run->block
                                                     : job->n_targets;
    const float *o = job->observers + 3 * (size_t)run->obs_order[row];
    uint8_t *bits = run->bits + (size_t)run->obs_order[row] * run->stride;
    int shared = run->blocks_per_row > 1;
    rb_blockers recent = {.n = 0};
    for (size_t k = begin; k < end; k++) {
        rb_ray_prep p = rb_segment_prep(o, run->tgt_sorted + 3 * k,
                                        job->tmin, job->tmax);
        if (rb_blockers_any(&recent, job->bvh, run->walk, &p))
            continue;
        uint32_t j = run->tgt_order[k];
        uint8_t bit = (uint8_t)(1u << (j % 8));
        if (shared)
            __atomic_fetch_or(&bits[j / 8], bit, __ATOMIC_RELAXED);
        else
            bits[j / 8] |= bit;
    }
}

/* order[0..n) gets the points' Morton order (ray_order.h over rays at the
 * points). rays and keys are scratch of n and 2n elements. */
static void point_order(struct rb_pool *pool, const float *pts, size_t n,
                        rb_ray *rays, uint64_t *keys, uint32_t *order)
{
    float lo[3] = {INFINITY, INFINITY, INFINITY};
    float hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++) {
        rb_ray *r = &rays[i];
        memset(r, 0, sizeof *r);
        for (int a = 0; a < 3; a++) {
            float v = pts[3 * i + (size_t)a];
            r->origin[a] = v;
            lo[a] = v < lo[a] ? v : lo[a];
            hi[a] = v > hi[a] ? v : hi[a];
        }
    }
    rb_ray_order(pool, rays, 3, n, lo, hi, 0, keys, order);
}

int rb_cpu_visibility(rb_context *ctx, const rb_bvh_walkers *walk,
                      unsigned workers, const char *device,
                      const rb_vis_job *job, uint8_t *bits, rb_run_info *info)
{
    size_t n = job->n_observers, m = job->n_targets;
    /* Brute force (no hierarchy) and indices past 32 bits: the tiles. */
    if (!job->bvh || !n || !m || n > UINT32_MAX || m > UINT32_MAX)
        return RB_VIS_DECLINED;
    size_t most = n > m ? n : m;
    size_t scratch_bytes = most * (sizeof(rb_ray) + 2 * sizeof(uint64_t));
    void *scratch = rb_alloc(ctx, scratch_bytes, 64);
    uint32_t *obs_order = rb_alloc(ctx, n * sizeof *obs_order, 64);
    uint32_t *tgt_order = rb_alloc(ctx, m * sizeof *tgt_order, 64);
    float *tgt_sorted = rb_alloc(ctx, 3 * m * sizeof *tgt_sorted, 64);
    int rc = RB_VIS_DECLINED; /* without the memory, the tiles */
    if (!scratch || !obs_order || !tgt_order || !tgt_sorted)
        goto done;
    rb_ray *rays = scratch;
    uint64_t *keys = (uint64_t *)(rays + most);
    point_order(ctx->pool, job->observers, n, rays, keys, obs_order);
    point_order(ctx->pool, job->targets, m, rays, keys, tgt_order);
    for (size_t k = 0; k < m; k++)
        memcpy(&tgt_sorted[3 * k], &job->targets[3 * (size_t)tgt_order[k]],
               3 * sizeof(float));
    rb_free(ctx, scratch);
    scratch = NULL;

    vis_run run = {.job = job, .walk = walk, .obs_order = obs_order,
                   .tgt_order = tgt_order, .tgt_sorted = tgt_sorted,
                   .stride = (m + 7) / 8, .bits = bits};
    atomic_init(&run.stopped, 0);
    /* Whole rows when there are enough of them to balance the threads;
     * else each row in blocks, as many as that takes. */
    size_t want = (size_t)workers * TASKS_PER_WORKER;
    size_t per_row = n >= want ? 1 : (want + n - 1) / n;
    size_t most_blocks = (m + MIN_BLOCK - 1) / MIN_BLOCK;
    if (per_row > most_blocks)
        per_row = most_blocks;
    run.block = (m + per_row - 1) / per_row;
    run.blocks_per_row = (m + run.block - 1) / run.block;
    size_t tasks = n * run.blocks_per_row;
    rb_pool_run(ctx->pool, tasks, vis_task, &run);
    if (atomic_load(&run.stopped)) {
        rc = rb_fail(ctx, RB_ECANCELED, "the query was stopped");
        goto done;
    }
    if (info) {
        rb_copy_str(info->backend, sizeof info->backend, "cpu");
        rb_copy_str(info->device, sizeof info->device, device);
        info->chunks = tasks;
    }
    rc = RB_OK;
done:
    rb_free(ctx, scratch);
    rb_free(ctx, obs_order);
    rb_free(ctx, tgt_order);
    rb_free(ctx, tgt_sorted);
    return rc;
}
