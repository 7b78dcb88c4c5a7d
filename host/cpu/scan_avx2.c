/*
 * scan_avx2.c - every-box scans with eight boxes per AVX2 register.
 *
 * The slab formula is the one of slab.h. _mm256_max_ps(n, e) returns its
 * second operand when either is NaN, which is exactly "take n only when
 * n > e"; likewise _mm256_min_ps(f, x). Compiled with -mavx2 only (no
 * -mfma, and -ffp-contract=off), and chosen at run time.
 */
#ifdef RB_HAVE_AVX2
#include <float.h>
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


/* ---- pairs: 8 rays against their 8 boxes per step.
 * Rays (8 floats each) and boxes (6 floats, loaded as 8 with the next
 * box's first two) are turned into one register per field by 8x8
 * transposes; validation, flush, 1/d, the slab formula with faces, and the
 * rb_hit records are all computed in registers. A block with any invalid
 * element is redone by the scalar path, which names the first one. */

static inline void transpose8(__m256 r[8])
{
    __m256 t[8], s[8];
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        s[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        s[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xee);
        s[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        s[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xee);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x20);
        r[k + 4] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x31);
    }
}

static inline __m256i blend_i(__m256i a, __m256i b, __m256 mask)
{
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a),
                                                _mm256_castsi256_ps(b), mask));
}

/* The fast path's input check, two integer ops an input on top of the
 * magnitude: the largest magnitude says whether every input is finite (NaN
 * and inf have the largest magnitudes as integers, and an integer max does
 * not lose NaNs the way maxps does), and the smallest of magnitude - 1,
 * unsigned, says whether some input is subnormal (zero wraps to the
 * largest value). A block with a subnormal is left to the scalar path, so
 * the fast path never needs the R7 flush: with no subnormal input it
 * changes nothing. */
typedef struct in8 {
    __m256i max_mag;       /* running max of magnitude bits */
    __m256i min_mag_less1; /* running unsigned min of magnitude bits - 1 */
} in8;

static inline __m256i note_normal(in8 *acc, __m256 x)
{
    __m256i mag = _mm256_and_si256(_mm256_castps_si256(x),
                                   _mm256_set1_epi32(0x7fffffff));
    acc->min_mag_less1 = _mm256_min_epu32(
        acc->min_mag_less1, _mm256_sub_epi32(mag, _mm256_set1_epi32(1)));
    return mag;
}

/* Notes x as an input that must be finite and not subnormal; returns x. */
static inline __m256 take8(in8 *acc, __m256 x)
{
    acc->max_mag = _mm256_max_epi32(acc->max_mag, note_normal(acc, x));
    return x;
}

/* Lanes whose inputs are none subnormal: unsigned magnitude - 1 >=
 * 0x7fffff, that is no magnitude in [1, 0x7fffff]. */
static inline __m256 in8_no_subnormal(const in8 *acc)
{
    __m256i limit = _mm256_set1_epi32(0x007fffff);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(
        _mm256_max_epu32(acc->min_mag_less1, limit), acc->min_mag_less1));
}

/* Lanes whose inputs are all finite and none subnormal. */
static inline __m256 in8_ok(const in8 *acc)
{
    __m256i finite = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7f800000),
                                        acc->max_mag);
    return _mm256_and_ps(in8_no_subnormal(acc), _mm256_castsi256_ps(finite));
}

/* Validates, computes and stores pairs i..i+7; returns 0 if some element
 * is invalid (nothing is stored then). */
/* always_inline: as a call, with `stream` a run-time argument, GCC kept it
 * out of line. */
