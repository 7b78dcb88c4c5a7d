/*
 * cl_program.c - the OpenCL program: source, build options, build, and
 * the binary cache on disk.
 *
 * The program is built once per context. Options are "-cl-std=CL1.2" and,
 * when the device has it, "-cl-fp32-correctly-rounded-divide-sqrt" (R8:
 * 1/d must be the IEEE quotient); nothing fast-math, ever. A device
 * without correctly rounded division but with fp64 divides in double
 * (RB_RECIP_VIA_DOUBLE, exact too, see kernels/slab.cl).
 *
 * Binary cache: <cache_dir>/<key>.clbin, where key is the FNV-1a 64 hash
 * of the platform name and version, device name, driver version, device
 * version, options and source, so a driver upgrade or a kernel edit
 * misses. The file carries its own header (magic, length, hash of the
 * payload) so that a truncated or corrupted file is never handed to a
 * driver; anything wrong with it means "build from source" and rewrite.
 * Files are written to a temporary name and renamed (atomic for readers).
 * Cache problems are never fatal.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bvh/bvh.h"
#include "cl_internal.h"

extern const unsigned char rb_kernel_source[];
extern const size_t rb_kernel_source_len;

/* In the order of rb_cl_kernel_id. */
static const char *const kernel_names[RB_CLK_N] = {
    "rb_pairs",       "rb_nearest",   "rb_any",
    "rb_count",       "rb_all",       "rb_bvh_nearest",
    "rb_bvh_any",     "rb_bvh_count", "rb_bvh_all",
    "rb_shapes_pairs", "rb_shapes_nearest", "rb_shapes_any",
    "rb_shapes_count", "rb_shapes_all",
    "rb_shape_walk_nearest", "rb_shape_walk_any", "rb_shape_walk_count",
    "rb_shape_walk_all",
    "rb_shape_rest_nearest", "rb_shape_rest_any", "rb_shape_rest_count",
    "rb_shape_rest_all",
    "rb_joint_walk_nearest", "rb_joint_walk_any", "rb_joint_walk_count",
    "rb_joint_walk_all",
    "rb_vis_brute",    "rb_vis_bvh",
    "rb_bvh_stream_any", "rb_bvh_stream_count", "rb_bvh_stream_nearest",
};

/* The kernel files, in the order cmake/embed.cmake concatenates them. */
static const char *const kernel_files[] = {"exact.h",       "slab.cl",
                                            "brute.cl",      "brute_wide.cl",
                                            "bvh.cl",        "shapes.cl",
                                            "visibility.cl"};

static const char cache_magic[8] = {'R', 'B', 'X', 'C', 'L', 'B', '0', '1'};
#define CACHE_HEADER 24 /* magic, u64 payload length, u64 payload hash */

typedef struct text {
    char *data;
    size_t len;
} text;

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Each field with its length, so that field boundaries count. */
static uint64_t fnv1a_field(uint64_t h, const void *data, size_t len)
{
    uint64_t n = len;
    h = fnv1a(h, &n, sizeof n);
    return fnv1a(h, data, len);
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

/* Reads a whole file with the context's allocator (NUL-terminated). */
static int read_file(rb_context *ctx, const char *path, text *out)
{
    out->data = NULL;
    out->len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return RB_EIO;
    int rc = RB_EIO;
    long size;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0)
        goto out;
    out->data = rb_alloc(ctx, (size_t)size + 1, 16);
    if (!out->data) {
        rc = RB_ENOMEM;
        goto out;
    }
    if (fread(out->data, 1, (size_t)size, f) != (size_t)size) {
        rb_free(ctx, out->data);
        out->data = NULL;
        goto out;
    }
    out->data[size] = '\0';
    out->len = (size_t)size;
    rc = RB_OK;
out:
    fclose(f);
    return rc;
}

/* The kernel source: the embedded copy, or the files of ctx->kernel_dir
 * joined as embed.cmake joins them (each followed by a newline). */
static int load_source(rb_cl_backend *be, text *src, char *why,
                       size_t why_len)
{
    rb_context *ctx = be->ctx;
    src->data = NULL;
    src->len = 0;
    if (!ctx->kernel_dir) {
        src->data = rb_alloc(ctx, rb_kernel_source_len + 1, 16);
        if (!src->data)
            return RB_ENOMEM;
        memcpy(src->data, rb_kernel_source, rb_kernel_source_len);
        src->data[rb_kernel_source_len] = '\0';
        src->len = rb_kernel_source_len;
        return RB_OK;
    }
    text parts[sizeof kernel_files / sizeof kernel_files[0]] = {{0}};
    size_t total = 0;
    int rc = RB_OK;
    for (size_t i = 0; i < sizeof kernel_files / sizeof *kernel_files; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", ctx->kernel_dir,
                 kernel_files[i]);
        rc = read_file(ctx, path, &parts[i]);
        if (rc) {
            char msg[4200];
            snprintf(msg, sizeof msg, "cannot read kernel source %s: %s",
                     path, rc == RB_ENOMEM ? "out of memory"
                                           : strerror(errno));
            rb_set_build_log(ctx, msg);
            rb_copy_str(why, why_len, msg);
            if (rc != RB_ENOMEM)
                rc = RB_EBUILD;
            goto out;
        }
        total += parts[i].len + 1;
    }
    src->data = rb_alloc(ctx, total + 1, 16);
    if (!src->data) {
        rc = RB_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < sizeof kernel_files / sizeof *kernel_files; i++) {
        memcpy(src->data + src->len, parts[i].data, parts[i].len);
        src->len += parts[i].len;
        src->data[src->len++] = '\n';
    }
    src->data[src->len] = '\0';
