/*
 * internal.h - what the host library's modules share: the context, the
 * backend table, prepared boxes and the job a backend runs. Not installed.
 */
#ifndef RB_INTERNAL_H
#define RB_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "raybox.h"
#include "slab.h"
#include "workmem.h"

struct rb_pool;
struct rb_bvh;
struct rb_shapeset;

/* Every-box scans read boxes as six float arrays (structure of arrays) so
 * that SIMD lanes hold consecutive boxes. The arrays are padded to a
 * multiple of RB_BOX_PAD with boxes no ray can hit (min = +inf, max = -inf:
 * their entry distance is +inf on every axis, R5 then rejects them). */
#define RB_BOX_PAD 16

/* From this many rays on, hierarchy walks (CPU and OpenCL) follow the
 * Morton order of ray_order.h: sorting took ~5% of the walk time and
 * bought 1.3-1.6x faster nearest walks on 100K-1M random boxes
 * (raybox-bench-bvh, one thread), more where the tree outgrows the
 * caches. */
#define RB_ORDER_MIN_RAYS 8192
/* ... but only over a tree whose nodes (and shape records, which a shape
 * walk reads in tree order) take this many bytes or more (OpenCL's box
 * walk on a GPU sorts whatever the size, cl_run.c). A smaller one stays
 * in the caches in any order, and then sorting and reading the rays out
 * of order only cost. Measured on the 2-core development machine (512 KiB
 * L2 a core, 32 MiB L3), 1M random rays from inside random boxes, time
 * with the order / time in input order: any 1.8, nearest 1.4 at 1K boxes
 * (50 KiB of nodes); 1.2-1.3 at 10K (0.5 MiB); 1.1-1.2 at 30K (1.4 MiB);
 * 0.97-1.05 at 60K (2.9 MiB); any 0.82, nearest and count ~1.05 at 100K
 * (4.8 MiB); 0.5-0.55 for every mode at 1M (50 MiB). Box walks also sort
 * over smaller trees when the origins lie in a slab (eye-level rays in a
 * city: any 1.3-1.5x; rb_order_pays in cpu/ray_order.c, and
 * docs/benchmarks.md, "Regression check"). A context's walk_order
 * (RB_WALK_ORDER_ALWAYS) sorts whatever the size. */
#define RB_ORDER_MIN_BYTES ((size_t)4 << 20)

typedef struct rb_boxset {
    size_t n;        /* real boxes */
    size_t stride;   /* floats per array: n rounded up to RB_BOX_PAD */
    float *data;     /* lo_x, lo_y, lo_z, hi_x, hi_y, hi_z, each `stride` */
    uint64_t uid;    /* unique per content version; device caches key on it */
} rb_boxset;

static inline const float *rb_boxset_lo(const rb_boxset *b, int axis)
{
    return b->data + (size_t)axis * b->stride;
}

static inline const float *rb_boxset_hi(const rb_boxset *b, int axis)
{
    return b->data + (size_t)(3 + axis) * b->stride;
}

/* A validated query as backends see it. Every-box modes get prepared boxes;
 * rays (and the boxes of pairs) arrive raw and each backend validates them
 * chunk by chunk with rb_check_rays/rb_check_boxes before computing the
 * chunk, so that a batch is read from memory once. */
typedef struct rb_job {
    rb_mode mode;
    unsigned dims;
    const void *rays;
    size_t n_rays;
    const void *pair_boxes;     /* pairs only: raw boxes, n_rays of them */
    /* Pairs of shapes: ray k meets element pair_first + k of the shape
     * set, and answers with that id (a part of a batch split over
     * devices, host/opencl/cl_multi.c; 0 otherwise). */
    size_t pair_first;
    const rb_boxset *boxes;     /* every-box modes */
    /* Every-box modes: a hierarchy over `boxes` (host/bvh/bvh.h), or NULL.
     * A backend that cannot traverse it scans `boxes` instead; the
     * answers are the same (SPEC R9). */
    const struct rb_bvh *bvh;
    uint32_t max_hits;
    int (*stop)(void *stop_user); /* rb_query.stop, or NULL */
    void *stop_user;
} rb_job;

