/*
 * cl_run.c - one query on the OpenCL device.
 *
 * Rays go in chunks (cl_plan.c). For each chunk, in one in-order queue:
 * write it, launch the kernel once per
 * box chunk (the boxes themselves are uploaded only when the buffer does
 * not already hold them, so a scene stays on the device across queries),
 * and read the answers straight into the caller's arrays. A job with a
 * hierarchy (rb_job.bvh) that fits the device's limits launches the walk
 * kernels of bvh.cl instead, once per ray chunk, on the node array, which
 * is uploaded only when the device does not already hold that hierarchy
 * (keyed like the boxes). Writes and
 * reads are non-blocking; the call waits for the queue before it returns,
 * on every path, because the caller's memory is only borrowed.
 *
 * R6 is checked by the kernels as they load each ray and pair box (slab.cl
 * rb_ray_ok/rb_box_ok, the rules of host/validate.c): they keep the lowest
 * invalid element, coded index * 2 (+ 1 for a box), in a one-word buffer
 * that starts at all ones and is read once at the end. A host pass would
 * read the whole batch once more, which is as much as the kernels' own
 * work for pairs on a CPU device.
 *
 * On a device that shares the host's memory (zero_copy: CPU devices such
 * as PoCL) the rays, the pairs' boxes and the answers are not copied: each
 * chunk wraps the caller's arrays in CL_MEM_USE_HOST_PTR buffers, and a
 * map/unmap of the answers makes them visible to the host.
 *
 * Any failed OpenCL call ends the query with RB_EDEVICE/RB_EDEVMEM (the
 * generic layer may then rerun it on the CPU) and leaves the backend ready
 * for the next one: the queue is drained (or recreated), every event
 * released, the box cache forgotten, and after a memory failure the
 * buffers are released so that the next query allocates afresh.
 */
#include <stdio.h>
#include <string.h>

#include "../bvh/bvh.h"
#include "../cpu/ray_order.h"
#include "cl_internal.h"

#define EVENT_BATCH 32 /* kernel events held before their times are read */
/* From RB_ORDER_MIN_RAYS rays in a chunk on (internal.h), a walk gets its
 * rays in the order of ray_order.h, so that neighbouring work-items, and
 * the SIMD lanes of a GPU, visit the same nodes: on PoCL (2 cores, 1M
 * random boxes, 500K rays) nearest and any ran 1.5-2x faster, count and
 * all ~1.5x, for about 5% of the walk's time on the host. A CPU device
 * does so, as the CPU walk does, only over trees of RB_ORDER_MIN_BYTES or
 * more, which outgrow its caches: over 16K boxes (0.8 MiB of nodes), 1M
 * rays, PoCL's walks in input order ran 1.3x faster (nearest, all),
 * 1.05x (any, count); or when the origins lie in a slab, as the CPU walk
 * (rb_order_pays). A GPU's lanes gain from the order whatever the tree's
 * size. */

typedef struct run_state {
    rb_cl_backend *be;
    const rb_job *job;
    rb_results *res;
    rb_cl_plan plan;
    cl_event events[EVENT_BATCH];
    size_t n_events;
    double kernel_ms;
    uint64_t launches;
    cl_mem wrap[RB_CLB_N]; /* zero_copy: this chunk's views of the caller's
                              arrays, used instead of be->bufs */
    uint32_t *order;       /* walks: every chunk's ray order, or NULL */
    uint64_t *keys;        /* rb_ray_order's scratch, one chunk */
    float lo[3], hi[3];    /* walks: the tree's bounds, for the order */
} run_state;

static cl_mem buf(const run_state *st, int b)
{
    return st->wrap[b] ? st->wrap[b] : st->be->bufs[b].mem;
}

static void unwrap(run_state *st)
{
    for (int b = 0; b < RB_CLB_N; b++) {
        if (st->wrap[b])
            clReleaseMemObject(st->wrap[b]); /* kept alive while in use */
        st->wrap[b] = NULL;
    }
}

/* zero_copy: buffer b of this chunk is the caller's memory at ptr. */
static int wrap_host(run_state *st, int b, const void *ptr, size_t bytes,
                     cl_mem_flags flags)
{
    rb_cl_backend *be = st->be;
    if (st->wrap[b])
        clReleaseMemObject(st->wrap[b]);
    st->wrap[b] = NULL;
    if (bytes == 0)
        return RB_OK;
    /* The kernels never write a READ_ONLY buffer: casting away const is
     * what CL_MEM_USE_HOST_PTR's signature asks for, nothing more. */
    return RB_CL_NEW(&be->env, st->wrap[b], clCreateBuffer, be->context,
                     flags | CL_MEM_USE_HOST_PTR, bytes, (void *)ptr);
}

void rb_cl_release_box_buffers(rb_cl_backend *be)
{
    for (int b = 0; b < RB_CLB_N; b++) {
        if (be->bufs[b].mem)
            clReleaseMemObject(be->bufs[b].mem);
        be->bufs[b].mem = NULL;
        be->bufs[b].cap = 0;
    }
    be->boxes_valid = 0;
    be->nodes_valid = 0;
}

uint64_t rb_cl_box_buffer_bytes(const rb_cl_backend *be)
{
    uint64_t total = 0;
    for (int b = 0; b < RB_CLB_N; b++)
        total += be->bufs[b].cap;
    return total;
}

void rb_cl_release_buffers(rb_cl_backend *be)
{
    rb_cl_release_box_buffers(be);
    rb_cl_release_shape_tree(be);
}

