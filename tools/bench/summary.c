/* summary.c - the figures the project's performance targets are stated in
 * (issue 2), computed from the rows: the CPU backend's pairs as a fraction
 * of the copy-loop bound (largest pairs batch), count against the
 * reference slab loop, nearest's and any's per-test cost against count's
 * (65536 rays x --boxes inline boxes, or the largest ray count run), and
 * each mode's OpenCL slowdown against the CPU backend at the same sizes
 * (the first OpenCL device), all end to end. The JSON keys are the ones
 * the README quotes; they stay. */
#include <string.h>

#include "bench.h"

#define SUMMARY_RAYS 65536

static const rbench_row *rate(const rbench_rows *rows, const char *backend,
                           const char *device, const char *mode,
                           uint64_t rays)
{
    return rbench_find(rows, backend, device, mode, "inline", "e2e", rays,
                    "tests_per_s");
}

/* The largest ray count of `mode` that ran on the CPU backend, preferring
 * `want` when it ran. */
static uint64_t size_for(const rbench_rows *rows, const char *device,
                         const char *mode, uint64_t want)
{
    if (want && rate(rows, "cpu", device, mode, want))
        return want;
    uint64_t best = 0;
    for (size_t i = 0; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        if (strcmp(r->backend, "cpu") == 0 && strcmp(r->test, mode) == 0 &&
            strcmp(r->shape, "inline") == 0 && strcmp(r->path, "e2e") == 0 &&
            strcmp(r->status, "ok") == 0 && r->rays > best)
            best = r->rays;
    }
    return best;
}

static void add(char *buf, size_t cap, const char *fmt, const char *key,
                double v)
{
    size_t len = strlen(buf);
    if (len < cap)
        snprintf(buf + len, cap - len, fmt, key, v);
}

