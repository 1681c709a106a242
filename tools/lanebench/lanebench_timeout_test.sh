#!/bin/bash
# CTest driver for --timeout, three ways a run meets it; each leaves the whole plan
# complete but invalid (exit 1), and says why on stderr and in the JSON document
# written to <json path>:
#  1. a source that does not get to its iterations in time (here: a host-stall probe
#     longer than the timeout) is killed, and the report says so (the timeout and how
#     long the source ran), not that the source merely left no result: its exit code -1;
#  2. a run too long for it (100000 iterations in 2 s): the source stops itself at its
#     own deadline, before the kill, and its result keeps the samples of the iterations
#     before (exit code 1);
#  3. a transfer that never completes (its target stopped: --inject-fault
#     stop-peer:3:small): the source gives up at its deadline, naming the transfer, its
#     last Check() status and the iteration, with the samples of iterations 1 and 2.
# Usage: lanebench_timeout_test.sh <lanebench binary> <json path>
set -u
bin=$1 json=$2
status=0
run() {  # run <flags...>: stderr to $err, exit code to $rc
  rm -f "$json"  # a document left by an earlier run must not answer for this one
  err=$("$bin" --transport tcp --pairs 1 --json "$json" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "$*: exit code $rc, expected 1 (a run failed)"
    echo "$err"
    exit 1
  fi
  if [ ! -f "$json" ]; then
    echo "$*: no JSON document at $json"
    exit 1
  fi
}
expect() {  # expect <what> < "count pattern" lines: matches in the document (grep -E)
  local ok=0
  while read -r n pattern; do
    if [ "$(grep -cE -- "$pattern" "$json")" -ne "$n" ]; then
      echo "$1: $json: expected $n line(s) matching '$pattern'"
      ok=1
    fi
  done
  if [ "$ok" -ne 0 ]; then
    echo "$err"
    grep -E '"(outcome|complete|runs|valid_runs|error|source|verified)":' "$json"
    status=1
  fi
}
reported() {  # reported <what> <pattern>: both runs' progress lines say it (grep -E)
  if [ "$(echo "$err" | grep -cE -- "$2")" -ne 2 ]; then
    echo "$1: expected both runs to report '$2':"
    echo "$err"
    status=1
  fi
}

# 1. Killed.
run --shape single --single-bytes 4KiB --single-ops write --iters 5 --stall-probe-ms 3000 \
  --timeout 1
# Any kill time here; its value is checked below (a loaded machine may kill late).
timed_out='the source timed out \(--timeout 1 s\): killed after [0-9]+\.[0-9] s'
reported killed "FAILED: $timed_out"
expect killed <<END
1 "outcome": "invalid",
1 "complete": true
1 "runs": 2,
1 "valid_runs": 0,
2 "error": "$timed_out"
2 "source": -1
END
# Killed at the timeout: not before it, and not long after it (10 s: room for a
# loaded machine), as reported and in the document.
killed=$({ echo "$err"; grep -E '"error":' "$json"; } |
  grep -oE 'killed after [0-9]+\.[0-9] s' | awk '{print $3}')
if [ "$(echo "$killed" | awk '$1 >= 1.0 && $1 < 10' | wc -l)" -ne 4 ]; then
  echo "expected 4 kill times (2 reported, 2 in $json) of 1.0 s to 10 s, got:" $killed
  status=1
fi

# 2. Too long: the source's own deadline, 1 s (a quarter, at most 1 s) before the
# kill. 6 s: room for a sanitized source on a loaded host to set up and start.
run --shape single --single-bytes 4KiB --single-ops write --warmup 0 --iters 100000 \
  --stall-probe-ms 0 --timeout 6
deadline='\(--timeout 6 s, less 1 s for the source to write its result\)'
stopped="timeout: measured iteration [0-9]+ \(epoch [0-9]+\): .*$deadline"
reported "too long" "FAILED: $stopped"
expect "too long" <<END
1 "outcome": "invalid",
1 "complete": true
1 "valid_runs": 0,
2 "error": "$stopped"
2 "source": 1
2 "verified": [1-9][0-9]*,
2 "p50_us": [0-9]
END

# 3. A transfer that never completes.
run --shape mixed --mixed-op write --mixed-peers 2 --warmup 1 --iters 5 --stall-probe-ms 0 \
  --idle-us 0 --timeout 6 --inject-fault stop-peer:3:small
stuck="timeout: measured iteration 3 \(epoch 4\): not complete by the source's deadline: small \
\(transfer 1; last Check\(\): in-progress\) $deadline"
reported stuck "FAILED: $stuck"
expect stuck <<END
1 "outcome": "invalid",
1 "complete": true
1 "valid_runs": 0,
2 "error": "$stuck"
2 "verified": 2,
2 "small_p50_us": [0-9]
END
exit $status
