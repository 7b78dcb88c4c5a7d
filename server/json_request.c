/*
 * json_request.c - the streaming half of the request parser: yajl
 * callbacks that check each token against the schema as it arrives and
 * append numbers to the record lists. See json_request.h for the contract.
 *
 * The schema is flat (root object, lists of number arrays), so the state
 * is one enum plus the member, element and field being read; any deeper
 * nesting is refused at once, which also keeps yajl's own stack small
 * whatever the body holds.
 */
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float_text.h"
#include "json_request_impl.h"
#include "json_text.h"

const char *const rbj_member_names[M_COUNT] = {
    [M_MODE] = "mode",   [M_DIMS] = "dims",         [M_RAYS] = "rays",
    [M_BOXES] = "boxes", [M_SCENE] = "scene",       [M_TMIN] = "tmin",
    [M_TMAX] = "tmax",   [M_MAX_HITS] = "max_hits", [M_SET] = "set",
    [M_APPEND] = "append", [M_OBBS] = "obbs",       [M_XBOXES] = "xboxes",
    [M_SPHERES] = "spheres", [M_PLANES] = "planes", [M_OUTPUTS] = "outputs",
    [M_OBSERVERS] = "observers", [M_TARGETS] = "targets",
    [M_APPEND_BOXES] = "append/boxes", [M_APPEND_OBBS] = "append/obbs",
    [M_APPEND_XBOXES] = "append/xboxes",
    [M_APPEND_SPHERES] = "append/spheres",
    [M_APPEND_PLANES] = "append/planes", [M_CAMERA] = "camera",
    [M_CAM_VIEW] = "camera/view", [M_CAM_PROJECTION] = "camera/projection",
    [M_CAM_VIEWPORT] = "camera/viewport", [M_CAM_DEPTH] = "camera/depth",
    [M_CAM_PIXELS] = "camera/pixels", [M_IMAGE] = "image"};

/* The keys of "camera", in the order of M_CAM_VIEW... */
static const char *const camera_keys[] = {"view", "projection", "viewport",
                                          "depth", "pixels"};
/* Numbers of view, projection, viewport. */
static const unsigned camera_vec_len[] = {16, 16, 4};

/* The keys of append's object form, in the order of M_APPEND_BOXES... */
static const char *const append_keys[] = {"boxes", "obbs", "xboxes",
                                          "spheres", "planes"};

/* Which bodies take which member, and what its value must be. */
#define B(body) (1u << (body))
static const struct {
    unsigned bodies;
    const char *expect;
} members[M_COUNT] = {
    [M_MODE] = {B(RBQ_INTERSECT), "a string"},
    [M_CAMERA] = {B(RBQ_INTERSECT) | B(RBQ_RENDER), "an object"},
    [M_IMAGE] = {B(RBQ_RENDER), "a string"},
    [M_DIMS] = {B(RBQ_INTERSECT) | B(RBQ_SCENE_CREATE), "an integer"},
    [M_RAYS] = {B(RBQ_INTERSECT), "an array"},
    [M_BOXES] = {B(RBQ_INTERSECT) | B(RBQ_SCENE_CREATE), "an array"},
    [M_SCENE] = {B(RBQ_INTERSECT), "a string"},
    [M_TMIN] = {B(RBQ_INTERSECT) | B(RBQ_VISIBILITY) | B(RBQ_RENDER),
                "a number"},
    [M_TMAX] = {B(RBQ_INTERSECT) | B(RBQ_VISIBILITY) | B(RBQ_RENDER),
                "a number or null"},
    [M_MAX_HITS] = {B(RBQ_INTERSECT), "an integer"},
    [M_SET] = {B(RBQ_SCENE_PATCH), "an array"},
    [M_APPEND] = {B(RBQ_SCENE_PATCH), "an array or an object"},
    [M_OBBS] = {B(RBQ_INTERSECT) | B(RBQ_SCENE_CREATE), "an array"},
    [M_XBOXES] = {B(RBQ_INTERSECT) | B(RBQ_SCENE_CREATE), "an array"},
    [M_SPHERES] = {B(RBQ_INTERSECT) | B(RBQ_SCENE_CREATE), "an array"},
    [M_PLANES] = {B(RBQ_INTERSECT) | B(RBQ_SCENE_CREATE), "an array"},
    [M_OUTPUTS] = {B(RBQ_INTERSECT), "an array of strings"},
    [M_OBSERVERS] = {B(RBQ_VISIBILITY), "an array"},
    [M_TARGETS] = {B(RBQ_VISIBILITY), "an array"},
    /* inside "append" only (see on_map_key) */
    [M_APPEND_BOXES] = {0, "an array"},
    [M_APPEND_OBBS] = {0, "an array"},
    [M_APPEND_XBOXES] = {0, "an array"},
    [M_APPEND_SPHERES] = {0, "an array"},
    [M_APPEND_PLANES] = {0, "an array"},
    /* inside "camera" only (see camera_key) */
    [M_CAM_VIEW] = {0, "an array of 16 numbers"},
    [M_CAM_PROJECTION] = {0, "an array of 16 numbers"},
    [M_CAM_VIEWPORT] = {0, "an array of 4 numbers"},
    [M_CAM_DEPTH] = {0, "a string"},
    [M_CAM_PIXELS] = {0, "an array"},
};

static int is_list(rbj_member m)
{
    return m == M_RAYS || m == M_BOXES || m == M_SET || m == M_APPEND ||
           m == M_OBSERVERS || m == M_TARGETS || RBJ_IS_SHAPE(m) ||
           RBJ_IS_APPEND_LIST(m) || m == M_CAM_PIXELS;
}

/* The list whose elements m's elements are: an append list's kind. */
static rbj_member element_kind(rbj_member m)
{
    if (RBJ_IS_APPEND_LIST(m))
        return m == M_APPEND_BOXES ? M_BOXES
                                   : (rbj_member)(M_OBBS + (m - M_APPEND_OBBS));
    return m == M_APPEND ? M_BOXES : m;
}

/* ------------------------------------------------------------------------
 * Errors and arity rules
 */
