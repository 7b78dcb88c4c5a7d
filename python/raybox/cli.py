"""raybox-http: rayboxd from the command line, through raybox.Client.

    raybox-http [--url URL] health
    raybox-http create BOXES.npy|SCENE.json        store a scene, print its id
    raybox-http get ID | delete ID | list
    raybox-http intersect RAYS.npy (--scene ID | --boxes BOXES.npy)
                [--mode nearest|any|count|all|pairs] [--max-hits N]
                [--out ANSWER.npz]

Arrays are .npy files (rays (N, 8) or (N, 6), boxes (M, 6)); a scene may
also be a JSON file with the lists of POST /v1/scenes. Answers print as
JSON (inf as null) unless --out saves them as .npz. Exit status: 0 done,
1 the server or a file said no (one line on stderr, never a traceback),
2 usage.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

from .client import Client, HTTPError


def _load(path, what):
    try:
        if path.endswith(".json"):
            with open(path) as f:
                return json.load(f)
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError("%s %s: %s" % (what, path, e)) from None


def _jsonable(v):
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "f":
            return [_jsonable(x) for x in v.tolist()]
        return v.tolist()
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="raybox-http", description="rayboxd from the command line "
        "(binary form for queries; raybox.Client)")
    ap.add_argument("--url", default=os.environ.get(
        "RAYBOX_URL", "http://127.0.0.1:8080"),
        help="rayboxd's url (default $RAYBOX_URL or http://127.0.0.1:8080)")
    ap.add_argument("--token-file", help="file holding a bearer token")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("health", help="GET /v1/health")
    sub.add_parser("list", help="GET /v1/scenes")
    p = sub.add_parser("create", help="POST /v1/scenes")
    p.add_argument("file", help="boxes .npy (M, 6) or a JSON scene body")
    for name in ("get", "delete"):
        p = sub.add_parser(name, help="%s /v1/scenes/ID" % name.upper())
        p.add_argument("id")
    p = sub.add_parser("intersect", help="one query in the binary form")
    p.add_argument("rays", help="rays .npy, (N, 8) or (N, 6)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--scene", help="a stored scene's id")
    g.add_argument("--boxes", help="boxes .npy (M, 6) sent with the query")
    p.add_argument("--mode", default="nearest",
                   choices=["nearest", "any", "count", "all", "pairs"])
    p.add_argument("--max-hits", type=int, default=None,
                   help="all: at most N hits a ray (default: every hit)")
    p.add_argument("--out", help="save the answer's arrays as .npz")
    a = ap.parse_args(argv)
    try:
        token = None
        if a.token_file:
            with open(a.token_file) as f:
                token = f.read().strip()
        c = Client(a.url, token=token)
        if a.cmd == "health":
            out = c.health()
        elif a.cmd == "list":
            out = c.list_scenes()
        elif a.cmd == "get":
            out = c.get_scene(a.id)
        elif a.cmd == "delete":
            c.delete_scene(a.id)
            out = {"deleted": a.id}
        elif a.cmd == "create":
            src = _load(a.file, "scene")
            if isinstance(src, dict):
                dims = src.get("dims", 3)
                out = c.create_scene(**{k: src.get(k) for k in (
                    "boxes", "obbs", "xboxes", "spheres", "planes")},
                    dims=dims)
            else:
                out = c.create_scene(src)
        else:
            rays = _load(a.rays, "rays")
            boxes = _load(a.boxes, "boxes") if a.boxes else None
            ans = c.intersect(rays, a.mode, scene=a.scene, boxes=boxes,
                              max_hits=a.max_hits)
            if a.out:
                np.savez(a.out, **{k: v for k, v in ans.items()
                                   if isinstance(v, np.ndarray)})
                out = {"rays": len(rays), "saved": a.out}
            else:
                out = {k: _jsonable(v) for k, v in ans.items()}
            out["meta"] = c.last_meta
    except (HTTPError, ValueError, TypeError, OSError) as e:
        print("raybox-http: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
