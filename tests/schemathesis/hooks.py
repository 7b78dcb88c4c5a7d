"""Schemathesis hooks for test_schemathesis (tests/schemathesis/run.py).

docs/openapi.yaml says all that JSON Schema can say about a request; what
it cannot (docs/semantics.md R6 and R11, and what depends on a stored
scene) the server refuses with 422. Left alone, Schemathesis would call
such a refusal of a "schema-valid" body a bug (positive_data_acceptance).
So before a positive case is sent, map_case makes it meet those rules, and
only those: boxes get min <= max per axis, ranges tmin <= tmax, zero
quaternions and plane normals and non-orthonormal obb axes or singular xbox
matrices a valid value, pairs one element list as long as the rays, all
mode at most --max-results results, and bodies aimed at a stored scene the
scene's dims and (PATCH) set indices inside it. A camera (SPEC section 8)
gets invertible matrices whose rays are finite float32 (the identity when
the generated ones are not), a whole viewport of at most 32 x 32 without
pixels, and a render a 3D scene (one made here when the path's is 2D). Anything else the server
refuses in a positive case is still a failure. Negative cases are never
touched.

RAYBOX_URL (the server) and RAYBOX_MAX_RESULTS come from run.py;
RAYBOX_HOOK_LOG=FILE logs every positive body as generated (debugging).
"""
import copy
import json
import math
import os
import struct
import urllib.error
import urllib.parse
import urllib.request

import schemathesis
from schemathesis import GenerationMode

URL = os.environ.get("RAYBOX_URL", "http://127.0.0.1:8080")
MAX_RESULTS = int(os.environ.get("RAYBOX_MAX_RESULTS", "16777216"))
LOG = os.environ.get("RAYBOX_HOOK_LOG")
FLT_MIN = 1.1754943508222875e-38
SHAPES = ("obbs", "xboxes", "spheres", "planes")
LISTS = ("boxes",) + SHAPES


def f32(x):
    """x as float32, subnormals flushed (R7), as the server reads it."""
    v = struct.unpack("f", struct.pack("f", x))[0]
    return 0.0 if abs(v) < FLT_MIN else v


def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def scene_info(scene_id):
    """(dims, boxes) of a stored scene, or None (the server says 404). A
    scene that holds other kinds (its GET says "elements") reports 0
    boxes: its box ids are not 0..boxes-1 once appends interleave kinds,
    so box-shaped "set" entries cannot be aimed at boxes by index."""
    if not isinstance(scene_id, str) or not scene_id:
        return None
    url = URL + "/v1/scenes/" + urllib.parse.quote(scene_id, safe="")
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            s = json.load(r)
        if s.get("elements", s["boxes"]) != s["boxes"]:
            return s["dims"], 0
        return s["dims"], s["boxes"]
    except (urllib.error.URLError, ValueError, KeyError, OSError):
        return None


def fix_box(b, d, at=0):
    """Orders min and max of the d-axis box at b[at:at + 2d]."""
    if len(b) < at + 2 * d or not all(num(x) for x in b[at:at + 2 * d]):
        return
    for a in range(d):
        lo, hi = at + a, at + a + d
        if f32(b[lo]) > f32(b[hi]):
            b[lo], b[hi] = b[hi], b[lo]


def fix_ray(r, d):
    if len(r) == 2 * d + 2 and num(r[-2]) and num(r[-1]) and \
            f32(r[-2]) > f32(r[-1]):
        r[-2], r[-1] = r[-1], r[-2]


def ray_to_dims(r, src, dst):
    """A ray of src dims as one of dst dims (dropping or adding z)."""
    if src == dst:
        return r
    rng = r[2 * src:]
    if src == 3:
        return [r[0], r[1], r[3], r[4]] + rng
    return [r[0], r[1], 0.0, r[2], r[3], 0.0] + rng


def box_to_dims(b, dst):
    if len(b) == 2 * dst:
        return b
    if dst == 2:
        return [b[0], b[1], b[3], b[4]]
    return [b[0], b[1], 0.0, b[2], b[3], 0.0]


def sign(x):
    return -1.0 if num(x) and x < 0 else 1.0


