/* device_run.c - one CPU or OpenCL target: open a library context on it,
 * measure its own limits first (the bounds its figures are read against),
 * then hand it to the mode ladders (modes.c).
 *
 *   native CPU: the copy loop with ordinary and streaming stores (the
 *               higher is the bound), the pairs traffic loop (pairs'
 *               own reads and writes, no computation: beside the bound,
 *               not in its place), the same reads alone (the least time
 *               any pairs code can take), the reference slab loop, and the
 *               library's per-call overhead (one ray);
 *   OpenCL:     the device's copy kernel, host<->device transfers
 *               (pageable and pinned), launch latency (cl_limits.c), and
 *               the library's per-call overhead (one ray). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define LIMIT_STEPS_CPU 6
#define LIMIT_STEPS_CL 2
/* The reference loop runs at the size the summary compares count at. */
#define REF_RAYS_MAX 65536

size_t rbench_device_steps(const rbench_options *o, const rbench_target *t)
{
    size_t limits = t->kind == RBENCH_TARGET_CPU ? LIMIT_STEPS_CPU
                    : t->devices              ? 0 /* no cl_limits */
                                              : LIMIT_STEPS_CL;
    return limits + rbench_modes_steps(o);
}

static void size_bytes(char *buf, size_t len, double bytes)
{
    snprintf(buf, len, "%.0f MiB", bytes / 1048576.0);
}

static void limit_row(rbench_device *d, const char *test, const char *size,
                      const char *metric, const char *unit, double value,
                      double lo, double hi, const rbench_timing *t)
{
    rbench_where w = d->where;
    w.category = "limits";
    w.test = test;
    w.size = size;
    rbench_add(d->rows, &w, metric, unit, value, lo, hi, t ? t->repeats : 1);
}

static void limit_skip(rbench_device *d, const char *test, const char *metric,
                       const char *status, const char *why)
{
    rbench_where w = d->where;
    w.category = "limits";
    w.test = test;
    rbench_add_status(d->rows, &w, metric, status, why);
}

/* A bandwidth row from a timing of `bytes` per call. */
static void bw_row(rbench_device *d, const char *test, double bytes, double Bps,
                   const rbench_timing *t, const char *error)
{
    if (Bps <= 0) {
        limit_skip(d, test, "bytes_per_s", "failed",
                   error && *error ? error : "not measured");
        return;
    }
    char size[32];
    size_bytes(size, sizeof size, bytes);
    /* Spread scales with the figure: min time gives max bandwidth. */
    double lo = Bps * t->median / t->max, hi = Bps * t->median / t->min;
    limit_row(d, test, size, "bytes_per_s", "B/s", Bps, lo, hi, t);
}

