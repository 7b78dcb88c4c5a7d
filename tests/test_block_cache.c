/* test_block_cache.c - server/block_cache.c: freed large arrays are kept
 * within the byte limit and handed to the next request that fits (the
 * smallest such block), small ones and those over the limit go back to
 * the system, and lowering the limit lets go of what is kept. Blocks are
 * written in full each time, so ASan catches a block smaller than asked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "block_cache.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

static void *take(size_t size)
{
    void *p = rbc_block_alloc(size);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 16, 0);
    memset(p, 0xa5, size);
    return p;
}

static void teardown(void)
{
    rbc_block_cache_limit(0);
    ck_assert_uint_eq(rbc_block_cache_held(), 0);
}

START_TEST(test_off_keeps_nothing)
{
    rbc_block_cache_limit(0);
    void *p = take(4 * MIB);
    rbc_block_free(p);
    ck_assert_uint_eq(rbc_block_cache_held(), 0);
    rbc_block_free(NULL);
}
END_TEST

START_TEST(test_reuse_best_fit)
{
    rbc_block_cache_limit(64 * MIB);
    void *two = take(2 * MIB), *four = take(4 * MIB);
    rbc_block_free(four);
    rbc_block_free(two);
    ck_assert_uint_eq(rbc_block_cache_held(), 6 * MIB);
    /* Kept oldest first: the 4 MiB block, then the 2 MiB one. 1.5 MiB
     * takes the smallest block that fits (not the first), 3 MiB the
     * 4 MiB one. */
    void *b = take(3 * MIB / 2);
    ck_assert_ptr_eq(b, two);
    ck_assert_uint_eq(rbc_block_cache_held(), 4 * MIB);
    void *a = take(3 * MIB);
    ck_assert_ptr_eq(a, four);
    ck_assert_uint_eq(rbc_block_cache_held(), 0);
    rbc_block_free(a);
    /* Nothing kept is big enough: a new block. */
    void *c = take(8 * MIB);
    ck_assert_ptr_ne(c, four);
    ck_assert_uint_eq(rbc_block_cache_held(), 4 * MIB);
    rbc_block_free(b);
    rbc_block_free(c);
    ck_assert_uint_eq(rbc_block_cache_held(), 14 * MIB);
}
END_TEST

START_TEST(test_small_blocks_not_kept)
{
    rbc_block_cache_limit(64 * MIB);
    void *p = take(RBC_BLOCK_MIN - 1);
    rbc_block_free(p);
    ck_assert_uint_eq(rbc_block_cache_held(), 0);
    /* A small request never takes a kept block. */
    void *big = take(2 * MIB);
    rbc_block_free(big);
    void *q = take(1000);
    ck_assert_ptr_ne(q, big);
    rbc_block_free(q);
    ck_assert_uint_eq(rbc_block_cache_held(), 2 * MIB);
}
END_TEST

START_TEST(test_limit_bounds_what_is_kept)
{
    rbc_block_cache_limit(5 * MIB);
    void *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = take(2 * MIB);
    for (int i = 0; i < 3; i++)
        rbc_block_free(p[i]);
    /* The oldest went back: two blocks fit 5 MiB. */
    ck_assert_uint_eq(rbc_block_cache_held(), 4 * MIB);
    /* A block over the whole limit is never kept. */
    void *huge = take(6 * MIB);
    rbc_block_free(huge);
    ck_assert_uint_eq(rbc_block_cache_held(), 4 * MIB);
    /* Lowering the limit lets go of what no longer fits. */
    rbc_block_cache_limit(3 * MIB);
    ck_assert_uint_eq(rbc_block_cache_held(), 2 * MIB);
    rbc_block_cache_clear();
    ck_assert_uint_eq(rbc_block_cache_held(), 0);
}
END_TEST

START_TEST(test_slots_bound_the_count)
{
    rbc_block_cache_limit(1024 * MIB);
    enum { N = 20 };
    void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = take(MIB);
    for (int i = 0; i < N; i++)
        rbc_block_free(p[i]);
    size_t held = rbc_block_cache_held();
    ck_assert_uint_gt(held, 0);
    ck_assert_uint_lt(held, N * MIB); /* a few slots, not every block */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("block_cache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_off_keeps_nothing);
    tcase_add_test(tc, test_reuse_best_fit);
    tcase_add_test(tc, test_small_blocks_not_kept);
    tcase_add_test(tc, test_limit_bounds_what_is_kept);
    tcase_add_test(tc, test_slots_bound_the_count);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
