/* fuzz_common.c - see fuzz_common.h. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

rb_context *fuzz_context(void)
{
    static rb_context *ctx;
    if (!ctx) {
        rb_context_options o;
        rb_context_options_init(&o);
        o.backend = RB_BACKEND_CPU;
        o.threads = 1;
        if (rb_context_create(&o, &ctx, NULL, 0) != RB_OK)
            abort();
    }
    return ctx;
}

int fuzz_same_shapes(const rb_shapes *a, const rb_shapes *b)
{
    return a->n_obbs == b->n_obbs && a->n_xboxes == b->n_xboxes &&
           a->n_spheres == b->n_spheres && a->n_planes == b->n_planes &&
           (!a->n_obbs ||
            !memcmp(a->obbs, b->obbs, a->n_obbs * sizeof *a->obbs)) &&
           (!a->n_xboxes ||
            !memcmp(a->xboxes, b->xboxes, a->n_xboxes * sizeof *a->xboxes)) &&
           (!a->n_spheres ||
            !memcmp(a->spheres, b->spheres, a->n_spheres * sizeof *a->spheres)) &&
           (!a->n_planes ||
            !memcmp(a->planes, b->planes, a->n_planes * sizeof *a->planes));
}
