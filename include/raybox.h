/*
 * raybox.h - the one public header of libraybox.
 *
 * libraybox answers "which boxes does each of these rays hit, and where" for
 * batches of rays, on an OpenCL device or on the native multi-threaded CPU
 * backend. The numeric contract is SPEC section 2 (R1-R10): every backend
 * returns bit-identical results for the same query.
 *
 * Threads: an rb_context may be used by one thread at a time (it owns a
 * thread pool, device queues and grow-only buffers). Different contexts may
 * be used concurrently. An rb_scene is immutable while a query that reads it
 * runs; rb_scene_set/rb_scene_append must not race with queries on the same
 * scene (copy the scene for copy-on-write updates, see rb_scene_clone).
 *
 * Errors: every fallible call returns RB_OK (0) or a negative RB_E* status.
 * Details (the offending element, an OpenCL build log) are kept in the
 * context and read with rb_context_error(); there is no global error state.
 *
 * Ownership: inputs are borrowed for the duration of a call; outputs go to
 * caller arrays whose capacity the caller states. Functions named *_create
 * return objects the caller releases with the matching *_destroy, which
 * accepts NULL.
 */
#ifndef RAYBOX_H
#define RAYBOX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RB_VERSION_MAJOR 0
#define RB_VERSION_MINOR 1
#define RB_VERSION_PATCH 0
#define RB_VERSION_STRING "0.1.0"

/* RB_API marks the calls libraybox exports. The shared library is built
 * with hidden visibility, so these are its only symbols. */
#ifndef RB_API
#if defined(__GNUC__) || defined(__clang__)
#define RB_API __attribute__((visibility("default")))
#else
#define RB_API
#endif
#endif

/* ------------------------------------------------------------------------
 * Status codes: X(name, value, short_name, description)
 */
#define RB_STATUS_MAP(X)                                                       \
    X(RB_OK, 0, "ok", "success")                                               \
    X(RB_EINVAL, -1, "invalid_argument",                                       \
      "invalid argument (NULL pointer, unknown mode, bad count or capacity)")  \
    X(RB_ENOMEM, -2, "out_of_memory", "out of host memory")                    \
    X(RB_EINPUT, -3, "invalid_input",                                          \
      "a ray or box value breaks SPEC R6; rb_context_error() names it")       \
    X(RB_ENODEV, -4, "no_device", "no usable device for the chosen backend")   \
    X(RB_EDEVICE, -5, "device_error", "an OpenCL call failed")                 \
    X(RB_EBUILD, -6, "build_failed", "the OpenCL program failed to build")     \
    X(RB_EDEVMEM, -7, "device_out_of_memory",                                  \
      "the device could not allocate the buffers for this batch")              \
    X(RB_ELIMIT, -8, "over_limit", "the request is over a configured limit")   \
    X(RB_EIO, -9, "io_error", "a file could not be read or written")       \
    X(RB_ECANCELED, -10, "canceled",                                          \
      "the query was stopped by its stop callback (a deadline, a client "     \
      "gone)")

typedef enum rb_status {
#define RB_X_ENUM(name, value, short_name, text) name = value,
    RB_STATUS_MAP(RB_X_ENUM)
#undef RB_X_ENUM
} rb_status;

/* Short machine name ("invalid_input") and one-line description of a status.
 * Unknown values give "unknown" / "unknown status". Never NULL. */
RB_API const char *rb_status_name(int status);
RB_API const char *rb_status_str(int status);

/* ------------------------------------------------------------------------
 * Plain records. Their layout matches the OpenCL kernels byte for byte.
 *
 * A ray is p(t) = origin + t*dir for t in [tmin, tmax]; dir need not be unit
 * length and may be zero (a point-in-box test). tmax may be +INFINITY.
 * A box is closed: {p : min_i <= p_i <= max_i}; flat and point boxes are
 * legal. 2D records are the same without z; faces are then only x/y.
 */
typedef struct rb_ray {
    float origin[3];
    float dir[3];
    float tmin;
    float tmax;
} rb_ray;

typedef struct rb_box {
    float min[3];
    float max[3];
} rb_box;

typedef struct rb_ray2 {
    float origin[2];
    float dir[2];
    float tmin;
    float tmax;
} rb_ray2;

typedef struct rb_box2 {
    float min[2];
    float max[2];
} rb_box2;

/* Faces (SPEC R3): the plane that decides t_enter or t_exit. */
typedef enum rb_face {
    RB_FACE_NONE = 0,
    RB_FACE_NEG_X = 1,
    RB_FACE_POS_X = 2,
    RB_FACE_NEG_Y = 3,
    RB_FACE_POS_Y = 4,
    RB_FACE_NEG_Z = 5,
    RB_FACE_POS_Z = 6,
    RB_FACE_SURFACE = 7 /* spheres and planes (obb, xbox: their local faces) */
} rb_face;

