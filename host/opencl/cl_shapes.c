/*
 * cl_shapes.c - the shape pass on the OpenCL device (kernels/shapes.cl):
 * the rays go in chunks, each with the answers the box pass left for its
 * rays (the kernels combine with them) and back.
 *
 * A set with a hierarchy over its bounded shapes (rb_shapeset.tree: a
 * scene's, or a query's where it pays, host/query.c) is walked on the
 * device: the tree's nodes and its leaf records stay in the backend's
 * shape tree buffers, uploaded once per tree version (keyed by the uid of
 * the tree's bounds, as the box walk keys its nodes by the boxset's), so
 * a scene queried again is not uploaded again. Big chunks go in the ray
 * order of ray_order.h over big trees, as on the CPU. A tree whose
 * buffers do not fit the device's limits beside one work-group of rays
 * is not walked: every shape is tested instead, with the same answers
 * (R16). A walk is two launches a chunk (kernels/shapes.cl): the tree's
 * walk for the rays routed through it, then the rest (the other rays'
 * scan, the planes, nearest's answer), which keeps the walk's kernel
 * within a GPU's registers (docs/gpu.md).
 *
 * A joint tree (the boxes in it too) is walked the same way in place of
 * both passes (rb_cl_run_joint): the first launch checks the rays (R6)
 * and answers their boxes and shapes in one walk, the rest as above.
 *
 * The brute-force pass (every ray against every shape) copies the
 * prepared shapes to the device once a query and releases them after it.
 * Planes are unbounded: every ray tests every one on both paths; they and
 * the per-chunk rays and answers are per-query buffers.
 */
#include <string.h>

#include "../bvh/bvh.h"
#include "../cpu/ray_order.h"
#include "cl_internal.h"

/* Rays per launch: 32 bytes in, at most 16 + max_hits * 12 out. */
#define CHUNK_RAYS ((size_t)1 << 18)

typedef struct shape_bufs {
    cl_mem rays, lbox, ball, half, ids, hits, any, counts, lists, order,
        leaf, bad;
} shape_bufs;

static void release_all(shape_bufs *b)
{
    cl_mem *m = (cl_mem *)b;
    for (size_t i = 0; i < sizeof *b / sizeof(cl_mem); i++)
        if (m[i])
            clReleaseMemObject(m[i]);
}

/* A read-only copy of host data on the device (NULL for none). */
static int upload(rb_cl_backend *be, cl_mem *out, const void *data,
                  size_t bytes)
{
    *out = NULL;
    if (!bytes)
        return RB_OK;
    return RB_CL_NEW(&be->env, *out, clCreateBuffer, be->context,
                     CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
                     (void *)data);
}

static int make(rb_cl_backend *be, cl_mem *out, size_t bytes)
{
    *out = NULL;
    if (!bytes)
        return RB_OK;
    return RB_CL_NEW(&be->env, *out, clCreateBuffer, be->context,
                     CL_MEM_READ_WRITE, bytes, NULL);
}

static int arg_mem(rb_cl_backend *be, cl_kernel k, int i, cl_mem m)
{
    return RB_CL(&be->env, clSetKernelArg, k, (cl_uint)i, sizeof m, &m);
}

static int arg_uint(rb_cl_backend *be, cl_kernel k, int i, size_t v)
{
    cl_uint u = (cl_uint)v;
    return RB_CL(&be->env, clSetKernelArg, k, (cl_uint)i, sizeof u, &u);
}

/* The answer arrays of the mode for rays [r0, r0 + n): their buffer, host
 * memory and bytes per ray. */
typedef struct out_array {
    cl_mem mem;
    void *host;
    size_t per_ray;
} out_array;

static int transfer(rb_cl_backend *be, const out_array *o, size_t r0,
                    size_t n, int to_device)
{
    if (!o->mem)
        return RB_OK;
    char *host = (char *)o->host + r0 * o->per_ray;
    size_t bytes = n * o->per_ray;
    return to_device ? RB_CL(&be->env, clEnqueueWriteBuffer, be->queue,
                             o->mem, CL_FALSE, 0, bytes, host, 0, NULL, NULL)
                     : RB_CL(&be->env, clEnqueueReadBuffer, be->queue,
                             o->mem, CL_FALSE, 0, bytes, host, 0, NULL,
                             NULL);
}

