/* mem_budget.c - see mem_budget.h. */
#include "mem_budget.h"

#include <stdio.h>
#include <unistd.h>

/* The cgroup v2 memory limit of this process, 0 when none is set. */
static uint64_t cgroup_limit(void)
{
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (!f)
        return 0;
    unsigned long long v = 0;
    int n = fscanf(f, "%llu", &v); /* "max" reads as nothing */
    fclose(f);
    return n == 1 ? v : 0;
}

void budget_init(rbd_budget *b, uint64_t limit)
{
    if (!limit) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        uint64_t phys = pages > 0 && size > 0
                            ? (uint64_t)pages * (uint64_t)size
                            : (uint64_t)4 << 30;
        uint64_t cg = cgroup_limit();
        limit = (cg && cg < phys ? cg : phys) / 2;
    }
    b->limit = limit;
    atomic_init(&b->used, 0);
    atomic_init(&b->peak, 0);
    atomic_init(&b->refused, 0);
}

static void note_peak(rbd_budget *b, uint64_t now)
{
    uint64_t p = atomic_load_explicit(&b->peak, memory_order_relaxed);
    while (now > p && !atomic_compare_exchange_weak_explicit(
                          &b->peak, &p, now, memory_order_relaxed,
                          memory_order_relaxed))
        ;
}

int budget_take(rbd_budget *b, uint64_t bytes)
{
    if (budget_try(b, bytes) == 0)
        return 0;
    atomic_fetch_add_explicit(&b->refused, 1, memory_order_relaxed);
    return -1;
}

int budget_try(rbd_budget *b, uint64_t bytes)
{
    uint64_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    do {
        if (bytes > b->limit || used > b->limit - bytes)
            return -1;
    } while (!atomic_compare_exchange_weak_explicit(
        &b->used, &used, used + bytes, memory_order_relaxed,
        memory_order_relaxed));
    note_peak(b, used + bytes);
    return 0;
}

void budget_force(rbd_budget *b, uint64_t bytes)
{
    uint64_t now = atomic_fetch_add_explicit(&b->used, bytes,
                                             memory_order_relaxed) +
                   bytes;
    note_peak(b, now);
}

void budget_give(rbd_budget *b, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&b->used, bytes, memory_order_relaxed);
}

uint64_t budget_body_bytes(int json, uint64_t bytes)
{
    return json ? 3 * bytes : bytes;
}
