#!/bin/bash
# CTest driver: a lanebench orchestrator stopped by SIGTERM or SIGINT stops its
# workers, removes its run directory and exits 128 + the signal; one killed
# outright (SIGKILL) leaves no worker running either (its directory stays).
# Usage: lanebench_stop_test.sh <lanebench binary> <json path>
set -u
bin=$1 json=$2
status=0
# A private TMPDIR: the run directories seen there are this test's alone.
export TMPDIR=$(mktemp -d)
trap 'rm -rf "$TMPDIR"' EXIT
for sig in TERM INT KILL; do
  # env: a background job of a script starts with SIGINT ignored.
  env --default-signal=INT "$bin" --transport tcp --shape single --single-bytes 2MiB \
    --single-ops write --pairs 1 --iters 100000 --stall-probe-ms 0 --json "$json" \
    >/dev/null 2>&1 &
  orchestrator=$!
  workers=""
  for _ in $(seq 500); do
    workers=$(ps -o pid= --ppid "$orchestrator" | tr -d ' ' | tr '\n' ' ')
    [ "$(echo $workers | wc -w)" -ge 2 ] && break
    sleep 0.02
  done
  sleep 0.5
  kill -"$sig" "$orchestrator"
  wait "$orchestrator"
  rc=$?
  for w in $workers; do
    for _ in $(seq 250); do
      { [ -e /proc/$w ] && [ "$(awk '{print $3}' /proc/$w/stat 2>/dev/null)" != Z ]; } || break
      sleep 0.02
    done
    if [ -e /proc/$w ] && [ "$(awk '{print $3}' /proc/$w/stat 2>/dev/null)" != Z ]; then
      echo "SIG$sig: worker $w outlived its orchestrator"
      kill -KILL "$w"
      status=1
    fi
  done
  expected=$((128 + $(kill -l "$sig")))
  if [ "$rc" -ne "$expected" ]; then
    echo "SIG$sig: the orchestrator exited with $rc, expected $expected"
    status=1
  fi
  left=$(ls -d "$TMPDIR"/lanebench-* 2>/dev/null)
  if [ "$sig" != KILL ] && [ -n "$left" ]; then
    echo "SIG$sig: the run directory was left behind: $left"
    status=1
  fi
  rm -rf "$TMPDIR"/lanebench-*  # SIGKILL: the orchestrator could not remove it
done
exit $status
