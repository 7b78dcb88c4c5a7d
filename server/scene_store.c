/*
 * scene_store.c - see scene_store.h.
 *
 * One mutex guards the map (a hash table plus a list in creation order),
 * each entry's current version and the byte count; it is held only for
 * pointer work, never while a scene is copied, changed or measured. Each
 * entry has a second mutex that serialises its PATCHes.
 */
#include "scene_store.h"

#include "access_log.h"
#include "scene_disk.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* A version this big freed tells the store's `freed` hook: the library
 * keeps freed blocks of 32 MiB or more for the next scene (rb_context_trim
 * in raybox.h), and a server that frees them outside a job would
 * otherwise hold them until its next job. */
#define STORE_FREED_NOTE_BYTES ((uint64_t)32 << 20)

struct scene_ver {
    _Atomic long refs;
    rb_scene *scene;
    uint64_t version;      /* the store's: +1 per PATCH */
    rb_scene_stats stats;  /* measured once, when the version was made */
    double build_ms;       /* creating or patching it */
    rbd_budget *budget;    /* set when pinned: replaced while still read */
    scene_store *store;    /* told when the version is freed */
};

typedef struct entry {
    char id[RBD_SCENE_ID_MAX + 1];
    uint64_t owner;          /* auth.h; 0: no tokens */
    scene_ver *cur;          /* store lock */
    int deleted;             /* store lock */
    long refs;               /* store lock: the map's and patchers' */
    pthread_mutex_t patch;   /* one PATCH at a time */
    struct entry *hnext;     /* hash chain */
    struct entry *prev, *next; /* creation order */
} entry;

#define BUCKETS 1024

struct scene_store {
    pthread_mutex_t lock;
    entry *bucket[BUCKETS];
    entry *first, *last;
    uint64_t count, bytes;
    uint64_t max_scenes, max_bytes;
    scene_disk *disk; /* --data-dir; NULL: memory only */
    rbd_budget *budget; /* pinned versions; NULL: not counted */
    void (*freed)(void *arg); /* store_on_freed */
    void *freed_arg;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* 128 bits from the OS as 32 lowercase hex digits into id (33 bytes).
 * getrandom blocks only until the kernel's pool is first seeded, early
 * at boot. Returns 0, or -1 when the OS gives none. */
static int random_id(char *id)
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        id[2 * i] = hex[b[i] >> 4];
        id[2 * i + 1] = hex[b[i] & 15];
    }
    id[32] = '\0';
    return 0;
}

static unsigned hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % BUCKETS;
}

int store_create(uint64_t max_scenes, uint64_t max_bytes, scene_disk *disk,
                 rbd_budget *budget, scene_store **out)
{
    scene_store *s = calloc(1, sizeof *s);
    if (!s)
        return RB_ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    s->max_scenes = max_scenes;
    s->max_bytes = max_bytes;
    s->disk = disk;
    s->budget = budget;
    *out = s;
    return RB_OK;
}

static scene_ver *ver_new(scene_store *s, rb_scene *scene, uint64_t version,
                          double build_ms)
{
    scene_ver *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    atomic_init(&v->refs, 1);
    v->scene = scene;
    v->version = version;
    v->build_ms = build_ms;
    v->store = s;
    rb_scene_stats_get(scene, &v->stats);
    return v;
}

void scene_ver_release(scene_ver *v)
{
    if (v && atomic_fetch_sub(&v->refs, 1) == 1) {
        if (v->budget)
            budget_give(v->budget, v->stats.host_bytes);
        rb_scene_destroy(v->scene);
        scene_store *s = v->store;
        uint64_t bytes = v->stats.host_bytes;
        free(v);
        if (s && bytes >= STORE_FREED_NOTE_BYTES) {
            pthread_mutex_lock(&s->lock);
            void (*freed)(void *) = s->freed;
            void *arg = s->freed_arg;
            pthread_mutex_unlock(&s->lock);
            if (freed)
                freed(arg);
        }
    }
}

void store_on_freed(scene_store *s, void (*freed)(void *arg), void *arg)
{
    pthread_mutex_lock(&s->lock);
    s->freed = freed;
    s->freed_arg = arg;
    pthread_mutex_unlock(&s->lock);
}

static scene_ver *ver_ref(scene_ver *v)
{
    atomic_fetch_add(&v->refs, 1);
    return v;
}

