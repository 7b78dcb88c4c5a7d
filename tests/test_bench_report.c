/* test_bench_report.c - raybox-bench's rows and what is done with them
 * (tools/bench/rows.h): the JSON writer and reader round trip, CSV
 * quoting, skip reasons, number formatting, the table, and --compare's
 * matching, device pairing, direction of "better" and one-sided rows;
 * the ratio rows and the committed baseline of ratios. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "rows.h"
#include "testutil.h"

static char path[64];

static void tmp_file(void)
{
    strcpy(path, "/tmp/raybox-bench-report-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

static rbench_where at(const char *backend, const char *device,
                    const char *type, const char *test, const char *path_,
                    uint64_t rays)
{
    static char size[32];
    snprintf(size, sizeof size, "%llu", (unsigned long long)rays);
    return (rbench_where){.backend = backend, .device = device, .type = type,
                       .driver = "d1", .category = "modes", .test = test,
                       .shape = "inline", .path = path_, .rays = rays,
                       .boxes = rays, .size = size};
}

static void sample(rbench_rows *rows, const char *device, const char *type,
                   double scale)
{
    snprintf(rows->version, sizeof rows->version, "9.8.7");
    snprintf(rows->git, sizeof rows->git, "abc123-dirty");
    rbench_where w = at("opencl", device, type, "pairs", "e2e", 1024);
    rbench_add(rows, &w, "rays_per_s", "rays/s", 1e6 * scale, 0.9e6 * scale,
            1.1e6 * scale, 5);
    w = at("opencl", device, type, "pairs", "kernel", 1024);
    rbench_add(rows, &w, "rays_per_s", "rays/s", 2e6 * scale, 2e6, 2e6, 5);
    w = at("opencl", device, type, "launch", "", 0);
    w.category = "limits";
    rbench_add(rows, &w, "latency", "us", 10.0 / scale, 9, 11, 5);
}

START_TEST(test_json_round_trip)
{
    rbench_rows rows = {0};
    sample(&rows, "GPU \"A\", rev\\2", "gpu", 1);
    rbench_where w = at("cpu", "native", "cpu", "count", "e2e", 64);
    rbench_add_status(&rows, &w, "rays_per_s", "skipped",
                   "line one\nline \"two\"");
    rbench_add_status(&rows, &w, "rays_per_s", "failed", "");
    w = at("cpu", "native", "cpu", "any", "e2e", 64);
    rbench_add(&rows, &w, "rays_per_s", "rays/s", INFINITY, 1, 2, 3);
    snprintf(rows.summary, sizeof rows.summary, "{\"threads\":2}");
    tmp_file();
    ck_assert_int_eq(rbench_write_file(&rows, path, rbench_write_json), 0);

    rbench_rows back = {0};
    char err[256] = "";
    ck_assert_msg(rbench_read_json(path, &back, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_uint_eq(back.n, rows.n);
    for (size_t i = 0; i < rows.n; i++) {
        const rbench_row *a = &rows.rows[i], *b = &back.rows[i];
        ck_assert_str_eq(b->version, "9.8.7");
        ck_assert_str_eq(b->git, "abc123-dirty");
        ck_assert_str_eq(a->device, b->device);
        ck_assert_str_eq(a->test, b->test);
        ck_assert_str_eq(a->path, b->path);
        ck_assert_str_eq(a->size, b->size);
        ck_assert_str_eq(a->metric, b->metric);
        ck_assert_str_eq(a->status, b->status);
        ck_assert_str_eq(a->note, b->note);
        ck_assert_uint_eq(a->rays, b->rays);
        ck_assert_int_eq(a->repeats, b->repeats);
        if (isfinite(a->value))
            ck_assert_double_eq_tol(a->value, b->value,
                                    fabs(a->value) * 1e-8 + 1e-12);
    }
    /* A skip never goes without its reason. */
    ck_assert_str_eq(back.rows[4].note, "no reason given");
    /* JSON has no infinity: null, read back as 0. */
    ck_assert_double_eq(back.rows[5].value, 0);
    rbench_rows_free(&back);

    /* Not a result file: an error, not rows. */
    FILE *f = fopen(path, "w");
    fputs("{\"rows\":[]}", f);
    fclose(f);
    ck_assert_int_eq(rbench_read_json(path, &back, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "not a raybox-bench result"));
    ck_assert_int_eq(rbench_read_json("/nonexistent/x.json", &back, err,
                                   sizeof err), -1);
    unlink(path);
    rbench_rows_free(&rows);
}
END_TEST

