"""Fixtures of the raybox Python tests: the C library's answers
(python_oracle, $RAYBOX_ORACLE), a live rayboxd ($RAYBOXD) and seeded
batches with edge cases. Run by ctest as test_python (python/tests/run.sh);
by hand:

    RAYBOX_ORACLE=build/tests/python_oracle RAYBOXD=build/bin/rayboxd \\
        build/venv-python/bin/python -m pytest python/tests

A missing program fails the tests that need it; nothing is skipped.
"""
import json
import os
import queue
import signal
import subprocess
import threading

import numpy as np
import pytest

import raybox
from raybox._arrays import HIT_DTYPE, LIST_DTYPE, all_columns, elements_array


def _program(var):
    path = os.environ.get(var)
    if not path or not os.access(path, os.X_OK):
        pytest.fail("$%s must name the program (ctest sets it; see "
                    "conftest.py): %r" % (var, path))
    return path


@pytest.fixture(scope="session")
def oracle():
    """run(dir, dims=3, max_hits=8, pairs=False) -> the C library's
    answers for dir's .f32 files, as numpy arrays."""
    exe = _program("RAYBOX_ORACLE")

    def run(d, dims=3, max_hits=8, pairs=False):
        cmd = [exe, str(d), "--dims", str(dims), "--max-hits", str(max_hits)]
        if pairs:
            cmd.append("--pairs")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        rd = lambda name, dt: np.fromfile(os.path.join(d, name), dt)
        if pairs:
            return {"pairs": rd("pairs.hits", HIT_DTYPE)}
        out = {"nearest": rd("nearest.hits", HIT_DTYPE),
               "any": rd("any.u8", np.uint8),
               "count": rd("count.u32", np.uint32)}
        if dims == 3:
            out["kinds"] = rd("nearest.kinds", np.uint8)
            out["normals"] = rd("nearest.normals", np.float32).reshape(-1, 3)
        counts = rd("all.counts", np.uint32)
        lists = rd("all.list", LIST_DTYPE)
        out["all"] = all_columns(counts, lists, max_hits)
        return out
    return run


def write_case(d, rays, boxes, dims=3, **shapes):
    """The oracle's input files: rays (N, 2*dims+2) and boxes float32;
    shapes in the record forms (obbs of 15 numbers)."""
    os.makedirs(d, exist_ok=True)
    np.ascontiguousarray(rays, np.float32).tofile(os.path.join(d, "rays.f32"))
    np.ascontiguousarray(boxes, np.float32).reshape(-1, 2 * dims).tofile(
        os.path.join(d, "boxes.f32"))
    for k, v in shapes.items():
        if v is not None:
            elements_array(v, k).tofile(os.path.join(d, k + ".f32"))


# ---- batches ----------------------------------------------------------------

