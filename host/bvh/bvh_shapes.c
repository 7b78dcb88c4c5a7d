/*
 * bvh_shapes.c - the hierarchy over obbs, xboxes and spheres (SPEC R16):
 * an ordinary rb_bvh built over conservative world boxes of the shapes,
 * walked with node tests widened enough that the exact shape tests
 * (kernels/exact.h) can never be skipped where they would report a hit.
 * Planes are unbounded and stay outside (every ray tests every plane).
 *
 * Why a widening, and how much. The exact tests work in float: an obb or
 * xbox test turns the ray into the box's frame (o' = M (o - b), d' = M d,
 * each rounded), a sphere test computes l = f + (beta / a) d with
 * cancellation. What they compute is, up to rounding, the exact answer
 * for a slightly moved ray; the points they call inside lie within
 *     err <= c u kappa (|o - b| + |t d|)          (u = 2^-24)
 * of the solid, where kappa = ||M|| ||M^-1|| (infinity norm; 1 for a
 * sphere, <= 3 for an obb) and c ~ 10 counts the roundings of the
 * transform, the slab test and the sphere roots (a tangent ray's roots
 * move along the ray, which keeps their points within ~u r of the
 * surface). A hit point lies in the solid's box, so |t d| <= |o| + 2R and
 * |o - b| <= |o| + R, with R the largest coordinate of any shape's box or
 * frame origin b. Node tests therefore widen every slot by
 *     delta(ray) = 64 u kappa_max (|o|_inf + 2 R)
 * on every side (a margin of ~3x over the bound above, which also covers
 * the rounding of lo - delta itself), and keep the exit padding of boxes
 * (RB_BVH_PAD_UP/DOWN) for their own rounding. A ray far from the scene
 * gets a wide margin and prunes less; the answers never change.
 *
 * Widened once, at build time. delta grows with |o|, so the tree's box
 * slots hold the world boxes widened by delta for every origin within
 * `cover` (= 2R: every ray from inside the scene's box and some way
 * around it), each bound rounded outwards in double, and inner slots are
 * refitted over them. A ray from there takes the box walk's own loop and
 * node test (bvh_walk.inc, AVX2 where the processor has it) with the
 * plain slab test. A ray from farther away (rare: it would need
 * |o|_inf > 2R) walks the tree here with its own delta added on top at
 * every slot, scalar, which only widens further. A box slot's child is
 * not the shape index but the index of the shape's copy in set->leaves,
 * laid out in slot order so that a node's candidates share cache lines.
 *
 * Joint trees. Given the boxes of the same query or scene, the tree holds
 * them too, after the shapes in its prims, with their exact corners: not
 * widened, marked in the node's `exact` mask, child[slot] their id. The
 * CPU then answers both kinds in one walk (bvh_walk.inc: exact slots get
 * the box tree's test, the others the padded one, which only widens an
 * inner slot over boxes), and shape walks skip them. Moved boxes refit
 * the tree through `where` like a box tree (rb_shape_tree_move_boxes).
 *
 * The bound above needs the products of the tests to stay normal floats:
 * squares below ~1e-38 lose their relative precision (a sphere's a = d.d
 * with |d| ~ 1e-20 is a subnormal good to ~1e-5), and above ~1e38 they
 * overflow. So the widening has an absolute floor (2^-60, which covers
 * squares that underflow near a shape), the tree is built only when every
 * coordinate is within 2^31 of the origin, and a ray whose origin or
 * direction is beyond 2^31, or whose direction is below 2^-60, is tested
 * against every shape instead (then no product can overflow: |a delta| <=
 * 9 * 2^124). The differential suite test_shape_paths walks grazing,
 * tangent, far, huge and tiny rays through both paths.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "bvh.h"

#define WIDEN_ULPS 64.0
#define WIDEN_FLOOR 0x1p-60f /* squares of lengths below this underflow */

