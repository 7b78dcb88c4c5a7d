/* names.c - the status table and the names of enums, in one place. */
#include <string.h>
#include <strings.h>

#include "raybox.h"

const char *rb_status_name(int status)
{
    switch (status) {
#define RB_X_NAME(name, value, short_name, text)                               \
    case value:                                                                \
        return short_name;
        RB_STATUS_MAP(RB_X_NAME)
#undef RB_X_NAME
    }
    return "unknown";
}

const char *rb_status_str(int status)
{
    switch (status) {
#define RB_X_TEXT(name, value, short_name, text)                               \
    case value:                                                                \
        return text;
        RB_STATUS_MAP(RB_X_TEXT)
#undef RB_X_TEXT
    }
    return "unknown status";
}

const char *rb_face_name(int face)
{
    static const char *const names[] = {NULL, "-x", "+x", "-y",
                                        "+y", "-z", "+z", "surface"};
    if (face < 0 || face > RB_FACE_SURFACE)
        return NULL;
    return names[face];
}

static const char *const mode_names[] = {"pairs", "nearest", "any", "count",
                                         "all"};

const char *rb_mode_name(int mode)
{
    if (mode < 0 || mode > RB_MODE_ALL)
        return NULL;
    return mode_names[mode];
}

int rb_mode_parse(const char *text, rb_mode *out)
{
    for (int m = 0; m <= RB_MODE_ALL; m++) {
        if (text && strcmp(text, mode_names[m]) == 0) {
            *out = (rb_mode)m;
            return RB_OK;
        }
    }
    return RB_EINVAL;
}

static const char *const backend_names[] = {"auto", "cpu", "opencl"};

const char *rb_backend_kind_name(int kind)
{
    if (kind < 0 || kind > RB_BACKEND_OPENCL)
        return NULL;
    return backend_names[kind];
}

int rb_backend_kind_parse(const char *text, rb_backend_kind *out)
{
    for (int k = 0; k <= RB_BACKEND_OPENCL; k++) {
        if (text && strcasecmp(text, backend_names[k]) == 0) {
            *out = (rb_backend_kind)k;
            return RB_OK;
        }
    }
    return RB_EINVAL;
}
