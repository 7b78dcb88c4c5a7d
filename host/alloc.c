#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
/* alloc.c - host memory through the context's allocator hooks, so that
 * tests can make the Nth allocation fail and check nothing leaks. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "workmem.h"

/* With RAYBOX_HUGE_PAGES=on, blocks of HUGE_MIN bytes or more (a big
 * scene's nodes and boxes, a build's work arrays) are aligned to and
 * rounded up to HUGE_PAGE and asked to be backed by 2 MiB pages where the
 * kernel has transparent huge pages (its `madvise` mode included): a
 * fresh block then faults in 512 times less often, and repeated 1M-box
 * builds ran 1.15-1.3x faster; since freed big blocks are kept (below),
 * repeated builds fault little either way and ran as fast without it
 * (31.9-32.2 against 31.8-32.6 ms). Off by default: in a process that had
 * just built and freed Embree's scenes, the first 1M-box build ran 2-3x
 * slower with it (docs/benchmarks.md, "Build speed"), and an earlier
 * trial saw builds of a second. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN ((size_t)32 << 20)

static int huge_pages_wanted(void)
{
    const char *v = getenv("RAYBOX_HUGE_PAGES");
    return v && strcmp(v, "on") == 0;
}

/* The C library's own blocks, and the huge-page ones above. */
static void *system_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    if (align < sizeof(void *))
        align = sizeof(void *);
    void *p = NULL;
#ifdef MADV_HUGEPAGE
    if (size >= HUGE_MIN && size <= SIZE_MAX - HUGE_PAGE &&
        huge_pages_wanted()) {
        size_t round = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        if (posix_memalign(&p, align > HUGE_PAGE ? align : HUGE_PAGE,
                           round) != 0)
            return NULL;
        (void)madvise(p, round, MADV_HUGEPAGE);
        return p;
    }
#endif
    if (posix_memalign(&p, align, size ? size : 1) != 0)
        return NULL;
    return p;
}

static void system_free(void *user, void *ptr)
{
    (void)user;
    free(ptr);
}

/* Big blocks freed through the default allocator are kept, process-wide,
 * for the next big allocations (workmem.h's rules: a block is handed out
 * for requests of at least half its size), up to RAYBOX_KEEP_FREED_MB MiB
 * (default 256, 0 keeps none); rb_context_trim and rb_context_destroy
 * free them. Why: glibc returns blocks over 32 MiB to the kernel when
 * they are freed, so a scene created after another was destroyed faulted
 * its nodes and boxes in again: a 1M-box fast build, rebuilt 30 times in
 * one process, took 43-45 ms (14K page faults a build) against 32 ms
 * reusing them. Smaller blocks glibc reuses itself: kept from 1 MiB, a
 * 100K-box rebuild ran 7-10% slower than with glibc's own reuse
 * (docs/benchmarks.md, "Build speed"). Embree's rebuilds of a scene reuse
 * its memory too. */
#define KEEP_MIN ((size_t)32 << 20)
static rb_workmem freed;
static pthread_once_t freed_once = PTHREAD_ONCE_INIT;

static size_t keep_freed_bytes(void)
{
    const char *v = getenv("RAYBOX_KEEP_FREED_MB");
    if (!v || !*v)
        return RB_WORKMEM_KEEP;
    char *end;
    unsigned long long mb = strtoull(v, &end, 10);
    if (*end || mb > (SIZE_MAX >> 20))
        return RB_WORKMEM_KEEP;
    return (size_t)mb << 20;
}

static void freed_init(void)
{
    const rb_allocator system = {system_alloc, system_free, NULL};
    rb_workmem_init(&freed, &system);
}

static rb_workmem *freed_blocks(void)
{
    pthread_once(&freed_once, freed_init);
    return &freed;
}

static void *default_alloc(void *user, size_t size, size_t align)
{
    /* A kept block is 64-byte aligned at least. With huge pages on, the
     * blocks kept are those of the huge-page path, reused as they are;
     * a new block takes that path (system_alloc). */
    if (size >= KEEP_MIN && align <= 64)
        return rb_workmem_take(freed_blocks(), &size);
    return system_alloc(user, size, align);
}

static void default_free(void *user, void *ptr)
{
    if (!ptr)
        return;
    size_t size = malloc_usable_size(ptr);
    if (size >= KEEP_MIN)
        rb_workmem_give_within(freed_blocks(), ptr, size, keep_freed_bytes());
    else
        system_free(user, ptr);
}

void rb_alloc_trim_default(void)
{
    rb_workmem_trim(freed_blocks());
}

size_t rb_alloc_kept_default(void)
{
    return rb_workmem_kept(freed_blocks());
}

void rb_allocator_default(rb_allocator *out)
{
    out->alloc = default_alloc;
    out->free = default_free;
    out->user = NULL;
}

void *rb_alloc_with(const rb_allocator *a, size_t size, size_t align)
{
    return a->alloc(a->user, size, align ? align : 16);
}

void rb_free_with(const rb_allocator *a, void *ptr)
{
    if (ptr)
        a->free(a->user, ptr);
}

void *rb_alloc(rb_context *ctx, size_t size, size_t align)
{
    return rb_alloc_with(&ctx->alloc, size, align);
}

void *rb_calloc(rb_context *ctx, size_t size, size_t align)
{
    void *p = rb_alloc(ctx, size, align);
    if (p)
        memset(p, 0, size);
    return p;
}

void rb_free(rb_context *ctx, void *ptr)
{
    rb_free_with(&ctx->alloc, ptr);
}

char *rb_strdup(rb_context *ctx, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = rb_alloc(ctx, n, 1);
    if (p)
        memcpy(p, s, n);
    return p;
}
