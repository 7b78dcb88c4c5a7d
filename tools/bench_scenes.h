/* bench_scenes.h - the random scenes of raybox-bench-shapes (and of
 * raybox-bench-ab, which times two builds on them): N elements of one
 * kind, or N/4 of each bounded kind (mixed), in the unit cube, sized so
 * that a ray path of unit length crosses about `fill` of them
 * (bench_shapes.c's header says how). */
#ifndef RB_BENCH_SCENES_H
#define RB_BENCH_SCENES_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"

enum { K_BOX, K_OBB, K_XBOX, K_SPHERE, K_MIXED, K_KINDS };
extern const char *const bench_kind_names[K_KINDS];

/* A scene's elements: n[0] boxes, n[1] obbs, n[2] xboxes, n[3] spheres
 * (ids in that order). */
typedef struct bench_elements {
    rb_box *boxes;
    rb_obb *obbs;
    rb_xbox *xboxes;
    rb_sphere *spheres;
    size_t n[4];
} bench_elements;

/* n elements of kind (K_*) from seed; 0, or -1 out of memory (free *e
 * with bench_elements_free either way). */
int bench_make_elements(int kind, size_t n, float fill, uint64_t seed,
                        bench_elements *e);
void bench_elements_free(bench_elements *e);
/* The shapes of e, as rb_scene_create_shapes takes them. */
rb_shapes bench_shapes_of(const bench_elements *e);
/* The seed of the scene of kind `kind` and the size_index-th size of a
 * run seeded with `seed`: raybox-bench-shapes and raybox-bench-ab build
 * the same scenes from it. */
uint64_t bench_scene_seed(uint64_t seed, size_t size_index, int kind);
/* The kind named `name`, or -1. */
int bench_kind_of(const char *name);

#endif
