/* scan_scalar.c - portable scan kernels: the reference the SIMD tables are
 * tested against, and the path for processors without AVX2. */
#include <stdlib.h>
#include <string.h>

#include "scan.h"

/* Per-ray plane arrays: which corner array each axis reads first. */
typedef struct planes {
    const float *near[3];
    const float *far[3];
} planes;

static void pick_planes(const rb_ray_prep *r, const rb_boxset *b, planes *p)
{
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        p->near[a] = s ? rb_boxset_hi(b, a) : rb_boxset_lo(b, a);
        p->far[a] = s ? rb_boxset_lo(b, a) : rb_boxset_hi(b, a);
    }
}

/* rb_slab_hit with the planes already chosen. */
static inline int test_box(const rb_ray_prep *r, const planes *p, size_t j,
                           float *t_enter)
{
    float e = r->tmin, x = r->tmax;
    for (int a = 0; a < 3; a++)
        rb_slab_step(p->near[a][j], p->far[a][j], r->o[a], r->inv[a], &e, &x);
    *t_enter = e;
    return rb_slab_accept(e, x);
}

static uint32_t count_scalar(const rb_ray_prep *r, const rb_boxset *b,
                             size_t begin, size_t end)
{
    planes p;
    pick_planes(r, b, &p);
    uint32_t n = 0;
    float t;
    for (size_t j = begin; j < end; j++)
        n += (uint32_t)test_box(r, &p, j, &t);
    return n;
}

static int any_scalar(const rb_ray_prep *r, const rb_boxset *b, size_t begin,
                      size_t end)
{
    planes p;
    pick_planes(r, b, &p);
    float t;
    for (size_t j = begin; j < end; j++)
        if (test_box(r, &p, j, &t))
            return 1;
    return 0;
}

static void nearest_scalar(const rb_ray_prep *r, const rb_boxset *b,
                           size_t begin, size_t end, float *best_t,
                           int32_t *best_box)
{
    planes p;
    pick_planes(r, b, &p);
    float bt = *best_t;
    int32_t bb = *best_box;
    float t;
    for (size_t j = begin; j < end; j++) {
        if (test_box(r, &p, j, &t) && t < bt) {
            bt = t;
            bb = (int32_t)j;
        }
    }
    *best_t = bt;
    *best_box = bb;
}

static size_t hits_scalar(const rb_ray_prep *r, const rb_boxset *b,
                          size_t begin, size_t end, uint32_t *idx)
{
    planes p;
    pick_planes(r, b, &p);
    size_t n = 0;
    float t;
    for (size_t j = begin; j < end; j++)
        if (test_box(r, &p, j, &t))
            idx[n++] = (uint32_t)j;
    return n;
}

size_t rb_pairs_scalar(const void *rays, const void *boxes, unsigned dims,
                       size_t begin, size_t end, rb_hit *out, int stream_out,
                       rb_element_kind *bad_kind)
{
    (void)stream_out;
    for (size_t i = begin; i < end; i++) {
        rb_ray_prep p;
        if (rb_prep_rays(rays, dims, i, i + 1, &p) != i + 1) {
            *bad_kind = RB_ELEMENT_RAY;
            return i;
        }
        if (rb_check_boxes(boxes, dims, i, i + 1) != i + 1) {
            *bad_kind = RB_ELEMENT_BOX;
            return i;
        }
        float lo[3], hi[3];
        rb_box_corners(boxes, dims, i, lo, hi);
        rb_slab_full(&p, lo, hi, &out[i]);
        out[i].box = out[i].hit ? (int32_t)i : -1;
    }
    return end;
}

const rb_scan_kernels rb_scan_scalar = {
    .simd = "scalar",
    .count = count_scalar,
    .any = any_scalar,
    .nearest = nearest_scalar,
    .hits = hits_scalar,
    .pairs = rb_pairs_scalar,
};

const rb_scan_kernels *rb_scan_pick(void)
{
    const char *force = getenv("RAYBOX_SIMD");
    if (force && strcmp(force, "scalar") == 0)
        return &rb_scan_scalar;
#ifdef RB_HAVE_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        return &rb_scan_avx2;
#endif
    return &rb_scan_scalar;
}