static inline __attribute__((always_inline)) int
pairs8(const rb_ray *rays, const rb_box *boxes, size_t i, rb_hit *out,
       int stream)
{
    /* Rays first, boxes second: 16 ymm registers do not hold both
     * transposes at once. */
    __m256 r[8], b[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps(&rays[i + k].origin[0]);
    transpose8(r); /* ox oy oz dx dy dz tmin tmax */
    in8 acc = {_mm256_setzero_si256(), _mm256_set1_epi32(-1)};
    __m256 o[3], inv[3], lo[3], hi[3];
    for (int a = 0; a < 3; a++) {
        o[a] = take8(&acc, r[a]);
        inv[a] = _mm256_div_ps(_mm256_set1_ps(1.0f), take8(&acc, r[3 + a]));
    }
    __m256 tmin = take8(&acc, r[6]);
    /* tmax may be +inf: only NaN and -inf are refused. */
    __m256 tmax = r[7];
    (void)note_normal(&acc, tmax);
    __m256 ok = _mm256_cmp_ps(tmax, _mm256_set1_ps(-INFINITY), _CMP_GT_OQ);
    ok = _mm256_and_ps(ok, _mm256_cmp_ps(tmin, tmax, _CMP_LE_OQ));

    for (int k = 0; k < 8; k++)
        b[k] = _mm256_loadu_ps(&boxes[i + k].min[0]); /* +2 floats of i+k+1 */
    transpose8(b); /* lx ly lz hx hy hz (junk) (junk) */
    for (int a = 0; a < 3; a++) {
        lo[a] = take8(&acc, b[a]);
        hi[a] = take8(&acc, b[3 + a]);
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(lo[a], hi[a], _CMP_LE_OQ));
    }
    ok = _mm256_and_ps(ok, in8_ok(&acc));
    if (_mm256_movemask_ps(ok) != 0xff)
        return 0;

    __m256 e = _mm256_set1_ps(-INFINITY), x = _mm256_set1_ps(INFINITY);
    __m256i ef = _mm256_setzero_si256(), xf = _mm256_setzero_si256();
    for (int a = 0; a < 3; a++) {
        /* blendv reads the sign bit of inv: s = 1 picks max as near and
         * makes the entry face the + face of the axis. */
        __m256 nb = _mm256_blendv_ps(lo[a], hi[a], inv[a]);
        __m256 fb = _mm256_blendv_ps(hi[a], lo[a], inv[a]);
        __m256 n = _mm256_mul_ps(_mm256_sub_ps(nb, o[a]), inv[a]);
        __m256 f = _mm256_mul_ps(_mm256_sub_ps(fb, o[a]), inv[a]);
        __m256 neg_face = _mm256_castsi256_ps(_mm256_set1_epi32(1 + 2 * a));
        __m256 pos_face = _mm256_castsi256_ps(_mm256_set1_epi32(2 + 2 * a));
        __m256 take_n = _mm256_cmp_ps(n, e, _CMP_GT_OQ);
        __m256 take_f = _mm256_cmp_ps(f, x, _CMP_LT_OQ);
        e = _mm256_blendv_ps(e, n, take_n);
        x = _mm256_blendv_ps(x, f, take_f);
        ef = blend_i(ef, _mm256_castps_si256(
                             _mm256_blendv_ps(neg_face, pos_face, inv[a])),
                     take_n);
        xf = blend_i(xf, _mm256_castps_si256(
                             _mm256_blendv_ps(pos_face, neg_face, inv[a])),
                     take_f);
    }
    __m256 e_in = _mm256_cmp_ps(e, tmin, _CMP_GE_OQ);
    __m256 x_in = _mm256_cmp_ps(x, tmax, _CMP_LE_OQ);
    /* + 0: distances are never -0 (see slab.h) */
    __m256 te = _mm256_add_ps(_mm256_blendv_ps(tmin, e, e_in),
                              _mm256_setzero_ps());
    __m256 tx = _mm256_add_ps(_mm256_blendv_ps(tmax, x, x_in),
                              _mm256_setzero_ps());
    __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 hit = _mm256_and_ps(_mm256_cmp_ps(te, tx, _CMP_LE_OQ),
                               _mm256_cmp_ps(te, inf, _CMP_LT_OQ));
    __m256i hit_i = _mm256_castps_si256(hit);
    ef = _mm256_and_si256(ef, _mm256_castps_si256(e_in));
    xf = _mm256_and_si256(xf, _mm256_castps_si256(x_in));
    /* rb_hit's last word, little endian: hit | face << 8 | exit_face << 16 */
    __m256i word = _mm256_or_si256(
        _mm256_srli_epi32(hit_i, 31),
        _mm256_or_si256(_mm256_slli_epi32(ef, 8), _mm256_slli_epi32(xf, 16)));
    word = _mm256_and_si256(word, hit_i);
    __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)i),
                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i box = blend_i(_mm256_set1_epi32(-1), idx, hit);
    __m256 v0 = _mm256_blendv_ps(inf, te, hit);
    __m256 v1 = _mm256_blendv_ps(inf, tx, hit);
    __m256 v2 = _mm256_castsi256_ps(box), v3 = _mm256_castsi256_ps(word);

    __m256 a0 = _mm256_unpacklo_ps(v0, v1), a1 = _mm256_unpackhi_ps(v0, v1);
    __m256 c0 = _mm256_unpacklo_ps(v2, v3), c1 = _mm256_unpackhi_ps(v2, v3);
    __m256 q0 = _mm256_shuffle_ps(a0, c0, 0x44); /* records 0 | 4 */
    __m256 q1 = _mm256_shuffle_ps(a0, c0, 0xee); /* records 1 | 5 */
    __m256 q2 = _mm256_shuffle_ps(a1, c1, 0x44); /* records 2 | 6 */
    __m256 q3 = _mm256_shuffle_ps(a1, c1, 0xee); /* records 3 | 7 */
    float *dst = (float *)&out[i];
    __m256 o0 = _mm256_permute2f128_ps(q0, q1, 0x20);
    __m256 o1 = _mm256_permute2f128_ps(q2, q3, 0x20);
    __m256 o2 = _mm256_permute2f128_ps(q0, q1, 0x31);
    __m256 o3 = _mm256_permute2f128_ps(q2, q3, 0x31);
    if (stream) {
        _mm256_stream_ps(dst, o0);
        _mm256_stream_ps(dst + 8, o1);
        _mm256_stream_ps(dst + 16, o2);
        _mm256_stream_ps(dst + 24, o3);
    } else {
        _mm256_storeu_ps(dst, o0);
        _mm256_storeu_ps(dst + 8, o1);
        _mm256_storeu_ps(dst + 16, o2);
        _mm256_storeu_ps(dst + 24, o3);
    }
    return 1;
}

