/*
 * json_text.h - small text helpers the JSON codec shares: JSON string
 * quoting and RFC 6901 pointer tokens.
 */
#ifndef RB_JSON_TEXT_H
#define RB_JSON_TEXT_H

#include <stddef.h>

/* Writes s as a JSON string, quotes included, into out (cap >= 3) and
 * returns the length written; out is NUL-terminated. '"', '\\' and control
 * characters are escaped; well-formed UTF-8 passes through, and each byte
 * that does not begin a well-formed UTF-8 character (a stray or cut
 * sequence, an overlong form, a surrogate) becomes U+FFFD: the result is
 * always valid UTF-8 JSON, whatever s holds.
 * When the result would not fit, s is cut short at a character boundary
 * (never inside an escape or a UTF-8 sequence) and the string still
 * closes. */
size_t rbj_quote(char *out, size_t cap, const char *s);

/* Appends "/" and one reference token (len bytes of tok) to the JSON
 * Pointer in ptr (NUL-terminated, cap bytes), escaping '~' as "~0" and '/'
 * as "~1" (RFC 6901). A token that does not fit is cut at a character
 * boundary. Returns the new length. */
size_t rbj_pointer_append(char *ptr, size_t cap, const char *tok, size_t len);

#endif
