/* test_cli_intersect.c - `raybox intersect --rays RAYS --scene SCENE -o
 * OUT` as a real process: its file equals, byte for byte, the binary
 * answer made in this process from rb_intersect's results with the
 * server's codec (rbb_result_header, rbb_result_layout), for nearest, any
 * and count, from .npy rays of 8 numbers and of 6 (with --tmin/--tmax)
 * and from a binary request, against a .npy scene and a JSON scene with
 * spheres (nearest then carries kinds, version 2), with --normals (they
 * follow, version 2) and without; chunks smaller than
 * the file change nothing; shards written in any order into one file
 * equal one run, a shard run again changes nothing; and bad files exit 2
 * with one line naming the file and the offending ray or byte. RAYBOX_CLI
 * is the executable. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binary_codec.h"
#include "scratch.h"
#include "testutil.h"

#ifndef RAYBOX_CLI
#error "RAYBOX_CLI must name the raybox executable"
#endif

enum { G = 16, NB = G * G, NR = 1013 };

static rb_box boxes[NB];
static rb_ray rays[NR];
static rb_sphere spheres[2] = {{{8, 8, 2}, 3}, {{2, 12, 1}, 1.5f}};

/* A binary intersect request (3D, RANGES) of the rays alone, with the
 * given mode and box count: version 1, or with `normals` version 2 with
 * the NORMALS flag (its shape counts, bytes 64-95, all 0). */
static void write_request(const char *name, rb_mode mode, uint64_t n_boxes,
                          int normals)
{
    size_t hs = normals ? 96 : 64, n = hs + sizeof rays;
    unsigned char *b = calloc(1, n);
    rbb_header h = {.version = normals ? 2 : 1, .header_size = (uint16_t)hs,
                    .kind = RBB_KIND_INTERSECT, .mode = (uint8_t)mode,
                    .dims = 3,
                    .flags = RBB_FLAG_RANGES |
                             (normals ? RBB_FLAG_NORMALS : 0),
                    .n_rays = NR, .n_boxes = n_boxes};
    rbb_header_encode(&h, b);
    memcpy(b + hs, rays, sizeof rays);
    rbt_scratch_write(name, b, n);
    free(b);
}

static int run(const char *args, char *err, size_t cap)
{
    return rbt_scratch_run(RAYBOX_CLI, args, err, cap);
}

static void setup(void)
{
    rbt_scratch_make("raybox-isect");
    rbt_rng g = {11};
    for (int i = 0; i < NB; i++) {
        float x = (float)(i % G), y = (float)(i / G);
        boxes[i] = (rb_box){{x, y, 0}, {x + 0.8f, y + 0.8f,
                                        rbt_uniform(&g, 0.5f, 4)}};
    }
    static const float tmax[3] = {1, 2, INFINITY};
    for (int i = 0; i < NR; i++) {
        rb_ray *r = &rays[i];
        for (int k = 0; k < 3; k++) {
            r->origin[k] = rbt_uniform(&g, -3, k < 2 ? G + 3 : 5);
            r->dir[k] = rbt_uniform(&g, 0, k < 2 ? G : 3) - r->origin[k];
        }
        r->tmin = (float)rbt_below(&g, 2) * 0.25f;
        r->tmax = tmax[rbt_below(&g, 3)];
    }
    rbt_scratch_npy("city.npy", (const float *)boxes, NB, 6);
    rbt_scratch_npy("rays8.npy", (const float *)rays, NR, 8);
    float *six = malloc(NR * 6 * sizeof *six);
    for (int i = 0; i < NR; i++)
        memcpy(six + 6 * i, &rays[i], 6 * sizeof *six);
    rbt_scratch_npy("rays6.npy", six, NR, 6);
    free(six);
    write_request("any.rbox", RB_MODE_ANY, 0, 0);
    write_request("normals.rbox", RB_MODE_NEAREST, 0, 1);
    /* a JSON scene of the first 100 boxes and two spheres, %.9g: float32
     * round trips */
    char *json = malloc(100 * 120 + 256);
    size_t at = (size_t)sprintf(json, "{");
    at += rbt_boxes_json(json + at, boxes, 100);
    at += (size_t)sprintf(json + at, ",\"spheres\":[[8,8,2,3],[2,12,1,1.5]]}");
    rbt_scratch_write("shapes.json", json, at);
    free(json);
}

static void teardown(void)
{
    rbt_scratch_remove();
}

/* The answer rb_intersect gives in this process, in the binary layout
 * the server's codec writes (without run-dependent fields): rays r, the
 * boxes (n_boxes of them) and, when with_spheres, the two spheres. */
