/* executor.c - see executor.h. */
#include "executor.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct worker {
    rbd_executor *ex;
    rb_context *ctx;
    pthread_t thread;
    int started;
} worker;

struct rbd_executor {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    rbd_job **ring;          /* queue_depth slots */
    unsigned cap, head, len;
    unsigned running;
    unsigned heavy_running;  /* 0 or 1 */
    int closed;
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

/* Lock held: the oldest queued job a worker may start now, taken out of
 * the ring; NULL when every queued job is heavy and one is running. */
static rbd_job *take(rbd_executor *ex)
{
    for (unsigned k = 0; k < ex->len; k++) {
        unsigned at = (ex->head + k) % ex->cap;
        rbd_job *job = ex->ring[at];
        if (job->heavy && ex->heavy_running)
            continue;
        /* Close the gap: move the older ones up by one. */
        for (unsigned j = k; j > 0; j--) {
            unsigned to = (ex->head + j) % ex->cap;
            ex->ring[to] = ex->ring[(ex->head + j - 1) % ex->cap];
        }
        ex->head = (ex->head + 1) % ex->cap;
        ex->len--;
        return job;
    }
    return NULL;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    rbd_executor *ex = w->ex;
    pthread_mutex_lock(&ex->lock);
    for (;;) {
        rbd_job *job = NULL;
        while (!ex->closed && !(job = take(ex)))
            pthread_cond_wait(&ex->wake, &ex->lock);
        if (!job)
            break; /* closed: queued jobs are aborted by executor_close */
        ex->running++;
        ex->heavy_running += job->heavy != 0;
        pthread_mutex_unlock(&ex->lock);

        int heavy = job->heavy;
        job->t_started = rbd_now_ms();
        job->run(job, w->ctx);
        job->t_finished = rbd_now_ms();
        job->done(job); /* the job may be gone after this */

        pthread_mutex_lock(&ex->lock);
        ex->running--;
        if (heavy) {
            ex->heavy_running--;
            /* A heavy job may have been passed over by every worker. */
            pthread_cond_broadcast(&ex->wake);
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
    pthread_cond_init(&ex->wake, NULL);
    ex->cap = opt->queue_depth;
    ex->ring = calloc(ex->cap, sizeof *ex->ring);
    ex->workers = calloc(opt->workers, sizeof *ex->workers);
    int rc = RB_OK;
    if (!ex->ring || !ex->workers) {
        rc = RB_ENOMEM;
        goto fail;
    }
    for (unsigned i = 0; i < opt->workers; i++) {
        worker *w = &ex->workers[i];
        w->ex = ex;
        rc = rb_context_create(&opt->ctx, &w->ctx, why, why_len);
        if (rc)
            goto fail;
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
    if (ex->closed || ex->len == ex->cap) {
        pthread_mutex_unlock(&ex->lock);
        return -1;
    }
    job->t_queued = rbd_now_ms();
    job->aborted = 0;
    if (on_queue)
        on_queue(arg);
    ex->ring[(ex->head + ex->len) % ex->cap] = job;
    ex->len++;
    pthread_cond_signal(&ex->wake);
    pthread_mutex_unlock(&ex->lock);
    return 0;
}

void executor_close(rbd_executor *ex)
{
    if (!ex)
        return;
    pthread_mutex_lock(&ex->lock);
    ex->closed = 1;
    pthread_cond_broadcast(&ex->wake);
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
    for (unsigned i = 0; i < ex->n_workers; i++)
        rb_context_destroy(ex->workers[i].ctx);
    free(ex->workers);
    free(ex->ring);
    pthread_cond_destroy(&ex->wake);
    pthread_mutex_destroy(&ex->lock);
    free(ex);
}

void executor_stats(rbd_executor *ex, rbd_executor_stats *out)
{
    pthread_mutex_lock(&ex->lock);
    out->queued = ex->len;
    out->running = ex->running;
    out->capacity = ex->cap;
    out->workers = ex->n_workers;
    out->heavy_running = ex->heavy_running;
    pthread_mutex_unlock(&ex->lock);
}

const rb_backend_info *executor_backend(const rbd_executor *ex)
{
    return &ex->info;
}