int rbj_fail(rbj_parser *p, int status, int member, long long index,
             int field, const char *fmt, ...)
{
    if (p->err.status) /* keep the first */
        return 0;
    rbq_error *e = &p->err;
    e->status = status;
    e->has_pointer = 1;
    e->pointer[0] = '\0';
    if (member >= 0 && member < M_COUNT) {
        size_t at = strlen(rbj_member_names[member]) + 1;
        snprintf(e->pointer, sizeof e->pointer, "/%s",
                 rbj_member_names[member]);
        if (index >= 0)
            at += (size_t)snprintf(e->pointer + at, sizeof e->pointer - at,
                                   "/%lld", index);
        if (field >= 0 && at < sizeof e->pointer)
            snprintf(e->pointer + at, sizeof e->pointer - at, "/%d", field);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->detail, sizeof e->detail, fmt, ap);
    va_end(ap);
    p->state = ST_FAILED;
    return 0;
}

static int fail_oom(rbj_parser *p)
{
    if (!p->err.status) {
        p->err.status = 500;
        p->err.has_pointer = 0;
        snprintf(p->err.detail, sizeof p->err.detail, "out of memory");
        p->state = ST_FAILED;
    }
    return 0;
}

unsigned rbj_max_numbers(rbj_member m, unsigned dims)
{
    unsigned axes = dims == 2 ? 2 : 3;
    switch (element_kind(m)) {
    case M_RAYS:
        return 2 * axes + 2;
    case M_SET: /* an id and the longest element: a box (2D), an xbox */
        return dims == 2 ? 5 : 19;
    case M_OBBS:
        return 15;
    case M_XBOXES:
        return 18;
    case M_SPHERES:
    case M_PLANES:
        return 4;
    case M_OBSERVERS:
    case M_TARGETS:
        return 3;
    case M_CAM_PIXELS:
        return 2;
    default:
        return 2 * axes;
    }
}

int rbj_arity_ok(rbj_member m, unsigned dims, unsigned arity)
{
    m = element_kind(m);
    if (m == M_SET) /* the id's kind decides which of these (the store) */
        return dims == 2 ? arity == 5
                         : arity == 7 || arity == 11 || arity == 16 ||
                               arity == 19 || arity == 5;
    unsigned full = rbj_max_numbers(m, dims);
    return arity == full || (m == M_RAYS && arity == full - 2) ||
           (m == M_OBBS && arity == 10);
}

const char *rbj_arity_text(rbj_member m, unsigned dims)
{
    int d3 = dims != 2;
    switch (element_kind(m)) {
    case M_RAYS:
        return d3 ? "a 3D ray has 6 numbers, or 8 with its tmin and tmax"
                  : "a 2D ray has 4 numbers, or 6 with its tmin and tmax";
    case M_SET:
        return d3 ? "a 3D set entry has 7 numbers: index, min xyz, max xyz "
                    "(a box), or its id and an element of its kind: 11 or "
                    "16 (obb), 19 (xbox), 5 (sphere, plane)"
                  : "a 2D set entry has 5 numbers: index, min xy, max xy";
    case M_OBBS:
        return "an obb has 10 numbers (center, half extents, quaternion "
               "w x y z) or 15 (center, half extents, axes u v w)";
    case M_XBOXES:
        return "an xbox has 18 numbers: min xyz, max xyz, 3x4 matrix by "
               "rows";
    case M_SPHERES:
        return "a sphere has 4 numbers: center xyz, radius";
    case M_PLANES:
        return "a plane has 4 numbers: normal xyz, d";
    case M_OBSERVERS:
        return "an observer has 3 numbers: x y z";
    case M_TARGETS:
        return "a target has 3 numbers: x y z";
    case M_CAM_PIXELS:
        return "a pixel has 2 numbers: px, py";
    default:
        return d3 ? "a 3D box has 6 numbers: min xyz, max xyz"
                  : "a 2D box has 4 numbers: min xy, max xy";
    }
}

/* ------------------------------------------------------------------------
 * Memory: the parser's allocator, grow-only arrays
 */
static void *mem_alloc(rbj_parser *p, size_t size)
{
    const rb_allocator *a = p->opt.allocator;
    return a ? a->alloc(a->user, size, 64) : malloc(size);
}

static void mem_free(rbj_parser *p, void *ptr)
{
    const rb_allocator *a = p->opt.allocator;
    if (a)
        a->free(a->user, ptr);
    else
        free(ptr);
}

/* Resizes *ptr from old to size bytes, keeping the contents. malloc's
 * realloc can grow in place; a caller's allocator has no realloc. */
static int mem_grow(rbj_parser *p, void **ptr, size_t old, size_t size)
{
    if (!p->opt.allocator) {
        void *q = realloc(*ptr, size);
        if (!q)
            return -1;
        *ptr = q;
        return 0;
    }
    void *q = mem_alloc(p, size);
    if (!q)
        return -1;
    if (old)
        memcpy(q, *ptr, old);
    mem_free(p, *ptr);
    *ptr = q;
    return 0;
}

/* Makes room for element list->n, never beyond `limit` elements. */
static int list_reserve(rbj_parser *p, rbj_list *l, uint64_t limit)
{
    if (l->n < l->cap)
        return 0;
    size_t cap = l->cap ? l->cap * 2 : 64;
    if (cap > limit)
        cap = (size_t)limit;
    size_t fbytes = sizeof(float) * l->width;
    if (mem_grow(p, (void **)&l->slots, l->cap * fbytes, cap * fbytes) ||
        mem_grow(p, (void **)&l->arity, l->cap, cap))
        return -1;
    if (l == &p->lists[M_SET] &&
        mem_grow(p, (void **)&l->index, l->cap * sizeof(uint32_t),
                 cap * sizeof(uint32_t)))
        return -1;
    l->cap = cap;
    return 0;
}

