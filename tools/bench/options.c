/* options.c - raybox-bench's command line. One table gives getopt_long
 * its options and --help its text; --quick changes only the defaults of
 * options not given explicitly. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum {
    OPT_BACKEND = 256, OPT_DEVICE, OPT_DEVICES, OPT_LIST, OPT_THREADS, OPT_PAIRS, OPT_RAYS,
    OPT_BOXES, OPT_SCENE_RAYS, OPT_SCENE_BOXES, OPT_SHAPES, OPT_MODES,
    OPT_MAX_HITS, OPT_HTTP, OPT_HTTP_RAYS, OPT_BUDGET, OPT_REPEATS,
    OPT_WARMUPS, OPT_MAX_CALL, OPT_COPY_BYTES, OPT_QUICK, OPT_QUIET,
    OPT_JSON, OPT_CSV, OPT_RATIOS, OPT_COMPARE, OPT_THRESHOLD, OPT_FROM, OPT_PLOT,
    OPT_HELP
};

typedef struct opt_doc {
    const char *name;
    int has_arg;
    int id;
    const char *arg;
    const char *help;
} opt_doc;

/* "" names start a section of the help text. */
static const opt_doc table[] = {
    {"", 0, 0, NULL, "What to measure"},
    {"list", 0, OPT_LIST, NULL,
     "list the devices (the native CPU backend and every OpenCL device) "
     "and exit"},
    {"backend", 1, OPT_BACKEND, "cpu|opencl|all|none",
     "backends to measure (default all; opencl when --device is given; "
     "none with --http: the server alone)"},
    {"device", 1, OPT_DEVICE, "N|NAME",
     "OpenCL device by --list index or name substring; repeat it or give "
     "a comma list"},
    {"devices", 1, OPT_DEVICES, "all|LIST",
     "also measure one batch split over several OpenCL devices in "
     "proportion to their speed: all, or --list indices comma-separated "
     "(its rows' device is \"split LIST\")"},
    {"threads", 1, OPT_THREADS, "N", "CPU backend threads (default: all)"},
    {"modes", 1, OPT_MODES, "LIST",
     "modes to run: pairs,nearest,any,count,all (default all)"},
    {"pairs", 1, OPT_PAIRS, "LIST",
     "pairs batch sizes (default 256,4K,64K,1M,16M; quick 256,16K,2M)"},
    {"rays", 1, OPT_RAYS, "LIST",
     "ray counts against inline boxes (default 16,256,4K,64K,1M; quick "
     "16,1K,64K)"},
    {"boxes", 1, OPT_BOXES, "N", "inline boxes per query (default 4096)"},
    {"shapes", 1, OPT_SHAPES, "LIST",
     "scene shapes (default uniform,clustered,city; 'none' for no scenes)"},
    {"scene-rays", 1, OPT_SCENE_RAYS, "LIST",
     "ray counts against scenes (default 16,1K,64K,1M; quick 64,16K)"},
    {"scene-boxes", 1, OPT_SCENE_BOXES, "N",
     "boxes per scene (default 16384; quick 4096)"},
    {"max-hits", 1, OPT_MAX_HITS, "N", "'all' mode list length (default 16)"},
    {"http", 1, OPT_HTTP, "URL",
     "also measure through rayboxd at URL (e.g. http://127.0.0.1:8080), "
     "JSON over loopback"},
    {"http-rays", 1, OPT_HTTP_RAYS, "LIST",
     "ray counts per HTTP request (default 16,1K,16K; quick 16,1K)"},
    {"", 0, 0, NULL, "How long"},
    {"budget", 1, OPT_BUDGET, "SECONDS",
     "time per repeat; calls per repeat are calibrated to it (default 0.2, "
     "quick 0.04)"},
    {"repeats", 1, OPT_REPEATS, "N",
     "repeats per figure: median and min..max are reported (default 5, "
     "quick 3)"},
    {"warmups", 1, OPT_WARMUPS, "N", "warm-up calls before timing (default 2)"},
    {"max-call", 1, OPT_MAX_CALL, "SECONDS",
     "skip a size whose call is predicted to take longer (default 2, quick "
     "0.5)"},
    {"copy-bytes", 1, OPT_COPY_BYTES, "N",
     "buffer size of the copy-bandwidth tests (default 256M, quick 64M)"},
    {"quick", 0, OPT_QUICK, NULL,
     "short run (under a minute on a 2-core machine): smaller ladders and "
     "budgets"},
    {"quiet", 0, OPT_QUIET, NULL, "no progress line on stderr"},
    {"", 0, 0, NULL, "Output (the table always goes to stdout)"},
    {"json", 1, OPT_JSON, "FILE", "write the rows as JSON ('-' = stdout)"},
    {"csv", 1, OPT_CSV, "FILE", "write the rows as CSV ('-' = stdout)"},
    {"ratios", 0, OPT_RATIOS, NULL,
     "keep only ratios of figures of the same run (fractions of the bound, "
     "OpenCL against native, count against the reference loop, and the "
     "ratio rows of raybox-bench-bvh/-shapes --rows files): what a "
     "baseline taken on another machine can be compared with"},
    {"compare", 1, OPT_COMPARE, "BASELINE.json",
     "print the change of every row against a baseline run, and the rows "
     "found on one side only"},
    {"threshold", 1, OPT_THRESHOLD, "PERCENT",
     "--compare: a change beyond this is better/worse (default 5)"},
    {"from", 1, OPT_FROM, "FILE.json",
     "measure nothing: read rows from a JSON result file (repeatable; "
     "e.g. to plot or compare runs of two GPUs)"},
    {"plot", 1, OPT_PLOT, "DIR",
     "write PNG charts with gnuplot: rays/s against batch size per device "
     "and mode, and the fraction of the bound"},
    {"help", 0, OPT_HELP, NULL, "this text"},
};

