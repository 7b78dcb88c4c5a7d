/* rows.c - the row store: appending, finding, formatting values. */
#include <stdlib.h>
#include <string.h>

#include "rows.h"

static rbench_row *grow(rbench_rows *rows)
{
    if (rows->n == rows->cap) {
        size_t cap = rows->cap ? rows->cap * 2 : 128;
        rbench_row *r = realloc(rows->rows, cap * sizeof *r);
        if (!r) {
            fprintf(stderr, "raybox-bench: out of memory for the results\n");
            exit(1);
        }
        rows->rows = r;
        rows->cap = cap;
    }
    rbench_row *row = &rows->rows[rows->n++];
    memset(row, 0, sizeof *row);
    return row;
}

static void put(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static rbench_row *placed(rbench_rows *rows, const rbench_where *w, const char *metric)
{
    rbench_row *r = grow(rows);
    put(r->version, sizeof r->version, rows->version);
    put(r->git, sizeof r->git, rows->git[0] ? rows->git : "unknown");
    put(r->backend, sizeof r->backend, w->backend);
    put(r->device, sizeof r->device, w->device);
    put(r->type, sizeof r->type, w->type);
    put(r->driver, sizeof r->driver, w->driver);
    put(r->category, sizeof r->category, w->category);
    put(r->test, sizeof r->test, w->test);
    put(r->shape, sizeof r->shape, w->shape);
    put(r->path, sizeof r->path, w->path);
    put(r->size, sizeof r->size, w->size);
    put(r->metric, sizeof r->metric, metric);
    r->rays = w->rays;
    r->boxes = w->boxes;
    return r;
}

rbench_row *rbench_add(rbench_rows *rows, const rbench_where *w, const char *metric,
                 const char *unit, double value, double min, double max,
                 int repeats)
{
    rbench_row *r = placed(rows, w, metric);
    put(r->unit, sizeof r->unit, unit);
    put(r->status, sizeof r->status, "ok");
    r->value = value;
    r->min = min;
    r->max = max;
    r->repeats = repeats;
    return r;
}

rbench_row *rbench_add_status(rbench_rows *rows, const rbench_where *w,
                        const char *metric, const char *status,
                        const char *reason)
{
    rbench_row *r = placed(rows, w, metric);
    put(r->status, sizeof r->status, status);
    /* A skip without its reason is useless to whoever reads the file. */
    put(r->note, sizeof r->note, reason && *reason ? reason : "no reason given");
    return r;
}

rbench_row *rbench_add_row(rbench_rows *rows, const rbench_row *r)
{
    rbench_row *dst = grow(rows);
    *dst = *r;
    return dst;
}

void rbench_rows_free(rbench_rows *rows)
{
    free(rows->rows);
    rows->rows = NULL;
    rows->n = rows->cap = 0;
}

static int eq(const char *want, const char *have)
{
    return !want || strcmp(want, have) == 0;
}

const rbench_row *rbench_find(const rbench_rows *rows, const char *backend,
                        const char *device, const char *test,
                        const char *shape, const char *path,
                        uint64_t rays, const char *metric)
{
    for (size_t i = 0; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        if (strcmp(r->status, "ok") == 0 && eq(backend, r->backend) &&
            eq(device, r->device) && eq(test, r->test) &&
            eq(shape, r->shape) && eq(path, r->path) &&
            (!rays || rays == r->rays) && eq(metric, r->metric))
            return r;
    }
    return NULL;
}

int rbench_higher_is_better(const rbench_row *r)
{
    static const char *const lower[] = {"s", "ms", "us", "ns"};
    for (size_t i = 0; i < sizeof lower / sizeof *lower; i++)
        if (strcmp(r->unit, lower[i]) == 0)
            return 0;
    return 1;
}

void rbench_human(double v, char *buf, size_t len)
{
    static const struct {
        double scale;
        const char *suffix;
    } steps[] = {{1e12, " T"}, {1e9, " G"}, {1e6, " M"}, {1e3, " k"}};
    double a = v < 0 ? -v : v;
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        /* 999.7 k prints as "1 M", not "1e+03 k". */
        if (a >= steps[i].scale * 0.9995) {
            snprintf(buf, len, "%.3g%s", v / steps[i].scale, steps[i].suffix);
            return;
        }
    }
    snprintf(buf, len, "%.3g", v);
}

int rbench_write_file(const rbench_rows *rows, const char *path,
                   int (*writer)(const rbench_rows *, FILE *))
{
    int to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f)
        return -1;
    int rc = writer(rows, f);
    if (fflush(f) != 0)
        rc = -1;
    if (!to_stdout && fclose(f) != 0)
        rc = -1;
    return rc;
}
