/* http_util.h - helpers of the HTTP suites: rayboxd as a child process on
 * an ephemeral port, requests through libcurl (one handle per thread),
 * raw sockets for what curl will not send, and answer comparisons. */
#ifndef RB_HTTP_UTIL_H
#define RB_HTTP_UTIL_H

#include <curl/curl.h>
#include <stddef.h>
#include <sys/types.h>

#include "raybox.h"

typedef struct rbt_server {
    pid_t pid;
    int port;
    char log_path[128];
    char base[64]; /* "http://127.0.0.1:PORT" */
} rbt_server;

/* Starts RAYBOXD (a compile definition) with "--port 0 --backend cpu"
 * and the extra arguments (NULL-terminated), stderr to a log file, and
 * waits for its "listening" line. Fails the test if it does not come. */
void rbt_server_start(rbt_server *s, const char *const *args);
/* A suite's fixture: curl initialised, rayboxd started with args, and
 * *oracle a one-thread CPU context for the in-process answers. */
void rbt_fixture_start(rbt_server *s, const char *const *args,
                       rb_context **oracle);
/* Its end: the oracle freed, rayboxd stopped (exit 0 asserted), its log
 * removed, curl cleaned up. */
void rbt_fixture_stop(rbt_server *s, rb_context *oracle);
/* SIGTERM and wait: returns the exit status (-1 if it did not exit
 * normally). */
int rbt_server_stop(rbt_server *s);
/* SIGTERM and wait up to ms: the exit status, -1 if it did not exit
 * normally, -2 if it had not exited by then (it is killed). */
int rbt_server_stop_within(rbt_server *s, int ms);
/* SIGKILL and wait (for servers left busy on purpose). */
void rbt_server_kill(rbt_server *s);
/* The log so far (malloc'ed, NUL-terminated). */
char *rbt_server_log(const rbt_server *s);

typedef struct rbt_resp {
    long status;        /* 0: the transfer failed */
    char *body;         /* NUL-terminated, len bytes before it */
    size_t len;
    char headers[8192]; /* raw header block of the last response */
} rbt_resp;

/* One request. h may be NULL (a fresh handle); content_type NULL sends
 * none; body NULL with len 0 sends no body; extra headers end with NULL.
 * Returns 0, or -1 when the transfer failed (resp->status 0). */
int rbt_http(CURL *h, const char *method, const char *url,
             const char *content_type, const void *body, size_t len,
             const char *accept, const char *const *extra, rbt_resp *resp);
/* The same with a chunked body sent in pieces of `piece` bytes. */
int rbt_http_chunked(CURL *h, const char *url, const char *content_type,
                     const void *body, size_t len, size_t piece,
                     rbt_resp *resp);
/* GET s's base URL + path (e.g. "/v1/health"); rbt_http's return. */
int rbt_get(CURL *h, const rbt_server *s, const char *path, rbt_resp *resp);
void rbt_resp_free(rbt_resp *r);
/* A header's value (case-insensitive name) copied into buf; NULL if
 * absent. */
const char *rbt_header(const rbt_resp *r, const char *name, char *buf,
                       size_t cap);
/* The body without its "meta" member (JSON answers end with it). */
size_t rbt_strip_meta(const char *body, size_t len);

/* Raw TCP: sends req, then (shut_wr) closes the sending side, and reads
 * until the server closes or timeout_ms pass. Returns the bytes read
 * (NUL-terminated in out); *closed says whether the server closed. */
size_t rbt_raw(int port, const void *req, size_t len, int shut_wr,
               char *out, size_t cap, int timeout_ms, int *closed);

/* The value of a metric line "name value" in a /metrics page; -1 if
 * absent. */
double rbt_metric(const char *page, const char *name);

/* GETs the /metrics page at url into *out (200 asserted) until it holds
 * `text`, for up to 2 s: a request is counted when libmicrohttpd reports
 * it complete, which may come just after the client has its answer.
 * Returns whether the text came; *out is the last page either way. */
int rbt_metrics_with(const char *url, const char *text, rbt_resp *out);

/* A file's contents (malloc'ed, NUL-terminated). */
char *rbt_read_file(const char *path, size_t *len);

/* The JSON body of a count query of `rays` rays that each hit all of
 * `boxes` identical boxes. malloc'ed; *len its length. The heavy one:
 * RBT_HEAVY_RAYS x RBT_HEAVY_BOXES (4e9 tests: seconds on the
 * development machine, far more under the sanitizers). */
enum { RBT_HEAVY_RAYS = 200000, RBT_HEAVY_BOXES = 20000 };
char *rbt_count_body(int rays, int boxes, size_t *len);

/* rbt_metric of s's /metrics page (-1 if absent). */
double rbt_server_metric(const rbt_server *s, const char *name);

#endif