/* v leaves the store (a PATCH replaced it, or its scene was deleted)
 * while queries may still read it: from here until its last release its
 * memory counts in the budget. Called before the store's reference is
 * dropped, so that release always sees it. */
static scene_ver *ver_unstore(scene_store *s, scene_ver *v)
{
    if (v && s->budget && !v->budget) {
        budget_force(s->budget, v->stats.host_bytes);
        v->budget = s->budget;
    }
    return v;
}

const rb_scene *scene_ver_scene(const scene_ver *v) { return v->scene; }
uint64_t scene_ver_version(const scene_ver *v) { return v->version; }
unsigned scene_ver_dims(const scene_ver *v) { return v->stats.dims; }
uint64_t scene_ver_boxes(const scene_ver *v) { return v->stats.boxes; }
uint64_t scene_ver_elements(const scene_ver *v) { return v->stats.elements; }

/* Store lock held. Another owner's scene is no scene. */
static entry *find(scene_store *s, const char *id, uint64_t owner)
{
    for (entry *e = s->bucket[hash(id)]; e; e = e->hnext)
        if (strcmp(e->id, id) == 0)
            return e->owner == owner ? e : NULL;
    return NULL;
}

/* Store lock held; frees the entry with its last reference. */
static void entry_unref_locked(entry *e)
{
    if (--e->refs > 0)
        return;
    pthread_mutex_destroy(&e->patch);
    free(e);
}

static void entry_unref(scene_store *s, entry *e)
{
    pthread_mutex_lock(&s->lock);
    entry_unref_locked(e);
    pthread_mutex_unlock(&s->lock);
}

/* Store lock held: takes the entry out of the map and drops the map's
 * version and reference. The version is released by the caller, outside
 * the lock (destroying a big scene takes a while). */
static scene_ver *unlink_locked(scene_store *s, entry *e)
{
    entry **p = &s->bucket[hash(e->id)];
    while (*p != e)
        p = &(*p)->hnext;
    *p = e->hnext;
    if (e->prev)
        e->prev->next = e->next;
    else
        s->first = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        s->last = e->prev;
    scene_ver *v = e->cur;
    e->cur = NULL;
    e->deleted = 1;
    s->count--;
    s->bytes -= v->stats.host_bytes;
    entry_unref_locked(e);
    return v;
}

