/*
 * bench.h - raybox-bench's measuring side: options, timing, workloads,
 * targets (the native CPU backend, each OpenCL device, a rayboxd URL),
 * their measured limits and the mode ladders. Results are rows (rows.h).
 *
 * Single-threaded tool: none of this is thread-safe.
 */
#ifndef RBENCH_BENCH_H
#define RBENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"
#include "rows.h"
#include "shapes.h"

#define RBENCH_MAX_LADDER 16
#define RBENCH_MAX_LIST 16

/* ---- options (options.c): one table gives getopt and --help. */
typedef struct rbench_plan {
    double budget_s; /* per repeat: iterations are calibrated to fill it */
    int repeats;     /* the median over repeats is the figure */
    int warmups;
} rbench_plan;

typedef struct rbench_options {
    int want_cpu, want_cl;      /* --backend */
    int backend_given;
    const char *devices[RBENCH_MAX_LIST]; /* --device, commas split */
    size_t n_devices;
    const char *split_devices;  /* --devices: one batch over these */
    int list;
    unsigned threads;
    size_t pairs[RBENCH_MAX_LADDER], n_pairs;   /* pairs ladder (rays) */
    size_t rays[RBENCH_MAX_LADDER], n_rays;     /* every-box ladder, inline */
    size_t scene_rays[RBENCH_MAX_LADDER], n_scene_rays;
    size_t http_rays[RBENCH_MAX_LADDER], n_http_rays;
    size_t boxes, scene_boxes;
    const char *shapes[RBENCH_MAX_LIST];
    size_t n_shapes;
    int modes;                  /* bit per rb_mode */
    uint32_t max_hits;
    rbench_plan plan;
    double max_call_s;          /* skip sizes predicted to take longer */
    size_t copy_bytes;          /* copy-bandwidth buffers */
    const char *json, *csv, *plot, *compare, *http;
    const char *from[RBENCH_MAX_LIST];
    size_t n_from;
    double threshold;           /* --compare: change that counts */
    int quick, quiet;
    int ratios;                 /* --ratios: keep the ratio rows only */
    char *owned[3 * RBENCH_MAX_LIST]; /* the split list words, freed at exit */
    size_t n_owned;
} rbench_options;

/* 0 = run, 1 = exit 0 (--help printed), 2 = usage error (message printed).
 * rbench_options_free releases what parsing allocated, in every case. */
int rbench_parse_options(int argc, char **argv, rbench_options *o);
void rbench_options_free(rbench_options *o);

/* ---- timing (timing.c). fn runs one call; it may set *device_s to the
 * call's device-side (kernel) time in seconds. After warm-ups, the number
 * of calls per repeat is calibrated so that a repeat lasts about budget_s;
 * the per-call time of each repeat gives median, min and max. */
typedef int (*rbench_fn)(void *arg, uint64_t call, double *device_s);

typedef struct rbench_timing {
    double median, min, max;          /* wall seconds per call */
    double dev_median, dev_min, dev_max; /* device seconds per call */
    int has_device;
    int repeats;
    uint64_t iters;                   /* calls per repeat */
    int failed;                       /* fn's status when non-zero */
} rbench_timing;

int rbench_time(const rbench_plan *plan, rbench_fn fn, void *arg, rbench_timing *out);
double rbench_now(void);

/* ---- workloads (workload.c): seeded, reproducible. */
void rbench_make_rays(uint64_t seed, rb_ray *rays, size_t n);
void rbench_make_boxes(uint64_t seed, rb_box *boxes, size_t n);
void rbench_make_pair_boxes(uint64_t seed, const rb_ray *rays, rb_box *boxes,
                         size_t n);

/* Several data sets of the same size, rotated call by call so that a call
 * does not find the previous call's data in the caches: as many sets as
 * fill RBENCH_ROTATE_BYTES (at least 2, at most 64). */
#define RBENCH_ROTATE_BYTES ((size_t)64 << 20)
typedef enum rbench_pool_kind {
    RBENCH_POOL_PAIRS,  /* rays and a box near each ray's path */
    RBENCH_POOL_INLINE, /* rays and random boxes sent with the query */
    RBENCH_POOL_SCENE   /* rays of a scene shape (boxes live in the scene) */
} rbench_pool_kind;

typedef struct rbench_pool {
    rb_ray *rays;    /* sets * n_rays */
    rb_box *boxes;   /* sets * n_boxes, NULL for scenes */
    size_t n_rays, n_boxes;
    unsigned sets;
} rbench_pool;

int rbench_pool_make(rbench_pool *p, rbench_pool_kind kind, const rbench_shape *shape,
                  size_t n_rays, size_t n_boxes, uint64_t seed);
void rbench_pool_free(rbench_pool *p);
/* Bytes a pool of this size would hold (to refuse what cannot fit). */
double rbench_pool_bytes(rbench_pool_kind kind, size_t n_rays, size_t n_boxes);

/* ---- CPU baselines (baseline.c, ref_loop.c), same run, same cores. */
/* The next state of a xorshift64 generator: the random bits the bandwidth
 * loops fill their buffers with (so that nothing may compress them). */
static inline uint64_t rbench_xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

double rbench_copy_bandwidth(const rbench_plan *plan, unsigned threads,
                          int streaming, size_t bytes, rbench_timing *t,
                          size_t *bytes_per_call);
/* The bytes/s of a loop that reads and writes what pairs does (32-byte
 * ray and 24-byte box in, 16-byte answer out with streaming stores) and
 * computes nothing: a figure beside the bound, not the bound. With
 * reads_only, the same reads (56 bytes a pair counted) and no stores. */
