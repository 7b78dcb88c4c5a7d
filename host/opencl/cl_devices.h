/*
 * cl_devices.h - OpenCL device discovery through the ICD loader, and the
 * choice of the device a context runs on.
 */
#ifndef RB_CL_DEVICES_H
#define RB_CL_DEVICES_H

#include "cl_util.h"

/* One device and what the backend needs to know about it beyond the
 * public description. */
typedef struct rb_cl_device {
    cl_platform_id platform;
    cl_device_id id;
    rb_device_desc desc;        /* desc.index = position in the list */
    char platform_version[256]; /* part of the binary cache key */
    int is_gpu;                 /* GPU or accelerator */
    int available;              /* CL_DEVICE_AVAILABLE */
    int compiler;               /* CL_DEVICE_COMPILER_AVAILABLE */
    int fp64;                   /* cl_khr_fp64 */
    int host_unified;           /* CL_DEVICE_HOST_UNIFIED_MEMORY */
    uint64_t local_mem;         /* CL_DEVICE_LOCAL_MEM_SIZE */
    size_t max_work_group;      /* min(MAX_WORK_GROUP_SIZE, item size 0) */
} rb_cl_device;

/* Lists every device of every platform, platforms in the loader's order
 * and devices in each platform's order; the position is the device index.
 * *out is allocated with `a` (free it with rb_free_with) and is NULL when
 * *count is 0. No platform at all (CL_PLATFORM_NOT_FOUND_KHR or zero
 * platforms) is not an error: RB_OK with *count 0 and the reason in why.
 * A platform or device that cannot be queried is skipped, and the reason
 * is noted in why. Returns RB_ENOMEM when the list cannot be allocated. */
int rb_cl_discover(const rb_allocator *a, rb_cl_device **out,
                   size_t *count, char *why, size_t why_len);

/* The device a context uses: the first whose name contains `name`
 * (case-insensitive) when name is not NULL, else device `index` when
 * index >= 0, else the first available GPU or accelerator, else (unless
 * gpu_only) the first available device. Returns its position, or -1 with
 * the reason in why. */
long rb_cl_pick(const rb_cl_device *devs, size_t n, const char *name,
                int index, int gpu_only, char *why, size_t why_len);

#endif /* RB_CL_DEVICES_H */
