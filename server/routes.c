/* routes.c - see routes.h. */
#include "routes.h"

#include <string.h>

static const char *const templates[ROUTE_COUNT] = {
#define RBD_X(id, tmpl) [id] = tmpl,
    RBD_ROUTES(RBD_X)
#undef RBD_X
};

#define M(m) (1u << (m))
#define GET_HEAD (M(METHOD_GET) | M(METHOD_HEAD))

static const struct {
    unsigned methods;
    const char *allow;
} allowed[ROUTE_COUNT] = {
    [ROUTE_INTERSECT] = {M(METHOD_POST), "POST"},
    [ROUTE_SCENES] = {GET_HEAD | M(METHOD_POST), "GET, HEAD, POST"},
    [ROUTE_SCENE] = {GET_HEAD | M(METHOD_PATCH) | M(METHOD_DELETE),
                     "GET, HEAD, PATCH, DELETE"},
    [ROUTE_SCENE_INTERSECT] = {M(METHOD_POST), "POST"},
    [ROUTE_SCENE_VISIBILITY] = {M(METHOD_POST), "POST"},
    [ROUTE_SCENE_RENDER] = {M(METHOD_POST), "POST"},
    [ROUTE_HEALTH] = {GET_HEAD, "GET, HEAD"},
    [ROUTE_DEVICES] = {GET_HEAD, "GET, HEAD"},
    [ROUTE_METRICS] = {GET_HEAD, "GET, HEAD"},
    [ROUTE_NONE] = {0, ""},
};

rbd_method method_parse(const char *m)
{
    static const char *const names[] = {"GET", "HEAD", "POST", "PATCH",
                                        "DELETE"};
    for (int i = 0; i < 5; i++)
        if (strcmp(m, names[i]) == 0)
            return (rbd_method)i;
    return METHOD_OTHER;
}

/* A scene id in a path: what our ids are made of. Anything else cannot
 * name a stored scene. */
static size_t id_length(const char *s)
{
    size_t n = 0;
    while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
           (s[n] >= '0' && s[n] <= '9') || s[n] == '-' || s[n] == '_' ||
           s[n] == '.')
        n++;
    return n;
}

rbd_route route_match(const char *path, char *scene_id)
{
    static const struct {
        const char *path;
        rbd_route route;
    } fixed[] = {
        {"/v1/intersect", ROUTE_INTERSECT}, {"/v1/scenes", ROUTE_SCENES},
        {"/v1/health", ROUTE_HEALTH},       {"/v1/devices", ROUTE_DEVICES},
        {"/metrics", ROUTE_METRICS},
    };
    scene_id[0] = '\0';
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (strcmp(path, fixed[i].path) == 0)
            return fixed[i].route;
    static const char prefix[] = "/v1/scenes/";
    if (strncmp(path, prefix, sizeof prefix - 1) != 0)
        return ROUTE_NONE;
    const char *id = path + sizeof prefix - 1;
    size_t n = id_length(id);
    if (n == 0 || n > RBD_SCENE_ID_MAX)
        return ROUTE_NONE;
    rbd_route r;
    if (id[n] == '\0')
        r = ROUTE_SCENE;
    else if (strcmp(id + n, "/intersect") == 0)
        r = ROUTE_SCENE_INTERSECT;
    else if (strcmp(id + n, "/visibility") == 0)
        r = ROUTE_SCENE_VISIBILITY;
    else if (strcmp(id + n, "/render") == 0)
        r = ROUTE_SCENE_RENDER;
    else
        return ROUTE_NONE;
    memcpy(scene_id, id, n);
    scene_id[n] = '\0';
    return r;
}

const char *route_template(rbd_route r)
{
    return r < ROUTE_COUNT ? templates[r] : "unmatched";
}

const char *route_allow(rbd_route r)
{
    return r < ROUTE_COUNT ? allowed[r].allow : "";
}

int route_allows(rbd_route r, rbd_method m)
{
    return r < ROUTE_COUNT && m != METHOD_OTHER &&
           (allowed[r].methods & M(m)) != 0;
}
