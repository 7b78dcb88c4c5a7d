/* executor.c - see executor.h.
 *
 * Waking workers. A new job wakes an idle worker only when no worker is
 * running (or about to run) a light job; otherwise a running worker takes
 * it next. While the server is busy (a job running or one ended within
 * ACTIVE_MS), idle workers sleep STANDBY_MS at a time instead of until
 * signalled, and take a queued job that has waited STANDBY_MS; an idle
 * server's workers sleep until signalled. The worker woken is the last to
 * have gone idle. Under a stream of small queries one worker at a time
 * then does the work instead of each request waking a sleeping worker (on
 * 2 cores ~0.25 worker wake-ups a request instead of ~1, and as many
 * requests a second as one worker, which had served ~14% more than two
 * eagerly woken ones), while a job queued behind a slow light job still
 * starts within about STANDBY_MS, and one behind heavy jobs at once.
 *
 * Merging (executor_set_merge). A worker that takes a mergeable job
 * gathers the queued jobs its merge->same accepts, oldest first, while
 * their weight fits; a job that does not fit, or is of another kind,
 * stays queued in its place. When the job came less than wait_us after
 * the previous mergeable one (a stream of them), the worker then waits
 * on merge_cv, which each new mergeable submit signals, gathering again,
 * until wait_us after it took the job or the batch is full. A quiet
 * server's lone request thus never waits.
 *
 * Nor, mostly, does a lone client's stream (queries one after another:
 * close together, never two at once; measured on PoCL, waiting each time
 * cost one client a quarter of its requests/s): merge_score follows how
 * often waits gathered something (each wait moves it a quarter of the
 * way to 1 if it did, to 0 if not), and below MERGE_SCORE_MIN only every
 * MERGE_PROBE-th job that could wait does, to notice a stream coming
 * back. Bursts (a simulation's tick) keep it high: only the wait at a
 * burst's end gathers nothing.
 */
#include "executor.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a queued job waits for a running worker before an idle one
 * takes it. */
#define STANDBY_MS 2.0
/* How long after the last job idle workers keep looking at the queue. */
#define ACTIVE_MS 100.0
/* A worker idle this long frees the work arrays its context kept from
 * its jobs (rb_context_trim): rebuilds closer together reuse them, and
 * an idle server does not hold them. */
#define TRIM_IDLE_MS 1000.0
/* merge_score below which only every MERGE_PROBE-th job waits. */
#define MERGE_SCORE_MIN 0.25
#define MERGE_PROBE 16u

typedef struct worker {
    rbd_executor *ex;
    rb_context *ctx;
    pthread_t thread;
    int started;
    pthread_cond_t wake;     /* signalled by whoever picks this worker */
    int picked;              /* signalled, not yet awake */
    int may_keep;            /* a job ran since its context was trimmed */
} worker;

struct rbd_executor {
    pthread_mutex_t lock;
    rbd_job **ring;          /* queue_depth slots */
    unsigned cap, head, len;
    unsigned reserved;       /* slots held by submits running on_queue */
    unsigned running;
    unsigned heavy_running;  /* 0 or 1 */
    worker **idle;           /* idle workers, the last to go idle on top */
    unsigned sleepers;       /* entries in idle */
    unsigned watchers;       /* of them, those in a STANDBY_MS wait */
    unsigned waking;         /* workers picked and signalled, not yet up */
    double last_job_ms;      /* when a job last started or ended */
    int closed;
    uint64_t merge_max;      /* weight of a merged call; 0: no merging */
    uint64_t merge_wait_us;
    pthread_cond_t merge_cv; /* a mergeable job was queued */
    unsigned merge_waiters;  /* workers waiting on merge_cv */
    double merge_score;      /* how often waits gathered something, 0..1 */
    unsigned merge_skipped;  /* waits skipped since the last probe */
    double last_mergeable_ms; /* when the last mergeable job came */
    uint64_t merged_runs, merged_jobs;
    unsigned n_workers;
    worker *workers;
    rb_backend_info info;
};