/* "-x", "+x", ..., "surface" for a face, NULL for RB_FACE_NONE or an
 * unknown value. */
RB_API const char *rb_face_name(int face);

/* ------------------------------------------------------------------------
 * Shapes beyond boxes (SPEC R11-R16). A query or scene holds any mix of
 * kinds; every element's id is its index in the concatenation
 * boxes ++ obbs ++ xboxes ++ spheres ++ planes (a scene's ids never change:
 * appended elements take the next ones). All kinds are closed solids and
 * 3D only; answers follow the box rules (R1, R2, R5, R10) with the id in
 * place of the box index.
 */
typedef enum rb_kind {
    RB_KIND_BOX = 0,
    RB_KIND_OBB = 1,
    RB_KIND_XBOX = 2,
    RB_KIND_SPHERE = 3,
    RB_KIND_PLANE = 4
} rb_kind;
#define RB_KIND_COUNT 5
#define RB_KIND_NONE 255 /* rb_results.kinds of a miss */

/* "box", "obb", "xbox", "sphere", "plane"; NULL for an unknown value. */
RB_API const char *rb_kind_name(int kind);

/* An oriented box: half extents `half` (>= 0) about `center`, along the
 * unit axes u = axes[0], v = axes[1], w = axes[2] (world directions of the
 * local x, y, z; orthonormal within 1e-4, either handedness). Local faces:
 * -x is the face at -half[0] along u, and so on. */
typedef struct rb_obb {
    float center[3];
    float half[3];
    float axes[3][3];
} rb_obb;

/* An oriented box from a Hamilton quaternion q = (w, x, y, z) turning local
 * into world (any non-zero length; normalised here): axes = the columns of
 * R(q / |q|), computed in double and rounded once (SPEC R12). Returns
 * RB_EINPUT when q is zero or not finite (the other fields are copied and
 * checked by rb_intersect like any obb), RB_EINVAL for NULL. */
RB_API int rb_obb_from_quaternion(const float center[3], const float half[3],
                                  const float q[4], rb_obb *out);

/* A box [min, max] in its local frame under the affine local->world map
 * p = A q + t, A = a[i][0..2], t = a[i][3] (3x4, row-major, column
 * vectors; a Direct3D row-vector matrix is its transpose). A invertible. */
typedef struct rb_xbox {
    float min[3];
    float max[3];
    float a[3][4];
} rb_xbox;

/* A closed ball, radius >= 0 (0: a point). */
typedef struct rb_sphere {
    float center[3];
    float radius;
} rb_sphere;

/* The closed half-space normal . p <= d: solid on the side the normal
 * points away from; the normal is non-zero, any length. Unbounded: every
 * ray tests every plane. */
typedef struct rb_plane {
    float normal[3];
    float d;
} rb_plane;

/* The non-box elements of a query, borrowed for the call. */
typedef struct rb_shapes {
    const rb_obb *obbs;
    size_t n_obbs;
    const rb_xbox *xboxes;
    size_t n_xboxes;
    const rb_sphere *spheres;
    size_t n_spheres;
    const rb_plane *planes;
    size_t n_planes;
} rb_shapes;

/* One answer of the pairs and nearest modes. A miss has hit = 0, box = -1,
 * t_enter = t_exit = +INFINITY and both faces RB_FACE_NONE. For a hit,
 * t_exit is +INFINITY when the ray never leaves the box before tmax = +inf. */
typedef struct rb_hit {
    float t_enter;
    float t_exit;
    int32_t box;       /* nearest: the element's id; pairs: the ray's own
                          index */
    uint8_t hit;       /* 0 or 1 */
    uint8_t face;      /* rb_face of t_enter; NONE when p(tmin) is inside */
    uint8_t exit_face; /* rb_face of t_exit; NONE when tmax cut the ray */
    uint8_t reserved;  /* always 0 */
} rb_hit;

/* One entry of an `all` list. */
typedef struct rb_list_hit {
    int32_t box;
    float t_enter;
    float t_exit;
} rb_list_hit;

/* ------------------------------------------------------------------------
 * Context: picks and owns a backend.
 */
typedef enum rb_backend_kind {
    RB_BACKEND_AUTO = 0, /* an OpenCL GPU or accelerator if any, else CPU */
    RB_BACKEND_CPU = 1,  /* the native multi-threaded backend */
    RB_BACKEND_OPENCL = 2 /* any OpenCL device, CPU devices (PoCL) included */
} rb_backend_kind;