double rbench_pairs_traffic_bandwidth(const rbench_plan *plan,
                                      unsigned threads, size_t bytes,
                                      int reads_only, rbench_timing *t,
                                      size_t *bytes_per_call);
double rbench_reference_count(const rbench_plan *plan, unsigned threads,
                           size_t n_rays, size_t n_boxes, rbench_timing *t);

/* ---- OpenCL limits (cl_limits.c), through the OpenCL API directly. */
typedef struct rbench_cl_limits {
    double copy_Bps;        /* device copy kernel, bytes read + written/s */
    double h2d_Bps, d2h_Bps;               /* pageable host memory */
    double h2d_pinned_Bps, d2h_pinned_Bps; /* CL_MEM_ALLOC_HOST_PTR */
    double launch_s;        /* empty kernel: enqueue + wait, per launch */
    double launch_batched_s; /* empty kernels back to back, per launch */
    rbench_timing t_copy, t_h2d, t_d2h, t_h2d_pinned, t_d2h_pinned, t_launch,
        t_launch_batched;
    size_t bytes;           /* buffer size used */
    int host_unified;
    char error[256];        /* why a figure is missing ("" if none) */
} rbench_cl_limits;

/* Measures device `index` of rb_devices_list (its name must be `name`).
 * Returns 0, or -1 with out->error set (figures already measured stay). */
int rbench_cl_limits_measure(int index, const char *name, const rbench_plan *plan,
                          size_t bytes, rbench_cl_limits *out);

/* ---- targets (targets.c) */
typedef enum rbench_target_kind {
    RBENCH_TARGET_CPU,
    RBENCH_TARGET_OPENCL,
    RBENCH_TARGET_HTTP
} rbench_target_kind;

typedef struct rbench_target {
    rbench_target_kind kind;
    int cl_index;            /* OpenCL: index in rb_devices_list */
    rb_device_desc desc;     /* OpenCL */
    char label[160];         /* OpenCL: the name rows carry; two devices of
                                one name get " [index]" to stay apart */
    const char *url;         /* HTTP */
    const char *devices;     /* OpenCL over several devices (--devices):
                                rb_context_options.devices; else NULL */
} rbench_target;

/* The targets the options select. On a selection error (no such device)
 * returns -1 with a message in err; no OpenCL at all is not an error:
 * *why_no_cl says why (a skip row for whoever asked for OpenCL). */
int rbench_targets(const rbench_options *o, rbench_target **out, size_t *n,
                char *why_no_cl, size_t why_len, char *err, size_t err_len);
/* --list: every device raybox-bench can measure. */
int rbench_print_devices(FILE *f);

/* ---- progress (progress.c): one line on stderr, rewritten in place on
 * a terminal, a line every few seconds otherwise; silent when quiet. */
void rbench_progress_init(size_t total, int quiet);
void rbench_progress(const char *what);
/* Counts n steps that will not run (a device that failed to open). */
void rbench_progress_skip(size_t n);
void rbench_progress_done(void);

/* ---- one device through the library (device_run.c, modes.c) */
typedef struct rbench_device {
    const rbench_options *o;
    rb_context *ctx;        /* brute force: queries with inline boxes */
    rb_context *scene_ctx;  /* the default hierarchy use: scene queries */
    rbench_where where;        /* backend, device, type, driver filled */
    int is_cl;
    double copy_Bps;        /* the device's own copy bandwidth (bound) */
    double h2d_Bps, d2h_Bps;
    int host_unified;       /* copies cost nothing beyond the bound */
    rbench_rows *rows;
} rbench_device;

/* What the CPU target measured, for the summary. */
typedef struct rbench_cpu_figures {
    int have;
    double copy_Bps, reference_tests_per_s;
    double plain_copy_Bps; /* the plain-store copy loop alone */
    double pairs_traffic_Bps; /* pairs' reads and writes, no computation */
    double pairs_reads_Bps;   /* pairs' reads alone (56 bytes a pair) */
    unsigned threads;
    char simd[16];
    char device[128];
} rbench_cpu_figures;

/* Limits, then every mode's ladder, on a CPU or OpenCL target. */
void rbench_run_device(const rbench_options *o, const rbench_target *t,
                    rbench_rows *rows, rbench_cpu_figures *cpu);
/* The number of progress steps rbench_run_device takes for one target. */
size_t rbench_device_steps(const rbench_options *o, const rbench_target *t);
void rbench_run_modes(rbench_device *d);
size_t rbench_modes_steps(const rbench_options *o);

/* ---- rayboxd over HTTP (http.c) */
void rbench_run_http(const rbench_options *o, const char *url, rbench_rows *rows);
size_t rbench_http_steps(const rbench_options *o);

/* ---- byte counts (modes.c): what a query must move at the least,
 * inputs once and outputs once; boxes counted when boxes_count != 0. */
double rbench_query_bytes(rb_mode mode, size_t rays, size_t boxes,
                       uint32_t max_hits, int boxes_count);
double rbench_answer_bytes(rb_mode mode, uint32_t max_hits); /* per ray */

/* ---- summary of the issue-2 targets (summary.c) into rows->summary. */
void rbench_summary(rbench_rows *rows, const rbench_cpu_figures *cpu, FILE *f);

/* ---- charts (plot.c). rbench_plot_check says why plotting cannot work
 * (no gnuplot) before anything is measured. */
int rbench_plot_check(char *why, size_t len);
/* sources[k-1] names the file rows with source k came from (NULL when
 * nothing was loaded); returns the number of charts or -1 with err. */
int rbench_plot(const rbench_rows *rows, const char *const *sources,
             size_t n_sources, const char *dir, char *err, size_t len);

#endif
