/* batch.c - see batch.h. */
#include "batch.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json_request.h"
#include "npy.h"

const char *batch_prog = "raybox";
FILE *batch_err;

#define ERR (batch_err ? batch_err : stderr)

/* Visibility: the bits of that many pairs are computed and written at
 * once. */
#define SLICE_PAIRS ((uint64_t)16 << 20)
/* Intersect: rays a chunk by default (32 MiB of rb_ray). */
#define CHUNK_RAYS ((size_t)1 << 20)

static const char usage_visibility[] =
    "usage: %s visibility SCENE OBSERVERS TARGETS -o OUT [options]\n"
    "\n"
    "Line of sight between every observer and every target: pair (i, j) is\n"
    "the segment from observer i to target j, visible when no element of\n"
    "the scene is hit over [tmin, tmax] (default [0, 1], the whole\n"
    "segment). Writes the binary visibility answer to OUT: a 64-byte header\n"
    "(\"RBOX\", kind 130; observers at byte 16, targets at byte 24, both\n"
    "u64) and the bit matrix, ceil(targets / 8) bytes an observer, bit\n"
    "j %% 8 of byte j / 8 set when target j is visible.\n"
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
    "%s"
    "  --backend auto|cpu|opencl  backend (default auto)\n"
    "  --device N|NAME            OpenCL device (see `raybox devices`)\n"
    "  --devices all|LIST         split the work over several OpenCL\n"
    "                             devices by their speed (indices in\n"
    "                             `raybox devices`, comma-separated)\n"
    "  --threads N                CPU backend threads (default: all CPUs)\n"
    "  --quiet                    no progress line on stderr\n"
    "  --help                     this text\n"
    "\n"
    "exit status: 0 done; 2 bad input (one line naming the element);\n"
    "1 other failures.\n";

static const char usage_isect[] =
    "usage: %s intersect --rays RAYS --scene SCENE -o OUT [options]\n"
    "\n"
    "Every ray of RAYS against the scene, streamed in chunks (the rays need\n"
    "not fit in memory), the answers written to OUT in the binary answer\n"
    "layout (docs/binary-format.md): a header (\"RBOX\", kind 129, the mode,\n"
    "the ray count at byte 16), then per ray a 16-byte hit (nearest;\n"
    "followed by a u8 kind per ray, in a 96-byte version 2 header, when\n"
    "the scene has elements beyond boxes, and by 3 f32 normals per ray\n"
    "with --normals), a u8 (any) or a u32 (count).\n"
    "\n"
    "  RAYS   a .npy float32 (N, 6) (origin, direction) or (N, 8) (then\n"
    "         tmin, tmax), or a binary intersect request (\"RBOX\", kind 1,\n"
    "         3D) holding rays only: its mode and range are the defaults\n"
    "  SCENE  a JSON scene body, the binary scene body, or a .npy float32\n"
    "         (N, 6) of boxes, as for visibility\n"
    "\n"
    "options:\n"
    "  --rays FILE, --scene FILE  the inputs (required)\n"
    "  -o, --output FILE          the answer (created if missing, never\n"
    "                             truncated: shards share it)\n"
    "  --mode nearest|any|count   (default: the request's, else nearest)\n"
    "  --tmin T, --tmax T         the range of 6-number rays (0, +inf)\n"
    "  --normals                  nearest: the unit world normal at each\n"
    "                             hit too (NaN x 3 where there is none)\n"
    "%s"
    "  --chunk N                  rays read and answered at once (1048576)\n"
    "  --backend auto|cpu|opencl  backend (default auto)\n"
    "  --device N|NAME            OpenCL device (see `raybox devices`)\n"
    "  --devices all|LIST         split the work over several OpenCL\n"
    "                             devices by their speed (indices in\n"
    "                             `raybox devices`, comma-separated)\n"
    "  --threads N                CPU backend threads (default: all CPUs)\n"
    "  --quiet                    no progress line on stderr\n"
    "  --help                     this text\n"
    "\n"
    "exit status: 0 done; 2 bad input (one line naming the file and the\n"
    "ray or byte); 1 other failures.\n";

static const char usage_shard[] =
    "  --shard I/N                items of slice I of N (0 <= I < N)\n";

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

