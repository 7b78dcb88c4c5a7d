/* baseline.c - the machine's own limits, measured in the same run on the
 * same cores as the library: a plain copy loop (streaming bandwidth) and
 * the textbook slab loop (ref_loop.c). The library's figures are reported
 * as fractions and ratios of these.
 *
 * The copy loop is built with -fno-tree-loop-distribute-patterns so that
 * the compiler keeps it a loop instead of calling memcpy. It runs twice:
 * with ordinary stores (each written line is first read: 3 transfers for
 * 2 counted bytes) and with streaming stores where the processor has them;
 * the higher figure is the bound, so fractions of it are never flattered. */
#ifdef __x86_64__
#include <immintrin.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_THREADS 256

typedef struct copy_job {
    const float *src;
    float *dst;
    size_t n;
    int streaming;
} copy_job;

static void copy_plain(const float *restrict src, float *restrict dst,
                       size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

#ifdef __x86_64__
/* SSE2 is baseline on x86-64; dst is 64-byte aligned and n a multiple of
 * 16 (the caller's parts are). */
static void copy_streaming(const float *restrict src, float *restrict dst,
                           size_t n)
{
    for (size_t i = 0; i < n; i += 4)
        _mm_stream_ps(dst + i, _mm_load_ps(src + i));
    _mm_sfence();
}
#endif

static void *copy_part(void *p)
{
    copy_job *j = p;
#ifdef __x86_64__
    if (j->streaming) {
        copy_streaming(j->src, j->dst, j->n);
        return NULL;
    }
#endif
    copy_plain(j->src, j->dst, j->n);
    return NULL;
}

typedef struct copy_arg {
    float *a, *b;
    size_t n;
    unsigned threads;
    int streaming;
} copy_arg;

static int copy_once(void *p, uint64_t rep, double *device_s)
{
    (void)device_s;
    copy_arg *c = p;
    pthread_t th[MAX_THREADS];
    copy_job jobs[MAX_THREADS];
    size_t per = c->n / c->threads / 16 * 16;
    /* Alternate direction so neither array stays warm in a cache. */
    const float *src = rep % 2 ? c->b : c->a;
    float *dst = rep % 2 ? c->a : c->b;
    for (unsigned t = 0; t < c->threads; t++) {
        jobs[t] = (copy_job){src + t * per, dst + t * per, per,
                             c->streaming};
        if (pthread_create(&th[t], NULL, copy_part, &jobs[t]) != 0)
            return -1;
    }
    for (unsigned t = 0; t < c->threads; t++)
        pthread_join(th[t], NULL);
    return 0;
}

double rbench_copy_bandwidth(const rbench_plan *plan, unsigned threads,
                          int streaming, size_t bytes, rbench_timing *t,
                          size_t *bytes_per_call)
{
    /* `bytes` each way (256 MiB by default): far beyond any cache. */
    size_t n = bytes / 4 / 64 * 64;
    if (n < 1024)
        n = 1024;
    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    copy_arg c = {aligned_alloc(64, n * 4), aligned_alloc(64, n * 4), n,
                  threads, streaming};
    double bw = 0;
    *t = (rbench_timing){0};
    if (c.a && c.b) {
        /* Random bits, not a constant: nothing may compress them. */
        uint64_t s = 0x2545f4914f6cdd1dULL;
        uint32_t *a = (uint32_t *)c.a, *b = (uint32_t *)c.b;
        for (size_t i = 0; i < n; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            a[i] = (uint32_t)s;
            b[i] = (uint32_t)(s >> 32);
        }
        if (rbench_time(plan, copy_once, &c, t) == 0)
            bw = 2.0 * (double)(n / threads / 16 * 16 * threads) * 4 /
                 t->median;
    }
    *bytes_per_call = 2 * (n / threads / 16 * 16 * threads) * 4;
    free(c.a);
    free(c.b);
    return bw;
}
