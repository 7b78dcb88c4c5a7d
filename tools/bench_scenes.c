/* bench_scenes.c - see bench_scenes.h. */
#include "bench_scenes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define PI 3.14159265358979323846

const char *const bench_kind_names[K_KINDS] = {"box", "obb", "xbox",
                                               "sphere", "mixed"};

int bench_kind_of(const char *name)
{
    for (int k = 0; k < K_KINDS; k++)
        if (!strcmp(name, bench_kind_names[k]))
            return k;
    return -1;
}

uint64_t bench_scene_seed(uint64_t seed, size_t size_index, int kind)
{
    return seed * 1000 + size_index * 10 + (uint64_t)kind;
}

void bench_elements_free(bench_elements *e)
{
    free(e->boxes);
    free(e->obbs);
    free(e->xboxes);
    free(e->spheres);
    memset(e, 0, sizeof *e);
}

/* A uniform random rotation (Shoemake), as a unit quaternion (w, x, y, z). */
static void random_quaternion(uint64_t *s, double q[4])
{
    double u1 = bench_uniform(s), u2 = bench_uniform(s), u3 = bench_uniform(s);
    double a = sqrt(1 - u1), b = sqrt(u1);
    q[0] = b * cos(2 * PI * u3);
    q[1] = a * sin(2 * PI * u2);
    q[2] = a * cos(2 * PI * u2);
    q[3] = b * sin(2 * PI * u3);
}

static void rotation(const double q[4], double r[3][3])
{
    double w = q[0], x = q[1], y = q[2], z = q[3];
    double m[3][3] = {
        {1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)},
        {2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)},
        {2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)}};
    memcpy(r, m, sizeof m);
}

static void sides(uint64_t *s, float side, float w[3])
{
    for (int a = 0; a < 3; a++)
        w[a] = side * (0.2f + 0.8f * bench_uniform(s));
}

int bench_make_elements(int kind, size_t n, float fill, uint64_t seed,
                        bench_elements *e)
{
    memset(e, 0, sizeof *e);
    if (kind == K_MIXED) {
        for (int k = 0; k < 4; k++)
            e->n[k] = n / 4;
        e->n[0] += n - 4 * (n / 4);
    } else {
        e->n[kind] = n;
    }
    float side = sqrtf(fill / (0.54f * (float)(n ? n : 1)));
    e->boxes = malloc((e->n[0] ? e->n[0] : 1) * sizeof *e->boxes);
    e->obbs = malloc((e->n[1] ? e->n[1] : 1) * sizeof *e->obbs);
    e->xboxes = malloc((e->n[2] ? e->n[2] : 1) * sizeof *e->xboxes);
    e->spheres = malloc((e->n[3] ? e->n[3] : 1) * sizeof *e->spheres);
    if (!e->boxes || !e->obbs || !e->xboxes || !e->spheres)
        return -1;
    uint64_t s = seed;
    for (size_t i = 0; i < e->n[0]; i++) {
        float w[3];
        sides(&s, side, w);
        for (int a = 0; a < 3; a++) {
            e->boxes[i].min[a] = bench_uniform(&s) * (1 - w[a]);
            e->boxes[i].max[a] = e->boxes[i].min[a] + w[a];
        }
    }
    for (size_t i = 0; i < e->n[1]; i++) {
        float w[3], c[3], h[3], qf[4];
        double q[4];
        sides(&s, side, w);
        for (int a = 0; a < 3; a++) {
            c[a] = bench_uniform(&s);
            h[a] = 0.5f * w[a];
        }
        random_quaternion(&s, q);
        for (int k = 0; k < 4; k++)
            qf[k] = (float)q[k];
        if (rb_obb_from_quaternion(c, h, qf, &e->obbs[i]) != RB_OK)
            return -1;
    }
    for (size_t i = 0; i < e->n[2]; i++) {
        float w[3];
        double q[4], r[3][3];
        sides(&s, side, w);
        random_quaternion(&s, q);
        rotation(q, r);
        double shear = 0.5 * bench_uniform(&s) - 0.25;
        /* A = R * diag(w) * [[1, shear, 0], [0, 1, 0], [0, 0, 1]] */
        rb_xbox *x = &e->xboxes[i];
        for (int a = 0; a < 3; a++) {
            x->min[a] = -0.5f;
            x->max[a] = 0.5f;
        }
        for (int row = 0; row < 3; row++) {
            double c0 = r[row][0] * w[0], c1 = r[row][1] * w[1],
                   c2 = r[row][2] * w[2];
            x->a[row][0] = (float)c0;
            x->a[row][1] = (float)(c0 * shear + c1);
            x->a[row][2] = (float)c2;
            x->a[row][3] = bench_uniform(&s);
        }
    }
    for (size_t i = 0; i < e->n[3]; i++) {
        for (int a = 0; a < 3; a++)
            e->spheres[i].center[a] = bench_uniform(&s);
        e->spheres[i].radius = side * (0.15f + 0.53f * bench_uniform(&s));
    }
    return 0;
}

rb_shapes bench_shapes_of(const bench_elements *e)
{
    rb_shapes sh = {.obbs = e->obbs, .n_obbs = e->n[1],
                    .xboxes = e->xboxes, .n_xboxes = e->n[2],
                    .spheres = e->spheres, .n_spheres = e->n[3]};
    return sh;
}