/* "auto", "cpu", "opencl"; NULL for an unknown value. */
RB_API const char *rb_backend_kind_name(int kind);
/* Parses "auto", "cpu" or "opencl"; returns RB_EINVAL for anything else. */
RB_API int rb_backend_kind_parse(const char *text, rb_backend_kind *out);

/* Host memory hooks. alloc returns memory aligned to at least `align` (a
 * power of two, at most 4096) or NULL; free accepts NULL. Every host
 * allocation libraybox makes for a context goes through these. */
typedef struct rb_allocator {
    void *(*alloc)(void *user, size_t size, size_t align);
    void (*free)(void *user, void *ptr);
    void *user;
} rb_allocator;

typedef struct rb_context_options {
    rb_backend_kind backend;
    /* OpenCL device: index in rb_devices_list() order, or -1 to choose.
     * device_name, when not NULL, picks the first device whose name contains
     * it (case-insensitive); it wins over device_index. */
    int device_index;
    const char *device_name;
    /* CPU backend (and host-side preparation) threads; 0 = all online CPUs. */
    unsigned threads;
    /* OpenCL: most device memory one query may hold, in bytes; 0 = half of
     * CL_DEVICE_GLOBAL_MEM_SIZE. Batches are split into chunks that fit. */
    uint64_t memory_budget;
    /* OpenCL: largest single buffer, in bytes; 0 = CL_DEVICE_MAX_MEM_ALLOC_SIZE.
     * A smaller value forces more, smaller chunks (used by tests). */
    uint64_t max_buffer_bytes;
    /* OpenCL: when a launch fails, run the query on the CPU backend instead
     * and say so in rb_run_info. Default 1. */
    int cpu_fallback;
    /* OpenCL program binary cache directory. NULL = $RAYBOX_CACHE_DIR, else
     * $XDG_CACHE_HOME/raybox, else $HOME/.cache/raybox. "" disables it. */
    const char *cache_dir;
    /* Directory to load the kernels/ .cl files from instead of the embedded
     * copies. NULL = $RAYBOX_KERNEL_DIR if set, else the embedded ones. */
    const char *kernel_dir;
    /* NULL = malloc/free. Copied; must outlive the context. */
    const rb_allocator *allocator;
    /* When queries walk a bounding volume hierarchy instead of testing
     * every box (results are identical, SPEC R9): RB_HIERARCHY_AUTO (the
     * default: scenes of 256 boxes or more, and inline boxes when building
     * one pays), RB_HIERARCHY_OFF (always brute force) or
     * RB_HIERARCHY_ALWAYS. With AUTO, $RAYBOX_BVH=auto|off|on decides. */
    int hierarchy;
    /* OpenCL, several devices for one batch: NULL or "" = one device (the
     * fields above choose it); "all" = every available OpenCL device with
     * a compiler; or indices in rb_devices_list() order, comma-separated
     * ("0,2"). Each query's rays (visibility: its observers) are split
     * into one contiguous run per device, in proportion to each device's
     * measured speed (a probe at creation, then every query's own
     * times), and run at once, one host thread a device; the answers are
     * those of one device, in order. Only the string's contents are
     * used, during creation. The stop callback of a query and the
     * allocator may then be called from several threads at once. */
    const char *devices;
    /* How hierarchies are built: RB_HIERARCHY_BUILD_SAH (the default:
     * binned surface area heuristic, the faster walks) or
     * RB_HIERARCHY_BUILD_FAST (boxes sorted along a Morton curve: 1.8-5.5x
     * faster to build, a few percent slower to walk; for scenes rebuilt
     * often).
     * Answers are the same either way. With SAH, $RAYBOX_BVH_BUILD=
     * sah|fast decides. */
    int hierarchy_build;
} rb_context_options;

/* Devices one context may split a batch over (rb_context_options.devices). */
#define RB_MAX_DEVICES 8

enum {
    RB_HIERARCHY_AUTO = 0,
    RB_HIERARCHY_OFF = 1,
    RB_HIERARCHY_ALWAYS = 2
};

enum { RB_HIERARCHY_BUILD_SAH = 0, RB_HIERARCHY_BUILD_FAST = 1 };

typedef struct rb_context rb_context;

/* Fills defaults: AUTO backend, device -1, all threads, fallback on. */
RB_API void rb_context_options_init(rb_context_options *opt);

/* Creates a context. opt may be NULL for defaults. With RB_BACKEND_AUTO a
 * context is always created (the CPU backend cannot fail to exist) and the
 * reason OpenCL was skipped is in rb_backend_info.skipped. With
 * RB_BACKEND_OPENCL it fails with RB_ENODEV or RB_EBUILD when no device can
 * serve; *out is then NULL and, if err_text is not NULL, a message is copied
 * there (err_len bytes at most, NUL-terminated). */
