/* timing.c - calibrated repeats, as clpeak does them: warm-up calls (the
 * first launch compiles, faults pages in, ramps clocks), then the number
 * of calls per repeat is chosen from the fastest warm-up so that a repeat
 * lasts about the budget; every repeat runs that many calls. The median
 * over repeats is the figure and min/max its spread (shared machines are
 * noisy). Device time, when the call reports one (OpenCL profiling), is
 * summed over the same calls. */
#include <stdlib.h>
#include <time.h>

#include "bench.h"

#define MAX_REPEATS 64
#define MAX_ITERS 10000000

double rbench_now(void)
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

static void stats(double *v, int n, double *median, double *min, double *max)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *min = v[0];
    *max = v[n - 1];
    *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int rbench_time(const rbench_plan *plan, rbench_fn fn, void *arg, rbench_timing *out)
{
    double wall[MAX_REPEATS], dev[MAX_REPEATS];
    int repeats = plan->repeats < 1 ? 1
                  : plan->repeats > MAX_REPEATS ? MAX_REPEATS
                                                : plan->repeats;
    int warmups = plan->warmups < 1 ? 1 : plan->warmups;
    *out = (rbench_timing){0};
    uint64_t call = 0;
    double fastest = 0;
    for (int w = 0; w < warmups; w++) {
        double d = -1, t0 = rbench_now();
        int rc = fn(arg, call++, &d);
        double t = rbench_now() - t0;
        if (rc) {
            out->failed = rc;
            return rc;
        }
        if (w == 0 || t < fastest)
            fastest = t;
        /* One call already longer than a repeat: a second warm-up only
         * costs time. */
        if (t > plan->budget_s)
            break;
    }
    double iters = fastest > 0 ? plan->budget_s / fastest : MAX_ITERS;
    out->iters = iters < 1 ? 1 : iters > MAX_ITERS ? MAX_ITERS
                                                   : (uint64_t)iters;
    for (int r = 0; r < repeats; r++) {
        double dev_sum = 0;
        int dev_seen = 0;
        double t0 = rbench_now();
        for (uint64_t i = 0; i < out->iters; i++) {
            double d = -1;
            int rc = fn(arg, call++, &d);
            if (rc) {
                out->failed = rc;
                return rc;
            }
            if (d >= 0) {
                dev_sum += d;
                dev_seen = 1;
            }
        }
        wall[r] = (rbench_now() - t0) / (double)out->iters;
        dev[r] = dev_sum / (double)out->iters;
        out->has_device = dev_seen;
    }
    out->repeats = repeats;
    stats(wall, repeats, &out->median, &out->min, &out->max);
    stats(dev, repeats, &out->dev_median, &out->dev_min, &out->dev_max);
    return 0;
}
