/*
 * json_request_impl.h - the parser's state, shared by json_request.c (the
 * streaming half: yajl callbacks) and json_request_end.c (the end of the
 * document: layout, defaults, cross-member checks). Not installed.
 */
#ifndef RB_JSON_REQUEST_IMPL_H
#define RB_JSON_REQUEST_IMPL_H

#include <yajl/yajl_parse.h>

#include "json_request.h"

/* Root members, in the order they are described in the SPEC. */
typedef enum rbj_member {
    M_MODE,
    M_DIMS,
    M_RAYS,
    M_BOXES,
    M_SCENE,
    M_TMIN,
    M_TMAX,
    M_MAX_HITS,
    M_SET,
    M_APPEND,
    M_OBBS,
    M_XBOXES,
    M_SPHERES,
    M_PLANES,
    M_OUTPUTS,
    M_OBSERVERS,
    M_TARGETS,
    /* The lists of "append" in its object form ({"boxes": ..., "obbs":
     * ...}): named "append/boxes" and so on, which makes their pointers
     * "/append/obbs/3/2"; never root keys. */
    M_APPEND_BOXES,
    M_APPEND_OBBS,
    M_APPEND_XBOXES,
    M_APPEND_SPHERES,
    M_APPEND_PLANES,
    /* "camera" (SPEC section 8) and its members, named "camera/view" and
     * so on for pointers like "/camera/pixels/3/1"; never root keys. */
    M_CAMERA,
    M_CAM_VIEW,
    M_CAM_PROJECTION,
    M_CAM_VIEWPORT,
    M_CAM_DEPTH,
    M_CAM_PIXELS,
    /* render bodies (POST /v1/scenes/{id}/render) */
    M_IMAGE,
    M_COUNT
} rbj_member;

/* A member inside "camera". */
#define RBJ_IS_CAMERA_PART(m) ((m) >= M_CAM_VIEW && (m) <= M_CAM_PIXELS)
/* A fixed-length number array of "camera": view, projection, viewport. */
#define RBJ_IS_CAMERA_VEC(m) ((m) >= M_CAM_VIEW && (m) <= M_CAM_VIEWPORT)

/* A list of append's object form. */
#define RBJ_IS_APPEND_LIST(m) ((m) >= M_APPEND_BOXES && (m) <= M_APPEND_PLANES)

/* The element lists of the kinds beyond boxes, in id order. */
#define RBJ_IS_SHAPE(m) ((m) >= M_OBBS && (m) <= M_PLANES)

/* Where the parse is. */
typedef enum rbj_state {
    ST_START,  /* before the top-level value */
    ST_MEMBER, /* in the root object: a key or its end */
    ST_VALUE,  /* the value of member */
    ST_LIST,   /* in the array of member: an element or the end */
    ST_ELEM,   /* in element index of member: a number or the end */
    ST_VEC,    /* in a camera matrix or viewport: number `field` or the end */
    ST_DONE,   /* the root object closed */
    ST_FAILED
} rbj_state;

/* Token boundaries, as far as chunking needs them: outside a token, in a
 * string (or just after its backslash), in a number or literal. */
typedef enum rbj_lex { LX_OUT, LX_STRING, LX_ESCAPE, LX_WORD } rbj_lex;

/* The elements of one list member, each in a fixed slot of `width`
 * floats (a whole rb_ray or rb_box) whatever the dims turn out to be. */
typedef struct rbj_list {
    float *slots;
    uint8_t *arity;   /* numbers the element carried, index included */
    uint32_t *index;  /* "set" only */
    size_t n, cap;
    unsigned width;   /* floats per slot: 8 (ray) or 6 (box); camera
                         pixels: 4, holding their two doubles */
} rbj_list;

#define RBJ_SCENE_ID_MAX 128

struct rbj_parser {
    rbj_options opt;       /* opt.allocator points at alloc, or is NULL */
    rb_allocator alloc;
    yajl_handle yajl;
    int nonblank;          /* anything but white space fed yet */
    uint64_t fed;          /* bytes handed to yajl so far */
    rbj_lex lex;           /* token state at the end of the bytes fed */
    char *carry;           /* an unfinished token, waiting for its end */
    size_t carry_len, carry_cap;
    rbj_state state;
    rbj_member member;     /* the member being read */
    unsigned seen;         /* bit per member already read */
    int in_append;         /* inside the object form of "append" */
    int append_object;     /* "append" came in its object form */
    int in_camera;         /* inside the object of "camera" */
    double cam_vec[3][16]; /* camera view, projection, viewport */
    int cam_depth;         /* RB_DEPTH_* */
    rb_camera camera;      /* settled */
    int image;             /* RBJ_IMAGE_* of a render body */
    size_t index;          /* element of the list being read */
    unsigned field;        /* numbers read in that element */
    uint64_t numbers;      /* numbers read in lists */

    int have_mode;
    rb_mode mode;
    unsigned dims;         /* 0 until known */
    uint32_t max_hits;     /* 0 until known */
    float tmin, tmax;
    unsigned outputs;      /* RB_OUTPUT_* from "outputs" */
    char scene[RBJ_SCENE_ID_MAX + 1];

    rbj_list lists[M_COUNT]; /* used for the list members (is_list) */

    char *scratch;         /* NUL-terminated copy of a number or string */
    size_t scratch_cap;

    rbq_error err;
    int ready;
    rbq_request req;
};

extern const char *const rbj_member_names[M_COUNT];

/* Records the first error: status, pointer /member[/index[/field]] (a
 * negative index or field is left out; member M_COUNT gives "") and the
 * detail. Returns 0 so that callbacks can `return fail(...)`. */
int rbj_fail(rbj_parser *p, int status, int member, long long index,
             int field, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* The most numbers an element of list m has in the given dims: a ray 8
 * (2D 6; 6 and 4 without its range), a box 6 (2D 4), a "set" entry one
 * more than a box; and whether `arity` numbers are a valid element. */
unsigned rbj_max_numbers(rbj_member m, unsigned dims);
int rbj_arity_ok(rbj_member m, unsigned dims, unsigned arity);
/* "a 3D ray has 6 or 8 numbers" for messages. */
const char *rbj_arity_text(rbj_member m, unsigned dims);

/* json_request_end.c: everything that needs the whole document. */
int rbj_settle(rbj_parser *p);

#endif
