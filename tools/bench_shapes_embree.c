/* bench_shapes_embree.c - the Embree 3 side of raybox-bench-shapes: the
 * same elements in two setups, traced by the thread pool raybox uses with
 * the same rays in the same order.
 *
 * EM_NATIVE: Embree's own primitives - a box as 6 quads, an obb or xbox
 * as the 12 triangles of its world corners (computed in double from the
 * element as given), a sphere as a RTC_GEOMETRY_TYPE_SPHERE_POINT. Their
 * answers differ from raybox's where the rules differ (a ray that starts
 * inside an element: Embree reports the surface it leaves through,
 * raybox t_enter = tmin; grazing edges), so the caller reports the
 * fraction that agrees.
 *
 * EM_TRIS: the same, but boxes as the 12 triangles of their faces too
 * (triangles are Embree's most tuned primitive).
 *
 * EM_USER: one user geometry per kind whose callbacks run the tests of
 * kernels/exact.h (rb_slab_hit, rb_lbox_hit, rb_ball_full) on the records
 * raybox prepared, bounded by the same conservative world boxes raybox's
 * shape hierarchy uses, padded by about 1e-6 so that Embree's own node
 * tests cannot cull a grazing hit. A hit replaces the current one when
 * it is nearer or, at the same t, has the lower id (SPEC R10), so the
 * answers equal raybox's: the caller checks that they do.
 */
#include <embree3/rtcore.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_shapes.h"
#include "internal.h"
#include "threadpool.h"

#define RAYS_PER_TASK 4096
/* Rays fetched ahead when tracing through an order, as raybox's walks
 * fetch theirs (host/cpu/cpu_backend.c, WALK_PREFETCH, 4 there): Embree's
 * walk-order rates measured no better with 4 than with 8
 * (docs/benchmarks.md, "The walk per ray"), so it keeps 8. */
#define ORDER_PREFETCH 8
#define MAX_GEOMS 8
#define BOUND_PAD 1e-6f

/* Which kind a geometry holds and how its primitives map to ids. */
typedef struct geom_info {
    int kind;            /* rb_kind */
    unsigned per_elem;   /* primitives per element: 6 quads, 12 tris, 1 */
    uint32_t base;       /* id of its first element */
    uint32_t first_j;    /* user geometry: shape index of its first element */
} geom_info;

typedef struct em_scene {
    const bench_scene *sc;
    geom_info g[MAX_GEOMS];
    unsigned n_geoms;
} em_scene;

/* The user geometries' pointer: the scene's table and the geometry's own
 * entry. */
typedef struct user_geom {
    const em_scene *es;
    unsigned geom;
} user_geom;

/* ---- native primitives ------------------------------------------------ */

/* Corner c of a box (bit 0: x max, bit 1: y, bit 2: z) and of the local
 * boxes of obbs and xboxes, in world coordinates, in double. */
static void obb_corner(const rb_obb *b, int c, float *v)
{
    for (int a = 0; a < 3; a++) {
        double p = b->center[a];
        for (int k = 0; k < 3; k++) {
            double s = (c >> k) & 1 ? 1.0 : -1.0;
            p += s * (double)b->half[k] * (double)b->axes[k][a];
        }
        v[a] = (float)p;
    }
}

static void xbox_corner(const rb_xbox *b, int c, float *v)
{
    double q[3];
    for (int k = 0; k < 3; k++)
        q[k] = (c >> k) & 1 ? b->max[k] : b->min[k];
    for (int a = 0; a < 3; a++)
        v[a] = (float)((double)b->a[a][0] * q[0] + (double)b->a[a][1] * q[1] +
                       (double)b->a[a][2] * q[2] + (double)b->a[a][3]);
}

static void box_corner(const rb_box *b, int c, float *v)
{
    for (int a = 0; a < 3; a++)
        v[a] = (c >> a) & 1 ? b->max[a] : b->min[a];
}

static const unsigned faces[6][4] = {{0, 2, 6, 4}, {1, 5, 7, 3},
                                     {0, 4, 5, 1}, {2, 3, 7, 6},
                                     {0, 1, 3, 2}, {4, 6, 7, 5}};

