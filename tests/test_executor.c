/* test_executor.c - the worker pool of rayboxd (server/executor.h): every
 * job runs once and is done once, the queue bound is exact, at most one
 * heavy job runs at a time while light jobs pass a waiting heavy one,
 * light jobs queued behind a busy worker go to an idle one, and closing
 * aborts what is still queued, also a job whose on_queue was running;
 * merging gathers queued jobs of the same kind within the weight bound,
 * leaves the others in place, and keeps heavy and light apart. Ordering
 * is forced with gates, not with timing. An idle worker frees the work
 * arrays its context kept, after about a second, and, asked to
 * (executor_trim_soon), the freed blocks the library keeps. */
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executor.h"
#include "gen.h"
#include "internal.h"
#include "testutil.h"

typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
} gate;

#define GATE_CLOSED                                                          \
    {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

typedef struct tjob {
    rbd_job job;
    int id;
    atomic_int ran, done;
    gate *gate; /* run() waits until it opens; NULL: no wait */
    int kind;   /* merging: jobs of one kind may merge */
} tjob;

static atomic_int heavy_now, heavy_max, order_next;
static int order[16];

static void run(rbd_job *j, rb_context *ctx)
{
    tjob *t = (tjob *)j;
    ck_assert_ptr_nonnull(ctx); /* every worker has its context */
    if (j->heavy) {
        int now = atomic_fetch_add(&heavy_now, 1) + 1;
        int max = atomic_load(&heavy_max);
        while (now > max && !atomic_compare_exchange_weak(&heavy_max, &max,
                                                          now))
            ;
    }
    order[atomic_fetch_add(&order_next, 1)] = t->id;
    if (t->gate) {
        pthread_mutex_lock(&t->gate->lock);
        while (!t->gate->open)
            pthread_cond_wait(&t->gate->cond, &t->gate->lock);
        pthread_mutex_unlock(&t->gate->lock);
    }
    if (j->heavy)
        atomic_fetch_sub(&heavy_now, 1);
    atomic_fetch_add(&t->ran, 1);
}

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;

static void done(rbd_job *j)
{
    tjob *t = (tjob *)j;
    pthread_mutex_lock(&done_lock);
    atomic_fetch_add(&t->done, 1);
    pthread_cond_broadcast(&done_cond);
    pthread_mutex_unlock(&done_lock);
}

static void wait_done(tjob *t)
{
    pthread_mutex_lock(&done_lock);
    while (!atomic_load(&t->done))
        pthread_cond_wait(&done_cond, &done_lock);
    pthread_mutex_unlock(&done_lock);
}

static rbd_executor *make(unsigned workers, unsigned depth)
{
    rbd_executor_options o = {.workers = workers, .queue_depth = depth};
    rb_context_options_init(&o.ctx);
    o.ctx.backend = RB_BACKEND_CPU;
    o.ctx.threads = 1;
    rbd_executor *ex = NULL;
    char why[256];
    ck_assert_int_eq(executor_create(&o, &ex, why, sizeof why), RB_OK);
    return ex;
}

static void init(tjob *t, int id, int heavy)
{
    memset(t, 0, sizeof *t);
    t->id = id;
    t->job.run = run;
    t->job.done = done;
    t->job.heavy = heavy;
}

/* Submits t, held at g, as the first job of a test and waits until a
 * worker runs it. */
static void submit_held(rbd_executor *ex, tjob *t, gate *g)
{
    t->gate = g;
    atomic_store(&order_next, 0);
    ck_assert_int_eq(executor_submit(ex, &t->job, NULL, NULL), 0);
    while (!atomic_load(&order_next))
        sched_yield();
}

/* H1 runs and holds its gate; H2 (heavy) and L (light) are queued after
 * it. The idle second worker must pass H2 and run L; H1's gate opens only
 * once L is done, so an executor that did not let L pass would hang. */
START_TEST(test_heavy_one_at_a_time)
{
    rbd_executor *ex = make(2, 8);
    gate g = GATE_CLOSED;
    static tjob h1, h2, l;
    init(&h1, 1, 1);
    init(&h2, 2, 1);
    init(&l, 3, 0);
    atomic_store(&heavy_now, 0);
    atomic_store(&heavy_max, 0);
    submit_held(ex, &h1, &g);
    ck_assert_int_eq(executor_submit(ex, &h2.job, NULL, NULL), 0);
    ck_assert_int_eq(executor_submit(ex, &l.job, NULL, NULL), 0);
    wait_done(&l);
    ck_assert_int_eq(atomic_load(&h2.ran), 0); /* still waiting for H1 */
    gate_open(&g);
    wait_done(&h1);
    wait_done(&h2);
    ck_assert_int_eq(order[0], 1);
    ck_assert_int_eq(order[1], 3);
    ck_assert_int_eq(order[2], 2);
    ck_assert_int_eq(atomic_load(&heavy_max), 1);
    executor_close(ex);
    executor_destroy(ex);
}
END_TEST

/* Queued light jobs do not wait for a busy worker while another is idle
 * (they may for about a millisecond: the running worker would take them
 * next): L1 runs and holds its gate; L2 and L3 are queued behind it and
 * must be run by the other worker. L1's gate opens only once L2 and L3 are done,
 * so an executor that left them queued would hang. */
static void backlog_behind_held_job(int warm);

START_TEST(test_backlog_wakes_idle_worker)
{
    backlog_behind_held_job(0);
}
END_TEST

/* The same while the server is busy: a job has just run, so the idle
 * worker watches the queue on a timer instead of waiting for a signal. */
START_TEST(test_backlog_taken_by_watching_worker)
{
    backlog_behind_held_job(1);
}
END_TEST

static void backlog_behind_held_job(int warm)
{
    rbd_executor *ex = make(2, 8);
    gate g = GATE_CLOSED;
    static tjob w0, l1, l2, l3;
    if (warm) {
        init(&w0, 9, 0);
        ck_assert_int_eq(executor_submit(ex, &w0.job, NULL, NULL), 0);
        wait_done(&w0);
    }
    init(&l1, 1, 0);
    init(&l2, 2, 0);
    init(&l3, 3, 0);
    submit_held(ex, &l1, &g);
    ck_assert_int_eq(executor_submit(ex, &l2.job, NULL, NULL), 0);
    ck_assert_int_eq(executor_submit(ex, &l3.job, NULL, NULL), 0);
    wait_done(&l2);
    wait_done(&l3);
    ck_assert_int_eq(atomic_load(&l1.ran), 0); /* still at its gate */
    gate_open(&g);
    wait_done(&l1);
    executor_close(ex);
    executor_destroy(ex);
}

static void *close_main(void *ex)
{
    executor_close(ex);
    return NULL;
}

/* A full queue refuses at once; close aborts what is queued and lets the
 * running job finish; every job is done exactly once. */
START_TEST(test_bound_and_close)
{
    rbd_executor *ex = make(1, 2);
    gate g = GATE_CLOSED;
    static tjob busy, q1, q2, extra;
    init(&busy, 1, 0);
    init(&q1, 2, 0);
    init(&q2, 3, 1);
    init(&extra, 4, 0);
    submit_held(ex, &busy, &g);
    ck_assert_int_eq(executor_submit(ex, &q1.job, NULL, NULL), 0);
    ck_assert_int_eq(executor_submit(ex, &q2.job, NULL, NULL), 0);
    ck_assert_int_eq(executor_submit(ex, &extra.job, NULL, NULL), -1);
    rbd_executor_stats st;
    executor_stats(ex, &st);
    ck_assert_uint_eq(st.queued, 2);
    ck_assert_uint_eq(st.running, 1);
    ck_assert_uint_eq(st.capacity, 2);
    /* Close from another thread: it waits for the running job. */
    pthread_t closer;
    ck_assert_int_eq(pthread_create(&closer, NULL, close_main, ex), 0);
    gate_open(&g);
    pthread_join(closer, NULL);
    ck_assert_int_eq(atomic_load(&busy.ran), 1);
    ck_assert_int_eq(atomic_load(&busy.done), 1);
    ck_assert(!busy.job.aborted);
    /* The queued ones may have run before the close took hold (then
     * not aborted) or been aborted (then not run): never both, never
     * neither. */
    tjob *qs[2] = {&q1, &q2};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(atomic_load(&qs[i]->done), 1);
        ck_assert_int_eq(atomic_load(&qs[i]->ran) + qs[i]->job.aborted, 1);
    }
    ck_assert_int_eq(atomic_load(&extra.done), 0);
    ck_assert_int_eq(executor_submit(ex, &extra.job, NULL, NULL), -1);
    executor_destroy(ex);
}
END_TEST