/* Whether the job's stop callback asks it to stop (backends ask between
 * pieces of work and then return RB_ECANCELED). */
static inline int rb_job_stopped(const rb_job *job)
{
    return job->stop && job->stop(job->stop_user);
}

/* rb_job_stopped as a callback (rb_bvh_stream.stop): user is the job. */
static inline int rb_job_stop_cb(void *job)
{
    return rb_job_stopped(job);
}

/* Where the first invalid element of a chunk is. index == UINT64_MAX: none. */
typedef struct rb_bad_input {
    uint64_t index;
    rb_element_kind element;
} rb_bad_input;

typedef struct rb_backend rb_backend;

/* A validated visibility query (host/visibility.c) as a backend's
 * run_visibility sees it: every point finite, every t - o finite, a 3D
 * scene of boxes only. bvh: the hierarchy rb_intersect would walk for
 * these segments (rb_query_scene_bvh), NULL for brute force. */
typedef struct rb_vis_job {
    const float *observers, *targets;
    size_t n_observers, n_targets;
    float tmin, tmax;
    const rb_boxset *boxes;
    const struct rb_bvh *bvh;
    int subnormal_points; /* some coordinate is subnormal */
    int (*stop)(void *stop_user);
    void *stop_user;
} rb_vis_job;

/* run_visibility's answer when it leaves the query to the explicit
 * segments (rb_visibility's tiles through rb_intersect). */
#define RB_VIS_DECLINED 1
/* run_joint's answer when it leaves the query to the two passes. */
#define RB_JOINT_DECLINED 1

/* Lowers *slot to v when v is lower: the lowest invalid element that the
 * tasks of a pass have met, whatever order they ran in. */
static inline void rb_atomic_lower(atomic_uint_fast64_t *slot, uint64_t v)
{
    uint64_t cur = atomic_load(slot);
    while (v < cur && !atomic_compare_exchange_weak(slot, &cur, v))
        ;
}

/* The backend table. run() computes a job into results (which rb_intersect
 * has checked); on RB_EINPUT it fills *bad with the lowest invalid element.
 * describe() fills the static parts of rb_backend_info. */
struct rb_backend_ops {
    const char *name;
    int bvh; /* 1 if run() traverses job->bvh when there is one */
    int (*run)(rb_backend *self, rb_context *ctx, const rb_job *job,
               rb_results *results, rb_bad_input *bad);
    void (*describe)(const rb_backend *self, rb_backend_info *out);
    void (*destroy)(rb_backend *self);
    /* Optional: the shape pass on this backend (rb_shapes_run's contract;
     * NULL: the CPU's rb_shapes_run runs it). A failure may leave the
     * outputs half combined: the caller then runs both passes again. */
    int (*run_shapes)(rb_backend *self, rb_context *ctx, const rb_job *job,
                      const struct rb_shapeset *set, rb_results *res);
    /* Optional: both passes in one over a joint tree (rb_joint_run's
     * contract, its rays validated here); RB_JOINT_DECLINED when it
     * cannot, and the two passes run instead (over several devices some
     * may have written answers by then, which the two passes write
     * again). NULL: the two passes, unless the backend is the CPU's
     * (rb_joint_run). */
    int (*run_joint)(rb_backend *self, rb_context *ctx, const rb_job *job,
                     const struct rb_shapeset *set, rb_results *res,
                     rb_bad_input *bad);
    /* Optional: observers x targets with the segments made by the backend
     * itself, the bit matrix (zeroed, rows of ceil(n_targets / 8) bytes)
     * into bits, what ran into *info. RB_VIS_DECLINED (nothing written)
     * when it cannot; NULL: always the explicit segments. A device
     * failure may leave bits half written: the caller starts again. */
    int (*run_visibility)(rb_backend *self, rb_context *ctx,
                          const rb_vis_job *job, uint8_t *bits,
                          rb_run_info *info);
};

struct rb_backend {
    const struct rb_backend_ops *ops;
};

