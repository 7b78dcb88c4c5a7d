/*
 * cl_util.h - OpenCL status names and the checked call that every OpenCL
 * call of the backend goes through.
 *
 * A failed call becomes RB_EDEVMEM (the device or host ran out of memory
 * or resources) or RB_EDEVICE, with a message that names the call and the
 * error; nothing here aborts or exits. The same wrapper carries the test
 * fault injection (cl_testhook.h): an armed counter makes one chosen call
 * fail with CL_OUT_OF_RESOURCES without running it.
 *
 * Release calls (clRelease*) are not checked: they run on cleanup paths
 * whose failure changes nothing the caller could act on.
 */
#ifndef RB_CL_UTIL_H
#define RB_CL_UTIL_H

#include <CL/cl.h>
#include <CL/cl_ext.h>

#include "../internal.h"

/* Where checked calls report, and the fault injection state. One per
 * backend (ctx set) or per discovery pass (ctx NULL: the message is kept
 * in msg only). */
typedef struct rb_cl_env {
    rb_context *ctx;
    long fail_after;   /* < 0: off; 0: the next checked call fails */
    uint64_t calls;    /* checked calls made so far */
    cl_int last;       /* errcode_ret of the last creator call */
    char msg[256];     /* the last failure */
} rb_cl_env;

/* "CL_OUT_OF_RESOURCES" for -5; "CL_UNKNOWN_ERROR" when unknown. */
const char *rb_cl_error_name(cl_int err);

/* Counts a call that is about to be made; returns 1 (once) when the
 * injection says this call must fail instead. */
int rb_cl_inject(rb_cl_env *env);

/* RB_OK for CL_SUCCESS; otherwise RB_EDEVMEM for CL_OUT_OF_RESOURCES,
 * CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_INVALID_BUFFER_SIZE and
 * CL_OUT_OF_HOST_MEMORY, RB_EDEVICE for the rest, with
 * "<call>: <error name> (<code>)" in env->msg and, when env->ctx is set,
 * in the context's error (rb_fail). */
int rb_cl_status(rb_cl_env *env, cl_int err, const char *call);

/* A checked call of a function that returns cl_int:
 *     rc = RB_CL(env, clFinish, queue);                                   */
#define RB_CL(env, fn, ...)                                                    \
    rb_cl_status((env),                                                        \
                 rb_cl_inject(env) ? CL_OUT_OF_RESOURCES : fn(__VA_ARGS__),    \
                 #fn)

/* A checked call of a creator whose last parameter is cl_int *errcode_ret
 * (left out of the arguments); the object goes to `out`, NULL on failure:
 *     rc = RB_CL_NEW(env, mem, clCreateBuffer, context, flags, size, NULL); */
#define RB_CL_NEW(env, out, fn, ...)                                           \
    rb_cl_status((env),                                                        \
                 rb_cl_inject(env)                                             \
                     ? ((out) = NULL, CL_OUT_OF_RESOURCES)                     \
                     : ((out) = fn(__VA_ARGS__, &(env)->last), (env)->last),   \
                 #fn)

#endif /* RB_CL_UTIL_H */
