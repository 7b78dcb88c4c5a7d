/*
 * visibility.c - rb_visibility: observers x targets as `any` queries on
 * a scene.
 *
 * A backend that makes the segments itself (run_visibility: the OpenCL
 * backend, kernels/visibility.cl; the CPU backend over a hierarchy,
 * host/cpu/cpu_visibility.c) gets the points and the scene and writes
 * the bit matrix; only O(observers + targets) travels. Otherwise,
 * and when it declines (shapes other than boxes, points it cannot treat
 * exactly) or its device fails, the explicit segments: a tile is a run of
 * consecutive pairs in row-major order (observer i, then target j), made
 * into rays in a buffer the context keeps for the call and handed to
 * rb_intersect, so every pair is answered by exactly the path an explicit
 * segment would take (hierarchy or brute force, CPU or OpenCL, with the
 * same fallbacks), and the answer is that bit. The ray buffer is the only
 * memory that grows with the work, and it is bounded by the tile. Both
 * make a segment with exact.h's rb_segment_dir.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* Segments a tile: large enough that the per-call costs (the ray sort,
 * waking threads, an OpenCL launch) stay small against the walks, small
 * enough to keep the buffer (8 MiB of rays) modest. */
#define TILE_SEGMENTS ((size_t)1 << 18)

uint64_t rb_visibility_bytes(size_t n_observers, size_t n_targets)
{
    return (uint64_t)n_observers * (((uint64_t)n_targets + 7) / 8);
}

static const char *const axis_name[3] = {"x", "y", "z"};

/* What check_points saw besides invalid points. */
typedef struct point_flags {
    int subnormal;       /* a coordinate is subnormal */
    float max_abs[2][3]; /* observers, targets: largest |coordinate| a axis */
} point_flags;

/* Whether some t - o may overflow float32: only when |t| + |o| reaches
 * 2^128 - 2^103 (FLT_MAX plus half its ulp) on an axis. The sum of the
 * two largest magnitudes in double is within 2^76 of the exact one, so
 * the bound below never misses a pair (it may name one that is fine:
 * those points then take the explicit segments, which answer the same). */
static int may_overflow(const point_flags *fl)
{
    for (int a = 0; a < 3; a++)
        if ((double)fl->max_abs[0][a] + (double)fl->max_abs[1][a] >=
            0x1p128 - 0x1p103 - 0x1p80)
            return 1;
    return 0;
}

/* RB_EINPUT naming the first point of pts with a coordinate that is not
 * finite; RB_OK when there is none (and *fl updated). */
static int check_points(rb_context *ctx, const float *pts, size_t n,
                        rb_element_kind kind, point_flags *fl)
{
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            float v = pts[3 * i + (size_t)a];
            if (isfinite(v)) {
                float m = fabsf(v);
                float *mx = &fl->max_abs[kind == RB_ELEMENT_TARGET][a];
                fl->subnormal |= m != 0 && m < FLT_MIN;
                *mx = m > *mx ? m : *mx;
                continue;
            }
            rb_fail(ctx, RB_EINPUT, "%s %zu: %s is %s",
                    kind == RB_ELEMENT_OBSERVER ? "observer" : "target", i,
                    axis_name[a], isnan(v) ? "NaN" : "infinite");
            ctx->err.element = kind;
            ctx->err.index = i;
            ctx->err.field = a;
            return RB_EINPUT;
        }
    return RB_OK;
}

/* Pairs [first, first + n) as rays. */
static void make_segments(const rb_visibility_query *q, uint64_t first,
                          size_t n, rb_ray *out)
{
    size_t m = q->n_targets;
    size_t i = (size_t)(first / m), j = (size_t)(first % m);
    for (size_t k = 0; k < n; k++) {
        const float *o = q->observers + 3 * i, *t = q->targets + 3 * j;
        rb_ray *r = &out[k];
        for (int a = 0; a < 3; a++) {
            r->origin[a] = o[a];
            r->dir[a] = rb_segment_dir(o[a], t[a]);
        }
        r->tmin = q->tmin;
        r->tmax = q->tmax;
        if (++j == m) {
            j = 0;
            i++;
        }
    }
}

/* The query on the active backend's own segments (run_visibility):
 * RB_VIS_DECLINED when it has none, declines, or its device failed with
 * fallback on (bits zeroed again); else its status, with the count. A
 * scene with shapes beyond boxes, and points a direction could overflow
 * from (the explicit segments name the pair), always take the tiles. */
static int on_backend(rb_context *ctx, const rb_visibility_query *q,
                      const point_flags *fl, uint8_t *bits, size_t bytes,
                      uint64_t *n_visible, rb_run_info *info)
{
    rb_backend *b = ctx->active;
    if (!b->ops->run_visibility || !q->n_observers || !q->n_targets ||
        rb_scene_shapeset(q->scene) || may_overflow(fl))
        return RB_VIS_DECLINED;
    double t0 = rb_now_ms();
    rb_vis_job job = {.observers = q->observers,
                      .targets = q->targets,
                      .n_observers = q->n_observers,
                      .n_targets = q->n_targets,
                      .tmin = q->tmin,
                      .tmax = q->tmax,
                      .boxes = rb_scene_boxset(q->scene),
                      .bvh = rb_query_scene_bvh(ctx, q->scene),
                      .subnormal_points = fl->subnormal,
                      .stop = q->stop,
                      .stop_user = q->stop_user};
    rb_run_info mine;
    memset(&mine, 0, sizeof mine);
    int rc = b->ops->run_visibility(b, ctx, &job, bits, &mine);
    if (rc == RB_EDEVICE || rc == RB_EDEVMEM || rc == RB_EBUILD) {
        if (!ctx->opt.cpu_fallback)
            return rc;
        rb_clear_error(ctx); /* the explicit segments try again */
        memset(bits, 0, bytes);
        return RB_VIS_DECLINED;
    }
    if (rc)
        return rc;
    uint64_t visible = 0;
    for (size_t k = 0; k < bytes; k++)
        visible += (uint64_t)__builtin_popcount(bits[k]);
    if (n_visible)
        *n_visible = visible;
    mine.slab_tests = (uint64_t)q->n_observers * q->n_targets *
                      job.boxes->n;
    mine.elapsed_ms = rb_now_ms() - t0;
    if (info)
        *info = mine;
    return RB_OK;
}

