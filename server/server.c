/*
 * server.c - rayboxd's start-up and its shutdown sequence.
 *
 * Workers and per-context threads (defaults, see docs/http.md): one worker
 * per online CPU, each with a CPU-backend pool of one thread per CPU. A
 * small query (a game tick: 16 rays against 1K boxes, far below the
 * library's 256K-test threshold) runs on the worker thread itself, so N
 * workers answer N small queries at once with no hand-off inside the
 * library. A large query fans out over its worker's pool and uses every
 * core alone; when several large queries run together their pools share
 * the cores (the OS time-slices them; total throughput stays the same).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "access_log.h"
#include "allowed_hosts.h"
#include "auth.h"
#include "scene_disk.h"
#include "block_cache.h"
#include "deadline.h"
#include "listener.h"
#include "problem.h"
#include "server.h"

static unsigned online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

static void limits_from(const rbd_config *c, rbq_limits *l)
{
    rbq_limits_default(l);
    l->max_rays = c->max_rays;
    l->max_boxes = c->max_boxes;
    l->max_results = c->max_results;
    /* Numbers in a body: every ray with its range, every box with an
     * index; the limit then only guards against bodies of lone numbers. */
    l->max_numbers = 8 * c->max_rays + 7 * c->max_boxes +
                     3 * (c->max_observers + c->max_targets) + 64;
    l->max_observers = c->max_observers;
    l->max_targets = c->max_targets;
    l->default_max_hits = (uint32_t)c->default_max_hits;
}

/* ------------------------------------------------------------------------
 * GET /v1/devices, built once: device discovery can take a while.
 */
static void device_json(sbuf *o, const rb_device_desc *d, int serving)
{
    sbuf_printf(o, "{\"index\":%d,\"name\":", d->index);
    sbuf_json_str(o, d->name);
    sbuf_add(o, ",\"type\":");
    sbuf_json_str(o, d->type);
    sbuf_add(o, ",\"platform\":");
    sbuf_json_str(o, d->platform);
    sbuf_add(o, ",\"vendor\":");
    sbuf_json_str(o, d->vendor);
    sbuf_add(o, ",\"driver\":");
    sbuf_json_str(o, d->driver);
    sbuf_add(o, ",\"version\":");
    sbuf_json_str(o, d->version);
    sbuf_printf(o,
                ",\"compute_units\":%u,\"global_mem\":%llu,\"max_alloc\":%llu,"
                "\"exact_division\":%s,\"denormals\":%s,\"serving\":%s}",
                d->compute_units, (unsigned long long)d->global_mem,
                (unsigned long long)d->max_alloc,
                d->exact_division ? "true" : "false",
                d->denormals ? "true" : "false", serving ? "true" : "false");
}

static void backend_json(sbuf *o, const rb_backend_info *b)
{
    sbuf_add(o, "{\"backend\":");
    sbuf_json_str(o, b->backend);
    sbuf_add(o, ",\"device\":");
    sbuf_json_str(o, b->device);
    sbuf_add(o, ",\"platform\":");
    sbuf_json_str(o, b->platform);
    sbuf_add(o, ",\"driver\":");
    sbuf_json_str(o, b->driver);
    sbuf_add(o, ",\"simd\":");
    sbuf_json_str(o, b->simd);
    sbuf_printf(o,
                ",\"is_gpu\":%s,\"exact_division\":%s,\"denormals\":%s,"
                "\"compute_units\":%u,\"threads\":%u}",
                b->is_gpu ? "true" : "false",
                b->exact_division ? "true" : "false",
                b->denormals ? "true" : "false", b->compute_units,
                b->threads);
}

