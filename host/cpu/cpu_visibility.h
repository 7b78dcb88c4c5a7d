/*
 * cpu_visibility.h - the native backend's run_visibility (internal.h's
 * contract): observers x targets with the segments made in the tasks
 * that walk them, in a spatial order of the points (cpu_visibility.c).
 */
#ifndef RB_CPU_VISIBILITY_H
#define RB_CPU_VISIBILITY_H

#include "../internal.h"

struct rb_bvh_walkers;

/* Sets the bits of the visible pairs (bits zeroed by the caller) by
 * walking job->bvh with walk->any on ctx's pool (workers threads), and
 * fills info's backend, device (`device`) and chunks (tasks). Returns
 * RB_OK, RB_ECANCELED when job->stop said stop (bits then partly
 * written), or RB_VIS_DECLINED, nothing written, without a hierarchy (the
 * tiles then scan by brute force), with more than 2^32 - 1 points a side,
 * or without memory for the points' order. Call from ctx's thread. */
int rb_cpu_visibility(rb_context *ctx, const struct rb_bvh_walkers *walk,
                      unsigned workers, const char *device,
                      const rb_vis_job *job, uint8_t *bits, rb_run_info *info);

#endif