/* NUL-terminated copy of yajl's text (numbers and strings are not). */
static const char *scratch_copy(rbj_parser *p, const void *text, size_t len)
{
    if (len + 1 > p->scratch_cap) {
        size_t cap = len + 1 > 64 ? len + 1 : 64;
        if (mem_grow(p, (void **)&p->scratch, 0, cap))
            return NULL;
        p->scratch_cap = cap;
    }
    memcpy(p->scratch, text, len);
    p->scratch[len] = '\0';
    return p->scratch;
}

/* ------------------------------------------------------------------------
 * Token checks
 */

/* What a token is, for "expected X, got Y". */
/* The "got" of a nested array, compared by address: a strcmp here trips
 * GCC 12's -Wstring-compare under the sanitizers after inlining. */
static const char got_array[] = "an array";

static int wrong_type(rbj_parser *p, const char *got)
{
    switch (p->state) {
    case ST_START:
        return rbj_fail(p, 422, M_COUNT, -1, -1,
                        "the body must be a JSON object, not %s", got);
    case ST_VALUE:
        return rbj_fail(p, 422, (int)p->member, -1, -1,
                        "expected %s, got %s", members[p->member].expect, got);
    case ST_LIST: /* about the next element */
        return rbj_fail(p, 422, (int)p->member,
                        (long long)p->lists[p->member].n, -1,
                        "expected an array of numbers, got %s", got);
    case ST_VEC:
        return rbj_fail(p, 422, (int)p->member, (long long)p->field, -1,
                        "expected a number, got %s", got);
    case ST_ELEM:
        return rbj_fail(p, 422, (int)p->member, (long long)p->index,
                        (int)p->field, "%sexpected a number, got %s",
                        got == got_array ? "nested too deep: "
                                                     : "",
                        got);
    default:
        return rbj_fail(p, 422, M_COUNT, -1, -1, "unexpected %s", got);
    }
}

/* A whole number from 0 to UINT32_MAX. JSON has one number type, so a
 * whole number may come as "7", "7.0" or "0.7e1" (a client's float, and
 * JSON Schema's "integer"); "7.5" and "-1" are not. The text is a JSON
 * number (yajl checked it). 0 ok, -1 not a whole number >= 0, -2 big. */
static int parse_u32(const char *s, uint32_t *out)
{
    int neg = *s == '-';
    const char *p = s + neg, *e = p + strcspn(p, "eE");
    long long exp10 = 0;
    if (*e) { /* clamped far beyond any use: only its sign then counts */
        const char *q = e + 1;
        int eneg = *q == '-';
        q += *q == '-' || *q == '+';
        for (; *q >= '0' && *q <= '9'; q++)
            if (exp10 < 100000)
                exp10 = exp10 * 10 + (*q - '0');
        exp10 = eneg ? -exp10 : exp10;
    }
    const char *dot = memchr(p, '.', (size_t)(e - p));
    const char *units = dot ? dot : e; /* just after the units digit */
    const char *first = NULL, *last = NULL;
    for (const char *q = p; q < e; q++)
        if (*q >= '1' && *q <= '9') {
            first = first ? first : q;
            last = q;
        }
    if (!first) { /* zero, "-0.0e5" too */
        *out = 0;
        return 0;
    }
    if (neg)
        return -1;
    /* The powers of ten of the first and the last non-zero digit. */
    long long top = (first < units ? units - first - 1 : units - first) +
                    exp10;
    long long low = (last < units ? units - last - 1 : units - last) + exp10;
    if (low < 0)
        return -1; /* a fraction */
    if (top >= 10)
        return -2;
    uint64_t v = 0;
    for (const char *q = first; q <= last; q++)
        if (*q != '.')
            v = v * 10 + (uint64_t)(*q - '0');
    for (long long k = 0; k < low; k++)
        v *= 10;
    if (v > UINT32_MAX)
        return -2;
    *out = (uint32_t)v;
    return 0;
}

static int member_value_done(rbj_parser *p)
{
    p->state = ST_MEMBER;
    return 1;
}

static int scalar_number(rbj_parser *p, const char *text)
{
    uint32_t u = 0;
    int rc;
    switch (p->member) {
    case M_DIMS:
        if (parse_u32(text, &u) != 0 || (u != 2 && u != 3))
            return rbj_fail(p, 422, M_DIMS, -1, -1,
                            "dims must be 2 or 3, not %s", text);
        p->dims = u;
        break;
    case M_MAX_HITS:
        rc = parse_u32(text, &u);
        if (rc == -2)
            return rbj_fail(p, 422, M_MAX_HITS, -1, -1,
                            "max_hits must be at most %u", UINT32_MAX);
        if (rc != 0 || u < 1)
            return rbj_fail(p, 422, M_MAX_HITS, -1, -1,
                            "max_hits must be an integer >= 1, not %s", text);
        p->max_hits = u;
        break;
    case M_TMIN:
    case M_TMAX:
        if (rb_float_parse(text, p->member == M_TMIN ? &p->tmin : &p->tmax))
            return rbj_fail(p, 422, (int)p->member, -1, -1,
                            "%s is beyond the float32 range", text);
        break;
    default:
        return wrong_type(p, "a number");
    }
    return member_value_done(p);
}

static int element_number(rbj_parser *p, const char *text)
{
    rbj_list *l = &p->lists[p->member];
    size_t i = p->index;
    unsigned f = p->field;
    if (f >= rbj_max_numbers(p->member, p->dims ? p->dims : 3))
        return rbj_fail(p, 422, (int)p->member, (long long)i, (int)f,
                        "too many numbers: %s",
                        rbj_arity_text(p->member, p->dims ? p->dims : 3));
    if (p->numbers >= p->opt.limits.max_numbers)
        return rbj_fail(p, 413, (int)p->member, (long long)i, (int)f,
                        "more than %llu numbers in the body",
                        (unsigned long long)p->opt.limits.max_numbers);
    p->numbers++;
    if (p->member == M_CAM_PIXELS) {
        double v;
        if (rb_double_parse(text, &v))
            return rbj_fail(p, 422, M_CAM_PIXELS, (long long)i, (int)f,
                            "%s is beyond the double range", text);
        memcpy(&l->slots[i * l->width + 2 * f], &v, sizeof v);
    } else if (p->member == M_SET && f == 0) {
        if (parse_u32(text, &l->index[i]) != 0)
            return rbj_fail(p, 422, M_SET, (long long)i, 0,
                            "a set index must be a non-negative integer "
                            "below 2^32, not %s", text);
    } else {
        unsigned slot = p->member == M_SET ? f - 1 : f;
        if (rb_float_parse(text, &l->slots[i * l->width + slot]))
            return rbj_fail(p, 422, (int)p->member, (long long)i, (int)f,
                            "%s is beyond the float32 range", text);
    }
    p->field++;
    return 1;
}

