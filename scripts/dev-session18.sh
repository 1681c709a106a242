#!/usr/bin/env bash
# Session 18's device call (run on the GPU machine from the repo root, binaries
# in gpu-bin): the wedge cases (CudaWedgeTest, with this session's two cases of
# a record landing as the lane gives up) three times; the same cases from a
# build with the lane's old order (poison after its last look:
# gpu-bin/cuda_transfer_test_nofix, when present), which must fail; then
# gpu-check on the session's code (every gpu-labelled test, cuda_bench, the
# copier probe, lanebench as LANEBENCH_RUNS says).
# Output lands in $OUT/$TAG.tar.gz (wedge.txt, nofix.txt, gpu-check.txt, check/).
#   usage: [TAG=s18] [WEDGE_ONLY=1] [LANEBENCH_RUNS=...] bash scripts/dev-session18.sh
set -u
export LD_LIBRARY_PATH=$PWD/gpu-bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TAG=${TAG:-s18}
G=$OUT/$TAG; mkdir -p $G
finish() { tar -C $OUT -czf $OUT/$TAG.tar.gz $TAG && rm -rf $G; }  # one file comes back
trap finish EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $G/gpus.txt
echo "host: $(nproc) CPUs; $(uptime)"
summary() { grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \] .*Wedge|Failure|Expected|Which is|actual|read ok' "$1" | sort | uniq -c | head -40; }
for i in 1 2 3; do
  timeout 120 gpu-bin/cuda_transfer_test --gtest_filter='*Wedge*' >> $G/wedge.txt 2>&1
  echo "wedge round $i: rc $?" | tee -a $G/wedge.txt
done
summary $G/wedge.txt
if [ -x gpu-bin/cuda_transfer_test_nofix ]; then
  timeout 120 gpu-bin/cuda_transfer_test_nofix --gtest_filter='*GivesUp*' > $G/nofix.txt 2>&1
  echo "nofix (must fail): rc $?" | tee -a $G/nofix.txt
  summary $G/nofix.txt
fi
[ "${WEDGE_ONLY:-0}" = 1 ] && exit 0
OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
tail -16 $G/gpu-check.txt
