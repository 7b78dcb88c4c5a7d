/* test_cli.c - the batch CLI (tools/raybox.c), run as a real process:
 * exit statuses, stdout bytes (up to "meta"), the one-line error message
 * naming the element, devices, help and version. RAYBOX_CLI is the path of
 * build/bin/raybox (a compile definition). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#ifndef RAYBOX_CLI
#error "RAYBOX_CLI must name the raybox executable"
#endif

static char dir[64];
static char out_text[1 << 16], err_text[1 << 16];

static void make_dir(void)
{
    strcpy(dir, "/tmp/raybox-cli-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    static const char *const names[] = {"req.json", "out", "err"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void read_file(const char *name, char *buf, size_t cap)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Writes the request file (when body is not NULL). */
static void write_request(const char *body)
{
    char path[128];
    snprintf(path, sizeof path, "%s/req.json", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(body, f);
    fclose(f);
}

/* Runs `raybox ARGS` with stdin from the request file (or /dev/null),
 * and returns its exit status; stdout and stderr land in out_text and
 * err_text. */
static int run(const char *args, int request_on_stdin)
{
    char cmd[1024], in[128];
    if (request_on_stdin)
        snprintf(in, sizeof in, "%s/req.json", dir);
    else
        snprintf(in, sizeof in, "/dev/null");
    snprintf(cmd, sizeof cmd, "'%s' %s <'%s' >'%s/out' 2>'%s/err'",
             RAYBOX_CLI, args, in, dir, dir);
    int st = system(cmd);
    ck_assert_msg(st != -1 && WIFEXITED(st), "%s did not exit", cmd);
    read_file("out", out_text, sizeof out_text);
    read_file("err", err_text, sizeof err_text);
    return WEXITSTATUS(st);
}

static int run_file(const char *options)
{
    char args[512];
    snprintf(args, sizeof args, "intersect %s '%s/req.json'", options, dir);
    return run(args, 0);
}

/* stdout is `want` followed by the meta object and a newline. */
static void expect_response(const char *want)
{
    size_t n = strlen(want);
    ck_assert_msg(strncmp(out_text, want, n) == 0, "\n got %s\nwant %s",
                  out_text, want);
    const char *meta = ",\"meta\":{\"backend\":\"cpu\",\"device\":";
    ck_assert_msg(strncmp(out_text + n, meta, strlen(meta)) == 0,
                  "no meta: %s", out_text + n);
    const char *tail = out_text + strlen(out_text) - 3;
    ck_assert_str_eq(tail, "}}\n");
    ck_assert_msg(strstr(out_text, "\"fell_back\":false") != NULL, "%s",
                  out_text);
}

/* stderr is exactly one line: "raybox: <prefix>...<suffix>\n". */
static void expect_one_line(const char *prefix, const char *suffix)
{
    size_t n = strlen(err_text), s = strlen(suffix);
    ck_assert_msg(strncmp(err_text, prefix, strlen(prefix)) == 0,
                  "stderr '%s' lacks prefix '%s'", err_text, prefix);
    ck_assert_msg(n > s + 1 && strncmp(err_text + n - s - 1, suffix, s) == 0,
                  "stderr '%s' lacks suffix '%s'", err_text, suffix);
    ck_assert_msg(strchr(err_text, '\n') == err_text + n - 1,
                  "stderr is not one line: '%s'", err_text);
    ck_assert_str_eq(out_text, "");
}

#define NEAREST_BODY                                                           \
    "{\"mode\":\"nearest\",\"rays\":[[0,0,0,1,0,0],[0,5,0,1,0,0]],"            \
    "\"boxes\":[[4,-1,-1,6,1,1]]}"
#define NEAREST_OUT                                                            \
    "{\"mode\":\"nearest\",\"count\":2,\"hit\":[true,false],\"box\":[0,-1],"   \
    "\"t_enter\":[4.0,null],\"t_exit\":[6.0,null],\"face\":[\"-x\",null],"     \
    "\"exit_face\":[\"+x\",null]"

/* --devices: a bad list is one line naming it; PoCL's two devices split
 * the batch (meta names both) and answer as one. */
START_TEST(test_intersect_devices)
{
    make_dir();
    write_request(NEAREST_BODY);
    ck_assert_int_eq(run_file("--backend opencl --devices 0,0"), 1);
    expect_one_line("raybox: ", "device 0 listed twice (invalid_argument)");
    setenv("POCL_DEVICES", "pthread pthread", 1);
    int rc = run_file("--backend opencl --devices all");
    unsetenv("POCL_DEVICES");
    ck_assert_msg(rc == 0, "%s", err_text);
    ck_assert_msg(strncmp(out_text, NEAREST_OUT, strlen(NEAREST_OUT)) == 0,
                  "%s", out_text);
    ck_assert_msg(strstr(out_text, "\"backend\":\"opencl\"") &&
                      strstr(out_text, " + "),
                  "%s", out_text);
    remove_dir();
}
END_TEST

START_TEST(test_intersect_file_and_stdin)
{
    make_dir();
    write_request(NEAREST_BODY);
    ck_assert_int_eq(run_file("--backend cpu"), 0);
    expect_response(NEAREST_OUT);
    ck_assert_str_eq(err_text, "");
    ck_assert_int_eq(run("intersect --backend cpu", 1), 0);
    expect_response(NEAREST_OUT);
    ck_assert_int_eq(run("intersect --backend=cpu", 1), 1); /* no '=' form */
    ck_assert_int_eq(run("intersect --backend cpu -", 1), 0);
    expect_response(NEAREST_OUT);
    remove_dir();
}
END_TEST

START_TEST(test_intersect_modes)
{
    make_dir();
    write_request("{\"mode\":\"all\",\"dims\":2,\"rays\":[[0,0,1,0],"
                  "[0,0,-1,0,0,null]],\"boxes\":[[4,-1,6,1],[2,-1,3,1],"
                  "[7,-1,8,1]]}");
    ck_assert_int_eq(run_file("--backend cpu --max-hits 2"), 0);
    expect_response("{\"mode\":\"all\",\"count\":2,\"hits\":[[[1,2.0,3.0],"
                    "[0,4.0,6.0]],[]],\"total\":[3,0],"
                    "\"truncated\":[true,false]");
    /* The request's max_hits wins over the option. */
    write_request("{\"mode\":\"all\",\"max_hits\":3,\"dims\":2,\"rays\":"
                  "[[0,0,1,0]],\"boxes\":[[4,-1,6,1],[2,-1,3,1],[7,-1,8,1]]}");
    ck_assert_int_eq(run_file("--backend cpu --max-hits 1"), 0);
    expect_response("{\"mode\":\"all\",\"count\":1,\"hits\":[[[1,2.0,3.0],"
                    "[0,4.0,6.0],[2,7.0,8.0]]],\"total\":[3],"
                    "\"truncated\":[false]");
    write_request("{\"mode\":\"count\",\"rays\":[[0,0,0,1,0,0],"
                  "[0,0,0,1,0,0,0,3]],\"boxes\":[[1,-1,-1,2,1,1],"
                  "[4,-1,-1,6,1,1]]}");
    ck_assert_int_eq(run_file("--backend cpu"), 0);
    expect_response("{\"mode\":\"count\",\"count\":2,\"hits\":[2,1]");
    write_request("{\"mode\":\"pairs\",\"rays\":[[0,0,0,1,0,0],"
                  "[0.5,0.5,0.5,0,0,0]],\"boxes\":[[1,-1,-1,2,1,1],"
                  "[0,0,0,1,1,1]]}");
    ck_assert_int_eq(run_file("--backend cpu"), 0);
    expect_response("{\"mode\":\"pairs\",\"count\":2,\"hit\":[true,true],"
                    "\"t_enter\":[1.0,0.0],\"t_exit\":[2.0,null],"
                    "\"face\":[\"-x\",null],\"exit_face\":[\"+x\",null]");
    write_request("{\"mode\":\"any\",\"rays\":[[0,0,0,1,0,0,0,0.5]],"
                  "\"boxes\":[[1,-1,-1,2,1,1]]}");
    ck_assert_int_eq(run_file("--backend cpu"), 0);
    expect_response("{\"mode\":\"any\",\"count\":1,\"hit\":[false]");
    remove_dir();
}
END_TEST

START_TEST(test_bad_requests)
{
    make_dir();
    /* The library refuses ray 1 (R6); the message names its field. */
    write_request("{\"rays\":[[0,0,0,1,0,0],[0,0,0,1,0,0,5,1]],"
                  "\"boxes\":[[4,-1,-1,6,1,1]]}");
    ck_assert_int_eq(run_file("--backend cpu"), 2);
    expect_one_line("raybox: /rays/1/6: tmin (5) > tmax (1)", " (422)");
    write_request("{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[[4,-1,-1,6,1,1],"
                  "[0,0,3,1,1,1]]}");
    ck_assert_int_eq(run_file("--backend cpu"), 2);
    expect_one_line("raybox: /boxes/1/2: min z (3) > max z (1)", " (422)");
    write_request("{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[],\"tmin\":2,"
                  "\"tmax\":1}");
    ck_assert_int_eq(run_file("--backend cpu"), 2);
    expect_one_line("raybox: /tmin: tmin (2.0) > tmax (1.0)", " (422)");
    /* The parser's verdicts. */
    write_request("{\"rays\":[[0,0,0,1,0,1e39]],\"boxes\":[]}");
    ck_assert_int_eq(run_file("--backend cpu"), 2);
    expect_one_line("raybox: /rays/0/5: 1e39 is beyond", " (422)");
    write_request("{\"rays\":[[0,0,0,1,0,NaN]],\"boxes\":[]}");
    ck_assert_int_eq(run_file("--backend cpu"), 2);
    expect_one_line("raybox: /rays/0/5: malformed JSON at byte 21", " (400)");
    write_request("{\"rays\":[[0,0,0,1,");
    ck_assert_int_eq(run("intersect --backend cpu", 1), 2);
    expect_one_line("raybox: /rays/0/4: body cut short", " (400)");
    write_request("");
    ck_assert_int_eq(run_file("--backend cpu"), 2);
    expect_one_line("raybox: empty body", " (400)");
    write_request("{\"rays\":[[0,0,0,1,0,0]],\"scene\":\"s1\"}");
    ck_assert_int_eq(run_file("--backend cpu"), 2);
    expect_one_line("raybox: /scene: the CLI has no scene store", " (422)");
    remove_dir();
}
END_TEST

START_TEST(test_other_failures)
{
    make_dir();
    ck_assert_int_eq(run("intersect --backend cpu /nonexistent/req.json", 0),
                     1);
    ck_assert_msg(strstr(err_text, "/nonexistent/req.json") != NULL, "%s",
                  err_text);
    ck_assert_int_eq(run("intersect --backend gpu", 0), 1);
    ck_assert_int_eq(run("intersect --max-hits 0", 0), 1);
    ck_assert_int_eq(run("intersect --bogus", 0), 1);
    ck_assert_int_eq(run("intersect a b", 0), 1);
    ck_assert_int_eq(run("frobnicate", 0), 1);
    ck_assert_int_eq(run("", 0), 1);
    ck_assert_int_eq(run("devices extra", 0), 1);
    remove_dir();
}
END_TEST

START_TEST(test_devices_help_version)
{
    make_dir();
    ck_assert_int_eq(run("devices", 0), 0);
    ck_assert_msg(strstr(out_text, "OpenCL devices:") != NULL, "%s", out_text);
    ck_assert_msg(strstr(out_text, "CPU backend:") != NULL, "%s", out_text);
    ck_assert_msg(strchr(out_text, '*') != NULL, "nothing marked: %s",
                  out_text);
    ck_assert_int_eq(run("--help", 0), 0);
    ck_assert_msg(strncmp(out_text, "usage: raybox", 13) == 0, "%s", out_text);
    ck_assert_int_eq(run("intersect --help", 0), 0);
    ck_assert_msg(strstr(out_text, "--max-hits") != NULL, "%s", out_text);
    ck_assert_int_eq(run("devices --help", 0), 0);
    ck_assert_msg(strncmp(out_text, "usage: raybox devices", 21) == 0, "%s",
                  out_text);
    ck_assert_int_eq(run("--version", 0), 0);
    ck_assert_str_eq(out_text, "raybox " RB_VERSION_STRING "\n");
    remove_dir();
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_add_test(tc, test_intersect_file_and_stdin);
    tcase_add_test(tc, test_intersect_devices);
    tcase_add_test(tc, test_intersect_modes);
    tcase_add_test(tc, test_bad_requests);
    tcase_add_test(tc, test_other_failures);
    tcase_add_test(tc, test_devices_help_version);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = rbt_run_suite(cli_suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
