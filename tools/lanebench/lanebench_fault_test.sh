#!/bin/bash
# CTest driver: --inject-fault flip-byte:N flips one received byte of measured iteration
# N of every run after it landed, and the verification catches it: that iteration is
# reported as failed (on stderr and in the JSON document), every run is invalid, the
# outcome is invalid and lanebench exits 1. Both places a payload lands: the source's
# buffer (read) and the target's (write). The same run without the fault verifies
# every iteration and exits 0, so the failure is the fault's.
# Usage: lanebench_fault_test.sh <lanebench binary> <json path>
set -u
bin=$1 json=$2
run() {  # run <extra flags...>: stderr to $err, exit code to $rc
  rm -f "$json"  # a document left by an earlier run must not answer for this one
  err=$("$bin" --transport tcp --shape single --single-bytes 4KiB --single-ops read,write \
    --pairs 1 --warmup 1 --iters 5 --stall-probe-ms 0 --idle-us 0 --json "$json" "$@" \
    2>&1 >/dev/null)
  rc=$?
}
status=0

run
if [ "$rc" -ne 0 ] || ! grep -qE '"verified_iterations": 20(,|$)' "$json"; then
  echo "without the fault: exit code $rc (expected 0, 20 of 20 iterations verified):"
  echo "$err"
  exit 1
fi

run --inject-fault flip-byte:3
echo "$err"
if [ "$rc" -ne 1 ]; then
  echo "exit code $rc, expected 1 (a payload did not verify)"
  status=1
fi
failed='FAILED: measured iteration 3 \(epoch 4\): xfer: '
for how in "first bad byte at offset 2048" "target replied 'bad 4 2048'"; do  # read, write
  if [ "$(echo "$err" | grep -cE "$failed$how\$")" -ne 2 ]; then
    echo "expected both arms' runs to report measured iteration 3 as failed: ...$how"
    status=1
  fi
done
if [ ! -f "$json" ]; then
  echo "no JSON document at $json"
  exit 1
fi
# Each line: how many lines of the document match, then the pattern (grep -E).
while read -r count pattern; do
  if [ "$(grep -cE -- "$pattern" "$json")" -ne "$count" ]; then
    echo "$json: expected $count line(s) matching '$pattern'"
    status=1
  fi
done <<END
1 "outcome": "invalid"(,|$)
1 "inject_fault": "flip-byte:3"(,|$)
1 "complete": true(,|$)
1 "runs": 4(,|$)
1 "valid_runs": 0(,|$)
1 "measured_iterations": 20(,|$)
1 "verified_iterations": 16(,|$)
4 "first_failure": "measured iteration 3 \(epoch 4\): xfer: 
4 "valid": false(,|$)
0 "warning":
END
if [ "$(grep -A1 -E '"failed_iterations": \[' "$json" | grep -cE '^ +3$')" -ne 4 ]; then
  echo "$json: expected every run's failed_iterations to be [3]"
  status=1
fi
if [ "$status" -ne 0 ]; then
  grep -E '"(outcome|runs|valid_runs|measured_iterations|verified_iterations|first_failure|warning)":' "$json"
fi
exit $status
