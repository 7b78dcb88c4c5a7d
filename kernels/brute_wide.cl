/*
 * brute_wide.cl - the brute-force kernels for CPU OpenCL devices (PoCL),
 * built when the program is compiled with -DRB_WIDE. Same names, same
 * arguments and bit for bit the same answers as brute.cl's tiled kernels.
 *
 * A CPU device runs a work-group's items one after another on one core,
 * so __local tiles and barriers only add work there, and a loop over one
 * box at a time stays scalar. Here each item tests its ray against eight
 * consecutive boxes per step with float8 arithmetic on the boxset's six
 * arrays (which the compiler maps onto SIMD registers), straight from
 * global memory: the caches do what the tiles do on a GPU. Boxes past the
 * last multiple of eight go through the scalar form of the same formula.
 *
 * Written for how PoCL (LLVM) compiles it, measured there: it does not
 * unroll the short loops over axes and records by itself, which leaves
 * the float8 arrays on the stack, hence the "#pragma unroll"s; shuffle2
 * with a constant mask does not become one shuffle instruction, while
 * clang's __builtin_shufflevector does (RB_SHUFFLE2); any() costs a
 * horizontal reduction and three branches, so any and all test it once
 * per 32 boxes. None of this changes a result.
 */
#ifdef RB_WIDE

#if defined(__clang__)
#define RB_SHUFFLE2(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#define RB_ALWAYS_INLINE __attribute__((always_inline))
#else
#define RB_SHUFFLE2(a, b, ...) shuffle2(a, b, (uint8)(__VA_ARGS__))
#define RB_ALWAYS_INLINE
#endif

typedef struct rb_planes {
    __global const float *near[3];
    __global const float *far[3];
} rb_planes;

/* The arrays this ray reads as near and far planes (sign of inv). */
static inline rb_planes rb_wide_planes(const rb_ray_prep *r,
                                       __global const float *boxes,
                                       uint stride)
{
    rb_planes p;
    #pragma unroll
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        p.near[a] = boxes + (size_t)(s ? 3 + a : a) * stride;
        p.far[a] = boxes + (size_t)(s ? a : 3 + a) * stride;
    }
    return p;
}

/* Boxes j..j+7: the hit mask (-1 = hit) and their t_enter/t_exit, with E
 * starting at tmin and X at tmax as in rb_tile_hit. */
static inline int8 rb_hit8(const rb_ray_prep *r, const rb_planes *p, uint j,
                           float8 *t_enter, float8 *t_exit)
{
    float8 e = (float8)(r->tmin), x = (float8)(r->tmax);
    #pragma unroll
    for (int a = 0; a < 3; a++) {
        float8 o = (float8)(r->o[a]), inv = (float8)(r->inv[a]);
        float8 n = (vload8(0, p->near[a] + j) - o) * inv;
        float8 f = (vload8(0, p->far[a] + j) - o) * inv;
        e = select(e, n, n > e);
        x = select(x, f, f < x);
    }
    *t_enter = e + 0.0f;
    *t_exit = x + 0.0f;
    return (e <= x) & (e < (float8)(INFINITY));
}

/* Box j alone: rb_tile_hit on global memory. */
static inline int rb_hit1(const rb_ray_prep *r, const rb_planes *p, uint j,
                          float *t_enter, float *t_exit)
{
    float e = r->tmin, x = r->tmax;
    #pragma unroll
    for (int a = 0; a < 3; a++)
        rb_slab_step(p->near[a][j], p->far[a][j], r->o[a], r->inv[a], &e,
                     &x);
    *t_enter = e + 0.0f;
    *t_exit = x + 0.0f;
    return rb_slab_accept(e, x);
}

/* Pairs, eight per item: item g answers pairs 8g .. 8g+7 (the host
 * launches ceil(n / 8) items). Eight 3D rays and boxes are transposed in
 * registers into one float8 per field, run through rb_slab_full's steps
 * lane-wise, and transposed back into eight rb_hit records. The last,
 * partial group and 2D input take the scalar form. */
static inline float8 rb_flush8(float8 x)
{
    return select(x, copysign((float8)(0.0f), x), fabs(x) < (float8)(FLT_MIN));
}

