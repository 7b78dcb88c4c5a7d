/* test_opencl.c - the OpenCL backend: device listing and choice, context
 * info, kernel_dir override and build failures, the program binary cache,
 * and the backend against the CPU oracle on random edge-case batches in
 * every mode, 3D and 2D, inline boxes and scenes. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "opencl/cl_testhook.h"

#ifndef RAYBOX_SOURCE_KERNELS
#error "RAYBOX_SOURCE_KERNELS must name the source kernels/ directory"
#endif

/* ---- helpers */

static rb_context *cl_context(rb_context_options *opt)
{
    opt->backend = RB_BACKEND_OPENCL;
    rb_context *ctx = NULL;
    char why[512] = "";
    int rc = rb_context_create(opt, &ctx, why, sizeof why);
    ck_assert_msg(rc == RB_OK, "opencl context: %s (%s)", rb_status_name(rc),
                  why);
    return ctx;
}

static char *temp_dir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/rbtest-XXXXXX",
             base && *base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    ck_assert_msg(dir, "mkdtemp failed");
    return strdup(dir);
}

static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 ||
                    strcmp(e->d_name, "..") == 0)
                    continue;
                char sub[1024];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                remove_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* The one *.clbin file in dir (path into out); fails on none, several, or
 * a temporary file left behind. */
