/*
 * cl_backend.c - the OpenCL backend: creation on the chosen device,
 * describe, destroy, and the test hooks of cl_testhook.h. Queries run in
 * cl_run.c; the program is built in cl_program.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"
#include "cl_testhook.h"

static void cl_describe(const rb_backend *self, rb_backend_info *out)
{
    const rb_cl_backend *be = (const rb_cl_backend *)self;
    const rb_device_desc *d = &be->dev.desc;
    rb_copy_str(out->backend, sizeof out->backend, "opencl");
    rb_copy_str(out->device, sizeof out->device, d->name);
    rb_copy_str(out->platform, sizeof out->platform, d->platform);
    rb_copy_str(out->driver, sizeof out->driver, d->driver);
    rb_copy_str(out->simd, sizeof out->simd, "");
    out->is_gpu = be->dev.is_gpu;
    out->exact_division = be->exact_division;
    out->denormals = d->denormals;
    out->compute_units = d->compute_units;
    out->threads = 0;
    out->global_mem = d->global_mem;
    out->max_buffer_bytes = be->max_buf;
}

static void cl_destroy(rb_backend *self)
{
    rb_cl_backend *be = (rb_cl_backend *)self;
    if (!be)
        return;
    if (be->queue)
        clFinish(be->queue);
    rb_cl_release_buffers(be);
    rb_cl_program_release(be);
    if (be->queue)
        clReleaseCommandQueue(be->queue);
    if (be->context)
        clReleaseContext(be->context);
    rb_free(be->ctx, be);
}

static const struct rb_backend_ops cl_ops = {
    .name = "opencl",
    .bvh = 1, /* kernels/bvh.cl; cl_plan.c falls back to brute force */
    .run = rb_cl_run,
    .run_shapes = rb_cl_run_shapes,
    .run_joint = rb_cl_run_joint,
    .run_visibility = rb_cl_run_visibility,
    .describe = cl_describe,
    .destroy = cl_destroy,
};

/* The launch shape: RB_CL_WORK_GROUP items, moved to a multiple of the
 * kernels' preferred multiple and kept within what every kernel and the
 * device accept; a __local tile of RB_CL_TILE_PER_ITEM boxes per item,
 * halved until it fits the local memory. */
static int pick_work_group(rb_cl_backend *be, char *why, size_t why_len)
{
    size_t pref = 1, kmax = be->dev.max_work_group;
    cl_ulong local_used = 0;
    for (int k = 0; k < RB_CLK_N; k++) {
        /* The ray streams run one item a work-group (cl_run.c). */
        if (rb_cl_kernel_wide_only(k))
            continue;
        size_t kwg = 0, kpref = 0;
        cl_ulong klocal = 0;
        int rc = RB_CL(&be->env, clGetKernelWorkGroupInfo, be->kernels[k],
                       be->dev.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg,
                       &kwg, NULL);
        if (!rc)
            rc = RB_CL(&be->env, clGetKernelWorkGroupInfo, be->kernels[k],
                       be->dev.id,
                       CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                       sizeof kpref, &kpref, NULL);
        if (!rc)
            rc = RB_CL(&be->env, clGetKernelWorkGroupInfo, be->kernels[k],
                       be->dev.id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof klocal,
                       &klocal, NULL);
        if (rc) {
            rb_copy_str(why, why_len, be->env.msg);
            return rc;
        }
        if (kwg && (kmax == 0 || kwg < kmax))
            kmax = kwg;
        if (kpref > pref)
            pref = kpref;
        if (klocal > local_used)
            local_used = klocal;
    }
    size_t wg = RB_CL_WORK_GROUP;
    if (wg % pref)
        wg = (wg / pref + 1) * pref;
    if (kmax && wg > kmax)
        wg = kmax >= pref ? kmax / pref * pref : kmax;
    be->wg = wg ? wg : 1;

    uint64_t room = be->dev.local_mem > local_used
                        ? be->dev.local_mem - local_used
                        : 0;
    size_t tile = be->wg * RB_CL_TILE_PER_ITEM;
    while (tile > 1 && rb_cl_tile_bytes(tile) > room)
        tile /= 2;
    if (rb_cl_tile_bytes(tile) > room) {
        snprintf(why, why_len, "%s: %llu bytes of local memory are too "
                               "few for a tile of boxes",
                 be->dev.desc.name, (unsigned long long)room);
        return RB_ENODEV;
    }
    be->tile = tile;
    return RB_OK;
}

/* Buffer limit and budget from the options, within the device's. */
static void pick_limits(rb_cl_backend *be)
{
    const rb_context_options *opt = &be->ctx->opt;
    const rb_device_desc *d = &be->dev.desc;
    uint64_t max_buf = d->max_alloc ? d->max_alloc : UINT64_MAX;
    if (opt->max_buffer_bytes && opt->max_buffer_bytes < max_buf)
        max_buf = opt->max_buffer_bytes;
    if (max_buf > SIZE_MAX)
        max_buf = SIZE_MAX;
    uint64_t budget = opt->memory_budget ? opt->memory_budget
                                         : d->global_mem / 2;
    if (d->global_mem && budget > d->global_mem)
        budget = d->global_mem;
    be->max_buf = max_buf;
    be->budget = budget;
}