static void release_buffer(rb_cl_backend *be, int b)
{
    if (be->bufs[b].mem)
        clReleaseMemObject(be->bufs[b].mem);
    be->bufs[b].mem = NULL;
    be->bufs[b].cap = 0;
    if (b == RB_CLB_BOXES)
        be->boxes_valid = 0;
    if (b == RB_CLB_NODES)
        be->nodes_valid = 0;
}

/* Keeps the device memory the query may hold within the budget: a shape
 * tree kept from an earlier query (cl_shapes.c uploads it again when it
 * walks), buffers this query does not use, then oversized ones, are
 * released when what earlier queries left would push the total over it. */
static void fit_budget(rb_cl_backend *be, const rb_cl_plan *plan)
{
    uint64_t total = be->shapes_bytes;
    for (int b = 0; b < RB_CLB_N; b++)
        total += plan->bytes[b] > be->bufs[b].cap ? plan->bytes[b]
                                                  : be->bufs[b].cap;
    if (total > be->budget && be->shapes_bytes) {
        total -= be->shapes_bytes;
        rb_cl_release_shape_tree(be);
    }
    for (int pass = 0; pass < 2 && total > be->budget; pass++) {
        for (int b = 0; b < RB_CLB_N && total > be->budget; b++) {
            int unused = plan->bytes[b] == 0;
            int oversized = be->bufs[b].cap > plan->bytes[b];
            if ((pass == 0 && unused) || (pass == 1 && oversized)) {
                total -= be->bufs[b].cap - plan->bytes[b];
                release_buffer(be, b);
            }
        }
    }
}

/* Grow-only: a buffer is replaced only when it is too small. */
static int ensure_buffer(rb_cl_backend *be, int b, size_t bytes,
                         cl_mem_flags flags)
{
    if (bytes == 0 || be->bufs[b].cap >= bytes)
        return RB_OK;
    release_buffer(be, b);
    cl_mem mem;
    int rc = RB_CL_NEW(&be->env, mem, clCreateBuffer, be->context, flags,
                       bytes, NULL);
    if (rc)
        return rc;
    be->bufs[b].mem = mem;
    be->bufs[b].cap = bytes;
    return RB_OK;
}

/* Adds the finished kernels' times to kernel_ms and releases their events;
 * on failure the remaining events are released all the same. */
