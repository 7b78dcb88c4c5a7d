/*
 * raybox-bench - throughput of every backend and query mode, reported as
 * rates and as fractions/ratios of baselines measured in the same run on
 * the same cores: a plain copy loop (the bandwidth bound) and the textbook
 * slab loop (the compute reference).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct options {
    int want_cpu, want_cl;
    const char *device;
    unsigned threads;
    size_t pairs, rays, boxes;
    uint32_t max_hits;
    rbb_plan plan;
    const char *json;
    int quick;
} options;

static void usage(FILE *f)
{
    fprintf(f,
"usage: raybox-bench [options]\n"
"Measures rays/s and slab tests/s of every backend and mode, plus the\n"
"machine's copy bandwidth and a reference slab loop in the same run.\n"
"\n"
"  --backend cpu|opencl|all  backends to measure (default all)\n"
"  --device N|NAME           OpenCL device (index or name substring)\n"
"  --threads N               CPU threads (default: all)\n"
"  --pairs N                 rays of the pairs test (default 16777216)\n"
"  --rays N --boxes N        every-box tests (default 65536 x 4096)\n"
"  --max-hits N              all mode list length (default 16)\n"
"  --budget SECONDS          time per repeat (default 0.5)\n"
"  --repeats N               repeats; the median is reported (default 5)\n"
"  --quick                   short run (about a minute)\n"
"  --json FILE               also write rows and summary as JSON ('-' = stdout)\n"
"  --help                    this text\n");
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.want_cpu = 1, .want_cl = 1, .pairs = (size_t)16 << 20,
                   .rays = 65536, .boxes = 4096, .max_hits = 16,
                   .plan = {.budget_s = 0.5, .repeats = 5, .warmups = 1}};
    static const struct option longs[] = {
        {"backend", 1, 0, 'b'}, {"device", 1, 0, 'd'},
        {"threads", 1, 0, 't'}, {"pairs", 1, 0, 'p'},
        {"rays", 1, 0, 'r'},    {"boxes", 1, 0, 'x'},
        {"max-hits", 1, 0, 'm'}, {"budget", 1, 0, 'B'},
        {"repeats", 1, 0, 'R'}, {"quick", 0, 0, 'q'},
        {"json", 1, 0, 'j'},    {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'b':
            o->want_cpu = !strcmp(optarg, "cpu") || !strcmp(optarg, "all");
            o->want_cl = !strcmp(optarg, "opencl") || !strcmp(optarg, "all");
            if (!o->want_cpu && !o->want_cl) {
                fprintf(stderr, "raybox-bench: --backend: cpu, opencl or "
                                "all, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'd': o->device = optarg; break;
        case 't': o->threads = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'p': o->pairs = strtoull(optarg, NULL, 10); break;
        case 'r': o->rays = strtoull(optarg, NULL, 10); break;
        case 'x': o->boxes = strtoull(optarg, NULL, 10); break;
        case 'm': o->max_hits = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'B': o->plan.budget_s = strtod(optarg, NULL); break;
        case 'R': o->plan.repeats = atoi(optarg); break;
        case 'q': o->quick = 1; break;
        case 'j': o->json = optarg; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "raybox-bench: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    if (o->quick) {
        o->plan.budget_s = 0.15;
        o->plan.repeats = 3;
        if (o->pairs > ((size_t)2 << 20))
            o->pairs = (size_t)2 << 20;
    }
    if (!o->pairs || !o->rays || !o->boxes || !o->max_hits ||
        o->plan.budget_s <= 0 || o->plan.repeats < 1) {
        fprintf(stderr, "raybox-bench: sizes, budget and repeats must be "
                        "positive\n");
        return 2;
    }
    return 0;
}

/* Two data sets per test, alternated between calls, so a repeat never
 * finds the previous call's data warm in the cache. */
typedef struct dataset {
    rb_ray *rays[2];
    rb_box *boxes[2];
    size_t n_rays, n_boxes;
} dataset;

