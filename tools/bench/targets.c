/* targets.c - what is measured: by default every OpenCL device the ICD
 * loader finds plus the native CPU backend; --backend narrows to one kind,
 * --device to some OpenCL devices (by index in --list, or by a substring
 * of the name, any case). --device alone implies --backend opencl. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t k = 0;
        while (k < n && hay[k] &&
               tolower((unsigned char)hay[k]) ==
                   tolower((unsigned char)needle[k]))
            k++;
        if (k == n)
            return 1;
    }
    return n == 0;
}

static int list_cl(rb_device_desc **devs, size_t *n, char *why, size_t len)
{
    *devs = NULL;
    *n = 0;
    int st = rb_devices_list(NULL, 0, n, why, len);
    if (st == RB_OK && *n) {
        *devs = calloc(*n, sizeof **devs);
        if (!*devs)
            return RB_ENOMEM;
        st = rb_devices_list(*devs, *n, n, why, len);
    }
    return st;
}

/* Index of the device `sel` names, or -1. */
static long select_one(const rb_device_desc *devs, size_t n, const char *sel)
{
    char *end;
    long idx = strtol(sel, &end, 10);
    if (*sel && *end == '\0')
        return idx >= 0 && (size_t)idx < n ? idx : -1;
    for (size_t i = 0; i < n; i++)
        if (contains_nocase(devs[i].name, sel))
            return (long)i;
    return -1;
}

int rbench_targets(const rbench_options *o, rbench_target **out, size_t *n,
                char *why_no_cl, size_t why_len, char *err, size_t err_len)
{
    rb_device_desc *devs = NULL;
    size_t nd = 0;
    why_no_cl[0] = '\0';
    int want_cl = o->want_cl;
    int want_cpu = o->want_cpu && (o->backend_given || o->n_devices == 0);
    if (want_cl) {
        int st = list_cl(&devs, &nd, why_no_cl, why_len);
        if (st != RB_OK) {
            snprintf(err, err_len, "listing OpenCL devices: %s",
                     rb_status_str(st));
            return -1;
        }
        if (nd == 0 && !why_no_cl[0])
            snprintf(why_no_cl, why_len, "no OpenCL device");
    }
    rbench_target *t = calloc(nd + 3, sizeof *t);
    if (!t) {
        free(devs);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    size_t k = 0;
    if (want_cl && o->n_devices) {
        for (size_t i = 0; i < o->n_devices; i++) {
            long d = select_one(devs, nd, o->devices[i]);
            if (d < 0) {
                snprintf(err, err_len, "--device %s: no such OpenCL device "
                                       "(%zu found; see --list)%s%s",
                         o->devices[i], nd, nd ? "" : ": ", nd ? ""
                                                               : why_no_cl);
                free(devs);
                free(t);
                return -1;
            }
            int dup = 0;
            for (size_t j = 0; j < k; j++)
                dup |= t[j].cl_index == (int)d;
            if (!dup)
                t[k++] = (rbench_target){.kind = RBENCH_TARGET_OPENCL,
                                      .cl_index = (int)d, .desc = devs[d]};
        }
    } else if (want_cl) {
        for (size_t i = 0; i < nd; i++)
            t[k++] = (rbench_target){.kind = RBENCH_TARGET_OPENCL,
                                  .cl_index = (int)i, .desc = devs[i]};
    }
    /* The native backend first: it is the reference the others are read
     * against. */
    if (want_cpu) {
        memmove(t + 1, t, k * sizeof *t);
        t[0] = (rbench_target){.kind = RBENCH_TARGET_CPU, .cl_index = -1};
        k++;
    }
    for (size_t i = 0; i < k; i++) {
        if (t[i].kind != RBENCH_TARGET_OPENCL)
            continue;
        int twins = 0;
        for (size_t j = 0; j < nd; j++)
            twins += strcmp(devs[j].name, t[i].desc.name) == 0;
        if (twins > 1)
            snprintf(t[i].label, sizeof t[i].label, "%.120s [%d]",
                     t[i].desc.name, t[i].cl_index);
        else
            snprintf(t[i].label, sizeof t[i].label, "%s", t[i].desc.name);
    }
    if (want_cl && o->split_devices && nd) {
        t[k] = (rbench_target){.kind = RBENCH_TARGET_OPENCL, .cl_index = -1,
                            .desc = devs[0], .devices = o->split_devices};
        snprintf(t[k].label, sizeof t[k].label, "split %s",
                 o->split_devices);
        k++;
    }
    if (o->http)
        t[k++] = (rbench_target){.kind = RBENCH_TARGET_HTTP, .cl_index = -1,
                              .url = o->http};
    free(devs);
    *out = t;
    *n = k;
    return 0;
}

int rbench_print_devices(FILE *f)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    rb_context *cpu = NULL;
    char why[512] = "";
    rb_backend_info info;
    memset(&info, 0, sizeof info);
    if (rb_context_create(&opt, &cpu, why, sizeof why) == RB_OK)
        rb_context_info(cpu, &info);
    rb_context_destroy(cpu);
    fprintf(f, "%-6s %-7s %-12s %-44s %s\n", "device", "backend", "type",
            "name", "details");
    fprintf(f, "%-6s %-7s %-12s %-44s %s, %u threads, raybox %s\n", "cpu",
            "cpu", "cpu", info.device[0] ? info.device : "?",
            info.simd[0] ? info.simd : "scalar", info.threads,
            RB_VERSION_STRING);
    rb_device_desc *devs = NULL;
    size_t n = 0;
    int st = list_cl(&devs, &n, why, sizeof why);
    if (st != RB_OK) {
        fprintf(f, "OpenCL: %s\n", rb_status_str(st));
        return 1;
    }
    if (n == 0)
        fprintf(f, "OpenCL: none (%s)\n", why[0] ? why : "no OpenCL device");
    for (size_t i = 0; i < n; i++) {
        const rb_device_desc *d = &devs[i];
        fprintf(f, "%-6zu %-7s %-12s %-44s %s; driver %s; %u units; "
                   "%llu MiB\n",
                i, "opencl", d->type, d->name, d->platform, d->driver,
                d->compute_units,
                (unsigned long long)(d->global_mem >> 20));
    }
    free(devs);
    return 0;
}
