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

/* Ray i of the chunk, flushed (rb_ray records are 8 floats). */
static inline rb_ray_raw rb_shape_ray(__global const float *rays, size_t i)
{
    __global const float *r = rays + i * 8;
    return rb_raw_ray(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

static inline void rb_shape_pass(const int mode,
                                 __global const float *rays, uint n_rays,
                                 const rb_shape_view *v,
                                 __global rb_hit *hits, __global uchar *any,
                                 __global uint *counts,
                                 __global rb_list_hit *lists, uint max_hits,
                                 uint pair_base)
{
    size_t i = get_global_id(0);
    if (i >= n_rays)
        return;
    rb_ray_raw w = rb_shape_ray(rays, i);
    uint n = v->n_lbox + v->n_ball + v->n_half;
    if (mode == RB_SHAPE_PAIRS) {
        /* ray i of the chunk is ray pair_base + i of the query, and its
         * element the one at that position */
        uint e = pair_base + (uint)i;
        rb_hit h;
        rb_shape_full(v, e, &w, &h);
        h.box = h.hit ? (int)e : -1;
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
        __global rb_list_hit *lists, uint max_hits, uint pair_base)            \
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
                      max_hits, pair_base);                                    \
    }

RB_SHAPE_KERNEL(rb_shapes_pairs, RB_SHAPE_PAIRS)
RB_SHAPE_KERNEL(rb_shapes_nearest, RB_SHAPE_NEAREST)
RB_SHAPE_KERNEL(rb_shapes_any, RB_SHAPE_ANY)
RB_SHAPE_KERNEL(rb_shapes_count, RB_SHAPE_COUNT)
RB_SHAPE_KERNEL(rb_shapes_all, RB_SHAPE_ALL)

/* The shape tree's walk, in two launches a chunk, so that the walk's
 * kernel holds no more than the walk needs (docs/gpu.md):
 * - rb_shape_walk_*: bvh.cl's loop over the tree's nodes with its leaf
 *   hook on the leaves lv, for the rays that the CPU walks through the
 *   tree as built (exact.h's rb_shape_route, FAST), combined with the box
 *   pass's answers; nearest writes only its winner's t_enter, id and hit
 *   into hits[] and the winning leaf (or none) into leaf[].
 * - rb_shape_rest_*, then, on every ray: the other rays (far origins,
 *   beyond 2^31, directions below 2^-60) test every leaf one by one,
 *   which gives the answers the CPU's own widening gives (R16: both are
 *   those of the scan); then every plane (pv); nearest writes the winner's
 *   full answer (a plane's, or the leaf's of leaf[] or of the scan).
 * Each launch combines with what the one before left in the outputs as
 * rb_shape_pass does with the box pass's: nearest by (t, id), any by or,
 * count by sum, all by rb_list_insert, none of which depends on the
 * order of the shapes, so the answers are those of one pass. Kernel
 * arguments: exact.h's enum rb_shape_walk_arg; order (may be NULL) as in
 * bvh.cl. R6 was checked by the box pass.
 * - rb_joint_walk_*, in place of the box pass and rb_shape_walk_*, over a
 *   joint tree (host/bvh/bvh_shapes.c: the boxes in it too): checks each
 *   ray (R6, as the box kernels do), walks the tree once for its boxes
 *   and, on the FAST route, its shapes, and writes every answer for the
 *   rest to combine with (a box winner's full answer, a leaf winner's t,
 *   id and leaf). */
#define RB_NO_LEAF 0xffffffffu

static inline int rb_shape_fast(const rb_shape_view *lv, const rb_ray_raw *w,
                                float cover)
{
    return lv->n_lbox + lv->n_ball &&
           rb_shape_route(w, cover) == RB_SHAPE_ROUTE_FAST;
}

static inline void rb_shape_walk_pass(const int mode,
                                      __global const float *rays,
                                      uint n_rays,
                                      __global const float *nodes,
                                      __global const uint *order,
                                      float cover, const rb_shape_view *lv,
                                      __global rb_hit *hits,
                                      __global uchar *any,
                                      __global uint *counts,
                                      __global rb_list_hit *lists,
                                      __global uint *leaf, uint max_hits)
{
    size_t g = get_global_id(0);
    if (g >= n_rays)
        return;
    size_t i = rb_walk_ray(order, g, n_rays, rays, 8);
    rb_ray_raw w = rb_shape_ray(rays, i);
    int fast = rb_shape_fast(lv, &w, cover);
    if (mode == RB_SHAPE_NEAREST)
        leaf[i] = RB_NO_LEAF; /* every ray: the rest reads it */
    if (!fast || (mode == RB_SHAPE_ANY && any[i]))
        return;
    rb_wray wr = rb_wray_of(rb_prep_raw(&w));
    rb_walk s = rb_walk_init();
    if (mode == RB_SHAPE_NEAREST) {
        rb_hit h = hits[i];
        s.best_t = h.hit ? h.t_enter : INFINITY;
        s.best_i = h.hit ? (uint)h.box : 0xffffffffu;
        rb_walk_tree(&wr, nodes, RB_WALK_NEAREST, &s, 0, 0, RB_TREE_SHAPES, lv,
                     &w, 1);
        if (s.best_j != 0xffffffffu) {
            /* the winner's t and id; the rest writes the other fields */
            leaf[i] = s.best_j;
            hits[i].t_enter = s.best_t;
            hits[i].box = (int)s.best_i;
            hits[i].hit = 1;
        }
    } else if (mode == RB_SHAPE_ANY) {
        rb_walk_tree(&wr, nodes, RB_WALK_ANY, &s, 0, 0, RB_TREE_SHAPES, lv, &w,
                     1);
        any[i] = (uchar)s.found;
    } else if (mode == RB_SHAPE_COUNT) {
        rb_walk_tree(&wr, nodes, RB_WALK_COUNT, &s, 0, 0, RB_TREE_SHAPES, lv,
                     &w, 1);
        counts[i] += s.count;
    } else {
        s.stored = min(counts[i], max_hits);
        rb_walk_tree(&wr, nodes, RB_WALK_ALL, &s, lists + i * max_hits,
                     max_hits, RB_TREE_SHAPES, lv, &w, 1);
        counts[i] += s.count;
    }
}

static inline void rb_joint_walk_pass(const int mode,
                                      __global const float *rays,
                                      uint n_rays,
                                      __global const float *nodes,
                                      __global const uint *order,
                                      float cover, const rb_shape_view *lv,
                                      __global rb_hit *hits,
                                      __global uchar *any,
                                      __global uint *counts,
                                      __global rb_list_hit *lists,
                                      __global uint *leaf, uint max_hits,
                                      __global uint *bad, uint ray_base)
{
    size_t g = get_global_id(0);
    if (g >= n_rays)
        return;
    size_t i = rb_walk_ray(order, g, n_rays, rays, 8);
    if (mode == RB_SHAPE_NEAREST)
        leaf[i] = RB_NO_LEAF; /* every ray: the rest reads it */
    if (!rb_ray_ok(rays, 3, i)) {
        rb_note_bad(bad, (ray_base + (uint)i) * 2);
        return;
    }
    rb_ray_raw w = rb_shape_ray(rays, i);
    int fast = rb_shape_fast(lv, &w, cover);
    rb_wray wr = rb_wray_of(rb_prep_raw(&w));
    rb_walk s = rb_walk_init();
    if (mode == RB_SHAPE_NEAREST) {
        rb_walk_tree(&wr, nodes, RB_WALK_NEAREST, &s, 0, 0, RB_TREE_JOINT, lv,
                     &w, fast);
        rb_hit h;
        if (s.best_j != RB_NO_LEAF) {
            /* the winner's t and id; the rest writes the other fields */
            leaf[i] = s.best_j;
            rb_hit_miss(&h);
            h.t_enter = s.best_t;
            h.box = (int)s.best_i;
            h.hit = 1;
        } else if (s.found) {
            rb_walk_box_answer(&wr, nodes, &s, &h);
        } else {
            rb_hit_miss(&h);
        }
        hits[i] = h;
    } else if (mode == RB_SHAPE_ANY) {
        rb_walk_tree(&wr, nodes, RB_WALK_ANY, &s, 0, 0, RB_TREE_JOINT, lv, &w,
                     fast);
        any[i] = (uchar)s.found;
    } else if (mode == RB_SHAPE_COUNT) {
        rb_walk_tree(&wr, nodes, RB_WALK_COUNT, &s, 0, 0, RB_TREE_JOINT, lv,
                     &w, fast);
        counts[i] = s.count;
    } else {
        rb_walk_tree(&wr, nodes, RB_WALK_ALL, &s, lists + i * max_hits,
                     max_hits, RB_TREE_JOINT, lv, &w, fast);
        counts[i] = s.count;
    }
}

static inline void rb_shape_rest_pass(const int mode,
                                      __global const float *rays,
                                      uint n_rays, float cover,
                                      const rb_shape_view *lv,
                                      const rb_shape_view *pv,
                                      __global rb_hit *hits,
                                      __global uchar *any,
                                      __global uint *counts,
                                      __global rb_list_hit *lists,
                                      __global const uint *leaf,
                                      uint max_hits)
{
    size_t i = get_global_id(0);
    if (i >= n_rays)
        return;
    rb_ray_raw w = rb_shape_ray(rays, i);
    uint nb = lv->n_lbox + lv->n_ball;
    int fast = rb_shape_fast(lv, &w, cover);
    if (mode == RB_SHAPE_NEAREST) {
        rb_hit h = hits[i];
        float best_t = h.hit ? h.t_enter : INFINITY;
        uint best_id = h.hit ? (uint)h.box : 0xffffffffu;
        uint lj = leaf[i], pj = RB_NO_LEAF;
        if (!fast)
            rb_shape_scan_nearest(lv, 0, nb, &w, &best_t, &best_id, &lj);
        rb_shape_scan_nearest(pv, 0, pv->n_half, &w, &best_t, &best_id, &pj);
        if (pj != RB_NO_LEAF || lj != RB_NO_LEAF) {
            if (pj != RB_NO_LEAF)
                rb_shape_full(pv, pj, &w, &h);
            else
                rb_shape_full(lv, lj, &w, &h);
            h.box = (int)best_id;
            hits[i] = h;
        }
    } else if (mode == RB_SHAPE_ANY) {
        if (any[i])
            return;
        int found = !fast && rb_shape_scan_any(lv, 0, nb, &w);
        if (!found)
            found = rb_shape_scan_any(pv, 0, pv->n_half, &w);
        any[i] = (uchar)found;
    } else if (mode == RB_SHAPE_COUNT) {
        uint n = fast ? 0 : rb_shape_scan_count(lv, 0, nb, &w);
        counts[i] += n + rb_shape_scan_count(pv, 0, pv->n_half, &w);
    } else {
        __global rb_list_hit *list = lists + i * max_hits;
        uint stored = min(counts[i], max_hits);
        uint n = fast ? 0
                      : rb_shape_scan_all(lv, 0, nb, &w, list, &stored,
                                          max_hits);
        n += rb_shape_scan_all(pv, 0, pv->n_half, &w, list, &stored,
                               max_hits);
        counts[i] += n;
    }
}

#define RB_SHAPE_WALK_KERNEL(name, pass, mode)                                 \
    __kernel void name(                                                        \
        __global const float *rays, uint n_rays, __global const float *nodes,  \
        __global const uint *order, float cover, __global const rb_lbox *lbox, \
        uint n_lbox, __global const rb_ball *ball, uint n_ball,                \
        __global const uint *leaf_ids, __global const rb_halfspace *hspace,    \
        uint n_half, __global const uint *half_ids, uint half_first,           \
        __global rb_hit *hits, __global uchar *any, __global uint *counts,     \
        __global rb_list_hit *lists, __global uint *leaf, uint max_hits,       \
        __global uint *bad, uint ray_base)                                     \
    {                                                                          \
        rb_shape_view lv, pv;                                                  \
        lv.lbox = lbox;                                                        \
        lv.ball = ball;                                                        \
        lv.hspace = 0;                                                         \
        lv.ids = leaf_ids;                                                     \
        lv.n_lbox = n_lbox;                                                    \
        lv.n_ball = n_ball;                                                    \
        lv.n_half = 0;                                                         \
        lv.first_id = 0;                                                       \
        pv.lbox = 0;                                                           \
        pv.ball = 0;                                                           \
        pv.hspace = hspace;                                                    \
        pv.ids = half_ids;                                                     \
        pv.n_lbox = 0;                                                         \
        pv.n_ball = 0;                                                         \
        pv.n_half = n_half;                                                    \
        pv.first_id = half_first;                                              \
        if (pass == 1)                                                         \
            rb_shape_rest_pass(mode, rays, n_rays, cover, &lv, &pv, hits, any, \
                               counts, lists, leaf, max_hits);                 \
        else if (pass == 2)                                                    \
            rb_joint_walk_pass(mode, rays, n_rays, nodes, order, cover, &lv,   \
                               hits, any, counts, lists, leaf, max_hits, bad,  \
                               ray_base);                                      \
        else                                                                   \
            rb_shape_walk_pass(mode, rays, n_rays, nodes, order, cover, &lv,   \
                               hits, any, counts, lists, leaf, max_hits);      \
    }

RB_SHAPE_WALK_KERNEL(rb_shape_walk_nearest, 0, RB_SHAPE_NEAREST)
RB_SHAPE_WALK_KERNEL(rb_shape_walk_any, 0, RB_SHAPE_ANY)
RB_SHAPE_WALK_KERNEL(rb_shape_walk_count, 0, RB_SHAPE_COUNT)
RB_SHAPE_WALK_KERNEL(rb_shape_walk_all, 0, RB_SHAPE_ALL)
RB_SHAPE_WALK_KERNEL(rb_shape_rest_nearest, 1, RB_SHAPE_NEAREST)
RB_SHAPE_WALK_KERNEL(rb_shape_rest_any, 1, RB_SHAPE_ANY)
RB_SHAPE_WALK_KERNEL(rb_shape_rest_count, 1, RB_SHAPE_COUNT)
RB_SHAPE_WALK_KERNEL(rb_shape_rest_all, 1, RB_SHAPE_ALL)
RB_SHAPE_WALK_KERNEL(rb_joint_walk_nearest, 2, RB_SHAPE_NEAREST)
RB_SHAPE_WALK_KERNEL(rb_joint_walk_any, 2, RB_SHAPE_ANY)
RB_SHAPE_WALK_KERNEL(rb_joint_walk_count, 2, RB_SHAPE_COUNT)
RB_SHAPE_WALK_KERNEL(rb_joint_walk_all, 2, RB_SHAPE_ALL)
