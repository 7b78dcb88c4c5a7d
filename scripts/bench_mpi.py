#!/usr/bin/env python3
"""make bench-mpi: the efficiency of raybox-mpi's ranks against threads.

The 200K-box city of docs/batch.md (448 x 448 blocks), 2000 observers and
2000 targets on its streets (4M segments), answered by `raybox-mpi
visibility` as 1 rank x T threads and as T ranks x 1 thread on the same T
cores (T = --cores, default 2), each --runs times (the best run counts).
Prints, per layout, the job's time and segments/s as raybox-mpi's rank 0
reports them (from every rank having its inputs, scene and open output to
the file written and closed by all: the parallel part), the whole
mpiexec run's wall time (start-up, MPI_Init, reading and broadcasting,
every rank's scene build too) and the CPU seconds of all processes, then
the efficiency: the ranks' segments/s over the threads', for the job and
for the whole run. Every run's file must equal the first's.

Standard library only: the inputs are written as .npy by hand.
"""
import argparse
import filecmp
import os
import random
import resource
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time


def npy(path, rows, cols):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (
        len(rows), cols)
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)))
        f.write(hdr.encode())
        pack = struct.Struct("<%df" % cols).pack
        f.write(b"".join(pack(*r) for r in rows))


def inputs(d, grid, n_obs, n_tgt):
    rng = random.Random(1)
    npy(os.path.join(d, "city.npy"),
        [(x, y, 0, x + 0.8, y + 0.8, rng.uniform(0.5, 4))
         for y in range(grid) for x in range(grid)], 6)

    def street(n):  # on the streets, 0.1-2 up
        return [(rng.randrange(grid) + 0.9, rng.uniform(0, grid),
                 rng.uniform(0.1, 2)) for _ in range(n)]
    npy(os.path.join(d, "observers.npy"), street(n_obs), 3)
    npy(os.path.join(d, "targets.npy"), street(n_tgt), 3)


def run(args, mpiexec, ranks, threads, d, out):
    cmd = [mpiexec, "-np", str(ranks), "--bind-to", "none",
           os.path.join(os.path.abspath(args.build), "bin", "raybox-mpi"),
           "visibility",
           "city.npy", "observers.npy", "targets.npy", "-o", out,
           "--backend", "cpu", "--threads", str(threads)]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if p.returncode:
        sys.exit("bench-mpi: %s failed (%d): %s" % (" ".join(cmd),
                                                    p.returncode, p.stderr))
    job = re.findall(r"segments by \d+ ranks? in ([0-9.]+) s", p.stderr)
    if not job:
        sys.exit("bench-mpi: no summary line from raybox-mpi: " + p.stderr)
    return float(job[-1]), wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--cores", type=int, default=2,
                    help="T: 1 rank x T threads against T ranks x 1 thread")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--grid", type=int, default=448,
                    help="blocks a side (448: 200,704 boxes)")
    ap.add_argument("--observers", type=int, default=2000)
    ap.add_argument("--targets", type=int, default=2000)
    args = ap.parse_args()
    mpiexec = shutil.which("mpiexec") or sys.exit("bench-mpi: no mpiexec "
                                                  "(openmpi-bin)")
    os.environ.setdefault("OMPI_MCA_btl", "self,vader")
    os.environ.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    if os.geteuid() == 0:
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    d = tempfile.mkdtemp(prefix="raybox-bench-mpi.")
    try:
        inputs(d, args.grid, args.observers, args.targets)
        segs = args.observers * args.targets
        T = args.cores
        layouts = [("1 rank x %d threads" % T, 1, T),
                   ("%d ranks x 1 thread" % T, T, 1)]
        best = {}
        first = None
        load0 = "%.2f" % os.getloadavg()[0]
        for r in range(args.runs):
            for name, ranks, threads in layouts:  # interleaved: same noise
                out = "vis-%d-%d.bin" % (ranks, r)
                job, wall, cpu = run(args, mpiexec, ranks, threads, d, out)
                path = os.path.join(d, out)
                if first is None:
                    first = path
                elif not filecmp.cmp(first, path, shallow=False):
                    sys.exit("bench-mpi: %s differs from %s" % (path, first))
                b = best.get(name, (float("inf"),) * 3)
                best[name] = (min(b[0], job), min(b[1], wall), min(b[2], cpu))
        print("raybox-mpi visibility: %d boxes, %d x %d = %d segments, "
              "best of %d runs (each column its own best)"
              % (args.grid ** 2, args.observers, args.targets, segs,
                 args.runs))
        print("%-20s %8s %9s %8s %9s %7s" % (
            "layout", "job s", "M seg/s", "run s", "M seg/s", "CPU s"))
        for name, _, _ in layouts:
            job, wall, cpu = best[name]
            print("%-20s %8.3f %9.2f %8.3f %9.2f %7.2f" % (
                name, job, segs / job / 1e6, wall, segs / wall / 1e6, cpu))
        a, b = best[layouts[0][0]], best[layouts[1][0]]
        print("efficiency (ranks' rate / threads'): job %.0f%%, whole run "
              "%.0f%%; CPU seconds ranks / threads %.2f"
              % (100 * a[0] / b[0], 100 * a[1] / b[1], b[2] / a[2]))
        print("load average before / after: %s / %.2f"
              % (load0, os.getloadavg()[0]))
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