/* on_queue runs outside the queue's lock with the job's slot reserved:
 * while it runs, the slot counts against the bound, and a close that
 * lands meanwhile still ends with the job done once, aborted, not run. */
static rbd_executor *onq_ex;
static tjob onq_other;
static int onq_other_rc;

static void close_in_on_queue(void *arg)
{
    (void)arg;
    onq_other_rc = executor_submit(onq_ex, &onq_other.job, NULL, NULL);
    executor_close(onq_ex); /* would deadlock if on_queue held the lock */
}

START_TEST(test_close_while_on_queue)
{
    onq_ex = make(1, 1);
    static tjob t;
    init(&t, 1, 0);
    init(&onq_other, 2, 0);
    ck_assert_int_eq(executor_submit(onq_ex, &t.job, close_in_on_queue,
                                     NULL), 0);
    ck_assert_int_eq(onq_other_rc, -1); /* the only slot was reserved */
    ck_assert_int_eq(atomic_load(&t.done), 1);
    ck_assert(t.job.aborted);
    ck_assert_int_eq(atomic_load(&t.ran), 0);
    ck_assert_int_eq(atomic_load(&onq_other.done), 0);
    executor_destroy(onq_ex);
}
END_TEST

/* Merged calls, in the order they ran: the ids of each. */
static int batch_ids[8][8], batch_len[8];
static atomic_int batches;

