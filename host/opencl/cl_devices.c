/* cl_devices.c - see cl_devices.h. Links only the ICD loader (libOpenCL),
 * so any vendor's driver registered in /etc/OpenCL/vendors serves. */
#include "cl_devices.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* A string property into buf (truncated to cap). The size is asked first:
 * a buffer smaller than the value is CL_INVALID_VALUE, not a truncation. */
static int info_string(rb_cl_env *env, const rb_allocator *a,
                       cl_device_id dev, cl_platform_id plat,
                       cl_uint what, char *buf, size_t cap)
{
    size_t need = 0;
    int rc = dev ? RB_CL(env, clGetDeviceInfo, dev, what, 0, NULL, &need)
                 : RB_CL(env, clGetPlatformInfo, plat, what, 0, NULL, &need);
    if (rc)
        return rc;
    char *tmp = rb_alloc_with(a, need + 1, 16);
    if (!tmp)
        return RB_ENOMEM;
    rc = dev ? RB_CL(env, clGetDeviceInfo, dev, what, need, tmp, NULL)
             : RB_CL(env, clGetPlatformInfo, plat, what, need, tmp, NULL);
    if (rc == RB_OK) {
        tmp[need] = '\0';
        rb_copy_str(buf, cap, tmp);
    }
    rb_free_with(a, tmp);
    return rc;
}

/* A fixed-size property (cl_uint, cl_ulong, cl_bool, bitfields, size_t). */
static int info_value(rb_cl_env *env, cl_device_id dev, cl_uint what,
                      void *out, size_t size)
{
    return RB_CL(env, clGetDeviceInfo, dev, what, size, out, NULL);
}

static void note(char *why, size_t why_len, const char *text)
{
    if (!why || !why_len)
        return;
    size_t used = strlen(why);
    if (used + 1 >= why_len)
        return;
    snprintf(why + used, why_len - used, "%s%s", used ? "; " : "", text);
}

static const char *type_name(cl_device_type t)
{
    if (t & CL_DEVICE_TYPE_GPU)
        return "gpu";
    if (t & CL_DEVICE_TYPE_ACCELERATOR)
        return "accelerator";
    if (t & CL_DEVICE_TYPE_CPU)
        return "cpu";
    return "other";
}

static int describe(rb_cl_env *env, const rb_allocator *a,
                    cl_platform_id plat, cl_device_id dev,
                    rb_cl_device *out)
{
    memset(out, 0, sizeof *out);
    out->platform = plat;
    out->id = dev;
    rb_device_desc *d = &out->desc;
    cl_device_type type = 0;
    cl_device_fp_config fp = 0, fp64 = 0;
    cl_uint units = 0;
    cl_ulong global = 0, alloc = 0, local = 0;
    cl_bool avail = CL_FALSE, compiler = CL_FALSE;
    size_t wg = 0, items[3] = {0, 0, 0};
    int rc = RB_OK;
    if (!rc)
        rc = info_string(env, a, NULL, plat, CL_PLATFORM_NAME, d->platform,
                         sizeof d->platform);
    if (!rc)
        rc = info_string(env, a, NULL, plat, CL_PLATFORM_VERSION,
                         out->platform_version,
                         sizeof out->platform_version);
    if (!rc)
        rc = info_string(env, a, dev, NULL, CL_DEVICE_NAME, d->name,
                         sizeof d->name);
    if (!rc)
        rc = info_string(env, a, dev, NULL, CL_DEVICE_VENDOR, d->vendor,
                         sizeof d->vendor);
    if (!rc)
        rc = info_string(env, a, dev, NULL, CL_DRIVER_VERSION, d->driver,
                         sizeof d->driver);
    if (!rc)
        rc = info_string(env, a, dev, NULL, CL_DEVICE_VERSION, d->version,
                         sizeof d->version);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_TYPE, &type, sizeof type);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_SINGLE_FP_CONFIG, &fp,
                        sizeof fp);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_MAX_COMPUTE_UNITS, &units,
                        sizeof units);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_GLOBAL_MEM_SIZE, &global,
                        sizeof global);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, &alloc,
                        sizeof alloc);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_LOCAL_MEM_SIZE, &local,
                        sizeof local);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_AVAILABLE, &avail, sizeof avail);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_COMPILER_AVAILABLE, &compiler,
                        sizeof compiler);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, &wg,
                        sizeof wg);
    if (!rc)
        rc = info_value(env, dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, items,
                        sizeof items);
    if (rc)
        return rc;
    /* Core since 1.2; a 1.1 device may refuse the query: then no fp64. */
    if (clGetDeviceInfo(dev, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64,
                        NULL) != CL_SUCCESS)
        fp64 = 0;
    rb_copy_str(d->type, sizeof d->type, type_name(type));
    d->compute_units = units;
    d->global_mem = global;
    d->max_alloc = alloc;
    d->exact_division = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
    d->denormals = (fp & CL_FP_DENORM) != 0;
    out->is_gpu = (type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR))
                  != 0;
    out->available = avail == CL_TRUE;
    out->compiler = compiler == CL_TRUE;
    out->fp64 = fp64 != 0;
    out->local_mem = local;
    out->max_work_group = wg < items[0] || items[0] == 0 ? wg : items[0];
    /* Deprecated in 2.0 but answered by 1.2+ drivers; unknown = no. */
    cl_bool unified = CL_FALSE;
    if (clGetDeviceInfo(dev, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified,
                        &unified, NULL) != CL_SUCCESS)
        unified = CL_FALSE;
    out->host_unified = unified == CL_TRUE;
    return RB_OK;
}

