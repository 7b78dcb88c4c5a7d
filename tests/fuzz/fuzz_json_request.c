/* fuzz_json_request.c - libFuzzer target for the streaming JSON request
 * parser (server/json_request.h), the first thing every JSON body meets.
 *
 * The first input byte picks the body kind (intersect, scene create,
 * patch, intersect on a scene of the path) and a chunk size; the rest is
 * the body. Checked beyond "no crash, no leak, no UB" (ASan/UBSan):
 * - the parser's contract that chunking changes nothing: the body fed
 *   whole and fed in pieces gives the same request or the same error;
 * - an accepted intersect runs through the library (CPU backend) and its
 *   answer through the JSON writer, and a library refusal maps back to a
 *   422 with a pointer.
 * Limits are small so that every input is fast. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_request.h"
#include "json_response.h"
#include "fuzz_common.h"
#include "raybox.h"


static rbj_parser *run(const rbj_options *o, const uint8_t *d, size_t n,
                       size_t piece, int *rc)
{
    rbj_parser *p = NULL;
    if (rbj_parser_create(o, &p) != RB_OK)
        abort();
    *rc = 0;
    for (size_t at = 0; at < n && *rc == 0; at += piece) {
        size_t k = n - at < piece ? n - at : piece;
        *rc = rbj_parser_feed(p, d + at, k);
    }
    if (*rc == 0)
        *rc = rbj_parser_finish(p);
    return p;
}

static size_t records(const rbq_request *r, int rays)
{
    size_t n = rays ? r->n_rays : r->n_boxes;
    size_t each = rays ? (r->dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2))
                       : (r->dims == 3 ? sizeof(rb_box) : sizeof(rb_box2));
    return n * each;
}

/* The query as rayboxd runs it: every kind, the outputs asked for, the
 * result arrays rayboxd allocates. */
static void query(const rbq_request *r)
{
    rb_results res;
    if (rbq_results_alloc(r, &res))
        abort();
    rb_query q = {.mode = r->mode, .dims = r->dims, .rays = r->rays,
                  .n_rays = r->n_rays, .boxes = r->boxes,
                  .n_boxes = r->n_boxes, .max_hits = r->max_hits,
                  .shapes = r->shapes, .outputs = r->outputs};
    if (rb_intersect(fuzz_context(), &q, &res) == RB_OK) {
        rbj_response resp = {.mode = r->mode, .n_rays = r->n_rays,
                             .max_hits = r->max_hits, .results = &res};
        rbj_meta_from_run(&resp.meta, &res.info);
        rbj_writer w;
        rbj_writer_init(&w, &resp);
        char buf[700];
        while (rbj_writer_fill(&w, buf, sizeof buf) > 0)
            ;
        if (!rbj_writer_done(&w))
            abort();
    } else {
        rbq_error e;
        rbq_error_from_library(r, RBQ_FROM_INTERSECT,
                               rb_context_error(fuzz_context()), &e);
        if (e.status != 422 && e.status != 503)
            abort();
    }
    rbq_results_free(&res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned kind = data[0] & 3, piece = 1 + (data[0] >> 2);
    rbj_options o;
    rbj_options_init(&o, kind == 3 ? RBQ_INTERSECT : (rbq_body)kind);
    o.limits.max_rays = 64;
    o.limits.max_boxes = 64;
    o.limits.max_results = 256;
    o.limits.max_numbers = 1024;
    o.limits.default_max_hits = 4;
    if (kind == 3) {
        o.scene_in_path = 1;
        o.scene_dims = 2 + (data[0] >> 7);
    }
    int rc_whole, rc_split;
    rbj_parser *a = run(&o, data + 1, size - 1, size, &rc_whole);
    rbj_parser *b = run(&o, data + 1, size - 1, piece, &rc_split);
    const rbq_error *ea = rbj_parser_error(a), *eb = rbj_parser_error(b);
    if (rc_whole != rc_split || memcmp(ea, eb, sizeof *ea) != 0)
        abort(); /* chunking changed the outcome */
    if (rc_whole == 0) {
        const rbq_request *ra = rbj_parser_request(a);
        const rbq_request *rb = rbj_parser_request(b);
        if (ra->n_rays != rb->n_rays || ra->n_boxes != rb->n_boxes ||
            !fuzz_same_shapes(&ra->shapes, &rb->shapes) ||
            ra->outputs != rb->outputs ||
            (ra->n_rays && memcmp(ra->rays, rb->rays, records(ra, 1))) ||
            (ra->n_boxes && memcmp(ra->boxes, rb->boxes, records(ra, 0))))
            abort();
        if (kind == 0 && !ra->scene)
            query(ra);
    } else if (ea->status != 400 && ea->status != 413 && ea->status != 422) {
        abort();
    }
    rbj_parser_destroy(a);
    rbj_parser_destroy(b);
    return 0;
}