int rb_cl_backend_create(rb_context *ctx, int want_gpu_only, rb_backend **out,
                         char *why, size_t why_len)
{
    *out = NULL;
    rb_cl_device *devs = NULL;
    size_t n = 0;
    char reason[512] = "";
    int rc = rb_cl_discover(&ctx->alloc, &devs, &n, reason, sizeof reason);
    if (rc) {
        rb_copy_str(why, why_len, "out of memory listing OpenCL devices");
        return rc;
    }
    if (n == 0) {
        rb_copy_str(why, why_len, reason);
        return RB_ENODEV;
    }
    long pick = rb_cl_pick(devs, n, ctx->opt.device_name,
                           ctx->opt.device_index, want_gpu_only, why,
                           why_len);
    if (pick < 0) {
        rb_free(ctx, devs);
        return RB_ENODEV;
    }
    rb_cl_backend *be = rb_calloc(ctx, sizeof *be, 64);
    if (!be) {
        rb_free(ctx, devs);
        rb_copy_str(why, why_len, "out of memory");
        return RB_ENOMEM;
    }
    be->base.ops = &cl_ops;
    be->ctx = ctx;
    be->env.ctx = ctx;
    be->env.fail_after = -1;
    be->dev = devs[pick];
    rb_free(ctx, devs);

    if (!be->dev.available || !be->dev.compiler) {
        snprintf(why, why_len, "OpenCL device %s is %s", be->dev.desc.name,
                 !be->dev.available ? "not available"
                                    : "without a compiler");
        rc = RB_ENODEV;
        goto fail;
    }
    be->exact_division = be->dev.desc.exact_division || be->dev.fp64;
    /* CPU devices get the float8 kernels, GPUs and accelerators the tiled
     * ones; RAYBOX_CL_KERNELS=tiled|wide overrides (tests run both). */
    const char *variant = getenv("RAYBOX_CL_KERNELS");
    if (variant && strcmp(variant, "wide") == 0)
        be->wide = 1;
    else if (variant && strcmp(variant, "tiled") == 0)
        be->wide = 0;
    else
        be->wide = !be->dev.is_gpu;
    be->bvh_stack = be->wide ? RB_CL_BVH_STACK_WIDE : RB_CL_BVH_STACK_TILED;
    const char *stack = getenv("RAYBOX_CL_BVH_STACK");
    if (stack) {
        char *end;
        unsigned long v = strtoul(stack, &end, 10);
        if (end == stack || *end || v == 0 || v > RB_CL_BVH_STACK_MAX ||
            (v & (v - 1))) {
            snprintf(why, why_len,
                     "RAYBOX_CL_BVH_STACK=%s: not a power of two in 1..%u",
                     stack, RB_CL_BVH_STACK_MAX);
            rc = RB_EINVAL;
            goto fail;
        }
        be->bvh_stack = (unsigned)v;
    }
    const char *vis = getenv("RAYBOX_CL_VISIBILITY");
    if (vis && strcmp(vis, "segments") != 0 && strcmp(vis, "kernel") != 0) {
        snprintf(why, why_len,
                 "RAYBOX_CL_VISIBILITY=%s: not \"kernel\" or \"segments\"",
                 vis);
        rc = RB_EINVAL;
        goto fail;
    }
    be->vis_explicit = vis && strcmp(vis, "segments") == 0;
    /* A CPU device reads and writes the caller's arrays in place
     * (CL_MEM_USE_HOST_PTR): copying them would be all the cost there.
     * RAYBOX_CL_ZERO_COPY=0|1 overrides (tests run both paths). */
    const char *zc = getenv("RAYBOX_CL_ZERO_COPY");
    if (zc && (strcmp(zc, "0") == 0 || strcmp(zc, "1") == 0))
        be->zero_copy = zc[0] == '1';
    else
        be->zero_copy = !be->dev.is_gpu && be->dev.host_unified;

    cl_context_properties props[] = {
        CL_CONTEXT_PLATFORM, (cl_context_properties)be->dev.platform, 0};
    rc = RB_CL_NEW(&be->env, be->context, clCreateContext, props, 1,
                   &be->dev.id, NULL, NULL);
    if (!rc)
        rc = RB_CL_NEW(&be->env, be->queue, clCreateCommandQueue,
                       be->context, be->dev.id, CL_QUEUE_PROFILING_ENABLE);
    if (rc) {
        rb_copy_str(why, why_len, be->env.msg);
        goto fail;
    }
    rc = rb_cl_program_build(be, why, why_len);
    if (!rc)
        rc = pick_work_group(be, why, why_len);
    if (rc)
        goto fail;
    pick_limits(be);
    *out = &be->base;
    return RB_OK;
fail:
    cl_destroy(&be->base);
    return rc;
}