static int dataset_make(dataset *d, size_t n_rays, size_t n_boxes, int pairs)
{
    memset(d, 0, sizeof *d);
    d->n_rays = n_rays;
    d->n_boxes = n_boxes;
    for (int k = 0; k < 2; k++) {
        d->rays[k] = aligned_alloc(4096, (n_rays * sizeof(rb_ray) + 4095) / 4096 * 4096);
        d->boxes[k] = aligned_alloc(4096, (n_boxes * sizeof(rb_box) + 4095) / 4096 * 4096);
        if (!d->rays[k] || !d->boxes[k])
            return -1;
        rbb_make_rays(100 + k, d->rays[k], n_rays);
        if (pairs)
            rbb_make_pair_boxes(200 + k, d->rays[k], d->boxes[k], n_boxes);
        else
            rbb_make_boxes(200 + k, d->boxes[k], n_boxes);
    }
    return 0;
}

static void dataset_free(dataset *d)
{
    for (int k = 0; k < 2; k++) {
        free(d->rays[k]);
        free(d->boxes[k]);
    }
}

typedef struct run_arg {
    rb_context *ctx;
    const dataset *data;
    rb_mode mode;
    uint32_t max_hits;
    rb_results res;
    double kernel_ms;
} run_arg;

static int run_once(void *p, int rep)
{
    run_arg *a = p;
    int k = rep & 1;
    rb_query q = {.mode = a->mode, .dims = 3, .rays = a->data->rays[k],
                  .n_rays = a->data->n_rays, .boxes = a->data->boxes[k],
                  .n_boxes = a->data->n_boxes, .max_hits = a->max_hits};
    int rc = rb_intersect(a->ctx, &q, &a->res);
    if (rc) {
        fprintf(stderr, "raybox-bench: %s\n",
                rb_context_error(a->ctx)->message);
        return rc;
    }
    a->kernel_ms += a->res.info.kernel_ms;
    return 0;
}

/* Bytes a test must move at the least: inputs once, outputs once. */
static double bytes_per_test(rb_mode mode, size_t rays, size_t boxes,
                             uint32_t max_hits)
{
    double out = 0;
    switch (mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST: out = sizeof(rb_hit); break;
    case RB_MODE_ANY: out = 1; break;
    case RB_MODE_COUNT: out = 4; break;
    case RB_MODE_ALL: out = 4 + (double)max_hits * sizeof(rb_list_hit); break;
    }
    if (mode == RB_MODE_PAIRS)
        return sizeof(rb_ray) + sizeof(rb_box) + out;
    double total = (double)rays * (sizeof(rb_ray) + out) +
                   (double)boxes * sizeof(rb_box);
    return total / ((double)rays * (double)boxes);
}

typedef struct results_table {
    double rate[2][5]; /* tests/s per backend (0 cpu, 1 opencl) and mode */
} results_table;

static int progress_i, progress_n;

static void progress(const char *what)
{
    fprintf(stderr, "\r[%d/%d] %-60s", ++progress_i, progress_n, what);
    if (progress_i == progress_n)
        fputc('\n', stderr);
    fflush(stderr);
}

