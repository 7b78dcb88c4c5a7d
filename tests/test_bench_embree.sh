#!/bin/sh
# test_bench_embree.sh BVH SHAPES - the Embree benchmarks end to end on
# tiny scenes (no timing is judged): raybox-bench-bvh (random boxes and a
# small line-of-sight city) and raybox-bench-shapes (every kind and the
# mix) must run every Embree setup and exit 0, which they do only when
# Embree's user geometry - raybox's own exact tests behind Embree's
# hierarchy, an independent walk - gives raybox's answer for every ray.
# CI builds them with the sanitizers, so this also runs both tools'
# Embree glue under them.
set -eu
BVH=$1
SHAPES=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/raybox-embree.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "test_bench_embree: FAIL: $*" >&2; exit 1; }

"$BVH" --boxes 3000 --rays 4096 --no-opencl --repeat 1 \
    --embree-quality low,high --los 3000,16,16 >"$T/bvh.txt" 2>&1 ||
    { cat "$T/bvh.txt" >&2; fail "raybox-bench-bvh exited $?"; }
# every setup ran, in both ray orders, and agreed where it must
for setup in "6 quads" "user" "12 triangles"; do
    for order in "input order" "walk order"; do
        grep -q "^  $setup, high, $order " "$T/bvh.txt" ||
            { cat "$T/bvh.txt" >&2; fail "no row for $setup, $order"; }
    done
done
n=$(grep -c "^  user, .* 1\.0000/1\.0000$" "$T/bvh.txt" || true)
[ "$n" -eq 4 ] ||
    { cat "$T/bvh.txt" >&2; fail "user geometry agreed in $n of 4 rows"; }
n=$(grep -c "^  user, .* -/1\.0000$" "$T/bvh.txt" || true)
[ "$n" -eq 4 ] ||
    { cat "$T/bvh.txt" >&2; fail "line of sight: user agreed in $n of 4"; }

"$SHAPES" --elements 3000 --rays 4096 --repeat 1 --embree-quality low \
    >"$T/shapes.txt" 2>&1 ||
    { cat "$T/shapes.txt" >&2; fail "raybox-bench-shapes exited $?"; }
n=$(grep -c "agreement with embree user   nearest id 1\.000000, any 1\.000000$" \
    "$T/shapes.txt" || true)
[ "$n" -eq 5 ] ||
    { cat "$T/shapes.txt" >&2; fail "user geometry agreed in $n of 5 scenes"; }
echo "test_bench_embree: ok"
