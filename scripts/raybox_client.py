#!/usr/bin/env python3
"""raybox_client.py - an example client of rayboxd's binary form
(application/x-raybox, docs/binary-format.md), Python 3 standard library
only (struct + http.client).

As a module:

    import raybox_client as rc
    ans = rc.intersect("http://127.0.0.1:8080", rays=[[0, 0, 0, 1, 0, 0]],
                       boxes=[[1, -1, -1, 2, 1, 1]], mode="nearest")
    ans["hit"], ans["t_enter"]          # [True], [1.0]

    sid = rc.create_scene(url, boxes)["id"]
    rc.intersect(url, rays, scene=sid, mode="any")

    rc.intersect(url, rays, spheres=[[0, 0, 5, 1]], planes=[[0, 1, 0, -2]],
                 outputs=["normal"])     # ans["kind"], ans["normal"]

Requests with boxes alone go out in version 1 of the form; with obbs,
xboxes, spheres, planes or outputs in version 2. Answers have the columns
of the JSON answer (SPEC sections 4 and 7): None where JSON has null (a
miss's values, no face, t_exit = +inf, a miss's kind, no normal).

As a program: reads a JSON request (the body of POST /v1/intersect), sends
it in binary and prints the answer as JSON; --compare also sends the JSON
form and checks that both answers agree (exit 1 if not).

    scripts/raybox_client.py --url http://127.0.0.1:8080 request.json
    scripts/raybox_client.py --url ... --scene ID --compare request.json
"""
import argparse
import http.client
import json
import math
import struct
import sys
import urllib.parse

MEDIA_TYPE = "application/x-raybox"
HEADER = struct.Struct("<4sHHBBBBIQQffQdQ")  # 64 bytes, little-endian
assert HEADER.size == 64
COUNTS = struct.Struct("<QQQQ")  # version 2: bytes 64-95
KIND_INTERSECT, KIND_SCENE, KIND_RESULT = 1, 2, 129
FLAG_RANGES, FLAG_NORMALS, FLAG_OBB_QUATERNION = 1, 2, 4
RESULT_SCENE_VERSION, RESULT_FELL_BACK = 1, 2
RESULT_KINDS, RESULT_NORMALS = 4, 8
MODES = ["pairs", "nearest", "any", "count", "all"]
FACES = [None, "-x", "+x", "-y", "+y", "-z", "+z", "surface"]
KINDS = ["box", "obb", "xbox", "sphere", "plane"]  # 255: a miss


def _f32(x):
    """x rounded to float32, as the server reads it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _records(lists, widths, what):
    """Packed float32 records, each of one of the widths."""
    out = []
    for r in lists:
        if len(r) not in widths:
            raise ValueError("%s has %s numbers" %
                             (what, " or ".join(map(str, widths))))
        out.append(struct.pack("<%df" % len(r), *r))
    return out


def encode_request(rays, boxes=(), mode="nearest", dims=3, tmin=0.0,
                   tmax=math.inf, max_hits=0, obbs=(), xboxes=(),
                   spheres=(), planes=(), outputs=None):
    """A binary intersect body. Rays have 2*dims numbers, or 2*dims + 2 with
    their own tmin, tmax (None for tmax = +inf); when some rays carry a
    range, the others get the request's. Elements as in the JSON form
    (SPEC section 7; obbs all of 10 numbers, quaternion form, or all of
    15, axes form). Version 1 when there are boxes alone and outputs is
    None, else version 2."""
    width = 2 * dims
    ranges = any(len(r) == width + 2 for r in rays)
    flags = FLAG_RANGES if ranges else 0
    v2 = bool(obbs or xboxes or spheres or planes) or outputs is not None
    if outputs and "normal" in outputs:
        flags |= FLAG_NORMALS
    if obbs and all(len(o) == 10 for o in obbs):
        flags |= FLAG_OBB_QUATERNION
    elif obbs and not all(len(o) == 15 for o in obbs):
        raise ValueError("the binary form takes obbs all of 10 numbers "
                         "(quaternion) or all of 15 (axes)")
    head = HEADER.pack(b"RBOX", 2 if v2 else 1, 96 if v2 else 64,
                       KIND_INTERSECT, MODES.index(mode), dims, flags,
                       max_hits, len(rays), len(boxes), tmin, tmax, 0, 0.0, 0)
    if v2:
        head += COUNTS.pack(len(obbs), len(xboxes), len(spheres),
                            len(planes))
    out = [head]
    fmt = struct.Struct("<%df" % (width + (2 if ranges else 0)))
    for r in rays:
        if len(r) not in (width, width + 2):
            raise ValueError("a %dD ray has %d or %d numbers" %
                             (dims, width, width + 2))
        r = list(r)
        if ranges and len(r) == width:
            r += [tmin, tmax]
        if ranges and r[-1] is None:
            r[-1] = math.inf
        out.append(fmt.pack(*r))
    bfmt = struct.Struct("<%df" % width)
    for b in boxes:
        out.append(bfmt.pack(*b))
    out += _records(obbs, (10, 15), "an obb")
    out += _records(xboxes, (18,), "an xbox")
    out += _records(spheres, (4,), "a sphere")
    out += _records(planes, (4,), "a plane")
    return b"".join(out)


def encode_scene(boxes, dims=3):
    """A binary scene body (POST /v1/scenes)."""
    out = [HEADER.pack(b"RBOX", 1, 64, KIND_SCENE, 0, dims, 0, 0, 0,
                       len(boxes), 0.0, 0.0, 0, 0.0, 0)]
    bfmt = struct.Struct("<%df" % (2 * dims))
    out += [bfmt.pack(*b) for b in boxes]
    return b"".join(out)


def _t(x):
    return None if math.isinf(x) else x


def decode_result(data):
    """A binary answer as a dict with the JSON answer's columns."""
    (magic, version, size, kind, mode, dims, flags, max_hits, n, entries,
     _tmin, _tmax, scene_version, elapsed_ms, _res) = HEADER.unpack_from(data)
    if (magic != b"RBOX" or (version, size) not in ((1, 64), (2, 96)) or
            kind != KIND_RESULT):
        raise ValueError("not a raybox result")
    if version == 1:
        flags &= RESULT_SCENE_VERSION | RESULT_FELL_BACK
    mode = MODES[mode]
    ans = {"mode": mode, "count": n}
    at = size
    if mode in ("pairs", "nearest"):
        hits = [struct.unpack_from("<ffiBBBB", data, at + 16 * i)
                for i in range(n)]
        at += 16 * n
        ans["hit"] = [bool(h[3]) for h in hits]
        if mode == "nearest":
            ans["box"] = [h[2] if h[3] else -1 for h in hits]
        if flags & RESULT_KINDS:
            ans["kind"] = [KINDS[k] if k < len(KINDS) else None
                           for k in data[at:at + n]]
            at += n
        ans["t_enter"] = [_t(h[0]) if h[3] else None for h in hits]
        ans["t_exit"] = [_t(h[1]) if h[3] else None for h in hits]
        ans["face"] = [FACES[h[4]] if h[3] else None for h in hits]
        ans["exit_face"] = [FACES[h[5]] if h[3] else None for h in hits]
        if flags & RESULT_NORMALS:
            v = struct.unpack_from("<%df" % (3 * n), data, at)
            ans["normal"] = [None if math.isnan(v[3 * i]) else
                             list(v[3 * i:3 * i + 3]) for i in range(n)]
    elif mode == "any":
        ans["hit"] = [bool(b) for b in data[at:at + n]]
    elif mode == "count":
        ans["hits"] = list(struct.unpack_from("<%dI" % n, data, at))
    else:
        counts = struct.unpack_from("<%dI" % n, data, at)
        at += 4 * n
        lists = []
        for c in counts:
            k = min(c, max_hits)
            lists.append([[b, _t(t0), _t(t1)] for b, t0, t1 in
                          (struct.unpack_from("<iff", data, at + 12 * j)
                           for j in range(k))])
            at += 12 * k
        ans["hits"] = lists
        ans["total"] = list(counts)
        ans["truncated"] = [c > max_hits for c in counts]
    if flags & RESULT_SCENE_VERSION:
        ans["scene_version"] = scene_version
    ans["meta"] = {"elapsed_ms": elapsed_ms,
                   "fell_back": bool(flags & RESULT_FELL_BACK)}
    return ans


