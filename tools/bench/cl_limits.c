/* cl_limits.c - an OpenCL device's own limits, measured with the OpenCL
 * API directly (not through libraybox), so that the library's figures can
 * be read as fractions of what the device can do at all:
 *
 *   copy bandwidth   a float4 copy kernel between two device buffers,
 *                    timed by profiling events (device time); bytes read
 *                    plus written, as the CPU copy loop counts them;
 *   host->device,    blocking clEnqueueWrite/ReadBuffer from ordinary
 *   device->host     (pageable) host memory, wall time: what the library
 *                    does with a caller's arrays; and the same from
 *                    pinned memory (CL_MEM_ALLOC_HOST_PTR, mapped), the
 *                    fast path drivers offer;
 *   launch latency   an empty kernel: enqueue + clFinish per launch, and
 *                    back-to-back launches finished together.
 *
 * Buffers hold random bits so that no memory compression flatters a copy.
 * Every OpenCL error is reported in out->error; nothing aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "bench.h"

static const char source[] =
    "__kernel void rbench_copy(__global const float4 *a, __global float4 *b)\n"
    "{ size_t i = get_global_id(0); b[i] = a[i]; }\n"
    "__kernel void rbench_empty(__global float *unused) { }\n";

#define BATCHED_LAUNCHES 64

typedef struct cl_env {
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    cl_kernel copy, empty;
    cl_mem a, b, pinned;
    void *host[2];     /* pageable, rotated */
    void *pinned_ptr;  /* mapped `pinned` */
    size_t bytes;
    char *error;
    size_t error_len;
} cl_env;

static int failed(cl_env *e, const char *call, cl_int err)
{
    if (err == CL_SUCCESS)
        return 0;
    if (!e->error[0])
        snprintf(e->error, e->error_len, "%s failed (OpenCL error %d)", call,
                 (int)err);
    return -1;
}

/* The device rb_devices_list calls `index`: the same walk (every platform,
 * every device) and the same name. */
static int find_device(int index, const char *name, cl_device_id *out,
                       char *why, size_t len)
{
    cl_uint np = 0;
    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0) {
        snprintf(why, len, "no OpenCL platform");
        return -1;
    }
    cl_platform_id plats[16];
    if (np > 16)
        np = 16;
    if (clGetPlatformIDs(np, plats, NULL) != CL_SUCCESS) {
        snprintf(why, len, "clGetPlatformIDs failed");
        return -1;
    }
    int seen = 0, by_name = -1;
    cl_device_id by_name_id = NULL;
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) !=
                CL_SUCCESS || nd == 0)
            continue;
        cl_device_id ids[64];
        if (nd > 64)
            nd = 64;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) !=
            CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd; d++, seen++) {
            char dn[256] = "";
            clGetDeviceInfo(ids[d], CL_DEVICE_NAME, sizeof dn - 1, dn, NULL);
            if (strcmp(dn, name) != 0)
                continue;
            if (seen == index) {
                *out = ids[d];
                return 0;
            }
            if (by_name < 0) {
                by_name = seen;
                by_name_id = ids[d];
            }
        }
    }
    /* The library skips devices it cannot describe, so indices may shift;
     * the name decides then. */
    if (by_name_id) {
        *out = by_name_id;
        return 0;
    }
    snprintf(why, len, "OpenCL device \"%s\" not found", name);
    return -1;
}

