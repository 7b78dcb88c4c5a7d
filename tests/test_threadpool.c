/*
 * test_threadpool.c - rb_pool_run runs every task of a job exactly once,
 * with that job's function and argument, and returns only when all are
 * done, also when jobs follow each other faster than the workers wake
 * (a worker that wakes after the caller has taken every task skips the
 * job: it must neither run a task of it nor one of the next job with the
 * old job's function). Pools larger than the machine make late wakers
 * common.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "threadpool.h"
#include "testutil.h"

#define MAX_TASKS 64

typedef struct job {
    unsigned id;
    unsigned pool_size;
    atomic_uint ran[MAX_TASKS];
    atomic_uint wrong; /* tasks run for another job, or bad workers */
} job;

static void count_task(void *arg, size_t task, unsigned worker)
{
    job *j = arg;
    if (task >= MAX_TASKS || worker >= j->pool_size)
        atomic_fetch_add(&j->wrong, 1);
    else
        atomic_fetch_add(&j->ran[task], 1);
}

/* The same, slower: the caller is still busy when the workers arrive. */
static void slow_task(void *arg, size_t task, unsigned worker)
{
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
    count_task(arg, task, worker);
}

/* Jobs one after another, two jobs' arguments alternating, so that a task
 * run with the wrong job's argument, or after rb_pool_run returned, shows
 * as a count other than one. */
START_TEST(test_every_task_once)
{
    static const unsigned threads[] = {1, 2, 4, 9};
    unsigned t = threads[_i];
    rb_allocator heap;
    rb_allocator_default(&heap);
    struct rb_pool *pool = NULL;
    ck_assert_int_eq(rb_pool_create(&heap, t, &pool), RB_OK);
    unsigned size = rb_pool_size(pool);
    ck_assert_uint_ge(size, 1);
    ck_assert_uint_le(size, t);
    job *jobs = calloc(2, sizeof *jobs);
    ck_assert_ptr_nonnull(jobs);
    for (unsigned round = 0; round < 6000; round++) {
        job *j = &jobs[round % 2];
        size_t n = 1 + (round * 7) % MAX_TASKS;
        j->id = round;
        j->pool_size = size;
        for (size_t k = 0; k < MAX_TASKS; k++)
            atomic_store(&j->ran[k], 0);
        rb_pool_run(pool, n, round % 50 == 0 ? slow_task : count_task, j);
        if (atomic_load(&j->wrong))
            ck_abort_msg("round %u: a task had a bad index or worker", round);
        for (size_t k = 0; k < MAX_TASKS; k++) {
            unsigned want = k < n ? 1 : 0, got = atomic_load(&j->ran[k]);
            if (got != want)
                ck_abort_msg("round %u (%zu tasks, %u threads): task %zu ran "
                             "%u times", round, n, size, k, got);
        }
    }
    rb_pool_destroy(pool);
    /* Nothing ran for the jobs after the pool returned from them. */
    for (unsigned k = 0; k < 2; k++) {
        ck_assert_uint_eq(atomic_load(&jobs[k].wrong), 0);
        for (size_t m = 0; m < MAX_TASKS; m++)
            ck_assert_uint_le(atomic_load(&jobs[k].ran[m]), 1);
    }
    free(jobs);
}
END_TEST

static Suite *pool_suite(void)
{
    Suite *s = suite_create("threadpool");
    TCase *tc = tcase_create("jobs");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_every_task_once, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return rbt_run_suite(pool_suite()) ? EXIT_FAILURE : EXIT_SUCCESS;
}
