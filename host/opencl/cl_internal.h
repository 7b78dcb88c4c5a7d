/*
 * cl_internal.h - the OpenCL backend's state, shared by its files:
 * cl_backend.c (create, describe, destroy), cl_program.c (build + binary
 * cache), cl_plan.c (chunk sizes), cl_run.c (a query's launches).
 */
#ifndef RB_CL_INTERNAL_H
#define RB_CL_INTERNAL_H

#include "cl_devices.h"

/* The kernels of kernels/brute.cl (brute force), kernels/bvh.cl (the
 * hierarchy walk), kernels/shapes.cl (the shape pass, brute force and
 * through the shape tree) and
 * kernels/visibility.cl (observers x targets). */
typedef enum rb_cl_kernel_id {
    RB_CLK_PAIRS,
    RB_CLK_NEAREST,
    RB_CLK_ANY,
    RB_CLK_COUNT,
    RB_CLK_ALL,
    RB_CLK_BVH_NEAREST,
    RB_CLK_BVH_ANY,
    RB_CLK_BVH_COUNT,
    RB_CLK_BVH_ALL,
    RB_CLK_SHAPES_PAIRS, /* kernels/shapes.cl, in rb_mode order */
    RB_CLK_SHAPES_NEAREST,
    RB_CLK_SHAPES_ANY,
    RB_CLK_SHAPES_COUNT,
    RB_CLK_SHAPES_ALL,
    RB_CLK_SHAPE_WALK_NEAREST, /* kernels/shapes.cl, the shape tree's walk */
    RB_CLK_SHAPE_WALK_ANY,
    RB_CLK_SHAPE_WALK_COUNT,
    RB_CLK_SHAPE_WALK_ALL,
    RB_CLK_SHAPE_REST_NEAREST, /* kernels/shapes.cl, launched after a walk */
    RB_CLK_SHAPE_REST_ANY,
    RB_CLK_SHAPE_REST_COUNT,
    RB_CLK_SHAPE_REST_ALL,
    RB_CLK_JOINT_WALK_NEAREST, /* kernels/shapes.cl, a joint tree's walk */
    RB_CLK_JOINT_WALK_ANY,
    RB_CLK_JOINT_WALK_COUNT,
    RB_CLK_JOINT_WALK_ALL,
    RB_CLK_VIS_BRUTE, /* kernels/visibility.cl */
    RB_CLK_VIS_BVH,
    RB_CLK_BVH_STREAM_ANY, /* kernels/bvh.cl, ray streams: wide only */
    RB_CLK_BVH_STREAM_COUNT,
    RB_CLK_BVH_STREAM_NEAREST,
    RB_CLK_N
} rb_cl_kernel_id;

/* Grow-only device buffers, kept across queries. */
typedef enum rb_cl_buffer_id {
    RB_CLB_RAYS,       /* a chunk of raw rays */
    RB_CLB_PAIR_BOXES, /* pairs: the chunk's raw boxes */
    RB_CLB_BOXES,      /* every-box modes: a boxset or one chunk of it */
    RB_CLB_OUT,        /* hits, any flags or counts */
    RB_CLB_LIST,       /* all: max_hits slots per ray */
    RB_CLB_BAD,        /* one uint: the lowest invalid element (R6) */
    RB_CLB_NODES,      /* hierarchy jobs: the whole node array */
    RB_CLB_ORDER,      /* hierarchy jobs: the order of the chunk's rays */
    RB_CLB_OBSERVERS,  /* visibility: every observer */
    RB_CLB_TARGETS,    /* visibility: every target */
    RB_CLB_ARENA,      /* ray streams: one launch's tasks' arenas */
    RB_CLB_N
} rb_cl_buffer_id;

/* The shape tree's resident buffers (cl_shapes.c). */
typedef enum rb_cl_shape_buffer_id {
    RB_CLS_NODES, /* the tree's rb_bvh_node array */
    RB_CLS_LBOX,  /* leaves: obbs and xboxes in slot order */
    RB_CLS_BALL,  /* leaves: spheres */
    RB_CLS_IDS,   /* the leaves' ids */
    RB_CLS_N
} rb_cl_shape_buffer_id;