/* Device bytes a ray of the mode needs: the ray, its answers and (walks)
 * its place in the order and nearest's winning leaf. */
static size_t bytes_per_ray(rb_mode mode, uint32_t max_hits)
{
    size_t n = sizeof(rb_ray) + sizeof(uint32_t);
    switch (mode) {
    case RB_MODE_PAIRS:
        return n + sizeof(rb_hit);
    case RB_MODE_NEAREST:
        return n + sizeof(rb_hit) + sizeof(uint32_t);
    case RB_MODE_ANY:
        return n + 1;
    case RB_MODE_COUNT:
        return n + sizeof(uint32_t);
    case RB_MODE_ALL:
        return n + sizeof(uint32_t) + (size_t)max_hits * sizeof(rb_list_hit);
    }
    return n;
}

/* Rays per chunk of a launch that keeps `fixed` bytes on the device
 * beside `held` bytes other buffers hold: within the budget, each buffer
 * within max_buf, at most CHUNK_RAYS; 0 when not even one work-group's
 * rays (or every ray, when fewer) fit. */
static size_t chunk_rays(const rb_cl_backend *be, const rb_job *job,
                         uint64_t fixed, uint64_t held)
{
    uint64_t per_ray = bytes_per_ray(job->mode, job->max_hits);
    uint64_t first = (job->n_rays < be->wg ? job->n_rays : be->wg) * per_ray;
    if (held > be->budget || fixed + first > be->budget - held)
        return 0;
    uint64_t rays = (be->budget - held - fixed) / per_ray;
    if (rays > be->max_buf / per_ray)
        rays = be->max_buf / per_ray;
    if (rays > CHUNK_RAYS)
        rays = CHUNK_RAYS;
    if (rays > job->n_rays)
        rays = job->n_rays;
    if (rays < job->n_rays && rays > be->wg)
        rays -= rays % be->wg;
    return (size_t)rays;
}

/* The chunk's ray and answer buffers (b) and the answer arrays to move
 * (outs, *n_outs of them). */
static int make_chunk(rb_cl_backend *be, const rb_job *job, size_t chunk,
                      rb_results *res, shape_bufs *b, out_array outs[2],
                      int *n_outs)
{
    uint32_t max_hits = job->max_hits;
    *n_outs = 0;
    int rc = make(be, &b->rays, chunk * sizeof(rb_ray));
    switch (job->mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        if (!rc)
            rc = make(be, &b->hits, chunk * sizeof(rb_hit));
        outs[(*n_outs)++] = (out_array){b->hits, res->hits, sizeof(rb_hit)};
        break;
    case RB_MODE_ANY:
        if (!rc)
            rc = make(be, &b->any, chunk);
        outs[(*n_outs)++] = (out_array){b->any, res->any, 1};
        break;
    case RB_MODE_COUNT:
        if (!rc)
            rc = make(be, &b->counts, chunk * sizeof(uint32_t));
        outs[(*n_outs)++] = (out_array){b->counts, res->counts,
                                        sizeof(uint32_t)};
        break;
    case RB_MODE_ALL:
        if (!rc)
            rc = make(be, &b->counts, chunk * sizeof(uint32_t));
        if (!rc)
            rc = make(be, &b->lists, chunk * max_hits * sizeof(rb_list_hit));
        outs[(*n_outs)++] = (out_array){b->counts, res->counts,
                                        sizeof(uint32_t)};
        outs[(*n_outs)++] = (out_array){b->lists, res->list,
                                        max_hits * sizeof(rb_list_hit)};
        break;
    }
    return rc;
}

/* How a query's chunks go: the kernel, its argument numbers for the rays,
 * their count and the answers, and (walks) the order and the kernel
 * launched after k on each chunk, with the same argument numbers. */
typedef struct chunk_run {
    cl_kernel k, k2; /* k2 may be NULL */
    /* arg_base (-1: none) gets the chunk's first ray (k only): its place
     * in the query, or for pairs its element's */
    int arg_rays, arg_n_rays, arg_hits, arg_order, arg_base;
    int fresh; /* k writes every answer: none go to the device first */
    uint32_t *order;   /* NULL: rays in input order */
    uint64_t *keys;    /* rb_ray_order's scratch */
    float lo[3], hi[3]; /* the tree's bounds, for the order */
} chunk_run;