def gen_boxes(rng, m, dims=3, span=10.0):
    c = rng.uniform(-span, span, (m, dims))
    h = rng.uniform(0, 1.5, (m, dims))
    h[rng.random(m) < 0.05, rng.integers(0, dims)] = 0  # flat boxes
    h[rng.random(m) < 0.02] = 0                         # points
    b = np.concatenate([c - h, c + h], axis=1).astype(np.float32)
    # Whole-number boxes, for rays that run along faces and edges.
    k = max(1, m // 20)
    lo = rng.integers(-8, 8, (k, dims)).astype(np.float32)
    b[:k] = np.concatenate([lo, lo + rng.integers(0, 3, (k, dims))], axis=1)
    return b


def gen_rays(rng, n, boxes, dims=3, span=12.0):
    """(N, 2*dims+2) rays: random ones, axis-parallel ones, rays from box
    corners along faces, zero directions, -0.0, finite and infinite tmax,
    tmin > 0, rays starting inside boxes."""
    o = rng.uniform(-span, span, (n, dims)).astype(np.float32)
    d = rng.normal(size=(n, dims)).astype(np.float32)
    q = n // 8
    # axis-parallel (other components +0.0 or -0.0)
    ax = rng.integers(0, dims, q)
    d[:q] = np.where(rng.random((q, dims)) < 0.5, np.float32(0.0),
                     np.float32(-0.0))
    d[np.arange(q), ax] = rng.choice([-1.0, 1.0, 0.5, 3.0], q)
    # from whole-number corners along a face
    k = min(q, len(boxes))
    sel = rng.integers(0, max(1, len(boxes) // 20), k)
    o[q:q + k] = boxes[sel, :dims] - np.float32(2.0) * (
        np.arange(dims)[None, :] == rng.integers(0, dims, (k, 1)))
    d[q:q + k] = 0
    d[q + np.arange(k), rng.integers(0, dims, k)] = 1
    # zero directions (point-in-box tests)
    z = slice(2 * q, 2 * q + q // 4)
    d[z] = 0
    # origins inside boxes
    s = slice(3 * q, 4 * q)
    pick = rng.integers(0, len(boxes), q)
    o[s] = (boxes[pick, :dims] + boxes[pick, dims:]) / 2
    tmin = np.zeros(n, np.float32)
    tmax = np.full(n, np.inf, np.float32)
    r = rng.random(n)
    tmin[r < 0.1] = rng.uniform(0, 5, (r < 0.1).sum())
    tmax[r > 0.8] = tmin[r > 0.8] + rng.uniform(0, 10, (r > 0.8).sum())
    return np.ascontiguousarray(
        np.concatenate([o, d, tmin[:, None], tmax[:, None]], axis=1),
        np.float32)


def gen_shapes(rng, k, span=10.0):
    """Spheres, obbs (quaternion form), xboxes and planes, k of each but
    planes (a few: every ray tests every plane)."""
    spheres = np.concatenate([rng.uniform(-span, span, (k, 3)),
                              rng.uniform(0, 1.5, (k, 1))], axis=1)
    spheres[: max(1, k // 20), 3] = 0
    q = rng.normal(size=(k, 4))
    obbs = np.concatenate([rng.uniform(-span, span, (k, 3)),
                           rng.uniform(0, 1.5, (k, 3)), q], axis=1)
    xb = []
    for _ in range(k):
        lo = rng.uniform(-1, 0, 3)
        hi = lo + rng.uniform(0, 2, 3)
        a = rng.normal(size=(3, 3))
        while abs(np.linalg.det(a)) < 0.2:
            a = rng.normal(size=(3, 3))
        t = rng.uniform(-span, span, (3, 1))
        xb.append(np.concatenate([lo, hi, np.hstack([a, t]).ravel()]))
    nrm = rng.normal(size=(3, 3))
    planes = np.concatenate([nrm, rng.uniform(-20, -12, (3, 1))], axis=1)
    f = lambda a: np.asarray(a, np.float32)
    return {"spheres": f(spheres), "obbs": elements_array(f(obbs), "obbs"),
            "xboxes": f(np.array(xb)), "planes": f(planes)}


# ---- comparisons ------------------------------------------------------------

def assert_same_bits(a, b, what):
    """a and b hold the same bytes (NaN payloads and -0.0 included)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.shape == b.shape, "%s: shape %s != %s" % (what, a.shape, b.shape)
    assert a.dtype.itemsize == b.dtype.itemsize, "%s: %s != %s" % (
        what, a.dtype, b.dtype)
    if a.size == 0:
        return
    ra = a.view(np.uint8).reshape(a.shape[0], -1)
    rb = b.view(np.uint8).reshape(b.shape[0], -1)
    bad = np.flatnonzero((ra != rb).any(axis=1))
    assert bad.size == 0, "%s: %d of %d differ, first at %d: %r != %r" % (
        what, bad.size, len(a), bad[0], a[bad[0]], b[bad[0]])


def assert_nearest(ans, hits, what, kinds=None, normals=None):
    for col in ("t_enter", "t_exit", "box", "face", "exit_face"):
        assert_same_bits(ans[col], hits[col], "%s %s" % (what, col))
    assert_same_bits(ans["hit"].view(np.uint8), hits["hit"], what + " hit")
    assert ans["hit"].dtype == np.bool_
    if kinds is not None:
        assert_same_bits(ans["kind"], kinds, what + " kind")
    if normals is not None:
        assert_same_bits(ans["normal"], normals, what + " normal")


def assert_all(ans, ref, what):
    for col in ("ray_splits", "box", "t_enter", "t_exit", "count",
                "truncated"):
        assert_same_bits(ans[col], ref[col], "%s %s" % (what, col))
    assert ans["max_hits"] == ref["max_hits"]


# ---- rayboxd ----------------------------------------------------------------

@pytest.fixture(scope="session")
def rayboxd():
    """A rayboxd on a free loopback port; yields its url."""
    exe = _program("RAYBOXD")
    p = subprocess.Popen([exe, "--port", "0", "--backend", "cpu", "--quiet",
                          "--workers", "2", "--drain-timeout", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    lines = queue.Queue()

    def pump():
        for line in p.stdout:
            lines.put(line)
        lines.put(None)
    threading.Thread(target=pump, daemon=True).start()
    url = None
    log = []
    while url is None:
        try:
            line = lines.get(timeout=60)
        except queue.Empty:
            break
        if line is None:
            break
        log.append(line)
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("msg") == "listening":
            url = rec["url"]
    if url is None:
        p.kill()
        pytest.fail("rayboxd did not start: %s" % "".join(log))
    yield url
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("rayboxd did not stop on SIGTERM")
    assert rc == 0, "rayboxd exit status %d" % rc


@pytest.fixture
def client(rayboxd):
    with raybox.Client(rayboxd) as c:
        yield c


@pytest.fixture
def workdir(tmp_path):
    return tmp_path