#define N_TABLE (sizeof table / sizeof *table)

static void usage(FILE *f)
{
    fputs(
"usage: raybox-bench [options]\n"
"Measures every device (the native CPU backend and each OpenCL device):\n"
"its own limits first (copy bandwidth, host<->device transfers, kernel\n"
"launch latency, the library's per-call overhead), then every query mode\n"
"at several batch sizes, timed kernel-only (OpenCL profiling) and end to\n"
"end through the library, and through rayboxd with --http. Figures are\n"
"rays/s, slab tests/s and the fraction of the device's bandwidth bound,\n"
"the median of calibrated repeats on random data rotated between calls.\n",
        f);
    for (size_t i = 0; i < N_TABLE; i++) {
        const opt_doc *d = &table[i];
        if (!d->name[0]) {
            fprintf(f, "\n%s:\n", d->help);
            continue;
        }
        char head[64];
        snprintf(head, sizeof head, "--%s%s%s", d->name, d->arg ? " " : "",
                 d->arg ? d->arg : "");
        fprintf(f, "  %-26s", head);
        /* Wrap the help at about 78 columns; a space is written only
         * before a word on the same line. */
        const char *h = d->help;
        size_t col = 28;
        if (strlen(head) > 25)
            fprintf(f, "\n%28s", "");
        int first = 1;
        while (*h) {
            while (*h == ' ')
                h++;
            size_t w = strcspn(h, " ");
            if (!w)
                break;
            if (!first && col + 1 + w > 78) {
                fprintf(f, "\n%28s", "");
                col = 28;
                first = 1;
            }
            fprintf(f, "%s%.*s", first ? "" : " ", (int)w, h);
            col += w + !first;
            first = 0;
            h += w;
        }
        fputc('\n', f);
    }
    fputs(
"\nLIST is comma-separated; sizes take K and M (1024, 1048576).\n"
"Scene shapes:\n", f);
    size_t n;
    const rbench_shape *s = rbench_shapes(&n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %-10s %s\n", s[i].name, s[i].about);
    fputs(
"\nRows carry the tool version and git revision. --compare matches rows\n"
"by backend, device, test, shape, path, size and metric; a device the\n"
"baseline lacks is compared with a baseline device of the same backend\n"
"and type, so two GPUs' runs compare directly. make bench compares the\n"
"ratios of its three tools with the committed baseline\n"
"tools/bench/ratios-baseline.json (--from FILE... --ratios --compare).\n"
"Exit status: 0, 1 on an error (unreadable baseline, unwritable output,\n"
"plotting failed), 2 on a usage error, 3 when some measurement failed\n"
"(see the rows' notes).\n",
        f);
}

static int size_value(const char *text, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text)
        return -1;
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    else if (*end == 'G' || *end == 'g')
        v <<= 30, end++;
    if (*end || v == 0)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int size_list(const char *opt, const char *text, size_t *out,
                     size_t *n)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    *n = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == RBENCH_MAX_LADDER || size_value(tok, &out[*n])) {
            fprintf(stderr, "raybox-bench: --%s: '%s' is not a list of at "
                            "most %d positive sizes\n", opt, text,
                    RBENCH_MAX_LADDER);
            return -1;
        }
        (*n)++;
    }
    if (*n == 0) {
        fprintf(stderr, "raybox-bench: --%s: empty list\n", opt);
        return -1;
    }
    return 0;
}

