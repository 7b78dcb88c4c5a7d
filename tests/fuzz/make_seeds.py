#!/usr/bin/env python3
"""Writes the named seeds of tests/fuzz/seeds/ (seed0.. were written by
hand before; these are the shapes, outputs and version 2 ones). The first
byte of a seed is the target's selector (see fuzz_*_request.c): JSON bit
0-1 the body (0 intersect, 1 scene, 2 patch, 3 intersect on a scene of the
path, 2D with bit 7), bits 2-7 the chunk size - 1; binary % 3 the kind (0
intersect, 1 scene, 2 scene path, 2D with bit 7), bit 2 Content-Length
known, bits 3-7 the chunk size - 1 (sel() below finds such a byte).

    tests/fuzz/make_seeds.py      (rewrites them; run from anywhere)
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
INF = float("inf")


def put(target, name, data):
    path = os.path.join(HERE, "seeds", target, name)
    with open(path, "wb") as f:
        f.write(data)


def js(sel, text):
    return bytes([sel]) + text.encode()


OBB_Q = "[0,0,0,1,2,3,0.9486833,0,0,0.3162278]"
OBB_A = "[0,0,0,1,2,3,0.8,0.6,0,-0.6,0.8,0,0,0,1]"
XBOX = "[0,0,0,1,1,1,2,0,0,5,0,1,0,0,0,0,1,0]"
JSON = {
    # every kind, outputs, each mode
    "shapes_nearest_normal": (0x00, '{"rays":[[-5,0,0,1,0,0],[0,0.5,0.5,1,0,0],[0,0,2,10,0,-3,0,1]],"boxes":[[-1,-1,-1,1,1,1]],"obbs":[%s,%s],"xboxes":[%s],"spheres":[[5,3,2,1],[0,0,0,0]],"planes":[[0,0,1,0]],"outputs":["normal"]}' % (OBB_Q, OBB_A, XBOX)),
    "shapes_all": (0x14, '{"mode":"all","max_hits":3,"rays":[[-10,0,0,1,0,0]],"boxes":[[-1,-1,-1,1,1,1]],"spheres":[[5,0,0,1]],"planes":[[-1,0,0,-8]]}'),
    "shapes_any_count": (0x08, '{"mode":"count","tmin":0,"tmax":100,"rays":[[0,0,2,10,0,0],[0,0,2,10,0,-3]],"obbs":[%s],"xboxes":[%s],"planes":[[0,0,1,0]]}' % (OBB_A, XBOX)),
    "shapes_any": (0x04, '{"mode":"any","rays":[[0,0,2,10,0,0,0,1]],"spheres":[[5,3,2,1]],"planes":[[0,0,1,0]],"outputs":[]}'),
    "pairs_spheres_normal": (0x0c, '{"mode":"pairs","outputs":["normal"],"rays":[[0,0,0,1,0,0],[0,0,0,0,1,0]],"spheres":[[4,0,0,1],[0,4,0,0]]}'),
    "pairs_obbs": (0x00, '{"mode":"pairs","rays":[[-5,0,0,1,0,0]],"obbs":[%s]}' % OBB_Q),
    "scene_path_normal": (0x03, '{"mode":"nearest","outputs":["normal"],"rays":[[0,0,0,1,0,0]]}'),
    "scene_path_2d": (0x83, '{"dims":2,"outputs":["normal"],"rays":[[0,0,1,0],[0,0,1,0,0,null]]}'),
    "whole_numbers": (0x10, '{"dims":3.0,"mode":"all","max_hits":2e0,"rays":[[0,0,0,1,0,0]],"boxes":[[1,-1,-1,2,1,1]]}'),
    "patch_whole_index": (0x02, '{"set":[[0.0e1,0,0,0,1,1,1],[1.0,0,0,0,2,2,2]]}'),
    # refused: each a different check
    "bad_zero_quaternion": (0x00, '{"rays":[[0,0,0,1,0,0]],"obbs":[[0,0,0,1,1,1,0,0,0,0]]}'),
    "bad_axes": (0x04, '{"rays":[[0,0,0,1,0,0]],"obbs":[[0,0,0,1,1,1,1,0,0,1,0,0,0,0,1]]}'),
    "bad_singular": (0x00, '{"rays":[[0,0,0,1,0,0]],"xboxes":[[0,0,0,1,1,1,1,0,0,0,1,0,0,0,0,0,0,0]]}'),
    "bad_radius": (0x00, '{"rays":[[0,0,0,1,0,0]],"spheres":[[0,0,0,-1]]}'),
    "bad_normal": (0x00, '{"rays":[[0,0,0,1,0,0]],"planes":[[0,0,0,1]]}'),
    "bad_obb_arity": (0x00, '{"rays":[[0,0,0,1,0,0]],"obbs":[[0,0,0,1,1,1,1,0,0,0,0]]}'),
    "bad_shapes_2d": (0x00, '{"dims":2,"rays":[[0,0,1,0]],"spheres":[[0,0,0,1]]}'),
    "bad_shapes_scene": (0x00, '{"rays":[],"scene":"abc","planes":[[0,0,1,0]]}'),
    "bad_output": (0x00, '{"rays":[],"boxes":[],"outputs":["normals"]}'),
    "bad_output_nested": (0x00, '{"rays":[],"boxes":[],"outputs":[["normal"]]}'),
    "bad_pairs_two_lists": (0x00, '{"mode":"pairs","rays":[[0,0,0,1,0,0]],"boxes":[[0,0,0,1,1,1]],"spheres":[[0,0,0,1]]}'),
    "bad_shapes_in_path": (0x03, '{"rays":[],"obbs":[]}'),
    "bad_shapes_scene_create": (0x01, '{"boxes":[],"spheres":[[0,0,0,1]]}'),
    "bad_fraction_index": (0x02, '{"set":[[0.5,0,0,0,1,1,1]]}'),
    "bad_cut_shapes": (0x00, '{"rays":[[0,0,0,1,0,0]],"xboxes":[[0,0,0,1,1,1,2,0'),
}

V2 = 2
RANGES, NORMALS, QUAT = 1, 2, 4


def header(version=V2, kind=1, mode=1, dims=3, flags=0, max_hits=0, rays=0,
           boxes=0, tmin=0.0, tmax=INF, obbs=0, xboxes=0, spheres=0,
           planes=0, hsize=None, reserved=0):
    h = b"RBOX" + struct.pack("<HHBBBBIQQffQdQ", version,
                              hsize or (96 if version == 2 else 64), kind,
                              mode, dims, flags, max_hits, rays, boxes, tmin,
                              tmax, 0, 0.0, reserved)
    if version == 2:
        h += struct.pack("<QQQQ", obbs, xboxes, spheres, planes)
    return h


def sel(kind, length=True, piece=1, dims=3):
    """The binary selector byte: kind 0 intersect, 1 scene, 2 scene path
    (of dims), Content-Length known or not, pieces of about that size."""
    for b in range(256):
        if b % 3 == kind and bool(b & 4) == length and \
                (kind != 2 or 2 + (b >> 7) == dims) and \
                1 + ((b >> 3) & 31) >= piece:
            return b
    raise ValueError((kind, length, piece, dims))


def f(*xs):
    return struct.pack("<%df" % len(xs), *xs)


RAY = f(-5, 0, 0, 1, 0, 0)
RAY_R = f(0, 0, 2, 10, 0, -3, 0, 1)
BOX = f(-1, -1, -1, 1, 1, 1)
OBB = f(0, 0, 0, 1, 2, 3, 0.8, 0.6, 0, -0.6, 0.8, 0, 0, 0, 1)
OBBQ = f(0, 0, 0, 1, 2, 3, 0.9486833, 0, 0, 0.3162278)
XB = f(0, 0, 0, 1, 1, 1, 2, 0, 0, 5, 0, 1, 0, 0, 0, 0, 1, 0)
SPH = f(5, 3, 2, 1)
PLN = f(0, 0, 1, 0)
BINARY = {
    "v2_every_kind_normals": (sel(0), header(flags=NORMALS, rays=2, boxes=1, obbs=1, xboxes=1, spheres=1, planes=1) + RAY + f(0, 0.5, 0.5, 1, 0, 0) + BOX + OBB + XB + SPH + PLN),
    "v2_quaternion_split": (sel(0, piece=5), header(flags=QUAT, rays=1, obbs=2) + RAY + OBBQ + f(0, 0, 0, 1, 1, 1, 1, 0, 0, 0)),
    "v2_pairs_spheres": (sel(0, False), header(mode=0, flags=NORMALS, rays=2, spheres=2) + RAY + RAY + SPH + f(0, 0, 0, 0)),
    "v2_all_ranges": (sel(0, piece=3), header(mode=4, flags=RANGES, max_hits=3, rays=2, boxes=1, spheres=1, planes=1) + RAY_R + RAY_R + BOX + SPH + PLN),
    "v2_count_any": (sel(0, False, piece=2), header(mode=3, rays=1, xboxes=1, planes=1) + RAY + XB + PLN),
    "v2_boxes_only": (sel(0), header(mode=2, rays=1, boxes=1) + RAY + BOX),
    "v2_scene_path_normals": (sel(2), header(flags=NORMALS, rays=1) + RAY),
    "v2_scene_body": (sel(1), header(kind=2, mode=0, boxes=1) + BOX),
    # refused
    "bad_v2_header_size": (sel(0), header(hsize=64, rays=1, boxes=1) + RAY + BOX),
    "bad_v2_flag3": (sel(0), header(flags=8, rays=0)),
    "bad_v1_normals": (sel(0), header(version=1, flags=NORMALS, rays=1, boxes=1) + RAY + BOX),
    "bad_v2_shapes_2d": (sel(0), header(dims=2, rays=1, spheres=1) + f(0, 0, 1, 0) + SPH),
    "bad_v2_zero_quaternion": (sel(0), header(flags=QUAT, rays=1, obbs=1) + RAY + f(0, 0, 0, 1, 1, 1, 0, 0, 0, 0)),
    "bad_v2_nan_quaternion": (sel(0, piece=7), header(flags=QUAT, rays=1, obbs=1) + RAY + f(0, 0, 0, 1, 1, 1, float("nan"), 0, 0, 0)),
    "bad_v2_axes": (sel(0), header(rays=1, obbs=1) + RAY + f(0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1)),
    "bad_v2_cut": (sel(0, False), header(rays=1, xboxes=1) + RAY + XB[:20]),
    "bad_v2_pairs_count": (sel(0), header(mode=0, rays=2, planes=1) + RAY + RAY + PLN),
    "bad_v2_scene_body_shapes": (sel(1), header(kind=2, mode=0, boxes=0, spheres=1) + SPH),
    "bad_v2_scene_path_elements": (sel(2, dims=3), header(rays=1, obbs=1) + RAY + OBB),
    "bad_v2_reserved": (sel(0), header(rays=0, reserved=1)),
    "bad_v2_big_counts": (sel(0), header(rays=1 << 40, spheres=1 << 62)),
}

for name, (first, text) in JSON.items():
    put("json_request", name, js(first, text))
for name, (first, body) in BINARY.items():
    put("binary_request", name, bytes([first]) + body)
print(f"{len(JSON)} json_request and {len(BINARY)} binary_request seeds")
