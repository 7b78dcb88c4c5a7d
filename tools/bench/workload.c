/* workload.c - seeded random rays and boxes for the benchmark, and the
 * pools of data sets that calls rotate through. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

void rbench_make_rays(uint64_t seed, rb_ray *rays, size_t n)
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

void rbench_make_boxes(uint64_t seed, rb_box *boxes, size_t n)
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

void rbench_make_pair_boxes(uint64_t seed, const rb_ray *rays, rb_box *boxes,
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

static unsigned pool_sets(size_t set_bytes)
{
    size_t sets = set_bytes ? (RBENCH_ROTATE_BYTES + set_bytes - 1) / set_bytes
                            : 2;
    return sets < 2 ? 2 : sets > 64 ? 64 : (unsigned)sets;
}

static size_t set_bytes(rbench_pool_kind kind, size_t n_rays, size_t n_boxes)
{
    size_t b = n_rays * sizeof(rb_ray);
    if (kind == RBENCH_POOL_PAIRS)
        b += n_rays * sizeof(rb_box);
    else if (kind == RBENCH_POOL_INLINE)
        b += n_boxes * sizeof(rb_box);
    return b;
}

double rbench_pool_bytes(rbench_pool_kind kind, size_t n_rays, size_t n_boxes)
{
    size_t one = set_bytes(kind, n_rays, n_boxes);
    return (double)one * pool_sets(one);
}

/* Page-aligned, so zero-copy paths (CL_MEM_USE_HOST_PTR) may use it. */
static void *page_alloc(size_t bytes)
{
    return aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
}

int rbench_pool_make(rbench_pool *p, rbench_pool_kind kind, const rbench_shape *shape,
                  size_t n_rays, size_t n_boxes, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    if (kind == RBENCH_POOL_PAIRS)
        n_boxes = n_rays;
    if (kind == RBENCH_POOL_SCENE)
        n_boxes = 0;
    p->n_rays = n_rays;
    p->n_boxes = n_boxes;
    p->sets = pool_sets(set_bytes(kind, n_rays, n_boxes));
    p->rays = page_alloc(p->sets * n_rays * sizeof(rb_ray));
    if (n_boxes)
        p->boxes = page_alloc(p->sets * n_boxes * sizeof(rb_box));
    if (!p->rays || (n_boxes && !p->boxes)) {
        rbench_pool_free(p);
        return -1;
    }
    for (unsigned k = 0; k < p->sets; k++) {
        rb_ray *r = p->rays + (size_t)k * n_rays;
        uint64_t s = seed * 1000 + k;
        if (kind == RBENCH_POOL_SCENE && shape)
            shape->rays(s, r, n_rays);
        else
            rbench_make_rays(s, r, n_rays);
        if (kind == RBENCH_POOL_PAIRS)
            rbench_make_pair_boxes(s + 500, r, p->boxes + (size_t)k * n_boxes,
                                n_rays);
        else if (kind == RBENCH_POOL_INLINE)
            rbench_make_boxes(s + 500, p->boxes + (size_t)k * n_boxes, n_boxes);
    }
    return 0;
}

void rbench_pool_free(rbench_pool *p)
{
    free(p->rays);
    free(p->boxes);
    memset(p, 0, sizeof *p);
}
