/*
 * raybox_visibility.c - `raybox visibility`: line of sight between every
 * observer and every target of a scene, from files to a file (SPEC 9
 * and 10), in slices of observers so that the answer never has to fit in
 * memory, and in shards so that a job spreads over machines.
 *
 * The output is the binary answer of the visibility endpoint: a 64-byte
 * header (kind 130, mode any, the observer and target counts, the range)
 * and the row-major bit matrix. Every byte depends only on the inputs, so
 * a shard (--shard I/N: observers [N_obs * I / N, N_obs * (I+1) / N))
 * writes its rows and the same header at their offsets of the same file,
 * the shards together write what one run writes, and a shard run twice
 * writes the same bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "binary_codec.h"
#include "json_request.h"
#include "npy.h"
#include "raybox.h"
#include "raybox_cli.h"

/* Pairs a slice: the bits of that many observers are written at once. */
#define SLICE_PAIRS ((uint64_t)16 << 20)

static const char usage_visibility[] =
    "usage: raybox visibility SCENE OBSERVERS TARGETS -o OUT [options]\n"
    "\n"
    "Line of sight between every observer and every target: pair (i, j) is\n"
    "the segment from observer i to target j, visible when no element of\n"
    "the scene is hit over [tmin, tmax] (default [0, 1], the whole\n"
    "segment). Writes the binary visibility answer to OUT: a 64-byte header\n"
    "(\"RBOX\", kind 130; observers at byte 16, targets at byte 24, both\n"
    "u64) and the bit matrix, ceil(targets / 8) bytes an observer, bit\n"
    "j % 8 of byte j / 8 set when target j is visible.\n"
    "\n"
    "  SCENE      a JSON scene body ({\"boxes\": [...], \"spheres\": ...}),\n"
    "             the binary scene body, or a .npy float32 (N, 6) of boxes\n"
    "  OBSERVERS  a .npy float32 (N, 3), or raw float32 x y z records\n"
    "  TARGETS    the same\n"
    "\n"
    "options:\n"
    "  -o, --output FILE          the answer (created if missing, never\n"
    "                             truncated: shards share it)\n"
    "  --tmin T, --tmax T         the range of every segment (0, 1)\n"
    "  --shard I/N                observers of slice I of N (0 <= I < N)\n"
    "  --backend auto|cpu|opencl  backend (default auto)\n"
    "  --device N|NAME            OpenCL device (see `raybox devices`)\n"
    "  --quiet                    no progress line on stderr\n"
    "  --help                     this text\n"
    "\n"
    "exit status: 0 done; 2 bad input (one line naming the element);\n"
    "1 other failures.\n";

typedef struct vis_opts {
    rb_context_options ctx;
    const char *scene, *observers, *targets, *output;
    float tmin, tmax;
    unsigned shard, shards;
    int quiet;
} vis_opts;

static int parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno)
        return -1;
    *out = (float)v;
    return 0;
}

/* 0 ok, 1 usage error (printed), -1 --help printed. */
static int parse_args(int argc, char **argv, vis_opts *o)
{
    memset(o, 0, sizeof *o);
    rb_context_options_init(&o->ctx);
    o->tmax = 1;
    o->shards = 1;
    const char *pos[3];
    int n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_visibility, stdout);
            return -1;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) {
            o->output = v;
            i++;
        } else if (!strcmp(a, "--tmin") && v) {
            if (parse_float(v, &o->tmin))
                goto bad_value;
            i++;
        } else if (!strcmp(a, "--tmax") && v) {
            if (parse_float(v, &o->tmax))
                goto bad_value;
            i++;
        } else if (!strcmp(a, "--shard") && v) {
            if (sscanf(v, "%u/%u", &o->shard, &o->shards) != 2 ||
                !o->shards || o->shard >= o->shards) {
                fprintf(stderr, "raybox: --shard '%s': I/N with 0 <= I < N "
                                "(see --help)\n", v);
                return 1;
            }
            i++;
        } else if (!strcmp(a, "--backend") && v) {
            if (rb_backend_kind_parse(v, &o->ctx.backend)) {
                fprintf(stderr, "raybox: --backend '%s': auto, cpu or "
                                "opencl\n", v);
                return 1;
            }
            i++;
        } else if (!strcmp(a, "--device") && v) {
            char *end;
            long d = strtol(v, &end, 10);
            if (*v && !*end && d >= 0)
                o->ctx.device_index = (int)d;
            else
                o->ctx.device_name = v;
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "raybox: visibility: unknown option or missing "
                            "value '%s' (see --help)\n", a);
            return 1;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "raybox: visibility takes SCENE OBSERVERS "
                            "TARGETS, not '%s' too\n", a);
            return 1;
        }
        continue;
    bad_value:
        fprintf(stderr, "raybox: %s '%s' is not a number\n", a, v);
        return 1;
    }
    if (n_pos != 3 || !o->output) {
        fprintf(stderr, "raybox: visibility needs SCENE OBSERVERS TARGETS "
                        "and -o OUT (see --help)\n");
        return 1;
    }
    o->scene = pos[0];
    o->observers = pos[1];
    o->targets = pos[2];
    return 0;
}