void rbench_summary(rbench_rows *rows, const rbench_cpu_figures *cpu, FILE *f)
{
    char *s = rows->summary;
    size_t cap = sizeof rows->summary;
    snprintf(s, cap, "{");
    if (!cpu->have) {
        snprintf(s, cap, "{}");
        return;
    }
    const char *dev = cpu->device;
    add(s, cap, "\"%s\":%.0f", "threads", cpu->threads);
    add(s, cap, ",\"%s\":%.6g", "copy_bandwidth_Bps", cpu->copy_Bps);
    add(s, cap, ",\"%s\":%.6g", "reference_tests_per_s",
        cpu->reference_tests_per_s);
    fprintf(f, "\nsummary (native CPU backend, %u threads, %s)\n",
            cpu->threads, cpu->simd[0] ? cpu->simd : "scalar");

    uint64_t np = size_for(rows, dev, "pairs", 0);
    const rbench_row *pf = rbench_find(rows, "cpu", dev, "pairs", "inline", "e2e",
                                 np, "fraction_of_bound");
    if (pf) {
        add(s, cap, ",\"%s\":%.4g", "cpu_pairs_fraction_of_bound", pf->value);
        add(s, cap, ",\"%s\":%.0f", "pairs_size", (double)np);
        fprintf(f, "  cpu pairs (%llu): %.2f of the copy-loop bandwidth "
                   "bound (the faster of the plain and streaming-store "
                   "loops)\n",
                (unsigned long long)np, pf->value);
        /* The same against the plain-store loop alone: the "plain
         * copy loop", which pays a read of every line it writes. */
        if (cpu->plain_copy_Bps > 0 && cpu->copy_Bps > 0) {
            double v = pf->value * cpu->copy_Bps / cpu->plain_copy_Bps;
            add(s, cap, ",\"%s\":%.4g",
                "cpu_pairs_fraction_of_plain_copy_bound", v);
            fprintf(f, "  cpu pairs (%llu): %.2f of the plain copy loop's "
                       "bandwidth\n",
                    (unsigned long long)np, v);
        }
        /* Against the loop that moves pairs' own bytes and computes
         * nothing: near 1 means the memory system, not the code, holds
         * pairs below the copy bound. */
        if (cpu->pairs_traffic_Bps > 0 && cpu->copy_Bps > 0) {
            double v = pf->value * cpu->copy_Bps / cpu->pairs_traffic_Bps;
            add(s, cap, ",\"%s\":%.4g",
                "cpu_pairs_fraction_of_pairs_traffic", v);
            add(s, cap, ",\"%s\":%.4g",
                "pairs_traffic_fraction_of_bound",
                cpu->pairs_traffic_Bps / cpu->copy_Bps);
            fprintf(f, "  cpu pairs (%llu): %.2f of the pairs traffic "
                       "loop (the same reads and writes, no computation; "
                       "that loop reaches %.2f of the bound)\n",
                    (unsigned long long)np, v,
                    cpu->pairs_traffic_Bps / cpu->copy_Bps);
        }
        /* pairs must at least read its 56 bytes a pair: at the reads
         * loop's rate, its 72 bytes would reach `ceiling` of the bound, and
         * no code can do better on this machine. */
        if (cpu->pairs_reads_Bps > 0 && cpu->copy_Bps > 0) {
            double ceiling =
                cpu->pairs_reads_Bps * 72.0 / 56.0 / cpu->copy_Bps;
            add(s, cap, ",\"%s\":%.4g", "pairs_reads_ceiling_of_bound",
                ceiling);
            add(s, cap, ",\"%s\":%.4g", "cpu_pairs_fraction_of_reads_ceiling",
                pf->value / ceiling);
            fprintf(f, "  cpu pairs (%llu): %.2f of its reads' ceiling (a "
                       "loop that only reads pairs' inputs would reach "
                       "%.2f of the bound)\n",
                    (unsigned long long)np, pf->value / ceiling, ceiling);
        }
    }
    uint64_t nr = size_for(rows, dev, "count", SUMMARY_RAYS);
    const rbench_row *count = rate(rows, "cpu", dev, "count", nr);
    const rbench_row *nearest = rate(rows, "cpu", dev, "nearest", nr);
    const rbench_row *any = rate(rows, "cpu", dev, "any", nr);
    if (count) {
        add(s, cap, ",\"%s\":%.0f", "rays_size", (double)nr);
        add(s, cap, ",\"%s\":%.0f", "boxes_size", (double)count->boxes);
    }
    if (count && cpu->reference_tests_per_s > 0) {
        double v = count->value / cpu->reference_tests_per_s;
        add(s, cap, ",\"%s\":%.4g", "cpu_count_ratio_to_reference", v);
        fprintf(f, "  cpu count (%s): %.2fx the reference slab loop\n",
                count->size, v);
    }
    if (count && nearest) {
        double v = count->value / nearest->value;
        add(s, cap, ",\"%s\":%.4g", "cpu_nearest_cost_vs_count", v);
        fprintf(f, "  cpu nearest per-test cost: %.2fx count's\n", v);
    }
    if (count && any) {
        double v = count->value / any->value;
        add(s, cap, ",\"%s\":%.4g", "cpu_any_cost_vs_count", v);
        fprintf(f, "  cpu any per-test cost: %.2fx count's\n", v);
    }
    /* The first OpenCL device in the rows. */
    const char *cl = NULL;
    for (size_t i = 0; i < rows->n && !cl; i++)
        if (strcmp(rows->rows[i].backend, "opencl") == 0 &&
            strcmp(rows->rows[i].status, "ok") == 0)
            cl = rows->rows[i].device;
    static const char *const modes[] = {"pairs", "nearest", "any", "count",
                                        "all"};
    for (size_t m = 0; cl && m < sizeof modes / sizeof *modes; m++) {
        uint64_t n = m == 0 ? np : size_for(rows, dev, modes[m], nr);
        const rbench_row *a = rate(rows, "cpu", dev, modes[m], n);
        const rbench_row *b = rate(rows, "opencl", cl, modes[m], n);
        if (!a || !b || b->value <= 0)
            continue;
        char key[64];
        snprintf(key, sizeof key, "opencl_%s_slowdown_vs_cpu", modes[m]);
        add(s, cap, ",\"%s\":%.4g", key, a->value / b->value);
        fprintf(f, "  opencl %s (%s): %.2fx slower than cpu\n", modes[m],
                b->size, a->value / b->value);
    }
    if (cl) {
        size_t len = strlen(s);
        snprintf(s + len, cap - len, ",\"opencl_device\":\"");
        /* Device names are plain text; drop what JSON would need escaped. */
        len = strlen(s);
        for (const char *p = cl; *p && len + 3 < cap; p++)
            if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
                s[len++] = *p;
        s[len] = '\0';
        snprintf(s + len, cap - len, "\"");
    }
    size_t len = strlen(s);
    snprintf(s + len, cap - len, "}");
}
