/*
 * test_workmem.c - the context's kept work arrays (host/workmem.h): a
 * block given back is handed out again for a request it fits (never one
 * under half its size), small blocks and blocks past the cap go back to
 * the allocator, two threads never get the same block, and a context's
 * repeated builds take their big work arrays from it and give the same
 * answers as a fresh context's build; rb_context_trim frees what a
 * context keeps. The default allocator keeps the big blocks freed
 * through it for the next requests that fit them, and with
 * RAYBOX_HUGE_PAGES=on hands out blocks of 32 MiB or more on 2 MiB
 * boundaries, whole to their last byte (host/alloc.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "internal.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

/* An allocator that counts calls for blocks of a MiB or more. */
typedef struct counting {
    atomic_size_t big_allocs;
    int fail; /* every allocation fails */
} counting;

static void *count_alloc(void *user, size_t size, size_t align)
{
    counting *c = user;
    if (c->fail)
        return NULL;
    if (size >= MIB)
        atomic_fetch_add(&c->big_allocs, 1);
    return rbt_aligned_alloc(size, align);
}

static void count_free(void *user, void *ptr)
{
    (void)user;
    free(ptr);
}

static rb_allocator counting_allocator(counting *c)
{
    rb_allocator a = {count_alloc, count_free, c};
    return a;
}

/* rb_workmem_take of want bytes; *got: the block's size. */
static void *take(rb_workmem *w, size_t want, size_t *got)
{
    *got = want;
    void *p = rb_workmem_take(w, got);
    if (p)
        ck_assert_uint_ge(*got, want);
    return p;
}

START_TEST(test_reuse_and_fit)
{
    counting c = {0};
    rb_allocator a = counting_allocator(&c);
    rb_workmem w;
    rb_workmem_init(&w, &a);
    size_t np, nq, nbig, nsmall;
    void *p = take(&w, 2 * MIB, &np);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 64, 0);
    ck_assert_uint_eq(np, 2 * MIB);
    rb_workmem_give(&w, p, np);
    ck_assert_uint_eq(rb_workmem_kept(&w), 2 * MIB);
    /* The same size, and a smaller one it still fits, get it back, with
     * its own size. */
    void *q = take(&w, 2 * MIB, &nq);
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(rb_workmem_kept(&w), 0);
    rb_workmem_give(&w, q, nq);
    q = take(&w, MIB + 1, &nq);
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(nq, 2 * MIB);
    rb_workmem_give(&w, q, nq);
    ck_assert_uint_eq(rb_workmem_kept(&w), 2 * MIB);
    /* Larger than the kept block: a new block. */
    size_t before = c.big_allocs;
    void *big = take(&w, 3 * MIB, &nbig);
    ck_assert_ptr_ne(big, p);
    ck_assert_uint_eq(c.big_allocs, before + 1);
    rb_workmem_give(&w, big, nbig);
    /* Of two that fit, the smaller. */
    q = take(&w, 2 * MIB, &nq);
    ck_assert_ptr_eq(q, p);
    /* The one left is over twice the request: a new block. */
    void *small = take(&w, MIB + MIB / 4, &nsmall);
    ck_assert_ptr_ne(small, big);
    ck_assert_uint_eq(nsmall, MIB + MIB / 4);
    ck_assert_uint_eq(c.big_allocs, before + 2);
    rb_workmem_give(&w, small, nsmall);
    rb_workmem_give(&w, q, nq);
    ck_assert_uint_eq(rb_workmem_kept(&w), 6 * MIB + MIB / 4);
    rb_workmem_destroy(&w);
}
END_TEST

