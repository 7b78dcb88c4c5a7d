/*
 * batch.h - the batch jobs over files (SPEC section 10), shared by the
 * `raybox visibility` and `raybox intersect --rays` commands and by
 * raybox-mpi: their options, the inputs, the answer file's layout and a
 * shard's slice of it, and the loops that compute a slice and write it.
 *
 * A job's answer file is a fixed layout known before anything is
 * computed (batch_layout): a header, then one or two arrays with a fixed
 * number of bytes per item (observer or ray). Shard I of N computes items
 * [n * I / N, n * (I + 1) / N) (batch_slice) and writes their bytes at
 * their offsets (batch_layout_at) through a batch_out, which is a file
 * descriptor in raybox and an MPI file in raybox-mpi. Nothing written
 * depends on the run, so every way of splitting a job writes the same
 * bytes.
 *
 * Messages go to stderr, one line each, prefixed with batch_prog.
 * Functions returning an exit status give 0 done, 2 bad input (printed,
 * naming the file and the element or byte), 1 anything else (printed).
 * Single-threaded: one job a process.
 */
#ifndef RB_BATCH_H
#define RB_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "binary_codec.h"
#include "raybox.h"

/* "raybox" or "raybox-mpi" (set by the program before anything else). */
extern const char *batch_prog;
/* Where messages go: stderr when NULL (the default). raybox-mpi points it
 * at /dev/null on every rank but 0 while all ranks read the same inputs,
 * so that a bad input is reported once. */
extern FILE *batch_err;

typedef enum batch_cmd { BATCH_VISIBILITY, BATCH_INTERSECT } batch_cmd;

typedef struct batch_opts {
    batch_cmd cmd;
    rb_context_options ctx;
    const char *scene, *observers, *targets; /* visibility */
    const char *rays;                        /* intersect */
    const char *output;
    float tmin, tmax;
    int has_tmin, has_tmax;
    rb_mode mode; /* intersect: nearest, any or count */
    int has_mode;
    int normals;  /* intersect: --normals (nearest answers carry them) */
    unsigned shard, shards;
    int has_shard;
    size_t chunk; /* intersect: rays read and answered at once */
    int quiet;
} batch_opts;

/* Parses a command's arguments (those after its name). allow_shard is 0
 * in raybox-mpi, whose ranks are the shards. 0 ok, 1 usage error
 * (printed), -1 --help printed. */
int batch_parse(batch_cmd cmd, int argc, char **argv, int allow_shard,
                batch_opts *o);

/* Items [*first, *end) of shard `shard` of `shards` over n items: the
 * only place a slice is computed. */
void batch_slice(uint64_t n, unsigned shard, unsigned shards,
                 uint64_t *first, uint64_t *end);

/* ------------------------------------------------------------------------
 * Inputs.
 */

/* The whole file into *buf (malloc'ed; free it), for the scene and the
 * points, which raybox-mpi's rank 0 reads and broadcasts. */
int batch_read_file(const char *path, const char *what, uint8_t **buf,
                    size_t *len);

/* A scene from a file's bytes: a .npy float32 (N, 6) of boxes, the binary
 * scene body ("RBOX", kind 2) or a JSON scene body; 3D only. */
int batch_scene_parse(rb_context *ctx, const char *path, const uint8_t *buf,
                      size_t len, rb_scene **out);

/* Points (x y z) from a file's bytes: a .npy float32 (N, 3) or raw
 * float32 triplets. *pts is malloc'ed. */
int batch_points_parse(const char *path, const char *what, const uint8_t *buf,
                       size_t len, float **pts, size_t *n);

/* A ray file, read a slice at a time: a .npy float32 (N, 6) (origin,
 * direction: the range is --tmin/--tmax) or (N, 8) (with tmin, tmax), or a
 * binary intersect request (kind 1, 3D, rays only: its header gives the
 * mode and the range of rays without their own, the options win). */
