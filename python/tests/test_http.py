"""raybox.Client against a live rayboxd: its answers equal the C library's
(python_oracle) bit for bit; scenes are made, read, changed and deleted;
errors are HTTPError; raybox-http fails cleanly."""
import json
import subprocess
import sys

import numpy as np
import pytest

import raybox
from conftest import (assert_all, assert_nearest, assert_same_bits,
                      gen_boxes, gen_rays, gen_shapes, write_case)


def check_client(c, rays, ref, what, shapes=False, max_hits=8, **where):
    ans = c.nearest(rays, normals=True, **where)
    assert_nearest(ans, ref["nearest"], what + " nearest",
                   ref["kinds"] if shapes else None, ref["normals"])
    assert ("kind" in ans) == shapes
    assert_same_bits(c.any(rays, **where)["hit"].view(np.uint8), ref["any"],
                     what + " any")
    assert_same_bits(c.count(rays, **where)["count"], ref["count"],
                     what + " count")
    assert_all(c.all(rays, max_hits=max_hits, **where), ref["all"],
               what + " all")


def test_scene_boxes(client, oracle, workdir):
    rng = np.random.default_rng(21)
    boxes = gen_boxes(rng, 3000)
    rays = gen_rays(rng, 4000, boxes)
    write_case(workdir, rays, boxes)
    ref = oracle(workdir)
    made = client.create_scene(boxes)
    sid = made["id"]
    assert made["boxes"] == 3000 and made["version"] == 1
    check_client(client, rays, ref, "scene", scene=sid)
    assert client.last_meta["scene_version"] == 1
    # the same with the boxes sent along
    check_client(client, rays, ref, "inline", boxes=boxes)
    # and the native module agrees with both
    native = raybox.Scene(boxes, backend="cpu").nearest(rays)
    assert_nearest(native, ref["nearest"], "native")
    got = client.get_scene(sid)
    assert got["boxes"] == 3000 and got["dims"] == 3
    assert any(s["id"] == sid for s in client.list_scenes()["scenes"])
    client.delete_scene(sid)
    with pytest.raises(raybox.HTTPError) as e:
        client.get_scene(sid)
    assert e.value.status == 404


def test_scene_shapes_and_patch(client, oracle, workdir):
    rng = np.random.default_rng(22)
    boxes = gen_boxes(rng, 600)
    shapes = gen_shapes(rng, 300)
    rays = gen_rays(rng, 3000, boxes)
    sid = client.create_scene(boxes, **shapes)["id"]
    write_case(workdir, rays, boxes, **shapes)
    check_client(client, rays, oracle(workdir), "shapes scene", shapes=True,
                 scene=sid)
    # set boxes, append boxes and spheres: the answers of the final state
    ids = rng.choice(600, 40, replace=False)
    moved = gen_boxes(rng, 40)
    more = gen_boxes(rng, 50)
    out = client.patch_scene(sid, set=(ids, moved),
                             append={"boxes": more})
    assert out["version"] == 2
    # Ids: the appended boxes come after every element made at creation.
    final_boxes = boxes.copy()
    final_boxes[ids] = moved
    n_before = 600 + 3 * 300 + 3
    ans = client.nearest(rays, scene=sid)
    native = raybox.Scene(final_boxes, backend="cpu", **shapes)
    native.append(more)
    ref = native.nearest(rays)
    assert_nearest(ans, ref, "after patch", ref["kind"])
    assert (ans["box"] >= n_before).any()  # some hit an appended box
    client.delete_scene(sid)


def test_pairs_2d_and_inline_shapes(client, oracle, workdir):
    rng = np.random.default_rng(23)
    boxes = gen_boxes(rng, 1000)
    rays = gen_rays(rng, 1000, boxes)
    rays[::2, 3:6] = (boxes[::2, :3] + boxes[::2, 3:]) / 2 - rays[::2, :3]
    write_case(workdir / "pairs", rays, boxes)
    ref = oracle(workdir / "pairs", pairs=True)
    assert_nearest(client.pairs(rays, boxes=boxes), ref["pairs"], "pairs")
    b2 = gen_boxes(rng, 800, dims=2)
    r2 = gen_rays(rng, 1500, b2, dims=2)
    write_case(workdir / "2d", r2, b2, dims=2)
    ref2 = oracle(workdir / "2d", dims=2)
    sid = client.create_scene(b2, dims=2)["id"]
    a = client.nearest(r2, scene=sid, dims=2)
    assert_nearest(a, ref2["nearest"], "2d")
    assert_all(client.all(r2, scene=sid, dims=2, max_hits=8), ref2["all"],
               "2d all")
    client.delete_scene(sid)
    shapes = gen_shapes(rng, 200)
    write_case(workdir / "sh", rays, boxes, **shapes)
    ref3 = oracle(workdir / "sh")
    check_client(client, rays, ref3, "inline shapes", shapes=True,
                 boxes=boxes, **shapes)


