#!/usr/bin/env bash
# Runs every gpu-labelled test and the cuda benchmark on a machine with GPUs and
# prints one summary table. Binaries come from BIN (default: gpu-bin, a copy of
# build-cuda/tests/gpu made on the build machine with -arch=sm_90a; optionally
# cuda_bench_trace, the benchmark of a build with CMAKE_CXX_FLAGS=-DKVLANE_HOP_TRACE).
#   usage: scripts/gpu-check.sh [BIN]
set -u
BIN=${1:-gpu-bin}
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
nvidia-smi topo -m 2>/dev/null | head -4 || true
declare -a rows
run() {  # name, command...
  local name=$1; shift
  local start=$(date +%s%N)
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  local summary
  summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$name.log" | tr '\n' ' ' | cut -c1-120)
  rows+=("$(printf '| %-22s | %-4s | %7d ms | %s' "$name" "$([ $rc = 0 ] && echo ok || echo FAIL)" "$ms" "$summary")")
  [ $rc = 0 ] || grep -E 'Failure|FAILED|error' "$OUT/$name.log" | head -20
}
run cuda_blob_test "$BIN/cuda_blob_test"
run cuda_transfer_test timeout 180 "$BIN/cuda_transfer_test"
run kvbench_gpu_test timeout 120 "$BIN/kvbench_gpu_test"
run cuda_bench timeout 200 "$BIN/cuda_bench"
# Optional: the same benchmark built with -DKVLANE_HOP_TRACE (per-hop timestamps).
[ -x "$BIN/cuda_bench_trace" ] && run cuda_bench_hops timeout 60 "$BIN/cuda_bench_trace" --hops
echo
cat "$OUT/cuda_bench.log"
[ -f "$OUT/cuda_bench_hops.log" ] && { echo; grep -E '^\| hop|^hop' "$OUT/cuda_bench_hops.log"; }
echo
echo "| check                  | rc   | time      | result"
for r in "${rows[@]}"; do echo "$r"; done
