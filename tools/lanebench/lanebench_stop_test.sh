#!/bin/bash
# CTest driver: a lanebench orchestrator stopped by SIGTERM, or killed outright,
# leaves no worker running. Usage: lanebench_stop_test.sh <lanebench binary> <json path>
set -u
bin=$1 json=$2
status=0
tmp=${TMPDIR:-/tmp}
before=$(ls -d "$tmp"/lanebench-* 2>/dev/null)
for sig in TERM KILL; do
  "$bin" --transport tcp --shape single --single-bytes 2MiB --single-ops write --pairs 1 \
    --iters 100000 --stall-probe-ms 0 --json "$json" >/dev/null 2>&1 &
  orchestrator=$!
  workers=""
  for _ in $(seq 500); do
    workers=$(ps -o pid= --ppid "$orchestrator" | tr -d ' ' | tr '\n' ' ')
    [ "$(echo $workers | wc -w)" -ge 2 ] && break
    sleep 0.02
  done
  sleep 0.5
  kill -"$sig" "$orchestrator"
  wait "$orchestrator" 2>/dev/null
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
done
# A stopped orchestrator cannot remove its run directory: remove the ones made here.
for d in $(ls -d "$tmp"/lanebench-* 2>/dev/null); do
  echo "$before" | grep -qxF "$d" || rm -rf "$d"
done
exit $status