/* n boxes of any box kind as quads (quads = 1) or triangles. */
static RTCGeometry corner_geometry(RTCDevice dev, const bench_scene *sc,
                                   int kind, size_t n, int quads)
{
    RTCGeometry g = rtcNewGeometry(dev, quads ? RTC_GEOMETRY_TYPE_QUAD
                                              : RTC_GEOMETRY_TYPE_TRIANGLE);
    float *v = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0,
                                       RTC_FORMAT_FLOAT3, 3 * sizeof(float),
                                       8 * n);
    unsigned per = quads ? 4 : 3, prims = quads ? 6 : 12;
    unsigned *ix = rtcSetNewGeometryBuffer(
        g, RTC_BUFFER_TYPE_INDEX, 0, quads ? RTC_FORMAT_UINT4 : RTC_FORMAT_UINT3,
        per * sizeof(unsigned), prims * n);
    if (!v || !ix) {
        rtcReleaseGeometry(g);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < 8; c++) {
            float *p = &v[(8 * i + (size_t)c) * 3];
            if (kind == RB_KIND_BOX)
                box_corner(&sc->boxes[i], c, p);
            else if (kind == RB_KIND_OBB)
                obb_corner(&sc->shapes.obbs[i], c, p);
            else
                xbox_corner(&sc->shapes.xboxes[i], c, p);
        }
        unsigned base = (unsigned)(8 * i);
        for (int f = 0; f < 6; f++) {
            const unsigned *q = faces[f];
            if (quads) {
                unsigned *o = &ix[(6 * i + (size_t)f) * 4];
                for (int k = 0; k < 4; k++)
                    o[k] = base + q[k];
            } else {
                unsigned *o = &ix[(12 * i + 2 * (size_t)f) * 3];
                o[0] = base + q[0];
                o[1] = base + q[1];
                o[2] = base + q[2];
                o[3] = base + q[0];
                o[4] = base + q[2];
                o[5] = base + q[3];
            }
        }
    }
    return g;
}

static RTCGeometry sphere_geometry(RTCDevice dev, const rb_sphere *s,
                                   size_t n)
{
    RTCGeometry g = rtcNewGeometry(dev, RTC_GEOMETRY_TYPE_SPHERE_POINT);
    float *v = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0,
                                       RTC_FORMAT_FLOAT4, 4 * sizeof(float),
                                       n);
    if (!v) {
        rtcReleaseGeometry(g);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        memcpy(&v[4 * i], &s[i], 4 * sizeof(float));
    return g;
}

/* ---- user geometry: raybox's exact tests ------------------------------- */

static void user_bounds(const struct RTCBoundsFunctionArguments *args)
{
    const user_geom *u = args->geometryUserPtr;
    const geom_info *g = &u->es->g[u->geom];
    const bench_scene *sc = u->es->sc;
    float lo[3], hi[3];
    if (g->kind == RB_KIND_BOX) {
        const rb_box *b = &sc->boxes[args->primID];
        memcpy(lo, b->min, sizeof lo);
        memcpy(hi, b->max, sizeof hi);
    } else {
        size_t j = g->first_j + args->primID;
        for (int a = 0; a < 3; a++) {
            lo[a] = rb_boxset_lo(&sc->prep->bounds, a)[j];
            hi[a] = rb_boxset_hi(&sc->prep->bounds, a)[j];
        }
    }
    struct RTCBounds *o = args->bounds_o;
    o->lower_x = lo[0] - BOUND_PAD * (1 + fabsf(lo[0]));
    o->lower_y = lo[1] - BOUND_PAD * (1 + fabsf(lo[1]));
    o->lower_z = lo[2] - BOUND_PAD * (1 + fabsf(lo[2]));
    o->upper_x = hi[0] + BOUND_PAD * (1 + fabsf(hi[0]));
    o->upper_y = hi[1] + BOUND_PAD * (1 + fabsf(hi[1]));
    o->upper_z = hi[2] + BOUND_PAD * (1 + fabsf(hi[2]));
}

/* Element prim of geometry g against the flushed ray w (its tmax the
 * current tfar: the same decision as the full range followed by
 * t_enter <= tfar); 1 and *te on a hit. */
