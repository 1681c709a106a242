#!/bin/bash
# CTest driver: a run longer than --timeout is killed, and the report says so (the
# timeout and how long the source ran), not that the source merely left no result;
# so does the JSON document written to <json path>: the whole run complete but
# invalid, each run's error the timeout and its source killed (exit code -1).
# Usage: lanebench_timeout_test.sh <lanebench binary> <json path>
set -u
bin=$1 json=$2
rm -f "$json"  # a document left by an earlier run must not answer for this one
err=$("$bin" --transport tcp --shape single --single-bytes 4KiB --single-ops write --pairs 1 \
  --iters 100000 --stall-probe-ms 0 --timeout 1 --json "$json" 2>&1 >/dev/null)
rc=$?
echo "$err"
if [ "$rc" -ne 1 ]; then
  echo "exit code $rc, expected 1 (a run failed)"
  exit 1
fi
# Any kill time here; its value is checked below (a loaded machine may kill late).
timed_out='the source timed out \(--timeout 1 s\): killed after [0-9]+\.[0-9] s'
if [ "$(echo "$err" | grep -cE "$timed_out")" -ne 2 ]; then
  echo "expected both runs to say that the source timed out and was killed"
  exit 1
fi
if [ ! -f "$json" ]; then
  echo "no JSON document at $json"
  exit 1
fi
# Each line: how many lines of the document match, then the pattern (grep -E).
status=0
while read -r count pattern; do
  if [ "$(grep -cE -- "$pattern" "$json")" -ne "$count" ]; then
    echo "$json: expected $count line(s) matching '$pattern'"
    status=1
  fi
done <<END
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
if [ "$status" -ne 0 ]; then
  grep -E '"(outcome|complete|runs|runs_planned|valid_runs|error|source)":' "$json"
fi
exit $status
