/*
 * workmem.h - the big work arrays of hierarchy builds and ray orders,
 * kept by the context between calls instead of going back to the C
 * library.
 *
 * Why: glibc serves blocks over 32 MiB with fresh mmap pages, so every
 * build of a million boxes (about 170 MB of work arrays) faulted in and
 * zeroed all of them again: 35K page faults a rebuild, which kept now
 * are 12K, and the fast build ran 1.21x faster (7.2 against 8.7 M
 * boxes/s, docs/benchmarks.md). Embree's rebuilds of a scene reuse their
 * memory too.
 *
 * A block is kept when freed if it is at least RB_WORKMEM_MIN bytes and
 * the kept total stays within RB_WORKMEM_KEEP; take hands out the
 * smallest kept block that holds the size and is at most twice it.
 * Thread-safe (a lock around the list). Kept blocks are not zeroed;
 * under AddressSanitizer they are poisoned while kept, so a use after
 * free is still reported.
 *
 * The default allocator (alloc.c) keeps the big blocks freed through it
 * in one such list for the whole process, so that a scene built after
 * another was destroyed reuses their memory.
 */
#ifndef RB_WORKMEM_H
#define RB_WORKMEM_H

#include <pthread.h>
#include <stddef.h>

#include "raybox.h"

#define RB_WORKMEM_MIN ((size_t)1 << 20)
#define RB_WORKMEM_KEEP ((size_t)256 << 20)
#define RB_WORKMEM_SLOTS 8

typedef struct rb_workmem {
    rb_allocator alloc; /* every block comes from and goes back to it */
    pthread_mutex_t lock;
    struct {
        void *ptr;
        size_t size;
    } kept[RB_WORKMEM_SLOTS];
    size_t kept_bytes;
} rb_workmem;

void rb_workmem_init(rb_workmem *w, const rb_allocator *alloc);
/* Frees every kept block; w can be used again after. */
void rb_workmem_trim(rb_workmem *w);
/* Trims and releases the lock. */
void rb_workmem_destroy(rb_workmem *w);
/* At least *size bytes from w's allocator, 64-byte aligned, not zeroed;
 * NULL when out of memory. *size becomes the block's size (a kept block
 * may be larger), which give must be passed, so that the kept total is
 * exact. */
void *rb_workmem_take(rb_workmem *w, size_t *size);
/* Gives back ptr (NULL-safe), taken from w; size as take left it. */
void rb_workmem_give(rb_workmem *w, void *ptr, size_t size);
/* The same with a cap of keep bytes kept in all (RB_WORKMEM_KEEP above). */
void rb_workmem_give_within(rb_workmem *w, void *ptr, size_t size,
                            size_t keep);
/* Bytes kept now (tests). */
size_t rb_workmem_kept(rb_workmem *w);

#endif
