/* report.c - rows, and their table and JSON forms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static rbb_row *grow(rbb_rows *rows)
{
    if (rows->n == rows->cap) {
        size_t cap = rows->cap ? rows->cap * 2 : 64;
        rbb_row *r = realloc(rows->rows, cap * sizeof *r);
        if (!r) {
            fprintf(stderr, "raybox-bench: out of memory\n");
            exit(1);
        }
        rows->rows = r;
        rows->cap = cap;
    }
    rbb_row *row = &rows->rows[rows->n++];
    memset(row, 0, sizeof *row);
    return row;
}

static void put(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

rbb_row *rbb_add(rbb_rows *rows, const char *device, const char *backend,
                 const char *test, const char *size, const char *metric,
                 const char *unit, double value, double min, double max)
{
    rbb_row *r = grow(rows);
    put(r->device, sizeof r->device, device);
    put(r->backend, sizeof r->backend, backend);
    put(r->test, sizeof r->test, test);
    put(r->size, sizeof r->size, size);
    put(r->metric, sizeof r->metric, metric);
    put(r->unit, sizeof r->unit, unit);
    put(r->status, sizeof r->status, "ok");
    r->value = value;
    r->min = min;
    r->max = max;
    return r;
}

rbb_row *rbb_add_skip(rbb_rows *rows, const char *device,
                      const char *backend, const char *test,
                      const char *note)
{
    rbb_row *r = grow(rows);
    put(r->device, sizeof r->device, device);
    put(r->backend, sizeof r->backend, backend);
    put(r->test, sizeof r->test, test);
    put(r->status, sizeof r->status, "skipped");
    put(r->note, sizeof r->note, note);
    return r;
}

static void human(double v, char *buf, size_t len)
{
    const char *unit = "";
    double a = v < 0 ? -v : v;
    if (a >= 1e9) {
        v /= 1e9;
        unit = " G";
    } else if (a >= 1e6) {
        v /= 1e6;
        unit = " M";
    } else if (a >= 1e3) {
        v /= 1e3;
        unit = " k";
    }
    snprintf(buf, len, "%.3g%s", v, unit);
}

void rbb_print_table(const rbb_rows *rows)
{
    printf("%-8s %-18s %-16s %-20s %12s  %-25s %s\n", "backend", "test",
           "size", "metric", "value", "spread (min..max)", "unit");
    for (size_t i = 0; i < rows->n; i++) {
        const rbb_row *r = &rows->rows[i];
        if (strcmp(r->status, "ok") != 0) {
            printf("%-8s %-18s %-16s %-20s %12s  %s\n", r->backend, r->test,
                   r->size, r->metric, r->status, r->note);
            continue;
        }
        char v[32], lo[32], hi[32], spread[80] = "";
        human(r->value, v, sizeof v);
        if (r->min != r->max) {
            human(r->min, lo, sizeof lo);
            human(r->max, hi, sizeof hi);
            snprintf(spread, sizeof spread, "%s..%s", lo, hi);
        }
        printf("%-8s %-18s %-16s %-20s %12s  %-25s %s\n", r->backend,
               r->test, r->size, r->metric, v, spread, r->unit);
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

int rbb_write_json(const rbb_rows *rows, const char *path,
                   const char *summary_json)
{
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"tool\":\"raybox-bench\",\"version\":\"%s\",",
            RB_VERSION_STRING);
    fprintf(f, "\"summary\":%s,\"rows\":[\n",
            summary_json ? summary_json : "{}");
    for (size_t i = 0; i < rows->n; i++) {
        const rbb_row *r = &rows->rows[i];
        fputs(" {\"device\":", f);
        json_str(f, r->device);
        fputs(",\"backend\":", f);
        json_str(f, r->backend);
        fputs(",\"test\":", f);
        json_str(f, r->test);
        fputs(",\"size\":", f);
        json_str(f, r->size);
        fputs(",\"metric\":", f);
        json_str(f, r->metric);
        fputs(",\"unit\":", f);
        json_str(f, r->unit);
        fprintf(f, ",\"value\":%.6g,\"min\":%.6g,\"max\":%.6g,\"status\":",
                r->value, r->min, r->max);
        json_str(f, r->status);
        fputs(",\"note\":", f);
        json_str(f, r->note);
        fprintf(f, "}%s\n", i + 1 < rows->n ? "," : "");
    }
    fputs("]}\n", f);
    if (f != stdout)
        fclose(f);
    return 0;
}
