/* util.c - clock, CPU count and bounded string copies. */
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

double rb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The CPUs this process may run on (a container's cpuset, taskset), not
 * every CPU of the machine. */
unsigned rb_online_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (unsigned)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

void rb_copy_str(char *dst, size_t cap, const char *src)
{
    if (cap == 0)
        return;
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}
