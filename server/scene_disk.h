/*
 * scene_disk.h - the durable form of stored scenes (--data-dir, SPEC 11).
 *
 * Every scene is two files in the data directory:
 *   <id>.scene  a snapshot: header (dims, version, owner key) and the
 *               elements as the chunks that took consecutive ids together
 *               (the creation, then appends), each chunk's kinds in id
 *               order (boxes, obbs, xboxes, spheres, planes) - exactly what
 *               rb_scene_create_shapes and rb_scene_append_shapes take, so
 *               restoring replays them and every id comes back.
 *   <id>.log    the changes since the snapshot, one record per
 *               acknowledged PATCH (its version, "set" entries as resolved
 *               elements, the appended chunk), each with a CRC-32.
 * A snapshot is written to <id>.scene.tmp, fsynced, renamed over
 * <id>.scene and the directory fsynced. A change is appended to the log
 * with one write and fdatasync. Both happen before the store acknowledges
 * anything, so a crash (SIGKILL, power loss) leaves either the old or the
 * new state of every scene: a torn log record fails its CRC and is cut off
 * at restore. When the log has grown past the snapshot (and --data-merge-bytes), the
 * two are merged into a new snapshot (the elements of "set" replaced in
 * their chunks) and the log is emptied; log records at or below the
 * snapshot's version are skipped, so a crash between the rename and the
 * emptying loses nothing.
 *
 * What is not kept: the hierarchy (rebuilt at restore: answers are the
 * same, R9; its build statistics are new) and the creation time figures.
 * The owner is kept as the SHA-256 of the token that made the scene,
 * never the token itself. The files are in this machine's byte order.
 *
 * Threads: calls for different ids may run at once; calls for one id
 * must not (the store holds the scene's PATCH lock around them).
 */
#ifndef RBD_SCENE_DISK_H
#define RBD_SCENE_DISK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "raybox.h"

#include "auth.h" /* RBD_OWNER_KEY_BYTES */

typedef struct scene_disk scene_disk;

/* Elements that took consecutive ids together; boxes are rb_box (dims 3)
 * or rb_box2 (dims 2). */
typedef struct disk_chunk {
    const void *boxes;
    size_t n_boxes;
    rb_shapes shapes;
} disk_chunk;

/* One PATCH as it was applied: "set" entries with their elements, then
 * one appended chunk (possibly empty). */
typedef struct disk_patch {
    const uint32_t *set_ids;
    const rb_element *set;
    size_t n_set;
    disk_chunk append;
} disk_patch;

/* What is restored of one scene; the arrays live until the callback
 * returns. key is NULL for a scene made without tokens. */
typedef struct disk_scene {
    const char *id;
    const uint8_t *key;
    unsigned dims;
    uint64_t version;
    const disk_chunk *chunks;
    size_t n_chunks;
} disk_scene;

/* Opens (creating it if missing, mode 0700) the data directory and takes
 * its lock (flock on DIR/LOCK: one server a directory). A log larger
 * than merge_bytes and than its snapshot is merged into a new snapshot.
 * Returns 0 or -1 with why. */
int disk_open(const char *dir, uint64_t merge_bytes, scene_disk **out,
              char *why, size_t why_len);
void disk_close(scene_disk *d);

/* Reads every scene: calls fn for each (in no particular order); removes
 * leftovers of interrupted writes (.tmp files, a log without its
 * snapshot) and cuts a torn last log record (one that fails its CRC or
 * is short: everything from it on). A snapshot that is unreadable or
 * corrupt (magic, size, CRC), or a log whose records do not follow on
 * (a gap in the versions, a "set" of an id past the end or of another
 * kind), stops it: -1 with why naming the file, since going on would drop
 * an acknowledged scene. fn returning non-zero stops it too (with fn's
 * why). Returns the number of scenes, or -1. */
typedef int (*disk_restore_fn)(void *arg, const disk_scene *sc, char *why,
                               size_t why_len);
long disk_restore(scene_disk *d, disk_restore_fn fn, void *arg, char *why,
                  size_t why_len);

/* A new scene at version 1: its snapshot and an empty log, durable when
 * this returns 0; -1 with why (nothing is left behind). */
int disk_create(scene_disk *d, const char *id, const uint8_t *key,
                unsigned dims, const disk_chunk *c, char *why,
                size_t why_len);

/* Appends the change that made `version` to id's log, durable when this
 * returns 0; *undo is what disk_undo needs to take it back. May merge the
 * log into a new snapshot first (then *undo takes back only the record).
 * -1 with why: nothing changed on disk. */
int disk_change(scene_disk *d, const char *id, unsigned dims,
                uint64_t version, const disk_patch *ch, off_t *undo,
                char *why, size_t why_len);

/* Takes back the last disk_change of id (the store refused the version
 * after all). -1 with why when that cannot be done. */
int disk_undo(scene_disk *d, const char *id, off_t undo, char *why,
              size_t why_len);

/* Removes id's files, durable when this returns 0 (the snapshot goes
 * first: without it the scene is gone). -1 with why. */
int disk_remove(scene_disk *d, const char *id, char *why, size_t why_len);

#endif