out:
    for (size_t i = 0; i < sizeof kernel_files / sizeof *kernel_files; i++)
        rb_free(ctx, parts[i].data);
    return rc;
}

/* RB_BVH_SHORT: the walk's short stack; RB_BVH_DEPTH: the deepest tree
 * the builder can make (host/bvh/bvh.h), which sizes the walk's path. */
void rb_cl_build_options(int wide, enum rb_cl_division div,
                         unsigned bvh_stack, char *out, size_t cap)
{
    snprintf(out, cap, "-cl-std=CL1.2 -DRB_BVH_SHORT=%u -DRB_BVH_DEPTH=%d%s%s",
             bvh_stack, (int)RB_BVH_MAX_DEPTH, wide ? " -DRB_WIDE" : "",
             div == RB_CL_DIV_EXACT    ? " -cl-fp32-correctly-rounded-divide-sqrt"
             : div == RB_CL_DIV_DOUBLE ? " -DRB_RECIP_VIA_DOUBLE"
                                       : "");
}

static void build_options(const rb_cl_backend *be, char *out, size_t cap)
{
    rb_cl_build_options(be->wide,
                        be->dev.desc.exact_division ? RB_CL_DIV_EXACT
                        : be->dev.fp64              ? RB_CL_DIV_DOUBLE
                                                    : RB_CL_DIV_NONE,
                        be->bvh_stack, out, cap);
}

static uint64_t cache_key(const rb_cl_backend *be, const char *options,
                          const text *src)
{
    const rb_device_desc *d = &be->dev.desc;
    const char *fields[] = {"raybox-clbin-1", d->platform,
                            be->dev.platform_version, d->name, d->driver,
                            d->version, options};
    uint64_t h = FNV_OFFSET;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        h = fnv1a_field(h, fields[i], strlen(fields[i]));
    return fnv1a_field(h, src->data, src->len);
}

/* mkdir -p; errors show up when the file is written. */
static void make_dirs(const char *dir)
{
    char path[4096];
    rb_copy_str(path, sizeof path, dir);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    }
    mkdir(path, 0755);
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Writes the built program's binary to `path` through a temporary file
 * and rename(), so that a reader sees the old file or the whole new one. */
static void cache_store(rb_cl_backend *be, const char *path)
{
    rb_context *ctx = be->ctx;
    size_t size = 0;
    unsigned char *bin = NULL;
    if (clGetProgramInfo(be->program, CL_PROGRAM_BINARY_SIZES, sizeof size,
                         &size, NULL) != CL_SUCCESS ||
        size == 0)
        return;
    bin = rb_alloc(ctx, size + CACHE_HEADER, 16);
    if (!bin)
        return;
    unsigned char *payload = bin + CACHE_HEADER;
    if (clGetProgramInfo(be->program, CL_PROGRAM_BINARIES, sizeof payload,
                         &payload, NULL) != CL_SUCCESS)
        goto out;
    memcpy(bin, cache_magic, sizeof cache_magic);
    put_u64(bin + 8, size);
    put_u64(bin + 16, fnv1a(FNV_OFFSET, payload, size));

    make_dirs(ctx->cache_dir);
    /* Unique per process and per call: contexts may build concurrently. */
    static atomic_uint seq;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
             atomic_fetch_add(&seq, 1));
    FILE *f = fopen(tmp, "wb");
    if (!f)
        goto out;
    int ok = fwrite(bin, 1, size + CACHE_HEADER, f) == size + CACHE_HEADER;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
out:
    rb_free(ctx, bin);
}

static void release_program(rb_cl_backend *be)
{
    for (int k = 0; k < RB_CLK_N; k++) {
        if (be->kernels[k])
            clReleaseKernel(be->kernels[k]);
        be->kernels[k] = NULL;
    }
    if (be->program)
        clReleaseProgram(be->program);
    be->program = NULL;
}

int rb_cl_kernel_wide_only(int k)
{
    return k == RB_CLK_BVH_STREAM_ANY || k == RB_CLK_BVH_STREAM_COUNT ||
           k == RB_CLK_BVH_STREAM_NEAREST;
}

static int create_kernels(rb_cl_backend *be)
{
    for (int k = 0; k < RB_CLK_N; k++) {
        if (!be->wide && rb_cl_kernel_wide_only(k))
            continue; /* not in the tiled variant's program */
        int rc = RB_CL_NEW(&be->env, be->kernels[k], clCreateKernel,
                           be->program, kernel_names[k]);
        if (rc)
            return rc;
    }
    return RB_OK;
}

/* The program from a cache file; RB_OK only if it loaded, built and gave
 * every kernel. Anything else leaves no program behind. */
