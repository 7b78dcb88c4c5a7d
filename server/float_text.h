/*
 * float_text.h - float32 <-> JSON number text, exactly (SPEC section 4:
 * "numbers are written so that parsing them as float32 gives back the exact
 * float32 result").
 *
 * Both directions use the C locale whatever the process locale is, and are
 * safe to call from any thread.
 */
#ifndef RB_FLOAT_TEXT_H
#define RB_FLOAT_TEXT_H

#include <stddef.h>

/* Longest text rb_float_format writes, NUL included ("-1.17549435e-38"). */
#define RB_FLOAT_TEXT_MAX 24

/* Writes a decimal text that strtof reads back to the same float32, bit for
 * bit: the shortest of the %.6g, %.7g, %.8g and %.9g forms that does
 * (from %.1g for subnormals), and
 * returns its length (out is NUL-terminated). The same x always gives the
 * same bytes.
 * Integral values get a ".0" ("4.0"), -0 is "-0.0", exponents are short
 * ("1e-7", "3.4028235e38"). A non-finite x writes "null": JSON has no
 * literal for it, and callers are expected to have mapped it already. */
size_t rb_float_format(float x, char out[RB_FLOAT_TEXT_MAX]);

/* The same bytes as rb_float_format, always by the snprintf/strtof search
 * (about 10x slower); rb_float_format takes a shortcut that falls back to
 * this whenever it cannot be sure. For tests. */
size_t rb_float_format_exact(float x, char out[RB_FLOAT_TEXT_MAX]);

/* Converts a NUL-terminated JSON number text (its grammar is the caller's
 * business: yajl checked it) to the nearest float32, rounding once (strtof,
 * never strtod and a cast). Returns 0; -1 when the value is beyond
 * float32's range (1e39), since JSON cannot carry infinity; -2 when the
 * text is not wholly a number. Underflow to a subnormal or a signed zero is
 * not an error; -0 stays -0. */
int rb_float_parse(const char *text, float *out);

/* rb_float_parse's shortcut alone, on text[0..len) (no NUL needed): 1
 * with *out set, the same float rb_float_parse gives; 0 when only strtof
 * can decide (long or extreme numbers, exact midpoints, anything that is
 * not a plain number), and then *out is untouched. */
int rb_float_parse_fast(const char *text, size_t len, float *out);

/* The same for a double (camera numbers, SPEC section 8): strtod, one
 * rounding; -1 beyond double's range, -2 not wholly a number. */
int rb_double_parse(const char *text, double *out);

/* Writes ms with three decimals ("0.412", "12.000") for timing fields,
 * rounded to the nearest microsecond; returns the length, like snprintf
 * (which it uses for negative, huge or non-finite values). */
size_t rb_ms_format(double ms, char *out, size_t cap);

#endif
