/* alloc.c - host memory through the context's allocator hooks, so that
 * tests can make the Nth allocation fail and check nothing leaks. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void *default_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    if (align < sizeof(void *))
        align = sizeof(void *);
    void *p = NULL;
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
