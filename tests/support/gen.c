/* gen.c - see gen.h. Every value is valid input (R6); the point is to
 * land on the boundaries where slab tests disagree. */
#include "gen.h"

#include <float.h>
#include <math.h>

const char *rbt_shape_name(int shape)
{
    static const char *const names[] = {"uniform", "aimed",   "parallel",
                                        "flat",    "extreme", "degenerate",
                                        "dyadic"};
    return shape >= 0 && shape < RBT_SHAPES ? names[shape] : "?";
}

static float signed_zero(rbt_rng *r)
{
    return (rbt_next(r) & 1) ? -0.0f : 0.0f;
}

static float pick(rbt_rng *r, const float *v, size_t n)
{
    return v[rbt_below(r, (uint32_t)n)];
}

/* A magnitude from all over float32: subnormal to huge, either sign. */
static float wild(rbt_rng *r)
{
    static const float mags[] = {0.0f,   1e-45f, 1e-40f, 1.17e-38f, 1e-30f,
                                 1e-10f, 1e-3f,  1.0f,   3.0f,      1e3f,
                                 1e10f,  1e20f,  1e30f,  1e37f,     3e38f};
    float m = pick(r, mags, sizeof mags / sizeof mags[0]);
    m *= rbt_uniform(r, 0.5f, 1.0f);
    return (rbt_next(r) & 1) ? -m : m;
}

static void box_around(rbt_rng *r, rb_box *b, float lo, float hi, float size)
{
    for (int a = 0; a < 3; a++) {
        float c = rbt_uniform(r, lo, hi);
        float h = rbt_uniform(r, 0.0f, size);
        b->min[a] = c - h;
        b->max[a] = c + h;
    }
}

void rbt_gen_boxes(rbt_rng *r, int shape, rb_box *boxes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rb_box *b = &boxes[i];
        switch (shape) {
        case RBT_FLAT:
            box_around(r, b, -10, 10, 3);
            for (int a = 0; a < 3; a++)
                if (rbt_next(r) & 1)
                    b->max[a] = b->min[a]; /* flat, or a point if all */
            break;
        case RBT_EXTREME:
            for (int a = 0; a < 3; a++) {
                float x = wild(r), y = wild(r);
                b->min[a] = x < y ? x : y;
                b->max[a] = x < y ? y : x;
            }
            break;
        case RBT_DYADIC:
            for (int a = 0; a < 3; a++) {
                int x = (int)rbt_below(r, 33) - 16;
                int w = (int)rbt_below(r, 9);
                b->min[a] = (float)x;
                b->max[a] = (float)(x + w);
            }
            break;
        default:
            box_around(r, b, -10, 10, 3);
            break;
        }
    }
}

/* A point of box b on a face, an edge or a corner: 1-3 coordinates sit
 * exactly on planes, the others inside. */
static void boundary_point(rbt_rng *r, const rb_box *b, float p[3])
{
    int on = 1 + (int)rbt_below(r, 3);
    for (int a = 0; a < 3; a++) {
        if (a < on)
            p[a] = (rbt_next(r) & 1) ? b->max[a] : b->min[a];
        else
            p[a] = rbt_uniform(r, b->min[a], b->max[a]);
    }
    /* shuffle which axes are on planes */
    for (int a = 2; a > 0; a--) {
        int k = (int)rbt_below(r, (uint32_t)a + 1);
        float t = p[a];
        p[a] = p[k];
        p[k] = t;
    }
}

static void range(rbt_rng *r, rb_ray *ray)
{
    switch (rbt_below(r, 6)) {
    case 0:
        ray->tmin = rbt_uniform(r, -5, 1);
        ray->tmax = ray->tmin + rbt_uniform(r, 0, 10);
        break;
    case 1:
        ray->tmin = 0;
        ray->tmax = 1;
        break;
    default:
        ray->tmin = 0;
        ray->tmax = INFINITY;
        break;
    }
}