/* Every chunk of the job through kernel cr->k (then cr->k2), whose other
 * arguments are set: rays and answers in, the launches, answers out. */
static int run_chunks(rb_cl_backend *be, rb_context *ctx, const rb_job *job,
                      size_t chunk, const chunk_run *cr, shape_bufs *b,
                      const out_array *outs, int n_outs, rb_results *res)
{
    rb_mode mode = job->mode;
    cl_kernel ks[2] = {cr->k, cr->k2};
    int n_k = cr->k2 ? 2 : 1, rc = RB_OK;
    for (int q = 0; q < n_k && !rc; q++) {
        rc = arg_mem(be, ks[q], cr->arg_rays, b->rays);
        for (int o = 0; o < 4 && !rc; o++) {
            cl_mem m = o == 0 ? b->hits : o == 1 ? b->any
                                    : o == 2     ? b->counts
                                                 : b->lists;
            rc = arg_mem(be, ks[q], cr->arg_hits + o, m);
        }
    }
    double kernel_ms = 0;
    const rb_ray *rays = job->rays; /* 3D only: shapes have no 2D form */
    for (size_t r0 = 0; !rc && r0 < job->n_rays; r0 += chunk) {
        size_t n = job->n_rays - r0 < chunk ? job->n_rays - r0 : chunk;
        if (rb_job_stopped(job)) {
            rc = rb_fail(ctx, RB_ECANCELED, "the query was stopped");
            break;
        }
        rc = RB_CL(&be->env, clEnqueueWriteBuffer, be->queue, b->rays,
                   CL_FALSE, 0, n * sizeof(rb_ray), rays + r0, 0, NULL, NULL);
        if (cr->arg_order >= 0) {
            cl_mem order = NULL;
            if (!rc && cr->order && n >= RB_ORDER_MIN_RAYS) {
                rb_ray_order(be->ctx->pool, rays + r0, 3, n, cr->lo,
                             cr->hi,
                             mode == RB_MODE_COUNT || mode == RB_MODE_ALL,
                             cr->keys, cr->order);
                rc = RB_CL(&be->env, clEnqueueWriteBuffer, be->queue,
                           b->order, CL_FALSE, 0, n * sizeof(uint32_t),
                           cr->order, 0, NULL, NULL);
                order = b->order;
            }
            if (!rc)
                rc = arg_mem(be, cr->k, cr->arg_order, order);
        }
        /* pairs and joint walks write every answer; the other modes
         * combine with the box pass's. */
        for (int o = 0; !rc && mode != RB_MODE_PAIRS && !cr->fresh &&
                        o < n_outs;
             o++)
            rc = transfer(be, &outs[o], r0, n, 1);
        if (!rc && cr->arg_base >= 0)
            rc = arg_uint(be, cr->k, cr->arg_base,
                          (mode == RB_MODE_PAIRS ? job->pair_first : 0) + r0);
        size_t global = (n + be->wg - 1) / be->wg * be->wg;
        cl_event ev[2] = {NULL, NULL};
        for (int q = 0; q < n_k && !rc; q++) {
            rc = arg_uint(be, ks[q], cr->arg_n_rays, n);
            rb_cl_note_launch(be, ks[q]);
            if (!rc)
                rc = RB_CL(&be->env, clEnqueueNDRangeKernel, be->queue,
                           ks[q], 1, NULL, &global, &be->wg, 0, NULL,
                           &ev[q]);
        }
        for (int o = 0; !rc && o < n_outs; o++)
            rc = transfer(be, &outs[o], r0, n, 0);
        /* Each chunk is waited for: the order and the host's answer
         * arrays are read until then. */
        if (!rc)
            rc = RB_CL(&be->env, clFinish, be->queue);
        for (int q = 0; q < n_k; q++) {
            cl_ulong t0 = 0, t1 = 0;
            if (!rc && ev[q] &&
                clGetEventProfilingInfo(ev[q], CL_PROFILING_COMMAND_START,
                                        sizeof t0, &t0, NULL) == CL_SUCCESS &&
                clGetEventProfilingInfo(ev[q], CL_PROFILING_COMMAND_END,
                                        sizeof t1, &t1, NULL) == CL_SUCCESS &&
                t1 > t0)
                kernel_ms += (double)(t1 - t0) * 1e-6;
            if (ev[q])
                clReleaseEvent(ev[q]);
        }
        res->info.chunks++;
    }
    res->info.kernel_ms += kernel_ms;
    return rc;
}

