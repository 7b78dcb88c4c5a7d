/*
 * deadline.h - deadlines that bound slow clients (slowloris): a request's
 * headers must be complete within --header-timeout, and its body must
 * keep up --min-body-rate, however the bytes trickle in.
 *
 * Why a thread of our own: libmicrohttpd 0.9.75's only clock is the idle
 * timeout (--connection-timeout, also MHD_CONNECTION_OPTION_TIMEOUT per
 * connection), measured from the connection's last activity, and every
 * byte received is activity (MHD_update_last_activity_ in connection.c):
 * a client sending one byte a second is never idle and held its slot for
 * as long as it liked. And while the headers arrive, the access handler
 * is not called at all. So every connection is tracked from
 * MHD_CONNECTION_NOTIFY_STARTED to NOTIFY_CLOSED (listener.c's callback
 * passes them on), the handler says when a request's headers are in, how
 * much of its body came and when it is complete, and one thread looks at
 * the clocks ten times a second. A connection past its deadline gets a
 * ready-made 408 problem+json, written on its socket without blocking (at
 * that moment libmicrohttpd writes nothing on it: the handler has not
 * answered), and shutdown(2) in both directions: libmicrohttpd then reads
 * the end of the stream and closes the connection as a client abort,
 * through its own cleanup (completion callback, NOTIFY_CLOSED).
 *
 * The deadlines:
 *   - headers: header_timeout_s from the connection's start, or from the
 *     end of the previous request on a keep-alive connection (so an idle
 *     keep-alive connection is closed after header_timeout_s too);
 *   - body: header_timeout_s after the headers (a grace period) plus one
 *     second for every min_body_rate bytes received; 0 = no body deadline;
 *   - none while a request is being worked on or its answer sent (the
 *     idle timeout still applies to a client that stops reading).
 *
 * Threads: deadline_notify is called on libmicrohttpd's threads, the
 * request calls on the I/O thread inside the access handler; one mutex.
 */
#ifndef RBD_DEADLINE_H
#define RBD_DEADLINE_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rbd_deadlines rbd_deadlines;

/* The answers a connection gets when cut off (a whole HTTP message each,
 * borrowed until deadlines_destroy). */
typedef struct rbd_deadline_config {
    unsigned header_timeout_s; /* >= 1 */
    uint64_t min_body_rate;    /* bytes/s; 0: no body deadline */
    const char *header_answer, *body_answer;
    size_t header_answer_len, body_answer_len;
} rbd_deadline_config;

/* Starts the watching thread. NULL when out of memory or threads. */
rbd_deadlines *deadlines_create(const rbd_deadline_config *cfg);

/* Stops the thread and frees; after MHD_stop_daemon (every connection has
 * been closed and untracked by then). NULL is ignored. */
void deadlines_destroy(rbd_deadlines *d);

/* A hook of listener_notify (listener.h): STARTED tracks the connection
 * (its headers deadline starts), CLOSED forgets it. Uses *socket_context. */
void deadlines_notify(void *cls, struct MHD_Connection *c,
                      void **socket_context,
                      enum MHD_ConnectionNotificationCode code);

/* From the access handler (I/O thread). Each returns -1 when the
 * connection was already cut off: the handler then returns MHD_NO and
 * answers nothing. */

/* The headers are in; the body deadline starts if body_follows, else the
 * connection has no deadline until the request ends. */
int deadlines_headers_done(struct MHD_Connection *c, int body_follows);
/* received: body bytes so far. */
int deadlines_body(struct MHD_Connection *c, uint64_t received);
/* The body is complete (or not to be read): no deadline until the end. */
int deadlines_request_done(struct MHD_Connection *c);

/* SIGTERM: from now on, connections between two requests are closed
 * (those with bytes of a next request waiting are left to be answered),
 * ten times a second, until the daemon stops. */
void deadlines_drain(rbd_deadlines *d);

/* While a request is worked on (after deadlines_request_done): whether
 * its client has closed its end of the connection or reset it, as the
 * watcher saw within the last ~100 ms. A client that only half-closes
 * (shutdown(SHUT_WR) after its request) looks the same: its query is
 * stopped too. Any thread. */
int deadlines_client_gone(struct MHD_Connection *c);

/* Connections cut off since the start: headers late, body too slow. */
void deadlines_cut_counts(rbd_deadlines *d, uint64_t *headers,
                          uint64_t *body);

/* From MHD_OPTION_NOTIFY_COMPLETED: the next request's headers deadline
 * starts now. Returns why the connection was cut off ("header_timeout",
 * "body_too_slow") if it was, else NULL. */
const char *deadlines_request_end(struct MHD_Connection *c);

#endif
