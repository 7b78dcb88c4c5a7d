/*
 * json_response.c - see json_response.h.
 *
 * The generator walks head, each field of the mode (open, one piece per
 * ray, close), scene_version, meta. next_piece() renders exactly one piece
 * (at most RBJ_TOKEN_MAX bytes) and advances the state; fill() renders
 * straight into the caller's buffer while a whole piece surely fits, and
 * through w->pend otherwise.
 */
#include "json_response.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "float_text.h"
#include "json_text.h"

enum phase { PH_HEAD, PH_OPEN, PH_ITEM, PH_CLOSE, PH_SCENE, PH_META, PH_DONE };

enum field {
    F_HIT,       /* pairs, nearest: hits[i].hit */
    F_BOX,       /* nearest: hits[i].box */
    F_T_ENTER,
    F_T_EXIT,
    F_FACE,
    F_EXIT_FACE,
    F_ANY,       /* any: any[i] */
    F_COUNT,     /* count: counts[i] */
    F_LIST,      /* all: list of [box, t_enter, t_exit] */
    F_TOTAL,     /* all: counts[i], every hit (the list keeps max_hits) */
    F_TRUNCATED, /* all: counts[i] > max_hits */
    F_KIND,      /* pairs, nearest with kinds beyond boxes: kinds[i] */
    F_NORMAL,    /* pairs, nearest with outputs ["normal"]: normals[3i..] */
    F_END
};

static const char *const field_names[F_END] = {
    [F_HIT] = "hit",        [F_BOX] = "box",       [F_T_ENTER] = "t_enter",
    [F_T_EXIT] = "t_exit",  [F_FACE] = "face",     [F_EXIT_FACE] = "exit_face",
    [F_ANY] = "hit",        [F_COUNT] = "hits",    [F_LIST] = "hits",
    [F_TOTAL] = "total",    [F_TRUNCATED] = "truncated",
    [F_KIND] = "kind",      [F_NORMAL] = "normal"};

/* The columns of each mode (SPEC section 3), F_END-terminated. */
static const unsigned char mode_fields[][9] = {
    [RB_MODE_PAIRS] = {F_HIT, F_KIND, F_T_ENTER, F_T_EXIT, F_FACE,
                       F_EXIT_FACE, F_NORMAL, F_END},
    [RB_MODE_NEAREST] = {F_HIT, F_BOX, F_KIND, F_T_ENTER, F_T_EXIT, F_FACE,
                         F_EXIT_FACE, F_NORMAL, F_END},
    [RB_MODE_ANY] = {F_ANY, F_END},
    [RB_MODE_COUNT] = {F_COUNT, F_END},
    [RB_MODE_ALL] = {F_LIST, F_TOTAL, F_TRUNCATED, F_END},
};

void rbj_meta_from_run(rbj_meta *meta, const rb_run_info *info)
{
    meta->backend = info->backend;
    meta->device = info->device;
    meta->elapsed_ms = info->elapsed_ms;
    meta->fell_back = info->fell_back;
    meta->fallback_reason = info->fallback_reason;
}

void rbj_writer_init(rbj_writer *w, const rbj_response *resp)
{
    memset(w, 0, sizeof *w);
    w->resp = *resp;
    w->phase = PH_HEAD;
}

int rbj_writer_done(const rbj_writer *w)
{
    return w->phase == PH_DONE && w->pend_off == w->pend_len;
}

/* ------------------------------------------------------------------------
 * Pieces
 */
static size_t put(char *out, size_t at, const char *s)
{
    size_t n = strlen(s);
    memcpy(out + at, s, n + 1);
    return at + n;
}

/* A float, null for +-inf (a miss's values and an open-ended t_exit). */
static size_t put_float(char *out, size_t at, float x)
{
    if (isinf(x))
        return put(out, at, "null");
    return at + rb_float_format(x, out + at);
}

static size_t put_face(char *out, size_t at, int face)
{
    const char *name = rb_face_name(face);
    if (!name)
        return put(out, at, "null");
    at = put(out, at, "\"");
    at = put(out, at, name);
    return put(out, at, "\"");
}

/* Decimal digits by hand: one per ray in the box and hits columns. */
static size_t put_uint(char *out, size_t at, unsigned long long v)
{
    char d[24];
    size_t n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        out[at++] = d[--n];
    out[at] = '\0';
    return at;
}

static size_t put_int(char *out, size_t at, long long v)
{
    if (v < 0) {
        out[at++] = '-';
        return put_uint(out, at, 0ull - (unsigned long long)v);
    }
    return put_uint(out, at, (unsigned long long)v);
}

/* One ray's value of a flat column. */
static size_t put_item(const rbj_writer *w, enum field f, char *out,
                       size_t at)
{
    const rb_results *res = w->resp.results;
    size_t i = w->item;
    const rb_hit *h = res->hits ? &res->hits[i] : NULL;
    switch (f) {
    case F_HIT:
        return put(out, at, h->hit ? "true" : "false");
    case F_BOX:
        return put_int(out, at, h->hit ? h->box : -1);
    case F_T_ENTER:
        return h->hit ? put_float(out, at, h->t_enter) : put(out, at, "null");
    case F_T_EXIT:
        return h->hit ? put_float(out, at, h->t_exit) : put(out, at, "null");
    case F_FACE:
        return put_face(out, at, h->hit ? h->face : RB_FACE_NONE);
    case F_EXIT_FACE:
        return put_face(out, at, h->hit ? h->exit_face : RB_FACE_NONE);
    case F_ANY:
        return put(out, at, res->any[i] ? "true" : "false");
    case F_COUNT:
    case F_TOTAL:
        return put_int(out, at, res->counts[i]);
    case F_TRUNCATED:
        return put(out, at, res->counts[i] > w->resp.max_hits ? "true"
                                                               : "false");
    case F_KIND: {
        const char *k = rb_kind_name(res->kinds[i]);
        if (!k)
            return put(out, at, "null");
        at = put(out, at, "\"");
        at = put(out, at, k);
        return put(out, at, "\"");
    }
    case F_NORMAL: {
        const float *n = res->normals + 3 * i;
        if (isnan(n[0]))
            return put(out, at, "null");
        for (int a = 0; a < 3; a++) {
            at = put(out, at, a ? "," : "[");
            at = put_float(out, at, n[a]);
        }
        return put(out, at, "]");
    }
    default:
        return at;
    }
}

