/*
 * brute.cl - brute-force kernels: pairs, and the every-box modes nearest,
 * any, count and all. Uses exact.h and slab.cl (concatenated before this file).
 *
 * One work-item per ray. The every-box kernels walk the boxes of one chunk
 * in tiles: the work-group loads a tile cooperatively into __local memory,
 * waits at a barrier, and every item tests its ray against the whole
 * tile, so one pass over global memory serves the whole group. Items past
 * the last ray (the global size is rounded up to the work-group size) are
 * not "live": they still load tiles and reach every barrier, and only
 * skip the tests and the writes.
 *
 * Boxes come in the host's rb_boxset layout: six float arrays (lo x, y, z,
 * hi x, y, z) of `stride` floats; nb boxes are real. When the host splits
 * the boxes into chunks, box_base is the chunk's first global index and
 * first says whether this launch starts the answer (1) or combines with
 * the previous chunks' answer already in the output (0): count adds, any
 * ors, nearest keeps the earlier chunk on equal t, all keeps merging its
 * sorted list. The result is then the same as one pass over all boxes.
 *
 * Arguments: exact.h's enum rb_scan_arg for the every-box kernels (tile is
 * __local, 6 * RB_PITCH(tile_n) floats; ray_base is the chunk's first ray;
 * bad the R6 word, see rb_note_bad in slab.cl) and enum rb_pairs_arg for
 * pairs.
 *
 * This file is the "tiled" variant, for GPUs; brute_wide.cl has the same
 * kernels for CPU devices (RB_WIDE). Exactly one of the two is compiled.
 */

/* The tile's six rows are RB_PITCH floats apart. Items of one wavefront
 * read row a or row 3 + a at the same k, depending on their ray's sign;
 * with a pitch of tile_n (a multiple of the bank count) those two words
 * would share a bank and serialize, one float more puts them apart. */
#define RB_PITCH(tile_n) ((tile_n) + 1)

/* Offsets of the tile arrays a ray reads as near and far planes, chosen
 * once per ray by the sign of inv (slab.h picks per box, same values). */
static inline void rb_tile_planes(const rb_ray_prep *r, uint tile_n,
                                  uint near[3], uint far[3])
{
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        near[a] = (uint)(s ? 3 + a : a) * RB_PITCH(tile_n);
        far[a] = (uint)(s ? a : 3 + a) * RB_PITCH(tile_n);
    }
}

/* Boxes [base, base + m) of the chunk into the tile, all items helping. */
static inline void rb_tile_load(__local float *tile, uint tile_n,
                                __global const float *boxes, uint stride,
                                uint base, uint m)
{
    for (uint k = (uint)get_local_id(0); k < m;
         k += (uint)get_local_size(0))
        for (int a = 0; a < 6; a++)
            tile[(uint)a * RB_PITCH(tile_n) + k] =
                boxes[(size_t)a * stride + base + k];
}

/* nearest's last step, for both kernel variants: the chunk's winner
 * (chunk-local index best, -1 if none) becomes the ray's answer, with its
 * faces and exit from rb_slab_full as on the host. An earlier chunk keeps
 * the ray on equal t (its boxes come first). */
static inline void rb_nearest_finish(const rb_ray_prep *r,
                                     __global const float *boxes,
                                     uint stride, uint box_base, int first,
                                     int best, float best_t,
                                     __global rb_hit *out)
{
    if (best >= 0 && (first || best_t < out->t_enter)) {
        float lo[3], hi[3];
        for (int a = 0; a < 3; a++) {
            lo[a] = boxes[(size_t)a * stride + (uint)best];
            hi[a] = boxes[(size_t)(3 + a) * stride + (uint)best];
        }
        rb_hit h;
        rb_slab_full(r, lo, hi, &h);
        h.box = (int)(box_base + (uint)best);
        *out = h;
    } else if (first) {
        rb_hit h;
        rb_hit_miss(&h);
        *out = h;
    }
}

/* The every-box kernels of both variants take the same arguments, in the
 * order of exact.h's enum rb_scan_arg (the host sets them by name; the
 * unused ones of a mode are null or 0). */
enum { RB_SCAN_NEAREST, RB_SCAN_ANY, RB_SCAN_COUNT, RB_SCAN_ALL };
#define RB_SCAN_PARAMS                                                         \
    __global const float *rays, uint dims, uint n_rays,                        \
        __global const float *boxes, uint stride, uint nb, uint box_base,      \
        __local float *tile, uint tile_n, int first, uint max_hits,            \
        __global rb_hit *hits, __global uchar *any_hit, __global uint *counts, \
        __global rb_list_hit *lists, uint ray_base, __global uint *bad

#ifndef RB_WIDE
/* Ray i against box i. No barriers, so items past n simply return. */
__kernel void rb_pairs(__global const float *rays,
                       __global const float *boxes, uint dims, uint n,
                       uint base, __global rb_hit *hits,
                       __global uint *bad)
{
    size_t i = get_global_id(0);
    if (i >= n)
        return;
    if (!rb_ray_ok(rays, dims, i))
        rb_note_bad(bad, (base + (uint)i) * 2);
    else if (!rb_box_ok(boxes, dims, i))
        rb_note_bad(bad, (base + (uint)i) * 2 + 1);
    rb_ray_prep r = rb_load_ray(rays, dims, i);
    float lo[3], hi[3];
    rb_load_box(boxes, dims, i, lo, hi);
    rb_hit h;
    rb_slab_full(&r, lo, hi, &h);
    h.box = h.hit ? (int)(base + i) : -1;
    hits[i] = h;
}

