"""numpy forms of libraybox's records (include/raybox.h) and of the answers.

Both the native Scene and the HTTP Client use these, so that the same
question gets the same arrays whichever way it is answered.
"""
import numpy as np

MODES = {"pairs": 0, "nearest": 1, "any": 2, "count": 3, "all": 4}
FACES = [None, "-x", "+x", "-y", "+y", "-z", "+z", "surface"]
KINDS = ["box", "obb", "xbox", "sphere", "plane"]
KIND_NONE = 255

# rb_hit and rb_list_hit, byte for byte.
HIT_DTYPE = np.dtype([("t_enter", "<f4"), ("t_exit", "<f4"), ("box", "<i4"),
                      ("hit", "u1"), ("face", "u1"), ("exit_face", "u1"),
                      ("reserved", "u1")])
LIST_DTYPE = np.dtype([("box", "<i4"), ("t_enter", "<f4"), ("t_exit", "<f4")])
assert HIT_DTYPE.itemsize == 16 and LIST_DTYPE.itemsize == 12

# Floats per record of each element kind (3D), and of boxes in 2D.
WIDTHS = {"boxes": 6, "obbs": 15, "xboxes": 18, "spheres": 4, "planes": 4}
SHAPE_KINDS = ("obbs", "xboxes", "spheres", "planes")


def _f32(a, what):
    """a as a C-contiguous float32 array: the same object when it is one
    already (no copy), else converted (float64 rounds to nearest)."""
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError) as e:
        raise TypeError("%s: not an array of numbers (%s)" % (what, e)) from None
    if arr.dtype.kind not in "fiub":
        raise TypeError("%s: dtype %s is not a number type" % (what, arr.dtype))
    return np.ascontiguousarray(arr, dtype=np.float32)


def rays_array(rays, dims=3, tmin=None, tmax=None):
    """The (N, 2*dims+2) float32 array of rb_ray (rb_ray2) records.

    Takes an (N, 8) array (origin, dir, tmin, tmax: used as it is, without
    a copy, when it is float32 and C-contiguous), an (N, 6) array (origin,
    dir) or a pair (origins (N, 3), dirs (N, 3)); in 2D (N, 6), (N, 4) or
    ((N, 2), (N, 2)). A single ray may be 1D. Rays without their own range
    take tmin (default 0) and tmax (default +inf)."""
    full, half = 2 * dims + 2, 2 * dims
    if isinstance(rays, (tuple, list)) and len(rays) == 2 and \
            not np.isscalar(rays[0]) and np.ndim(rays[0]) >= 1 and \
            np.shape(rays[0])[-1:] == (dims,) and \
            np.shape(rays[1])[-1:] == (dims,):
        o = _f32(rays[0], "ray origins").reshape(-1, dims)
        d = _f32(rays[1], "ray directions").reshape(-1, dims)
        if o.shape != d.shape:
            raise ValueError("rays: %d origins but %d directions"
                             % (len(o), len(d)))
        arr = np.empty((len(o), full), np.float32)
        arr[:, :dims] = o
        arr[:, dims:half] = d
        return _fill_range(arr, half, tmin, tmax)
    arr = _f32(rays, "rays")
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] not in (full, half):
        raise ValueError(
            "rays: shape %s; expected (N, %d) (origin, dir, tmin, tmax), "
            "(N, %d) (origin, dir) or a pair (origins (N, %d), dirs (N, %d))"
            % (np.shape(rays), full, half, dims, dims))
    if arr.shape[1] == full:
        if tmin is not None or tmax is not None:
            raise ValueError("rays of %d numbers carry their own tmin and "
                             "tmax: leave tmin= and tmax= out" % full)
        return arr
    out = np.empty((len(arr), full), np.float32)
    out[:, :half] = arr
    return _fill_range(out, half, tmin, tmax)


def _fill_range(arr, half, tmin, tmax):
    arr[:, half] = 0.0 if tmin is None else tmin
    arr[:, half + 1] = np.inf if tmax is None else tmax
    return arr


