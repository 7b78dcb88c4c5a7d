/*
 * shapes.h - named scene shapes: seeded box sets and the rays that suit
 * them, so that "rays/s on a clustered scene" means the same data on every
 * machine and in every tool that uses this generator (raybox-bench, tests).
 *
 * Every shape lives in the cube [0, 100]^3 and scales its boxes with the
 * box count, so that a ray meets a similar number of boxes at any size.
 * The generators are deterministic: the same seed gives the same bytes.
 */
#ifndef RBENCH_SHAPES_H
#define RBENCH_SHAPES_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"

typedef struct rbench_shape {
    const char *name;
    const char *about; /* one line for --help */
    void (*boxes)(uint64_t seed, rb_box *out, size_t n);
    void (*rays)(uint64_t seed, rb_ray *out, size_t n);
} rbench_shape;

/* Every shape, in a fixed order; *count gets how many. */
const rbench_shape *rbench_shapes(size_t *count);
/* The shape called name, or NULL. */
const rbench_shape *rbench_shape_find(const char *name);

#endif
