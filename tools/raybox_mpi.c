/*
 * raybox_mpi.c - raybox-mpi: the batch commands of raybox (visibility and
 * intersect over files) as one MPI job, each rank a shard (SPEC section
 * 10):
 *
 *   mpirun -np N raybox-mpi visibility SCENE OBSERVERS TARGETS -o OUT ...
 *   mpirun -np N raybox-mpi intersect --rays RAYS --scene SCENE -o OUT ...
 *
 * Rank r of N computes shard r/N (batch_slice) and writes its part of OUT
 * with MPI-IO at the offsets raybox would (batch_layout_at), so the file
 * equals raybox's byte for byte. Rank 0 reads the scene (and the
 * observers and targets) and broadcasts the bytes once; every rank builds
 * the scene from them. Each rank reads its own slice of a ray file. With
 * --backend opencl and no --device, the rank's local rank (among the
 * ranks on its node) picks one of the node's OpenCL GPUs.
 *
 * Options, inputs, layout and loops are batch.c's, shared with raybox;
 * --shard is refused (the ranks are the shards). Exit status: the worst
 * of the ranks' (0, 2 bad input, 1 other).
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"

static const char usage_main[] =
    "usage: mpirun [-np N] raybox-mpi <command> [options]\n"
    "\n"
    "commands (the options and the output file of raybox's; each rank\n"
    "computes and writes one shard, rank r of N the slice r/N):\n"
    "  visibility  line of sight, observers x targets, files to a file\n"
    "  intersect   --rays RAYS --scene SCENE: a ray file against a scene\n"
    "\n"
    "  raybox-mpi <command> --help   options of a command\n"
    "  raybox-mpi --version          the version\n"
    "\n"
    "Rank 0 reads the scene and broadcasts it; with --backend opencl and\n"
    "no --device each rank takes the node's GPU of its local rank (modulo\n"
    "their number). Progress lines are rank 0's (its shard); its last line\n"
    "gives the whole job's rate, from all ranks ready to the file closed.\n";

/* Largest piece of one MPI call (counts are int). */
#define MPI_PIECE ((size_t)1 << 30)

static int rank, size;
static FILE *null_file; /* /dev/null on ranks other than 0 */

/* Messages about what every rank sees alike (arguments, inputs) come
 * from rank 0 alone, as "raybox-mpi: ..."; a rank's own (its context, its
 * slice, its writes) from that rank, as "raybox-mpi (rank r of N): ...". */
static void messages(int own)
{
    static char prog[64];
    if (size > 1 && !prog[0])
        snprintf(prog, sizeof prog, "raybox-mpi (rank %d of %d)", rank, size);
    batch_err = own ? NULL : null_file;
    batch_prog = own && size > 1 ? prog : "raybox-mpi";
}
static double t_init; /* MPI_Wtime() after MPI_Init */

/* Rank 0's last line (unless --quiet): the job's items and the time from
 * the moment every rank had its inputs and the output open (t0) to the
 * moment every rank had written and the file was closed, and the whole
 * run's since MPI_Init: what `make bench-mpi` reads. */
static void summary(const batch_opts *o, const char *cmd, uint64_t units,
                    const char *unit, double t0)
{
    double t1 = MPI_Wtime();
    if (rank || o->quiet)
        return;
    fprintf(stderr, "%s: %s: %llu %s by %d rank%s in %.3f s (%.2f M %s/s); "
                    "%.3f s since MPI_Init\n", batch_prog, cmd,
            (unsigned long long)units, unit, size, size == 1 ? "" : "s",
            t1 - t0, t1 > t0 ? (double)units / (t1 - t0) / 1e6 : 0.0, unit,
            t1 - t_init);
}

/* Rank 0 reads path, every rank gets its bytes. 0, or 1 on every rank
 * when rank 0 could not (it said why). */
static int bcast_file(const char *path, const char *what, uint8_t **buf,
                      size_t *len)
{
    uint64_t n = UINT64_MAX;
    *buf = NULL;
    *len = 0;
    if (!rank && !batch_read_file(path, what, buf, len))
        n = *len;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (n == UINT64_MAX)
        return 1;
    if (rank) {
        *len = (size_t)n;
        *buf = malloc(n ? (size_t)n : 1);
    }
    /* a rank that cannot take it still joins every broadcast */
    static uint8_t sink[1 << 16];
    for (size_t at = 0; at < n; at += MPI_PIECE) {
        size_t k = n - at < MPI_PIECE ? (size_t)(n - at) : MPI_PIECE;
        if (*buf) {
            MPI_Bcast(*buf + at, (int)k, MPI_BYTE, 0, MPI_COMM_WORLD);
        } else {
            for (size_t s = 0; s < k; s += sizeof sink)
                MPI_Bcast(sink, (int)(k - s < sizeof sink ? k - s
                                                          : sizeof sink),
                          MPI_BYTE, 0, MPI_COMM_WORLD);
        }
    }
    if (!*buf) {
        fprintf(stderr, "%s: out of memory for %s '%s'\n", batch_prog, what,
                path);
        return 1;
    }
    return 0;
}

