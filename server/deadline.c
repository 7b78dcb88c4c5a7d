/* deadline.c - see deadline.h. */
#include "deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

typedef enum phase {
    WAIT_HEADERS, /* the headers deadline runs */
    WAIT_BODY,    /* the body deadline runs */
    BUSY,         /* worked on or answered: no deadline */
    CUT           /* cut off by the watcher */
} phase;

typedef struct tracked {
    struct tracked *prev, *next;
    struct rbd_deadlines *d;
    int fd;
    phase phase;
    double since;      /* ms: start of the phase */
    uint64_t received; /* WAIT_BODY: body bytes so far */
    const char *why;   /* CUT: the reason */
    atomic_int gone;   /* BUSY: the client closed its end (or reset) */
} tracked;

struct rbd_deadlines {
    rbd_deadline_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    int stopping;
    int draining;      /* idle connections are closed */
    tracked *head;
    uint64_t cut_headers, cut_body;
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Under the mutex: the moment t's current deadline passes, or a negative
 * value when it has none. */
static double due(const rbd_deadlines *d, const tracked *t)
{
    double grace = 1e3 * d->cfg.header_timeout_s;
    if (t->phase == WAIT_HEADERS)
        return t->since + grace;
    if (t->phase == WAIT_BODY && d->cfg.min_body_rate)
        return t->since + grace +
               1e3 * (double)t->received / (double)d->cfg.min_body_rate;
    return -1;
}

/* Under the mutex: the 408 and the shutdown (deadline.h says why this is
 * safe). send and shutdown never block. */
static void cut(rbd_deadlines *d, tracked *t)
{
    int body = t->phase == WAIT_BODY;
    const char *a = body ? d->cfg.body_answer : d->cfg.header_answer;
    size_t n = body ? d->cfg.body_answer_len : d->cfg.header_answer_len;
    t->why = body ? "body_too_slow" : "header_timeout";
    t->phase = CUT;
    if (body)
        d->cut_body++;
    else
        d->cut_headers++;
    if (a) {
        ssize_t sent = send(t->fd, a, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)sent; /* best effort: the close is what matters */
    }
    shutdown(t->fd, SHUT_RDWR);
}

/* Under the mutex, a connection being worked on: has the client closed
 * its end? A peek never takes bytes from libmicrohttpd (a pipelined next
 * request stays); end of stream or a reset means nobody will read the
 * answer, and the query may stop (deadlines_client_gone). */
static void look_for_close(tracked *t)
{
    char c;
    ssize_t n = recv(t->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != EINTR))
        atomic_store(&t->gone, 1);
}

/* Under the mutex, while draining: a connection between requests with
 * nothing of a next one in its socket is closed (shutdown; libmicrohttpd
 * then closes it), so that an idle keep-alive connection does not hold
 * the drain. */
static void close_if_idle(tracked *t)
{
    char c;
    ssize_t n = recv(t->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0)
        return; /* a request is arriving: it is answered (Connection: close) */
    t->phase = CUT;
    t->why = "closed_at_drain";
    shutdown(t->fd, SHUT_RDWR);
}

static void *watch(void *arg)
{
    rbd_deadlines *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->stopping) {
        double now = now_ms();
        for (tracked *t = d->head; t; t = t->next) {
            double at = due(d, t);
            if (at >= 0 && now > at)
                cut(d, t);
            else if (t->phase == BUSY && !atomic_load(&t->gone))
                look_for_close(t);
            else if (t->phase == WAIT_HEADERS && d->draining)
                close_if_idle(t);
        }
        /* Ten looks a second: deadlines are whole seconds. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&d->wake, &d->mu, &until);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

rbd_deadlines *deadlines_create(const rbd_deadline_config *cfg)
{
    rbd_deadlines *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->cfg = *cfg;
    if (!d->cfg.header_timeout_s)
        d->cfg.header_timeout_s = 1;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->wake, NULL);
    if (pthread_create(&d->thread, NULL, watch, d)) {
        pthread_cond_destroy(&d->wake);
        pthread_mutex_destroy(&d->mu);
        free(d);
        return NULL;
    }
    return d;
}

void deadlines_destroy(rbd_deadlines *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    d->stopping = 1;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    /* Nothing is left after MHD_stop_daemon; free what is, anyway. */
    for (tracked *t = d->head, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

void deadlines_notify(void *cls, struct MHD_Connection *c,
                      void **socket_context,
                      enum MHD_ConnectionNotificationCode code)
{
    rbd_deadlines *d = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        tracked *t = i ? calloc(1, sizeof *t) : NULL;
        *socket_context = t;
        if (!t)
            return; /* no memory: this one connection goes unwatched */
        t->d = d;
        t->fd = i->connect_fd;
        t->phase = WAIT_HEADERS;
        t->since = now_ms();
        pthread_mutex_lock(&d->mu);
        t->next = d->head;
        if (d->head)
            d->head->prev = t;
        d->head = t;
        pthread_mutex_unlock(&d->mu);
        return;
    }
    tracked *t = *socket_context;
    if (code != MHD_CONNECTION_NOTIFY_CLOSED || !t)
        return;
    /* Before libmicrohttpd closes the socket (daemon.c calls this
     * first), so the watcher never touches a descriptor reused since. */
    pthread_mutex_lock(&d->mu);
    if (t->prev)
        t->prev->next = t->next;
    else
        d->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    pthread_mutex_unlock(&d->mu);
    *socket_context = NULL;
    free(t);
}

/* The connection's record and the deadlines it belongs to. */
static tracked *of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* Moves t to phase p, the phase's clock restarted if asked or if the
 * phase changes; -1 if t was cut off (then nothing changes). */
static int move(tracked *t, phase p, uint64_t received, int restart)
{
    if (!t)
        return 0; /* untracked (no memory at its start) */
    rbd_deadlines *d = t->d;
    pthread_mutex_lock(&d->mu);
    int was_cut = t->phase == CUT;
    if (!was_cut) {
        if (restart || t->phase != p)
            t->since = now_ms();
        t->phase = p;
        t->received = received;
    }
    pthread_mutex_unlock(&d->mu);
    return was_cut ? -1 : 0;
}

void deadlines_drain(rbd_deadlines *d)
{
    pthread_mutex_lock(&d->mu);
    d->draining = 1;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
}

int deadlines_client_gone(struct MHD_Connection *c)
{
    tracked *t = of(c);
    return t && atomic_load(&t->gone);
}

void deadlines_cut_counts(rbd_deadlines *d, uint64_t *headers,
                          uint64_t *body)
{
    pthread_mutex_lock(&d->mu);
    *headers = d->cut_headers;
    *body = d->cut_body;
    pthread_mutex_unlock(&d->mu);
}

int deadlines_headers_done(struct MHD_Connection *c, int body_follows)
{
    return move(of(c), body_follows ? WAIT_BODY : BUSY, 0, 1);
}

int deadlines_body(struct MHD_Connection *c, uint64_t received)
{
    return move(of(c), WAIT_BODY, received, 0);
}

int deadlines_request_done(struct MHD_Connection *c)
{
    return move(of(c), BUSY, 0, 0);
}

const char *deadlines_request_end(struct MHD_Connection *c)
{
    tracked *t = of(c);
    if (!t)
        return NULL;
    pthread_mutex_lock(&t->d->mu);
    const char *why = t->phase == CUT ? t->why : NULL;
    if (!why) {
        t->phase = WAIT_HEADERS;
        t->since = now_ms();
    }
    pthread_mutex_unlock(&t->d->mu);
    return why;
}
