#!/usr/bin/env python3
"""cold_start.py - how long rayboxd on OpenCL takes to be ready, and how
long each kind of query's first answer takes after that.

Starts rayboxd --backend opencl with empty caches (a new POCL_CACHE_DIR
and RAYBOX_CACHE_DIR per run, so both PoCL's kernel cache and raybox's
program cache are cold; --warm keeps one pair of directories across the
runs, so every run but the first finds them filled), polls /v1/health
until it answers (what a load balancer sees), then sends the first query
of every kind: each mode against inline boxes, against a stored scene
(its hierarchy), and against an inline sphere. Prints, per run, the time
to ready and the slowest first answer, then the medians.

    scripts/cold_start.py build/bin/rayboxd [--runs 3] [--warm]
        [--port 18556] [-- RAYBOXD_ARGS...]

The target (docs/benchmarks.md): every first answer after ready under
0.5 s. Exit status 1 if a first answer took longer. Standard library only.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TARGET_S = 0.5


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as f:
        return json.loads(f.read())


def wait_ready(url, proc, limit_s):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc.poll() is not None:
            sys.exit(f"cold_start: rayboxd exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/v1/health", timeout=5) as f:
                if f.status == 200:
                    return
        except OSError:
            time.sleep(0.005)
    sys.exit(f"cold_start: rayboxd not ready after {limit_s} s")


def first_answers(url):
    rng = random.Random(7)

    def box():
        x, y, z = (rng.random() for _ in range(3))
        return [x, y, z, x + 0.05, y + 0.05, z + 0.05]

    rays = [[rng.random() for _ in range(3)] +
            [rng.random() - 0.5 for _ in range(3)] for _ in range(16)]
    boxes = [box() for _ in range(64)]
    scene = post(url, "/v1/scenes", {"boxes": [box() for _ in range(2000)]})
    sphere = {"spheres": [[0.5, 0.5, 0.5, 0.3]]}
    times = {}
    for mode in ["nearest", "any", "count", "all", "pairs"]:
        kinds = [("inline", "/v1/intersect",
                  {"boxes": boxes if mode != "pairs" else boxes[:16]})]
        if mode != "pairs":
            kinds.append(("scene", f"/v1/scenes/{scene['id']}/intersect",
                          {}))
            kinds.append(("sphere", "/v1/intersect", sphere))
        for kind, path, extra in kinds:
            body = {"mode": mode, "rays": rays, **extra}
            t = time.monotonic()
            post(url, path, body)
            times[f"{kind} {mode}"] = time.monotonic() - t
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rayboxd")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warm", action="store_true",
                    help="keep the caches across runs")
    ap.add_argument("--port", type=int, default=18556)
    ap.add_argument("--ready-limit", type=float, default=300)
    ap.add_argument("args", nargs="*", help="more rayboxd options")
    o = ap.parse_args()
    url = f"http://127.0.0.1:{o.port}"
    ready, slowest, missed = [], [], 0
    keep = None
    for run in range(o.runs):
        dirs = keep or (tempfile.mkdtemp(prefix="pocl-cache-"),
                        tempfile.mkdtemp(prefix="raybox-cache-"))
        if o.warm:
            keep = dirs
        env = dict(os.environ, POCL_CACHE_DIR=dirs[0],
                   RAYBOX_CACHE_DIR=dirs[1])
        t0 = time.monotonic()
        proc = subprocess.Popen([o.rayboxd, "--port", str(o.port),
                                 "--backend", "opencl"] + o.args, env=env,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            wait_ready(url, proc, o.ready_limit)
            ready.append(time.monotonic() - t0)
            times = first_answers(url)
        finally:
            proc.terminate()
            proc.wait()
            if not o.warm:
                for d in dirs:
                    shutil.rmtree(d, ignore_errors=True)
        worst = max(times, key=times.get)
        slowest.append(times[worst])
        missed += times[worst] >= TARGET_S
        print(f"run {run + 1}: ready after {ready[-1]:.2f} s; first answers "
              f"{min(times.values()) * 1e3:.1f}-{times[worst] * 1e3:.1f} ms "
              f"(slowest: {worst})", flush=True)
    if keep:
        for d in keep:
            shutil.rmtree(d, ignore_errors=True)
    print(f"median of {o.runs} ({'warm' if o.warm else 'cold'} caches): "
          f"ready after {statistics.median(ready):.2f} s, slowest first "
          f"answer {statistics.median(slowest) * 1e3:.1f} ms "
          f"(target < {TARGET_S * 1e3:.0f} ms: "
          f"{'met' if not missed else 'MISSED'})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
