"""raybox.Client: rayboxd over HTTP, queries in the binary form
(application/x-raybox, docs/binary-format.md), answers as the numpy arrays
raybox.Scene gives.

    c = raybox.Client("http://127.0.0.1:8080")
    sid = c.create_scene(boxes)["id"]
    c.nearest(rays, scene=sid)          # == raybox.Scene(boxes).nearest(rays)
    c.nearest(rays, boxes=boxes)        # elements sent with the query
    c.patch_scene(sid, set=([0], [[0, 0, 0, 1, 1, 1]]), append=more_boxes)
    c.delete_scene(sid)

Requests go out in version 2 of the form with ranges in every ray record
(so an (N, 8) float32 array is sent as it is); scene creation is binary
for boxes alone and JSON with other kinds, PATCH is JSON (the server takes
no binary PATCH). Every error answer raises HTTPError with the problem's
status, detail and pointer.
"""
import http.client
import json
import struct
import threading
import urllib.parse

import numpy as np

from ._arrays import (HIT_DTYPE, LIST_DTYPE, MODES, SHAPE_KINDS, all_from_flat,
                      all_every_hit, elements_array, nearest_columns,
                      rays_array)

MEDIA_TYPE = "application/x-raybox"
HEADER = struct.Struct("<4sHHBBBBIQQffQdQ")  # bytes 0-63
COUNTS = struct.Struct("<QQQQ")              # version 2: bytes 64-95
assert HEADER.size == 64 and COUNTS.size == 32
KIND_INTERSECT, KIND_SCENE, KIND_RESULT = 1, 2, 129
FLAG_RANGES, FLAG_NORMALS = 1, 2
RESULT_SCENE_VERSION, RESULT_FELL_BACK = 1, 2
RESULT_KINDS, RESULT_NORMALS = 4, 8
DEFAULT_MAX_HITS = 64


class HTTPError(Exception):
    """An error answer (application/problem+json) or a failed connection
    (status 0). Attributes: status, detail, pointer (None when the answer
    named no element), problem (the decoded body)."""

    def __init__(self, status, detail, pointer=None, problem=None):
        where = "%s: " % pointer if pointer else ""
        super().__init__("%s%s (%s)" % (where, detail, status) if status
                         else detail)
        self.status = status
        self.detail = detail
        self.pointer = pointer
        self.problem = problem or {}


