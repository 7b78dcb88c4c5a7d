#!/bin/sh
# kernel-ab.sh - kernel-only rays/s of the hierarchy walks on the OpenCL
# device (PoCL here) for several configurations in the same run, each
# measured ROUNDS times in turn (A B C A B C ...), so that the load of a
# shared machine falls on all of them alike; prints the median of each
# row over the rounds, and the median (with min..max) over the rounds of
# its ratio to the first configuration in the same round.
#
#   scripts/kernel-ab.sh [--rounds N] [--cputime] BUILD_DIR LABEL=ENV...
#                        [-- BENCH_ARGS]
#
# --cputime measures process CPU time per ray instead, with
# BUILD_DIR/tests/walk_cputime on one PoCL thread (fixed work; robust to
# the time other processes take), the ratio old/new of ns per ray.
#
# Each configuration is LABEL=VAR=VALUE[,VAR=VALUE...], the environment of
# its raybox-bench runs, e.g. RAYBOX_KERNEL_DIR (kernels from a directory),
# RAYBOX_CL_KERNELS, RAYBOX_CL_BVH_STACK. The bench runs the scene shapes
# (RAYBOX_BVH=on: every scene query walks) with BENCH_ARGS (default
# --scene-rays 64K --rays 16 --repeats 3). docs/gpu.md shows a run.
set -eu
rounds=3
cputime=0
while :; do
    case "${1:-}" in
    --rounds) rounds=$2; shift 2 ;;
    --cputime) cputime=1; shift ;;
    *) break ;;
    esac
done
case "${1:-}" in -h|--help|"")
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
build=$1; shift
bench=$build/bin/raybox-bench
[ -x "$bench" ] || { echo "kernel-ab.sh: $bench not found (make build)" >&2; exit 1; }
configs=""
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case "$1" in *=*) ;; *) echo "kernel-ab.sh: '$1' is not LABEL=ENV" >&2; exit 2 ;; esac
    configs="$configs $1"; shift
done
[ "${1:-}" = -- ] && shift
[ -n "$configs" ] || { echo "kernel-ab.sh: no configuration" >&2; exit 2; }
[ $# -gt 0 ] || set -- --scene-rays 64K --rays 16 --repeats 3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
r=1
while [ "$r" -le "$rounds" ]; do
    for c in $configs; do
        label=${c%%=*}
        envs=$(echo "${c#*=}" | tr ',' ' ')
        echo "round $r: $label" >&2
        if [ "$cputime" = 1 ]; then
            # shellcheck disable=SC2086
            env POCL_MAX_PTHREAD_COUNT=1 RAYBOX_CACHE_DIR="$out/cache" \
                POCL_CACHE_DIR="$out/pocl" $envs "$build/tests/walk_cputime" 2 \
                > "$out/$label.$r.txt"
            continue
        fi
        # shellcheck disable=SC2086
        env RAYBOX_BVH=on RAYBOX_CACHE_DIR="$out/cache" \
            POCL_CACHE_DIR="$out/pocl" $envs "$bench" --backend opencl \
            --modes nearest,any,count,all --quiet --json "$out/$label.$r.json" \
            "$@" >/dev/null
    done
    r=$((r + 1))
done
python3 - "$out" "$cputime" $configs <<'PY'
import json, statistics, sys, glob
out, cputime = sys.argv[1], sys.argv[2] == "1"
configs = [c.split('=', 1)[0] for c in sys.argv[3:]]
rows = {}
if cputime:
    for label in configs:
        for f in glob.glob(f"{out}/{label}.*.txt"):
            rnd = int(f.rsplit(".", 2)[1])
            for line in open(f):
                w = line.split()
                if len(w) == 6 and w[2] == "kernel_ns_per_ray":
                    rows.setdefault((w[1], w[0]), {}).setdefault(label, {})[rnd] = float(w[5])
    print("CPU ns per ray (one PoCL thread), median of", rounds_n := len(glob.glob(f"{out}/{configs[0]}.*.txt")),
          "rounds; ratio: first config's ns / this one's (above 1: faster)")
    print(f"{'mode':8} {'shape':10}" + "".join(f" {l:>10}" for l in configs) +
          "".join(f" {l + '/' + configs[0]:>24}" for l in configs[1:]))
    for key in sorted(rows, key=lambda k: (k[1], ["nearest","any","count","all"].index(k[0]))):
        by = rows[key]
        line = f"{key[0]:8} {key[1]:10}" + "".join(
            f" {statistics.median(by[l].values()):10.0f}" for l in configs)
        for l in configs[1:]:
            rs = [by[configs[0]][n] / by[l][n] for n in by[l] if n in by[configs[0]]]
            line += f" {statistics.median(rs):7.3f} ({min(rs):.2f}..{max(rs):.2f})".rjust(25)
        print(line)
    sys.exit(0)
for label in configs:
    for f in sorted(glob.glob(f"{out}/{label}.*.json")):
        rnd = int(f.rsplit(".", 2)[1])
        for r in json.load(open(f))["rows"]:
            if r["category"] == "scenes" and r["path"] == "kernel" and \
               r["metric"] == "rays_per_s" and r["status"] == "ok":
                rows.setdefault((r["test"], r["shape"], r["size"]), {}) \
                    .setdefault(label, {})[rnd] = r["value"]
head = f"{'mode':8} {'shape':10} {'size':14}" + "".join(
    f" {l:>12}" for l in configs) + "".join(
    f" {l + '/' + configs[0]:>24}" for l in configs[1:])
print("kernel-only rays/s, median of", len(glob.glob(f"{out}/{configs[0]}.*.json")),
      "rounds (each the median of its repeats)")
print(head)
for key in sorted(rows, key=lambda k: (k[1], ["nearest","any","count","all"].index(k[0]))):
    by = rows[key]
    med = {l: statistics.median(v.values()) for l, v in by.items()}
    line = f"{key[0]:8} {key[1]:10} {key[2]:14}" + "".join(
        f" {med.get(l, float('nan'))/1e6:11.3f}M" for l in configs)
    for l in configs[1:]:
        rs = [by[l][n] / by[configs[0]][n] for n in by.get(l, {})
              if n in by[configs[0]]]
        line += (f" {statistics.median(rs):7.3f} ({min(rs):.2f}..{max(rs):.2f})"
                 .rjust(25) if rs else " " * 25)
    print(line)
PY