double rbd_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Lock held: takes the k-th queued job out of the ring. */
static rbd_job *remove_at(rbd_executor *ex, unsigned k)
{
    rbd_job *job = ex->ring[(ex->head + k) % ex->cap];
    /* Close the gap: move the older ones up by one. */
    for (unsigned j = k; j > 0; j--) {
        unsigned to = (ex->head + j) % ex->cap;
        ex->ring[to] = ex->ring[(ex->head + j - 1) % ex->cap];
    }
    ex->head = (ex->head + 1) % ex->cap;
    ex->len--;
    return job;
}

/* Lock held: the oldest queued job a worker may start now, taken out of
 * the ring; NULL when every queued job is heavy and one is running. */
static rbd_job *take(rbd_executor *ex)
{
    for (unsigned k = 0; k < ex->len; k++) {
        rbd_job *job = ex->ring[(ex->head + k) % ex->cap];
        if (job->heavy && ex->heavy_running)
            continue;
        return remove_at(ex, k);
    }
    return NULL;
}

/* Lock held: moves the queued jobs that may run with batch[0] into the
 * batch, oldest first, while *weight stays within merge_max. */
static void gather(rbd_executor *ex, rbd_job **batch, unsigned *n,
                   uint64_t *weight)
{
    const rbd_merge_ops *ops = batch[0]->merge;
    for (unsigned k = 0; k < ex->len && *n < RBD_MERGE_JOBS_MAX;) {
        rbd_job *job = ex->ring[(ex->head + k) % ex->cap];
        if (job->merge != ops || job->heavy != batch[0]->heavy ||
            *weight + job->weight > ex->merge_max ||
            !ops->same(batch[0], job)) {
            k++;
            continue;
        }
        *weight += job->weight;
        batch[(*n)++] = remove_at(ex, k);
    }
}

/* Lock held: whether a worker that took the mergeable job should wait
 * for more (see the top of the file). */
static int merge_should_wait(const rbd_executor *ex, const rbd_job *job,
                             unsigned n, uint64_t weight)
{
    return ex->merge_wait_us && !ex->closed && n < RBD_MERGE_JOBS_MAX &&
           weight < ex->merge_max &&
           job->gap_ms * 1e3 < (double)ex->merge_wait_us;
}

/* Lock held: job and the queued jobs that may run with it into batch;
 * returns how many. */
static unsigned merge_batch(rbd_executor *ex, rbd_job *job, rbd_job **batch)
{
    unsigned n = 1;
    batch[0] = job;
    if (!job->merge || !ex->merge_max)
        return n;
    uint64_t weight = job->weight;
    gather(ex, batch, &n, &weight);
    if (!merge_should_wait(ex, job, n, weight))
        return n;
    if (ex->merge_score < MERGE_SCORE_MIN &&
        ++ex->merge_skipped < MERGE_PROBE)
        return n;
    ex->merge_skipped = 0;
    unsigned before = n;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += (long)(ex->merge_wait_us * 1000);
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    double end = rbd_now_ms() + (double)ex->merge_wait_us / 1e3;
    while (merge_should_wait(ex, job, n, weight) && rbd_now_ms() < end) {
        ex->merge_waiters++;
        pthread_cond_timedwait(&ex->merge_cv, &ex->lock, &until);
        ex->merge_waiters--;
        gather(ex, batch, &n, &weight);
    }
    ex->merge_score = 0.75 * ex->merge_score + (n > before ? 0.25 : 0);
    return n;
}

/* Lock held: a running worker (or one about to run) will take queued
 * light jobs next. Counting the woken ones matters: an I/O thread submits
 * a burst of requests before the worker it woke for the first is up. */
static int light_running(const rbd_executor *ex)
{
    return ex->running + ex->waking > ex->heavy_running;
}

/* Lock held: whether an idle worker should take a queued job now rather
 * than leave it to a running one. */
static int idle_should_take(const rbd_executor *ex)
{
    if (!ex->len)
        return 0;
    return !light_running(ex) ||
           rbd_now_ms() - ex->ring[ex->head]->t_queued >= STANDBY_MS;
}

/* Lock held: the worker to signal for a new job, taken off the idle
 * stack, or NULL. The last to go idle is picked: under a stream of small
 * queries the same worker, with its caches warm, does them all. */