static void cpu_limits(rbench_device *d, const rb_backend_info *info,
                       rbench_cpu_figures *cpu)
{
    const rbench_options *o = d->o;
    rbench_timing t;
    size_t bytes;
    double best = 0;
    for (int streaming = 0; streaming < 2; streaming++) {
        const char *name = streaming ? "copy_streaming" : "copy_plain";
        rbench_progress(streaming ? "cpu copy loop (streaming stores)"
                               : "cpu copy loop");
        double b = rbench_copy_bandwidth(&o->plan, info->threads, streaming,
                                      o->copy_bytes, &t, &bytes);
        bw_row(d, name, (double)bytes / 2, b, &t, "copy loop failed");
        if (b > best)
            best = b;
        if (!streaming)
            cpu->plain_copy_Bps = b;
    }
    rbench_progress("cpu pairs traffic loop");
    cpu->pairs_traffic_Bps = rbench_pairs_traffic_bandwidth(
        &o->plan, info->threads, o->copy_bytes, 0, &t, &bytes);
    bw_row(d, "pairs_traffic", (double)bytes, cpu->pairs_traffic_Bps, &t,
           "pairs traffic loop failed");
    rbench_progress("cpu pairs reads loop");
    cpu->pairs_reads_Bps = rbench_pairs_traffic_bandwidth(
        &o->plan, info->threads, o->copy_bytes, 1, &t, &bytes);
    bw_row(d, "pairs_reads", (double)bytes, cpu->pairs_reads_Bps, &t,
           "pairs reads loop failed");
    rbench_progress("cpu reference slab loop");
    size_t ref_rays = 0;
    for (size_t i = 0; i < o->n_rays; i++)
        if (o->rays[i] <= REF_RAYS_MAX && o->rays[i] > ref_rays)
            ref_rays = o->rays[i];
    if (!ref_rays)
        ref_rays = REF_RAYS_MAX;
    double ref = rbench_reference_count(&o->plan, info->threads, ref_rays,
                                     o->boxes, &t);
    if (ref > 0) {
        double tests = (double)ref_rays * (double)o->boxes;
        char size[48];
        snprintf(size, sizeof size, "%zux%zu", ref_rays, o->boxes);
        rbench_where w = d->where;
        w.category = "limits";
        w.test = "reference_loop";
        w.size = size;
        w.rays = ref_rays;
        w.boxes = o->boxes;
        rbench_add(d->rows, &w, "tests_per_s", "tests/s", ref, tests / t.max,
                tests / t.min, t.repeats);
    } else {
        limit_skip(d, "reference_loop", "tests_per_s", "failed",
                   "reference loop failed (out of memory?)");
    }
    d->copy_Bps = best;
    cpu->have = 1;
    cpu->copy_Bps = best;
    cpu->reference_tests_per_s = ref;
    cpu->threads = info->threads;
    snprintf(cpu->simd, sizeof cpu->simd, "%s", info->simd);
    snprintf(cpu->device, sizeof cpu->device, "%s", info->device);
}

static void cl_limits(rbench_device *d, const rbench_target *t)
{
    rbench_progress("opencl device limits (copy, transfers, launch)");
    rbench_cl_limits L;
    rbench_cl_limits_measure(t->cl_index, t->desc.name, &d->o->plan,
                          d->o->copy_bytes, &L);
    double b = (double)L.bytes;
    bw_row(d, "copy_bandwidth", b, L.copy_Bps, &L.t_copy, L.error);
    if (L.copy_Bps > 0 && L.host_unified)
        snprintf(d->rows->rows[d->rows->n - 1].note,
                 sizeof d->rows->rows[0].note,
                 "host-unified memory: transfers are copies in host RAM");
    bw_row(d, "h2d_bandwidth", b, L.h2d_Bps, &L.t_h2d, L.error);
    bw_row(d, "d2h_bandwidth", b, L.d2h_Bps, &L.t_d2h, L.error);
    bw_row(d, "h2d_pinned_bandwidth", b, L.h2d_pinned_Bps, &L.t_h2d_pinned,
           L.error);
    bw_row(d, "d2h_pinned_bandwidth", b, L.d2h_pinned_Bps, &L.t_d2h_pinned,
           L.error);
    if (L.launch_s > 0)
        limit_row(d, "launch_latency", "empty kernel", "latency", "us",
                  L.launch_s * 1e6, L.t_launch.min * 1e6,
                  L.t_launch.max * 1e6, &L.t_launch);
    else
        limit_skip(d, "launch_latency", "latency", "failed",
                   L.error[0] ? L.error : "not measured");
    if (L.launch_batched_s > 0) {
        double k = L.launch_batched_s / L.t_launch_batched.median;
        limit_row(d, "launch_batched", "64 launches", "latency", "us",
                  L.launch_batched_s * 1e6, L.t_launch_batched.min * k * 1e6,
                  L.t_launch_batched.max * k * 1e6, &L.t_launch_batched);
    } else {
        limit_skip(d, "launch_batched", "latency", "failed",
                   L.error[0] ? L.error : "not measured");
    }
    d->copy_Bps = L.copy_Bps;
    d->h2d_Bps = L.h2d_Bps;
    d->d2h_Bps = L.d2h_Bps;
    d->host_unified = L.host_unified;
}

