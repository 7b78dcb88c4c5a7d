/* gpu_options.c - what libraybox hands an OpenCL driver, for the offline
 * GPU kernel report (scripts/gpu-report.sh, make gpu-report): the
 * embedded kernel source, or the build options of one kernel variant,
 * from the library's own code (host/opencl/cl_program.c) so that the
 * report compiles what a GPU would get. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl/cl_internal.h"

extern const unsigned char rb_kernel_source[];
extern const size_t rb_kernel_source_len;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpu_options --source | --kernels\n"
            "       gpu_options VARIANT DIVISION [STACK]\n"
            "Prints what libraybox gives the OpenCL compiler: with --source\n"
            "the embedded kernel source (kernels/*, joined), with --kernels\n"
            "the number of kernels the library takes from the tiled (GPU)\n"
            "variant's program, else the build\n"
            "options of a kernel variant, with the walk stack it gets by\n"
            "default or with STACK entries (as RAYBOX_CL_BVH_STACK gives).\n"
            "  VARIANT   tiled (GPUs and accelerators) or wide (CPU devices)\n"
            "  DIVISION  exact (the device divides correctly rounded: the\n"
            "            option -cl-fp32-correctly-rounded-divide-sqrt) or\n"
            "            double (it has fp64 instead: RB_RECIP_VIA_DOUBLE)\n"
            "  --help    this text\n");
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--kernels") == 0) {
        int n = 0; /* the wide variant's own kernels are not a GPU's */
        for (int k = 0; k < RB_CLK_N; k++)
            n += !rb_cl_kernel_wide_only(k);
        printf("%d\n", n);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--source") == 0) {
        return fwrite(rb_kernel_source, 1, rb_kernel_source_len, stdout) ==
                       rb_kernel_source_len
                   ? 0
                   : 1;
    }
    if (argc != 3 && argc != 4) {
        usage(stderr);
        return 2;
    }
    int wide;
    if (strcmp(argv[1], "tiled") == 0) {
        wide = 0;
    } else if (strcmp(argv[1], "wide") == 0) {
        wide = 1;
    } else {
        fprintf(stderr, "gpu_options: VARIANT '%s' is not tiled or wide\n",
                argv[1]);
        return 2;
    }
    enum rb_cl_division div;
    if (strcmp(argv[2], "exact") == 0) {
        div = RB_CL_DIV_EXACT;
    } else if (strcmp(argv[2], "double") == 0) {
        div = RB_CL_DIV_DOUBLE;
    } else {
        fprintf(stderr, "gpu_options: DIVISION '%s' is not exact or double\n",
                argv[2]);
        return 2;
    }
    unsigned stack = wide ? RB_CL_BVH_STACK_WIDE : RB_CL_BVH_STACK_TILED;
    if (argc == 4) {
        char *end;
        unsigned long v = strtoul(argv[3], &end, 10);
        if (end == argv[3] || *end || v == 0 || v > RB_CL_BVH_STACK_MAX ||
            (v & (v - 1))) {
            fprintf(stderr,
                    "gpu_options: STACK '%s' is not a power of two in 1..%u\n",
                    argv[3], RB_CL_BVH_STACK_MAX);
            return 2;
        }
        stack = (unsigned)v;
    }
    char opts[256];
    rb_cl_build_options(wide, div, stack, opts, sizeof opts);
    puts(opts);
    return 0;
}
