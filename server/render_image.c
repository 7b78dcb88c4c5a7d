/* render_image.c - see render_image.h. */
#include "render_image.h"

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint8_t rbr_depth_grey(float t, float lo, float hi)
{
    if (!(hi > lo))
        return 255;
    double v = 32.0 + 223.0 * ((double)hi - (double)t) /
                          ((double)hi - (double)lo);
    v = v < 32.0 ? 32.0 : v > 255.0 ? 255.0 : v;
    return (uint8_t)lround(v);
}

uint8_t rbr_normal_channel(float n)
{
    double v = ((double)n + 1.0) * 0.5 * 255.0;
    v = v < 0.0 ? 0.0 : v > 255.0 ? 255.0 : v;
    return (uint8_t)lround(v);
}

void rbr_id_colour(int32_t id, uint8_t rgb[3])
{
    /* lowbias32 (Wellons): neighbouring ids get unrelated colours. */
    uint32_t h = (uint32_t)id + 0x9e3779b9u; /* id 0 is not grey */
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    for (int k = 0; k < 3; k++)
        rgb[k] = (uint8_t)(48u + ((h >> (8 * k)) & 0xffu) * 207u / 255u);
}

void rbr_image_rgb(rbq_image image, const rb_results *res, size_t n,
                   uint8_t *rgb)
{
    float lo = INFINITY, hi = -INFINITY;
    if (image == RBQ_IMAGE_DEPTH)
        for (size_t i = 0; i < n; i++)
            if (res->hits[i].hit) {
                float t = res->hits[i].t_enter;
                lo = t < lo ? t : lo;
                hi = t > hi ? t : hi;
            }
    for (size_t i = 0; i < n; i++) {
        uint8_t *c = rgb + 3 * i;
        const rb_hit *h = &res->hits[i];
        if (!h->hit) {
            c[0] = c[1] = c[2] = 0;
            continue;
        }
        switch (image) {
        case RBQ_IMAGE_DEPTH:
            c[0] = c[1] = c[2] = rbr_depth_grey(h->t_enter, lo, hi);
            break;
        case RBQ_IMAGE_NORMAL: {
            const float *nv = res->normals + 3 * i;
            if (isnan(nv[0])) {
                c[0] = c[1] = c[2] = 128;
                break;
            }
            for (int k = 0; k < 3; k++)
                c[k] = rbr_normal_channel(nv[k]);
            if (!c[0] && !c[1] && !c[2]) /* never, for a unit normal */
                c[0] = c[1] = c[2] = 1;
            break;
        }
        case RBQ_IMAGE_ID:
            rbr_id_colour(h->box, c);
            break;
        }
    }
}

int rbr_png_encode(const uint8_t *rgb, uint32_t width, uint32_t height,
                   void **out, size_t *len, char *why, size_t why_len)
{
    *out = NULL;
    *len = 0;
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = width;
    img.height = height;
    img.format = PNG_FORMAT_RGB;
    png_alloc_size_t size = 0;
    /* The first call sizes the buffer, the second writes it. */
    if (!png_image_write_to_memory(&img, NULL, &size, 0, rgb, 0, NULL)) {
        snprintf(why, why_len, "PNG: %s", img.message);
        png_image_free(&img);
        return -1;
    }
    void *buf = malloc(size ? size : 1);
    if (!buf) {
        snprintf(why, why_len, "out of memory for the PNG (%llu bytes)",
                 (unsigned long long)size);
        return -1;
    }
    if (!png_image_write_to_memory(&img, buf, &size, 0, rgb, 0, NULL)) {
        snprintf(why, why_len, "PNG: %s", img.message);
        png_image_free(&img);
        free(buf);
        return -1;
    }
    *out = buf;
    *len = size;
    return 0;
}
