/* fuzz_common.h - what both fuzz targets share: the library context their
 * accepted requests run on, and the comparison of two parses' shapes. */
#ifndef RB_FUZZ_COMMON_H
#define RB_FUZZ_COMMON_H

#include "raybox.h"

/* One CPU context with one thread, made on the first call and kept for
 * the process (libFuzzer calls a target millions of times); aborts if it
 * cannot be made. */
rb_context *fuzz_context(void);

/* 1 if the non-box elements of two parses are the same records. */
int fuzz_same_shapes(const rb_shapes *a, const rb_shapes *b);

#endif