typedef struct rb_cl_buffer {
    cl_mem mem;
    size_t cap; /* bytes */
} rb_cl_buffer;

/* Work-group size the kernels are launched with, unless the device needs
 * another (see rb_cl_pick_work_group). A compile-time knob: -D on the
 * compiler command line. */
#ifndef RB_CL_WORK_GROUP
#define RB_CL_WORK_GROUP 64
#endif
/* Boxes per __local tile, in work-groups: each item loads this many. */
#ifndef RB_CL_TILE_PER_ITEM
#define RB_CL_TILE_PER_ITEM 4
#endif

/* __local bytes of a tile of n boxes: six rows, RB_PITCH (brute.cl)
 * floats apart. */
static inline size_t rb_cl_tile_bytes(size_t n)
{
    return 6 * (n + 1) * sizeof(float);
}

typedef struct rb_cl_backend {
    rb_backend base;
    rb_context *ctx;
    rb_cl_env env;
    rb_cl_device dev;
    cl_context context;
    cl_command_queue queue;
    cl_program program;
    cl_kernel kernels[RB_CLK_N];
    int from_cache;       /* the program came from the binary cache */
    int exact_division;   /* the kernel's 1/d is correctly rounded */
    int wide;             /* brute_wide.cl's kernels (CPU devices) */
    unsigned bvh_stack;   /* entries of the walk's short stack (bvh.cl) */
    int zero_copy;        /* rays and answers stay in the caller's memory */
    size_t wg;            /* work-group size of every launch */
    size_t tile;          /* boxes per __local tile */
    uint64_t max_buf;     /* largest buffer, bytes */
    uint64_t budget;      /* device memory one query may hold, bytes */
    rb_cl_buffer bufs[RB_CLB_N];
    /* What RB_CLB_BOXES holds: boxes [begin, end) of the boxset with this
     * uid, so that a scene queried again is not uploaded again. */
    int boxes_valid;
    uint64_t boxes_uid;
    size_t boxes_begin, boxes_end;
    /* What RB_CLB_NODES holds: the hierarchy over the boxset with this uid
     * (every change of a scene's boxes or hierarchy, and every rebuild of
     * a transient one, comes with a new boxset uid), n_nodes long. */
    int nodes_valid;
    uint64_t nodes_uid;
    size_t nodes_n;
    uint64_t walks, node_uploads; /* for the tests (cl_testhook.h) */
    uint64_t stream_launches[3];  /* likewise: by rb_cl_stream_slot */
    size_t stream_cap; /* tests: list words a stream task's ray (0: the
                        * bound), to make the lists run short */
    /* What the shape tree's buffers hold (cl_shapes.c): the nodes and
     * leaf records (rb_shapeset.leaves) of the tree `shapes_tree` whose
     * bounds have uid shapes_uid (every rebuild of a scene's or query's
     * shape tree comes with a new one), so a scene stays on the device. */
    cl_mem shape_tree[RB_CLS_N];
    uint64_t shapes_bytes; /* what they hold on the device; 0 without */
    int shapes_valid;
    uint64_t shapes_uid;
    const void *shapes_tree;
    uint64_t shape_walks, shape_uploads; /* for the tests, likewise */
    uint32_t launched; /* bit k: kernels[k] was launched (warm-up test) */
    uint64_t vis_launches;        /* visibility.cl launches, likewise */
    /* RAYBOX_CL_VISIBILITY=segments: visibility through explicit segments
     * (the tiles of host/visibility.c), to measure one against the other */
    int vis_explicit;
} rb_cl_backend;

/* A streamed mode's ray-stream kernel and stream_launches counter: any 0,
 * count 1, nearest 2. */
