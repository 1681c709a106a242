#!/usr/bin/env bash
# One device call of a development session (from session 9 on): the probes
# named in PROBES (default none), the GPU tests (CHECK=tests: cuda_transfer_test,
# then its stress and proxy tests STRESS more times (default 2); CHECK=all:
# gpu-check.sh; CHECK=none), then a baseline cuda_bench (BASE) and this tree's
# alternately, ROUNDS times (default 2), each round also running the hop trace
# (gpu-bin/cuda_bench_trace --hops, a -DKVLANE_HOP_TRACE build) HOPS rounds
# (default 0). Everything lands in $OUT/$TAG.tar.gz (TAG default "dev").
#   usage (on the GPU machine, from the repo root):
#     [TAG=s9] [PROBES="..."] [CHECK=tests|all|none] [STRESS=n] [BASE=cuda_bench_x] \
#       [ROUNDS=n] [HOPS=n] bash scripts/dev-ab.sh
set -u
TAG=${TAG:-dev}
G=$OUT/$TAG; mkdir -p $G
finish() {
  gzip $G/*.json $G/check/*.json 2>/dev/null
  tar -C $OUT -czf $OUT/$TAG.tar.gz $TAG && rm -rf $G
}
trap finish EXIT
for p in ${PROBES:-}; do
  timeout 200 gpu-bin/$p > $G/$p.txt 2>&1; echo "$p rc=$?"
done
case "${CHECK:-tests}" in
  tests)
    timeout 180 gpu-bin/cuda_transfer_test > $G/cuda_transfer_test.txt 2>&1; echo "cuda_transfer_test rc=$?"
    tail -3 $G/cuda_transfer_test.txt
    grep -q "PASSED" $G/cuda_transfer_test.txt || { echo "tests failed: no benchmarks"; exit 1; }
    # The filter needs the leading '*': the tests are parameterized (Instance/Name.Test/param).
    timeout 180 gpu-bin/cuda_transfer_test --gtest_filter='*CudaStress*:*CudaProxy*' \
      --gtest_repeat=${STRESS:-2} > $G/stress.txt 2>&1; echo "stress x${STRESS:-2} rc=$?"
    grep -c "^\[  PASSED" $G/stress.txt
    grep -q "FAILED" $G/stress.txt && { echo "stress failed: no benchmarks"; exit 1; } ;;
  all)
    LANEBENCH_RUNS="cuda" OUT=$G/check bash scripts/gpu-check.sh gpu-bin > $G/gpu-check.txt 2>&1
    tail -9 $G/gpu-check.txt
    grep -q "cuda_transfer_test *| ok" $G/gpu-check.txt || { echo "tests failed: no benchmarks"; exit 1; } ;;
esac
for i in $(seq 1 ${ROUNDS:-2}); do
  if [ "$i" -le "${HOPS:-0}" ]; then
    timeout 120 gpu-bin/cuda_bench_trace --hops > $G/hops$i.txt 2>&1
  fi
  [ -n "${BASE:-}" ] && timeout 120 gpu-bin/$BASE > $G/ab_base$i.txt 2>&1
  timeout 120 gpu-bin/cuda_bench --json $G/ab_new$i.json > $G/ab_new$i.txt 2>&1
done
echo "done (base ${BASE:-none})"
