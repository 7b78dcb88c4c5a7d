/*
 * allowed_hosts.h - --allowed-hosts: the names a request's Host header
 * may carry, against DNS rebinding (a web page whose name an attacker
 * points at 127.0.0.1 makes the victim's browser send requests with
 * that name as Host; they are refused).
 *
 * The list: comma-separated host names or address literals, each with
 * an optional port ("api.example.com", "10.0.0.5:8443", "[::1]",
 * "::1"); names are compared case-insensitively and without a trailing
 * dot; an entry with a port matches only a Host with that port, one
 * without a port matches any port. "*" matches every Host. An empty list
 * means: bound to a loopback address, localhost, 127.0.0.1 and ::1 (any
 * port); bound elsewhere, any Host.
 *
 * A request whose Host is not in the list is answered 421 Misdirected
 * Request (problem+json). HTTP/1.0 requests without Host pass: browsers
 * always send one, and strict.h already refuses HTTP/1.1 without.
 *
 * Threads: hosts_check from any thread (the list never changes).
 */
#ifndef RBD_ALLOWED_HOSTS_H
#define RBD_ALLOWED_HOSTS_H

#include <stddef.h>

typedef struct rbd_hosts rbd_hosts;

/* The list for a server bound to a loopback address (loopback != 0) or
 * not. *out NULL means any Host passes. Returns 0, or -1 with why (an
 * empty entry, a bad port, out of memory). */
int hosts_parse(const char *list, int loopback, rbd_hosts **out, char *why,
                size_t why_len);

/* 0 when host (the Host header's value, NULL if none) passes h (NULL:
 * all pass), else 421 with a one-line detail. */
int hosts_check(const rbd_hosts *h, const char *host, char *detail,
                size_t cap);

void hosts_destroy(rbd_hosts *h);

#endif
