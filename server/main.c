/*
 * main.c - rayboxd: configuration, start, then wait for SIGTERM or SIGINT
 * in sigwait (the signals are blocked in every thread, so no handler runs
 * at an awkward moment) and shut down cleanly: exit 0.
 *
 * Exit status: 0 after a clean shutdown or --help; 2 bad configuration;
 * 1 the server could not start (backend, address).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "access_log.h"
#include "config.h"
#include "sbuf.h"
#include "server.h"

static void log_listening(const rbd_server *s)
{
    const rb_backend_info *b = executor_backend(s->ex);
    sbuf f;
    sbuf_init(&f);
    sbuf_printf(&f, "\"port\":%u,\"bind\":", (unsigned)s->port);
    sbuf_json_str(&f, s->cfg.bind);
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
    if (b->skipped[0]) {
        sbuf_add(&f, ",\"opencl_skipped\":");
        sbuf_json_str(&f, b->skipped);
    }
    log_event("info", "listening", sbuf_failed(&f) ? NULL : f.data);
    sbuf_free(&f);
}

int main(int argc, char **argv)
{
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
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    static rbd_server server;
    if (server_start(&server, &cfg, err, sizeof err)) {
        sbuf f;
        sbuf_init(&f);
        sbuf_add(&f, "\"detail\":");
        sbuf_json_str(&f, err);
        log_event("error", "cannot start", f.data);
        sbuf_free(&f);
        return 1;
    }
    log_listening(&server);

    sigdelset(&set, SIGPIPE);
    int sig = 0;
    while (sigwait(&set, &sig) != 0)
        ;
    char fields[64];
    snprintf(fields, sizeof fields, "\"signal\":\"%s\"",
             sig == SIGTERM ? "SIGTERM" : "SIGINT");
    log_event("info", "shutting down", fields);
    server_stop(&server);
    return 0;
}
