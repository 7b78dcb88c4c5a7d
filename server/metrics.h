/*
 * metrics.h - counters and histograms for GET /metrics, in Prometheus
 * text format 0.0.4 (written by hand: no C client is packaged). Updates
 * are lock-free atomics, safe from any thread.
 */
#ifndef RBD_METRICS_H
#define RBD_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "routes.h"
#include "sbuf.h"

/* HTTP statuses counted one by one; anything else counts as "other". */
#define RBD_STATUSES(X)                                                        \
    X(200) X(201) X(204) X(400) X(401) X(404) X(405) X(406) X(413) X(415)      \
    X(421) X(422) X(500) X(503) X(507)
enum {
#define RBD_X(code) RBD_S_##code,
    RBD_STATUSES(RBD_X)
#undef RBD_X
    RBD_S_OTHER,
    RBD_S_COUNT
};

#define RBD_BUCKETS 14

typedef struct rbd_histogram {
    _Atomic uint64_t bucket[RBD_BUCKETS + 1]; /* the last: +Inf */
    _Atomic uint64_t sum_ns;
    _Atomic uint64_t count;
} rbd_histogram;

typedef struct rbd_metrics {
    _Atomic uint64_t requests[ROUTE_COUNT][RBD_S_COUNT];
    rbd_histogram duration[ROUTE_COUNT]; /* whole request */
    rbd_histogram queue_wait;            /* queued until a worker took it */
    rbd_histogram run;                   /* a worker's time on the job */
    _Atomic uint64_t rays, slab_tests, queries, fallbacks;
    _Atomic uint64_t rejected_full;      /* 503: the queue was full */
    /* Queries stopped while they ran, by rbd_stop_reason. */
    _Atomic uint64_t stopped[3];
    /* Queries refused by the up-front estimate of --max-query-ms. */
    _Atomic uint64_t refused_estimate;
    /* rb_intersect calls of intersect requests, and the requests they
     * ran (more than the calls when requests were merged). */
    _Atomic uint64_t launches, launch_requests;
    /* Queries answered on the I/O thread (--inline-max-tests). */
    _Atomic uint64_t inline_answers;
} rbd_metrics;

/* Point-in-time values the renderer asks the rest of the server for. */
typedef struct rbd_gauges {
    uint64_t queue_depth, queue_capacity, running, workers;
    uint64_t merged_launches, merged_requests; /* executor_stats */
    uint64_t connections;
    uint64_t refused_full, refused_per_address; /* connections, at accept */
    uint64_t cut_headers, cut_body; /* slow clients cut off (deadline.h) */
    uint64_t scenes, scene_bytes, max_scenes, max_scene_bytes;
    uint64_t buffer_cache_bytes; /* freed request arrays kept (block_cache.h) */
    uint64_t memory_held, memory_peak, memory_limit, memory_refused;
    const char *backend, *device; /* what serves */
    int draining;
    double uptime_s;
} rbd_gauges;

void metrics_init(rbd_metrics *m);
void metrics_request(rbd_metrics *m, rbd_route route, int status,
                     double seconds);
void metrics_query(rbd_metrics *m, uint64_t rays, uint64_t slab_tests,
                   int fell_back);
void metrics_observe(rbd_histogram *h, double seconds);
void metrics_render(const rbd_metrics *m, const rbd_gauges *g, sbuf *out);

#endif
