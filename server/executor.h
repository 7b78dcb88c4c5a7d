/*
 * executor.h - the worker threads that run queries, and their bounded
 * queue. Each worker owns one rb_context (an rb_context is used by one
 * thread at a time), created at start-up with the configured backend.
 *
 * HTTP I/O threads submit a job, and the worker calls job->done() when
 * it is finished (or aborted at shutdown); done() resumes the suspended
 * connection, whose handler then queues the response. (Small CPU queries
 * never come here: the I/O thread runs them itself, handlers.c.)
 *
 * A queued job starts at once when no worker is running a light job, and
 * otherwise within about 2 ms: a running worker takes it next, or an idle
 * one that watches the queue (see executor.c for why not at once).
 *
 * Threads: every function may be called from any thread, except that
 * executor_destroy must come after executor_close and not race with
 * anything.
 */
#ifndef RBD_EXECUTOR_H
#define RBD_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"

typedef struct rbd_job rbd_job;
struct rbd_job {
    /* On a worker, with its context. */
    void (*run)(rbd_job *job, rb_context *ctx);
    /* After run, on the same worker; or with aborted = 1 on the thread
     * that closes the executor, for a job no worker took. */
    void (*done)(rbd_job *job);
    double t_queued, t_started, t_finished; /* monotonic ms */
    int aborted;
    /* A job that spreads over the context's threads (a large query): at
     * most one runs at a time, since each already uses every core and two
     * at once only thrash (measured: a quarter less throughput on 2
     * cores). Other jobs pass a waiting heavy one; heavy ones keep their
     * order. */
    int heavy;
    /* Merging (executor_set_merge): a job with merge set may run in one
     * merge->run call together with queued jobs that merge->same accepts
     * and that are as heavy as it, at most merge_max weight (rays) in
     * all; NULL: it never is. */
    const struct rbd_merge_ops *merge;
    uint64_t weight;
    double gap_ms; /* since the previous mergeable job came (submit) */
};

typedef struct rbd_merge_ops {
    /* Whether b may run in one call with a (any thread, the executor's
     * lock held: cheap, no locks). */
    int (*same)(const rbd_job *a, const rbd_job *b);
    /* Runs jobs[0..n), n >= 2, in ring order, on a worker; each job's
     * done() is called afterwards, as after run(). */
    void (*run)(rbd_job **jobs, unsigned n, rb_context *ctx);
} rbd_merge_ops;

/* Most jobs one merged call holds. */
#define RBD_MERGE_JOBS_MAX 256u

typedef struct rbd_executor rbd_executor;

typedef struct rbd_executor_options {
    unsigned workers;        /* >= 1 */
    unsigned queue_depth;    /* >= 1 */
    rb_context_options ctx;  /* for every worker's context */
} rbd_executor_options;

/* Creates the contexts and starts the workers. On failure returns a
 * status and writes why (the first context's error). */
int executor_create(const rbd_executor_options *opt, rbd_executor **out,
                    char *why, size_t why_len);

/* Queues a job: 0, or -1 when the queue is full or closed (nothing was
 * called then). on_queue(arg) runs, with the job's slot reserved, before
 * the job becomes visible to workers, so that it happens before run() and
 * done() - the server suspends the connection there. If the executor is
 * closed while on_queue runs, done() is called (aborted = 1) before
 * submit returns 0. */
int executor_submit(rbd_executor *ex, rbd_job *job,
                    void (*on_queue)(void *arg), void *arg);

/* Refuses new jobs, lets running jobs finish, aborts the queued ones
 * (done() with aborted = 1) and joins the workers. */
void executor_close(rbd_executor *ex);
void executor_destroy(rbd_executor *ex);
/* rb_context_trim on every worker's context (from any thread). */
void executor_trim(rbd_executor *ex);
/* Memory was freed outside a job (a scene deleted): an idle worker trims
 * its context, and with it what the library keeps for the whole process,
 * after a second without jobs, as after a job (from any thread). */
void executor_trim_soon(rbd_executor *ex);

/* Merging of small jobs (see rbd_job.merge): a worker that takes a
 * mergeable job takes every queued job of the same kind with it, up to
 * max_weight in all (0: no merging, the default), and, when such jobs
 * have been arriving less than wait_us apart, waits up to wait_us from
 * the first job's start for more before it runs them. Call before the
 * first submit. */
void executor_set_merge(rbd_executor *ex, uint64_t max_weight,
                        uint64_t wait_us);

typedef struct rbd_executor_stats {
    uint64_t queued, running, capacity, workers, heavy_running;
    /* merged calls (of two or more jobs) and the jobs they ran */
    uint64_t merged_runs, merged_jobs;
} rbd_executor_stats;
void executor_stats(rbd_executor *ex, rbd_executor_stats *out);

/* What the first worker's context runs on (all are alike). */
const rb_backend_info *executor_backend(const rbd_executor *ex);

double rbd_now_ms(void);

#endif
