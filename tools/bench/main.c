/*
 * raybox-bench - throughput of every device and query mode, read against
 * each device's own measured limits. See --help; rows.h for the results
 * and what is done with them, bench.h for how they are measured.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "rbb_version.h"

static size_t count_status(const rbb_rows *rows, const char *status)
{
    size_t n = 0;
    for (size_t i = 0; i < rows->n; i++)
        n += strcmp(rows->rows[i].status, status) == 0;
    return n;
}

static int measure(const rbb_options *o, rbb_rows *rows)
{
    rbb_target *targets = NULL;
    size_t n = 0;
    char why_no_cl[512], err[512];
    if (rbb_targets(o, &targets, &n, why_no_cl, sizeof why_no_cl, err,
                    sizeof err)) {
        fprintf(stderr, "raybox-bench: %s\n", err);
        return 2;
    }
    size_t steps = 0;
    for (size_t i = 0; i < n; i++)
        steps += targets[i].kind == RBB_TARGET_HTTP
                     ? rbb_http_steps(o)
                     : rbb_device_steps(o, &targets[i]);
    rbb_progress_init(steps, o->quiet);
    int have_cl = 0;
    for (size_t i = 0; i < n; i++)
        have_cl |= targets[i].kind == RBB_TARGET_OPENCL;
    if (o->want_cl && !have_cl) {
        /* Whoever asked for OpenCL learns why there is none. */
        rbb_where w = {.backend = "opencl", .device = "", .category = "limits",
                       .test = "device"};
        rbb_add_status(rows, &w, "", "skipped", why_no_cl);
    }
    rbb_cpu_figures cpu = {0};
    for (size_t i = 0; i < n; i++) {
        if (targets[i].kind == RBB_TARGET_HTTP)
            rbb_run_http(o, targets[i].url, rows);
        else
            rbb_run_device(o, &targets[i], rows, &cpu);
    }
    rbb_progress_done();
    free(targets);
    rbb_print_table(rows, stdout);
    rbb_summary(rows, &cpu, stdout);
    return 0;
}

static int run(rbb_options *o);

int main(int argc, char **argv)
{
    rbb_options o;
    int rc = rbb_parse_options(argc, argv, &o);
    if (rc == 0)
        rc = run(&o);
    else
        rc = rc == 1 ? 0 : 2;
    rbb_options_free(&o);
    return rc;
}

static int run(rbb_options *opt)
{
    const rbb_options o = *opt;
    int rc;
    if (o.list)
        return rbb_print_devices(stdout);
    char why[512];
    /* Say so now, not after minutes of measuring. */
    if (o.plot && rbb_plot_check(why, sizeof why)) {
        fprintf(stderr, "raybox-bench: %s\n", why);
        return 1;
    }
    rbb_rows rows = {0};
    snprintf(rows.version, sizeof rows.version, "%s", RB_VERSION_STRING);
    snprintf(rows.git, sizeof rows.git, "%s", RBB_GIT_REVISION);
    printf("raybox-bench %s (git %s)\n", rows.version, rows.git);
    if (o.n_from) {
        for (size_t i = 0; i < o.n_from; i++) {
            size_t first = rows.n;
            if (rbb_read_json(o.from[i], &rows, why, sizeof why)) {
                fprintf(stderr, "raybox-bench: --from: %s\n", why);
                rbb_rows_free(&rows);
                return 1;
            }
            for (size_t k = first; k < rows.n; k++)
                rows.rows[k].source = (int)i + 1;
        }
        rbb_print_table(&rows, stdout);
    } else {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        rc = measure(&o, &rows);
        curl_global_cleanup();
        if (rc) {
            rbb_rows_free(&rows);
            return rc;
        }
    }
    if (o.ratios) {
        rbb_rows ratios = {0};
        memcpy(ratios.version, rows.version, sizeof ratios.version);
        memcpy(ratios.git, rows.git, sizeof ratios.git);
        rbb_ratio_rows(&rows, &ratios);
        rbb_rows_free(&rows);
        rows = ratios;
        printf("\nratios (%zu rows)\n", rows.n);
        rbb_print_table(&rows, stdout);
    }
    rc = 0;
    if (o.json && rbb_write_file(&rows, o.json, rbb_write_json)) {
        perror(o.json);
        rc = 1;
    }
    if (o.csv && rbb_write_file(&rows, o.csv, rbb_write_csv)) {
        perror(o.csv);
        rc = 1;
    }
    if (o.compare) {
        rbb_rows base = {0};
        if (rbb_read_json(o.compare, &base, why, sizeof why)) {
            fprintf(stderr, "raybox-bench: --compare: %s\n", why);
            rc = 1;
        } else {
            rbb_compare_stats st;
            printf("\ncomparison with %s\n", o.compare);
            rbb_compare(&base, &rows, o.threshold, stdout, &st);
        }
        rbb_rows_free(&base);
    }
    if (o.plot) {
        int charts = rbb_plot(&rows, o.n_from ? o.from : NULL, o.n_from,
                              o.plot, why, sizeof why);
        if (charts < 0) {
            fprintf(stderr, "raybox-bench: %s\n", why);
            rc = 1;
        } else {
            printf("\n%d charts in %s\n", charts, o.plot);
        }
    }
    size_t failed = count_status(&rows, "failed");
    size_t skipped = count_status(&rows, "skipped");
    if (skipped || failed)
        printf("\n%zu rows skipped, %zu failed (reasons in the table and "
               "the rows' notes)\n", skipped, failed);
    if (!rc && failed && !o.n_from)
        rc = 3;
    rbb_rows_free(&rows);
    return rc;
}
