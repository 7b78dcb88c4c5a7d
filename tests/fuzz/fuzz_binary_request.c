/* fuzz_binary_request.c - libFuzzer target for the binary request decoder
 * (server/binary_codec.h).
 *
 * The first input byte picks the kind (intersect, scene, intersect on a
 * scene of the path), whether Content-Length is known, and a chunk size;
 * the rest is the body. Checked beyond ASan/UBSan: whole and split feeds
 * give the same request or the same error; an accepted intersect runs
 * through the library and its result is laid out as the server sends it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "binary_codec.h"
#include "fuzz_common.h"
#include "raybox.h"


static rbb_decoder *run(const rbb_options *o, const uint8_t *d, size_t n,
                        size_t piece, int *rc)
{
    rbb_decoder *dec = NULL;
    if (rbb_decoder_create(o, &dec) != RB_OK)
        abort();
    *rc = 0;
    for (size_t at = 0; at < n && *rc == 0; at += piece) {
        size_t k = n - at < piece ? n - at : piece;
        *rc = rbb_decoder_feed(dec, d + at, k);
    }
    if (*rc == 0)
        *rc = rbb_decoder_finish(dec);
    return dec;
}

/* The query as rayboxd runs it (every kind, normals when flagged), and
 * its answer laid out in the request's version. */
static void query(const rbq_request *r, unsigned version)
{
    rb_results res;
    if (rbq_results_alloc(r, &res))
        abort();
    rb_query q = {.mode = r->mode, .dims = r->dims, .rays = r->rays,
                  .n_rays = r->n_rays, .boxes = r->boxes,
                  .n_boxes = r->n_boxes, .max_hits = r->max_hits,
                  .shapes = r->shapes, .outputs = r->outputs};
    if (rb_intersect(fuzz_context(), &q, &res) == RB_OK) {
        rbb_result_info info = {.version = rbb_result_version(r, version),
                                .mode = r->mode, .dims = r->dims,
                                .n_rays = r->n_rays,
                                .max_hits = r->max_hits,
                                .has_kinds = res.kinds != NULL,
                                .has_normals = res.normals != NULL};
        if (r->mode == RB_MODE_ALL)
            info.list_entries = rbb_compact_lists(&res, r->n_rays,
                                                  r->max_hits);
        uint8_t head[RBB_HEADER_MAX];
        rbb_result_header(&info, head);
        const void *part[RBB_PARTS_MAX];
        size_t bytes[RBB_PARTS_MAX];
        int k = rbb_result_layout(&info, &res, part, bytes);
        volatile uint8_t sum = 0;
        for (int i = 0; i < k; i++)
            for (size_t j = 0; j < bytes[i]; j++)
                sum ^= ((const uint8_t *)part[i])[j]; /* all readable */
        (void)sum;
    }
    rbq_results_free(&res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned sel = data[0];
    unsigned kind = sel % 3, piece = 1 + ((sel >> 3) & 31);
    rbb_options o;
    rbb_options_init(&o, kind == 1 ? RBB_KIND_SCENE : RBB_KIND_INTERSECT);
    o.limits.max_rays = 64;
    o.limits.max_boxes = 64;
    o.limits.max_results = 256;
    o.limits.default_max_hits = 4;
    o.max_body = 4096;
    if (sel & 4)
        o.content_length = size - 1;
    if (kind == 2) {
        o.scene_in_path = 1;
        o.scene_dims = 2 + ((sel >> 7) & 1);
    }
    int rc_whole, rc_split;
    rbb_decoder *a = run(&o, data + 1, size - 1, size, &rc_whole);
    rbb_decoder *b = run(&o, data + 1, size - 1, piece, &rc_split);
    const rbq_error *ea = rbb_decoder_error(a), *eb = rbb_decoder_error(b);
    if (rc_whole != rc_split || ea->status != eb->status ||
        strcmp(ea->pointer, eb->pointer) != 0)
        abort(); /* chunking changed the outcome */
    if (rc_whole == 0) {
        const rbq_request *ra = rbb_decoder_request(a);
        const rbq_request *rb = rbb_decoder_request(b);
        size_t rs = ra->dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
        size_t bs = ra->dims == 3 ? sizeof(rb_box) : sizeof(rb_box2);
        if (ra->n_rays != rb->n_rays || ra->n_boxes != rb->n_boxes ||
            !fuzz_same_shapes(&ra->shapes, &rb->shapes) ||
            ra->outputs != rb->outputs ||
            (ra->n_rays && memcmp(ra->rays, rb->rays, ra->n_rays * rs)) ||
            (ra->n_boxes && memcmp(ra->boxes, rb->boxes, ra->n_boxes * bs)))
            abort();
        if (kind == 0)
            query(ra, rbb_decoder_header(a)->version);
    } else if (ea->status != 400 && ea->status != 413 && ea->status != 422) {
        abort();
    }
    rbb_decoder_destroy(a);
    rbb_decoder_destroy(b);
    return 0;
}
