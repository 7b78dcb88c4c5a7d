/*
 * listener.h - the listening socket and the thread that accepts on it,
 * handing each connection to a libmicrohttpd daemon started with
 * MHD_USE_NO_LISTEN_SOCKET, and the admission of connections (how many in
 * all and per client address).
 *
 * Why not let libmicrohttpd accept: in 0.9.75 every thread of the pool
 * watches the one listening socket and the first to wake accepts up to 11
 * connections in a row, so a client that opens its connections together
 * (wrk, a game server's connection pool) lands on one I/O thread while the
 * others idle; that thread alone then caps the server (measured in make
 * load: 16 connections split 16/0 between two I/O threads). Connections
 * handed over with MHD_add_connection go to the pool thread numbered
 * (socket % pool size), and sockets are numbered in order, so a burst
 * spreads evenly; a connection that closes frees a number of its own
 * thread, so the spread stays even as connections come and go.
 *
 * Why the listener counts connections and libmicrohttpd's own limit must
 * never be reached: in 0.9.75 a connection handed over while its I/O
 * thread is at that thread's limit (the daemon's limit divided among the
 * pool) leaves the thread's cleanup mutex locked (new_connection_process_,
 * fixed only in 1.0.0): both I/O threads then block for good and
 * MHD_stop_daemon hangs. libmicrohttpd counts a connection only when its
 * I/O thread takes it in, after the hand-over, so its count cannot guard
 * a burst. The listener counts before the hand-over (conn_gate.h) and
 * libmicrohttpd's callback MHD_CONNECTION_NOTIFY_CLOSED gives the count
 * back; the daemon is started with listener_mhd_limit(), at which no one
 * thread can arrive even if every connection lands on it. A connection
 * over the limits is refused at once: it gets the refusal bytes, if any,
 * and is closed, so that it neither holds a slot nor waits unanswered.
 */
#ifndef RBD_LISTENER_H
#define RBD_LISTENER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

typedef struct rbd_listener rbd_listener;

typedef struct rbd_listener_limits {
    unsigned max_connections;  /* >= 1: open connections in all */
    unsigned max_per_address;  /* 0: no limit per client address */
    /* Written (best effort, without blocking) to a refused connection
     * before it is closed: a whole HTTP answer, typically a 503. NULL:
     * the connection is closed without a word. Borrowed until
     * listener_destroy. */
    const char *refusal;
    size_t refusal_len;
} rbd_listener_limits;

/* Binds addr (port 0: an ephemeral one) and listens with the given
 * backlog. Returns NULL with errno set (EADDRINUSE, EACCES, ENOMEM...). */
rbd_listener *listener_open(const struct sockaddr *addr, socklen_t addr_len,
                            int backlog, const rbd_listener_limits *limits);

/* The port bound, in host order. */
uint16_t listener_port(const rbd_listener *l);

/* The MHD_OPTION_CONNECTION_LIMIT to start the daemon with, for an I/O
 * thread pool of pool_size (0 or 1: no pool): every thread's share
 * exceeds max_connections, so no thread reaches it. */
unsigned listener_mhd_limit(const rbd_listener *l, unsigned pool_size);

/* The daemon's MHD_OPTION_NOTIFY_CONNECTION callback, with the listener
 * as its argument: gives back a closed connection's count. Mandatory. */
void listener_notify(void *cls, struct MHD_Connection *c,
                     void **socket_context,
                     enum MHD_ConnectionNotificationCode code);

/* A second taker of the daemon's connection notifications (libmicrohttpd
 * has one MHD_OPTION_NOTIFY_CONNECTION, and listener_notify is it):
 * hook gets STARTED and CLOSED with listener_notify's arguments, CLOSED
 * before the listener gives the count back. Set it before the daemon
 * starts; NULL: none. */
void listener_set_hook(rbd_listener *l, MHD_NotifyConnectionCallback hook,
                       void *cls);

/* Starts accepting: every connection within the limits is passed to
 * MHD_add_connection(d), which applies the daemon's accept policy. An
 * accept error other than a client's own (ECONNABORTED and the like) is
 * passed to on_error, if given, at most once a second, and the thread
 * pauses 10 ms so that running out of descriptors does not spin. Returns
 * 0, or an errno value when the thread cannot start. */
int listener_start(rbd_listener *l, struct MHD_Daemon *d,
                   void (*on_error)(void *cls, int err), void *cls);

/* Connections handed over and not yet closed by the daemon. */
unsigned listener_connections(rbd_listener *l);

/* Connections refused since the start: over max_connections, over
 * max_per_address. */
void listener_refused(rbd_listener *l, uint64_t *full, uint64_t *per_address);

/* Stops accepting and closes the socket: from here a new connection is
 * refused by the kernel. Connections already handed over are the
 * daemon's, and the counts stay valid. Safe to call on a listener never
 * started, and twice. */
void listener_close(rbd_listener *l);

/* Frees l; call after MHD_stop_daemon (the daemon's callback uses l).
 * NULL is ignored. */
void listener_destroy(rbd_listener *l);

#endif