def test_all_every_hit(client, oracle, workdir):
    from test_native import nested_case
    boxes, rays = nested_case(np.random.default_rng(25))
    write_case(workdir, rays, boxes)
    ref = oracle(workdir, max_hits=1024)["all"]
    ref["max_hits"] = None
    assert (ref["count"] > 64).sum() > 100
    sid = client.create_scene(boxes)["id"]
    assert_all(client.all(rays, scene=sid), ref, "http every hit")
    assert_all(client.all(rays, boxes=boxes), ref, "http every hit, inline")
    client.delete_scene(sid)


def test_errors(client):
    rays = np.zeros((4, 8), np.float32)
    rays[:, 3] = 1
    rays[:, 7] = np.inf
    rays[2, 6] = 5
    rays[2, 7] = 1
    with pytest.raises(raybox.HTTPError) as e:
        client.nearest(rays, boxes=[[0, 0, 0, 1, 1, 1]])
    assert e.value.status == 422 and e.value.pointer == "/rays/2/6"
    assert "/rays/2/6" in str(e.value)
    with pytest.raises(raybox.HTTPError) as e:
        client.nearest(rays[:1], scene="0" * 32)
    assert e.value.status == 404
    with pytest.raises(raybox.HTTPError) as e:
        client.create_scene([[0, 0, 0, 1, 1, 1], [1, 0, 0, 0, 1, 1]])
    assert e.value.status == 422 and e.value.pointer == "/boxes/1/0"
    sid = client.create_scene([[0, 0, 0, 1, 1, 1]])["id"]
    with pytest.raises(raybox.HTTPError) as e:
        client.patch_scene(sid, set=([7], [[0, 0, 0, 1, 1, 1]]))
    assert e.value.status == 422
    assert client.get_scene(sid)["version"] == 1
    client.delete_scene(sid)
    with pytest.raises(ValueError, match="not an id"):
        client.get_scene("../health")
    with pytest.raises(raybox.HTTPError) as e:
        raybox.Client("http://127.0.0.1:9").health()  # nothing listens
    assert e.value.status == 0


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "raybox.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli(rayboxd, workdir):
    rng = np.random.default_rng(24)
    boxes = gen_boxes(rng, 100)
    rays = gen_rays(rng, 50, boxes)
    np.save(workdir / "boxes.npy", boxes)
    np.save(workdir / "rays.npy", rays)
    p = _cli("--url", rayboxd, "health")
    assert p.returncode == 0 and '"ok"' in p.stdout, p.stderr
    p = _cli("--url", rayboxd, "create", str(workdir / "boxes.npy"))
    assert p.returncode == 0, p.stderr
    sid = json.loads(p.stdout)["id"]
    p = _cli("--url", rayboxd, "intersect", str(workdir / "rays.npy"),
             "--scene", sid, "--out", str(workdir / "a.npz"))
    assert p.returncode == 0, p.stderr
    saved = np.load(workdir / "a.npz")
    ref = raybox.Scene(boxes, backend="cpu").nearest(rays)
    assert_same_bits(saved["t_enter"], ref["t_enter"], "cli t_enter")
    p = _cli("--url", rayboxd, "intersect", str(workdir / "rays.npy"),
             "--boxes", str(workdir / "boxes.npy"), "--mode", "count")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["count"] == \
        raybox.Scene(boxes).count(rays)["count"].tolist()
    # clean failures: one line, no traceback, exit 1
    bad = rays.copy()
    bad[3, 6] = np.nan
    np.save(workdir / "bad.npy", bad)
    for args in [("intersect", str(workdir / "bad.npy"), "--scene", sid),
                 ("get", "f" * 32),
                 ("create", str(workdir / "missing.npy")),
                 ("create", str(workdir / "rays.npy"))]:
        p = _cli("--url", rayboxd, *args)
        assert p.returncode == 1, (args, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr, p.stderr
        assert p.stderr.startswith("raybox-http: ") and \
            p.stderr.count("\n") == 1, p.stderr
    p = _cli("--url", "http://127.0.0.1:9", "health")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    p = _cli("--help")
    assert p.returncode == 0 and "intersect" in p.stdout
    assert _cli("frobnicate").returncode == 2
    assert _cli("--url", rayboxd, "delete", sid).returncode == 0
