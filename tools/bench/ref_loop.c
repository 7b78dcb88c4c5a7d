/* ref_loop.c - the minimal reference slab loop: count the boxes each ray
 * hits, boxes as six float arrays, the textbook min/max form with a
 * precomputed inverse, nothing else (no validation, no NaN care, no
 * faces). Plain C that the compiler vectorises; built with the same
 * instruction set as the library's fast path. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "bench.h"

#define MAX_THREADS 256

typedef struct ref_data {
    float *lo[3], *hi[3];
    float *o[3], *inv[3];
    uint32_t *counts;
    size_t n_rays, n_boxes;
} ref_data;

typedef struct ref_part {
    const ref_data *d;
    size_t begin, end;
} ref_part;

static void *ref_rays(void *p)
{
    const ref_part *part = p;
    const ref_data *d = part->d;
    const float *lx = d->lo[0], *ly = d->lo[1], *lz = d->lo[2];
    const float *hx = d->hi[0], *hy = d->hi[1], *hz = d->hi[2];
    for (size_t i = part->begin; i < part->end; i++) {
        float ox = d->o[0][i], oy = d->o[1][i], oz = d->o[2][i];
        float ix = d->inv[0][i], iy = d->inv[1][i], iz = d->inv[2][i];
        uint32_t c = 0;
        for (size_t j = 0; j < d->n_boxes; j++) {
            float x1 = (lx[j] - ox) * ix, x2 = (hx[j] - ox) * ix;
            float y1 = (ly[j] - oy) * iy, y2 = (hy[j] - oy) * iy;
            float z1 = (lz[j] - oz) * iz, z2 = (hz[j] - oz) * iz;
            float tmin = x1 < x2 ? x1 : x2, tmax = x1 < x2 ? x2 : x1;
            float ymin = y1 < y2 ? y1 : y2, ymax = y1 < y2 ? y2 : y1;
            float zmin = z1 < z2 ? z1 : z2, zmax = z1 < z2 ? z2 : z1;
            tmin = tmin > ymin ? tmin : ymin;
            tmin = tmin > zmin ? tmin : zmin;
            tmin = tmin > 0.0f ? tmin : 0.0f;
            tmax = tmax < ymax ? tmax : ymax;
            tmax = tmax < zmax ? tmax : zmax;
            c += tmin <= tmax;
        }
        d->counts[i] = c;
    }
    return NULL;
}

typedef struct ref_arg {
    ref_data d;
    unsigned threads;
} ref_arg;

static int ref_once(void *p, uint64_t rep, double *device_s)
{
    ref_arg *a = p;
    (void)rep;
    (void)device_s;
    pthread_t th[MAX_THREADS];
    ref_part parts[MAX_THREADS];
    size_t per = (a->d.n_rays + a->threads - 1) / a->threads;
    for (unsigned t = 0; t < a->threads; t++) {
        size_t b = t * per, e = b + per < a->d.n_rays ? b + per : a->d.n_rays;
        parts[t] = (ref_part){&a->d, b, e};
        if (pthread_create(&th[t], NULL, ref_rays, &parts[t]) != 0)
            return -1;
    }
    for (unsigned t = 0; t < a->threads; t++)
        pthread_join(th[t], NULL);
    return 0;
}

double rbench_reference_count(const rbench_plan *plan, unsigned threads,
                           size_t n_rays, size_t n_boxes, rbench_timing *t)
{
    ref_arg a = {.threads = threads < 1 ? 1
                            : threads > MAX_THREADS ? MAX_THREADS
                                                    : threads};
    rb_ray *rays = malloc(n_rays * sizeof *rays);
    rb_box *boxes = malloc(n_boxes * sizeof *boxes);
    a.d.n_rays = n_rays;
    a.d.n_boxes = n_boxes;
    a.d.counts = malloc(n_rays * sizeof *a.d.counts);
    for (int k = 0; k < 3; k++) {
        a.d.lo[k] = aligned_alloc(64, (n_boxes + 16) * 4);
        a.d.hi[k] = aligned_alloc(64, (n_boxes + 16) * 4);
        a.d.o[k] = malloc(n_rays * 4);
        a.d.inv[k] = malloc(n_rays * 4);
    }
    rbench_make_rays(11, rays, n_rays);
    rbench_make_boxes(12, boxes, n_boxes);
    for (size_t j = 0; j < n_boxes; j++) {
        for (int k = 0; k < 3; k++) {
            a.d.lo[k][j] = boxes[j].min[k];
            a.d.hi[k][j] = boxes[j].max[k];
        }
    }
    for (size_t i = 0; i < n_rays; i++) {
        for (int k = 0; k < 3; k++) {
            a.d.o[k][i] = rays[i].origin[k];
            a.d.inv[k][i] = 1.0f / rays[i].dir[k];
        }
    }
    double rate = 0;
    if (rbench_time(plan, ref_once, &a, t) == 0)
        rate = (double)n_rays * (double)n_boxes / t->median;
    for (int k = 0; k < 3; k++) {
        free(a.d.lo[k]);
        free(a.d.hi[k]);
        free(a.d.o[k]);
        free(a.d.inv[k]);
    }
    free(a.d.counts);
    free(rays);
    free(boxes);
    return rate;
}
