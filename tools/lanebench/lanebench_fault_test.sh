#!/bin/bash
# CTest driver: --inject-fault flip-byte:N flips one received byte of measured iteration
# N of every run after it landed, and the verification catches it: that iteration is
# reported as failed (on stderr and in the JSON document), every run is invalid, the
# outcome is invalid and lanebench exits 1. Both places a payload lands: the source's
# buffer (read) and the target's (write); and in the mixed shape the small transfer's
# payload (flip-byte:N:small), on two targets (write) and on two lanes of one (read).
# --inject-fault repost:N: bytes moved after completion fail verification too.
# The same runs without the fault verify every iteration and exit 0, so each failure
# is the fault's.
# Usage: lanebench_fault_test.sh <lanebench binary> <json path>
set -u
bin=$1 json=$2
status=0
single=(--shape single --single-bytes 4KiB --single-ops read,write)
mixed_write=(--shape mixed --mixed-op write --mixed-peers 2)
mixed_read=(--shape mixed --mixed-op read --mixed-peers 1)

run() {  # run <extra flags...>: stderr to $err, exit code to $rc
  rm -f "$json"  # a document left by an earlier run must not answer for this one
  err=$("$bin" --transport tcp --pairs 1 --warmup 1 --iters 5 --stall-probe-ms 0 --idle-us 0 \
    --json "$json" "$@" 2>&1 >/dev/null)
  rc=$?
}

count() {  # count <pattern> <file>: lines of the file matching the pattern (grep -E)
  grep -cE -- "$1" "$2"
}

clean() {  # clean <flags...>: without a fault every measured iteration verifies, exit 0
  run "$@"
  if [ "$rc" -ne 0 ] || [ "$(count '"outcome": "ok"' "$json")" -ne 1 ]; then
    echo "without the fault ($*): exit code $rc (expected 0, outcome ok):"
    echo "$err"
    exit 1
  fi
}

# faulty <runs> <patterns> <flags...>: with the fault, each of the '|'-separated
# <patterns> (how a run's measured iteration 3, epoch 4, failed) is reported for both
# arms, every one of <runs> runs is invalid with that first failure, exit 1.
faulty() {
  local runs=$1 patterns=$2
  shift 2
  run "$@"
  local failed='FAILED: measured iteration 3 \(epoch 4\): '
  local ok=0
  [ "$rc" -eq 1 ] || { echo "$*: exit code $rc, expected 1 (a payload did not verify)"; ok=1; }
  IFS='|' read -ra how <<<"$patterns"
  for h in "${how[@]}"; do
    if [ "$(echo "$err" | grep -cE "$failed$h\$")" -ne 2 ]; then
      echo "$*: expected both arms' runs to report measured iteration 3 as failed: ...$h"
      ok=1
    fi
  done
  if [ ! -f "$json" ]; then
    echo "$*: no JSON document at $json"
    exit 1
  fi
  # Each line: how many lines of the document match, then the pattern (grep -E).
  while read -r n pattern; do
    if [ "$(count "$pattern" "$json")" -ne "$n" ]; then
      echo "$*: $json: expected $n line(s) matching '$pattern'"
      ok=1
    fi
  done <<END
1 "outcome": "invalid"(,|$)
1 "inject_fault": "$(echo "${@: -1}" | sed 's/[.]/\\./g')"(,|$)
1 "complete": true(,|$)
1 "runs": $runs(,|$)
1 "valid_runs": 0(,|$)
1 "measured_iterations": $((runs * 5))(,|$)
1 "verified_iterations": $((runs * 4))(,|$)
$runs "first_failure": "measured iteration 3 \(epoch 4\): 
$runs "valid": false(,|$)
0 "warning":
END
  if [ "$(grep -A1 -E '"failed_iterations": \[' "$json" | grep -cE '^ +3$')" -ne "$runs" ]; then
    echo "$*: $json: expected every run's failed_iterations to be [3]"
    ok=1
  fi
  if [ "$ok" -ne 0 ]; then
    echo "$err"
    grep -E '"(outcome|runs|valid_runs|measured_iterations|verified_iterations|first_failure|warning)":' "$json"
    status=1
  fi
}

clean "${single[@]}"
faulty 4 "xfer: first bad byte at offset 2048|xfer: target replied 'bad 4 2048'" \
  "${single[@]}" --inject-fault flip-byte:3
# The small transfer's payload is verified too (the flip used to hit the first, bulk, one
# only). 4 KiB: its middle byte is 2048.
clean "${mixed_write[@]}"
faulty 2 "small: target replied 'bad 4 2048'" "${mixed_write[@]}" --inject-fault flip-byte:3:small
clean "${mixed_read[@]}"
faulty 2 "small: first bad byte at offset 2048" "${mixed_read[@]}" --inject-fault flip-byte:3:small
# repost:N moves iteration N's bytes again after its completion, once the side they
# move from was overwritten (a transport still moving bytes after it reported
# completion): the verification must see it, though every byte moved in time was right.
faulty 4 "xfer: first bad byte at offset 0 \(moved after completion\)|xfer: target replied 'bad 4 0'" \
  "${single[@]}" --inject-fault repost:3
exit $status
