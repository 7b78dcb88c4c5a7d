/* ratios.c - the ratio rows a regression check compares (rows.h). Every
 * ratio is formed from two figures of the same run, so a baseline taken
 * on one machine still says something on another. */
#include <string.h>

#include "rows.h"

static int ok_row(const rbench_row *r, const char *backend, const char *metric)
{
    return strcmp(r->status, "ok") == 0 && strcmp(r->backend, backend) == 0 &&
           strcmp(r->metric, metric) == 0;
}

static rbench_where where_of(const rbench_row *r)
{
    return (rbench_where){.backend = r->backend, .device = r->device,
                       .type = r->type, .driver = r->driver,
                       .category = "ratios", .test = r->test,
                       .shape = r->shape, .path = r->path, .rays = r->rays,
                       .boxes = r->boxes, .size = r->size};
}

rbench_row *rbench_add_ratio(rbench_rows *rows, const rbench_where *w, const char *metric,
                       double value)
{
    rbench_where ratio = *w;
    ratio.category = "ratios";
    return rbench_add(rows, &ratio, metric, "x", value, value, value, 1);
}

/* The CPU row of `test` on `shape`, end to end, at the size of r. */
static const rbench_row *cpu_twin(const rbench_rows *in, const char *cpu,
                               const rbench_row *r, const char *test,
                               const char *metric)
{
    for (size_t i = 0; i < in->n; i++) {
        const rbench_row *c = &in->rows[i];
        if (ok_row(c, "cpu", metric) && strcmp(c->device, cpu) == 0 &&
            strcmp(c->test, test) == 0 && strcmp(c->shape, r->shape) == 0 &&
            strcmp(c->path, "e2e") == 0 && c->rays == r->rays &&
            c->boxes == r->boxes && c->value > 0)
            return c;
    }
    return NULL;
}

/* Rows of one device together, devices in order of first appearance
 * (the tools' files interleave them), each device's rows in their order. */
static void group_by_device(rbench_rows *rows, size_t first)
{
    size_t n = rows->n - first;
    rbench_row *v = rows->rows + first;
    for (size_t i = 0; i < n; i++) {
        size_t j = i + 1;
        /* the next row of v[i]'s device moves up to i + 1 */
        while (j < n && (strcmp(v[j].backend, v[i].backend) != 0 ||
                         strcmp(v[j].device, v[i].device) != 0))
            j++;
        if (j >= n || j == i + 1)
            continue;
        rbench_row keep = v[j];
        memmove(&v[i + 2], &v[i + 1], (j - i - 1) * sizeof *v);
        v[i + 1] = keep;
    }
}

void rbench_ratio_rows(const rbench_rows *in, rbench_rows *out)
{
    size_t first = out->n;
    const char *cpu = NULL;
    for (size_t i = 0; i < in->n && !cpu; i++)
        if (strcmp(in->rows[i].backend, "cpu") == 0 &&
            strcmp(in->rows[i].status, "ok") == 0 &&
            strcmp(in->rows[i].category, "ratios") != 0)
            cpu = in->rows[i].device;
    const rbench_row *ref = NULL;
    for (size_t i = 0; cpu && i < in->n && !ref; i++)
        if (ok_row(&in->rows[i], "cpu", "tests_per_s") &&
            strcmp(in->rows[i].device, cpu) == 0 &&
            strcmp(in->rows[i].test, "reference_loop") == 0)
            ref = &in->rows[i];
    for (size_t i = 0; i < in->n; i++) {
        const rbench_row *r = &in->rows[i];
        if (strcmp(r->category, "ratios") == 0) {
            rbench_add_row(out, r);
            continue;
        }
        if (!cpu || strcmp(r->status, "ok") != 0 ||
            strcmp(r->category, "limits") == 0)
            continue;
        rbench_where w = where_of(r);
        int on_cpu = strcmp(r->backend, "cpu") == 0 &&
                     strcmp(r->device, cpu) == 0;
        if (on_cpu && strcmp(r->metric, "fraction_of_bound") == 0) {
            rbench_add_ratio(out, &w, "fraction_of_bound", r->value);
        } else if (on_cpu && strcmp(r->metric, "tests_per_s") == 0 &&
                   strcmp(r->path, "e2e") == 0 &&
                   strcmp(r->shape, "inline") == 0) {
            if (strcmp(r->test, "count") == 0 && ref && ref->value > 0)
                rbench_add_ratio(out, &w, "vs_reference_loop",
                              r->value / ref->value);
            const rbench_row *count =
                strcmp(r->test, "nearest") == 0 || strcmp(r->test, "any") == 0
                    ? cpu_twin(in, cpu, r, "count", "tests_per_s")
                    : NULL;
            if (count)
                rbench_add_ratio(out, &w, "speed_vs_count",
                              r->value / count->value);
        } else if (strcmp(r->backend, "opencl") == 0 &&
                   strcmp(r->metric, "rays_per_s") == 0) {
            const rbench_row *native =
                cpu_twin(in, cpu, r, r->test, "rays_per_s");
            if (native)
                rbench_add_ratio(out, &w, "speed_vs_native",
                              r->value / native->value);
        }
    }
    group_by_device(out, first);
}
