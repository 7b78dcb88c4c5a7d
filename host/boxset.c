/* boxset.c - boxes prepared for every-box scans: validated, flushed, laid
 * out as six float arrays and padded with boxes no ray can hit. */
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

uint64_t rb_next_uid(void)
{
    static atomic_uint_fast64_t next = 1;
    return atomic_fetch_add(&next, 1);
}

static size_t padded(size_t n)
{
    size_t p = (n + RB_BOX_PAD - 1) / RB_BOX_PAD * RB_BOX_PAD;
    return p ? p : RB_BOX_PAD;
}

/* The flushed corners of n boxes into the lo/hi arrays. Inlined with dims
 * a constant at each call: the corners become six flushes and six stores
 * a box. */
static inline __attribute__((always_inline)) void
copy_corners(const void *boxes, unsigned dims, size_t n, float *lo[3],
             float *hi[3])
{
    for (size_t i = 0; i < n; i++) {
        float l[3], h[3];
        rb_box_corners(boxes, dims, i, l, h);
        for (int a = 0; a < 3; a++) {
            lo[a][i] = l[a];
            hi[a][i] = h[a];
        }
    }
}

int rb_boxset_build(rb_context *ctx, rb_boxset *set, size_t *cap,
                    const void *boxes, unsigned dims, size_t n)
{
    size_t bad = rb_check_boxes(boxes, dims, 0, n);
    if (bad < n) {
        rb_bad_input where = {bad, RB_ELEMENT_BOX};
        return rb_report_bad_input(ctx, dims, NULL, boxes,
                                   &where);
    }
    size_t stride = padded(n);
    if (stride > SIZE_MAX / (6 * sizeof(float)))
        return rb_fail(ctx, RB_ENOMEM, "%zu boxes do not fit in memory", n);
    size_t need = 6 * stride;
    if (need > *cap) {
        float *data = rb_alloc(ctx, need * sizeof(float), 64);
        if (!data)
            return rb_fail(ctx, RB_ENOMEM, "no memory for %zu boxes", n);
        rb_free(ctx, set->data);
        set->data = data;
        *cap = need;
    }
    set->n = n;
    set->stride = stride;
    set->uid = rb_next_uid();
    float *lo[3], *hi[3];
    for (int a = 0; a < 3; a++) {
        lo[a] = set->data + (size_t)a * stride;
        hi[a] = set->data + (size_t)(3 + a) * stride;
    }
    if (dims == 3)
        copy_corners(boxes, 3, n, lo, hi);
    else
        copy_corners(boxes, 2, n, lo, hi);
    for (size_t i = n; i < stride; i++) {
        for (int a = 0; a < 3; a++) {
            lo[a][i] = INFINITY;
            hi[a][i] = -INFINITY;
        }
    }
    return RB_OK;
}