static int same_kind(const rbd_job *a, const rbd_job *b)
{
    return ((const tjob *)a)->kind == ((const tjob *)b)->kind;
}

static void run_merged(rbd_job **jobs, unsigned n, rb_context *ctx)
{
    ck_assert_ptr_nonnull(ctx);
    int k = atomic_fetch_add(&batches, 1);
    batch_len[k] = (int)n;
    for (unsigned i = 0; i < n; i++) {
        tjob *t = (tjob *)jobs[i];
        batch_ids[k][i] = t->id;
        order[atomic_fetch_add(&order_next, 1)] = t->id;
        atomic_fetch_add(&t->ran, 1);
    }
}

static const rbd_merge_ops merge_ops = {.same = same_kind,
                                        .run = run_merged};

static void init_merge(tjob *t, int id, int kind, uint64_t weight,
                       int heavy)
{
    init(t, id, heavy);
    t->kind = kind;
    t->job.merge = &merge_ops;
    t->job.weight = weight;
}

/* One worker held at a gate; queued behind it: A (kind 1, weight 4), B
 * (kind 2), C (1, 4), D (1, 4), E (1, 2), F (1, 2, heavy). Bound 10:
 * A takes C and E (D would pass 10, B is of another kind, F heavy) and
 * runs them as one call; then B, D and F run alone (D and F are of the
 * same kind but one is heavy, the other light). */
START_TEST(test_merge_gathers_same_kind)
{
    rbd_executor *ex = make(1, 16);
    executor_set_merge(ex, 10, 0);
    gate g = GATE_CLOSED;
    static tjob hold, a, b, c, d, e, f;
    init(&hold, 1, 0);
    init_merge(&a, 2, 1, 4, 0);
    init_merge(&b, 3, 2, 4, 0);
    init_merge(&c, 4, 1, 4, 0);
    init_merge(&d, 5, 1, 4, 0);
    init_merge(&e, 6, 1, 2, 0);
    init_merge(&f, 7, 1, 2, 1);
    atomic_store(&batches, 0);
    submit_held(ex, &hold, &g);
    tjob *q[] = {&a, &b, &c, &d, &e, &f};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(executor_submit(ex, &q[i]->job, NULL, NULL), 0);
    gate_open(&g);
    for (int i = 0; i < 6; i++)
        wait_done(q[i]);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(atomic_load(&q[i]->ran), 1);
    ck_assert_int_eq(atomic_load(&batches), 1);
    ck_assert_int_eq(batch_len[0], 3);
    ck_assert_int_eq(batch_ids[0][0], 2);
    ck_assert_int_eq(batch_ids[0][1], 4);
    ck_assert_int_eq(batch_ids[0][2], 6);
    /* hold, A C E, then B, D, F in their queue order */
    static const int want[] = {1, 2, 4, 6, 3, 5, 7};
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(order[i], want[i]);
    rbd_executor_stats st;
    executor_stats(ex, &st);
    ck_assert_uint_eq(st.merged_runs, 1);
    ck_assert_uint_eq(st.merged_jobs, 3);
    executor_close(ex);
    executor_destroy(ex);
}
END_TEST

