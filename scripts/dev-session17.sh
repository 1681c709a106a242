#!/usr/bin/env bash
# Session 17's device call (run on the GPU machine from the repo root, binaries
# in gpu-bin): the new wedge cases first (a lane's copy streams held behind a
# host callback until the lane gives up: CudaWedgeTest), three times, then
# gpu-check on the session's code (every gpu-labelled test, cuda_bench, the
# copier probe, lanebench as LANEBENCH_RUNS says).
# Output lands in $OUT/$TAG.tar.gz (wedge.txt, gpu-check.txt, the check folder).
#   usage: [TAG=s17] [WEDGE_ONLY=1] [LANEBENCH_RUNS=...] bash scripts/dev-session17.sh
set -u
export LD_LIBRARY_PATH=$PWD/gpu-bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TAG=${TAG:-s17}
G=$OUT/$TAG; mkdir -p $G
finish() { tar -C $OUT -czf $OUT/$TAG.tar.gz $TAG && rm -rf $G; }  # one file comes back
trap finish EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $G/gpus.txt
echo "host: $(nproc) CPUs; $(uptime)"
for i in 1 2 3; do
  timeout 120 gpu-bin/cuda_transfer_test --gtest_filter='*Wedge*' >> $G/wedge.txt 2>&1
  echo "wedge round $i: rc $?" | tee -a $G/wedge.txt
done
grep -E '^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|actual' $G/wedge.txt | sort | uniq -c | head -30
[ "${WEDGE_ONLY:-0}" = 1 ] && exit 0
OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
tail -16 $G/gpu-check.txt
