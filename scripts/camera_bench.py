#!/usr/bin/env python3
"""camera_bench.py - rays/s of a camera query against the same rays sent
explicitly (SPEC section 8), through a running rayboxd.

Creates a scene of random boxes, then POSTs to /v1/scenes/{id}/intersect,
binary in and out, `nearest`, alternately: a camera record (the whole
WIDTHxHEIGHT viewport) and the explicit rays of that camera (RANGES
records, made here with host/camera.c's formula in the same double
operations and rounded to float32 by struct, so they are the library's
bits). Checks that both answers are the same bytes (but elapsed_ms) and
prints the median time of each and their ratio.

    scripts/camera_bench.py --url http://127.0.0.1:8080 [--width 1920
        --height 1080 --boxes 20000 --runs 10]

Standard library only; making 2M rays here takes about 10 s.
"""
import argparse
import json
import math
import random
import statistics
import struct
import time
import urllib.request

RANGES, CAMERA = 0x01, 0x08


def header(flags, n_rays):
    h = b"RBOX" + struct.pack("<HHBBBBIQQff", 2, 96, 1, 1, 3, flags, 0,
                              n_rays, 0, 0.0, math.inf)
    return h + bytes(24) + bytes(32)


def invert4(m):
    a = [[m[4 * i + j] for j in range(4)] + [1.0 if i == j else 0.0
                                             for j in range(4)]
         for i in range(4)]
    for c in range(4):
        p = max(range(c, 4), key=lambda r: (abs(a[r][c]), -r))
        a[c], a[p] = a[p], a[c]
        piv = a[c][c]
        a[c] = [x / piv for x in a[c]]
        for r in range(4):
            f = a[r][c]
            if r != c and f != 0.0:
                a[r] = [x - f * y for x, y in zip(a[r], a[c])]
    return [a[i][4 + j] for i in range(4) for j in range(4)]


def mul4(a, b):
    out = []
    for i in range(4):
        for j in range(4):
            s = a[4 * i] * b[j]
            for k in range(1, 4):
                s += a[4 * i + k] * b[4 * k + j]
            out.append(s)
    return out


def explicit_rays(view, proj, w, h):
    """The records rb_camera_rays makes for the grid (depth zero_to_one)."""
    W = invert4(mul4(proj, view))
    out = bytearray()
    pack = struct.Struct("<8f").pack
    for j in range(h):
        py = 0.0 + j + 0.5
        ny = 1.0 - 2.0 * (py - 0.0) / h
        for i in range(w):
            px = 0.0 + i + 0.5
            nx = 2.0 * (px - 0.0) / w - 1.0
            hn = [W[4 * r] * nx + W[4 * r + 1] * ny + W[4 * r + 2] * 0.0 +
                  W[4 * r + 3] for r in range(4)]
            hf = [W[4 * r] * nx + W[4 * r + 1] * ny + W[4 * r + 2] * 1.0 +
                  W[4 * r + 3] for r in range(4)]
            near = [hn[a] / hn[3] for a in range(3)]
            far = [hf[a] / hf[3] for a in range(3)]
            out += pack(near[0], near[1], near[2], far[0] - near[0],
                        far[1] - near[1], far[2] - near[2], 0.0, math.inf)
    return bytes(out)


def post(url, body, ctype):
    req = urllib.request.Request(url, data=body, headers={
        "Content-Type": ctype, "Accept": "application/x-raybox"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        data = r.read()
    return time.perf_counter() - t0, data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--width", type=int, default=1920)
    ap.add_argument("--height", type=int, default=1080)
    ap.add_argument("--boxes", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=10)
    o = ap.parse_args()
    rng = random.Random(1)
    boxes = []
    for _ in range(o.boxes):
        x, y, z = rng.uniform(-40, 40), rng.uniform(-40, 40), \
            rng.uniform(-40, 0)
        s = rng.uniform(0.1, 1.6)
        boxes.append([x, y, z, x + s, y + s, z + s])
    _, created = post(o.url + "/v1/scenes",
                      json.dumps({"boxes": boxes}).encode(),
                      "application/json")
    scene = json.loads(created)["id"]
    view = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, -60, 0, 0, 0, 1]
    n, f, t = 1.0, 200.0, 1 / math.tan(0.4)
    a = o.width / o.height
    proj = [t / a, 0, 0, 0, 0, t, 0, 0, 0, 0, f / (n - f), f * n / (n - f),
            0, 0, -1, 0]
    view, proj = [float(x) for x in view], [float(x) for x in proj]
    cam = header(CAMERA, 0) + struct.pack("<16d", *view) + \
        struct.pack("<16d", *proj) + \
        struct.pack("<4d", 0, 0, o.width, o.height) + struct.pack("<II", 0, 0)
    t0 = time.perf_counter()
    rays = header(RANGES, o.width * o.height) + \
        explicit_rays(view, proj, o.width, o.height)
    print("made %d explicit rays in %.1f s" % (o.width * o.height,
                                                time.perf_counter() - t0))
    url = o.url + "/v1/scenes/%s/intersect" % scene
    _, a1 = post(url, cam, "application/x-raybox")
    _, a2 = post(url, rays, "application/x-raybox")
    same = len(a1) == len(a2) and a1[:48] == a2[:48] and a1[56:] == a2[56:]
    print("answers: %d bytes, the same but elapsed_ms: %s" % (len(a1), same))
    tc, te = [], []
    for _ in range(o.runs):
        tc.append(post(url, cam, "application/x-raybox")[0])
        te.append(post(url, rays, "application/x-raybox")[0])
    c, e = statistics.median(tc), statistics.median(te)
    nr = o.width * o.height
    print("camera   %.3f s  %.2f Mrays/s" % (c, nr / c / 1e6))
    print("explicit %.3f s  %.2f Mrays/s" % (e, nr / e / 1e6))
    print("camera / explicit rays/s: %.2fx" % (e / c))
    urllib.request.urlopen(urllib.request.Request(
        o.url + "/v1/scenes/" + scene, method="DELETE"))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