static int parse_size(const char *s, size_t max, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || *s == '-' || v < 1 || v > max)
        return -1;
    *out = (size_t)v;
    return 0;
}

int batch_parse(batch_cmd cmd, int argc, char **argv, int allow_shard,
                batch_opts *o)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    rb_context_options_init(&o->ctx);
    int vis = cmd == BATCH_VISIBILITY;
    const char *name = vis ? "visibility" : "intersect";
    o->tmax = vis ? 1.0f : INFINITY;
    o->mode = RB_MODE_NEAREST;
    o->shards = 1;
    o->chunk = CHUNK_RAYS;
    const char *pos[3];
    int n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-' || !a[1]) { /* "-" is a file name too */
            if (vis && n_pos < 3) {
                pos[n_pos++] = a;
                continue;
            }
            fprintf(ERR, "%s: %s takes %s, not '%s' too (see --help)\n",
                    batch_prog, name,
                    vis ? "SCENE OBSERVERS TARGETS" : "options only", a);
            return 1;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf(vis ? usage_visibility : usage_isect, batch_prog,
                   allow_shard ? usage_shard : "");
            return -1;
        }
        if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        if (!vis && !strcmp(a, "--normals")) {
            o->normals = 1;
            continue;
        }
        if (!v) /* every other option takes a value */
            goto unknown;
        i++;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            o->output = v;
        } else if (!vis && !strcmp(a, "--rays")) {
            o->rays = v;
        } else if (!vis && !strcmp(a, "--scene")) {
            o->scene = v;
        } else if (!strcmp(a, "--tmin") || !strcmp(a, "--tmax")) {
            int max = !strcmp(a, "--tmax");
            if (parse_float(v, max ? &o->tmax : &o->tmin))
                goto bad_value;
            *(max ? &o->has_tmax : &o->has_tmin) = 1;
        } else if (!vis && !strcmp(a, "--mode")) {
            if (rb_mode_parse(v, &o->mode) ||
                (o->mode != RB_MODE_NEAREST && o->mode != RB_MODE_ANY &&
                 o->mode != RB_MODE_COUNT)) {
                fprintf(ERR, "%s: --mode '%s': nearest, any or count\n",
                        batch_prog, v);
                return 1;
            }
            o->has_mode = 1;
        } else if (!vis && !strcmp(a, "--chunk")) {
            if (parse_size(v, (size_t)1 << 28, &o->chunk)) {
                fprintf(ERR, "%s: --chunk '%s': rays from 1 to %zu\n",
                        batch_prog, v, (size_t)1 << 28);
                return 1;
            }
        } else if (allow_shard && !strcmp(a, "--shard")) {
            char tail;
            if (sscanf(v, "%u/%u%c", &o->shard, &o->shards, &tail) != 2 ||
                !o->shards || o->shard >= o->shards) {
                fprintf(ERR, "%s: --shard '%s': I/N with 0 <= I < N "
                             "(see --help)\n", batch_prog, v);
                return 1;
            }
            o->has_shard = 1;
        } else if (!strcmp(a, "--shard")) {
            fprintf(ERR, "%s: --shard: the ranks are the shards here (rank "
                         "r of N computes slice r/N)\n", batch_prog);
            return 1;
        } else if (!strcmp(a, "--backend")) {
            if (rb_backend_kind_parse(v, &o->ctx.backend)) {
                fprintf(ERR, "%s: --backend '%s': auto, cpu or opencl\n",
                        batch_prog, v);
                return 1;
            }
        } else if (!strcmp(a, "--devices")) {
            o->ctx.devices = v;
        } else if (!strcmp(a, "--device")) {
            char *end;
            long d = strtol(v, &end, 10);
            if (*v && !*end && d >= 0)
                o->ctx.device_index = (int)d;
            else
                o->ctx.device_name = v;
        } else if (!strcmp(a, "--threads")) {
            size_t t;
            if (parse_size(v, 4096, &t)) {
                fprintf(ERR, "%s: --threads '%s': 1 to 4096\n", batch_prog,
                        v);
                return 1;
            }
            o->ctx.threads = (unsigned)t;
        } else {
            goto unknown;
        }
        continue;
    unknown:
        fprintf(ERR, "%s: %s: unknown option or missing value '%s' (see "
                        "--help)\n", batch_prog, name, a);
        return 1;
    bad_value:
        fprintf(ERR, "%s: %s '%s' is not a number\n", batch_prog, a, v);
        return 1;
    }
    if (vis && (n_pos != 3 || !o->output)) {
        fprintf(ERR, "%s: visibility needs SCENE OBSERVERS TARGETS and "
                        "-o OUT (see --help)\n", batch_prog);
        return 1;
    }
    if (!vis && (!o->rays || !o->scene || !o->output)) {
        fprintf(ERR, "%s: intersect over files needs --rays FILE, "
                        "--scene FILE and -o OUT (see --help)\n", batch_prog);
        return 1;
    }
    if (vis) {
        o->scene = pos[0];
        o->observers = pos[1];
        o->targets = pos[2];
    }
    return 0;
}

