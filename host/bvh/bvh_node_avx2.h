/*
 * bvh_node_avx2.h - a node's eight slots against one ray in AVX2
 * registers: the slot distances and the slot compares that the one-ray
 * walk (bvh_walk_avx2.c, test_node) and the ray streams
 * (bvh_stream_avx2.c) share, so both compute the same bits. Include
 * only where -mavx2 is on (no FMA, -ffp-contract=off).
 *
 * _mm256_max_ps(n, e) returns its second operand when either is NaN,
 * which is exactly "take n only when n > e" of the scalar slab step;
 * likewise _mm256_min_ps(f, x).
 */
#ifndef RB_BVH_NODE_AVX2_H
#define RB_BVH_NODE_AVX2_H

#include <immintrin.h>
#include <math.h>

#include "bvh.h"

/* Entry (*e) and exit (*x, before tmax) distances of the eight slots
 * whose near and far plane rows of each axis are near[a] and far[a], as
 * rb_slab_hit computes them: (plane - o) * inv, the max over near planes
 * starting at tmin, the min over far planes. */
static inline void rb_node8_span(const __m256 near[3], const __m256 far[3],
                                 const __m256 o[3], const __m256 inv[3],
                                 __m256 tmin, __m256 *e_out, __m256 *x_out)
{
    __m256 e = tmin, x = _mm256_set1_ps(INFINITY);
    for (int a = 0; a < 3; a++) {
        __m256 ne = _mm256_mul_ps(_mm256_sub_ps(near[a], o[a]), inv[a]);
        __m256 fa = _mm256_mul_ps(_mm256_sub_ps(far[a], o[a]), inv[a]);
        e = _mm256_max_ps(ne, e);
        x = _mm256_min_ps(fa, x);
    }
    *e_out = e;
    *x_out = x;
}

/* The slots with e <= x and e <= cap (cap: the walk's limit, at most
 * FLT_MAX, which stands in for "e finite"; x and cap are never NaN): a
 * box tree's test of its boxes and of its subtrees, unpadded (see the
 * top of bvh_walk.inc). */
static inline unsigned rb_node8_pass(__m256 e, __m256 x, __m256 cap)
{
    return (unsigned)_mm256_movemask_ps(
        _mm256_cmp_ps(e, _mm256_min_ps(x, cap), _CMP_LE_OQ));
}

/* The same with the exit padded for the shape tests' own rounding
 * (RB_BVH_PAD_UP/DOWN): a shape or joint tree's slots. */
static inline unsigned rb_node8_padded(__m256 e, __m256 x, __m256 cap)
{
    __m256 xp = _mm256_mul_ps(
        x, _mm256_blendv_ps(
               _mm256_set1_ps(RB_BVH_PAD_DOWN), _mm256_set1_ps(RB_BVH_PAD_UP),
               _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ)));
    return (unsigned)_mm256_movemask_ps(
        _mm256_cmp_ps(e, _mm256_min_ps(xp, cap), _CMP_LE_OQ));
}

#endif
