/*
 * npy.h - NumPy .npy files of float32 rows, for the batch CLI: what
 * `numpy.save(path, a.astype(numpy.float32))` writes for a C-ordered
 * (N, cols) array (format versions 1, 2 and 3), nothing else.
 */
#ifndef RB_NPY_H
#define RB_NPY_H

#include <stddef.h>
#include <stdio.h>

/* Whether the first bytes of a file are a .npy magic. */
int npy_is_npy(const unsigned char *head, size_t len);

/* Reads the header of an (N, C) little-endian float32 C-order array from
 * f (at its start), leaving f at the first float: 0 with *rows = N and
 * *cols = C (1..64), or -1 with a one-line reason (dtype, order, shape). */
int npy_read_header(FILE *f, size_t *rows, size_t *cols, char *why,
                    size_t why_len);

/* Reads an (N, cols) little-endian float32 C-order array from f (at its
 * start) into *data (malloc'ed, N * cols floats) and *rows. 0, or -1
 * with a one-line reason naming what is wrong (dtype, order, shape). */
int npy_read_f32(FILE *f, size_t cols, float **data, size_t *rows,
                 char *why, size_t why_len);

#endif
