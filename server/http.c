/*
 * http.c - the libmicrohttpd glue: the access handler's three phases
 * (headers, body pieces, end of body / resumed) and the completion
 * callback that logs, counts and frees each request.
 *
 * MHD 0.9.75 accepts a response only on the first call (headers) or after
 * the whole body came, and only from inside the handler. So what can be
 * decided from the headers (404, 405, 413 from Content-Length, 415, 406)
 * is answered on the first call - MHD then skips "100 Continue", never
 * reads the body and closes the connection - and whatever goes wrong
 * while the body streams in is remembered and answered after its last
 * byte. Every piece is consumed in full (0.9.75 can hang a connection
 * that leaves bytes unconsumed).
 */
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "access_log.h"
#include "allowed_hosts.h"
#include "auth.h"
#include "block_cache.h"
#include "deadline.h"
#include "listener.h"
#include "request.h"
#include "sbuf.h"
#include "strict.h"

/* ------------------------------------------------------------------------
 * Request state
 */
static int id_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
           c == ':';
}

/* The client's X-Request-Id when it is a plain token, else a new one. */
static void request_id(rbd_request *r)
{
    const char *given = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                    "X-Request-Id");
    size_t n = given ? strlen(given) : 0;
    int ok = n > 0 && n <= RBD_REQUEST_ID_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = id_char(given[i]);
    if (ok) {
        memcpy(r->request_id, given, n + 1);
        return;
    }
    uint64_t k = atomic_fetch_add(&r->srv->requests, 1) + 1;
    /* splitmix64 of the counter plus a per-run seed: unique within a run,
     * unlikely to repeat across runs. */
    uint64_t x = (r->srv->id_seed + k) * 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    static const char hex[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, x >>= 4)
        r->request_id[i] = hex[x & 15];
    r->request_id[16] = '\0';
}

/* strlcpy: cut to fit, always terminated (snprintf "%s" did this at a
 * cost noticeable per request). */
static void copy_cut(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request begins once libmicrohttpd has
 * its request line, before it decodes the target (strict_target needs
 * the raw length) and before it parses the headers. From here MHD reports
 * the request's end to completed(), also when it answers the request
 * itself (a Content-Length it cannot read) or the client goes away. */
static void *request_begin(void *cls, const char *uri,
                           struct MHD_Connection *conn)
{
    rbd_server *s = cls;
    rbd_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL; /* the handler then drops the connection */
    r->srv = s;
    r->conn = conn;
    r->t_start = rbd_now_ms();
    r->target_len = uri ? strlen(uri) : 0;
    r->route = ROUTE_NONE;
    r->phase = PH_LINE;
    return r;
}

/* The first call of the handler: the headers are in. */
static void request_start(rbd_request *r, const char *url, const char *method)
{
    r->method = method_parse(method);
    copy_cut(r->method_name, sizeof r->method_name, method);
    copy_cut(r->path, sizeof r->path, url);
    r->route = route_match(url, r->scene_id);
    r->phase = PH_RECEIVING;
    request_id(r);
}

/* After a request that held this much, freed memory goes back to the
 * OS (glibc keeps a heap's free pages, the contexts the work arrays of
 * their last builds; RSS would stay at the peak)... */
#define TRIM_AFTER_BYTES ((uint64_t)64 << 20)
/* ...but not more often than this: malloc_trim walks every arena. */
#define TRIM_EVERY_MS 1000.0

static void request_free(rbd_request *r)
{
    rbd_server *s = r->srv;
    uint64_t held = r->held;
    rbj_parser_destroy(r->jp);
    rbb_decoder_destroy(r->bd);
    scene_ver_release(r->ver);
    free(r->reply.body);
    rbc_block_free(r->cam_rays);
    payload_free(r->reply.payload);
    free(r);
    budget_give(&s->budget, held);
    if (held >= TRIM_AFTER_BYTES) {
        static _Atomic int64_t last_trim;
        int64_t now = (int64_t)rbd_now_ms(), last = atomic_load(&last_trim);
        if (now - last >= TRIM_EVERY_MS &&
            atomic_compare_exchange_strong(&last_trim, &last, now)) {
            server_trim_contexts(s);
            malloc_trim(0);
        }
    }
}

/* ------------------------------------------------------------------------
 * Headers
 */

/* The media type of a Content-Type or Accept element, without
 * parameters or white space, lower-cased into out. */
static void media_type(const char *s, size_t n, char *out, size_t cap)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    size_t k = 0;
    for (size_t i = 0; i < n && s[i] != ';' && k + 1 < cap; i++)
        if (s[i] != ' ' && s[i] != '\t')
            out[k++] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
    out[k] = '\0';
}