/* The every-box modes, one template: the mode is a compile-time constant
 * of each kernel (RB_SCAN_KERNEL), so each compiles to its own loop.
 * Items past the last ray still load tiles and reach every barrier. */
static inline void rb_scan_tiled(const int mode, __global const float *rays,
                                 uint dims, uint n_rays,
                                 __global const float *boxes, uint stride,
                                 uint nb, uint box_base, __local float *tile,
                                 uint tile_n, int first, uint max_hits,
                                 __global rb_hit *hits,
                                 __global uchar *any_hit,
                                 __global uint *counts,
                                 __global rb_list_hit *lists, uint ray_base,
                                 __global uint *bad, __local int *open_items)
{
    /* any: a group stops walking the boxes once every live item has a
     * hit; the decision is taken from a __local flag (the kernel's: OpenCL
     * has __local variables only at kernel scope) so that it is the same
     * for every item and no barrier is skipped by some. */
    size_t i = get_global_id(0);
    int live = i < n_rays;
    rb_ray_prep r;
    uint near[3], far[3];
    uint count = 0, stored = 0;
    int done = 1;
    float best_t = INFINITY;
    int best = -1;
    __global rb_list_hit *list = lists + (live && mode == RB_SCAN_ALL
                                              ? i * max_hits
                                              : 0);
    if (live) {
        if (!rb_ray_ok(rays, dims, i))
            rb_note_bad(bad, (ray_base + (uint)i) * 2);
        r = rb_load_ray(rays, dims, i);
        rb_tile_planes(&r, tile_n, near, far);
        if (mode == RB_SCAN_ANY)
            done = first ? 0 : any_hit[i];
        if (mode == RB_SCAN_ALL && !first) {
            count = counts[i];
            stored = min(count, max_hits);
        }
    }
    for (uint base = 0; base < nb; base += tile_n) {
        uint m = min(tile_n, nb - base);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed */
        if (mode == RB_SCAN_ANY && get_local_id(0) == 0)
            *open_items = 0;
        rb_tile_load(tile, tile_n, boxes, stride, base, m);
        barrier(CLK_LOCAL_MEM_FENCE);
        float te, tx;
        if (mode == RB_SCAN_COUNT && live) {
            for (uint k = 0; k < m; k++)
                count += (uint)rb_tile_hit(&r, tile, near, far, k, &te, &tx);
        } else if (mode == RB_SCAN_ANY) {
            for (uint k = 0; k < m && !done; k++)
                done = rb_tile_hit(&r, tile, near, far, k, &te, &tx);
            if (!done)
                atomic_or(open_items, 1);
            barrier(CLK_LOCAL_MEM_FENCE);
            if (*open_items == 0)
                break;
        } else if (mode == RB_SCAN_NEAREST && live) {
            /* least t_enter, ties to the lowest index (strict <, boxes in
             * ascending order) */
            for (uint k = 0; k < m; k++) {
                if (rb_tile_hit(&r, tile, near, far, k, &te, &tx) &&
                    te < best_t) {
                    best_t = te;
                    best = (int)(base + k);
                }
            }
        } else if (mode == RB_SCAN_ALL && live) {
            for (uint k = 0; k < m; k++) {
                if (rb_tile_hit(&r, tile, near, far, k, &te, &tx)) {
                    rb_list_insert(list, &stored, max_hits,
                                   (int)(box_base + base + k), te, tx);
                    count++;
                }
            }
        }
    }
    if (!live)
        return;
    if (mode == RB_SCAN_COUNT)
        counts[i] = first ? count : counts[i] + count;
    else if (mode == RB_SCAN_ANY)
        any_hit[i] = (uchar)done;
    else if (mode == RB_SCAN_NEAREST)
        rb_nearest_finish(&r, boxes, stride, box_base, first, best, best_t,
                          &hits[i]);
    else
        counts[i] = count;
}

#define RB_SCAN_KERNEL(name, mode)                                             \
    __kernel void name(RB_SCAN_PARAMS)                                         \
    {                                                                          \
        __local int open_items;                                                \
        rb_scan_tiled(mode, rays, dims, n_rays, boxes, stride, nb, box_base,   \
                      tile, tile_n, first, max_hits, hits, any_hit, counts,    \
                      lists, ray_base, bad, &open_items);                      \
    }

RB_SCAN_KERNEL(rb_count, RB_SCAN_COUNT)
RB_SCAN_KERNEL(rb_any, RB_SCAN_ANY)
RB_SCAN_KERNEL(rb_nearest, RB_SCAN_NEAREST)
RB_SCAN_KERNEL(rb_all, RB_SCAN_ALL)
#endif /* !RB_WIDE */