static int build_devices_json(rbd_server *s, const rb_context_options *copt)
{
    const rb_backend_info *serving = executor_backend(s->ex);
    int on_cpu = strcmp(serving->backend, "cpu") == 0;
    sbuf o;
    sbuf_init(&o);
    sbuf_add(&o, "{\"serving\":");
    backend_json(&o, serving);
    sbuf_printf(&o, ",\"workers\":%llu", (unsigned long long)s->cfg.workers);
    if (serving->skipped[0]) {
        sbuf_add(&o, ",\"opencl_skipped\":");
        sbuf_json_str(&o, serving->skipped);
    }

    size_t count = 0;
    char why[256] = "";
    rb_device_desc *devs = NULL;
    int st = rb_devices_list(NULL, 0, &count, why, sizeof why);
    if (st == RB_OK && count) {
        devs = calloc(count, sizeof *devs);
        st = devs ? rb_devices_list(devs, count, &count, why, sizeof why)
                  : RB_ENOMEM;
    }
    sbuf_add(&o, ",\"opencl\":{\"devices\":[");
    for (size_t i = 0; st == RB_OK && i < count; i++) {
        if (i)
            sbuf_add(&o, ",");
        device_json(&o, &devs[i],
                    !on_cpu && strcmp(devs[i].name, serving->device) == 0 &&
                        strcmp(devs[i].platform, serving->platform) == 0);
    }
    sbuf_add(&o, "],\"error\":");
    sbuf_json_str(&o, st != RB_OK ? rb_status_str(st) : why[0] ? why : NULL);
    free(devs);

    /* The CPU backend always exists; describe it even when OpenCL serves. */
    sbuf_add(&o, "},\"cpu\":");
    if (on_cpu) {
        backend_json(&o, serving);
    } else {
        rb_context_options cpu = *copt;
        cpu.backend = RB_BACKEND_CPU;
        rb_context *ctx = NULL;
        rb_backend_info info;
        if (rb_context_create(&cpu, &ctx, why, sizeof why) == RB_OK &&
            rb_context_info(ctx, &info) == RB_OK)
            backend_json(&o, &info);
        else
            sbuf_add(&o, "null");
        rb_context_destroy(ctx);
    }
    sbuf_printf(&o, ",\"cpu_serving\":%s}", on_cpu ? "true" : "false");
    s->devices_json = sbuf_take(&o, NULL);
    return s->devices_json ? 0 : -1;
}

/* ------------------------------------------------------------------------
 * Start
 */
int server_parse_address(const char *text, uint16_t port,
                         struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    /* "localhost" is the one name taken: 127.0.0.1, as a person means it.
     * Other names would need a resolver, which may wait for a network the
     * server does not need (and answer differently tomorrow). */
    if (strcasecmp(text, "localhost") == 0)
        text = "127.0.0.1";
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        *len = sizeof *v4;
        return 0;
    }
    if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        *len = sizeof *v6;
        return 0;
    }
    return -1;
}

/* 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. */
static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)ss;
        return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    }
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)ss;
    if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr))
        return 1;
    return IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) &&
           v6->sin6_addr.s6_addr[12] == 127;
}

/* A PEM file, whole (malloc'ed), or NULL with why. */
static char *read_pem(const char *flag, const char *path, char *why,
                      size_t why_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_len, "cannot read --%s '%s': %s", flag, path,
                 strerror(errno));
        return NULL;
    }
    size_t cap = 1u << 20, n = 0;
    char *buf = malloc(cap + 1);
    if (buf)
        n = fread(buf, 1, cap + 1, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf || err || n > cap) {
        snprintf(why, why_len, "cannot read --%s '%s': %s", flag, path,
                 !buf ? "out of memory" : err ? strerror(err)
                                              : "larger than 1 MiB");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (!strstr(buf, "-----BEGIN ")) {
        snprintf(why, why_len, "--%s '%s' is not a PEM file (no -----BEGIN "
                 "line)", flag, path);
        free(buf);
        return NULL;
    }
    return buf;
}

static void free_secret(char *p)
{
    if (!p)
        return;
    volatile char *v = p;
    for (size_t i = 0; p[i]; i++)
        v[i] = 0;
    free(p);
}

/* Tokens, TLS, the Host list and the bind rule (SPEC 11 "Access"), all
 * before anything is started. Returns 0 or -1 with why. */
