/*
 * sbuf.h - a growable byte buffer for the server's small JSON and text
 * bodies (health, devices, scenes, metrics, log lines). Out of memory is
 * sticky: later appends do nothing and sbuf_failed() says so, so that a
 * caller checks once at the end.
 */
#ifndef RB_SBUF_H
#define RB_SBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct sbuf {
    char *data; /* NUL-terminated while not failed */
    size_t len, cap;
    int failed;
} sbuf;

void sbuf_init(sbuf *b);
void sbuf_free(sbuf *b);
/* Hands the bytes to the caller (free() them) and resets b; NULL when an
 * append failed. */
char *sbuf_take(sbuf *b, size_t *len);
int sbuf_failed(const sbuf *b);

void sbuf_add(sbuf *b, const char *s);
void sbuf_addn(sbuf *b, const char *s, size_t n);
void sbuf_printf(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* s as a JSON string, quotes included (NULL writes null). */
void sbuf_json_str(sbuf *b, const char *s);
/* A float32 as exact JSON text; +-inf and NaN as null. */
void sbuf_json_float(sbuf *b, float x);

#endif