/* ---- brute force ---------------------------------------------------- */

static int run_brute(rb_cl_backend *be, rb_context *ctx, const rb_job *job,
                     const rb_shapeset *set, rb_results *res)
{
    size_t n_lbox = set->n_obb + set->n_xbox;
    uint64_t shapes = n_lbox * sizeof *set->lbox +
                      set->n_ball * sizeof *set->ball +
                      set->n_half * sizeof *set->half +
                      (set->ids ? rb_shapeset_size(set) * sizeof *set->ids : 0);
    /* Within the budget beside what earlier passes keep; else without
     * them (caches: they are made again when needed). */
    size_t chunk = chunk_rays(be, job, shapes,
                              rb_cl_box_buffer_bytes(be) + be->shapes_bytes);
    if (!chunk) {
        rb_cl_release_buffers(be);
        chunk = chunk_rays(be, job, shapes, 0);
    }
    if (!chunk)
        return rb_fail(ctx, RB_EDEVMEM,
                       "the shapes (%llu bytes) and %zu rays' buffers do "
                       "not fit the device memory budget (%llu bytes)",
                       (unsigned long long)shapes,
                       job->n_rays < be->wg ? job->n_rays : be->wg,
                       (unsigned long long)be->budget);
    shape_bufs b;
    memset(&b, 0, sizeof b);
    out_array outs[2];
    int n_outs = 0;
    int rc = upload(be, &b.lbox, set->lbox, n_lbox * sizeof *set->lbox);
    if (!rc)
        rc = upload(be, &b.ball, set->ball, set->n_ball * sizeof *set->ball);
    if (!rc)
        rc = upload(be, &b.half, set->half, set->n_half * sizeof *set->half);
    if (!rc && set->ids)
        rc = upload(be, &b.ids, set->ids,
                    rb_shapeset_size(set) * sizeof *set->ids);
    if (!rc)
        rc = make_chunk(be, job, chunk, res, &b, outs, &n_outs);
    chunk_run cr = {.k = be->kernels[RB_CLK_SHAPES_PAIRS + (int)job->mode],
                    .arg_rays = RB_SHARG_RAYS, .arg_n_rays = RB_SHARG_N_RAYS,
                    .arg_hits = RB_SHARG_HITS, .arg_order = -1,
                    .arg_base = RB_SHARG_PAIR_BASE};
    cl_kernel k = cr.k;
    if (!rc)
        rc = arg_mem(be, k, RB_SHARG_LBOX, b.lbox);
    if (!rc)
        rc = arg_uint(be, k, RB_SHARG_N_LBOX, n_lbox);
    if (!rc)
        rc = arg_mem(be, k, RB_SHARG_BALL, b.ball);
    if (!rc)
        rc = arg_uint(be, k, RB_SHARG_N_BALL, set->n_ball);
    if (!rc)
        rc = arg_mem(be, k, RB_SHARG_HALF, b.half);
    if (!rc)
        rc = arg_uint(be, k, RB_SHARG_N_HALF, set->n_half);
    if (!rc)
        rc = arg_mem(be, k, RB_SHARG_IDS, b.ids);
    if (!rc)
        rc = arg_uint(be, k, RB_SHARG_FIRST_ID, set->first_id);
    if (!rc)
        rc = arg_uint(be, k, RB_SHARG_MAX_HITS, job->max_hits);
    if (!rc)
        rc = run_chunks(be, ctx, job, chunk, &cr, &b, outs, n_outs, res);
    if (rc)
        clFinish(be->queue); /* nothing may still read the host arrays */
    release_all(&b);
    return rc;
}

/* ---- the walk of the shape tree -------------------------------------- */

