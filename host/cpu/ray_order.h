/*
 * ray_order.h - an order in which to walk a batch of rays through a
 * hierarchy so that consecutive rays visit the same nodes: along a Morton
 * curve through their origins, and by the octant of their direction.
 * Answers do not depend on the order (each ray's answer is its own); only
 * the cache hit rate does.
 */
#ifndef RB_CPU_RAY_ORDER_H
#define RB_CPU_RAY_ORDER_H

#include <stddef.h>
#include <stdint.h>

struct rb_pool;

/* The low 5 bits of i spread three apart (bit b to bit 3b). */
#define RB_SPREAD5(i)                                                        \
    (((i)&1u) | ((i)&2u) << 2 | ((i)&4u) << 4 | ((i)&8u) << 6 | ((i)&16u) << 8)
#define RB_SPREAD5_4(i)                                                      \
    RB_SPREAD5(i), RB_SPREAD5(i + 1u), RB_SPREAD5(i + 2u), RB_SPREAD5(i + 3u)

/* The low 10 bits of x spread three apart (bit b goes to bit 3b): one
 * axis of a 30-bit Morton code (here and in bvh/bvh_morton.c). Two
 * lookups of five bits each: the keys of a Morton sort cost a third of
 * the shifts and masks (test_bvh checks every input against the bits). */
static inline uint32_t rb_spread3(uint32_t x)
{
    static const uint32_t spread5[32] = {
        RB_SPREAD5_4(0u),  RB_SPREAD5_4(4u),  RB_SPREAD5_4(8u),
        RB_SPREAD5_4(12u), RB_SPREAD5_4(16u), RB_SPREAD5_4(20u),
        RB_SPREAD5_4(24u), RB_SPREAD5_4(28u)};
    return spread5[x & 31u] | spread5[x >> 5 & 31u] << 15;
}

/* Fills order[0..n) with a permutation of 0..n-1. Origins are placed on a
 * 512^3 grid over [lo, hi] (outside: clamped; NaN and other invalid
 * values are tolerated, they are reported later). octant_first groups by
 * direction octant first (measured better for count and all, whose rays
 * cross the scene), else by origin first (nearest and any, whose rays
 * stop near their origin). scratch holds 2n uint64_t. */
void rb_ray_order(struct rb_pool *pool, const void *rays, unsigned dims,
                  size_t n, const float lo[3], const float hi[3],
                  int octant_first, uint64_t *scratch, uint32_t *order);

/* Whether a walk over a box tree with bounds [lo, hi] and `bytes` of nodes
 * should take n rays in rb_ray_order's order: from RB_ORDER_MIN_RAYS rays
 * on, over trees of RB_ORDER_MIN_BYTES or more (internal.h), or over any
 * tree when the rays' origins lie in a slab: thin along one axis of the
 * tree (at most 1/16 of its extent) and spread along the other two (at
 * least 1/4), as eye-level rays in a city are, and scattered through it
 * in input order (consecutive origins on average at least 1/16 of the
 * slab's width apart: not a grid row by row, nor observers' blocks of
 * rays). Origins are read from 1024 rays, one from each 1/1024 of the
 * batch, and the ray after each. */
int rb_order_pays(const void *rays, unsigned dims, size_t n,
                  const float lo[3], const float hi[3], size_t bytes);

/* The sort rb_ray_order uses, for other keys: keys[0..n) (the sort key
 * in bits 32 to 31 + bits, 1 <= bits <= 32, the bits above it 0; anything
 * in the low 32 bits) are sorted stably by their key on the pool, and
 * their low 32 bits written in that order to order[0..n). Keys of 11 bits
 * or fewer take one pass, of 22 or fewer two, longer ones three. keys
 * must have room for 2n (the second half is scratch); n <= UINT32_MAX. */
void rb_key_order(struct rb_pool *pool, uint64_t *keys, size_t n,
                  unsigned bits, uint32_t *order);

#endif