/* The worst exit status of all ranks. */
static int worst(int rc)
{
    int all = rc;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

/* --backend opencl without --device: the local rank's GPU. */
static void pick_gpu(rb_context_options *c)
{
    if (c->backend != RB_BACKEND_OPENCL || c->device_index >= 0 ||
        c->device_name)
        return;
    MPI_Comm node;
    int local = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                            MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
    }
    size_t count = 0;
    if (rb_devices_list(NULL, 0, &count, NULL, 0) || !count)
        return;
    rb_device_desc *d = calloc(count, sizeof *d);
    int gpus[64], n = 0;
    if (d && !rb_devices_list(d, count, &count, NULL, 0))
        for (size_t i = 0; i < count && n < 64; i++)
            if (!strcmp(d[i].type, "gpu") || !strcmp(d[i].type, "accelerator"))
                gpus[n++] = d[i].index;
    if (n)
        c->device_index = gpus[local % n];
    free(d);
}

typedef struct mpi_out {
    MPI_File fh;
} mpi_out;

static int mpi_write(void *user, const void *p, size_t n, uint64_t at)
{
    MPI_File fh = ((mpi_out *)user)->fh;
    const char *c = p;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < MPI_PIECE ? n - done : MPI_PIECE;
        MPI_Status st;
        if (MPI_File_write_at(fh, (MPI_Offset)(at + done), c + done, (int)k,
                              MPI_BYTE, &st) != MPI_SUCCESS) {
            errno = EIO;
            return -1;
        }
        done += k;
    }
    return 0;
}

static void mpi_error(const char *path, const char *what, int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, text, &len);
    fprintf(stderr, "%s: %s: %s: %.*s\n", batch_prog, path, what, len, text);
}

/* Opens OUT on every rank, sets its size (collective), rank 0 writes the
 * header. 0 on every rank, or 1 on every rank. */
static int open_out(const char *path, const batch_layout *l, mpi_out *o)
{
    int e = MPI_File_open(MPI_COMM_WORLD, path,
                          MPI_MODE_WRONLY | MPI_MODE_CREATE, MPI_INFO_NULL,
                          &o->fh);
    if (e != MPI_SUCCESS) {
        if (!rank)
            mpi_error(path, "opening it", e);
        return 1;
    }
    e = MPI_File_set_size(o->fh, (MPI_Offset)l->size);
    int rc = e != MPI_SUCCESS;
    if (rc && !rank)
        mpi_error(path, "setting its size", e);
    if (!rc && !rank && mpi_write(o, l->header, l->header_len, 0)) {
        fprintf(stderr, "%s: %s: writing the header failed\n", batch_prog,
                path);
        rc = 1;
    }
    rc = worst(rc);
    if (rc)
        MPI_File_close(&o->fh);
    return rc;
}

/* Syncs and closes OUT (collective), after every rank's rc. */
static int close_out(const char *path, mpi_out *o, int rc)
{
    int e = MPI_File_sync(o->fh);
    if (e != MPI_SUCCESS && !rc) {
        mpi_error(path, "syncing it", e);
        rc = 1;
    }
    e = MPI_File_close(&o->fh);
    if (e != MPI_SUCCESS && !rc) {
        mpi_error(path, "closing it", e);
        rc = 1;
    }
    return worst(rc);
}