static unsigned char *expected(rb_mode mode, const rb_ray *r, size_t n_boxes,
                               int with_spheres, int normals, size_t *n)
{
    rb_context *ctx = rbt_context(RBT_CPU);
    rb_scene *scene = NULL;
    rb_shapes sh = {0};
    if (with_spheres) {
        sh.spheres = spheres;
        sh.n_spheres = 2;
    }
    ck_assert_int_eq(rb_scene_create_shapes(ctx, 3, boxes, n_boxes, &sh,
                                            &scene), RB_OK);
    static rb_hit hits[NR];
    static uint8_t any[NR], kinds[NR];
    static uint32_t counts[NR];
    static float norm[3 * NR];
    rb_results res = {.hits = hits, .any = any, .counts = counts,
                      .kinds = with_spheres ? kinds : NULL,
                      .normals = normals ? norm : NULL, .capacity = NR};
    rb_query q = {.mode = mode, .dims = 3, .rays = r, .n_rays = NR,
                  .scene = scene, .outputs = normals ? RB_OUTPUT_NORMAL : 0};
    ck_assert_int_eq(rb_intersect(ctx, &q, &res), RB_OK);
    int v2 = (with_spheres || normals) && mode == RB_MODE_NEAREST;
    rbb_result_info info = {.version = v2 ? RBB_VERSION_2 : RBB_VERSION,
                            .mode = mode, .dims = 3, .n_rays = NR,
                            .has_kinds = with_spheres,
                            .has_normals = normals};
    unsigned char *b = malloc(RBB_HEADER_MAX + NR * 29);
    size_t at = rbb_result_header(&info, b);
    const void *part[RBB_PARTS_MAX];
    size_t bytes[RBB_PARTS_MAX];
    int parts = rbb_result_layout(&info, &res, part, bytes);
    for (int k = 0; k < parts; k++) {
        memcpy(b + at, part[k], bytes[k]);
        at += bytes[k];
    }
    *n = at;
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    return b;
}

START_TEST(test_answers_equal_the_library)
{
    setup();
    char err[1024];
    static const rb_mode modes[3] = {RB_MODE_NEAREST, RB_MODE_ANY,
                                     RB_MODE_COUNT};
    for (int k = 0; k < 3; k++) {
        size_t n;
        unsigned char *want = expected(modes[k], rays, NB, 0, 0, &n);
        char args[256];
        snprintf(args, sizeof args, "intersect --rays rays8.npy --scene "
                 "city.npy -o %s.bin --mode %s --chunk 100 --backend cpu",
                 rb_mode_name(modes[k]), rb_mode_name(modes[k]));
        ck_assert_int_eq(run(args, err, sizeof err), 0);
        ck_assert_msg(strstr(err, "1013/1013 rays (100%)"), "progress: %s",
                      err);
        snprintf(args, sizeof args, "%s.bin", rb_mode_name(modes[k]));
        rbt_scratch_expect(args, want, n, rb_mode_name(modes[k]));
        free(want);
    }
    /* 6-number rays get --tmin/--tmax */
    static rb_ray ranged[NR];
    for (int i = 0; i < NR; i++) {
        ranged[i] = rays[i];
        ranged[i].tmin = 0.5f;
        ranged[i].tmax = 3;
    }
    size_t n;
    unsigned char *want = expected(RB_MODE_COUNT, ranged, NB, 0, 0, &n);
    ck_assert_int_eq(run("intersect --rays rays6.npy --scene city.npy -o "
                         "six.bin --mode count --tmin 0.5 --tmax 3 --quiet",
                         err, sizeof err), 0);
    ck_assert_str_eq(err, "");
    rbt_scratch_expect("six.bin", want, n, "6-number rays");
    free(want);
    /* a binary request: its mode (any) is the job's */
    want = expected(RB_MODE_ANY, rays, NB, 0, 0, &n);
    ck_assert_int_eq(run("intersect --rays any.rbox --scene city.npy -o "
                         "req.bin --quiet", err, sizeof err), 0);
    rbt_scratch_expect("req.bin", want, n, "a binary request");
    free(want);
    /* spheres: nearest carries kinds (version 2) */
    want = expected(RB_MODE_NEAREST, rays, 100, 1, 0, &n);
    ck_assert_int_eq(run("intersect --rays rays8.npy --scene shapes.json -o "
                         "kinds.bin --chunk 333 --quiet", err, sizeof err),
                     0);
    rbt_scratch_expect("kinds.bin", want, n, "a scene with spheres");
    free(want);
    /* --normals: kinds, then normals, in each chunk's place */
    want = expected(RB_MODE_NEAREST, rays, 100, 1, 1, &n);
    ck_assert_int_eq(run("intersect --rays rays8.npy --scene shapes.json -o "
                         "normals.bin --normals --chunk 333 --quiet", err,
                         sizeof err), 0);
    rbt_scratch_expect("normals.bin", want, n, "normals with spheres");
    free(want);
    want = expected(RB_MODE_NEAREST, rays, NB, 0, 1, &n);
    ck_assert_int_eq(run("intersect --rays rays8.npy --scene city.npy -o "
                         "box_normals.bin --normals --quiet", err,
                         sizeof err), 0);
    rbt_scratch_expect("box_normals.bin", want, n, "normals of boxes");
    ck_assert_int_eq(run("intersect --rays normals.rbox --scene city.npy -o "
                         "req_normals.bin --quiet", err, sizeof err), 0);
    rbt_scratch_expect("req_normals.bin", want, n, "a request's NORMALS");
    free(want);

    rb_context *cl = rbt_context(RBT_OPENCL);
    if (cl) {
        rb_context_destroy(cl);
        want = expected(RB_MODE_NEAREST, rays, NB, 0, 0, &n);
        ck_assert_int_eq(run("intersect --rays rays8.npy --scene city.npy "
                             "-o cl.bin --backend opencl --quiet",
                             err, sizeof err), 0);
        rbt_scratch_expect("cl.bin", want, n, "opencl");
        free(want);
    }
    teardown();
}
END_TEST