def fix_obb(o):
    if not all(num(x) for x in o):
        return
    if len(o) == 10:
        if all(f32(x) == 0.0 for x in o[6:10]):
            o[6] = 1.0
    elif len(o) == 15:
        # The server wants orthonormal axes; keep the signs (either
        # handedness is fine), lose the rest.
        u, v, w = sign(o[6]), sign(o[10]), sign(o[14])
        o[6:15] = [u, 0.0, 0.0, 0.0, v, 0.0, 0.0, 0.0, w]


def fix_xbox(x):
    if len(x) != 18 or not all(num(v) for v in x):
        return
    fix_box(x, 3)
    a = [[f32(x[6 + 4 * i + j]) for j in range(3)] for i in range(3)]
    det = (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) -
           a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
           a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))
    ok = math.isfinite(det) and det != 0.0
    if ok:
        # Cofactors over det: every entry of the inverse must stay a
        # finite float32; a wide margin keeps clear of the library's own
        # rounding.
        big = max(abs(a[i][j]) for i in range(3) for j in range(3))
        ok = big * big / abs(det) < 1e30 and abs(det) > 1e-30
    if not ok:
        for i in range(3):
            for j in range(3):
                x[6 + 4 * i + j] = (sign(x[6 + 5 * i]) if i == j else 0.0)


def fix_plane(p):
    if len(p) == 4 and all(num(v) for v in p) and \
            all(f32(v) == 0.0 for v in p[:3]):
        p[2] = 1.0


def fix_shapes(body):
    """The obbs, xboxes and planes of a body (intersect, scene, append)
    made valid where the schema cannot say it (spheres need nothing)."""
    for key, fix in (("obbs", fix_obb), ("xboxes", fix_xbox),
                     ("planes", fix_plane)):
        for e in body.get(key, []):
            if isinstance(e, list):
                fix(e)


def fix_range(body):
    t0, t1 = body.get("tmin", 0.0), body.get("tmax")  # tmin defaults to 0
    if num(t0) and num(t1) and f32(t0) > f32(t1):
        body["tmin"], body["tmax"] = t1, t0


