/* allowed_hosts.c - see allowed_hosts.h. */
#include "allowed_hosts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NAME_MAX_LEN 255

typedef struct host_entry {
    char name[NAME_MAX_LEN + 1]; /* without brackets or a trailing dot */
    long port;                   /* -1: any */
} host_entry;

struct rbd_hosts {
    size_t n;
    host_entry e[];
};

/* Splits "name[:port]", "[v6][:port]" or a bare IPv6 literal (more than
 * one colon, no brackets: no port) into name and port. Returns 0, or -1
 * when the form is wrong. */
static int split(const char *s, size_t len, char *name, long *port)
{
    const char *n = s, *colon = NULL;
    size_t nlen;
    if (len && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return -1;
        n = s + 1;
        nlen = (size_t)(close - n);
        size_t rest = len - (size_t)(close + 1 - s);
        if (rest && close[1] != ':')
            return -1;
        colon = rest ? close + 1 : NULL;
    } else {
        const char *first = memchr(s, ':', len);
        const char *last = first;
        for (const char *p = first; p && p < s + len; p++)
            if (*p == ':')
                last = p;
        if (first && first == last) {
            colon = first;
            nlen = (size_t)(first - s);
        } else {
            nlen = len; /* no colon, or a bare IPv6 literal */
        }
    }
    *port = -1;
    if (colon) {
        const char *d = colon + 1, *end = s + len;
        if (d == end || end - d > 5)
            return -1;
        long v = 0;
        for (; d < end; d++) {
            if (*d < '0' || *d > '9')
                return -1;
            v = v * 10 + (*d - '0');
        }
        if (v > 65535)
            return -1;
        *port = v;
    }
    if (nlen && n[nlen - 1] == '.')
        nlen--;
    if (nlen == 0 || nlen > NAME_MAX_LEN)
        return -1;
    for (size_t i = 0; i < nlen; i++) {
        unsigned char c = (unsigned char)n[i];
        if (c <= 0x20 || c >= 0x7F || c == '/' || c == '@' || c == ',')
            return -1;
        name[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    name[nlen] = '\0';
    return 0;
}

int hosts_parse(const char *list, int loopback, rbd_hosts **out, char *why,
                size_t why_len)
{
    *out = NULL;
    if (!list[0] && loopback)
        list = "localhost,127.0.0.1,::1";
    if (!list[0])
        return 0;
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    rbd_hosts *h = calloc(1, sizeof *h + cap * sizeof h->e[0]);
    if (!h) {
        snprintf(why, why_len, "--allowed-hosts: out of memory");
        return -1;
    }
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        const char *s = p;
        size_t k = n;
        while (k && (*s == ' ' || *s == '\t'))
            s++, k--;
        while (k && (s[k - 1] == ' ' || s[k - 1] == '\t'))
            k--;
        if (k == 1 && s[0] == '*') {
            free(h); /* anything passes */
            return 0;
        }
        if (split(s, k, h->e[h->n].name, &h->e[h->n].port)) {
            snprintf(why, why_len, "--allowed-hosts: '%.*s' is not a host "
                     "name or address with an optional port", (int)k, s);
            free(h);
            return -1;
        }
        h->n++;
        if (!p[n])
            break;
        p += n + 1;
    }
    *out = h;
    return 0;
}

int hosts_check(const rbd_hosts *h, const char *host, char *detail,
                size_t cap)
{
    if (!h || !host)
        return 0;
    char name[NAME_MAX_LEN + 1];
    long port;
    if (split(host, strlen(host), name, &port) == 0) {
        for (size_t i = 0; i < h->n; i++)
            if (strcmp(h->e[i].name, name) == 0 &&
                (h->e[i].port < 0 || h->e[i].port == port))
                return 0;
    }
    int plain = 1;
    for (const char *c = host; *c && plain; c++)
        plain = (unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7F;
    if (plain)
        snprintf(detail, cap, "Host '%.100s' is not one this server answers "
                 "for (--allowed-hosts)", host);
    else
        snprintf(detail, cap, "the Host header has bytes outside printable "
                 "ASCII: not one this server answers for (--allowed-hosts)");
    return 421;
}

void hosts_destroy(rbd_hosts *h)
{
    free(h);
}
