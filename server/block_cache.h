/*
 * block_cache.h - the large arrays of requests (binary rays and boxes,
 * result arrays), kept for the next request after they are freed.
 *
 * glibc hands blocks of 32 MiB and more straight back to the kernel, so a
 * request of 1M rays (32 MiB of rb_ray) took fresh pages every time: about
 * 8,300 page faults, ~30 ms of its ~210 ms through rayboxd, paid on the I/O
 * thread while the body arrived (measured; docs/http.md, Performance).
 * Freed blocks of at least RBC_BLOCK_MIN bytes are kept, up to a byte limit
 * that the process sets (rayboxd: --buffer-cache; 0, the default, keeps
 * nothing), and a request takes the smallest kept block that fits.
 *
 * Thread-safe. Blocks are 16-byte aligned.
 */
#ifndef RB_BLOCK_CACHE_H
#define RB_BLOCK_CACHE_H

#include <stddef.h>

#define RBC_BLOCK_MIN ((size_t)1 << 20)

/* Bytes of freed blocks the cache may hold; lowering it frees what is
 * over. */
void rbc_block_cache_limit(size_t bytes);
/* size bytes (uninitialised), or NULL. */
void *rbc_block_alloc(size_t size);
/* p from rbc_block_alloc, or NULL. */
void rbc_block_free(void *p);
/* Bytes held now in freed blocks (for tests and metrics). */
size_t rbc_block_cache_held(void);
/* Frees every kept block. */
void rbc_block_cache_clear(void);

#endif
