/*
 * loadgen.c - raybox-loadgen, the bodies and the in-process reference of
 * make load (scripts/load.sh).
 *
 *   raybox-loadgen bodies DIR
 *       writes DIR/scene.json (1024 boxes), DIR/small.json and
 *       DIR/small.bin (the same 16 rays, nearest, as JSON and binary, for
 *       /v1/scenes/{id}/intersect) and DIR/large.bin (1M rays, binary,
 *       `any`, for the same route). Fixed seed.
 *   raybox-loadgen inproc DIR [--runs N] [--threads T]
 *       reads DIR/scene.json and DIR/large.bin with the server's own
 *       decoders, and runs the large query N times in-process on one
 *       CPU-backend context with T threads (0 = online CPUs, rayboxd's
 *       default per worker); prints one line per run and
 *       "INPROC rays_per_s=<median>".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "binary_codec.h"
#include "float_text.h"
#include "json_request.h"
#include "raybox.h"

#define SCENE_BOXES 1024
#define SMALL_RAYS 16
#define LARGE_RAYS (1u << 20)

static uint64_t rng_state = 0x5eedull;

static float uniform(float lo, float hi)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + (hi - lo) * (float)((double)(z >> 11) / 9007199254740992.0);
}

/* Rays from a ring around the scene towards its middle: most hit
 * something, some miss. */
static void random_ray(float v[6])
{
    for (int a = 0; a < 3; a++)
        v[a] = uniform(-120, 120);
    for (int a = 0; a < 3; a++)
        v[3 + a] = uniform(-30, 30) - v[a];
}

static void put_float(FILE *f, float x)
{
    char t[RB_FLOAT_TEXT_MAX];
    rb_float_format(x, t);
    fputs(t, f);
}

static FILE *open_in(const char *dir, const char *name, const char *mode)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, mode);
    if (!f)
        perror(path);
    return f;
}

/* A binary intersect body (3D rays without their own ranges, for
 * /v1/scenes/{id}/intersect): the header, then the records. The records
 * are written as the host holds them: little-endian hosts only, like the
 * rest of make load. */
static int write_binary(const char *dir, const char *name, rb_mode mode,
                        unsigned n_rays, const float (*rays)[6])
{
    FILE *f = open_in(dir, name, "wb");
    if (!f)
        return 1;
    rbb_header h = {.version = RBB_VERSION, .header_size = RBB_HEADER_SIZE,
                    .kind = RBB_KIND_INTERSECT, .mode = mode, .dims = 3,
                    .n_rays = n_rays, .tmin = 0, .tmax = INFINITY};
    uint8_t head[RBB_HEADER_SIZE];
    rbb_header_encode(&h, head);
    fwrite(head, 1, sizeof head, f);
    fwrite(rays, sizeof rays[0], n_rays, f);
    return fclose(f) ? 1 : 0;
}