def fix_results(body, n_rays=None):
    """all mode: rays x max_hits within --max-results (else 413); n_rays
    when the rays come from a camera."""
    if n_rays is None:
        if not isinstance(body.get("rays"), list):
            return
        n_rays = len(body["rays"])
    if body.get("mode") != "all":
        return
    most = max(1, MAX_RESULTS // max(1, n_rays))
    hits = body.get("max_hits", 64)
    if num(hits) and hits > most:
        body["max_hits"] = most


def rays_dims(body):
    """The dims the rays were made for: "dims", else what their arity says
    (a 6-number ray fits both)."""
    if body.get("dims") in (2, 3):
        return body["dims"]
    for r in body.get("rays", []):
        if isinstance(r, list) and (len(r) == 4 or
                                    (len(r) == 6 and r[5] is None)):
            return 2
    return 3


def to_scene(body, dims):
    """Rays (and dims) of a body aimed at a stored scene of `dims`."""
    src = rays_dims(body)
    body["rays"] = [ray_to_dims(r, src, dims) if isinstance(r, list) else r
                    for r in body["rays"]]
    if "dims" in body or dims == 2:
        body["dims"] = dims


IDENTITY = [1.0 if i % 5 == 0 else 0.0 for i in range(16)]
FLT_LIMIT = 3e38  # well inside float32's range (its overflow: 3.4028e38)


def invert4(m):
    """host/camera.c's Gauss-Jordan with partial pivoting, in the same
    double operations (Python does not fuse them either): None when it
    calls m singular."""
    a = [[m[4 * i + j] for j in range(4)] + [1.0 if i == j else 0.0
                                             for j in range(4)]
         for i in range(4)]
    try:
        for c in range(4):
            p = c
            for r in range(c + 1, 4):
                if abs(a[r][c]) > abs(a[p][c]):
                    p = r
            if a[p][c] == 0.0 or not math.isfinite(a[p][c]):
                return None
            a[c], a[p] = a[p], a[c]
            piv = a[c][c]
            a[c] = [x / piv for x in a[c]]
            for r in range(4):
                f = a[r][c]
                if r != c and f != 0.0:
                    a[r] = [x - f * y for x, y in zip(a[r], a[c])]
    except (OverflowError, ZeroDivisionError):
        return None
    out = [a[i][4 + j] for i in range(4) for j in range(4)]
    return out if all(math.isfinite(x) for x in out) else None


def camera_ok(c):
    """Whether the server makes finite rays of camera c (the matrices and
    viewport already numbers)."""
    v, p, vp = c["view"], c["projection"], c["viewport"]
    if invert4(v) is None or invert4(p) is None:
        return False
    try:
        pv = [sum(p[4 * i + k] * v[4 * k + j] for k in range(4))
              for i in range(4) for j in range(4)]
    except OverflowError:
        return False
    if not all(math.isfinite(x) for x in pv):
        return False
    w = invert4(pv)
    if w is None:
        return False
    z0 = -1.0 if c.get("depth") == "minus_one_to_one" else 0.0
    if "pixels" in c:
        pixels = [q for q in c["pixels"] if isinstance(q, list)]
    else:
        pixels = [(vp[0] + i + 0.5, vp[1] + j + 0.5)
                  for j in range(int(vp[3])) for i in range(int(vp[2]))]
    try:
        for px, py in pixels:
            nx = 2.0 * (px - vp[0]) / vp[2] - 1.0
            ny = 1.0 - 2.0 * (py - vp[1]) / vp[3]
            pts = []
            for z in (z0, 1.0):
                h = [w[4 * i] * nx + w[4 * i + 1] * ny + w[4 * i + 2] * z +
                     w[4 * i + 3] for i in range(4)]
                if h[3] == 0.0 or not all(math.isfinite(x) for x in h):
                    return False
                pts.append([h[i] / h[3] for i in range(3)])
            for a in range(3):
                if abs(pts[0][a]) > FLT_LIMIT or \
                        abs(pts[1][a] - pts[0][a]) > FLT_LIMIT:
                    return False
    except (OverflowError, ZeroDivisionError, TypeError, ValueError):
        return False
    return True


def camera_rays(c):
    """How many rays the camera makes."""
    if isinstance(c.get("pixels"), list):
        return len(c["pixels"])
    vp = c["viewport"]
    return int(vp[2]) * int(vp[3])


def fix_camera(c):
    if not isinstance(c, dict):
        return
    v, p, vp = c.get("view"), c.get("projection"), c.get("viewport")
    if not (isinstance(v, list) and len(v) == 16 and all(num(x) for x in v)
            and isinstance(p, list) and len(p) == 16 and
            all(num(x) for x in p) and isinstance(vp, list) and
            len(vp) == 4 and all(num(x) for x in vp)):
        return
    c["view"] = [float(x) for x in v]
    c["projection"] = [float(x) for x in p]
    if "pixels" not in c:
        # The grid: whole numbers, and few enough to stay quick.
        vp[2] = float(min(32, max(1, math.ceil(vp[2]))))
        vp[3] = float(min(32, max(1, math.ceil(vp[3]))))
    if not camera_ok(c):
        c["view"], c["projection"] = list(IDENTITY), list(IDENTITY)
    if not camera_ok(c):
        # Pixels or a viewport far beyond anything float32 can hold.
        c["viewport"] = [0.0, 0.0, 4.0, 4.0]
        if "pixels" in c:
            c["pixels"] = [[2.0, 2.0] for _ in c["pixels"]]


def fix_intersect(body, scene_dims):
    if "camera" in body:
        if scene_dims == 2:  # a camera makes 3D rays
            del body["camera"]
            body["rays"] = []
        else:
            fix_camera(body["camera"])
    if "camera" in body:
        fix_range(body)
        fix_shapes(body)
        for b in body.get("boxes", []):
            if isinstance(b, list):
                fix_box(b, 3)
        n = camera_rays(body["camera"])
        if body.get("mode") == "pairs":
            present = [k for k in LISTS if k in body]
            if not present:
                return
            keep = next((k for k in present if body[k]), present[0])
            for k in present:
                if k != keep:
                    del body[k]
            # As many pixels as elements.
            body["camera"]["pixels"] = [[0.5, 0.5]] * len(body[keep])
            fix_camera(body["camera"])
        else:
            fix_results(body, n)
        return
    if scene_dims:
        to_scene(body, scene_dims)
    d = body.get("dims", 3) if not scene_dims else scene_dims
    fix_range(body)
    for r in body.get("rays", []):
        if isinstance(r, list):
            fix_ray(r, d)
    for b in body.get("boxes", []):
        if isinstance(b, list):
            fix_box(b, d)
    fix_shapes(body)
    if body.get("mode") == "pairs":
        present = [k for k in LISTS if k in body]
        if not present:
            return
        keep = next((k for k in present if body[k]), present[0])
        for k in present:
            if k != keep:
                del body[k]
        n = min(len(body["rays"]), len(body[keep]))
        del body["rays"][n:]
        del body[keep][n:]
    fix_results(body)


def fix_patch(body, info):
    dims, n = info
    sets = body.get("set")
    if isinstance(sets, list):
        if n == 0:
            body["set"] = []
        for e in body["set"]:
            if isinstance(e, list) and e and num(e[0]):
                e[1:] = box_to_dims(e[1:], dims)
                e[0] = int(e[0]) % n  # a whole number (1268.0 too)
                fix_box(e, dims, 1)
    app = body.get("append")
    if isinstance(app, dict):
        if dims != 3:  # 2D scenes take boxes only
            for k in SHAPES:
                app.pop(k, None)
        if isinstance(app.get("boxes"), list):
            app["boxes"] = [box_to_dims(b, dims) if isinstance(b, list)
                            else b for b in app["boxes"]]
            for b in app["boxes"]:
                if isinstance(b, list):
                    fix_box(b, dims)
        fix_shapes(app)
    if isinstance(app, list):
        body["append"] = [box_to_dims(b, dims) if isinstance(b, list) else b
                          for b in app]
        for b in body["append"]:
            if isinstance(b, list):
                fix_box(b, dims)


_SCENE_3D = []


def scene_3d():
    """The id of a 3D scene made for visibility cases aimed at a 2D one
    (visibility needs 3D: the path's scene is the rule JSON Schema cannot
    state)."""
    if not _SCENE_3D:
        req = urllib.request.Request(
            URL + "/v1/scenes", data=b'{"boxes":[[0,0,0,1,1,1]]}',
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            _SCENE_3D.append(json.load(r)["id"])
    return _SCENE_3D[0]


def fix_visibility(body):
    """Points within +-1e38, so that target - observer stays a float32;
    tmin <= tmax (tmax defaults to 1 here)."""
    for key in ("observers", "targets"):
        for p in body.get(key, []):
            if isinstance(p, list):
                for k, v in enumerate(p):
                    if num(v):
                        p[k] = max(-1e38, min(1e38, v))
    t0, t1 = body.get("tmin", 0.0), body.get("tmax", 1.0)
    if num(t0) and num(t1) and f32(t0) > f32(t1):
        body["tmin"], body["tmax"] = t1, t0


@schemathesis.hook
def map_case(ctx, case):
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    body = case.body
    if LOG:
        with open(LOG, "a") as f:
            print("IN", case.operation.method, case.operation.path,
                  case.media_type, type(meta.phase.data).__name__,
                  json.dumps(body, default=str)[:300], file=f)
    if not isinstance(body, dict) or case.media_type != "application/json":
        return case
    # A copy: generated values may be shared with other cases.
    body = case.body = copy.deepcopy(body)
    op = case.operation.method.upper() + " " + case.operation.path
    scene = (case.path_parameters or {}).get("id")
    if op == "POST /v1/intersect":
        info = scene_info(body["scene"]) if "scene" in body else None
        fix_intersect(body, info[0] if info else None)
    elif op == "POST /v1/scenes/{id}/intersect":
        info = scene_info(scene)
        fix_intersect(body, info[0] if info else None)
    elif op == "POST /v1/scenes/{id}/render":
        info = scene_info(scene)
        if info and info[0] == 2:
            case.path_parameters["id"] = scene_3d()
        fix_range(body)
        fix_camera(body.get("camera"))
    elif op == "POST /v1/scenes":
        for b in body.get("boxes", []):
            if isinstance(b, list):
                fix_box(b, body.get("dims", 3))
        fix_shapes(body)
    elif op == "POST /v1/scenes/{id}/visibility":
        info = scene_info(scene)
        if info and info[0] != 3:
            case.path_parameters["id"] = scene_3d()
        fix_visibility(body)
    elif op == "PATCH /v1/scenes/{id}":
        info = scene_info(scene)
        if info:
            fix_patch(body, info)
    return case
