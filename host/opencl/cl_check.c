/*
 * cl_check.c - SPEC R6 for the OpenCL backend: a chunk of rays (and of the
 * boxes of pairs) is checked on the host right before it is enqueued, so
 * the device never sees invalid input and the batch is read once more at
 * most. Large chunks are split over the context's thread pool; the lowest
 * invalid index wins whatever thread finds it (R10).
 */
#include <stdatomic.h>

#include "../threadpool.h"
#include "cl_internal.h"

#define CHECK_TASK 65536 /* elements per task: ~2 MiB of rays */

typedef struct check_run {
    const rb_job *job;
    size_t begin, end;
    /* Lowest invalid element, as index * 2 + (1 for a box). */
    atomic_uint_fast64_t bad;
} check_run;

static void check_range(check_run *run, size_t begin, size_t end)
{
    const rb_job *job = run->job;
    size_t r = rb_check_rays(job->rays, job->dims, begin, end);
    /* A ray at index i comes before a box at i: boxes only up to r. */
    size_t b = r;
    if (job->mode == RB_MODE_PAIRS)
        b = rb_check_boxes(job->pair_boxes, job->dims, begin, r);
    uint64_t code = UINT64_MAX;
    if (b < r)
        code = (uint64_t)b * 2 + 1;
    else if (r < end)
        code = (uint64_t)r * 2;
    uint64_t cur = atomic_load(&run->bad);
    while (code < cur && !atomic_compare_exchange_weak(&run->bad, &cur, code))
        ;
}

static void check_task(void *arg, size_t task, unsigned worker)
{
    check_run *run = arg;
    (void)worker;
    size_t begin = run->begin + task * CHECK_TASK;
    size_t end = begin + CHECK_TASK < run->end ? begin + CHECK_TASK
                                               : run->end;
    if ((uint64_t)begin * 2 > atomic_load_explicit(&run->bad,
                                                   memory_order_relaxed))
        return; /* an earlier element is already known bad */
    check_range(run, begin, end);
}

int rb_cl_check_chunk(rb_context *ctx, const rb_job *job, size_t begin,
                      size_t end, rb_bad_input *bad)
{
    check_run run = {.job = job, .begin = begin, .end = end};
    atomic_init(&run.bad, UINT64_MAX);
    size_t tasks = (end - begin + CHECK_TASK - 1) / CHECK_TASK;
    if (tasks > 1 && rb_pool_size(ctx->pool) > 1)
        rb_pool_run(ctx->pool, tasks, check_task, &run);
    else
        check_range(&run, begin, end);
    uint64_t code = atomic_load(&run.bad);
    if (code == UINT64_MAX)
        return 0;
    bad->index = code / 2;
    bad->element = (code & 1) ? RB_ELEMENT_BOX : RB_ELEMENT_RAY;
    return 1;
}