/* The devices of one platform, appended to list (grown with `a`). */
static int add_platform(rb_cl_env *env, const rb_allocator *a,
                        cl_platform_id plat, rb_cl_device **list,
                        size_t *count, size_t *cap, char *why,
                        size_t why_len)
{
    cl_uint n = 0;
    cl_int err = clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 0, NULL, &n);
    if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && n == 0))
        return RB_OK; /* a platform without devices: nothing to list */
    int rc = rb_cl_status(env, err, "clGetDeviceIDs");
    if (rc)
        return rc;
    cl_device_id *ids = rb_alloc_with(a, n * sizeof *ids, 16);
    if (!ids)
        return RB_ENOMEM;
    rc = RB_CL(env, clGetDeviceIDs, plat, CL_DEVICE_TYPE_ALL, n, ids, NULL);
    for (cl_uint i = 0; rc == RB_OK && i < n; i++) {
        if (*count == *cap) {
            size_t ncap = *cap ? *cap * 2 : 8;
            rb_cl_device *grown = rb_alloc_with(a, ncap * sizeof *grown, 64);
            if (!grown) {
                rc = RB_ENOMEM;
                break;
            }
            if (*count)
                memcpy(grown, *list, *count * sizeof *grown);
            rb_free_with(a, *list);
            *list = grown;
            *cap = ncap;
        }
        rb_cl_device *d = &(*list)[*count];
        int drc = describe(env, a, plat, ids[i], d);
        if (drc == RB_ENOMEM) {
            rc = drc;
        } else if (drc) {
            char text[320];
            snprintf(text, sizeof text, "a device was skipped: %s",
                     env->msg);
            note(why, why_len, text);
        } else {
            d->desc.index = (int)*count;
            (*count)++;
        }
    }
    rb_free_with(a, ids);
    return rc;
}

int rb_cl_discover(const rb_allocator *a, rb_cl_device **out,
                   size_t *count, char *why, size_t why_len)
{
    rb_cl_env env = {.fail_after = -1};
    *out = NULL;
    *count = 0;
    if (why && why_len)
        why[0] = '\0';

    cl_uint n = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &n);
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && n == 0)) {
        note(why, why_len, "no OpenCL platform: the ICD loader found none "
                           "(/etc/OpenCL/vendors)");
        return RB_OK;
    }
    if (rb_cl_status(&env, err, "clGetPlatformIDs")) {
        note(why, why_len, env.msg);
        return RB_OK; /* a broken loader is "no OpenCL" too */
    }
    cl_platform_id *plats = rb_alloc_with(a, n * sizeof *plats, 16);
    if (!plats)
        return RB_ENOMEM;
    int rc = RB_CL(&env, clGetPlatformIDs, n, plats, NULL);
    if (rc) {
        note(why, why_len, env.msg);
        rb_free_with(a, plats);
        return RB_OK;
    }
    rb_cl_device *list = NULL;
    size_t cap = 0;
    for (cl_uint p = 0; p < n; p++) {
        rc = add_platform(&env, a, plats[p], &list, count, &cap, why,
                          why_len);
        if (rc == RB_ENOMEM)
            break;
        if (rc) {
            char text[320];
            snprintf(text, sizeof text, "platform %u skipped: %s", p,
                     env.msg);
            note(why, why_len, text);
            rc = RB_OK;
        }
    }
    rb_free_with(a, plats);
    if (rc || *count == 0) {
        rb_free_with(a, list);
        *count = 0;
        if (rc == RB_OK)
            note(why, why_len, "no OpenCL device");
        return rc;
    }
    *out = list;
    return RB_OK;
}

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

long rb_cl_pick(const rb_cl_device *devs, size_t n, const char *name,
                int index, int gpu_only, char *why, size_t why_len)
{
    if (n == 0) {
        rb_copy_str(why, why_len, "no OpenCL device");
        return -1;
    }
    if (name) {
        for (size_t i = 0; i < n; i++)
            if (contains_nocase(devs[i].desc.name, name))
                return (long)i;
        snprintf(why, why_len, "no OpenCL device name contains \"%s\" "
                               "(%zu device(s), the first \"%s\")",
                 name, n, devs[0].desc.name);
        return -1;
    }
    if (index >= 0) {
        if ((size_t)index < n)
            return index;
        snprintf(why, why_len, "OpenCL device index %d is out of range "
                               "(%zu device(s))",
                 index, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (devs[i].is_gpu && devs[i].available && devs[i].compiler)
            return (long)i;
    if (!gpu_only) {
        for (size_t i = 0; i < n; i++)
            if (devs[i].available && devs[i].compiler)
                return (long)i;
        snprintf(why, why_len, "no available OpenCL device with a "
                               "compiler among %zu",
                 n);
        return -1;
    }
    snprintf(why, why_len, "no OpenCL GPU or accelerator (%zu other "
                           "device(s), the first \"%s\")",
             n, devs[0].desc.name);
    return -1;
}

int rb_devices_list(rb_device_desc *out, size_t cap, size_t *count,
                    char *why, size_t why_len)
{
    if (!count || (cap && !out))
        return RB_EINVAL;
    rb_allocator a;
    rb_allocator_default(&a);
    rb_cl_device *devs = NULL;
    size_t n = 0;
    char reason[512] = "";
    int rc = rb_cl_discover(&a, &devs, &n, reason, sizeof reason);
    *count = n;
    if (why && why_len)
        rb_copy_str(why, why_len, reason);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = devs[i].desc;
    rb_free_with(&a, devs);
    return RB_OK;
}