static void cache_file(const char *dir, char *out, size_t len)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d, "cache dir %s was not created", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        ck_assert_msg(strstr(e->d_name, ".tmp") == NULL,
                      "temporary file %s left in the cache", e->d_name);
        size_t l = strlen(e->d_name);
        if (l > 6 && strcmp(e->d_name + l - 6, ".clbin") == 0) {
            snprintf(out, len, "%s/%s", dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    ck_assert_msg(n == 1, "%d cache files in %s, expected 1", n, dir);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Every mode of a random batch on ctx equals the CPU backend's answer. */
static void check_against_cpu(rb_context *ctx, unsigned dims, size_t n_rays,
                              size_t n_boxes, uint32_t max_hits,
                              uint64_t seed, const char *what)
{
    rb_context *cpu = rbt_context(RBT_CPU);
    rb_backend_info info;
    rb_context_info(ctx, &info);
    rbt_batch b, p;
    rbt_batch_make(&b, dims, n_rays, n_boxes, seed);
    rbt_batch_make(&p, dims, n_rays, n_rays, seed + 1);
    for (int mode = RB_MODE_PAIRS; mode <= RB_MODE_ALL; mode++) {
        const rbt_batch *src = mode == RB_MODE_PAIRS ? &p : &b;
        rbt_out want, got;
        rbt_out_init(&want, n_rays, max_hits);
        rbt_out_init(&got, n_rays, max_hits);
        ck_assert_int_eq(rbt_run(cpu, src, (rb_mode)mode, NULL, &want),
                         RB_OK);
        int rc = rbt_run(ctx, src, (rb_mode)mode, NULL, &got);
        ck_assert_msg(rc == RB_OK, "%s %s: %s", what, rb_mode_name(mode),
                      rb_context_error(ctx)->message);
        ck_assert_str_eq(got.info.backend, info.backend);
        ck_assert_int_eq(got.info.fell_back, 0);
        char label[128];
        snprintf(label, sizeof label, "%s %uD", what, dims);
        rbt_assert_same((rb_mode)mode, &want, &got, label);
        rbt_out_free(&want);
        rbt_out_free(&got);
    }
    rbt_batch_free(&b);
    rbt_batch_free(&p);
    rb_context_destroy(cpu);
}

/* ---- devices */

START_TEST(test_devices_list)
{
    size_t count = 0;
    char why[256] = "x";
    ck_assert_int_eq(rb_devices_list(NULL, 0, &count, why, sizeof why),
                     RB_OK);
    ck_assert_msg(count >= 1, "no OpenCL device listed: %s", why);
    rb_device_desc *d = calloc(count + 1, sizeof *d);
    size_t again = 0;
    ck_assert_int_eq(rb_devices_list(d, count + 1, &again, NULL, 0), RB_OK);
    ck_assert_uint_eq(again, count);
    for (size_t i = 0; i < count; i++) {
        ck_assert_int_eq(d[i].index, (int)i);
        ck_assert_msg(d[i].name[0] && d[i].platform[0] && d[i].vendor[0] &&
                          d[i].driver[0],
                      "device %zu: empty name/platform/vendor/driver", i);
        ck_assert_msg(strncmp(d[i].version, "OpenCL ", 7) == 0,
                      "device %zu version \"%s\"", i, d[i].version);
        ck_assert_msg(strcmp(d[i].type, "gpu") == 0 ||
                          strcmp(d[i].type, "cpu") == 0 ||
                          strcmp(d[i].type, "accelerator") == 0 ||
                          strcmp(d[i].type, "other") == 0,
                      "device %zu type \"%s\"", i, d[i].type);
        ck_assert_uint_ge(d[i].compute_units, 1);
        ck_assert_uint_gt(d[i].global_mem, 0);
        ck_assert_uint_gt(d[i].max_alloc, 0);
        ck_assert_uint_le(d[i].max_alloc, d[i].global_mem);
        ck_assert(d[i].exact_division == 0 || d[i].exact_division == 1);
        ck_assert(d[i].denormals == 0 || d[i].denormals == 1);
        /* PoCL's CPU device divides exactly and keeps denormals. */
        if (strstr(d[i].platform, "Portable Computing Language"))
            ck_assert(d[i].exact_division && d[i].denormals);
    }
    /* A smaller array gets the first entries and the full count. */
    rb_device_desc one;
    ck_assert_int_eq(rb_devices_list(&one, 1, &again, NULL, 0), RB_OK);
    ck_assert_uint_eq(again, count);
    ck_assert_str_eq(one.name, d[0].name);
    ck_assert_int_eq(rb_devices_list(NULL, 1, &again, NULL, 0), RB_EINVAL);
    free(d);
}
END_TEST

START_TEST(test_context_by_index)
{
    rb_device_desc d[16];
    size_t count = 0;
    ck_assert_int_eq(rb_devices_list(d, 16, &count, NULL, 0), RB_OK);
    ck_assert_uint_ge(count, 1);
    for (size_t i = 0; i < count && i < 16; i++) {
        rb_context_options opt;
        rb_context_options_init(&opt);
        opt.device_index = (int)i;
        rb_context *ctx = cl_context(&opt);
        rb_backend_info info;
        ck_assert_int_eq(rb_context_info(ctx, &info), RB_OK);
        ck_assert_str_eq(info.backend, "opencl");
        ck_assert_str_eq(info.device, d[i].name);
        ck_assert_str_eq(info.platform, d[i].platform);
        ck_assert_str_eq(info.driver, d[i].driver);
        ck_assert_int_eq(info.is_gpu, strcmp(d[i].type, "gpu") == 0 ||
                                          strcmp(d[i].type, "accelerator") ==
                                              0);
        ck_assert_uint_eq(info.compute_units, d[i].compute_units);
        ck_assert_uint_eq(info.global_mem, d[i].global_mem);
        ck_assert_uint_eq(info.max_buffer_bytes, d[i].max_alloc);
        ck_assert_int_eq(info.denormals, d[i].denormals);
        if (d[i].exact_division)
            ck_assert_int_eq(info.exact_division, 1);
        ck_assert_str_eq(info.skipped, "");
        rb_context_destroy(ctx);
    }
}
END_TEST

START_TEST(test_context_by_name)
{
    rb_device_desc d;
    size_t count = 0;
    ck_assert_int_eq(rb_devices_list(&d, 1, &count, NULL, 0), RB_OK);
    ck_assert_uint_ge(count, 1);
    /* A substring of the name, in the other case. */
    size_t len = strlen(d.name);
    char part[64];
    size_t from = len > 6 ? 1 : 0, n = len - from < 5 ? len - from : 5;
    for (size_t k = 0; k < n; k++) {
        char c = d.name[from + k];
        part[k] = (char)(c >= 'a' && c <= 'z'   ? c - 32
                         : c >= 'A' && c <= 'Z' ? c + 32
                                                : c);
    }
    part[n] = '\0';
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.device_name = part;
    opt.device_index = 99; /* the name wins over the index */
    rb_context *ctx = cl_context(&opt);
    rb_backend_info info;
    rb_context_info(ctx, &info);
    ck_assert_str_eq(info.backend, "opencl");
    ck_assert_msg(strcmp(info.device, d.name) == 0 || count > 1,
                  "\"%s\" picked %s", part, info.device);
    rb_context_destroy(ctx);
}
END_TEST

START_TEST(test_unknown_device)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_OPENCL;
    opt.device_name = "no-such-device-in-this-machine";
    rb_context *ctx = (rb_context *)&opt; /* must be reset to NULL */
    char why[256] = "";
    ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why),
                     RB_ENODEV);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(why, "no-such-device-in-this-machine"),
                  "reason \"%s\" does not name the device", why);

    opt.device_name = NULL;
    opt.device_index = 4096;
    why[0] = '\0';
    ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why),
                     RB_ENODEV);
    ck_assert_msg(strstr(why, "4096"), "reason \"%s\"", why);

    /* auto with a device that is not there: the CPU serves, and says why. */
    opt.backend = RB_BACKEND_AUTO;
    opt.device_name = "no-such-device-in-this-machine";
    ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why), RB_OK);
    rb_backend_info info;
    rb_context_info(ctx, &info);
    ck_assert_str_eq(info.backend, "cpu");
    ck_assert_msg(strstr(info.skipped, "no-such-device"), "skipped \"%s\"",
                  info.skipped);
    rb_context_destroy(ctx);
}
END_TEST