/* A ray's tmax may be null (+inf). With dims unknown it may sit at 5 (2D)
 * or 7 (3D); NaN marks it, since no JSON number parses to NaN, and the
 * end of the document settles which it was. */
static int element_null(rbj_parser *p)
{
    unsigned f = p->field;
    int tmax_field = p->member == M_RAYS &&
                     (p->dims ? f == 2 * p->dims + 1 : (f == 5 || f == 7));
    if (!tmax_field)
        return rbj_fail(p, 422, (int)p->member, (long long)p->index, (int)f,
                        "expected a number, got null%s",
                        p->member == M_RAYS ? " (only a ray's tmax may be "
                                              "null)"
                                            : "");
    rbj_list *l = &p->lists[M_RAYS];
    l->slots[p->index * l->width + f] = NAN;
    p->field++;
    return 1;
}

static int start_element(rbj_parser *p)
{
    rbj_list *l = &p->lists[p->member];
    const rbq_limits *lim = &p->opt.limits;
    size_t i = l->n;
    if (p->member == M_CAM_PIXELS) {
        if (i >= lim->max_rays)
            return rbj_fail(p, 413, M_CAM_PIXELS, (long long)i, -1,
                            "more than %llu pixels (rays)",
                            (unsigned long long)lim->max_rays);
    } else if (p->member == M_RAYS) {
        if (i >= lim->max_rays)
            return rbj_fail(p, 413, M_RAYS, (long long)i, -1,
                            "more than %llu rays",
                            (unsigned long long)lim->max_rays);
        if (p->have_mode && p->mode == RB_MODE_ALL && p->max_hits &&
            i + 1 > lim->max_results / p->max_hits)
            return rbj_fail(p, 413, M_RAYS, (long long)i, -1,
                            "more than %llu results: max_hits %u per ray",
                            (unsigned long long)lim->max_results,
                            p->max_hits);
    } else if (p->member == M_OBSERVERS || p->member == M_TARGETS) {
        uint64_t most = p->member == M_OBSERVERS ? lim->max_observers
                                                 : lim->max_targets;
        if (i >= most)
            return rbj_fail(p, 413, (int)p->member, (long long)i, -1,
                            "more than %llu %s", (unsigned long long)most,
                            rbj_member_names[p->member]);
    } else {
        size_t boxes = 0;
        for (int m = 0; m < M_COUNT; m++)
            if (m != M_RAYS && m != M_OUTPUTS && m != M_OBSERVERS &&
                m != M_TARGETS && m != M_CAM_PIXELS)
                boxes += p->lists[m].n;
        rbj_member kind = element_kind(p->member);
        if (boxes >= lim->max_boxes)
            return rbj_fail(p, 413, (int)p->member, (long long)i, -1,
                            "more than %llu %s",
                            (unsigned long long)lim->max_boxes,
                            RBJ_IS_SHAPE(kind) ? "elements" : "boxes");
    }
    uint64_t cap = p->member == M_RAYS || p->member == M_CAM_PIXELS
                       ? lim->max_rays
                   : p->member == M_OBSERVERS ? lim->max_observers
                   : p->member == M_TARGETS   ? lim->max_targets
                                              : lim->max_boxes;
    if (list_reserve(p, l, cap))
        return fail_oom(p);
    l->n++;
    p->index = i;
    p->field = 0;
    p->state = ST_ELEM;
    return 1;
}

static int end_element(rbj_parser *p)
{
    rbj_list *l = &p->lists[p->member];
    l->arity[p->index] = (uint8_t)p->field;
    if ((p->dims || p->member == M_CAM_PIXELS) &&
        !rbj_arity_ok(p->member, p->dims ? p->dims : 3, p->field))
        return rbj_fail(p, 422, (int)p->member, (long long)p->index, -1,
                        "%u numbers: %s", p->field,
                        rbj_arity_text(p->member, p->dims));
    p->state = ST_LIST;
    return 1;
}

/* ------------------------------------------------------------------------
 * yajl callbacks: each returns 1 to go on, 0 to stop (the error is set)
 */
static int on_null(void *ctx)
{
    rbj_parser *p = ctx;
    if (p->state == ST_VALUE && p->member == M_TMAX) {
        p->tmax = INFINITY;
        return member_value_done(p);
    }
    if (p->state == ST_ELEM)
        return element_null(p);
    return wrong_type(p, "null");
}

static int on_boolean(void *ctx, int value)
{
    return wrong_type(ctx, value ? "true" : "false");
}

/* The common element: a float of a ray or box within its arity and the
 * number limit, short enough for the shortcut. Parsed in place, without
 * the NUL-terminated copy; 0 leaves everything to element_number (nothing
 * has changed yet), which also words every error. */
static int element_number_fast(rbj_parser *p, const char *text, size_t len)
{
    unsigned f = p->field;
    if (p->member == M_SET || p->member == M_CAM_PIXELS ||
        f >= rbj_max_numbers(p->member, p->dims ? p->dims : 3) ||
        p->numbers >= p->opt.limits.max_numbers)
        return 0;
    rbj_list *l = &p->lists[p->member];
    if (!rb_float_parse_fast(text, len, &l->slots[p->index * l->width + f]))
        return 0;
    p->numbers++;
    p->field++;
    return 1;
}

