#!/bin/bash
# CTest driver: a run longer than --timeout is killed, and the report says so (the
# timeout and how long the source ran), not that the source merely left no result.
# Usage: lanebench_timeout_test.sh <lanebench binary> <json path>
set -u
bin=$1 json=$2
err=$("$bin" --transport tcp --shape single --single-bytes 4KiB --single-ops write --pairs 1 \
  --iters 100000 --stall-probe-ms 0 --timeout 1 --json "$json" 2>&1 >/dev/null)
rc=$?
echo "$err"
if [ "$rc" -ne 1 ]; then
  echo "exit code $rc, expected 1 (a run failed)"
  exit 1
fi
if [ "$(echo "$err" | grep -c 'the source timed out (--timeout 1 s): killed after 1\.[0-9] s')" -ne 2 ]; then
  echo "expected both runs to say that the source timed out and was killed"
  exit 1
fi
