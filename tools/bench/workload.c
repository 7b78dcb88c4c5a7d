/* workload.c - seeded random rays and boxes for the benchmark. */
#include <math.h>

#include "bench.h"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float uni(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(mix(s) >> 40) / 16777216.0);
}

void rbb_make_rays(uint64_t seed, rb_ray *rays, size_t n)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            rays[i].origin[a] = uni(&s, 0.0f, 100.0f);
            rays[i].dir[a] = uni(&s, -1.0f, 1.0f);
        }
        rays[i].tmin = 0.0f;
        rays[i].tmax = INFINITY;
    }
}

void rbb_make_boxes(uint64_t seed, rb_box *boxes, size_t n)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            float lo = uni(&s, 0.0f, 97.0f);
            boxes[i].min[a] = lo;
            boxes[i].max[a] = lo + uni(&s, 0.5f, 3.0f);
        }
    }
}

void rbb_make_pair_boxes(uint64_t seed, const rb_ray *rays, rb_box *boxes,
                         size_t n)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        float t = uni(&s, 1.0f, 10.0f);
        for (int a = 0; a < 3; a++) {
            float c = rays[i].origin[a] + t * rays[i].dir[a] +
                      uni(&s, -1.5f, 1.5f);
            float h = uni(&s, 0.25f, 1.0f);
            boxes[i].min[a] = c - h;
            boxes[i].max[a] = c + h;
        }
    }
}
