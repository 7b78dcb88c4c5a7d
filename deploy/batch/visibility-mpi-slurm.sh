#!/bin/sh
# A visibility job as one MPI job of 8 ranks under Slurm (docs/batch.md):
# rank r runs shard r/8, rank 0 reads the scene and broadcasts it, every
# rank writes its rows of vis.bin with MPI-IO. The file equals what
# visibility-slurm.sh's array (or one raybox run) writes; a failed job is
# simply resubmitted. Open MPI's mpirun takes the nodes and the task count
# from the allocation.
#
#   sbatch deploy/batch/visibility-mpi-slurm.sh   (from a directory on the
#   shared file system that holds city.npy, observers.npy, targets.npy)
#
# One rank a GPU: --gres=gpu:N with --ntasks-per-node=N and --backend
# opencl (each rank takes the GPU of its local rank).
#
#SBATCH --job-name=raybox-visibility-mpi
#SBATCH --ntasks=8
#SBATCH --cpus-per-task=8
#SBATCH --mem-per-cpu=512M
#SBATCH --output=raybox-visibility-mpi.log
set -eu
exec mpirun -np "${SLURM_NTASKS:-8}" raybox-mpi visibility city.npy \
     observers.npy targets.npy -o vis.bin --threads "${SLURM_CPUS_PER_TASK:-8}" \
     --quiet
