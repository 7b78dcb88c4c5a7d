/* test_gpu_check.c - scripts/gpu-check.sh fails cleanly where there is no
 * OpenCL GPU: a clear message and exit status 3, quickly, never a hang.
 * Runs the real script (RAYBOX_SOURCE_DIR) against this build
 * (--prebuilt RAYBOX_BUILD_DIR), so nothing is compiled again:
 *   - no NVIDIA driver at all (stops before anything else);
 *   - a "driver" the ICD loader cannot load, and no other vendor: the
 *     probe sees no OpenCL device;
 *   - PoCL registered as the driver through the generated ICD directory
 *     (where OpenCL is expected): a device is found, but it is no GPU;
 *   - and its CPU path: --cpu-ok accepts PoCL, so the test and bench steps
 *     run (one small suite, a tiny bench) and the results are written. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#if !defined(RAYBOX_SOURCE_DIR) || !defined(RAYBOX_BUILD_DIR)
#error "RAYBOX_SOURCE_DIR and RAYBOX_BUILD_DIR must be defined"
#endif

static char dir[64];
static char output[1 << 16];

static void setup(void)
{
    strcpy(dir, "/tmp/raybox-gpu-check-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static const char *tail(const char *text)
{
    size_t n = strlen(text);
    return n > 1500 ? text + n - 1500 : text;
}

/* Runs the script with `env` before it; returns its exit status, output
 * (stdout and stderr) in `output`. A hang would be killed by timeout. */
static int run_check(const char *env, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s timeout 120 sh '%s/scripts/gpu-check.sh' run --out '%s/out' "
             "--work '%s/work' %s >'%s/log' 2>&1",
             env, RAYBOX_SOURCE_DIR, dir, dir, args, dir);
    int st = system(cmd);
    ck_assert_msg(st != -1 && WIFEXITED(st), "%s did not exit", cmd);
    char path[128];
    snprintf(path, sizeof path, "%s/log", dir);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(output, 1, sizeof output - 1, f);
    output[n] = '\0';
    fclose(f);
    ck_assert_msg(WEXITSTATUS(st) != 124, "the script hung: %s", tail(output));
    return WEXITSTATUS(st);
}

static void summary_says(const char *text)
{
    char path[128], buf[8192];
    snprintf(path, sizeof path, "%s/out/summary.txt", dir);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no summary.txt");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    ck_assert_msg(strstr(buf, text) != NULL, "summary lacks '%s':\n%s", text,
                  buf);
}

START_TEST(test_no_driver)
{
    int rc = run_check("RAYBOX_NVIDIA_OPENCL=/nonexistent/libnvidia-opencl.so.1",
                       "--prebuilt '" RAYBOX_BUILD_DIR "'");
    ck_assert_msg(rc == 3, "exit %d: %s", rc, tail(output));
    ck_assert_msg(strstr(output, "error: no NVIDIA OpenCL driver "
                                 "(libnvidia-opencl.so.1) found"), "%s",
                  output);
    summary_says("result: no NVIDIA OpenCL driver");
}
END_TEST