static enum field current_field(const rbj_writer *w)
{
    return (enum field)mode_fields[w->resp.mode][w->field];
}

/* Moves to the next ray, or closes the column after the last. */
static void next_item(rbj_writer *w)
{
    w->sub = 0;
    if (++w->item >= w->resp.n_rays)
        w->phase = PH_CLOSE;
}

/* all mode: "[" opens a ray's list, then one "[box,t_enter,t_exit]" per
 * hit, then "]". */
static size_t put_list_piece(rbj_writer *w, char *out, size_t at)
{
    const rb_results *res = w->resp.results;
    uint32_t stride = w->resp.max_hits;
    size_t i = w->item;
    size_t n = res->counts[i] < stride ? res->counts[i] : stride;
    if (w->sub == 0) {
        at = put(out, at, i ? ",[" : "[");
    } else {
        const rb_list_hit *e = &res->list[i * stride + (w->sub - 1)];
        at = put(out, at, w->sub > 1 ? ",[" : "[");
        at = put_int(out, at, e->box);
        at = put(out, at, ",");
        at = put_float(out, at, e->t_enter);
        at = put(out, at, ",");
        at = put_float(out, at, e->t_exit);
        at = put(out, at, "]");
    }
    if (w->sub == n) {
        at = put(out, at, "]");
        next_item(w);
    } else {
        w->sub++;
    }
    return at;
}

static size_t put_meta(const rbj_writer *w, char *out)
{
    const rbj_meta *m = &w->resp.meta;
    char ms[64];
    size_t at = put(out, 0, ",\"meta\":{\"backend\":");
    at += rbj_quote(out + at, 64, m->backend ? m->backend : "");
    at = put(out, at, ",\"device\":");
    at += rbj_quote(out + at, 320, m->device ? m->device : "");
    rb_ms_format(m->elapsed_ms, ms, sizeof ms);
    at = put(out, at, ",\"elapsed_ms\":");
    at = put(out, at, ms);
    at = put(out, at, m->fell_back ? ",\"fell_back\":true"
                                   : ",\"fell_back\":false");
    if (m->fell_back && m->fallback_reason && m->fallback_reason[0]) {
        at = put(out, at, ",\"fallback_reason\":");
        at += rbj_quote(out + at, 320, m->fallback_reason);
    }
    return put(out, at, "}}");
}

/* Renders the next piece into out (RBJ_TOKEN_MAX bytes of room). */
static size_t next_piece(rbj_writer *w, char *out)
{
    size_t at = 0;
    const char *mode;
    switch (w->phase) {
    case PH_HEAD:
        mode = rb_mode_name(w->resp.mode);
        at = put(out, at, "{\"mode\":\"");
        at = put(out, at, mode ? mode : "");
        at = put(out, at, "\",\"count\":");
        at = put_int(out, at, (long long)w->resp.n_rays);
        w->phase = mode ? PH_OPEN : PH_SCENE;
        return at;
    case PH_OPEN:
        if (current_field(w) == F_END) {
            w->phase = PH_SCENE;
            return 0;
        }
        /* Columns the answer has only sometimes. */
        if ((current_field(w) == F_KIND && !w->resp.results->kinds) ||
            (current_field(w) == F_NORMAL && !w->resp.results->normals)) {
            w->field++;
            return 0;
        }
        at = put(out, at, ",\"");
        at = put(out, at, field_names[current_field(w)]);
        at = put(out, at, "\":[");
        w->item = 0;
        w->sub = 0;
        w->phase = w->resp.n_rays ? PH_ITEM : PH_CLOSE;
        return at;
    case PH_ITEM:
        if (current_field(w) == F_LIST)
            return put_list_piece(w, out, at);
        if (w->item)
            at = put(out, at, ",");
        at = put_item(w, current_field(w), out, at);
        next_item(w);
        return at;
    case PH_CLOSE:
        w->field++;
        w->phase = PH_OPEN;
        return put(out, at, "]");
    case PH_SCENE:
        w->phase = PH_META;
        if (!w->resp.has_scene_version)
            return 0;
        at = put(out, at, ",\"scene_version\":");
        return put_uint(out, at, (unsigned long long)w->resp.scene_version);
    case PH_META:
        w->phase = PH_DONE;
        return put_meta(w, out);
    default:
        return 0;
    }
}

size_t rbj_writer_fill(rbj_writer *w, char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        if (w->pend_off < w->pend_len) {
            size_t k = w->pend_len - w->pend_off;
            if (k > cap - n)
                k = cap - n;
            memcpy(buf + n, w->pend + w->pend_off, k);
            w->pend_off += k;
            n += k;
            continue;
        }
        if (w->phase == PH_DONE)
            break;
        if (cap - n >= RBJ_TOKEN_MAX) {
            n += next_piece(w, buf + n);
        } else {
            w->pend_len = next_piece(w, w->pend);
            w->pend_off = 0;
        }
    }
    return n;
}