static void bench_backend(const options *o, int which, rb_context *ctx,
                          double bandwidth, double ref_rate,
                          rbb_rows *rows, results_table *tab)
{
    rb_backend_info info;
    rb_context_info(ctx, &info);
    const char *be = which ? "opencl" : "cpu";
    dataset pairs_data, box_data;
    if (dataset_make(&pairs_data, o->pairs, o->pairs, 1) ||
        dataset_make(&box_data, o->rays, o->boxes, 0)) {
        fprintf(stderr, "raybox-bench: out of memory for the data sets\n");
        exit(1);
    }
    size_t cap = o->pairs > o->rays ? o->pairs : o->rays;
    run_arg a = {.ctx = ctx, .max_hits = o->max_hits};
    a.res.capacity = cap;
    a.res.hits = aligned_alloc(4096, (cap * sizeof(rb_hit) + 4095) / 4096 * 4096);
    a.res.any = malloc(cap);
    a.res.counts = malloc(cap * sizeof(uint32_t));
    a.res.list = malloc(o->rays * o->max_hits * sizeof(rb_list_hit));
    if (!a.res.hits || !a.res.any || !a.res.counts || !a.res.list) {
        fprintf(stderr, "raybox-bench: out of memory for the results\n");
        exit(1);
    }

    for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
        char what[96], size[48];
        const dataset *d = mode == RB_MODE_PAIRS ? &pairs_data : &box_data;
        if (mode == RB_MODE_PAIRS)
            snprintf(size, sizeof size, "%zu pairs", d->n_rays);
        else
            snprintf(size, sizeof size, "%zux%zu", d->n_rays, d->n_boxes);
        snprintf(what, sizeof what, "%s %s %s", be, rb_mode_name(mode), size);
        progress(what);
        a.data = d;
        a.mode = (rb_mode)mode;
        a.kernel_ms = 0;
        rbb_timing t;
        if (rbb_time(&o->plan, run_once, &a, &t)) {
            rbb_row *r = rbb_add_skip(rows, info.device, be,
                                      rb_mode_name(mode), "query failed");
            snprintf(r->status, sizeof r->status, "failed");
            continue;
        }
        double tests = mode == RB_MODE_PAIRS
                           ? (double)d->n_rays
                           : (double)d->n_rays * (double)d->n_boxes;
        double rays_s = (double)d->n_rays / t.median;
        double tests_s = tests / t.median;
        double bpt = bytes_per_test((rb_mode)mode, d->n_rays, d->n_boxes,
                                    o->max_hits);
        const char *m = rb_mode_name(mode);
        rbb_add(rows, info.device, be, m, size, "rays_per_s", "rays/s",
                rays_s, d->n_rays / t.max, d->n_rays / t.min);
        rbb_add(rows, info.device, be, m, size, "tests_per_s", "tests/s",
                tests_s, tests / t.max, tests / t.min);
        rbb_add(rows, info.device, be, m, size, "bytes_per_test", "B", bpt,
                bpt, bpt);
        if (bandwidth > 0)
            rbb_add(rows, info.device, be, m, size, "fraction_of_bound", "",
                    tests_s * bpt / bandwidth, tests / t.max * bpt / bandwidth,
                    tests / t.min * bpt / bandwidth);
        if (mode != RB_MODE_PAIRS && ref_rate > 0)
            rbb_add(rows, info.device, be, m, size, "ratio_to_reference", "",
                    tests_s / ref_rate, tests / t.max / ref_rate,
                    tests / t.min / ref_rate);
        if (which == 1 && a.kernel_ms > 0) {
            double calls = t.calls + o->plan.warmups;
            rbb_add(rows, info.device, be, m, size, "kernel_ms_per_call",
                    "ms", a.kernel_ms / calls, 0, 0);
        }
        tab->rate[which][mode] = tests_s;
    }
    free(a.res.hits);
    free(a.res.any);
    free(a.res.counts);
    free(a.res.list);
    dataset_free(&pairs_data);
    dataset_free(&box_data);
}

