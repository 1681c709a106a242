#!/usr/bin/env bash
# Session 6's device calls: the doorbell probe (cuda_doorbell_probe: polling
# and publishing shapes of a resident kernel), the GPU tests (gpu-check.sh), and
# session 5's cuda_bench (cuda_bench_prev) and this one alternately. Everything
# lands in $OUT/s6.tar.gz (one file back).
#   usage (on the GPU machine, from the repo root): [PROBE=0] bash scripts/dev-session6.sh
set -u
G=$OUT/s6; mkdir -p $G
finish() {
  gzip $G/*.json $G/check/*.json 2>/dev/null
  tar -C $OUT -czf $OUT/s6.tar.gz s6 && rm -rf $G
}
trap finish EXIT
if [ "${PROBE:-1}" = 1 ]; then
  timeout 150 gpu-bin/cuda_doorbell_probe > $G/doorbell.txt 2>&1; echo "doorbell rc=$?"
fi
LANEBENCH_RUNS="cuda" OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
tail -9 $G/gpu-check.txt
grep -q "cuda_transfer_test *| ok" $G/gpu-check.txt || { echo "tests failed: no benchmarks"; exit 1; }
[ -x gpu-bin/cuda_bench_trace ] && timeout 120 gpu-bin/cuda_bench_trace --hops > $G/hops.txt 2>&1
for i in 1 2; do
  timeout 120 gpu-bin/cuda_bench_prev > $G/ab_prev$i.txt 2>&1
  timeout 120 gpu-bin/cuda_bench --json $G/ab_new$i.json > $G/ab_new$i.txt 2>&1
done
echo done
