/* strict.c - see strict.h. */
#include "strict.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What the headers hold of interest, every instance counted:
 * libmicrohttpd's own lookups see only the first. */
typedef struct seen {
    unsigned n_length, n_coding, n_host;
    const char *length, *coding; /* the first instance's value */
    int length_digits;           /* every Content-Length is 1*DIGIT */
    const char *unprintable;     /* an echoed header with odd bytes */
} seen;

static int printable(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c >= 0x7F)
            return 0;
    }
    return 1;
}

static int all_digits(const char *v, size_t n)
{
    if (!n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] < '0' || v[i] > '9')
            return 0;
    return 1;
}

static enum MHD_Result look(void *cls, enum MHD_ValueKind kind,
                            const char *key, size_t key_len,
                            const char *value, size_t value_len)
{
    seen *s = cls;
    (void)kind;
    if (!value)
        value = "", value_len = 0;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (!s->n_length++)
            s->length = value;
        if (!all_digits(value, value_len))
            s->length_digits = 0;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        if (!s->n_coding++)
            s->coding = value;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        s->n_host++;
    } else if ((strcasecmp(key, MHD_HTTP_HEADER_ACCEPT) == 0 ||
                strcasecmp(key, MHD_HTTP_HEADER_CONTENT_TYPE) == 0) &&
               !s->unprintable && !printable(value, value_len)) {
        s->unprintable = key;
    }
    (void)key_len;
    return MHD_YES;
}

/* The last coding of a Transfer-Encoding list is chunked, and only it
 * ("gzip, chunked"): a framing we could read but a coding we lack. */
static int chunked_last(const char *v)
{
    const char *last = strrchr(v, ',');
    last = last ? last + 1 : v;
    while (*last == ' ' || *last == '\t')
        last++;
    size_t n = strlen(last);
    while (n && (last[n - 1] == ' ' || last[n - 1] == '\t'))
        n--;
    return n == 7 && strncasecmp(last, "chunked", 7) == 0 && last != v;
}

int strict_headers(struct MHD_Connection *c, const char *version,
                   char *detail, size_t cap)
{
    seen s = {.length_digits = 1};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, look, &s);
    if (s.n_length > 1) {
        /* Two lengths: a proxy in front may have used the other one (RFC
         * 9112 6.3); equal ones are refused too, which is simpler to
         * explain than which duplicates pass. */
        snprintf(detail, cap, "%u Content-Length headers: a request has at "
                 "most one", s.n_length);
        return 400;
    }
    if (s.n_length && !s.length_digits) {
        snprintf(detail, cap, "Content-Length '%.40s' is not a number",
                 s.length);
        return 400;
    }
    if (s.n_coding && s.n_length) {
        snprintf(detail, cap, "a request may not have both "
                 "Transfer-Encoding and Content-Length");
        return 400;
    }
    if (s.n_coding > 1 ||
        (s.n_coding && strcasecmp(s.coding, "chunked") != 0)) {
        /* libmicrohttpd reads anything but a lone "chunked" as a body
         * without an end and would wait for the connection to close. */
        if (s.n_coding == 1 && chunked_last(s.coding)) {
            snprintf(detail, cap, "Transfer-Encoding '%.60s': only chunked "
                     "is implemented", s.coding);
            return 501;
        }
        snprintf(detail, cap, "Transfer-Encoding '%.60s'%s: the body's "
                 "length cannot be known (only a lone chunked is accepted)",
                 s.coding, s.n_coding > 1 ? " and more" : "");
        return 400;
    }
    /* RFC 9112 3.2: HTTP/1.1 needs exactly one Host; 1.0 may omit it. */
    int http10 = version && strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
    if (s.n_host > 1 || (!s.n_host && !http10)) {
        snprintf(detail, cap, s.n_host ? "more than one Host header"
                                       : "an HTTP/1.1 request needs a Host "
                                         "header");
        return 400;
    }
    if (s.unprintable) {
        snprintf(detail, cap, "the %s header has bytes outside printable "
                 "ASCII", s.unprintable);
        return 400;
    }
    return 0;
}

int strict_target(const char *url, size_t raw_len, const char *version,
                  char *detail, size_t cap)
{
    if (version && version[0] && url + raw_len + 1 != version) {
        snprintf(detail, cap, "the request target holds a NUL byte");
        return 400;
    }
    for (const unsigned char *p = (const unsigned char *)url; *p; p++) {
        if (*p <= 0x20 || *p >= 0x7F) {
            snprintf(detail, cap, "the request target holds byte 0x%02x: "
                     "bytes other than printable ASCII must be "
                     "percent-encoded", *p);
            return 400;
        }
    }
    return 0;
}

static int hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static int unreserved(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
           c == '~';
}

size_t strict_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    char *w = s;
    for (const char *r = s; *r;) {
        if (r[0] == '%' && hex(r[1]) >= 0 && hex(r[2]) >= 0) {
            int v = hex(r[1]) * 16 + hex(r[2]);
            if (unreserved(v)) {
                *w++ = (char)v;
                r += 3;
                continue;
            }
        }
        *w++ = *r++;
    }
    *w = '\0';
    return (size_t)(w - s);
}
