/* test_cli_visibility.c - `raybox visibility` as a real process: its file
 * equals the header and the bits of rb_visibility in this process (a JSON
 * scene, raw observers, .npy targets; and a .npy scene), shards written
 * in any order into one file equal one run byte for byte, a shard run
 * again changes nothing, OpenCL writes the same file, and bad input exits
 * 2 with one line naming the element; deploy/batch/visibility-slurm.sh
 * run as eight array tasks writes the same file. RAYBOX_CLI is the
 * executable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scratch.h"
#include "testutil.h"

#ifndef RAYBOX_CLI
#error "RAYBOX_CLI must name the raybox executable"
#endif
#ifndef RAYBOX_SOURCE_DIR
#error "RAYBOX_SOURCE_DIR must name the source tree"
#endif

enum { G = 12, NB = G * G, NO = 101, NT = 37 };

static rb_box boxes[NB];
static float obs[3 * NO], tgt[3 * NT];

static int run(const char *args, char *err, size_t cap)
{
    return rbt_scratch_run(RAYBOX_CLI, args, err, cap);
}

static void setup(void)
{
    rbt_scratch_make("raybox-vis");
    rbt_rng g = {5};
    for (int i = 0; i < NB; i++) {
        float x = (float)(i % G), y = (float)(i / G);
        boxes[i] = (rb_box){{x, y, 0}, {x + 0.8f, y + 0.8f,
                                        rbt_uniform(&g, 0.5f, 4)}};
    }
    for (int i = 0; i < NO + NT; i++) {
        float *p = i < NO ? &obs[3 * i] : &tgt[3 * (i - NO)];
        p[0] = (float)rbt_below(&g, G) + 0.9f;
        p[1] = rbt_uniform(&g, 0, G);
        p[2] = rbt_uniform(&g, 0.1f, 2);
    }
    /* the JSON scene body, written with %.9g: float32 round trips */
    char *json = malloc(NB * 120 + 64);
    size_t at = (size_t)sprintf(json, "{");
    at += rbt_boxes_json(json + at, boxes, NB);
    at += (size_t)sprintf(json + at, "}");
    rbt_scratch_write("scene.json", json, at);
    free(json);
    rbt_scratch_npy("scene.npy", (const float *)boxes, NB, 6);
    rbt_scratch_write("obs.f32", obs, sizeof obs);
    rbt_scratch_npy("tgt.npy", tgt, NT, 3);
}

static void teardown(void)
{
    rbt_scratch_remove();
}

/* The header and bits rb_visibility gives in this process. */
static unsigned char *expected(size_t *n)
{
    rb_context *ctx = rbt_context(RBT_CPU);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(ctx, 3, boxes, NB, &scene), RB_OK);
    size_t bytes = (size_t)rb_visibility_bytes(NO, NT);
    *n = 64 + bytes;
    unsigned char *b = calloc(*n, 1);
    rb_visibility_query q = {.scene = scene, .observers = obs,
                             .n_observers = NO, .targets = tgt,
                             .n_targets = NT, .tmin = 0, .tmax = 1};
    ck_assert_int_eq(rb_visibility(ctx, &q, b + 64, bytes, NULL, NULL),
                     RB_OK);
    memcpy(b, "RBOX", 4);
    b[4] = 1;  /* version */
    b[6] = 64; /* header size */
    b[8] = 130;
    b[9] = RB_MODE_ANY;
    b[10] = 3;
    uint64_t no = NO, nt = NT;
    float tmax = 1;
    memcpy(b + 16, &no, 8);
    memcpy(b + 24, &nt, 8);
    memcpy(b + 36, &tmax, 4);
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    return b;
}

