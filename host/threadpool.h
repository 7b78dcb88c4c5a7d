/*
 * threadpool.h - a fixed pool of worker threads, created once per context.
 *
 * rb_pool_run() hands out task numbers 0..n-1 through an atomic counter to
 * the workers and to the calling thread, and returns when all are done.
 * A worker that wakes after the caller has taken every task skips the job:
 * the caller waits only for threads that took part. Threads out of work
 * poll for a short while (SPIN_US, threadpool.c) before they sleep, so
 * back-to-back jobs need no wake-up through the kernel.
 * Results must not depend on which thread ran a task (SPEC R10).
 * One rb_pool_run() at a time per pool (the owning context's thread).
 */
#ifndef RB_THREADPOOL_H
#define RB_THREADPOOL_H

#include <stddef.h>

#include "raybox.h"

struct rb_pool;

/* worker is in [0, rb_pool_size()): per-thread scratch can be indexed by it. */
typedef void (*rb_task_fn)(void *arg, size_t task, unsigned worker);

/* threads counts the caller; 1 means no extra threads. If a thread cannot be
 * started the pool runs with fewer. Returns RB_ENOMEM if the pool itself
 * cannot be allocated. */
int rb_pool_create(const rb_allocator *alloc, unsigned threads,
                   struct rb_pool **out);
void rb_pool_destroy(struct rb_pool *pool);
unsigned rb_pool_size(const struct rb_pool *pool);
void rb_pool_run(struct rb_pool *pool, size_t n_tasks, rb_task_fn fn,
                 void *arg);

/* Task t's items [*begin, *end) when n items go in tasks of `per` (the
 * last task may hold fewer). */
static inline void rb_pool_task_range(size_t t, size_t per, size_t n,
                                      size_t *begin, size_t *end)
{
    *begin = t * per;
    *end = *begin + per < n ? *begin + per : n;
}

/* Items a task for a batch of n split in long runs: a quarter of each of
 * `workers` threads' share, rounded down to a multiple of `align`, then
 * clamped to [min, max] (both multiples of align). */
static inline size_t rb_pool_share_per_task(size_t n, unsigned workers,
                                            size_t align, size_t min,
                                            size_t max)
{
    size_t per = n / ((size_t)workers * 4) / align * align;
    return per < min ? min : per > max ? max : per;
}

#endif /* RB_THREADPOOL_H */
