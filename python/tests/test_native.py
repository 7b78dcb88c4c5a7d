"""raybox.Scene and raybox.intersect against the C library (python_oracle),
bit for bit, and the package's own behaviour: input forms, zero copy,
errors, the GIL."""
import threading
import time

import numpy as np
import pytest

import raybox
from raybox._arrays import rays_array
from conftest import (assert_all, assert_nearest, assert_same_bits,
                      gen_boxes, gen_rays, gen_shapes, write_case)


def check_scene(scene, rays, ref, what, dims=3, shapes=False, max_hits=8):
    ans = scene.nearest(rays, normals=dims == 3)
    assert_nearest(ans, ref["nearest"], what + " nearest",
                   ref["kinds"] if shapes else None,
                   ref["normals"] if dims == 3 else None)
    assert ("kind" in ans) == shapes
    assert_same_bits(scene.any(rays)["hit"].view(np.uint8), ref["any"],
                     what + " any")
    assert_same_bits(scene.count(rays)["count"], ref["count"],
                     what + " count")
    assert_all(scene.all(rays, max_hits=max_hits), ref["all"], what + " all")


@pytest.mark.parametrize("seed", [1, 2])
def test_boxes_3d(seed, oracle, workdir):
    rng = np.random.default_rng(seed)
    boxes = gen_boxes(rng, 3000)
    rays = gen_rays(rng, 4000, boxes)
    write_case(workdir, rays, boxes)
    ref = oracle(workdir)
    assert ref["nearest"]["hit"].sum() > 500  # the batch does hit things
    assert ref["all"]["truncated"].any()      # and some lists overflow
    check_scene(raybox.Scene(boxes, backend="cpu"), rays, ref, "cpu")
    # Backends answer alike (SPEC R1-R10): OpenCL (PoCL here) == the C CPU.
    small = rays[:1500]
    write_case(workdir / "small", small, boxes)
    check_scene(raybox.Scene(boxes, backend="opencl"), small,
                oracle(workdir / "small"), "opencl")


def test_boxes_2d(oracle, workdir):
    rng = np.random.default_rng(7)
    boxes = gen_boxes(rng, 1500, dims=2)
    rays = gen_rays(rng, 3000, boxes, dims=2)
    write_case(workdir, rays, boxes, dims=2)
    ref = oracle(workdir, dims=2)
    scene = raybox.Scene(boxes, dims=2, backend="cpu")
    check_scene(scene, rays, ref, "2d", dims=2)
    # 2D rays given as (N, 4) and as a pair, with the range as arguments
    plain = rays[rays[:, 4] == 0]
    plain = plain[np.isinf(plain[:, 5])]
    a = scene.nearest(plain[:, :4])
    b = scene.nearest((plain[:, :2], plain[:, 2:4]))
    c = scene.nearest(plain)
    for col in ("t_enter", "box", "face"):
        assert_same_bits(a[col], c[col], "2d (N, 4) " + col)
        assert_same_bits(b[col], c[col], "2d pair " + col)


def test_shapes(oracle, workdir):
    rng = np.random.default_rng(11)
    boxes = gen_boxes(rng, 800)
    shapes = gen_shapes(rng, 600)
    rays = gen_rays(rng, 3000, boxes)
    write_case(workdir, rays, boxes, **shapes)
    ref = oracle(workdir)
    kinds = ref["kinds"]
    for k in range(5):  # every kind is some ray's nearest
        assert (kinds == k).any(), "no ray's nearest is of kind %d" % k
    scene = raybox.Scene(boxes, backend="cpu", **shapes)
    assert len(scene) == 800 + 3 * 600 + 3
    check_scene(scene, rays, ref, "shapes", shapes=True)
    # The same query with the elements inline (no scene).
    ans = raybox.intersect(rays, boxes, backend="cpu", normals=True,
                           **shapes)
    assert_nearest(ans, ref["nearest"], "inline", kinds, ref["normals"])
    assert scene.element_kind(800) == ("obb", 0)
    assert scene.element_kind(len(scene) - 1) == ("plane", 2)


def test_pairs(oracle, workdir):
    rng = np.random.default_rng(5)
    boxes = gen_boxes(rng, 2000)
    rays = gen_rays(rng, 2000, boxes)
    # half of the rays aimed at their own box's center
    rays[::2, 3:6] = (boxes[::2, :3] + boxes[::2, 3:]) / 2 - rays[::2, :3]
    write_case(workdir, rays, boxes)
    ref = oracle(workdir, pairs=True)
    ans = raybox.intersect(rays, boxes, mode="pairs", backend="cpu")
    assert_nearest(ans, ref["pairs"], "pairs")
    assert ans["hit"].sum() > 100


