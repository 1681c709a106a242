#!/usr/bin/env bash
# Session 15's device call (run on the GPU machine from the repo root, binaries
# in gpu-bin): gpu-check on the final code (every gpu-labelled test, cuda_bench,
# the copier probe, lanebench on cuda, cuda with the lane threads kept awake,
# tcp and shm). This session changed the connection cap (one per agent, shared
# by the cuda control server with tcp and shm) and the stream lanes' close and
# locking paths. Output lands in $OUT/$TAG.tar.gz (gpu-check.txt and the check folder).
# AB=1: instead of gpu-check, lanebench on tcp and shm from this session's code
# (gpu-bin/lanebench) and from session 14's (gpu-bin/lanebench_s14, built from
# f371870), alternating, ROUNDS rounds: did the stream lanes' new close and
# locking paths move lanebench's tails, or was it the machine?
#   usage: [TAG=s15] [AB=1 [ROUNDS=2]] bash scripts/dev-session15.sh
set -u
export LD_LIBRARY_PATH=$PWD/gpu-bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TAG=${TAG:-s15}
G=$OUT/$TAG; mkdir -p $G
finish() { tar -C $OUT -czf $OUT/$TAG.tar.gz $TAG && rm -rf $G; }  # one file comes back
trap finish EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $G/gpus.txt
echo "host: $(nproc) CPUs; $(uptime)"
if [ "${AB:-0}" = 1 ]; then
  for r in $(seq 1 ${ROUNDS:-2}); do
    for tr in tcp shm; do
      for v in new s14; do
        bin=gpu-bin/lanebench; [ $v = s14 ] && bin=gpu-bin/lanebench_s14
        name=lb-$tr-$v-$r
        timeout -k 10 240 $bin --transport $tr --json $G/$name.json > $G/$name.txt 2>&1
        echo "$name rc=$?"
        grep -E "^(mixed|single)|small p(50|99)|^ +p(50|99)|^  (global|indep)" $G/$name.txt | head -24
      done
    done
  done
  exit 0
fi
OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
tail -16 $G/gpu-check.txt
