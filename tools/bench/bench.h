/*
 * bench.h - raybox-bench's measuring side: options, timing, workloads,
 * targets (the native CPU backend, each OpenCL device, a rayboxd URL),
 * their measured limits and the mode ladders. Results are rows (rows.h).
 *
 * Single-threaded tool: none of this is thread-safe.
 */
#ifndef RBB_BENCH_H
#define RBB_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"
#include "rows.h"
#include "shapes.h"

#define RBB_MAX_LADDER 16
#define RBB_MAX_LIST 16

/* ---- options (options.c): one table gives getopt and --help. */
typedef struct rbb_plan {
    double budget_s; /* per repeat: iterations are calibrated to fill it */
    int repeats;     /* the median over repeats is the figure */
    int warmups;
} rbb_plan;

typedef struct rbb_options {
    int want_cpu, want_cl;      /* --backend */
    int backend_given;
    const char *devices[RBB_MAX_LIST]; /* --device, commas split */
    size_t n_devices;
    const char *split_devices;  /* --devices: one batch over these */
    int list;
    unsigned threads;
    size_t pairs[RBB_MAX_LADDER], n_pairs;   /* pairs ladder (rays) */
    size_t rays[RBB_MAX_LADDER], n_rays;     /* every-box ladder, inline */
    size_t scene_rays[RBB_MAX_LADDER], n_scene_rays;
    size_t http_rays[RBB_MAX_LADDER], n_http_rays;
    size_t boxes, scene_boxes;
    const char *shapes[RBB_MAX_LIST];
    size_t n_shapes;
    int modes;                  /* bit per rb_mode */
    uint32_t max_hits;
    rbb_plan plan;
    double max_call_s;          /* skip sizes predicted to take longer */
    size_t copy_bytes;          /* copy-bandwidth buffers */
    const char *json, *csv, *plot, *compare, *http;
    const char *from[RBB_MAX_LIST];
    size_t n_from;
    double threshold;           /* --compare: change that counts */
    int quick, quiet;
    int ratios;                 /* --ratios: keep the ratio rows only */
    char *owned[3 * RBB_MAX_LIST]; /* the split list words, freed at exit */
    size_t n_owned;
} rbb_options;

/* 0 = run, 1 = exit 0 (--help printed), 2 = usage error (message printed).
 * rbb_options_free releases what parsing allocated, in every case. */
int rbb_parse_options(int argc, char **argv, rbb_options *o);
void rbb_options_free(rbb_options *o);

/* ---- timing (timing.c). fn runs one call; it may set *device_s to the
 * call's device-side (kernel) time in seconds. After warm-ups, the number
 * of calls per repeat is calibrated so that a repeat lasts about budget_s;
 * the per-call time of each repeat gives median, min and max. */
typedef int (*rbb_fn)(void *arg, uint64_t call, double *device_s);

typedef struct rbb_timing {
    double median, min, max;          /* wall seconds per call */
    double dev_median, dev_min, dev_max; /* device seconds per call */
    int has_device;
    int repeats;
    uint64_t iters;                   /* calls per repeat */
    int failed;                       /* fn's status when non-zero */
} rbb_timing;

int rbb_time(const rbb_plan *plan, rbb_fn fn, void *arg, rbb_timing *out);
double rbb_now(void);

/* ---- workloads (workload.c): seeded, reproducible. */
void rbb_make_rays(uint64_t seed, rb_ray *rays, size_t n);
void rbb_make_boxes(uint64_t seed, rb_box *boxes, size_t n);
void rbb_make_pair_boxes(uint64_t seed, const rb_ray *rays, rb_box *boxes,
                         size_t n);

/* Several data sets of the same size, rotated call by call so that a call
 * does not find the previous call's data in the caches: as many sets as
 * fill RBB_ROTATE_BYTES (at least 2, at most 64). */
#define RBB_ROTATE_BYTES ((size_t)64 << 20)
typedef enum rbb_pool_kind {
    RBB_POOL_PAIRS,  /* rays and a box near each ray's path */
    RBB_POOL_INLINE, /* rays and random boxes sent with the query */
    RBB_POOL_SCENE   /* rays of a scene shape (boxes live in the scene) */
} rbb_pool_kind;

typedef struct rbb_pool {
    rb_ray *rays;    /* sets * n_rays */
    rb_box *boxes;   /* sets * n_boxes, NULL for scenes */
    size_t n_rays, n_boxes;
    unsigned sets;
} rbb_pool;

int rbb_pool_make(rbb_pool *p, rbb_pool_kind kind, const rbb_shape *shape,
                  size_t n_rays, size_t n_boxes, uint64_t seed);
void rbb_pool_free(rbb_pool *p);
/* Bytes a pool of this size would hold (to refuse what cannot fit). */
double rbb_pool_bytes(rbb_pool_kind kind, size_t n_rays, size_t n_boxes);

/* ---- CPU baselines (baseline.c, ref_loop.c), same run, same cores. */
double rbb_copy_bandwidth(const rbb_plan *plan, unsigned threads,
                          int streaming, size_t bytes, rbb_timing *t,
                          size_t *bytes_per_call);
double rbb_reference_count(const rbb_plan *plan, unsigned threads,
                           size_t n_rays, size_t n_boxes, rbb_timing *t);

