/*
 * cl_shapes.c - the shape pass on the OpenCL device (kernels/shapes.cl):
 * the prepared shapes are copied to the device once a query, then the
 * rays go in chunks, each with the answers the box pass left for its rays
 * (the kernels combine with them) and back.
 *
 * Buffers are made per query and released after it: shape queries are
 * new, and their transfers are small beside the tests they stand for
 * (every ray against every shape). The kernels are brute force; the CPU
 * backend walks a hierarchy over the bounded shapes instead where one was
 * built (the answers are the same, SPEC R16).
 */
#include <string.h>

#include "cl_internal.h"

/* Rays per launch: 32 bytes in, at most 16 + max_hits * 12 out. */
#define CHUNK_RAYS ((size_t)1 << 18)

typedef struct shape_bufs {
    cl_mem rays, lbox, ball, half, ids, hits, any, counts, lists;
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

int rb_cl_run_shapes(rb_backend *self, rb_context *ctx, const rb_job *job,
                     const rb_shapeset *set, rb_results *res)
{
    rb_cl_backend *be = (rb_cl_backend *)self;
    rb_mode mode = job->mode;
    const rb_ray *rays = job->rays;
    size_t n_rays = job->n_rays;
    uint32_t max_hits = job->max_hits;
    if (!n_rays)
        return RB_OK;
    size_t chunk = n_rays < CHUNK_RAYS ? n_rays : CHUNK_RAYS;
    size_t n_lbox = set->n_obb + set->n_xbox;
    shape_bufs b;
    memset(&b, 0, sizeof b);
    out_array outs[3];
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
        rc = make(be, &b.rays, chunk * sizeof(rb_ray));
    switch (mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        if (!rc)
            rc = make(be, &b.hits, chunk * sizeof(rb_hit));
        outs[n_outs++] = (out_array){b.hits, res->hits, sizeof(rb_hit)};
        break;
    case RB_MODE_ANY:
        if (!rc)
            rc = make(be, &b.any, chunk);
        outs[n_outs++] = (out_array){b.any, res->any, 1};
        break;
    case RB_MODE_COUNT:
        if (!rc)
            rc = make(be, &b.counts, chunk * sizeof(uint32_t));
        outs[n_outs++] = (out_array){b.counts, res->counts, sizeof(uint32_t)};
        break;
    case RB_MODE_ALL:
        if (!rc)
            rc = make(be, &b.counts, chunk * sizeof(uint32_t));
        if (!rc)
            rc = make(be, &b.lists, chunk * max_hits * sizeof(rb_list_hit));
        outs[n_outs++] = (out_array){b.counts, res->counts, sizeof(uint32_t)};
        outs[n_outs++] = (out_array){b.lists, res->list,
                                     max_hits * sizeof(rb_list_hit)};
        break;
    }
    cl_kernel k = be->kernels[RB_CLK_SHAPES_PAIRS + (int)mode];
    if (!rc)
        rc = arg_mem(be, k, RB_SHARG_RAYS, b.rays);
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
        rc = arg_mem(be, k, RB_SHARG_HITS, b.hits);
    if (!rc)
        rc = arg_mem(be, k, RB_SHARG_ANY, b.any);
    if (!rc)
        rc = arg_mem(be, k, RB_SHARG_COUNTS, b.counts);
    if (!rc)
        rc = arg_mem(be, k, RB_SHARG_LISTS, b.lists);
    if (!rc)
        rc = arg_uint(be, k, RB_SHARG_MAX_HITS, max_hits);
    double kernel_ms = 0;
    for (size_t r0 = 0; !rc && r0 < n_rays; r0 += chunk) {
        size_t n = n_rays - r0 < chunk ? n_rays - r0 : chunk;
        if (rb_job_stopped(job)) {
            rc = rb_fail(ctx, RB_ECANCELED, "the query was stopped");
            break;
        }
        rc = RB_CL(&be->env, clEnqueueWriteBuffer, be->queue, b.rays,
                   CL_FALSE, 0, n * sizeof(rb_ray), rays + r0, 0, NULL,
                   NULL);
        /* pairs writes every answer; the other modes combine with the box
         * pass's. */
        for (int o = 0; !rc && mode != RB_MODE_PAIRS && o < n_outs; o++)
            rc = transfer(be, &outs[o], r0, n, 1);
        if (!rc)
            rc = arg_uint(be, k, RB_SHARG_N_RAYS, n);
        size_t global = (n + be->wg - 1) / be->wg * be->wg;
        cl_event ev = NULL;
        rb_cl_note_launch(be, k);
        if (!rc)
            rc = RB_CL(&be->env, clEnqueueNDRangeKernel, be->queue, k, 1,
                       NULL, &global, &be->wg, 0, NULL, &ev);
        for (int o = 0; !rc && o < n_outs; o++)
            rc = transfer(be, &outs[o], r0, n, 0);
        if (!rc)
            rc = RB_CL(&be->env, clFinish, be->queue);
        cl_ulong t0 = 0, t1 = 0;
        if (!rc && ev &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START,
                                    sizeof t0, &t0, NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1,
                                    &t1, NULL) == CL_SUCCESS &&
            t1 > t0)
            kernel_ms += (double)(t1 - t0) * 1e-6;
        if (ev)
            clReleaseEvent(ev);
        res->info.chunks++;
    }
    res->info.kernel_ms += kernel_ms;
    if (rc)
        clFinish(be->queue); /* nothing may still read the host arrays */
    release_all(&b);
    return rc;
}