RB_API int rb_context_create(const rb_context_options *opt, rb_context **out,
                             char *err_text, size_t err_len);
RB_API void rb_context_destroy(rb_context *ctx);
/* A context keeps the big work arrays of hierarchy builds and ray orders
 * (blocks of 1 MiB or more, at most 256 MiB) for its next calls, and the
 * default allocator keeps the big blocks freed through it (a destroyed
 * scene's nodes and boxes; 32 MiB or more, at most RAYBOX_KEEP_FREED_MB
 * MiB for the whole process, default 256) for the next allocations:
 * rebuilds of large scenes then skip the page faults of fresh memory.
 * This frees both now (rb_context_destroy does too). Thread-safe: it may
 * be called while another thread uses the context. */
RB_API void rb_context_trim(rb_context *ctx);

typedef struct rb_backend_info {
    char backend[16];   /* "cpu" or "opencl" */
    char device[128];   /* device name; for cpu, the processor model */
    char platform[128]; /* OpenCL platform, "native" for cpu */
    char driver[64];    /* CL_DRIVER_VERSION, or the library version */
    char simd[16];      /* cpu: "avx2" or "scalar"; opencl: "" */
    int is_gpu;
    int exact_division; /* 1 if 1/x is correctly rounded (R8) */
    int denormals;      /* 1 if float32 denormals are kept (R7/R8) */
    unsigned compute_units;
    unsigned threads;   /* cpu: worker threads */
    uint64_t global_mem;
    uint64_t max_buffer_bytes;
    char skipped[256];  /* auto: why OpenCL was not used; "" otherwise */
} rb_backend_info;

RB_API int rb_context_info(const rb_context *ctx, rb_backend_info *out);

/* Where a rejected input is. field is the index within the element's JSON
 * array form: ray [ox,oy,oz,dx,dy,dz,tmin,tmax] (2D [ox,oy,dx,dy,tmin,tmax]),
 * box [minx,miny,minz,maxx,maxy,maxz] (2D [minx,miny,maxx,maxy]), obb
 * [cx,cy,cz, ex,ey,ez, ux,uy,uz, vx,vy,vz, wx,wy,wz], xbox [min 3, max 3,
 * a00,a01,a02,t0, a10,...,t1, a20,...,t2], sphere [cx,cy,cz, r], plane
 * [nx,ny,nz, d]; for a fault of a group (axes not orthonormal, a singular
 * matrix, a zero normal) the group's first number. index counts within
 * the element's own kind. */
typedef enum rb_element_kind {
    RB_ELEMENT_NONE = 0,
    RB_ELEMENT_RAY = 1,
    RB_ELEMENT_BOX = 2,
    RB_ELEMENT_OBB = 3,
    RB_ELEMENT_XBOX = 4,
    RB_ELEMENT_SPHERE = 5,
    RB_ELEMENT_PLANE = 6,
    RB_ELEMENT_OBSERVER = 7, /* rb_visibility: index = observer, field xyz */
    RB_ELEMENT_TARGET = 8,   /* rb_visibility: index = target, field xyz */
    RB_ELEMENT_CAMERA = 9,   /* rb_camera: field as in rb_camera_rays */
    RB_ELEMENT_PIXEL = 10    /* a camera's pixel: index in answer order */
} rb_element_kind;

typedef struct rb_error {
    int status;               /* the status of the failed call */
    rb_element_kind element;  /* for RB_EINPUT */
    uint64_t index;           /* ray or box index */
    int field;                /* see above; -1 when the element as a whole */
    char message[512];        /* one line, e.g. "ray 17: tmin is NaN" */
} rb_error;

/* Runs one tiny query of every kind the backend has a kernel for (every
 * mode against inline boxes, a scene's hierarchy and inline shapes, and
 * line of sight; over several devices, on each of them), so
 * that a driver which compiles each kernel on its first launch (PoCL
 * does) does it now rather than in a caller's first query of that kind.
 * A server calls it before it reports ready. Nothing to do (RB_OK at
 * once) on the CPU backend; otherwise the status of the first failed
 * query. */
RB_API int rb_context_warm_up(rb_context *ctx);

/* The error of the last failed call on ctx (status RB_OK if none). Valid
 * until the next call on ctx. Never NULL for a non-NULL ctx. */
RB_API const rb_error *rb_context_error(const rb_context *ctx);
/* The OpenCL build log of the last failed build, "" if none. */
RB_API const char *rb_context_build_log(const rb_context *ctx);

/* ------------------------------------------------------------------------
 * Devices.
 */
