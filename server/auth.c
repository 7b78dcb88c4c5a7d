/* auth.c - see auth.h. */
#include "auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gnutls/crypto.h>

/* More tokens than this refuse the file: the table is compared whole on
 * every request. */
#define TOKENS_MAX 4096
/* A token file is small; this bounds what a wrong path can make us read. */
#define FILE_MAX (4u << 20)

typedef struct table {
    unsigned n, slots;
    uint64_t *owner;                     /* 0 in unused slots */
    unsigned char (*tok)[RBD_TOKEN_MAX]; /* zero-padded */
    uint32_t *len;                       /* 0 in unused slots */
    unsigned char (*key)[RBD_OWNER_KEY_BYTES]; /* SHA-256 of the token */
} table;

struct rbd_auth {
    pthread_rwlock_t lock;
    table *cur;
    char path[4096];
    uint64_t next_owner; /* reload: one thread at a time */
};

static void table_free(table *t)
{
    if (!t)
        return;
    if (t->tok) {
        /* Through a volatile pointer: a memset before free may be
         * dropped as a dead store. */
        volatile unsigned char *p = (volatile unsigned char *)t->tok;
        for (size_t i = 0; i < (size_t)t->slots * RBD_TOKEN_MAX; i++)
            p[i] = 0;
    }
    free(t->tok);
    free(t->owner);
    free(t->len);
    free(t->key);
    free(t);
}

static table *table_new(unsigned n)
{
    unsigned slots = 16;
    while (slots < n)
        slots *= 2;
    table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->slots = slots;
    t->tok = calloc(slots, sizeof *t->tok);
    t->owner = calloc(slots, sizeof *t->owner);
    t->len = calloc(slots, sizeof *t->len);
    t->key = calloc(slots, sizeof *t->key);
    if (!t->tok || !t->owner || !t->len || !t->key) {
        table_free(t);
        return NULL;
    }
    return t;
}

/* The whole file (NUL-terminated, malloc'ed) or NULL with why. */
static char *read_all(const char *path, size_t *len, char *why,
                      size_t why_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_len, "cannot read --auth-token-file '%s': %s",
                 path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, FILE_MAX + 1, f) : 0;
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf || err || n > FILE_MAX) {
        snprintf(why, why_len, "cannot read --auth-token-file '%s': %s",
                 path, !buf ? "out of memory"
                       : err ? strerror(err)
                             : "larger than 4 MiB");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void wipe(char *p, size_t n)
{
    volatile char *v = p;
    for (size_t i = 0; i < n; i++)
        v[i] = 0;
}

/* Parses the file into a new table; owners are taken from old where the
 * token is in it, else numbered from *next. */
static table *parse(const char *path, const table *old, uint64_t *next,
                    char *why, size_t why_len)
{
    size_t size = 0;
    char *text = read_all(path, &size, why, why_len);
    if (!text)
        return NULL;
    unsigned lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    table *t = table_new(lines < TOKENS_MAX ? lines : TOKENS_MAX);
    if (!t) {
        snprintf(why, why_len, "--auth-token-file: out of memory");
        goto fail;
    }
    unsigned line = 0;
    for (char *p = text; p < text + size;) {
        char *end = memchr(p, '\n', (size_t)(text + size - p));
        size_t n = end ? (size_t)(end - p) : (size_t)(text + size - p);
        line++;
        char *next_line = end ? end + 1 : text + size;
        if (n && p[n - 1] == '\r')
            n--;
        size_t lead = 0;
        while (lead < n && (p[lead] == ' ' || p[lead] == '\t'))
            lead++;
        if (lead == n || p[lead] == '#') {
            p = next_line;
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c <= 0x20 || c >= 0x7F) {
                snprintf(why, why_len, "--auth-token-file '%s' line %u: a "
                         "token may hold no spaces, control bytes or "
                         "non-ASCII bytes (byte %zu is 0x%02x)",
                         path, line, i + 1, c);
                goto fail;
            }
        }
        if (n > RBD_TOKEN_MAX) {
            snprintf(why, why_len, "--auth-token-file '%s' line %u: a token "
                     "has at most %d bytes, not %zu", path, line,
                     RBD_TOKEN_MAX, n);
            goto fail;
        }
        int dup = 0;
        for (unsigned i = 0; i < t->n && !dup; i++)
            dup = t->len[i] == n && memcmp(t->tok[i], p, n) == 0;
        if (!dup) {
            if (t->n == TOKENS_MAX) {
                snprintf(why, why_len, "--auth-token-file '%s': more than "
                         "%d tokens", path, TOKENS_MAX);
                goto fail;
            }
            unsigned k = t->n++;
            memcpy(t->tok[k], p, n);
            t->len[k] = (uint32_t)n;
            if (gnutls_hash_fast(GNUTLS_DIG_SHA256, p, n, t->key[k])) {
                snprintf(why, why_len, "--auth-token-file: no SHA-256 "
                         "from GnuTLS");
                goto fail;
            }
            for (unsigned i = 0; old && i < old->n && !t->owner[k]; i++)
                if (old->len[i] == n && memcmp(old->tok[i], p, n) == 0)
                    t->owner[k] = old->owner[i];
            if (!t->owner[k])
                t->owner[k] = ++*next;
        }
        p = next_line;
    }
    if (!t->n) {
        snprintf(why, why_len, "--auth-token-file '%s' holds no token",
                 path);
        goto fail;
    }
    wipe(text, size);
    free(text);
    return t;
fail:
    wipe(text, size);
    free(text);
    table_free(t);
    return NULL;
}