static int run_visibility(const batch_opts *o, rb_context *ctx)
{
    const char *paths[3] = {o->observers, o->targets, o->scene};
    static const char *const what[3] = {"observers", "targets", "scene"};
    uint8_t *buf[3] = {NULL, NULL, NULL};
    size_t len[3];
    float *obs = NULL, *tgt = NULL;
    size_t n = 0, m = 0;
    rb_scene *scene = NULL;
    int rc = 0;
    /* every rank joins every broadcast, whatever it found before */
    for (int k = 0; k < 3; k++) {
        int got = bcast_file(paths[k], what[k], &buf[k], &len[k]);
        rc = rc ? rc : got;
    }
    if (!rc)
        rc = batch_points_parse(o->observers, what[0], buf[0], len[0], &obs,
                                &n);
    if (!rc)
        rc = batch_points_parse(o->targets, what[1], buf[1], len[1], &tgt,
                                &m);
    if (!rc)
        rc = batch_scene_parse(ctx, o->scene, buf[2], len[2], &scene);
    for (int k = 0; k < 3; k++)
        free(buf[k]);
    /* the inputs are the same on every rank: their errors too */
    if ((rc = worst(rc)))
        goto done;
    batch_layout l;
    batch_vis_layout(n, m, o->tmin, o->tmax, &l);
    uint64_t first, end;
    batch_slice(l.n, (unsigned)rank, (unsigned)size, &first, &end);
    mpi_out mo;
    if ((rc = open_out(o->output, &l, &mo)))
        goto done;
    batch_out out = {.write_at = mpi_write, .user = &mo, .path = o->output};
    messages(1);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    rc = batch_vis_run(o, ctx, scene, obs, tgt, m, &l, first, end, &out,
                       rank == 0);
    if (!(rc = close_out(o->output, &mo, rc)))
        summary(o, "visibility", (uint64_t)n * m, "segments", t0);
done:
    free(obs);
    free(tgt);
    rb_scene_destroy(scene);
    return rc;
}

static int run_intersect(const batch_opts *o, rb_context *ctx)
{
    uint8_t *buf = NULL;
    size_t len;
    rb_scene *scene = NULL;
    batch_rays rays;
    rb_mode mode = RB_MODE_NEAREST;
    int normals = 0;
    int rc = batch_rays_open(o->rays, &rays);
    if (!rc)
        rc = batch_isect_mode(o, &rays, &mode, &normals);
    /* every rank joins the broadcast, whatever it found */
    int got = bcast_file(o->scene, "scene", &buf, &len);
    if (!rc)
        rc = got;
    if (!rc)
        rc = batch_scene_parse(ctx, o->scene, buf, len, &scene);
    free(buf);
    if ((rc = worst(rc)))
        goto done;
    batch_layout l;
    batch_isect_layout(rays.n, mode, batch_scene_has_kinds(scene), normals,
                       &l);
    uint64_t first, end;
    batch_slice(l.n, (unsigned)rank, (unsigned)size, &first, &end);
    mpi_out mo;
    if ((rc = open_out(o->output, &l, &mo)))
        goto done;
    batch_out out = {.write_at = mpi_write, .user = &mo, .path = o->output};
    messages(1);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    rc = batch_isect_run(o, ctx, scene, &rays, &l, first, end, &out,
                         rank == 0);
    if (!(rc = close_out(o->output, &mo, rc)))
        summary(o, "intersect", rays.n, "rays", t0);
done:
    batch_rays_close(&rays);
    rb_scene_destroy(scene);
    return rc;
}

int main(int argc, char **argv)
{
    batch_prog = "raybox-mpi";
    const char *cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("raybox-mpi %s\n", RB_VERSION_STRING);
        return 0;
    }
    batch_cmd which;
    if (!strcmp(cmd, "visibility")) {
        which = BATCH_VISIBILITY;
    } else if (!strcmp(cmd, "intersect")) {
        which = BATCH_INTERSECT;
    } else {
        fprintf(stderr, "raybox-mpi: %s '%s'\n%s",
                argc > 1 ? "unknown command" : "no command", cmd, usage_main);
        return 1;
    }
    batch_opts o;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return batch_parse(which, argc - 2, argv + 2, 0, &o) < 0 ? 0 : 1;

    MPI_Init(&argc, &argv);
    t_init = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    null_file = rank ? fopen("/dev/null", "w") : NULL;
    messages(0);
    int rc = batch_parse(which, argc - 2, argv + 2, 0, &o);
    if (rc) {
        rc = rc < 0 ? 0 : 1;
        goto done;
    }
    pick_gpu(&o.ctx);
    rb_context *ctx = NULL;
    messages(1);
    rc = batch_context(&o, &ctx);
    messages(0);
    if (!(rc = worst(rc)))
        rc = which == BATCH_VISIBILITY ? run_visibility(&o, ctx)
                                       : run_intersect(&o, ctx);
    rb_context_destroy(ctx);
done:
    messages(1);
    if (null_file)
        fclose(null_file);
    MPI_Finalize();
    return rc;
}