START_TEST(test_csv_quoting)
{
    rbench_rows rows = {0};
    sample(&rows, "GPU \"A\", rev 2", "gpu", 1);
    rbench_where w = at("cpu", "native", "cpu", "count", "e2e", 64);
    rbench_add_status(&rows, &w, "rays_per_s", "skipped", "no, \"really\"");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_int_eq(rbench_write_csv(&rows, f), 0);
    fclose(f);
    ck_assert_msg(strncmp(text, "tool,version,git,backend,device,type,"
                                "driver,category,test,shape,path,rays,boxes,"
                                "size,metric,unit,value,min,max,repeats,"
                                "status,note\n", 120) == 0, "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "raybox-bench,9.8.7,abc123-dirty,"
                                       "opencl,\"GPU \"\"A\"\", rev 2\","
                                       "gpu,d1,modes,pairs,inline,e2e,1024,"
                                       "1024,1024,rays_per_s,rays/s,1000000,"
                                       "900000,1100000,5,ok,\n"));
    /* A skipped row has no value, and its reason quoted. */
    ck_assert_ptr_nonnull(strstr(text, ",rays_per_s,,,,,0,skipped,"
                                       "\"no, \"\"really\"\"\"\n"));
    size_t lines = 0;
    for (char *p = text; *p; p++)
        lines += *p == '\n';
    ck_assert_uint_eq(lines, rows.n + 1);
    free(text);
    rbench_rows_free(&rows);
}
END_TEST

START_TEST(test_human_and_direction)
{
    char b[32];
    rbench_human(999700, b, sizeof b);
    ck_assert_str_eq(b, "1 M");
    rbench_human(1.234e9, b, sizeof b);
    ck_assert_str_eq(b, "1.23 G");
    rbench_human(0.5, b, sizeof b);
    ck_assert_str_eq(b, "0.5");
    rbench_row r = {.unit = "us"};
    ck_assert_int_eq(rbench_higher_is_better(&r), 0);
    strcpy(r.unit, "rays/s");
    ck_assert_int_eq(rbench_higher_is_better(&r), 1);
    strcpy(r.unit, "");
    ck_assert_int_eq(rbench_higher_is_better(&r), 1); /* fractions */
}
END_TEST

START_TEST(test_table_shows_reasons)
{
    rbench_rows rows = {0};
    sample(&rows, "GPU A", "gpu", 1);
    rbench_where w = at("http", "rayboxd", "server", "nearest", "http", 16);
    rbench_add_status(&rows, &w, "rays_per_s", "skipped",
                   "rayboxd not reachable at http://127.0.0.1:9");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    rbench_print_table(&rows, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "== opencl: GPU A (gpu, driver d1)"));
    ck_assert_ptr_nonnull(strstr(text, "1 M"));
    ck_assert_ptr_nonnull(strstr(text, "skipped: rayboxd not reachable at "
                                       "http://127.0.0.1:9"));
    free(text);
    rbench_rows_free(&rows);
}
END_TEST

static char *compare_text(const rbench_rows *base, const rbench_rows *now,
                          rbench_compare_stats *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    rbench_compare(base, now, 0.05, f, st);
    fclose(f);
    return text;
}

START_TEST(test_compare_same_device)
{
    rbench_rows base = {0}, now = {0};
    sample(&base, "GPU A", "gpu", 1);
    sample(&now, "GPU A", "gpu", 2); /* twice as fast, half the latency */
    /* One row only in the baseline, one only now. */
    rbench_where w = at("opencl", "GPU A", "gpu", "count", "e2e", 16);
    rbench_add(&base, &w, "rays_per_s", "rays/s", 5, 5, 5, 1);
    w = at("opencl", "GPU A", "gpu", "count", "e2e", 32);
    rbench_add(&now, &w, "rays_per_s", "rays/s", 5, 5, 5, 1);
    rbench_compare_stats st;
    char *text = compare_text(&base, &now, &st);
    ck_assert_uint_eq(st.matched, 3);
    ck_assert_uint_eq(st.better, 3); /* rays/s up, latency down */
    ck_assert_uint_eq(st.worse, 0);
    ck_assert_uint_eq(st.only_now, 1);
    ck_assert_uint_eq(st.only_base, 1);
    ck_assert_uint_eq(st.paired_devices, 0);
    ck_assert_msg(strstr(text, "+100.0%  better") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "-50.0%  better") != NULL, "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "rows only in this run (1):"));
    ck_assert_ptr_nonnull(strstr(text, "count/inline/e2e 32 rays_per_s"));
    ck_assert_ptr_nonnull(strstr(text, "rows only in the baseline (1):"));
    ck_assert_ptr_nonnull(strstr(text, "count/inline/e2e 16 rays_per_s"));
    free(text);

    /* Slower now: worse. */
    rbench_rows slow = {0};
    sample(&slow, "GPU A", "gpu", 0.5);
    text = compare_text(&base, &slow, &st);
    ck_assert_uint_eq(st.worse, 3);
    ck_assert_uint_eq(st.better, 0);
    free(text);
    rbench_rows_free(&slow);
    rbench_rows_free(&base);
    rbench_rows_free(&now);
}
END_TEST

