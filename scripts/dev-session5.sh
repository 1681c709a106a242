#!/usr/bin/env bash
# Session 5's device call: GPU tests, old/(prev)/new cuda_bench A/B, lanebench on cuda
# with tail attribution. Everything lands in $OUT/s5.tar.gz (one file back).
#   usage (on the GPU machine, from the repo root): bash scripts/dev-session5.sh
set -u
G=$OUT/s5; mkdir -p $G
LANEBENCH_RUNS="cuda cuda-warm" OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
tail -9 $G/gpu-check.txt
for i in 1 2 3; do
  gpu-bin/cuda_bench_old > $G/ab_old$i.txt 2>&1
  [ -x gpu-bin/cuda_bench_prev ] && gpu-bin/cuda_bench_prev > $G/ab_prev$i.txt 2>&1
  gpu-bin/cuda_bench --json $G/ab_new$i.json > $G/ab_new$i.txt 2>&1
done
[ -x gpu-bin/cuda_bench_trace ] && gpu-bin/cuda_bench_trace --hops > $G/hops.txt 2>&1
for i in 1 2; do
  timeout -k 10 200 gpu-bin/lanebench --transport cuda --json $G/lb-cuda-$i.json > $G/lb-cuda-$i.txt 2>&1
done
timeout -k 10 200 gpu-bin/lanebench --transport cuda --single-bytes 4KiB --single-ops write \
  --iters 1000 --json $G/lb-1000.json > $G/lb-1000.txt 2>&1
gzip $G/*.json $G/check/*.json 2>/dev/null
tar -C $OUT -czf $OUT/s5.tar.gz s5 && rm -rf $G
echo done