START_TEST(test_limits)
{
    counting c = {0};
    rb_allocator a = counting_allocator(&c);
    rb_workmem w;
    rb_workmem_init(&w, &a);
    size_t n, sizes[RB_WORKMEM_SLOTS + 2];
    /* Under RB_WORKMEM_MIN: not kept. */
    void *p = take(&w, RB_WORKMEM_MIN - 1, &n);
    rb_workmem_give(&w, p, n);
    ck_assert_uint_eq(rb_workmem_kept(&w), 0);
    /* At most RB_WORKMEM_SLOTS blocks. */
    void *blocks[RB_WORKMEM_SLOTS + 2];
    for (int k = 0; k < RB_WORKMEM_SLOTS + 2; k++)
        blocks[k] = take(&w, MIB, &sizes[k]);
    for (int k = 0; k < RB_WORKMEM_SLOTS + 2; k++)
        rb_workmem_give(&w, blocks[k], sizes[k]);
    ck_assert_uint_eq(rb_workmem_kept(&w), RB_WORKMEM_SLOTS * MIB);
    rb_workmem_trim(&w);
    ck_assert_uint_eq(rb_workmem_kept(&w), 0);
    /* At most RB_WORKMEM_KEEP bytes. */
    size_t quarter = RB_WORKMEM_KEEP / 4;
    for (int k = 0; k < 5; k++)
        blocks[k] = take(&w, quarter, &sizes[k]);
    for (int k = 0; k < 5; k++)
        rb_workmem_give(&w, blocks[k], sizes[k]);
    ck_assert_uint_eq(rb_workmem_kept(&w), 4 * quarter);
    rb_workmem_destroy(&w);
    /* Out of memory with nothing kept: NULL. */
    rb_workmem_init(&w, &a);
    c.fail = 1;
    ck_assert_ptr_null(take(&w, 2 * MIB, &n));
    c.fail = 0;
    rb_workmem_destroy(&w);
}
END_TEST

/* Two threads take, fill, check and give blocks of changing sizes: a
 * block handed to both at once shows the other's pattern. */
typedef struct shared {
    rb_workmem w;
    rb_allocator a;
    atomic_int bad;
} shared;

static void *churn(void *arg)
{
    shared *s = ((void **)arg)[0];
    unsigned char me = (unsigned char)(uintptr_t)((void **)arg)[1];
    rbt_rng rng = {me * 7919u + 1};
    for (int it = 0; it < 4000; it++) {
        size_t want = MIB + rbt_below(&rng, 3 * (uint32_t)MIB);
        size_t size = want;
        unsigned char *p = rb_workmem_take(&s->w, &size);
        if (!p) {
            atomic_fetch_add(&s->bad, 1);
            continue;
        }
        if (size < want)
            atomic_fetch_add(&s->bad, 1);
        p[0] = p[size / 2] = p[size - 1] = me;
        for (volatile int spin = 0; spin < 200; spin++)
            ;
        if (p[0] != me || p[size / 2] != me || p[size - 1] != me)
            atomic_fetch_add(&s->bad, 1);
        rb_workmem_give(&s->w, p, size);
    }
    return NULL;
}

START_TEST(test_two_threads)
{
    static shared s;
    rb_allocator_default(&s.a);
    rb_workmem_init(&s.w, &s.a);
    atomic_init(&s.bad, 0);
    void *args[2][2] = {{&s, (void *)1}, {&s, (void *)2}};
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, churn, args[k]), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    ck_assert_int_eq(atomic_load(&s.bad), 0);
    ck_assert_uint_le(rb_workmem_kept(&s.w), RB_WORKMEM_KEEP);
    rb_workmem_destroy(&s.w);
}
END_TEST

/* With RAYBOX_HUGE_PAGES=on, blocks of 32 MiB or more from the default
 * allocator start on a 2 MiB boundary (a huge page) whatever alignment
 * was asked, and every byte asked for is theirs (ASan checks the
 * writes); smaller blocks keep the asked alignment; without it (the
 * default) blocks are whole too. */
