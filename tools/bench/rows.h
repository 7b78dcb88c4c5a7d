/*
 * rows.h - raybox-bench's results and what is done with them.
 *
 * Every figure is one row (backend, device, driver, test, shape, path,
 * size, metric, unit, value with its spread, status, skip reason), as
 * clpeak reports them, so the table, JSON, CSV, --compare and --plot all
 * read the same data. This part does not use libraybox: the unit tests
 * link it alone (the rbbench_report library).
 *
 * Ownership: rbench_rows owns its array; rbench_rows_free releases it. Strings
 * passed in are copied (truncated to the field). Not thread-safe.
 */
#ifndef RBENCH_ROWS_H
#define RBENCH_ROWS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rbench_row {
    char version[16];   /* raybox-bench version that produced the row */
    char git[48];       /* its git revision, "unknown" outside a checkout */
    char backend[16];   /* "cpu", "opencl", "http" */
    char device[128];
    char type[16];      /* "cpu", "gpu", "accelerator", "other", "server" */
    char driver[64];
    char category[16];  /* "limits", "modes", "scenes", "http" */
    char test[32];      /* "pairs", "count", "copy_bandwidth", ... */
    char shape[24];     /* "inline" (boxes in the query) or a scene shape;
                           "" for limits */
    char path[8];       /* "kernel", "e2e", "http"; "" for limits */
    uint64_t rays, boxes; /* batch size (0 when not a ray batch) */
    char size[48];      /* readable size: "65536x4096", "256 MiB" */
    char metric[32];    /* "rays_per_s", "tests_per_s", "fraction_of_bound" */
    char unit[16];
    double value;       /* median over repeats */
    double min, max;    /* spread over repeats */
    int repeats;
    char status[12];    /* "ok", "skipped", "failed" */
    char note[256];     /* the skip or failure reason, or a remark */
    int source;         /* not written: 0 measured, k for the k-th --from
                           file (charts tell runs of one device apart) */
} rbench_row;

typedef struct rbench_rows {
    rbench_row *rows;
    size_t n, cap;
    char version[16];   /* stamped on rows added with rbench_add* */
    char git[48];
    char summary[4096]; /* a JSON object ("" = none) */
} rbench_rows;

/* The fields that say where a row belongs; the result rows copy them. */
typedef struct rbench_where {
    const char *backend, *device, *type, *driver;
    const char *category, *test, *shape, *path;
    uint64_t rays, boxes;
    const char *size;
} rbench_where;

/* Appends an "ok" row. Exits the process when out of memory (a benchmark
 * that cannot hold its results has nothing to report). */
rbench_row *rbench_add(rbench_rows *rows, const rbench_where *w, const char *metric,
                 const char *unit, double value, double min, double max,
                 int repeats);
/* Appends a row with status "skipped" or "failed" and its reason. */
rbench_row *rbench_add_status(rbench_rows *rows, const rbench_where *w,
                        const char *metric, const char *status,
                        const char *reason);
/* Appends a copy of *r (stamps kept). */
rbench_row *rbench_add_row(rbench_rows *rows, const rbench_row *r);
void rbench_rows_free(rbench_rows *rows);

/* The first ok row matching every non-NULL argument, or NULL. */
const rbench_row *rbench_find(const rbench_rows *rows, const char *backend,
                        const char *device, const char *test,
                        const char *shape, const char *path,
                        uint64_t rays, const char *metric);

/* 1 if a larger value of this row's metric is better, 0 if smaller is
 * better (latencies, times). */
int rbench_higher_is_better(const rbench_row *r);

/* "12.3 G" style, 3 significant digits. */
void rbench_human(double v, char *buf, size_t len);

/* ---- writers (0 or -1 on a write error) */
void rbench_print_table(const rbench_rows *rows, FILE *f);
int rbench_write_json(const rbench_rows *rows, FILE *f);
int rbench_write_csv(const rbench_rows *rows, FILE *f);
/* Opens path ("-" = stdout), writes, closes; -1 with errno on failure. */
int rbench_write_file(const rbench_rows *rows, const char *path,
                   int (*writer)(const rbench_rows *, FILE *));

/* ---- reader: a file written by rbench_write_json; rows are appended to
 * *out. Returns 0, or -1 with a message in err. */
int rbench_read_json(const char *path, rbench_rows *out, char *err, size_t len);

/* ---- ratios (ratios.c): the figures a regression check compares from
 * one machine to another. Absolute rates move with the machine and its
 * load; ratios of figures measured in one run move far less. Appends to
 * *out, as category "ratios" with unit "x" (larger is better for raybox):
 *   - every CPU fraction_of_bound row, as it is;
 *   - CPU count against the reference slab loop (vs_reference_loop);
 *   - CPU nearest and any tests/s against count's at the same size
 *     (speed_vs_count);
 *   - every OpenCL rays_per_s row against the CPU backend's end-to-end
 *     rate of the same test, shape and size (speed_vs_native), kernel-only
 *     and end to end;
 *   - rows of *in already of category "ratios" (raybox-bench-bvh and
 *     raybox-bench-shapes write theirs with --rows), copied.
 * The CPU side is the first CPU device of *in. */
void rbench_ratio_rows(const rbench_rows *in, rbench_rows *out);

/* Appends a ratio row (category "ratios", unit "x", one repeat). */
rbench_row *rbench_add_ratio(rbench_rows *rows, const rbench_where *w, const char *metric,
                       double value);

/* ---- comparison: rows are matched by device/test/shape/path/size/metric
 * (and backend). A device of `now` that the baseline lacks is paired with
 * the baseline's unmatched device of the same backend and type, in order,
 * so two GPUs' runs can be compared; the pairing is printed. Prints every
 * matched row's change, then the rows found on one side only. */
typedef struct rbench_compare_stats {
    size_t matched;      /* rows present on both sides */
    size_t better, worse; /* beyond the threshold, in the metric's sense */
    size_t only_base, only_now;
    size_t paired_devices; /* devices matched by backend and type */
} rbench_compare_stats;

void rbench_compare(const rbench_rows *base, const rbench_rows *now,
                 double threshold, FILE *f, rbench_compare_stats *st);

#endif
