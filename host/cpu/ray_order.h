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

/* The low 10 bits of x spread three apart (bit b goes to bit 3b): one
 * axis of a 30-bit Morton code (here and in bvh/bvh_morton.c). */
static inline uint32_t rb_spread3(uint32_t x)
{
    x &= 0x3ffu;
    x = (x | x << 16) & 0x030000ffu;
    x = (x | x << 8) & 0x0300f00fu;
    x = (x | x << 4) & 0x030c30c3u;
    x = (x | x << 2) & 0x09249249u;
    return x;
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

/* The sort rb_ray_order uses, for other keys: keys[0..n) (the sort key
 * in bits 32..61, anything in the low 32 bits) are sorted stably by their
 * key on the pool, and their low 32 bits written in that order to
 * order[0..n). keys must have room for 2n (the second half is scratch);
 * n <= UINT32_MAX. */
void rb_key_order(struct rb_pool *pool, uint64_t *keys, size_t n,
                  uint32_t *order);

#endif
