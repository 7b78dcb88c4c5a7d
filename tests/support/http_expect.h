/* http_expect.h - what rayboxd must answer, computed in-process: random
 * requests in both forms (JSON text and binary body, the same float32
 * values), and the library's answer rendered by the same JSON writer or
 * compared with a binary answer bit for bit. */
#ifndef RB_HTTP_EXPECT_H
#define RB_HTTP_EXPECT_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"
#include "testutil.h"

typedef struct rbt_query {
    rb_mode mode;
    unsigned dims;
    uint32_t max_hits;  /* 0: not in the request */
    int ranges;         /* rays carry their own tmin/tmax */
    size_t n_rays, n_boxes;
    rb_ray *rays;       /* 3D records even for 2D (only x/y used) */
    rb_box *boxes;
} rbt_query;

/* Random rays and boxes in [-10, 10]^dims, some hitting, some missing. */
void rbt_query_random(rbt_query *q, rbt_rng *rng, rb_mode mode,
                      unsigned dims, size_t n_rays, size_t n_boxes,
                      int ranges, uint32_t max_hits);
void rbt_query_free(rbt_query *q);

/* The request body in JSON (exact float text) and in binary; boxes are
 * left out when with_boxes is 0 (scene queries). malloc'ed. */
char *rbt_query_json(const rbt_query *q, int with_boxes, size_t *len);
void *rbt_query_binary(const rbt_query *q, int with_boxes, size_t *len);
/* Scene bodies (POST /v1/scenes) from the query's boxes. */
char *rbt_scene_json(const rbt_query *q, size_t *len);
void *rbt_scene_binary(const rbt_query *q, size_t *len);

typedef struct rbt_expect {
    int status;          /* 200 or the library's error class */
    char *json;          /* the JSON answer up to "meta" (malloc'ed) */
    size_t json_len;
    rb_results res;      /* the library's arrays */
    rbt_query q;         /* shape only (no arrays) */
    int has_version;
    uint64_t version;
} rbt_expect;

/* Runs q in-process on ctx - against scene when not NULL (then the
 * answer carries scene_version) - and renders it. */
void rbt_expect_run(rb_context *ctx, const rbt_query *q,
                    const rb_scene *scene, uint64_t version, rbt_expect *e);
void rbt_expect_free(rbt_expect *e);

/* 0 when the JSON answer equals the expected bytes up to "meta"; else -1
 * with a reason. */
int rbt_check_json(const rbt_expect *e, const char *body, size_t len,
                   char *why, size_t cap);
/* 0 when the binary answer equals the expected results bit for bit. */
int rbt_check_binary(const rbt_expect *e, const void *data, size_t len,
                     char *why, size_t cap);

#endif
