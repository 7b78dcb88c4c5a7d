/* bench_common.c - see bench_common.h. */
#include "bench_common.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/ray_order.h"
#include "internal.h"

double bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void bench_sort(double *v, int n)
{
    if (n > 0)
        qsort(v, (size_t)n, sizeof *v, cmp_double);
}

double bench_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

uint64_t bench_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

float bench_uniform(uint64_t *s)
{
    return (float)((double)(bench_rng_next(s) >> 40) / 16777216.0);
}

void bench_random_rays(uint64_t *s, rb_ray *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++) {
            r[i].origin[a] = bench_uniform(s);
            r[i].dir[a] = bench_uniform(s) * 2 - 1;
        }
        r[i].tmin = 0;
        r[i].tmax = INFINITY;
    }
}

int bench_turn_rounds(int repeat)
{
    int rounds = 2 * repeat + 1;
    return rounds < BENCH_TURN_ROUNDS_MAX ? rounds : BENCH_TURN_ROUNDS_MAX;
}

int bench_results_take(rb_results *res, size_t n)
{
    *res = (rb_results){.capacity = n};
    res->hits = malloc((n ? n : 1) * sizeof *res->hits);
    res->any = malloc(n ? n : 1);
    return res->hits && res->any ? 0 : -1;
}

void bench_results_give(rb_results *res)
{
    free(res->hits);
    free(res->any);
    res->hits = NULL;
    res->any = NULL;
}

int bench_walk_order(rb_context *ctx, int repeat, const rb_ray *rays,
                     size_t n, const float lo[3], const float hi[3],
                     rb_ray *sorted, uint32_t *order, double *ms)
{
    uint64_t *scratch = malloc(2 * (n ? n : 1) * sizeof *scratch);
    if (!scratch)
        return -1;
    double t[64];
    int runs = repeat < 1 ? 1 : repeat < 64 ? repeat : 64;
    for (int k = 0; k < runs; k++) {
        double t0 = bench_now_ms();
        rb_ray_order(ctx->pool, rays, 3, n, lo, hi, 0, scratch, order);
        t[k] = bench_now_ms() - t0;
    }
    for (size_t i = 0; sorted && i < n; i++)
        sorted[i] = rays[order[i]];
    *ms = bench_median(t, runs);
    free(scratch);
    return 0;
}

double bench_query_turn(void *side, int occluded)
{
    bench_query_side *q = side;
    rb_query rq = {.mode = occluded ? RB_MODE_ANY : RB_MODE_NEAREST,
                   .dims = 3, .rays = q->rays, .n_rays = q->n,
                   .scene = q->scene, .max_hits = 1};
    double t0 = bench_now_ms();
    int rc = rb_intersect(q->ctx, &rq, q->res);
    double ms = bench_now_ms() - t0;
    return rc == RB_OK ? ms : -1;
}