static int access_prepare(rbd_server *s, const struct sockaddr_storage *addr,
                          char *why, size_t why_len)
{
    const rbd_config *c = &s->cfg;
    int loopback = is_loopback(addr);
    if (!loopback && !c->auth_token_file[0] && !c->insecure) {
        snprintf(why, why_len, "refusing to listen on %s without "
                 "--auth-token-file: anyone who can reach it could use it "
                 "(give --insecure to do so anyway)", c->bind);
        return -1;
    }
    if (c->auth_token_file[0] &&
        !(s->auth = auth_load(c->auth_token_file, why, why_len)))
        return -1;
    if (!c->tls_cert[0] != !c->tls_key[0]) {
        snprintf(why, why_len, "--tls-cert and --tls-key come together: "
                 "%s is missing", c->tls_cert[0] ? "--tls-key" : "--tls-cert");
        return -1;
    }
    if (c->tls_cert[0]) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            snprintf(why, why_len, "--tls-cert: this libmicrohttpd was built "
                     "without TLS (GnuTLS); HTTPS is not available");
            return -1;
        }
        if (!(s->tls_cert = read_pem("tls-cert", c->tls_cert, why, why_len)) ||
            !(s->tls_key = read_pem("tls-key", c->tls_key, why, why_len)))
            return -1;
    }
    return hosts_parse(c->allowed_hosts, loopback, &s->hosts, why, why_len);
}

static void access_free(rbd_server *s)
{
    auth_destroy(s->auth);
    hosts_destroy(s->hosts);
    free_secret(s->tls_cert);
    free_secret(s->tls_key);
    s->auth = NULL;
    s->hosts = NULL;
    s->tls_cert = s->tls_key = NULL;
}

void server_reload(rbd_server *s)
{
    char why[512], fields[640];
    if (!s->auth) {
        log_event("info", "SIGHUP: nothing to reload (no --auth-token-file)",
                  NULL);
        return;
    }
    int n = auth_reload(s->auth, why, sizeof why);
    if (n < 0) {
        sbuf f;
        sbuf_init(&f);
        sbuf_add(&f, "\"detail\":");
        sbuf_json_str(&f, why);
        log_event("warn", "tokens not reloaded; the old ones stay",
                  sbuf_failed(&f) ? NULL : f.data);
        sbuf_free(&f);
        return;
    }
    snprintf(fields, sizeof fields, "\"tokens\":%d", n);
    log_event("info", "tokens reloaded", fields);
}

static void context_options(const rbd_config *c, rb_context_options *o)
{
    rb_context_options_init(o);
    rb_backend_kind_parse(c->backend, &o->backend);
    o->threads = (unsigned)c->threads;
    o->hierarchy_build = strcmp(c->bvh_build, "fast") == 0
                             ? RB_HIERARCHY_BUILD_FAST
                             : RB_HIERARCHY_BUILD_SAH;
    if (c->devices[0])
        o->devices = c->devices;
    if (c->device[0]) {
        if (strspn(c->device, "0123456789") == strlen(c->device))
            o->device_index = atoi(c->device);
        else
            o->device_name = c->device;
    }
}

/* --inline-max-tests: a one-thread CPU context for each I/O thread, made
 * now so that a failure is a start-up error and no client's query pays
 * for it. One thread: an inline query is below the line at which the
 * library would spread it (RB_SMALL_JOB_TESTS), and the library answers
 * the same bits whatever its threads. */
static int inline_contexts_create(rbd_server *s,
                                  const rb_context_options *copt, char *why,
                                  size_t why_len)
{
    if (!s->cfg.inline_max_tests ||
        strcmp(executor_backend(s->ex)->backend, "cpu") != 0)
        return 0;
    unsigned n = (unsigned)s->cfg.io_threads;
    s->inline_ctx = calloc(n, sizeof *s->inline_ctx);
    if (!s->inline_ctx) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    rb_context_options o = *copt;
    o.backend = RB_BACKEND_CPU;
    o.threads = 1;
    o.devices = NULL;
    o.device_index = -1;
    o.device_name = NULL;
    for (; s->inline_n < n; s->inline_n++) {
        char err[512] = "";
        int rc = rb_context_create(&o, &s->inline_ctx[s->inline_n], err,
                                   sizeof err);
        if (rc == RB_OK)
            rc = rb_context_warm_up(s->inline_ctx[s->inline_n]);
        if (rc) {
            snprintf(why, why_len, "no CPU context for --inline-max-tests: "
                     "%s (%s)", err[0] ? err : rb_status_str(rc),
                     rb_status_name(rc));
            rb_context_destroy(s->inline_ctx[s->inline_n]);
            s->inline_ctx[s->inline_n] = NULL;
            return -1;
        }
    }
    return 0;
}