static rbd_body_kind body_kind(const char *content_type)
{
    char t[64];
    if (!content_type)
        return BODY_NONE;
    media_type(content_type, strlen(content_type), t, sizeof t);
    if (strcmp(t, "application/json") == 0)
        return BODY_JSON;
    if (strcmp(t, RBB_MEDIA_TYPE) == 0)
        return BODY_BINARY;
    return BODY_NONE;
}

/* Accept: JSON or binary for the answer. A specific type beats a
 * wildcard, a higher q wins, a tie keeps the request's form. -1 when
 * neither is acceptable (406). */
static int negotiate(const char *accept, int request_binary,
                     const char *main_type)
{
    if (!accept || !accept[0])
        return request_binary;
    double qj = -1, qb = -1, qw = -1;
    const char *p = accept;
    while (*p) {
        size_t n = strcspn(p, ",");
        char t[64];
        media_type(p, n, t, sizeof t);
        double q = 1;
        const char *semi = memchr(p, ';', n);
        while (semi && semi < p + n) {
            const char *a = semi + 1;
            while (*a == ' ')
                a++;
            if ((a[0] == 'q' || a[0] == 'Q') && a[1] == '=')
                q = strtod(a + 2, NULL);
            semi = memchr(a, ';', (size_t)(p + n - a));
        }
        /* main_type's family wildcard (application/..., image/...) */
        size_t fam = strcspn(main_type, "/");
        double *slot = strcmp(t, main_type) == 0             ? &qj
                       : strcmp(t, RBB_MEDIA_TYPE) == 0     ? &qb
                       : strcmp(t, "*/*") == 0 ||
                               (strncmp(t, main_type, fam + 1) == 0 &&
                                strcmp(t + fam + 1, "*") == 0)
                           ? &qw
                           : NULL;
        if (slot && q > *slot)
            *slot = q;
        p += n;
        if (*p == ',')
            p++;
    }
    if (qj < 0)
        qj = qw;
    if (qb < 0)
        qb = qw;
    if (qj <= 0 && qb <= 0)
        return -1;
    if (qj == qb)
        return request_binary;
    return qb > qj;
}

static int takes_body(const rbd_request *r)
{
    return r->method == METHOD_POST || r->method == METHOD_PATCH;
}