/* ---- test hooks (cl_testhook.h): on a context over several devices
 * (cl_multi.c), counters add up over them, the rest is the first one's. */

/* The backends a hook looks at: ctx's own, or its devices'. */
static size_t hook_backends(const rb_context *ctx, rb_cl_backend **out)
{
    if (!ctx || !ctx->cl)
        return 0;
    rb_context *devs[RB_MAX_DEVICES];
    size_t n = rb_cl_multi_devices(ctx->cl, devs, RB_MAX_DEVICES);
    if (!n) {
        out[0] = (rb_cl_backend *)ctx->cl;
        return 1;
    }
    for (size_t k = 0; k < n; k++)
        out[k] = (rb_cl_backend *)devs[k]->cl;
    return n;
}

void rb_cl_fail_after(rb_context *ctx, long n)
{
    rb_cl_backend *b[RB_MAX_DEVICES];
    if (hook_backends(ctx, b))
        b[0]->env.fail_after = n < 0 ? -1 : n;
}

#define HOOK_SUM(field)                                                            rb_cl_backend *b[RB_MAX_DEVICES];                                              size_t n = hook_backends(ctx, b);                                              unsigned long long sum = 0;                                                    for (size_t k = 0; k < n; k++)                                                     sum += b[k]->field;                                                        return sum

unsigned long long rb_cl_calls(const rb_context *ctx)
{
    HOOK_SUM(env.calls);
}

unsigned long long rb_cl_walks(const rb_context *ctx)
{
    HOOK_SUM(walks);
}

unsigned long long rb_cl_node_uploads(const rb_context *ctx)
{
    HOOK_SUM(node_uploads);
}

unsigned long long rb_cl_stream_launches(const rb_context *ctx,
                                         rb_mode mode)
{
    HOOK_SUM(stream_launches[rb_cl_stream_slot(mode)]);
}

void rb_cl_stream_cap(rb_context *ctx, size_t words_per_ray)
{
    rb_cl_backend *b[RB_MAX_DEVICES];
    size_t n = hook_backends(ctx, b);
    for (size_t k = 0; k < n; k++)
        b[k]->stream_cap = words_per_ray;
}

unsigned long long rb_cl_shape_walks(const rb_context *ctx)
{
    HOOK_SUM(shape_walks);
}

unsigned long long rb_cl_shape_uploads(const rb_context *ctx)
{
    HOOK_SUM(shape_uploads);
}

unsigned long long rb_cl_kept_bytes(const rb_context *ctx)
{
    rb_cl_backend *b[RB_MAX_DEVICES];
    size_t n = hook_backends(ctx, b);
    unsigned long long sum = 0;
    for (size_t k = 0; k < n; k++)
        sum += rb_cl_box_buffer_bytes(b[k]) + b[k]->shapes_bytes;
    return sum;
}

unsigned long long rb_cl_vis_launches(const rb_context *ctx)
{
    HOOK_SUM(vis_launches);
}

size_t rb_cl_kernels_unlaunched(const rb_context *ctx, char *names,
                                size_t len)
{
    if (len)
        names[0] = '\0';
    rb_cl_backend *b[RB_MAX_DEVICES];
    size_t nb = hook_backends(ctx, b), n = 0, used = 0;
    for (int i = 0; nb && i < RB_CLK_N; i++) {
        int everywhere = 1; /* launched on every device that has it */
        for (size_t k = 0; k < nb; k++)
            everywhere &= !b[k]->kernels[i] || ((b[k]->launched >> i) & 1u);
        if (everywhere)
            continue;
        n++;
        if (used < len)
            used += (size_t)snprintf(names + used, len - used, "%s%s",
                                     used ? " " : "", rb_cl_kernel_name(i));
    }
    return n;
}

unsigned rb_cl_bvh_stack(const rb_context *ctx)
{
    rb_cl_backend *b[RB_MAX_DEVICES];
    return hook_backends(ctx, b) ? b[0]->bvh_stack : 0;
}

int rb_cl_program_from_cache(const rb_context *ctx)
{
    rb_cl_backend *b[RB_MAX_DEVICES];
    return hook_backends(ctx, b) ? b[0]->from_cache : -1;
}

size_t rb_cl_device_count(const rb_context *ctx)
{
    rb_cl_backend *b[RB_MAX_DEVICES];
    return hook_backends(ctx, b);
}

size_t rb_cl_device_speeds(const rb_context *ctx, double *out, size_t cap)
{
    if (!ctx || !ctx->cl)
        return 0;
    return (size_t)rb_cl_multi_speeds(ctx->cl, out, cap);
}
