/*
 * bench.h - raybox-bench's shared pieces.
 *
 * Every figure is a row (device, test, metric, unit, value, spread,
 * status), as clpeak reports them, so that the table, JSON and CSV outputs
 * and comparisons all read the same data.
 */
#ifndef RBB_BENCH_H
#define RBB_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"

typedef struct rbb_row {
    char device[128];
    char backend[16];
    char test[48];      /* "pairs", "count", "copy_bandwidth", ... */
    char size[48];      /* "16777216 rays", "65536x4096" */
    char metric[32];    /* "rays_per_s", "tests_per_s", "fraction_of_bound" */
    char unit[16];
    double value;       /* median */
    double min, max;    /* spread over repeats */
    char status[16];    /* "ok", "skipped", "failed" */
    char note[160];     /* skip reason or remark */
} rbb_row;

typedef struct rbb_rows {
    rbb_row *rows;
    size_t n, cap;
} rbb_rows;

rbb_row *rbb_add(rbb_rows *rows, const char *device, const char *backend,
                 const char *test, const char *size, const char *metric,
                 const char *unit, double value, double min, double max);
rbb_row *rbb_add_skip(rbb_rows *rows, const char *device,
                      const char *backend, const char *test,
                      const char *note);

/* ---- timing: runs fn until budget_s has passed per repeat, after warm-up
 * runs; reports seconds per call as median/min/max over repeats. */
typedef int (*rbb_fn)(void *arg, int rep);
typedef struct rbb_timing {
    double median, min, max; /* seconds per call */
    int calls, repeats;
    int failed;              /* fn returned non-zero */
} rbb_timing;

typedef struct rbb_plan {
    double budget_s; /* per repeat */
    int repeats;
    int warmups;
} rbb_plan;

int rbb_time(const rbb_plan *plan, rbb_fn fn, void *arg, rbb_timing *out);
double rbb_now(void);

/* ---- baselines measured in the same run, on the same cores. */
/* Streaming bandwidth of a plain copy loop: bytes read + written per s,
 * with ordinary or (streaming != 0, x86-64) cache-bypassing stores. */
double rbb_copy_bandwidth(const rbb_plan *plan, unsigned threads,
                          int streaming, rbb_timing *t,
                          size_t *bytes_per_call);
/* The minimal reference slab loop: hits of R rays against B boxes (SoA),
 * nothing else; returns slab tests per second. */
double rbb_reference_count(const rbb_plan *plan, unsigned threads,
                           size_t n_rays, size_t n_boxes, rbb_timing *t);

/* ---- workloads: seeded, reproducible. Directions are random, origins
 * inside [0, 100]^3, boxes of side 0.5..3 inside the same cube. */
void rbb_make_rays(uint64_t seed, rb_ray *rays, size_t n);
void rbb_make_boxes(uint64_t seed, rb_box *boxes, size_t n);
/* Pairs: each box near its ray's path, so about half the pairs hit. */
void rbb_make_pair_boxes(uint64_t seed, const rb_ray *rays, rb_box *boxes,
                         size_t n);

/* ---- output */
void rbb_print_table(const rbb_rows *rows);
int rbb_write_json(const rbb_rows *rows, const char *path,
                   const char *summary_json);

#endif