typedef struct batch_rays {
    const char *path;
    int fd;
    uint64_t n;       /* rays in the file */
    uint64_t data_at; /* byte of the first record */
    unsigned floats;  /* 6 or 8 per record */
    int has_mode;     /* a binary request: its mode, tmin, tmax */
    rb_mode mode;
    float tmin, tmax;
    int normals;      /* a binary request with the NORMALS flag */
} batch_rays;

/* Opens and checks the file's header and size. */
int batch_rays_open(const char *path, batch_rays *r);
void batch_rays_close(batch_rays *r);

/* ------------------------------------------------------------------------
 * The answer file.
 */
enum { BATCH_ANSWERS, BATCH_KINDS, BATCH_NORMALS, BATCH_PARTS };

typedef struct batch_layout {
    uint8_t header[RBB_HEADER_MAX];
    size_t header_len;
    uint64_t n;          /* items: observers or rays */
    /* Arrays after the header: BATCH_ANSWERS, then in a version 2 nearest
     * answer BATCH_KINDS and BATCH_NORMALS when present (item_bytes 0:
     * absent). */
    uint64_t part_at[BATCH_PARTS]; /* byte where each starts */
    size_t item_bytes[BATCH_PARTS];
    uint64_t size;       /* the whole file */
} batch_layout;

/* Visibility: kind 130, n observers rows of ceil(m / 8) bytes. */
void batch_vis_layout(uint64_t n, uint64_t m, float tmin, float tmax,
                      batch_layout *l);
/* Intersect: kind 129 with the mode's records (nearest: 16-byte rb_hit,
 * then, in a version 2 answer, with kinds a u8 kind per ray and with
 * normals 3 f32 per ray; any: u8; count: u32). */
void batch_isect_layout(uint64_t n, rb_mode mode, int kinds, int normals,
                        batch_layout *l);
/* Byte of item i's record in part p. */
uint64_t batch_layout_at(const batch_layout *l, int part, uint64_t i);

/* Where a job writes: write_at writes n bytes at byte `at` of the answer,
 * 0 or -1 with errno set. */
typedef struct batch_out {
    int (*write_at)(void *user, const void *p, size_t n, uint64_t at);
    void *user;
    const char *path;
} batch_out;

/* pwrite(2) until done; 0 or -1 with errno. */
int batch_pwrite_all(int fd, const void *p, size_t n, uint64_t at);

/* raybox's output: opens (creating, never truncating) path, sets its
 * size and writes the header; *fd is then a batch_out's user (through
 * batch_fd_write). */
int batch_file_open(const char *path, const batch_layout *l, int *fd);
int batch_fd_write(void *user, const void *p, size_t n, uint64_t at);

/* ------------------------------------------------------------------------
 * The jobs: items [first, end) computed and written. progress: print the
 * progress line (once a second, and at the end) unless o->quiet.
 */
int batch_vis_run(const batch_opts *o, rb_context *ctx, const rb_scene *scene,
                  const float *obs, const float *tgt, size_t m,
                  const batch_layout *l, uint64_t first, uint64_t end,
                  batch_out *out, int progress);
int batch_isect_run(const batch_opts *o, rb_context *ctx,
                    const rb_scene *scene, batch_rays *rays,
                    const batch_layout *l, uint64_t first, uint64_t end,
                    batch_out *out, int progress);

/* The mode of an intersect job: the option's, else the binary request's,
 * else nearest; 2 (printed) when it is not nearest, any or count. Normals
 * (--normals or the request's NORMALS flag): *normals 1, and 2 (printed)
 * unless the mode is nearest. */
int batch_isect_mode(const batch_opts *o, const batch_rays *r,
                     rb_mode *mode, int *normals);
/* Whether a scene has elements beyond boxes (nearest answers then carry
 * kinds). */
int batch_scene_has_kinds(const rb_scene *scene);

/* The context of the options, or 1 after saying why not. */
int batch_context(const batch_opts *o, rb_context **ctx);

#endif