static rb_context *open_backend(const options *o, int which, char *why,
                                size_t why_len)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.threads = o->threads;
    opt.backend = which ? RB_BACKEND_OPENCL : RB_BACKEND_CPU;
    opt.cpu_fallback = 0; /* a benchmark must not measure the fallback */
    if (which && o->device) {
        char *end;
        long idx = strtol(o->device, &end, 10);
        if (*end == '\0')
            opt.device_index = (int)idx;
        else
            opt.device_name = o->device;
    }
    rb_context *ctx = NULL;
    if (rb_context_create(&opt, &ctx, why, why_len) != RB_OK)
        return NULL;
    return ctx;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    rbb_rows rows = {0};
    results_table tab = {0};
    char why[512] = "";

    rb_context *cpu = open_backend(&o, 0, why, sizeof why);
    if (!cpu) {
        fprintf(stderr, "raybox-bench: cpu backend: %s\n", why);
        return 1;
    }
    rb_backend_info cpu_info;
    rb_context_info(cpu, &cpu_info);
    rb_context *cl = NULL;
    char cl_why[512] = "";
    if (o.want_cl)
        cl = open_backend(&o, 1, cl_why, sizeof cl_why);

    progress_n = 3 + (o.want_cpu ? 5 : 0) + (cl ? 5 : 0);
    rbb_timing t;
    size_t bytes;
    double bw = 0;
    for (int streaming = 0; streaming < 2; streaming++) {
        progress(streaming ? "copy bandwidth (streaming stores)"
                           : "copy bandwidth");
        double b = rbb_copy_bandwidth(&o.plan, cpu_info.threads, streaming,
                                      &t, &bytes);
        rbb_add(&rows, cpu_info.device, "cpu",
                streaming ? "copy_streaming" : "copy_plain", "512 MiB",
                "bytes_per_s", "B/s", b, bytes / t.max, bytes / t.min);
        if (b > bw)
            bw = b;
    }
    progress("reference slab loop");
    double ref = rbb_reference_count(&o.plan, cpu_info.threads, o.rays,
                                     o.boxes, &t);
    char size[48];
    snprintf(size, sizeof size, "%zux%zu", o.rays, o.boxes);
    double tests = (double)o.rays * (double)o.boxes;
    rbb_add(&rows, cpu_info.device, "cpu", "reference_loop", size,
            "tests_per_s", "tests/s", ref, tests / t.max, tests / t.min);

    if (o.want_cpu)
        bench_backend(&o, 0, cpu, bw, ref, &rows, &tab);
    if (cl)
        bench_backend(&o, 1, cl, bw, ref, &rows, &tab);
    else if (o.want_cl)
        rbb_add_skip(&rows, "", "opencl", "all modes", cl_why);

    rbb_print_table(&rows);

    /* The figures the project's targets are stated in. */
    char summary[2048];
    int len = snprintf(summary, sizeof summary,
                       "{\"threads\":%u,\"copy_bandwidth_Bps\":%.6g,"
                       "\"reference_tests_per_s\":%.6g",
                       cpu_info.threads, bw, ref);
    printf("\nsummary (%u threads, %s)\n", cpu_info.threads, cpu_info.simd);
    if (o.want_cpu) {
        double pairs_frac = tab.rate[0][RB_MODE_PAIRS] *
                            bytes_per_test(RB_MODE_PAIRS, 0, 0, 0) / bw;
        double count_ref = tab.rate[0][RB_MODE_COUNT] / ref;
        double nearest_cost = tab.rate[0][RB_MODE_COUNT] /
                              tab.rate[0][RB_MODE_NEAREST];
        double any_cost = tab.rate[0][RB_MODE_COUNT] /
                          tab.rate[0][RB_MODE_ANY];
        printf("  cpu pairs: %.2f of the copy-loop bandwidth bound\n",
               pairs_frac);
        printf("  cpu count: %.2fx the reference slab loop\n", count_ref);
        printf("  cpu nearest per-test cost: %.2fx count's\n", nearest_cost);
        printf("  cpu any per-test cost: %.2fx count's\n", any_cost);
        len += snprintf(summary + len, sizeof summary - (size_t)len,
                        ",\"cpu_pairs_fraction_of_bound\":%.4g,"
                        "\"cpu_count_ratio_to_reference\":%.4g,"
                        "\"cpu_nearest_cost_vs_count\":%.4g,"
                        "\"cpu_any_cost_vs_count\":%.4g",
                        pairs_frac, count_ref, nearest_cost, any_cost);
    }
    if (cl && o.want_cpu) {
        for (int m = 0; m <= RB_MODE_ALL; m++) {
            double slow = tab.rate[0][m] / tab.rate[1][m];
            printf("  opencl %s: %.2fx slower than cpu\n", rb_mode_name(m),
                   slow);
            len += snprintf(summary + len, sizeof summary - (size_t)len,
                            ",\"opencl_%s_slowdown_vs_cpu\":%.4g",
                            rb_mode_name(m), slow);
        }
    }
    snprintf(summary + len, sizeof summary - (size_t)len, "}");
    if (o.json && rbb_write_json(&rows, o.json, summary)) {
        fprintf(stderr, "raybox-bench: cannot write %s\n", o.json);
        rc = 1;
    }
    rb_context_destroy(cl);
    rb_context_destroy(cpu);
    free(rows.rows);
    return rc;
}