/* Splits a comma list into strdup'd pieces, owned by the options. */
static int word_list(rbench_options *o, const char *opt, const char *text,
                     const char **out, size_t *n, size_t cap)
{
    const char *p = text;
    while (*p) {
        size_t w = strcspn(p, ",");
        if (w) {
            if (*n == cap) {
                fprintf(stderr, "raybox-bench: --%s: at most %zu\n", opt,
                        cap);
                return -1;
            }
            char *s = NULL;
            if (o->n_owned < sizeof o->owned / sizeof *o->owned)
                s = strndup(p, w);
            if (!s) {
                fprintf(stderr, "raybox-bench: --%s: too many words\n", opt);
                return -1;
            }
            o->owned[o->n_owned++] = s;
            out[(*n)++] = s;
        }
        p += w;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int number(const char *opt, const char *text, double lo, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= lo)) {
        fprintf(stderr, "raybox-bench: --%s: '%s' is not a number >= %g\n",
                opt, text, lo);
        return -1;
    }
    *out = v;
    return 0;
}

static const size_t full_pairs[] = {256, 4096, 65536, 1 << 20, 16 << 20};
static const size_t quick_pairs[] = {256, 16384, 2 << 20};
static const size_t full_rays[] = {16, 256, 4096, 65536, 1 << 20};
static const size_t quick_rays[] = {16, 1024, 65536};
static const size_t full_scene_rays[] = {16, 1024, 65536, 1 << 20};
static const size_t quick_scene_rays[] = {64, 16384};
static const size_t full_http_rays[] = {16, 1024, 16384};
static const size_t quick_http_rays[] = {16, 1024};

#define SET_LIST(dst, n, src)                                                  \
    do {                                                                       \
        memcpy(dst, src, sizeof src);                                          \
        n = sizeof src / sizeof *src;                                          \
    } while (0)

