/* block_cache.c - see block_cache.h. Each block carries its capacity in a
 * 16-byte header in front of it; kept blocks sit in a small array (few
 * requests are large at the same time), the oldest given up first when
 * the array or the byte limit is full. */
#include "block_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEADER 16
#define SLOTS 8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t limit;          /* bytes the kept blocks may hold */
static size_t held;           /* bytes they hold */
static char *kept[SLOTS];     /* headers, oldest first */
static size_t n_kept;

static size_t capacity(const char *block)
{
    size_t cap;
    memcpy(&cap, block, sizeof cap);
    return cap;
}

/* Drops kept[i] from the array (the caller frees it). */
static char *take(size_t i)
{
    char *b = kept[i];
    held -= capacity(b);
    for (size_t j = i + 1; j < n_kept; j++)
        kept[j - 1] = kept[j];
    n_kept--;
    return b;
}

/* Moves the oldest kept block onto *drop, a list linked through the
 * first bytes after each header, to be freed once the lock is released. */
static void drop_oldest(char **drop)
{
    char *b = take(0);
    memcpy(b + HEADER, drop, sizeof *drop);
    *drop = b;
}

/* With the lock held: gives up the oldest blocks until the rest fit
 * `room` more bytes and, with `slot`, one more block; returns them. */
static char *make_room(size_t room, int slot)
{
    char *drop = NULL;
    while (n_kept && (held + room > limit || (slot && n_kept == SLOTS)))
        drop_oldest(&drop);
    return drop;
}

static void free_list(char *drop)
{
    while (drop) {
        char *next;
        memcpy(&next, drop + HEADER, sizeof next);
        free(drop);
        drop = next;
    }
}

void rbc_block_cache_limit(size_t bytes)
{
    pthread_mutex_lock(&lock);
    limit = bytes;
    char *drop = make_room(0, 0);
    pthread_mutex_unlock(&lock);
    free_list(drop);
}

void *rbc_block_alloc(size_t size)
{
    if (size >= RBC_BLOCK_MIN) {
        pthread_mutex_lock(&lock);
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < n_kept; i++) {
            size_t cap = capacity(kept[i]);
            if (cap >= size &&
                (best == SIZE_MAX || cap < capacity(kept[best])))
                best = i;
        }
        char *b = best == SIZE_MAX ? NULL : take(best);
        pthread_mutex_unlock(&lock);
        if (b)
            return b + HEADER;
    }
    if (size > SIZE_MAX - HEADER)
        return NULL;
    char *b = malloc(HEADER + size);
    if (!b)
        return NULL;
    memcpy(b, &size, sizeof size);
    return b + HEADER;
}

void rbc_block_free(void *p)
{
    if (!p)
        return;
    char *b = (char *)p - HEADER;
    size_t cap = capacity(b);
    if (cap >= RBC_BLOCK_MIN) {
        pthread_mutex_lock(&lock);
        char *drop = NULL;
        if (cap <= limit) {
            drop = make_room(cap, 1);
            kept[n_kept++] = b;
            held += cap;
            b = NULL;
        }
        pthread_mutex_unlock(&lock);
        free_list(drop);
    }
    free(b);
}

size_t rbc_block_cache_held(void)
{
    pthread_mutex_lock(&lock);
    size_t h = held;
    pthread_mutex_unlock(&lock);
    return h;
}

void rbc_block_cache_clear(void)
{
    pthread_mutex_lock(&lock);
    char *drop = NULL;
    while (n_kept)
        drop_oldest(&drop);
    pthread_mutex_unlock(&lock);
    free_list(drop);
}
