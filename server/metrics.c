/* metrics.c - see metrics.h. */
#include "metrics.h"

#include <stdio.h>
#include <string.h>

static const int status_codes[RBD_S_COUNT] = {
#define RBD_X(code) [RBD_S_##code] = code,
    RBD_STATUSES(RBD_X)
#undef RBD_X
    [RBD_S_OTHER] = 0,
};

/* Seconds: from a game tick's budget to a large batch. */
static const double bounds[RBD_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025,  0.05,    0.1,    0.25,  1,      2.5,   10};

void metrics_init(rbd_metrics *m)
{
    memset(m, 0, sizeof *m);
}

static int status_index(int status)
{
    for (int i = 0; i < RBD_S_OTHER; i++)
        if (status_codes[i] == status)
            return i;
    return RBD_S_OTHER;
}

void metrics_observe(rbd_histogram *h, double seconds)
{
    if (seconds < 0)
        seconds = 0;
    int b = 0;
    while (b < RBD_BUCKETS && seconds > bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)(seconds * 1e9),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void metrics_request(rbd_metrics *m, rbd_route route, int status,
                     double seconds)
{
    if (route >= ROUTE_COUNT)
        route = ROUTE_NONE;
    atomic_fetch_add_explicit(&m->requests[route][status_index(status)], 1,
                              memory_order_relaxed);
    metrics_observe(&m->duration[route], seconds);
}

void metrics_query(rbd_metrics *m, uint64_t rays, uint64_t slab_tests,
                   int fell_back)
{
    atomic_fetch_add_explicit(&m->rays, rays, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->slab_tests, slab_tests,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&m->queries, 1, memory_order_relaxed);
    if (fell_back)
        atomic_fetch_add_explicit(&m->fallbacks, 1, memory_order_relaxed);
}

static uint64_t load(const _Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static void head(sbuf *o, const char *name, const char *type,
                 const char *help)
{
    sbuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: backslash, quote and newline escaped. */
static void label(sbuf *o, const char *v)
{
    for (; v && *v; v++) {
        if (*v == '\\' || *v == '"')
            sbuf_printf(o, "\\%c", *v);
        else if (*v == '\n')
            sbuf_add(o, "\\n");
        else
            sbuf_addn(o, v, 1);
    }
}

static void histogram(sbuf *o, const char *name, const char *labels,
                      const rbd_histogram *h)
{
    uint64_t cum = 0;
    for (int b = 0; b <= RBD_BUCKETS; b++) {
        cum += load(&h->bucket[b]);
        if (b < RBD_BUCKETS)
            sbuf_printf(o, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels,
                        labels[0] ? "," : "", bounds[b],
                        (unsigned long long)cum);
        else
            sbuf_printf(o, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels,
                        labels[0] ? "," : "", (unsigned long long)cum);
    }
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    sbuf_printf(o, "%s_sum%s%s%s %.9f\n", name, open, labels, close,
                (double)load(&h->sum_ns) / 1e9);
    sbuf_printf(o, "%s_count%s%s%s %llu\n", name, open, labels, close,
                (unsigned long long)load(&h->count));
}

static void counter(sbuf *o, const char *name, const char *help, uint64_t v)
{
    head(o, name, "counter", help);
    sbuf_printf(o, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(sbuf *o, const char *name, const char *help, double v)
{
    head(o, name, "gauge", help);
    sbuf_printf(o, "%s %.17g\n", name, v);
}

void metrics_render(const rbd_metrics *m, const rbd_gauges *g, sbuf *o)
{
    head(o, "raybox_http_requests_total", "counter",
         "HTTP requests answered, by route and status code");
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (int s = 0; s < RBD_S_COUNT; s++) {
            uint64_t v = load(&m->requests[r][s]);
            /* Zero series are written for the common codes, so that
             * rates exist from the start. */
            if (!v && s != RBD_S_200)
                continue;
            sbuf_printf(o, "raybox_http_requests_total{route=\"%s\",code=\"",
                        route_template((rbd_route)r));
            if (s == RBD_S_OTHER)
                sbuf_add(o, "other");
            else
                sbuf_printf(o, "%d", status_codes[s]);
            sbuf_printf(o, "\"} %llu\n", (unsigned long long)v);
        }
    head(o, "raybox_http_request_duration_seconds", "histogram",
         "time from the request's headers to its completion, by route");
    for (int r = 0; r < ROUTE_COUNT; r++) {
        char labels[96];
        snprintf(labels, sizeof labels, "route=\"%s\"",
                 route_template((rbd_route)r));
        histogram(o, "raybox_http_request_duration_seconds", labels,
                  &m->duration[r]);
    }
    head(o, "raybox_queue_wait_seconds", "histogram",
         "time a query waited for a worker");
    histogram(o, "raybox_queue_wait_seconds", "", &m->queue_wait);
    head(o, "raybox_run_seconds", "histogram",
         "time a worker spent on a job (query, scene build or patch)");
    histogram(o, "raybox_run_seconds", "", &m->run);

    counter(o, "raybox_queries_total", "intersect queries answered",
            load(&m->queries));
    counter(o, "raybox_rays_total", "rays of the queries answered",
            load(&m->rays));
    counter(o, "raybox_slab_tests_total",
            "ray-box tests the answered queries stand for",
            load(&m->slab_tests));
    counter(o, "raybox_fallbacks_total",
            "queries that OpenCL failed and the CPU backend answered",
            load(&m->fallbacks));
    counter(o, "raybox_queue_rejections_total",
            "requests answered 503 because the queue was full",
            load(&m->rejected_full));
    head(o, "raybox_queries_stopped_total", "counter",
         "queries stopped while they ran: past --max-query-ms (deadline), "
         "at shutdown (drain), their client gone (client_gone)");
    sbuf_printf(o, "raybox_queries_stopped_total{reason=\"deadline\"} %llu\n"
                   "raybox_queries_stopped_total{reason=\"drain\"} %llu\n"
                   "raybox_queries_stopped_total{reason=\"client_gone\"} "
                   "%llu\n",
                (unsigned long long)load(&m->stopped[0]),
                (unsigned long long)load(&m->stopped[1]),
                (unsigned long long)load(&m->stopped[2]));
    counter(o, "raybox_queries_refused_estimate_total",
            "queries answered 413 before they ran: their estimated time "
            "was over --query-estimate-margin x --max-query-ms",
            load(&m->refused_estimate));
    counter(o, "raybox_query_launches_total",
            "backend calls (rb_intersect) that ran intersect requests, "
            "merged ones counted once",
            load(&m->launches));
    counter(o, "raybox_query_launch_requests_total",
            "intersect requests those calls ran",
            load(&m->launch_requests));
    counter(o, "raybox_inline_answers_total",
            "intersect requests answered on the I/O thread that read them, "
            "not handed to a worker (--inline-max-tests)",
            load(&m->inline_answers));
    counter(o, "raybox_merged_launches_total",
            "calls that ran two or more requests merged (--merge)",
            g->merged_launches);
    counter(o, "raybox_merged_requests_total",
            "requests that ran in merged calls", g->merged_requests);
    {
        uint64_t l = load(&m->launches), q = load(&m->launch_requests);
        gauge(o, "raybox_launches_per_request",
              "raybox_query_launches_total / "
              "raybox_query_launch_requests_total since start (1 before "
              "any)",
              q ? (double)l / (double)q : 1.0);
    }
    head(o, "raybox_connections_refused_total", "counter",
         "connections refused at accept: over --max-connections (total) or "
         "--max-connections-per-address (address)");
    sbuf_printf(o, "raybox_connections_refused_total{limit=\"total\"} %llu\n"
                   "raybox_connections_refused_total{limit=\"address\"} "
                   "%llu\n",
                (unsigned long long)g->refused_full,
                (unsigned long long)g->refused_per_address);
    head(o, "raybox_slow_clients_total", "counter",
         "connections cut off with a 408: headers past --header-timeout "
         "(headers) or a body slower than --min-body-rate (body)");
    sbuf_printf(o, "raybox_slow_clients_total{deadline=\"headers\"} %llu\n"
                   "raybox_slow_clients_total{deadline=\"body\"} %llu\n",
                (unsigned long long)g->cut_headers,
                (unsigned long long)g->cut_body);

    gauge(o, "raybox_queue_depth", "jobs waiting for a worker",
          (double)g->queue_depth);
    gauge(o, "raybox_queue_capacity", "most jobs that may wait",
          (double)g->queue_capacity);
    gauge(o, "raybox_jobs_running", "jobs a worker is running",
          (double)g->running);
    gauge(o, "raybox_workers", "worker threads", (double)g->workers);
    gauge(o, "raybox_connections", "open HTTP connections",
          (double)g->connections);
    gauge(o, "raybox_scenes", "stored scenes", (double)g->scenes);
    gauge(o, "raybox_scene_bytes", "memory of the stored scenes",
          (double)g->scene_bytes);
    gauge(o, "raybox_scene_limit_scenes", "most scenes (--max-scenes)",
          (double)g->max_scenes);
    gauge(o, "raybox_scene_limit_bytes", "most scene memory "
          "(--max-scene-bytes)", (double)g->max_scene_bytes);
    gauge(o, "raybox_buffer_cache_bytes", "freed request arrays kept for "
          "the next large request (--buffer-cache)",
          (double)g->buffer_cache_bytes);
    gauge(o, "raybox_memory_held_bytes", "memory budget held by request "
          "bodies, answers and scene versions still read (--max-memory)",
          (double)g->memory_held);
    gauge(o, "raybox_memory_peak_bytes", "most of the memory budget held "
          "at once since start", (double)g->memory_peak);
    gauge(o, "raybox_memory_limit_bytes", "the memory budget (--max-memory)",
          (double)g->memory_limit);
    head(o, "raybox_memory_refused_total", "counter",
         "requests answered 503 because the memory budget was held");
    sbuf_printf(o, "raybox_memory_refused_total %llu\n",
                (unsigned long long)g->memory_refused);
    gauge(o, "raybox_draining", "1 after SIGTERM/SIGINT",
          g->draining ? 1 : 0);
    gauge(o, "raybox_uptime_seconds", "seconds since start", g->uptime_s);
    head(o, "raybox_backend_info", "gauge", "the backend that serves (1)");
    sbuf_add(o, "raybox_backend_info{backend=\"");
    label(o, g->backend);
    sbuf_add(o, "\",device=\"");
    label(o, g->device);
    sbuf_add(o, "\"} 1\n");
}