void rbt_gen_rays(rbt_rng *r, int shape, const rb_box *boxes,
                  size_t n_boxes, rb_ray *rays, size_t n)
{
    static const float dyadic_dirs[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f,
                                        -2.0f, 0.5f, -0.5f, 0.25f, -4.0f};
    for (size_t i = 0; i < n; i++) {
        rb_ray *ray = &rays[i];
        const rb_box *b = &boxes[rbt_below(r, (uint32_t)n_boxes)];
        float p[3];
        range(r, ray);
        switch (shape) {
        case RBT_AIMED:
            boundary_point(r, b, p);
            for (int a = 0; a < 3; a++) {
                ray->origin[a] = rbt_uniform(r, -20, 20);
                ray->dir[a] = p[a] - ray->origin[a];
            }
            ray->tmin = 0;
            ray->tmax = (rbt_next(r) & 1) ? 1.0f : INFINITY;
            break;
        case RBT_PARALLEL:
            boundary_point(r, b, p);
            for (int a = 0; a < 3; a++) {
                ray->origin[a] = p[a];
                ray->dir[a] = rbt_uniform(r, -1, 1);
            }
            /* 1 or 2 axes parallel, with a random sign of zero; the free
             * axes start away from the box. */
            for (int k = 0, zeros = 1 + (int)rbt_below(r, 2); k < zeros;
                 k++)
                ray->dir[rbt_below(r, 3)] = signed_zero(r);
            for (int a = 0; a < 3; a++)
                if (ray->dir[a] != 0)
                    ray->origin[a] -= ray->dir[a] * rbt_uniform(r, 0, 20);
            break;
        case RBT_EXTREME:
            for (int a = 0; a < 3; a++) {
                ray->origin[a] = wild(r);
                ray->dir[a] = wild(r);
            }
            if (rbt_next(r) & 1) {
                ray->tmin = fabsf(wild(r)) * -1.0f;
                ray->tmax = (rbt_next(r) & 1) ? INFINITY : fabsf(wild(r));
            }
            break;
        case RBT_DEGENERATE:
            for (int a = 0; a < 3; a++) {
                ray->origin[a] = rbt_uniform(r, b->min[a] - 1, b->max[a] + 1);
                ray->dir[a] = (rbt_next(r) & 3) ? signed_zero(r)
                                                : rbt_uniform(r, -1, 1);
            }
            if (rbt_next(r) & 1)
                ray->tmax = ray->tmin;
            break;
        case RBT_DYADIC: {
            /* aimed at an integer point in or next to the box, from k
             * steps back: origins stay dyadic, so the math stays exact */
            float k = (float)rbt_below(r, 9);
            for (int a = 0; a < 3; a++) {
                float lo = b->min[a] - 1, span = b->max[a] - b->min[a] + 3;
                float p_a = lo + (float)rbt_below(r, (uint32_t)span);
                ray->dir[a] = pick(r, dyadic_dirs, sizeof dyadic_dirs /
                                                       sizeof dyadic_dirs[0]);
                ray->origin[a] = p_a - k * ray->dir[a];
            }
            ray->tmin = (float)((int)rbt_below(r, 5) - 2);
            ray->tmax = (rbt_next(r) & 1) ? INFINITY
                                          : ray->tmin + (float)rbt_below(r, 30);
            break;
        }
        default:
            for (int a = 0; a < 3; a++) {
                ray->origin[a] = rbt_uniform(r, -20, 20);
                ray->dir[a] = rbt_uniform(r, -1, 1);
            }
            break;
        }
    }
}

void rbt_to_2d_rays(const rb_ray *in, rb_ray2 *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = (rb_ray2){{in[i].origin[0], in[i].origin[1]},
                           {in[i].dir[0], in[i].dir[1]},
                           in[i].tmin,
                           in[i].tmax};
    }
}

void rbt_to_2d_boxes(const rb_box *in, rb_box2 *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = (rb_box2){{in[i].min[0], in[i].min[1]},
                           {in[i].max[0], in[i].max[1]}};
    }
}