void batch_slice(uint64_t n, unsigned shard, unsigned shards,
                 uint64_t *first, uint64_t *end)
{
    /* n * I fits: n is at most a file's size, far below 2^64 / 2^32 */
    *first = n * shard / shards;
    *end = n * (shard + 1) / shards;
}

int batch_context(const batch_opts *o, rb_context **ctx)
{
    char why[512] = "";
    int st = rb_context_create(&o->ctx, ctx, why, sizeof why);
    if (st) {
        fprintf(ERR, "%s: no %s backend: %s (%s)\n", batch_prog,
                rb_backend_kind_name(o->ctx.backend), why,
                rb_status_name(st));
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Inputs
 */
int batch_read_file(const char *path, const char *what, uint8_t **buf,
                    size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st)) {
        fprintf(ERR, "%s: %s '%s': %s\n", batch_prog, what, path,
                strerror(errno));
        if (f)
            fclose(f);
        return 1;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n ? n : 1);
    if (!b || fread(b, 1, n, f) != n) {
        fprintf(ERR, "%s: %s '%s': %s\n", batch_prog, what, path,
                !b ? "out of memory" : "cannot read it");
        free(b);
        fclose(f);
        return 1;
    }
    fclose(f);
    *buf = b;
    *len = n;
    return 0;
}

/* A read-only FILE over bytes, for the .npy reader. */
static FILE *mem_file(const uint8_t *buf, size_t len)
{
    return fmemopen((void *)buf, len ? len : 1, "rb");
}

int batch_scene_parse(rb_context *ctx, const char *path, const uint8_t *buf,
                      size_t len, rb_scene **out)
{
    char why[256];
    int rc = 0, st;
    if (npy_is_npy(buf, len)) {
        float *boxes;
        size_t n;
        FILE *f = mem_file(buf, len);
        if (!f || npy_read_f32(f, 6, &boxes, &n, why, sizeof why)) {
            fprintf(ERR, "%s: scene '%s': %s\n", batch_prog, path,
                    f ? why : strerror(errno));
            if (f)
                fclose(f);
            return f ? 2 : 1;
        }
        fclose(f);
        st = rb_scene_create(ctx, 3, boxes, n, out);
        free(boxes);
        if (st) {
            fprintf(ERR, "%s: scene '%s': %s\n", batch_prog, path,
                    rb_context_error(ctx)->message);
            rc = st == RB_EINPUT ? 2 : 1;
        }
        return rc;
    }
    int binary = len >= 4 && memcmp(buf, "RBOX", 4) == 0;
    rbj_parser *jp = NULL;
    rbb_decoder *bd = NULL;
    if (binary) {
        rbb_options bo;
        rbb_options_init(&bo, RBB_KIND_SCENE);
        bo.limits.max_boxes = UINT32_MAX;
        st = rbb_decoder_create(&bo, &bd);
    } else {
        rbj_options jo;
        rbj_options_init(&jo, RBQ_SCENE_CREATE);
        jo.limits.max_boxes = UINT32_MAX;
        jo.limits.max_numbers = UINT64_MAX;
        st = rbj_parser_create(&jo, &jp);
    }
    if (st) {
        fprintf(ERR, "%s: out of memory\n", batch_prog);
        return 1;
    }
    int bad = binary ? rbb_decoder_feed(bd, buf, len) != 0
                     : rbj_parser_feed(jp, (const char *)buf, len) != 0;
    if (!bad)
        bad = binary ? rbb_decoder_finish(bd) != 0
                     : rbj_parser_finish(jp) != 0;
    if (bad) {
        const rbq_error *e = binary ? rbb_decoder_error(bd)
                                    : rbj_parser_error(jp);
        fprintf(ERR, "%s: scene '%s': %s%s%s\n", batch_prog, path,
                e->has_pointer ? e->pointer : "", e->has_pointer ? ": " : "",
                e->detail);
        rc = 2;
    } else {
        const rbq_request *r = binary ? rbb_decoder_request(bd)
                                      : rbj_parser_request(jp);
        if (r->dims != 3) {
            fprintf(ERR, "%s: scene '%s': batch jobs need a 3D scene\n",
                    batch_prog, path);
            rc = 2;
        } else if ((st = rb_scene_create_shapes(ctx, 3, r->boxes, r->n_boxes,
                                                &r->shapes, out))) {
            fprintf(ERR, "%s: scene '%s': %s\n", batch_prog, path,
                    rb_context_error(ctx)->message);
            rc = st == RB_EINPUT ? 2 : 1;
        }
    }
    rbj_parser_destroy(jp);
    rbb_decoder_destroy(bd);
    return rc;
}