static enum MHD_Result start_parser(rbd_request *r)
{
    rbd_server *s = r->srv;
    int scene_path = r->route == ROUTE_SCENE_INTERSECT ||
                     r->route == ROUTE_SCENE_RENDER;
    if (r->in == BODY_JSON) {
        rbj_options o;
        rbj_options_init(&o, r->route == ROUTE_SCENES ? RBQ_SCENE_CREATE
                             : r->route == ROUTE_SCENE ? RBQ_SCENE_PATCH
                             : r->route == ROUTE_SCENE_VISIBILITY
                                 ? RBQ_VISIBILITY
                             : r->route == ROUTE_SCENE_RENDER ? RBQ_RENDER
                                 : RBQ_INTERSECT);
        o.limits = s->limits;
        o.patch_dims = r->route == ROUTE_SCENE ? r->scene_dims : 3;
        o.scene_in_path = scene_path;
        o.scene_dims = scene_path ? r->scene_dims : 0;
        if (rbj_parser_create(&o, &r->jp) != RB_OK)
            return respond_problem(r, 503, NULL, "out of memory");
    } else {
        rbb_options o;
        rbb_options_init(&o, r->route == ROUTE_SCENES ? RBB_KIND_SCENE
                                                      : RBB_KIND_INTERSECT);
        o.limits = s->limits;
        o.scene_in_path = scene_path;
        o.scene_dims = scene_path ? r->scene_dims : 0;
        o.content_length = r->has_length ? r->content_length
                                         : RBB_LENGTH_UNKNOWN;
        o.max_body = s->cfg.max_body_bytes;
        if (rbb_decoder_create(&o, &r->bd) != RB_OK)
            return respond_problem(r, 503, NULL, "out of memory");
    }
    return MHD_YES;
}

/* Refuses a request from its headers. With a body on its way the answer
 * goes out now (MHD then never reads the body and closes the connection);
 * without one it waits for the end of the request, which keeps the
 * connection open for the next request. */
static enum MHD_Result refuse(rbd_request *r, int status, const char *detail)
{
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 "Content-Length");
    const char *te = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 "Transfer-Encoding");
    if (te || (cl && strcmp(cl, "0") != 0))
        return respond_problem(r, status, NULL, detail);
    r->early.status = status;
    snprintf(r->early.detail, sizeof r->early.detail, "%s", detail);
    return MHD_YES;
}

