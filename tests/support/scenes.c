/* scenes.c - see scenes.h. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "scenes.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "batch.h"

const char *const rbt_scene_kind_name[RBT_SC_KINDS] = {
    "uniform", "clustered", "thin", "flat+points", "overlapping",
    "identical", "grid", "huge", "tiny", "deep", "single", "empty"};

static size_t *rays_checked; /* shared with forked tests; NULL until init */

void rbt_rays_count_init(void)
{
    void *m = mmap(NULL, sizeof *rays_checked, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("rbt_rays_count_init: mmap");
        abort();
    }
    rays_checked = m;
    *rays_checked = 0;
}

size_t rbt_rays_checked(void)
{
    return rays_checked ? *rays_checked : 0;
}

/* ---- boxes */

static float pick(rbt_rng *g, const float *v, int n)
{
    return v[rbt_below(g, (uint32_t)n)];
}

void rbt_box_around(rb_box *b, const float c[3], const float h[3])
{
    for (int a = 0; a < 3; a++) {
        b->min[a] = c[a] - h[a];
        b->max[a] = c[a] + h[a];
    }
}

size_t rbt_scene_boxes(int shape, size_t n, rbt_rng *g, rb_box *out)
{
    float cl[8][3];
    for (int k = 0; k < 8; k++)
        for (int a = 0; a < 3; a++)
            cl[k][a] = rbt_uniform(g, -100, 100);
    static const float ext[] = {0, 0, 0, 1, 2};
    int long_axis = (int)rbt_below(g, 3);
    if (shape == RBT_SC_SINGLE)
        n = 1;
    if (shape == RBT_SC_EMPTY)
        n = 0;
    for (size_t i = 0; i < n; i++) {
        float c[3], h[3];
        rb_box *b = &out[i];
        for (int a = 0; a < 3; a++) {
            c[a] = rbt_uniform(g, -100, 100);
            h[a] = rbt_uniform(g, 0.1f, 5);
        }
        switch (shape) {
        case RBT_SC_UNIFORM:
        case RBT_SC_SINGLE:
            rbt_box_around(b, c, h);
            break;
        case RBT_SC_CLUSTERED: {
            const float *k = cl[rbt_below(g, 8)];
            for (int a = 0; a < 3; a++) {
                c[a] = k[a] + rbt_uniform(g, -3, 3);
                h[a] = rbt_uniform(g, 0.01f, 0.5f);
            }
            rbt_box_around(b, c, h);
            break;
        }
        case RBT_SC_THIN:
            for (int a = 0; a < 3; a++)
                h[a] = a == long_axis || rbt_below(g, 8) == 0
                           ? 30.0f
                           : rbt_uniform(g, 0.001f, 0.05f);
            rbt_box_around(b, c, h);
            break;
        case RBT_SC_FLAT_POINTS: {
            int point = rbt_below(g, 3) == 0;
            for (int a = 0; a < 3; a++) {
                b->min[a] = (float)((int)rbt_below(g, 41) - 20);
                b->max[a] = b->min[a] + (point ? 0 : pick(g, ext, 5));
            }
            break;
        }
        case RBT_SC_OVERLAP:
            for (int a = 0; a < 3; a++) {
                c[a] = rbt_uniform(g, -5, 5);
                h[a] = rbt_uniform(g, 20, 60);
            }
            rbt_box_around(b, c, h);
            break;
        case RBT_SC_IDENTICAL: {
            static const rb_box same = {{-1, -3, 0}, {2, 1, 4}};
            *b = same;
            break;
        }
        case RBT_SC_GRID:
            for (int a = 0; a < 3; a++) {
                b->min[a] = (float)((int)rbt_below(g, 21) - 10);
                b->max[a] = b->min[a] + (float)(1 + rbt_below(g, 3));
            }
            break;
        case RBT_SC_HUGE:
            for (int a = 0; a < 3; a++) {
                c[a] *= 1e30f;
                h[a] *= 1e30f;
            }
            rbt_box_around(b, c, h);
            if (rbt_below(g, 16) == 0) {
                /* Reaching the ends of the float range. */
                int a = (int)rbt_below(g, 3);
                if (rbt_below(g, 2))
                    b->max[a] = FLT_MAX;
                else
                    b->min[a] = -FLT_MAX;
            }
            break;
        case RBT_SC_TINY:
            for (int a = 0; a < 3; a++) {
                c[a] *= 1e-33f;
                h[a] *= 1e-33f;
            }
            rbt_box_around(b, c, h);
            if (rbt_below(g, 16) == 0)
                b->min[0] = -1e-39f; /* subnormal: flushed to -0 */
            if (b->min[0] > b->max[0])
                b->max[0] = b->min[0];
            break;
        case RBT_SC_DEEP: {
            /* Centres spread exponentially: SAH peels a few boxes off per
             * level, so the depth limit and count halving kick in. */
            float x = powf(1.02f, (float)i);
            float cc[3] = {x, c[1] * 0.01f, c[2] * 0.01f};
            float hh[3] = {x * 0.001f, 0.5f, 0.5f};
            rbt_box_around(b, cc, hh);
            break;
        }
        }
    }
    return n;
}