typedef struct rb_device_desc {
    int index;             /* the value for rb_context_options.device_index */
    char name[128];
    char platform[128];
    char vendor[128];
    char driver[64];
    char version[128];     /* CL_DEVICE_VERSION */
    char type[16];         /* "gpu", "cpu", "accelerator", "other" */
    unsigned compute_units;
    uint64_t global_mem;
    uint64_t max_alloc;
    int exact_division;
    int denormals;
} rb_device_desc;

/* Lists every OpenCL device through the ICD loader. Writes at most cap
 * entries to out (out may be NULL when cap is 0) and the total to *count.
 * No OpenCL platform is not an error: *count is 0 and, when why is not
 * NULL, the reason is copied there. */
RB_API int rb_devices_list(rb_device_desc *out, size_t cap, size_t *count,
                           char *why, size_t why_len);

/* ------------------------------------------------------------------------
 * Scenes: a stored, validated set of boxes (and, in 3D, elements of the
 * other kinds, rb_scene_create_shapes) with its hierarchies (BVHs built at
 * creation with the context's threads), so that repeated queries neither
 * resend nor re-prepare it and cost about log(elements) per ray. A scene is
 * owned by the caller, not by a context, and can be queried from any
 * context.
 */
typedef struct rb_scene rb_scene;

typedef struct rb_scene_stats {
    unsigned dims;
    uint64_t boxes;
    uint64_t version;     /* 1 at creation, +1 for every successful change */
    float bounds_min[3];  /* +inf.. for an empty scene */
    float bounds_max[3];  /* -inf.. for an empty scene */
    uint64_t host_bytes;  /* memory held by the scene, hierarchy included */
    double bytes_per_box; /* host_bytes / boxes (0 for an empty scene) */
    /* The hierarchy (built at creation, refit by rb_scene_set, rebuilt by
     * rb_scene_append and when refits have degraded it). */
    uint64_t bvh_nodes;   /* 8-wide nodes of 256 bytes */
    unsigned bvh_depth;   /* levels, 1 for a single node, 0 when empty */
    double bvh_sah;       /* SAH cost now: expected node visits of a ray
                           * through the scene's bounds */
    double bvh_sah_built; /* SAH cost right after the last build */
    double bvh_build_ms;  /* wall time of the last build */
    uint64_t bvh_refits;
    uint64_t bvh_rebuilds; /* builds after the first */
    uint64_t bvh_bytes;   /* part of host_bytes */
    /* Every kind (SPEC section 7). boxes above and bounds are the boxes';
     * elements counts the ids of all kinds, kinds[k] those of rb_kind k
     * (kinds[RB_KIND_BOX] == boxes); bytes_per_box is host_bytes per
     * element. The shape hierarchy (over obbs, xboxes and spheres; planes
     * are unbounded) also holds the scene's boxes while they are at most
     * 8 a bounded shape, so that the CPU walks one tree for every kind;
     * it is rebuilt by every change of those kinds and by appended boxes,
     * and refit when boxes move. */
    uint64_t elements;
    uint64_t kinds[RB_KIND_COUNT];
    uint64_t shape_nodes; /* 8-wide nodes of the shape hierarchy, 0: none */
    /* RB_HIERARCHY_BUILD_* of the box hierarchy: the option of the
     * context that created the scene, kept for its rebuilds. */
    int bvh_build;
} rb_scene_stats;

/* Creates a scene from n boxes (rb_box when dims == 3, rb_box2 when 2),
 * validated (R6: an invalid box returns RB_EINPUT and names it through
 * ctx) and flushed (R7). ctx supplies the allocator and error slot. */
RB_API int rb_scene_create(rb_context *ctx, unsigned dims, const void *boxes,
                           size_t n, rb_scene **out);
/* The same with elements of the other kinds (shapes may be NULL; with any
 * shape dims must be 3). Ids follow boxes ++ obbs ++ xboxes ++ spheres ++
 * planes. Everything is validated before anything is built (boxes first,
 * then the other kinds in id order; the error names the kind, the index
 * within it and the field, as rb_intersect does); the box hierarchy and
 * the shape hierarchy are built here. */
RB_API int rb_scene_create_shapes(rb_context *ctx, unsigned dims,
                                  const void *boxes, size_t n_boxes,
                                  const rb_shapes *shapes, rb_scene **out);
RB_API void rb_scene_destroy(rb_scene *scene);
/* A deep copy (version kept), for copy-on-write updates. */
RB_API int rb_scene_clone(rb_context *ctx, const rb_scene *scene,
                          rb_scene **out);
/* Replaces the box of id indices[k] with boxes[k] for k < n (in a scene
 * that has only ever held boxes, box i is id i). Everything is checked
 * first (ids in range and of boxes, values valid); on error nothing
 * changes. The hierarchy is refit in place; when that has grown its SAH
 * cost past 1.5x the cost after its last build, it is rebuilt (if memory
 * allows; the refit tree stays exact either way). */
