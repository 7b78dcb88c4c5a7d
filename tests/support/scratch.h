/* scratch.h - a scratch directory for the suites that run a program on
 * files (the CLI's batch forms): files in it by name, .npy arrays, a JSON
 * boxes array, and a run of the program there with its stderr captured.
 * One directory at a time per process; every failure fails the test. */
#ifndef RB_SCRATCH_H
#define RB_SCRATCH_H

#include <stddef.h>

#include "raybox.h"

/* Makes /tmp/PREFIX-XXXXXX the scratch directory; _remove deletes it. */
void rbt_scratch_make(const char *prefix);
void rbt_scratch_remove(void);
const char *rbt_scratch_dir(void);

void rbt_scratch_path(char *out, size_t cap, const char *name);
void rbt_scratch_write(const char *name, const void *p, size_t n);
/* The file's bytes (at most 1 MiB; the caller frees them). */
unsigned char *rbt_scratch_read(const char *name, size_t *n);
/* Fails the test unless the file holds exactly want[0..n); what names it
 * in the message. */
void rbt_scratch_expect(const char *name, const unsigned char *want,
                        size_t n, const char *what);
/* A .npy v1 file of rows x cols little-endian float32; returns the
 * offset of the data. */
size_t rbt_scratch_npy(const char *name, const float *v, size_t rows,
                       size_t cols);

/* `"boxes":[[minx,...,maxz],...]` with %.9g (float32 round trips) into
 * out, which holds at least 120 bytes a box and 16 more; its length. */
size_t rbt_boxes_json(char *out, const rb_box *boxes, size_t n);

/* Runs `'program' args` in the directory, stderr into err (cap bytes,
 * NUL-terminated); returns the exit status. */
int rbt_scratch_run(const char *program, const char *args, char *err,
                    size_t cap);

#endif
