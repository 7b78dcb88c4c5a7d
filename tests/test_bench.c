/* test_bench.c - raybox-bench end to end, as a real process (RAYBOX_BENCH
 * is build/bin/raybox-bench), with tiny sizes and budgets: the JSON has the
 * expected rows for the CPU backend and OpenCL (limits first, every mode,
 * both timing paths), every row that did not run says why (--http at a
 * port where nothing listens is one of them), the CSV matches, --compare
 * of a run with itself matches every row, --plot draws PNGs and refuses to
 * run without gnuplot, and usage errors exit 2. Nothing here is timed. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rows.h"
#include "testutil.h"

#ifndef RAYBOX_BENCH
#error "RAYBOX_BENCH must name the raybox-bench executable"
#endif

static char dir[64];
static char out_text[1 << 18];
static rbench_rows rows;
static int measured;

static void ensure_dir(void)
{
    if (dir[0])
        return;
    strcpy(dir, "/tmp/raybox-bench-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static int run(const char *env, const char *args)
{
    ensure_dir();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s '%s' %s >'%s/out' 2>'%s/err'", env,
             RAYBOX_BENCH, args, dir, dir);
    int st = system(cmd);
    ck_assert_msg(st != -1 && WIFEXITED(st), "%s did not exit", cmd);
    char path[128];
    snprintf(path, sizeof path, "%s/out", dir);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out_text, 1, sizeof out_text - 1, f);
    out_text[n] = '\0';
    fclose(f);
    return WEXITSTATUS(st);
}

static const char *err_text(void)
{
    static char buf[8192];
    char path[128];
    snprintf(path, sizeof path, "%s/err", dir);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

/* The end of a long text: check's messages have a size limit. */
static const char *tail(const char *text)
{
    size_t n = strlen(text);
    return n > 1500 ? text + n - 1500 : text;
}

static int opencl_expected(void)
{
    const char *no = getenv("RAYBOX_TEST_NO_OPENCL");
    return !(no && strcmp(no, "1") == 0);
}

/* One small measured run, shared by the tests of this suite. */
static void measure_once(void)
{
    if (measured)
        return;
    ensure_dir();
    char args[1024];
    snprintf(args, sizeof args,
             "--quick --quiet --budget 0.002 --repeats 1 --warmups 1 "
             "--pairs 64,256 --rays 16,32 --boxes 64 --scene-rays 16 "
             "--scene-boxes 64 --shapes uniform,city --http-rays 16 "
             "--copy-bytes 1M --http http://127.0.0.1:9 "
             "--json '%s/run.json' --csv '%s/run.csv'",
             dir, dir);
    int rc = run("", args);
    ck_assert_msg(rc == 0, "exit %d\n%s\n%s", rc, tail(out_text),
                  tail(err_text()));
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/run.json", dir);
    ck_assert_msg(rbench_read_json(path, &rows, err, sizeof err) == 0, "%s",
                  err);
    measured = 1;
}

static const rbench_row *row(const char *backend, const char *test,
                          const char *shape, const char *path,
                          uint64_t rays, const char *metric)
{
    return rbench_find(&rows, backend, NULL, test, shape, path, rays, metric);
}

