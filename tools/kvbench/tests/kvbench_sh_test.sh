#!/bin/bash
# CTest driver: scripts/kvbench.sh, the README's main command, with a built kvbench
# (KVBENCH_BIN: no build). A relative --out lands in the caller's directory (the
# script used to cd to the repository first), and a run that wrote no document
# (here: refused flags) exits with the run's code and renders nothing: it used to
# re-render the earlier run's document and print "tables: ... charts: ..." as if fine.
# Usage: kvbench_sh_test.sh <scripts/kvbench.sh> <kvbench binary>
set -u
script=$1
export KVBENCH_BIN=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
status=0
fail() {
  echo "FAIL: $*"
  status=1
}
common=(--transport shm --isl 8192 --batches 1 --ops push --warmup 0 --samples 1 --trials 1
  --pool-budget 1GiB --control-timeout 60s)

"$script" "${common[@]}" --out rel-out >run1.txt 2>&1
rc=$?
[ "$rc" = 0 ] || fail "a valid run: exit $rc"
[ -f "$tmp/rel-out/kv-dsv4-b256-shm.json" ] || fail "--out rel-out: no document in the caller's directory"
grep -q '^\[kvbench.sh\] tables: ' run1.txt || fail "a valid run: no tables line"
[ "$status" = 0 ] || cat run1.txt

touch marker
"$script" "${common[@]}" --isl -5 --out rel-out >run2.txt 2>&1
rc=$?
[ "$rc" = 2 ] || fail "a refused run: exit $rc, not the run's 2"
grep -q 'tables:\|charts:' run2.txt && fail "a refused run presents tables or charts"
grep -q 'wrote no document' run2.txt || fail "a refused run does not say it wrote no document"
[ -z "$(find rel-out -newer marker)" ] || fail "a refused run rewrote: $(find rel-out -newer marker)"
[ "$status" = 0 ] || cat run2.txt
exit $status
