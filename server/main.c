/*
 * main.c - rayboxd: configuration, start, then wait for SIGTERM or SIGINT
 * in sigwait (the signals are blocked in every thread, so no handler runs
 * at an awkward moment) and shut down cleanly: exit 0. SIGHUP reads
 * --auth-token-file again (server_reload).
 *
 * Exit status: 0 after a clean shutdown or --help; 2 bad configuration
 * (options, tokens, TLS files, a refused --bind); 1 the server could not
 * start (backend, address in use).
 *
 * `rayboxd --healthcheck [URL]` serves nothing: it GETs URL (default
 * http://127.0.0.1:$RAYBOX_PORT/v1/health, port 8080 when unset) and
 * exits 0 on a 200, else 1 (healthcheck.h), for a container's
 * HEALTHCHECK.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "access_log.h"
#include "auth.h"
#include "config.h"
#include "healthcheck.h"
#include "sbuf.h"
#include "server.h"

/* All of --healthcheck's connect, send and read. */
#define HEALTHCHECK_MS 3000

static void log_listening(const rbd_server *s)
{
    const rb_backend_info *b = executor_backend(s->ex);
    sbuf f;
    sbuf_init(&f);
    sbuf_printf(&f, "\"port\":%u,\"bind\":", (unsigned)s->port);
    sbuf_json_str(&f, s->cfg.bind);
    /* Where to point a client, as a person would type it (an IPv6
     * literal in brackets; 0.0.0.0 and :: stay as bound). */
    char url[320];
    int v6 = strchr(s->cfg.bind, ':') != NULL;
    snprintf(url, sizeof url, "%s://%s%s%s:%u",
             s->cfg.tls_cert[0] ? "https" : "http", v6 ? "[" : "",
             s->cfg.bind, v6 ? "]" : "", (unsigned)s->port);
    sbuf_add(&f, ",\"url\":");
    sbuf_json_str(&f, url);
    sbuf_add(&f, ",\"backend\":");
    sbuf_json_str(&f, b->backend);
    sbuf_add(&f, ",\"device\":");
    sbuf_json_str(&f, b->device);
    sbuf_printf(&f,
                ",\"workers\":%llu,\"threads\":%llu,\"io_threads\":%llu,"
                "\"event_loop\":\"%s\",\"queue_depth\":%llu,\"version\":\"%s\"",
                (unsigned long long)s->cfg.workers,
                (unsigned long long)s->cfg.threads,
                (unsigned long long)s->cfg.io_threads,
                s->cfg.poll ? "poll" : "epoll",
                (unsigned long long)s->cfg.queue_depth, RB_VERSION_STRING);
    /* What guards the door (SPEC 11 "Access"); never the tokens. */
    sbuf_printf(&f, ",\"tls\":%s,\"tokens\":%u,\"host_check\":%s",
                s->tls_cert ? "true" : "false",
                s->auth ? auth_count(s->auth) : 0u,
                s->hosts ? "true" : "false");
    if (b->skipped[0]) {
        sbuf_add(&f, ",\"opencl_skipped\":");
        sbuf_json_str(&f, b->skipped);
    }
    log_event("info", "listening", sbuf_failed(&f) ? NULL : f.data);
    sbuf_free(&f);
    /* A person at a terminal gets one plain line too; logs stay JSON on
     * stderr. */
    if (isatty(STDOUT_FILENO)) {
        printf("rayboxd %s listening on %s (%s backend: %s); Ctrl-C stops "
               "it\n", RB_VERSION_STRING, url, b->backend, b->device);
        fflush(stdout);
    }
}

/* Every open connection is a descriptor: the soft limit is raised to
 * cover --max-connections (plus room for the process's own files), as
 * far as the hard limit allows; short of that, a warning. Out of
 * descriptors, the accept thread pauses and clients wait in the backlog. */
static void fit_descriptor_limit(const rbd_config *c)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r))
        return;
    rlim_t want = (rlim_t)c->max_connections + 256;
    if (r.rlim_cur >= want)
        return;
    r.rlim_cur = r.rlim_max == RLIM_INFINITY || r.rlim_max >= want
                     ? want
                     : r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    if (r.rlim_cur < want) {
        char fields[160];
        snprintf(fields, sizeof fields,
                 "\"max_connections\":%llu,\"descriptors\":%llu",
                 (unsigned long long)c->max_connections,
                 (unsigned long long)r.rlim_cur);
        log_event("warn", "fewer descriptors than connections", fields);
    }
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--healthcheck") == 0) {
        if (argc > 3) {
            fprintf(stderr, "rayboxd: usage: rayboxd --healthcheck "
                            "[http://HOST:PORT/PATH]\n");
            return 1;
        }
        /* No URL: this host's health on $RAYBOX_PORT, the port the
         * server takes from the same environment. */
        char url[64];
        const char *port = getenv("RAYBOX_PORT");
        snprintf(url, sizeof url, "http://127.0.0.1:%.8s/v1/health",
                 port && port[0] ? port : "8080");
        return rbd_healthcheck(argc == 3 ? argv[2] : url, HEALTHCHECK_MS);
    }
    rbd_config cfg;
    char err[512];
    int rc = rbd_config_load(&cfg, argc, argv, stdout, err, sizeof err);
    if (rc > 0)
        return 0;
    if (rc < 0) {
        fprintf(stderr, "rayboxd: %s\n", err);
        return 2;
    }

    /* Before any thread exists, so that every thread inherits the mask:
     * SIGTERM/SIGINT are taken by sigwait below, SIGPIPE never kills. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    fit_descriptor_limit(&cfg);
    static rbd_server server;
    rc = server_start(&server, &cfg, err, sizeof err);
    if (rc) {
        sbuf f;
        sbuf_init(&f);
        sbuf_add(&f, "\"detail\":");
        sbuf_json_str(&f, err);
        log_event("error", "cannot start", f.data);
        sbuf_free(&f);
        return rc == -2 ? 2 : 1;
    }
    log_listening(&server);

    sigdelset(&set, SIGPIPE);
    int sig = 0;
    while (sigwait(&set, &sig) != 0 || sig == SIGHUP)
        if (sig == SIGHUP) {
            server_reload(&server);
            sig = 0;
        }
    char fields[64];
    snprintf(fields, sizeof fields, "\"signal\":\"%s\"",
             sig == SIGTERM ? "SIGTERM" : "SIGINT");
    log_event("info", "shutting down", fields);
    server_stop(&server);
    return 0;
}
