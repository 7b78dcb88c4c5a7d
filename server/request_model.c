/* request_model.c - what belongs to a parsed request whichever form it
 * came in (request_model.h): the default limits, and the output arrays
 * its answer needs, shared by rayboxd and the batch CLI; large ones come
 * from the block cache (block_cache.h). */
#include <stdlib.h>
#include <string.h>

#include "block_cache.h"
#include "request_model.h"

void rbq_limits_default(rbq_limits *limits)
{
    limits->max_rays = 4u << 20;
    limits->max_boxes = 1u << 20;
    limits->max_results = 16u << 20;
    limits->max_numbers = 64u << 20;
    limits->default_max_hits = 64;
    limits->max_observers = 1u << 20;
    limits->max_targets = 1u << 20;
}

int rbq_results_alloc(const rbq_request *req, rb_results *res)
{
    size_t n = req->n_rays ? req->n_rays : 1;
    memset(res, 0, sizeof *res);
    res->capacity = req->n_rays;
    switch (req->mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        /* kinds when the answer names them (any kind beyond boxes),
         * normals when asked for. */
        if ((req->shapes.n_obbs | req->shapes.n_xboxes | req->shapes.n_spheres |
             req->shapes.n_planes) &&
            !(res->kinds = rbc_block_alloc(n)))
            return -1;
        if ((req->outputs & RB_OUTPUT_NORMAL) &&
            !(res->normals = rbc_block_alloc(3 * n * sizeof *res->normals)))
            return -1;
        return (res->hits = rbc_block_alloc(n * sizeof *res->hits)) ? 0 : -1;
    case RB_MODE_ANY:
        return (res->any = rbc_block_alloc(n)) ? 0 : -1;
    case RB_MODE_COUNT:
        res->counts = rbc_block_alloc(n * sizeof *res->counts);
        return res->counts ? 0 : -1;
    case RB_MODE_ALL:
        /* rays x max_hits is within the parser's max-results limit; with
         * no ray at all max_hits alone is not limited, and no list is
         * needed. */
        res->counts = rbc_block_alloc(n * sizeof *res->counts);
        res->list = rbc_block_alloc(
            (req->n_rays ? n * (size_t)req->max_hits : 1) * sizeof *res->list);
        return res->counts && res->list ? 0 : -1;
    }
    return -1;
}

uint64_t rbq_results_bytes(const rbq_request *req)
{
    uint64_t n = req->n_rays ? req->n_rays : 1;
    switch (req->mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        /* kinds: counted always (a scene's kinds are known later) */
        return n * (sizeof(rb_hit) + 1) +
               ((req->outputs & RB_OUTPUT_NORMAL) ? 3 * n * sizeof(float)
                                                  : 0);
    case RB_MODE_ANY:
        return n;
    case RB_MODE_COUNT:
        return n * sizeof(uint32_t);
    case RB_MODE_ALL:
        return n * sizeof(uint32_t) +
               (req->n_rays ? n * req->max_hits : 1) * sizeof(rb_list_hit);
    }
    return 0;
}

void rbq_results_free(rb_results *res)
{
    rbc_block_free(res->hits);
    rbc_block_free(res->any);
    rbc_block_free(res->counts);
    rbc_block_free(res->list);
    rbc_block_free(res->kinds);
    rbc_block_free(res->normals);
    res->kinds = NULL;
    res->normals = NULL;
    res->hits = NULL;
    res->any = NULL;
    res->counts = NULL;
    res->list = NULL;
}