RB_API int rb_scene_set(rb_context *ctx, rb_scene *scene,
                        const uint32_t *indices, const void *boxes, size_t n);
/* Appends n boxes and rebuilds the hierarchy; on error (RB_EINPUT,
 * RB_ENOMEM) nothing changes. The boxes take the next ids. */
RB_API int rb_scene_append(rb_context *ctx, rb_scene *scene, const void *boxes,
                           size_t n);
RB_API void rb_scene_stats_get(const rb_scene *scene, rb_scene_stats *out);
/* Copies box i (in the scene's dims; i counts the boxes alone, which is
 * the id while the scene has only ever held boxes) to *out; RB_EINVAL if
 * out of range. */
RB_API int rb_scene_box(const rb_scene *scene, size_t i, void *out);

/* One element of any kind, for rb_scene_set_elements. */
typedef struct rb_element {
    rb_kind kind;
    union {
        rb_box box;   /* 3D scenes */
        rb_box2 box2; /* 2D scenes */
        rb_obb obb;
        rb_xbox xbox;
        rb_sphere sphere;
        rb_plane plane;
    } as;
} rb_element;

/* Replaces the element of id ids[k] with elements[k] for k < n; each must
 * be of the id's kind. Everything is checked first, nothing changes on
 * error: an id out of range, or an element of another kind than its id's,
 * is RB_EINVAL with rb_error.index = k, element = the given element's
 * kind and field -1; an invalid value is RB_EINPUT naming set entry k (as
 * index), its kind and field. Boxes refit the box hierarchy as
 * rb_scene_set does, and the shape hierarchy that holds them too; other
 * kinds rebuild the shape hierarchy. */
RB_API int rb_scene_set_elements(rb_context *ctx, rb_scene *scene,
                                 const uint32_t *ids,
                                 const rb_element *elements, size_t n);
/* Appends boxes (the scene's dims) and shapes (3D scenes; may be NULL):
 * they take the next ids in the append's own concatenation order (boxes
 * ++ obbs ++ xboxes ++ spheres ++ planes), so after appends the kinds
 * interleave in id order; old ids never change. Validated first (errors
 * name the kind and the index within the append's own list); the
 * hierarchies of the kinds appended are rebuilt; on error nothing
 * changes. */
RB_API int rb_scene_append_shapes(rb_context *ctx, rb_scene *scene,
                                  const void *boxes, size_t n_boxes,
                                  const rb_shapes *shapes);
/* The rb_kind of element `id`, and with index not NULL its index among the
 * scene's elements of that kind; -1 when id is out of range. */
RB_API int rb_scene_element_kind(const rb_scene *scene, uint64_t id,
                                 size_t *index);

/* ------------------------------------------------------------------------
 * Queries (SPEC section 3).
 */
typedef enum rb_mode {
    RB_MODE_PAIRS = 0,   /* ray i against box i */
    RB_MODE_NEAREST = 1, /* the box with the least t_enter (ties: lowest index) */
    RB_MODE_ANY = 2,     /* is any box hit within [tmin, tmax] */
    RB_MODE_COUNT = 3,   /* how many boxes are hit */
    RB_MODE_ALL = 4      /* every hit, sorted by (t_enter, box), at most max_hits */
} rb_mode;

/* "pairs", "nearest", ...; NULL for an unknown value. */
RB_API const char *rb_mode_name(int mode);
RB_API int rb_mode_parse(const char *text, rb_mode *out);

typedef struct rb_query {
    rb_mode mode;
    unsigned dims;        /* 3: rb_ray/rb_box records; 2: rb_ray2/rb_box2 */
    const void *rays;     /* n_rays records */
    size_t n_rays;
    const void *boxes;    /* n_boxes records; ignored when scene is set */
    size_t n_boxes;
    const rb_scene *scene; /* every-box modes only; its dims must match */
    uint32_t max_hits;    /* RB_MODE_ALL: list length per ray, >= 1 */
    /* Elements of the other kinds (3D only; ignored when scene is set).
     * pairs: exactly one kind (boxes or one of these) holds n_rays. */
    rb_shapes shapes;
    unsigned outputs;     /* RB_OUTPUT_* flags */
    /* Optional: asked between pieces of work (CPU tasks of a few hundred
     * rays, or of pairs up to a millisecond's worth; OpenCL launches),
     * from any of the context's threads at once,
     * so it must be thread-safe and cheap; non-zero stops the query:
     * rb_intersect returns RB_ECANCELED and the outputs are unspecified.
     * Work already handed to a device finishes first. */
    int (*stop)(void *stop_user);
    void *stop_user;
} rb_query;

