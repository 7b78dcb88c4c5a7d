"""raybox.Scene and raybox.intersect: libraybox in this process."""
import numpy as np

from . import _native
from ._arrays import (HIT_DTYPE, LIST_DTYPE, MODES, SHAPE_KINDS,
                      all_columns, all_every_hit, elements_array,
                      nearest_columns, rays_array)

DEFAULT_MAX_HITS = 64  # as rayboxd's --default-max-hits


def _context(backend, threads, device):
    return _native.Context(backend=backend, threads=int(threads),
                           device=device)


def _run(call, mode, n, max_hits=0, normals=False, kinds=False):
    """Allocates the outputs of `mode` for n rays, runs call(**outputs)
    and makes the answer's columns."""
    m = MODES[mode]
    if mode in ("pairs", "nearest"):
        hits = np.empty(n, HIT_DTYPE)
        k = np.empty(n, np.uint8) if kinds else None
        nv = np.empty((n, 3), np.float32) if normals else None
        info = call(m, hits=hits, kinds=k, out_normals=nv, normals=normals)
        return nearest_columns(hits, k, nv), info
    if mode == "any":
        out = np.empty(n, np.uint8)
        info = call(m, any=out)
        return {"hit": out.view(np.bool_)}, info
    if mode == "count":
        out = np.empty(n, np.uint32)
        info = call(m, counts=out)
        return {"count": out}, info
    if mode == "all":
        max_hits = int(max_hits)
        if max_hits < 1:
            raise ValueError("max_hits %d: at least 1" % max_hits)
        counts = np.empty(n, np.uint32)
        lists = np.empty(n * max_hits, LIST_DTYPE)
        info = call(m, counts=counts, list=lists, max_hits=max_hits)
        return all_columns(counts, lists, max_hits), info
    raise ValueError("mode %r: expected one of %s" % (mode, ", ".join(MODES)))


