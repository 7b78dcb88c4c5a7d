/*
 * conn_gate.h - admission of connections: how many are open in all and
 * from each client address, and whether one more may come in.
 *
 * The listener asks before it hands a connection to libmicrohttpd and
 * tells it when libmicrohttpd has closed one, so the count is exact at
 * every moment (libmicrohttpd's own count lags behind the hand-over; see
 * listener.h for why that matters).
 *
 * Threads: every call may come from any thread (one mutex inside).
 */
#ifndef RBD_CONN_GATE_H
#define RBD_CONN_GATE_H

#include <stdint.h>
#include <sys/socket.h>

typedef struct rbd_conn_gate rbd_conn_gate;

typedef enum rbd_gate_verdict {
    RBD_GATE_ADMIT = 0,
    RBD_GATE_FULL,         /* max_total open */
    RBD_GATE_ADDRESS_FULL, /* max_per_address open from this address */
    RBD_GATE_NO_MEMORY,    /* cannot happen with a table sized at create */
} rbd_gate_verdict;

/* max_total >= 1; max_per_address 0 = no per-address limit. Addresses
 * are compared whole (an IPv4-mapped IPv6 address is its IPv4 address);
 * other families (Unix sockets) count towards the total only. Returns
 * NULL when out of memory. */
rbd_conn_gate *conn_gate_create(unsigned max_total, unsigned max_per_address);

/* NULL is ignored. */
void conn_gate_destroy(rbd_conn_gate *g);

/* Counts the connection in and returns RBD_GATE_ADMIT, or counts nothing
 * and says why not. Every admitted connection is given back once with
 * conn_gate_leave and the same address. */
rbd_gate_verdict conn_gate_enter(rbd_conn_gate *g, const struct sockaddr *a,
                                 socklen_t len);
void conn_gate_leave(rbd_conn_gate *g, const struct sockaddr *a,
                     socklen_t len);

/* Connections admitted and not yet left. */
unsigned conn_gate_open(rbd_conn_gate *g);

/* Refusals since create: full, per address. */
void conn_gate_refused(rbd_conn_gate *g, uint64_t *full,
                       uint64_t *address_full);

#endif