void rb_cl_release_shape_tree(rb_cl_backend *be)
{
    for (int i = 0; i < RB_CLS_N; i++) {
        if (be->shape_tree[i])
            clReleaseMemObject(be->shape_tree[i]);
        be->shape_tree[i] = NULL;
    }
    be->shapes_bytes = 0;
    be->shapes_valid = 0;
    be->shapes_tree = NULL;
}

/* The bytes of the tree's resident buffers, each into sizes[]. */
static uint64_t tree_bytes(const rb_shapeset *set, size_t sizes[RB_CLS_N])
{
    size_t n_lbox = set->n_obb + set->n_xbox;
    sizes[RB_CLS_NODES] = set->tree->n_nodes * sizeof(rb_bvh_node);
    sizes[RB_CLS_LBOX] = n_lbox * sizeof(rb_lbox);
    sizes[RB_CLS_BALL] = set->n_ball * sizeof(rb_ball);
    sizes[RB_CLS_IDS] = (n_lbox + set->n_ball) * sizeof(uint32_t);
    uint64_t total = 0;
    for (int i = 0; i < RB_CLS_N; i++)
        total += sizes[i];
    return total;
}

/* Rays per chunk of a walk of set->tree beside `held` bytes of other
 * buffers, or 0 when the tree is not to be walked: its buffers (or one of
 * them) over the device's limits beside one work-group of rays, or deeper
 * than the walk's path holds (never for the builder's trees, bvh.h). */
static size_t walk_chunk(const rb_cl_backend *be, const rb_job *job,
                         const rb_shapeset *set, uint64_t held)
{
    size_t sizes[RB_CLS_N];
    uint64_t resident = tree_bytes(set, sizes);
    for (int i = 0; i < RB_CLS_N; i++)
        if (sizes[i] > be->max_buf)
            return 0;
    uint64_t half = (uint64_t)set->n_half *
                    (sizeof(rb_halfspace) + sizeof(uint32_t));
    if (set->tree->depth > RB_BVH_MAX_DEPTH)
        return 0;
    return chunk_rays(be, job, resident + half, held);
}

/* The tree's nodes and leaves into the shape tree buffers, unless they
 * hold that version already. */
static int upload_tree(rb_cl_backend *be, const rb_shapeset *set)
{
    if (be->shapes_valid && be->shapes_uid == set->bounds.uid &&
        be->shapes_tree == set->tree)
        return RB_OK;
    rb_cl_release_shape_tree(be);
    size_t sizes[RB_CLS_N];
    uint64_t bytes = tree_bytes(set, sizes);
    const void *data[RB_CLS_N] = {
        [RB_CLS_NODES] = set->tree->nodes,
        [RB_CLS_LBOX] = set->leaves.lbox,
        [RB_CLS_BALL] = set->leaves.ball,
        [RB_CLS_IDS] = set->leaves.ids,
    };
    for (int i = 0; i < RB_CLS_N; i++) {
        int rc = upload(be, &be->shape_tree[i], data[i], sizes[i]);
        if (rc) {
            rb_cl_release_shape_tree(be);
            return rc;
        }
    }
    be->shapes_bytes = bytes;
    be->shapes_valid = 1;
    be->shapes_uid = set->bounds.uid;
    be->shapes_tree = set->tree;
    be->shape_uploads++;
    return RB_OK;
}

/* The walk of set->tree, in chunks of `chunk` rays: the shape pass after
 * the box pass, or (joint) both passes, the lowest invalid ray into *bad
 * (RB_EINPUT). */