typedef struct one_ray {
    rb_context *ctx;
    rb_ray ray;
    rb_box box;
    rb_hit hit;
} one_ray;

static int one_ray_call(void *p, uint64_t call, double *device_s)
{
    one_ray *a = p;
    (void)call;
    (void)device_s;
    rb_query q = {.mode = RB_MODE_PAIRS, .dims = 3, .rays = &a->ray,
                  .n_rays = 1, .boxes = &a->box, .n_boxes = 1};
    rb_results r = {.hits = &a->hit, .capacity = 1};
    return rb_intersect(a->ctx, &q, &r);
}

/* The library's fixed cost per call: validation, dispatch, (launch). */
static void call_overhead(rbench_device *d)
{
    rbench_progress("library per-call overhead (1 ray)");
    one_ray a = {.ctx = d->ctx,
                 .ray = {{0, 0, 0}, {1, 0.5f, 0.25f}, 0, INFINITY},
                 .box = {{4, -1, -1}, {6, 1, 1}}};
    rbench_timing t;
    if (rbench_time(&d->o->plan, one_ray_call, &a, &t)) {
        limit_skip(d, "call_1ray", "latency", "failed",
                   rb_context_error(d->ctx)->message);
        return;
    }
    limit_row(d, "call_1ray", "1 ray", "latency", "us", t.median * 1e6,
              t.min * 1e6, t.max * 1e6, &t);
}

void rbench_run_device(const rbench_options *o, const rbench_target *t,
                    rbench_rows *rows, rbench_cpu_figures *cpu)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.threads = o->threads;
    opt.backend = t->kind == RBENCH_TARGET_CPU ? RB_BACKEND_CPU
                                            : RB_BACKEND_OPENCL;
    opt.device_index = t->cl_index;
    opt.devices = t->devices;
    opt.cpu_fallback = 0; /* a benchmark must not measure the fallback */
    /* Inline boxes are measured by brute force (the slab kernels the
     * issue-2 targets are about, on every backend alike); scenes with the
     * library's default, a hierarchy for 256 boxes or more. */
    opt.hierarchy = RB_HIERARCHY_OFF;
    rb_context *ctx = NULL, *scene_ctx = NULL;
    char why[512] = "";
    rbench_device d = {.o = o, .rows = rows, .is_cl = t->kind != RBENCH_TARGET_CPU};
    d.where.backend = d.is_cl ? "opencl" : "cpu";
    d.where.device = d.is_cl ? t->label : "native";
    d.where.type = d.is_cl ? t->desc.type : "cpu";
    d.where.driver = d.is_cl ? t->desc.driver : RB_VERSION_STRING;
    int rc = rb_context_create(&opt, &ctx, why, sizeof why);
    opt.hierarchy = RB_HIERARCHY_AUTO;
    if (rc == RB_OK &&
        rb_context_create(&opt, &scene_ctx, why, sizeof why) != RB_OK) {
        rb_context_destroy(ctx);
        rc = RB_ENODEV;
    }
    if (rc != RB_OK) {
        rbench_where w = d.where;
        w.category = "limits";
        w.test = "device";
        rbench_add_status(rows, &w, "", "skipped", why);
        rbench_progress_skip(rbench_device_steps(o, t));
        return;
    }
    rb_backend_info info;
    rb_context_info(ctx, &info);
    if (!d.is_cl)
        d.where.device = info.device; /* the processor model */
    d.where.driver = info.driver;
    d.ctx = ctx;
    d.scene_ctx = scene_ctx;
    if (d.is_cl && !t->devices) /* a device's own limits */
        cl_limits(&d, t);
    else
        cpu_limits(&d, &info, cpu);
    call_overhead(&d);
    rbench_run_modes(&d);
    rb_context_destroy(scene_ctx);
    rb_context_destroy(ctx);
}
