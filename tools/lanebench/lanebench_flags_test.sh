#!/bin/bash
# CTest driver: values a flag cannot take are refused before any run, exit 2,
# naming the flag (they used to start runs: --timeout nan killed every run at
# once, --single-bytes -1 wrapped to 2^64 - 1 and crashed the workers).
# Usage: lanebench_flags_test.sh <lanebench binary>
set -u
bin=$1
status=0
check() {  # check <flag named in the message> <args...>
  local named=$1
  shift
  out=$("$bin" --transport tcp --stall-probe-ms 0 "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne 2 ] || ! echo "$out" | grep -q -- "$named" || echo "$out" | grep -q '^\[1/'; then
    echo "$*: exit code $rc (expected 2, naming $named, before any run):"
    echo "$out" | head -5
    status=1
  fi
}
check --timeout --timeout nan
check --timeout --timeout inf
check --timeout --timeout 1e-9
check --timeout --timeout -3
check --single-bytes --single-bytes -1
check --single-bytes --single-bytes 4KiB,2GiB
check --bulk-bytes --bulk-bytes 4
check --bulk-bytes --bulk-bytes 2GiB
check --small-bytes --small-bytes 2GiB
check --single-ops --single-ops write,write
check --single-bytes --single-bytes 4KiB,4096
# Counts past 1,000,000 (kvbench's bound): warmup + iters used to overflow an int,
# running 0 iterations ("verified: 0/-294967296").
check --warmup --warmup 2000000000 --iters 2000000000
check --warmup --warmup 1000001
check --iters --iters 1000001
check --pairs --pairs 1000001
check --iters --iters 0
check --pairs --pairs 0
# Testing only: a measured iteration of the run, 1..--iters.
check --inject-fault --inject-fault flip-byte:0
check --inject-fault --inject-fault flip-byte:6 --iters 5
check --inject-fault --inject-fault flip-byte:x
check --inject-fault --inject-fault flop
# A transfer of the mixed shape, named: not another name, and not where it has none.
check --inject-fault --inject-fault flip-byte:1:xfer --shape mixed
check --inject-fault --inject-fault flip-byte:1:small: --shape mixed
check --inject-fault --inject-fault flip-byte:1: --shape mixed
check --inject-fault --inject-fault flip-byte:1:small
check --inject-fault --inject-fault flip-byte:1:bulk --shape single
check --inject-fault --inject-fault repost
check --inject-fault --inject-fault repost:0
check --inject-fault --inject-fault repost:1:small --shape mixed
check --inject-fault --inject-fault stop-peer
check --inject-fault --inject-fault stop-peer:1:small
check --inject-fault --inject-fault stop-peer:1:x --shape mixed
exit $status