static int setup(cl_env *e)
{
    cl_int err;
    e->ctx = clCreateContext(NULL, 1, &e->dev, NULL, NULL, &err);
    if (failed(e, "clCreateContext", err))
        return -1;
    e->q = clCreateCommandQueue(e->ctx, e->dev, CL_QUEUE_PROFILING_ENABLE,
                                &err);
    if (failed(e, "clCreateCommandQueue", err))
        return -1;
    const char *src = source;
    e->prog = clCreateProgramWithSource(e->ctx, 1, &src, NULL, &err);
    if (failed(e, "clCreateProgramWithSource", err))
        return -1;
    /* No options: a copy has no arithmetic to relax. */
    err = clBuildProgram(e->prog, 1, &e->dev, "", NULL, NULL);
    if (failed(e, "clBuildProgram", err))
        return -1;
    e->copy = clCreateKernel(e->prog, "rbench_copy", &err);
    if (failed(e, "clCreateKernel(rbench_copy)", err))
        return -1;
    e->empty = clCreateKernel(e->prog, "rbench_empty", &err);
    if (failed(e, "clCreateKernel(rbench_empty)", err))
        return -1;
    e->a = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, e->bytes, NULL, &err);
    if (failed(e, "clCreateBuffer", err))
        return -1;
    e->b = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, e->bytes, NULL, &err);
    if (failed(e, "clCreateBuffer", err))
        return -1;
    e->pinned = clCreateBuffer(e->ctx, CL_MEM_ALLOC_HOST_PTR, e->bytes, NULL,
                               &err);
    if (failed(e, "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)", err))
        return -1;
    e->pinned_ptr = clEnqueueMapBuffer(e->q, e->pinned, CL_TRUE,
                                       CL_MAP_READ | CL_MAP_WRITE, 0,
                                       e->bytes, 0, NULL, NULL, &err);
    if (failed(e, "clEnqueueMapBuffer", err))
        return -1;
    for (int k = 0; k < 2; k++) {
        e->host[k] = aligned_alloc(4096, (e->bytes + 4095) / 4096 * 4096);
        if (!e->host[k]) {
            snprintf(e->error, e->error_len, "out of host memory");
            return -1;
        }
        uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1);
        uint64_t *w = e->host[k];
        for (size_t i = 0; i < e->bytes / 8; i++)
            w[i] = rbench_xorshift(&s);
    }
    memcpy(e->pinned_ptr, e->host[1], e->bytes);
    err = clEnqueueWriteBuffer(e->q, e->a, CL_TRUE, 0, e->bytes, e->host[0],
                               0, NULL, NULL);
    if (failed(e, "clEnqueueWriteBuffer", err))
        return -1;
    err = clEnqueueWriteBuffer(e->q, e->b, CL_TRUE, 0, e->bytes, e->host[1],
                               0, NULL, NULL);
    return failed(e, "clEnqueueWriteBuffer", err);
}

static void teardown(cl_env *e)
{
    if (e->pinned_ptr)
        clEnqueueUnmapMemObject(e->q, e->pinned, e->pinned_ptr, 0, NULL,
                                NULL);
    if (e->q)
        clFinish(e->q);
    if (e->pinned)
        clReleaseMemObject(e->pinned);
    if (e->a)
        clReleaseMemObject(e->a);
    if (e->b)
        clReleaseMemObject(e->b);
    if (e->copy)
        clReleaseKernel(e->copy);
    if (e->empty)
        clReleaseKernel(e->empty);
    if (e->prog)
        clReleaseProgram(e->prog);
    if (e->q)
        clReleaseCommandQueue(e->q);
    if (e->ctx)
        clReleaseContext(e->ctx);
    free(e->host[0]);
    free(e->host[1]);
}

/* Device time of one finished event, in seconds. */
static double event_seconds(cl_event ev)
{
    cl_ulong t0 = 0, t1 = 0;
    if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0,
                                &t0, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                NULL) != CL_SUCCESS)
        return -1;
    return (double)(t1 - t0) * 1e-9;
}

static int copy_once(void *p, uint64_t call, double *device_s)
{
    cl_env *e = p;
    /* Alternate direction, as the CPU copy loop does. */
    cl_mem src = call % 2 ? e->b : e->a, dst = call % 2 ? e->a : e->b;
    size_t global = e->bytes / 16;
    cl_event ev = NULL;
    cl_int err = clSetKernelArg(e->copy, 0, sizeof src, &src);
    if (err == CL_SUCCESS)
        err = clSetKernelArg(e->copy, 1, sizeof dst, &dst);
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(e->q, e->copy, 1, NULL, &global, NULL, 0,
                                     NULL, &ev);
    if (err == CL_SUCCESS)
        err = clWaitForEvents(1, &ev);
    if (err == CL_SUCCESS)
        *device_s = event_seconds(ev);
    if (ev)
        clReleaseEvent(ev);
    return failed(e, "copy kernel", err);
}

static int h2d_once(void *p, uint64_t call, double *device_s)
{
    cl_env *e = p;
    (void)device_s;
    cl_int err = clEnqueueWriteBuffer(e->q, call % 2 ? e->a : e->b, CL_TRUE,
                                      0, e->bytes, e->host[call % 2], 0, NULL,
                                      NULL);
    return failed(e, "clEnqueueWriteBuffer", err);
}

static int d2h_once(void *p, uint64_t call, double *device_s)
{
    cl_env *e = p;
    (void)device_s;
    cl_int err = clEnqueueReadBuffer(e->q, call % 2 ? e->a : e->b, CL_TRUE, 0,
                                     e->bytes, e->host[call % 2], 0, NULL,
                                     NULL);
    return failed(e, "clEnqueueReadBuffer", err);
}