class Client:
    """rayboxd at url ("http://host:port"). One keep-alive connection,
    shared by the threads that use this object one request at a time.
    token: a bearer token (rayboxd --auth-token-file). timeout: seconds."""

    def __init__(self, url="http://127.0.0.1:8080", token=None, timeout=600):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("url %r: expected http://host:port or "
                             "https://host:port" % url)
        self.url = url
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._token = token
        self._timeout = timeout
        self._conn = None
        self._lock = threading.Lock()
        self.last_meta = None

    # ---- transport
    def _connect(self):
        cls = http.client.HTTPSConnection if self._https \
            else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self._timeout)

    def _request(self, method, path, body=None, content_type=None,
                 accept="application/json"):
        """(status, content type, body bytearray); raises HTTPError for an
        error answer or a connection that fails twice."""
        headers = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        with self._lock:
            for attempt in (0, 1):
                if self._conn is None:
                    self._conn = self._connect()
                try:
                    self._conn.request(method, path, body=body,
                                       headers=headers)
                    resp = self._conn.getresponse()
                    data = _read_all(resp)
                    break
                except (ConnectionError, http.client.HTTPException,
                        OSError) as e:
                    self._conn.close()
                    self._conn = None
                    # A kept-alive connection the server closed: once more.
                    if attempt or not isinstance(
                            e, (ConnectionResetError, BrokenPipeError,
                                http.client.RemoteDisconnected)):
                        raise HTTPError(0, "%s %s: %s" % (
                            self.url, path, str(e) or type(e).__name__)) \
                            from None
            if resp.getheader("Connection", "").lower() == "close":
                self._conn.close()
                self._conn = None
        ctype = resp.getheader("Content-Type", "")
        if resp.status >= 400:
            try:
                p = json.loads(bytes(data))
            except ValueError:
                p = {"detail": bytes(data[:200]).decode("utf-8", "replace")}
            raise HTTPError(resp.status, p.get("detail") or p.get("title")
                            or resp.reason, p.get("pointer"), p)
        return resp.status, ctype, data

    def _json(self, method, path, doc=None):
        body = None if doc is None else json.dumps(
            doc, allow_nan=False, separators=(",", ":")).encode()
        _, _, data = self._request(method, path, body,
                                   "application/json" if body else None)
        return json.loads(bytes(data)) if data else None

    def close(self):
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- service
    def health(self):
        return self._json("GET", "/v1/health")

    def devices(self):
        return self._json("GET", "/v1/devices")

    # ---- scenes
    def create_scene(self, boxes=None, obbs=None, xboxes=None, spheres=None,
                     planes=None, dims=3):
        """Stores a scene; returns the server's answer ({"id", "version",
        "boxes", "dims", ...})."""
        lists = _lists(dims, boxes, obbs, xboxes, spheres, planes)
        if all(lists[k] is None for k in SHAPE_KINDS):
            b = lists["boxes"]
            if b is None:
                b = np.zeros((0, 2 * dims), np.float32)
            head = HEADER.pack(b"RBOX", 1, 64, KIND_SCENE, 0, dims, 0, 0, 0,
                               len(b), 0.0, 0.0, 0, 0.0, 0)
            _, _, data = self._request("POST", "/v1/scenes",
                                       head + b.tobytes(), MEDIA_TYPE)
            return json.loads(bytes(data))
        doc = {"dims": dims}
        for k, v in lists.items():
            if v is not None:
                doc[k] = v.tolist()
        return self._json("POST", "/v1/scenes", doc)

    def get_scene(self, scene_id):
        return self._json("GET", "/v1/scenes/%s" % _id(scene_id))

    def list_scenes(self):
        return self._json("GET", "/v1/scenes")

    def patch_scene(self, scene_id, set=None, append=None, dims=3):
        """set: (ids, elements), the elements of one kind (each id's kind)
        to replace, then append: boxes, or a dict of element lists
        ({"boxes": ..., "spheres": ...}); all or nothing. Returns {"id",
        "version", ...}."""
        doc = {}
        if set is not None:
            ids, elems = set
            ids = np.asarray(ids, np.int64).reshape(-1)
            e = np.asarray(elems, np.float32)
            e = e.reshape(len(ids), -1) if e.size else e.reshape(0, 0)
            doc["set"] = [[int(i)] + row for i, row in zip(ids, e.tolist())]
        if append is not None:
            if isinstance(append, dict):
                doc["append"] = {k: elements_array(v, k, dims).tolist()
                                 for k, v in append.items()}
            else:
                doc["append"] = elements_array(append, "boxes", dims).tolist()
        return self._json("PATCH", "/v1/scenes/%s" % _id(scene_id), doc)

    def delete_scene(self, scene_id):
        self._request("DELETE", "/v1/scenes/%s" % _id(scene_id))

    # ---- queries
    def intersect(self, rays, mode="nearest", scene=None, boxes=None,
                  obbs=None, xboxes=None, spheres=None, planes=None, dims=3,
                  tmin=None, tmax=None, max_hits=None, normals=False):
        """One query in the binary form, against a stored scene (its id) or
        elements sent with it; the answer's columns as raybox.Scene gives
        them (nearest/pairs, any, count, all; all with max_hits None keeps
        every hit, as Scene.all does: rays cut at 64 are sent again).
        self.last_meta has the header's elapsed_ms, fell_back and
        scene_version."""
        if mode not in MODES:
            raise ValueError("mode %r: expected one of %s"
                             % (mode, ", ".join(MODES)))
        r = rays_array(rays, dims, tmin, tmax)
        if mode == "all" and max_hits is None:
            return all_every_hit(lambda rr, mh: self.intersect(
                rr, "all", scene, boxes, obbs, xboxes, spheres, planes,
                dims, max_hits=mh), r, DEFAULT_MAX_HITS)
        lists = _lists(dims, boxes, obbs, xboxes, spheres, planes)
        if scene is not None and any(v is not None for v in lists.values()):
            raise ValueError("a query on a scene takes no elements")
        n = {k: 0 if v is None else len(v) for k, v in lists.items()}
        flags = FLAG_RANGES | (FLAG_NORMALS if normals else 0)
        mh = int(max_hits) if mode == "all" else 0
        if mode == "all" and mh < 1:
            raise ValueError("max_hits %d: at least 1" % mh)
        head = HEADER.pack(b"RBOX", 2, 96, KIND_INTERSECT, MODES[mode], dims,
                           flags, mh, len(r), n["boxes"], 0.0, 0.0, 0, 0.0,
                           0) + COUNTS.pack(n["obbs"], n["xboxes"],
                                            n["spheres"], n["planes"])
        parts = [head, r.tobytes()]
        parts += [v.tobytes() for v in lists.values() if v is not None]
        path = "/v1/scenes/%s/intersect" % _id(scene) if scene is not None \
            else "/v1/intersect"
        _, ctype, data = self._request("POST", path, b"".join(parts),
                                       MEDIA_TYPE, MEDIA_TYPE)
        if not ctype.startswith(MEDIA_TYPE):
            raise HTTPError(0, "%s: the answer is %s, not %s"
                            % (path, ctype, MEDIA_TYPE))
        return self._decode(data)

    def nearest(self, rays, scene=None, **kw):
        return self.intersect(rays, "nearest", scene, **kw)

    def any(self, rays, scene=None, **kw):
        return self.intersect(rays, "any", scene, **kw)

    def count(self, rays, scene=None, **kw):
        return self.intersect(rays, "count", scene, **kw)

    def all(self, rays, scene=None, **kw):
        return self.intersect(rays, "all", scene, **kw)

    def pairs(self, rays, **kw):
        return self.intersect(rays, "pairs", **kw)

    def _decode(self, data):
        if len(data) < 64:
            raise HTTPError(0, "answer of %d bytes: not a raybox result"
                            % len(data))
        (magic, version, size, kind, mode, _dims, flags, max_hits, n,
         entries, _t0, _t1, scene_version, elapsed_ms,
         _res) = HEADER.unpack_from(data)
        if magic != b"RBOX" or (version, size) not in ((1, 64), (2, 96)) or \
                kind != KIND_RESULT or mode > 4:
            raise HTTPError(0, "the answer is not a raybox result")
        self.last_meta = {
            "elapsed_ms": elapsed_ms,
            "fell_back": bool(flags & RESULT_FELL_BACK),
            "scene_version": scene_version
            if flags & RESULT_SCENE_VERSION else None}
        buf = memoryview(data)
        at = size

        def take(dtype, count, shape=None):
            nonlocal at
            dt = np.dtype(dtype)
            end = at + dt.itemsize * count
            if end > len(data):
                raise HTTPError(0, "the answer is cut short")
            a = np.frombuffer(buf[at:end], dt, count)
            at = end
            return a if shape is None else a.reshape(shape)

        name = list(MODES)[mode]
        if name in ("pairs", "nearest"):
            hits = take(HIT_DTYPE, n)
            kinds = take(np.uint8, n) if flags & RESULT_KINDS else None
            nv = take("<f4", 3 * n, (n, 3)) if flags & RESULT_NORMALS \
                else None
            return nearest_columns(hits, kinds, nv)
        if name == "any":
            return {"hit": take(np.uint8, n).view(np.bool_)}
        if name == "count":
            return {"count": take("<u4", n)}
        counts = take("<u4", n)
        flat = take(LIST_DTYPE, entries)
        kept = np.minimum(counts, max_hits).astype(np.int64)
        splits = np.zeros(n + 1, np.int64)
        np.cumsum(kept, out=splits[1:])
        if splits[-1] != entries:
            raise HTTPError(0, "the answer's list entries disagree with its "
                            "counts")
        return all_from_flat(counts, flat, splits, max_hits)


def _read_all(resp):
    """The body into one writable bytearray (numpy views of it are then
    writable, as the native answers are)."""
    length = resp.getheader("Content-Length")
    if length is None:
        return bytearray(resp.read())
    buf = bytearray(int(length))
    view = memoryview(buf)
    got = 0
    while got < len(buf):
        k = resp.readinto(view[got:])
        if not k:
            raise http.client.IncompleteRead(bytes(buf[:got]), len(buf) - got)
        got += k
    return buf


def _lists(dims, boxes, obbs, xboxes, spheres, planes):
    given = {"boxes": boxes, "obbs": obbs, "xboxes": xboxes,
             "spheres": spheres, "planes": planes}
    return {k: elements_array(v, k, dims) for k, v in given.items()}


def _id(scene_id):
    s = str(scene_id)
    if not s or not all(c.isalnum() or c in "-_" for c in s):
        raise ValueError("scene id %r: not an id" % s)
    return s
