/*
 * scene_disk.c - see scene_disk.h.
 *
 * Both files are read whole into memory and parsed into an image: the
 * chunks with their element arrays. Restoring hands the image's chunks to
 * the store; merging the log applies each record to the image ("set"
 * overwrites an element in its chunk, an append adds a chunk, or grows
 * the last one when the id order stays the same) and writes the image as
 * the new snapshot.
 */
#define _GNU_SOURCE
#include "scene_disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "sbuf.h"

_Static_assert(sizeof(rb_box) == 6 * sizeof(float), "rb_box floats");
_Static_assert(sizeof(rb_box2) == 4 * sizeof(float), "rb_box2 floats");
_Static_assert(sizeof(rb_obb) == 15 * sizeof(float), "rb_obb floats");
_Static_assert(sizeof(rb_xbox) == 18 * sizeof(float), "rb_xbox floats");
_Static_assert(sizeof(rb_sphere) == 4 * sizeof(float), "rb_sphere floats");
_Static_assert(sizeof(rb_plane) == 4 * sizeof(float), "rb_plane floats");

static const char SNAP_MAGIC[8] = {'R', 'B', 'X', 'S', 'C', 'N', '0', '1'};
#define LOG_MAGIC 0x50584252u /* "RBXP" */

struct scene_disk {
    int dirfd;
    int lockfd;
    uint64_t merge_bytes; /* a log past this and its snapshot is merged */
    char dir[4096];
};

/* ------------------------------------------------------------------------
 * The image
 */
typedef struct img_chunk {
    size_t n[RB_KIND_COUNT];
    float *data[RB_KIND_COUNT];
} img_chunk;

typedef struct image {
    unsigned dims;
    uint64_t version;
    int has_key;
    uint8_t key[RBD_OWNER_KEY_BYTES];
    img_chunk *chunks;
    size_t n_chunks;
} image;

static size_t floats_of(int kind, unsigned dims)
{
    static const size_t shape_floats[RB_KIND_COUNT] = {0, 15, 18, 4, 4};
    return kind == RB_KIND_BOX ? 2u * dims : shape_floats[kind];
}

static void image_free(image *im)
{
    for (size_t c = 0; c < im->n_chunks; c++)
        for (int k = 0; k < RB_KIND_COUNT; k++)
            free(im->chunks[c].data[k]);
    free(im->chunks);
    memset(im, 0, sizeof *im);
}

static const void *chunk_array(const disk_chunk *c, int kind, size_t *n)
{
    switch (kind) {
    case RB_KIND_BOX:
        *n = c->n_boxes;
        return c->boxes;
    case RB_KIND_OBB:
        *n = c->shapes.n_obbs;
        return c->shapes.obbs;
    case RB_KIND_XBOX:
        *n = c->shapes.n_xboxes;
        return c->shapes.xboxes;
    case RB_KIND_SPHERE:
        *n = c->shapes.n_spheres;
        return c->shapes.spheres;
    default:
        *n = c->shapes.n_planes;
        return c->shapes.planes;
    }
}

static disk_chunk chunk_view(const img_chunk *ic)
{
    disk_chunk c = {.boxes = ic->data[RB_KIND_BOX],
                    .n_boxes = ic->n[RB_KIND_BOX]};
    c.shapes.obbs = (const rb_obb *)ic->data[RB_KIND_OBB];
    c.shapes.n_obbs = ic->n[RB_KIND_OBB];
    c.shapes.xboxes = (const rb_xbox *)ic->data[RB_KIND_XBOX];
    c.shapes.n_xboxes = ic->n[RB_KIND_XBOX];
    c.shapes.spheres = (const rb_sphere *)ic->data[RB_KIND_SPHERE];
    c.shapes.n_spheres = ic->n[RB_KIND_SPHERE];
    c.shapes.planes = (const rb_plane *)ic->data[RB_KIND_PLANE];
    c.shapes.n_planes = ic->n[RB_KIND_PLANE];
    return c;
}

