#!/usr/bin/env bash
# A batch job for SLURM: 8 ranks, one per core, resumable.  The job asks
# SLURM to send its ranks SIGTERM 120 s before the time limit; cdp_run then writes its checkpoint at
# the next segment boundary (64 steps at most with --checkpoint) and stops
# with status 143, and the next submission of the same script resumes bit
# for bit.  The 8 ranks may land on several nodes (add e.g. --nodes=2):
# every node must see cdp_run and the data set (a shared file system, or a
# node-local copy at the same path: --data-dir); only rank 0 writes, but the
# checkpoint must be where the next job's rank 0 finds it, which may be on
# another node: keep it (the working directory) on a shared file system.
# SLURM ends the job of a node that fails; the watchdog (--timeout) ends a
# job whose rank stalls.
#SBATCH --job-name=cdp
#SBATCH --ntasks=8
#SBATCH --cpus-per-task=1
#SBATCH --time=01:00:00
#SBATCH --signal=TERM@120
set -u
ckpt=${CKPT:-cdp.ckpt.safetensors}
resume=()
[ -f "$ckpt" ] && resume=(--resume "$ckpt")
srun --kill-on-bad-exit=1 ./cdp_run --rule cdp-v2 --workers 8 --epochs 30 --timeout 300 \
    --checkpoint "$ckpt" --checkpoint-every 1 "${resume[@]}" \
    --metrics cdp.metrics.jsonl --save-weights cdp.final.safetensors
