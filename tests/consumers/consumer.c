/* consumer.c - a program built against an installed libraybox (by
 * tests/test_install.sh, through pkg-config and through find_package):
 * one rb_intersect on the CPU backend, and the hit it must give. */
#include <math.h>
#include <stdio.h>

#include <raybox.h>

int main(void)
{
    rb_ray ray = {.origin = {0, 0, 0}, .dir = {1, 0, 0},
                  .tmin = 0, .tmax = INFINITY};
    rb_box boxes[] = {{.min = {4, -1, -1}, .max = {5, 1, 1}},
                      {.min = {1, -1, -1}, .max = {2, 1, 1}}};
    rb_hit hit;
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    opt.threads = 1;
    rb_context *ctx;
    char why[256];
    if (rb_context_create(&opt, &ctx, why, sizeof why) != RB_OK) {
        fprintf(stderr, "consumer: rb_context_create: %s\n", why);
        return 1;
    }
    rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = &ray,
                  .n_rays = 1, .boxes = boxes, .n_boxes = 2};
    rb_results r = {.hits = &hit, .capacity = 1};
    int rc = rb_intersect(ctx, &q, &r);
    if (rc != RB_OK) {
        fprintf(stderr, "consumer: rb_intersect: %s: %s\n",
                rb_status_name(rc), rb_context_error(ctx)->message);
        rb_context_destroy(ctx);
        return 1;
    }
    rb_context_destroy(ctx);
    if (!hit.hit || hit.box != 1 || hit.t_enter != 1.0f ||
        hit.t_exit != 2.0f || hit.face != RB_FACE_NEG_X) {
        fprintf(stderr, "consumer: wrong answer: hit %d box %d t %g..%g\n",
                hit.hit, (int)hit.box, hit.t_enter, hit.t_exit);
        return 1;
    }
    printf("raybox %s: box %d at t = %g (%s)\n", RB_VERSION_STRING,
           (int)hit.box, hit.t_enter, rb_face_name(hit.face));
    return 0;
}
