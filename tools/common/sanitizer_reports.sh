#!/bin/bash
# CTest wrapper of a tool's script test in a sanitized build (the shell and CMake
# drivers; its GoogleTest binaries use sanitizer_reports.h): runs the test command
# with the reports of every process it starts sent to a file of their own (the
# sanitizers' log_path), so that one whose stderr the driver drops, or which its
# orchestrator kills or waits out, still counts. Fails when any report was written,
# showing them; otherwise exits as the command did.
# Usage: sanitizer_reports.sh COMMAND [ARG...]
set -u
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvlane_tool_sanitizer_XXXXXX")
trap 'rm -rf "$dir"' EXIT
for var in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS; do
  export "$var=${!var:+${!var}:}log_path=$dir/report"
done
"$@"
rc=$?
reports=("$dir"/report.*)
if [ -e "${reports[0]}" ]; then
  for r in "${reports[@]}"; do
    echo "=== sanitizer report: ${r##*/} ==="
    cat "$r"
  done
  echo "${#reports[@]} sanitizer report(s) from the test's processes (exit code $rc)"
  exit 1
fi
exit $rc