static int cache_load(rb_cl_backend *be, const char *path,
                      const char *options)
{
    text file;
    if (read_file(be->ctx, path, &file) != RB_OK)
        return RB_EIO;
    int rc = RB_EIO;
    const unsigned char *bin = (const unsigned char *)file.data;
    if (file.len < CACHE_HEADER ||
        memcmp(bin, cache_magic, sizeof cache_magic) != 0)
        goto out;
    size_t size = (size_t)get_u64(bin + 8);
    const unsigned char *payload = bin + CACHE_HEADER;
    if (size == 0 || size != file.len - CACHE_HEADER ||
        get_u64(bin + 16) != fnv1a(FNV_OFFSET, payload, size))
        goto out;
    cl_int bin_status = CL_SUCCESS;
    rc = RB_CL_NEW(&be->env, be->program, clCreateProgramWithBinary,
                   be->context, 1, &be->dev.id, &size, &payload,
                   &bin_status);
    if (rc == RB_OK && bin_status != CL_SUCCESS)
        rc = RB_EDEVICE;
    if (rc == RB_OK)
        rc = RB_CL(&be->env, clBuildProgram, be->program, 1, &be->dev.id,
                   options, NULL, NULL);
    if (rc == RB_OK)
        rc = create_kernels(be);
    if (rc)
        release_program(be);
out:
    rb_free(be->ctx, file.data);
    return rc;
}

/* The build log of the program, stored in the context; a short excerpt
 * (the first non-empty line) goes to why. */
static void keep_build_log(rb_cl_backend *be, char *why, size_t why_len)
{
    rb_context *ctx = be->ctx;
    size_t size = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(be->program, be->dev.id, CL_PROGRAM_BUILD_LOG,
                              0, NULL, &size) == CL_SUCCESS &&
        (log = rb_alloc(ctx, size + 1, 16)) != NULL &&
        clGetProgramBuildInfo(be->program, be->dev.id, CL_PROGRAM_BUILD_LOG,
                              size, log, NULL) == CL_SUCCESS) {
        log[size] = '\0';
    } else if (log) {
        log[0] = '\0';
    }
    const char *shown = log && log[0] ? log : "(the driver gave no log)";
    rb_set_build_log(ctx, shown);
    const char *line = shown;
    while (*line == '\n' || *line == '\r' || *line == ' ')
        line++;
    char first[200];
    rb_copy_str(first, sizeof first, line);
    first[strcspn(first, "\r\n")] = '\0';
    snprintf(why, why_len, "OpenCL program build failed on %s: %s",
             be->dev.desc.name, first);
    rb_free(ctx, log);
}

int rb_cl_program_build(rb_cl_backend *be, char *why, size_t why_len)
{
    rb_context *ctx = be->ctx;
    char options[256];
    build_options(be, options, sizeof options);
    text src;
    int rc = load_source(be, &src, why, why_len);
    if (rc) {
        if (rc == RB_ENOMEM)
            rb_copy_str(why, why_len, "out of memory");
        return rc;
    }

    char path[4200] = "";
    int use_cache = ctx->cache_dir && ctx->cache_dir[0];
    if (use_cache) {
        snprintf(path, sizeof path, "%s/%016llx.clbin", ctx->cache_dir,
                 (unsigned long long)cache_key(be, options, &src));
        if (cache_load(be, path, options) == RB_OK) {
            be->from_cache = 1;
            goto out;
        }
    }

    const char *code = src.data;
    rc = RB_CL_NEW(&be->env, be->program, clCreateProgramWithSource,
                   be->context, 1, &code, &src.len);
    if (rc) {
        snprintf(why, why_len, "%s", be->env.msg);
        goto out;
    }
    cl_int err = rb_cl_inject(&be->env)
                     ? CL_OUT_OF_RESOURCES
                     : clBuildProgram(be->program, 1, &be->dev.id, options,
                                      NULL, NULL);
    if (err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS ||
        err == CL_COMPILER_NOT_AVAILABLE) {
        keep_build_log(be, why, why_len);
        release_program(be);
        rc = rb_fail(ctx, RB_EBUILD, "%s", why);
        goto out;
    }
    rc = rb_cl_status(&be->env, err, "clBuildProgram");
    if (rc == RB_OK)
        rc = create_kernels(be);
    if (rc) {
        snprintf(why, why_len, "%s", be->env.msg);
        release_program(be);
        goto out;
    }
    be->from_cache = 0;
    if (use_cache)
        cache_store(be, path);
out:
    rb_free(ctx, src.data);
    return rc;
}

void rb_cl_program_release(rb_cl_backend *be)
{
    release_program(be);
}

_Static_assert(RB_CLK_N <= 32, "rb_cl_backend.launched: a bit a kernel");

void rb_cl_note_launch(rb_cl_backend *be, cl_kernel k)
{
    for (int i = 0; i < RB_CLK_N; i++)
        if (be->kernels[i] == k)
            be->launched |= 1u << i;
}

const char *rb_cl_kernel_name(int k)
{
    return k >= 0 && k < RB_CLK_N ? kernel_names[k] : "?";
}