START_TEST(test_shards)
{
    setup();
    char err[1024];
    size_t n;
    unsigned char *want = expected(RB_MODE_NEAREST, rays, NB, 0, 0, &n);
    static const int order[5] = {3, 0, 4, 2, 1};
    for (int k = 0; k < 5; k++) {
        char args[256];
        snprintf(args, sizeof args, "intersect --rays rays8.npy --scene "
                 "city.npy -o sh.bin --shard %d/5 --chunk 64 --quiet",
                 order[k]);
        ck_assert_int_eq(run(args, err, sizeof err), 0);
    }
    rbt_scratch_expect("sh.bin", want, n, "five shards");
    ck_assert_int_eq(run("intersect --rays rays8.npy --scene city.npy -o "
                         "sh.bin --shard 2/5 --quiet", err, sizeof err), 0);
    rbt_scratch_expect("sh.bin", want, n, "a shard run again");
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

START_TEST(test_bad_files)
{
    setup();
    /* ray 700's dir z is NaN, at byte data + 700 * 32 + 20 */
    static rb_ray bad[NR];
    memcpy(bad, rays, sizeof bad);
    bad[700].dir[2] = NAN;
    size_t at = rbt_scratch_npy("nan.npy", (const float *)bad, NR, 8);
    char text[128];
    snprintf(text, sizeof text, "rays 'nan.npy': ray 700 (byte %zu): dir z "
             "is NaN", at + 700 * 32);
    expect_error("intersect --rays nan.npy --scene city.npy -o x.bin "
                 "--chunk 256", 2, text);
    rbt_scratch_npy("seven.npy", (const float *)rays, 10, 7);
    expect_error("intersect --rays seven.npy --scene city.npy -o x.bin", 2,
                 "rays 'seven.npy': the array's shape is (10, 7), not (N, 6) "
                 "or (N, 8)");
    /* a .npy cut in ray 5 */
    size_t len;
    unsigned char *b = rbt_scratch_read("rays8.npy", &len);
    rbt_scratch_write("cut.npy", b, at + 5 * 32 + 7);
    free(b);
    snprintf(text, sizeof text, "rays 'cut.npy': 1013 rays of 8 float32 "
             "from byte %zu need %zu bytes; the file ends at byte %zu, in "
             "ray 5", at, at + NR * 32, at + 5 * 32 + 7);
    expect_error("intersect --rays cut.npy --scene city.npy -o x.bin", 2,
                 text);
    write_request("boxes.rbox", RB_MODE_NEAREST, 3, 0);
    expect_error("intersect --rays boxes.rbox --scene city.npy -o x.bin", 2,
                 "rays 'boxes.rbox': byte 24: the request carries elements");
    write_request("pairs.rbox", RB_MODE_PAIRS, 0, 0);
    expect_error("intersect --rays pairs.rbox --scene city.npy -o x.bin", 2,
                 "rays 'pairs.rbox': byte 9: mode pairs is not one of");
    expect_error("intersect --rays rays8.npy --scene city.npy -o x.bin "
                 "--normals --mode count", 2,
                 "--normals: normals are answered in nearest mode only, not "
                 "count");
    write_request("any_normals.rbox", RB_MODE_ANY, 0, 1);
    expect_error("intersect --rays any_normals.rbox --scene city.npy -o "
                 "x.bin", 2, "any_normals.rbox: normals are answered in "
                 "nearest mode only, not any");
    rbt_scratch_write("text.txt", "hello, world", 12);
    expect_error("intersect --rays text.txt --scene city.npy -o x.bin", 2,
                 "rays 'text.txt': neither a .npy file nor a binary request");
    expect_error("intersect --rays rays8.npy --scene nan.npy -o x.bin", 2,
                 "scene 'nan.npy': the array's shape is (1013, 8), not "
                 "(N, 6)");
    expect_error("intersect --rays rays8.npy -o x.bin", 1,
                 "needs --rays FILE, --scene FILE and -o OUT");
    expect_error("intersect --rays rays8.npy --scene city.npy -o x.bin "
                 "--mode all", 1, "--mode 'all': nearest, any or count");
    expect_error("intersect --rays missing.npy --scene city.npy -o x.bin", 1,
                 "rays 'missing.npy': No such file");
    teardown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_intersect");
    TCase *tc = tcase_create("cli_intersect");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_answers_equal_the_library);
    tcase_add_test(tc, test_shards);
    tcase_add_test(tc, test_bad_files);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