START_TEST(test_default_big_blocks)
{
    rb_allocator a;
    rb_allocator_default(&a);
    rb_context_trim(NULL); /* no block kept from before the switch */
    const size_t sizes[] = {32 * MIB, 32 * MIB + 1, 40 * MIB + 123};
    const size_t aligns[] = {0, 64, 4096, 4 * MIB};
    for (int unset = 0; unset < 2; unset++) {
        if (unset)
            ck_assert_int_eq(unsetenv("RAYBOX_HUGE_PAGES"), 0);
        else
            ck_assert_int_eq(setenv("RAYBOX_HUGE_PAGES", "on", 1), 0);
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            for (size_t j = 0; j < sizeof aligns / sizeof *aligns; j++) {
                unsigned char *p = rb_alloc_with(&a, sizes[i], aligns[j]);
                ck_assert_ptr_nonnull(p);
                uintptr_t at = (uintptr_t)p;
                if (aligns[j])
                    ck_assert_uint_eq(at % aligns[j], 0);
#ifdef __linux__
                if (!unset)
                    ck_assert_uint_eq(at % (2 * MIB), 0);
#endif
                p[0] = 1;
                p[sizes[i] - 1] = 2;
                ck_assert_uint_eq(p[0] + p[sizes[i] - 1], 3);
                rb_free_with(&a, p);
            }
        }
        unsigned char *small = rb_alloc_with(&a, MIB, 64);
        ck_assert_ptr_nonnull(small);
        ck_assert_uint_eq((uintptr_t)small % 64, 0);
        small[MIB - 1] = 1;
        rb_free_with(&a, small);
    }
}
END_TEST

/* The default allocator keeps freed blocks of 32 MiB or more for the
 * whole process (host/alloc.c): the next request that fits and is at
 * least half the block gets it back, smaller blocks and requests with
 * their own alignment are the C library's, at most RAYBOX_KEEP_FREED_MB
 * MiB are kept (read at each free), and rb_context_trim frees them. */
START_TEST(test_default_keeps_freed)
{
    rb_allocator a;
    rb_allocator_default(&a);
    ck_assert_int_eq(unsetenv("RAYBOX_HUGE_PAGES"), 0);
    ck_assert_int_eq(unsetenv("RAYBOX_KEEP_FREED_MB"), 0);
    rb_context_trim(NULL);
    ck_assert_uint_eq(rb_alloc_kept_default(), 0);

    unsigned char *p = rb_alloc_with(&a, 40 * MIB, 64);
    ck_assert_ptr_nonnull(p);
    p[40 * MIB - 1] = 7;
    rb_free_with(&a, p);
    size_t kept = rb_alloc_kept_default();
    ck_assert_uint_ge(kept, 40 * MIB);
    /* Too small for it (under half), or aligned otherwise: not taken. */
    void *small = rb_alloc_with(&a, 16 * MIB, 64);
    void *aligned = rb_alloc_with(&a, 36 * MIB, 4096);
    ck_assert_ptr_nonnull(small);
    ck_assert_ptr_nonnull(aligned);
    ck_assert_uint_eq((uintptr_t)aligned % 4096, 0);
    ck_assert_uint_eq(rb_alloc_kept_default(), kept);
    rb_free_with(&a, small);
    ck_assert_uint_eq(rb_alloc_kept_default(), kept);
    /* One that fits: the kept block, whole and writable. */
    unsigned char *again = rb_alloc_with(&a, 36 * MIB, 16);
    ck_assert_ptr_eq(again, p);
    ck_assert_uint_eq(rb_alloc_kept_default(), 0);
    memset(again, 1, 36 * MIB);
    rb_free_with(&a, again);
    rb_free_with(&a, aligned);
    ck_assert_uint_ge(rb_alloc_kept_default(), 76 * MIB);

    /* The cap: freed past it, a block goes back to the C library. */
    ck_assert_int_eq(setenv("RAYBOX_KEEP_FREED_MB", "100", 1), 0);
    unsigned char *third = rb_alloc_with(&a, 48 * MIB, 64);
    ck_assert_ptr_nonnull(third);
    third[0] = 1;
    size_t before = rb_alloc_kept_default();
    rb_free_with(&a, third);
    ck_assert_uint_eq(rb_alloc_kept_default(), before);
    ck_assert_uint_le(before, 100 * MIB);
    ck_assert_int_eq(setenv("RAYBOX_KEEP_FREED_MB", "0", 1), 0);
    rb_context_trim(NULL);
    ck_assert_uint_eq(rb_alloc_kept_default(), 0);
    p = rb_alloc_with(&a, 40 * MIB, 64);
    ck_assert_ptr_nonnull(p);
    rb_free_with(&a, p);
    ck_assert_uint_eq(rb_alloc_kept_default(), 0);
    ck_assert_int_eq(unsetenv("RAYBOX_KEEP_FREED_MB"), 0);
}
END_TEST

