/*
 * request.h - the state of one HTTP request inside rayboxd, shared by the
 * MHD glue (http.c), the route handlers (handlers.c), the jobs that
 * workers run (jobs.c) and the response writer (respond.c).
 *
 * Life: created when libmicrohttpd has the request line (its URI log
 * callback), filled in on the first call of the access handler (headers), fed
 * the body on the I/O thread, then either answered at once or turned into
 * a job: the connection is suspended, a worker runs the job and fills
 * `reply`, resumes the connection, and the handler (I/O thread again)
 * queues the response built from `reply` (a small CPU query's job runs
 * on the I/O thread itself, which then queues the response at once:
 * handlers.c, --inline-max-tests). Freed in MHD's completion
 * callback, whatever happened.
 */
#ifndef RBD_REQUEST_H
#define RBD_REQUEST_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdint.h>

#include "binary_codec.h"
#include "executor.h"
#include "json_request.h"
#include "json_response.h"
#include "routes.h"
#include "scene_store.h"
#include "server.h"

#define RBD_REQUEST_ID_MAX 64

typedef enum rbd_body_kind { BODY_NONE, BODY_JSON, BODY_BINARY } rbd_body_kind;

typedef enum rbd_phase {
    PH_LINE,      /* request line seen (URI log callback), headers coming */
    PH_RECEIVING, /* headers seen, body arriving */
    PH_QUEUED,    /* suspended, a job is queued or running */
    PH_ANSWERED   /* a response was queued */
} rbd_phase;

/* What owns a successful query's results once the response exists: MHD
 * frees it through payload_free when the response is destroyed. */
typedef struct rbd_payload {
    rb_results res;               /* arrays owned */
    uint8_t header[RBB_HEADER_SIZE]; /* binary */
    struct MHD_IoVec iov[3];      /* binary: header and arrays, no copy */
    unsigned n_iov;               /* binary: 0 when copied into pre */
    char *pre;                    /* JSON: the part rendered by the worker;
                                     binary: a small answer, whole */
    size_t pre_len;
    rbj_writer w;                 /* JSON: the rest, rendered as sent */
} rbd_payload;

void payload_free(void *payload);

typedef enum rbd_out_kind {
    OUT_NONE,   /* no body (204) */
    OUT_BUFFER, /* body/len: a complete JSON body */
    OUT_PAYLOAD /* payload: a query's answer */
} rbd_out_kind;

typedef struct rbd_reply {
    int status;        /* 0 until decided */
    rbq_error err;     /* status >= 400 */
    rbd_out_kind kind;
    char *body;        /* OUT_BUFFER, malloc'ed */
    size_t len;
    rbd_payload *payload;
    int binary;        /* payload is binary (else JSON) */
    char location[32 + RBD_SCENE_ID_MAX];
    const char *content_type; /* OUT_BUFFER: NULL is JSON (static text) */
} rbd_reply;

typedef struct rbd_request {
    rbd_job job;                 /* what the executor sees */
    rbd_server *srv;
    struct MHD_Connection *conn;
    rbd_route route;
    rbd_method method;
    char method_name[16];
    char path[256];
    char scene_id[RBD_SCENE_ID_MAX + 1];
    char request_id[RBD_REQUEST_ID_MAX + 1];
    double t_start;
    size_t target_len;           /* the raw target's strlen (strict.h) */
    int must_close;              /* the answer ends the connection */
    uint64_t owner;              /* the token's (auth.h); 0: no tokens */
    int token_offered;           /* a 401 for a wrong token, not none */

    /* body */
    rbd_body_kind in;
    int out_binary;              /* the answer's form (Accept) */
    uint64_t content_length;
    int has_length;
    uint64_t received;           /* body bytes seen */
    rbq_error early;             /* decided while the body arrived */
    rbj_parser *jp;
    rbb_decoder *bd;
    const rbq_request *body;     /* parsed, after the last byte; for a
                                    camera, &cam_body once it is taken */
    rbq_request cam_body;        /* a camera's request with its rays */
    rb_ray *cam_rays;            /* made by the job (rb_camera_rays) */
    unsigned scene_dims;         /* the path's scene, when it has one */

    rbd_phase phase;
    uint64_t held;               /* of the memory budget (mem_budget.h),
                                    given back when r is freed */
    scene_ver *ver;              /* a scene query's version */
    _Atomic int stop_why;        /* 0, or 1 + the rbd_stop_reason that
                                    stopped the query */
    rbd_reply reply;

    int inlined;                 /* answered on the I/O thread */

    /* for the log line */
    uint64_t rays, boxes, bytes_out;
    int status;                  /* the status queued */
    char error[256];             /* the problem's detail, if any */
} rbd_request;

/* Takes bytes of the memory budget for r (given back when r is freed):
 * 0, or -1 with the 503's detail, naming `what` needed them
 * (handlers.c). */
int request_take_memory(rbd_request *r, uint64_t bytes, const char *what,
                        char *detail, size_t len);

/* respond.c (I/O thread, inside the access handler only) -------------- */

/* THE mapping of an error status to a response: an application/problem+
 * json body (rb_problem_write) with the pointer when there is one, plus
 * Allow for 405 and Retry-After for 503, queued on the connection. */
enum MHD_Result respond_problem(rbd_request *r, int status,
                                const char *pointer, const char *detail);
/* The same from a codec or library error. */
enum MHD_Result respond_error(rbd_request *r, const rbq_error *e);
/* A complete JSON body (taken over; freed by MHD). */
enum MHD_Result respond_json(rbd_request *r, int status, char *body,
                             size_t len, const char *location);
/* A JSON body built in an sbuf (taken over); out of memory becomes 503. */
struct sbuf;
enum MHD_Result respond_sbuf(rbd_request *r, int status, struct sbuf *b,
                             const char *content_type);
enum MHD_Result respond_empty(rbd_request *r, int status);
/* The reply a job left. */
enum MHD_Result respond_reply(rbd_request *r);

/* handlers.c (I/O thread) -------------------------------------------- */

/* After the last body byte: answers, or submits a job and suspends. */
enum MHD_Result handle_request(rbd_request *r);

/* jobs.c (workers) ---------------------------------------------------- */

/* Both intersect routes and render (a picture, or the binary answer). */
void job_intersect(rbd_job *job, rb_context *ctx);
/* Scene queries merged into one call (--merge; jobs.c says how). */
extern const rbd_merge_ops rbd_intersect_merge;
void job_scene_create(rbd_job *job, rb_context *ctx);
void job_scene_patch(rbd_job *job, rb_context *ctx);
/* POST /v1/scenes/{id}/visibility on r->ver. */
void job_visibility(rbd_job *job, rb_context *ctx);
/* With --data-dir only: removing the files waits for the disk. */
void job_scene_delete(rbd_job *job, rb_context *ctx);
/* Resumes the connection (any thread). */
void job_done(rbd_job *job);

#endif