START_TEST(test_compare_two_gpus)
{
    rbench_rows base = {0}, now = {0};
    sample(&base, "GPU A", "gpu", 1);
    sample(&base, "pthread-cpu", "cpu", 1);
    sample(&now, "pthread-cpu", "cpu", 1);
    sample(&now, "GPU B", "gpu", 1.5);
    rbench_compare_stats st;
    char *text = compare_text(&base, &now, &st);
    /* The CPU device by name, the GPUs paired by backend and type. */
    ck_assert_uint_eq(st.paired_devices, 1);
    ck_assert_uint_eq(st.matched, 6);
    ck_assert_uint_eq(st.only_now + st.only_base, 0);
    ck_assert_uint_eq(st.better, 3);
    ck_assert_ptr_nonnull(strstr(text, "opencl device \"GPU B\" is compared "
                                       "with baseline device \"GPU A\""));
    free(text);

    /* A GPU is never paired with a CPU device: its rows are one-sided. */
    rbench_rows cpu_only = {0};
    sample(&cpu_only, "other-cpu", "cpu", 1);
    text = compare_text(&cpu_only, &now, &st);
    ck_assert_uint_eq(st.paired_devices, 1); /* the CPUs */
    ck_assert_uint_eq(st.matched, 3);
    ck_assert_uint_eq(st.only_now, 3);
    free(text);
    rbench_rows_free(&cpu_only);
    rbench_rows_free(&base);
    rbench_rows_free(&now);
}
END_TEST

START_TEST(test_find)
{
    rbench_rows rows = {0};
    sample(&rows, "GPU A", "gpu", 1);
    const rbench_row *r = rbench_find(&rows, "opencl", "GPU A", "pairs", "inline",
                                "kernel", 1024, "rays_per_s");
    ck_assert_ptr_nonnull(r);
    ck_assert_double_eq(r->value, 2e6);
    ck_assert_ptr_null(rbench_find(&rows, "cpu", NULL, "pairs", NULL, NULL, 0,
                                NULL));
    rbench_rows_free(&rows);
}
END_TEST

/* Ratios come from two figures of one run; rows of other tools that are
 * ratios already pass through; nothing else survives --ratios. */