/* Points from a .npy (N, 3) or raw float32 triplets. 0, or 2 (bad input)
 * / 1 (I/O) after printing why. */
static int read_points(const char *path, const char *what, float **pts,
                       size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "raybox: %s '%s': %s\n", what, path,
                strerror(errno));
        return 1;
    }
    unsigned char head[8] = {0};
    size_t got = fread(head, 1, sizeof head, f);
    rewind(f);
    char why[256];
    int rc = 0;
    if (npy_is_npy(head, got)) {
        if (npy_read_f32(f, 3, pts, n, why, sizeof why)) {
            fprintf(stderr, "raybox: %s '%s': %s\n", what, path, why);
            rc = 2;
        }
    } else {
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        rewind(f);
        if (size < 0 || size % 12) {
            fprintf(stderr, "raybox: %s '%s': %ld bytes is not a whole "
                            "number of float32 x y z records (12 bytes), "
                            "nor a .npy file\n", what, path, size);
            rc = 2;
        } else {
            *n = (size_t)size / 12;
            *pts = malloc(*n ? (size_t)size : 1);
            if (!*pts || fread(*pts, 12, *n, f) != *n) {
                fprintf(stderr, "raybox: %s '%s': cannot read it\n", what,
                        path);
                rc = 1;
            }
        }
    }
    fclose(f);
    return rc;
}

/* The scene file as a scene: .npy boxes, the binary scene body or a JSON
 * scene body (through the server's own parsers). */
static int load_scene(rb_context *ctx, const char *path, rb_scene **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "raybox: scene '%s': %s\n", path, strerror(errno));
        return 1;
    }
    unsigned char head[8] = {0};
    size_t got = fread(head, 1, sizeof head, f);
    rewind(f);
    char why[256];
    int rc = 0, st;
    if (npy_is_npy(head, got)) {
        float *boxes;
        size_t n;
        if (npy_read_f32(f, 6, &boxes, &n, why, sizeof why)) {
            fprintf(stderr, "raybox: scene '%s': %s\n", path, why);
            fclose(f);
            return 2;
        }
        st = rb_scene_create(ctx, 3, boxes, n, out);
        free(boxes);
        if (st) {
            fprintf(stderr, "raybox: scene '%s': %s\n", path,
                    rb_context_error(ctx)->message);
            rc = st == RB_EINPUT ? 2 : 1;
        }
        fclose(f);
        return rc;
    }
    int binary = got >= 4 && memcmp(head, "RBOX", 4) == 0;
    rbj_parser *jp = NULL;
    rbb_decoder *bd = NULL;
    if (binary) {
        rbb_options bo;
        rbb_options_init(&bo, RBB_KIND_SCENE);
        bo.limits.max_boxes = UINT32_MAX;
        st = rbb_decoder_create(&bo, &bd);
    } else {
        rbj_options jo;
        rbj_options_init(&jo, RBJ_SCENE_CREATE);
        jo.limits.max_boxes = UINT32_MAX;
        jo.limits.max_numbers = UINT64_MAX;
        st = rbj_parser_create(&jo, &jp);
    }
    if (st) {
        fprintf(stderr, "raybox: out of memory\n");
        fclose(f);
        return 1;
    }
    char *buf = malloc(1 << 16);
    size_t n;
    int bad = 0;
    while (buf && !bad && (n = fread(buf, 1, 1 << 16, f)) > 0)
        bad = binary ? rbb_decoder_feed(bd, buf, n) != 0
                     : rbj_parser_feed(jp, buf, n) != 0;
    free(buf);
    fclose(f);
    if (!bad)
        bad = binary ? rbb_decoder_finish(bd) != 0
                     : rbj_parser_finish(jp) != 0;
    if (bad) {
        const rbj_error *e = binary ? rbb_decoder_error(bd)
                                    : rbj_parser_error(jp);
        fprintf(stderr, "raybox: scene '%s': %s%s%s\n", path,
                e->has_pointer ? e->pointer : "", e->has_pointer ? ": " : "",
                e->detail);
        rc = 2;
    } else {
        const rbj_request *r = binary ? rbb_decoder_request(bd)
                                      : rbj_parser_request(jp);
        if (r->dims != 3) {
            fprintf(stderr, "raybox: scene '%s': visibility needs a 3D "
                            "scene\n", path);
            rc = 2;
        } else if ((st = rb_scene_create_shapes(ctx, 3, r->boxes, r->n_boxes,
                                                &r->shapes, out))) {
            fprintf(stderr, "raybox: scene '%s': %s\n", path,
                    rb_context_error(ctx)->message);
            rc = st == RB_EINPUT ? 2 : 1;
        }
    }
    rbj_parser_destroy(jp);
    rbb_decoder_destroy(bd);
    return rc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void progress(const vis_opts *o, size_t done, size_t rows,
                     uint64_t pairs_done, double t0, int last)
{
    if (o->quiet)
        return;
    double s = now_s() - t0;
    double rate = s > 0 ? (double)pairs_done / s : 0;
    double eta = done && done < rows ? s * (double)(rows - done) / (double)done
                                     : 0;
    fprintf(stderr, "raybox: visibility %zu/%zu observers (%.0f%%), %.2f M "
                    "segments/s, %s %.0f s\n",
            done, rows, rows ? 100.0 * (double)done / (double)rows : 100.0,
            rate / 1e6, last ? "took" : "ETA", last ? s : eta);
}

