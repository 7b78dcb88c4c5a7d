/*
 * server.h - rayboxd as a whole: the daemon, the workers, the scene store,
 * the metrics, and the start/drain/stop sequence main() runs.
 */
#ifndef RBD_SERVER_H
#define RBD_SERVER_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"
#include "executor.h"
#include "json_request.h"
#include "mem_budget.h"
#include "metrics.h"
#include "scene_store.h"

struct MHD_Daemon;
struct rbd_auth;
struct rbd_hosts;

typedef struct rbd_server {
    rbd_config cfg;
    rbq_limits limits;          /* per request, from cfg */
    struct MHD_Daemon *daemon;
    struct rbd_listener *listener; /* counts connections until the end */
    char refusal[1024];         /* the 503 a connection over the limits gets */
    struct rbd_deadlines *deadlines; /* slow clients (deadline.h) */
    char header_cut[1024], body_cut[1024]; /* the 408s of deadline.h */
    uint16_t port;
    rbd_executor *ex;
    int merging;                /* --merge in force (executor_set_merge) */
    /* --inline-max-tests: one CPU context for each I/O thread, made at
     * start, each taken by the first thread that answers a query inline
     * (server_inline_context); none when off or not on the CPU backend. */
    rb_context **inline_ctx;
    unsigned inline_n;
    _Atomic unsigned inline_taken;
    scene_store *store;
    rbd_budget budget;          /* --max-memory (mem_budget.h) */
    struct scene_disk *disk;    /* --data-dir; NULL: scenes in memory only */
    rbd_metrics metrics;
    char *devices_json;         /* GET /v1/devices, built at start-up */
    double t_start;             /* monotonic ms */
    _Atomic int draining;       /* SIGTERM/SIGINT came */
    _Atomic int64_t stop_queries_at; /* monotonic ms; 0: none (drain) */
    _Atomic long suspended;     /* connections suspended and not yet back */
    _Atomic uint64_t requests;  /* request ids */
    uint64_t id_seed;
    /* Access (SPEC 11): tokens (NULL: none, scenes shared), the Host
     * allow list (NULL: any), the PEM texts of --tls-cert/--tls-key (NULL:
     * plain HTTP), kept for the daemon's life. */
    struct rbd_auth *auth;
    struct rbd_hosts *hosts;
    char *tls_cert, *tls_key;
} rbd_server;

/* Creates everything and starts listening. Returns 0, -1 with why when
 * the server could not start (backend, address, memory), or -2 with why
 * when the configuration is refused (a token, TLS or host option, or a
 * non-loopback --bind without tokens or --insecure). */
int server_start(rbd_server *s, const rbd_config *cfg, char *why,
                 size_t why_len);

/* --bind's address (an IPv4 or IPv6 literal, or localhost = 127.0.0.1)
 * with port into *ss and *len; -1 when text is none of those. Also the
 * host of rayboxd --healthcheck URL. */
int server_parse_address(const char *text, uint16_t port,
                         struct sockaddr_storage *ss, socklen_t *len);

/* SIGHUP: reads --auth-token-file again (auth.h) and logs the outcome; a
 * bad file keeps the tokens in force. Nothing else is reloaded. */
void server_reload(rbd_server *s);

/* The shutdown sequence: stop accepting (the listening socket is
 * closed), let open connections finish (until the drain timeout), answer
 * the jobs still queued with 503, resume every suspended connection, stop
 * the daemon, free all. */
void server_stop(rbd_server *s);

/* http.c: starts libmicrohttpd with the configured threads and limits and
 * no listening socket of its own (listener.c accepts for it); NULL on
 * failure (MHD logged why). */
struct MHD_Daemon *http_start(rbd_server *s);

/* Why a running query was stopped (rb_query.stop). */
typedef enum rbd_stop_reason {
    RBD_STOP_DEADLINE = 0, /* --max-query-ms */
    RBD_STOP_DRAIN = 1,    /* the drain timeout is near */
    RBD_STOP_CLIENT = 2    /* its client closed the connection */
} rbd_stop_reason;

/* The calling I/O thread's own context for queries answered inline
 * (handlers.c), taken on its first call; NULL when --inline-max-tests is
 * off, the backend is not the CPU, or every context is taken by other
 * threads (the query then goes to a worker). I/O threads only: the
 * context is used by its thread alone. */
rb_context *server_inline_context(rbd_server *s);
/* rb_context_trim on every context of the server (workers and inline). */
void server_trim_contexts(rbd_server *s);

/* The metrics page's point-in-time values. */
void server_gauges(rbd_server *s, rbd_gauges *g);

#endif
