/* testutil.h - shared helpers of the check suites: contexts for every
 * backend, a seeded generator, the public vectors, bitwise comparisons. */
#ifndef RB_TESTUTIL_H
#define RB_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <string.h>

#include "raybox.h"

/* Every backend a suite must check, in order: the native CPU backend and
 * OpenCL (PoCL here). OpenCL missing is a failure, not a skip, unless
 * RAYBOX_TEST_NO_OPENCL=1 says the machine has no OpenCL on purpose. */
enum { RBT_CPU = 0, RBT_OPENCL = 1, RBT_BACKENDS = 2 };
const char *rbt_backend_name(int which);
/* A new context for `which`; NULL only for OpenCL when allowed above.
 * Fails the test otherwise. */
rb_context *rbt_context(int which);
rb_context *rbt_context_opts(int which, const rb_context_options *opt);
/* A context with memory limits (0: the defaults) and the CPU fallback on
 * or off, that must exist (OpenCL required). */
rb_context *rbt_context_limited(int which, uint64_t max_buffer_bytes,
                                uint64_t memory_budget, int cpu_fallback);

/* size bytes (at least 1) aligned to align (at least a pointer's), as
 * rb_allocator.alloc promises, or NULL: the body of the tests' counting
 * and failing allocators. */
void *rbt_aligned_alloc(size_t size, size_t align);

/* Runs every test of s (check's runner, CK_NORMAL output), frees it and
 * returns the number that failed: the body of every suite's main. When
 * none failed it also removes the logs of the test servers its tests
 * started (RBT_SERVER_LOGS of rbt_runner_pid); a failed run keeps them
 * for a look. */
int rbt_run_suite(Suite *s);
/* The pid of the process running rbt_run_suite (its forked tests inherit
 * it), or this process's before that runs. */
long rbt_runner_pid(void);
/* printf format of a test server's log path, given rbt_runner_pid(); the
 * rest of the name is mkstemps's. */
#define RBT_SERVER_LOGS "/tmp/rayboxd-test-%ld-"

/* splitmix64: reproducible streams from a seed. */
typedef struct rbt_rng {
    uint64_t s;
} rbt_rng;
uint64_t rbt_next(rbt_rng *r);
float rbt_uniform(rbt_rng *r, float lo, float hi);
uint32_t rbt_below(rbt_rng *r, uint32_t n);

/* Bitwise float equality (so -0 != +0 and NaN == same NaN). */
static inline int rbt_same_float(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y;
}
int rbt_same_hit(const rb_hit *a, const rb_hit *b);
/* "hit=1 box=3 t=[4, 6] faces -x/+x" for failure messages. */
const char *rbt_hit_str(const rb_hit *h, char *buf, size_t len);

/* The public worked examples (tests/vectors/public.json). */
typedef struct rbt_vector {
    char id[16];
    char what[128];
    rb_ray ray;
    rb_box box;
    int expect;          /* 1 hit, 0 miss, -1 invalid */
    float t_enter, t_exit;
    int face, exit_face; /* rb_face */
} rbt_vector;
/* Loads every vector; returns the count (fails the test on error). */
size_t rbt_load_vectors(rbt_vector **out);

#endif
