/*
 * cl_plan.c - chunk sizes for one job.
 *
 * Every buffer stays within max_buf (CL_DEVICE_MAX_MEM_ALLOC_SIZE or the
 * caller's smaller limit) and all buffers of a query together within the
 * memory budget. Every-box modes keep the whole boxset in one buffer when
 * it fits next to at least one work-group of rays; otherwise the boxes are
 * cut into chunks too (taking at most half the budget) and the kernels
 * combine the chunks' answers. The rest of the budget goes to rays.
 *
 * A job with a hierarchy walks it when the whole node array fits one
 * buffer and, beside one work-group of rays, the budget (the walk jumps
 * anywhere in the tree, so the nodes cannot be cut into chunks). When it
 * does not fit, the job is planned as a brute-force scan of its boxes
 * instead: slower by far, but the answers are the same (SPEC R9).
 */
#include <stdio.h>

#include "../bvh/bvh.h"
#include "cl_internal.h"

#define BOX_BYTES (6 * sizeof(float))

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

size_t rb_cl_stream_words(size_t n, unsigned depth, size_t cap)
{
    size_t lists = rb_bvh_stream_words(n, depth);
    if (cap && cap * n < lists)
        lists = cap * n;
    size_t words = RB_STREAM_HEAD_WORDS(n, (size_t)RB_BVH_STACK) + lists;
    return (words + 15) / 16 * 16;
}

int rb_cl_plan_job(const rb_job *job, uint64_t max_buf, uint64_t budget,
                   size_t wg, size_t stream_tasks, rb_cl_plan *out,
                   char *why, size_t why_len)
{
    *out = (rb_cl_plan){0};
    int pairs = job->mode == RB_MODE_PAIRS;
    uint64_t per[RB_CLB_N] = {0}; /* bytes per ray of each ray buffer */
    per[RB_CLB_RAYS] = job->dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
    if (pairs)
        per[RB_CLB_PAIR_BOXES] = job->dims == 3 ? sizeof(rb_box)
                                                : sizeof(rb_box2);
    switch (job->mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        per[RB_CLB_OUT] = sizeof(rb_hit);
        break;
    case RB_MODE_ANY:
        per[RB_CLB_OUT] = 1;
        break;
    case RB_MODE_COUNT:
        per[RB_CLB_OUT] = sizeof(uint32_t);
        break;
    case RB_MODE_ALL:
        per[RB_CLB_OUT] = sizeof(uint32_t);
        per[RB_CLB_LIST] = (uint64_t)job->max_hits * sizeof(rb_list_hit);
        break;
    }
    uint64_t per_ray = 0;
    for (int b = 0; b < RB_CLB_N; b++)
        per_ray += per[b];

    uint64_t box_bytes = 0;
    const rb_bvh *bvh = pairs ? NULL : job->bvh;
    if (bvh && bvh->n_nodes) {
        uint64_t nodes = (uint64_t)bvh->n_nodes * sizeof(rb_bvh_node);
        uint64_t first_rays = min_u64(job->n_rays, wg) *
                              (per_ray + sizeof(uint32_t));
        /* The walk's path holds RB_BVH_MAX_DEPTH levels: always enough
         * for the builder's trees (bvh.h), checked all the same. */
        if (nodes <= max_buf && nodes + first_rays <= budget &&
            bvh->depth <= RB_BVH_MAX_DEPTH) {
            out->bvh = 1;
            out->bytes[RB_CLB_NODES] = (size_t)nodes;
            box_bytes = nodes;
            per[RB_CLB_ORDER] = sizeof(uint32_t);
            per_ray += per[RB_CLB_ORDER];
        }
        /* The streams' arena, for tasks of RB_CL_STREAM_RAYS rays or as
         * many as fit beside the nodes (else the one-ray walk, with the
         * same answers); at most a quarter of what the budget leaves,
         * which goes to rays. */
        size_t task = RB_CL_STREAM_RAYS;
        uint64_t room = budget > nodes + first_rays
                            ? (budget - nodes - first_rays) / 4
                            : 0;
        uint64_t arena = 0;
        int streams = out->bvh && stream_tasks && rb_bvh_streams(job->mode);
        for (; streams && task >= RB_CL_STREAM_MIN_RAYS; task /= 2) {
            arena = (RB_STREAM_ARENA_HEAD +
                     (uint64_t)stream_tasks *
                         rb_cl_stream_words(task, bvh->depth, 0)) *
                    sizeof(uint32_t);
            if (arena <= max_buf && arena <= room)
                break;
        }
        if (streams && task >= RB_CL_STREAM_MIN_RAYS) {
            out->stream_tasks = stream_tasks;
            out->stream_rays = task;
            out->bytes[RB_CLB_ARENA] = (size_t)arena;
            box_bytes += arena;
        }
    }
    if (!pairs && !out->bvh) {
        const rb_boxset *set = job->boxes;
        uint64_t whole = (uint64_t)set->stride * BOX_BYTES;
        uint64_t first_rays = min_u64(job->n_rays, wg) * per_ray;
        if (whole <= max_buf && whole + first_rays <= budget) {
            out->boxes_whole = 1;
            out->boxes = set->n;
            out->box_stride = set->stride;
            box_bytes = whole;
        } else {
            uint64_t cap = min_u64(max_buf, budget / 2) / BOX_BYTES;
            if (cap >= RB_BOX_PAD)
                cap -= cap % RB_BOX_PAD;
            if (cap == 0) {
                snprintf(why, why_len, "a box does not fit the device "
                                       "limits (buffer %llu bytes, budget "
                                       "%llu bytes)",
                         (unsigned long long)max_buf,
                         (unsigned long long)budget);
                return RB_EDEVMEM;
            }
            out->boxes = (size_t)min_u64(cap, set->n ? set->n : 1);
            out->box_stride = out->boxes;
            box_bytes = (uint64_t)out->boxes * BOX_BYTES;
        }
        out->bytes[RB_CLB_BOXES] = (size_t)box_bytes;
    }

    uint64_t rays = job->n_rays;
    if (budget > box_bytes)
        rays = min_u64(rays, (budget - box_bytes) / per_ray);
    else
        rays = 0;
    for (int b = 0; b < RB_CLB_N; b++)
        if (per[b])
            rays = min_u64(rays, max_buf / per[b]);
    if (rays == 0) {
        snprintf(why, why_len, "one ray needs %llu bytes of device buffers "
                               "(largest %llu): over the limits (buffer "
                               "%llu bytes, budget %llu bytes)",
                 (unsigned long long)per_ray,
                 (unsigned long long)(per[RB_CLB_LIST] ? per[RB_CLB_LIST]
                                                       : per_ray),
                 (unsigned long long)max_buf, (unsigned long long)budget);
        return RB_EDEVMEM;
    }
    /* Whole work-groups per chunk, except for the last. */
    if (rays < job->n_rays && rays > wg)
        rays -= rays % wg;
    out->rays = (size_t)rays;
    for (int b = 0; b < RB_CLB_N; b++)
        if (per[b])
            out->bytes[b] = (size_t)(rays * per[b]);
    return RB_OK;
}