/* r[k] = field k of the eight records r[0..7] (an 8x8 transpose). */
/* Always inlined: as a call (PoCL kept it one) r[] lives in memory. */
static inline RB_ALWAYS_INLINE void rb_transpose8(float8 r[8])
{
    float8 t[8], s[8];
    #pragma unroll
    for (int k = 0; k < 8; k += 2) {
        t[k] = RB_SHUFFLE2(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[k + 1] = RB_SHUFFLE2(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    #pragma unroll
    for (int k = 0; k < 8; k += 4) {
        s[k] = RB_SHUFFLE2(t[k], t[k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        s[k + 1] = RB_SHUFFLE2(t[k], t[k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        s[k + 2] = RB_SHUFFLE2(t[k + 1], t[k + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        s[k + 3] = RB_SHUFFLE2(t[k + 1], t[k + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    #pragma unroll
    for (int k = 0; k < 4; k++) {
        r[k] = RB_SHUFFLE2(s[k], s[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[k + 4] = RB_SHUFFLE2(s[k], s[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* R6 for one pair, lowest index first, the ray before its box. */
static inline void rb_check_pair(__global const float *rays,
                                 __global const float *boxes, uint dims,
                                 uint i, uint base, __global uint *bad)
{
    if (!rb_ray_ok(rays, dims, i))
        rb_note_bad(bad, (base + i) * 2);
    else if (!rb_box_ok(boxes, dims, i))
        rb_note_bad(bad, (base + i) * 2 + 1);
}

static inline int8 rb_finite8(float8 x)
{
    return fabs(x) <= (float8)(FLT_MAX);
}

__kernel void rb_pairs(__global const float *rays,
                       __global const float *boxes, uint dims, uint n,
                       uint base, __global rb_hit *hits,
                       __global uint *bad)
{
    uint i0 = (uint)get_global_id(0) * 8;
    if (i0 >= n)
        return;
    /* i0 + 8 < n: the last box load reads two floats of box i0 + 8. */
    if (dims != 3 || i0 + 8 >= n) {
        for (uint i = i0; i < n && i < i0 + 8; i++) {
            rb_check_pair(rays, boxes, dims, i, base, bad);
            rb_ray_prep r = rb_load_ray(rays, dims, i);
            float lo[3], hi[3];
            rb_load_box(boxes, dims, i, lo, hi);
            rb_hit h;
            rb_slab_full(&r, lo, hi, &h);
            h.box = h.hit ? (int)(base + i) : -1;
            hits[i] = h;
        }
        return;
    }
    /* Rays first, boxes second: 16 registers do not hold both
     * transposes at once. */
    float8 r[8], b[8], o[3], inv[3], lo[3], hi[3];
    #pragma unroll
    for (int k = 0; k < 8; k++)
        r[k] = vload8(0, rays + (size_t)(i0 + (uint)k) * 8);
    rb_transpose8(r); /* ox oy oz dx dy dz tmin tmax */
    float8 tmin = rb_flush8(r[6]), tmax = rb_flush8(r[7]);
    int8 ok = (r[7] > (float8)(-INFINITY)) & (tmin <= tmax);
    #pragma unroll
    for (int a = 0; a < 3; a++) {
        ok &= rb_finite8(r[a]) & rb_finite8(r[3 + a]);
        o[a] = rb_flush8(r[a]);
        inv[a] = 1.0f / rb_flush8(r[3 + a]);
    }
    ok &= rb_finite8(r[6]);
    #pragma unroll
    for (int k = 0; k < 8; k++)
        b[k] = vload8(0, boxes + (size_t)(i0 + (uint)k) * 6);
    rb_transpose8(b); /* lx ly lz hx hy hz (next box) (next box) */
    #pragma unroll
    for (int a = 0; a < 3; a++) {
        lo[a] = rb_flush8(b[a]);
        hi[a] = rb_flush8(b[3 + a]);
        ok &= rb_finite8(b[a]) & rb_finite8(b[3 + a]) & (lo[a] <= hi[a]);
    }
    if (!all(ok))
        for (uint k = 0; k < 8; k++)
            rb_check_pair(rays, boxes, dims, i0 + k, base, bad);
    float8 e = (float8)(-INFINITY), x = (float8)(INFINITY);
    int8 ef = (int8)(0), xf = (int8)(0);
    #pragma unroll
    for (int a = 0; a < 3; a++) {
        int8 s = signbit(inv[a]); /* -1 where negative */
        float8 nv = (select(lo[a], hi[a], s) - o[a]) * inv[a];
        float8 fv = (select(hi[a], lo[a], s) - o[a]) * inv[a];
        int8 take_n = nv > e, take_f = fv < x;
        e = select(e, nv, take_n);
        x = select(x, fv, take_f);
        ef = select(ef, (int8)(1 + 2 * a) - s, take_n);
        xf = select(xf, (int8)(2 + 2 * a) + s, take_f);
    }
    int8 e_in = e >= tmin, x_in = x <= tmax;
    float8 te = select(tmin, e, e_in) + 0.0f;
    float8 tx = select(tmax, x, x_in) + 0.0f;
    int8 hit = (te <= tx) & (te < (float8)(INFINITY));
    /* rb_hit's last word, little endian: hit | face << 8 | exit << 16 */
    int8 word = (-hit) | ((ef & e_in) << 8) | ((xf & x_in) << 16);
    int8 idx = (int8)((int)(base + i0)) + (int8)(0, 1, 2, 3, 4, 5, 6, 7);
    float8 v0 = select((float8)(INFINITY), te, hit);
    float8 v1 = select((float8)(INFINITY), tx, hit);
    float8 v2 = as_float8(select((int8)(-1), idx, hit));
    float8 v3 = as_float8(word & hit);
    /* four fields x eight lanes -> eight 16-byte records */
    float8 a0 = RB_SHUFFLE2(v0, v1, 0, 8, 1, 9, 4, 12, 5, 13);
    float8 a1 = RB_SHUFFLE2(v0, v1, 2, 10, 3, 11, 6, 14, 7, 15);
    float8 c0 = RB_SHUFFLE2(v2, v3, 0, 8, 1, 9, 4, 12, 5, 13);
    float8 c1 = RB_SHUFFLE2(v2, v3, 2, 10, 3, 11, 6, 14, 7, 15);
    float8 q0 = RB_SHUFFLE2(a0, c0, 0, 1, 8, 9, 4, 5, 12, 13);
    float8 q1 = RB_SHUFFLE2(a0, c0, 2, 3, 10, 11, 6, 7, 14, 15);
    float8 q2 = RB_SHUFFLE2(a1, c1, 0, 1, 8, 9, 4, 5, 12, 13);
    float8 q3 = RB_SHUFFLE2(a1, c1, 2, 3, 10, 11, 6, 7, 14, 15);
    __global float *dst = (__global float *)(hits + i0);
    float8 o0 = RB_SHUFFLE2(q0, q1, 0, 1, 2, 3, 8, 9, 10, 11);
    float8 o1 = RB_SHUFFLE2(q2, q3, 0, 1, 2, 3, 8, 9, 10, 11);
    float8 o2 = RB_SHUFFLE2(q0, q1, 4, 5, 6, 7, 12, 13, 14, 15);
    float8 o3 = RB_SHUFFLE2(q2, q3, 4, 5, 6, 7, 12, 13, 14, 15);
    vstore8(o0, 0, dst);
    vstore8(o1, 1, dst);
    vstore8(o2, 2, dst);
    vstore8(o3, 3, dst);
}

/* all: the hits among boxes first..first+7 into the ray's sorted slots,
 * in ascending box order. */
static inline void rb_all_step(__global rb_list_hit *list, uint *stored,
                               uint max_hits, uint *count, uint first,
                               int8 hit, float8 e, float8 x)
{
    int hv[8];
    float ev[8], xv[8];
    vstore8(hit, 0, hv);
    vstore8(e, 0, ev);
    vstore8(x, 0, xv);
    for (int l = 0; l < 8; l++) {
        if (hv[l]) {
            rb_list_insert(list, stored, max_hits, (int)(first + (uint)l),
                           ev[l], xv[l]);
            (*count)++;
        }
    }
}

/* The every-box modes, one template: the mode is a compile-time constant
 * of each kernel below (RB_SCAN_KERNEL), so every kernel compiles to its
 * own loop. Arguments as exact.h's enum rb_scan_arg. */
static inline void rb_scan_wide(const int mode, __global const float *rays,
                                uint dims, uint n_rays,
                                __global const float *boxes, uint stride,
                                uint nb, uint box_base, int first,
                                uint max_hits, __global rb_hit *hits,
                                __global uchar *any_hit,
                                __global uint *counts,
                                __global rb_list_hit *lists, uint ray_base,
                                __global uint *bad)
{
    size_t i = get_global_id(0);
    if (i >= n_rays)
        return;
    if (!rb_ray_ok(rays, dims, i))
        rb_note_bad(bad, (ray_base + (uint)i) * 2);
    if (mode == RB_SCAN_ANY && !first && any_hit[i])
        return; /* an earlier chunk found a hit */
    rb_ray_prep r = rb_load_ray(rays, dims, i);
    rb_planes p = rb_wide_planes(&r, boxes, stride);
    uint j = 0;
    float8 e, x;
    float te, tx;
    if (mode == RB_SCAN_COUNT) {
        int8 acc = (int8)(0);
        for (; j + 8 <= nb; j += 8)
            acc -= rb_hit8(&r, &p, j, &e, &x);
        uint c = (uint)(acc.s0 + acc.s1 + acc.s2 + acc.s3 + acc.s4 + acc.s5 +
                        acc.s6 + acc.s7);
        for (; j < nb; j++)
            c += (uint)rb_hit1(&r, &p, j, &te, &tx);
        counts[i] = first ? c : counts[i] + c;
    } else if (mode == RB_SCAN_ANY) {
        int done = 0;
        /* one reduction per 32 boxes; the answer is the same */
        for (; j + 32 <= nb && !done; j += 32)
            done = any(rb_hit8(&r, &p, j, &e, &x) |
                       rb_hit8(&r, &p, j + 8, &e, &x) |
                       rb_hit8(&r, &p, j + 16, &e, &x) |
                       rb_hit8(&r, &p, j + 24, &e, &x));
        for (; j + 8 <= nb && !done; j += 8)
            done = any(rb_hit8(&r, &p, j, &e, &x));
        for (; j < nb && !done; j++)
            done = rb_hit1(&r, &p, j, &te, &tx);
        any_hit[i] = (uchar)done;
    } else if (mode == RB_SCAN_NEAREST) {
        /* Per lane the least t_enter and its box (a lane sees its boxes
         * in ascending order, so "<" keeps the lowest index), then the
         * lanes reduced with the same rule, then the scalar tail. */
        float8 bt = (float8)(INFINITY);
        int8 bi = (int8)(-1), idx = (int8)(0, 1, 2, 3, 4, 5, 6, 7);
        for (; j + 8 <= nb; j += 8) {
            int8 better = rb_hit8(&r, &p, j, &e, &x) & (e < bt);
            bt = select(bt, e, better);
            bi = select(bi, idx, better);
            idx += 8;
        }
        float lt[8];
        int li[8];
        vstore8(bt, 0, lt);
        vstore8(bi, 0, li);
        float best_t = INFINITY;
        int best = -1;
        #pragma unroll
        for (int l = 0; l < 8; l++) {
            if (li[l] >= 0 &&
                (lt[l] < best_t || (lt[l] == best_t && li[l] < best))) {
                best_t = lt[l];
                best = li[l];
            }
        }
        for (; j < nb; j++) {
            if (rb_hit1(&r, &p, j, &te, &tx) && te < best_t) {
                best_t = te;
                best = (int)j;
            }
        }
        rb_nearest_finish(&r, boxes, stride, box_base, first, best, best_t,
                          &hits[i]);
    } else {
        /* all: the hits of each step of eight, in ascending box order,
         * into the ray's sorted slots; 32 boxes without a hit cost one
         * reduction. */
        __global rb_list_hit *list = lists + i * max_hits;
        uint count = first ? 0 : counts[i];
        uint stored = min(count, max_hits);
        for (; j + 32 <= nb; j += 32) {
            float8 e1, x1, e2, x2, e3, x3;
            int8 h0 = rb_hit8(&r, &p, j, &e, &x);
            int8 h1 = rb_hit8(&r, &p, j + 8, &e1, &x1);
            int8 h2 = rb_hit8(&r, &p, j + 16, &e2, &x2);
            int8 h3 = rb_hit8(&r, &p, j + 24, &e3, &x3);
            if (!any(h0 | h1 | h2 | h3))
                continue;
            uint b = box_base + j;
            rb_all_step(list, &stored, max_hits, &count, b, h0, e, x);
            rb_all_step(list, &stored, max_hits, &count, b + 8, h1, e1, x1);
            rb_all_step(list, &stored, max_hits, &count, b + 16, h2, e2, x2);
            rb_all_step(list, &stored, max_hits, &count, b + 24, h3, e3, x3);
        }
        for (; j + 8 <= nb; j += 8) {
            int8 hit = rb_hit8(&r, &p, j, &e, &x);
            if (any(hit))
                rb_all_step(list, &stored, max_hits, &count, box_base + j,
                            hit, e, x);
        }
        for (; j < nb; j++) {
            if (rb_hit1(&r, &p, j, &te, &tx)) {
                rb_list_insert(list, &stored, max_hits, (int)(box_base + j),
                               te, tx);
                count++;
            }
        }
        counts[i] = count;
    }
}

#define RB_SCAN_KERNEL(name, mode)                                             \
    __kernel void name(RB_SCAN_PARAMS)                                         \
    {                                                                          \
        (void)tile;                                                            \
        (void)tile_n;                                                          \
        rb_scan_wide(mode, rays, dims, n_rays, boxes, stride, nb, box_base,    \
                     first, max_hits, hits, any_hit, counts, lists, ray_base,  \
                     bad);                                                     \
    }

RB_SCAN_KERNEL(rb_count, RB_SCAN_COUNT)
RB_SCAN_KERNEL(rb_any, RB_SCAN_ANY)
RB_SCAN_KERNEL(rb_nearest, RB_SCAN_NEAREST)
RB_SCAN_KERNEL(rb_all, RB_SCAN_ALL)

#endif /* RB_WIDE */
