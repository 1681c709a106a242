#!/usr/bin/env bash
# A session's device call, run on the GPU machine from the repo root with the
# binaries in gpu-bin (docs/perf says how they are built and copied):
#   1. the focus tests (FOCUS, a gtest filter over cuda_transfer_test), ROUNDS times;
#   2. when MUST_FAIL names a binary in gpu-bin (the same test built without the
#      session's fix), the focus tests from it, which must fail;
#   3. unless FOCUS_ONLY=1, scripts/gpu-check.sh (every gpu-labelled test,
#      cuda_bench, the copier probe, lanebench as LANEBENCH_RUNS says).
# Everything comes back as one file, $OUT/$TAG.tar.gz (gpus.txt, focus.txt,
# must-fail.txt, gpu-check.txt, check/).
#   usage: TAG=s19a FOCUS='*Wedge*' [ROUNDS=3] [MUST_FAIL=cuda_transfer_test_nofix]
#          [FOCUS_ONLY=1] [LANEBENCH_RUNS=...] bash scripts/gpu-dev.sh
set -u
export LD_LIBRARY_PATH=$PWD/gpu-bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
TAG=${TAG:?name the run: TAG=...}
FOCUS=${FOCUS:?a gtest filter: FOCUS=...}
G=$OUT/$TAG; mkdir -p "$G"
finish() { tar -C "$OUT" -czf "$OUT/$TAG.tar.gz" "$TAG" && rm -rf "$G"; }
trap finish EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$G/gpus.txt"
echo "host: $(nproc) CPUs; $(uptime)"
summary() {
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|actual|mixed calls: [0-9]' "$1" |
    sort | uniq -c | head -40
}
for i in $(seq "${ROUNDS:-3}"); do
  timeout 300 gpu-bin/cuda_transfer_test --gtest_filter="$FOCUS" >> "$G/focus.txt" 2>&1
  echo "focus round $i: rc $?" | tee -a "$G/focus.txt"
done
summary "$G/focus.txt"
if [ -n "${MUST_FAIL:-}" ] && [ -x "gpu-bin/$MUST_FAIL" ]; then
  timeout 300 "gpu-bin/$MUST_FAIL" --gtest_filter="$FOCUS" > "$G/must-fail.txt" 2>&1
  echo "$MUST_FAIL (must fail): rc $?" | tee -a "$G/must-fail.txt"
  summary "$G/must-fail.txt"
fi
[ "${FOCUS_ONLY:-0}" = 1 ] && exit 0
OUT=$G/check bash scripts/gpu-check.sh gpu-bin > "$G/gpu-check.txt" 2>&1
tail -16 "$G/gpu-check.txt"