static int write_at(int fd, const void *p, size_t n, off_t at)
{
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
        at += w;
    }
    return 0;
}

/* The answer's header: nothing in it depends on the run (no scene
 * version, no time), so every shard writes the same bytes. */
static void vis_header(uint8_t *out, uint64_t n, uint64_t m, float tmin,
                       float tmax)
{
    rbb_header h = {.version = 1, .header_size = RBB_HEADER_SIZE,
                    .kind = RBB_KIND_VISIBILITY, .mode = RB_MODE_ANY,
                    .dims = 3, .n_rays = n, .n_boxes = m, .tmin = tmin,
                    .tmax = tmax};
    rbb_header_encode(&h, out);
}

int cmd_visibility(int argc, char **argv)
{
    vis_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : 1;
    float *obs = NULL, *tgt = NULL;
    size_t n = 0, m = 0;
    rb_context *ctx = NULL;
    rb_scene *scene = NULL;
    uint8_t *bits = NULL;
    int fd = -1;
    if ((rc = read_points(o.observers, "observers", &obs, &n)) ||
        (rc = read_points(o.targets, "targets", &tgt, &m)))
        goto done;
    char why[512] = "";
    int st = rb_context_create(&o.ctx, &ctx, why, sizeof why);
    if (st) {
        fprintf(stderr, "raybox: no %s backend: %s (%s)\n",
                rb_backend_kind_name(o.ctx.backend), why, rb_status_name(st));
        rc = 1;
        goto done;
    }
    if ((rc = load_scene(ctx, o.scene, &scene)))
        goto done;

    size_t stride = (m + 7) / 8;
    size_t first = (size_t)((uint64_t)n * o.shard / o.shards);
    size_t end = (size_t)((uint64_t)n * (o.shard + 1) / o.shards);
    size_t slice = m ? (size_t)(SLICE_PAIRS / m) : end - first;
    if (slice < 1)
        slice = 1;
    bits = malloc(slice * stride + 1);
    fd = open(o.output, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (!bits || fd < 0) {
        fprintf(stderr, "raybox: %s: %s\n", o.output,
                !bits ? "out of memory" : strerror(errno));
        rc = 1;
        goto done;
    }
    uint8_t head[RBB_HEADER_SIZE];
    vis_header(head, n, m, o.tmin, o.tmax);
    /* Every shard sets the same size and header: order does not matter. */
    if (ftruncate(fd, (off_t)(RBB_HEADER_SIZE + (uint64_t)n * stride)) ||
        write_at(fd, head, sizeof head, 0)) {
        fprintf(stderr, "raybox: %s: %s\n", o.output, strerror(errno));
        rc = 1;
        goto done;
    }
    double t0 = now_s(), last = t0;
    uint64_t pairs = 0;
    for (size_t i = first; i < end; i += slice) {
        size_t rows = end - i < slice ? end - i : slice;
        rb_visibility_query q = {.scene = scene, .observers = obs + 3 * i,
                                 .n_observers = rows, .targets = tgt,
                                 .n_targets = m, .tmin = o.tmin,
                                 .tmax = o.tmax};
        st = rb_visibility(ctx, &q, bits, rows * stride, NULL, NULL);
        if (st) {
            const rb_error *e = rb_context_error(ctx);
            /* the library counts observers from the slice's first */
            size_t oi, tj;
            const char *colon = strchr(e->message, ':');
            if (e->element == RB_ELEMENT_OBSERVER && colon)
                fprintf(stderr, "raybox: observer %zu%s\n",
                        i + (size_t)e->index, colon);
            else if (sscanf(e->message, "observer %zu to target %zu", &oi,
                            &tj) == 2 && colon)
                fprintf(stderr, "raybox: observer %zu to target %zu%s\n",
                        i + oi, tj, colon);
            else
                fprintf(stderr, "raybox: %s\n", e->message);
            rc = st == RB_EINPUT ? 2 : 1;
            goto done;
        }
        if (write_at(fd, bits, rows * stride,
                     (off_t)(RBB_HEADER_SIZE + (uint64_t)i * stride))) {
            fprintf(stderr, "raybox: %s: %s\n", o.output, strerror(errno));
            rc = 1;
            goto done;
        }
        pairs += (uint64_t)rows * m;
        if (now_s() - last >= 1) {
            last = now_s();
            progress(&o, i + rows - first, end - first, pairs, t0, 0);
        }
    }
    if (fsync(fd)) {
        fprintf(stderr, "raybox: %s: %s\n", o.output, strerror(errno));
        rc = 1;
        goto done;
    }
    progress(&o, end - first, end - first, pairs, t0, 1);
done:
    if (fd >= 0)
        close(fd);
    free(bits);
    free(obs);
    free(tgt);
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    return rc;
}
