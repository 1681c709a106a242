#!/usr/bin/env bash
# Runs the cuda tests under NVIDIA compute-sanitizer on a machine with a GPU:
# memcheck (out-of-bounds and misaligned device accesses, CUDA API errors) over
# the cuda transport's tests, racecheck and synccheck (shared-memory hazards,
# barrier misuse) and initcheck (device memory read before anything wrote it) over
# the kernels' tests. Every process of a test is checked
# (the peers are child processes). The sanitizer is not part of the CUDA
# toolkit on the build machine: it comes as PyPI's nvidia-cuda-sanitizer-api
# wheel, placed in BIN as sanitizer.whl (docs/perf says how), and is unpacked
# here. Tests that time a wedged GPU or run for seconds are left out: the
# sanitizer slows kernels and host calls by one to two orders of magnitude.
# Logs go to OUT; one line per run is printed, and the exit status is 1 when
# any run reported an error or failed.
# ONLY (names of runs, e.g. ONLY="initcheck-kernels") runs those alone.
#   usage: [OUT=/tmp/gpu-sanitize] [ONLY="run ..."] scripts/gpu-sanitize.sh [BIN]
set -u
BIN=${1:-gpu-bin}
OUT=${OUT:-/tmp/gpu-sanitize}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SAN_DIR=$(mktemp -d)
trap 'rm -rf "$SAN_DIR"' EXIT
# The wheel as PyPI ships it (sanitizer.whl), or its nvidia/ tree without the docs as
# sanitizer.tar.xz (9 MB against 18: room under the device tool's carry limit).
if [ -f "$BIN/sanitizer.tar.xz" ]; then
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$BIN/sanitizer.tar.xz" "$SAN_DIR" 2>/dev/null || tar -xJf "$BIN/sanitizer.tar.xz" -C "$SAN_DIR" ||
    { echo "cannot unpack $BIN/sanitizer.tar.xz"; exit 2; }
else
  python3 -m zipfile -e "$BIN/sanitizer.whl" "$SAN_DIR" 2>/dev/null || unzip -q "$BIN/sanitizer.whl" -d "$SAN_DIR" ||
    { echo "cannot unpack $BIN/sanitizer.whl (neither python3 nor unzip)"; exit 2; }
fi
# python3's zipfile keeps no file modes: every file of the wheel gets u+x.
chmod -R u+x "$SAN_DIR"/nvidia 2>/dev/null
# Wheels 13.0-13.2 (nvidia/cu13/bin, nvidia/cu13/lib) lack the launcher helpers
# (TreeLauncherSubreaper, TreeLauncherTargetLdPreloadHelper): under them every target
# "terminated before first instrumented API call" (session 30). 13.5.25 has them, beside
# the binary in nvidia/cu13/compute-sanitizer/, as the toolkit lays them out.
SAN=$(find "$SAN_DIR" -type f -path '*/compute-sanitizer/compute-sanitizer' | head -1)
[ -n "$SAN" ] || SAN=$(find "$SAN_DIR" -type f -name compute-sanitizer | head -1)
[ -n "$SAN" ] || { echo "no compute-sanitizer in $BIN/sanitizer.whl"; exit 2; }
[ -x "$SAN" ] || { echo "cannot make $SAN executable"; exit 2; }
[ -n "$(find "$SAN_DIR" -name TreeLauncherSubreaper)" ] ||
  echo "warning: this wheel has no TreeLauncherSubreaper; targets may not start (use 13.5.25 or later)"
# Injection libraries kept apart from the binary (the 13.0 wheel's nvidia/cu13/lib) are
# not found unless named.
INJ=$(find "$SAN_DIR" -type f -name 'libTreeLauncherTargetInjection.so' | head -1)
INJ_ARGS=()
[ -n "$INJ" ] && [ "$(dirname "$INJ")" != "$(dirname "$SAN")" ] && INJ_ARGS=(--injection-path "$(dirname "$INJ")")
"$SAN" --version | tail -1
status=0
ran=0
san() {  # name, seconds, tool, binary, gtest filter
  local name=$1 secs=$2 tool=$3 bin=$4 filter=$5
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || return 0
  ran=$((ran + 1))
  timeout "$secs" "$SAN" "${INJ_ARGS[@]}" --tool "$tool" --target-processes all --error-exitcode 99 \
    --print-limit 20 "$BIN/$bin" --gtest_filter="$filter" >"$OUT/$name.log" 2>&1
  local rc=$?
  local errors
  errors=$(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY)' "$OUT/$name.log" | sort | uniq -c | tr '\n' ' ')
  local tests
  tests=$(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$name.log" | tr '\n' ' ')
  printf '| %-28s | rc %-3s | %s| %s\n' "$name" "$rc" "$tests" "$errors"
  [ "$rc" = 0 ] || { status=1; grep -E '^=========|Failure|FAILED' "$OUT/$name.log" | head -30; }
}
SLOW='*Wedge*:*Stress*:*MixedCalls*:*SmallPostsAvoid*:*DeviceSync*:*CudaFree*:*ProxyStartedByAPost*'
san memcheck-transfer 300 memcheck cuda_transfer_test "*one_gpu:Tcp/TcpStagedTest.*/0:-$SLOW"
san memcheck-blob 60 memcheck cuda_blob_test '*'
KERNELS='*Moves513DescriptorsBothWays/one_gpu:*MergedRunsOfPagesMoveExactly/one_gpu:*SmallTransfersAreExact/one_gpu:*ScatteredDeviceToDeviceBothWays/0'
san racecheck-kernels 60 racecheck cuda_transfer_test "$KERNELS"
san synccheck-kernels 60 synccheck cuda_transfer_test "$KERNELS"
san initcheck-kernels 120 initcheck cuda_transfer_test "$KERNELS"
[ "$ran" -gt 0 ] || { echo "ONLY='${ONLY:-}' names no run"; exit 2; }
exit $status
