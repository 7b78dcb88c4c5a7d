/* workmem.c - big work arrays kept between builds (workmem.h). */
#include "workmem.h"

#include <string.h>

#include "internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KEPT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define KEPT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define KEPT_POISON(p, n) ((void)(p), (void)(n))
#define KEPT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

void rb_workmem_init(rb_workmem *w, const rb_allocator *alloc)
{
    memset(w, 0, sizeof *w);
    w->alloc = *alloc;
    pthread_mutex_init(&w->lock, NULL);
}

void rb_workmem_trim(rb_workmem *w)
{
    pthread_mutex_lock(&w->lock);
    for (int k = 0; k < RB_WORKMEM_SLOTS; k++) {
        if (w->kept[k].ptr)
            KEPT_UNPOISON(w->kept[k].ptr, w->kept[k].size);
        rb_free_with(&w->alloc, w->kept[k].ptr);
        w->kept[k].ptr = NULL;
        w->kept[k].size = 0;
    }
    w->kept_bytes = 0;
    pthread_mutex_unlock(&w->lock);
}

void rb_workmem_destroy(rb_workmem *w)
{
    rb_workmem_trim(w);
    pthread_mutex_destroy(&w->lock);
}

void *rb_workmem_take(rb_workmem *w, size_t *size_io)
{
    size_t size = *size_io;
    if (size >= RB_WORKMEM_MIN) {
        pthread_mutex_lock(&w->lock);
        int best = -1;
        for (int k = 0; k < RB_WORKMEM_SLOTS; k++) {
            size_t s = w->kept[k].size;
            if (w->kept[k].ptr && s >= size && s / 2 <= size &&
                (best < 0 || s < w->kept[best].size))
                best = k;
        }
        void *p = NULL;
        if (best >= 0) {
            p = w->kept[best].ptr;
            *size_io = w->kept[best].size;
            w->kept_bytes -= w->kept[best].size;
            w->kept[best].ptr = NULL;
            w->kept[best].size = 0;
        }
        pthread_mutex_unlock(&w->lock);
        if (p) {
            KEPT_UNPOISON(p, *size_io);
            return p;
        }
    }
    return rb_alloc_with(&w->alloc, size, 64);
}

void rb_workmem_give(rb_workmem *w, void *ptr, size_t size)
{
    rb_workmem_give_within(w, ptr, size, RB_WORKMEM_KEEP);
}

void rb_workmem_give_within(rb_workmem *w, void *ptr, size_t size,
                            size_t keep)
{
    if (!ptr)
        return;
    if (size >= RB_WORKMEM_MIN) {
        pthread_mutex_lock(&w->lock);
        int slot = -1;
        if (size <= keep && w->kept_bytes <= keep - size)
            for (int k = 0; k < RB_WORKMEM_SLOTS && slot < 0; k++)
                if (!w->kept[k].ptr)
                    slot = k;
        if (slot >= 0) {
            w->kept[slot].ptr = ptr;
            w->kept[slot].size = size;
            w->kept_bytes += size;
            KEPT_POISON(ptr, size);
        }
        pthread_mutex_unlock(&w->lock);
        if (slot >= 0)
            return;
    }
    rb_free_with(&w->alloc, ptr);
}

size_t rb_workmem_kept(rb_workmem *w)
{
    pthread_mutex_lock(&w->lock);
    size_t n = w->kept_bytes;
    pthread_mutex_unlock(&w->lock);
    return n;
}