/* A number of a camera matrix or of the viewport, as a double. */
static int camera_number(rbj_parser *p, const char *text, size_t len)
{
    unsigned v = (unsigned)(p->member - M_CAM_VIEW), f = p->field;
    if (f >= camera_vec_len[v])
        return rbj_fail(p, 422, (int)p->member, (long long)f, -1,
                        "too many numbers: \"%s\" has %u",
                        camera_keys[v], camera_vec_len[v]);
    const char *s = scratch_copy(p, text, len);
    if (!s)
        return fail_oom(p);
    if (rb_double_parse(s, &p->cam_vec[v][f]))
        return rbj_fail(p, 422, (int)p->member, (long long)f, -1,
                        "%s is beyond the double range", s);
    p->field++;
    return 1;
}

static int on_number(void *ctx, const char *text, size_t len)
{
    rbj_parser *p = ctx;
    if (p->state == ST_ELEM && element_number_fast(p, text, len))
        return 1;
    if (p->state == ST_VEC)
        return camera_number(p, text, len);
    if (p->state != ST_VALUE && p->state != ST_ELEM)
        return wrong_type(p, "a number");
    const char *s = scratch_copy(p, text, len);
    if (!s)
        return fail_oom(p);
    return p->state == ST_ELEM ? element_number(p, s) : scalar_number(p, s);
}

/* Whether the len bytes are a possible scene id (the characters of
 * routes.c's path ids); if not, shown gets them as printable text, other
 * bytes as \xNN, cut to fit. */
static int scene_id_ok(const unsigned char *t, size_t len, char *shown,
                       size_t cap)
{
    int ok = 1;
    size_t at = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = t[i];
        int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                    c == '.';
        ok &= plain;
        if (at + 5 < cap)
            at += (size_t)snprintf(shown + at, cap - at,
                                   plain ? "%c" : "\\x%02x", c);
    }
    shown[at] = '\0';
    return ok;
}

/* An entry of "outputs": "normal" is the one there is. */
static int output_entry(rbj_parser *p, const unsigned char *text, size_t len)
{
    size_t i = p->lists[M_OUTPUTS].n++;
    if (len == 6 && memcmp(text, "normal", 6) == 0) {
        p->outputs |= RB_OUTPUT_NORMAL;
        return 1;
    }
    const char *s = scratch_copy(p, text, len);
    if (!s)
        return fail_oom(p);
    char q[48];
    rbj_quote(q, sizeof q, s);
    return rbj_fail(p, 422, M_OUTPUTS, (long long)i, -1,
                    "unknown output %s: the one output is \"normal\"", q);
}

/* "depth" of a camera, "image" of a render body. */
static int name_value(rbj_parser *p, const unsigned char *text, size_t len)
{
    static const char *const depths[] = {"zero_to_one", "minus_one_to_one"};
    static const char *const images[] = {"depth", "normal", "id"};
    int depth = p->member == M_CAM_DEPTH;
    const char *const *names = depth ? depths : images;
    int n = depth ? 2 : 3;
    for (int k = 0; k < n; k++)
        if (strlen(names[k]) == len && memcmp(names[k], text, len) == 0) {
            if (depth)
                p->cam_depth = k;
            else
                p->image = k;
            return member_value_done(p);
        }
    const char *s = scratch_copy(p, text, len);
    if (!s)
        return fail_oom(p);
    char q[48];
    rbj_quote(q, sizeof q, s);
    return rbj_fail(p, 422, (int)p->member, -1, -1,
                    depth ? "unknown depth %s: \"zero_to_one\" (Direct3D, "
                            "Vulkan) or \"minus_one_to_one\" (OpenGL)"
                          : "unknown image %s: \"depth\", \"normal\" or "
                            "\"id\"",
                    q);
}

static int on_string(void *ctx, const unsigned char *text, size_t len)
{
    rbj_parser *p = ctx;
    if (p->state == ST_LIST && p->member == M_OUTPUTS)
        return output_entry(p, text, len);
    if (p->state == ST_VALUE &&
        (p->member == M_CAM_DEPTH || p->member == M_IMAGE))
        return name_value(p, text, len);
    if (p->state != ST_VALUE ||
        (p->member != M_MODE && p->member != M_SCENE))
        return wrong_type(p, "a string");
    if (p->member == M_SCENE) {
        if (len == 0 || len > RBJ_SCENE_ID_MAX)
            return rbj_fail(p, 422, M_SCENE, -1, -1,
                            "a scene id has 1 to %d bytes, not %zu",
                            RBJ_SCENE_ID_MAX, len);
        /* The id is looked up as a C string: a NUL inside ("<id>\u0000x")
         * would name the scene <id>. No stored id has such a byte, so the
         * answer is the one an unknown id gets, naming what was sent. */
        char shown[80];
        if (!scene_id_ok(text, len, shown, sizeof shown))
            return rbj_fail(p, 404, M_SCENE, -1, -1,
                            "no scene '%s': a scene id is made of A-Z a-z "
                            "0-9 . _ -", shown);
        memcpy(p->scene, text, len);
        p->scene[len] = '\0';
        return member_value_done(p);
    }
    const char *s = scratch_copy(p, text, len);
    if (!s)
        return fail_oom(p);
    if (strlen(s) != len || rb_mode_parse(s, &p->mode) != RB_OK) {
        char q[48];
        rbj_quote(q, sizeof q, s);
        return rbj_fail(p, 422, M_MODE, -1, -1,
                        "unknown mode %s: pairs, nearest, any, count or all",
                        q);
    }
    p->have_mode = 1;
    return member_value_done(p);
}

static int on_start_map(void *ctx)
{
    rbj_parser *p = ctx;
    if (p->state == ST_VALUE && p->member == M_CAMERA && !p->in_camera) {
        p->in_camera = 1; /* {"view": [...], "projection": [...], ...} */
        p->state = ST_MEMBER;
        return 1;
    }
    if (p->state == ST_VALUE && p->member == M_APPEND && !p->in_append) {
        p->in_append = 1; /* {"boxes": [...], "obbs": [...], ...} */
        p->append_object = 1;
        p->state = ST_MEMBER;
        return 1;
    }
    if (p->state != ST_START)
        return wrong_type(p, "an object");
    p->state = ST_MEMBER;
    return 1;
}

