/* bench_ab.c - raybox-bench-ab: two builds of libraybox.so timed in turn
 * on the same scenes, rays and threads, so that a change is measured
 * side by side with the build before it.
 *
 *   raybox-bench-ab OLD.so NEW.so [--kinds K[,K...]] [--modes M[,M...]]
 *                   [--elements N] [--rays N] [--threads N] [--rounds R]
 *                   [--fill F] [--seed S]
 *
 * Both libraries are loaded into this process with dlopen(RTLD_LOCAL):
 * each binds its own symbols, since neither they nor this tool's static
 * copy of the library (linked for the scenes' helpers, not exported) are
 * in the global scope. Each builds the scenes of --kinds (default
 * box,mixed: raybox-bench-shapes' scenes of its first size, same seeds).
 * Then, per mode (default nearest,any) and kind, a warm-up round and R
 * rounds (default 21) of one query with each library, the order swapped
 * every round; a round's ratio is old ms / new ms, and the tool prints
 * the median of the rounds' ratios with their middle half, next to each
 * side's median rate. With box and mixed both given, it prints each
 * build's cost of the mixed scene over the box scene, also by rounds.
 * The warm-up round's answers must be equal field by field (else it
 * names the first ray that differs and exits 1).
 *
 * Why: on a shared machine a build's rate moves by 1.5-2x between runs
 * minutes apart, and even runs in turn of two binaries left a change of
 * a few percent in the noise; queries alternating every ~50 ms see the
 * same load (docs/benchmarks-shapes.md, "Two builds in turn").
 *
 * Both builds must share this tool's raybox.h structures (rb_query,
 * rb_results, rb_context_options): builds of nearby revisions do.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_scenes.h"

#define ROUNDS_MAX 1001 /* --rounds' limit (bad_value's text says it) */

/* The API of one loaded build. */
typedef struct build {
    const char *path;
    void *handle;
    void (*options_init)(rb_context_options *);
    int (*context_create)(const rb_context_options *, rb_context **, char *,
                          size_t);
    void (*context_destroy)(rb_context *);
    int (*scene_create_shapes)(rb_context *, unsigned, const rb_box *,
                               size_t, const rb_shapes *, rb_scene **);
    void (*scene_destroy)(rb_scene *);
    int (*intersect)(rb_context *, const rb_query *, rb_results *);
    const char *(*status_name)(int);
    rb_context *ctx;
    rb_scene *scene[K_KINDS];
} build;

typedef struct options {
    int kinds[K_KINDS], n_kinds;
    int modes[2]; /* nearest, any */
    size_t elements, rays;
    unsigned threads;
    int rounds;
    float fill;
    uint64_t seed;
} options;

static void *symbol(build *b, const char *name, int *missing)
{
    void *p = dlsym(b->handle, name);
    if (!p) {
        fprintf(stderr, "raybox-bench-ab: %s has no %s\n", b->path, name);
        *missing = 1;
    }
    return p;
}

static int load(build *b, const char *path)
{
    memset(b, 0, sizeof *b);
    b->path = path;
    b->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!b->handle) {
        fprintf(stderr, "raybox-bench-ab: %s\n", dlerror());
        return -1;
    }
    int missing = 0;
    *(void **)&b->options_init =
        symbol(b, "rb_context_options_init", &missing);
    *(void **)&b->context_create = symbol(b, "rb_context_create", &missing);
    *(void **)&b->context_destroy = symbol(b, "rb_context_destroy", &missing);
    *(void **)&b->scene_create_shapes =
        symbol(b, "rb_scene_create_shapes", &missing);
    *(void **)&b->scene_destroy = symbol(b, "rb_scene_destroy", &missing);
    *(void **)&b->intersect = symbol(b, "rb_intersect", &missing);
    *(void **)&b->status_name = symbol(b, "rb_status_name", &missing);
    return missing ? -1 : 0;
}

static void unload(build *b)
{
    for (int k = 0; k < K_KINDS; k++)
        if (b->scene[k])
            b->scene_destroy(b->scene[k]);
    if (b->ctx)
        b->context_destroy(b->ctx);
    if (b->handle)
        dlclose(b->handle);
}

static int start(build *b, const options *o)
{
    rb_context_options opt;
    b->options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    opt.threads = o->threads;
    char why[256] = "";
    int rc = b->context_create(&opt, &b->ctx, why, sizeof why);
    if (rc) {
        fprintf(stderr, "raybox-bench-ab: %s: rb_context_create: %s (%s)\n",
                b->path, b->status_name(rc), why);
        return -1;
    }
    return 0;
}

/* Both answers of one query equal, field by field; else names the first
 * ray that differs. */
static int same_answers(rb_mode mode, const rb_results *a,
                        const rb_results *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        int same = mode == RB_MODE_ANY
                       ? a->any[i] == b->any[i]
                       : !memcmp(&a->hits[i], &b->hits[i], sizeof a->hits[i]);
        if (!same) {
            fprintf(stderr,
                    "raybox-bench-ab: %s: the builds' answers differ at ray "
                    "%zu\n",
                    what, i);
            return 0;
        }
    }
    return 1;
}

