/*
 * cl_testhook.h - internal hooks for the test suites, not part of the
 * public API: OpenCL fault injection and a look at how the program was
 * obtained. Both do nothing on a context without an OpenCL backend.
 */
#ifndef RB_CL_TESTHOOK_H
#define RB_CL_TESTHOOK_H

#include "raybox.h"

/* On a context over several devices the counters below add up over
 * them, and the rest is the first device's. */

/* Makes one later checked OpenCL call of ctx's backend fail with
 * CL_OUT_OF_RESOURCES without being made: n = 0 the very next one, n = k
 * the one after k successful calls. One shot; n < 0 disarms. */
void rb_cl_fail_after(rb_context *ctx, long n);

/* Checked OpenCL calls made by ctx's backend so far (0 without one), to
 * size fault-injection loops. */
unsigned long long rb_cl_calls(const rb_context *ctx);

/* Hierarchy walk launches (kernels/bvh.cl) and uploads of a node array
 * made by ctx's backend so far (0 without one): tests tell a walk from a
 * brute-force scan and see that a hierarchy is uploaded once per version. */
unsigned long long rb_cl_walks(const rb_context *ctx);
unsigned long long rb_cl_node_uploads(const rb_context *ctx);

/* Launches of the any (mode RB_MODE_ANY) or the count walk's ray streams
 * (kernels/bvh.cl, rb_bvh_stream_any/count: CPU devices) so far; and a
 * cap on a stream task's
 * list words, per ray (0: none, the bound of rb_bvh_stream_words), which
 * makes the lists run short so that the kernel walks its task's rays one
 * by one instead. */
unsigned long long rb_cl_stream_launches(const rb_context *ctx,
                                         rb_mode mode);
void rb_cl_stream_cap(rb_context *ctx, size_t words_per_ray);

/* Launches of the shape tree's walk (kernels/shapes.cl, rb_shape_walk_*)
 * and uploads of a shape tree (nodes and leaves) made by ctx's backend so
 * far (0 without one): tests tell the walk from the brute-force shape
 * pass and see that a scene's shape tree is uploaded once per version. */
unsigned long long rb_cl_shape_walks(const rb_context *ctx);
unsigned long long rb_cl_shape_uploads(const rb_context *ctx);

/* Device bytes ctx's backend keeps between queries (0 without one): the
 * box pass's grow-only buffers and a resident shape tree, which the
 * memory budget bounds. */
unsigned long long rb_cl_kept_bytes(const rb_context *ctx);

/* Launches of the visibility kernels (kernels/visibility.cl) made by
 * ctx's backend so far (0 without one): tests tell the segments made on
 * the device from the explicit ones. */
unsigned long long rb_cl_vis_launches(const rb_context *ctx);

/* Entries of the hierarchy walk's short stack in ctx's program
 * (kernels/bvh.cl; RAYBOX_CL_BVH_STACK sets it), 0 without a backend. */
unsigned rb_cl_bvh_stack(const rb_context *ctx);

/* 1 if ctx's program came from the binary cache, 0 if it was built from
 * source, -1 without an OpenCL backend. */
int rb_cl_program_from_cache(const rb_context *ctx);

/* Kernels of ctx's program never launched so far (0 without a backend);
 * their names, space-separated, into names (len bytes, truncated). The
 * warm-up test checks that rb_context_warm_up launched every one. */
size_t rb_cl_kernels_unlaunched(const rb_context *ctx, char *names,
                                size_t len);
/* Devices ctx's OpenCL backend runs on (1 for one device, 0 without
 * one), and, over several (rb_context_options.devices), each one's
 * measured speed (rays per ms) into out; returns how many it wrote. */
size_t rb_cl_device_count(const rb_context *ctx);
size_t rb_cl_device_speeds(const rb_context *ctx, double *out, size_t cap);

#endif /* RB_CL_TESTHOOK_H */