def test_set_append(oracle, workdir):
    rng = np.random.default_rng(9)
    boxes = gen_boxes(rng, 1000)
    more = gen_boxes(rng, 200)
    rays = gen_rays(rng, 2000, boxes)
    scene = raybox.Scene(boxes, backend="cpu")
    ids = rng.choice(1000, 50, replace=False)
    moved = gen_boxes(rng, 50)
    scene.set(ids, moved)
    scene.append(more)
    assert scene.stats()["version"] == 3
    final = boxes.copy()
    final[ids] = moved
    final = np.concatenate([final, more])
    write_case(workdir, rays, final)
    check_scene(scene, rays, oracle(workdir), "after set+append")


def nested_case(rng):
    """Rays through 150 nested boxes and 300 others: lists longer than the
    64 a first `all` pass has room for."""
    h = np.linspace(0.1, 15, 150, dtype=np.float32)[:, None]
    nested = np.concatenate([-h * np.ones((1, 3)), h * np.ones((1, 3))],
                            axis=1).astype(np.float32)
    boxes = np.concatenate([nested, gen_boxes(rng, 300)])
    rays = gen_rays(rng, 2000, boxes)
    rays[::3, 3:6] = -rays[::3, :3]  # a third aimed at the centre
    return boxes, rays


def test_all_every_hit(oracle, workdir):
    rng = np.random.default_rng(12)
    boxes, rays = nested_case(rng)
    write_case(workdir, rays, boxes)
    ref = oracle(workdir, max_hits=1024)["all"]
    assert ref["count"].max() > 100 and (ref["count"] > 64).sum() > 100
    assert not ref["truncated"].any()
    scene = raybox.Scene(boxes, backend="cpu")
    ans = scene.all(rays)
    assert ans["max_hits"] is None and not ans["truncated"].any()
    ref["max_hits"] = None
    assert_all(ans, ref, "every hit")
    inline = raybox.intersect(rays, boxes, mode="all", backend="cpu")
    assert_all(inline, ref, "every hit, inline")
    cut = scene.all(rays, max_hits=64)
    assert cut["truncated"].sum() == (ref["count"] > 64).sum()


def test_ray_forms_and_zero_copy():
    rng = np.random.default_rng(3)
    boxes = gen_boxes(rng, 500)
    rays8 = gen_rays(rng, 1000, boxes)
    # An (N, 8) float32 C-contiguous array is rb_ray as it is: no copy.
    assert rays_array(rays8) is rays8
    assert rays_array(rays8.astype(np.float64)) is not rays8
    scene = raybox.Scene(boxes.astype(np.float64), backend="cpu")
    ref = scene.nearest(rays8)
    o, d = rays8[:, :3], rays8[:, 3:6]
    sel = (rays8[:, 6] == 0) & np.isinf(rays8[:, 7])
    for form in [rays8[sel, :6], (o[sel], d[sel]),
                 rays8[sel, :6].astype(np.float64),
                 (o[sel].tolist(), d[sel].tolist())]:
        a = scene.nearest(form)
        assert_same_bits(a["t_enter"], ref["t_enter"][sel], "form t_enter")
        assert_same_bits(a["box"], ref["box"][sel], "form box")
    # tmin/tmax as arguments for rays without their own
    a = scene.nearest(rays8[:, :6], tmin=1.0, tmax=5.0)
    r = rays8.copy()
    r[:, 6], r[:, 7] = 1.0, 5.0
    assert_same_bits(a["t_enter"], scene.nearest(r)["t_enter"], "tmin/tmax")
    # float64 rays are rounded to float32 as numpy does
    r64 = rays8.astype(np.float64) + 1e-9
    assert_same_bits(scene.nearest(r64)["t_enter"],
                     scene.nearest(r64.astype(np.float32))["t_enter"], "f64")
    # one ray as a 1D array; boxes as (M, 2, 3) bounds and as (mins, maxs)
    one = scene.nearest(rays8[0])
    assert one["hit"].shape == (1,)
    s2 = raybox.Scene(boxes.reshape(-1, 2, 3), backend="cpu")
    s3 = raybox.Scene((boxes[:, :3], boxes[:, 3:]), backend="cpu")
    assert_same_bits(s2.nearest(rays8)["box"], ref["box"], "bounds form")
    assert_same_bits(s3.nearest(rays8)["box"], ref["box"], "pair form")
    # misses: box -1, t_enter = t_exit = +inf, no faces
    miss = ~ref["hit"]
    assert miss.any()
    assert (ref["box"][miss] == -1).all()
    assert np.isposinf(ref["t_enter"][miss]).all()
    assert np.isposinf(ref["t_exit"][miss]).all()
    assert (ref["face"][miss] == 0).all()
    # empty batches and an empty scene
    assert scene.nearest(np.zeros((0, 8), np.float32))["hit"].shape == (0,)
    assert scene.all(np.zeros((0, 6)))["ray_splits"].tolist() == [0]
    empty = raybox.Scene(np.zeros((0, 6)), backend="cpu")
    assert not empty.any(rays8)["hit"].any()