/* Everything the headers decide; the first call of the handler. */
static enum MHD_Result on_headers(rbd_request *r, const char *url,
                                  const char *version)
{
    rbd_server *s = r->srv;
    char detail[400];
    /* Framing and bytes first: until they pass, nothing else about the
     * request can be trusted, not even where it ends. */
    int bad = strict_target(url, r->target_len, version, detail,
                            sizeof detail);
    if (!bad)
        bad = strict_headers(r->conn, version, detail, sizeof detail);
    if (bad) {
        r->must_close = 1;
        return respond_problem(r, bad, NULL, detail);
    }
    /* Access (SPEC 11): a Host not ours (DNS rebinding), then the token;
     * both before anything about the path is said. */
    bad = hosts_check(s->hosts,
                      MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                  MHD_HTTP_HEADER_HOST),
                      detail, sizeof detail);
    if (bad)
        return refuse(r, bad, detail);
    if (s->auth && r->route != ROUTE_HEALTH &&
        !(r->route == ROUTE_METRICS && s->cfg.metrics_public)) {
        const char *h = MHD_lookup_connection_value(
            r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        r->owner = auth_check(s->auth, h);
        if (!r->owner) {
            /* RFC 6750 3.1: error="invalid_token" only for a bearer
             * token, not for none or another scheme. */
            const char *t = h ? h + strspn(h, " \t") : NULL;
            r->token_offered = t && strncasecmp(t, "Bearer", 6) == 0;
            return refuse(r, 401, r->token_offered
                                      ? "the bearer token is not valid"
                                      : "this route needs Authorization: "
                                        "Bearer <token>");
        }
    }
    if (r->route == ROUTE_NONE) {
        snprintf(detail, sizeof detail, "no such path '%.128s'", r->path);
        return refuse(r, 404, detail);
    }
    if (!route_allows(r->route, r->method)) {
        snprintf(detail, sizeof detail, "%s takes %s", route_template(r->route),
                 route_allow(r->route));
        return refuse(r, 405, detail);
    }
    if (!takes_body(r))
        return MHD_YES; /* a body, if any, is read and ignored */

    /* strict_headers saw one Content-Length at most, all digits, and
     * libmicrohttpd answered one beyond 64 bits itself. */
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 "Content-Length");
    if (cl) {
        unsigned long long v = strtoull(cl, NULL, 10);
        r->has_length = 1;
        r->content_length = v;
        if (v > s->cfg.max_body_bytes) {
            snprintf(detail, sizeof detail, "the body has %llu bytes: at "
                     "most %llu (--max-body-bytes)", v,
                     (unsigned long long)s->cfg.max_body_bytes);
            return respond_problem(r, 413, NULL, detail);
        }
    }
    const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 "Content-Type");
    r->in = body_kind(ct);
    int json_only = r->route == ROUTE_SCENE ||
                    r->route == ROUTE_SCENE_VISIBILITY ||
                    r->route == ROUTE_SCENE_RENDER;
    if (r->in == BODY_NONE || (r->in == BODY_BINARY && json_only)) {
        snprintf(detail, sizeof detail, "Content-Type %s%s%s: %s takes %s",
                 ct ? "'" : "", ct ? ct : "missing", ct ? "'" : "",
                 route_template(r->route),
                 r->route == ROUTE_SCENE ? "application/json (PATCH bodies "
                                           "are JSON only)"
                 : json_only ? (r->route == ROUTE_SCENE_RENDER
                                    ? "application/json"
                                    : "application/json (visibility bodies "
                                      "are JSON only; the answer may be "
                                      "binary)")
                             : "application/json or " RBB_MEDIA_TYPE);
        return respond_problem(r, 415, NULL, detail);
    }
    if (r->route == ROUTE_SCENE || r->route == ROUTE_SCENE_INTERSECT ||
        r->route == ROUTE_SCENE_VISIBILITY ||
        r->route == ROUTE_SCENE_RENDER) {
        scene_ver *v = store_acquire(s->store, r->scene_id, r->owner);
        if (!v) {
            snprintf(detail, sizeof detail, "no scene '%s'", r->scene_id);
            return respond_problem(r, 404, NULL, detail);
        }
        r->scene_dims = scene_ver_dims(v); /* never changes */
        scene_ver_release(v);
    }
    if (r->route == ROUTE_INTERSECT || r->route == ROUTE_SCENE_INTERSECT ||
        r->route == ROUTE_SCENE_VISIBILITY) {
        const char *accept = MHD_lookup_connection_value(
            r->conn, MHD_HEADER_KIND, "Accept");
        int out = negotiate(accept, r->in == BODY_BINARY,
                            "application/json");
        if (out < 0) {
            snprintf(detail, sizeof detail, "Accept '%.128s': answers are "
                     "application/json or " RBB_MEDIA_TYPE, accept);
            return respond_problem(r, 406, NULL, detail);
        }
        r->out_binary = out;
    }
    if (r->route == ROUTE_SCENE_RENDER) {
        const char *accept = MHD_lookup_connection_value(
            r->conn, MHD_HEADER_KIND, "Accept");
        int out = negotiate(accept, 0, "image/png");
        if (out < 0) {
            snprintf(detail, sizeof detail, "Accept '%.128s': a render "
                     "answers image/png or " RBB_MEDIA_TYPE, accept);
            return respond_problem(r, 406, NULL, detail);
        }
        r->out_binary = out;
    }
    if (r->in == BODY_BINARY && r->has_length &&
        r->content_length < RBB_HEADER_SIZE) {
        snprintf(detail, sizeof detail, "the body has %llu bytes, less than "
                 "the %d-byte binary header",
                 (unsigned long long)r->content_length, RBB_HEADER_SIZE);
        return respond_problem(r, 400, "", detail);
    }
    if (r->has_length &&
        request_take_memory(r, budget_body_bytes(r->in == BODY_JSON,
                                                 r->content_length),
                            "its body", detail, sizeof detail))
        return respond_problem(r, 503, NULL, detail);
    return start_parser(r);
}

/* Whether libmicrohttpd will read a body after these headers (for the
 * body deadline): a length above 0, or chunks. */