static int bodies(const char *dir)
{
    FILE *f = open_in(dir, "scene.json", "w");
    if (!f)
        return 1;
    fputs("{\"dims\":3,\"boxes\":[", f);
    for (int i = 0; i < SCENE_BOXES; i++) {
        fputs(i ? ",[" : "[", f);
        float lo[3], hi[3];
        for (int a = 0; a < 3; a++) {
            lo[a] = uniform(-100, 100);
            hi[a] = lo[a] + uniform(0.5f, 6);
        }
        for (int k = 0; k < 6; k++) {
            if (k)
                fputc(',', f);
            put_float(f, k < 3 ? lo[k] : hi[k - 3]);
        }
        fputc(']', f);
    }
    fputs("]}", f);
    fclose(f);

    /* The small query in both forms, the same rays bit for bit. */
    float small[SMALL_RAYS][6];
    for (int i = 0; i < SMALL_RAYS; i++)
        random_ray(small[i]);
    f = open_in(dir, "small.json", "w");
    if (!f)
        return 1;
    fputs("{\"mode\":\"nearest\",\"rays\":[", f);
    for (int i = 0; i < SMALL_RAYS; i++) {
        fputs(i ? ",[" : "[", f);
        for (int k = 0; k < 6; k++) {
            if (k)
                fputc(',', f);
            put_float(f, small[i][k]);
        }
        fputc(']', f);
    }
    fputs("]}", f);
    fclose(f);
    if (write_binary(dir, "small.bin", RB_MODE_NEAREST, SMALL_RAYS, small))
        return 1;

    float(*large)[6] = malloc(sizeof(float[6]) * LARGE_RAYS);
    if (!large) {
        fprintf(stderr, "raybox-loadgen: out of memory\n");
        return 1;
    }
    for (unsigned i = 0; i < LARGE_RAYS; i++)
        random_ray(large[i]);
    int rc = write_binary(dir, "large.bin", RB_MODE_ANY, LARGE_RAYS, large);
    free(large);
    return rc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Streams a file through the JSON parser or the binary decoder. */
static char *slurp(const char *dir, const char *name, size_t *len)
{
    FILE *f = open_in(dir, name, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int inproc(const char *dir, int runs, unsigned threads)
{
    size_t slen, llen;
    char *scene_text = slurp(dir, "scene.json", &slen);
    char *large = slurp(dir, "large.bin", &llen);
    if (!scene_text || !large)
        return 1;
    rbj_options jo;
    rbj_options_init(&jo, RBQ_SCENE_CREATE);
    rbj_parser *jp = NULL;
    rbb_options bo;
    rbb_options_init(&bo, RBB_KIND_INTERSECT);
    bo.scene_in_path = 1;
    bo.scene_dims = 3;
    bo.content_length = llen;
    rbb_decoder *bd = NULL;
    if (rbj_parser_create(&jo, &jp) || rbj_parser_feed(jp, scene_text, slen) ||
        rbj_parser_finish(jp) || rbb_decoder_create(&bo, &bd) ||
        rbb_decoder_feed(bd, large, llen) || rbb_decoder_finish(bd)) {
        fprintf(stderr, "raybox-loadgen: the bodies do not parse\n");
        return 1;
    }
    const rbq_request *sr = rbj_parser_request(jp);
    const rbq_request *lr = rbb_decoder_request(bd);

    rb_context_options o;
    rb_context_options_init(&o);
    o.backend = RB_BACKEND_CPU;
    o.threads = threads;
    rb_context *ctx = NULL;
    rb_scene *scene = NULL;
    char why[256];
    if (rb_context_create(&o, &ctx, why, sizeof why) ||
        rb_scene_create(ctx, 3, sr->boxes, sr->n_boxes, &scene)) {
        fprintf(stderr, "raybox-loadgen: %s\n", why);
        return 1;
    }
    uint8_t *any = malloc(lr->n_rays);
    double *rate = calloc((size_t)runs, sizeof *rate);
    rb_results res = {.any = any, .capacity = lr->n_rays};
    rb_query q = {.mode = lr->mode, .dims = 3, .rays = lr->rays,
                  .n_rays = lr->n_rays, .scene = scene};
    size_t hits = 0;
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        if (rb_intersect(ctx, &q, &res)) {
            fprintf(stderr, "raybox-loadgen: %s\n",
                    rb_context_error(ctx)->message);
            return 1;
        }
        double dt = now_s() - t0;
        rate[r] = (double)lr->n_rays / dt;
        hits = 0;
        for (size_t i = 0; i < lr->n_rays; i++)
            hits += any[i];
        printf("inproc run %d: %.1f ms, %.3g rays/s (%zu of %zu rays hit)\n",
               r + 1, dt * 1e3, rate[r], hits, lr->n_rays);
    }
    qsort(rate, (size_t)runs, sizeof *rate, cmp_double);
    printf("INPROC rays_per_s=%.0f min=%.0f max=%.0f threads=%u\n",
           rate[runs / 2], rate[0], rate[runs - 1],
           threads ? threads : 0);
    free(rate);
    free(any);
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    rbb_decoder_destroy(bd);
    rbj_parser_destroy(jp);
    free(scene_text);
    free(large);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "bodies") == 0)
        return bodies(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "inproc") == 0) {
        int runs = 5;
        unsigned threads = 0;
        for (int i = 3; i + 1 < argc; i += 2) {
            if (strcmp(argv[i], "--runs") == 0)
                runs = atoi(argv[i + 1]);
            else if (strcmp(argv[i], "--threads") == 0)
                threads = (unsigned)atoi(argv[i + 1]);
        }
        return inproc(argv[2], runs > 0 ? runs : 1, threads);
    }
    fprintf(stderr, "usage: raybox-loadgen bodies DIR | inproc DIR "
                    "[--runs N] [--threads T]\n");
    return 2;
}