static int user_test(const em_scene *es, const geom_info *g, unsigned prim,
                     const rb_ray_raw *w, float *te)
{
    const rb_shapeset *set = es->sc->prep;
    float tx;
    if (g->kind == RB_KIND_BOX) {
        const rb_box *b = &es->sc->boxes[prim];
        rb_ray_prep p = rb_prep_ray(w->o[0], w->o[1], w->o[2], w->d[0],
                                    w->d[1], w->d[2], w->tmin, w->tmax);
        float lo[3] = {rb_flush(b->min[0]), rb_flush(b->min[1]),
                       rb_flush(b->min[2])};
        float hi[3] = {rb_flush(b->max[0]), rb_flush(b->max[1]),
                       rb_flush(b->max[2])};
        return rb_slab_hit(&p, lo, hi, te, &tx);
    }
    size_t j = g->first_j + prim;
    if (g->kind == RB_KIND_SPHERE) {
        rb_hit h;
        h.box = -1;
        rb_ball_full(w, &set->ball[j - set->n_obb - set->n_xbox], &h);
        *te = h.t_enter;
        return h.hit;
    }
    return rb_lbox_hit(w, &set->lbox[j], te, &tx);
}

/* Reads field k of ray i of an SoA ray packet of N rays. */
#define RAYF(p, k, N, i) (((float *)(p))[(size_t)(k) * (N) + (i)])
#define RAYU(p, k, N, i) (((unsigned *)(p))[(size_t)(k) * (N) + (i)])

static rb_ray_raw packet_ray(void *ray, unsigned N, unsigned i)
{
    return rb_raw_ray(RAYF(ray, 0, N, i), RAYF(ray, 1, N, i),
                      RAYF(ray, 2, N, i), RAYF(ray, 4, N, i),
                      RAYF(ray, 5, N, i), RAYF(ray, 6, N, i),
                      RAYF(ray, 3, N, i), RAYF(ray, 8, N, i));
}

static void user_intersect(const struct RTCIntersectFunctionNArguments *args)
{
    const user_geom *u = args->geometryUserPtr;
    const em_scene *es = u->es;
    const geom_info *g = &es->g[u->geom];
    unsigned N = args->N;
    void *ray = args->rayhit;
    float *hit = (float *)args->rayhit + 12 * (size_t)N;
    for (unsigned i = 0; i < N; i++) {
        if (!args->valid[i])
            continue;
        rb_ray_raw w = packet_ray(ray, N, i);
        float te;
        if (!user_test(es, g, args->primID, &w, &te))
            continue;
        uint32_t id = g->base + args->primID;
        unsigned cur_geom = RAYU(hit, 6, N, i);
        uint32_t cur = cur_geom < es->n_geoms
                           ? es->g[cur_geom].base + RAYU(hit, 5, N, i)
                           : UINT32_MAX;
        float tfar = RAYF(ray, 8, N, i);
        if (!(te < tfar || (te == tfar && id < cur)))
            continue;
        RAYF(ray, 8, N, i) = te;
        RAYF(hit, 0, N, i) = 1;
        RAYF(hit, 1, N, i) = 0;
        RAYF(hit, 2, N, i) = 0;
        RAYF(hit, 3, N, i) = 0;
        RAYF(hit, 4, N, i) = 0;
        RAYU(hit, 5, N, i) = args->primID;
        RAYU(hit, 6, N, i) = args->geomID;
        RAYU(hit, 7, N, i) = args->context->instID[0];
    }
}

static void user_occluded(const struct RTCOccludedFunctionNArguments *args)
{
    const user_geom *u = args->geometryUserPtr;
    const em_scene *es = u->es;
    const geom_info *g = &es->g[u->geom];
    unsigned N = args->N;
    for (unsigned i = 0; i < N; i++) {
        if (!args->valid[i])
            continue;
        rb_ray_raw w = packet_ray(args->ray, N, i);
        float te;
        if (user_test(es, g, args->primID, &w, &te))
            RAYF(args->ray, 8, N, i) = -INFINITY;
    }
}

static RTCGeometry user_geometry(RTCDevice dev, user_geom *u, size_t n)
{
    RTCGeometry g = rtcNewGeometry(dev, RTC_GEOMETRY_TYPE_USER);
    rtcSetGeometryUserPrimitiveCount(g, (unsigned)n);
    rtcSetGeometryUserData(g, u);
    rtcSetGeometryBoundsFunction(g, user_bounds, NULL);
    rtcSetGeometryIntersectFunction(g, user_intersect);
    rtcSetGeometryOccludedFunction(g, user_occluded);
    return g;
}

