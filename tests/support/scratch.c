/* scratch.c - see scratch.h. */
#include "scratch.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char dir[64];

void rbt_scratch_make(const char *prefix)
{
    snprintf(dir, sizeof dir, "/tmp/%s-XXXXXX", prefix);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

void rbt_scratch_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

const char *rbt_scratch_dir(void)
{
    return dir;
}

void rbt_scratch_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

void rbt_scratch_write(const char *name, const void *p, size_t n)
{
    char path[128];
    rbt_scratch_path(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

unsigned char *rbt_scratch_read(const char *name, size_t *n)
{
    char path[128];
    rbt_scratch_path(path, sizeof path, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no %s", path);
    unsigned char *b = malloc(1 << 20);
    ck_assert_ptr_nonnull(b);
    *n = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

void rbt_scratch_expect(const char *name, const unsigned char *want,
                        size_t n, const char *what)
{
    size_t got_n;
    unsigned char *got = rbt_scratch_read(name, &got_n);
    ck_assert_msg(got_n == n, "%s: %zu bytes, want %zu", what, got_n, n);
    ck_assert_msg(memcmp(got, want, n) == 0, "%s: bytes differ", what);
    free(got);
}

size_t rbt_scratch_npy(const char *name, const float *v, size_t rows,
                       size_t cols)
{
    char dict[128];
    int n = snprintf(dict, sizeof dict,
                     "{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (%zu, %zu), }", rows, cols);
    size_t hlen = (size_t)n + 1;
    size_t pad = (64 - (10 + hlen) % 64) % 64;
    size_t total = 10 + hlen + pad + rows * cols * 4;
    unsigned char *b = malloc(total);
    ck_assert_ptr_nonnull(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)((hlen + pad) & 255);
    b[9] = (unsigned char)((hlen + pad) >> 8);
    memcpy(b + 10, dict, (size_t)n);
    memset(b + 10 + n, ' ', pad);
    b[10 + hlen + pad - 1] = '\n';
    memcpy(b + 10 + hlen + pad, v, rows * cols * 4);
    rbt_scratch_write(name, b, total);
    free(b);
    return 10 + hlen + pad;
}

size_t rbt_boxes_json(char *out, const rb_box *b, size_t n)
{
    size_t at = (size_t)sprintf(out, "\"boxes\":[");
    for (size_t i = 0; i < n; i++)
        at += (size_t)sprintf(out + at, "%s[%.9g,%.9g,%.9g,%.9g,%.9g,%.9g]",
                              i ? "," : "", b[i].min[0], b[i].min[1],
                              b[i].min[2], b[i].max[0], b[i].max[1],
                              b[i].max[2]);
    at += (size_t)sprintf(out + at, "]");
    return at;
}

int rbt_scratch_run(const char *program, const char *args, char *err,
                    size_t cap)
{
    char cmd[1024], errp[128];
    rbt_scratch_path(errp, sizeof errp, "err");
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>'%s'", dir, program,
             args, errp);
    int st = system(cmd);
    ck_assert(st != -1 && WIFEXITED(st));
    size_t n;
    unsigned char *e = rbt_scratch_read("err", &n);
    n = n < cap - 1 ? n : cap - 1;
    memcpy(err, e, n);
    err[n] = '\0';
    free(e);
    return WEXITSTATUS(st);
}