static int drain_events(run_state *st)
{
    rb_cl_backend *be = st->be;
    int rc = RB_OK;
    if (st->n_events)
        rc = RB_CL(&be->env, clWaitForEvents, (cl_uint)st->n_events,
                   st->events);
    for (size_t i = 0; i < st->n_events; i++) {
        cl_ulong t0 = 0, t1 = 0;
        if (rc == RB_OK)
            rc = RB_CL(&be->env, clGetEventProfilingInfo, st->events[i],
                       CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
        if (rc == RB_OK)
            rc = RB_CL(&be->env, clGetEventProfilingInfo, st->events[i],
                       CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
        if (rc == RB_OK && t1 > t0)
            st->kernel_ms += (double)(t1 - t0) * 1e-6;
        clReleaseEvent(st->events[i]);
    }
    st->n_events = 0;
    return rc;
}

/* Kernel k over `global` items in work-groups of `local`, its event kept
 * for the kernel time. */
static int enqueue(run_state *st, cl_kernel k, size_t global, size_t local)
{
    rb_cl_backend *be = st->be;
    if (st->n_events == EVENT_BATCH) {
        int rc = drain_events(st);
        if (rc)
            return rc;
    }
    cl_event ev = NULL;
    rb_cl_note_launch(be, k);
    int rc = RB_CL(&be->env, clEnqueueNDRangeKernel, be->queue, k, 1, NULL,
                   &global, &local, 0, NULL, &ev);
    if (rc)
        return rc;
    st->events[st->n_events++] = ev;
    st->launches++;
    return RB_OK;
}

/* n items, in the backend's work-groups (the last one's extra items
 * return at once). */
static int launch(run_state *st, cl_kernel k, size_t n)
{
    size_t wg = st->be->wg;
    return enqueue(st, k, (n + wg - 1) / wg * wg, wg);
}

static int write_buf(rb_cl_backend *be, int b, size_t offset, size_t bytes,
                     const void *src)
{
    if (bytes == 0)
        return RB_OK;
    return RB_CL(&be->env, clEnqueueWriteBuffer, be->queue,
                 be->bufs[b].mem, CL_FALSE, offset, bytes, src, 0, NULL,
                 NULL);
}

/* The answers in buffer b into dst. Zero-copy: dst is the buffer's own
 * memory, and mapping it is what makes the device's writes visible. */
static int read_out(run_state *st, int b, size_t bytes, void *dst)
{
    rb_cl_backend *be = st->be;
    if (bytes == 0)
        return RB_OK;
    if (!st->wrap[b])
        return RB_CL(&be->env, clEnqueueReadBuffer, be->queue,
                     be->bufs[b].mem, CL_FALSE, 0, bytes, dst, 0, NULL,
                     NULL);
    void *p;
    int rc = RB_CL_NEW(&be->env, p, clEnqueueMapBuffer, be->queue,
                       st->wrap[b], CL_FALSE, CL_MAP_READ, 0, bytes, 0, NULL,
                       NULL);
    if (!rc)
        rc = RB_CL(&be->env, clEnqueueUnmapMemObject, be->queue, st->wrap[b],
                   p, 0, NULL, NULL);
    return rc;
}

/* The chunk's inputs (rays, pairs' boxes) and answer buffers: views of the
 * caller's arrays when zero_copy, else the grow-only buffers (rays written
 * here, answers read back by read_out). */
static int bind_chunk(run_state *st, size_t r0, size_t nr)
{
    rb_cl_backend *be = st->be;
    const rb_job *job = st->job;
    rb_results *res = st->res;
    size_t ray_rec = job->dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
    size_t box_rec = job->dims == 3 ? sizeof(rb_box) : sizeof(rb_box2);
    const char *rays = (const char *)job->rays + r0 * ray_rec;
    if (!be->zero_copy)
        return write_buf(be, RB_CLB_RAYS, 0, nr * ray_rec, rays);
    int rc = wrap_host(st, RB_CLB_RAYS, rays, nr * ray_rec,
                       CL_MEM_READ_ONLY);
    if (rc)
        return rc;
    switch (job->mode) {
    case RB_MODE_PAIRS:
        rc = wrap_host(st, RB_CLB_PAIR_BOXES,
                       (const char *)job->pair_boxes + r0 * box_rec,
                       nr * box_rec, CL_MEM_READ_ONLY);
        if (!rc)
            rc = wrap_host(st, RB_CLB_OUT, res->hits + r0,
                           nr * sizeof(rb_hit), CL_MEM_READ_WRITE);
        return rc;
    case RB_MODE_NEAREST:
        return wrap_host(st, RB_CLB_OUT, res->hits + r0,
                         nr * sizeof(rb_hit), CL_MEM_READ_WRITE);
    case RB_MODE_ANY:
        return wrap_host(st, RB_CLB_OUT, res->any + r0, nr,
                         CL_MEM_READ_WRITE);
    case RB_MODE_COUNT:
        return wrap_host(st, RB_CLB_OUT, res->counts + r0,
                         nr * sizeof(uint32_t), CL_MEM_READ_WRITE);
    case RB_MODE_ALL:
        rc = wrap_host(st, RB_CLB_OUT, res->counts + r0,
                       nr * sizeof(uint32_t), CL_MEM_READ_WRITE);
        if (!rc)
            rc = wrap_host(st, RB_CLB_LIST, res->list + r0 * job->max_hits,
                           nr * job->max_hits * sizeof(rb_list_hit),
                           CL_MEM_READ_WRITE);
        return rc;
    }
    return RB_OK;
}

#define ARG(k, i, v) RB_CL(&be->env, clSetKernelArg, k, i, sizeof(v), &(v))

/* The four output arguments of an every-box kernel, which follow each
 * other from `hits` on (hits, any, counts, lists, in exact.h's enums):
 * the mode's answer buffer where its answers go, null elsewhere. */
static int set_outputs(rb_cl_backend *be, cl_kernel k, rb_mode mode,
                       cl_mem out, cl_mem list, cl_uint hits)
{
    cl_mem none = NULL;
    cl_mem h = mode == RB_MODE_NEAREST ? out : none;
    cl_mem a = mode == RB_MODE_ANY ? out : none;
    cl_mem c = mode == RB_MODE_COUNT || mode == RB_MODE_ALL ? out : none;
    cl_mem l = mode == RB_MODE_ALL ? list : none;
    int rc = ARG(k, hits, h);
    if (!rc)
        rc = ARG(k, hits + 1, a);
    if (!rc)
        rc = ARG(k, hits + 2, c);
    if (!rc)
        rc = ARG(k, hits + 3, l);
    return rc;
}

static int run_pairs(run_state *st, size_t r0, size_t nr)
{
    rb_cl_backend *be = st->be;
    const rb_job *job = st->job;
    size_t box_rec = job->dims == 3 ? sizeof(rb_box) : sizeof(rb_box2);
    cl_kernel k = be->kernels[RB_CLK_PAIRS];
    cl_uint dims = job->dims, n = (cl_uint)nr, base = (cl_uint)r0;
    cl_mem rays = buf(st, RB_CLB_RAYS), boxes = buf(st, RB_CLB_PAIR_BOXES);
    cl_mem out = buf(st, RB_CLB_OUT);
    int rc = st->wrap[RB_CLB_PAIR_BOXES]
                 ? RB_OK
                 : write_buf(be, RB_CLB_PAIR_BOXES, 0, nr * box_rec,
                             (const char *)job->pair_boxes + r0 * box_rec);
    if (!rc)
        rc = ARG(k, RB_PAARG_RAYS, rays);
    if (!rc)
        rc = ARG(k, RB_PAARG_BOXES, boxes);
    if (!rc)
        rc = ARG(k, RB_PAARG_DIMS, dims);
    if (!rc)
        rc = ARG(k, RB_PAARG_N, n);
    if (!rc)
        rc = ARG(k, RB_PAARG_BASE, base);
    if (!rc)
        rc = ARG(k, RB_PAARG_HITS, out);
    if (!rc)
        rc = ARG(k, RB_PAARG_BAD, be->bufs[RB_CLB_BAD].mem);
    /* The wide kernel answers eight pairs per item. */
    if (!rc)
        rc = launch(st, k, be->wide ? (nr + 7) / 8 : nr);
    if (!rc)
        rc = read_out(st, RB_CLB_OUT, nr * sizeof(rb_hit),
                      st->res->hits + r0);
    return rc;
}

/* Boxes [b0, b1) into the box buffer, unless it holds them already. */
static int upload_boxes(run_state *st, size_t b0, size_t b1)
{
    rb_cl_backend *be = st->be;
    const rb_boxset *set = st->job->boxes;
    if (be->boxes_valid && be->boxes_uid == set->uid &&
        be->boxes_begin == b0 && be->boxes_end == b1)
        return RB_OK;
    be->boxes_valid = 0;
    int rc = RB_OK;
    if (st->plan.boxes_whole) {
        rc = write_buf(be, RB_CLB_BOXES, 0,
                       set->stride * 6 * sizeof(float), set->data);
    } else {
        for (int a = 0; a < 6 && !rc; a++)
            rc = write_buf(be, RB_CLB_BOXES,
                           (size_t)a * st->plan.box_stride * sizeof(float),
                           (b1 - b0) * sizeof(float),
                           set->data + (size_t)a * set->stride + b0);
    }
    if (rc)
        return rc;
    be->boxes_valid = 1;
    be->boxes_uid = set->uid;
    be->boxes_begin = b0;
    be->boxes_end = b1;
    return RB_OK;
}

/* The answers of rays [r0, r0 + nr) of an every-box mode to the caller. */
static int read_answers(run_state *st, size_t r0, size_t nr)
{
    const rb_job *job = st->job;
    rb_results *res = st->res;
    int rc;
    switch (job->mode) {
    case RB_MODE_NEAREST:
        return read_out(st, RB_CLB_OUT, nr * sizeof(rb_hit), res->hits + r0);
    case RB_MODE_ANY:
        return read_out(st, RB_CLB_OUT, nr, res->any + r0);
    case RB_MODE_COUNT:
        return read_out(st, RB_CLB_OUT, nr * sizeof(uint32_t),
                        res->counts + r0);
    case RB_MODE_ALL:
        rc = read_out(st, RB_CLB_OUT, nr * sizeof(uint32_t),
                      res->counts + r0);
        if (!rc)
            rc = read_out(st, RB_CLB_LIST,
                          nr * job->max_hits * sizeof(rb_list_hit),
                          res->list + r0 * job->max_hits);
        return rc;
    case RB_MODE_PAIRS:
        break;
    }
    return RB_OK;
}

static int run_scan(run_state *st, size_t r0, size_t nr)
{
    rb_cl_backend *be = st->be;
    const rb_job *job = st->job;
    const rb_boxset *set = job->boxes;
    static const rb_cl_kernel_id kernel_of[] = {
        [RB_MODE_NEAREST] = RB_CLK_NEAREST, [RB_MODE_ANY] = RB_CLK_ANY,
        [RB_MODE_COUNT] = RB_CLK_COUNT, [RB_MODE_ALL] = RB_CLK_ALL};
    cl_kernel k = be->kernels[kernel_of[job->mode]];
    cl_uint dims = job->dims, n = (cl_uint)nr;
    cl_uint stride = (cl_uint)st->plan.box_stride;
    cl_uint tile_n = (cl_uint)be->tile;
    cl_uint max_hits = job->max_hits;
    size_t per_chunk = st->plan.boxes ? st->plan.boxes : 1;
    cl_mem rays = buf(st, RB_CLB_RAYS), out = buf(st, RB_CLB_OUT);
    cl_mem list = buf(st, RB_CLB_LIST), bad = be->bufs[RB_CLB_BAD].mem;
    cl_uint ray_base = (cl_uint)r0;
    int rc = RB_OK;

    /* One launch per box chunk; zero boxes still take one launch, which
     * writes the empty answer. */
    size_t b0 = 0;
    do {
        size_t b1 = b0 + per_chunk < set->n ? b0 + per_chunk : set->n;
        cl_uint nb = (cl_uint)(b1 - b0), box_base = (cl_uint)b0;
        cl_int first = b0 == 0;
        rc = upload_boxes(st, b0, b1);
        if (!rc)
            rc = ARG(k, RB_SCARG_RAYS, rays);
        if (!rc)
            rc = ARG(k, RB_SCARG_DIMS, dims);
        if (!rc)
            rc = ARG(k, RB_SCARG_N_RAYS, n);
        if (!rc)
            rc = ARG(k, RB_SCARG_BOXES, be->bufs[RB_CLB_BOXES].mem);
        if (!rc)
            rc = ARG(k, RB_SCARG_STRIDE, stride);
        if (!rc)
            rc = ARG(k, RB_SCARG_NB, nb);
        if (!rc)
            rc = ARG(k, RB_SCARG_BOX_BASE, box_base);
        if (!rc)
            rc = RB_CL(&be->env, clSetKernelArg, k, RB_SCARG_TILE,
                       rb_cl_tile_bytes(be->tile), NULL);
        if (!rc)
            rc = ARG(k, RB_SCARG_TILE_N, tile_n);
        if (!rc)
            rc = ARG(k, RB_SCARG_FIRST, first);
        if (!rc)
            rc = ARG(k, RB_SCARG_MAX_HITS, max_hits);
        if (!rc)
            rc = set_outputs(be, k, job->mode, out, list, RB_SCARG_HITS);
        if (!rc)
            rc = ARG(k, RB_SCARG_RAY_BASE, ray_base);
        if (!rc)
            rc = ARG(k, RB_SCARG_BAD, bad);
        if (!rc)
            rc = launch(st, k, nr);
        b0 = b1;
    } while (!rc && b0 < set->n);
    if (rc)
        return rc;
    return read_answers(st, r0, nr);
}

/* The job's hierarchy into the node buffer, unless it holds it already. */
static int upload_nodes(run_state *st)
{
    rb_cl_backend *be = st->be;
    const rb_bvh *bvh = st->job->bvh;
    uint64_t uid = st->job->boxes->uid;
    if (be->nodes_valid && be->nodes_uid == uid && be->nodes_n == bvh->n_nodes)
        return RB_OK;
    be->nodes_valid = 0;
    int rc = write_buf(be, RB_CLB_NODES, 0,
                       bvh->n_nodes * sizeof(rb_bvh_node), bvh->nodes);
    if (rc)
        return rc;
    be->nodes_valid = 1;
    be->node_uploads++;
    be->nodes_uid = uid;
    be->nodes_n = bvh->n_nodes;
    return RB_OK;
}

/* any, count or nearest for the chunk's rays (order: their order, or
 * NULL) as ray streams (bvh.cl's rb_bvh_stream_*): tasks of up to
 * plan.stream_rays rays, at least as many as the launch's work-items
 * when the chunk allows (a task of fewer rays is still exact, only less
 * shared), which the items take in turn from a counter at the arena's
 * start: one launch a chunk. */
static int run_stream(run_state *st, size_t r0, size_t nr, cl_mem order)
{
    static const cl_uint no_task_taken = 0;
    rb_cl_backend *be = st->be;
    const rb_job *job = st->job;
    int which = rb_cl_stream_slot(job->mode);
    static const rb_cl_kernel_id kernel_of[] = {RB_CLK_BVH_STREAM_ANY,
                                                RB_CLK_BVH_STREAM_COUNT,
                                                RB_CLK_BVH_STREAM_NEAREST};
    cl_kernel k = be->kernels[kernel_of[which]];
    size_t items = st->plan.stream_tasks;
    size_t task = (nr + items - 1) / items;
    task = task < st->plan.stream_rays ? task : st->plan.stream_rays;
    size_t tasks = (nr + task - 1) / task;
    cl_uint dims = job->dims, n = (cl_uint)nr, ray_base = (cl_uint)r0;
    cl_uint task_rays = (cl_uint)task;
    /* stream_cap (tests): the kernel's lists run short */
    cl_uint task_words = (cl_uint)rb_cl_stream_words(task, job->bvh->depth,
                                                     be->stream_cap);
    cl_mem rays = buf(st, RB_CLB_RAYS), out = buf(st, RB_CLB_OUT);
    cl_mem nodes = be->bufs[RB_CLB_NODES].mem, bad = be->bufs[RB_CLB_BAD].mem;
    cl_mem arena = be->bufs[RB_CLB_ARENA].mem, none = NULL;
    /* the queue is in order: the previous launch has taken its tasks */
    int rc = write_buf(be, RB_CLB_ARENA, 0, sizeof no_task_taken,
                       &no_task_taken);
    if (!rc)
        rc = ARG(k, RB_STARG_RAYS, rays);
    if (!rc)
        rc = ARG(k, RB_STARG_DIMS, dims);
    if (!rc)
        rc = ARG(k, RB_STARG_N_RAYS, n);
    if (!rc)
        rc = ARG(k, RB_STARG_NODES, nodes);
    if (!rc)
        rc = ARG(k, RB_STARG_ORDER, order);
    cl_mem any_out = job->mode == RB_MODE_ANY ? out : none;
    cl_mem count_out = job->mode == RB_MODE_COUNT ? out : none;
    cl_mem hits_out = job->mode == RB_MODE_NEAREST ? out : none;
    if (!rc)
        rc = ARG(k, RB_STARG_ANY, any_out);
    if (!rc)
        rc = ARG(k, RB_STARG_COUNTS, count_out);
    if (!rc)
        rc = ARG(k, RB_STARG_HITS, hits_out);
    if (!rc)
        rc = ARG(k, RB_STARG_BAD, bad);
    if (!rc)
        rc = ARG(k, RB_STARG_ARENA, arena);
    if (!rc)
        rc = ARG(k, RB_STARG_TASK_RAYS, task_rays);
    if (!rc)
        rc = ARG(k, RB_STARG_TASK_WORDS, task_words);
    if (!rc)
        rc = ARG(k, RB_STARG_RAY_BASE, ray_base);
    if (!rc)
        /* a work-group an item */
        rc = enqueue(st, k, tasks < items ? tasks : items, 1);
    if (!rc)
        be->stream_launches[which]++;
    return rc;
}

/* Rays [r0, r0 + nr) through the hierarchy: one launch (or the ray
 * streams' launches, where the plan has them). */
static int run_walk(run_state *st, size_t r0, size_t nr)
{
    rb_cl_backend *be = st->be;
    const rb_job *job = st->job;
    static const rb_cl_kernel_id kernel_of[] = {
        [RB_MODE_NEAREST] = RB_CLK_BVH_NEAREST,
        [RB_MODE_ANY] = RB_CLK_BVH_ANY,
        [RB_MODE_COUNT] = RB_CLK_BVH_COUNT,
        [RB_MODE_ALL] = RB_CLK_BVH_ALL};
    cl_kernel k = be->kernels[kernel_of[job->mode]];
    cl_uint dims = job->dims, n = (cl_uint)nr, max_hits = job->max_hits;
    cl_uint ray_base = (cl_uint)r0;
    int rc = RB_OK;
    cl_mem order = NULL; /* a NULL buffer argument: rays in input order */
    if (st->order && nr >= RB_ORDER_MIN_RAYS) {
        uint32_t *chunk = st->order + r0;
        size_t rec = job->dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
        rb_ray_order(be->ctx->pool, (const char *)job->rays + r0 * rec,
                     job->dims, nr, st->lo, st->hi,
                     job->mode == RB_MODE_COUNT || job->mode == RB_MODE_ALL,
                     st->keys, chunk);
        if (be->zero_copy)
            rc = wrap_host(st, RB_CLB_ORDER, chunk, nr * sizeof *chunk,
                           CL_MEM_READ_ONLY);
        else
            rc = write_buf(be, RB_CLB_ORDER, 0, nr * sizeof *chunk, chunk);
        order = buf(st, RB_CLB_ORDER);
    }
    if (!rc && st->plan.stream_tasks) {
        rc = run_stream(st, r0, nr, order);
        if (!rc) {
            be->walks++;
            rc = read_answers(st, r0, nr);
        }
        return rc;
    }
    cl_mem rays = buf(st, RB_CLB_RAYS), out = buf(st, RB_CLB_OUT);
    cl_mem list = buf(st, RB_CLB_LIST), bad = be->bufs[RB_CLB_BAD].mem;
    cl_mem nodes = be->bufs[RB_CLB_NODES].mem;
    if (!rc)
        rc = ARG(k, RB_WAARG_RAYS, rays);
    if (!rc)
        rc = ARG(k, RB_WAARG_DIMS, dims);
    if (!rc)
        rc = ARG(k, RB_WAARG_N_RAYS, n);
    if (!rc)
        rc = ARG(k, RB_WAARG_NODES, nodes);
    if (!rc)
        rc = ARG(k, RB_WAARG_ORDER, order);
    if (!rc)
        rc = ARG(k, RB_WAARG_MAX_HITS, max_hits);
    if (!rc)
        rc = set_outputs(be, k, job->mode, out, list, RB_WAARG_HITS);
    if (!rc)
        rc = ARG(k, RB_WAARG_RAY_BASE, ray_base);
    if (!rc)
        rc = ARG(k, RB_WAARG_BAD, bad);
    if (!rc)
        rc = launch(st, k, nr);
    if (!rc) {
        be->walks++;
        rc = read_answers(st, r0, nr);
    }
    return rc;
}

/* After a failure (or an invalid chunk): nothing may still be running
 * against the caller's memory, and the queue must be usable again. */
static void settle(rb_cl_backend *be)
{
    if (clFinish(be->queue) == CL_SUCCESS)
        return;
    /* The next query recreates it (rb_cl_run). */
    clReleaseCommandQueue(be->queue);
    be->queue = NULL;
    be->boxes_valid = 0;
    be->nodes_valid = 0;
}

/* settle, and the run's events released unwaited: they belong to work
 * that failed or that settle finished. */
static void abandon(run_state *st)
{
    if (st->be->queue)
        settle(st->be);
    for (size_t i = 0; i < st->n_events; i++)
        clReleaseEvent(st->events[i]);
    st->n_events = 0;
}

static int allocate(run_state *st)
{
    rb_cl_backend *be = st->be;
    fit_budget(be, &st->plan);
    static const cl_mem_flags flags[RB_CLB_N] = {
        [RB_CLB_RAYS] = CL_MEM_READ_ONLY,
        [RB_CLB_PAIR_BOXES] = CL_MEM_READ_ONLY,
        [RB_CLB_BOXES] = CL_MEM_READ_ONLY,
        [RB_CLB_OUT] = CL_MEM_READ_WRITE, /* box chunks read it back */
        [RB_CLB_LIST] = CL_MEM_READ_WRITE,
        [RB_CLB_BAD] = CL_MEM_READ_WRITE,
        [RB_CLB_NODES] = CL_MEM_READ_ONLY,
        [RB_CLB_ORDER] = CL_MEM_READ_ONLY,
        [RB_CLB_ARENA] = CL_MEM_READ_WRITE,
    };
    for (int b = 0; b < RB_CLB_N; b++) {
        size_t bytes = b == RB_CLB_BAD ? sizeof(cl_uint) : st->plan.bytes[b];
        /* zero_copy: only the boxes, the nodes, the R6 word and the
         * streams' arena are device buffers */
        if (be->zero_copy && b != RB_CLB_BOXES && b != RB_CLB_BAD &&
            b != RB_CLB_NODES && b != RB_CLB_ARENA)
            continue;
        int rc = ensure_buffer(be, b, bytes, flags[b]);
        if (rc)
            return rc;
    }
    return RB_OK;
}

int rb_cl_run(rb_backend *self, rb_context *ctx, const rb_job *job,
              rb_results *res, rb_bad_input *bad)
{
    rb_cl_backend *be = (rb_cl_backend *)self;
    run_state st = {.be = be, .job = job, .res = res};
    rb_copy_str(res->info.device, sizeof res->info.device,
                be->dev.desc.name);
    if (job->n_rays == 0)
        return RB_OK;
    int rc;
    if (!be->queue) {
        rc = RB_CL_NEW(&be->env, be->queue, clCreateCommandQueue,
                       be->context, be->dev.id, CL_QUEUE_PROFILING_ENABLE);
        if (rc)
            return rc;
    }

    char why[256];
    size_t stream_tasks =
        be->wide && ctx->cl_streams ? RB_CL_STREAM_TASKS_PER_UNIT *
                       (be->dev.desc.compute_units ? be->dev.desc.compute_units
                                                   : 1)
                 : 0;
    /* nearest streams only when each item's task would be long enough */
    if (stream_tasks && ctx->cl_streams != RB_CL_STREAMS_ALWAYS &&
        !rb_bvh_streams_for(job->mode, job->n_rays / stream_tasks))
        stream_tasks = 0;
    rc = rb_cl_plan_job(job, be->max_buf, be->budget, be->wg, stream_tasks,
                        &st.plan, why, sizeof why);
    if (rc)
        return rb_fail(ctx, rc, "OpenCL: %s", why);
    if (st.plan.bvh)
        rb_bvh_bounds(job->bvh, st.lo, st.hi);
    if (st.plan.bvh && st.plan.rays >= RB_ORDER_MIN_RAYS &&
        (be->dev.is_gpu || ctx->walk_order == RB_WALK_ORDER_ALWAYS ||
         rb_order_pays(job->rays, job->dims, job->n_rays, st.lo, st.hi,
                       job->bvh->n_nodes * sizeof(rb_bvh_node)))) {
        /* The order of every chunk stays until the queue is idle (the
         * device reads it); without memory for it, rays go in input
         * order, with the same answers. */
        st.order = rb_alloc(ctx, job->n_rays * sizeof *st.order, 64);
        st.keys = rb_alloc(ctx, 2 * st.plan.rays * sizeof *st.keys, 64);
        if (!st.order || !st.keys) {
            rb_free(ctx, st.order);
            st.order = NULL;
        }
    }
    rc = allocate(&st);
    static const cl_uint none = 0xffffffffu;
    if (!rc)
        rc = write_buf(be, RB_CLB_BAD, 0, sizeof none, &none);
    if (!rc && st.plan.bvh)
        rc = upload_nodes(&st);

    for (size_t r0 = 0; !rc && r0 < job->n_rays; r0 += st.plan.rays) {
        size_t nr = job->n_rays - r0 < st.plan.rays ? job->n_rays - r0
                                                    : st.plan.rays;
        if (rb_job_stopped(job)) {
            rc = rb_fail(ctx, RB_ECANCELED, "the query was stopped");
            break;
        }
        rc = bind_chunk(&st, r0, nr);
        if (rc)
            break;
        if (job->mode == RB_MODE_PAIRS)
            rc = run_pairs(&st, r0, nr);
        else if (st.plan.bvh)
            rc = run_walk(&st, r0, nr);
        else
            rc = run_scan(&st, r0, nr);
    }
    if (!rc)
        rc = RB_CL(&be->env, clFinish, be->queue);
    if (!rc)
        rc = drain_events(&st);
    cl_uint code = none;
    if (!rc)
        rc = RB_CL(&be->env, clEnqueueReadBuffer, be->queue,
                   be->bufs[RB_CLB_BAD].mem, CL_TRUE, 0, sizeof code, &code,
                   0, NULL, NULL);
    if (!rc && code != none) {
        bad->index = code / 2;
        bad->element = (code & 1) ? RB_ELEMENT_BOX : RB_ELEMENT_RAY;
        rc = RB_EINPUT;
    }
    unwrap(&st); /* after clFinish, or settle() below */

    if (rc) {
        abandon(&st);
        if (rc != RB_EINPUT) {
            be->boxes_valid = 0;
            be->nodes_valid = 0;
        }
        if (rc == RB_EDEVMEM)
            rb_cl_release_buffers(be);
    }
    rb_free(ctx, st.order); /* the queue is idle (or gone) by now */
    rb_free(ctx, st.keys);
    res->info.chunks = st.launches;
    res->info.kernel_ms = st.kernel_ms;
    return rc;
}

/* ---- visibility (kernels/visibility.cl) */

/* Bytes of the bit matrix a launch answers (8 segments a byte, one
 * work-item a byte): 2M segments, as many items as a large GPU holds at
 * once, and short enough on a CPU device for the stop callback to be
 * asked often (between launches). */
#define VIS_LAUNCH_BYTES ((size_t)1 << 18)

int rb_cl_run_visibility(rb_backend *self, rb_context *ctx,
                         const rb_vis_job *vj, uint8_t *bits,
                         rb_run_info *info)
{
    rb_cl_backend *be = (rb_cl_backend *)self;
    /* A device that flushes subnormal operands would subtract other
     * numbers than the host does (exact.h, rb_segment_dir). */
    if (be->vis_explicit || (vj->subnormal_points && !be->dev.desc.denormals))
        return RB_VIS_DECLINED;
    size_t stride = (vj->n_targets + 7) / 8;
    size_t rows = VIS_LAUNCH_BYTES / stride;
    if (rows == 0)
        rows = 1;
    if (rows > vj->n_observers)
        rows = vj->n_observers;
    rb_job job = {.mode = RB_MODE_ANY, .dims = 3, .boxes = vj->boxes,
                  .bvh = vj->bvh};
    run_state st = {.be = be, .job = &job};
    st.plan.bvh = vj->bvh != NULL;
    st.plan.boxes_whole = 1;
    st.plan.box_stride = vj->boxes->stride;
    uint64_t scene_bytes = st.plan.bvh
                               ? (uint64_t)vj->bvh->n_nodes *
                                     sizeof(rb_bvh_node)
                               : (uint64_t)vj->boxes->stride * 6 *
                                     sizeof(float);
    uint64_t obs_bytes = (uint64_t)vj->n_observers * 3 * sizeof(float);
    uint64_t tgt_bytes = (uint64_t)vj->n_targets * 3 * sizeof(float);
    uint64_t out_bytes = (uint64_t)rows * stride;
    /* The launch's global size and the kernel's indices are 32-bit. */
    if (scene_bytes > be->max_buf || obs_bytes > be->max_buf ||
        tgt_bytes > be->max_buf || out_bytes > be->max_buf ||
        scene_bytes + obs_bytes + tgt_bytes + out_bytes > be->budget ||
        vj->n_observers > UINT32_MAX || out_bytes > UINT32_MAX / 2)
        return RB_VIS_DECLINED;
    if (scene_bytes == 0)
        scene_bytes = 6 * sizeof(float); /* an empty scene: a dummy */
    st.plan.bytes[st.plan.bvh ? RB_CLB_NODES : RB_CLB_BOXES] =
        (size_t)scene_bytes;
    st.plan.bytes[RB_CLB_OBSERVERS] = (size_t)obs_bytes;
    st.plan.bytes[RB_CLB_TARGETS] = (size_t)tgt_bytes;
    st.plan.bytes[RB_CLB_OUT] = (size_t)out_bytes;

    rb_copy_str(info->backend, sizeof info->backend, "opencl");
    rb_copy_str(info->device, sizeof info->device, be->dev.desc.name);
    int rc = RB_OK;
    if (!be->queue)
        rc = RB_CL_NEW(&be->env, be->queue, clCreateCommandQueue,
                       be->context, be->dev.id, CL_QUEUE_PROFILING_ENABLE);
    if (rc)
        return rc;
    fit_budget(be, &st.plan);
    static const int used[] = {RB_CLB_BOXES, RB_CLB_NODES, RB_CLB_OBSERVERS,
                               RB_CLB_TARGETS, RB_CLB_OUT};
    for (size_t u = 0; u < sizeof used / sizeof *used && !rc; u++) {
        int b = used[u];
        /* zero_copy: the points and the answers stay in the caller's
         * memory; the scene is a device buffer as for every query */
        if (be->zero_copy && b != RB_CLB_BOXES && b != RB_CLB_NODES)
            continue;
        rc = ensure_buffer(be, b, st.plan.bytes[b],
                           b == RB_CLB_OUT ? CL_MEM_READ_WRITE
                                           : CL_MEM_READ_ONLY);
    }
    if (!rc && be->zero_copy) {
        rc = wrap_host(&st, RB_CLB_OBSERVERS, vj->observers,
                       (size_t)obs_bytes, CL_MEM_READ_ONLY);
        if (!rc)
            rc = wrap_host(&st, RB_CLB_TARGETS, vj->targets,
                           (size_t)tgt_bytes, CL_MEM_READ_ONLY);
    } else if (!rc) {
        rc = write_buf(be, RB_CLB_OBSERVERS, 0, (size_t)obs_bytes,
                       vj->observers);
        if (!rc)
            rc = write_buf(be, RB_CLB_TARGETS, 0, (size_t)tgt_bytes,
                           vj->targets);
    }
    if (!rc && st.plan.bvh)
        rc = upload_nodes(&st);
    else if (!rc && vj->boxes->n)
        rc = upload_boxes(&st, 0, vj->boxes->n);

    cl_kernel k = be->kernels[st.plan.bvh ? RB_CLK_VIS_BVH : RB_CLK_VIS_BRUTE];
    cl_mem scene = be->bufs[st.plan.bvh ? RB_CLB_NODES : RB_CLB_BOXES].mem;
    cl_mem obs = buf(&st, RB_CLB_OBSERVERS), tgt = buf(&st, RB_CLB_TARGETS);
    cl_uint n_targets = (cl_uint)vj->n_targets;
    cl_uint box_stride = (cl_uint)vj->boxes->stride;
    cl_uint nb = (cl_uint)vj->boxes->n;
    cl_float tmin = vj->tmin, tmax = vj->tmax;
    if (!rc)
        rc = ARG(k, RB_VIARG_OBSERVERS, obs);
    if (!rc)
        rc = ARG(k, RB_VIARG_TARGETS, tgt);
    if (!rc)
        rc = ARG(k, RB_VIARG_N_TARGETS, n_targets);
    if (!rc)
        rc = ARG(k, RB_VIARG_TMIN, tmin);
    if (!rc)
        rc = ARG(k, RB_VIARG_TMAX, tmax);
    if (!rc)
        rc = ARG(k, RB_VIARG_SCENE, scene);
    if (!rc)
        rc = ARG(k, RB_VIARG_STRIDE, box_stride);
    if (!rc)
        rc = ARG(k, RB_VIARG_NB, nb);
    for (size_t r0 = 0; !rc && r0 < vj->n_observers; r0 += rows) {
        if (vj->stop && vj->stop(vj->stop_user)) {
            rc = rb_fail(ctx, RB_ECANCELED, "the query was stopped");
            break;
        }
        size_t nr = vj->n_observers - r0 < rows ? vj->n_observers - r0
                                                : rows;
        uint8_t *dst = bits + r0 * stride;
        if (be->zero_copy)
            rc = wrap_host(&st, RB_CLB_OUT, dst, nr * stride,
                           CL_MEM_READ_WRITE);
        cl_mem out = buf(&st, RB_CLB_OUT);
        cl_uint row0 = (cl_uint)r0, n_rows = (cl_uint)nr;
        if (!rc)
            rc = ARG(k, RB_VIARG_ROW0, row0);
        if (!rc)
            rc = ARG(k, RB_VIARG_ROWS, n_rows);
        if (!rc)
            rc = ARG(k, RB_VIARG_BITS, out);
        if (!rc)
            rc = launch(&st, k, nr * stride);
        if (!rc) {
            be->vis_launches++;
            if (st.plan.bvh)
                be->walks++;
            rc = read_out(&st, RB_CLB_OUT, nr * stride, dst);
        }
    }
    if (!rc)
        rc = RB_CL(&be->env, clFinish, be->queue);
    if (!rc)
        rc = drain_events(&st);
    unwrap(&st); /* after clFinish, or settle() below */
    if (rc) {
        abandon(&st);
        be->boxes_valid = 0;
        be->nodes_valid = 0;
        if (rc == RB_EDEVMEM)
            rb_cl_release_buffers(be);
    }
    info->chunks = st.launches;
    info->kernel_ms = st.kernel_ms;
    return rc;
}
