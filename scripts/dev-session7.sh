#!/usr/bin/env bash
# Session 7's device calls: the scattered-list probe (cuda_staged_probe: direct
# kernel shapes, and with STAGED=1 the staged pipeline), the GPU tests
# (gpu-check.sh), and session 6's cuda_bench (cuda_bench_s6) and this one
# alternately. Everything lands in $OUT/s7.tar.gz (one file back).
#   usage (on the GPU machine, from the repo root): [STAGED=1] bash scripts/dev-session7.sh
set -u
G=$OUT/s7; mkdir -p $G
finish() {
  gzip $G/*.json $G/check/*.json 2>/dev/null
  tar -C $OUT -czf $OUT/s7.tar.gz s7 && rm -rf $G
}
trap finish EXIT
args=()
[ "${STAGED:-0}" = 1 ] && args+=(--staged)
timeout 200 gpu-bin/cuda_staged_probe "${args[@]}" > $G/staged.txt 2>&1; echo "staged probe rc=$?"
LANEBENCH_RUNS="cuda" OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
tail -9 $G/gpu-check.txt
grep -q "cuda_transfer_test *| ok" $G/gpu-check.txt || { echo "tests failed: no benchmarks"; exit 1; }
for i in 1 2; do
  timeout 120 gpu-bin/cuda_bench_s6 > $G/ab_s6_$i.txt 2>&1
  timeout 120 gpu-bin/cuda_bench --json $G/ab_new$i.json > $G/ab_new$i.txt 2>&1
done
echo done
