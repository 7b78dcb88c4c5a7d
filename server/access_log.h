/*
 * access_log.h - one JSON object per line on stderr: a line per request
 * (unless quiet) and lines for events (listening, shutting down, errors).
 * Each line is written with a single write(2), so lines from different
 * threads never interleave.
 */
#ifndef RBD_ACCESS_LOG_H
#define RBD_ACCESS_LOG_H

#include <stdint.h>

typedef struct rbd_log_request {
    const char *request_id;
    const char *method;
    const char *path;
    const char *route;   /* template */
    int status;          /* 0: no response was sent */
    const char *outcome; /* NULL, or why the connection ended early */
    uint64_t rays, boxes;
    uint64_t bytes_in, bytes_out;
    double queue_ms, run_ms, duration_ms;
    int inlined;         /* answered on the I/O thread: "inline":true */
    const char *scene;   /* NULL or the scene id */
    const char *error;   /* NULL or the problem's detail */
} rbd_log_request;

void access_log_request(const rbd_log_request *r);

/* {"ts":..,"level":level,"msg":msg<,fields>}: fields is NULL or the
 * inside of a JSON object ("\"port\":8080"), already encoded. */
void log_event(const char *level, const char *msg, const char *fields);

#endif
