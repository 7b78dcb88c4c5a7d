/*
 * render_image.h - the pictures of POST /v1/scenes/{id}/render and
 * `raybox render` (SPEC section 8): colours from a nearest answer, and
 * an 8-bit RGB PNG of them (libpng). Shared by rayboxd and the CLI.
 *
 * Colours, pixel i of the answer (row by row from the top):
 *   a miss is exactly black (0, 0, 0); a hit is never black.
 *   depth:  grey v = round(32 + 223 * (t_hi - t) / (t_hi - t_lo)) over
 *           the image's own hit range [t_lo, t_hi] of t_enter: the nearest
 *           hit is 255, the farthest 32 (every hit 255 when t_lo == t_hi).
 *   normal: round((n + 1) / 2 * 255) per channel, clamped to 0..255; a hit
 *           without a normal (its ray starts inside the element) is grey
 *           (128, 128, 128). A unit normal cannot round to black.
 *   id:     a colour per element id: 48 + (h_k * 207) / 255 for the three
 *           low bytes h_k of a 32-bit hash of the id, so never black.
 * Thread-safe; no global state.
 */
#ifndef RBD_RENDER_IMAGE_H
#define RBD_RENDER_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "json_request.h"

/* The grey of a depth image's hit, for tests: t within [lo, hi]. */
uint8_t rbr_depth_grey(float t, float lo, float hi);
/* The colour of element id in an id image. */
void rbr_id_colour(int32_t id, uint8_t rgb[3]);
/* One channel of a normal image. */
uint8_t rbr_normal_channel(float n);

/* Writes 3 * n bytes of colour for the n answers of res (nearest: hits,
 * and normals for RBQ_IMAGE_NORMAL, which must then be there). */
void rbr_image_rgb(rbq_image image, const rb_results *res, size_t n,
                   uint8_t *rgb);

/* An 8-bit RGB PNG of width x height pixels (rgb rows top first, no
 * padding), in a malloc'ed buffer (*out, *len; the caller frees it).
 * Returns 0, or -1 with why filled (out of memory, libpng's message). */
int rbr_png_encode(const uint8_t *rgb, uint32_t width, uint32_t height,
                   void **out, size_t *len, char *why, size_t why_len);

#endif
