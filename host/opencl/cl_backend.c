/* TEMPORARY during bring-up: replaced by the real OpenCL backend. */
#include "../internal.h"
int rb_cl_backend_create(rb_context *ctx, int want_gpu_only, rb_backend **out,
                         char *why, size_t why_len)
{
    (void)ctx; (void)want_gpu_only; *out = NULL;
    rb_copy_str(why, why_len, "OpenCL backend not built yet");
    return RB_ENODEV;
}
int rb_devices_list(rb_device_desc *out, size_t cap, size_t *count, char *why, size_t why_len)
{
    (void)out; (void)cap; *count = 0;
    rb_copy_str(why, why_len, "OpenCL backend not built yet");
    return RB_OK;
}