/* auto takes a GPU or accelerator when there is one, else the CPU
 * backend (never PoCL on the same cores), with the reason. */
START_TEST(test_auto_choice)
{
    rb_device_desc d[16];
    size_t count = 0;
    ck_assert_int_eq(rb_devices_list(d, 16, &count, NULL, 0), RB_OK);
    int gpus = 0;
    for (size_t i = 0; i < count && i < 16; i++)
        gpus += strcmp(d[i].type, "gpu") == 0 ||
                strcmp(d[i].type, "accelerator") == 0;
    rb_context *ctx = NULL;
    ck_assert_int_eq(rb_context_create(NULL, &ctx, NULL, 0), RB_OK);
    rb_backend_info info;
    rb_context_info(ctx, &info);
    if (gpus) {
        ck_assert_str_eq(info.backend, "opencl");
        ck_assert_int_eq(info.is_gpu, 1);
    } else {
        ck_assert_str_eq(info.backend, "cpu");
        ck_assert_msg(strstr(info.skipped, "GPU"), "skipped \"%s\"",
                      info.skipped);
    }
    rb_context_destroy(ctx);
}
END_TEST

/* ---- results */

START_TEST(test_oracle)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    rb_context *ctx = cl_context(&opt);
    unsigned dims = _i == 0 ? 3 : 2;
    /* Small (one partial work-group), odd sizes, and a batch spanning
     * many work-groups and tiles; max_hits that truncates and one that
     * does not. */
    check_against_cpu(ctx, dims, 1, 1, 1, 11, "1x1");
    check_against_cpu(ctx, dims, 37, 3, 2, 12, "37x3");
    check_against_cpu(ctx, dims, 3001, 517, 3, 13, "3001x517");
    check_against_cpu(ctx, dims, 700, 300, 64, 14, "700x300 max_hits 64");
    check_against_cpu(ctx, dims, 65, 0, 2, 15, "65x0");
    rb_context_destroy(ctx);
}
END_TEST

/* A scene stays on the device across queries (cached by content
 * version): changing it must be seen by the next query. */
