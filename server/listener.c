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

#include "conn_gate.h"
#include "listener.h"

struct rbd_listener {
    int fd;
    uint16_t port;
    pthread_t thread;
    int started, closed;
    _Atomic int stopping;
    struct MHD_Daemon *daemon;
    rbd_listener_limits limits;
    rbd_conn_gate *gate;
    void (*on_error)(void *cls, int err);
    void *cls;
    MHD_NotifyConnectionCallback hook;
    void *hook_cls;
};

rbd_listener *listener_open(const struct sockaddr *addr, socklen_t addr_len,
                            int backlog, const rbd_listener_limits *limits)
{
    rbd_listener *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->fd = -1;
    l->limits = *limits;
    if (!l->limits.max_connections)
        l->limits.max_connections = 1;
    l->gate = conn_gate_create(l->limits.max_connections,
                               l->limits.max_per_address);
    if (!l->gate) {
        errno = ENOMEM;
        goto fail;
    }
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
    conn_gate_destroy(l->gate);
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

unsigned listener_mhd_limit(const rbd_listener *l, unsigned pool_size)
{
    /* A thread's share is limit / pool (rounded down); each share is at
     * least max_connections + 2: one more for a connection the thread is
     * closing (the listener's count is given back just before the
     * thread's own), one of margin. */
    unsigned pool = pool_size > 1 ? pool_size : 1;
    return pool * (l->limits.max_connections + 2);
}

void listener_notify(void *cls, struct MHD_Connection *c,
                     void **socket_context,
                     enum MHD_ConnectionNotificationCode code)
{
    rbd_listener *l = cls;
    if (l->hook)
        l->hook(l->hook_cls, c, socket_context, code);
    if (code != MHD_CONNECTION_NOTIFY_CLOSED)
        return;
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *a = i ? i->client_addr : NULL;
    socklen_t len = 0;
    if (a)
        len = a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                       : sizeof(struct sockaddr_in);
    conn_gate_leave(l->gate, a, len);
}

/* A connection over the limits: the refusal, if it fits the empty send
 * buffer, then close. What the client sent is read first where it has
 * arrived, so that the close is a FIN, not a reset that could drop the
 * refusal before the client reads it. */
static void refuse(const rbd_listener *l, int c)
{
    if (l->limits.refusal) {
        char scratch[4096];
        while (recv(c, scratch, sizeof scratch, MSG_DONTWAIT) > 0)
            ;
        ssize_t n = send(c, l->limits.refusal, l->limits.refusal_len,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n; /* best effort: the client may be gone already */
        shutdown(c, SHUT_WR);
    }
    close(c);
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
            const struct sockaddr *a = (const struct sockaddr *)&peer;
            if (conn_gate_enter(l->gate, a, len) != RBD_GATE_ADMIT) {
                refuse(l, c);
                continue;
            }
            /* On MHD_NO (accept policy, memory) the daemon closed c
             * without a notification: the count is given back here. A
             * connection that fails later in its I/O thread is notified,
             * except when its memory pool cannot be allocated, which
             * leaves one slot counted (a limit a little lower, never a
             * hang). */
            if (MHD_add_connection(l->daemon, c, a, len) != MHD_YES)
                conn_gate_leave(l->gate, a, len);
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

void listener_set_hook(rbd_listener *l, MHD_NotifyConnectionCallback hook,
                       void *cls)
{
    l->hook = hook;
    l->hook_cls = cls;
}

int listener_start(rbd_listener *l, struct MHD_Daemon *d,
                   void (*on_error)(void *cls, int err), void *cls)
{
    l->daemon = d;
    l->on_error = on_error;
    l->cls = cls;
    int rc = pthread_create(&l->thread, NULL, accept_loop, l);
    l->started = rc == 0;
    return rc;
}

unsigned listener_connections(rbd_listener *l)
{
    return conn_gate_open(l->gate);
}

void listener_refused(rbd_listener *l, uint64_t *full, uint64_t *per_address)
{
    conn_gate_refused(l->gate, full, per_address);
}

void listener_close(rbd_listener *l)
{
    if (!l || l->closed)
        return;
    l->closed = 1;
    atomic_store(&l->stopping, 1);
    /* On Linux, shutdown() wakes a thread blocked in accept() on this
     * socket (libmicrohttpd stops its own listeners the same way). */
    shutdown(l->fd, SHUT_RDWR);
    if (l->started)
        pthread_join(l->thread, NULL);
    close(l->fd);
}

void listener_destroy(rbd_listener *l)
{
    if (!l)
        return;
    listener_close(l);
    conn_gate_destroy(l->gate);
    free(l);
}
