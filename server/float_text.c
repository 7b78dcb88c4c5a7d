/*
 * float_text.c - see float_text.h.
 *
 * Output: no shortest-round-trip formatter for C is packaged in Debian 12,
 * so this tries %.6g, %.7g, %.8g and %.9g and keeps the first that strtof
 * reads back exactly (%.9g always does: FLT_DECIMAL_DIG is 9). %.Ng is the
 * N-digit decimal nearest to x, so it reads back whenever some N-digit text
 * does (bar the narrower rounding interval just below a power of two), and
 * %g drops trailing zeros, so short values stay short ("0.1").
 * Small integers skip snprintf; they print exactly as %.6g would.
 */
#include "float_text.h"

#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static locale_t c_locale = (locale_t)0;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void)
{
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

/* Switches the calling thread to the C locale (the decimal point of
 * strtof and printf is locale-dependent) and returns what to restore. If
 * newlocale failed the thread keeps its locale: a program that never calls
 * setlocale runs in "C" anyway. */
static locale_t enter_c_locale(void)
{
    pthread_once(&c_locale_once, make_c_locale);
    return c_locale ? uselocale(c_locale) : (locale_t)0;
}

static void leave_c_locale(locale_t old)
{
    if (old)
        uselocale(old);
}

static int same_bits(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x == y;
}

/* |x| < 1e6 and integral: the digits, then ".0". */
static size_t format_small_int(float x, char *out)
{
    char digits[8];
    size_t n = 0, len = 0;
    uint32_t v = (uint32_t)fabsf(x);
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (signbit(x))
        out[len++] = '-';
    while (n)
        out[len++] = digits[--n];
    memcpy(out + len, ".0", 3);
    return len + 2;
}

/* "1.5e-07" -> "1.5e-7", "1e+06" -> "1e6"; no '.' nor 'e' -> append ".0". */
static size_t tidy(char *s, size_t len)
{
    char *e = strchr(s, 'e');
    if (!e) {
        if (!strchr(s, '.')) {
            memcpy(s + len, ".0", 3);
            len += 2;
        }
        return len;
    }
    char *src = e + 1, *dst = e + 1;
    if (*src == '+')
        src++;
    else if (*src == '-')
        *dst++ = *src++;
    while (*src == '0' && src[1])
        src++;
    while (*src)
        *dst++ = *src++;
    *dst = '\0';
    return (size_t)(dst - s);
}

/* %.<digits>g into out; 1 if strtof reads it back to x. */
static int try_digits(float x, int digits, char *out, int *len)
{
    *len = snprintf(out, RB_FLOAT_TEXT_MAX, "%.*g", digits, (double)x);
    return same_bits(strtof(out, NULL), x);
}

/* The shortest of %.6g..%.9g that reads back. Where the rounding interval
 * around x is symmetric, a form that reads back implies the next longer
 * one does too (it is at least as close to x), so a search that starts at
 * 8 digits gives the linear search's answer in about two tries instead of
 * three or four (most floats need 8 or 9). Powers of two (a narrower
 * interval below) and subnormals (fewer bits: start from 1 digit, so
 * 1e-40 rather than 9.99995e-41) take the plain linear search. */
static int shortest_digits(float x, char *out)
{
    char alt[RB_FLOAT_TEXT_MAX];
    int len, alt_len;
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if (fabsf(x) < FLT_MIN || (u & 0x7fffffu) == 0) {
        for (int digits = fabsf(x) < FLT_MIN ? 1 : 6; digits < 9; digits++)
            if (try_digits(x, digits, out, &len))
                return len;
        return snprintf(out, RB_FLOAT_TEXT_MAX, "%.9g", (double)x);
    }
    if (!try_digits(x, 8, out, &len))
        return snprintf(out, RB_FLOAT_TEXT_MAX, "%.9g", (double)x);
    if (!try_digits(x, 7, alt, &alt_len))
        return len;
    if (!try_digits(x, 6, out, &len)) {
        memcpy(out, alt, (size_t)alt_len + 1);
        return alt_len;
    }
    return len;
}

size_t rb_float_format(float x, char out[RB_FLOAT_TEXT_MAX])
{
    if (!isfinite(x)) {
        memcpy(out, "null", 5);
        return 4;
    }
    if (fabsf(x) < 1e6f && x == truncf(x))
        return format_small_int(x, out);
    locale_t old = enter_c_locale();
    int len = shortest_digits(x, out);
    leave_c_locale(old);
    return tidy(out, (size_t)len);
}

int rb_float_parse(const char *text, float *out)
{
    char *end;
    locale_t old = enter_c_locale();
    errno = 0;
    float v = strtof(text, &end);
    leave_c_locale(old);
    if (end == text || *end != '\0')
        return -2;
    /* ERANGE alone is also raised on underflow, which is fine (R7 flushes
     * later); only an infinite result means the text was out of range. */
    if (isinf(v))
        return -1;
    if (isnan(v))
        return -2;
    *out = v;
    return 0;
}

size_t rb_ms_format(double ms, char *out, size_t cap)
{
    locale_t old = enter_c_locale();
    int len = snprintf(out, cap, "%.3f", ms);
    leave_c_locale(old);
    return len < 0 ? 0 : (size_t)len;
}