def elements_array(a, kind, dims=3):
    """The (K, width) float32 array of one kind's records, or None for
    None. Boxes may also be (K, 2, dims) (trimesh-style bounds: min, max)
    or a pair (mins, maxs); obbs (K, 10) (center, half extents, quaternion
    w x y z) are turned into the axes form by the library
    (rb_obb_from_quaternion)."""
    if a is None:
        return None
    width = 2 * dims if kind == "boxes" else WIDTHS[kind]
    if kind == "boxes" and isinstance(a, (tuple, list)) and len(a) == 2 and \
            np.ndim(a[0]) == 2 and np.shape(a[0])[-1] == dims:
        lo = _f32(a[0], "box mins")
        hi = _f32(a[1], "box maxs")
        if lo.shape != hi.shape:
            raise ValueError("boxes: %d mins but %d maxs" % (len(lo), len(hi)))
        return np.ascontiguousarray(np.concatenate([lo, hi], axis=1))
    arr = _f32(a, kind)
    if arr.size == 0:
        return arr.reshape(0, width)
    if kind == "boxes" and arr.ndim == 3 and arr.shape[1:] == (2, dims):
        return arr.reshape(-1, width)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if kind == "obbs" and arr.ndim == 2 and arr.shape[1] == 10:
        from . import _native
        raw = _native.obb_from_quaternion(arr)
        return np.frombuffer(raw, np.float32).reshape(-1, 15).copy()
    if arr.ndim != 2 or arr.shape[1] != width:
        extra = " or (K, 2, %d)" % dims if kind == "boxes" else \
            " or (K, 10) (quaternion form)" if kind == "obbs" else ""
        raise ValueError("%s: shape %s; expected (K, %d)%s"
                         % (kind, np.shape(a), width, extra))
    return arr


def nearest_columns(hits, kinds=None, normals=None):
    """The dict of a nearest (or pairs) answer from the rb_hit records:
    views, not copies, of the one record array."""
    out = {
        "hit": hits["hit"].view(np.bool_),
        "t_enter": hits["t_enter"],
        "t_exit": hits["t_exit"],
        "box": hits["box"],
        "face": hits["face"],
        "exit_face": hits["exit_face"],
    }
    if kinds is not None:
        out["kind"] = kinds
    if normals is not None:
        out["normal"] = normals
    return out


def all_columns(counts, lists, max_hits):
    """The CSR form of an `all` answer: lists is the library's padded
    (N * max_hits) array; ray i's hits are box[ray_splits[i]:ray_splits[i+1]]
    (sorted by t_enter, then id); count is every hit (may exceed max_hits;
    truncated where it does)."""
    n = len(counts)
    kept = np.minimum(counts, max_hits).astype(np.int64)
    splits = np.zeros(n + 1, np.int64)
    np.cumsum(kept, out=splits[1:])
    if max_hits == 0 or n == 0:
        flat = np.zeros(0, LIST_DTYPE)
    else:
        mask = np.arange(max_hits)[None, :] < kept[:, None]
        flat = lists.reshape(n, max_hits)[mask]
    return all_from_flat(counts, flat, splits, max_hits)


def all_from_flat(counts, flat, splits, max_hits):
    return {
        "ray_splits": splits,
        "box": np.ascontiguousarray(flat["box"]),
        "t_enter": np.ascontiguousarray(flat["t_enter"]),
        "t_exit": np.ascontiguousarray(flat["t_exit"]),
        "count": counts,
        "truncated": counts > max_hits,
        "max_hits": max_hits,
    }


def all_every_hit(run, rays, first=64):
    """An `all` answer with every hit (max_hits None): run(rays, max_hits)
    answers in CSR; rays whose lists were cut at `first` are asked again,
    alone, with room for the longest of them, so memory stays near the
    answer's own size. The result is what run(rays, the largest count)
    would give, with max_hits None and truncated all False."""
    a = run(rays, first)
    trunc = np.flatnonzero(a["truncated"])
    if len(trunc) == 0:
        a["max_hits"] = None
        return a
    b = run(rays[trunc], max(1, int(a["count"][trunc].max())))
    n = len(a["count"])
    kept_a = np.diff(a["ray_splits"])
    kept = kept_a.copy()
    kept[trunc] = np.diff(b["ray_splits"])
    splits = np.zeros(n + 1, np.int64)
    np.cumsum(kept, out=splits[1:])
    # Destination of every entry: its ray's new start + its place in the ray.
    ray_a = np.repeat(np.arange(n), kept_a)
    keep_a = ~a["truncated"][ray_a]
    pos_a = np.arange(len(ray_a)) - a["ray_splits"][ray_a]
    dst_a = (splits[ray_a] + pos_a)[keep_a]
    kept_b = np.diff(b["ray_splits"])
    ray_b = trunc[np.repeat(np.arange(len(trunc)), kept_b)]
    pos_b = np.arange(len(ray_b)) - np.repeat(b["ray_splits"][:-1], kept_b)
    dst_b = splits[ray_b] + pos_b
    out = {"ray_splits": splits}
    for col in ("box", "t_enter", "t_exit"):
        v = np.empty(int(splits[-1]), a[col].dtype)
        v[dst_a] = a[col][keep_a]
        v[dst_b] = b[col]
        out[col] = v
    out["count"] = a["count"]
    out["truncated"] = np.zeros(n, np.bool_)
    out["max_hits"] = None
    return out
