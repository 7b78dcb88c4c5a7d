/* boxset.c - boxes prepared for every-box scans: validated, flushed, laid
 * out as six float arrays and padded with boxes no ray can hit. */
#include <stdatomic.h>
#include <string.h>

#include "internal.h"
#include "threadpool.h"

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

/* Many boxes are checked and copied on the pool, in slices (from 32K
 * boxes: at 100K, one thread doing it took a sixth of a fast build). */
#define PARALLEL_MIN 32768
#define SLICE_MIN 16384
#define SLICES_MAX 256

typedef struct loading {
    const void *boxes;
    unsigned dims;
    size_t n, slice;
    float *lo[3], *hi[3];
    size_t bad[SLICES_MAX]; /* per slice: its first invalid box, or its end */
} loading;

static void check_task(void *arg, size_t t, unsigned worker)
{
    loading *l = arg;
    (void)worker;
    size_t b, e;
    rb_pool_task_range(t, l->slice, l->n, &b, &e);
    l->bad[t] = rb_check_boxes(l->boxes, l->dims, b, e);
}

static void copy_task(void *arg, size_t t, unsigned worker)
{
    loading *l = arg;
    (void)worker;
    size_t b, e;
    rb_pool_task_range(t, l->slice, l->n, &b, &e);
    float *lo[3], *hi[3];
    for (int a = 0; a < 3; a++) {
        lo[a] = l->lo[a] + b;
        hi[a] = l->hi[a] + b;
    }
    if (l->dims == 3)
        copy_corners((const rb_box *)l->boxes + b, 3, e - b, lo, hi);
    else
        copy_corners((const rb_box2 *)l->boxes + b, 2, e - b, lo, hi);
}

/* Checks a slice and, when it is valid, copies it: one pass over the
 * caller's boxes instead of two, for fresh arrays only (a bad box then
 * costs nothing but the new block). */
static void check_copy_task(void *arg, size_t t, unsigned worker)
{
    loading *l = arg;
    size_t b, e;
    rb_pool_task_range(t, l->slice, l->n, &b, &e);
    check_task(arg, t, worker);
    if (l->bad[t] == e && e > b)
        copy_task(arg, t, worker);
}

/* task on every slice: one slice on the calling thread. */
static void run_slices(rb_context *ctx, loading *l, size_t slices,
                       void (*task)(void *, size_t, unsigned))
{
    if (slices == 1)
        task(l, 0, 0);
    else
        rb_pool_run(ctx->pool, slices, task, l);
}

/* The first invalid box of n, or n, after `task` (check_task, or
 * check_copy_task) ran on every slice. */
static size_t first_bad(rb_context *ctx, loading *l, size_t slices,
                        void (*task)(void *, size_t, unsigned))
{
    run_slices(ctx, l, slices, task);
    for (size_t t = 0; t < slices; t++) {
        size_t b, e;
        rb_pool_task_range(t, l->slice, l->n, &b, &e);
        if (l->bad[t] < e)
            return l->bad[t];
    }
    return l->n;
}

int rb_boxset_build(rb_context *ctx, rb_boxset *set, size_t *cap,
                    const void *boxes, unsigned dims, size_t n)
{
    loading l = {.boxes = boxes, .dims = dims, .n = n, .slice = n};
    if (n >= PARALLEL_MIN) {
        l.slice = (n + SLICES_MAX - 1) / SLICES_MAX;
        l.slice = l.slice < SLICE_MIN ? SLICE_MIN : l.slice;
    }
    size_t slices = n ? (n + l.slice - 1) / l.slice : 1;
    size_t stride = padded(n);
    if (stride > SIZE_MAX / (6 * sizeof(float)))
        return rb_fail(ctx, RB_ENOMEM, "%zu boxes do not fit in memory", n);
    size_t need = 6 * stride;
    /* New arrays are filled as the boxes are checked; arrays the set
     * holds are written only once every box has passed (a bad box leaves
     * the set as it was). */
    float *data = need > *cap ? rb_alloc(ctx, need * sizeof(float), 64)
                              : set->data;
    if (!data)
        return rb_fail(ctx, RB_ENOMEM, "no memory for %zu boxes", n);
    float **lo = l.lo, **hi = l.hi;
    for (int a = 0; a < 3; a++) {
        lo[a] = data + (size_t)a * stride;
        hi[a] = data + (size_t)(3 + a) * stride;
    }
    int fresh = data != set->data;
    size_t bad = first_bad(ctx, &l, slices,
                           fresh ? check_copy_task : check_task);
    if (bad < n) {
        if (fresh)
            rb_free(ctx, data);
        rb_bad_input where = {bad, RB_ELEMENT_BOX};
        return rb_report_bad_input(ctx, dims, NULL, boxes,
                                   &where);
    }
    if (fresh) {
        rb_free(ctx, set->data);
        set->data = data;
        *cap = need;
    } else if (n) {
        run_slices(ctx, &l, slices, copy_task);
    }
    set->n = n;
    set->stride = stride;
    set->uid = rb_next_uid();
    for (size_t i = n; i < stride; i++) {
        for (int a = 0; a < 3; a++) {
            lo[a][i] = INFINITY;
            hi[a][i] = -INFINITY;
        }
    }
    return RB_OK;
}