static int first_kind(const size_t *n)
{
    for (int k = 0; k < RB_KIND_COUNT; k++)
        if (n[k])
            return k;
    return RB_KIND_COUNT;
}

static int last_kind(const size_t *n)
{
    for (int k = RB_KIND_COUNT - 1; k >= 0; k--)
        if (n[k])
            return k;
    return -1;
}

/* Adds n[k] elements of each kind from src[k] as a chunk: appended to the
 * last chunk when that keeps every id where it is (its kinds all come at
 * or before the new ones' first kind), else as a new chunk. -1 out of
 * memory. */
static int image_append(image *im, const size_t *n, const float *const *src)
{
    int first = first_kind(n);
    if (first == RB_KIND_COUNT)
        return 0;
    img_chunk *last = im->n_chunks ? &im->chunks[im->n_chunks - 1] : NULL;
    if (!last || last_kind(last->n) > first) {
        img_chunk *grown = realloc(im->chunks,
                                   (im->n_chunks + 1) * sizeof *grown);
        if (!grown)
            return -1;
        im->chunks = grown;
        last = &grown[im->n_chunks++];
        memset(last, 0, sizeof *last);
    }
    for (int k = 0; k < RB_KIND_COUNT; k++) {
        if (!n[k])
            continue;
        size_t f = floats_of(k, im->dims);
        float *d = realloc(last->data[k], (last->n[k] + n[k]) * f *
                                              sizeof(float));
        if (!d)
            return -1;
        memcpy(d + last->n[k] * f, src[k], n[k] * f * sizeof(float));
        last->data[k] = d;
        last->n[k] += n[k];
    }
    return 0;
}

