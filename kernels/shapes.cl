/*
 * shapes.cl - the shape pass on OpenCL devices: one work-item per ray,
 * running kernels/exact.h's rb_shape_scan_* over every obb, xbox, sphere
 * and plane (the CPU backend's shape pass runs the same functions) and
 * combining with the answers the box pass left in the outputs, exactly as
 * host/cpu/shape_scan.c does. One kernel per mode from one template, the
 * mode a compile-time constant; arguments in the order of exact.h's
 * enum rb_shape_arg.
 */
enum { RB_SHAPE_PAIRS, RB_SHAPE_NEAREST, RB_SHAPE_ANY, RB_SHAPE_COUNT,
       RB_SHAPE_ALL };

static inline void rb_shape_pass(const int mode,
                                 __global const float *rays, uint n_rays,
                                 const rb_shape_view *v,
                                 __global rb_hit *hits, __global uchar *any,
                                 __global uint *counts,
                                 __global rb_list_hit *lists, uint max_hits)
{
    size_t i = get_global_id(0);
    if (i >= n_rays)
        return;
    __global const float *r = rays + i * 8;
    rb_ray_raw w = rb_raw_ray(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    uint n = v->n_lbox + v->n_ball + v->n_half;
    if (mode == RB_SHAPE_PAIRS) {
        rb_hit h;
        rb_shape_full(v, (uint)i, &w, &h);
        h.box = h.hit ? (int)i : -1;
        hits[i] = h;
    } else if (mode == RB_SHAPE_NEAREST) {
        rb_hit h = hits[i];
        float best_t = h.hit ? h.t_enter : INFINITY;
        uint best_id = h.hit ? (uint)h.box : 0xffffffffu;
        uint best_j = 0xffffffffu;
        rb_shape_scan_nearest(v, 0, n, &w, &best_t, &best_id, &best_j);
        if (best_j != 0xffffffffu) {
            rb_shape_full(v, best_j, &w, &h);
            h.box = (int)best_id;
            hits[i] = h;
        }
    } else if (mode == RB_SHAPE_ANY) {
        if (!any[i])
            any[i] = (uchar)rb_shape_scan_any(v, 0, n, &w);
    } else if (mode == RB_SHAPE_COUNT) {
        counts[i] += rb_shape_scan_count(v, 0, n, &w);
    } else {
        uint stored = min(counts[i], max_hits);
        counts[i] += rb_shape_scan_all(v, 0, n, &w, lists + i * max_hits,
                                       &stored, max_hits);
    }
}

#define RB_SHAPE_KERNEL(name, mode)                                            \
    __kernel void name(                                                        \
        __global const float *rays, uint n_rays,                               \
        __global const rb_lbox *lbox, uint n_lbox,                             \
        __global const rb_ball *ball, uint n_ball,                             \
        __global const rb_halfspace *hspace, uint n_half,                      \
        __global const uint *ids, uint first_id, __global rb_hit *hits,        \
        __global uchar *any, __global uint *counts,                            \
        __global rb_list_hit *lists, uint max_hits)                            \
    {                                                                          \
        rb_shape_view v;                                                       \
        v.lbox = lbox;                                                         \
        v.ball = ball;                                                         \
        v.hspace = hspace;                                                     \
        v.ids = ids;                                                           \
        v.n_lbox = n_lbox;                                                     \
        v.n_ball = n_ball;                                                     \
        v.n_half = n_half;                                                     \
        v.first_id = first_id;                                                 \
        rb_shape_pass(mode, rays, n_rays, &v, hits, any, counts, lists,        \
                      max_hits);                                               \
    }

RB_SHAPE_KERNEL(rb_shapes_pairs, RB_SHAPE_PAIRS)
RB_SHAPE_KERNEL(rb_shapes_nearest, RB_SHAPE_NEAREST)
RB_SHAPE_KERNEL(rb_shapes_any, RB_SHAPE_ANY)
RB_SHAPE_KERNEL(rb_shapes_count, RB_SHAPE_COUNT)
RB_SHAPE_KERNEL(rb_shapes_all, RB_SHAPE_ALL)