START_TEST(test_driver_that_does_not_load)
{
    char fake[128], vendors[128], env[512];
    snprintf(fake, sizeof fake, "%s/libnvidia-opencl.so.1", dir);
    snprintf(vendors, sizeof vendors, "%s/vendors", dir);
    FILE *f = fopen(fake, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a shared library\n", f);
    fclose(f);
    ck_assert_int_eq(mkdir(vendors, 0700), 0);
    snprintf(env, sizeof env,
             "RAYBOX_NVIDIA_OPENCL='%s' GPU_CHECK_VENDORS_DIR='%s'", fake,
             vendors);
    int rc = run_check(env, "--prebuilt '" RAYBOX_BUILD_DIR "'");
    ck_assert_msg(rc == 3, "exit %d: %s", rc, tail(output));
    ck_assert_msg(strstr(output, "error: no OpenCL GPU found"), "%s", tail(output));
    summary_says("result: no OpenCL GPU");
    summary_says("step probe: ok");
}
END_TEST

/* The PoCL library named in its own .icd file, as a full path. */
static int pocl_library(char *out, size_t len)
{
    FILE *f = fopen("/etc/OpenCL/vendors/pocl.icd", "r");
    char name[256] = "";
    if (!f)
        return -1;
    if (!fgets(name, sizeof name, f))
        name[0] = '\0';
    fclose(f);
    name[strcspn(name, "\r\n")] = '\0';
    static const char *const dirs[] = {"", "/usr/lib/x86_64-linux-gnu/",
                                       "/usr/lib64/", "/usr/lib/"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(out, len, "%s%s", dirs[i], name);
        if (name[0] && access(out, R_OK) == 0 && out[0] == '/')
            return 0;
    }
    return -1;
}

START_TEST(test_cpu_opencl_is_no_gpu)
{
    const char *no = getenv("RAYBOX_TEST_NO_OPENCL");
    if (no && strcmp(no, "1") == 0)
        return; /* the machine has no OpenCL on purpose (testutil.h) */
    char lib[512], vendors[128], env[1024];
    ck_assert_msg(pocl_library(lib, sizeof lib) == 0,
                  "PoCL's library not found from /etc/OpenCL/vendors/pocl.icd");
    snprintf(vendors, sizeof vendors, "%s/vendors", dir);
    ck_assert_int_eq(mkdir(vendors, 0700), 0);
    snprintf(env, sizeof env,
             "RAYBOX_NVIDIA_OPENCL='%s' GPU_CHECK_VENDORS_DIR='%s'", lib,
             vendors);
    int rc = run_check(env, "--prebuilt '" RAYBOX_BUILD_DIR "'");
    ck_assert_msg(rc == 3, "exit %d: %s", rc, tail(output));
    ck_assert_msg(strstr(output, "error: no OpenCL GPU found"), "%s", tail(output));
    /* The generated ICD file did load the library: a CPU device showed. */
    ck_assert_msg(strstr(output, " opencl  cpu "), "%s", tail(output));
}
END_TEST

START_TEST(test_cpu_path)
{
    const char *no = getenv("RAYBOX_TEST_NO_OPENCL");
    if (no && strcmp(no, "1") == 0)
        return; /* the machine has no OpenCL on purpose (testutil.h) */
    int rc = run_check(
        "RAYBOX_NVIDIA_OPENCL=/nonexistent/libnvidia-opencl.so.1",
        "--cpu-ok --prebuilt '" RAYBOX_BUILD_DIR "' --tests '^test_vectors$' "
        "--bench-args '--quiet --budget 0.002 --repeats 1 --warmups 1 "
        "--pairs 64 --rays 16 --boxes 64 --scene-rays 16 --scene-boxes 64 "
        "--shapes city --copy-bytes 1M'");
    ck_assert_msg(rc == 0, "exit %d: %s", rc, tail(output));
    summary_says("result: ok");
    summary_says("step tests: exit 0");
    summary_says("step bench: exit 0");
    summary_says("summary (native CPU backend");
    static const char *const files[] = {"bench.json", "bench.csv",
                                        "bench.txt", "tests.log",
                                        "devices.txt", "steps.log"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[160];
        snprintf(path, sizeof path, "%s/out/%s", dir, files[i]);
        ck_assert_msg(access(path, R_OK) == 0, "no %s", path);
    }
}
END_TEST

START_TEST(test_usage)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sh '%s/scripts/gpu-check.sh' bogus >/dev/null "
                              "2>&1", RAYBOX_SOURCE_DIR);
    int st = system(cmd);
    ck_assert(st != -1 && WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_check");
    TCase *tc = tcase_create("no_gpu");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_no_driver);
    tcase_add_test(tc, test_driver_that_does_not_load);
    tcase_add_test(tc, test_cpu_opencl_is_no_gpu);
    tcase_add_test(tc, test_cpu_path);
    tcase_add_test(tc, test_usage);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
