/* baseline.c - the machine's own limits, measured in the same run on the
 * same cores as the library: a plain copy loop (streaming bandwidth) and
 * the textbook slab loop (ref_loop.c). The library's figures are reported
 * as fractions and ratios of these.
 *
 * The copy loop is built with -fno-tree-loop-distribute-patterns so that
 * the compiler keeps it a loop instead of calling memcpy. It runs twice:
 * with ordinary stores (each written line is first read: 3 transfers for
 * 2 counted bytes) and with streaming stores where the processor has them;
 * the higher figure is the bound, so fractions of it are never flattered.
 *
 * A third loop moves exactly what `pairs` moves and computes nothing: per
 * pair a 32-byte ray and a 24-byte box read, a 16-byte answer written
 * with streaming stores. It is not the bound (it is the slower, three
 * parts reads); it says how much of the gap to the bound is the memory
 * system's answer to that mix and how much is left to the code. The
 * same loop without its stores reads what `pairs` must read and nothing
 * else: no `pairs` can take less time than that, so it caps the fraction
 * of the bound that any code could reach (a core keeps only so many
 * reads in flight, while streaming stores leave it at once). */
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

/* The loops' thread count: at least one, at most MAX_THREADS. */
static unsigned loop_threads(unsigned threads)
{
    if (threads < 1)
        return 1;
    return threads > MAX_THREADS ? MAX_THREADS : threads;
}

/* ---- the pairs traffic loop */

typedef struct traffic_job {
    const float *rays, *boxes; /* 8 and 6 floats a pair */
    float *out;                /* 4 floats a pair, 64-byte aligned */
    size_t n;                  /* pairs, a multiple of 4 */
    int reads_only;            /* one answer for the whole part */
} traffic_job;

/* reads_only is a constant at both calls below, so the traffic loop,
 * the yardstick, keeps no test of it inside (its loop as it was before
 * the reads loop joined it). */
static inline __attribute__((always_inline)) void
traffic_loop(const traffic_job *j, const int reads_only)
{
#ifdef __x86_64__
    /* Four pairs a step: 8 + 6 loads of 16 bytes, folded into the 4
     * answers so that none is dead, 4 streaming stores (or, reads only,
     * folded into one register). */
    __m128 acc = _mm_setzero_ps();
    for (size_t i = 0; i < j->n; i += 4) {
        const float *r = j->rays + i * 8, *b = j->boxes + i * 6;
        __m128 a[4];
        for (int k = 0; k < 4; k++)
            a[k] = _mm_xor_ps(_mm_loadu_ps(r + 8 * k),
                              _mm_loadu_ps(r + 8 * k + 4));
        a[0] = _mm_xor_ps(a[0], _mm_loadu_ps(b));
        a[1] = _mm_xor_ps(a[1], _mm_loadu_ps(b + 4));
        a[2] = _mm_xor_ps(a[2], _mm_loadu_ps(b + 8));
        a[3] = _mm_xor_ps(a[3], _mm_loadu_ps(b + 12));
        a[0] = _mm_xor_ps(a[0], _mm_loadu_ps(b + 16));
        a[1] = _mm_xor_ps(a[1], _mm_loadu_ps(b + 20));
        if (reads_only) {
            acc = _mm_xor_ps(acc, _mm_xor_ps(_mm_xor_ps(a[0], a[1]),
                                             _mm_xor_ps(a[2], a[3])));
            continue;
        }
        for (int k = 0; k < 4; k++)
            _mm_stream_ps(j->out + (i + k) * 4, a[k]);
    }
    if (reads_only)
        _mm_store_ps(j->out, acc); /* so that no load is dead */
    _mm_sfence();
#else
    float sum = 0;
    for (size_t i = 0; i < j->n; i++) {
        float v = j->boxes[i * 6];
        for (int k = 0; k < 8; k++)
            v += j->rays[i * 8 + k];
        sum += v;
        for (int k = 0; k < 4 && !reads_only; k++)
            j->out[i * 4 + k] = v;
    }
    if (reads_only)
        j->out[0] = sum;
#endif
}

static void *traffic_part(void *p)
{
    const traffic_job *j = p;
    if (j->reads_only)
        traffic_loop(j, 1);
    else
        traffic_loop(j, 0);
    return NULL;
}

typedef struct traffic_arg {
    float *rays, *boxes, *out;
    size_t n;
    unsigned threads;
    int reads_only;
} traffic_arg;

static size_t traffic_per_thread(const traffic_arg *c)
{
    return c->n / c->threads / 16 * 16;
}

static int traffic_once(void *p, uint64_t rep, double *device_s)
{
    (void)rep;
    (void)device_s;
    traffic_arg *c = p;
    pthread_t th[MAX_THREADS];
    traffic_job jobs[MAX_THREADS];
    size_t per = traffic_per_thread(c);
    for (unsigned t = 0; t < c->threads; t++) {
        size_t first = t * per;
        jobs[t] = (traffic_job){c->rays + first * 8, c->boxes + first * 6,
                                c->out + first * 4, per, c->reads_only};
        if (pthread_create(&th[t], NULL, traffic_part, &jobs[t]) != 0)
            return -1;
    }
    for (unsigned t = 0; t < c->threads; t++)
        pthread_join(th[t], NULL);
    return 0;
}

double rbench_pairs_traffic_bandwidth(const rbench_plan *plan,
                                      unsigned threads, size_t bytes,
                                      int reads_only, rbench_timing *t,
                                      size_t *bytes_per_call)
{
    /* As many bytes in all as the copy loop moves (2 x `bytes`). */
    size_t n = 2 * bytes / 72 / 64 * 64;
    if (n < 1024)
        n = 1024;
    threads = loop_threads(threads);
    traffic_arg c = {aligned_alloc(64, n * 32), aligned_alloc(64, n * 24),
                     aligned_alloc(64, n * 16), n, threads, reads_only};
    double bw = 0;
    size_t moved = traffic_per_thread(&c) * threads * (reads_only ? 56 : 72);
    *t = (rbench_timing){0};
    if (c.rays && c.boxes && c.out) {
        uint64_t s = 0x9e3779b97f4a7c15ULL;
        uint32_t *w[2] = {(uint32_t *)c.rays, (uint32_t *)c.boxes};
        size_t words[2] = {n * 8, n * 6};
        for (int a = 0; a < 2; a++)
            for (size_t i = 0; i < words[a]; i++)
                w[a][i] = (uint32_t)rbench_xorshift(&s);
        memset(c.out, 0, n * 16);
        if (rbench_time(plan, traffic_once, &c, t) == 0)
            bw = (double)moved / t->median;
    }
    *bytes_per_call = moved;
    free(c.rays);
    free(c.boxes);
    free(c.out);
    return bw;
}

/* ---- the copy loops */

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
    threads = loop_threads(threads);
    copy_arg c = {aligned_alloc(64, n * 4), aligned_alloc(64, n * 4), n,
                  threads, streaming};
    double bw = 0;
    *t = (rbench_timing){0};
    if (c.a && c.b) {
        /* Random bits, not a constant: nothing may compress them. */
        uint64_t s = 0x2545f4914f6cdd1dULL;
        uint32_t *a = (uint32_t *)c.a, *b = (uint32_t *)c.b;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = rbench_xorshift(&s);
            a[i] = (uint32_t)r;
            b[i] = (uint32_t)(r >> 32);
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
