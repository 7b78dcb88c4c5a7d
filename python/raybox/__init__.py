"""raybox: ray-box intersection with libraybox, for numpy arrays.

    import numpy as np, raybox
    scene = raybox.Scene(boxes)                  # (M, 6) float32/float64
    hits = scene.nearest(rays)                   # (N, 8), (N, 6), (o, d)
    hits["hit"], hits["t_enter"], hits["box"]

    raybox.intersect(rays, boxes, mode="pairs")  # no scene kept
    raybox.Client("http://127.0.0.1:8080")       # the same against rayboxd

See python/README.md of the raybox repository.
"""
from ._native import Error, InputError, version as library_version
from ._arrays import FACES, KINDS, HIT_DTYPE, LIST_DTYPE
from ._scene import Scene, Context, intersect
from .client import Client, HTTPError

__version__ = "0.1.0"
__all__ = ["Scene", "Context", "intersect", "Client", "Error", "InputError",
           "HTTPError", "FACES", "KINDS", "HIT_DTYPE", "LIST_DTYPE",
           "library_version"]
