#!/usr/bin/env python3
"""bench.py - raybox's Python module against the C library and against
Open3D's RaycastingScene, on the same scene and rays, in one run.

    python3 python/bench/bench.py --build build [--boxes 100000]
            [--rays 1000000] [--seconds 6] [--rounds 3] [--threads 0]
            [--json FILE]

(make bench-python.) Run with any python3: it makes BUILD/venv-bench (a
venv of its own, never the test venv: numpy, Open3D from PyPI
(python/bench/requirements.txt) and this checkout's python/ package),
then runs itself in it. The scene: BOXES boxes, centres uniform in
[0, 100]^3, half extents uniform in [0.1, 1]; RAYS rays from uniform
points in the same cube in uniform directions, tmax = +inf. Open3D gets
each box as 12 triangles. Rates are rays per second, the best of the
repeats within --seconds (after a warm-up call; C and Python take turns,
--rounds of them): "C" is python_oracle
--bench (libraybox called from C, the CPU backend), "Python" is
raybox.Scene(backend="cpu").nearest/any with numpy arrays in and out,
"Open3D" is cast_rays / test_occlusions. Targets: Python >= 0.9x C, and
>= 2x Open3D.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)


def ensure_venv(build):
    """Makes BUILD/venv-bench when needed and re-runs this script in it."""
    venv = os.path.join(os.path.abspath(build), "venv-bench")
    py = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    req = os.path.join(HERE, "requirements.txt")
    stamp = os.path.join(venv, ".raybox-bench-stamp")
    steps = []
    if not os.path.exists(py):
        steps.append([sys.executable, "-m", "venv", venv])
    pip = [os.path.join(venv, "bin", "pip"), "install",
           "--disable-pip-version-check", "--quiet"]
    if not os.path.exists(stamp) or \
            os.path.getmtime(stamp) < os.path.getmtime(req):
        steps.append(pip + ["-r", req])
    # This checkout's package, rebuilt incrementally in BUILD/python-bench.
    steps.append(pip + ["--no-build-isolation", "--no-deps",
                        "--force-reinstall", "-C", "build-dir=" +
                        os.path.join(os.path.abspath(build), "python-bench"),
                        PYDIR])
    for cmd in steps:
        print("bench-python: %s" % " ".join(cmd[:4]), file=sys.stderr)
        if subprocess.call(cmd) != 0:
            sys.exit("bench-python: failed: %s" % " ".join(cmd))
        if "-r" in cmd:
            open(stamp, "w").close()
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


def make_scene(np, n_boxes, n_rays, seed=1):
    rng = np.random.default_rng(seed)
    c = rng.uniform(0, 100, (n_boxes, 3))
    h = rng.uniform(0.1, 1.0, (n_boxes, 3))
    boxes = np.concatenate([c - h, c + h], axis=1).astype(np.float32)
    o = rng.uniform(0, 100, (n_rays, 3))
    d = rng.normal(size=(n_rays, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    rays = np.empty((n_rays, 8), np.float32)
    rays[:, :3], rays[:, 3:6], rays[:, 6], rays[:, 7] = o, d, 0, np.inf
    return boxes, rays


def box_triangles(np, boxes):
    """Each box as 12 triangles (outward winding): vertices, indices."""
    lo, hi = boxes[:, :3], boxes[:, 3:]
    corners = np.array([[i & 1, (i >> 1) & 1, (i >> 2) & 1]
                        for i in range(8)], np.float32)
    v = lo[:, None, :] + corners[None] * (hi - lo)[:, None, :]
    faces = np.array([[0, 2, 1], [1, 2, 3], [4, 5, 6], [5, 7, 6],
                      [0, 1, 4], [1, 5, 4], [2, 6, 3], [3, 6, 7],
                      [0, 4, 2], [2, 4, 6], [1, 3, 5], [3, 7, 5]], np.uint32)
    idx = faces[None] + (8 * np.arange(len(boxes), dtype=np.uint32))[:, None,
                                                                        None]
    return (np.ascontiguousarray(v.reshape(-1, 3), np.float32),
            np.ascontiguousarray(idx.reshape(-1, 3), np.uint32))


def best_rate(fn, n, seconds):
    fn()  # warm-up (first-touch pages, thread start)
    best, end, reps = 0.0, time.perf_counter() + seconds, 0
    while time.perf_counter() < end or reps < 3:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = max(best, n / dt)
        reps += 1
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build",
                    help="build directory (python_oracle, venv-bench)")
    ap.add_argument("--boxes", type=int, default=100000)
    ap.add_argument("--rays", type=int, default=1000000)
    ap.add_argument("--seconds", type=float, default=6.0,
                    help="repeats of each measurement, about this long")
    ap.add_argument("--rounds", type=int, default=3,
                    help="turns C and Python take (--seconds in all)")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for all three (0: every CPU)")
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    oracle = os.path.join(a.build, "tests", "python_oracle")
    if not os.access(oracle, os.X_OK):
        sys.exit("bench-python: %s is missing: make build first" % oracle)
    ensure_venv(a.build)

    import numpy as np
    import open3d as o3d
    import raybox

    boxes, rays = make_scene(np, a.boxes, a.rays)
    n = len(rays)
    out = {"boxes": a.boxes, "rays": n, "cpus": os.cpu_count(),
           "open3d": o3d.__version__}

    # C (the library through python_oracle, on the same records) and
    # Python take turns, --rounds times, each keeping its best: a machine
    # whose load changes during the run then weighs on both alike.
    scene = raybox.Scene(boxes, backend="cpu", threads=a.threads)
    share = a.seconds / a.rounds
    for k in ("c_nearest", "c_any", "python_nearest", "python_any"):
        out[k] = 0.0
    with tempfile.TemporaryDirectory() as d:
        rays.tofile(os.path.join(d, "rays.f32"))
        boxes.tofile(os.path.join(d, "boxes.f32"))
        for _ in range(a.rounds):
            p = subprocess.run([oracle, d, "--bench", str(share),
                                "--threads", str(a.threads)],
                               capture_output=True, text=True)
            if p.returncode:
                sys.exit("bench-python: python_oracle: %s"
                         % p.stderr.strip())
            for line in p.stdout.split("\n"):
                if line:
                    mode, rate = line.split()
                    out["c_" + mode] = max(out["c_" + mode], float(rate))
            out["python_nearest"] = max(out["python_nearest"], best_rate(
                lambda: scene.nearest(rays), n, share))
            out["python_any"] = max(out["python_any"], best_rate(
                lambda: scene.any(rays), n, share))
    ours = scene.nearest(rays)

    v, idx = box_triangles(np, boxes)
    t0 = time.perf_counter()
    rs = o3d.t.geometry.RaycastingScene(nthreads=a.threads)
    rs.add_triangles(o3d.core.Tensor(v), o3d.core.Tensor(idx))
    r6 = o3d.core.Tensor(np.ascontiguousarray(rays[:, :6]))
    theirs = rs.cast_rays(r6, nthreads=a.threads)  # builds Embree's BVH
    out["open3d_build_s"] = time.perf_counter() - t0
    out["open3d_nearest"] = best_rate(
        lambda: rs.cast_rays(r6, nthreads=a.threads), n, a.seconds)
    out["open3d_any"] = best_rate(
        lambda: rs.test_occlusions(r6, nthreads=a.threads), n, a.seconds)

    # The answers should agree but for rays grazing an edge or a corner
    # (triangles are not closed boxes): report how many. A ray that starts
    # inside a box enters it at tmin here (face none) and meets its first
    # triangle where it leaves, at t_exit.
    t_o3d = theirs["t_hit"].numpy()
    hit_o3d = np.isfinite(t_o3d)
    t_ours = np.where(ours["face"] == 0, ours["t_exit"], ours["t_enter"])
    with np.errstate(invalid="ignore"):
        close = np.abs(t_o3d - t_ours) <= 1e-4 * np.maximum(1, np.abs(t_o3d))
    agree = (hit_o3d == ours["hit"]) & (~ours["hit"] | close)
    out["open3d_agree"] = float(agree.mean())
    out["hit_fraction"] = float(ours["hit"].mean())
    for m in ("nearest", "any"):
        out["python_vs_c_" + m] = out["python_" + m] / out["c_" + m]
        out["python_vs_open3d_" + m] = out["python_" + m] / \
            out["open3d_" + m]

    print("raybox Python benchmark: %d boxes, %d rays (%.0f%% hit), "
          "%d CPUs, CPU backend; Open3D %s (12 triangles a box)"
          % (a.boxes, n, 100 * out["hit_fraction"], out["cpus"],
             out["open3d"]))
    print("%-8s %14s %14s %14s %9s %11s" % ("mode", "C rays/s",
                                           "Python rays/s", "Open3D rays/s",
                                           "Py/C", "Py/Open3D"))
    ok = True
    for m in ("nearest", "any"):
        vc, vp = out["python_vs_c_" + m], out["python_vs_open3d_" + m]
        print("%-8s %14.4g %14.4g %14.4g %8.3fx %10.2fx" % (
            m, out["c_" + m], out["python_" + m], out["open3d_" + m], vc, vp))
        ok &= vc >= 0.9 and vp >= 2.0
    print("answers agreeing with Open3D's (hit, t within 1e-4): %.4f%%"
          % (100 * out["open3d_agree"]))
    print("targets (Python >= 0.9x C, >= 2x Open3D): %s"
          % ("met" if ok else "MISSED"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
