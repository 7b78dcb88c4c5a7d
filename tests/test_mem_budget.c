/* test_mem_budget.c - server/mem_budget.c (take within the limit, refuse
 * beyond it with nothing taken, forced takes, the peak) and the store's
 * pinned versions: a version its scene no longer holds (deleted, or
 * replaced) counts in the budget until its last reader releases it; a
 * freed version of 32 MiB or more is told to the store's hook. */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "mem_budget.h"
#include "scene_store.h"
#include "testutil.h"

START_TEST(test_take_and_refuse)
{
    rbd_budget b;
    budget_init(&b, 1000);
    ck_assert_int_eq(budget_take(&b, 600), 0);
    ck_assert_int_eq(budget_take(&b, 401), -1); /* 1001 > 1000 */
    ck_assert_uint_eq(atomic_load(&b.used), 600);
    ck_assert_uint_eq(atomic_load(&b.refused), 1);
    ck_assert_int_eq(budget_take(&b, 400), 0); /* exactly the limit */
    ck_assert_int_eq(budget_take(&b, (uint64_t)-1), -1); /* no wrap */
    budget_give(&b, 1000);
    budget_force(&b, 1500); /* pinned: over the limit, counted anyway */
    ck_assert_uint_eq(atomic_load(&b.used), 1500);
    ck_assert_int_eq(budget_take(&b, 1), -1);
    budget_give(&b, 1500);
    ck_assert_uint_eq(atomic_load(&b.used), 0);
    ck_assert_uint_eq(atomic_load(&b.peak), 1500);
}
END_TEST

START_TEST(test_default_is_half_the_memory)
{
    rbd_budget b;
    budget_init(&b, 0);
    ck_assert_uint_gt(b.limit, 0);
}
END_TEST

START_TEST(test_deleted_version_is_pinned_while_read)
{
    rbd_budget b;
    budget_init(&b, 1u << 30);
    scene_store *st = NULL;
    ck_assert_int_eq(store_create(16, 1u << 30, NULL, &b, &st), 0);
    rb_context *ctx = NULL;
    ck_assert_int_eq(rb_context_create(NULL, &ctx, NULL, 0), RB_OK);
    rb_box boxes[64];
    for (int i = 0; i < 64; i++)
        boxes[i] = (rb_box){{(float)i, 0, 0}, {(float)i + 1, 1, 1}};
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, 64, &scene), RB_OK);
    char id[RBD_SCENE_ID_MAX + 1], why[256];
    disk_chunk none = {0};
    ck_assert_int_eq(store_insert(st, scene, 0, 0, NULL, &none, id, why,
                                  sizeof why),
                     0);
    /* A query holds the version; the store's scene goes. */
    scene_ver *v = store_acquire(st, id, 0);
    ck_assert_ptr_nonnull(v);
    rb_scene_stats stats;
    rb_scene_stats_get(scene_ver_scene(v), &stats);
    ck_assert_uint_eq(atomic_load(&b.used), 0);
    ck_assert_int_eq(store_delete(st, id, 0, why, sizeof why), 0);
    ck_assert_uint_eq(atomic_load(&b.used), stats.host_bytes);
    scene_ver_release(v);
    ck_assert_uint_eq(atomic_load(&b.used), 0);
    /* Deleted with no reader: taken and given back at once. */
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, 64, &scene), RB_OK);
    ck_assert_int_eq(store_insert(st, scene, 0, 0, NULL, &none, id, why,
                                  sizeof why),
                     0);
    ck_assert_int_eq(store_delete(st, id, 0, why, sizeof why), 0);
    ck_assert_uint_eq(atomic_load(&b.used), 0);
    store_destroy(st);
    rb_context_destroy(ctx);
}
END_TEST

static atomic_int freed_calls;

static void count_freed(void *arg)
{
    ck_assert_ptr_eq(arg, &freed_calls);
    atomic_fetch_add(&freed_calls, 1);
}

/* The store tells its hook when a version of 32 MiB or more is freed
 * (rayboxd has its idle workers trim what the library keeps), not for a
 * small one, nor once the hook is cleared. */
START_TEST(test_big_version_freed_is_told)
{
    scene_store *st = NULL;
    ck_assert_int_eq(store_create(16, (uint64_t)1 << 32, NULL, NULL, &st),
                     0);
    store_on_freed(st, count_freed, &freed_calls);
    rb_context *ctx = NULL;
    ck_assert_int_eq(rb_context_create(NULL, &ctx, NULL, 0), RB_OK);
    const size_t sizes[] = {64, 600000, 600000};
    const int told[] = {0, 1, 0};
    rb_box *boxes = malloc(sizes[1] * sizeof *boxes);
    ck_assert_ptr_nonnull(boxes);
    for (size_t i = 0; i < sizes[1]; i++)
        boxes[i] = (rb_box){{(float)i, 0, 0}, {(float)i + 1, 1, 1}};
    for (int k = 0; k < 3; k++) {
        if (k == 2)
            store_on_freed(st, NULL, NULL);
        rb_scene *scene = NULL;
        ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, sizes[k], &scene),
                         RB_OK);
        char id[RBD_SCENE_ID_MAX + 1], why[256];
        disk_chunk none = {0};
        ck_assert_int_eq(store_insert(st, scene, 0, 0, NULL, &none, id, why,
                                      sizeof why),
                         0);
        int before = atomic_load(&freed_calls);
        ck_assert_int_eq(store_delete(st, id, 0, why, sizeof why), 0);
        ck_assert_int_eq(atomic_load(&freed_calls) - before, told[k]);
    }
    free(boxes);
    store_destroy(st);
    rb_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mem_budget");
    TCase *tc = tcase_create("mem_budget");
    tcase_add_test(tc, test_take_and_refuse);
    tcase_add_test(tc, test_default_is_half_the_memory);
    tcase_add_test(tc, test_deleted_version_is_pinned_while_read);
    tcase_add_test(tc, test_big_version_freed_is_told);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