static int body_follows(const rbd_request *r)
{
    if (MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                    "Transfer-Encoding"))
        return 1;
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 "Content-Length");
    return cl && strtoull(cl, NULL, 10) > 0;
}

/* ------------------------------------------------------------------------
 * Body
 */
static enum MHD_Result on_body(rbd_request *r, const char *data, size_t n)
{
    uint64_t max = r->srv->cfg.max_body_bytes;
    r->received += n;
    /* Cut off as too slow meanwhile (deadline.h): nothing more to do. */
    if (deadlines_body(r->conn, r->received) < 0)
        return MHD_NO;
    if (r->early.status) {
        /* Already refused: read the rest and drop it, but not forever
         * (a chunked body has no announced end). */
        return r->received > 2 * max ? MHD_NO : MHD_YES;
    }
    if (r->received > max) {
        r->early.status = 413;
        snprintf(r->early.detail, sizeof r->early.detail,
                 "the body is longer than %llu bytes (--max-body-bytes)",
                 (unsigned long long)max);
        return MHD_YES;
    }
    /* A chunked body takes its share of memory as it comes. */
    if (!r->has_length &&
        request_take_memory(r, budget_body_bytes(r->in == BODY_JSON, n),
                            "its body's next chunk", r->early.detail,
                            sizeof r->early.detail)) {
        r->early.status = 503;
        return MHD_YES;
    }
    int last = r->has_length && r->received == r->content_length;
    if (r->jp && (last ? rbj_parser_feed_last(r->jp, data, n)
                       : rbj_parser_feed(r->jp, data, n)))
        r->early = *rbj_parser_error(r->jp);
    else if (r->bd && rbb_decoder_feed(r->bd, data, n))
        r->early = *rbb_decoder_error(r->bd);
    return MHD_YES;
}

/* The last call for the request's body. */
static enum MHD_Result on_complete(rbd_request *r)
{
    if (deadlines_request_done(r->conn) < 0)
        return MHD_NO; /* cut off just before its last byte */
    if (r->early.status)
        return respond_error(r, &r->early);
    if (r->jp) {
        if (rbj_parser_finish(r->jp))
            return respond_error(r, rbj_parser_error(r->jp));
        r->body = rbj_parser_request(r->jp);
    } else if (r->bd) {
        if (rbb_decoder_finish(r->bd))
            return respond_error(r, rbb_decoder_error(r->bd));
        r->body = rbb_decoder_request(r->bd);
    }
    return handle_request(r);
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn,
                                      const char *url, const char *method,
                                      const char *version,
                                      const char *upload_data,
                                      size_t *upload_data_size, void **con_cls)
{
    rbd_server *s = cls;
    rbd_request *r = *con_cls;
    if (!r)
        return MHD_NO; /* request_begin had no memory: drop the connection */
    if (r->phase == PH_LINE) {
        request_start(r, url, method);
        /* The headers deadline is met, unless the watcher was first. */
        if (deadlines_headers_done(conn, body_follows(r)) < 0)
            return MHD_NO;
        enum MHD_Result ret = on_headers(r, url, version);
        if (r->phase == PH_ANSWERED) /* no body will be read */
            deadlines_request_done(conn);
        return ret;
    }
    if (r->phase == PH_QUEUED) {
        /* Resumed: the worker is done with r; the answer is in reply. */
        atomic_fetch_sub(&s->suspended, 1);
        return respond_reply(r);
    }
    if (r->phase == PH_ANSWERED)
        return MHD_YES;
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return on_body(r, upload_data, n);
    }
    return on_complete(r);
}

/* ------------------------------------------------------------------------
 * Completion: log, count, free - whatever happened.
 */
