/* scenes.h - the scene shapes and the exactness check of the hierarchy
 * suites (test_bvh, test_cl_bvh): box sets chosen to break node tests
 * (shared planes, flat and point boxes, identical boxes, huge and tiny
 * coordinates, deep trees), rays chosen to graze them (aimed at faces,
 * edges and corners, axis-parallel with +0/-0 and origins on planes, zero
 * directions, origins inside, segments), and a bitwise comparison of the
 * every-box modes across contexts. */
#ifndef RB_TEST_SCENES_H
#define RB_TEST_SCENES_H

#include "testutil.h"

enum rbt_scene_kind {
    RBT_SC_UNIFORM, RBT_SC_CLUSTERED, RBT_SC_THIN, RBT_SC_FLAT_POINTS,
    RBT_SC_OVERLAP, RBT_SC_IDENTICAL, RBT_SC_GRID, RBT_SC_HUGE, RBT_SC_TINY,
    RBT_SC_DEEP, RBT_SC_SINGLE, RBT_SC_EMPTY, RBT_SC_KINDS
};
extern const char *const rbt_scene_kind_name[RBT_SC_KINDS];

/* Up to n boxes of the kind into out; returns how many (SINGLE: 1, EMPTY:
 * 0). */
size_t rbt_scene_boxes(int kind, size_t n, rbt_rng *g, rb_box *out);
/* The union of the boxes (a unit-ish range when n == 0). */
void rbt_scene_bounds(const rb_box *b, size_t n, float lo[3], float hi[3]);
/* n rays for the boxes (see above), ranges included. */
void rbt_scene_rays(rbt_rng *g, const rb_box *boxes, size_t nb, rb_ray *rays,
                    size_t n);
/* 2D copies (z dropped). */
void rbt_scene_to_2d(const rb_box *b3, size_t nb, const rb_ray *r3,
                     size_t nr, rb_box2 *b2, rb_ray2 *r2);
/* The box with centre c and half extents h. */
void rbt_box_around(rb_box *b, const float c[3], const float h[3]);
/* Moves the box by up to `amount` per axis. */
void rbt_box_jitter(rbt_rng *g, rb_box *b, float amount);

/* Runs q in every every-box mode on each of the n contexts and fails the
 * test unless ctxs[1..n) answer bitwise as ctxs[0] does (all: counts and
 * the valid list entries), no context fell back, and each answered on
 * the backend it was created for. names[k] labels ctxs[k] in messages.
 * Adds q.n_rays to the count rbt_rays_checked() reports. */
void rbt_compare_query(rb_context *const *ctxs, const char *const *names,
                       int n, rb_query q, const char *what);
/* Call in main before the suites run: check forks a process per test, so
 * the count lives in memory shared with the children. */
void rbt_rays_count_init(void);
/* Rays compared so far, in every test process. */
size_t rbt_rays_checked(void);

#endif
