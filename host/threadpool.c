/* threadpool.c - see threadpool.h. */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "internal.h"

#define RB_POOL_MAX_THREADS 256
/* How long a thread that ran out of work keeps polling for the next job
 * (a worker) or for the last worker to leave (the caller) before it
 * sleeps on a condition variable. A build or query is a string of short
 * jobs with a little serial work between them; a sleeping worker is woken
 * through the kernel, which at 100K boxes took longer than some whole
 * jobs: the caller had done every task of the centres' bounds and of the
 * gather alone before the worker came (docs/benchmarks.md). A pool idle
 * for longer costs nothing; polling is bounded by this much CPU time a
 * job, and yields the core between rounds of checks, so that where more
 * threads want the cores than there are (several contexts' pools, a
 * server's request threads) the pollers go last: without the yield, two
 * contexts querying at once on two cores lost 2-5% of their rate. */
#define SPIN_US 50

struct rb_pool {
    rb_allocator alloc;
    pthread_mutex_t lock;
    pthread_cond_t wake;     /* a new job or stop */
    pthread_cond_t done;     /* a thread started, or left a job */
    pthread_t threads[RB_POOL_MAX_THREADS];
    unsigned n_threads;      /* background threads */
    atomic_uint generation;  /* bumped for every job (under lock) */
    unsigned started;        /* background threads that have started */
    /* The job may still be joined: set by rb_pool_run, cleared by it
     * once no thread is inside. A thread that wakes after that (a busy
     * machine had it waiting for a core) skips the job, so the caller
     * never waits for a thread that had no part in it. */
    int live;
    atomic_uint active;      /* background threads inside the job (changed
                              * under lock) */
    atomic_int stop;
    rb_task_fn fn;
    void *arg;
    size_t n_tasks;
    atomic_size_t next;
};

static inline void relax(void)
{
#ifdef __SSE2__
    _mm_pause();
#endif
}

/* Polls for up to SPIN_US while (*word == value) == equal and *stop (if
 * given) is 0; the caller checks again under the lock after. */
static void spin_while(atomic_uint *word, unsigned value, int equal,
                       const atomic_int *stop)
{
    double until = rb_now_ms() + SPIN_US * 1e-3;
    for (;;) {
        for (int k = 0; k < 64; k++) {
            unsigned now = atomic_load_explicit(word, memory_order_relaxed);
            if ((now == value) != equal ||
                (stop && atomic_load_explicit(stop, memory_order_relaxed)))
                return;
            relax();
        }
        if (rb_now_ms() > until)
            return;
        sched_yield();
    }
}

static void pool_drain(struct rb_pool *pool, unsigned worker)
{
    for (;;) {
        size_t task = atomic_fetch_add_explicit(&pool->next, 1,
                                                memory_order_relaxed);
        if (task >= pool->n_tasks)
            return;
        pool->fn(pool->arg, task, worker);
    }
}

struct worker_start {
    struct rb_pool *pool;
    unsigned index;
};

static void *pool_worker(void *p)
{
    struct rb_pool *pool = ((struct worker_start *)p)->pool;
    unsigned index = ((struct worker_start *)p)->index;
    unsigned seen = 0;

    pthread_mutex_lock(&pool->lock);
    pool->started++; /* tells create() this thread has read its start */
    pthread_cond_signal(&pool->done);
    for (;;) {
        if (pool->generation == seen && !pool->stop) {
            pthread_mutex_unlock(&pool->lock);
            spin_while(&pool->generation, seen, 1, &pool->stop);
            pthread_mutex_lock(&pool->lock);
        }
        while (pool->generation == seen && !pool->stop)
            pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->stop)
            break;
        seen = pool->generation;
        if (!pool->live)
            continue; /* woke too late: the caller has done it all */
        pool->active++;
        pthread_mutex_unlock(&pool->lock);
        pool_drain(pool, index);
        pthread_mutex_lock(&pool->lock);
        if (--pool->active == 0)
            pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

int rb_pool_create(const rb_allocator *alloc, unsigned threads,
                   struct rb_pool **out)
{
    *out = NULL;
    struct rb_pool *pool = rb_alloc_with(alloc, sizeof *pool, 64);
    if (!pool)
        return RB_ENOMEM;
    *pool = (struct rb_pool){.alloc = *alloc};
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->next, 0);
    if (threads < 1)
        threads = 1;
    if (threads > RB_POOL_MAX_THREADS)
        threads = RB_POOL_MAX_THREADS;

    for (unsigned i = 1; i < threads; i++) {
        struct worker_start start = {pool, i};
        pthread_mutex_lock(&pool->lock);
        pool->started = 0;
        if (pthread_create(&pool->threads[pool->n_threads], NULL, pool_worker,
                           &start) != 0) {
            pthread_mutex_unlock(&pool->lock);
            break; /* run with the threads we have */
        }
        pool->n_threads++;
        while (pool->started == 0)
            pthread_cond_wait(&pool->done, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
    *out = pool;
    return RB_OK;
}

void rb_pool_destroy(struct rb_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (unsigned i = 0; i < pool->n_threads; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    pthread_mutex_destroy(&pool->lock);
    rb_allocator alloc = pool->alloc;
    rb_free_with(&alloc, pool);
}

unsigned rb_pool_size(const struct rb_pool *pool)
{
    return pool->n_threads + 1;
}

void rb_pool_run(struct rb_pool *pool, size_t n_tasks, rb_task_fn fn,
                 void *arg)
{
    if (n_tasks == 0)
        return;
    if (n_tasks == 1 || pool->n_threads == 0) {
        for (size_t t = 0; t < n_tasks; t++)
            fn(arg, t, 0);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->arg = arg;
    pool->n_tasks = n_tasks;
    atomic_store(&pool->next, 0);
    pool->live = 1;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    pool_drain(pool, 0);

    /* Every task is taken now. Threads inside finish theirs before they
     * leave; once none is inside and live is cleared, none can enter. */
    spin_while(&pool->active, 0, 0, NULL);
    pthread_mutex_lock(&pool->lock);
    while (pool->active > 0)
        pthread_cond_wait(&pool->done, &pool->lock);
    pool->live = 0;
    pthread_mutex_unlock(&pool->lock);
}
