/*
 * visibility.cl - observers x targets (SPEC section 9) with the segments
 * made where they are tested: work-item g of a launch answers the byte g
 * of the launch's rows of the bit matrix, observer row0 + g / stride
 * against targets 8 (g % stride) .. + 7, each segment made by exact.h's
 * rb_segment_prep (the rule the host's explicit segments follow) and
 * tested as `any`: by brute force over the scene's boxes (rb_vis_brute) or
 * through its hierarchy with bvh.cl's walk (rb_vis_bvh, the short stack
 * and its resume included). So each bit is the one `any` gives for the
 * explicit segment (SPEC R9 for the walk), and only the points and the
 * scene travel to the device.
 *
 * One item writes one whole byte and no other item touches it: no
 * atomics, no race between the bits of a byte. Bit j % 8 of byte j / 8 of
 * a row is set when target j is visible (nothing hit); the padding bits
 * of a row's last byte are 0. Uses exact.h, slab.cl and bvh.cl
 * (concatenated before this file). No barriers: items past the launch's
 * bytes return.
 *
 * Arguments: exact.h's enum rb_vis_arg, the same for both kernels (brute
 * reads scene as a boxset of stride floats per array, nb boxes; the walk
 * reads it as the node array and ignores stride and nb).
 */

#define RB_VIS_PARAMS                                                          \
    __global const float *observers, __global const float *targets,           \
        uint n_targets, uint row0, uint rows, float tmin, float tmax,          \
        __global const float *scene, uint stride, uint nb,                     \
        __global uchar *bits

/* Which item this is: its observer's point in o, its first target and
 * the targets in its byte; 0 for items past the launch. */
static inline int rb_vis_item(__global const float *observers,
                              uint n_targets, uint row0, uint rows,
                              float o[3], uint *j0, uint *nj)
{
    uint per_row = (n_targets + 7u) / 8u;
    size_t g = get_global_id(0);
    if (g >= (size_t)rows * per_row)
        return 0;
    uint row = (uint)(g / per_row), byte = (uint)(g % per_row);
    size_t i = (size_t)row0 + row;
    for (int a = 0; a < 3; a++)
        o[a] = observers[3 * i + (size_t)a];
    *j0 = 8u * byte;
    *nj = min(8u, n_targets - *j0);
    return 1;
}

static inline rb_ray_prep rb_vis_segment(const float o[3],
                                         __global const float *targets,
                                         uint j, float tmin, float tmax)
{
    float t[3];
    for (int a = 0; a < 3; a++)
        t[a] = targets[3 * (size_t)j + (size_t)a];
    return rb_segment_prep(o, t, tmin, tmax);
}

/* Whether the segment hits any of the nb boxes (rb_slab_hit's test on the
 * boxset's flushed corners, stopping at the first hit). The wide variant
 * (CPU devices) tests eight boxes a step with brute_wide.cl's rb_hit8:
 * the boxset is padded to a multiple of RB_BOX_PAD (16) with boxes no ray
 * can hit, so the last step may read past nb. */
#ifdef RB_WIDE
static inline int rb_vis_any_brute(const rb_ray_prep *r,
                                   __global const float *boxes, uint stride,
                                   uint nb)
{
    rb_planes p = rb_wide_planes(r, boxes, stride);
    float8 te, tx;
    for (uint k = 0; k < nb; k += 8)
        if (any(rb_hit8(r, &p, k, &te, &tx)))
            return 1;
    return 0;
}
#else
static inline int rb_vis_any_brute(const rb_ray_prep *r,
                                   __global const float *boxes, uint stride,
                                   uint nb)
{
    size_t off_near[3], off_far[3];
    for (int a = 0; a < 3; a++) {
        int s = signbit(r->inv[a]) ? 1 : 0;
        off_near[a] = (size_t)(s ? 3 + a : a) * stride;
        off_far[a] = (size_t)(s ? a : 3 + a) * stride;
    }
    for (uint k = 0; k < nb; k++) {
        float e = r->tmin, x = r->tmax;
        for (int a = 0; a < 3; a++)
            rb_slab_step(boxes[off_near[a] + k], boxes[off_far[a] + k],
                         r->o[a], r->inv[a], &e, &x);
        if (rb_slab_accept(e, x))
            return 1;
    }
    return 0;
}
#endif

__kernel void rb_vis_brute(RB_VIS_PARAMS)
{
    float o[3];
    uint j0, nj;
    if (!rb_vis_item(observers, n_targets, row0, rows, o, &j0, &nj))
        return;
    uint byte = 0;
    for (uint k = 0; k < nj; k++) {
        rb_ray_prep r = rb_vis_segment(o, targets, j0 + k, tmin, tmax);
        if (!rb_vis_any_brute(&r, scene, stride, nb))
            byte |= 1u << k;
    }
    bits[get_global_id(0)] = (uchar)byte;
}

__kernel void rb_vis_bvh(RB_VIS_PARAMS)
{
    float o[3];
    uint j0, nj;
    (void)stride;
    (void)nb;
    if (!rb_vis_item(observers, n_targets, row0, rows, o, &j0, &nj))
        return;
    uint byte = 0;
    for (uint k = 0; k < nj; k++) {
        rb_ray_prep r = rb_vis_segment(o, targets, j0 + k, tmin, tmax);
        rb_wray w = rb_wray_of(r);
        rb_walk s = rb_walk_init();
        rb_walk_tree(&w, scene, RB_WALK_ANY, &s, 0, 0, RB_TREE_BOXES, 0, 0,
                     0);
        if (!s.found)
            byte |= 1u << k;
    }
    bits[get_global_id(0)] = (uchar)byte;
}
