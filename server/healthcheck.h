/*
 * healthcheck.h - `rayboxd --healthcheck URL`: one plain-HTTP GET, for a
 * container's HEALTHCHECK, which then needs no curl or wget in the image.
 */
#ifndef RBD_HEALTHCHECK_H
#define RBD_HEALTHCHECK_H

/* GETs url (http://HOST[:PORT][/PATH]; HOST an IPv4 literal, a bracketed
 * IPv6 literal or localhost, as --bind takes; PORT 80 when absent, PATH
 * /v1/health) with Connection: close, within timeout_ms in all. Returns 0
 * when the answer's status is 200 (its status line and body go to stdout),
 * 1 otherwise: a refused or timed-out connection, another status, a bad or
 * https URL (one line on stderr says which). Docker's HEALTHCHECK reads 0
 * as healthy and 1 as unhealthy (2 is reserved there, so never used). */
int rbd_healthcheck(const char *url, int timeout_ms);

#endif
