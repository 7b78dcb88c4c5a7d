/*
 * slab.cl - the kernels' loads of raw records and their R6 checks, on top
 * of kernels/exact.h (the rules themselves, shared with the C side and
 * concatenated before this file).
 */

/* The floats of a raw ray record: rb_ray (dims 3) or rb_ray2 (dims 2). */
static inline uint rb_ray_floats(uint dims)
{
    return dims == 3 ? 8 : 6;
}

/* Ray i of a raw array of rb_ray (dims 3, 8 floats) or rb_ray2 (dims 2, 6
 * floats), prepared by exact.h's rb_prep_ray. */
static inline rb_ray_prep rb_load_ray(__global const float *rays, uint dims,
                                      size_t i)
{
    if (dims == 3) {
        __global const float *r = rays + i * 8;
        return rb_prep_ray(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    }
    __global const float *r = rays + i * 6;
    return rb_prep_ray(r[0], r[1], 0.0f, r[2], r[3], 0.0f, r[4], r[5]);
}

/* Box i of a raw array of rb_box (6 floats) or rb_box2 (4 floats), flushed;
 * a 2D box spans z in [0, 0] (rb_box_corners). */
static inline void rb_load_box(__global const float *boxes, uint dims,
                               size_t i, float lo[3], float hi[3])
{
    if (dims == 3) {
        __global const float *b = boxes + i * 6;
        for (int a = 0; a < 3; a++) {
            lo[a] = rb_flush(b[a]);
            hi[a] = rb_flush(b[3 + a]);
        }
    } else {
        __global const float *b = boxes + i * 4;
        for (int a = 0; a < 2; a++) {
            lo[a] = rb_flush(b[a]);
            hi[a] = rb_flush(b[2 + a]);
        }
        lo[2] = 0.0f;
        hi[2] = 0.0f;
    }
}

/* SPEC R6 after the R7 flush, exact.h's predicates: kernels check every
 * ray (and the pairs' boxes) as they load it and keep the lowest invalid
 * element in *bad, coded index * 2 (+ 1 for a box), so a batch is read
 * once and the host need not scan it first. An invalid element's own
 * answer is garbage; the host then reports RB_EINPUT. */
static inline int rb_ray_ok(__global const float *rays, uint dims, size_t i)
{
    uint fields = rb_ray_floats(dims) - 2; /* origin and dir */
    __global const float *r = rays + i * rb_ray_floats(dims);
    int ok = 1;
    for (uint f = 0; f < fields; f++)
        ok &= rb_finite(r[f]);
    return ok && rb_range_ok(r[fields], r[fields + 1]);
}

static inline int rb_box_ok(__global const float *boxes, uint dims,
                            size_t i)
{
    __global const float *b = boxes + i * 2 * dims;
    int ok = 1;
    for (uint a = 0; a < dims; a++)
        ok &= rb_extent_ok(b[a], b[dims + a]);
    return ok;
}

static inline void rb_note_bad(__global uint *bad, uint code)
{
    atomic_min(bad, code);
}

/* rb_slab_hit with the ray's planes already chosen: near[a] / far[a] are
 * the offsets (in floats) of the arrays this ray reads first / second in a
 * tile of six arrays (lo x y z, hi x y z). */
static inline int rb_tile_hit(const rb_ray_prep *r, __local const float *tile,
                              const uint near[3], const uint far[3], uint k,
                              float *t_enter, float *t_exit)
{
    float e = r->tmin, x = r->tmax;
    for (int a = 0; a < 3; a++)
        rb_slab_step(tile[near[a] + k], tile[far[a] + k], r->o[a], r->inv[a],
                     &e, &x);
    *t_enter = e + 0.0f;
    *t_exit = x + 0.0f;
    return rb_slab_accept(e, x);
}
