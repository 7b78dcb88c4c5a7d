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

/* v in decimal, NUL-terminated; returns the length (at most 20). */
static size_t write_uint(uint64_t v, char *out)
{
    char d[20];
    size_t n = 0, len = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        out[len++] = d[--n];
    out[len] = '\0';
    return len;
}

/* |x| < 1e6 and integral: the digits, then ".0". */
static size_t format_small_int(float x, char *out)
{
    size_t len = 0;
    if (signbit(x))
        out[len++] = '-';
    len += write_uint((uint32_t)fabsf(x), out + len);
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

/* %.<digits>g into out; 1 if strtof reads it back to x. (Through a local
 * buffer: GCC 12's -Wformat-truncation, under the sanitizers, takes out
 * for a null pointer after inlining.) */
static int try_digits(float x, int digits, char *out, int *len)
{
    char text[RB_FLOAT_TEXT_MAX];
    *len = snprintf(text, sizeof text, "%.*g", digits, (double)x);
    memcpy(out, text, sizeof text);
    return same_bits(strtof(text, NULL), x);
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


/* ---- Fast path: the shortest digits from the rounding interval.
 *
 * strtof maps to x every decimal strictly inside (lo, hi), the halfway
 * points to x's neighbours (exact in double: they need 26 bits). For n =
 * 1, 2, ... digits, the n-digit decimal nearest to x is round(x * 10^p)
 * with p = n - 1 - floor(log10 x); the first n whose candidate lies inside
 * the interval gives exactly what the %.Ng search below gives (a shorter
 * decimal inside the interval is also the nearest 6-digit one, because
 * decimal spacing dwarfs the interval). The double arithmetic is off by a
 * few 1e-16 relative at most, so a candidate within 1e-12 of an endpoint,
 * or a product within 1e-7 of a rounding tie, is left to the exact
 * snprintf/strtof search: the output never depends on the shortcut. */
static const double pow10_table[] = {
    1e-60, 1e-59, 1e-58, 1e-57, 1e-56, 1e-55, 1e-54, 1e-53,
    1e-52, 1e-51, 1e-50, 1e-49, 1e-48, 1e-47, 1e-46, 1e-45,
    1e-44, 1e-43, 1e-42, 1e-41, 1e-40, 1e-39, 1e-38, 1e-37,
    1e-36, 1e-35, 1e-34, 1e-33, 1e-32, 1e-31, 1e-30, 1e-29,
    1e-28, 1e-27, 1e-26, 1e-25, 1e-24, 1e-23, 1e-22, 1e-21,
    1e-20, 1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13,
    1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5,
    1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3,
    1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
    1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27,
    1e28, 1e29, 1e30, 1e31, 1e32, 1e33, 1e34, 1e35,
    1e36, 1e37, 1e38, 1e39, 1e40, 1e41, 1e42, 1e43,
    1e44, 1e45, 1e46, 1e47, 1e48, 1e49, 1e50, 1e51,
    1e52, 1e53, 1e54, 1e55, 1e56, 1e57, 1e58, 1e59,
    1e60};
#define POW10_MIN (-60)

static double pow10_of(int p)
{
    return pow10_table[p - POW10_MIN];
}

/* Writes the digits of c (exactly n of them, trailing zeros allowed) with
 * first-digit exponent e10 the way %.<n>g and tidy() would. */
static size_t print_g(int negative, uint32_t c, int n, int e10, char *out)
{
    char d[16];
    for (int i = n - 1; i >= 0; i--) {
        d[i] = (char)('0' + c % 10);
        c /= 10;
    }
    int last = n - 1; /* %g drops trailing zeros */
    while (last > 0 && d[last] == '0')
        last--;
    size_t len = 0;
    if (negative)
        out[len++] = '-';
    if (e10 < -4 || e10 >= n) {
        out[len++] = d[0];
        if (last > 0) {
            out[len++] = '.';
            for (int i = 1; i <= last; i++)
                out[len++] = d[i];
        }
        out[len++] = 'e';
        if (e10 < 0) {
            out[len++] = '-';
            e10 = -e10;
        }
        if (e10 >= 10)
            out[len++] = (char)('0' + e10 / 10);
        out[len++] = (char)('0' + e10 % 10);
        out[len] = '\0';
        return len;
    }
    if (e10 < 0) {
        out[len++] = '0';
        out[len++] = '.';
        for (int i = -1; i > e10; i--)
            out[len++] = '0';
        for (int i = 0; i <= last; i++)
            out[len++] = d[i];
    } else {
        for (int i = 0; i <= e10; i++)
            out[len++] = d[i];
        out[len++] = '.';
        if (last > e10) {
            for (int i = e10 + 1; i <= last; i++)
                out[len++] = d[i];
        } else {
            out[len++] = '0';
        }
    }
    out[len] = '\0';
    return len;
}

typedef struct interval {
    double a, lo, hi, margin;
    int k; /* floor(log10(a)) */
} interval;

/* The n-digit candidate: 1 inside the interval (with *c the digits), 0
 * outside, -1 too close to call. */
static int try_n(const interval *iv, int n, double *c)
{
    int p = n - 1 - iv->k;
    if (p < POW10_MIN || p > -POW10_MIN)
        return -1;
    double y = iv->a * pow10_of(p);
    /* y < 10^9 (n <= 9 digits): truncation is floor, without libm. */
    double fl = (double)(int64_t)y, frac = y - fl;
    if (fabs(frac - 0.5) < 1e-7)
        return -1;
    *c = frac > 0.5 ? fl + 1 : fl;
    double v = *c * pow10_of(-p);
    if (v > iv->lo + iv->margin && v < iv->hi - iv->margin)
        return 1;
    if (v < iv->lo - iv->margin || v > iv->hi + iv->margin)
        return 0;
    return -1;
}

/* Returns the length, or 0 when the exact search must decide. */
static size_t fast_shortest(float x, char *out)
{
    float ax = fabsf(x);
    interval iv = {.a = ax};
    /* The neighbours from the bits (ax > 0 and finite here: zero took the
     * small-integer path): nextafterf cost a tenth of this function. */
    uint32_t ubits;
    memcpy(&ubits, &ax, sizeof ubits);
    uint32_t below = ubits - 1, above = ubits + 1;
    float prev_f, next_f;
    memcpy(&prev_f, &below, sizeof prev_f);
    memcpy(&next_f, &above, sizeof next_f);
    double prev = prev_f;
    iv.lo = (iv.a + prev) / 2;
    iv.hi = isinf(next_f) ? iv.a + (iv.a - prev) / 2 : (iv.a + next_f) / 2;
    iv.margin = iv.a * 1e-12;
    /* floor(log10 a) from the binary exponent (a = f * 2^e2, f in
     * [0.5, 1), so log10 a lies in [(e2 - 1) L, e2 L) with L = log10 2 <
     * 1): the estimate is k or k - 1, and the test below settles it
     * without log10, which cost as much as the rest of this function. */
    uint64_t dbits;
    memcpy(&dbits, &iv.a, sizeof dbits);
    int e2 = (int)((dbits >> 52) & 0x7ff) - 1022; /* frexp's, as a is normal */
    iv.k = (int)floor((e2 - 1) * 0.30102999566398120);
    if (iv.k > 38 || iv.k < -47)
        return 0;
    if (pow10_of(iv.k) > iv.a)
        iv.k--;
    else if (pow10_of(iv.k + 1) <= iv.a)
        iv.k++;

    /* Where the interval is symmetric (every float but a power of two),
     * the nearest (n+1)-digit decimal is at least as close as the nearest
     * n-digit one, so "inside" only turns on as n grows: a search. Most
     * floats need 7 to 9 digits, so it starts at 8 and steps down one at
     * a time to 6 (two or three tries for most), halving below. */
    uint32_t bits;
    memcpy(&bits, &ax, sizeof bits);
    int symmetric = (bits & 0x7fffffu) != 0 || ax < FLT_MIN;
    double c = 0, best_c = 0;
    int best_n = 0;
    if (symmetric) {
        int lo_n = 1, hi_n = 9, mid = 8;
        while (lo_n <= hi_n) {
            int r = try_n(&iv, mid, &c);
            if (r < 0)
                return 0;
            if (r) {
                best_n = mid;
                best_c = c;
                hi_n = mid - 1;
            } else {
                lo_n = mid + 1;
            }
            mid = hi_n >= 6 ? hi_n : (lo_n + hi_n) / 2;
        }
    } else {
        for (int n = 1; n <= 9 && !best_n; n++) {
            int r = try_n(&iv, n, &c);
            if (r < 0)
                return 0;
            if (r) {
                best_n = n;
                best_c = c;
            }
        }
    }
    if (!best_n)
        return 0;
    int e10 = iv.k;
    if (best_c >= pow10_of(best_n)) { /* 9.99.. rounded up to 10.0.. */
        best_c /= 10;
        e10++;
    }
    /* best_c < 10^best_n <= 10^9 < 2^32: 32-bit digit arithmetic. */
    return print_g(signbit(x) != 0, (uint32_t)best_c, best_n, e10, out);
}

size_t rb_float_format(float x, char out[RB_FLOAT_TEXT_MAX])
{
    if (!isfinite(x)) {
        memcpy(out, "null", 5);
        return 4;
    }
    if (fabsf(x) < 1e6f && x == truncf(x))
        return format_small_int(x, out);
    size_t fast = fast_shortest(x, out);
    if (fast)
        return fast;
    return rb_float_format_exact(x, out);
}

size_t rb_float_format_exact(float x, char out[RB_FLOAT_TEXT_MAX])
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

/* Exact powers of ten in double (5^22 < 2^53). */
static const double pow10_exact[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The common case without strtof (which costs far more than the rest of
 * a JSON number's handling): a JSON number of at most 19 digits whose
 * digits, read as an integer m, are at most 2^53, with a decimal exponent
 * within +-22 (Clinger's fast path). Then m * 10^e or m / 10^e in double
 * is one correctly rounded operation on exact operands, d = RN_double(x).
 * Rounding d to float is then RN_float(x) unless d landed exactly on a
 * midpoint between two floats (midpoints of normal floats are doubles, and
 * rounding is monotonic, so d is on the same side of every midpoint as x,
 * or on it): that case, and results near the ends of the float range, go
 * to strtof. The text is [p, end), not NUL-terminated: yajl hands numbers
 * over in place. Returns 1 when *out is set, 0 when strtof must decide. */
static int parse_fast(const char *p, const char *end, float *out)
{
    int neg = p < end && *p == '-';
    p += neg;
    uint64_t m = 0;
    const char *first = p;
    /* 19 digits cannot wrap m (10^19 < 2^64); longer texts go to strtof. */
    for (; p < end && (unsigned)(*p - '0') < 10; p++)
        m = m * 10 + (uint64_t)(*p - '0');
    int e = 0;
    ptrdiff_t digits = p - first;
    if (!digits)
        return 0;
    if (p < end && *p == '.') {
        const char *frac = ++p;
        for (; p < end && (unsigned)(*p - '0') < 10; p++)
            m = m * 10 + (uint64_t)(*p - '0');
        if (p == frac)
            return 0;
        e = -(int)(p - frac);
        digits += p - frac;
    }
    if (digits > 19 || m > (1ull << 53))
        return 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = p < end && *p == '-';
        p += p < end && (*p == '-' || *p == '+');
        int x = 0, nd = 0;
        for (; p < end && (unsigned)(*p - '0') < 10 && nd < 4; p++, nd++)
            x = x * 10 + (*p - '0');
        if (!nd || nd == 4)
            return 0;
        e += eneg ? -x : x;
    }
    if (p != end)
        return 0;
    if (m == 0) {
        *out = neg ? -0.0f : 0.0f;
        return 1;
    }
    if (e < -22 || e > 22)
        return 0;
    double d = e >= 0 ? (double)m * pow10_exact[e]
                      : (double)m / pow10_exact[-e];
    if (d > 1e30 || d < 1e-30)
        return 0;
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    /* The 29 bits a float drops: exactly half an ulp is a midpoint. */
    if ((bits & 0x1fffffffu) == 0x10000000u)
        return 0;
    float f = (float)d;
    *out = neg ? -f : f;
    return 1;
}

int rb_float_parse_fast(const char *text, size_t len, float *out)
{
    return parse_fast(text, text + len, out);
}

int rb_float_parse(const char *text, float *out)
{
    if (parse_fast(text, text + strlen(text), out))
        return 0;
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

int rb_double_parse(const char *text, double *out)
{
    char *end;
    locale_t old = enter_c_locale();
    double v = strtod(text, &end);
    leave_c_locale(old);
    if (end == text || *end != '\0' || isnan(v))
        return -2;
    if (isinf(v))
        return -1;
    *out = v;
    return 0;
}

size_t rb_ms_format(double ms, char *out, size_t cap)
{
    /* Every response carries one: digits by hand (snprintf's %.3f costs
     * about half a microsecond). Rounded to the nearest microsecond, ties
     * away from zero. */
    if (ms >= 0 && ms < 1e12 && cap >= 24) {
        uint64_t us = (uint64_t)(ms * 1000.0 + 0.5);
        unsigned frac = (unsigned)(us % 1000);
        size_t len = write_uint(us / 1000, out);
        out[len++] = '.';
        out[len++] = (char)('0' + frac / 100);
        out[len++] = (char)('0' + frac / 10 % 10);
        out[len++] = (char)('0' + frac % 10);
        out[len] = '\0';
        return len;
    }
    locale_t old = enter_c_locale();
    int len = snprintf(out, cap, "%.3f", ms);
    leave_c_locale(old);
    return len < 0 ? 0 : (size_t)len;
}
