/*
 * stream_scratch.h - a worker's scratch for ray streams
 * (bvh/bvh_stream_avx2.c), laid out in one block per worker, and how many
 * rays a streamed task takes. Shared by the box walk (cpu_backend.c) and
 * the shape and joint walks (shape_scan.c).
 */
#ifndef RB_CPU_STREAM_SCRATCH_H
#define RB_CPU_STREAM_SCRATCH_H

#include "../bvh/bvh.h"
#include "../workmem.h"

/* A task streams when it gets at least RB_STREAM_MIN_RAYS rays (fewer
 * share too few nodes to pay for their lists) and takes at most
 * RB_STREAM_PER_TASK: measured faster than 4096 or 65536 at 100K boxes
 * (docs/benchmarks.md, "Ray streams"). Deeper trees get shorter tasks
 * within RB_STREAM_WORKER_MAX_BYTES of scratch a worker. */
#define RB_STREAM_MIN_RAYS 64
#define RB_STREAM_PER_TASK 16384
#define RB_STREAM_WORKER_MAX_BYTES ((size_t)32 << 20)

typedef struct rb_stream_scratch {
    rb_ray_prep *prep;
    rb_ray_raw *raw; /* shape and joint walks only */
    uint32_t *index; /* each stream ray's index in the query */
    uint32_t *count;
    uint8_t *any;
    rb_joint_best *best; /* nearest */
    rb_hit *shape_hits;  /* nearest, shape and joint walks only */
    uint32_t *arena;
    size_t words;
} rb_stream_scratch;

/* The bytes of a worker's scratch for tasks of n rays over a tree of
 * `depth` levels (raw: a shape or joint walk's, with the raw rays and the
 * shape answers); with base, *s gets its arrays there. */
static inline size_t rb_stream_layout(size_t n, unsigned depth, int raw,
                                      char *base, rb_stream_scratch *s)
{
    size_t at = 0, words = rb_bvh_stream_words(n, depth);
#define RB_PLACE(field, bytes)                                                 \
    do {                                                                       \
        if (base)                                                              \
            s->field = (void *)(base + at);                                    \
        at += ((bytes) + 63) / 64 * 64;                                        \
    } while (0)
    RB_PLACE(prep, n * sizeof(rb_ray_prep));
    if (raw)
        RB_PLACE(raw, n * sizeof(rb_ray_raw));
    RB_PLACE(index, n * sizeof(uint32_t));
    RB_PLACE(count, n * sizeof(uint32_t));
    RB_PLACE(any, n);
    RB_PLACE(best, n * sizeof(rb_joint_best));
    if (raw)
        RB_PLACE(shape_hits, n * sizeof(rb_hit));
    RB_PLACE(arena, words * sizeof(uint32_t));
#undef RB_PLACE
    if (base)
        s->words = words;
    return at;
}

/* Rays a streamed task takes when a plain split gives `per` rays a task;
 * 0: do not stream. */
static inline size_t rb_stream_task_rays(size_t per, unsigned depth, int raw)
{
    size_t n = per < RB_STREAM_PER_TASK ? per : RB_STREAM_PER_TASK;
    size_t one = rb_stream_layout(1, depth, raw, NULL, NULL);
    if (n * one > RB_STREAM_WORKER_MAX_BYTES)
        n = RB_STREAM_WORKER_MAX_BYTES / one;
    return n >= RB_STREAM_MIN_RAYS ? n : 0;
}

/* A run's stream scratch: one block from the context's work memory, a
 * slice of `bytes` a worker, for tasks of `rays` rays. */
typedef struct rb_streams {
    char *mem; /* NULL: no streams, every ray walks alone */
    size_t bytes;
    size_t total; /* the block's size, as rb_workmem_take left it */
    size_t rays;
    unsigned depth;
    int raw;
} rb_streams;

/* Takes the scratch of `workers` workers for streamed tasks, when a
 * plain split gives `per` rays a task over a tree of `depth` levels (raw:
 * with the raw rays). Returns the rays a streamed task takes, or 0 (too
 * few rays a task, or no memory: rays walk one by one, s->mem NULL). */
static inline size_t rb_streams_take(rb_streams *s, rb_workmem *w,
                                     unsigned workers, size_t per,
                                     unsigned depth, int raw)
{
    *s = (rb_streams){.depth = depth, .raw = raw};
    size_t rays = rb_stream_task_rays(per, depth, raw);
    if (!rays)
        return 0;
    s->bytes = rb_stream_layout(rays, depth, raw, NULL, NULL);
    s->total = s->bytes * workers;
    s->mem = rb_workmem_take(w, &s->total);
    if (!s->mem)
        return 0;
    s->rays = rays;
    return rays;
}

/* Worker `worker`'s arrays in s. */
static inline void rb_streams_worker(const rb_streams *s, unsigned worker,
                                     rb_stream_scratch *out)
{
    rb_stream_layout(s->rays, s->depth, s->raw,
                     s->mem + (size_t)worker * s->bytes, out);
}

static inline void rb_streams_give(rb_streams *s, rb_workmem *w)
{
    rb_workmem_give(w, s->mem, s->total);
    s->mem = NULL;
}

#endif