/* A key of a nested object (append's object form, "camera"): the member
 * among keys[0..n) (members first.. in the same order), or M_COUNT after
 * a 422 at the parent naming what it takes, or at a member seen twice. */
static int nested_key(rbj_parser *p, const char *const *keys, int n,
                      int first, int parent, const char *takes,
                      const unsigned char *key, size_t len)
{
    int m = M_COUNT;
    for (int k = 0; k < n; k++)
        if (strlen(keys[k]) == len && memcmp(keys[k], key, len) == 0)
            m = first + k;
    if (m == M_COUNT) {
        rbj_fail(p, 422, parent, -1, -1, "unknown member: \"%s\" takes %s",
                 rbj_member_names[parent], takes);
        rbj_pointer_append(p->err.pointer, sizeof p->err.pointer,
                           (const char *)key, len);
        return M_COUNT;
    }
    if (p->seen & (1u << m)) {
        rbj_fail(p, 422, m, -1, -1, "\"%s\" appears twice",
                 rbj_member_names[m]);
        return M_COUNT;
    }
    return m;
}

/* A key of append's object form. */
static int append_key(rbj_parser *p, const unsigned char *key, size_t len)
{
    int m = nested_key(p, append_keys, 5, M_APPEND_BOXES, M_APPEND,
                       "\"boxes\", \"obbs\", \"xboxes\", \"spheres\" and "
                       "\"planes\"",
                       key, len);
    if (m == M_COUNT)
        return 0;
    p->seen |= 1u << m;
    p->member = (rbj_member)m;
    p->state = ST_VALUE;
    return 1;
}

/* A key of "camera". */
static int camera_key(rbj_parser *p, const unsigned char *key, size_t len)
{
    int m = nested_key(p, camera_keys, 5, M_CAM_VIEW, M_CAMERA,
                       "\"view\", \"projection\", \"viewport\", \"depth\" "
                       "and \"pixels\"",
                       key, len);
    if (m == M_COUNT)
        return 0;
    if (m == M_CAM_PIXELS && p->opt.body == RBQ_RENDER)
        return rbj_fail(p, 422, m, -1, -1,
                        "a render draws every pixel of the viewport; "
                        "\"pixels\" is not taken here");
    p->seen |= 1u << m;
    p->member = (rbj_member)m;
    p->field = 0;
    p->state = ST_VALUE;
    return 1;
}

static int on_map_key(void *ctx, const unsigned char *key, size_t len)
{
    rbj_parser *p = ctx;
    if (p->in_append)
        return append_key(p, key, len);
    if (p->in_camera)
        return camera_key(p, key, len);
    int m;
    for (m = 0; m < M_COUNT; m++)
        if (strlen(rbj_member_names[m]) == len &&
            memcmp(rbj_member_names[m], key, len) == 0)
            break;
    if (m == M_COUNT || !(members[m].bodies & B(p->opt.body))) {
        /* Name what this body takes, so that a typo is found at once. */
        char known[200];
        size_t at = 0;
        known[0] = '\0';
        for (int k = 0; k < M_COUNT; k++)
            if ((members[k].bodies & B(p->opt.body)) && at < sizeof known)
                at += (size_t)snprintf(known + at, sizeof known - at,
                                       "%s\"%s\"", at ? ", " : "",
                                       rbj_member_names[k]);
        rbj_fail(p, 422, M_COUNT, -1, -1, "unknown member; this body takes %s",
                 known);
        rbj_pointer_append(p->err.pointer, sizeof p->err.pointer,
                           (const char *)key, len);
        return 0;
    }
    if (p->opt.scene_in_path &&
        (m == M_BOXES || m == M_SCENE || RBJ_IS_SHAPE(m)))
        return rbj_fail(p, 422, m, -1, -1,
                        "the elements are the scene's of the path; \"%s\" "
                        "is not taken here",
                        rbj_member_names[m]);
    if (p->seen & (1u << m))
        return rbj_fail(p, 422, m, -1, -1, "\"%s\" appears twice",
                        rbj_member_names[m]);
    unsigned elements = (1u << M_BOXES) | (1u << M_OBBS) |
                        (1u << M_XBOXES) | (1u << M_SPHERES) |
                        (1u << M_PLANES);
    if ((m == M_SCENE && (p->seen & elements)) ||
        (((1u << m) & elements) && (p->seen & (1u << M_SCENE))))
        return rbj_fail(p, 422, m, -1, -1,
                        "\"scene\" and element lists (\"boxes\", \"obbs\", "
                        "...) exclude each other");
    p->seen |= 1u << m;
    p->member = (rbj_member)m;
    p->state = ST_VALUE;
    return 1;
}

static int on_end_map(void *ctx)
{
    rbj_parser *p = ctx;
    if (p->in_append) { /* an object below the root */
        p->in_append = 0;
        p->member = M_APPEND;
        return member_value_done(p);
    }
    if (p->in_camera) {
        p->in_camera = 0;
        p->member = M_CAMERA;
        return member_value_done(p);
    }
    p->state = ST_DONE;
    return 1;
}

static int on_start_array(void *ctx)
{
    rbj_parser *p = ctx;
    if (p->state == ST_VALUE && RBJ_IS_CAMERA_VEC(p->member)) {
        p->field = 0;
        p->state = ST_VEC;
        return 1;
    }
    if (p->state == ST_VEC)
        return wrong_type(p, got_array);
    if (p->state == ST_VALUE &&
        (is_list(p->member) || p->member == M_OUTPUTS)) {
        p->state = ST_LIST;
        return 1;
    }
    if (p->state == ST_LIST && p->member == M_OUTPUTS)
        return rbj_fail(p, 422, M_OUTPUTS, (long long)p->lists[M_OUTPUTS].n,
                        -1, "expected a string, got an array");
    if (p->state == ST_LIST)
        return start_element(p);
    return wrong_type(p, got_array);
}