int rb_visibility(rb_context *ctx, const rb_visibility_query *q,
                  uint8_t *bits, size_t bits_len, uint64_t *n_visible,
                  rb_run_info *info)
{
    if (!ctx)
        return RB_EINVAL;
    rb_clear_error(ctx);
    if (!q || !q->scene)
        return rb_fail(ctx, RB_EINVAL, "visibility needs a scene");
    rb_scene_stats st;
    rb_scene_stats_get(q->scene, &st);
    if (st.dims != 3)
        return rb_fail(ctx, RB_EINVAL, "visibility needs a 3D scene, not "
                                       "%uD", st.dims);
    if ((q->n_observers && !q->observers) || (q->n_targets && !q->targets))
        return rb_fail(ctx, RB_EINVAL, "observers or targets missing");
    if (q->n_targets && q->n_observers > UINT64_MAX / 8 / q->n_targets)
        return rb_fail(ctx, RB_EINVAL, "%zu x %zu pairs are too many",
                       q->n_observers, q->n_targets);
    if (!rb_ray_range_valid(q->tmin, q->tmax))
        return rb_fail(ctx, RB_EINVAL, "the range [%g, %g] is not valid: "
                       "tmin finite, tmax not NaN or -inf, tmin <= tmax",
                       (double)q->tmin, (double)q->tmax);
    uint64_t need = rb_visibility_bytes(q->n_observers, q->n_targets);
    if ((need && !bits) || bits_len < need)
        return rb_fail(ctx, RB_EINVAL, "the bit matrix needs %llu bytes, "
                       "not %zu", (unsigned long long)need, bits_len);
    point_flags fl = {0, {{0, 0, 0}, {0, 0, 0}}};
    int rc = check_points(ctx, q->observers, q->n_observers,
                          RB_ELEMENT_OBSERVER, &fl);
    if (!rc)
        rc = check_points(ctx, q->targets, q->n_targets, RB_ELEMENT_TARGET,
                          &fl);
    if (rc)
        return rc;
    if (need)
        memset(bits, 0, (size_t)need);
    if (info)
        memset(info, 0, sizeof *info);
    if (n_visible)
        *n_visible = 0;

    uint64_t pairs = (uint64_t)q->n_observers * q->n_targets;
    rc = on_backend(ctx, q, &fl, bits, (size_t)need, n_visible, info);
    if (rc != RB_VIS_DECLINED)
        return rc;
    rc = RB_OK;
    size_t tile = pairs < TILE_SEGMENTS ? (size_t)pairs : TILE_SEGMENTS;
    rb_ray *rays = tile ? rb_alloc(ctx, tile * sizeof *rays, 64) : NULL;
    uint8_t *any = tile ? rb_alloc(ctx, tile, 64) : NULL;
    if (tile && (!rays || !any)) {
        rb_free(ctx, rays);
        rb_free(ctx, any);
        return rb_fail(ctx, RB_ENOMEM, "no memory for a tile of %zu "
                       "segments", tile);
    }
    size_t stride = (q->n_targets + 7) / 8;
    uint64_t visible = 0;
    rb_results res = {.any = any, .capacity = tile};
    for (uint64_t first = 0; first < pairs && !rc; first += tile) {
        size_t n = pairs - first < tile ? (size_t)(pairs - first) : tile;
        make_segments(q, first, n, rays);
        rb_query rq = {.mode = RB_MODE_ANY, .dims = 3, .rays = rays,
                       .n_rays = n, .scene = q->scene, .stop = q->stop,
                       .stop_user = q->stop_user};
        rc = rb_intersect(ctx, &rq, &res);
        if (rc == RB_EINPUT && ctx->err.element == RB_ELEMENT_RAY) {
            /* Only a direction can be bad here: the points were checked. */
            uint64_t at = first + ctx->err.index;
            size_t i = (size_t)(at / q->n_targets);
            size_t j = (size_t)(at % q->n_targets);
            rb_fail(ctx, RB_EINPUT, "observer %zu to target %zu: the "
                    "direction (target - observer) overflows float32", i, j);
            ctx->err.element = RB_ELEMENT_TARGET;
            ctx->err.index = j;
            ctx->err.field = -1;
        }
        if (rc)
            break;
        size_t i = (size_t)(first / q->n_targets);
        size_t j = (size_t)(first % q->n_targets);
        for (size_t k = 0; k < n; k++) {
            if (!any[k]) {
                bits[i * stride + j / 8] |= (uint8_t)(1u << (j % 8));
                visible++;
            }
            if (++j == q->n_targets) {
                j = 0;
                i++;
            }
        }
        if (info)
            *info = res.info;
    }
    rb_free(ctx, rays);
    rb_free(ctx, any);
    if (rc)
        return rc;
    if (n_visible)
        *n_visible = visible;
    return RB_OK;
}
