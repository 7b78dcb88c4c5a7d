/*
 * scene_store.h - the in-memory scene store of SPEC section 5.
 *
 * A stored scene is a chain of immutable versions. A query takes a
 * reference to the version that is current when it starts and keeps it to
 * the end, so a PATCH or DELETE never changes what a running query reads.
 * A PATCH copies the current version (rb_scene_clone), applies "set" then
 * "append" to the copy and, only when everything succeeded, makes the copy
 * current with version + 1 (all-or-nothing; copy-on-write). PATCHes of one
 * scene run one at a time; queries never wait for them.
 *
 * Limits: at most max_scenes scenes and max_bytes of scene memory, counted
 * over the current versions. An old version still read by a running query
 * (replaced by a PATCH, or its scene deleted) is not counted there but
 * pinned in the memory budget (mem_budget.h) until that query lets go.
 * Over a limit: 507.
 *
 * Owners (SPEC 11 "Access"): every scene carries the owner id of the
 * token that created it (auth.h; 0 when the server has no tokens), and
 * every lookup names the caller's owner: a scene of another owner is
 * answered exactly as one that does not exist (404), and listings show
 * the caller's scenes only. The limits are the store's, over all owners.
 *
 * Ids: 128 bits from getrandom(2), as 32 lowercase hex digits: knowing
 * some ids tells nothing about others.
 *
 * Durability (--data-dir, scene_disk.h): with a disk, a creation, PATCH
 * or DELETE is on disk before the call returns success, and nothing
 * refused is left there; store_restore puts the scenes read back at
 * start into the store.
 *
 * Threads: every function may be called from any thread.
 */
#ifndef RBD_SCENE_STORE_H
#define RBD_SCENE_STORE_H

#include <stdint.h>

#include "json_request.h"
#include "mem_budget.h"
#include "raybox.h"
#include "scene_disk.h"
#include "routes.h"
#include "sbuf.h"

typedef struct scene_store scene_store;
typedef struct scene_ver scene_ver;

/* disk may be NULL (memory only), budget too (nothing pinned is
 * counted); the store borrows both. */
int store_create(uint64_t max_scenes, uint64_t max_bytes, scene_disk *disk,
                 rbd_budget *budget, scene_store **out);
/* Every version must have been released. */
void store_destroy(scene_store *s);
/* freed(arg) is called (from the thread that let go) after a version of
 * 32 MiB or more was freed; NULL: nobody. */
void store_on_freed(scene_store *s, void (*freed)(void *arg), void *arg);

/* The current version of owner's scene id, with a reference the caller
 * releases; NULL when owner has no such scene. */
scene_ver *store_acquire(scene_store *s, const char *id, uint64_t owner);
void scene_ver_release(scene_ver *v);
const rb_scene *scene_ver_scene(const scene_ver *v);
uint64_t scene_ver_version(const scene_ver *v);
unsigned scene_ver_dims(const scene_ver *v);
uint64_t scene_ver_boxes(const scene_ver *v);
/* Elements of every kind; more than the boxes when the scene holds other
 * kinds (SPEC section 7). */
uint64_t scene_ver_elements(const scene_ver *v);

/* 0 when a scene of n boxes may fit now, else 507 with the reason. A
 * cheap early answer; store_insert decides. */
int store_precheck(scene_store *s, uint64_t n_boxes, char *why,
                   size_t why_len);

/* Stores a new scene of owner (ownership of `scene` passes to the store,
 * even on failure) as version 1 and writes its id (RBD_SCENE_ID_MAX + 1
 * bytes). With a disk, `elements` (what the scene was made of) and
 * owner_key (NULL without tokens) are written first. Returns 0, 507 over
 * a limit (why says which), 500 out of memory, without randomness from
 * the OS or when the disk write failed. */
int store_insert(scene_store *s, rb_scene *scene, double build_ms,
                 uint64_t owner, const uint8_t *owner_key,
                 const disk_chunk *elements, char *id_out, char *why,
                 size_t why_len);

/* A scene read back from the disk at start, under its own id and
 * version (ownership of `scene` passes to the store). -1 with why over a
 * limit or out of memory. */
int store_restore(scene_store *s, const char *id, uint64_t version,
                  uint64_t owner, rb_scene *scene, double build_ms,
                  char *why, size_t why_len);

/* Applies a PATCH body (set, then append) to a copy of the current
 * version with ctx, and makes it current. Returns 0 (*version_out, the
 * new version, and *stats_out, its statistics), or an HTTP status with
 * err filled: 404 no such scene (or deleted meanwhile), 422 from the
 * library or a "set" entry whose arity is not its id's kind (pointer
 * into the body), 507 over the memory limit, 503 out of memory, 500
 * when the disk write failed (nothing changed). */
int store_patch(scene_store *s, rb_context *ctx, const char *id,
                uint64_t owner, const rbq_request *body, uint64_t *version_out,
                rb_scene_stats *stats_out, rbq_error *err);

/* The counts of the kinds beyond boxes for a scene's JSON bodies:
 * ',"elements":N,"obbs":n,"xboxes":n,"spheres":n,"planes":n', nothing for
 * a scene that holds boxes alone (its bodies stay as they were). */
void store_kinds_json(const rb_scene_stats *st, sbuf *out);

/* Removes owner's scene: 0, 404, or 500 with why when its files could
 * not be removed (it stays). Queries running on it finish. */
int store_delete(scene_store *s, const char *id, uint64_t owner, char *why,
                 size_t why_len);

/* JSON bodies of GET /v1/scenes (owner's scenes; "count" and
 * "host_bytes" are theirs too) and GET /v1/scenes/{id} (0, or 404). */
void store_list_json(scene_store *s, uint64_t owner, sbuf *out);
int store_describe_json(scene_store *s, const char *id, uint64_t owner,
                        sbuf *out);

void store_usage(scene_store *s, uint64_t *scenes, uint64_t *bytes);

#endif
