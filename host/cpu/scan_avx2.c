/*
 * scan_avx2.c - every-box scans with eight boxes per AVX2 register.
 *
 * The slab formula is the one of slab.h. _mm256_max_ps(n, e) returns its
 * second operand when either is NaN, which is exactly "take n only when
 * n > e"; likewise _mm256_min_ps(f, x). Compiled with -mavx2 only (no
 * -mfma, and -ffp-contract=off), and chosen at run time.
 */
#ifdef RB_HAVE_AVX2
#include <immintrin.h>

#include "scan.h"

typedef struct planes8 {
    const float *near[3];
    const float *far[3];
    __m256 o[3], inv[3], tmin, tmax;
} planes8;

static inline void setup(const rb_ray_prep *r, const rb_boxset *b,
                         planes8 *p)
{
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        p->near[a] = s ? rb_boxset_hi(b, a) : rb_boxset_lo(b, a);
        p->far[a] = s ? rb_boxset_lo(b, a) : rb_boxset_hi(b, a);
        p->o[a] = _mm256_set1_ps(r->o[a]);
        p->inv[a] = _mm256_set1_ps(r->inv[a]);
    }
    p->tmin = _mm256_set1_ps(r->tmin);
    p->tmax = _mm256_set1_ps(r->tmax);
}

/* Hit mask of boxes j..j+7; *e_out gets their t_enter. */
static inline __m256 test8(const planes8 *p, size_t j, __m256 *e_out)
{
    __m256 e = p->tmin, x = p->tmax;
    for (int a = 0; a < 3; a++) {
        __m256 n = _mm256_mul_ps(
            _mm256_sub_ps(_mm256_load_ps(p->near[a] + j), p->o[a]),
            p->inv[a]);
        __m256 f = _mm256_mul_ps(
            _mm256_sub_ps(_mm256_load_ps(p->far[a] + j), p->o[a]),
            p->inv[a]);
        e = _mm256_max_ps(n, e);
        x = _mm256_min_ps(f, x);
    }
    *e_out = e;
    __m256 inf = _mm256_set1_ps(INFINITY);
    return _mm256_and_ps(_mm256_cmp_ps(e, x, _CMP_LE_OQ),
                         _mm256_cmp_ps(e, inf, _CMP_LT_OQ));
}

static uint32_t count_avx2(const rb_ray_prep *r, const rb_boxset *b,
                           size_t begin, size_t end)
{
    planes8 p;
    setup(r, b, &p);
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    size_t j = begin;
    __m256 e;
    /* Two independent accumulators: 16 boxes per step. */
    for (; j + 16 <= end; j += 16) {
        __m256 h0 = test8(&p, j, &e);
        __m256 h1 = test8(&p, j + 8, &e);
        acc0 = _mm256_sub_epi32(acc0, _mm256_castps_si256(h0));
        acc1 = _mm256_sub_epi32(acc1, _mm256_castps_si256(h1));
    }
    for (; j < end; j += 8) {
        __m256 h = test8(&p, j, &e);
        acc0 = _mm256_sub_epi32(acc0, _mm256_castps_si256(h));
    }
    __m256i acc = _mm256_add_epi32(acc0, acc1);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc),
                              _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(s);
}

static int any_avx2(const rb_ray_prep *r, const rb_boxset *b, size_t begin,
                    size_t end)
{
    planes8 p;
    setup(r, b, &p);
    __m256 e;
    for (size_t j = begin; j < end; j += 8)
        if (_mm256_movemask_ps(test8(&p, j, &e)))
            return 1;
    return 0;
}

static void nearest_avx2(const rb_ray_prep *r, const rb_boxset *b,
                         size_t begin, size_t end, float *best_t,
                         int32_t *best_box)
{
    planes8 p;
    setup(r, b, &p);
    /* Per lane: the least t_enter seen and its box; a lane sees its boxes
     * in ascending order, so "<" keeps the lowest index on ties. */
    __m256 bt = _mm256_set1_ps(INFINITY);
    __m256i bi = _mm256_set1_epi32(-1);
    __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)begin),
                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i step = _mm256_set1_epi32(8);
    __m256 e;
    for (size_t j = begin; j < end; j += 8) {
        __m256 h = test8(&p, j, &e);
        __m256 better = _mm256_and_ps(h, _mm256_cmp_ps(e, bt, _CMP_LT_OQ));
        bt = _mm256_blendv_ps(bt, e, better);
        bi = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(bi), _mm256_castsi256_ps(idx), better));
        idx = _mm256_add_epi32(idx, step);
    }
    float lt[8];
    int32_t li[8];
    _mm256_storeu_ps(lt, bt);
    _mm256_storeu_si256((__m256i *)li, bi);
    float t = *best_t;
    int32_t box = *best_box;
    for (int l = 0; l < 8; l++) {
        if (li[l] < 0)
            continue;
        /* Everything in this block has a higher index than *best_box. */
        if (lt[l] < t || (lt[l] == t && box >= (int32_t)begin &&
                          li[l] < box)) {
            t = lt[l];
            box = li[l];
        }
    }
    *best_t = t;
    *best_box = box;
}

static size_t hits_avx2(const rb_ray_prep *r, const rb_boxset *b,
                        size_t begin, size_t end, uint32_t *idx)
{
    planes8 p;
    setup(r, b, &p);
    size_t n = 0;
    __m256 e;
    for (size_t j = begin; j < end; j += 8) {
        unsigned m = (unsigned)_mm256_movemask_ps(test8(&p, j, &e));
        while (m) {
            idx[n++] = (uint32_t)(j + (size_t)__builtin_ctz(m));
            m &= m - 1;
        }
    }
    return n;
}

const rb_scan_kernels rb_scan_avx2 = {
    .simd = "avx2",
    .count = count_avx2,
    .any = any_avx2,
    .nearest = nearest_avx2,
    .hits = hits_avx2,
    .pairs = rb_pairs_scalar,
};
#else
/* Keeps the translation unit non-empty on other processors. */
typedef int rb_scan_avx2_unused;
#endif
