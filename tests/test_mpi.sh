#!/bin/sh
# test_mpi.sh BIN MPIEXEC - raybox-mpi against raybox: `mpiexec -np 4
# raybox-mpi visibility|intersect ...` on this machine writes the same
# bytes as one `raybox` process (visibility; intersect nearest, any and
# count, from .npy rays with and without ranges and from a binary
# request; a scene with a sphere, whose nearest answer carries kinds),
# also into a file another job wrote, and a bad ray in one rank's
# slice exits 2 on every rank with one line naming the file, the ray and
# its byte, without hanging the job; deploy/batch/visibility-mpi-slurm.sh
# run as Slurm would writes the same file as raybox.
#
# Open MPI is told to stay on this machine and off the network (the
# shared-memory and self transports, the loopback interface), so that the
# test runs where loopback is the only interface, and to run as root
# (CI runs as root).
set -eu
BIN=$1
MPIEXEC=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/raybox-mpi.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "test_mpi: FAIL: $*" >&2; exit 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# ASan builds (CI=1): Open MPI's components must stay loaded, and LSan
# must unwind through Open MPI's frames (which have no frame pointers),
# for tests/lsan.supp to recognise what Open MPI keeps. That makes a run
# several times slower, so the leak check runs on the first raybox-mpi
# job (visibility: the broadcasts, the scene, MPI-IO) only; the batch
# code it shares with raybox is leak-checked in test_cli_intersect and
# test_cli_visibility. (Without ASan these variables do nothing.)
export OMPI_MCA_mca_base_component_disable_dlclose=1
LEAKS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:fast_unwind_on_malloc=0"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPI="timeout 120 $MPIEXEC -np 4 --oversubscribe"

# The inputs: a 40 x 40 city, points on its streets, rays through it.
python3 - "$T" <<'PY'
import math, random, struct, sys
d = sys.argv[1]
rng = random.Random(3)
def npy(name, rows, cols):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (
        len(rows), cols)
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    with open(d + "/" + name, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)))
        f.write(hdr.encode())
        for r in rows:
            f.write(struct.pack("<%df" % cols, *r))
g = 40
boxes = [[x, y, 0, x + 0.8, y + 0.8, rng.uniform(0.5, 4)]
         for y in range(g) for x in range(g)]
npy("city.npy", boxes, 6)
def street(n):
    return [[rng.randrange(g) + 0.9, rng.uniform(0, g), rng.uniform(0.1, 2)]
            for _ in range(n)]
npy("obs.npy", street(97), 3)
npy("tgt.npy", street(53), 3)
def ray():
    o = [rng.uniform(-5, g + 5), rng.uniform(-5, g + 5), rng.uniform(0, 5)]
    t = [rng.uniform(0, g), rng.uniform(0, g), rng.uniform(0, 3)]
    return o + [t[k] - o[k] for k in range(3)]
rays = [ray() + [0, rng.choice([1, 2, math.inf])] for _ in range(5003)]
npy("rays8.npy", rays, 8)
npy("rays6.npy", [r[:6] for r in rays[:3001]], 6)
bad = [list(r) for r in rays]
bad[4000][4] = math.nan
npy("bad.npy", bad, 8)
# a binary request (kind 1, any, RANGES), rays only
with open(d + "/rays.rbox", "wb") as f:
    f.write(b"RBOX" + struct.pack("<HHBBBBIQQff", 1, 64, 1, 2, 3, 1, 0,
                                  len(rays), 0, 0, 0) + bytes(24))
    for r in rays:
        f.write(struct.pack("<8f", *r))
with open(d + "/shapes.json", "w") as f:
    f.write('{"boxes":%s,"spheres":[[20,20,2,3],[5,30,1,1.5]]}' %
            [[float("%.9g" % v) for v in b] for b in boxes[:400]])
PY

cd "$T"
same() { cmp -s "$1" "$2" || fail "$3: $1 and $2 differ"; }

"$BIN/raybox" visibility city.npy obs.npy tgt.npy -o vis1.bin --quiet
ASAN_OPTIONS=$LEAKS $MPI "$BIN/raybox-mpi" visibility city.npy obs.npy \
    tgt.npy -o vis4.bin --quiet 2>err ||
    fail "raybox-mpi visibility: $(cat err)"
same vis1.bin vis4.bin "visibility"

for job in "nearest rays8.npy city.npy" "count rays6.npy city.npy" \
           "- rays.rbox city.npy" "nearest rays8.npy shapes.json"; do
    set -- $job
    mode=""
    [ "$1" = - ] || mode="--mode $1"
    "$BIN/raybox" intersect --rays "$2" --scene "$3" $mode -o one.bin \
        --quiet 2>err || fail "raybox intersect $job: $(cat err)"
    $MPI "$BIN/raybox-mpi" intersect --rays "$2" --scene "$3" $mode \
        -o four.bin --chunk 300 --quiet 2>err ||
        fail "raybox-mpi intersect $job: $(cat err)"
    same one.bin four.bin "intersect $job"
done
# four.bin held the other jobs' answers: a rerun into a used file
# rewrote all of it

# ray 4000 is in rank 3's slice (3752..5002); rank 3 alone says so
st=0
$MPI "$BIN/raybox-mpi" intersect --rays bad.npy --scene city.npy -o bad.bin \
    --quiet 2>err || st=$?
[ "$st" = 2 ] || fail "a NaN ray: exit $st, not 2: $(cat err)"
grep -q "raybox-mpi (rank 3 of 4): rays 'bad.npy': ray 4000 (byte 128128): dir y is NaN" err ||
    fail "a NaN ray: not named: $(cat err)"

# deploy/batch/visibility-mpi-slurm.sh as Slurm would run it (4 tasks)
mkdir slurm
cp city.npy slurm/city.npy
cp obs.npy slurm/observers.npy
cp tgt.npy slurm/targets.npy
(cd slurm && PATH="$BIN:$(dirname "$MPIEXEC"):$PATH" SLURM_NTASKS=4 \
    SLURM_CPUS_PER_TASK=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    timeout 120 sh "$SRC/deploy/batch/visibility-mpi-slurm.sh") 2>err ||
    fail "visibility-mpi-slurm.sh: $(cat err)"
same vis1.bin slurm/vis.bin "visibility-mpi-slurm.sh"

# --shard is raybox's; a missing file is said once, by rank 0
st=0
$MPI "$BIN/raybox-mpi" intersect --rays none.npy --scene city.npy -o x.bin \
    2>err || st=$?
[ "$st" = 2 ] || [ "$st" = 1 ] || fail "a missing file: exit $st"
[ "$(grep -c "rays 'none.npy'" err)" = 1 ] ||
    fail "a missing file: not said once: $(cat err)"
st=0
$MPI "$BIN/raybox-mpi" visibility city.npy obs.npy tgt.npy -o x.bin \
    --shard 0/2 2>err || st=$?
[ "$st" = 1 ] || fail "--shard: exit $st, not 1"
[ "$(grep -c -- "--shard: the ranks are the shards" err)" = 1 ] ||
    fail "--shard: not said once: $(cat err)"
"$BIN/raybox-mpi" visibility --help | grep -q -- '--tmin' ||
    fail "raybox-mpi visibility --help"
echo "test_mpi: ok"