void rbt_scene_bounds(const rb_box *b, size_t n, float lo[3], float hi[3])
{
    for (int a = 0; a < 3; a++) {
        lo[a] = n ? INFINITY : -1;
        hi[a] = n ? -INFINITY : 1;
    }
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            lo[a] = fminf(lo[a], b[i].min[a]);
            hi[a] = fmaxf(hi[a], b[i].max[a]);
        }
    }
}

/* ---- rays */

static float signed_zero(rbt_rng *g)
{
    return rbt_below(g, 2) ? 0.0f : -0.0f;
}

/* A point in [lo, hi] without overflowing at the ends of the range. */
static float between(rbt_rng *g, float lo, float hi)
{
    float u = rbt_uniform(g, 0, 1);
    return lo * (1 - u) + hi * u;
}

/* lo, hi or the middle: a face, edge or corner coordinate. */
static float plane_of(rbt_rng *g, const rb_box *b, int a)
{
    switch (rbt_below(g, 3)) {
    case 0:
        return b->min[a];
    case 1:
        return b->max[a];
    default:
        return b->min[a] * 0.5f + b->max[a] * 0.5f;
    }
}

static void gen_ray(rbt_rng *g, const rb_box *boxes, size_t nb,
                    const float lo[3], const float hi[3], rb_ray *r)
{
    static const rb_box unit = {{-1, -1, -1}, {1, 1, 1}};
    const rb_box *b = nb ? &boxes[rbt_below(g, (uint32_t)nb)] : &unit;
    float olo[3], ohi[3];
    for (int a = 0; a < 3; a++) {
        /* Origins range a bit past the scene, halves avoid overflow. */
        float m = lo[a] * 0.5f + hi[a] * 0.5f, w = hi[a] * 0.5f - lo[a] * 0.5f;
        olo[a] = m - w * 1.2f;
        ohi[a] = m + w * 1.2f;
        if (!isfinite(olo[a]) || !isfinite(ohi[a])) {
            olo[a] = lo[a];
            ohi[a] = hi[a];
        }
        r->origin[a] = between(g, olo[a], ohi[a]);
        r->dir[a] = rbt_uniform(g, -1, 1);
    }
    switch (rbt_below(g, 6)) {
    case 0: /* random, some components zero */
        for (int a = 0; a < 3; a++)
            if (rbt_below(g, 4) == 0)
                r->dir[a] = signed_zero(g);
        break;
    case 1: /* aimed at a face, edge or corner: t = 1 there */
        for (int a = 0; a < 3; a++) {
            float t = plane_of(g, b, a);
            r->dir[a] = t - r->origin[a];
            if (!isfinite(r->dir[a])) /* huge scenes: aim with t = 2 */
                r->dir[a] = t * 0.5f - r->origin[a] * 0.5f;
        }
        if (rbt_below(g, 4) == 0) {
            float s = ldexpf(1, (int)rbt_below(g, 40) - 20);
            for (int a = 0; a < 3; a++)
                if (isfinite(r->dir[a] * s))
                    r->dir[a] *= s;
        }
        break;
    case 2: { /* axis-parallel, origin on planes of boxes */
        int axis = (int)rbt_below(g, 3);
        for (int a = 0; a < 3; a++) {
            if (a == axis) {
                r->dir[a] = rbt_below(g, 2) ? 1.0f : -1.0f;
                if (rbt_below(g, 2))
                    r->origin[a] = plane_of(g, b, a);
            } else {
                r->dir[a] = signed_zero(g);
                r->origin[a] = rbt_below(g, 4) ? plane_of(g, b, a)
                                                : r->origin[a];
            }
        }
        break;
    }
    case 3: /* zero direction: a point-in-box test */
        for (int a = 0; a < 3; a++) {
            r->dir[a] = signed_zero(g);
            if (rbt_below(g, 2))
                r->origin[a] = plane_of(g, b, a);
        }
        break;
    case 4: /* origin inside a box */
        for (int a = 0; a < 3; a++)
            r->origin[a] = between(g, b->min[a], b->max[a]);
        break;
    default: /* origin on a corner of a box, random direction */
        for (int a = 0; a < 3; a++)
            r->origin[a] = rbt_below(g, 2) ? b->min[a] : b->max[a];
        break;
    }
    r->tmin = 0;
    r->tmax = INFINITY;
    switch (rbt_below(g, 6)) {
    case 0:
        r->tmin = rbt_uniform(g, -1, 1);
        r->tmax = r->tmin + rbt_uniform(g, 0, 2);
        break;
    case 1:
        r->tmin = -0.0f;
        r->tmax = rbt_uniform(g, 0.5f, 1.5f);
        break;
    case 2:
        r->tmin = r->tmax = 1; /* aimed rays: exactly at the target */
        break;
    case 3:
        r->tmin = rbt_uniform(g, -1e6f, 0);
        break;
    default:
        break;
    }
}