/* Rounds x (double) to the float at or below / at or above it. */
static float round_down(double x)
{
    float f = (float)x;
    return (double)f > x ? nextafterf(f, -INFINITY) : f;
}

static float round_up(double x)
{
    float f = (float)x;
    return (double)f < x ? nextafterf(f, INFINITY) : f;
}

/* The world box of an lbox: the 8 corners under M^-1 (the exact inverse
 * of the stored float matrix, in double), plus b; and kappa. */
static double lbox_bounds(const rb_lbox *s, double lo[3], double hi[3],
                          double *reach)
{
    double m[3][3], inv[3][3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            m[i][j] = s->m[3 * i + j];
    double c00 = m[1][1] * m[2][2] - m[1][2] * m[2][1];
    double c01 = m[1][2] * m[2][0] - m[1][0] * m[2][2];
    double c02 = m[1][0] * m[2][1] - m[1][1] * m[2][0];
    double det = m[0][0] * c00 + m[0][1] * c01 + m[0][2] * c02;
    inv[0][0] = c00 / det;
    inv[1][0] = c01 / det;
    inv[2][0] = c02 / det;
    inv[0][1] = (m[0][2] * m[2][1] - m[0][1] * m[2][2]) / det;
    inv[0][2] = (m[0][1] * m[1][2] - m[0][2] * m[1][1]) / det;
    inv[1][1] = (m[0][0] * m[2][2] - m[0][2] * m[2][0]) / det;
    inv[1][2] = (m[0][2] * m[1][0] - m[0][0] * m[1][2]) / det;
    inv[2][1] = (m[0][1] * m[2][0] - m[0][0] * m[2][1]) / det;
    inv[2][2] = (m[0][0] * m[1][1] - m[0][1] * m[1][0]) / det;
    double norm_m = 0, norm_inv = 0;
    for (int i = 0; i < 3; i++) {
        double rm = 0, ri = 0;
        for (int j = 0; j < 3; j++) {
            rm += fabs(m[i][j]);
            ri += fabs(inv[i][j]);
        }
        norm_m = rm > norm_m ? rm : norm_m;
        norm_inv = ri > norm_inv ? ri : norm_inv;
    }
    for (int a = 0; a < 3; a++) {
        lo[a] = INFINITY;
        hi[a] = -INFINITY;
    }
    for (int k = 0; k < 8; k++) {
        double c[3] = {(k & 1) ? s->hi[0] : s->lo[0],
                       (k & 2) ? s->hi[1] : s->lo[1],
                       (k & 4) ? s->hi[2] : s->lo[2]};
        for (int a = 0; a < 3; a++) {
            double p = (double)s->b[a] + inv[a][0] * c[0] + inv[a][1] * c[1] +
                       inv[a][2] * c[2];
            lo[a] = p < lo[a] ? p : lo[a];
            hi[a] = p > hi[a] ? p : hi[a];
        }
    }
    /* The inverse in double is off by ~1e-16 of its size: a float ulp
     * around the box covers it. */
    for (int a = 0; a < 3; a++) {
        double pad = 1e-12 * (fabs(lo[a]) + fabs(hi[a]));
        lo[a] -= pad;
        hi[a] += pad;
        double b = fabs(s->b[a]);
        *reach = b > *reach ? b : *reach;
    }
    return norm_m * norm_inv;
}

/* Copies the bounded shapes into set->leaves in the order of the tree's
 * leaf slots and points each slot there (see internal.h); a joint tree's
 * boxes (prims from n_bounded on) get their ids and their exact bits. */
static int order_leaves(rb_context *ctx, rb_shapeset *set, rb_bvh *tree,
                        const uint32_t *box_ids)
{
    size_t n_lbox = set->n_obb + set->n_xbox, n = n_lbox + set->n_ball;
    struct rb_shape_leaves *l = &set->leaves;
    l->lbox = n_lbox ? rb_alloc(ctx, n_lbox * sizeof *l->lbox, 64) : NULL;
    l->ball = set->n_ball ? rb_alloc(ctx, set->n_ball * sizeof *l->ball, 64)
                          : NULL;
    l->ids = rb_alloc(ctx, n * sizeof *l->ids, 64);
    if ((n_lbox && !l->lbox) || (set->n_ball && !l->ball) || !l->ids) {
        rb_free(ctx, l->lbox);
        rb_free(ctx, l->ball);
        rb_free(ctx, l->ids);
        memset(l, 0, sizeof *l);
        return RB_ENOMEM;
    }
    size_t next_lbox = 0, next_ball = n_lbox;
    for (size_t i = 0; i < tree->n_nodes; i++) {
        rb_bvh_node *nd = &tree->nodes[i];
        for (unsigned k = 0; k < RB_BVH_WIDTH; k++) {
            if (!((nd->boxes >> k) & 1))
                continue;
            size_t j = nd->child[k], p;
            if (j >= n) {
                size_t b = j - n;
                nd->child[k] = box_ids ? box_ids[b] : (uint32_t)b;
                nd->exact |= 1u << k;
                continue;
            }
            if (j < n_lbox) {
                p = next_lbox++;
                l->lbox[p] = set->lbox[j];
            } else {
                p = next_ball++;
                l->ball[p - n_lbox] = set->ball[j - n_lbox];
            }
            l->ids[p] = rb_shapeset_id(set, j);
            nd->child[k] = (uint32_t)p;
        }
    }
    return RB_OK;
}

/* Widens every shape slot of the tree by delta on each side, rounding
 * outwards, and refits the inner slots over them (see the top); a joint
 * tree's boxes keep their exact corners. */
static void widen_slots(rb_bvh *tree, double delta)
{
    for (size_t i = 0; i < tree->n_nodes; i++) {
        rb_bvh_node *n = &tree->nodes[i];
        for (unsigned k = 0; k < RB_BVH_WIDTH; k++) {
            if (!((n->boxes & ~n->exact) >> k & 1))
                continue;
            for (int a = 0; a < 3; a++) {
                n->lo[a][k] = round_down((double)n->lo[a][k] - delta);
                n->hi[a][k] = round_up((double)n->hi[a][k] + delta);
            }
        }
    }
    rb_bvh_refit(tree);
}

int rb_shape_tree_build(rb_context *ctx, rb_shapeset *set,
                        const rb_boxset *box_set, const uint32_t *box_ids)
{
    size_t n_lbox = set->n_obb + set->n_xbox, n = n_lbox + set->n_ball;
    size_t nb = box_set ? box_set->n : 0;
    rb_box *boxes = n ? rb_alloc(ctx, (n + nb) * sizeof *boxes, 64) : NULL;
    rb_bvh *tree = rb_calloc(ctx, sizeof *tree, 64);
    if ((n && !boxes) || !tree) {
        rb_free(ctx, boxes);
        rb_free(ctx, tree);
        return rb_fail(ctx, RB_ENOMEM, "no memory for a shape hierarchy");
    }
    double kappa = 1, reach = 0;
    for (size_t j = 0; j < n; j++) {
        double lo[3], hi[3];
        if (j < n_lbox) {
            double k = lbox_bounds(&set->lbox[j], lo, hi, &reach);
            kappa = k > kappa ? k : kappa;
        } else {
            const rb_ball *b = &set->ball[j - n_lbox];
            for (int a = 0; a < 3; a++) {
                lo[a] = (double)b->c[a] - b->r;
                hi[a] = (double)b->c[a] + b->r;
                double c = fabs(b->c[a]);
                reach = c > reach ? c : reach;
            }
        }
        for (int a = 0; a < 3; a++) {
            boxes[j].min[a] = round_down(lo[a]);
            boxes[j].max[a] = round_up(hi[a]);
            double m = fabs(lo[a]) > fabs(hi[a]) ? fabs(lo[a]) : fabs(hi[a]);
            reach = m > reach ? m : reach;
        }
    }
    /* Beyond the reach, shapes are tested one by one: same answers. */
    if (!(reach <= RB_SHAPE_TREE_REACH)) {
        rb_free(ctx, boxes);
        rb_free(ctx, tree);
        return RB_OK;
    }
    /* A joint tree's boxes: their exact corners (the box set's, checked
     * and flushed already), after the shapes. They take no part in the
     * widening: their slots are tested exactly, as in a box tree. */
    for (size_t i = 0; i < nb; i++)
        for (int a = 0; a < 3; a++) {
            boxes[n + i].min[a] = rb_boxset_lo(box_set, a)[i];
            boxes[n + i].max[a] = rb_boxset_hi(box_set, a)[i];
        }
    size_t cap = 0;
    int rc = rb_boxset_build(ctx, &set->bounds, &cap, boxes, 3, n + nb);
    rb_free(ctx, boxes);
    if (rc == RB_OK &&
        (rb_bvh_build(ctx->pool, &ctx->alloc, &ctx->workmem, &set->bounds,
                      ctx->bvh_build, tree) != RB_OK ||
         order_leaves(ctx, set, tree, box_ids) != RB_OK))
        rc = rb_fail(ctx, RB_ENOMEM, "no memory for a shape hierarchy");
    if (rc) {
        rb_bvh_free(tree);
        rb_free(ctx, set->bounds.data);
        set->bounds.data = NULL;
        rb_free(ctx, tree);
        return rc;
    }
    set->tree = tree;
    set->n_tree_boxes = nb;
    set->widen = (float)(WIDEN_ULPS * (double)FLT_EPSILON / 2 * kappa);
    set->reach = (float)(2 * reach);
    set->cover = set->reach;
    widen_slots(tree, (double)set->widen * ((double)set->cover + set->reach) +
                          WIDEN_FLOOR);
    /* The cost the refits of a joint tree's moved boxes are measured
     * against (rb_shape_tree_move_boxes). */
    tree->sah_built = tree->sah;
    return RB_OK;
}

void rb_shape_tree_move_boxes(rb_shapeset *set, const rb_boxset *boxes,
                              const uint32_t *indices, size_t n)
{
    rb_bvh *tree = set->tree;
    if (!tree || !set->n_tree_boxes || !n)
        return;
    /* The tree's bounds take the new corners (its prims: the shapes, then
     * the boxes), and the box tree's update writes them into their slots
     * and refits. */
    size_t first = rb_shapeset_bounded(set), stride = set->bounds.stride;
    float *bounds = set->bounds.data;
    for (size_t k = 0; k < n; k++) {
        size_t i = indices[k];
        for (int a = 0; a < 3; a++) {
            bounds[(size_t)a * stride + first + i] = rb_boxset_lo(boxes, a)[i];
            bounds[(size_t)(3 + a) * stride + first + i] =
                rb_boxset_hi(boxes, a)[i];
        }
    }
    rb_bvh_update(tree, &set->bounds, first, indices, n);
    /* A device that keeps the tree keys it on the bounds' uid. */
    set->bounds.uid = rb_next_uid();
}

void rb_shape_tree_free(const rb_allocator *alloc, rb_shapeset *set)
{
    if (set->tree) {
        rb_bvh_free(set->tree);
        rb_free_with(alloc, set->tree);
    }
    rb_free_with(alloc, set->bounds.data);
    rb_free_with(alloc, set->leaves.lbox);
    rb_free_with(alloc, set->leaves.ball);
    rb_free_with(alloc, set->leaves.ids);
    set->tree = NULL;
    set->bounds.data = NULL;
    memset(&set->leaves, 0, sizeof set->leaves);
    set->n_tree_boxes = 0;
}

/* ---- the walk ------------------------------------------------------- */
/* v is the tree's view (rb_shapeset_tree_view): box slots index it. */

/* A ray from beyond `cover` (see the top): the tree walked here with the
 * ray's own widening on top of the built one. */
typedef struct sray {
    rb_ray_prep p;  /* the world ray for the node tests */
    float delta;    /* the extra widening of every slot for this ray */
} sray;

/* The slots of node n that may hold a hit within [tmin, limit], widened
 * by delta; e[k] is slot k's (widened) entry. */
static unsigned node_test(const sray *r, const rb_bvh_node *n, float limit,
                          float e[RB_BVH_WIDTH])
{
    unsigned maybe = 0;
    for (unsigned k = 0; k < RB_BVH_WIDTH; k++) {
        float en = r->p.tmin, x = INFINITY;
        for (int a = 0; a < 3; a++) {
            float lo = n->lo[a][k] - r->delta, hi = n->hi[a][k] + r->delta;
            int s = signbit(r->p.inv[a]) ? 1 : 0;
            rb_slab_step(s ? hi : lo, s ? lo : hi, r->p.o[a], r->p.inv[a],
                         &en, &x);
        }
        x *= x >= 0.0f ? RB_BVH_PAD_UP : RB_BVH_PAD_DOWN;
        x = x < limit ? x : limit;
        e[k] = en;
        if (en <= x && en < INFINITY)
            maybe |= 1u << k;
    }
    return maybe;
}

typedef struct swalk {
    int mode;
    /* nearest */
    float best_t;
    uint32_t best_id;
    uint32_t best_j;
    /* any */
    int found;
    /* count, all */
    uint32_t count;
    rb_list_hit *list;
    uint32_t cap, stored;
} swalk;

/* Shape j (an lbox or a ball) against the ray; 1 when the walk can stop. */
static int take(const rb_shape_view *v, rb_u32 j, const rb_ray_raw *w,
                swalk *s)
{
    float te, tx;
    if (!rb_shape_hit(v, j, w, &te, &tx))
        return 0;
    uint32_t id = rb_shape_id(v, j);
    switch (s->mode) {
    case RB_MODE_NEAREST:
        if (rb_nearer(te, id, s->best_t, s->best_id)) {
            s->best_t = te;
            s->best_id = id;
            s->best_j = j;
        }
        return 0;
    case RB_MODE_ANY:
        s->found = 1;
        return 1;
    case RB_MODE_COUNT:
        s->count++;
        return 0;
    default:
        s->count++;
        rb_list_insert(s->list, &s->stored, s->cap, (int32_t)id, te, tx);
        return 0;
    }
}

typedef struct sentry {
    uint32_t node;
    float t;
} sentry;

/* Where a ray goes (exact.h's rb_shape_route): the shared walk over the
 * tree as built (FAST), the tree with the ray's own extra widening
 * (WIDE), or every shape (SCAN, outside the bound's assumptions, see the
 * top). */
enum { ROUTE_FAST = RB_SHAPE_ROUTE_FAST, ROUTE_WIDE = RB_SHAPE_ROUTE_WIDE,
       ROUTE_SCAN = RB_SHAPE_ROUTE_SCAN };

static int route(const rb_shapeset *set, const rb_ray_raw *w)
{
    return rb_shape_route(w, set->cover);
}

/* The WIDE and SCAN routes. */
static void walk(const rb_shapeset *set, const rb_shape_view *v,
                 const rb_ray_raw *w, int how, swalk *s)
{
    const rb_bvh *tree = set->tree;
    if (how == ROUTE_SCAN) {
        rb_u32 n = v->n_lbox + v->n_ball;
        for (rb_u32 j = 0; j < n; j++)
            if (take(v, j, w, s))
                return;
        return;
    }
    sray r;
    r.p = rb_prep_raw(w);
    r.delta = set->widen * (rb_max_abs3(w->o) + set->reach) + WIDEN_FLOOR;
    sentry stack[RB_BVH_STACK];
    int sp = 0;
    stack[sp].node = 0;
    stack[sp++].t = -INFINITY;
    while (sp) {
        sentry top = stack[--sp];
        if (s->mode == RB_MODE_NEAREST && top.t > s->best_t)
            continue;
        const rb_bvh_node *n = &tree->nodes[top.node];
        float limit = w->tmax;
        if (s->mode == RB_MODE_NEAREST && s->best_t < limit)
            limit = s->best_t;
        float e[RB_BVH_WIDTH];
        unsigned m = node_test(&r, n, limit, e);
        /* A joint tree's boxes are the box pass's. */
        unsigned leaves = m & n->boxes & ~n->exact, inner = m & ~n->boxes;
        while (leaves) {
            unsigned k = (unsigned)__builtin_ctz(leaves);
            leaves &= leaves - 1;
            if (take(v, n->child[k], w, s))
                return;
        }
        /* Far children first onto the stack, so the nearest is next. */
        while (inner) {
            unsigned best = 0;
            float far = -INFINITY;
            for (unsigned mm = inner; mm; mm &= mm - 1) {
                unsigned k = (unsigned)__builtin_ctz(mm);
                if (e[k] >= far) {
                    far = e[k];
                    best = k;
                }
            }
            inner &= ~(1u << best);
            stack[sp].node = n->child[best];
            stack[sp++].t = e[best];
        }
    }
}

static int empty(const rb_shapeset *set)
{
    return !set->tree || !set->tree->n_nodes;
}

void rb_shape_walk_nearest(const rb_shapeset *set, const rb_shape_view *v,
                           const struct rb_bvh_walkers *walkers,
                           const rb_ray_raw *w, float *best_t,
                           uint32_t *best_id, uint32_t *best_j)
{
    if (empty(set))
        return;
    int how = route(set, w);
    if (how == ROUTE_FAST) {
        rb_ray_prep p = rb_prep_raw(w);
        walkers->shape_nearest(set->tree, &p, v, w, best_t, best_id, best_j);
        return;
    }
    swalk s = {.mode = RB_MODE_NEAREST, .best_t = *best_t,
               .best_id = *best_id, .best_j = *best_j};
    walk(set, v, w, how, &s);
    *best_t = s.best_t;
    *best_id = s.best_id;
    *best_j = s.best_j;
}

int rb_shape_walk_any(const rb_shapeset *set, const rb_shape_view *v,
                      const struct rb_bvh_walkers *walkers,
                      const rb_ray_raw *w)
{
    if (empty(set))
        return 0;
    int how = route(set, w);
    if (how == ROUTE_FAST) {
        rb_ray_prep p = rb_prep_raw(w);
        return walkers->shape_any(set->tree, &p, v, w);
    }
    swalk s = {.mode = RB_MODE_ANY};
    walk(set, v, w, how, &s);
    return s.found;
}

uint32_t rb_shape_walk_count(const rb_shapeset *set, const rb_shape_view *v,
                             const struct rb_bvh_walkers *walkers,
                             const rb_ray_raw *w)
{
    if (empty(set))
        return 0;
    int how = route(set, w);
    if (how == ROUTE_FAST) {
        rb_ray_prep p = rb_prep_raw(w);
        return walkers->shape_count(set->tree, &p, v, w);
    }
    swalk s = {.mode = RB_MODE_COUNT};
    walk(set, v, w, how, &s);
    return s.count;
}

uint32_t rb_shape_walk_all(const rb_shapeset *set, const rb_shape_view *v,
                           const struct rb_bvh_walkers *walkers,
                           const rb_ray_raw *w, rb_list_hit *list,
                           uint32_t *stored, uint32_t cap)
{
    if (empty(set))
        return 0;
    int how = route(set, w);
    if (how == ROUTE_FAST) {
        rb_ray_prep p = rb_prep_raw(w);
        return walkers->shape_all(set->tree, &p, v, w, list, stored, cap);
    }
    swalk s = {.mode = RB_MODE_ALL, .list = list, .cap = cap,
               .stored = *stored};
    walk(set, v, w, how, &s);
    *stored = s.stored;
    return s.count;
}