static int run_walk(rb_cl_backend *be, rb_context *ctx, const rb_job *job,
                    const rb_shapeset *set, size_t chunk, int joint,
                    rb_results *res, rb_bad_input *bad)
{
    static const rb_cl_kernel_id kernel_of[] = {
        [RB_MODE_NEAREST] = RB_CLK_SHAPE_WALK_NEAREST,
        [RB_MODE_ANY] = RB_CLK_SHAPE_WALK_ANY,
        [RB_MODE_COUNT] = RB_CLK_SHAPE_WALK_COUNT,
        [RB_MODE_ALL] = RB_CLK_SHAPE_WALK_ALL};
    /* the launch after each walk: the same modes, RB_CLK_SHAPE_REST_*; a
     * joint tree's walk: RB_CLK_JOINT_WALK_* */
    const int rest = RB_CLK_SHAPE_REST_NEAREST - RB_CLK_SHAPE_WALK_NEAREST;
    const int jw = RB_CLK_JOINT_WALK_NEAREST - RB_CLK_SHAPE_WALK_NEAREST;
    size_t n_lbox = set->n_obb + set->n_xbox, n_bounded = n_lbox + set->n_ball;
    shape_bufs b;
    memset(&b, 0, sizeof b);
    out_array outs[2];
    int n_outs = 0;
    chunk_run cr = {.k = be->kernels[kernel_of[job->mode] + (joint ? jw : 0)],
                    .k2 = be->kernels[kernel_of[job->mode] + rest],
                    .arg_rays = RB_SWARG_RAYS, .arg_n_rays = RB_SWARG_N_RAYS,
                    .arg_hits = RB_SWARG_HITS, .arg_order = RB_SWARG_ORDER,
                    .arg_base = joint ? RB_SWARG_RAY_BASE : -1,
                    .fresh = joint};
    int rc = upload_tree(be, set);
    cl_uint no_bad = UINT32_MAX;
    if (!rc && joint)
        rc = RB_CL_NEW(&be->env, b.bad, clCreateBuffer, be->context,
                       CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       sizeof no_bad, &no_bad);
    if (!rc)
        rc = upload(be, &b.half, set->half, set->n_half * sizeof *set->half);
    if (!rc && set->ids)
        rc = upload(be, &b.ids, set->ids + n_bounded,
                    set->n_half * sizeof *set->ids);
    if (!rc)
        rc = make_chunk(be, job, chunk, res, &b, outs, &n_outs);
    if (!rc && job->mode == RB_MODE_NEAREST)
        rc = make(be, &b.leaf, chunk * sizeof(uint32_t));
    size_t order_bytes = (size_t)set->tree->n_nodes * sizeof(rb_bvh_node) +
                         n_lbox * sizeof(rb_lbox) +
                         set->n_ball * sizeof(rb_ball);
    if (!rc && chunk >= RB_ORDER_MIN_RAYS &&
        (order_bytes >= RB_ORDER_MIN_BYTES ||
         ctx->walk_order == RB_WALK_ORDER_ALWAYS)) {
        /* Without memory for the order, rays go in input order, with the
         * same answers. */
        cr.order = rb_alloc(ctx, chunk * sizeof *cr.order, 64);
        cr.keys = rb_alloc(ctx, 2 * chunk * sizeof *cr.keys, 64);
        if (cr.order && cr.keys)
            rc = make(be, &b.order, chunk * sizeof(uint32_t));
        if (!cr.order || !cr.keys) {
            rb_free(ctx, cr.order);
            rb_free(ctx, cr.keys);
            cr.order = NULL;
            cr.keys = NULL;
        }
        rb_bvh_bounds(set->tree, cr.lo, cr.hi);
    }
    cl_float cover = set->cover;
    /* Both kernels take the same arguments; the rest walks no order. */
    if (!rc)
        rc = arg_mem(be, cr.k2, RB_SWARG_ORDER, NULL);
    for (int q = 0; q < 2 && !rc; q++) {
        cl_kernel k = q ? cr.k2 : cr.k;
        rc = arg_mem(be, k, RB_SWARG_NODES, be->shape_tree[RB_CLS_NODES]);
        if (!rc)
            rc = RB_CL(&be->env, clSetKernelArg, k, RB_SWARG_COVER,
                       sizeof cover, &cover);
        if (!rc)
            rc = arg_mem(be, k, RB_SWARG_LBOX, be->shape_tree[RB_CLS_LBOX]);
        if (!rc)
            rc = arg_uint(be, k, RB_SWARG_N_LBOX, n_lbox);
        if (!rc)
            rc = arg_mem(be, k, RB_SWARG_BALL, be->shape_tree[RB_CLS_BALL]);
        if (!rc)
            rc = arg_uint(be, k, RB_SWARG_N_BALL, set->n_ball);
        if (!rc)
            rc = arg_mem(be, k, RB_SWARG_LEAF_IDS,
                         be->shape_tree[RB_CLS_IDS]);
        if (!rc)
            rc = arg_mem(be, k, RB_SWARG_HALF, b.half);
        if (!rc)
            rc = arg_uint(be, k, RB_SWARG_N_HALF, set->n_half);
        if (!rc)
            rc = arg_mem(be, k, RB_SWARG_HALF_IDS, b.ids);
        if (!rc)
            rc = arg_uint(be, k, RB_SWARG_HALF_FIRST,
                          set->first_id + n_bounded);
        if (!rc)
            rc = arg_mem(be, k, RB_SWARG_LEAF, b.leaf);
        if (!rc)
            rc = arg_uint(be, k, RB_SWARG_MAX_HITS, job->max_hits);
        if (!rc)
            rc = arg_mem(be, k, RB_SWARG_BAD, b.bad);
        if (!rc)
            rc = arg_uint(be, k, RB_SWARG_RAY_BASE, 0);
    }
    if (!rc)
        rc = run_chunks(be, ctx, job, chunk, &cr, &b, outs, n_outs, res);
    cl_uint first_bad = UINT32_MAX;
    if (!rc && joint)
        rc = RB_CL(&be->env, clEnqueueReadBuffer, be->queue, b.bad, CL_TRUE,
                   0, sizeof first_bad, &first_bad, 0, NULL, NULL);
    if (!rc && first_bad != UINT32_MAX) {
        bad->index = first_bad / 2;
        bad->element = RB_ELEMENT_RAY;
        rc = RB_EINPUT;
    }
    if (!rc)
        be->shape_walks++;
    if (rc && rc != RB_EINPUT) {
        clFinish(be->queue); /* nothing may still read the host arrays */
        be->shapes_valid = 0;
    }
    release_all(&b);
    rb_free(ctx, cr.order);
    rb_free(ctx, cr.keys);
    return rc;
}