class Scene:
    """A stored set of boxes (and obbs, xboxes, spheres, planes in 3D) with
    its bounding volume hierarchies, queried many times (rb_scene).

        scene = raybox.Scene(boxes)            # (M, 6) min xyz, max xyz
        ans = scene.nearest(rays)              # (N, 8), (N, 6) or (o, d)
        ans["hit"], ans["t_enter"], ans["box"], ans["face"]

    Element ids are positions in boxes ++ obbs ++ xboxes ++ spheres ++
    planes. backend: "auto" (an OpenCL GPU if there is one, else the CPU
    backend), "cpu" or "opencl"; threads: CPU threads, 0 = all. Queries
    release the GIL; one Scene answers one query at a time (threads that
    want parallel queries use a Scene each, or one Scene with a large
    batch, which the library spreads over its threads anyway).
    """

    def __init__(self, boxes=None, obbs=None, xboxes=None, spheres=None,
                 planes=None, dims=3, backend="auto", threads=0, device=None):
        dims = int(dims)
        if dims not in (2, 3):
            raise ValueError("dims %d: expected 2 or 3" % dims)
        lists = {"boxes": boxes, "obbs": obbs, "xboxes": xboxes,
                 "spheres": spheres, "planes": planes}
        arrs = {k: elements_array(v, k, dims) for k, v in lists.items()}
        if all(v is None for v in arrs.values()):
            arrs["boxes"] = np.zeros((0, 2 * dims), np.float32)
        self.dims = dims
        self._context = _context(backend, threads, device)
        self._scene = _native.Scene(self._context, dims, **arrs)
        self._has_shapes = any(arrs[k] is not None and len(arrs[k])
                               for k in SHAPE_KINDS)
        self.last_run = None

    # ---- queries
    def _query(self, mode, rays, tmin, tmax, max_hits=0, normals=False):
        r = rays_array(rays, self.dims, tmin, tmax)
        if mode == "all" and max_hits is None:
            return all_every_hit(
                lambda rr, mh: self._query("all", rr, None, None, mh), r,
                DEFAULT_MAX_HITS)

        def call(m, **out):
            return self._scene.intersect(m, r, **out)
        ans, self.last_run = _run(call, mode, len(r), max_hits, normals,
                                  kinds=self._has_shapes)
        return ans

    def nearest(self, rays, tmin=None, tmax=None, normals=False):
        """The element with the least t_enter per ray (ties: lowest id):
        {"hit" bool, "t_enter", "t_exit" float32, "box" int32 (the id, -1
        for a miss), "face", "exit_face" uint8 (0 none, 1 -x .. 6 +z, 7
        surface)}, plus "kind" (uint8, 255 a miss) when the scene has
        other kinds than boxes and with normals=True "normal" (N, 3). A
        miss has t_enter = t_exit = +inf. The columns are views of one
        record array (rb_hit)."""
        return self._query("nearest", rays, tmin, tmax, normals=normals)

    def any(self, rays, tmin=None, tmax=None):
        """{"hit": bool per ray}: is any element hit in [tmin, tmax]."""
        return self._query("any", rays, tmin, tmax)

    def count(self, rays, tmin=None, tmax=None):
        """{"count": uint32 per ray}: how many elements are hit."""
        return self._query("count", rays, tmin, tmax)

    def all(self, rays, tmin=None, tmax=None, max_hits=None):
        """Every hit, sorted by (t_enter, id), as CSR: ray i's hits are
        box/t_enter/t_exit[ray_splits[i]:ray_splits[i+1]]; "count" is
        every hit (uint32). With max_hits, at most that many a ray (the
        library's and rayboxd's lists) and "truncated" where count
        exceeds it; None (the default) keeps them all (rays with more than
        64 are asked again with room for theirs)."""
        return self._query("all", rays, tmin, tmax, max_hits=max_hits)

    # ---- changes
    def set(self, ids, boxes):
        """Replaces the boxes of ids (rb_scene_set); all or nothing."""
        b = elements_array(boxes, "boxes", self.dims)
        ids = np.ascontiguousarray(np.asarray(ids, np.int64).reshape(-1))
        bad = (ids < 0) | (ids > 0xFFFFFFFF)
        if bad.any():
            raise _native.InputError("set: id %d is out of range"
                                     % ids[bad.argmax()])
        self._scene.set(ids.astype(np.uint32), b)

    def append(self, boxes=None, obbs=None, xboxes=None, spheres=None,
               planes=None):
        """Appends elements; they take the next ids (boxes ++ obbs ++
        xboxes ++ spheres ++ planes of this call)."""
        lists = {"boxes": boxes, "obbs": obbs, "xboxes": xboxes,
                 "spheres": spheres, "planes": planes}
        arrs = {k: elements_array(v, k, self.dims) for k, v in lists.items()}
        self._scene.append(**arrs)
        if any(arrs[k] is not None and len(arrs[k]) for k in SHAPE_KINDS):
            self._has_shapes = True

    # ---- about it
    def stats(self):
        """rb_scene_stats as a dict (elements, kinds, version, bounds,
        memory, hierarchy)."""
        return self._scene.stats()

    def element_kind(self, id):
        """(kind name, index within the kind) of element id."""
        return self._scene.element_kind(int(id))

    def info(self):
        """The backend answering this scene's queries (rb_backend_info)."""
        return self._context.info()

    def __len__(self):
        return int(self._scene.stats()["elements"])

    def __repr__(self):
        st = self._scene.stats()
        return "<raybox.Scene dims=%d elements=%d version=%d backend=%s>" % (
            st["dims"], st["elements"], st["version"],
            self._context.info()["backend"])


def intersect(rays, boxes=None, mode="nearest", obbs=None, xboxes=None,
              spheres=None, planes=None, dims=3, tmin=None, tmax=None,
              max_hits=None, normals=False, backend="auto",
              threads=0, device=None, context=None):
    """One query against elements given with it (no scene kept): the same
    modes and answers as Scene, plus "pairs" (ray i against element i of
    the one non-empty kind). context: a raybox.Context to reuse."""
    if mode not in MODES:
        raise ValueError("mode %r: expected one of %s"
                         % (mode, ", ".join(MODES)))
    ctx = context._context if context is not None else \
        _context(backend, threads, device)
    r = rays_array(rays, dims, tmin, tmax)
    lists = {"boxes": boxes, "obbs": obbs, "xboxes": xboxes,
             "spheres": spheres, "planes": planes}
    arrs = {k: elements_array(v, k, dims) for k, v in lists.items()}
    has_shapes = any(arrs[k] is not None and len(arrs[k]) for k in SHAPE_KINDS)

    def run(rr, mh):
        def call(m, **out):
            return ctx.intersect(m, dims, rr, **arrs, **out)
        return _run(call, mode, len(rr), mh, normals, kinds=has_shapes)[0]
    if mode == "all" and max_hits is None:
        return all_every_hit(run, r, DEFAULT_MAX_HITS)
    return run(r, max_hits)


class Context:
    """A backend context to reuse across raybox.intersect calls (creating
    one costs an OpenCL device pick and program load)."""

    def __init__(self, backend="auto", threads=0, device=None):
        self._context = _context(backend, threads, device)

    def info(self):
        return self._context.info()