static void inline_contexts_destroy(rbd_server *s)
{
    for (unsigned i = 0; i < s->inline_n; i++)
        rb_context_destroy(s->inline_ctx[i]);
    free(s->inline_ctx);
    s->inline_ctx = NULL;
    s->inline_n = 0;
}

/* The context each I/O thread took, and from which server. */
static _Thread_local const rbd_server *inline_owner;
static _Thread_local rb_context *inline_mine;

rb_context *server_inline_context(rbd_server *s)
{
    if (inline_owner == s)
        return inline_mine;
    if (!s->inline_n)
        return NULL;
    unsigned k = atomic_fetch_add(&s->inline_taken, 1);
    inline_owner = s;
    inline_mine = k < s->inline_n ? s->inline_ctx[k] : NULL;
    return inline_mine;
}

void server_trim_contexts(rbd_server *s)
{
    if (s->ex)
        executor_trim(s->ex);
    for (unsigned k = 0; k < s->inline_n; k++)
        rb_context_trim(s->inline_ctx[k]);
}

/* A big scene was freed, maybe outside a job (store_on_freed). */
static void trim_soon(void *ex)
{
    executor_trim_soon(ex);
}

/* What a server holds besides its daemon, listener and deadlines, freed
 * at stop and on a failed start alike (the workers closed first). */
static void release_parts(rbd_server *s)
{
    if (s->store)
        store_on_freed(s->store, NULL, NULL);
    executor_destroy(s->ex);
    inline_contexts_destroy(s);
    store_destroy(s->store);
    disk_close(s->disk);
    free(s->devices_json);
    s->ex = NULL;
    s->store = NULL;
    s->disk = NULL;
    s->devices_json = NULL;
    access_free(s);
}

/* The accept thread ran out of descriptors or memory: clients wait in
 * the backlog meanwhile. Said at most once a second. */
static void accept_failed(void *cls, int err)
{
    (void)cls;
    char fields[160];
    snprintf(fields, sizeof fields, "\"detail\":\"accept: %s\"",
             strerror(err));
    log_event("warn", "accept failed", fields);
}

/* The whole answer the listener writes to a connection over the
 * connection limits before closing it. */
static void refusal_build(rbd_server *s)
{
    if (s->tls_cert) {
        /* Plain bytes on a TLS connection read as garbage: close only. */
        s->refusal[0] = '\0';
        return;
    }
    char body[512]; /* rb_problem_write cuts the detail short to fit */
    size_t n = rb_problem_write(
        body, sizeof body, 503,
        "too many open connections (--max-connections or "
        "--max-connections-per-address); try again later", NULL);
    snprintf(s->refusal, sizeof s->refusal,
             "HTTP/1.1 503 %s\r\nContent-Type: application/problem+json\r\n"
             "Retry-After: %llu\r\nConnection: close\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             rb_http_reason(503), (unsigned long long)s->cfg.retry_after, n,
             body);
}

/* A whole 408 answer for a connection cut off by deadline.h. */
static void cut_build(char *out, size_t cap, const char *detail)
{
    char body[512];
    size_t n = rb_problem_write(body, sizeof body, 408, detail, NULL);
    snprintf(out, cap,
             "HTTP/1.1 408 %s\r\nContent-Type: application/problem+json\r\n"
             "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
             rb_http_reason(408), n, body);
}

static int deadlines_start(rbd_server *s)
{
    char detail[256];
    snprintf(detail, sizeof detail, "the request's headers took longer than "
             "%llu s (--header-timeout)",
             (unsigned long long)s->cfg.header_timeout);
    cut_build(s->header_cut, sizeof s->header_cut, detail);
    snprintf(detail, sizeof detail, "the request's body came slower than "
             "%llu bytes a second (--min-body-rate, after %llu s)",
             (unsigned long long)s->cfg.min_body_rate,
             (unsigned long long)s->cfg.header_timeout);
    cut_build(s->body_cut, sizeof s->body_cut, detail);
    rbd_deadline_config dc = {
        .header_timeout_s = (unsigned)s->cfg.header_timeout,
        .min_body_rate = s->cfg.min_body_rate,
        .header_answer = s->header_cut,
        .header_answer_len = strlen(s->header_cut),
        .body_answer = s->body_cut,
        .body_answer_len = strlen(s->body_cut)};
    if (s->tls_cert) {
        /* The 408 would be plain text inside a TLS stream: with TLS a
         * connection past its deadline is only shut down. */
        dc.header_answer = dc.body_answer = NULL;
        dc.header_answer_len = dc.body_answer_len = 0;
    }
    s->deadlines = deadlines_create(&dc);
    if (!s->deadlines)
        return -1;
    listener_set_hook(s->listener, deadlines_notify, s->deadlines);
    return 0;
}