static inline int rb_cl_stream_slot(rb_mode mode)
{
    return mode == RB_MODE_ANY ? 0 : mode == RB_MODE_COUNT ? 1 : 2;
}

/* Entries of the hierarchy walk's short stack (kernels/bvh.cl), a power
 * of two: the tiled variant's keeps a GPU's local memory per work-item
 * small (docs/gpu.md); the wide variant's never overflows on a CPU device
 * (above RB_BVH_STACK, host/bvh/bvh.h), where private memory is cheap.
 * RAYBOX_CL_BVH_STACK=N overrides both (tests force overflows with 1). */
#define RB_CL_BVH_STACK_TILED 16u
#define RB_CL_BVH_STACK_WIDE 1024u
#define RB_CL_BVH_STACK_MAX 1024u

/* How the device divides (R8), for the build options. */
enum rb_cl_division {
    RB_CL_DIV_EXACT,  /* -cl-fp32-correctly-rounded-divide-sqrt */
    RB_CL_DIV_DOUBLE, /* no such option but fp64: RB_RECIP_VIA_DOUBLE */
    RB_CL_DIV_NONE    /* neither: plain 1/d (reported as not exact) */
};

/* cl_program.c: the options the program is built with for a kernel
 * variant (wide or tiled), a division and a short stack of bvh_stack
 * entries, into out (cap bytes, always NUL-terminated). The GPU report
 * (tests/gpu_options.c, scripts/gpu-report.sh) prints them too. */
void rb_cl_build_options(int wide, enum rb_cl_division div,
                         unsigned bvh_stack, char *out, size_t cap);

/* cl_program.c: builds the program for be->dev (or loads it from the
 * binary cache) and creates the kernels. RB_EBUILD with the log stored in
 * the context (rb_set_build_log) when the source does not compile. */
int rb_cl_program_build(rb_cl_backend *be, char *why, size_t why_len);
/* Notes that kernel k of be's program is being launched (cl_testhook.h's
 * rb_cl_kernels_unlaunched reads it). */
void rb_cl_note_launch(rb_cl_backend *be, cl_kernel k);
/* Whether kernel k (rb_cl_kernel_id) is only in the wide variant's
 * program (the ray streams: CPU devices); be->kernels[k] is NULL in the
 * tiled one's. */
int rb_cl_kernel_wide_only(int k);
/* The name of kernel k (rb_cl_kernel_id) in the program. */
const char *rb_cl_kernel_name(int k);
void rb_cl_program_release(rb_cl_backend *be);

/* cl_plan.c: how a job is cut into launches so that every buffer fits
 * max_buf and all of them together fit the budget. */
typedef struct rb_cl_plan {
    int bvh;            /* walk job->bvh (its nodes in RB_CLB_NODES) */
    size_t rays;        /* rays per chunk (the last may hold fewer) */
    size_t boxes;       /* every-box modes: boxes per box chunk */
    int boxes_whole;    /* the whole boxset is one chunk, uploaded as is */
    size_t box_stride;  /* floats per array in the device box buffer */
    size_t bytes[RB_CLB_N]; /* size each buffer needs; 0 = unused */
    /* count and any walks as ray streams (bvh.cl, the wide variant):
     * work-items a launch, each with its arena in RB_CLB_ARENA (0: the
     * one-ray walk), and rays a task at most */
    size_t stream_tasks;
    size_t stream_rays;
} rb_cl_plan;

/* Rays of a ray stream's task at most (as the CPU's streams,
 * bvh_stream_avx2.c: with 4096, PoCL's count over 1M boxes ran 0.8x the
 * one-ray walk, with 16384 1.3x), and work-items (arenas) a launch per
 * compute unit: a chunk is cut into at least that many tasks, which the
 * items take in turn (about 7 MiB an arena over 1M boxes). */
#define RB_CL_STREAM_RAYS 16384u
#define RB_CL_STREAM_TASKS_PER_UNIT 4u
/* Fewer rays a task than this, and the one-ray walk runs instead (the
 * plan halves the tasks from RB_CL_STREAM_RAYS until the arena fits). */