void rbt_scene_to_2d(const rb_box *b3, size_t nb, const rb_ray *r3, size_t nr,
                  rb_box2 *b2, rb_ray2 *r2)
{
    for (size_t i = 0; i < nb; i++) {
        for (int a = 0; a < 2; a++) {
            b2[i].min[a] = b3[i].min[a];
            b2[i].max[a] = b3[i].max[a];
        }
    }
    for (size_t i = 0; i < nr; i++) {
        for (int a = 0; a < 2; a++) {
            r2[i].origin[a] = r3[i].origin[a];
            r2[i].dir[a] = r3[i].dir[a];
        }
        r2[i].tmin = r3[i].tmin;
        r2[i].tmax = r3[i].tmax;
    }
}

void rbt_box_jitter(rbt_rng *g, rb_box *b, float amount)
{
    for (int a = 0; a < 3; a++) {
        float d = rbt_uniform(g, -amount, amount);
        b->min[a] += d;
        b->max[a] += d;
    }
}

void rbt_scene_rays(rbt_rng *g, const rb_box *boxes, size_t nb, rb_ray *rays,
                    size_t n)
{
    float lo[3], hi[3];
    rbt_scene_bounds(boxes, nb, lo, hi);
    for (size_t i = 0; i < n; i++)
        gen_ray(g, boxes, nb, lo, hi, &rays[i]);
}

/* ---- comparison (output arrays: rbt_out of batch.h) */

static void run(rb_context *ctx, const rb_query *q, rbt_out *a,
                const char *name, const char *what)
{
    /* Garbage first: an answer left from the previous context must not
     * pass for this one's. */
    size_t n = q->n_rays;
    memset(a->hits, 0xab, n * sizeof *a->hits);
    memset(a->any, 0xab, n * sizeof *a->any);
    memset(a->counts, 0xab, n * sizeof *a->counts);
    memset(a->list, 0xab, n * q->max_hits * sizeof *a->list);
    rb_results res = {.hits = a->hits, .any = a->any, .counts = a->counts,
                      .list = a->list, .capacity = q->n_rays};
    int rc = rb_intersect(ctx, q, &res);
    ck_assert_msg(rc == RB_OK, "%s %s %s: %s (%s)", what, name,
                  rb_mode_name(q->mode), rb_status_name(rc),
                  rb_context_error(ctx)->message);
    rb_backend_info info;
    rb_context_info(ctx, &info);
    if (q->n_rays && (res.info.fell_back ||
                      strcmp(res.info.backend, info.backend) != 0))
        ck_abort_msg("%s %s %s: answered by %s (fell back: %s)", what, name,
                     rb_mode_name(q->mode), res.info.backend,
                     res.info.fallback_reason);
}