/* Merging off (bound 0): the same queue runs job by job. */
START_TEST(test_merge_off)
{
    rbd_executor *ex = make(1, 16);
    gate g = GATE_CLOSED;
    static tjob hold, a, c;
    init(&hold, 1, 0);
    init_merge(&a, 2, 1, 4, 0);
    init_merge(&c, 3, 1, 4, 0);
    atomic_store(&batches, 0);
    submit_held(ex, &hold, &g);
    ck_assert_int_eq(executor_submit(ex, &a.job, NULL, NULL), 0);
    ck_assert_int_eq(executor_submit(ex, &c.job, NULL, NULL), 0);
    gate_open(&g);
    wait_done(&a);
    wait_done(&c);
    ck_assert_int_eq(atomic_load(&batches), 0);
    ck_assert_int_eq(atomic_load(&a.ran) + atomic_load(&c.ran), 2);
    executor_close(ex);
    executor_destroy(ex);
}
END_TEST

/* The wait: a lone mergeable job on a quiet executor starts at once
 * (wait 400 ms: it would show); one that comes right after another
 * (a stream) waits for the next, which then shares its call. */
START_TEST(test_merge_wait)
{
    rbd_executor *ex = make(1, 16);
    executor_set_merge(ex, 100, 400000);
    static tjob a, b, c;
    init_merge(&a, 1, 1, 4, 0);
    init_merge(&b, 2, 1, 4, 0);
    init_merge(&c, 3, 1, 4, 0);
    atomic_store(&batches, 0);
    atomic_store(&order_next, 0);
    ck_assert_int_eq(executor_submit(ex, &a.job, NULL, NULL), 0);
    wait_done(&a);
    ck_assert_msg(a.job.t_started - a.job.t_queued < 200,
                  "a lone job waited %.1f ms",
                  a.job.t_started - a.job.t_queued);
    ck_assert_int_eq(executor_submit(ex, &b.job, NULL, NULL), 0);
    ck_assert_int_eq(executor_submit(ex, &c.job, NULL, NULL), 0);
    wait_done(&b);
    wait_done(&c);
    ck_assert_int_eq(atomic_load(&batches), 1);
    ck_assert_int_eq(batch_len[0], 2);
    executor_close(ex);
    executor_destroy(ex);
}
END_TEST

/* One client's stream: each job comes right after the previous one is
 * done, never two at once. After the first waits gather nothing, only
 * one job in MERGE_PROBE (16) waits: 40 jobs with a wait of 50 ms take
 * far less than 40 x 50 ms. */
START_TEST(test_merge_lone_stream)
{
    rbd_executor *ex = make(1, 16);
    executor_set_merge(ex, 100, 50000);
    static tjob t[40];
    atomic_store(&batches, 0);
    double t0 = rbd_now_ms();
    int waited = 0;
    for (int i = 0; i < 40; i++) {
        atomic_store(&order_next, 0);
        init_merge(&t[i], i, 1, 4, 0);
        ck_assert_int_eq(executor_submit(ex, &t[i].job, NULL, NULL), 0);
        wait_done(&t[i]);
        waited += t[i].job.t_started - t[i].job.t_queued >= 40;
    }
    double took = rbd_now_ms() - t0;
    ck_assert_int_eq(atomic_load(&batches), 0);
    /* the first waits (until the score is low: 5), then the probes (2) */
    ck_assert_msg(waited <= 9, "%d of 40 jobs waited (%.0f ms)", waited,
                  took);
    executor_close(ex);
    executor_destroy(ex);
}
END_TEST