/* ------------------------------------------------------------------------
 * Scenes of --data-dir
 */
typedef struct restoring {
    rbd_server *s;
    rb_context *ctx;
} restoring;

/* A restored scene belongs to the token whose key it carries. Without
 * that token in the file (or with no tokens at all) it belongs to no one
 * who can ask: UINT64_MAX is an owner auth never gives. A scene made
 * without tokens has owner 0, as when it was made. */
static uint64_t restored_owner(rbd_server *s, const uint8_t *key)
{
    if (!key)
        return 0;
    uint64_t owner = s->auth ? auth_owner_of_key(s->auth, key) : 0;
    return owner ? owner : UINT64_MAX;
}

static int restore_scene(void *arg, const disk_scene *sc, char *why,
                         size_t why_len)
{
    restoring *st = arg;
    double t0 = rbd_now_ms();
    rb_scene *scene = NULL;
    const disk_chunk *c = sc->n_chunks ? &sc->chunks[0] : NULL;
    int rc = rb_scene_create_shapes(st->ctx, sc->dims, c ? c->boxes : NULL,
                                    c ? c->n_boxes : 0,
                                    c ? &c->shapes : NULL, &scene);
    for (size_t k = 1; rc == RB_OK && k < sc->n_chunks; k++)
        rc = rb_scene_append_shapes(st->ctx, scene, sc->chunks[k].boxes,
                                    sc->chunks[k].n_boxes,
                                    &sc->chunks[k].shapes);
    if (rc != RB_OK) {
        snprintf(why, why_len, "scene %s of --data-dir: %s", sc->id,
                 rb_context_error(st->ctx)->message);
        rb_scene_destroy(scene);
        return -1;
    }
    return store_restore(st->s->store, sc->id, sc->version,
                         restored_owner(st->s, sc->key), scene,
                         rbd_now_ms() - t0, why, why_len);
}

/* Every scene of the data dir into the store, built on a CPU context of
 * the configured threads; the count and time go to the log. */
static int restore_scenes(rbd_server *s, const rb_context_options *copt,
                          char *why, size_t why_len)
{
    rb_context_options cpu = *copt;
    cpu.backend = RB_BACKEND_CPU;
    restoring st = {.s = s};
    if (rb_context_create(&cpu, &st.ctx, why, why_len) != RB_OK)
        return -1;
    double t0 = rbd_now_ms();
    long n = disk_restore(s->disk, restore_scene, &st, why, why_len);
    rb_context_destroy(st.ctx);
    if (n < 0)
        return -1;
    uint64_t scenes, bytes;
    store_usage(s->store, &scenes, &bytes);
    sbuf f;
    sbuf_init(&f);
    sbuf_add(&f, "\"data_dir\":");
    sbuf_json_str(&f, s->cfg.data_dir);
    sbuf_printf(&f, ",\"scenes\":%ld,\"host_bytes\":%llu,\"ms\":%.1f", n,
                (unsigned long long)bytes, rbd_now_ms() - t0);
    log_event("info", "scenes restored", sbuf_failed(&f) ? NULL : f.data);
    sbuf_free(&f);
    return 0;
}