#define RB_CL_STREAM_MIN_RAYS 256u

/* Arena words of a stream task of n rays over a tree of `depth` levels,
 * in the layout of bvh.cl's rb_bvh_stream_kernel: the prepared rays (8
 * words each), their answers, the pending stack (RB_BVH_STACK entries of
 * 3 words: the kernel's RB_WALK_NEED, as the build options set
 * RB_BVH_DEPTH to RB_BVH_MAX_DEPTH), then the lists, of the bound's size
 * (rb_bvh_stream_words) or cap words a ray where that is less (cap 0:
 * none; the tests' rb_cl_stream_cap); a multiple of 16 words, so that
 * every task's prepared rays start 64-byte aligned. */
size_t rb_cl_stream_words(size_t n, unsigned depth, size_t cap);

/* RB_OK, or RB_EDEVMEM with the reason in why when not even one ray (or
 * one box) fits. A job with a hierarchy is planned as a walk when its node
 * array fits one buffer and, beside one work-group of rays, the budget;
 * otherwise as a brute-force scan of its boxes (plan.bvh = 0), which gives
 * the same answers. stream_tasks (0: none) are the tasks a launch of the
 * ray streams holds, which any and count walks use when their arena fits
 * beside the nodes (plan.stream_tasks). */
int rb_cl_plan_job(const rb_job *job, uint64_t max_buf, uint64_t budget,
                   size_t wg, size_t stream_tasks, rb_cl_plan *out,
                   char *why, size_t why_len);

/* cl_shapes.c: the backend's run_shapes() (see struct rb_backend_ops):
 * the walk of set->tree where the set has one that fits the budget, else
 * brute force over every shape; the answers are the same (R16). */
int rb_cl_run_shapes(rb_backend *self, rb_context *ctx, const rb_job *job,
                     const rb_shapeset *set, rb_results *res);
/* cl_shapes.c: the backend's run_joint() (see struct rb_backend_ops): the
 * joint tree's walk where it fits the budget, else RB_JOINT_DECLINED. */
int rb_cl_run_joint(rb_backend *self, rb_context *ctx, const rb_job *job,
                    const rb_shapeset *set, rb_results *res,
                    rb_bad_input *bad);
/* cl_shapes.c: releases the shape tree's buffers (rb_cl_release_buffers
 * calls it). */
void rb_cl_release_shape_tree(rb_cl_backend *be);

/* cl_run.c: the backend's run() (see struct rb_backend_ops). */
int rb_cl_run(rb_backend *self, rb_context *ctx, const rb_job *job,
              rb_results *res, rb_bad_input *bad);
/* cl_run.c: the backend's run_visibility() (see struct rb_backend_ops):
 * kernels/visibility.cl over row chunks of the bit matrix. */
int rb_cl_run_visibility(rb_backend *self, rb_context *ctx,
                         const rb_vis_job *job, uint8_t *bits,
                         rb_run_info *info);
/* cl_multi.c (rb_cl_multi_create in internal.h): whether b is the
 * backend over several devices; its device contexts into out (at most cap),
 * returning how many it has (0 for any other backend); their speeds
 * (units per ms) likewise. */
int rb_cl_is_multi(const rb_backend *b);
size_t rb_cl_multi_devices(const rb_backend *b, rb_context **out, size_t cap);
int rb_cl_multi_speeds(const rb_backend *b, double *out, size_t cap);
/* Releases every grow-only buffer (after a device memory failure). */
void rb_cl_release_buffers(rb_cl_backend *be);
/* cl_run.c: the box pass's grow-only buffers (be->bufs): the bytes they
 * hold, and their release (they are a cache; the shape pass frees them
 * when it needs their room within the budget). */
uint64_t rb_cl_box_buffer_bytes(const rb_cl_backend *be);
void rb_cl_release_box_buffers(rb_cl_backend *be);

#endif /* RB_CL_INTERNAL_H */
