/*
 * scan.h - the CPU backend's inner loops, one table per instruction set.
 *
 * Every-box scans test one prepared ray against boxes [begin, end) of a
 * boxset; begin and end are multiples of RB_BOX_PAD (padding boxes never
 * hit). The pairs kernel validates, flushes and tests n rays against n raw
 * boxes. All variants compute the formula of slab.h operation for
 * operation, so they agree bit for bit with the scalar reference.
 */
#ifndef RB_CPU_SCAN_H
#define RB_CPU_SCAN_H

#include "../internal.h"

typedef struct rb_scan_kernels {
    const char *simd; /* "avx2", "scalar" */
    uint32_t (*count)(const rb_ray_prep *r, const rb_boxset *b, size_t begin,
                      size_t end);
    int (*any)(const rb_ray_prep *r, const rb_boxset *b, size_t begin,
               size_t end);
    /* Lowers (*best_t, *best_box) to the least t_enter of [begin, end),
     * ties to the lowest index; boxes before begin are already in *best. */
    void (*nearest)(const rb_ray_prep *r, const rb_boxset *b, size_t begin,
                    size_t end, float *best_t, int32_t *best_box);
    /* Writes the indices of the boxes hit, ascending, to idx (room for
     * end - begin) and returns how many. */
    size_t (*hits)(const rb_ray_prep *r, const rb_boxset *b, size_t begin,
                   size_t end, uint32_t *idx);
    /* Pairs: rays[i] against boxes[i] for i in [begin, end) (raw records
     * of `dims`), answers to out[i]. Returns end, or the first i whose ray
     * or box is invalid (then out is partly written). *bad_kind tells
     * which of the two was invalid (the ray wins at the same index).
     * stream_out asks for stores that bypass the cache: for outputs much
     * larger than the cache, which nobody reads soon. */
    size_t (*pairs)(const void *rays, const void *boxes, unsigned dims,
                    size_t begin, size_t end, rb_hit *out, int stream_out,
                    rb_element_kind *bad_kind);
} rb_scan_kernels;

extern const rb_scan_kernels rb_scan_scalar;
#ifdef RB_HAVE_AVX2
extern const rb_scan_kernels rb_scan_avx2;
#endif

/* The best table this processor runs; RAYBOX_SIMD=scalar forces the
 * portable one. */
const rb_scan_kernels *rb_scan_pick(void);

/* Shared by every table: pairs for one index with full validation. */
size_t rb_pairs_scalar(const void *rays, const void *boxes, unsigned dims,
                       size_t begin, size_t end, rb_hit *out, int stream_out,
                       rb_element_kind *bad_kind);

#endif /* RB_CPU_SCAN_H */