static size_t pairs_avx2(const void *rays, const void *boxes, unsigned dims,
                         size_t begin, size_t end, rb_hit *out,
                         int stream_out, rb_element_kind *bad_kind)
{
    if (dims != 3)
        return rb_pairs_scalar(rays, boxes, dims, begin, end, out, 0,
                               bad_kind);
    /* Streaming stores skip reading the output lines before writing them;
     * they need 32-byte aligned records (out[i] for i % 8 == 0). */
    int stream = stream_out && ((uintptr_t)&out[begin] & 31) == 0;
    size_t i = begin;
    /* i + 8 < end: the last box load reads 8 bytes of box i + 8. */
    while (i + 8 < end) {
        if (!pairs8(rays, boxes, i, out, stream)) {
            size_t bad = rb_pairs_scalar(rays, boxes, dims, i, i + 8, out, 0,
                                         bad_kind);
            if (bad < i + 8) {
                _mm_sfence();
                return bad;
            }
        }
        i += 8;
    }
    if (stream)
        _mm_sfence(); /* streaming stores are weakly ordered */
    return rb_pairs_scalar(rays, boxes, dims, i, end, out, 0, bad_kind);
}

const rb_scan_kernels rb_scan_avx2 = {
    .simd = "avx2",
    .count = count_avx2,
    .any = any_avx2,
    .nearest = nearest_avx2,
    .hits = hits_avx2,
    .pairs = pairs_avx2,
};
#else
/* Keeps the translation unit non-empty on other processors. */
typedef int rb_scan_avx2_unused;
#endif
