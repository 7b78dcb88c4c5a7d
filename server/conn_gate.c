/* conn_gate.c - see conn_gate.h. */
#include "conn_gate.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One client address with open connections. count 0 marks a free slot. */
typedef struct slot {
    uint8_t key[16];
    uint32_t count;
} slot;

struct rbd_conn_gate {
    pthread_mutex_t lock;
    unsigned max_total, max_per_address;
    unsigned open;
    uint64_t refused_full, refused_address;
    /* Open addressing with linear probing; at most max_total addresses
     * are in it, so a table of twice that many slots never fills. */
    slot *slots;
    size_t mask;
};

rbd_conn_gate *conn_gate_create(unsigned max_total, unsigned max_per_address)
{
    rbd_conn_gate *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->max_total = max_total ? max_total : 1;
    g->max_per_address = max_per_address;
    if (max_per_address) {
        size_t cap = 16;
        while (cap < 2 * (size_t)g->max_total)
            cap *= 2;
        g->slots = calloc(cap, sizeof *g->slots);
        if (!g->slots) {
            free(g);
            return NULL;
        }
        g->mask = cap - 1;
    }
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

void conn_gate_destroy(rbd_conn_gate *g)
{
    if (!g)
        return;
    pthread_mutex_destroy(&g->lock);
    free(g->slots);
    free(g);
}

/* The address as 16 bytes (IPv4 as an IPv4-mapped IPv6 address, so that
 * both spellings of one client meet); 0 for a family without one. */
static int address_key(const struct sockaddr *a, socklen_t len,
                       uint8_t key[16])
{
    if (!a)
        return 0;
    if (a->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
        memset(key, 0, 10);
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &v4->sin_addr, 4);
        return 1;
    }
    if (a->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        memcpy(key, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
        return 1;
    }
    return 0;
}

static size_t home_of(const rbd_conn_gate *g, const uint8_t key[16])
{
    uint64_t lo, hi;
    memcpy(&lo, key, 8);
    memcpy(&hi, key + 8, 8);
    uint64_t h = (lo ^ (hi * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;
    return (size_t)(h ^ (h >> 31)) & g->mask;
}

/* The slot holding key, or the free slot where it would go. */
static size_t find(const rbd_conn_gate *g, const uint8_t key[16])
{
    size_t i = home_of(g, key);
    while (g->slots[i].count && memcmp(g->slots[i].key, key, 16))
        i = (i + 1) & g->mask;
    return i;
}

/* Empties slot i and moves later slots of its probe run back into the
 * hole (deletion without tombstones keeps every probe run short). */
static void remove_slot(rbd_conn_gate *g, size_t i)
{
    size_t hole = i;
    for (size_t j = (i + 1) & g->mask; g->slots[j].count;
         j = (j + 1) & g->mask) {
        size_t home = home_of(g, g->slots[j].key);
        /* j may move to the hole when its home is not in (hole, j]. */
        int stays = hole <= j ? (hole < home && home <= j)
                              : (hole < home || home <= j);
        if (!stays) {
            g->slots[hole] = g->slots[j];
            hole = j;
        }
    }
    g->slots[hole].count = 0;
}

rbd_gate_verdict conn_gate_enter(rbd_conn_gate *g, const struct sockaddr *a,
                                 socklen_t len)
{
    uint8_t key[16];
    int keyed = g->slots && address_key(a, len, key);
    rbd_gate_verdict v = RBD_GATE_ADMIT;
    pthread_mutex_lock(&g->lock);
    if (g->open >= g->max_total) {
        g->refused_full++;
        v = RBD_GATE_FULL;
    } else if (keyed) {
        size_t i = find(g, key);
        if (g->slots[i].count >= g->max_per_address) {
            g->refused_address++;
            v = RBD_GATE_ADDRESS_FULL;
        } else {
            if (!g->slots[i].count)
                memcpy(g->slots[i].key, key, 16);
            g->slots[i].count++;
        }
    }
    if (v == RBD_GATE_ADMIT)
        g->open++;
    pthread_mutex_unlock(&g->lock);
    return v;
}

void conn_gate_leave(rbd_conn_gate *g, const struct sockaddr *a,
                     socklen_t len)
{
    uint8_t key[16];
    int keyed = g->slots && address_key(a, len, key);
    pthread_mutex_lock(&g->lock);
    if (g->open)
        g->open--;
    if (keyed) {
        size_t i = find(g, key);
        if (g->slots[i].count && --g->slots[i].count == 0)
            remove_slot(g, i);
    }
    pthread_mutex_unlock(&g->lock);
}

unsigned conn_gate_open(rbd_conn_gate *g)
{
    pthread_mutex_lock(&g->lock);
    unsigned n = g->open;
    pthread_mutex_unlock(&g->lock);
    return n;
}

void conn_gate_refused(rbd_conn_gate *g, uint64_t *full,
                       uint64_t *address_full)
{
    pthread_mutex_lock(&g->lock);
    *full = g->refused_full;
    *address_full = g->refused_address;
    pthread_mutex_unlock(&g->lock);
}