static int h2d_pinned_once(void *p, uint64_t call, double *device_s)
{
    cl_env *e = p;
    (void)device_s;
    cl_int err = clEnqueueWriteBuffer(e->q, call % 2 ? e->a : e->b, CL_TRUE,
                                      0, e->bytes, e->pinned_ptr, 0, NULL,
                                      NULL);
    return failed(e, "clEnqueueWriteBuffer (pinned)", err);
}

static int d2h_pinned_once(void *p, uint64_t call, double *device_s)
{
    cl_env *e = p;
    (void)device_s;
    cl_int err = clEnqueueReadBuffer(e->q, call % 2 ? e->a : e->b, CL_TRUE, 0,
                                     e->bytes, e->pinned_ptr, 0, NULL, NULL);
    return failed(e, "clEnqueueReadBuffer (pinned)", err);
}

static int launch(cl_env *e, int count)
{
    size_t global = 1;
    cl_int err = clSetKernelArg(e->empty, 0, sizeof e->a, &e->a);
    for (int i = 0; i < count && err == CL_SUCCESS; i++)
        err = clEnqueueNDRangeKernel(e->q, e->empty, 1, NULL, &global, NULL,
                                     0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clFinish(e->q);
    return failed(e, "empty kernel", err);
}

static int launch_once(void *p, uint64_t call, double *device_s)
{
    (void)call;
    (void)device_s;
    return launch(p, 1);
}

static int launch_batch(void *p, uint64_t call, double *device_s)
{
    (void)call;
    (void)device_s;
    return launch(p, BATCHED_LAUNCHES);
}

int rbench_cl_limits_measure(int index, const char *name, const rbench_plan *plan,
                          size_t bytes, rbench_cl_limits *out)
{
    memset(out, 0, sizeof *out);
    cl_env e = {.error = out->error, .error_len = sizeof out->error};
    if (find_device(index, name, &e.dev, out->error, sizeof out->error))
        return -1;
    cl_ulong max_alloc = 0, global = 0;
    cl_bool unified = CL_FALSE;
    clGetDeviceInfo(e.dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc,
                    &max_alloc, NULL);
    clGetDeviceInfo(e.dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global,
                    NULL);
    if (clGetDeviceInfo(e.dev, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified,
                        &unified, NULL) != CL_SUCCESS)
        unified = CL_FALSE;
    out->host_unified = unified == CL_TRUE;
    /* Three buffers of `bytes` must fit the device comfortably. */
    if (max_alloc && bytes > max_alloc)
        bytes = (size_t)max_alloc;
    if (global && bytes > global / 8)
        bytes = (size_t)(global / 8);
    e.bytes = bytes / 4096 * 4096;
    if (e.bytes < 4096)
        e.bytes = 4096;
    out->bytes = e.bytes;
    /* Each figure only while nothing has failed: after an error the queue
     * may be unusable. */
#define MEASURE(fn, t) (out->error[0] == '\0' && rbench_time(plan, fn, &e, t) == 0)
    if (setup(&e) == 0) {
        if (MEASURE(copy_once, &out->t_copy)) {
            /* Device time when profiling works, else wall time. */
            double t = out->t_copy.has_device && out->t_copy.dev_median > 0
                           ? out->t_copy.dev_median
                           : out->t_copy.median;
            out->copy_Bps = 2.0 * (double)e.bytes / t;
        }
        if (MEASURE(h2d_once, &out->t_h2d))
            out->h2d_Bps = (double)e.bytes / out->t_h2d.median;
        if (MEASURE(d2h_once, &out->t_d2h))
            out->d2h_Bps = (double)e.bytes / out->t_d2h.median;
        if (MEASURE(h2d_pinned_once, &out->t_h2d_pinned))
            out->h2d_pinned_Bps = (double)e.bytes / out->t_h2d_pinned.median;
        if (MEASURE(d2h_pinned_once, &out->t_d2h_pinned))
            out->d2h_pinned_Bps = (double)e.bytes / out->t_d2h_pinned.median;
        if (MEASURE(launch_once, &out->t_launch))
            out->launch_s = out->t_launch.median;
        if (MEASURE(launch_batch, &out->t_launch_batched))
            out->launch_batched_s =
                out->t_launch_batched.median / BATCHED_LAUNCHES;
    }
#undef MEASURE
    teardown(&e);
    return out->error[0] ? -1 : 0;
}