START_TEST(test_cpu_rows)
{
    measure_once();
    static const char *const limits[] = {"copy_plain", "copy_streaming",
                                         "pairs_traffic", "pairs_reads",
                                         "reference_loop",
                                         "call_1ray"};
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++)
        ck_assert_msg(row("cpu", limits[i], "", "", 0, NULL), "no %s",
                      limits[i]);
    static const char *const modes[] = {"nearest", "any", "count", "all"};
    for (uint64_t n = 64; n <= 256; n *= 4)
        for (int m = 0; m < 3; m++) {
            static const char *const metrics[] = {
                "rays_per_s", "tests_per_s", "fraction_of_bound"};
            ck_assert_msg(row("cpu", "pairs", "inline", "e2e", n,
                              metrics[m]), "cpu pairs %llu %s",
                          (unsigned long long)n, metrics[m]);
        }
    for (size_t m = 0; m < 4; m++) {
        ck_assert_msg(row("cpu", modes[m], "inline", "e2e", 16, "rays_per_s"),
                      "cpu %s inline 16", modes[m]);
        ck_assert_msg(row("cpu", modes[m], "inline", "e2e", 32, "tests_per_s"),
                      "cpu %s inline 32", modes[m]);
        ck_assert_msg(row("cpu", modes[m], "uniform", "e2e", 16, "rays_per_s"),
                      "cpu %s on the uniform scene", modes[m]);
        ck_assert_msg(row("cpu", modes[m], "city", "e2e", 16, "rays_per_s"),
                      "cpu %s on the city scene", modes[m]);
    }
    ck_assert_ptr_nonnull(row("cpu", "scene_create", "city", "e2e", 0,
                              "build_ms"));
    /* The CPU backend has no kernel path, and says so. */
    int said = 0;
    for (size_t i = 0; i < rows.n; i++)
        said |= strcmp(rows.rows[i].backend, "cpu") == 0 &&
                strcmp(rows.rows[i].path, "kernel") == 0 &&
                strcmp(rows.rows[i].status, "skipped") == 0;
    ck_assert(said);
    /* Counting tests: rays x boxes. */
    const rbench_row *r = row("cpu", "count", "inline", "e2e", 32, "rays_per_s");
    const rbench_row *t = row("cpu", "count", "inline", "e2e", 32, "tests_per_s");
    ck_assert_double_eq_tol(t->value / r->value, 64, 1e-6);
}
END_TEST

START_TEST(test_opencl_rows)
{
    measure_once();
    if (!opencl_expected()) {
        /* No OpenCL on purpose: one skipped row that says why. */
        int said = 0;
        for (size_t i = 0; i < rows.n; i++)
            said |= strcmp(rows.rows[i].backend, "opencl") == 0 &&
                    strcmp(rows.rows[i].status, "skipped") == 0 &&
                    rows.rows[i].note[0];
        ck_assert(said);
        return;
    }
    static const char *const limits[] = {
        "copy_bandwidth", "h2d_bandwidth", "d2h_bandwidth",
        "h2d_pinned_bandwidth", "d2h_pinned_bandwidth", "launch_latency",
        "launch_batched", "call_1ray"};
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++)
        ck_assert_msg(row("opencl", limits[i], "", "", 0, NULL), "no %s",
                      limits[i]);
    static const char *const modes[] = {"pairs", "nearest", "any", "count",
                                        "all"};
    for (size_t m = 0; m < 5; m++) {
        uint64_t n = m == 0 ? 64 : 16;
        for (int k = 0; k < 2; k++) {
            const char *path = k ? "kernel" : "e2e";
            ck_assert_msg(row("opencl", modes[m], "inline", path, n,
                              "rays_per_s"), "opencl %s %s", modes[m], path);
            ck_assert_msg(row("opencl", modes[m], "inline", path, n,
                              "fraction_of_bound"), "opencl %s %s bound",
                          modes[m], path);
        }
        if (m)
            ck_assert_msg(row("opencl", modes[m], "uniform", "kernel", 16,
                              "rays_per_s"), "opencl %s scene", modes[m]);
    }
}
END_TEST

START_TEST(test_skips_carry_reasons)
{
    measure_once();
    size_t http_skips = 0;
    for (size_t i = 0; i < rows.n; i++) {
        const rbench_row *r = &rows.rows[i];
        ck_assert_str_eq(r->version, RB_VERSION_STRING);
        ck_assert_msg(r->git[0] != '\0', "row %zu without a revision", i);
        ck_assert_msg(strcmp(r->status, "failed") != 0, "%s %s %s failed: %s",
                      r->backend, r->test, r->size, r->note);
        if (strcmp(r->status, "ok") != 0)
            ck_assert_msg(r->note[0] != '\0', "row %zu (%s %s) skipped "
                          "without a reason", i, r->backend, r->test);
        if (strcmp(r->backend, "http") == 0) {
            ck_assert_str_eq(r->status, "skipped");
            ck_assert_msg(strstr(r->note, "not reachable at "
                                          "http://127.0.0.1:9"), "%s",
                          r->note);
            http_skips++;
        }
    }
    /* pairs, then 4 modes on each of 2 shapes. */
    ck_assert_uint_eq(http_skips, 9);
    ck_assert_msg(strstr(out_text, "summary (native CPU backend"), "%s",
                  tail(out_text));
    ck_assert_msg(strstr(out_text, "of the pairs traffic loop"), "%s",
                  tail(out_text));
    ck_assert_msg(strstr(out_text, "of its reads' ceiling"), "%s",
                  tail(out_text));
}
END_TEST

