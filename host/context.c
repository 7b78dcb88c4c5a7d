/*
 * context.c - context lifetime, backend choice and the error slot.
 *
 * Backend preference (STYLE: registration order is preference): an OpenCL
 * device first, the native CPU backend last. The CPU backend always exists:
 * it is the reference, and the fallback when an OpenCL launch fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bvh/bvh.h"
#include "internal.h"
#include "threadpool.h"

void rb_context_options_init(rb_context_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->backend = RB_BACKEND_AUTO;
    opt->device_index = -1;
    opt->cpu_fallback = 1;
}

int rb_fail(rb_context *ctx, int status, const char *fmt, ...)
{
    va_list ap;
    ctx->err.status = status;
    va_start(ap, fmt);
    vsnprintf(ctx->err.message, sizeof ctx->err.message, fmt, ap);
    va_end(ap);
    return status;
}

void rb_clear_error(rb_context *ctx)
{
    ctx->err.status = RB_OK;
    ctx->err.element = RB_ELEMENT_NONE;
    ctx->err.index = 0;
    ctx->err.field = -1;
    ctx->err.message[0] = '\0';
}

void rb_set_build_log(rb_context *ctx, const char *log)
{
    char *copy = rb_strdup(ctx, log ? log : "");
    if (!copy)
        return; /* keep the old log rather than fail the caller's error path */
    rb_free(ctx, ctx->build_log);
    ctx->build_log = copy;
}

int rb_report_bad_input(rb_context *ctx, unsigned dims, const void *rays,
                        const void *boxes, const rb_bad_input *bad)
{
    char reason[256];
    int field = -1;
    const char *what = bad->element == RB_ELEMENT_RAY ? "ray" : "box";
    if (bad->element == RB_ELEMENT_RAY)
        rb_describe_ray(rays, dims, bad->index, &field, reason,
                        sizeof reason);
    else
        rb_describe_box(boxes, dims, bad->index, &field, reason,
                        sizeof reason);
    ctx->err.element = bad->element;
    ctx->err.index = bad->index;
    ctx->err.field = field;
    return rb_fail(ctx, RB_EINPUT, "%s %llu: %s", what,
                   (unsigned long long)bad->index, reason);
}

const rb_error *rb_context_error(const rb_context *ctx)
{
    return &ctx->err;
}

const char *rb_context_build_log(const rb_context *ctx)
{
    return ctx->build_log ? ctx->build_log : "";
}

static char *dup_opt(rb_context *ctx, const char *explicit_value,
                     const char *env_name, int *oom)
{
    const char *v = explicit_value;
    if (!v && env_name)
        v = getenv(env_name);
    if (!v)
        return NULL;
    char *copy = rb_strdup(ctx, v);
    if (!copy)
        *oom = 1;
    return copy;
}

/* $RAYBOX_CACHE_DIR, $XDG_CACHE_HOME/raybox, $HOME/.cache/raybox. */
static char *default_cache_dir(rb_context *ctx, int *oom)
{
    char buf[4096];
    const char *v = getenv("RAYBOX_CACHE_DIR");
    if (v) {
        rb_copy_str(buf, sizeof buf, v);
    } else if ((v = getenv("XDG_CACHE_HOME")) && *v) {
        snprintf(buf, sizeof buf, "%s/raybox", v);
    } else if ((v = getenv("HOME")) && *v) {
        snprintf(buf, sizeof buf, "%s/.cache/raybox", v);
    } else {
        return NULL;
    }
    char *copy = rb_strdup(ctx, buf);
    if (!copy)
        *oom = 1;
    return copy;
}

/* RAYBOX_BVH=off makes every query brute force (the tests' reference),
 * =on uses a hierarchy for every scene and inline box set; anything else
 * is auto (see internal.h). */
static int bvh_use_from_env(void)
{
    const char *v = getenv("RAYBOX_BVH");
    if (v && strcmp(v, "off") == 0)
        return RB_BVH_USE_OFF;
    if (v && strcmp(v, "on") == 0)
        return RB_BVH_USE_ALWAYS;
    return RB_BVH_USE_AUTO;
}

/* RAYBOX_BVH_BUILD=fast builds every hierarchy along a Morton curve;
 * anything else is binned SAH. */
static int bvh_build_from_env(void)
{
    const char *v = getenv("RAYBOX_BVH_BUILD");
    return v && strcmp(v, "fast") == 0 ? RB_HIERARCHY_BUILD_FAST
                                       : RB_HIERARCHY_BUILD_SAH;
}

static void fail_text(char *err_text, size_t err_len, const char *msg)
{
    if (err_text && err_len)
        rb_copy_str(err_text, err_len, msg);
}