/* A job that builds a scene of 100K boxes in its worker's context (its
 * work arrays are kept there) and notes the context. */
typedef struct build_job {
    rbd_job job;
    rb_context *ctx;
    size_t kept; /* kept by the context right after the build */
    int rc;
    atomic_int done;
} build_job;

static void build_run(rbd_job *j, rb_context *ctx)
{
    build_job *b = (build_job *)j;
    const size_t n = 100000;
    rb_box *boxes = malloc(n * sizeof *boxes);
    ck_assert_ptr_nonnull(boxes);
    rbt_rng rng = {3};
    rbt_gen_boxes(&rng, RBT_UNIFORM, boxes, n);
    rb_scene *scene = NULL;
    b->rc = rb_scene_create(ctx, 3, boxes, n, &scene);
    rb_scene_destroy(scene);
    free(boxes);
    b->ctx = ctx;
    b->kept = rb_workmem_kept(&ctx->workmem);
}

static void build_done(rbd_job *j)
{
    atomic_store(&((build_job *)j)->done, 1);
}

/* A worker keeps its context's work arrays while jobs come, and frees
 * them after about a second with none (TRIM_IDLE_MS). */
START_TEST(test_idle_worker_trims)
{
    rbd_executor *ex = make(_i ? 2 : 1, 8);
    static build_job b;
    memset(&b, 0, sizeof b);
    b.job.run = build_run;
    b.job.done = build_done;
    ck_assert_int_eq(executor_submit(ex, &b.job, NULL, NULL), 0);
    while (!atomic_load(&b.done))
        sched_yield();
    ck_assert_int_eq(b.rc, RB_OK);
    ck_assert_uint_gt(b.kept, 0);
    double t0 = rbd_now_ms();
    while (rb_workmem_kept(&b.ctx->workmem) && rbd_now_ms() - t0 < 20000) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_uint_eq(rb_workmem_kept(&b.ctx->workmem), 0);
    ck_assert_double_ge(rbd_now_ms() - t0, 500); /* not at once */
    executor_close(ex);
    executor_destroy(ex);
}
END_TEST

/* Memory the library keeps for the whole process, freed outside any job
 * (a scene deleted by the HTTP thread): idle workers that ran no job
 * since their last trim sleep without a deadline and would keep it;
 * executor_trim_soon has one trim after about a second. */
START_TEST(test_trim_soon_frees_kept_blocks)
{
    rbd_executor *ex = make(_i ? 2 : 1, 8);
    rb_allocator a;
    rb_allocator_default(&a);
    rb_context_trim(NULL);
    void *big = rb_alloc_with(&a, 40u << 20, 64);
    ck_assert_ptr_nonnull(big);
    rb_free_with(&a, big);
    ck_assert_uint_gt(rb_alloc_kept_default(), 0);
    struct timespec ts = {1, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ck_assert_uint_gt(rb_alloc_kept_default(), 0); /* nobody trims */
    double t0 = rbd_now_ms();
    executor_trim_soon(ex);
    while (rb_alloc_kept_default() && rbd_now_ms() - t0 < 20000) {
        struct timespec step = {0, 10 * 1000 * 1000};
        nanosleep(&step, NULL);
    }
    ck_assert_uint_eq(rb_alloc_kept_default(), 0);
    ck_assert_double_ge(rbd_now_ms() - t0, 500); /* not at once */
    executor_close(ex);
    executor_destroy(ex);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("executor");
    TCase *tc = tcase_create("executor");
    tcase_add_test(tc, test_heavy_one_at_a_time);
    tcase_add_test(tc, test_bound_and_close);
    tcase_add_test(tc, test_backlog_wakes_idle_worker);
    tcase_add_test(tc, test_backlog_taken_by_watching_worker);
    tcase_add_test(tc, test_close_while_on_queue);
    tcase_add_test(tc, test_merge_gathers_same_kind);
    tcase_add_test(tc, test_merge_off);
    tcase_add_test(tc, test_merge_wait);
    tcase_add_test(tc, test_merge_lone_stream);
    tcase_add_loop_test(tc, test_idle_worker_trims, 0, 2);
    tcase_add_loop_test(tc, test_trim_soon_frees_kept_blocks, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
