/* table.c - the readable table: one block per device, its measured limits
 * first, then one line per (test, shape, path, size) with the rates, the
 * fraction of the device's bound and the spread over repeats. Skipped and
 * failed rows are printed with their reason. */
#include <string.h>

#include "rows.h"

static int same_device(const rbench_row *a, const rbench_row *b)
{
    return strcmp(a->backend, b->backend) == 0 &&
           strcmp(a->device, b->device) == 0;
}

static int same_group(const rbench_row *a, const rbench_row *b)
{
    return same_device(a, b) && strcmp(a->category, b->category) == 0 &&
           strcmp(a->test, b->test) == 0 &&
           strcmp(a->shape, b->shape) == 0 &&
           strcmp(a->path, b->path) == 0 && strcmp(a->size, b->size) == 0;
}

static int is_limit(const rbench_row *r)
{
    return strcmp(r->category, "limits") == 0;
}

static int ok(const rbench_row *r)
{
    return strcmp(r->status, "ok") == 0;
}

static void spread_text(const rbench_row *r, char *buf, size_t len)
{
    char lo[24], hi[24];
    buf[0] = '\0';
    if (r->repeats > 1 && r->min != r->max) {
        rbench_human(r->min, lo, sizeof lo);
        rbench_human(r->max, hi, sizeof hi);
        snprintf(buf, len, "%s..%s", lo, hi);
    }
}

static void print_limits(const rbench_rows *rows, size_t first, FILE *f)
{
    const rbench_row *dev = &rows->rows[first];
    int header = 0;
    for (size_t i = first; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        if (!same_device(r, dev) || !is_limit(r))
            continue;
        if (!header) {
            fprintf(f, "  %-22s %-14s %-18s %10s  %-20s %s\n", "limit",
                    "size", "metric", "value", "spread", "unit");
            header = 1;
        }
        if (!ok(r)) {
            fprintf(f, "  %-22s %-14s %-18s %10s  %s\n", r->test, r->size,
                    r->metric, r->status, r->note);
            continue;
        }
        char v[24], spread[56];
        rbench_human(r->value, v, sizeof v);
        spread_text(r, spread, sizeof spread);
        fprintf(f, "  %-22s %-14s %-18s %10s  %-20s %s\n", r->test, r->size,
                r->metric, v, spread, r->unit);
    }
}

/* The value of `metric` in the group that starts at row g, or NULL. */
static const rbench_row *group_metric(const rbench_rows *rows, size_t g,
                                   const char *metric)
{
    for (size_t i = g; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        if (same_group(r, &rows->rows[g]) && strcmp(r->metric, metric) == 0)
            return r;
    }
    return NULL;
}

static int is_ratio(const rbench_row *r)
{
    return strcmp(r->category, "ratios") == 0;
}

/* A group of ratio rows: its figures by name, no rates. */
static void print_ratio_group(const rbench_rows *rows, size_t g, FILE *f)
{
    const rbench_row *head = &rows->rows[g];
    fprintf(f, "  %-16s %-10s %-6s %-14s", head->test,
            head->shape[0] ? head->shape : "-",
            head->path[0] ? head->path : "-", head->size);
    for (size_t i = g; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        if (same_group(r, head) && strcmp(r->metric, "fraction_of_bound") == 0)
            fprintf(f, "  %s %.3g", r->metric, r->value);
        else if (same_group(r, head))
            fprintf(f, "  %s %.3gx", r->metric, r->value);
    }
    fputc('\n', f);
}

static void print_group(const rbench_rows *rows, size_t g, FILE *f)
{
    const rbench_row *head = &rows->rows[g];
    const char *shape = head->shape[0] ? head->shape : "-";
    const char *path = head->path[0] ? head->path : "-";
    if (is_ratio(head) && ok(head)) {
        print_ratio_group(rows, g, f);
        return;
    }
    if (!ok(head)) {
        fprintf(f, "  %-12s %-10s %-6s %-14s %s: %s\n", head->test, shape,
                path, head->size, head->status, head->note);
        return;
    }
    const rbench_row *rays = group_metric(rows, g, "rays_per_s");
    const rbench_row *tests = group_metric(rows, g, "tests_per_s");
    const rbench_row *frac = group_metric(rows, g, "fraction_of_bound");
    char a[24] = "-", b[24] = "-", c[24] = "-", spread[24] = "-";
    if (rays) {
        rbench_human(rays->value, a, sizeof a);
        if (rays->repeats > 1 && rays->value > 0)
            snprintf(spread, sizeof spread, "%.0f%%",
                     100.0 * (rays->max - rays->min) / rays->value);
    }
    if (tests)
        rbench_human(tests->value, b, sizeof b);
    if (frac)
        snprintf(c, sizeof c, "%.3g", frac->value);
    fprintf(f, "  %-12s %-10s %-6s %-14s %10s %10s %8s %6s", head->test,
            shape, path, head->size, a, b, c, spread);
    /* Any other figure of the group, by name. */
    for (size_t i = g; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        if (!same_group(r, head) || r == rays || r == tests || r == frac)
            continue;
        char v[24];
        rbench_human(r->value, v, sizeof v);
        fprintf(f, "  %s=%s%s%s", r->metric, v, r->unit[0] ? " " : "",
                r->unit);
    }
    fputc('\n', f);
}

static void print_groups(const rbench_rows *rows, size_t first, FILE *f)
{
    const rbench_row *dev = &rows->rows[first];
    int header = 0;
    for (size_t i = first; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        if (!same_device(r, dev) || is_limit(r))
            continue;
        int seen = 0;
        for (size_t j = first; j < i && !seen; j++)
            seen = same_group(&rows->rows[j], r);
        if (seen)
            continue;
        if (header != 1 + is_ratio(r) && is_ratio(r)) {
            fprintf(f, "  %-16s %-10s %-6s %-14s  %s\n", "ratio of", "shape",
                    "path", "rays[xboxes]", "figures (larger is better)");
            header = 2;
        } else if (header != 1 + is_ratio(r)) {
            fprintf(f, "  %-12s %-10s %-6s %-14s %10s %10s %8s %6s\n", "test",
                    "shape", "path", "rays[xboxes]", "rays/s", "tests/s",
                    "of bound", "spread");
            header = 1;
        }
        print_group(rows, i, f);
    }
}

void rbench_print_table(const rbench_rows *rows, FILE *f)
{
    for (size_t i = 0; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = same_device(&rows->rows[j], r);
        if (seen)
            continue;
        fprintf(f, "\n== %s: %s", r->backend, r->device[0] ? r->device : "?");
        if (r->type[0] || r->driver[0])
            fprintf(f, " (%s%s%s)", r->type, r->type[0] && r->driver[0]
                                                 ? ", driver " : "",
                    r->driver);
        fputc('\n', f);
        print_limits(rows, i, f);
        print_groups(rows, i, f);
    }
}