/* The median and quartiles of v[0, n) (sorted in place). */
static void spread(double *v, int n, double *median, double *q1, double *q3)
{
    bench_sort(v, n);
    *median = v[n / 2];
    *q1 = v[n / 4];
    *q3 = v[(3 * n) / 4];
}

static int query(build *b, int kind, rb_mode mode, const rb_ray *rays,
                 size_t n, rb_results *res, double *ms)
{
    rb_query q = {.mode = mode, .dims = 3, .rays = rays, .n_rays = n,
                  .scene = b->scene[kind]};
    double t0 = bench_now_ms();
    int rc = b->intersect(b->ctx, &q, res);
    *ms = bench_now_ms() - t0;
    if (rc)
        fprintf(stderr, "raybox-bench-ab: %s: rb_intersect: %s\n", b->path,
                b->status_name(rc));
    return rc;
}

/* ms[side][kind][round] of one mode; returns 0, or 1 on a failure or a
 * difference in answers. */
static int run_mode(build sides[2], const options *o, rb_mode mode,
                    const rb_ray *rays, rb_results res[2],
                    double (*ms)[K_KINDS][ROUNDS_MAX])
{
    const char *mode_name = rb_mode_name(mode);
    for (int r = -1; r < o->rounds; r++) { /* round -1: warm-up, checked */
        for (int k = 0; k < K_KINDS; k++) {
            if (!o->kinds[k])
                continue;
            for (int i = 0; i < 2; i++) {
                int s = r % 2 ? 1 - i : i; /* who goes first alternates */
                double t;
                if (query(&sides[s], k, mode, rays, o->rays, &res[s], &t))
                    return 1;
                if (r >= 0)
                    ms[s][k][r] = t;
            }
            if (r < 0) {
                char what[64];
                snprintf(what, sizeof what, "%s %s", bench_kind_names[k],
                         mode_name);
                if (!same_answers(mode, &res[0], &res[1], o->rays, what))
                    return 1;
            }
        }
    }
    return 0;
}

static void report_mode(const options *o, rb_mode mode,
                        double (*ms)[K_KINDS][ROUNDS_MAX])
{
    const char *mode_name = rb_mode_name(mode);
    int n = o->rounds;
    double v[ROUNDS_MAX], med, q1, q3;
    for (int k = 0; k < K_KINDS; k++) {
        if (!o->kinds[k])
            continue;
        double rate[2];
        for (int s = 0; s < 2; s++) {
            memcpy(v, ms[s][k], (size_t)n * sizeof *v);
            spread(v, n, &med, &q1, &q3);
            rate[s] = med > 0 ? (double)o->rays / med / 1e3 : 0;
        }
        for (int r = 0; r < n; r++)
            v[r] = ms[0][k][r] / ms[1][k][r];
        spread(v, n, &med, &q1, &q3);
        printf("  %-7s %-8s %10.3f %10.3f   %6.3fx (%.3f-%.3f)\n",
               bench_kind_names[k], mode_name, rate[0], rate[1], med, q1, q3);
    }
    if (o->kinds[K_BOX] && o->kinds[K_MIXED]) {
        for (int s = 0; s < 2; s++) {
            for (int r = 0; r < n; r++)
                v[r] = ms[s][K_MIXED][r] / ms[s][K_BOX][r];
            spread(v, n, &med, &q1, &q3);
            printf("  mixed / box cost, %-7s %s: %.3fx (%.3f-%.3f)\n",
                   mode_name, s ? "new" : "old", med, q1, q3);
        }
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: raybox-bench-ab OLD.so NEW.so [--kinds K[,K...]] "
            "[--modes nearest,any] [--elements N] [--rays N] [--threads N] "
            "[--rounds R] [--fill F] [--seed S]\n"
            "Times two builds of libraybox.so in turn on "
            "raybox-bench-shapes' scenes (kinds: box, obb, xbox, sphere, "
            "mixed; default box,mixed; 100000 elements, 262144 rays, 2 "
            "threads, 21 rounds); prints each side's median rate and the "
            "median of the rounds' old/new time ratios (above 1: new is "
            "faster), and checks that both give the same answers.\n");
}