static worker *pick_idle(rbd_executor *ex)
{
    if (!ex->sleepers)
        return NULL;
    worker *w = ex->idle[--ex->sleepers];
    w->picked = 1;
    ex->waking++;
    return w;
}

static void drop_idle(rbd_executor *ex, worker *w)
{
    for (unsigned i = 0; i < ex->sleepers; i++)
        if (ex->idle[i] == w) {
            memmove(&ex->idle[i], &ex->idle[i + 1],
                    (ex->sleepers - i - 1) * sizeof *ex->idle);
            ex->sleepers--;
            return;
        }
}

/* Lock held: wakes every idle worker (close, a heavy job's end). */
static void wake_all(rbd_executor *ex)
{
    while (ex->sleepers)
        pthread_cond_signal(&pick_idle(ex)->wake);
}

/* CLOCK_MONOTONIC (the workers' condition variables' clock) ms from now. */
static struct timespec monotonic_in(double ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long long ns = until.tv_nsec + (long long)(ms * 1e6);
    until.tv_sec += (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    return until;
}

/* Lock held: sleeps until signalled, or STANDBY_MS while the server is
 * busy, a job running or one ended within ACTIVE_MS (then queued jobs are
 * looked at without a signal). Otherwise, when jobs ran on w since its
 * context was last trimmed, for TRIM_IDLE_MS at most, and trims it if
 * nothing came. */
static void idle_wait(rbd_executor *ex, worker *w)
{
    ex->idle[ex->sleepers++] = w;
    int trim = 0;
    if (ex->n_workers > 1 &&
        (ex->running || rbd_now_ms() - ex->last_job_ms < ACTIVE_MS)) {
        ex->watchers++;
        struct timespec until = monotonic_in(STANDBY_MS);
        pthread_cond_timedwait(&w->wake, &ex->lock, &until);
        ex->watchers--;
    } else if (w->may_keep) {
        struct timespec until = monotonic_in(TRIM_IDLE_MS);
        trim = pthread_cond_timedwait(&w->wake, &ex->lock, &until) ==
               ETIMEDOUT;
    } else {
        pthread_cond_wait(&w->wake, &ex->lock);
    }
    if (w->picked) {
        w->picked = 0;
        ex->waking--;
        return;
    }
    drop_idle(ex, w); /* a timeout or a spurious wake-up */
    if (trim) {
        w->may_keep = 0;
        pthread_mutex_unlock(&ex->lock);
        rb_context_trim(w->ctx);
        pthread_mutex_lock(&ex->lock);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    rbd_executor *ex = w->ex;
    int idle = 0; /* this worker has been waiting */
    pthread_mutex_lock(&ex->lock);
    for (;;) {
        rbd_job *job = NULL;
        /* A worker that has just finished a job takes the next at once;
         * one that was idle leaves it to a running worker for a while. */
        while (!ex->closed &&
               !((!idle || idle_should_take(ex)) && (job = take(ex)))) {
            idle_wait(ex, w);
            idle = 1;
        }
        if (!job)
            break; /* closed: queued jobs are aborted by executor_close */
        idle = 0;
        ex->running++;
        ex->heavy_running += job->heavy != 0;
        rbd_job *batch[RBD_MERGE_JOBS_MAX];
        unsigned n = merge_batch(ex, job, batch);
        ex->last_job_ms = rbd_now_ms();
        for (unsigned i = 0; i < n; i++)
            batch[i]->t_started = ex->last_job_ms;
        if (n > 1) {
            ex->merged_runs++;
            ex->merged_jobs += n;
        }
        /* Jobs behind this one: light ones would now wait for it if it
         * is heavy; and after a quiet spell idle workers sleep until
         * signalled, so one is woken to watch them. */
        worker *other = ex->len && (job->heavy || !ex->watchers)
                            ? pick_idle(ex)
                            : NULL;
        pthread_mutex_unlock(&ex->lock);
        if (other)
            pthread_cond_signal(&other->wake);

        int heavy = job->heavy;
        if (n > 1)
            job->merge->run(batch, n, w->ctx);
        else
            job->run(job, w->ctx);
        double job_end = rbd_now_ms();
        for (unsigned i = 0; i < n; i++) {
            batch[i]->t_finished = job_end;
            batch[i]->done(batch[i]); /* the job may be gone after this */
        }

        pthread_mutex_lock(&ex->lock);
        w->may_keep = 1;
        ex->running--;
        ex->last_job_ms = job_end;
        if (heavy) {
            ex->heavy_running--;
            /* A heavy job may have been passed over by every worker. */
            wake_all(ex);
        }
    }
    pthread_mutex_unlock(&ex->lock);
    return NULL;
}

int executor_create(const rbd_executor_options *opt, rbd_executor **out,
                    char *why, size_t why_len)
{
    *out = NULL;
    if (!opt->workers || !opt->queue_depth)
        return RB_EINVAL;
    rbd_executor *ex = calloc(1, sizeof *ex);
    if (!ex)
        return RB_ENOMEM;
    pthread_mutex_init(&ex->lock, NULL);
    pthread_condattr_t mattr;
    pthread_condattr_init(&mattr);
    pthread_condattr_setclock(&mattr, CLOCK_MONOTONIC); /* merge_batch */
    pthread_cond_init(&ex->merge_cv, &mattr);
    pthread_condattr_destroy(&mattr);

    ex->cap = opt->queue_depth;
    ex->ring = calloc(ex->cap, sizeof *ex->ring);
    ex->workers = calloc(opt->workers, sizeof *ex->workers);
    ex->idle = calloc(opt->workers, sizeof *ex->idle);
    int rc = RB_OK;
    if (!ex->ring || !ex->workers || !ex->idle) {
        rc = RB_ENOMEM;
        goto fail;
    }
    for (unsigned i = 0; i < opt->workers; i++) {
        worker *w = &ex->workers[i];
        w->ex = ex;
        rc = rb_context_create(&opt->ctx, &w->ctx, why, why_len);
        if (rc)
            goto fail;
        /* Every kernel compiled now, before the server listens: PoCL
         * compiles each on its first launch, which would otherwise land
         * in some client's first query of each kind. */
        rc = rb_context_warm_up(w->ctx);
        if (rc) {
            snprintf(why, why_len, "warming up worker %u's kernels: %s", i,
                     rb_context_error(w->ctx)->message);
            rb_context_destroy(w->ctx);
            w->ctx = NULL;
            goto fail;
        }
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* idle_wait */
        pthread_cond_init(&w->wake, &attr);
        pthread_condattr_destroy(&attr);
        ex->n_workers = i + 1;
    }
    rb_context_info(ex->workers[0].ctx, &ex->info);
    for (unsigned i = 0; i < ex->n_workers; i++) {
        worker *w = &ex->workers[i];
        if (pthread_create(&w->thread, NULL, worker_main, w)) {
            snprintf(why, why_len, "cannot start worker thread %u", i);
            rc = RB_ENOMEM;
            goto fail;
        }
        w->started = 1;
    }
    *out = ex;
    return RB_OK;
fail:
    executor_close(ex);
    executor_destroy(ex);
    return rc;
}

int executor_submit(rbd_executor *ex, rbd_job *job,
                    void (*on_queue)(void *arg), void *arg)
{
    pthread_mutex_lock(&ex->lock);
    if (ex->closed || ex->len + ex->reserved >= ex->cap) {
        pthread_mutex_unlock(&ex->lock);
        return -1;
    }
    /* The slot is held while on_queue runs outside the lock: suspending a
     * connection is a system call, and workers finishing jobs would queue
     * up on the lock behind it. */
    ex->reserved++;
    pthread_mutex_unlock(&ex->lock);
    job->t_queued = rbd_now_ms();
    job->aborted = 0;
    job->gap_ms = 1e300;
    if (on_queue)
        on_queue(arg);

    pthread_mutex_lock(&ex->lock);
    ex->reserved--;
    if (ex->closed) {
        /* Closed meanwhile: no worker will take it, and executor_close
         * may have answered the queue already; answered here alike. */
        pthread_mutex_unlock(&ex->lock);
        job->aborted = 1;
        job->t_started = job->t_finished = rbd_now_ms();
        job->done(job);
        return 0;
    }
    ex->ring[(ex->head + ex->len) % ex->cap] = job;
    ex->len++;
    if (job->merge && ex->merge_max) {
        if (ex->last_mergeable_ms > 0)
            job->gap_ms = job->t_queued - ex->last_mergeable_ms;
        ex->last_mergeable_ms = job->t_queued;
        if (ex->merge_waiters)
            pthread_cond_broadcast(&ex->merge_cv);
    }
    /* See the top of the file: a running light job takes it next, unless
     * no idle worker watches the queue (after a quiet spell they sleep
     * until signalled): then one is woken to watch it. */
    worker *w = !light_running(ex) || !ex->watchers ? pick_idle(ex) : NULL;
    pthread_mutex_unlock(&ex->lock);
    /* Signalled after the unlock: a worker woken while the lock is still
     * held would block on it at once and need a second futex wake (glibc
     * does not move condition waiters to the mutex). No worker can miss
     * it: each tests the ring under the lock before it waits. */
    if (w)
        pthread_cond_signal(&w->wake);
    return 0;
}

void executor_close(rbd_executor *ex)
{
    if (!ex)
        return;
    pthread_mutex_lock(&ex->lock);
    ex->closed = 1;
    wake_all(ex);
    pthread_cond_broadcast(&ex->merge_cv);
    pthread_mutex_unlock(&ex->lock);
    for (unsigned i = 0; i < ex->n_workers; i++)
        if (ex->workers[i].started) {
            pthread_join(ex->workers[i].thread, NULL);
            ex->workers[i].started = 0;
        }
    /* No worker is left: whatever is still queued is answered here. */
    pthread_mutex_lock(&ex->lock);
    while (ex->len) {
        rbd_job *job = ex->ring[ex->head];
        ex->head = (ex->head + 1) % ex->cap;
        ex->len--;
        pthread_mutex_unlock(&ex->lock);
        job->aborted = 1;
        job->t_started = job->t_finished = rbd_now_ms();
        job->done(job);
        pthread_mutex_lock(&ex->lock);
    }
    pthread_mutex_unlock(&ex->lock);
}

void executor_destroy(rbd_executor *ex)
{
    if (!ex)
        return;
    for (unsigned i = 0; i < ex->n_workers; i++) {
        rb_context_destroy(ex->workers[i].ctx);
        pthread_cond_destroy(&ex->workers[i].wake);
    }
    free(ex->workers);
    free(ex->idle);
    free(ex->ring);
    pthread_cond_destroy(&ex->merge_cv);
    pthread_mutex_destroy(&ex->lock);
    free(ex);
}

void executor_trim(rbd_executor *ex)
{
    for (unsigned i = 0; i < ex->n_workers; i++)
        rb_context_trim(ex->workers[i].ctx);
}

void executor_trim_soon(rbd_executor *ex)
{
    /* A worker asleep without a deadline is woken (a wake-up it was not
     * picked for: it looks at the queue and waits again, now for
     * TRIM_IDLE_MS); one with a deadline trims anyway; a busy one waits
     * with it after its job. */
    pthread_mutex_lock(&ex->lock);
    for (unsigned i = 0; i < ex->sleepers; i++) {
        worker *w = ex->idle[i];
        if (w->may_keep)
            break;
        if (!w->picked) {
            w->may_keep = 1;
            pthread_cond_signal(&w->wake);
            break;
        }
    }
    pthread_mutex_unlock(&ex->lock);
}

void executor_stats(rbd_executor *ex, rbd_executor_stats *out)
{
    pthread_mutex_lock(&ex->lock);
    out->queued = ex->len;
    out->running = ex->running;
    out->capacity = ex->cap;
    out->workers = ex->n_workers;
    out->heavy_running = ex->heavy_running;
    out->merged_runs = ex->merged_runs;
    out->merged_jobs = ex->merged_jobs;
    pthread_mutex_unlock(&ex->lock);
}

void executor_set_merge(rbd_executor *ex, uint64_t max_weight,
                        uint64_t wait_us)
{
    pthread_mutex_lock(&ex->lock);
    ex->merge_max = max_weight;
    ex->merge_wait_us = wait_us;
    ex->merge_score = 1;
    pthread_mutex_unlock(&ex->lock);
}

const rb_backend_info *executor_backend(const rbd_executor *ex)
{
    return &ex->info;
}
