/* alloc.c - host memory through the context's allocator hooks, so that
 * tests can make the Nth allocation fail and check nothing leaks. */
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* Blocks of this size or more start on a 2 MiB boundary and are marked
 * for transparent huge pages, as Embree marks its own: a hierarchy build
 * writes most of its memory for the first time, and one fault per 2 MiB
 * instead of per 4 KiB made a 1M-box fast build 1.5x faster (190 ms
 * against 125, repeated builds). Smaller blocks are left to malloc, which
 * reuses them from one build to the next: marked from 2 MiB up, repeated
 * 100K-box builds took 11 ms instead of 7.3 (docs/benchmarks.md, "Build
 * speed"). Where the kernel gives no huge pages the advice does nothing. */
#define HUGE_MIN ((size_t)16 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

static void *default_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    if (align < sizeof(void *))
        align = sizeof(void *);
#ifdef MADV_HUGEPAGE
    int huge = size >= HUGE_MIN;
    if (huge && align < HUGE_PAGE)
        align = HUGE_PAGE;
#endif
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : 1) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (huge)
        (void)madvise(p, size & ~(size_t)4095, MADV_HUGEPAGE);
#endif
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