struct rb_context {
    rb_allocator alloc;
    rb_context_options opt;      /* strings not kept: see cache_dir/kernel_dir */
    char *cache_dir;             /* owned copies, may be NULL */
    char *kernel_dir;
    struct rb_pool *pool;        /* host threads: CPU backend and validation */
    rb_backend *cpu;             /* always present: reference and fallback */
    rb_backend *cl;              /* NULL unless OpenCL serves */
    rb_backend *active;          /* cpu or cl */
    char skipped[256];           /* why OpenCL is not active (auto) */
    rb_error err;
    char *build_log;             /* owned, "" when none */
    rb_workmem workmem;          /* big work arrays kept between calls */
    rb_boxset scratch_boxes;     /* grow-only, for queries with inline boxes */
    size_t scratch_cap;          /* floats allocated in scratch_boxes.data */
    int bvh_use;                 /* RB_BVH_USE_*: options.hierarchy, or
                                    $RAYBOX_BVH when that is AUTO */
    int bvh_build;               /* RB_HIERARCHY_BUILD_*: the option, or
                                    $RAYBOX_BVH_BUILD when that is SAH */
    struct rb_bvh *scratch_bvh;  /* transient hierarchy of inline boxes */
    /* CPU walks: RB_WALK_ORDER_AUTO sorts big batches over big trees
     * (cpu_backend.c); the tests set ALWAYS so that small trees take the
     * sorted path too. Zero (AUTO) on creation. */
    int walk_order;
    /* OpenCL on CPU devices: any, count and nearest over a box hierarchy
     * as ray streams (kernels/bvh.cl; nearest where a task gets
     * RB_BVH_NEAREST_STREAM_MIN rays or more), or, when 0 (CL_STREAMS_OFF),
     * one ray a work-item as on GPUs. $RAYBOX_CL_STREAMS=off sets 0 at
     * creation (A/B runs); the warm-up clears it for a query to build the
     * one-ray kernels too, and sets CL_STREAMS_ALWAYS (nearest streams
     * whatever its size) for its one-ray query to build the stream's. */
    int cl_streams;
};

enum { RB_CL_STREAMS_OFF = 0, RB_CL_STREAMS_ON = 1, RB_CL_STREAMS_ALWAYS = 2 };

enum { RB_WALK_ORDER_AUTO = 0, RB_WALK_ORDER_ALWAYS = 1 };

/* When queries go through a hierarchy. AUTO: for scenes of 256 boxes or
 * more, for inline boxes when the cost model of query.c says building one
 * pays. OFF: never (brute force, the reference the tests compare
 * against). ALWAYS: every scene and inline box set, however small. The
 * values of rb_context_options.hierarchy. */
enum {
    RB_BVH_USE_AUTO = RB_HIERARCHY_AUTO,
    RB_BVH_USE_OFF = RB_HIERARCHY_OFF,
    RB_BVH_USE_ALWAYS = RB_HIERARCHY_ALWAYS
};

/* ---- memory (alloc.c): every host allocation goes through ctx->alloc. */
void *rb_alloc(rb_context *ctx, size_t size, size_t align);
void *rb_calloc(rb_context *ctx, size_t size, size_t align);
void rb_free(rb_context *ctx, void *ptr);
char *rb_strdup(rb_context *ctx, const char *s);
void rb_allocator_default(rb_allocator *out);
/* The default allocator keeps big freed blocks for the whole process
 * (alloc.c): frees them all now; the bytes kept (tests). */
void rb_alloc_trim_default(void);
size_t rb_alloc_kept_default(void);
/* The allocator alone, for objects that outlive a context (scenes). */
void *rb_alloc_with(const rb_allocator *a, size_t size, size_t align);
void rb_free_with(const rb_allocator *a, void *ptr);

