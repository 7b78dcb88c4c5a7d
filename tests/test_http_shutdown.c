/* test_http_shutdown.c - SIGTERM while requests are in flight: every one
 * of them completes with 200 and the right answer, and rayboxd exits 0
 * (under ASan/LSan that also means: without a leak), while a connection
 * made during the drain gets no answer. One worker, so that at the signal
 * one query runs and the others wait in the queue. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "binary_codec.h"
#include "http_expect.h"
#include "http_util.h"
#include "testutil.h"

#define IN_FLIGHT 4

typedef struct call {
    const char *url;
    const void *body;
    size_t len;
    int binary;
    pthread_t thread;
    rbt_resp resp;
} call;

static void *call_main(void *arg)
{
    call *c = arg;
    rbt_http(NULL, "POST", c->url, c->binary ? RBB_MEDIA_TYPE : "application/json",
             c->body, c->len, NULL, NULL, &c->resp);
    return NULL;
}

START_TEST(test_sigterm_in_flight)
{
    static const char *const args[] = {"--workers", "1", "--threads", "2",
                                        "--drain-timeout", "60", NULL};
    curl_global_init(CURL_GLOBAL_ALL);
    rbt_server s;
    rbt_server_start(&s, args);

    /* Queries of a few hundred milliseconds each. */
    rbt_rng rng = {11};
    rbt_query q;
    rbt_query_random(&q, &rng, RB_MODE_COUNT, 3, 100000, 1024, 1, 0);
    rb_context *ctx = rbt_context(RBT_CPU);
    rbt_expect e;
    rbt_expect_run(ctx, &q, NULL, 0, &e);
    size_t blen, jlen;
    void *bin = rbt_query_binary(&q, 1, &blen);
    char *json = rbt_query_json(&q, 1, &jlen);

    char url[256], murl[256];
    snprintf(url, sizeof url, "%s/v1/intersect", s.base);
    snprintf(murl, sizeof murl, "%s/metrics", s.base);
    /* The one worker first takes a query of about a second, so that the
     * four above queue behind it: on their own they ran in a few tens of
     * milliseconds, and on a busy machine the polls below once never saw
     * all four in flight together. */
    size_t hlen;
    char *heavy = rbt_count_body(RBT_HEAVY_RAYS, RBT_HEAVY_BOXES, &hlen);
    call busy = {.url = url, .body = heavy, .len = hlen};
    ck_assert_int_eq(pthread_create(&busy.thread, NULL, call_main, &busy), 0);
    double busy_running = 0;
    for (int tries = 0; tries < 10000 && busy_running < 1; tries++) {
        busy_running = rbt_server_metric(&s, "raybox_jobs_running");
        if (busy_running < 1)
            nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    ck_assert_msg(busy_running >= 1, "the long query never ran");
    call calls[IN_FLIGHT];
    for (int i = 0; i < IN_FLIGHT; i++) {
        calls[i] = (call){.url = url, .binary = i % 2,
                          .body = i % 2 ? bin : (void *)json,
                          .len = i % 2 ? blen : jlen};
        ck_assert_int_eq(pthread_create(&calls[i].thread, NULL, call_main,
                                        &calls[i]),
                         0);
    }
    /* Wait until every query is queued or running, then signal. */
    int all_in = 0;
    for (int tries = 0; tries < 20000 && !all_in; tries++) {
        rbt_resp m;
        rbt_http(NULL, "GET", murl, NULL, NULL, 0, NULL, NULL, &m);
        double running = rbt_metric(m.body, "raybox_jobs_running");
        double queued = rbt_metric(m.body, "raybox_queue_depth");
        double done = rbt_metric(m.body, "raybox_queries_total");
        all_in = running + queued + done >= IN_FLIGHT + 1 &&
                 done < IN_FLIGHT + 1;
        rbt_resp_free(&m);
        if (!all_in)
            nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    ck_assert_msg(all_in, "the queries never were all in flight");
    ck_assert_int_eq(kill(s.pid, SIGTERM), 0);

    /* Draining: a new connection gets no answer (it is closed at once)
     * while the queries above are still being served. */
    int draining = 0;
    for (int tries = 0; tries < 2500 && !draining; tries++) {
        char *log = rbt_server_log(&s);
        draining = log && strstr(log, "\"msg\":\"draining\"") != NULL;
        free(log);
        if (!draining)
            nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    ck_assert_msg(draining, "no \"draining\" log line after SIGTERM");
    rbt_resp late;
    rbt_get(NULL, &s, "/v1/health", &late);
    ck_assert_msg(late.status == 0, "a connection made while draining was "
                  "answered: %ld %s", late.status, late.body ? late.body : "");
    rbt_resp_free(&late);

    pthread_join(busy.thread, NULL);
    ck_assert_msg(busy.resp.status == 200 && busy.resp.body &&
                      strstr(busy.resp.body, "\"mode\":\"count\""),
                  "the long query: %ld", busy.resp.status);
    rbt_resp_free(&busy.resp);
    free(heavy);
    for (int i = 0; i < IN_FLIGHT; i++) {
        pthread_join(calls[i].thread, NULL);
        rbt_resp *r = &calls[i].resp;
        char why[256];
        ck_assert_msg(r->status == 200, "query %d: %ld %s", i, r->status,
                      r->body ? r->body : "");
        int bad = calls[i].binary
                      ? rbt_check_binary(&e, r->body, r->len, why, sizeof why)
                      : rbt_check_json(&e, r->body, r->len, why, sizeof why);
        ck_assert_msg(!bad, "query %d: %s", i, why);
        rbt_resp_free(r);
    }
    int st = rbt_server_stop(&s); /* already signalled: waits for exit */
    char *log = rbt_server_log(&s);
    ck_assert_msg(st == 0, "exit status %d; log:\n%s", st, log);
    ck_assert_ptr_nonnull(strstr(log, "\"msg\":\"shutting down\""));
    ck_assert_ptr_nonnull(strstr(log, "\"msg\":\"draining\""));
    ck_assert_ptr_nonnull(strstr(log, "\"msg\":\"stopped\""));
    free(log);
    unlink(s.log_path);

    free(bin);
    free(json);
    rbt_expect_free(&e);
    rbt_query_free(&q);
    rb_context_destroy(ctx);
    curl_global_cleanup();
}
END_TEST

/* An idle keep-alive connection does not hold the exit beyond the drain
 * timeout: it is closed and the exit status is still 0. */
START_TEST(test_sigterm_idle_connections)
{
    static const char *const args[] = {"--drain-timeout", "1", NULL};
    curl_global_init(CURL_GLOBAL_ALL);
    rbt_server s;
    rbt_server_start(&s, args);
    /* A keep-alive connection left idle after one request. */
    CURL *h = curl_easy_init();
    rbt_resp r;
    rbt_get(h, &s, "/v1/health", &r);
    ck_assert_int_eq(r.status, 200);
    rbt_resp_free(&r);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
    curl_easy_cleanup(h);
    unlink(s.log_path);
    curl_global_cleanup();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http_shutdown");
    TCase *tc = tcase_create("sigterm");
    tcase_add_test(tc, test_sigterm_in_flight);
    tcase_add_test(tc, test_sigterm_idle_connections);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