rbd_auth *auth_load(const char *path, char *why, size_t why_len)
{
    rbd_auth *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(why, why_len, "--auth-token-file: out of memory");
        return NULL;
    }
    snprintf(a->path, sizeof a->path, "%s", path);
    a->cur = parse(path, NULL, &a->next_owner, why, why_len);
    if (!a->cur) {
        free(a);
        return NULL;
    }
    pthread_rwlock_init(&a->lock, NULL);
    return a;
}

int auth_reload(rbd_auth *a, char *why, size_t why_len)
{
    /* Only reloads write cur, and they come one at a time: reading it
     * here without the lock is safe. */
    uint64_t next = a->next_owner;
    table *t = parse(a->path, a->cur, &next, why, why_len);
    if (!t)
        return -1;
    pthread_rwlock_wrlock(&a->lock);
    table *old = a->cur;
    a->cur = t;
    a->next_owner = next;
    pthread_rwlock_unlock(&a->lock);
    table_free(old);
    return (int)t->n;
}

uint64_t auth_check(rbd_auth *a, const char *h)
{
    if (!a || !h)
        return 0;
    /* The header's form is the client's own business: deciding on it
     * early says nothing about the tokens. */
    while (*h == ' ' || *h == '\t')
        h++;
    if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
        return 0;
    h += 6;
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    if (n == 0 || n > RBD_TOKEN_MAX)
        return 0;
    unsigned char given[RBD_TOKEN_MAX] = {0};
    memcpy(given, h, n);

    uint64_t owner = 0;
    pthread_rwlock_rdlock(&a->lock);
    const table *t = a->cur;
    /* Every slot, every byte: no exit on a match or a difference. A
     * slot's owner is taken through a mask made from its difference. */
    for (unsigned i = 0; i < t->slots; i++) {
        uint32_t diff = t->len[i] ^ (uint32_t)n;
        const unsigned char *k = t->tok[i];
        for (size_t j = 0; j < RBD_TOKEN_MAX; j++)
            diff |= (uint32_t)(k[j] ^ given[j]);
        /* 0 -> all ones, anything else (< 2^32) -> 0, without a branch. */
        uint64_t same = (uint64_t)0 - ((((uint64_t)diff) - 1) >> 63);
        owner |= same & t->owner[i];
    }
    pthread_rwlock_unlock(&a->lock);
    wipe((char *)given, sizeof given);
    return owner;
}

int auth_owner_key(rbd_auth *a, uint64_t owner, uint8_t *key)
{
    int rc = -1;
    pthread_rwlock_rdlock(&a->lock);
    const table *t = a->cur;
    for (unsigned i = 0; i < t->n && rc; i++)
        if (t->owner[i] == owner) {
            memcpy(key, t->key[i], RBD_OWNER_KEY_BYTES);
            rc = 0;
        }
    pthread_rwlock_unlock(&a->lock);
    return rc;
}

uint64_t auth_owner_of_key(rbd_auth *a, const uint8_t *key)
{
    uint64_t owner = 0;
    pthread_rwlock_rdlock(&a->lock);
    const table *t = a->cur;
    for (unsigned i = 0; i < t->n && !owner; i++)
        if (memcmp(t->key[i], key, RBD_OWNER_KEY_BYTES) == 0)
            owner = t->owner[i];
    pthread_rwlock_unlock(&a->lock);
    return owner;
}

unsigned auth_count(rbd_auth *a)
{
    pthread_rwlock_rdlock(&a->lock);
    unsigned n = a->cur->n;
    pthread_rwlock_unlock(&a->lock);
    return n;
}

void auth_destroy(rbd_auth *a)
{
    if (!a)
        return;
    table_free(a->cur);
    pthread_rwlock_destroy(&a->lock);
    free(a);
}