class RayboxError(Exception):
    """A problem+json answer: .status, .problem (the decoded body)."""

    def __init__(self, status, problem):
        super().__init__("%d %s" % (status, problem.get("detail", "")))
        self.status = status
        self.problem = problem


def _post(url, path, body, content_type, accept, method="POST"):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
    try:
        conn.request(method, path, body=body,
                     headers={"Content-Type": content_type, "Accept": accept})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status >= 400:
            raise RayboxError(resp.status, json.loads(data))
        return resp, data
    finally:
        conn.close()


def intersect(url, rays, boxes=(), scene=None, mode="nearest", dims=3,
              tmin=0.0, tmax=math.inf, max_hits=0, obbs=(), xboxes=(),
              spheres=(), planes=(), outputs=None):
    """Sends rays (and elements, or a stored scene's id) in binary and
    returns the decoded answer."""
    path = "/v1/scenes/%s/intersect" % scene if scene else "/v1/intersect"
    body = encode_request(rays, boxes, mode, dims, tmin, tmax, max_hits,
                          obbs, xboxes, spheres, planes, outputs)
    _, data = _post(url, path, body, MEDIA_TYPE, MEDIA_TYPE)
    return decode_result(data)


def create_scene(url, boxes, dims=3):
    """Stores boxes as a scene (binary body); returns {"id", "version", ...}."""
    _, data = _post(url, "/v1/scenes", encode_scene(boxes, dims), MEDIA_TYPE,
                    "application/json")
    return json.loads(data)


def _same(a, b):
    """JSON answers compare as float32 numbers, whatever their text."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and _f32(a) == _f32(b))
    return a == b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--scene", help="query this stored scene")
    ap.add_argument("--compare", action="store_true",
                    help="also send the JSON form; exit 1 if they differ")
    ap.add_argument("request", help="a JSON intersect request body ('-' = "
                                    "stdin)")
    a = ap.parse_args()
    text = sys.stdin.read() if a.request == "-" else open(a.request).read()
    req = json.loads(text)
    dims = req.get("dims", 3)
    tmax = req.get("tmax")
    ans = intersect(a.url, req["rays"], req.get("boxes", ()), a.scene,
                    req.get("mode", "nearest"), dims, req.get("tmin", 0.0),
                    math.inf if tmax is None else tmax,
                    req.get("max_hits", 0), req.get("obbs", ()),
                    req.get("xboxes", ()), req.get("spheres", ()),
                    req.get("planes", ()), req.get("outputs"))
    print(json.dumps(ans))
    if a.compare:
        path = "/v1/scenes/%s/intersect" % a.scene if a.scene \
            else "/v1/intersect"
        _, data = _post(a.url, path, text.encode(), "application/json",
                        "application/json")
        other = json.loads(data)
        keys = [k for k in other if k != "meta"]
        bad = [k for k in keys if not _same(ans.get(k), other[k])]
        if bad or set(keys) != set(k for k in ans if k != "meta"):
            print("binary and JSON answers differ in %s" %
                  (bad or "their fields"), file=sys.stderr)
            return 1
        print("binary and JSON answers agree (%d rays)" % other["count"],
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