START_TEST(test_ratio_rows)
{
    rbench_rows in = {0}, out = {0};
    rbench_where w = at("cpu", "native", "cpu", "reference_loop", "", 0);
    w.category = "limits";
    rbench_add(&in, &w, "tests_per_s", "tests/s", 100, 100, 100, 1);
    w = at("cpu", "native", "cpu", "count", "e2e", 64);
    rbench_add(&in, &w, "tests_per_s", "tests/s", 150, 150, 150, 1);
    rbench_add(&in, &w, "rays_per_s", "rays/s", 8, 8, 8, 1);
    w = at("cpu", "native", "cpu", "nearest", "e2e", 64);
    rbench_add(&in, &w, "tests_per_s", "tests/s", 75, 75, 75, 1);
    w = at("cpu", "native", "cpu", "pairs", "e2e", 1024);
    rbench_add(&in, &w, "fraction_of_bound", "", 0.5, 0.5, 0.5, 1);
    w = at("opencl", "GPU A", "gpu", "count", "kernel", 64);
    rbench_add(&in, &w, "rays_per_s", "rays/s", 32, 32, 32, 1);
    w = at("opencl", "GPU A", "gpu", "count", "e2e", 64);
    rbench_add(&in, &w, "rays_per_s", "rays/s", 4, 4, 4, 1);
    w = at("opencl", "GPU A", "gpu", "any", "e2e", 64); /* no CPU twin */
    rbench_add(&in, &w, "rays_per_s", "rays/s", 4, 4, 4, 1);
    w = at("cpu", "native", "cpu", "bvh_any", "e2e", 64);
    rbench_add_ratio(&in, &w, "speed_vs_fastest_embree", 1.25);
    rbench_ratio_rows(&in, &out);
    ck_assert_uint_eq(out.n, 6);
    const rbench_row *r = rbench_find(&out, "cpu", "native", "count", NULL, "e2e",
                                64, "vs_reference_loop");
    ck_assert_ptr_nonnull(r);
    ck_assert_double_eq_tol(r->value, 1.5, 1e-12);
    ck_assert_str_eq(r->category, "ratios");
    ck_assert_str_eq(r->unit, "x");
    r = rbench_find(&out, "cpu", "native", "nearest", NULL, NULL, 64,
                 "speed_vs_count");
    ck_assert_double_eq_tol(r->value, 0.5, 1e-12);
    r = rbench_find(&out, "cpu", "native", "pairs", NULL, NULL, 1024,
                 "fraction_of_bound");
    ck_assert_double_eq_tol(r->value, 0.5, 1e-12);
    r = rbench_find(&out, "opencl", "GPU A", "count", NULL, "kernel", 64,
                 "speed_vs_native");
    ck_assert_double_eq_tol(r->value, 4.0, 1e-12);
    r = rbench_find(&out, "opencl", "GPU A", "count", NULL, "e2e", 64,
                 "speed_vs_native");
    ck_assert_double_eq_tol(r->value, 0.5, 1e-12);
    ck_assert_ptr_null(rbench_find(&out, "opencl", NULL, "any", NULL, NULL, 0,
                                NULL));
    r = rbench_find(&out, "cpu", "native", "bvh_any", NULL, NULL, 64,
                 "speed_vs_fastest_embree");
    ck_assert_double_eq_tol(r->value, 1.25, 1e-12);
    /* One device's rows together: the CPU's first, then the GPU's. */
    for (size_t i = 0; i + 1 < out.n; i++)
        ck_assert_msg(strcmp(out.rows[i].backend, "opencl") != 0 ||
                          strcmp(out.rows[i + 1].backend, "cpu") != 0,
                      "row %zu: devices interleaved", i);
    /* Every ratio says larger is better, so --compare reads them right. */
    for (size_t i = 0; i < out.n; i++)
        ck_assert_int_eq(rbench_higher_is_better(&out.rows[i]), 1);
    rbench_rows_free(&in);
    rbench_rows_free(&out);
}
END_TEST

/* The committed baseline that make bench compares with: readable, ratios
 * only, and holding rows of each of the three tools. */
START_TEST(test_ratios_baseline_file)
{
    rbench_rows base = {0};
    char err[256];
    ck_assert_msg(rbench_read_json(RATIOS_BASELINE, &base, err, sizeof err) == 0,
                  "%s", err);
    size_t modes = 0, bvh = 0, shapes = 0;
    for (size_t i = 0; i < base.n; i++) {
        const rbench_row *r = &base.rows[i];
        ck_assert_str_eq(r->category, "ratios");
        ck_assert_str_eq(r->status, "ok");
        ck_assert_msg(isfinite(r->value) && r->value > 0, "row %zu", i);
        modes += strcmp(r->test, "pairs") == 0 ||
                 strcmp(r->test, "count") == 0;
        bvh += strncmp(r->test, "bvh_", 4) == 0 ||
               strncmp(r->test, "los_", 4) == 0;
        shapes += strcmp(r->driver, "raybox-bench-shapes") == 0;
    }
    ck_assert_uint_gt(modes, 0);
    ck_assert_uint_gt(bvh, 0);
    ck_assert_uint_gt(shapes, 0);
    rbench_rows_free(&base);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bench_report");
    TCase *tc = tcase_create("rows");
    tcase_add_test(tc, test_json_round_trip);
    tcase_add_test(tc, test_csv_quoting);
    tcase_add_test(tc, test_human_and_direction);
    tcase_add_test(tc, test_table_shows_reasons);
    tcase_add_test(tc, test_compare_same_device);
    tcase_add_test(tc, test_compare_two_gpus);
    tcase_add_test(tc, test_find);
    tcase_add_test(tc, test_ratio_rows);
    tcase_add_test(tc, test_ratios_baseline_file);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
