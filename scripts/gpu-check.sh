#!/usr/bin/env bash
# Runs every gpu-labelled test and the cuda benchmark on a machine with GPUs and
# prints one summary table. Binaries come from BIN (default: gpu-bin, a copy of
# build-cuda/tests/gpu made on the build machine with -arch=sm_90a; optionally
# cuda_bench_trace, the benchmark of a build with CMAKE_CXX_FLAGS=-DKVLANE_HOP_TRACE;
# optionally cuda_sync_probe (which CUDA calls wait for a running kernel);
# optionally cuda_copier_probe (tcp's device staging per window);
# optionally lanebench, from build-cuda/tools/lanebench, run on cuda, tcp and shm).
# Logs and JSON (cuda_bench.json, lanebench-<run>.json for each LANEBENCH_RUNS
# entry, e.g. lanebench-cuda-warm.json) go to OUT.
#   usage: [OUT=/tmp/gpu-check] scripts/gpu-check.sh [BIN]
set -u
BIN=${1:-gpu-bin}
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
rm -f "$OUT"/cuda_bench*.log "$OUT"/cuda_bench.json "$OUT"/lanebench-*.log "$OUT"/lanebench-*.json
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
nvidia-smi topo -m 2>/dev/null | head -4 || true
echo "host: $(nproc) CPUs, clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)"
declare -a rows
run() {  # name, command...
  local name=$1; shift
  local start=$(date +%s%N)
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  local summary
  summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) |outcome: |not available here' "$OUT/$name.log" |
            tr '\n' ' ' | cut -c1-120)
  local verdict=FAIL
  [ $rc = 0 ] && verdict=ok
  [ $rc = 77 ] && verdict=n/a  # lanebench: the transport is not available here
  rows+=("$(printf '| %-22s | %-4s | %7d ms | %s' "$name" "$verdict" "$ms" "$summary")")
  [ $rc = 0 ] || [ $rc = 77 ] || grep -E 'Failure|FAILED|error' "$OUT/$name.log" | head -20
}
run cuda_blob_test "$BIN/cuda_blob_test"
# Which CUDA calls wait for a running kernel (the proxy renewal's premise).
[ -x "$BIN/cuda_sync_probe" ] && run cuda_sync_probe timeout 60 "$BIN/cuda_sync_probe"
run cuda_transfer_test timeout 180 "$BIN/cuda_transfer_test"
# Optional: tcp's device staging per window, against one copy per range (verified).
[ -x "$BIN/cuda_copier_probe" ] && run cuda_copier_probe timeout 120 "$BIN/cuda_copier_probe"
# kvbench_gpu_test runs "$BIN/kvbench" (copy it beside) for its tcp run on device pools.
run kvbench_gpu_test timeout 120 "$BIN/kvbench_gpu_test"
run cuda_bench timeout 200 "$BIN/cuda_bench" --json "$OUT/cuda_bench.json"
# Optional: the same benchmark built with -DKVLANE_HOP_TRACE (per-hop timestamps).
[ -x "$BIN/cuda_bench_trace" ] && run cuda_bench_hops timeout 60 "$BIN/cuda_bench_trace" --hops
# Optional: lanebench on the cuda transport, then on the host transports (the GPU
# machine's cores are quiet, unlike the build machine's).
# LANEBENCH_RUNS picks them: cuda-warm is cuda with --spin-us 20000 (lane threads
# and the proxy kept awake between iterations; plain cuda starts each one cold);
# a -nopin suffix (cuda-nopin, cuda-warm-nopin) runs with --pin off (the default,
# auto, pins the poller on a machine with 4 or more CPUs).
LANEBENCH_RUNS=${LANEBENCH_RUNS:-cuda cuda-warm tcp shm}
if [ -x "$BIN/lanebench" ]; then
  for t in $LANEBENCH_RUNS; do
    base=$t
    args=()
    [ "$base" != "${base%-nopin}" ] && base=${base%-nopin} && args+=(--pin off)
    [ "$base" != "${base%-warm}" ] && base=${base%-warm} && args+=(--spin-us 20000)
    args+=(--transport "$base")
    run "lanebench-$t" timeout -k 10 240 "$BIN/lanebench" "${args[@]}" --json "$OUT/lanebench-$t.json"
  done
fi
echo
[ -f "$OUT/cuda_sync_probe.log" ] && { cat "$OUT/cuda_sync_probe.log"; echo; }
cat "$OUT/cuda_bench.log"
[ -f "$OUT/cuda_copier_probe.log" ] && { echo; cat "$OUT/cuda_copier_probe.log"; }
[ -f "$OUT/cuda_bench_hops.log" ] && { echo; grep -E '^\| hop|^hop' "$OUT/cuda_bench_hops.log"; }
for t in $LANEBENCH_RUNS; do [ -f "$OUT/lanebench-$t.log" ] && { echo; cat "$OUT/lanebench-$t.log"; }; done
echo
echo "| check                  | rc   | time      | result"
for r in "${rows[@]}"; do echo "$r"; done