/* rb_query.outputs: nearest and pairs also fill rb_results.normals. */
#define RB_OUTPUT_NORMAL 1u

/* What ran a query. backend is also set when a backend refused the query
 * (a bad ray, found as it ran, or a device error); it stays empty when
 * the query was refused before any backend ran (its arguments, options
 * or elements). */
typedef struct rb_run_info {
    char backend[16];      /* "cpu" or "opencl" */
    char device[128];
    int fell_back;         /* 1 if OpenCL failed and the CPU answered */
    char fallback_reason[256];
    uint64_t slab_tests;   /* ray-box tests the query stands for */
    uint64_t chunks;       /* launches (OpenCL) or tiles (CPU) */
    double elapsed_ms;     /* whole call */
    double kernel_ms;      /* OpenCL: sum of kernel times (profiling); cpu: 0;
                            * several devices: the largest device's sum */
    /* Several devices (rb_context_options.devices): how many took part
     * and the share of the rays (visibility: observers) each got, in the
     * order of the devices option; 0 and zeros otherwise. */
    unsigned devices;
    double device_share[RB_MAX_DEVICES];
} rb_run_info;

/* Caller-owned outputs; only the arrays the mode uses are read:
 *   pairs, nearest: hits[n_rays]
 *   any:            any[n_rays]        (0 or 1)
 *   count:          counts[n_rays]     (boxes hit per ray)
 *   all:            counts[n_rays]     (every hit, may exceed max_hits),
 *                   list[n_rays * max_hits]: ray i's hits, sorted, start at
 *                   list[i * max_hits]; min(counts[i], max_hits) are valid;
 *                   the list was truncated when counts[i] > max_hits.
 * capacity is the number of rays the arrays can hold (list: capacity *
 * max_hits entries). On error the arrays' contents are unspecified. */
typedef struct rb_results {
    rb_hit *hits;
    uint8_t *any;
    uint32_t *counts;
    rb_list_hit *list;
    /* Optional, nearest and pairs: kinds[i] is the rb_kind of ray i's
     * element, RB_KIND_NONE for a miss (NULL: not wanted). */
    uint8_t *kinds;
    /* With RB_OUTPUT_NORMAL, nearest and pairs: normals[3i..3i+2] is the
     * unit outward world normal at t_enter (SPEC R15), NaN x3 for a miss
     * or a hit without an entry face. Required then. */
    float *normals;
    size_t capacity;
    rb_run_info info;      /* filled by rb_intersect */
} rb_results;

/* Runs a query. Returns RB_EINVAL for a malformed query (unknown mode, bad
 * dims, pairs with n_rays != n_boxes, missing output array, capacity below
 * n_rays, max_hits 0 in all mode, n_rays or n_boxes above INT32_MAX),
 * RB_EINPUT for an invalid ray or box (SPEC R6; the error names the element
 * with the lowest index; boxes of every-box modes are checked first),
 * RB_ENOMEM, or a device status when OpenCL failed and fallback is off. */
RB_API int rb_intersect(rb_context *ctx, const rb_query *query,
                        rb_results *results);

/* ------------------------------------------------------------------------
 * Visibility (SPEC section 9): line of sight between every observer and
 * every target of a scene without N x M rays in memory.
 */
typedef struct rb_visibility_query {
    const rb_scene *scene;    /* 3D */
    const float *observers;   /* n_observers x (x, y, z) */
    size_t n_observers;
    const float *targets;     /* n_targets x (x, y, z) */
    size_t n_targets;
    /* The range of every segment: 0 and 1 for the whole segment; a
     * margin such as [1e-4, 0.9999] ignores elements touching its ends. */
    float tmin, tmax;
    int (*stop)(void *stop_user); /* as rb_query.stop */
    void *stop_user;
} rb_visibility_query;

/* The bit matrix's bytes: n_observers rows of ceil(n_targets / 8). */
RB_API uint64_t rb_visibility_bytes(size_t n_observers, size_t n_targets);

/* Pair (i, j) is the segment o = observer i, d = target j - observer i
 * (each component in float32), tested as RB_MODE_ANY over [tmin, tmax];
 * it is visible when nothing is hit. Writes the row-major bit matrix to
 * bits (bits_len >= rb_visibility_bytes): bit j % 8 of byte j / 8 of row
 * i is set when (i, j) is visible, padding bits 0; the count of visible
 * pairs to *n_visible (may be NULL) and what ran to *info (may be NULL).
 * The segments are made where they are tested (a tile at a time, or on
 * the OpenCL device by its kernels for a scene of boxes only), so
 * memory is O(observers + targets + tile + answer), and every answer is
 * the bit `any` gives for the explicit segment (same backend paths).
 * Errors: RB_EINVAL (no scene, a 2D scene, bits too small, an invalid
 * range), RB_EINPUT (a coordinate that is not finite: element
 * RB_ELEMENT_OBSERVER or _TARGET, its index, field 0-2; or a direction
 * that overflows float32: element RB_ELEMENT_TARGET, the message names
 * both ends), RB_ECANCELED, RB_ENOMEM, or a backend's status. */
