#!/usr/bin/env bash
# Session 7's device calls: the scattered-list probe (cuda_staged_probe: direct
# kernel shapes, and with STAGED=1 the staged pipeline), the GPU tests
# (gpu-check.sh; CHECK=tests: only cuda_transfer_test), and a baseline
# cuda_bench (BASE, default cuda_bench_s6: session 6's) and this one
# alternately, ROUNDS times (default 2). Everything lands in $OUT/s7.tar.gz
# (one file back).
#   usage (on the GPU machine, from the repo root):
#     [PROBE=0] [STAGED=1] [CHECK=tests] [BASE=cuda_bench_x] [ROUNDS=n] bash scripts/dev-session7.sh
set -u
G=$OUT/s7; mkdir -p $G
finish() {
  gzip $G/*.json $G/check/*.json 2>/dev/null
  tar -C $OUT -czf $OUT/s7.tar.gz s7 && rm -rf $G
}
trap finish EXIT
BASE=${BASE:-cuda_bench_s6}
if [ "${PROBE:-1}" = 1 ]; then
  args=()
  [ "${STAGED:-0}" = 1 ] && args+=(--staged)
  timeout 200 gpu-bin/cuda_staged_probe "${args[@]}" > $G/staged.txt 2>&1; echo "staged probe rc=$?"
fi
if [ "${CHECK:-all}" = tests ]; then
  timeout 180 gpu-bin/cuda_transfer_test > $G/cuda_transfer_test.txt 2>&1; echo "cuda_transfer_test rc=$?"
  tail -3 $G/cuda_transfer_test.txt
  grep -q "PASSED" $G/cuda_transfer_test.txt || { echo "tests failed: no benchmarks"; exit 1; }
else
  LANEBENCH_RUNS="cuda" OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
  tail -9 $G/gpu-check.txt
  grep -q "cuda_transfer_test *| ok" $G/gpu-check.txt || { echo "tests failed: no benchmarks"; exit 1; }
fi
for i in $(seq 1 ${ROUNDS:-2}); do
  timeout 120 gpu-bin/$BASE > $G/ab_base$i.txt 2>&1
  timeout 120 gpu-bin/cuda_bench --json $G/ab_new$i.json > $G/ab_new$i.txt 2>&1
done
echo "done (base $BASE)"