static int on_end_array(void *ctx)
{
    rbj_parser *p = ctx;
    if (p->state == ST_ELEM)
        return end_element(p);
    if (p->state == ST_VEC) {
        unsigned v = (unsigned)(p->member - M_CAM_VIEW);
        if (p->field != camera_vec_len[v])
            return rbj_fail(p, 422, (int)p->member, -1, -1,
                            "%u numbers: \"%s\" has %u%s", p->field,
                            camera_keys[v], camera_vec_len[v],
                            v < 2 ? " (a 4x4 matrix, row-major)"
                                  : " (x, y, width, height)");
    }
    return member_value_done(p); /* ST_LIST: yajl matched the brackets */
}

static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
};

/* ------------------------------------------------------------------------
 * Public API
 */
void rbj_options_init(rbj_options *opt, rbq_body body)
{
    memset(opt, 0, sizeof *opt);
    opt->body = body;
    rbq_limits_default(&opt->limits);
    opt->patch_dims = 3;
}

int rbj_parser_create(const rbj_options *opt, rbj_parser **out)
{
    const rbq_limits *lim = &opt->limits;
    *out = NULL;
    if (opt->body > RBQ_RENDER || !lim->max_rays || !lim->max_boxes ||
        !lim->max_results || !lim->max_numbers || !lim->default_max_hits ||
        (opt->body == RBQ_SCENE_PATCH && opt->patch_dims != 2 &&
         opt->patch_dims != 3) ||
        (opt->scene_in_path &&
         ((opt->body != RBQ_INTERSECT && opt->body != RBQ_RENDER) ||
          (opt->scene_dims != 2 && opt->scene_dims != 3))) ||
        (opt->allocator && (!opt->allocator->alloc || !opt->allocator->free)))
        return RB_EINVAL;
    rbj_parser *p = opt->allocator
                        ? opt->allocator->alloc(opt->allocator->user,
                                                sizeof *p, 64)
                        : malloc(sizeof *p);
    if (!p)
        return RB_ENOMEM;
    memset(p, 0, sizeof *p);
    p->opt = *opt;
    if (opt->allocator) {
        p->alloc = *opt->allocator;
        p->opt.allocator = &p->alloc;
    }
    p->state = ST_START;
    p->tmax = INFINITY;
    if (opt->body == RBQ_SCENE_PATCH)
        p->dims = opt->patch_dims;
    p->lists[M_RAYS].width = 8;
    p->lists[M_BOXES].width = 6;
    p->lists[M_SET].width = RBQ_SET_STRIDE; /* an id's element, any kind */
    p->lists[M_APPEND].width = 6;
    p->lists[M_OBBS].width = 15;    /* an rb_obb; quaternions settle later */
    p->lists[M_XBOXES].width = 18;  /* an rb_xbox */
    p->lists[M_SPHERES].width = 4;  /* an rb_sphere */
    p->lists[M_OBSERVERS].width = 3; /* x y z */
    p->lists[M_TARGETS].width = 3;
    p->lists[M_PLANES].width = 4;   /* an rb_plane */
    p->lists[M_APPEND_BOXES].width = 6;
    p->lists[M_APPEND_OBBS].width = 15;
    p->lists[M_APPEND_XBOXES].width = 18;
    p->lists[M_APPEND_SPHERES].width = 4;
    p->lists[M_APPEND_PLANES].width = 4;
    p->lists[M_CAM_PIXELS].width = 4; /* two doubles (px, py) */
    p->yajl = yajl_alloc(&callbacks, NULL, p);
    if (!p->yajl) {
        rbj_parser_destroy(p);
        return RB_ENOMEM;
    }
    *out = p;
    return RB_OK;
}

void rbj_parser_destroy(rbj_parser *p)
{
    if (!p)
        return;
    if (p->yajl)
        yajl_free(p->yajl);
    for (int m = 0; m < M_COUNT; m++) {
        mem_free(p, p->lists[m].slots);
        mem_free(p, p->lists[m].arity);
        mem_free(p, p->lists[m].index);
    }
    mem_free(p, p->scratch);
    mem_free(p, p->carry);
    mem_free(p, p);
}

/* yajl's own message ("lexical error: invalid char in json text."),
 * trimmed to one line, and a pointer to where the parse stood: the member,
 * list or element being read. */
static void syntax_error(rbj_parser *p, uint64_t offset, const char *what)
{
    unsigned char *msg = yajl_get_error(p->yajl, 0, NULL, 0);
    const char *text = msg ? (const char *)msg : "syntax error";
    int len = (int)strcspn(text, "\n");
    int inside = p->state == ST_VALUE || p->state == ST_LIST ||
                 p->state == ST_ELEM;
    long long index = p->state == ST_ELEM   ? (long long)p->index
                      : p->state == ST_LIST ? (long long)p->lists[p->member].n
                                            : -1;
    rbj_fail(p, 400, inside ? (int)p->member : M_COUNT, index,
             p->state == ST_ELEM ? (int)p->field : -1, "%s at byte %llu: %.*s",
             what, (unsigned long long)offset, len, text);
    p->err.offset = offset;
    if (msg)
        yajl_free_error(p->yajl, msg);
}

static void parse_piece(rbj_parser *p, const char *data, size_t len)
{
    if (!len || p->err.status)
        return;
    if (yajl_parse(p->yajl, (const unsigned char *)data, len) ==
        yajl_status_error)
        syntax_error(p, p->fed + yajl_get_bytes_consumed(p->yajl),
                     "malformed JSON");
    p->fed += len;
}

static int carry_append(rbj_parser *p, const char *data, size_t len)
{
    if (!len)
        return 0;
    /* The carry holds one unfinished token (and the byte after it). */
    if (p->carry_len + len > RBJ_IN_TOKEN_MAX + 1) {
        rbj_fail(p, 413, M_COUNT, -1, -1,
                 "a JSON token (number, string or literal) at byte %llu is "
                 "longer than %d bytes",
                 (unsigned long long)p->fed, RBJ_IN_TOKEN_MAX);
        p->err.offset = p->fed;
        return -1;
    }
    if (p->carry_len + len > p->carry_cap) {
        size_t cap = 2 * (p->carry_len + len);
        if (mem_grow(p, (void **)&p->carry, p->carry_len, cap))
            return fail_oom(p), -1;
        p->carry_cap = cap;
    }
    memcpy(p->carry + p->carry_len, data, len);
    p->carry_len += len;
    return 0;
}