/* Builds over n boxes twice in one context (counting its big
 * allocations) and once in a fresh one; every build answers rays alike. */
static void check_rebuilds(int build)
{
    const size_t n = 200000, n_rays = 20000;
    rb_box *boxes = malloc(n * sizeof *boxes);
    rb_ray *rays = malloc(n_rays * sizeof *rays);
    rb_hit *hits[3];
    ck_assert_ptr_nonnull(boxes);
    ck_assert_ptr_nonnull(rays);
    rbt_rng rng = {42};
    rbt_gen_boxes(&rng, RBT_UNIFORM, boxes, n);
    rbt_gen_rays(&rng, RBT_UNIFORM, boxes, n, rays, n_rays);
    counting c = {0};
    rb_allocator a = counting_allocator(&c);
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    opt.allocator = &a;
    opt.hierarchy_build = build;
    rb_context *ctx = rbt_context_opts(RBT_CPU, &opt);
    size_t allocs[2];
    for (int k = 0; k < 3; k++) {
        if (k == 2) { /* a fresh context: nothing kept */
            rb_context_destroy(ctx);
            ctx = rbt_context_opts(RBT_CPU, &opt);
        }
        size_t before = c.big_allocs;
        rb_scene *scene = NULL;
        ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, n, &scene), RB_OK);
        if (k < 2)
            allocs[k] = c.big_allocs - before;
        hits[k] = malloc(n_rays * sizeof **hits);
        ck_assert_ptr_nonnull(hits[k]);
        rb_query q = {0};
        q.mode = RB_MODE_NEAREST;
        q.dims = 3;
        q.rays = rays;
        q.n_rays = n_rays;
        q.scene = scene;
        rb_results res = {.capacity = n_rays, .hits = hits[k]};
        ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_OK);
        rb_scene_destroy(scene);
    }
    /* The first build allocates its work arrays (prims twice, the binary
     * tree, the plan of the collapse and more); the second takes them
     * from what the first gave back. */
    ck_assert_uint_ge(allocs[0], allocs[1] + 4);
    /* The fresh context kept the third build's; rb_context_trim frees
     * them. */
    ck_assert_uint_gt(rb_workmem_kept(&ctx->workmem), 0);
    rb_context_trim(ctx);
    ck_assert_uint_eq(rb_workmem_kept(&ctx->workmem), 0);
    for (int k = 1; k < 3; k++)
        for (size_t i = 0; i < n_rays; i++)
            if (!rbt_same_hit(&hits[0][i], &hits[k][i]))
                ck_abort_msg("build %d, ray %zu answers differently", k, i);
    rb_context_destroy(ctx); /* frees what it kept (LeakSanitizer) */
    for (int k = 0; k < 3; k++)
        free(hits[k]);
    free(rays);
    free(boxes);
}

START_TEST(test_context_rebuilds)
{
    check_rebuilds(_i ? RB_HIERARCHY_BUILD_FAST : RB_HIERARCHY_BUILD_SAH);
}
END_TEST

static Suite *workmem_suite(void)
{
    Suite *s = suite_create("workmem");
    TCase *tc = tcase_create("blocks");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_reuse_and_fit);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_two_threads);
    tcase_add_test(tc, test_default_big_blocks);
    tcase_add_test(tc, test_default_keeps_freed);
    tcase_add_loop_test(tc, test_context_rebuilds, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return rbt_run_suite(workmem_suite()) ? EXIT_FAILURE : EXIT_SUCCESS;
}