START_TEST(test_files_and_shards)
{
    setup();
    size_t n;
    unsigned char *want = expected(&n);
    char err[1024];
    ck_assert_int_eq(run("visibility scene.json obs.f32 tgt.npy -o all.bin "
                         "--backend cpu",
                         err, sizeof err),
                     0);
    ck_assert_msg(strstr(err, "101/101 observers (100%)"), "progress: %s",
                  err);
    rbt_scratch_expect("all.bin", want, n, "one run");
    ck_assert_int_eq(run("visibility scene.npy obs.f32 tgt.npy -o npy.bin "
                         "--backend cpu --quiet",
                         err, sizeof err),
                     0);
    ck_assert_str_eq(err, "");
    rbt_scratch_expect("npy.bin", want, n, ".npy scene");
    /* shards, last first, into one file; then one again */
    for (int s = 3; s >= 0; s--) {
        char args[256];
        snprintf(args, sizeof args, "visibility scene.json obs.f32 tgt.npy "
                 "-o sh.bin --shard %d/4 --backend cpu --quiet", s);
        ck_assert_int_eq(run(args, err, sizeof err), 0);
    }
    rbt_scratch_expect("sh.bin", want, n, "four shards");
    ck_assert_int_eq(run("visibility scene.json obs.f32 tgt.npy -o sh.bin "
                         "--shard 2/4 --backend cpu --quiet",
                         err, sizeof err),
                     0);
    rbt_scratch_expect("sh.bin", want, n, "a shard run again");
    rb_context *cl = rbt_context(RBT_OPENCL);
    if (cl) {
        rb_context_destroy(cl);
        ck_assert_int_eq(run("visibility scene.json obs.f32 tgt.npy -o "
                             "cl.bin --backend opencl --quiet",
                             err, sizeof err),
                         0);
        rbt_scratch_expect("cl.bin", want, n, "opencl");
        /* --devices: PoCL's two devices answer as one; a bad list is
         * refused, named */
        setenv("POCL_DEVICES", "pthread pthread", 1);
        int rc = run("visibility scene.json obs.f32 tgt.npy -o multi.bin "
                     "--backend opencl --devices all --quiet",
                     err, sizeof err);
        unsetenv("POCL_DEVICES");
        ck_assert_msg(rc == 0, "%s", err);
        rbt_scratch_expect("multi.bin", want, n, "two opencl devices");
        ck_assert_int_eq(run("visibility scene.json obs.f32 tgt.npy -o "
                             "bad.bin --backend opencl --devices 0,0",
                             err, sizeof err),
                         1);
        ck_assert_msg(strstr(err, "device 0 listed twice"), "%s", err);
    }
    free(want);
    teardown();
}
END_TEST

/* deploy/batch/visibility-slurm.sh as Slurm would run it: eight array
 * tasks, in any order, give the file one run gives. */
START_TEST(test_slurm_array_script)
{
    setup();
    size_t n;
    unsigned char *want = expected(&n);
    rbt_scratch_npy("city.npy", (const float *)boxes, NB, 6);
    rbt_scratch_npy("observers.npy", obs, NO, 3);
    rbt_scratch_npy("targets.npy", tgt, NT, 3);
    char bin[512];
    snprintf(bin, sizeof bin, "%s", RAYBOX_CLI);
    *strrchr(bin, '/') = '\0';
    const int order[8] = {5, 0, 7, 2, 1, 6, 3, 4};
    for (int k = 0; k < 8; k++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && PATH='%s':\"$PATH\" SLURM_ARRAY_TASK_ID=%d "
                 "sh '%s/deploy/batch/visibility-slurm.sh'",
                 rbt_scratch_dir(), bin, order[k], RAYBOX_SOURCE_DIR);
        int st = system(cmd);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "task %d: %s", order[k], cmd);
    }
    rbt_scratch_expect("vis.bin", want, n, "the Slurm array's eight tasks");
    free(want);
    teardown();
}
END_TEST

static void expect_error(const char *args, int status, const char *text)
{
    char err[1024];
    ck_assert_int_eq(run(args, err, sizeof err), status);
    ck_assert_msg(strstr(err, text), "stderr '%s' lacks '%s'", err, text);
    ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1,
                  "not one line: '%s'", err);
}

START_TEST(test_bad_input)
{
    setup();
    rbt_scratch_write("short.f32", "abc", 3);
    float bad[6] = {0, 0, 0, 1, 0, 0};
    memcpy(bad + 4, &(float){0.0f / 0.0f}, 4);
    rbt_scratch_write("nan.f32", bad, sizeof bad);
    float f64ish[3] = {0};
    rbt_scratch_npy("wide.npy", f64ish, 1, 3);
    /* a (1, 3) array given where boxes (N, 6) are wanted */
    expect_error("visibility wide.npy obs.f32 tgt.npy -o x.bin", 2,
                 "shape is (1, 3), not (N, 6)");
    expect_error("visibility scene.json short.f32 tgt.npy -o x.bin", 2,
                 "3 bytes is not a whole number of float32 x y z records");
    expect_error("visibility scene.json nan.f32 tgt.npy -o x.bin", 2,
                 "observer 1: y is NaN");
    rbt_scratch_write("bad.json", "{\"boxes\":[[0,0,0,1,1]]}", 23);
    expect_error("visibility bad.json obs.f32 tgt.npy -o x.bin", 2,
                 "/boxes/0");
    expect_error("visibility scene.json obs.f32 tgt.npy", 1, "-o OUT");
    expect_error("visibility scene.json obs.f32 tgt.npy -o x.bin --shard 4/4",
                 1, "--shard '4/4'");
    expect_error("visibility missing.json obs.f32 tgt.npy -o x.bin", 1,
                 "No such file");
    teardown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_visibility");
    TCase *tc = tcase_create("cli_visibility");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_files_and_shards);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_slurm_array_script);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
