#!/bin/sh
# A visibility job as a Slurm array of 8 tasks, each one shard of the
# observers (docs/batch.md): task I runs raybox visibility --shard I/8 and
# writes its rows of the shared output file. A failed task is simply
# resubmitted (`sbatch --array=I`): it rewrites the same bytes.
#
#   sbatch deploy/batch/visibility-slurm.sh   (from a directory on the
#   shared file system that holds city.npy, observers.npy, targets.npy)
#
#SBATCH --job-name=raybox-visibility
#SBATCH --array=0-7
#SBATCH --cpus-per-task=8
#SBATCH --mem=4G
#SBATCH --output=raybox-visibility-%a.log
set -eu
SHARDS=${SHARDS:-8}   # keep equal to the --array count
exec raybox visibility city.npy observers.npy targets.npy -o vis.bin \
     --shard "${SLURM_ARRAY_TASK_ID}/${SHARDS}" --quiet