def test_errors():
    scene = raybox.Scene([[0, 0, 0, 1, 1, 1]], backend="cpu")
    rays = np.zeros((5, 8), np.float32)
    rays[:, 3] = 1
    rays[:, 7] = np.inf
    rays[3, 6] = np.nan
    with pytest.raises(raybox.InputError) as e:
        scene.nearest(rays)
    assert (e.value.element, e.value.index, e.value.field) == ("ray", 3, 6)
    assert "ray 3" in str(e.value) and e.value.status == "invalid_input"
    assert isinstance(e.value, ValueError)
    with pytest.raises(raybox.InputError) as e:
        raybox.Scene([[0, 0, 0, 1, 1, 1], [2, 0, 0, 1, 1, 1]])
    assert (e.value.element, e.value.index, e.value.field) == ("box", 1, 0)
    with pytest.raises(raybox.InputError) as e:
        raybox.Scene(spheres=[[0, 0, 0, 1], [0, 0, 0, -1]])
    assert (e.value.element, e.value.index) == ("sphere", 1)
    with pytest.raises(raybox.InputError) as e:
        raybox.Scene(obbs=[[0, 0, 0, 1, 1, 1, 0, 0, 0, 0]])
    assert (e.value.element, e.value.index) == ("obb", 0)
    with pytest.raises(ValueError, match=r"rays: shape \(5, 7\)"):
        scene.nearest(np.zeros((5, 7)))
    with pytest.raises(ValueError, match="own tmin and tmax"):
        scene.nearest(rays, tmax=3)
    with pytest.raises(ValueError, match="boxes: shape"):
        raybox.Scene(np.zeros((4, 5)))
    with pytest.raises(TypeError, match="not a number type"):
        raybox.Scene(np.array([["a"] * 6]))
    with pytest.raises(ValueError, match="backend 'gpu'"):
        raybox.Scene(backend="gpu")
    with pytest.raises(ValueError, match="max_hits 0"):
        scene.all(rays[:1], max_hits=0)
    with pytest.raises(raybox.InputError, match="out of range"):
        scene.set([5], [[0, 0, 0, 1, 1, 1]])
    with pytest.raises(ValueError, match="mode 'first'"):
        raybox.intersect(rays, [[0, 0, 0, 1, 1, 1]], mode="first")
    before = scene.stats()["version"]
    with pytest.raises(raybox.InputError):
        scene.append([[0, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    assert scene.stats()["version"] == before  # nothing changed


def test_gil_released():
    """A long query leaves the interpreter to other threads."""
    rng = np.random.default_rng(4)
    boxes = gen_boxes(rng, 20000)
    rays = np.ascontiguousarray(gen_rays(rng, 400000, boxes))
    scene = raybox.Scene(boxes, backend="cpu", threads=1)
    t0 = time.perf_counter()
    scene.all(rays, max_hits=4)
    alone = time.perf_counter() - t0
    ticks = 0
    done = threading.Event()

    def query():
        scene.all(rays, max_hits=4)
        done.set()
    t = threading.Thread(target=query)
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    # Held GIL: the loop above would not run until the query ended.
    assert alone > 0.05, "the query is too short to tell (%.3f s)" % alone
    assert ticks >= 10, "%d ticks during a %.3f s query" % (ticks, alone)


def test_threads_share_a_scene():
    rng = np.random.default_rng(8)
    boxes = gen_boxes(rng, 5000)
    rays = gen_rays(rng, 20000, boxes)
    scene = raybox.Scene(boxes, backend="cpu", threads=2)
    ref = scene.nearest(rays)
    out = [None] * 4

    def run(i):
        out[i] = scene.nearest(rays)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for o in out:
        assert_same_bits(o["t_enter"], ref["t_enter"], "threaded t_enter")
        assert_same_bits(o["box"], ref["box"], "threaded box")


def test_info():
    scene = raybox.Scene([[0, 0, 0, 1, 1, 1]], backend="cpu", threads=1)
    info = scene.info()
    assert info["backend"] == "cpu" and info["threads"] == 1
    scene.nearest([0.5, 0.5, -1, 0, 0, 1])
    assert scene.last_run["backend"] == "cpu"
    st = scene.stats()
    assert st["elements"] == 1 and st["version"] == 1
    assert "elements=1" in repr(scene)