int rb_context_create(const rb_context_options *opt_in, rb_context **out,
                      char *err_text, size_t err_len)
{
    rb_context_options opt;
    if (!out) {
        fail_text(err_text, err_len, "out is NULL");
        return RB_EINVAL;
    }
    *out = NULL;
    if (opt_in)
        opt = *opt_in;
    else
        rb_context_options_init(&opt);
    if (!rb_backend_kind_name(opt.backend)) {
        fail_text(err_text, err_len, "unknown backend kind");
        return RB_EINVAL;
    }
    if (opt.hierarchy < RB_HIERARCHY_AUTO ||
        opt.hierarchy > RB_HIERARCHY_ALWAYS) {
        fail_text(err_text, err_len, "unknown hierarchy setting");
        return RB_EINVAL;
    }
    if (opt.hierarchy_build != RB_HIERARCHY_BUILD_SAH &&
        opt.hierarchy_build != RB_HIERARCHY_BUILD_FAST) {
        fail_text(err_text, err_len, "unknown hierarchy_build setting");
        return RB_EINVAL;
    }
    rb_allocator alloc;
    if (opt.allocator) {
        if (!opt.allocator->alloc || !opt.allocator->free) {
            fail_text(err_text, err_len, "allocator without alloc or free");
            return RB_EINVAL;
        }
        alloc = *opt.allocator;
    } else {
        rb_allocator_default(&alloc);
    }

    rb_context *ctx = rb_alloc_with(&alloc, sizeof *ctx, 64);
    if (!ctx) {
        fail_text(err_text, err_len, "out of memory");
        return RB_ENOMEM;
    }
    memset(ctx, 0, sizeof *ctx);
    ctx->alloc = alloc;
    rb_workmem_init(&ctx->workmem, &alloc);
    ctx->opt = opt;
    ctx->opt.allocator = NULL;
    ctx->opt.device_name = NULL; /* only used during creation */
    ctx->opt.devices = NULL;
    rb_clear_error(ctx);
    ctx->bvh_use = opt.hierarchy == RB_HIERARCHY_OFF ||
                           opt.hierarchy == RB_HIERARCHY_ALWAYS
                       ? opt.hierarchy
                       : bvh_use_from_env();
    ctx->bvh_build = opt.hierarchy_build == RB_HIERARCHY_BUILD_FAST
                         ? RB_HIERARCHY_BUILD_FAST
                         : bvh_build_from_env();
    const char *streams = getenv("RAYBOX_CL_STREAMS");
    ctx->cl_streams = streams && strcmp(streams, "off") == 0
                          ? RB_CL_STREAMS_OFF
                          : RB_CL_STREAMS_ON;

    int oom = 0;
    ctx->kernel_dir = dup_opt(ctx, opt.kernel_dir, "RAYBOX_KERNEL_DIR", &oom);
    if (opt.cache_dir)
        ctx->cache_dir = dup_opt(ctx, opt.cache_dir, NULL, &oom);
    else
        ctx->cache_dir = default_cache_dir(ctx, &oom);
    ctx->opt.kernel_dir = ctx->kernel_dir;
    ctx->opt.cache_dir = ctx->cache_dir;
    if (oom) {
        rb_context_destroy(ctx);
        fail_text(err_text, err_len, "out of memory");
        return RB_ENOMEM;
    }

    unsigned threads = opt.threads ? opt.threads : rb_online_cpus();
    int rc = rb_pool_create(&ctx->alloc, threads, &ctx->pool);
    if (rc == RB_OK)
        rc = rb_cpu_backend_create(ctx, &ctx->cpu);
    if (rc != RB_OK) {
        rb_context_destroy(ctx);
        fail_text(err_text, err_len, "out of memory");
        return rc;
    }
    ctx->active = ctx->cpu;

    if (opt.backend != RB_BACKEND_CPU) {
        /* auto takes only GPUs and accelerators unless the caller named a
         * device: PoCL on the same cores would just be a slower CPU path. */
        int explicit_device = opt.device_index >= 0 || opt.device_name;
        int gpu_only = opt.backend == RB_BACKEND_AUTO && !explicit_device;
        char why[256] = "";
        ctx->opt.device_name = opt.device_name;
        if (opt.devices && *opt.devices)
            rc = rb_cl_multi_create(ctx, opt.devices, &ctx->cl, why,
                                    sizeof why);
        else
            rc = rb_cl_backend_create(ctx, gpu_only, &ctx->cl, why,
                                      sizeof why);
        ctx->opt.device_name = NULL;
        if (rc == RB_OK) {
            ctx->active = ctx->cl;
        } else if (opt.backend == RB_BACKEND_OPENCL || rc == RB_ENOMEM ||
                   rc == RB_EINVAL) {
            fail_text(err_text, err_len, why);
            rb_context_destroy(ctx);
            return rc;
        } else {
            rb_copy_str(ctx->skipped, sizeof ctx->skipped, why);
        }
    }
    rb_clear_error(ctx);
    *out = ctx;
    return RB_OK;
}

void rb_context_destroy(rb_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->cl)
        ctx->cl->ops->destroy(ctx->cl);
    if (ctx->cpu)
        ctx->cpu->ops->destroy(ctx->cpu);
    rb_pool_destroy(ctx->pool);
    rb_workmem_destroy(&ctx->workmem);
    rb_free(ctx, ctx->scratch_boxes.data);
    rb_bvh_free(ctx->scratch_bvh);
    rb_free(ctx, ctx->scratch_bvh);
    rb_free(ctx, ctx->build_log);
    rb_free(ctx, ctx->cache_dir);
    rb_free(ctx, ctx->kernel_dir);
    rb_allocator alloc = ctx->alloc;
    rb_free_with(&alloc, ctx);
    rb_alloc_trim_default();
}

void rb_context_trim(rb_context *ctx)
{
    if (ctx)
        rb_workmem_trim(&ctx->workmem);
    rb_alloc_trim_default();
}

int rb_context_info(const rb_context *ctx, rb_backend_info *out)
{
    if (!ctx || !out)
        return RB_EINVAL;
    memset(out, 0, sizeof *out);
    ctx->active->ops->describe(ctx->active, out);
    rb_copy_str(out->skipped, sizeof out->skipped, ctx->skipped);
    return RB_OK;
}