/* ---- tracing ------------------------------------------------------------ */

typedef struct trace {
    RTCScene scene;
    const em_scene *es;
    const rb_ray *rays;
    const uint32_t *order; /* NULL: rays[k] is the k-th traced */
    size_t n;
    int occluded;
    int32_t *nearest_id;
    uint8_t *any;
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
    for (size_t i = begin; i < end; i++) {
        const rb_ray *r = &t->rays[i];
        if (t->order) {
            r = &t->rays[t->order[i]];
            if (i + ORDER_PREFETCH < end)
                __builtin_prefetch(&t->rays[t->order[i + ORDER_PREFETCH]]);
        }
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
            t->any[i] = rh.ray.tfar < 0; /* -inf when occluded */
        } else {
            rh.hit.geomID = RTC_INVALID_GEOMETRY_ID;
            rh.hit.primID = RTC_INVALID_GEOMETRY_ID;
            rh.hit.instID[0] = RTC_INVALID_GEOMETRY_ID;
            rtcIntersect1(t->scene, &ctx, &rh);
            int32_t id = -1;
            if (rh.hit.geomID < t->es->n_geoms) {
                const geom_info *g = &t->es->g[rh.hit.geomID];
                id = (int32_t)(g->base + rh.hit.primID / g->per_elem);
            }
            t->nearest_id[i] = id;
        }
    }
}

static double run_trace(struct rb_pool *pool, trace *t, int occluded,
                        int repeat)
{
    double ms[64];
    if (repeat > 64)
        repeat = 64;
    t->occluded = occluded;
    for (int k = 0; k < repeat; k++) {
        double t0 = bench_now_ms();
        rb_pool_run(pool, (t->n + RAYS_PER_TASK - 1) / RAYS_PER_TASK,
                    trace_task, t);
        ms[k] = bench_now_ms() - t0;
    }
    return bench_median(ms, repeat);
}

/* run_trace in turn with out->query_turn (bench_shapes.h): the median
 * of Embree's traces, and out->query_speedup[occluded]. */
static double run_trace_in_turn(struct rb_pool *pool, trace *t,
                                int occluded, int repeat, em_result *out)
{
    double ms[BENCH_TURN_ROUNDS_MAX], speedup[BENCH_TURN_ROUNDS_MAX];
    int rounds = bench_turn_rounds(repeat), turns = 0;
    for (int k = 0; k < rounds; k++) {
        double other = out->query_turn(out->turn_user, occluded);
        ms[k] = run_trace(pool, t, occluded, 1);
        if (other > 0)
            speedup[turns++] = (ms[k] + out->query_charge_ms) / other;
    }
    out->query_speedup[occluded] = turns ? bench_median(speedup, turns) : 0;
    return bench_median(ms, rounds);
}

static bool count_bytes(void *ptr, ssize_t bytes, bool post)
{
    (void)post;
    atomic_fetch_add((_Atomic long long *)ptr, (long long)bytes);
    return true;
}

int bench_em_answers_take(em_result *out, size_t n)
{
    out->nearest_id = malloc((n ? n : 1) * sizeof *out->nearest_id);
    out->any = malloc(n ? n : 1);
    return out->nearest_id && out->any ? 0 : -1;
}

void bench_em_answers_give(em_result *out)
{
    free(out->nearest_id);
    free(out->any);
    out->nearest_id = NULL;
    out->any = NULL;
}

