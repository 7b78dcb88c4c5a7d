/*
 * listener.c - rayboxd's own accept loop (see listener.h for why).
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "listener.h"

struct rbd_listener {
    int fd;
    uint16_t port;
    pthread_t thread;
    int started;
    _Atomic int stopping;
    struct MHD_Daemon *daemon;
    unsigned max_connections;
    void (*on_error)(void *cls, int err);
    void *cls;
};

rbd_listener *listener_open(const struct sockaddr *addr, socklen_t addr_len,
                            int backlog)
{
    rbd_listener *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->fd < 0)
        goto fail;
    int one = 1;
    setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (addr->sa_family == AF_INET6) /* the address given, not also v4 */
        setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(l->fd, addr, addr_len) || listen(l->fd, backlog))
        goto fail;
    struct sockaddr_storage bound;
    socklen_t len = sizeof bound;
    if (getsockname(l->fd, (struct sockaddr *)&bound, &len))
        goto fail;
    l->port = ntohs(bound.ss_family == AF_INET6
                        ? ((struct sockaddr_in6 *)&bound)->sin6_port
                        : ((struct sockaddr_in *)&bound)->sin_port);
    return l;
fail:;
    int err = errno;
    if (l->fd >= 0)
        close(l->fd);
    free(l);
    errno = err;
    return NULL;
}

uint16_t listener_port(const rbd_listener *l)
{
    return l->port;
}

/* Errors accept(2) reports for one client's connection (Linux passes
 * pending network errors on): skip that client, go on at once. */
static int client_error(int err)
{
    switch (err) {
    case EINTR:
    case EAGAIN:
    case ECONNABORTED:
    case EPROTO:
    case EPERM: /* a firewall rule */
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
        return 1;
    default:
        return 0;
    }
}

static void pause_ms(long ms)
{
    nanosleep(&(struct timespec){0, ms * 1000 * 1000}, NULL);
}

static int at_limit(const rbd_listener *l)
{
    if (!l->max_connections)
        return 0;
    const union MHD_DaemonInfo *i =
        MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return i && i->num_connections >= l->max_connections;
}

static void *accept_loop(void *arg)
{
    rbd_listener *l = arg;
    struct timespec last_report = {0, 0};
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof peer;
        int c = accept4(l->fd, (struct sockaddr *)&peer, &len,
                        SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (atomic_load(&l->stopping)) {
            if (c >= 0)
                close(c);
            return NULL;
        }
        if (c >= 0) {
            /* At the limit, this client waits (its request, if sent,
             * stays in the socket) until a connection closes, and the
             * ones after it wait in the backlog. The count is checked
             * after accept because the daemon counts a connection only
             * once its I/O thread has taken it in. */
            while (at_limit(l) && !atomic_load(&l->stopping))
                pause_ms(10);
            if (atomic_load(&l->stopping)) {
                close(c);
                return NULL;
            }
            /* On MHD_NO (limit, policy, memory) the daemon closed c. */
            MHD_add_connection(l->daemon, c, (struct sockaddr *)&peer, len);
            continue;
        }
        int err = errno;
        if (client_error(err))
            continue;
        /* EMFILE, ENFILE, ENOBUFS, ENOMEM: the clients wait in the
         * backlog until descriptors or memory are free again. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (l->on_error && now.tv_sec != last_report.tv_sec) {
            l->on_error(l->cls, err);
            last_report = now;
        }
        pause_ms(10);
    }
}

int listener_start(rbd_listener *l, struct MHD_Daemon *d,
                   unsigned max_connections,
                   void (*on_error)(void *cls, int err), void *cls)
{
    l->daemon = d;
    l->max_connections = max_connections;
    l->on_error = on_error;
    l->cls = cls;
    int rc = pthread_create(&l->thread, NULL, accept_loop, l);
    l->started = rc == 0;
    return rc;
}

void listener_close(rbd_listener *l)
{
    if (!l)
        return;
    atomic_store(&l->stopping, 1);
    /* On Linux, shutdown() wakes a thread blocked in accept() on this
     * socket (libmicrohttpd stops its own listeners the same way). */
    shutdown(l->fd, SHUT_RDWR);
    if (l->started)
        pthread_join(l->thread, NULL);
    close(l->fd);
    free(l);
}
