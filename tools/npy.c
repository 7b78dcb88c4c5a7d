/* npy.c - see npy.h. The header is a Python dict literal padded with
 * spaces; numpy writes it as {'descr': '<f4', 'fortran_order': False,
 * 'shape': (N, C), } and this reads exactly those three keys. */
#include "npy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

int npy_is_npy(const unsigned char *head, size_t len)
{
    return len >= 6 && memcmp(head, MAGIC, 6) == 0;
}

/* The text after 'key': in the header, NULL when absent. */
static const char *value_of(const char *h, const char *key)
{
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s'", key);
    const char *p = strstr(h, quoted);
    if (!p)
        return NULL;
    p = strchr(p + strlen(quoted), ':');
    if (!p)
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

int npy_read_header(FILE *f, size_t *rows, size_t *cols, char *why,
                    size_t why_len)
{
    *rows = 0;
    *cols = 0;
    unsigned char pre[12];
    if (fread(pre, 1, 8, f) != 8 || !npy_is_npy(pre, 8)) {
        snprintf(why, why_len, "not a .npy file");
        return -1;
    }
    size_t hlen;
    if (pre[6] == 1) {
        if (fread(pre + 8, 1, 2, f) != 2)
            goto short_file;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 8, 1, 4, f) != 4)
            goto short_file;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 |
               (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        snprintf(why, why_len, ".npy format version %u is not known",
                 pre[6]);
        return -1;
    }
    if (hlen > 1 << 20) {
        snprintf(why, why_len, ".npy header of %zu bytes", hlen);
        return -1;
    }
    char *h = malloc(hlen + 1);
    if (!h) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    if (fread(h, 1, hlen, f) != hlen) {
        free(h);
        goto short_file;
    }
    h[hlen] = '\0';
    const char *descr = value_of(h, "descr");
    const char *order = value_of(h, "fortran_order");
    const char *shape = value_of(h, "shape");
    unsigned long long n = 0, c = 0;
    int ok = descr && order && shape;
    if (ok && strncmp(descr, "'<f4'", 5) != 0) {
        snprintf(why, why_len, "the array's dtype is %.12s, not float32 "
                 "('<f4': use a.astype(numpy.float32))", descr);
        ok = -1;
    } else if (ok && strncmp(order, "False", 5) != 0) {
        snprintf(why, why_len, "the array is in Fortran order (save "
                 "numpy.ascontiguousarray(a))");
        ok = -1;
    } else if (ok && (sscanf(shape, "(%llu, %llu)", &n, &c) != 2 ||
                      c == 0 || c > 64)) {
        snprintf(why, why_len, "the array's shape is %.*s, not (N, C)",
                 (int)(strcspn(shape, ")") < 60 ? strcspn(shape, ")") + 1
                                                 : 60),
                 shape);
        ok = -1;
    }
    free(h);
    if (ok != 1) {
        if (!ok)
            snprintf(why, why_len, "the .npy header lacks descr, "
                     "fortran_order or shape");
        return -1;
    }
    if (n > SIZE_MAX / sizeof(float) / c) {
        snprintf(why, why_len, "%llu rows are too many", n);
        return -1;
    }
    *rows = (size_t)n;
    *cols = (size_t)c;
    return 0;
short_file:
    snprintf(why, why_len, "the .npy file is cut short");
    return -1;
}

int npy_read_f32(FILE *f, size_t cols, float **data, size_t *rows,
                 char *why, size_t why_len)
{
    *data = NULL;
    *rows = 0;
    size_t n, c;
    if (npy_read_header(f, &n, &c, why, why_len))
        return -1;
    if (c != cols) {
        snprintf(why, why_len, "the array's shape is (%zu, %zu), not (N, %zu)",
                 n, c, cols);
        return -1;
    }
    float *d = malloc((n ? n : 1) * cols * sizeof *d);
    if (!d) {
        snprintf(why, why_len, "out of memory for %zu rows", n);
        return -1;
    }
    if (fread(d, sizeof *d, n * cols, f) != n * cols) {
        free(d);
        goto short_file;
    }
    *data = d;
    *rows = n;
    return 0;
short_file:
    snprintf(why, why_len, "the .npy file is cut short");
    return -1;
}
