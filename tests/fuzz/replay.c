/* replay.c - test_fuzz_replay: the libFuzzer targets without libFuzzer.
 *
 * Links fuzz_json_request.c and fuzz_binary_request.c (their entry points
 * renamed by the build) and calls each on every file of its seed and
 * corpus directories, tests/fuzz/seeds/<target>/ and
 * tests/fuzz/corpus/<target>/ (either may be missing), in name order. A
 * target's own checks abort(); ASan, LSan and UBSan in the CI build do
 * the rest. So every input the fuzzers ever kept, and every crash fixed
 * with a regression seed, runs in every `make test`, with gcc.
 *
 *   test_fuzz_replay                      the directories above
 *   test_fuzz_replay TARGET FILE|DIR...   those inputs (a crash file)
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rb_fuzz_json_request(const uint8_t *data, size_t size);
int rb_fuzz_binary_request(const uint8_t *data, size_t size);

static const struct {
    const char *name;
    int (*run)(const uint8_t *, size_t);
} targets[] = {{"json_request", rb_fuzz_json_request},
               {"binary_request", rb_fuzz_binary_request}};

/* Runs one file; 0, or -1 when it cannot be read. */
static int run_file(int t, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (!b)
                free(buf);
            buf = b;
        }
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (!bad)
        targets[t].run(buf, n);
    free(buf);
    return bad ? -1 : 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir, in name order; the count, or -1. A missing
 * directory counts 0 when it may be missing. */
static long run_dir(int t, const char *dir, int may_miss)
{
    DIR *d = opendir(dir);
    if (!d)
        return may_miss ? 0 : -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **m = realloc(names, (cap = cap ? 2 * cap : 64) *
                                          sizeof *names);
            if (!m)
                abort();
            names = m;
        }
        if (!(names[n++] = strdup(e->d_name)))
            abort();
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    long done = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (run_file(t, path) == 0)
            done++;
        else
            fprintf(stderr, "replay: cannot read %s\n", path), done = -1;
        free(names[i]);
        if (done < 0)
            break;
    }
    free(names);
    return done;
}

int main(int argc, char **argv)
{
    if (argc >= 3) {
        for (int t = 0; t < 2; t++) {
            if (strcmp(argv[1], targets[t].name) != 0)
                continue;
            for (int i = 2; i < argc; i++)
                if (run_dir(t, argv[i], 0) < 0 && run_file(t, argv[i]) < 0) {
                    fprintf(stderr, "replay: cannot read %s\n", argv[i]);
                    return 1;
                }
            printf("replay %s: %d arguments, no failure\n", argv[1],
                   argc - 2);
            return 0;
        }
        fprintf(stderr, "replay: no target %s (json_request, "
                        "binary_request)\n", argv[1]);
        return 2;
    }
    long total = 0;
    for (int t = 0; t < 2; t++) {
        const char *kinds[] = {"seeds", "corpus"};
        for (int k = 0; k < 2; k++) {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s/%s/%s", RAYBOX_FUZZ_DIR, kinds[k],
                     targets[t].name);
            long n = run_dir(t, dir, k == 1);
            if (n < 0) {
                fprintf(stderr, "replay: cannot read %s\n", dir);
                return 1;
            }
            printf("replay %s: %ld inputs of %s\n", targets[t].name, n, dir);
            total += n;
        }
    }
    printf("replay: %ld inputs, no failure\n", total);
    return total > 0 ? 0 : 1;
}