int server_start(rbd_server *s, const rbd_config *cfg, char *why,
                 size_t why_len)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->t_start = rbd_now_ms();
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    s->id_seed = ((uint64_t)now.tv_sec << 30) ^ (uint64_t)now.tv_nsec ^
                 ((uint64_t)getpid() << 48);
    if (!s->cfg.workers)
        s->cfg.workers = online_cpus();
    if (!s->cfg.threads)
        s->cfg.threads = online_cpus();
    limits_from(&s->cfg, &s->limits);
    metrics_init(&s->metrics);
    rbc_block_cache_limit((size_t)s->cfg.buffer_cache);

    struct sockaddr_storage addr;
    socklen_t addr_len = 0;
    if (server_parse_address(s->cfg.bind, (uint16_t)s->cfg.port, &addr,
                             &addr_len)) {
        snprintf(why, why_len,
                 "--bind '%s' is not an IPv4 or IPv6 address (or localhost)",
                 s->cfg.bind);
        return -1; /* exit 1, as it always was */
    }
    if (strcmp(s->cfg.merge, "on") && strcmp(s->cfg.merge, "off") &&
        strcmp(s->cfg.merge, "auto")) {
        snprintf(why, why_len, "--merge '%.64s' is none of on, off, auto",
                 s->cfg.merge);
        return -2;
    }
    if (strcmp(s->cfg.bvh_build, "sah") && strcmp(s->cfg.bvh_build, "fast")) {
        snprintf(why, why_len, "--bvh-build '%.64s' is neither sah nor fast",
                 s->cfg.bvh_build);
        return -2;
    }
    if (access_prepare(s, &addr, why, why_len)) {
        access_free(s);
        return -2;
    }

    rbd_executor_options eo = {.workers = (unsigned)s->cfg.workers,
                               .queue_depth = (unsigned)s->cfg.queue_depth};
    context_options(&s->cfg, &eo.ctx);
    char err[512] = "";
    int rc = executor_create(&eo, &s->ex, err, sizeof err);
    if (rc) {
        snprintf(why, why_len, "no %s backend: %s (%s)", s->cfg.backend,
                 err[0] ? err : rb_status_str(rc), rb_status_name(rc));
        goto fail;
    }
    /* --merge auto: on where a launch costs (OpenCL), off on the CPU
     * backend, where merging did not pay (docs/benchmarks.md). */
    s->merging = strcmp(s->cfg.merge, "on") == 0 ||
                 (strcmp(s->cfg.merge, "auto") == 0 &&
                  strcmp(executor_backend(s->ex)->backend, "cpu") != 0);
    if (s->merging)
        executor_set_merge(s->ex, s->cfg.merge_max_rays,
                           s->cfg.merge_wait_us);
    if (inline_contexts_create(s, &eo.ctx, why, why_len))
        goto fail;
    if (s->cfg.data_dir[0] &&
        disk_open(s->cfg.data_dir, s->cfg.data_merge_bytes, &s->disk, why,
                  why_len))
        goto fail;
    budget_init(&s->budget, s->cfg.max_memory);
    if (store_create(s->cfg.max_scenes, s->cfg.max_scene_bytes, s->disk,
                     &s->budget, &s->store) ||
        build_devices_json(s, &eo.ctx)) {
        snprintf(why, why_len, "out of memory");
        goto fail;
    }
    store_on_freed(s->store, trim_soon, s->ex);
    if (s->disk && restore_scenes(s, &eo.ctx, why, why_len))
        goto fail;
    /* Listening before the daemon starts: a port in use is reported
     * as such, and a port of 0 is known before anything is served. */
    refusal_build(s);
    rbd_listener_limits ll = {
        .max_connections = (unsigned)s->cfg.max_connections,
        .max_per_address = (unsigned)s->cfg.max_connections_per_address,
        .refusal = s->refusal[0] ? s->refusal : NULL,
        .refusal_len = strlen(s->refusal)};
    s->listener = listener_open((const struct sockaddr *)&addr, addr_len,
                                1024, &ll);
    if (!s->listener) {
        snprintf(why, why_len, "cannot listen on %s port %llu: %s",
                 s->cfg.bind, (unsigned long long)s->cfg.port,
                 strerror(errno));
        goto fail;
    }
    s->port = listener_port(s->listener);
    if (deadlines_start(s)) {
        snprintf(why, why_len, "no deadline thread: out of memory");
        goto fail;
    }
    s->daemon = http_start(s);
    if (!s->daemon) {
        snprintf(why, why_len, "libmicrohttpd did not start: %s",
                 strerror(errno));
        goto fail;
    }
    rc = listener_start(s->listener, s->daemon, accept_failed, s);
    if (rc) {
        snprintf(why, why_len, "no accept thread: %s", strerror(rc));
        MHD_stop_daemon(s->daemon);
        s->daemon = NULL;
        goto fail;
    }
    return 0;
