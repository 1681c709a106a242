#!/usr/bin/env bash
# Session 16's device call (run on the GPU machine from the repo root, binaries
# in gpu-bin): gpu-check on the final code (every gpu-labelled test, cuda_bench,
# the copier probe, lanebench on cuda, tcp and shm). This session changed the
# core's Post (its in-flight record store is sequentially consistent, then it
# reads the registry's removal count), DeregisterMemory (waits for the agent's
# own posts in flight on the region), Check (the error message under a per-slot
# mutex) and the connect error codes; the cuda tests run through all of them.
# Output lands in $OUT/$TAG.tar.gz (gpu-check.txt and the check folder).
#   usage: [TAG=s16] [LANEBENCH_RUNS=...] bash scripts/dev-session16.sh
set -u
export LD_LIBRARY_PATH=$PWD/gpu-bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TAG=${TAG:-s16}
G=$OUT/$TAG; mkdir -p $G
finish() { tar -C $OUT -czf $OUT/$TAG.tar.gz $TAG && rm -rf $G; }  # one file comes back
trap finish EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $G/gpus.txt
echo "host: $(nproc) CPUs; $(uptime)"
OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
tail -16 $G/gpu-check.txt