/* ---- errors (context.c) */
int rb_fail(rb_context *ctx, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void rb_clear_error(rb_context *ctx);
void rb_set_build_log(rb_context *ctx, const char *log);
/* Re-checks the invalid element `bad` (a ray of `rays` or a box of
 * `boxes`, records of `dims`) to fill ctx->err with its field and reason;
 * returns RB_EINPUT. */
int rb_report_bad_input(rb_context *ctx, unsigned dims, const void *rays,
                        const void *boxes, const rb_bad_input *bad);

/* ---- validation (validate.c), SPEC R6 after the R7 flush. */
/* First invalid ray in [begin, end), or end when all are valid. */
size_t rb_check_rays(const void *rays, unsigned dims, size_t begin,
                     size_t end);
size_t rb_check_boxes(const void *boxes, unsigned dims, size_t begin,
                      size_t end);
/* Validates and prepares rays [begin, end) into out[0 .. end-begin).
 * Returns the first invalid index (out is then partly written) or end. */
size_t rb_prep_rays(const void *rays, unsigned dims, size_t begin,
                    size_t end, rb_ray_prep *out);
/* A box's flushed corners in 3D (2D boxes get z in [0, 0]). Inline: the
 * copy of a scene's boxes calls it for every box. */
static inline void rb_box_corners(const void *boxes, unsigned dims,
                                  size_t i, float lo[3], float hi[3])
{
    if (dims == 3) {
        const rb_box *b = (const rb_box *)boxes + i;
        for (int a = 0; a < 3; a++) {
            lo[a] = rb_flush(b->min[a]);
            hi[a] = rb_flush(b->max[a]);
        }
    } else {
        const rb_box2 *b = (const rb_box2 *)boxes + i;
        for (int a = 0; a < 2; a++) {
            lo[a] = rb_flush(b->min[a]);
            hi[a] = rb_flush(b->max[a]);
        }
        lo[2] = 0.0f;
        hi[2] = 0.0f;
    }
}
/* Describes why element i is invalid: the field (-1 if none) and a reason
 * such as "tmin is NaN". Returns 0 if the element is valid. */
int rb_describe_ray(const void *rays, unsigned dims, size_t i, int *field,
                    char *reason, size_t len);
int rb_describe_box(const void *boxes, unsigned dims, size_t i, int *field,
                    char *reason, size_t len);

/* ---- prepared boxes (boxset.c) */
/* Validates boxes and (re)fills *set; grows set->data with ctx's allocator
 * when *cap (floats) is too small. On RB_EINPUT ctx->err names the box. */
int rb_boxset_build(rb_context *ctx, rb_boxset *set, size_t *cap,
                    const void *boxes, unsigned dims, size_t n);
uint64_t rb_next_uid(void);

/* ---- shapes beyond boxes (shapes.c), SPEC R11-R15 */
/* The non-box elements of a query or scene, validated and prepared. The
 * shape index j runs over obbs, xboxes, spheres, planes in that order
 * (lbox[j] for j < n_obb + n_xbox, then ball, then half); its id is
 * ids[j], or first_id + j when ids is NULL. Ids ascend with j within each
 * kind, so ties broken by lower j are ties broken by lower id. */
typedef struct rb_shapeset {
    size_t n_obb, n_xbox, n_ball, n_half;
    rb_lbox *lbox;
    rb_ball *ball;
    rb_halfspace *half;
    uint32_t first_id;
    const uint32_t *ids;
    /* The hierarchy over the bounded ones (lboxes, balls; NULL: test them
     * all), its conservative world boxes, and the node-test widening
     * delta = widen * (|o|_inf + reach) (bvh/bvh_shapes.c says why). */
    struct rb_bvh *tree;
    rb_boxset bounds;
    float widen, reach;
    /* The tree's box slots are already widened for origins with |o|_inf
     * up to cover. */
    float cover;
    /* The bounded shapes again, in the order of the tree's slots (lboxes
     * first, then balls), with their ids: a shape slot's child indexes
     * these, so a node's candidates lie side by side in memory. Owned
     * with the tree; NULL without one. */
    struct rb_shape_leaves {
        rb_lbox *lbox;
        rb_ball *ball;
        uint32_t *ids;
    } leaves;
    /* A joint tree also holds the n_tree_boxes boxes of the same query or
     * scene, exact (rb_bvh_node.exact), so that one walk answers both;
     * tree->where[n_bounded + i] is box i's slot. 0: shapes only. */
    size_t n_tree_boxes;
} rb_shapeset;

static inline size_t rb_shapeset_size(const rb_shapeset *s)
{
    return s->n_obb + s->n_xbox + s->n_ball + s->n_half;
}

static inline uint32_t rb_shapeset_id(const rb_shapeset *s, size_t j)
{
    return s->ids ? s->ids[j] : s->first_id + (uint32_t)j;
}

/* The set as kernels/exact.h's shape pass reads it. */
static inline rb_shape_view rb_shapeset_view(const rb_shapeset *s)
{
    rb_shape_view v = {s->lbox,
                       s->ball,
                       s->half,
                       s->ids,
                       (rb_u32)(s->n_obb + s->n_xbox),
                       (rb_u32)s->n_ball,
                       (rb_u32)s->n_half,
                       s->first_id};
    return v;
}

/* The tree's records (s->leaves) as the shape pass reads them; the
 * bounded shapes only. */
static inline rb_shape_view rb_shapeset_tree_view(const rb_shapeset *s)
{
    rb_shape_view v = {s->leaves.lbox,
                       s->leaves.ball,
                       NULL,
                       s->leaves.ids,
                       (rb_u32)(s->n_obb + s->n_xbox),
                       (rb_u32)s->n_ball,
                       0,
                       0};
    return v;
}

size_t rb_shapes_count(const rb_shapes *s);
/* Validates (R6, R11: an invalid element returns RB_EINPUT and ctx->err
 * names it) and prepares every element of *in into *set, allocated with
 * ctx's allocator; ids from first_id. */
int rb_shapeset_build(rb_context *ctx, rb_shapeset *set, const rb_shapes *in,
                      uint32_t first_id);
void rb_shapeset_free(const rb_allocator *alloc, rb_shapeset *set);

/* bvh/bvh_shapes.c: builds set->tree over the lboxes and balls (on the
 * context's threads); RB_ENOMEM leaves the set without one. With boxes
 * (3D, n > 0) the tree is joint: it holds box i too, as id box_ids[i]
 * (i when box_ids is NULL). */
int rb_shape_tree_build(rb_context *ctx, rb_shapeset *set,
                        const rb_boxset *boxes, const uint32_t *box_ids);
/* A joint tree after boxes indices[0..n) moved in `boxes` (the box set it
 * was built with): their slots take the new corners, the tree is refit
 * (its sah against sah_built tells when to build it again) and the
 * bounds get a new uid. */
void rb_shape_tree_move_boxes(rb_shapeset *set, const rb_boxset *boxes,
                              const uint32_t *indices, size_t n);
void rb_shape_tree_free(const rb_allocator *alloc, rb_shapeset *set);
/* The number of bounded shapes (those a tree holds). */
static inline size_t rb_shapeset_bounded(const rb_shapeset *s)
{
    return s->n_obb + s->n_xbox + s->n_ball;
}
/* Walks of set->tree, answers as the scans over the lboxes and balls
 * would give them. v is rb_shapeset_tree_view(set), prepared once by the
 * caller; walkers the table of rb_bvh_walk_pick() (bvh/bvh.h). nearest
 * improves (*best_t, *best_id) by (t_enter, id) and sets *best_j to the
 * winner's index in v; all inserts into list (*stored entries, cap) and
 * returns the hits it found. */
struct rb_bvh_walkers;
void rb_shape_walk_nearest(const rb_shapeset *set, const rb_shape_view *v,
                           const struct rb_bvh_walkers *walkers,
                           const rb_ray_raw *w, float *best_t,
                           uint32_t *best_id, uint32_t *best_j);
int rb_shape_walk_any(const rb_shapeset *set, const rb_shape_view *v,
                      const struct rb_bvh_walkers *walkers,
                      const rb_ray_raw *w);
uint32_t rb_shape_walk_count(const rb_shapeset *set, const rb_shape_view *v,
                             const struct rb_bvh_walkers *walkers,
                             const rb_ray_raw *w);
uint32_t rb_shape_walk_all(const rb_shapeset *set, const rb_shape_view *v,
                           const struct rb_bvh_walkers *walkers,
                           const rb_ray_raw *w, rb_list_hit *list,
                           uint32_t *stored, uint32_t cap);
rb_kind rb_shapeset_kind(const rb_shapeset *s, size_t j);
/* Why element i of that kind is invalid: field and reason; 0 if valid. */
int rb_describe_shape(const rb_shapes *in, rb_element_kind kind, size_t i,
                      int *field, char *why, size_t len);
/* R15: the unit outward world normal at h->t_enter of shape j (h its full
 * answer, w the flushed ray), NaN x3 when the hit has no entry face. */
void rb_shape_normal(const rb_shapeset *s, size_t j, const rb_ray_raw *w,
                     const rb_hit *h, float *n);
void rb_box_normal(const rb_hit *h, float *n);

/* The shape pass (cpu/shape_scan.c): after the box pass has written its
 * answers (ids in hits, lists, counts, any), every ray tests the shapes
 * and the answers are combined as one scan over all ids would give them
 * (nearest: least (t_enter, id); any: or; count: sum; all: the sorted
 * merge). pairs: ray i against shape i (the set holds one kind). Rays
 * (job->rays, rb_ray records) were validated by the box pass. Runs on the
 * context's threads; RB_ECANCELED when job->stop says so. */
int rb_shapes_run(rb_context *ctx, const rb_job *job, const rb_shapeset *set,
                  rb_results *res);
/* Both passes in one on the CPU, for a set whose tree is joint (it holds
 * the job's boxes, set->n_tree_boxes of them): each ray, validated here,
 * walks that tree once for its boxes and bounded shapes (rays the tree's
 * widening does not cover take their shapes from the shape walk's own
 * routes), then tests the planes; the answers are those of the two
 * passes, box ids included. RB_EINPUT with *bad for the lowest invalid
 * ray; RB_ECANCELED when job->stop says so. */
int rb_joint_run(rb_context *ctx, const rb_job *job, const rb_shapeset *set,
                 rb_results *res, rb_bad_input *bad);

/* ---- queries (query.c) */
/* The hierarchy rb_intersect walks for a query on scene s (NULL: brute
 * force), by the context's hierarchy setting and the scene's size. */
const struct rb_bvh *rb_query_scene_bvh(const rb_context *ctx,
                                        const rb_scene *s);

/* ---- scenes (scene.c) */
const rb_boxset *rb_scene_boxset(const rb_scene *scene);
unsigned rb_scene_dims(const rb_scene *scene);
/* The scene's hierarchy; NULL for an empty scene. */
const struct rb_bvh *rb_scene_bvh(const rb_scene *scene);
/* The scene's elements beyond boxes (ids in set->ids, its tree), NULL when
 * it has none. */
const rb_shapeset *rb_scene_shapeset(const rb_scene *scene);
/* Box index -> id; NULL while box i is id i (then every answer of the box
 * pass already carries ids). */
const uint32_t *rb_scene_box_ids(const rb_scene *scene);
/* 1 and *j = the shape index of id in rb_scene_shapeset when id is an
 * element beyond boxes; 0 for a box. */
int rb_scene_shape_index(const rb_scene *scene, uint32_t id, size_t *j);

/* ---- backends */
int rb_cpu_backend_create(rb_context *ctx, rb_backend **out);
/* Creates the OpenCL backend on the device the options select. On failure
 * returns RB_ENODEV/RB_EBUILD/RB_EDEVICE with a reason in why. */
int rb_cl_backend_create(rb_context *ctx, int want_gpu_only, rb_backend **out,
                         char *why, size_t why_len);
/* The OpenCL backend over several devices (rb_context_options.devices:
 * spec "all" or "i,j,...", host/opencl/cl_multi.c), each device in a
 * context of its own. RB_EINVAL or RB_ENODEV with the reason in why for a
 * list that names no usable devices, or a device's own status. */
int rb_cl_multi_create(rb_context *ctx, const char *spec, rb_backend **out,
                       char *why, size_t why_len);

/* ---- small helpers */
double rb_now_ms(void);
unsigned rb_online_cpus(void);
void rb_copy_str(char *dst, size_t cap, const char *src);

#endif /* RB_INTERNAL_H */
