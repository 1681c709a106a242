#!/usr/bin/env bash
# Session 8's device calls: the probes named in PROBES (default: the proxy's
# phase probe), the GPU tests (CHECK=tests: only cuda_transfer_test; CHECK=all:
# gpu-check.sh; CHECK=none: no tests), and a baseline cuda_bench (BASE, default
# cuda_bench_s7: session 7's final engine) and this one alternately, ROUNDS
# times (default 2; 0: none), after the binaries named in EXTRA (each once a
# round, output ab_<name><round>.txt). Everything lands in $OUT/s8.tar.gz (one file back).
#   usage (on the GPU machine, from the repo root):
#     [PROBES="cuda_proxy_phase_probe ..."] [CHECK=tests|all|none] [BASE=cuda_bench_x] [ROUNDS=n] [EXTRA=".."] \
#       bash scripts/dev-session8.sh
set -u
G=$OUT/s8; mkdir -p $G
finish() {
  gzip $G/*.json $G/check/*.json 2>/dev/null
  tar -C $OUT -czf $OUT/s8.tar.gz s8 && rm -rf $G
}
trap finish EXIT
BASE=${BASE:-cuda_bench_s7}
for p in ${PROBES-cuda_proxy_phase_probe}; do
  timeout 200 gpu-bin/$p > $G/$p.txt 2>&1; echo "$p rc=$?"
done
case "${CHECK:-tests}" in
  tests)
    timeout 180 gpu-bin/cuda_transfer_test > $G/cuda_transfer_test.txt 2>&1; echo "cuda_transfer_test rc=$?"
    tail -3 $G/cuda_transfer_test.txt
    grep -q "PASSED" $G/cuda_transfer_test.txt || { echo "tests failed: no benchmarks"; exit 1; } ;;
  all)
    LANEBENCH_RUNS="cuda" OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
    tail -9 $G/gpu-check.txt
    grep -q "cuda_transfer_test *| ok" $G/gpu-check.txt || { echo "tests failed: no benchmarks"; exit 1; } ;;
esac
for i in $(seq 1 ${ROUNDS:-2}); do
  for x in ${EXTRA:-}; do timeout 120 gpu-bin/$x > $G/ab_$x$i.txt 2>&1; done
  timeout 120 gpu-bin/$BASE > $G/ab_base$i.txt 2>&1
  timeout 120 gpu-bin/cuda_bench --json $G/ab_new$i.json > $G/ab_new$i.txt 2>&1
done
echo "done (base $BASE)"