int bench_embree_shapes(struct rb_pool *pool, unsigned threads, int repeat,
                        int setup, int quality, const bench_scene *sc,
                        const rb_ray *rays, const uint32_t *order,
                        size_t n_rays, em_result *out)
{
    out->ok = 0;
    out->quality = quality;
    char config[64];
    snprintf(config, sizeof config, "threads=%u", threads);
    RTCDevice dev = rtcNewDevice(config);
    if (!dev) {
        snprintf(out->error, sizeof out->error, "rtcNewDevice failed");
        return -1;
    }
    static _Atomic long long bytes;
    atomic_store(&bytes, 0);
    rtcSetDeviceMemoryMonitorFunction(dev, count_bytes, (void *)&bytes);
    RTCScene scene = rtcNewScene(dev);
    rtcSetSceneFlags(scene, RTC_SCENE_FLAG_NONE);
    rtcSetSceneBuildQuality(scene, (enum RTCBuildQuality)quality);

    em_scene es = {.sc = sc};
    user_geom users[MAX_GEOMS];
    const size_t counts[4] = {sc->n_boxes, sc->shapes.n_obbs,
                              sc->shapes.n_xboxes, sc->shapes.n_spheres};
    uint32_t base = 0, first_j = 0;
    int rc = 0;
    for (int kind = RB_KIND_BOX; kind <= RB_KIND_SPHERE && !rc; kind++) {
        size_t n = counts[kind];
        if (!n)
            continue;
        unsigned gi = es.n_geoms++;
        geom_info *g = &es.g[gi];
        g->kind = kind;
        g->base = base;
        g->first_j = kind == RB_KIND_BOX ? 0 : first_j;
        RTCGeometry geom;
        if (setup == EM_USER) {
            g->per_elem = 1;
            users[gi].es = &es;
            users[gi].geom = gi;
            geom = user_geometry(dev, &users[gi], n);
        } else if (kind == RB_KIND_SPHERE) {
            g->per_elem = 1;
            geom = sphere_geometry(dev, sc->shapes.spheres, n);
        } else {
            int quads = kind == RB_KIND_BOX && setup == EM_NATIVE;
            g->per_elem = quads ? 6 : 12;
            geom = corner_geometry(dev, sc, kind, n, quads);
        }
        if (!geom) {
            snprintf(out->error, sizeof out->error,
                     "Embree could not allocate the geometry");
            rc = -1;
            break;
        }
        rtcSetGeometryBuildQuality(geom, (enum RTCBuildQuality)quality);
        rtcCommitGeometry(geom);
        unsigned id = rtcAttachGeometry(scene, geom);
        rtcReleaseGeometry(geom);
        if (id != gi) {
            snprintf(out->error, sizeof out->error,
                     "unexpected geometry id %u", id);
            rc = -1;
        }
        base += (uint32_t)n;
        if (kind != RB_KIND_BOX)
            first_j += (uint32_t)n;
    }
    if (!rc) {
        double ms[BENCH_TURN_ROUNDS_MAX], speedup[BENCH_TURN_ROUNDS_MAX];
        int runs = out->turn ? bench_turn_rounds(repeat) : repeat, turns = 0;
        runs = runs < BENCH_TURN_ROUNDS_MAX ? runs : BENCH_TURN_ROUNDS_MAX;
        for (int k = 0; k < runs; k++) {
            for (unsigned gi = 0; k > 0 && gi < es.n_geoms; gi++)
                rtcCommitGeometry(rtcGetGeometry(scene, gi));
            double other = out->turn ? out->turn(out->turn_user) : -1;
            double t0 = bench_now_ms();
            rtcCommitScene(scene);
            ms[k] = bench_now_ms() - t0;
            if (other > 0)
                speedup[turns++] = ms[k] / other;
        }
        out->cold_build_ms = ms[0];
        out->build_ms = bench_median(ms, runs);
        out->turn_speedup = turns ? bench_median(speedup, turns) : 0;
        enum RTCError e = rtcGetDeviceError(dev);
        if (e != RTC_ERROR_NONE) {
            snprintf(out->error, sizeof out->error, "rtcCommitScene: error %d",
                     (int)e);
            rc = -1;
        }
    }
    if (!rc) {
        size_t n = counts[0] + counts[1] + counts[2] + counts[3];
        out->bytes_per_element =
            n ? (double)atomic_load(&bytes) / (double)n : 0;
        trace t = {.scene = scene, .es = &es, .rays = rays, .order = order,
                   .n = n_rays,
                   .nearest_id = out->nearest_id, .any = out->any};
        double *ms[2] = {&out->nearest_ms, &out->any_ms};
        for (int occluded = 0; occluded < 2; occluded++)
            *ms[occluded] =
                out->query_turn && (out->query_modes >> occluded & 1u)
                    ? run_trace_in_turn(pool, &t, occluded, repeat, out)
                    : run_trace(pool, &t, occluded, repeat);
        out->ok = 1;
    }
    rtcReleaseScene(scene);
    rtcReleaseDevice(dev);
    return rc;
}
