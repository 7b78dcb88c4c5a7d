/* shapes.c - the scene shapes of shapes.h.
 *
 *   uniform    boxes scattered evenly through the cube; rays from random
 *              points in random directions, unbounded.
 *   clustered  the same number of boxes packed into 16 dense clusters with
 *              empty space between them (what a hierarchy must skip);
 *              same rays.
 *   city       a street grid of buildings standing on z = 0, heights
 *              skewed towards low; rays are line-of-sight segments
 *              (t in [0, 1]) between two points at eye level, the query a
 *              game server asks every tick.
 */
#include <math.h>
#include <string.h>

#include "shapes.h"

#define WORLD 100.0f

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi), 24 random bits. */
static float uni(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(mix(s) >> 40) / 16777216.0);
}

/* Edge of the cell one box gets when n boxes share `volume`. */
static float cell(double volume, size_t n)
{
    return (float)cbrt(volume / (double)(n ? n : 1));
}

static void free_rays(uint64_t seed, rb_ray *out, size_t n)
{
    uint64_t s = seed * 2 + 1;
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            out[i].origin[a] = uni(&s, 0.0f, WORLD);
            out[i].dir[a] = uni(&s, -1.0f, 1.0f);
        }
        out[i].tmin = 0.0f;
        out[i].tmax = INFINITY;
    }
}

static void uniform_boxes(uint64_t seed, rb_box *out, size_t n)
{
    uint64_t s = seed * 2;
    float side = cell((double)WORLD * WORLD * WORLD, n);
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            float w = side * uni(&s, 0.2f, 1.0f);
            float lo = uni(&s, 0.0f, WORLD - w);
            out[i].min[a] = lo;
            out[i].max[a] = lo + w;
        }
    }
}

#define CLUSTERS 16
#define CLUSTER_RADIUS 6.0f

static void clustered_boxes(uint64_t seed, rb_box *out, size_t n)
{
    uint64_t s = seed * 2;
    float centre[CLUSTERS][3];
    for (int c = 0; c < CLUSTERS; c++)
        for (int a = 0; a < 3; a++)
            centre[c][a] = uni(&s, 12.0f, WORLD - 12.0f);
    double volume = CLUSTERS * 4.19 * CLUSTER_RADIUS * CLUSTER_RADIUS *
                    CLUSTER_RADIUS;
    float side = cell(volume, n);
    for (size_t i = 0; i < n; i++) {
        int c = (int)(mix(&s) % CLUSTERS);
        for (int a = 0; a < 3; a++) {
            /* A sum of three uniforms: dense centre, soft edge. */
            float off = (uni(&s, -1, 1) + uni(&s, -1, 1) + uni(&s, -1, 1)) *
                        (CLUSTER_RADIUS / 1.5f);
            float w = side * uni(&s, 0.2f, 1.0f);
            float lo = centre[c][a] + off - 0.5f * w;
            out[i].min[a] = lo;
            out[i].max[a] = lo + w;
        }
    }
}

static void city_boxes(uint64_t seed, rb_box *out, size_t n)
{
    uint64_t s = seed * 2;
    size_t grid = (size_t)ceil(sqrt((double)(n ? n : 1)));
    float lot = WORLD / (float)grid;
    for (size_t i = 0; i < n; i++) {
        float x = (float)(i % grid) * lot, y = (float)(i / grid) * lot;
        /* Streets take 20-40% of each lot; most buildings are low. */
        float mx = lot * uni(&s, 0.1f, 0.2f), my = lot * uni(&s, 0.1f, 0.2f);
        float u = uni(&s, 0.0f, 1.0f);
        out[i].min[0] = x + mx;
        out[i].max[0] = x + lot - mx;
        out[i].min[1] = y + my;
        out[i].max[1] = y + lot - my;
        out[i].min[2] = 0.0f;
        out[i].max[2] = 3.0f + 45.0f * u * u * u;
    }
}

static void city_rays(uint64_t seed, rb_ray *out, size_t n)
{
    uint64_t s = seed * 2 + 1;
    for (size_t i = 0; i < n; i++) {
        float from[3] = {uni(&s, 0, WORLD), uni(&s, 0, WORLD),
                         uni(&s, 1.5f, 1.9f)};
        float to[3] = {uni(&s, 0, WORLD), uni(&s, 0, WORLD),
                       uni(&s, 1.0f, 1.9f)};
        for (int a = 0; a < 3; a++) {
            out[i].origin[a] = from[a];
            out[i].dir[a] = to[a] - from[a];
        }
        out[i].tmin = 0.0f;
        out[i].tmax = 1.0f;
    }
}

static const rbench_shape shapes[] = {
    {"uniform", "boxes spread evenly through the cube; random unbounded rays",
     uniform_boxes, free_rays},
    {"clustered", "boxes packed in 16 dense clusters; random unbounded rays",
     clustered_boxes, free_rays},
    {"city", "a street grid of buildings; eye-level line-of-sight segments",
     city_boxes, city_rays},
};

const rbench_shape *rbench_shapes(size_t *count)
{
    *count = sizeof shapes / sizeof *shapes;
    return shapes;
}

const rbench_shape *rbench_shape_find(const char *name)
{
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        if (strcmp(shapes[i].name, name) == 0)
            return &shapes[i];
    return NULL;
}