static int parse_size(const char *s, size_t lo, size_t hi, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int bad_value(const char *option, const char *value,
                     const char *range)
{
    fprintf(stderr, "raybox-bench-ab: %s %s: expected %s\n", option, value,
            range);
    return -1;
}

static int parse(int argc, char **argv, options *o, const char **paths)
{
    *o = (options){.elements = 100000, .rays = 262144, .threads = 2,
                   .rounds = 21, .fill = 2.0f, .seed = 1};
    o->kinds[K_BOX] = o->kinds[K_MIXED] = 1;
    o->modes[0] = o->modes[1] = 1;
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (a[0] != '-') {
            if (n_paths == 2) {
                fprintf(stderr, "raybox-bench-ab: %s: two libraries only\n",
                        a);
                return -1;
            }
            paths[n_paths++] = a;
            continue;
        }
        if (!v) {
            fprintf(stderr, "raybox-bench-ab: %s needs a value\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--kinds") || !strcmp(a, "--modes")) {
            int kinds = !strcmp(a, "--kinds");
            char list[128];
            snprintf(list, sizeof list, "%s", v);
            if (kinds)
                memset(o->kinds, 0, sizeof o->kinds);
            else
                o->modes[0] = o->modes[1] = 0;
            for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
                int k = kinds ? bench_kind_of(t)
                              : !strcmp(t, "nearest") ? 0
                              : !strcmp(t, "any")     ? 1
                                                      : -1;
                if (k < 0) {
                    fprintf(stderr, "raybox-bench-ab: %s: no %s\n", a, t);
                    return -1;
                }
                if (kinds)
                    o->kinds[k] = 1;
                else
                    o->modes[k] = 1;
            }
        } else if (!strcmp(a, "--elements")) {
            if (parse_size(v, 4, (size_t)1 << 26, &o->elements))
                return bad_value(a, v, "4 to 2^26");
        } else if (!strcmp(a, "--rays")) {
            if (parse_size(v, 1, (size_t)1 << 26, &o->rays))
                return bad_value(a, v, "1 to 2^26");
        } else if (!strcmp(a, "--threads")) {
            if (parse_size(v, 1, 1024, &x))
                return bad_value(a, v, "1 to 1024");
            o->threads = (unsigned)x;
        } else if (!strcmp(a, "--rounds")) {
            if (parse_size(v, 3, ROUNDS_MAX, &x))
                return bad_value(a, v, "3 to 1001");
            o->rounds = (int)x;
        } else if (!strcmp(a, "--seed")) {
            if (parse_size(v, 0, (size_t)1 << 40, &x))
                return bad_value(a, v, "0 to 2^40");
            o->seed = x;
        } else if (!strcmp(a, "--fill")) {
            char *end;
            o->fill = strtof(v, &end);
            if (end == v || *end || !(o->fill > 0 && o->fill <= 100))
                return bad_value(a, v, "above 0, at most 100");
        } else {
            fprintf(stderr, "raybox-bench-ab: unknown option %s\n", a);
            return -1;
        }
    }
    for (int k = 0; k < K_KINDS; k++)
        o->n_kinds += o->kinds[k];
    return n_paths == 2 && o->n_kinds && (o->modes[0] || o->modes[1]) ? 0
                                                                      : -1;
}

int main(int argc, char **argv)
{
    options o;
    const char *paths[2] = {NULL, NULL};
    if (parse(argc, argv, &o, paths)) {
        usage(stderr);
        return 2;
    }
    build sides[2];
    memset(sides, 0, sizeof sides);
    rb_results res[2] = {{0}, {0}};
    rb_ray *rays = malloc(o.rays * sizeof *rays);
    double(*ms)[K_KINDS][ROUNDS_MAX] = calloc(2, sizeof *ms);
    int rc = !rays || !ms || bench_results_take(&res[0], o.rays) ||
             bench_results_take(&res[1], o.rays);
    if (rc)
        fprintf(stderr, "raybox-bench-ab: out of memory\n");
    for (int s = 0; s < 2 && !rc; s++)
        rc = load(&sides[s], paths[s]) || start(&sides[s], &o);
    for (int k = 0; k < K_KINDS && !rc; k++) {
        if (!o.kinds[k])
            continue;
        bench_elements e;
        if (bench_make_elements(k, o.elements, o.fill,
                                bench_scene_seed(o.seed, 0, k), &e)) {
            fprintf(stderr, "raybox-bench-ab: out of memory\n");
            rc = 1;
        }
        rb_shapes sh = bench_shapes_of(&e);
        for (int s = 0; s < 2 && !rc; s++) {
            int st = sides[s].scene_create_shapes(sides[s].ctx, 3, e.boxes,
                                                  e.n[0], &sh,
                                                  &sides[s].scene[k]);
            if (st) {
                fprintf(stderr,
                        "raybox-bench-ab: %s: rb_scene_create_shapes: %s\n",
                        sides[s].path, sides[s].status_name(st));
                rc = 1;
            }
        }
        bench_elements_free(&e);
    }
    if (!rc) {
        uint64_t seed = o.seed;
        bench_random_rays(&seed, rays, o.rays);
        printf("raybox-bench-ab: old %s, new %s\nthreads %u, elements %zu, "
               "rays %zu, %d rounds in turn (the order alternating)\n"
               "  %-7s %-8s %10s %10s   %s\n",
               paths[0], paths[1], o.threads, o.elements, o.rays, o.rounds,
               "scene", "mode", "old M/s", "new M/s",
               "old/new time, median of rounds (middle half)");
    }
    for (int m = 0; m < 2 && !rc; m++) {
        if (!o.modes[m])
            continue;
        rb_mode mode = m ? RB_MODE_ANY : RB_MODE_NEAREST;
        rc = run_mode(sides, &o, mode, rays, res, ms);
        if (!rc)
            report_mode(&o, mode, ms);
        fflush(stdout);
    }
    unload(&sides[0]);
    unload(&sides[1]);
    bench_results_give(&res[0]);
    bench_results_give(&res[1]);
    free(ms);
    free(rays);
    return rc ? 1 : 0;
}
