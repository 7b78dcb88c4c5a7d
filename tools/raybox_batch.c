/*
 * raybox_batch.c - the batch commands of raybox (SPEC sections 9 and 10):
 * `raybox visibility SCENE OBSERVERS TARGETS -o OUT` and `raybox intersect
 * --rays RAYS --scene SCENE -o OUT`, from files to a file, in slices so
 * that neither the answer nor the rays have to fit in memory, and in
 * shards (--shard I/N) so that a job spreads over machines. The options,
 * the inputs, the answer's layout and the loops are batch.c's, shared with
 * raybox-mpi; this file runs one shard in one process, writing with
 * pwrite(2).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "raybox_cli.h"

/* Opens the output, runs the job's shard and syncs the file. */
static int open_shard(const batch_opts *o, const batch_layout *l,
                     uint64_t *first, uint64_t *end, int *fd)
{
    batch_slice(l->n, o->shard, o->shards, first, end);
    return batch_file_open(o->output, l, fd);
}

static int sync_close(const char *path, int fd, int rc)
{
    if (!rc && fsync(fd)) {
        fprintf(stderr, "%s: %s: %s\n", batch_prog, path, strerror(errno));
        rc = 1;
    }
    if (close(fd) && !rc) {
        fprintf(stderr, "%s: %s: %s\n", batch_prog, path, strerror(errno));
        rc = 1;
    }
    return rc;
}

/* A file's bytes, read and parsed whole (raybox-mpi reads on rank 0 and
 * parses on every rank instead). */
static int load_points(const char *path, const char *what, float **out,
                       size_t *n)
{
    uint8_t *buf = NULL;
    size_t len;
    int rc = batch_read_file(path, what, &buf, &len);
    if (!rc)
        rc = batch_points_parse(path, what, buf, len, out, n);
    free(buf);
    return rc;
}

static int load_scene(rb_context *ctx, const char *path, rb_scene **out)
{
    uint8_t *buf = NULL;
    size_t len;
    int rc = batch_read_file(path, "scene", &buf, &len);
    if (!rc)
        rc = batch_scene_parse(ctx, path, buf, len, out);
    free(buf);
    return rc;
}

int cmd_visibility(int argc, char **argv)
{
    batch_opts o;
    int rc = batch_parse(BATCH_VISIBILITY, argc, argv, 1, &o);
    if (rc)
        return rc < 0 ? 0 : 1;
    float *obs = NULL, *tgt = NULL;
    size_t n = 0, m = 0;
    rb_context *ctx = NULL;
    rb_scene *scene = NULL;
    if ((rc = load_points(o.observers, "observers", &obs, &n)) ||
        (rc = load_points(o.targets, "targets", &tgt, &m)) ||
        (rc = batch_context(&o, &ctx)) ||
        (rc = load_scene(ctx, o.scene, &scene)))
        goto done;
    batch_layout l;
    batch_vis_layout(n, m, o.tmin, o.tmax, &l);
    uint64_t first, end;
    int fd;
    if ((rc = open_shard(&o, &l, &first, &end, &fd)))
        goto done;
    batch_out out = {.write_at = batch_fd_write, .user = &fd,
                     .path = o.output};
    rc = batch_vis_run(&o, ctx, scene, obs, tgt, m, &l, first, end, &out, 1);
    rc = sync_close(o.output, fd, rc);
done:
    free(obs);
    free(tgt);
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    return rc;
}

int cmd_intersect_files(int argc, char **argv)
{
    batch_opts o;
    int rc = batch_parse(BATCH_INTERSECT, argc, argv, 1, &o);
    if (rc)
        return rc < 0 ? 0 : 1;
    rb_context *ctx = NULL;
    rb_scene *scene = NULL;
    batch_rays rays;
    if ((rc = batch_rays_open(o.rays, &rays)) ||
        (rc = batch_context(&o, &ctx)) ||
        (rc = load_scene(ctx, o.scene, &scene)))
        goto done;
    rb_mode mode;
    int normals;
    if ((rc = batch_isect_mode(&o, &rays, &mode, &normals)))
        goto done;
    batch_layout l;
    batch_isect_layout(rays.n, mode, batch_scene_has_kinds(scene), normals,
                       &l);
    uint64_t first, end;
    int fd;
    if ((rc = open_shard(&o, &l, &first, &end, &fd)))
        goto done;
    batch_out out = {.write_at = batch_fd_write, .user = &fd,
                     .path = o.output};
    rc = batch_isect_run(&o, ctx, scene, &rays, &l, first, end, &out, 1);
    rc = sync_close(o.output, fd, rc);
done:
    batch_rays_close(&rays);
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    return rc;
}
