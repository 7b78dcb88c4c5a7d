/* bench_bvh_embree.c - the Embree 3 side of raybox-bench-bvh: the same
 * boxes as six quads each, the same rays, traced by the same thread pool
 * raybox uses, so the comparison is traversal against traversal. */
#include <embree3/rtcore.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "bench_bvh.h"
#include "threadpool.h"

#define RAYS_PER_TASK 4096

/* Corner c of a box: bit 0 picks x, bit 1 y, bit 2 z. */
static void corner(const rb_box *b, int c, float *v)
{
    v[0] = (c & 1) ? b->max[0] : b->min[0];
    v[1] = (c & 2) ? b->max[1] : b->min[1];
    v[2] = (c & 4) ? b->max[2] : b->min[2];
}

static const unsigned faces[6][4] = {{0, 2, 6, 4}, {1, 5, 7, 3},
                                     {0, 4, 5, 1}, {2, 3, 7, 6},
                                     {0, 1, 3, 2}, {4, 6, 7, 5}};

typedef struct trace {
    RTCScene scene;
    const rb_ray *rays;
    size_t n;
    int occluded;
    atomic_uint_fast64_t hits;
} trace;

static void trace_task(void *arg, size_t task, unsigned worker)
{
    trace *t = arg;
    (void)worker;
    size_t begin = task * RAYS_PER_TASK, end = begin + RAYS_PER_TASK;
    if (end > t->n)
        end = t->n;
    struct RTCIntersectContext ctx;
    rtcInitIntersectContext(&ctx);
    uint64_t hits = 0;
    for (size_t i = begin; i < end; i++) {
        const rb_ray *r = &t->rays[i];
        struct RTCRayHit rh;
        rh.ray.org_x = r->origin[0];
        rh.ray.org_y = r->origin[1];
        rh.ray.org_z = r->origin[2];
        rh.ray.dir_x = r->dir[0];
        rh.ray.dir_y = r->dir[1];
        rh.ray.dir_z = r->dir[2];
        rh.ray.tnear = r->tmin;
        rh.ray.tfar = r->tmax;
        rh.ray.time = 0;
        rh.ray.mask = 0xffffffffu;
        rh.ray.id = 0;
        rh.ray.flags = 0;
        if (t->occluded) {
            rtcOccluded1(t->scene, &ctx, &rh.ray);
            hits += rh.ray.tfar < 0; /* -inf when occluded */
        } else {
            rh.hit.geomID = RTC_INVALID_GEOMETRY_ID;
            rh.hit.primID = RTC_INVALID_GEOMETRY_ID;
            rtcIntersect1(t->scene, &ctx, &rh);
            hits += rh.hit.geomID != RTC_INVALID_GEOMETRY_ID;
        }
    }
    atomic_fetch_add(&t->hits, hits);
}

static double run_trace(struct rb_pool *pool, trace *t, int occluded,
                        int repeat, uint64_t *hits)
{
    double best = 0;
    t->occluded = occluded;
    for (int k = 0; k < repeat; k++) {
        atomic_store(&t->hits, 0);
        double t0 = bench_now_ms();
        rb_pool_run(pool, (t->n + RAYS_PER_TASK - 1) / RAYS_PER_TASK,
                    trace_task, t);
        double ms = bench_now_ms() - t0;
        if (k == 0 || ms < best)
            best = ms;
    }
    *hits = atomic_load(&t->hits);
    return best;
}

static bool count_bytes(void *ptr, ssize_t bytes, bool post)
{
    (void)post;
    atomic_fetch_add((_Atomic long long *)ptr, (long long)bytes);
    return true;
}

int bench_embree(struct rb_pool *pool, unsigned threads, int repeat,
                 const rb_box *boxes, size_t n_boxes, const rb_ray *rays,
                 size_t n_rays, bench_side *out, char *err, size_t err_len)
{
    char config[64];
    snprintf(config, sizeof config, "threads=%u", threads);
    RTCDevice dev = rtcNewDevice(config);
    if (!dev) {
        snprintf(err, err_len, "rtcNewDevice failed");
        return -1;
    }
    static _Atomic long long bytes;
    atomic_store(&bytes, 0);
    rtcSetDeviceMemoryMonitorFunction(dev, count_bytes, (void *)&bytes);

    RTCScene scene = rtcNewScene(dev);
    RTCGeometry g = rtcNewGeometry(dev, RTC_GEOMETRY_TYPE_QUAD);
    float *v = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0,
                                       RTC_FORMAT_FLOAT3, 3 * sizeof(float),
                                       8 * n_boxes);
    unsigned *q = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0,
                                          RTC_FORMAT_UINT4,
                                          4 * sizeof(unsigned), 6 * n_boxes);
    if (!v || !q) {
        snprintf(err, err_len, "Embree could not allocate the geometry");
        rtcReleaseGeometry(g);
        rtcReleaseScene(scene);
        rtcReleaseDevice(dev);
        return -1;
    }
    for (size_t i = 0; i < n_boxes; i++) {
        for (int c = 0; c < 8; c++)
            corner(&boxes[i], c, &v[(8 * i + (size_t)c) * 3]);
        for (int f = 0; f < 6; f++)
            for (int k = 0; k < 4; k++)
                q[(6 * i + (size_t)f) * 4 + (size_t)k] =
                    (unsigned)(8 * i) + faces[f][k];
    }
    rtcCommitGeometry(g);
    rtcAttachGeometry(scene, g);
    rtcReleaseGeometry(g);

    double t0 = bench_now_ms();
    rtcCommitScene(scene);
    out->build_ms = bench_now_ms() - t0;
    out->bytes_per_box = n_boxes ? (double)atomic_load(&bytes) /
                                       (double)n_boxes
                                 : 0;

    trace t = {.scene = scene, .rays = rays, .n = n_rays};
    out->nearest_ms = run_trace(pool, &t, 0, repeat, &out->nearest_hits);
    out->any_ms = run_trace(pool, &t, 1, repeat, &out->any_hits);

    rtcReleaseScene(scene);
    rtcReleaseDevice(dev);
    return 0;
}