/* ---- OpenCL limits (cl_limits.c), through the OpenCL API directly. */
typedef struct rbb_cl_limits {
    double copy_Bps;        /* device copy kernel, bytes read + written/s */
    double h2d_Bps, d2h_Bps;               /* pageable host memory */
    double h2d_pinned_Bps, d2h_pinned_Bps; /* CL_MEM_ALLOC_HOST_PTR */
    double launch_s;        /* empty kernel: enqueue + wait, per launch */
    double launch_batched_s; /* empty kernels back to back, per launch */
    rbb_timing t_copy, t_h2d, t_d2h, t_h2d_pinned, t_d2h_pinned, t_launch,
        t_launch_batched;
    size_t bytes;           /* buffer size used */
    int host_unified;
    char error[256];        /* why a figure is missing ("" if none) */
} rbb_cl_limits;

/* Measures device `index` of rb_devices_list (its name must be `name`).
 * Returns 0, or -1 with out->error set (figures already measured stay). */
int rbb_cl_limits_measure(int index, const char *name, const rbb_plan *plan,
                          size_t bytes, rbb_cl_limits *out);

/* ---- targets (targets.c) */
typedef enum rbb_target_kind {
    RBB_TARGET_CPU,
    RBB_TARGET_OPENCL,
    RBB_TARGET_HTTP
} rbb_target_kind;

typedef struct rbb_target {
    rbb_target_kind kind;
    int cl_index;            /* OpenCL: index in rb_devices_list */
    rb_device_desc desc;     /* OpenCL */
    char label[160];         /* OpenCL: the name rows carry; two devices of
                                one name get " [index]" to stay apart */
    const char *url;         /* HTTP */
    const char *devices;     /* OpenCL over several devices (--devices):
                                rb_context_options.devices; else NULL */
} rbb_target;

/* The targets the options select. On a selection error (no such device)
 * returns -1 with a message in err; no OpenCL at all is not an error:
 * *why_no_cl says why (a skip row for whoever asked for OpenCL). */
int rbb_targets(const rbb_options *o, rbb_target **out, size_t *n,
                char *why_no_cl, size_t why_len, char *err, size_t err_len);
/* --list: every device raybox-bench can measure. */
int rbb_print_devices(FILE *f);

/* ---- progress (progress.c): one line on stderr, rewritten in place on
 * a terminal, a line every few seconds otherwise; silent when quiet. */
void rbb_progress_init(size_t total, int quiet);
void rbb_progress(const char *what);
/* Counts n steps that will not run (a device that failed to open). */
void rbb_progress_skip(size_t n);
void rbb_progress_done(void);

/* ---- one device through the library (device_run.c, modes.c) */
typedef struct rbb_device {
    const rbb_options *o;
    rb_context *ctx;        /* brute force: queries with inline boxes */
    rb_context *scene_ctx;  /* the default hierarchy use: scene queries */
    rbb_where where;        /* backend, device, type, driver filled */
    int is_cl;
    double copy_Bps;        /* the device's own copy bandwidth (bound) */
    double h2d_Bps, d2h_Bps;
    int host_unified;       /* copies cost nothing beyond the bound */
    rbb_rows *rows;
} rbb_device;

/* What the CPU target measured, for the summary. */
typedef struct rbb_cpu_figures {
    int have;
    double copy_Bps, reference_tests_per_s;
    double plain_copy_Bps; /* the plain-store copy loop alone */
    unsigned threads;
    char simd[16];
    char device[128];
} rbb_cpu_figures;

/* Limits, then every mode's ladder, on a CPU or OpenCL target. */
void rbb_run_device(const rbb_options *o, const rbb_target *t,
                    rbb_rows *rows, rbb_cpu_figures *cpu);
/* The number of progress steps rbb_run_device takes for one target. */
size_t rbb_device_steps(const rbb_options *o, const rbb_target *t);
void rbb_run_modes(rbb_device *d);
size_t rbb_modes_steps(const rbb_options *o);

/* ---- rayboxd over HTTP (http.c) */
void rbb_run_http(const rbb_options *o, const char *url, rbb_rows *rows);
size_t rbb_http_steps(const rbb_options *o);

/* ---- byte counts (modes.c): what a query must move at the least,
 * inputs once and outputs once; boxes counted when boxes_count != 0. */
double rbb_query_bytes(rb_mode mode, size_t rays, size_t boxes,
                       uint32_t max_hits, int boxes_count);
double rbb_answer_bytes(rb_mode mode, uint32_t max_hits); /* per ray */

/* ---- summary of the issue-2 targets (summary.c) into rows->summary. */
void rbb_summary(rbb_rows *rows, const rbb_cpu_figures *cpu, FILE *f);

/* ---- charts (plot.c). rbb_plot_check says why plotting cannot work
 * (no gnuplot) before anything is measured. */
int rbb_plot_check(char *why, size_t len);
/* sources[k-1] names the file rows with source k came from (NULL when
 * nothing was loaded); returns the number of charts or -1 with err. */
int rbb_plot(const rbb_rows *rows, const char *const *sources,
             size_t n_sources, const char *dir, char *err, size_t len);

#endif
