/*
 * python_oracle.c - libraybox's own answers for the Python tests and the
 * Python benchmark (python/tests, python/bench).
 *
 *   python_oracle DIR [--dims 2|3] [--max-hits N] [--backend B]
 *                 [--threads N] [--pairs] [--bench SECONDS]
 *
 * Reads DIR/rays.f32 (rb_ray or rb_ray2 records) and DIR/boxes.f32 (rb_box
 * or rb_box2), and in 3D DIR/obbs.f32, xboxes.f32, spheres.f32, planes.f32
 * when they exist; makes one scene of them and writes its answers as the
 * library's raw result arrays: nearest.hits (rb_hit), nearest.kinds (u8),
 * nearest.normals (3 f32 a ray), any.u8, count.u32, all.counts (u32) and
 * all.list (rb_list_hit, max_hits a ray, padded as rb_results has them).
 * --pairs instead answers pairs of the rays against the boxes (one box a
 * ray, no scene): pairs.hits.
 *
 * --bench SECONDS writes nothing: it times nearest and any on the scene
 * (repeated for about SECONDS each, the best of the repeats) and prints
 * "nearest RAYS_PER_S" and "any RAYS_PER_S", so that a benchmark compares
 * other code with the library on the same rays in the same run.
 *
 * Exit status 0, or 1 with one line on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raybox.h"

static const char usage[] =
    "usage: python_oracle DIR [--dims 2|3] [--max-hits N] [--backend B]\n"
    "                     [--threads N] [--pairs] [--bench SECONDS]\n"
    "Answers of libraybox for DIR/rays.f32 and DIR/boxes.f32 (and obbs,\n"
    "xboxes, spheres, planes .f32), written as raw result arrays to DIR,\n"
    "or (--bench) rays per second of nearest and any.\n";

static void *read_file(const char *dir, const char *name, size_t rec,
                       size_t *n, int required)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (!required && errno == ENOENT)
            return NULL;
        fprintf(stderr, "python_oracle: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (len < 0 || (size_t)len % rec != 0) {
        fprintf(stderr, "python_oracle: %s: %ld bytes is not a whole number "
                        "of %zu-byte records\n", path, len, rec);
        exit(1);
    }
    void *buf = malloc(len ? (size_t)len : 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "python_oracle: %s: cannot read\n", path);
        exit(1);
    }
    fclose(f);
    *n = (size_t)len / rec;
    return buf;
}

static void write_file(const char *dir, const char *name, const void *buf,
                       size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, bytes, f) != bytes || fclose(f) != 0) {
        fprintf(stderr, "python_oracle: %s: cannot write\n", path);
        exit(1);
    }
}

static void check(rb_context *ctx, int rc, const char *what)
{
    if (rc == RB_OK)
        return;
    fprintf(stderr, "python_oracle: %s: %s (%s)\n", what,
            rb_context_error(ctx)->message, rb_status_name(rc));
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "python_oracle: out of memory\n");
        exit(1);
    }
    return p;
}

/* Best rays per second of nearest and any over about `seconds` each. */
static void run_bench(rb_context *ctx, rb_query *q, rb_results *res,
                      double seconds)
{
    static const rb_mode modes[] = {RB_MODE_NEAREST, RB_MODE_ANY};
    for (int m = 0; m < 2; m++) {
        q->mode = modes[m];
        double best = 0, t_end = now_s() + seconds;
        int reps = 0;
        do {
            double t0 = now_s();
            check(ctx, rb_intersect(ctx, q, res), "bench");
            double dt = now_s() - t0;
            if (dt > 0 && (double)q->n_rays / dt > best)
                best = (double)q->n_rays / dt;
            reps++;
        } while (now_s() < t_end || reps < 3);
        printf("%s %.6g\n", rb_mode_name(q->mode), best);
    }
}

