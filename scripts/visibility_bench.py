#!/usr/bin/env python3
"""visibility_bench.py - segments/s of POST /v1/scenes/{id}/visibility
against `any` over the same segments sent explicitly, through a running
rayboxd.

Creates the city of docs/batch.md's worked example (a 448 x 448 grid of
buildings, about 200K boxes) with OBSERVERS and TARGETS points on its
streets, then POSTs alternately: the visibility query (JSON body, binary
bit-matrix answer) and the explicit segments (binary RANGES records,
`any`, to /v1/scenes/{id}/intersect; direction = target - observer in
float32, range [0, 1], the segment rule of docs/semantics.md). Checks
that every bit equals the explicit answer's negation and prints the
median time of each and their ratio.

    scripts/visibility_bench.py --url http://127.0.0.1:8080 [--observers
        2000 --targets 2000 --runs 5]

Standard library only; making 4M explicit segments here takes a few seconds.
"""
import argparse
import json
import math
import random
import statistics
import struct
import time
import urllib.request

GRID = 448


def post(url, body, ctype, accept="application/x-raybox"):
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": ctype,
                                          "Accept": accept})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        data = r.read()
    return time.perf_counter() - t0, data


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def street(rng, n):
    """n points on the streets between the buildings, 0.1-2 up."""
    return [(f32(rng.randrange(GRID) + 0.9), f32(rng.uniform(0, GRID)),
             f32(rng.uniform(0.1, 2))) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--observers", type=int, default=2000)
    ap.add_argument("--targets", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    o = ap.parse_args()
    rng = random.Random(o.seed)
    boxes = [[x, y, 0, x + 0.8, y + 0.8, f32(rng.uniform(0.5, 4))]
             for y in range(GRID) for x in range(GRID)]
    _, created = post(o.url + "/v1/scenes",
                      json.dumps({"boxes": boxes}).encode(),
                      "application/json", "application/json")
    scene = json.loads(created)["id"]
    obs, tgt = street(rng, o.observers), street(rng, o.targets)
    n, m = len(obs), len(tgt)
    vis_body = json.dumps({"observers": obs, "targets": tgt}).encode()

    t0 = time.perf_counter()
    recs = bytearray()
    rec = struct.Struct("<8f")
    for a in obs:
        for b in tgt:
            recs += rec.pack(a[0], a[1], a[2], b[0] - a[0], b[1] - a[1],
                             b[2] - a[2], 0.0, 1.0)
    head = b"RBOX" + struct.pack("<HHBBBBIQQff", 1, 64, 1, 2, 3, 0x01, 0,
                                 n * m, 0, 0.0, 1.0) + bytes(24)
    explicit_body = head + bytes(recs)
    print("made %d explicit segments in %.1f s (%d MB)" %
          (n * m, time.perf_counter() - t0, len(explicit_body) >> 20))

    t_vis, t_exp = [], []
    bits = anys = None
    for _ in range(o.runs):
        t, bits = post(o.url + "/v1/scenes/%s/visibility" % scene, vis_body,
                       "application/json")
        t_vis.append(t)
        t, anys = post(o.url + "/v1/scenes/%s/intersect" % scene,
                       explicit_body, "application/x-raybox")
        t_exp.append(t)
    stride = (m + 7) // 8
    hv, he = 64, len(anys) - n * m  # headers: visibility 64, answer v1/v2
    same = all(((bits[hv + i * stride + j // 8] >> (j % 8)) & 1) ==
               (anys[he + i * m + j] == 0)
               for i in range(n) for j in range(m))
    urllib.request.urlopen(urllib.request.Request(
        o.url + "/v1/scenes/" + scene, method="DELETE"))
    segs = n * m
    tv, te = statistics.median(t_vis), statistics.median(t_exp)
    print("segments: %d x %d = %d; bits equal the explicit any: %s" %
          (n, m, segs, same))
    print("visibility %.3f s  %.2f M segments/s" % (tv, segs / tv / 1e6))
    print("explicit   %.3f s  %.2f M segments/s" % (te, segs / te / 1e6))
    print("visibility / explicit segments/s: %.2fx" % (te / tv))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
