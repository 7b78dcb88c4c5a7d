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
#include "rbench_version.h"

static size_t count_status(const rbench_rows *rows, const char *status)
{
    size_t n = 0;
    for (size_t i = 0; i < rows->n; i++)
        n += strcmp(rows->rows[i].status, status) == 0;
    return n;
}

static int measure(const rbench_options *o, rbench_rows *rows)
{
    rbench_target *targets = NULL;
    size_t n = 0;
    char why_no_cl[512], err[512];
    if (rbench_targets(o, &targets, &n, why_no_cl, sizeof why_no_cl, err,
                    sizeof err)) {
        fprintf(stderr, "raybox-bench: %s\n", err);
        return 2;
    }
    size_t steps = 0;
    for (size_t i = 0; i < n; i++)
        steps += targets[i].kind == RBENCH_TARGET_HTTP
                     ? rbench_http_steps(o)
                     : rbench_device_steps(o, &targets[i]);
    rbench_progress_init(steps, o->quiet);
    int have_cl = 0;
    for (size_t i = 0; i < n; i++)
        have_cl |= targets[i].kind == RBENCH_TARGET_OPENCL;
    if (o->want_cl && !have_cl) {
        /* Whoever asked for OpenCL learns why there is none. */
        rbench_where w = {.backend = "opencl", .device = "", .category = "limits",
                       .test = "device"};
        rbench_add_status(rows, &w, "", "skipped", why_no_cl);
    }
    rbench_cpu_figures cpu = {0};
    for (size_t i = 0; i < n; i++) {
        if (targets[i].kind == RBENCH_TARGET_HTTP)
            rbench_run_http(o, targets[i].url, rows);
        else
            rbench_run_device(o, &targets[i], rows, &cpu);
    }
    rbench_progress_done();
    free(targets);
    rbench_print_table(rows, stdout);
    rbench_summary(rows, &cpu, stdout);
    return 0;
}

static int run(rbench_options *o);

int main(int argc, char **argv)
{
    rbench_options o;
    int rc = rbench_parse_options(argc, argv, &o);
    if (rc == 0)
        rc = run(&o);
    else
        rc = rc == 1 ? 0 : 2;
    rbench_options_free(&o);
    return rc;
}

static int run(rbench_options *opt)
{
    const rbench_options o = *opt;
    int rc;
    if (o.list)
        return rbench_print_devices(stdout);
    char why[512];
    /* Say so now, not after minutes of measuring. */
    if (o.plot && rbench_plot_check(why, sizeof why)) {
        fprintf(stderr, "raybox-bench: %s\n", why);
        return 1;
    }
    rbench_rows rows = {0};
    snprintf(rows.version, sizeof rows.version, "%s", RB_VERSION_STRING);
    snprintf(rows.git, sizeof rows.git, "%s", RBENCH_GIT_REVISION);
    printf("raybox-bench %s (git %s)\n", rows.version, rows.git);
    if (o.n_from) {
        for (size_t i = 0; i < o.n_from; i++) {
            size_t first = rows.n;
            if (rbench_read_json(o.from[i], &rows, why, sizeof why)) {
                fprintf(stderr, "raybox-bench: --from: %s\n", why);
                rbench_rows_free(&rows);
                return 1;
            }
            for (size_t k = first; k < rows.n; k++)
                rows.rows[k].source = (int)i + 1;
        }
        rbench_print_table(&rows, stdout);
    } else {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        rc = measure(&o, &rows);
        curl_global_cleanup();
        if (rc) {
            rbench_rows_free(&rows);
            return rc;
        }
    }
    if (o.ratios) {
        rbench_rows ratios = {0};
        memcpy(ratios.version, rows.version, sizeof ratios.version);
        memcpy(ratios.git, rows.git, sizeof ratios.git);
        rbench_ratio_rows(&rows, &ratios);
        rbench_rows_free(&rows);
        rows = ratios;
        printf("\nratios (%zu rows)\n", rows.n);
        rbench_print_table(&rows, stdout);
    }
    rc = 0;
    if (o.json && rbench_write_file(&rows, o.json, rbench_write_json)) {
        perror(o.json);
        rc = 1;
    }
    if (o.csv && rbench_write_file(&rows, o.csv, rbench_write_csv)) {
        perror(o.csv);
        rc = 1;
    }
    if (o.compare) {
        rbench_rows base = {0};
        if (rbench_read_json(o.compare, &base, why, sizeof why)) {
            fprintf(stderr, "raybox-bench: --compare: %s\n", why);
            rc = 1;
        } else {
            rbench_compare_stats st;
            printf("\ncomparison with %s\n", o.compare);
            rbench_compare(&base, &rows, o.threshold, stdout, &st);
        }
        rbench_rows_free(&base);
    }
    if (o.plot) {
        int charts = rbench_plot(&rows, o.n_from ? o.from : NULL, o.n_from,
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
    rbench_rows_free(&rows);
    return rc;
}
