/*
 * strict.h - what every request must pass before anything is decided
 * from it (RFC 9110/9112 where libmicrohttpd 0.9.75 is lenient): its
 * framing (Content-Length, Transfer-Encoding), Host, the request target
 * as bytes, and the headers whose values answers echo. A request that
 * fails is answered 400 (501 for a transfer coding we do not implement)
 * and its connection closed: a request whose length is in doubt leaves
 * nothing trustworthy after it on the connection.
 *
 * Called on the I/O thread, inside the access handler.
 */
#ifndef RBD_STRICT_H
#define RBD_STRICT_H

#include <microhttpd.h>
#include <stddef.h>

/* The request's headers: more than one Content-Length (even equal ones),
 * one that is not all digits, a Transfer-Encoding other than exactly
 * "chunked" (the length cannot be known: 400; codings before a final
 * chunked: 501), both, no Host on HTTP/1.1 or more than one Host, and an
 * Accept or Content-Type with bytes outside printable ASCII. Returns 0,
 * or the status with a one-line detail in detail (cap bytes). */
int strict_headers(struct MHD_Connection *c, const char *version,
                   char *detail, size_t cap);

/* The request target as the handler got it (url), raw_len the length of
 * the target libmicrohttpd logged before decoding it (strlen of the URI
 * log callback's uri) and version the handler's version argument. A NUL
 * byte sent raw in the target cuts url short where libmicrohttpd sees it
 * whole: 0.9.75 keeps the target and the version next to each other in
 * its read buffer ("<target>\0<version>"), so the target had a NUL of its
 * own exactly when url + raw_len + 1 is not version. Also refused: bytes
 * that RFC 3986 does not allow unencoded (controls, space, non-ASCII).
 * Returns 0 or 400 with detail. */
int strict_target(const char *url, size_t raw_len, const char *version,
                  char *detail, size_t cap);

/* MHD_OPTION_UNESCAPE_CALLBACK: decodes %XX only where it stands for an
 * unreserved character (A-Z a-z 0-9 - . _ ~, which RFC 3986 section 6.2.2.2
 * makes equal to the character itself) and keeps every other escape as
 * sent. So the path the routes see never holds a NUL, a '/' or a byte the
 * client did not write as such: "/v1/scenes/<id>%00x" or
 * "/v1/scenes/<id>%2Fintersect" name no scene (404) instead of <id> or
 * its intersect route. Query strings get the same treatment (rayboxd
 * reads none). Returns the new length of s. */
size_t strict_unescape(void *cls, struct MHD_Connection *c, char *s);

#endif
