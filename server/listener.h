/*
 * listener.h - the listening socket and the thread that accepts on it,
 * handing each connection to a libmicrohttpd daemon started with
 * MHD_USE_NO_LISTEN_SOCKET.
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
 */
#ifndef RBD_LISTENER_H
#define RBD_LISTENER_H

#include <stdint.h>
#include <sys/socket.h>

struct MHD_Daemon;
typedef struct rbd_listener rbd_listener;

/* Binds addr (port 0: an ephemeral one) and listens with the given
 * backlog. Returns NULL with errno set (EADDRINUSE, EACCES, ENOMEM...). */
rbd_listener *listener_open(const struct sockaddr *addr, socklen_t addr_len,
                            int backlog);

/* The port bound, in host order. */
uint16_t listener_port(const rbd_listener *l);

/* Starts accepting: every connection is passed to MHD_add_connection(d),
 * which applies the daemon's connection limit and accept policy. While d
 * has max_connections open (0: no check here), the client just accepted is
 * held and the next ones wait in the backlog, as with libmicrohttpd's own
 * accept loop, instead of being accepted only to be closed. An accept error other than
 * a client's own (ECONNABORTED and the like) is passed to on_error, if
 * given, at most once a second, and the thread pauses 10 ms so that
 * running out of descriptors does not spin. Returns 0, or an errno value
 * when the thread cannot start. */
int listener_start(rbd_listener *l, struct MHD_Daemon *d,
                   unsigned max_connections,
                   void (*on_error)(void *cls, int err), void *cls);

/* Stops accepting and closes the socket: from here a new connection is
 * refused. Connections already handed over are the daemon's. Safe to call
 * on a listener never started; frees l. */
void listener_close(rbd_listener *l);

#endif
