/* json_text.c - see json_text.h. */
#include "json_text.h"

#include <stdio.h>
#include <string.h>

/* Length of the UTF-8 sequence starting with byte c (1 for ASCII and for
 * stray bytes, so that any input still advances). */
static size_t utf8_len(unsigned char c)
{
    if (c >= 0xF0 && c < 0xF8)
        return 4;
    if (c >= 0xE0)
        return c < 0xF0 ? 3 : 1;
    if (c >= 0xC0)
        return 2;
    return 1;
}

/* The length of the well-formed UTF-8 character at s (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), 0 when the
 * bytes there are not one. s is NUL-terminated, so a sequence cut short
 * stops at the NUL, which is never a continuation byte. */
static size_t utf8_valid(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xC2 && c <= 0xDF   ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (!n)
        return 0; /* a continuation byte, C0/C1 (overlong) or F5..FF */
    /* The second byte's range is narrower after E0, ED, F0 and F4. */
    unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* The escaped form of one character starting at s into esc; returns its
 * length and sets *in to the bytes of s it covers. A byte that does not
 * start a well-formed UTF-8 character becomes U+FFFD, so that whatever a
 * client sent (a header, a path, a method) comes out as valid JSON
 * text. */
static size_t escape_char(const char *s, char esc[8], size_t *in)
{
    unsigned char c = (unsigned char)*s;
    *in = 1;
    switch (c) {
    case '"':
        memcpy(esc, "\\\"", 2);
        return 2;
    case '\\':
        memcpy(esc, "\\\\", 2);
        return 2;
    case '\n':
        memcpy(esc, "\\n", 2);
        return 2;
    case '\r':
        memcpy(esc, "\\r", 2);
        return 2;
    case '\t':
        memcpy(esc, "\\t", 2);
        return 2;
    default:
        break;
    }
    if (c < 0x20 || c == 0x7F) {
        snprintf(esc, 8, "\\u%04x", c);
        return 6;
    }
    size_t n = utf8_valid((const unsigned char *)s);
    if (!n) {
        memcpy(esc, "\xEF\xBF\xBD", 3); /* U+FFFD, for this one byte */
        return 3;
    }
    memcpy(esc, s, n);
    *in = n;
    return n;
}

size_t rbj_quote(char *out, size_t cap, const char *s)
{
    size_t len = 0;
    if (cap < 3) {
        if (cap)
            out[0] = '\0';
        return 0;
    }
    out[len++] = '"';
    while (*s) {
        char esc[8];
        size_t in, n = escape_char(s, esc, &in);
        if (len + n + 2 > cap) /* room for the closing quote and NUL */
            break;
        memcpy(out + len, esc, n);
        len += n;
        s += in;
    }
    out[len++] = '"';
    out[len] = '\0';
    return len;
}

size_t rbj_pointer_append(char *ptr, size_t cap, const char *tok, size_t len)
{
    size_t at = strlen(ptr);
    if (at + 2 > cap)
        return at;
    ptr[at++] = '/';
    for (size_t i = 0; i < len;) {
        char esc[4];
        size_t n = 1, in = 1;
        if (tok[i] == '~' || tok[i] == '/') {
            esc[0] = '~';
            esc[1] = tok[i] == '~' ? '0' : '1';
            n = 2;
        } else {
            in = utf8_len((unsigned char)tok[i]);
            if (i + in > len)
                in = len - i;
            memcpy(esc, tok + i, in);
            n = in;
        }
        if (at + n + 1 > cap)
            break;
        memcpy(ptr + at, esc, n);
        at += n;
        i += in;
    }
    ptr[at] = '\0';
    return at;
}
