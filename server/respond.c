/*
 * respond.c - every response rayboxd sends is made and queued here, on the
 * I/O thread inside the access handler (MHD 0.9.75 accepts a response
 * nowhere else). Errors all go through respond_problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problem.h"
#include "json_request.h"
#include "request.h"
#include "sbuf.h"

#define JSON_TYPE "application/json"

void payload_free(void *payload)
{
    rbd_payload *p = payload;
    if (!p)
        return;
    rbq_results_free(&p->res);
    free(p->pre);
    free(p);
}

static enum MHD_Result queue(rbd_request *r, int status,
                             struct MHD_Response *resp,
                             const char *content_type)
{
    if (!resp)
        return MHD_NO; /* out of memory: MHD closes the connection */
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                content_type);
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    /* Draining: each connection ends after the answer it is waiting for;
     * so does one whose request broke the rules of HTTP (strict.h). */
    if (r->must_close || atomic_load(&r->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->status = status;
    r->phase = PH_ANSWERED;
    return ret;
}

enum MHD_Result respond_problem(rbd_request *r, int status,
                                const char *pointer, const char *detail)
{
    char body[RB_PROBLEM_MAX];
    size_t n = rb_problem_write(body, sizeof body, status, detail, pointer);
    snprintf(r->error, sizeof r->error, "%s%s%s", pointer ? pointer : "",
             pointer && pointer[0] ? ": " : "", detail ? detail : "");
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(n, body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    if (status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
                                route_allow(r->route));
    if (status == 401) /* RFC 6750 section 3 */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                r->token_offered
                                    ? "Bearer realm=\"rayboxd\", "
                                      "error=\"invalid_token\""
                                    : "Bearer realm=\"rayboxd\"");
    if (status == 503) {
        char s[24];
        snprintf(s, sizeof s, "%llu",
                 (unsigned long long)r->srv->cfg.retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, s);
    }
    r->bytes_out = n;
    return queue(r, status, resp, "application/problem+json");
}

enum MHD_Result respond_error(rbd_request *r, const rbq_error *e)
{
    return respond_problem(r, e->status ? e->status : 500,
                           e->has_pointer ? e->pointer : NULL, e->detail);
}

enum MHD_Result respond_json(rbd_request *r, int status, char *body,
                             size_t len, const char *location)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    if (location)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, location);
    r->bytes_out = len;
    return queue(r, status, resp, JSON_TYPE);
}

enum MHD_Result respond_sbuf(rbd_request *r, int status, sbuf *b,
                             const char *content_type)
{
    size_t len;
    char *body = sbuf_take(b, &len);
    if (!body)
        return respond_problem(r, 503, NULL, "out of memory");
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    r->bytes_out = len;
    return queue(r, status, resp, content_type ? content_type : JSON_TYPE);
}

enum MHD_Result respond_empty(rbd_request *r, int status)
{
    return queue(r, status,
                 MHD_create_response_from_buffer(0, NULL,
                                                 MHD_RESPMEM_PERSISTENT),
                 NULL);
}

/* The part of a JSON answer the worker did not render, rendered as MHD
 * sends it: memory stays bounded however large the answer. */
static ssize_t json_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    rbd_payload *p = cls;
    if (pos < p->pre_len) {
        size_t n = p->pre_len - (size_t)pos < max ? p->pre_len - (size_t)pos
                                                  : max;
        memcpy(buf, p->pre + pos, n);
        return (ssize_t)n;
    }
    size_t n = rbj_writer_fill(&p->w, buf, max);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static enum MHD_Result respond_payload(rbd_request *r)
{
    rbd_payload *p = r->reply.payload;
    struct MHD_Response *resp;
    r->reply.payload = NULL; /* MHD owns it from here (payload_free) */
    if (r->reply.binary && p->n_iov) {
        resp = MHD_create_response_from_iovec(p->iov, p->n_iov, payload_free,
                                              p);
        r->bytes_out = 0;
        for (unsigned i = 0; i < p->n_iov; i++)
            r->bytes_out += p->iov[i].iov_len;
    } else if (r->reply.binary || rbj_writer_done(&p->w)) {
        /* A whole JSON answer, or a small binary one (jobs.c). */
        resp = MHD_create_response_from_buffer_with_free_callback_cls(
            p->pre_len, p->pre, payload_free, p);
        r->bytes_out = p->pre_len;
    } else {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                 json_reader, p,
                                                 payload_free);
        r->bytes_out = p->pre_len; /* at least */
    }
    if (!resp) {
        payload_free(p);
        return MHD_NO;
    }
    return queue(r, r->reply.status, resp,
                 r->reply.binary ? RBB_MEDIA_TYPE : JSON_TYPE);
}

enum MHD_Result respond_reply(rbd_request *r)
{
    rbd_reply *y = &r->reply;
    if (y->status >= 400 || y->status == 0) {
        if (!y->status) {
            y->err.status = 500;
            snprintf(y->err.detail, sizeof y->err.detail, "no answer");
        }
        return respond_error(r, &y->err);
    }
    switch (y->kind) {
    case OUT_NONE:
        return respond_empty(r, y->status);
    case OUT_BUFFER: {
        char *body = y->body;
        y->body = NULL;
        if (y->content_type) {
            r->bytes_out = y->len;
            return queue(r, y->status,
                         MHD_create_response_from_buffer_with_free_callback(
                             y->len, body, free),
                         y->content_type);
        }
        return respond_json(r, y->status, body, y->len,
                            y->location[0] ? y->location : NULL);
    }
    case OUT_PAYLOAD:
        return respond_payload(r);
    }
    return MHD_NO;
}