START_TEST(test_csv_and_compare)
{
    measure_once();
    char path[128];
    snprintf(path, sizeof path, "%s/run.csv", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[2048];
    size_t lines = 0;
    while (fgets(line, sizeof line, f))
        lines++;
    fclose(f);
    ck_assert_uint_eq(lines, rows.n + 1);

    char args[512];
    snprintf(args, sizeof args, "--from '%s/run.json' --compare "
                                "'%s/run.json'", dir, dir);
    ck_assert_int_eq(run("", args), 0);
    char want[64];
    snprintf(want, sizeof want, "%zu rows compared", rows.n);
    ck_assert_msg(strstr(out_text, want), "%s", tail(out_text));
    ck_assert_ptr_nonnull(strstr(out_text, "0 only here, 0 only in the "
                                           "baseline"));
}
END_TEST

START_TEST(test_plot)
{
    measure_once();
    char args[512];
    /* Without gnuplot: refused before anything is measured. */
    snprintf(args, sizeof args, "--quick --plot '%s/charts'", dir);
    ck_assert_int_eq(run("PATH=/nonexistent", args), 1);
    ck_assert_msg(strstr(err_text(), "needs gnuplot"), "%s", err_text());
    /* With it (make test installs gnuplot-nox): PNGs. */
    snprintf(args, sizeof args, "--from '%s/run.json' --plot '%s/charts'",
             dir, dir);
    int rc = run("", args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_text());
    static const char *const charts[] = {"rate-pairs.png", "bound-count.png",
                                         "rate-all.png"};
    for (size_t i = 0; i < 3; i++) {
        char png[160];
        unsigned char magic[4] = {0};
        snprintf(png, sizeof png, "%s/charts/%s", dir, charts[i]);
        FILE *f = fopen(png, "rb");
        ck_assert_msg(f != NULL, "no %s", png);
        ck_assert_uint_eq(fread(magic, 1, 4, f), 4);
        fclose(f);
        ck_assert(magic[0] == 0x89 && magic[1] == 'P' && magic[2] == 'N' &&
                  magic[3] == 'G');
    }
}
END_TEST

START_TEST(test_usage_errors)
{
    ck_assert_int_eq(run("", "--backend gpu"), 2);
    ck_assert_int_eq(run("", "--pairs 0"), 2);
    ck_assert_int_eq(run("", "--shapes nowhere"), 2);
    ck_assert_int_eq(run("", "--device no-such-device-name --quiet"), 2);
    ck_assert_msg(strstr(err_text(), "no such OpenCL device"), "%s",
                  err_text());
    ck_assert_int_eq(run("", "--help"), 0);
    ck_assert_ptr_nonnull(strstr(out_text, "--compare BASELINE.json"));
    ck_assert_int_eq(run("", "--list"), 0);
    ck_assert_ptr_nonnull(strstr(out_text, "cpu    cpu"));
}
END_TEST

static void cleanup(void)
{
    if (dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    rbench_rows_free(&rows);
}

int main(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("end_to_end");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cpu_rows);
    tcase_add_test(tc, test_opencl_rows);
    tcase_add_test(tc, test_skips_carry_reasons);
    tcase_add_test(tc, test_csv_and_compare);
    tcase_add_test(tc, test_plot);
    tcase_add_test(tc, test_usage_errors);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