int rbench_parse_options(int argc, char **argv, rbench_options *o)
{
    struct option longs[N_TABLE + 1];
    size_t nl = 0;
    for (size_t i = 0; i < N_TABLE; i++)
        if (table[i].name[0])
            longs[nl++] = (struct option){table[i].name, table[i].has_arg,
                                          NULL, table[i].id};
    longs[nl] = (struct option){0, 0, 0, 0};

    memset(o, 0, sizeof *o);
    o->want_cpu = o->want_cl = 1;
    o->modes = 0x1f;
    o->max_hits = 16;
    o->threshold = 0.05;
    int given[OPT_HELP + 1] = {0};
    double v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        if (c >= 256 && c <= OPT_HELP)
            given[c] = 1;
        const char *name = "";
        for (size_t i = 0; i < N_TABLE; i++)
            if (table[i].id == c)
                name = table[i].name;
        switch (c) {
        case OPT_BACKEND:
            o->backend_given = 1;
            o->want_cpu = !strcmp(optarg, "cpu") || !strcmp(optarg, "all");
            o->want_cl = !strcmp(optarg, "opencl") || !strcmp(optarg, "all");
            if (!o->want_cpu && !o->want_cl && strcmp(optarg, "none")) {
                fprintf(stderr, "raybox-bench: --backend: cpu, opencl, all "
                                "or none, not '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_DEVICE:
            if (word_list(o, name, optarg, o->devices, &o->n_devices,
                          RBENCH_MAX_LIST))
                return 2;
            break;
        case OPT_DEVICES: o->split_devices = optarg; break;
        case OPT_LIST: o->list = 1; break;
        case OPT_THREADS:
            if (number(name, optarg, 0, &v))
                return 2;
            o->threads = (unsigned)v;
            break;
        case OPT_MODES: {
            const char *m[8];
            size_t n = 0;
            if (word_list(o, name, optarg, m, &n, 8))
                return 2;
            o->modes = 0;
            for (size_t i = 0; i < n; i++) {
                rb_mode mode;
                if (rb_mode_parse(m[i], &mode) != RB_OK) {
                    fprintf(stderr, "raybox-bench: --modes: unknown mode "
                                    "'%s'\n", m[i]);
                    return 2;
                }
                o->modes |= 1 << mode;
            }
            break;
        }
        case OPT_PAIRS:
            if (size_list(name, optarg, o->pairs, &o->n_pairs))
                return 2;
            break;
        case OPT_RAYS:
            if (size_list(name, optarg, o->rays, &o->n_rays))
                return 2;
            break;
        case OPT_SCENE_RAYS:
            if (size_list(name, optarg, o->scene_rays, &o->n_scene_rays))
                return 2;
            break;
        case OPT_HTTP_RAYS:
            if (size_list(name, optarg, o->http_rays, &o->n_http_rays))
                return 2;
            break;
        case OPT_BOXES:
        case OPT_SCENE_BOXES:
        case OPT_COPY_BYTES: {
            size_t s;
            if (size_value(optarg, &s)) {
                fprintf(stderr, "raybox-bench: --%s: '%s' is not a positive "
                                "size\n", name, optarg);
                return 2;
            }
            *(c == OPT_BOXES         ? &o->boxes
              : c == OPT_SCENE_BOXES ? &o->scene_boxes
                                     : &o->copy_bytes) = s;
            break;
        }
        case OPT_SHAPES:
            o->n_shapes = 0;
            if (strcmp(optarg, "none") != 0 &&
                word_list(o, name, optarg, o->shapes, &o->n_shapes,
                          RBENCH_MAX_LIST))
                return 2;
            for (size_t i = 0; i < o->n_shapes; i++)
                if (!rbench_shape_find(o->shapes[i])) {
                    fprintf(stderr, "raybox-bench: --shapes: unknown shape "
                                    "'%s' (see --help)\n", o->shapes[i]);
                    return 2;
                }
            break;
        case OPT_MAX_HITS:
            if (number(name, optarg, 1, &v))
                return 2;
            o->max_hits = (uint32_t)v;
            break;
        case OPT_HTTP: o->http = optarg; break;
        case OPT_BUDGET:
            if (number(name, optarg, 1e-6, &o->plan.budget_s))
                return 2;
            break;
        case OPT_REPEATS:
            if (number(name, optarg, 1, &v))
                return 2;
            o->plan.repeats = (int)v;
            break;
        case OPT_WARMUPS:
            if (number(name, optarg, 1, &v))
                return 2;
            o->plan.warmups = (int)v;
            break;
        case OPT_MAX_CALL:
            if (number(name, optarg, 1e-6, &o->max_call_s))
                return 2;
            break;
        case OPT_QUICK: o->quick = 1; break;
        case OPT_QUIET: o->quiet = 1; break;
        case OPT_JSON: o->json = optarg; break;
        case OPT_CSV: o->csv = optarg; break;
        case OPT_RATIOS: o->ratios = 1; break;
        case OPT_COMPARE: o->compare = optarg; break;
        case OPT_THRESHOLD:
            if (number(name, optarg, 0, &v))
                return 2;
            o->threshold = v / 100.0;
            break;
        case OPT_FROM:
            if (o->n_from == RBENCH_MAX_LIST) {
                fprintf(stderr, "raybox-bench: --from: at most %d files\n",
                        RBENCH_MAX_LIST);
                return 2;
            }
            o->from[o->n_from++] = optarg;
            break;
        case OPT_PLOT: o->plot = optarg; break;
        case OPT_HELP: usage(stdout); return 1;
        default: /* getopt_long has named the option */
            fprintf(stderr, "raybox-bench: see --help for the options\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "raybox-bench: unexpected argument '%s' (see "
                        "--help)\n", argv[optind]);
        return 2;
    }
    int q = o->quick;
    if (!given[OPT_PAIRS]) {
        if (q)
            SET_LIST(o->pairs, o->n_pairs, quick_pairs);
        else
            SET_LIST(o->pairs, o->n_pairs, full_pairs);
    }
    if (!given[OPT_RAYS]) {
        if (q)
            SET_LIST(o->rays, o->n_rays, quick_rays);
        else
            SET_LIST(o->rays, o->n_rays, full_rays);
    }
    if (!given[OPT_SCENE_RAYS]) {
        if (q)
            SET_LIST(o->scene_rays, o->n_scene_rays, quick_scene_rays);
        else
            SET_LIST(o->scene_rays, o->n_scene_rays, full_scene_rays);
    }
    if (!given[OPT_HTTP_RAYS]) {
        if (q)
            SET_LIST(o->http_rays, o->n_http_rays, quick_http_rays);
        else
            SET_LIST(o->http_rays, o->n_http_rays, full_http_rays);
    }
    if (!given[OPT_SHAPES]) {
        size_t n;
        const rbench_shape *s = rbench_shapes(&n);
        for (size_t i = 0; i < n && i < RBENCH_MAX_LIST; i++)
            o->shapes[o->n_shapes++] = s[i].name;
    }
    if (!given[OPT_BOXES])
        o->boxes = 4096;
    if (!given[OPT_SCENE_BOXES])
        o->scene_boxes = q ? 4096 : 16384;
    if (!given[OPT_BUDGET])
        o->plan.budget_s = q ? 0.04 : 0.2;
    if (!given[OPT_REPEATS])
        o->plan.repeats = q ? 3 : 5;
    if (!given[OPT_WARMUPS])
        o->plan.warmups = 2;
    if (!given[OPT_MAX_CALL])
        o->max_call_s = q ? 0.5 : 2.0;
    if (!given[OPT_COPY_BYTES])
        o->copy_bytes = (size_t)(q ? 64 : 256) << 20;
    if (o->n_devices && !o->backend_given)
        o->want_cpu = 0;
    if (!o->want_cpu && !o->want_cl && !o->http && !o->n_from && !o->list) {
        fprintf(stderr, "raybox-bench: --backend none measures only "
                        "through rayboxd: give --http URL\n");
        return 2;
    }
    if (o->split_devices && !o->want_cl) {
        fprintf(stderr, "raybox-bench: --devices splits batches over OpenCL "
                        "devices; it cannot go with --backend cpu or none\n");
        return 2;
    }
    if (o->n_devices && !o->want_cl) {
        fprintf(stderr, "raybox-bench: --device selects OpenCL devices; "
                        "it cannot go with --backend cpu\n");
        return 2;
    }
    return 0;
}

void rbench_options_free(rbench_options *o)
{
    for (size_t i = 0; i < o->n_owned; i++)
        free(o->owned[i]);
    o->n_owned = 0;
}