fail:
    listener_destroy(s->listener);
    s->listener = NULL;
    deadlines_destroy(s->deadlines);
    s->deadlines = NULL;
    executor_close(s->ex);
    release_parts(s);
    return -1;
}

/* ------------------------------------------------------------------------
 * Stop
 */
static unsigned connections(const rbd_server *s)
{
    return listener_connections(s->listener);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void server_stop(rbd_server *s)
{
    char fields[160];
    /* 1. Stop accepting: the listening socket is closed, so a new
     *    connection is refused (and one accepted just before is closed at
     *    once, http.c accept_policy); open ones go on, and every answer
     *    now says "Connection: close". */
    atomic_store(&s->draining, 1);
    listener_close(s->listener);
    snprintf(fields, sizeof fields, "\"connections\":%u,\"drain_timeout_s\":"
             "%llu", connections(s), (unsigned long long)s->cfg.drain_timeout);
    log_event("info", "draining", fields);

    /* 2. Let what is in flight finish: queued and running jobs, bodies
     *    still arriving, answers being sent - until no connection is left
     *    or the drain timeout. Connections between requests are closed
     *    (they would hold the drain for nothing), and queries still
     *    running a little before the timeout are stopped (503), so that
     *    their answers go out before it: at most a second before, a
     *    quarter of the timeout when it is short. */
    double t0 = rbd_now_ms();
    double deadline = t0 + 1e3 * (double)s->cfg.drain_timeout;
    double margin = 250.0 * (double)s->cfg.drain_timeout;
    if (margin > 1000)
        margin = 1000;
    atomic_store(&s->stop_queries_at, (int64_t)(deadline - margin));
    deadlines_drain(s->deadlines);
    while (connections(s) > 0 && rbd_now_ms() < deadline)
        sleep_ms(10);

    /* 3. Refuse new jobs, wait for the running ones, answer the queued
     *    ones 503: every suspended connection is resumed. */
    executor_close(s->ex);
    /* 4. ... and wait until MHD has taken each of them back (a resumed
     *    connection is still "suspended" until its thread processes the
     *    resumption); MHD_stop_daemon must not meet a suspended one. */
    double resumed_by = rbd_now_ms() + 5e3;
    while (atomic_load(&s->suspended) > 0 && rbd_now_ms() < resumed_by)
        sleep_ms(5);
    unsigned left = connections(s);

    /* 5. Close what is left (idle keep-alive connections) and stop. */
    MHD_stop_daemon(s->daemon);
    listener_destroy(s->listener); /* the daemon's callback used it */
    s->listener = NULL;
    deadlines_destroy(s->deadlines); /* every connection is gone */
    s->deadlines = NULL;
    snprintf(fields, sizeof fields, "\"connections_closed\":%u", left);
    log_event("info", "stopped", fields);

    release_parts(s); /* no I/O thread is left to use its context */
    rbc_block_cache_limit(0); /* frees what it kept */
}

void server_gauges(rbd_server *s, rbd_gauges *g)
{
    rbd_executor_stats st;
    executor_stats(s->ex, &st);
    const rb_backend_info *b = executor_backend(s->ex);
    memset(g, 0, sizeof *g);
    g->queue_depth = st.queued;
    g->queue_capacity = st.capacity;
    g->running = st.running;
    g->workers = st.workers;
    g->merged_launches = st.merged_runs;
    g->merged_requests = st.merged_jobs;
    g->connections = connections(s);
    listener_refused(s->listener, &g->refused_full, &g->refused_per_address);
    deadlines_cut_counts(s->deadlines, &g->cut_headers, &g->cut_body);
    store_usage(s->store, &g->scenes, &g->scene_bytes);
    g->max_scenes = s->cfg.max_scenes;
    g->max_scene_bytes = s->cfg.max_scene_bytes;
    g->buffer_cache_bytes = rbc_block_cache_held();
    g->memory_held = atomic_load(&s->budget.used);
    g->memory_peak = atomic_load(&s->budget.peak);
    g->memory_limit = s->budget.limit;
    g->memory_refused = atomic_load(&s->budget.refused);
    g->backend = b->backend;
    g->device = b->device;
    g->draining = atomic_load(&s->draining);
    g->uptime_s = (rbd_now_ms() - s->t_start) / 1e3;
}
