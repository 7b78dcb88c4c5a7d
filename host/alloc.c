#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
/* alloc.c - host memory through the context's allocator hooks, so that
 * tests can make the Nth allocation fail and check nothing leaks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* With RAYBOX_HUGE_PAGES=on, blocks of HUGE_MIN bytes or more (a big
 * scene's nodes and boxes, a build's work arrays) are aligned to and
 * rounded up to HUGE_PAGE and asked to be backed by 2 MiB pages where the
 * kernel has transparent huge pages (its `madvise` mode included): a
 * fresh block then faults in 512 times less often, and repeated 1M-box
 * builds ran 1.15-1.3x faster. Off by default: in a process that had
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

static void *default_alloc(void *user, size_t size, size_t align)
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

static void default_free(void *user, void *ptr)
{
    (void)user;
    free(ptr);
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
