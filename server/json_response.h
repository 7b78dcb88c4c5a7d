/*
 * json_response.h - the columnar JSON response of SPEC section 4, written
 * by a resumable generator, so that rayboxd can stream it (one fill per
 * MHD reader callback) and the CLI can write it through a fixed buffer.
 * Both call this one generator: their bytes differ only inside "meta".
 *
 *   {"mode":"nearest","count":2,
 *    "hit":[true,false],"box":[0,-1],"t_enter":[4.0,null],
 *    "t_exit":[6.0,null],"face":["-x",null],"exit_face":["+x",null],
 *    "scene_version":3,
 *    "meta":{"backend":"cpu","device":"...","elapsed_ms":0.412,
 *            "fell_back":false}}
 *
 * Fields per mode: pairs hit, t_enter, t_exit, face, exit_face; nearest
 * hit, box (the element's id, -1 for a miss), t_enter, t_exit, face,
 * exit_face; with results->kinds (a query with kinds beyond boxes) pairs
 * and nearest carry "kind" ("box", "obb", ..., null for a miss) after hit
 * / box, and with results->normals "normal" last ([x,y,z] or null); any hit;
 * count hits (integers); all hits (per ray a list of [box, t_enter,
 * t_exit], sorted as the library gave them) and truncated (booleans).
 * null stands for a miss's values, for no face and for t_exit = +inf.
 * "scene_version" only for scene queries; "meta" always last, with
 * "fallback_reason" after "fell_back" when the query fell back.
 * Floats are rb_float_format's text: strtof reads back the exact float32.
 * There is no white space.
 */
#ifndef RB_JSON_RESPONSE_H
#define RB_JSON_RESPONSE_H

#include <stddef.h>
#include <stdint.h>

#include "raybox.h"

typedef struct rbj_meta {
    const char *backend;         /* NULL is written as "" */
    const char *device;
    double elapsed_ms;
    int fell_back;
    const char *fallback_reason; /* written only when fell_back */
} rbj_meta;

/* meta from what ran the query; the strings point into info. */
void rbj_meta_from_run(rbj_meta *meta, const rb_run_info *info);

typedef struct rbj_response {
    rb_mode mode;
    size_t n_rays;
    uint32_t max_hits;          /* all mode: the query's list stride */
    const rb_results *results;  /* rb_intersect's output for n_rays rays */
    int has_scene_version;
    uint64_t scene_version;
    rbj_meta meta;
} rbj_response;

/* The longest piece the generator renders at once; a buffer with this
 * much room is written without an intermediate copy. */
#define RBJ_TOKEN_MAX 1024

/* Generator state. Fields are private; the struct is public so that it
 * can live on the stack or inside a per-request state. */
typedef struct rbj_writer {
    rbj_response resp;
    int phase;
    unsigned field;   /* index into the mode's field list */
    size_t item;      /* ray */
    size_t sub;       /* all mode: position inside a ray's list */
    char pend[RBJ_TOKEN_MAX];
    size_t pend_len, pend_off;
} rbj_writer;

/* Starts a response. resp is copied; what it points to (results, meta
 * strings) is borrowed until the writer is done. */
void rbj_writer_init(rbj_writer *w, const rbj_response *resp);

/* Writes the next bytes of the response into buf, up to cap, and returns
 * how many. It fills buf as far as it can: a piece that does not fit is
 * carried over to the next call, so any cap >= 1 makes progress and the
 * concatenated output does not depend on the caps used. Returns 0 once
 * everything was written (or when cap is 0). */
size_t rbj_writer_fill(rbj_writer *w, char *buf, size_t cap);

/* 1 when every byte has been handed out. */
int rbj_writer_done(const rbj_writer *w);

#endif