RB_API int rb_visibility(rb_context *ctx, const rb_visibility_query *q,
                         uint8_t *bits, size_t bits_len,
                         uint64_t *n_visible, rb_run_info *info);

/* SPEC R6 for a ray's range, as rb_intersect applies it: tmin finite,
 * tmax neither NaN nor -inf, and tmin <= tmax after subnormals are flushed
 * (R7). For callers that take a request-level range and want to name it
 * in their own error. Returns 1 when valid. */
RB_API int rb_ray_range_valid(float tmin, float tmax);

/* ------------------------------------------------------------------------
 * Cameras (SPEC section 8): rays from a view and a projection matrix, for
 * picking (a list of pixels) or pictures (every pixel of the viewport).
 */
enum {
    RB_DEPTH_ZERO_TO_ONE = 0,    /* clip z of the near plane is 0 (D3D, Vulkan) */
    RB_DEPTH_MINUS_ONE_TO_ONE = 1 /* ... is -1 (OpenGL) */
};

typedef struct rb_camera {
    /* Row-major 4x4, column vectors: clip = projection * view * world
     * (a Direct3D row-vector matrix is the transpose). */
    double view[16];
    double projection[16];
    double viewport[4];   /* x, y, width, height in window coordinates */
    int depth;            /* RB_DEPTH_* */
    /* n_pixels (px, py) pairs in window coordinates (origin top-left, y
     * down); NULL: every pixel centre of the viewport, row by row from
     * the top (width and height must then be whole numbers). Borrowed. */
    const double *pixels;
    size_t n_pixels;
    float tmin, tmax;     /* every ray's range (SPEC R6) */
} rb_camera;

/* Checks a camera and counts its rays: n_pixels, or width * height for
 * the grid. Returns RB_OK, RB_EINVAL (NULL), or RB_EINPUT with err (when
 * not NULL) naming the fault: element RB_ELEMENT_CAMERA with field 0-15
 * a view number, 16-31 a projection number, 32-35 a viewport number, 36
 * the depth, 37 the range (tmin/tmax, R6), 38 a singular view, 39 a
 * singular projection, -1 a singular P*V of invertible factors; element
 * RB_ELEMENT_PIXEL for a non-finite pixel number (index, field 0 or 1).
 * A matrix is singular when Gauss-Jordan elimination with partial
 * pivoting in double meets a zero pivot or its inverse is not finite.
 * The viewport needs finite x, y and width, height > 0 (whole numbers
 * for the grid, and a product below 2^53). */
RB_API int rb_camera_count(const rb_camera *cam, uint64_t *count,
                           rb_error *err);

/* Writes the rays of pixels [first, first + n) (of the list, or of the
 * grid in answer order: pixel k is column k % width, row k / width) to
 * out[0..n): with W = (P*V)^-1 in double, ndc_x = 2(px - x)/width - 1,
 * ndc_y = 1 - 2(py - y)/height, near = W (ndc_x, ndc_y, z0, 1) and far =
 * W (ndc_x, ndc_y, 1, 1) divided by their w (z0 = 0 or -1 per depth), the
 * ray is origin = near, dir = far - near, each number rounded once from
 * double to float32, with the camera's tmin and tmax. Orthographic
 * projections work the same (near and far differ in position only).
 * Errors as rb_camera_count, plus RB_EINPUT with element RB_ELEMENT_PIXEL,
 * field -1, when the w of pixel k's near or far point is 0 (a far plane
 * at infinity) or its ray is not finite in float32; RB_EINVAL when
 * first + n is beyond the count. The same camera and pixel always give
 * the same bits, whatever the chunking. Thread-safe; no allocation. */
RB_API int rb_camera_rays(const rb_camera *cam, uint64_t first, size_t n,
                          rb_ray *out, rb_error *err);

/* Queries that stand for fewer ray-box tests than this run on the calling
 * thread (waking the context's threads costs more); a server may use the
 * same line to tell small work from heavy. */
#define RB_SMALL_JOB_TESTS 262144u

/* The exact semantics of one ray against one box (SPEC section 2): the
 * scalar reference every backend is tested against. Inputs must be valid
 * (R6); subnormals are flushed here (R7). */
RB_API void rb_intersect_one(const rb_ray *ray, const rb_box *box,
                             rb_hit *out);

#ifdef __cplusplus
}
#endif

#endif /* RAYBOX_H */