START_TEST(test_scene)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    rb_context *ctx = cl_context(&opt);
    rb_context *cpu = rbt_context(RBT_CPU);
    rbt_batch b;
    rbt_batch_make(&b, 3, 900, 400, 21);
    rb_scene *scene = NULL;
    ck_assert_int_eq(rb_scene_create(cpu, 3, b.boxes, b.n_boxes, &scene),
                     RB_OK);
    for (int round = 0; round < 3; round++) {
        for (int mode = RB_MODE_NEAREST; mode <= RB_MODE_ALL; mode++) {
            rbt_out want, got;
            rbt_out_init(&want, b.n_rays, 5);
            rbt_out_init(&got, b.n_rays, 5);
            ck_assert_int_eq(rbt_run(cpu, &b, (rb_mode)mode, scene, &want),
                             RB_OK);
            ck_assert_int_eq(rbt_run(ctx, &b, (rb_mode)mode, scene, &got),
                             RB_OK);
            rbt_assert_same((rb_mode)mode, &want, &got, "scene");
            rbt_out_free(&want);
            rbt_out_free(&got);
        }
        /* Move the first boxes onto the others, then append some. */
        if (round == 0) {
            uint32_t idx[50];
            rb_box moved[50];
            for (uint32_t k = 0; k < 50; k++) {
                idx[k] = k;
                moved[k] = ((rb_box *)b.boxes)[399 - k];
            }
            ck_assert_int_eq(rb_scene_set(cpu, scene, idx, moved, 50), RB_OK);
        } else if (round == 1) {
            ck_assert_int_eq(rb_scene_append(cpu, scene, b.boxes, 100),
                             RB_OK);
        }
    }
    rb_scene_destroy(scene);
    rbt_batch_free(&b);
    rb_context_destroy(cpu);
    rb_context_destroy(ctx);
}
END_TEST

START_TEST(test_run_info)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    rb_context *ctx = cl_context(&opt);
    rb_backend_info binfo;
    rb_context_info(ctx, &binfo);
    rbt_batch b;
    rbt_batch_make(&b, 3, 500, 40, 31);
    rbt_out o;
    rbt_out_init(&o, b.n_rays, 1);
    ck_assert_int_eq(rbt_run(ctx, &b, RB_MODE_COUNT, NULL, &o), RB_OK);
    ck_assert_str_eq(o.info.backend, "opencl");
    ck_assert_str_eq(o.info.device, binfo.device);
    ck_assert_int_eq(o.info.fell_back, 0);
    ck_assert_str_eq(o.info.fallback_reason, "");
    ck_assert_uint_eq(o.info.slab_tests, 500u * 40u);
    ck_assert_uint_eq(o.info.chunks, 1);
    ck_assert_msg(o.info.kernel_ms >= 0 && o.info.kernel_ms <= o.info.elapsed_ms,
                  "kernel_ms %g, elapsed_ms %g", o.info.kernel_ms,
                  o.info.elapsed_ms);
    /* Zero rays: nothing to launch. */
    rbt_batch e = b;
    e.n_rays = 0;
    ck_assert_int_eq(rbt_run(ctx, &e, RB_MODE_COUNT, NULL, &o), RB_OK);
    ck_assert_uint_eq(o.info.chunks, 0);
    rbt_out_free(&o);
    rbt_batch_free(&b);
    rb_context_destroy(ctx);
}
END_TEST

/* ---- program source and cache */

START_TEST(test_kernel_dir)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.kernel_dir = RAYBOX_SOURCE_KERNELS;
    opt.cache_dir = ""; /* a real build from these files */
    rb_context *ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 0);
    check_against_cpu(ctx, 3, 300, 120, 4, 41, "kernel_dir");
    rb_context_destroy(ctx);
}
END_TEST

START_TEST(test_broken_kernels)
{
    char *dir = temp_dir();
    write_text(dir, "exact.h", "\n");
    write_text(dir, "slab.cl", "this is not OpenCL C;\n");
    write_text(dir, "brute.cl", "__kernel void rb_pairs(void) { }\n");
    write_text(dir, "brute_wide.cl", "\n");
    write_text(dir, "bvh.cl", "\n");
    write_text(dir, "shapes.cl", "\n");
    write_text(dir, "visibility.cl", "\n");
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_OPENCL;
    opt.kernel_dir = dir;
    opt.cache_dir = "";
    rb_context *ctx = NULL;
    char why[256] = "";
    ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why),
                     RB_EBUILD);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(why[0], "no reason for the failed build");

    /* auto on a named device keeps the context on the CPU, with the log. */
    opt.backend = RB_BACKEND_AUTO;
    opt.device_index = 0;
    ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why), RB_OK);
    rb_backend_info info;
    rb_context_info(ctx, &info);
    ck_assert_str_eq(info.backend, "cpu");
    ck_assert_msg(strstr(info.skipped, "build failed"), "skipped \"%s\"",
                  info.skipped);
    const char *log = rb_context_build_log(ctx);
    ck_assert_msg(strlen(log) > 10, "build log \"%s\"", log);
    /* The CPU still answers. */
    check_against_cpu(ctx, 3, 50, 10, 2, 51, "after a failed build");
    rb_context_destroy(ctx);

    /* A directory without the files: a build error too, with a log. */
    remove_tree(dir);
    opt.backend = RB_BACKEND_AUTO;
    ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why), RB_OK);
    log = rb_context_build_log(ctx);
    ck_assert_msg(strstr(log, "exact.h"), "build log \"%s\"", log);
    rb_context_destroy(ctx);
    opt.backend = RB_BACKEND_OPENCL;
    ck_assert_int_eq(rb_context_create(&opt, &ctx, why, sizeof why),
                     RB_EBUILD);
    free(dir);
}
END_TEST