static const char *ray_str(unsigned dims, const void *rays, size_t i,
                           char *buf, size_t len)
{
    if (dims == 3) {
        const rb_ray *r = &((const rb_ray *)rays)[i];
        snprintf(buf, len, "o=(%a, %a, %a) d=(%a, %a, %a) t=[%a, %a]",
                 (double)r->origin[0], (double)r->origin[1],
                 (double)r->origin[2], (double)r->dir[0], (double)r->dir[1],
                 (double)r->dir[2], (double)r->tmin, (double)r->tmax);
    } else {
        const rb_ray2 *r = &((const rb_ray2 *)rays)[i];
        snprintf(buf, len, "o=(%a, %a) d=(%a, %a) t=[%a, %a]",
                 (double)r->origin[0], (double)r->origin[1],
                 (double)r->dir[0], (double)r->dir[1], (double)r->tmin,
                 (double)r->tmax);
    }
    return buf;
}

/* a (named na) against the reference b (nb), one mode. Loops test with
 * `if` and abort on the first difference: check's assertion macros cost
 * a message to the runner per call, too much for millions of rays. */
static void compare_answers(const rb_query *q, const rbt_out *a,
                            const rbt_out *b, const char *na,
                            const char *nb, const char *what)
{
    char rs[256], h1[160], h2[160];
    int mode = q->mode;
    for (size_t i = 0; i < q->n_rays; i++) {
        switch (mode) {
        case RB_MODE_NEAREST:
            if (!rbt_same_hit(&a->hits[i], &b->hits[i]))
                ck_abort_msg("%s nearest ray %zu %s: %s %s, %s %s", what, i,
                             ray_str(q->dims, q->rays, i, rs, 256), na,
                             rbt_hit_str(&a->hits[i], h1, 160), nb,
                             rbt_hit_str(&b->hits[i], h2, 160));
            break;
        case RB_MODE_ANY:
            if (a->any[i] != b->any[i])
                ck_abort_msg("%s any ray %zu %s: %s %d, %s %d", what, i,
                             ray_str(q->dims, q->rays, i, rs, 256), na,
                             a->any[i], nb, b->any[i]);
            break;
        default: {
            if (a->counts[i] != b->counts[i])
                ck_abort_msg("%s %s ray %zu %s: %s %u, %s %u", what,
                             rb_mode_name(q->mode), i,
                             ray_str(q->dims, q->rays, i, rs, 256), na,
                             a->counts[i], nb, b->counts[i]);
            if (mode != RB_MODE_ALL)
                break;
            uint32_t n = a->counts[i] < q->max_hits ? a->counts[i]
                                                    : q->max_hits;
            const rb_list_hit *la = a->list + i * q->max_hits;
            const rb_list_hit *lb = b->list + i * q->max_hits;
            for (uint32_t k = 0; k < n; k++) {
                if (la[k].box != lb[k].box ||
                    !rbt_same_float(la[k].t_enter, lb[k].t_enter) ||
                    !rbt_same_float(la[k].t_exit, lb[k].t_exit))
                    ck_abort_msg("%s all ray %zu %s entry %u: %s box %d "
                                 "t=[%a, %a], %s box %d t=[%a, %a]",
                                 what, i,
                                 ray_str(q->dims, q->rays, i, rs, 256), k,
                                 na, la[k].box, (double)la[k].t_enter,
                                 (double)la[k].t_exit, nb, lb[k].box,
                                 (double)lb[k].t_enter,
                                 (double)lb[k].t_exit);
            }
            break;
        }
        }
    }
}

void rbt_compare_query(rb_context *const *ctxs, const char *const *names,
                       int n, rb_query q, const char *what)
{
    rbt_out ref, got;
    rbt_out_init(&ref, q.n_rays, q.max_hits);
    rbt_out_init(&got, q.n_rays, q.max_hits);
    for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++) {
        q.mode = (rb_mode)mode;
        run(ctxs[0], &q, &ref, names[0], what);
        for (int k = 1; k < n; k++) {
            run(ctxs[k], &q, &got, names[k], what);
            compare_answers(&q, &got, &ref, names[k], names[0], what);
        }
    }
    if (rays_checked) /* tests run one at a time: no race */
        *rays_checked += q.n_rays;
    rbt_out_free(&ref);
    rbt_out_free(&got);
}