static int word_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
           c == '-' || c == '+' || c == '.';
}

/* Byte classes and the token-state machine of scan_tokens as tables:
 * two lookups a byte instead of a switch (the scan sees every byte of
 * every body, so it is on the small-request path). */
enum { CL_OTHER, CL_QUOTE, CL_BACKSLASH, CL_WORD, CL_N };

static unsigned char byte_class[256];
static unsigned char next_lex[4][CL_N];
static pthread_once_t lex_tables_once = PTHREAD_ONCE_INIT;

static void make_lex_tables(void)
{
    for (int c = 0; c < 256; c++)
        byte_class[c] = c == '"'          ? CL_QUOTE
                        : c == '\\'        ? CL_BACKSLASH
                        : word_char((unsigned char)c) ? CL_WORD
                                                      : CL_OTHER;
    for (int k = 0; k < CL_N; k++) {
        /* outside a token: a quote opens a string, a word char a word */
        next_lex[LX_OUT][k] = k == CL_QUOTE ? LX_STRING
                              : k == CL_WORD ? LX_WORD
                                             : LX_OUT;
        next_lex[LX_STRING][k] = k == CL_BACKSLASH ? LX_ESCAPE
                                 : k == CL_QUOTE   ? LX_OUT
                                                   : LX_STRING;
        next_lex[LX_ESCAPE][k] = LX_STRING;
        /* The byte that ends a word goes with it (yajl looks ahead); a
         * quote right after a word starts a string at once. */
        next_lex[LX_WORD][k] = k == CL_WORD    ? LX_WORD
                               : k == CL_QUOTE ? LX_STRING
                                               : LX_OUT;
    }
}

/* Follows token boundaries over data (see rbj_parser_feed): returns the
 * offsets just after the first and the last byte after which no token is
 * open (len + 1 when there is none). */
static void scan_tokens(rbj_parser *p, const char *data, size_t len,
                        size_t *first_safe, size_t *last_safe)
{
    pthread_once(&lex_tables_once, make_lex_tables);
    const unsigned char *u = (const unsigned char *)data;
    unsigned lx = p->lex;
    size_t first = len + 1, last = len + 1, i = 0;
    for (; i < len && !p->nonblank; i++) {
        unsigned char c = u[i];
        p->nonblank = c != ' ' && c != '\t' && c != '\r' && c != '\n';
        lx = next_lex[lx][byte_class[c]];
        if (lx == LX_OUT) {
            if (first > len)
                first = i + 1;
            last = i + 1;
        }
    }
    for (; i < len; i++) {
        lx = next_lex[lx][byte_class[u[i]]];
        if (lx == LX_OUT) {
            if (first > len)
                first = i + 1;
            last = i + 1;
        }
    }
    *first_safe = first;
    *last_safe = last;
    p->lex = (rbj_lex)lx;
}

/* yajl's error offsets depend on where the calls split a token (a token
 * it had to buffer is counted differently), so pieces go to yajl only at
 * token boundaries: an unfinished token (with, for numbers and literals,
 * the byte after it) waits in p->carry for the rest. Errors therefore do
 * not depend on how the body was chunked; nothing else changes. */
int rbj_parser_feed(rbj_parser *p, const void *data, size_t len)
{
    if (p->err.status || p->ready)
        return -1;
    const char *c = data;
    size_t first, last;
    scan_tokens(p, c, len, &first, &last);
    if (last > len) { /* no boundary in this chunk */
        carry_append(p, c, len);
        return p->err.status ? -1 : 0;
    }
    if (p->carry_len) {
        if (carry_append(p, c, first))
            return -1;
        parse_piece(p, p->carry, p->carry_len);
        p->carry_len = 0;
    } else {
        first = 0;
    }
    parse_piece(p, c + first, last - first);
    if (!p->err.status)
        carry_append(p, c + last, len - last);
    return p->err.status ? -1 : 0;
}

int rbj_parser_feed_last(rbj_parser *p, const void *data, size_t len)
{
    if (p->err.status || p->ready)
        return -1;
    /* With nothing held back, no token can be open across this call: the
     * bytes go to yajl whole, without the boundary scan (which only
     * splits bodies at places yajl would not notice). */
    if (p->carry_len)
        return rbj_parser_feed(p, data, len);
    const unsigned char *u = data;
    for (size_t i = 0; i < len && !p->nonblank; i++)
        p->nonblank = u[i] != ' ' && u[i] != '\t' && u[i] != '\r' &&
                      u[i] != '\n';
    parse_piece(p, data, len);
    return p->err.status ? -1 : 0;
}

int rbj_parser_finish(rbj_parser *p)
{
    if (p->err.status || p->ready)
        return p->ready ? 0 : -1;
    if (!p->nonblank) {
        rbj_fail(p, 400, M_COUNT, -1, -1, "empty body");
        p->err.offset = p->fed;
        return -1;
    }
    parse_piece(p, p->carry, p->carry_len);
    p->carry_len = 0;
    if (p->err.status)
        return -1;
    yajl_status st = yajl_complete_parse(p->yajl);
    if (st == yajl_status_error)
        syntax_error(p, p->fed, "body cut short");
    if (p->err.status)
        return -1;
    if (p->state != ST_DONE) {
        rbj_fail(p, 400, M_COUNT, -1, -1, "body cut short at byte %llu",
                 (unsigned long long)p->fed);
        p->err.offset = p->fed;
        return -1;
    }
    if (rbj_settle(p))
        return -1;
    p->ready = 1;
    return 0;
}

const rbq_error *rbj_parser_error(const rbj_parser *p)
{
    return &p->err;
}

const rbq_request *rbj_parser_request(const rbj_parser *p)
{
    return p->ready ? &p->req : NULL;
}
