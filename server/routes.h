/*
 * routes.h - rayboxd's paths and the methods each one takes. Unknown
 * paths are ROUTE_NONE (404); a known path with another method is 405
 * with route_allow() as the Allow header.
 */
#ifndef RBD_ROUTES_H
#define RBD_ROUTES_H

#include <stddef.h>

/* X(id, template) - the template names the route in metrics and logs. */
#define RBD_ROUTES(X)                                                          \
    X(ROUTE_INTERSECT, "/v1/intersect")                                        \
    X(ROUTE_SCENES, "/v1/scenes")                                              \
    X(ROUTE_SCENE, "/v1/scenes/{id}")                                          \
    X(ROUTE_SCENE_INTERSECT, "/v1/scenes/{id}/intersect")                      \
    X(ROUTE_SCENE_VISIBILITY, "/v1/scenes/{id}/visibility")                    \
    X(ROUTE_SCENE_RENDER, "/v1/scenes/{id}/render")                            \
    X(ROUTE_HEALTH, "/v1/health")                                              \
    X(ROUTE_DEVICES, "/v1/devices")                                            \
    X(ROUTE_METRICS, "/metrics")                                               \
    X(ROUTE_NONE, "unmatched")

typedef enum rbd_route {
#define RBD_X(id, tmpl) id,
    RBD_ROUTES(RBD_X)
#undef RBD_X
    ROUTE_COUNT
} rbd_route;

typedef enum rbd_method {
    METHOD_GET,
    METHOD_HEAD,
    METHOD_POST,
    METHOD_PATCH,
    METHOD_DELETE,
    METHOD_OTHER
} rbd_method;

/* Longest scene id in a path (the same bound as a JSON "scene"). */
#define RBD_SCENE_ID_MAX 128

rbd_method method_parse(const char *method);

/* The route of a path; for the scene routes the id is copied into
 * scene_id (RBD_SCENE_ID_MAX + 1 bytes). */
rbd_route route_match(const char *path, char *scene_id);

const char *route_template(rbd_route r);
/* "GET, HEAD, POST" */
const char *route_allow(rbd_route r);
int route_allows(rbd_route r, rbd_method m);

#endif
