/* timing.c - calibrated repeats: after warm-ups, each repeat calls fn
 * until the repeat's time budget has passed, so slow and fast tests are
 * measured over similar spans; the median over repeats is the figure and
 * min/max its spread (shared machines are noisy). */
#include <stdlib.h>
#include <time.h>

#include "bench.h"

double rbb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int rbb_time(const rbb_plan *plan, rbb_fn fn, void *arg, rbb_timing *out)
{
    double per_call[64];
    int repeats = plan->repeats < 1 ? 1 : plan->repeats > 64 ? 64
                                                             : plan->repeats;
    *out = (rbb_timing){0};
    int rep = 0;
    for (int w = 0; w < plan->warmups; w++) {
        if (fn(arg, rep++)) {
            out->failed = 1;
            return -1;
        }
    }
    for (int r = 0; r < repeats; r++) {
        int calls = 0;
        double t0 = rbb_now(), t;
        do {
            if (fn(arg, rep++)) {
                out->failed = 1;
                return -1;
            }
            calls++;
            t = rbb_now();
        } while (t - t0 < plan->budget_s);
        per_call[r] = (t - t0) / calls;
        out->calls += calls;
    }
    qsort(per_call, (size_t)repeats, sizeof per_call[0], cmp_double);
    out->repeats = repeats;
    out->min = per_call[0];
    out->max = per_call[repeats - 1];
    out->median = repeats % 2 ? per_call[repeats / 2]
                              : 0.5 * (per_call[repeats / 2 - 1] +
                                       per_call[repeats / 2]);
    return 0;
}