/* The queue, made again when a failure dropped it (cl_run.c, settle): the
 * box pass would have, but pairs of shapes and joint walks run none. */
static int have_queue(rb_cl_backend *be)
{
    if (be->queue)
        return RB_OK;
    return RB_CL_NEW(&be->env, be->queue, clCreateCommandQueue, be->context,
                     be->dev.id, CL_QUEUE_PROFILING_ENABLE);
}

/* walk_chunk beside the box pass's buffers, or in their room (they are a
 * cache, released here when needed). */
static size_t walk_chunk_room(rb_cl_backend *be, const rb_job *job,
                              const rb_shapeset *set)
{
    uint64_t held = rb_cl_box_buffer_bytes(be);
    size_t chunk = walk_chunk(be, job, set, held);
    if (!chunk && held && (chunk = walk_chunk(be, job, set, 0)) != 0)
        rb_cl_release_box_buffers(be);
    return chunk;
}

int rb_cl_run_shapes(rb_backend *self, rb_context *ctx, const rb_job *job,
                     const rb_shapeset *set, rb_results *res)
{
    rb_cl_backend *be = (rb_cl_backend *)self;
    if (!job->n_rays)
        return RB_OK;
    int rc = have_queue(be);
    if (rc)
        return rc;
    if (job->mode != RB_MODE_PAIRS && set->tree && set->tree->n_nodes) {
        size_t chunk = walk_chunk_room(be, job, set);
        rb_bad_input unused;
        if (chunk)
            return run_walk(be, ctx, job, set, chunk, 0, res, &unused);
    }
    return run_brute(be, ctx, job, set, res);
}

int rb_cl_run_joint(rb_backend *self, rb_context *ctx, const rb_job *job,
                    const rb_shapeset *set, rb_results *res,
                    rb_bad_input *bad)
{
    rb_cl_backend *be = (rb_cl_backend *)self;
    if (!set->tree || !set->tree->n_nodes || job->mode == RB_MODE_PAIRS)
        return RB_JOINT_DECLINED;
    if (!job->n_rays)
        return RB_OK;
    int rc = have_queue(be);
    if (rc)
        return rc;
    size_t chunk = walk_chunk_room(be, job, set);
    if (!chunk)
        return RB_JOINT_DECLINED;
    return run_walk(be, ctx, job, set, chunk, 1, res, bad);
}