/* The answers of every mode but pairs, as raw arrays in dir. */
static void write_answers(rb_context *ctx, rb_query *q, rb_results *res,
                          const char *dir, uint8_t *kinds, float *normals,
                          unsigned max_hits)
{
    size_t n = q->n_rays;
    q->mode = RB_MODE_NEAREST;
    if (q->dims == 3) {
        q->outputs = RB_OUTPUT_NORMAL;
        res->kinds = kinds;
        res->normals = normals;
    }
    check(ctx, rb_intersect(ctx, q, res), "nearest");
    write_file(dir, "nearest.hits", res->hits, n * sizeof(rb_hit));
    if (q->dims == 3) {
        write_file(dir, "nearest.kinds", kinds, n);
        write_file(dir, "nearest.normals", normals, n * 3 * sizeof(float));
    }
    q->outputs = 0;
    res->kinds = NULL;
    res->normals = NULL;
    q->mode = RB_MODE_ANY;
    check(ctx, rb_intersect(ctx, q, res), "any");
    write_file(dir, "any.u8", res->any, n);
    q->mode = RB_MODE_COUNT;
    check(ctx, rb_intersect(ctx, q, res), "count");
    write_file(dir, "count.u32", res->counts, n * sizeof(uint32_t));
    q->mode = RB_MODE_ALL;
    memset(res->list, 0, n * max_hits * sizeof(rb_list_hit));
    check(ctx, rb_intersect(ctx, q, res), "all");
    write_file(dir, "all.counts", res->counts, n * sizeof(uint32_t));
    write_file(dir, "all.list", res->list, n * max_hits * sizeof(rb_list_hit));
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *backend = "cpu";
    unsigned dims = 3, max_hits = 8, threads = 0;
    int pairs = 0;
    double bench = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--dims") && i + 1 < argc) {
            dims = (unsigned)atoi(argv[++i]);
        } else if (!strcmp(a, "--max-hits") && i + 1 < argc) {
            max_hits = (unsigned)atoi(argv[++i]);
        } else if (!strcmp(a, "--threads") && i + 1 < argc) {
            threads = (unsigned)atoi(argv[++i]);
        } else if (!strcmp(a, "--backend") && i + 1 < argc) {
            backend = argv[++i];
        } else if (!strcmp(a, "--bench") && i + 1 < argc) {
            bench = atof(argv[++i]);
        } else if (!strcmp(a, "--pairs")) {
            pairs = 1;
        } else if (a[0] != '-' && !dir) {
            dir = a;
        } else {
            fprintf(stderr, "python_oracle: unknown argument '%s'\n%s", a,
                    usage);
            return 1;
        }
    }
    if (!dir || (dims != 2 && dims != 3) || max_hits < 1) {
        fputs(usage, stderr);
        return 1;
    }
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.threads = threads;
    if (rb_backend_kind_parse(backend, &opt.backend) != RB_OK) {
        fprintf(stderr, "python_oracle: backend '%s': auto, cpu or opencl\n",
                backend);
        return 1;
    }
    rb_context *ctx = NULL;
    char why[256] = "";
    if (rb_context_create(&opt, &ctx, why, sizeof why) != RB_OK) {
        fprintf(stderr, "python_oracle: backend '%s': %s\n", backend, why);
        return 1;
    }

    size_t n_rays, n_boxes;
    void *rays = read_file(dir, "rays.f32",
                           dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2),
                           &n_rays, 1);
    void *boxes = read_file(dir, "boxes.f32",
                            dims == 3 ? sizeof(rb_box) : sizeof(rb_box2),
                            &n_boxes, 1);
    rb_shapes shapes = {0};
    if (dims == 3) {
        shapes.obbs = read_file(dir, "obbs.f32", sizeof(rb_obb),
                                &shapes.n_obbs, 0);
        shapes.xboxes = read_file(dir, "xboxes.f32", sizeof(rb_xbox),
                                  &shapes.n_xboxes, 0);
        shapes.spheres = read_file(dir, "spheres.f32", sizeof(rb_sphere),
                                   &shapes.n_spheres, 0);
        shapes.planes = read_file(dir, "planes.f32", sizeof(rb_plane),
                                  &shapes.n_planes, 0);
    }

    rb_hit *hits = xcalloc(n_rays, sizeof *hits);
    uint8_t *kinds = xcalloc(n_rays, 1);
    float *normals = xcalloc(n_rays, 3 * sizeof(float));
    uint8_t *any = xcalloc(n_rays, 1);
    uint32_t *counts = xcalloc(n_rays, sizeof *counts);
    rb_list_hit *list = xcalloc(n_rays * max_hits, sizeof *list);
    rb_results res = {.hits = hits, .any = any, .counts = counts,
                      .list = list, .capacity = n_rays};

    if (pairs) {
        rb_query q = {.mode = RB_MODE_PAIRS, .dims = dims, .rays = rays,
                      .n_rays = n_rays, .boxes = boxes, .n_boxes = n_boxes};
        check(ctx, rb_intersect(ctx, &q, &res), "pairs");
        write_file(dir, "pairs.hits", hits, n_rays * sizeof *hits);
    } else {
        rb_scene *scene = NULL;
        check(ctx, rb_scene_create_shapes(ctx, dims, boxes, n_boxes, &shapes,
                                          &scene), "scene");
        rb_query q = {.dims = dims, .rays = rays, .n_rays = n_rays,
                      .scene = scene, .max_hits = max_hits};
        if (bench > 0)
            run_bench(ctx, &q, &res, bench);
        else
            write_answers(ctx, &q, &res, dir, kinds, normals, max_hits);
        rb_scene_destroy(scene);
    }
    rb_context_destroy(ctx);
    free(rays);
    free(boxes);
    free((void *)shapes.obbs);
    free((void *)shapes.xboxes);
    free((void *)shapes.spheres);
    free((void *)shapes.planes);
    free(hits);
    free(kinds);
    free(normals);
    free(any);
    free(counts);
    free(list);
    return 0;
}
