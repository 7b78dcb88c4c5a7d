/* sbuf.c - see sbuf.h. */
#include "sbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float_text.h"
#include "json_text.h"

void sbuf_init(sbuf *b)
{
    memset(b, 0, sizeof *b);
}

void sbuf_free(sbuf *b)
{
    free(b->data);
    sbuf_init(b);
}

char *sbuf_take(sbuf *b, size_t *len)
{
    char *d = b->failed ? NULL : b->data;
    if (!d) {
        sbuf_free(b);
        /* An empty buffer still hands out a real (empty) string. */
        d = b->failed ? NULL : calloc(1, 1);
        if (len)
            *len = 0;
        return d;
    }
    if (len)
        *len = b->len;
    sbuf_init(b);
    return d;
}

int sbuf_failed(const sbuf *b)
{
    return b->failed;
}

static int reserve(sbuf *b, size_t more)
{
    if (b->failed)
        return -1;
    if (b->len + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

void sbuf_addn(sbuf *b, const char *s, size_t n)
{
    if (reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void sbuf_add(sbuf *b, const char *s)
{
    sbuf_addn(b, s, strlen(s));
}

void sbuf_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sbuf_json_str(sbuf *b, const char *s)
{
    if (!s) {
        sbuf_add(b, "null");
        return;
    }
    /* Escapes make a string at most 6x longer, plus quotes. */
    size_t cap = strlen(s) * 6 + 3;
    if (reserve(b, cap))
        return;
    b->len += rbj_quote(b->data + b->len, cap, s);
}

void sbuf_json_float(sbuf *b, float x)
{
    char t[RB_FLOAT_TEXT_MAX];
    if (!isfinite(x)) {
        sbuf_add(b, "null");
        return;
    }
    rb_float_format(x, t);
    sbuf_add(b, t);
}
