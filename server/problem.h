/*
 * problem.h - the one writer of error bodies: RFC 9457
 * application/problem+json, for the CLI and for every rayboxd route, so
 * that no handler writes error JSON by hand (STYLE: one place turns a
 * status into an HTTP error body).
 */
#ifndef RB_PROBLEM_H
#define RB_PROBLEM_H

#include <stddef.h>

/* A buffer of this size always holds a problem body: the detail (and, in
 * the worst case, the pointer) is cut short to fit. */
#define RB_PROBLEM_MAX 4096

/* The reason phrase of an HTTP status ("Unprocessable Content"); "Error"
 * for a status this service does not send. Never NULL. */
const char *rb_http_reason(int http_status);

/* The HTTP status that answers a libraybox status: RB_EINPUT and RB_EINVAL
 * 422, RB_ELIMIT 413, RB_ENOMEM and RB_EDEVMEM 503 (try later or smaller),
 * RB_ECANCELED 503 too (the server stopped it: a deadline, a drain), other
 * failures 500, RB_OK 200. */
int rb_http_status_of(int status);

/* Writes {"type":"about:blank","title":...,"status":...,"detail":...,
 * "pointer":...} into out (cap bytes, NUL-terminated) and returns its
 * length. detail may be NULL (omitted); pointer NULL omits the member, ""
 * names the whole document. Members come in that order, always. */
size_t rb_problem_write(char *out, size_t cap, int http_status,
                        const char *detail, const char *pointer);

#endif