int batch_points_parse(const char *path, const char *what, const uint8_t *buf,
                       size_t len, float **pts, size_t *n)
{
    char why[256];
    *pts = NULL;
    *n = 0;
    if (npy_is_npy(buf, len)) {
        FILE *f = mem_file(buf, len);
        if (!f || npy_read_f32(f, 3, pts, n, why, sizeof why)) {
            fprintf(ERR, "%s: %s '%s': %s\n", batch_prog, what, path,
                    f ? why : strerror(errno));
            if (f)
                fclose(f);
            return f ? 2 : 1;
        }
        fclose(f);
        return 0;
    }
    if (len % 12) {
        fprintf(ERR, "%s: %s '%s': %zu bytes is not a whole number of "
                        "float32 x y z records (12 bytes), nor a .npy file\n",
                batch_prog, what, path, len);
        return 2;
    }
    *n = len / 12;
    *pts = malloc(len ? len : 1);
    if (!*pts) {
        fprintf(ERR, "%s: out of memory\n", batch_prog);
        return 1;
    }
    memcpy(*pts, buf, len);
    return 0;
}

int batch_rays_open(const char *path, batch_rays *r)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->fd = -1;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st)) {
        fprintf(ERR, "%s: rays '%s': %s\n", batch_prog, path,
                strerror(errno));
        if (f)
            fclose(f);
        return 1;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint8_t head[RBB_HEADER_SIZE_2] = {0};
    size_t got = fread(head, 1, sizeof head, f);
    rewind(f);
    char why[256];
    int rc = 0;
    if (npy_is_npy(head, got)) {
        size_t rows, cols;
        if (npy_read_header(f, &rows, &cols, why, sizeof why)) {
            fprintf(ERR, "%s: rays '%s': %s\n", batch_prog, path, why);
            rc = 2;
        } else if (cols != 6 && cols != 8) {
            fprintf(ERR, "%s: rays '%s': the array's shape is (%zu, %zu), "
                            "not (N, 6) or (N, 8)\n", batch_prog, path, rows,
                    cols);
            rc = 2;
        } else {
            r->n = rows;
            r->floats = (unsigned)cols;
            r->data_at = (uint64_t)ftell(f);
        }
    } else if (got >= 4 && memcmp(head, "RBOX", 4) == 0) {
        rbb_header h;
        if (got < RBB_HEADER_SIZE) {
            fprintf(ERR, "%s: rays '%s': %zu bytes, shorter than a "
                            "binary header (64)\n", batch_prog, path, got);
            fclose(f);
            return 2;
        }
        rbb_header_decode(head, &h);
        if (h.version == RBB_VERSION_2 && got >= RBB_HEADER_SIZE_2)
            rbb_header_decode_v2(head, &h);
        unsigned hs = h.version == RBB_VERSION ? RBB_HEADER_SIZE
                      : h.version == RBB_VERSION_2 ? RBB_HEADER_SIZE_2 : 0;
        const char *bad = NULL;
        unsigned at = 0;
        if (!hs)
            bad = "version is not 1 or 2", at = 4;
        else if (h.header_size != hs || got < hs)
            bad = "header size is not that of the version", at = 6;
        else if (h.kind != RBB_KIND_INTERSECT)
            bad = "kind is not 1 (an intersect request)", at = 8;
        else if (h.mode > RB_MODE_ALL)
            bad = "mode is not one of 0-4", at = 9;
        /* pairs and all: refused when the job starts, unless --mode */
        if (!bad && h.dims != 3)
            bad = "dims is not 3 (batch jobs take 3D rays)", at = 10;
        else if (!bad && (h.flags & ~(RBB_FLAG_RANGES | RBB_FLAG_NORMALS)))
            bad = "flags other than RANGES and NORMALS (camera, "
                  "quaternions) are not taken by batch jobs", at = 11;
        else if (!bad && (h.flags & RBB_FLAG_NORMALS) &&
                 h.version != RBB_VERSION_2)
            bad = "NORMALS is a version 2 flag", at = 11;
        else if (!bad && (h.n_boxes || h.n_obbs || h.n_xboxes ||
                          h.n_spheres || h.n_planes))
            bad = "the request carries elements: give the scene with "
                  "--scene and the rays alone", at = h.n_boxes ? 24 : 64;
        else if (!bad && !((h.flags & RBB_FLAG_RANGES) ||
                           (isfinite(h.tmin) && h.tmin <= h.tmax &&
                            !isnan(h.tmax))))
            bad = "tmin/tmax is not a range", at = 32;
        uint64_t rec = (h.flags & RBB_FLAG_RANGES) ? 32 : 24;
        if (!bad && (size - hs) / rec < h.n_rays) {
            fprintf(ERR, "%s: rays '%s': byte 16 announces %llu rays "
                            "(%llu bytes of records from byte %u), but the "
                            "file ends at byte %llu, in ray %llu\n",
                    batch_prog, path, (unsigned long long)h.n_rays,
                    (unsigned long long)(h.n_rays * rec), hs,
                    (unsigned long long)size,
                    (unsigned long long)((size - hs) / rec));
            rc = 2;
        } else if (!bad && size != hs + h.n_rays * rec) {
            fprintf(ERR, "%s: rays '%s': %llu bytes after the %llu rays "
                            "that end at byte %llu\n", batch_prog, path,
                    (unsigned long long)(size - hs - h.n_rays * rec),
                    (unsigned long long)h.n_rays,
                    (unsigned long long)(hs + h.n_rays * rec));
            rc = 2;
        } else if (bad) {
            fprintf(ERR, "%s: rays '%s': byte %u: %s\n", batch_prog, path,
                    at, bad);
            rc = 2;
        } else {
            r->n = h.n_rays;
            r->floats = (unsigned)(rec / 4);
            r->data_at = hs;
            r->has_mode = 1;
            r->mode = (rb_mode)h.mode;
            r->tmin = h.tmin;
            r->tmax = h.tmax;
            r->normals = (h.flags & RBB_FLAG_NORMALS) != 0;
        }
    } else {
        fprintf(ERR, "%s: rays '%s': neither a .npy file nor a binary "
                        "request (\"RBOX\" at byte 0)\n", batch_prog, path);
        rc = 2;
    }
    fclose(f);
    if (!rc) {
        uint64_t want = r->data_at + r->n * r->floats * 4;
        if (size < want) {
            uint64_t whole = (size - r->data_at) / (r->floats * 4);
            fprintf(ERR, "%s: rays '%s': %llu rays of %u float32 from "
                            "byte %llu need %llu bytes; the file ends at "
                            "byte %llu, in ray %llu\n", batch_prog, path,
                    (unsigned long long)r->n, r->floats,
                    (unsigned long long)r->data_at, (unsigned long long)want,
                    (unsigned long long)size, (unsigned long long)whole);
            rc = 2;
        } else if ((r->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            fprintf(ERR, "%s: rays '%s': %s\n", batch_prog, path,
                    strerror(errno));
            rc = 1;
        }
    }
    return rc;
}

void batch_rays_close(batch_rays *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
}

_Static_assert(sizeof(rb_ray) == 8 * sizeof(float),
               "8-number ray records are read straight into rb_ray");

/* Rays [first, first + k) as rb_ray records, 6-number ones with the range
 * tmin, tmax. 8-number records are read into out itself (they are
 * rb_ray); 6-number ones through raw, which has room for k of them. */
static int rays_read(batch_rays *r, uint64_t first, size_t k, float tmin,
                     float tmax, float *raw, rb_ray *out)
{
    size_t rec = (size_t)r->floats * 4;
    uint64_t at = r->data_at + first * rec;
    size_t want = k * rec, done = 0;
    char *to = r->floats == 8 ? (char *)out : (char *)raw;
    while (done < want) {
        ssize_t got = pread(r->fd, to + done, want - done,
                            (off_t)(at + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            fprintf(ERR, "%s: rays '%s': reading ray %llu at byte %llu: "
                            "%s\n", batch_prog, r->path,
                    (unsigned long long)(first + done / rec),
                    (unsigned long long)(at + done),
                    got < 0 ? strerror(errno) : "the file was cut short");
            return got < 0 ? 1 : 2;
        }
        done += (size_t)got;
    }
    if (r->floats == 8)
        return 0;
    for (size_t i = 0; i < k; i++) {
        const float *p = raw + 6 * i;
        out[i] = (rb_ray){.origin = {p[0], p[1], p[2]},
                          .dir = {p[3], p[4], p[5]},
                          .tmin = tmin, .tmax = tmax};
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * The answer file
 */
void batch_vis_layout(uint64_t n, uint64_t m, float tmin, float tmax,
                      batch_layout *l)
{
    memset(l, 0, sizeof *l);
    /* nothing in it depends on the run (no scene version, no time), so
     * every shard writes the same bytes */
    rbb_header h = {.version = 1, .header_size = RBB_HEADER_SIZE,
                    .kind = RBB_KIND_VISIBILITY, .mode = RB_MODE_ANY,
                    .dims = 3, .n_rays = n, .n_boxes = m, .tmin = tmin,
                    .tmax = tmax};
    l->header_len = rbb_header_encode(&h, l->header);
    l->n = n;
    l->part_at[BATCH_ANSWERS] = l->header_len;
    l->item_bytes[BATCH_ANSWERS] = (size_t)((m + 7) / 8);
    l->size = l->header_len + n * l->item_bytes[BATCH_ANSWERS];
}

void batch_isect_layout(uint64_t n, rb_mode mode, int kinds, int normals,
                        batch_layout *l)
{
    memset(l, 0, sizeof *l);
    int hits = mode == RB_MODE_NEAREST;
    kinds = hits && kinds;
    normals = hits && normals;
    rbb_result_info info = {.version = kinds || normals ? RBB_VERSION_2
                                                        : RBB_VERSION,
                            .mode = mode, .dims = 3, .n_rays = (size_t)n,
                            .has_kinds = kinds, .has_normals = normals};
    l->header_len = rbb_result_header(&info, l->header);
    l->n = n;
    l->item_bytes[BATCH_ANSWERS] = hits ? sizeof(rb_hit)
                                   : mode == RB_MODE_ANY ? 1
                                                         : sizeof(uint32_t);
    l->item_bytes[BATCH_KINDS] = kinds ? 1 : 0;
    l->item_bytes[BATCH_NORMALS] = normals ? 3 * sizeof(float) : 0;
    uint64_t at = l->header_len;
    for (int p = 0; p < BATCH_PARTS; p++) {
        l->part_at[p] = at;
        at += n * l->item_bytes[p];
    }
    l->size = at;
}

uint64_t batch_layout_at(const batch_layout *l, int part, uint64_t i)
{
    return l->part_at[part] + i * l->item_bytes[part];
}

int batch_pwrite_all(int fd, const void *p, size_t n, uint64_t at)
{
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (!w)
                errno = EIO;
            return -1;
        }
        c += w;
        n -= (size_t)w;
        at += (uint64_t)w;
    }
    return 0;
}

int batch_fd_write(void *user, const void *p, size_t n, uint64_t at)
{
    return batch_pwrite_all(*(int *)user, p, n, at);
}

int batch_file_open(const char *path, const batch_layout *l, int *fd)
{
    *fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    /* Every shard sets the same size and header: order does not matter. */
    if (*fd < 0 || ftruncate(*fd, (off_t)l->size) ||
        batch_pwrite_all(*fd, l->header, l->header_len, 0)) {
        fprintf(ERR, "%s: %s: %s\n", batch_prog, path, strerror(errno));
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * The jobs
 */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct progress {
    int on;
    const char *cmd, *items, *unit;
    uint64_t total;
    double t0, last;
} progress;

static void progress_line(progress *p, uint64_t done, uint64_t units,
                          int end)
{
    double now = now_s();
    if (!p->on || (!end && now - p->last < 1))
        return;
    p->last = now;
    double s = now - p->t0;
    double rate = s > 0 ? (double)units / s : 0;
    double eta = done && done < p->total
                     ? s * (double)(p->total - done) / (double)done : 0;
    fprintf(ERR, "%s: %s %llu/%llu %s (%.0f%%), %.2f M %s/s, %s %.*f s\n",
            batch_prog, p->cmd, (unsigned long long)done,
            (unsigned long long)p->total, p->items,
            p->total ? 100.0 * (double)done / (double)p->total : 100.0,
            rate / 1e6, p->unit, end ? "took" : "ETA", end ? 3 : 0,
            end ? s : eta);
}

static int write_failed(const batch_out *out)
{
    fprintf(ERR, "%s: %s: %s\n", batch_prog, out->path, strerror(errno));
    return 1;
}

int batch_vis_run(const batch_opts *o, rb_context *ctx, const rb_scene *scene,
                  const float *obs, const float *tgt, size_t m,
                  const batch_layout *l, uint64_t first, uint64_t end,
                  batch_out *out, int show)
{
    size_t stride = l->item_bytes[BATCH_ANSWERS];
    size_t slice = m ? (size_t)(SLICE_PAIRS / m) : (size_t)(end - first);
    if (slice < 1)
        slice = 1;
    uint8_t *bits = malloc(slice * stride + 1);
    if (!bits) {
        fprintf(ERR, "%s: out of memory\n", batch_prog);
        return 1;
    }
    progress p = {.on = show && !o->quiet, .cmd = "visibility",
                  .items = "observers", .unit = "segments",
                  .total = end - first, .t0 = now_s()};
    p.last = p.t0;
    int rc = 0;
    uint64_t pairs = 0;
    for (uint64_t i = first; i < end && !rc; i += slice) {
        size_t rows = end - i < slice ? (size_t)(end - i) : slice;
        rb_visibility_query q = {.scene = scene, .observers = obs + 3 * i,
                                 .n_observers = rows, .targets = tgt,
                                 .n_targets = m, .tmin = o->tmin,
                                 .tmax = o->tmax};
        int st = rb_visibility(ctx, &q, bits, rows * stride, NULL, NULL);
        if (st) {
            const rb_error *e = rb_context_error(ctx);
            /* the library counts observers from the slice's first */
            unsigned long long oi, tj;
            const char *colon = strchr(e->message, ':');
            if (e->element == RB_ELEMENT_OBSERVER && colon)
                fprintf(ERR, "%s: observer %llu%s\n", batch_prog,
                        (unsigned long long)(i + e->index), colon);
            else if (sscanf(e->message, "observer %llu to target %llu", &oi,
                            &tj) == 2 && colon)
                fprintf(ERR, "%s: observer %llu to target %llu%s\n",
                        batch_prog, (unsigned long long)i + oi, tj, colon);
            else
                fprintf(ERR, "%s: %s\n", batch_prog, e->message);
            rc = st == RB_EINPUT ? 2 : 1;
        } else if (out->write_at(out->user, bits, rows * stride,
                                 batch_layout_at(l, 0, i))) {
            rc = write_failed(out);
        } else {
            pairs += (uint64_t)rows * m;
            if (i + rows < end)
                progress_line(&p, i + rows - first, pairs, 0);
        }
    }
    free(bits);
    if (!rc)
        progress_line(&p, end - first, pairs, 1);
    return rc;
}

int batch_isect_mode(const batch_opts *o, const batch_rays *r,
                     rb_mode *mode, int *normals)
{
    *mode = o->has_mode || !r->has_mode ? o->mode : r->mode;
    *normals = o->normals || r->normals;
    if (*mode != RB_MODE_NEAREST && *mode != RB_MODE_ANY &&
        *mode != RB_MODE_COUNT) {
        fprintf(ERR, "%s: rays '%s': byte 9: mode %s is not one of "
                        "nearest, any or count (give --mode)\n", batch_prog,
                r->path, rb_mode_name(*mode));
        return 2;
    }
    if (*normals && *mode != RB_MODE_NEAREST) {
        fprintf(ERR, "%s: %s: normals are answered in nearest mode only, "
                        "not %s\n", batch_prog,
                o->normals ? "--normals" : r->path, rb_mode_name(*mode));
        return 2;
    }
    return 0;
}

int batch_scene_has_kinds(const rb_scene *scene)
{
    rb_scene_stats s;
    rb_scene_stats_get(scene, &s);
    return s.elements > s.boxes;
}

int batch_isect_run(const batch_opts *o, rb_context *ctx,
                    const rb_scene *scene, batch_rays *r,
                    const batch_layout *l, uint64_t first, uint64_t end,
                    batch_out *out, int show)
{
    rb_mode mode;
    int normals;
    if (batch_isect_mode(o, r, &mode, &normals))
        return 2;
    float tmin = o->has_tmin || !r->has_mode ? o->tmin : r->tmin;
    float tmax = o->has_tmax || !r->has_mode ? o->tmax : r->tmax;
    size_t chunk = o->chunk;
    if (end - first < chunk)
        chunk = (size_t)(end - first) ? (size_t)(end - first) : 1;
    float *raw = r->floats == 6 ? malloc(chunk * 6 * sizeof(float)) : NULL;
    rb_ray *rays = malloc(chunk * sizeof *rays);
    void *res = malloc(chunk * l->item_bytes[BATCH_ANSWERS]);
    /* the parts after the answers, when the layout has them */
    void *extra[BATCH_PARTS] = {res};
    int missing = !res;
    for (int part = BATCH_KINDS; part < BATCH_PARTS; part++)
        if (l->item_bytes[part] &&
            !(extra[part] = malloc(chunk * l->item_bytes[part])))
            missing = 1;
    int rc = 0;
    if ((r->floats == 6 && !raw) || !rays || missing) {
        fprintf(ERR, "%s: out of memory for chunks of %zu rays\n",
                batch_prog, chunk);
        rc = 1;
    }
    progress p = {.on = show && !o->quiet, .cmd = "intersect",
                  .items = "rays", .unit = "rays", .total = end - first,
                  .t0 = now_s()};
    p.last = p.t0;
    for (uint64_t i = first; i < end && !rc; i += chunk) {
        size_t k = end - i < chunk ? (size_t)(end - i) : chunk;
        if ((rc = rays_read(r, i, k, tmin, tmax, raw, rays)))
            break;
        rb_query q = {.mode = mode, .dims = 3, .rays = rays, .n_rays = k,
                      .scene = scene,
                      .outputs = normals ? RB_OUTPUT_NORMAL : 0};
        rb_results out_r = {.capacity = k, .kinds = extra[BATCH_KINDS],
                            .normals = extra[BATCH_NORMALS]};
        if (mode == RB_MODE_NEAREST)
            out_r.hits = res;
        else if (mode == RB_MODE_ANY)
            out_r.any = res;
        else
            out_r.counts = res;
        int st = rb_intersect(ctx, &q, &out_r);
        if (st) {
            const rb_error *e = rb_context_error(ctx);
            const char *colon = strchr(e->message, ':');
            if (st == RB_EINPUT && e->element == RB_ELEMENT_RAY && colon) {
                uint64_t ray = i + e->index;
                fprintf(ERR, "%s: rays '%s': ray %llu (byte %llu)%s\n",
                        batch_prog, r->path, (unsigned long long)ray,
                        (unsigned long long)(r->data_at +
                                             ray * r->floats * 4), colon);
            } else {
                fprintf(ERR, "%s: %s\n", batch_prog, e->message);
            }
            rc = st == RB_EINPUT ? 2 : 1;
        } else {
            for (int part = 0; part < BATCH_PARTS && !rc; part++)
                if (l->item_bytes[part] &&
                    out->write_at(out->user, extra[part],
                                  k * l->item_bytes[part],
                                  batch_layout_at(l, part, i)))
                    rc = write_failed(out);
        }
        if (!rc && i + k < end)
            progress_line(&p, i + k - first, i + k - first, 0);
    }
    free(raw);
    free(rays);
    for (int part = 0; part < BATCH_PARTS; part++)
        free(extra[part]);
    if (!rc)
        progress_line(&p, end - first, end - first, 1);
    return rc;
}