/* Where id's element is in the image, and its kind; NULL past the end. */
static float *image_element(image *im, uint64_t id, int *kind)
{
    for (size_t c = 0; c < im->n_chunks; c++) {
        img_chunk *ic = &im->chunks[c];
        for (int k = 0; k < RB_KIND_COUNT; k++) {
            if (id < ic->n[k]) {
                *kind = k;
                return ic->data[k] + id * floats_of(k, im->dims);
            }
            id -= ic->n[k];
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Encoding: u64 counts and float arrays, as the machine holds them.
 */
static void put_u32(sbuf *b, uint32_t v) { sbuf_addn(b, (char *)&v, 4); }
static void put_u64(sbuf *b, uint64_t v) { sbuf_addn(b, (char *)&v, 8); }

static void put_chunk(sbuf *b, const disk_chunk *c, unsigned dims)
{
    size_t n[RB_KIND_COUNT];
    const void *a[RB_KIND_COUNT];
    for (int k = 0; k < RB_KIND_COUNT; k++)
        a[k] = chunk_array(c, k, &n[k]);
    for (int k = 0; k < RB_KIND_COUNT; k++)
        put_u64(b, n[k]);
    for (int k = 0; k < RB_KIND_COUNT; k++)
        if (n[k])
            sbuf_addn(b, a[k], n[k] * floats_of(k, dims) * sizeof(float));
}

static void put_crc(sbuf *b, size_t from)
{
    if (sbuf_failed(b))
        return;
    put_u32(b, (uint32_t)crc32(0L, (const Bytef *)b->data + from,
                               (uInt)(b->len - from)));
}

typedef struct reader {
    const uint8_t *p;
    size_t left;
    int bad;
} reader;

static const void *take(reader *r, size_t n)
{
    if (r->bad || n > r->left) {
        r->bad = 1;
        return NULL;
    }
    const void *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static uint64_t get_u64(reader *r)
{
    const void *p = take(r, 8);
    uint64_t v = 0;
    if (p)
        memcpy(&v, p, 8);
    return v;
}

static uint32_t get_u32(reader *r)
{
    const void *p = take(r, 4);
    uint32_t v = 0;
    if (p)
        memcpy(&v, p, 4);
    return v;
}

/* One chunk's counts and arrays (pointers into the reader's bytes, which
 * may be unaligned for floats: image_append copies them). */
static int get_chunk(reader *r, unsigned dims, size_t *n, const float **a)
{
    for (int k = 0; k < RB_KIND_COUNT; k++) {
        uint64_t v = get_u64(r);
        if (v > r->left) /* also stops the product below from wrapping */
            r->bad = 1;
        n[k] = (size_t)v;
    }
    for (int k = 0; k < RB_KIND_COUNT && !r->bad; k++)
        a[k] = take(r, n[k] * floats_of(k, dims) * sizeof(float));
    return r->bad ? -1 : 0;
}

/* ------------------------------------------------------------------------
 * Files
 */
static int fail(char *why, size_t why_len, const char *what,
                const char *name)
{
    snprintf(why, why_len, "%s %s: %s", what, name, strerror(errno));
    return -1;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads name (in the data dir) whole; *buf NULL and 0 when it is empty.
 * -1 with errno. */
static int read_whole(scene_disk *d, const char *name, uint8_t **buf,
                      size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = openat(d->dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st)) {
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, got = 0;
    uint8_t *b = size ? malloc(size) : NULL;
    if (size && !b) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    while (got < size) {
        ssize_t n = read(fd, b + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    *buf = b;
    *len = got;
    return 0;
}

/* Writes bytes to name.tmp, fsyncs, renames it over name and fsyncs the
 * directory. */
static int replace_file(scene_disk *d, const char *name, const sbuf *b,
                        char *why, size_t why_len)
{
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int fd = openat(d->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0600);
    if (fd < 0)
        return fail(why, why_len, "cannot create", tmp);
    if (write_all(fd, b->data, b->len) || fsync(fd)) {
        fail(why, why_len, "cannot write", tmp);
        close(fd);
        unlinkat(d->dirfd, tmp, 0);
        return -1;
    }
    close(fd);
    if (renameat(d->dirfd, tmp, d->dirfd, name)) {
        fail(why, why_len, "cannot rename", tmp);
        unlinkat(d->dirfd, tmp, 0);
        return -1;
    }
    if (fsync(d->dirfd))
        return fail(why, why_len, "cannot fsync", d->dir);
    return 0;
}

static void name_of(char *out, size_t len, const char *id, const char *ext)
{
    snprintf(out, len, "%s.%s", id, ext);
}

int disk_open(const char *dir, uint64_t merge_bytes, scene_disk **out,
              char *why, size_t why_len)
{
    *out = NULL;
    if (mkdir(dir, 0700) && errno != EEXIST)
        return fail(why, why_len, "cannot create --data-dir", dir);
    scene_disk *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    d->merge_bytes = merge_bytes;
    d->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dirfd < 0) {
        fail(why, why_len, "cannot open --data-dir", dir);
        free(d);
        return -1;
    }
    d->lockfd = openat(d->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (d->lockfd < 0 || flock(d->lockfd, LOCK_EX | LOCK_NB)) {
        if (errno == EWOULDBLOCK)
            snprintf(why, why_len, "--data-dir %s is in use by another "
                     "rayboxd (its LOCK file is held)", dir);
        else
            fail(why, why_len, "cannot lock --data-dir", dir);
        if (d->lockfd >= 0)
            close(d->lockfd);
        close(d->dirfd);
        free(d);
        return -1;
    }
    *out = d;
    return 0;
}

void disk_close(scene_disk *d)
{
    if (!d)
        return;
    close(d->lockfd); /* releases the flock */
    close(d->dirfd);
    free(d);
}

/* ------------------------------------------------------------------------
 * Snapshots and log records
 */

/* magic, u32 dims, u32 has_key, u64 version, key, u64 n_chunks, chunks,
 * u32 crc of all before it. */
static void put_snapshot(sbuf *b, const image *im)
{
    sbuf_addn(b, SNAP_MAGIC, sizeof SNAP_MAGIC);
    put_u32(b, im->dims);
    put_u32(b, (uint32_t)im->has_key);
    put_u64(b, im->version);
    sbuf_addn(b, (const char *)im->key, RBD_OWNER_KEY_BYTES);
    put_u64(b, im->n_chunks);
    for (size_t c = 0; c < im->n_chunks; c++) {
        disk_chunk v = chunk_view(&im->chunks[c]);
        put_chunk(b, &v, im->dims);
    }
    put_crc(b, 0);
}

static int crc_ok(const uint8_t *p, size_t len)
{
    if (len < 4)
        return 0;
    uint32_t want;
    memcpy(&want, p + len - 4, 4);
    return (uint32_t)crc32(0L, p, (uInt)(len - 4)) == want;
}

/* Parses a snapshot into im. -1 when it is not a whole, valid one. */
static int parse_snapshot(const uint8_t *p, size_t len, image *im)
{
    memset(im, 0, sizeof *im);
    if (len < sizeof SNAP_MAGIC + 4 ||
        memcmp(p, SNAP_MAGIC, sizeof SNAP_MAGIC) || !crc_ok(p, len))
        return -1;
    reader r = {p + sizeof SNAP_MAGIC, len - sizeof SNAP_MAGIC - 4, 0};
    im->dims = get_u32(&r);
    im->has_key = get_u32(&r) != 0;
    im->version = get_u64(&r);
    const void *key = take(&r, RBD_OWNER_KEY_BYTES);
    if (key)
        memcpy(im->key, key, RBD_OWNER_KEY_BYTES);
    uint64_t n_chunks = get_u64(&r);
    if (r.bad || (im->dims != 2 && im->dims != 3) || im->version < 1)
        return -1;
    for (uint64_t c = 0; c < n_chunks; c++) {
        size_t n[RB_KIND_COUNT];
        const float *a[RB_KIND_COUNT];
        if (get_chunk(&r, im->dims, n, a) ||
            (im->dims == 2 && first_kind(n) < RB_KIND_COUNT &&
             last_kind(n) > RB_KIND_BOX) ||
            image_append(im, n, a)) {
            image_free(im);
            return -1;
        }
    }
    if (r.left) {
        image_free(im);
        return -1;
    }
    return 0;
}

/* u32 magic, u32 payload bytes, u64 version, payload, u32 crc of all
 * before it. The payload: u64 n_set, n_set x (u32 id, u32 kind, the
 * kind's floats), then the appended chunk. */
static void put_change(sbuf *b, unsigned dims, uint64_t version,
                       const disk_patch *ch)
{
    size_t from = b->len;
    put_u32(b, LOG_MAGIC);
    size_t len_at = b->len;
    put_u32(b, 0);
    put_u64(b, version);
    size_t payload = b->len;
    put_u64(b, ch->n_set);
    for (size_t k = 0; k < ch->n_set; k++) {
        put_u32(b, ch->set_ids[k]);
        put_u32(b, (uint32_t)ch->set[k].kind);
        sbuf_addn(b, (const char *)&ch->set[k].as,
                  floats_of(ch->set[k].kind, dims) * sizeof(float));
    }
    put_chunk(b, &ch->append, dims);
    if (sbuf_failed(b))
        return;
    uint32_t n = (uint32_t)(b->len - payload);
    memcpy(b->data + len_at, &n, 4);
    put_crc(b, from);
}

/* Applies the log's records in order to im. *valid: the bytes of whole,
 * valid records; *stale: whether any was at or below the snapshot's
 * version. A record that fails its CRC (or is cut short) ends the log:
 * records are appended one at a time and made durable before the next,
 * so only the last can be torn. -1 when a valid record does not apply
 * (a gap in the versions, an id past the end or of another kind) or when
 * out of memory. */
static int apply_log(image *im, const uint8_t *p, size_t len, size_t *valid,
                     int *stale)
{
    size_t at = 0;
    *stale = 0;
    while (len - at >= 20) {
        uint32_t magic, n;
        memcpy(&magic, p + at, 4);
        memcpy(&n, p + at + 4, 4);
        if (magic != LOG_MAGIC || n > len - at - 20 ||
            !crc_ok(p + at, 20 + (size_t)n))
            break;
        reader r = {p + at + 8, 8 + (size_t)n, 0};
        uint64_t version = get_u64(&r);
        at += 20 + (size_t)n;
        if (version <= im->version) {
            *stale = 1;
            continue;
        }
        if (version != im->version + 1)
            return -1;
        uint64_t n_set = get_u64(&r);
        for (uint64_t k = 0; k < n_set && !r.bad; k++) {
            uint32_t id = get_u32(&r), kind = get_u32(&r);
            int have = -1;
            float *dst = kind < RB_KIND_COUNT ? image_element(im, id, &have)
                                              : NULL;
            size_t f = dst ? floats_of((int)kind, im->dims) : 0;
            const void *src = dst && have == (int)kind
                                  ? take(&r, f * sizeof(float))
                                  : NULL;
            if (!src)
                return -1;
            memcpy(dst, src, f * sizeof(float));
        }
        size_t cn[RB_KIND_COUNT];
        const float *ca[RB_KIND_COUNT];
        if (get_chunk(&r, im->dims, cn, ca) || r.left ||
            image_append(im, cn, ca))
            return -1;
        im->version = version;
    }
    *valid = at;
    return 0;
}

/* Reads id's snapshot and log into im (the log's valid length in
 * *log_valid, its whole length in *log_len, staleness in *stale). */
static int load_image(scene_disk *d, const char *id, image *im,
                      size_t *log_valid, size_t *log_len, int *stale,
                      char *why, size_t why_len)
{
    char snap[128], logn[128];
    name_of(snap, sizeof snap, id, "scene");
    name_of(logn, sizeof logn, id, "log");
    uint8_t *b;
    size_t len;
    if (read_whole(d, snap, &b, &len))
        return fail(why, why_len, "cannot read", snap);
    int bad = parse_snapshot(b, len, im);
    free(b);
    if (bad) {
        snprintf(why, why_len, "%s/%s is not a valid scene snapshot "
                 "(wrong magic, size or CRC)", d->dir, snap);
        return -1;
    }
    if (read_whole(d, logn, &b, &len)) {
        if (errno != ENOENT) {
            image_free(im);
            return fail(why, why_len, "cannot read", logn);
        }
        b = NULL;
        len = 0;
    }
    bad = apply_log(im, b, len, log_valid, stale);
    free(b);
    *log_len = len;
    if (bad) {
        snprintf(why, why_len, "%s/%s has a record that does not follow "
                 "version %llu of its snapshot and log", d->dir, logn,
                 (unsigned long long)im->version);
        image_free(im);
        return -1;
    }
    return 0;
}

/* Writes im as id's snapshot, then empties the log. */
static int write_image(scene_disk *d, const char *id, const image *im,
                       char *why, size_t why_len)
{
    char snap[128], logn[128];
    name_of(snap, sizeof snap, id, "scene");
    name_of(logn, sizeof logn, id, "log");
    sbuf b;
    sbuf_init(&b);
    put_snapshot(&b, im);
    if (sbuf_failed(&b)) {
        snprintf(why, why_len, "out of memory for the snapshot of %s", id);
        return -1;
    }
    int rc = replace_file(d, snap, &b, why, why_len);
    sbuf_free(&b);
    if (rc)
        return -1;
    /* The snapshot now holds every record: emptying the log is tidying
     * (records at or below its version are skipped anyway). */
    int fd = openat(d->dirfd, logn, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0600);
    if (fd < 0 || fsync(fd)) {
        if (fd >= 0)
            close(fd);
        return fail(why, why_len, "cannot empty", logn);
    }
    close(fd);
    return 0;
}

/* ------------------------------------------------------------------------
 * The calls
 */
int disk_create(scene_disk *d, const char *id, const uint8_t *key,
                unsigned dims, const disk_chunk *c, char *why,
                size_t why_len)
{
    char logn[128];
    name_of(logn, sizeof logn, id, "log");
    /* The log first: a snapshot whose log is missing would be fine, but
     * this way the directory fsync of the snapshot covers both. */
    int fd = openat(d->dirfd, logn, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0600);
    if (fd < 0 || fsync(fd)) {
        if (fd >= 0)
            close(fd);
        return fail(why, why_len, "cannot create", logn);
    }
    close(fd);
    image im = {.dims = dims, .version = 1, .has_key = key != NULL};
    if (key)
        memcpy(im.key, key, RBD_OWNER_KEY_BYTES);
    /* One chunk, written straight from the caller's arrays. */
    sbuf b;
    sbuf_init(&b);
    sbuf_addn(&b, SNAP_MAGIC, sizeof SNAP_MAGIC);
    put_u32(&b, im.dims);
    put_u32(&b, (uint32_t)im.has_key);
    put_u64(&b, im.version);
    sbuf_addn(&b, (const char *)im.key, RBD_OWNER_KEY_BYTES);
    put_u64(&b, 1);
    put_chunk(&b, c, dims);
    put_crc(&b, 0);
    char snap[128];
    name_of(snap, sizeof snap, id, "scene");
    int rc = sbuf_failed(&b) ? -1 : replace_file(d, snap, &b, why, why_len);
    if (sbuf_failed(&b))
        snprintf(why, why_len, "out of memory for the snapshot of %s", id);
    sbuf_free(&b);
    if (rc)
        unlinkat(d->dirfd, logn, 0);
    return rc;
}

int disk_change(scene_disk *d, const char *id, unsigned dims,
                uint64_t version, const disk_patch *ch, off_t *undo,
                char *why, size_t why_len)
{
    char snap[128], logn[128];
    name_of(snap, sizeof snap, id, "scene");
    name_of(logn, sizeof logn, id, "log");
    struct stat ss, ls;
    if (fstatat(d->dirfd, snap, &ss, 0))
        return fail(why, why_len, "cannot stat", snap);
    if (fstatat(d->dirfd, logn, &ls, 0))
        return fail(why, why_len, "cannot stat", logn);
    if (ls.st_size > ss.st_size && (uint64_t)ls.st_size > d->merge_bytes) {
        image im;
        size_t valid, len;
        int stale;
        if (load_image(d, id, &im, &valid, &len, &stale, why, why_len))
            return -1;
        int rc = write_image(d, id, &im, why, why_len);
        image_free(&im);
        if (rc)
            return -1;
    }
    sbuf b;
    sbuf_init(&b);
    put_change(&b, dims, version, ch);
    if (sbuf_failed(&b)) {
        sbuf_free(&b);
        snprintf(why, why_len, "out of memory for the log record of %s", id);
        return -1;
    }
    int fd = openat(d->dirfd, logn, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
        sbuf_free(&b);
        return fail(why, why_len, "cannot open", logn);
    }
    off_t end = lseek(fd, 0, SEEK_END);
    int rc = 0;
    if (end < 0 || write_all(fd, b.data, b.len) || fdatasync(fd)) {
        rc = fail(why, why_len, "cannot write", logn);
        /* Nothing of it may stay: a later record would follow a torn
         * one. */
        if (end >= 0 && (ftruncate(fd, end) || fdatasync(fd)))
            snprintf(why, why_len, "cannot write or cut back %s: %s", logn,
                     strerror(errno));
    }
    close(fd);
    sbuf_free(&b);
    *undo = end;
    return rc;
}

int disk_undo(scene_disk *d, const char *id, off_t undo, char *why,
              size_t why_len)
{
    char logn[128];
    name_of(logn, sizeof logn, id, "log");
    int fd = openat(d->dirfd, logn, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : fail(why, why_len, "cannot open", logn);
    int rc = ftruncate(fd, undo) || fdatasync(fd)
                 ? fail(why, why_len, "cannot cut back", logn)
                 : 0;
    close(fd);
    return rc;
}

int disk_remove(scene_disk *d, const char *id, char *why, size_t why_len)
{
    char snap[128], logn[128];
    name_of(snap, sizeof snap, id, "scene");
    name_of(logn, sizeof logn, id, "log");
    if (unlinkat(d->dirfd, snap, 0) && errno != ENOENT)
        return fail(why, why_len, "cannot remove", snap);
    if (unlinkat(d->dirfd, logn, 0) && errno != ENOENT)
        return fail(why, why_len, "cannot remove", logn);
    if (fsync(d->dirfd))
        return fail(why, why_len, "cannot fsync", d->dir);
    return 0;
}

/* A scene id as the store makes them: 32 lowercase hex digits. */
static int is_id(const char *s, size_t len)
{
    if (len != 32)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static int ends_with(const char *s, const char *tail, size_t *stem)
{
    size_t n = strlen(s), t = strlen(tail);
    if (n < t || strcmp(s + n - t, tail))
        return 0;
    *stem = n - t;
    return 1;
}

/* Restores one scene: its image, the callback, then a tidy-up of its log
 * (a torn tail cut, stale records merged away). */
static int restore_one(scene_disk *d, const char *id, disk_restore_fn fn,
                       void *arg, char *why, size_t why_len)
{
    image im;
    size_t valid, len;
    int stale;
    if (load_image(d, id, &im, &valid, &len, &stale, why, why_len))
        return -1;
    disk_chunk *chunks = calloc(im.n_chunks ? im.n_chunks : 1,
                                sizeof *chunks);
    if (!chunks) {
        image_free(&im);
        snprintf(why, why_len, "out of memory restoring %s", id);
        return -1;
    }
    for (size_t c = 0; c < im.n_chunks; c++)
        chunks[c] = chunk_view(&im.chunks[c]);
    disk_scene sc = {.id = id,
                     .key = im.has_key ? im.key : NULL,
                     .dims = im.dims,
                     .version = im.version,
                     .chunks = chunks,
                     .n_chunks = im.n_chunks};
    int rc = fn(arg, &sc, why, why_len);
    free(chunks);
    if (!rc && (stale || valid != len))
        rc = write_image(d, id, &im, why, why_len);
    image_free(&im);
    return rc ? -1 : 0;
}

long disk_restore(scene_disk *d, disk_restore_fn fn, void *arg, char *why,
                  size_t why_len)
{
    int fd = dup(d->dirfd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return fail(why, why_len, "cannot list", d->dir);
    }
    rewinddir(dir);
    /* The ids first: restoring may write new snapshots, which a listing
     * in progress could return again. */
    char (*ids)[33] = NULL;
    size_t n_ids = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(dir))) {
        const char *name = e->d_name;
        size_t stem;
        if (ends_with(name, ".tmp", &stem)) {
            /* an interrupted snapshot: the old one (or none) stands */
            unlinkat(d->dirfd, name, 0);
        } else if (ends_with(name, ".log", &stem) && is_id(name, stem)) {
            /* a log without its snapshot is what a removal leaves when
             * interrupted after the snapshot went */
            char snap[64];
            snprintf(snap, sizeof snap, "%.*s.scene", (int)stem, name);
            if (faccessat(d->dirfd, snap, F_OK, 0) && errno == ENOENT)
                unlinkat(d->dirfd, name, 0);
        } else if (ends_with(name, ".scene", &stem) && is_id(name, stem)) {
            if (n_ids == cap) {
                cap = cap ? 2 * cap : 64;
                char(*grown)[33] = realloc(ids, cap * sizeof *ids);
                if (!grown) {
                    snprintf(why, why_len, "out of memory listing %s",
                             d->dir);
                    rc = -1;
                    break;
                }
                ids = grown;
            }
            snprintf(ids[n_ids++], sizeof *ids, "%.*s", (int)stem, name);
        }
    }
    closedir(dir);
    for (size_t i = 0; !rc && i < n_ids; i++)
        rc = restore_one(d, ids[i], fn, arg, why, why_len);
    free(ids);
    if (!rc && fsync(d->dirfd))
        rc = fail(why, why_len, "cannot fsync", d->dir);
    return rc ? -1 : (long)n_ids;
}