void store_destroy(scene_store *s)
{
    if (!s)
        return;
    while (s->first) {
        scene_ver *v = unlink_locked(s, s->first);
        scene_ver_release(v);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

scene_ver *store_acquire(scene_store *s, const char *id, uint64_t owner)
{
    pthread_mutex_lock(&s->lock);
    entry *e = find(s, id, owner);
    scene_ver *v = e ? ver_ref(e->cur) : NULL;
    pthread_mutex_unlock(&s->lock);
    return v;
}

/* What a scene of n boxes costs at least: six float arrays padded to 16
 * boxes. */
static uint64_t estimate_bytes(uint64_t n_boxes)
{
    return 24 * ((n_boxes + 15) / 16 * 16) + 256;
}

static int over_limits_locked(scene_store *s, uint64_t add_scenes,
                              uint64_t old_bytes, uint64_t new_bytes,
                              char *why, size_t why_len)
{
    if (s->count + add_scenes > s->max_scenes) {
        snprintf(why, why_len, "the store holds its maximum of %llu scenes "
                               "(--max-scenes)",
                 (unsigned long long)s->max_scenes);
        return 507;
    }
    if (s->bytes - old_bytes + new_bytes > s->max_bytes) {
        snprintf(why, why_len, "the scene needs %llu bytes; the store has "
                               "%llu of %llu bytes in use "
                               "(--max-scene-bytes)",
                 (unsigned long long)new_bytes,
                 (unsigned long long)(s->bytes - old_bytes),
                 (unsigned long long)s->max_bytes);
        return 507;
    }
    return 0;
}

int store_precheck(scene_store *s, uint64_t n_boxes, char *why,
                   size_t why_len)
{
    pthread_mutex_lock(&s->lock);
    int rc = over_limits_locked(s, 1, 0, estimate_bytes(n_boxes), why,
                                why_len);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* Store lock held: puts e (holding v) into the map. */
static void link_locked(scene_store *s, entry *e, scene_ver *v)
{
    unsigned h = hash(e->id);
    e->hnext = s->bucket[h];
    s->bucket[h] = e;
    e->prev = s->last;
    if (s->last)
        s->last->next = e;
    else
        s->first = e;
    s->last = e;
    s->count++;
    s->bytes += v->stats.host_bytes;
}

static entry *entry_new(scene_ver *v, uint64_t owner)
{
    entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    pthread_mutex_init(&e->patch, NULL);
    e->cur = v;
    e->refs = 1;
    e->owner = owner;
    return e;
}

static void entry_drop(entry *e)
{
    pthread_mutex_destroy(&e->patch);
    free(e);
}

static int id_taken_locked(scene_store *s, const char *id)
{
    for (entry *o = s->bucket[hash(id)]; o; o = o->hnext)
        if (strcmp(o->id, id) == 0)
            return 1;
    return 0;
}

int store_insert(scene_store *s, rb_scene *scene, double build_ms,
                 uint64_t owner, const uint8_t *owner_key,
                 const disk_chunk *elements, char *id_out, char *why,
                 size_t why_len)
{
    scene_ver *v = ver_new(s, scene, 1, build_ms);
    entry *e = v ? entry_new(v, owner) : NULL;
    if (!e) {
        if (v)
            scene_ver_release(v);
        else
            rb_scene_destroy(scene);
        snprintf(why, why_len, "out of memory");
        return 500;
    }
    if (random_id(e->id)) {
        snprintf(why, why_len, "no random bytes from the OS for a scene "
                 "id: %s", strerror(errno));
        entry_drop(e);
        scene_ver_release(v);
        return 500;
    }
    /* On disk before it is in the map (and so before anyone is told its
     * id); the limits are looked at first so that a scene that will be
     * refused is not written, and again when it goes in. */
    pthread_mutex_lock(&s->lock);
    int rc = over_limits_locked(s, 1, 0, v->stats.host_bytes, why, why_len);
    if (!rc && id_taken_locked(s, e->id)) {
        /* never written over: its files are another scene's */
        snprintf(why, why_len, "scene id collision");
        rc = 500;
    }
    pthread_mutex_unlock(&s->lock);
    if (!rc && s->disk &&
        disk_create(s->disk, e->id, owner_key, v->stats.dims, elements, why,
                    why_len))
        rc = 500;
    if (!rc) {
        pthread_mutex_lock(&s->lock);
        rc = over_limits_locked(s, 1, 0, v->stats.host_bytes, why, why_len);
        /* Two equal draws of 128 bits do not happen; were they to, the
         * id would be refused rather than shared. */
        if (!rc && id_taken_locked(s, e->id)) {
            snprintf(why, why_len, "scene id collision");
            rc = 500;
        }
        if (!rc) {
            link_locked(s, e, v);
            memcpy(id_out, e->id, strlen(e->id) + 1);
        }
        pthread_mutex_unlock(&s->lock);
        if (rc && s->disk) {
            char ignored[256];
            disk_remove(s->disk, e->id, ignored, sizeof ignored);
        }
    }
    if (rc) {
        entry_drop(e);
        scene_ver_release(v);
    }
    return rc;
}

int store_restore(scene_store *s, const char *id, uint64_t version,
                  uint64_t owner, rb_scene *scene, double build_ms,
                  char *why, size_t why_len)
{
    scene_ver *v = ver_new(s, scene, version, build_ms);
    entry *e = v ? entry_new(v, owner) : NULL;
    if (!e) {
        if (v)
            scene_ver_release(v);
        else
            rb_scene_destroy(scene);
        snprintf(why, why_len, "out of memory restoring scene %s", id);
        return -1;
    }
    snprintf(e->id, sizeof e->id, "%s", id);
    pthread_mutex_lock(&s->lock);
    int rc = over_limits_locked(s, 1, 0, v->stats.host_bytes, why, why_len);
    if (!rc && id_taken_locked(s, id)) {
        snprintf(why, why_len, "scene %s twice", id);
        rc = -1;
    }
    if (!rc)
        link_locked(s, e, v);
    pthread_mutex_unlock(&s->lock);
    if (rc) {
        entry_drop(e);
        scene_ver_release(v);
        return -1;
    }
    return 0;
}

static int lib_error(const rbq_request *body, rbq_source src,
                     rb_context *ctx, rbq_error *err)
{
    rbq_error_from_library(body, src, rb_context_error(ctx), err);
    return err->status;
}

static const char *const arity_of_kind[RB_KIND_COUNT] = {
    "6 numbers: min xyz, max xyz", "10 numbers (center, half extents, "
    "quaternion) or 15 (center, half extents, axes)",
    "18 numbers: min xyz, max xyz, 3x4 matrix by rows",
    "4 numbers: center xyz, radius", "4 numbers: normal xyz, d"};

/* The kind a "set" entry's arity stands for in a 3D scene; 4 numbers are
 * a sphere or a plane: the id's kind says which. */
static rb_kind kind_of_arity(unsigned numbers, int id_kind)
{
    switch (numbers) {
    case 10:
    case 15:
        return RB_KIND_OBB;
    case 18:
        return RB_KIND_XBOX;
    case 4:
        return id_kind == RB_KIND_PLANE ? RB_KIND_PLANE : RB_KIND_SPHERE;
    default:
        return RB_KIND_BOX;
    }
}

/* 422 at "/set/k": entry k's element is not of its id's kind `have`. */
static int arity_mismatch(rbq_error *err, size_t k, uint32_t id, int have,
                          unsigned numbers)
{
    memset(err, 0, sizeof *err);
    err->status = 422;
    err->has_pointer = 1;
    snprintf(err->pointer, sizeof err->pointer, "/set/%zu", k);
    snprintf(err->detail, sizeof err->detail,
             "id %u is %s %s: its element has %s (the entry has %u after the "
             "id)",
             id, have == RB_KIND_OBB ? "an" : "a", rb_kind_name(have),
             arity_of_kind[have], numbers);
    return 422;
}

/* "set" of boxes alone in a scene that holds other kinds: every id must
 * be a box's. */
static int check_box_ids(const rb_scene *scene, const rbq_request *body,
                         rbq_error *err)
{
    for (size_t k = 0; k < body->n_set; k++) {
        int have = rb_scene_element_kind(scene, body->set_index[k], NULL);
        if (have > RB_KIND_BOX)
            return arity_mismatch(err, k, body->set_index[k], have,
                                  body->set_arity[k] - 1u);
    }
    return 0;
}

static int no_memory(rbq_error *err)
{
    memset(err, 0, sizeof *err);
    err->status = 503;
    snprintf(err->detail, sizeof err->detail, "out of memory");
    return 503;
}

/* A "set" of boxes alone (body->set_boxes) as elements, for the log. */
static rb_element *boxes_as_elements(const rbq_request *body, unsigned dims)
{
    rb_element *e = calloc(body->n_set ? body->n_set : 1, sizeof *e);
    for (size_t k = 0; e && k < body->n_set; k++) {
        e[k].kind = RB_KIND_BOX;
        if (dims == 2)
            e[k].as.box2 = ((const rb_box2 *)body->set_boxes)[k];
        else
            e[k].as.box = ((const rb_box *)body->set_boxes)[k];
    }
    return e;
}

/* "set" with entries beyond boxes (body->set_values): each entry's
 * element read as its arity says, checked against its id's kind (422 at
 * "/set/k" when they differ), then set in one call, all or nothing. The
 * elements go to *out (the caller frees them). Returns 0 or the HTTP
 * status with err filled. */
static int set_elements(rb_context *ctx, rb_scene *scene,
                        const rbq_request *body, rb_element **out,
                        rbq_error *err)
{
    size_t n = body->n_set;
    rb_element *e = calloc(n ? n : 1, sizeof *e);
    if (!e)
        return no_memory(err);
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        unsigned numbers = body->set_arity[k] - 1u;
        int have = rb_scene_element_kind(scene, body->set_index[k], NULL);
        rb_kind kind = kind_of_arity(numbers, have);
        if (have >= 0 && have != (int)kind) {
            rc = arity_mismatch(err, k, body->set_index[k], have, numbers);
            break;
        }
        e[k].kind = kind;
        const float *v = body->set_values + k * RBQ_SET_STRIDE;
        size_t bytes = kind == RB_KIND_BOX      ? sizeof(rb_box)
                       : kind == RB_KIND_OBB    ? sizeof(rb_obb)
                       : kind == RB_KIND_XBOX   ? sizeof(rb_xbox)
                       : kind == RB_KIND_SPHERE ? sizeof(rb_sphere)
                                                : sizeof(rb_plane);
        memcpy(&e[k].as, v, bytes);
    }
    if (!rc && rb_scene_set_elements(ctx, scene, body->set_index, e, n) !=
                   RB_OK)
        rc = lib_error(body, RBQ_FROM_SET, ctx, err);
    if (rc)
        free(e);
    else
        *out = e;
    return rc;
}

static int not_found(const char *id, rbq_error *err)
{
    memset(err, 0, sizeof *err);
    err->status = 404;
    snprintf(err->detail, sizeof err->detail, "no scene '%s'", id);
    return 404;
}

/* The new version from the current one; e->patch held. With a data
 * dir, *set_log gets the "set" entries as elements (NULL without). */
static int patch_locked(scene_store *s, entry *e, rb_context *ctx,
                        const rbq_request *body, scene_ver **made,
                        rb_element **set_log, rbq_error *err)
{
    pthread_mutex_lock(&s->lock);
    scene_ver *cur = e->deleted ? NULL : ver_ref(e->cur);
    pthread_mutex_unlock(&s->lock);
    if (!cur)
        return not_found(e->id, err);
    double t0 = now_ms();
    rb_scene *copy = NULL;
    rb_element *set = NULL;
    int rc = 0;
    size_t n_append_shapes = body->append_shapes.n_obbs +
                             body->append_shapes.n_xboxes +
                             body->append_shapes.n_spheres +
                             body->append_shapes.n_planes;
    if (rb_scene_clone(ctx, cur->scene, &copy) != RB_OK)
        rc = lib_error(body, RBQ_FROM_SET, ctx, err);
    else if (body->n_set && body->set_boxes &&
             (rc = check_box_ids(copy, body, err)) == 0 &&
             rb_scene_set(ctx, copy, body->set_index, body->set_boxes,
                          body->n_set) != RB_OK)
        rc = lib_error(body, RBQ_FROM_SET, ctx, err);
    else if (body->n_set && !body->set_boxes)
        rc = set_elements(ctx, copy, body, &set, err);
    if (rc) {
        /* refused: nothing of the PATCH applies */
    } else if (n_append_shapes &&
               rb_scene_append_shapes(ctx, copy, body->append_boxes,
                                      body->n_append,
                                      &body->append_shapes) != RB_OK) {
        rc = lib_error(body, RBQ_FROM_APPEND, ctx, err);
    } else if (!n_append_shapes && body->n_append &&
               rb_scene_append(ctx, copy, body->append_boxes,
                               body->n_append) != RB_OK) {
        rc = lib_error(body, RBQ_FROM_APPEND, ctx, err);
    }
    if (!rc && s->disk && body->n_set && !set &&
        !(set = boxes_as_elements(body, cur->stats.dims)))
        rc = no_memory(err);
    if (!rc && !(*made = ver_new(s, copy, cur->version + 1, now_ms() - t0)))
        rc = no_memory(err);
    if (rc) {
        rb_scene_destroy(copy);
        free(set);
    } else if (s->disk) {
        *set_log = set;
    } else {
        free(set);
    }
    scene_ver_release(cur);
    return rc;
}

/* Writes the PATCH that made `made` to e's log; e->patch held. */
static int patch_to_disk(scene_store *s, entry *e, const rbq_request *body,
                         const scene_ver *made, const rb_element *set,
                         off_t *undo, rbq_error *err)
{
    disk_patch ch = {.set_ids = body->set_index,
                      .set = set,
                      .n_set = body->n_set,
                      .append = {.boxes = body->append_boxes,
                                 .n_boxes = body->n_append,
                                 .shapes = body->append_shapes}};
    memset(err, 0, sizeof *err);
    if (disk_change(s->disk, e->id, made->stats.dims, made->version, &ch,
                    undo, err->detail, sizeof err->detail)) {
        err->status = 500;
        return 500;
    }
    return 0;
}

int store_patch(scene_store *s, rb_context *ctx, const char *id,
                uint64_t owner, const rbq_request *body,
                uint64_t *version_out, rb_scene_stats *stats_out,
                rbq_error *err)
{
    pthread_mutex_lock(&s->lock);
    entry *e = find(s, id, owner);
    if (e)
        e->refs++;
    pthread_mutex_unlock(&s->lock);
    if (!e)
        return not_found(id, err);

    pthread_mutex_lock(&e->patch);
    scene_ver *made = NULL, *old = NULL;
    rb_element *set = NULL;
    off_t undo = 0;
    int rc = patch_locked(s, e, ctx, body, &made, &set, err);
    /* With a data dir: the limits first (a refused version is not
     * written), then the log, then the swap, which looks at the limits
     * again (other scenes may have grown meanwhile) and takes the record
     * back if it refuses after all. */
    for (int pass = s->disk ? 0 : 1; !rc && pass < 2; pass++) {
        pthread_mutex_lock(&s->lock);
        if (e->deleted) {
            rc = not_found(id, err);
        } else {
            memset(err, 0, sizeof *err);
            rc = over_limits_locked(s, 0, e->cur->stats.host_bytes,
                                    made->stats.host_bytes, err->detail,
                                    sizeof err->detail);
            err->status = rc;
        }
        if (!rc && pass == 1) {
            old = e->cur;
            s->bytes += made->stats.host_bytes - old->stats.host_bytes;
            e->cur = made;
            *version_out = made->version;
            *stats_out = made->stats;
            made = NULL;
        }
        pthread_mutex_unlock(&s->lock);
        if (!rc && pass == 0)
            rc = patch_to_disk(s, e, body, made, set, &undo, err);
        else if (rc && pass == 1 && s->disk) {
            char why[256];
            if (disk_undo(s->disk, e->id, undo, why, sizeof why)) {
                sbuf f;
                sbuf_init(&f);
                sbuf_add(&f, "\"scene\":");
                sbuf_json_str(&f, e->id);
                sbuf_printf(&f, ",\"version\":%llu,\"detail\":",
                            (unsigned long long)made->version);
                sbuf_json_str(&f, why);
                log_event("error", "a refused version stays in --data-dir "
                          "and comes back at the next start",
                          sbuf_failed(&f) ? NULL : f.data);
                sbuf_free(&f);
            }
        }
    }
    pthread_mutex_unlock(&e->patch);
    free(set);
    scene_ver_release(made); /* a refused copy */
    /* queries that still read it keep it */
    scene_ver_release(ver_unstore(s, old));
    entry_unref(s, e);
    return rc;
}

int store_delete(scene_store *s, const char *id, uint64_t owner, char *why,
                 size_t why_len)
{
    pthread_mutex_lock(&s->lock);
    entry *e = find(s, id, owner);
    if (e)
        e->refs++;
    pthread_mutex_unlock(&s->lock);
    if (!e)
        return 404;
    /* Under the PATCH lock: no change of this scene is half-way to disk
     * while its files go. */
    pthread_mutex_lock(&e->patch);
    int rc = 0;
    scene_ver *v = NULL;
    pthread_mutex_lock(&s->lock);
    int gone = e->deleted;
    pthread_mutex_unlock(&s->lock);
    if (gone)
        rc = 404;
    else if (s->disk && disk_remove(s->disk, e->id, why, why_len))
        rc = 500;
    if (!rc) {
        pthread_mutex_lock(&s->lock);
        v = unlink_locked(s, e);
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&e->patch);
    entry_unref(s, e);
    scene_ver_release(ver_unstore(s, v));
    return rc;
}

void store_usage(scene_store *s, uint64_t *scenes, uint64_t *bytes)
{
    pthread_mutex_lock(&s->lock);
    *scenes = s->count;
    *bytes = s->bytes;
    pthread_mutex_unlock(&s->lock);
}

void store_kinds_json(const rb_scene_stats *st, sbuf *out)
{
    if (st->elements == st->boxes)
        return;
    sbuf_printf(out,
                ",\"elements\":%llu,\"obbs\":%llu,\"xboxes\":%llu,"
                "\"spheres\":%llu,\"planes\":%llu",
                (unsigned long long)st->elements,
                (unsigned long long)st->kinds[RB_KIND_OBB],
                (unsigned long long)st->kinds[RB_KIND_XBOX],
                (unsigned long long)st->kinds[RB_KIND_SPHERE],
                (unsigned long long)st->kinds[RB_KIND_PLANE]);
}

void store_list_json(scene_store *s, uint64_t owner, sbuf *out)
{
    sbuf_add(out, "{\"scenes\":[");
    uint64_t count = 0, bytes = 0;
    pthread_mutex_lock(&s->lock);
    for (entry *e = s->first; e; e = e->next) {
        if (e->owner != owner)
            continue;
        const scene_ver *v = e->cur;
        sbuf_add(out, count++ ? ",{\"id\":" : "{\"id\":");
        bytes += v->stats.host_bytes;
        sbuf_json_str(out, e->id);
        sbuf_printf(out, ",\"dims\":%u,\"boxes\":%llu", v->stats.dims,
                    (unsigned long long)v->stats.boxes);
        store_kinds_json(&v->stats, out);
        sbuf_printf(out, ",\"version\":%llu,\"host_bytes\":%llu}",
                    (unsigned long long)v->version,
                    (unsigned long long)v->stats.host_bytes);
    }
    sbuf_printf(out,
                "],\"count\":%llu,\"host_bytes\":%llu,\"max_scenes\":%llu,"
                "\"max_scene_bytes\":%llu}",
                (unsigned long long)count, (unsigned long long)bytes,
                (unsigned long long)s->max_scenes,
                (unsigned long long)s->max_bytes);
    pthread_mutex_unlock(&s->lock);
}

/* The build statistics of a version: rb_scene_stats is the seam - the
 * hierarchy's figures belong here when the library reports them. */
static void stats_json(const char *id, const scene_ver *v, sbuf *out)
{
    const rb_scene_stats *st = &v->stats;
    sbuf_add(out, "{\"id\":");
    sbuf_json_str(out, id);
    sbuf_printf(out, ",\"dims\":%u,\"boxes\":%llu", st->dims,
                (unsigned long long)st->boxes);
    store_kinds_json(st, out);
    sbuf_printf(out, ",\"version\":%llu", (unsigned long long)v->version);
    if (!st->boxes) {
        sbuf_add(out, ",\"bounds\":null");
    } else {
        for (int k = 0; k < 2; k++) {
            const float *b = k ? st->bounds_max : st->bounds_min;
            sbuf_add(out, k ? ",\"max\":[" : ",\"bounds\":{\"min\":[");
            for (unsigned a = 0; a < st->dims; a++) {
                if (a)
                    sbuf_add(out, ",");
                sbuf_json_float(out, b[a]);
            }
            sbuf_add(out, "]");
        }
        sbuf_add(out, "}");
    }
    /* "build": the hierarchy the library keeps for the scene (8-wide BVH;
     * an empty scene has none), and the time this version took to make. */
    sbuf_printf(out,
                ",\"host_bytes\":%llu,\"bytes_per_box\":%.1f,"
                "\"build\":{\"structure\":\"%s\",\"ms\":%.3f,"
                "\"hierarchy_ms\":%.3f,\"nodes\":%llu,\"depth\":%u,"
                "\"sah\":%.6g,\"sah_at_build\":%.6g,\"refits\":%llu,"
                "\"rebuilds\":%llu,\"hierarchy_bytes\":%llu,"
                "\"builder\":\"%s\"",
                (unsigned long long)st->host_bytes, st->bytes_per_box,
                st->bvh_nodes ? "bvh8" : "none", v->build_ms,
                st->bvh_build_ms, (unsigned long long)st->bvh_nodes,
                st->bvh_depth, st->bvh_sah, st->bvh_sah_built,
                (unsigned long long)st->bvh_refits,
                (unsigned long long)st->bvh_rebuilds,
                (unsigned long long)st->bvh_bytes,
                st->bvh_build == RB_HIERARCHY_BUILD_FAST ? "fast" : "sah");
    /* The shape hierarchy, after the box figures. */
    if (st->elements != st->boxes)
        sbuf_printf(out, ",\"shape_nodes\":%llu",
                    (unsigned long long)st->shape_nodes);
    sbuf_add(out, "}}");
}

int store_describe_json(scene_store *s, const char *id, uint64_t owner,
                        sbuf *out)
{
    pthread_mutex_lock(&s->lock);
    entry *e = find(s, id, owner);
    scene_ver *v = e ? ver_ref(e->cur) : NULL;
    pthread_mutex_unlock(&s->lock);
    if (!v)
        return 404;
    stats_json(id, v, out);
    scene_ver_release(v);
    return 0;
}