static const char *outcome(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK: return NULL;
    case MHD_REQUEST_TERMINATED_WITH_ERROR: return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR: return "read_error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT: return "client_abort";
    }
    return "unknown";
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    rbd_server *s = cls;
    rbd_request *r = *con_cls;
    /* The next request's headers deadline starts now (deadline.h). */
    const char *cut = deadlines_request_end(conn);
    if (!r)
        return;
    *con_cls = NULL;
    double end = rbd_now_ms();
    const char *how = outcome(toe);
    if (r->phase == PH_LINE) {
        /* The handler never saw this request: libmicrohttpd answered it
         * itself (its status, if any, is logged) or it ended early. */
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
        r->status = i ? (int)i->http_status : 0;
        if (r->status)
            how = "answered_by_libmicrohttpd";
        request_id(r);
    }
    if (cut) {
        how = cut;
        r->status = 408; /* what the watcher wrote, if the client read it */
    }
    if (r->status)
        metrics_request(&s->metrics, r->route, r->status,
                        (end - r->t_start) / 1e3);
    if (!s->cfg.quiet) {
        int queued = r->job.t_queued > 0;
        rbd_log_request l = {
            .request_id = r->request_id,
            .method = r->method_name,
            .path = r->path,
            .route = route_template(r->route),
            .status = r->status,
            .outcome = how,
            .rays = r->rays,
            .boxes = r->boxes,
            .bytes_in = r->received,
            .bytes_out = r->bytes_out,
            .queue_ms = queued ? r->job.t_started - r->job.t_queued : 0,
            .run_ms = queued ? r->job.t_finished - r->job.t_started : 0,
            .duration_ms = end - r->t_start,
            .inlined = r->inlined,
            .scene = r->scene_id[0] ? r->scene_id : NULL,
            .error = r->error[0] ? r->error : NULL,
        };
        access_log_request(&l);
    }
    request_free(r);
}

/* ------------------------------------------------------------------------
 * Daemon
 */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512], fields[1200];
    (void)cls;
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    sbuf b;
    sbuf_init(&b);
    sbuf_add(&b, "\"detail\":");
    sbuf_json_str(&b, msg);
    snprintf(fields, sizeof fields, "%s", b.data ? b.data : "");
    sbuf_free(&b);
    log_event("warn", "libmicrohttpd", fields);
}

/* After SIGTERM/SIGINT server_stop closes the listening socket; a
 * connection the accept thread took just before is closed here, so that
 * nothing new is served while draining. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr,
                                     socklen_t addrlen)
{
    rbd_server *s = cls;
    (void)addr;
    (void)addrlen;
    return atomic_load(&s->draining) ? MHD_NO : MHD_YES;
}

struct MHD_Daemon *http_start(rbd_server *s)
{
    const rbd_config *c = &s->cfg;
    /* No listening socket of its own: listener.c accepts and hands the
     * connections over (see listener.h for why). */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
                     (c->poll ? MHD_USE_POLL : MHD_USE_EPOLL) |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     MHD_USE_NO_LISTEN_SOCKET;
    /* A pool of 1 is no pool: the polling thread serves alone. */
    unsigned pool = c->io_threads > 1 ? (unsigned)c->io_threads : 0;
    /* HTTPS: libmicrohttpd does the handshake on each connection handed
     * over by the listener, as on one it accepted itself. */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key},
        {MHD_OPTION_END, 0, NULL}};
    if (s->tls_cert)
        flags |= MHD_USE_TLS;
    else
        tls[0].option = MHD_OPTION_END;
    return MHD_start_daemon(
        flags, 0, accept_policy, s, access_handler, s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, /* first: catches all */
        MHD_OPTION_THREAD_POOL_SIZE, pool,
        /* Above any count the listener admits (listener.h says why). */
        MHD_OPTION_CONNECTION_LIMIT, listener_mhd_limit(s->listener, pool),
        MHD_OPTION_NOTIFY_CONNECTION, listener_notify, s->listener,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)c->connection_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)c->connection_memory,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s,
        MHD_OPTION_URI_LOG_CALLBACK, request_begin, s,
        MHD_OPTION_UNESCAPE_CALLBACK, strict_unescape, s,
        MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
}