static void overwrite(const char *path, long offset, const char *bytes,
                      size_t n)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_msg(f, "cannot open %s", path);
    fseek(f, offset, SEEK_SET);
    fwrite(bytes, 1, n, f);
    fclose(f);
}

START_TEST(test_binary_cache)
{
    char *root = temp_dir();
    char dir[600], file[1024];
    snprintf(dir, sizeof dir, "%s/a/b", root); /* created on demand */
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.cache_dir = dir;

    rb_context *ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 0);
    rb_context_destroy(ctx);
    cache_file(dir, file, sizeof file);
    long size = file_size(file);
    ck_assert_int_gt(size, 24);

    /* A second context loads the binary, and it computes the same. */
    ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 1);
    check_against_cpu(ctx, 3, 400, 90, 3, 61, "cached binary");
    rb_context_destroy(ctx);

    /* A flipped payload byte: the checksum refuses it, the program is
     * built from source and the file rewritten. */
    overwrite(file, size / 2, "\x5a\xa5\x5a\xa5", 4);
    ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 0);
    check_against_cpu(ctx, 3, 100, 30, 2, 62, "rebuilt after corruption");
    rb_context_destroy(ctx);
    ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 1);
    rb_context_destroy(ctx);

    /* Truncated, then garbage from the start: the same. */
    ck_assert_int_eq(truncate(file, size / 3), 0);
    ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 0);
    rb_context_destroy(ctx);
    /* Rewritten whole, and loaded again. Not always to the byte: PoCL's
     * binary carries the kernels its own cache has compiled for the
     * program (a work-group size each), and that cache is shared with
     * the test processes CTest runs beside this one (POCL_CACHE_DIR), so
     * it only grows. */
    ck_assert_int_ge(file_size(file), size);
    ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 1);
    rb_context_destroy(ctx);
    overwrite(file, 0, "garbage!garbage!garbage!garbage!", 32);
    ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 0);
    rb_context_destroy(ctx);

    /* cache_dir "" disables the cache. */
    opt.cache_dir = "";
    ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 0);
    rb_context_destroy(ctx);

    /* An unwritable cache is not an error. */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/file", root);
    write_text(root, "file", "not a directory");
    opt.cache_dir = bad;
    ctx = cl_context(&opt);
    ck_assert_int_eq(rb_cl_program_from_cache(ctx), 0);
    rb_context_destroy(ctx);

    remove_tree(root);
    free(root);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("opencl");
    TCase *dev = tcase_create("devices");
    tcase_set_timeout(dev, 600);
    tcase_add_test(dev, test_devices_list);
    tcase_add_test(dev, test_context_by_index);
    tcase_add_test(dev, test_context_by_name);
    tcase_add_test(dev, test_unknown_device);
    tcase_add_test(dev, test_auto_choice);
    suite_add_tcase(s, dev);
    TCase *res = tcase_create("results");
    tcase_set_timeout(res, 600);
    tcase_add_loop_test(res, test_oracle, 0, 2);
    tcase_add_test(res, test_scene);
    tcase_add_test(res, test_run_info);
    suite_add_tcase(s, res);
    TCase *prog = tcase_create("program");
    tcase_set_timeout(prog, 600);
    tcase_add_test(prog, test_kernel_dir);
    tcase_add_test(prog, test_broken_kernels);
    tcase_add_test(prog, test_binary_cache);
    suite_add_tcase(s, prog);
    int failed = rbt_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
