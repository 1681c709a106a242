#!/usr/bin/env bash
# Session 15's device call (run on the GPU machine from the repo root, binaries
# in gpu-bin): gpu-check on the final code (every gpu-labelled test, cuda_bench,
# the copier probe, lanebench on cuda, cuda with the lane threads kept awake,
# tcp and shm). This session changed the connection cap (one per agent, shared
# by the cuda control server with tcp and shm) and the stream lanes' close and
# locking paths. Output lands in $OUT/$TAG (gpu-check.txt and the check folder).
#   usage: [TAG=s15] bash scripts/dev-session15.sh
set -u
export LD_LIBRARY_PATH=$PWD/gpu-bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TAG=${TAG:-s15}
G=$OUT/$TAG; mkdir -p $G
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $G/gpus.txt
echo "host: $(nproc) CPUs; $(uptime)"
OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
tail -16 $G/gpu-check.txt
