#!/bin/bash
# CTest driver: scripts/kvbench.sh, the README's main command, with a built kvbench
# (KVBENCH_BIN: no build). A relative --out lands in the caller's directory (the
# script used to cd to the repository first), and a run that wrote no document
# (here: refused flags) exits with the run's code and renders nothing: it used to
# re-render the earlier run's document and print "tables: ... charts: ..." as if fine.
# A run into a symlinked --out is found; a wrong KVBENCH_BIN exits 2.
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
[ -f "$tmp/rel-out/kv-dsv4-b256-shm-isl8k-b1-push.json" ] || fail "--out rel-out: no document in the caller's directory"
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

# A symlinked --out: `find "$out" -newer` did not follow it, so a valid run said it
# "wrote no document". The run writes over run1's document: a changed one counts too.
ln -s rel-out linked-out
"$script" "${common[@]}" --out linked-out >run3.txt 2>&1
rc=$?
[ "$rc" = 0 ] || fail "a run into a symlinked --out: exit $rc"
grep -q 'wrote no document' run3.txt && fail "a run into a symlinked --out says it wrote no document"
grep -q '^\[kvbench.sh\] tables: ' run3.txt || fail "a run into a symlinked --out: no tables line"
grep -q 'this run wrote kv-dsv4-b256-shm-isl8k-b1-push.json)' run3.txt ||
  fail "a run into a symlinked --out does not name the document it rewrote"
[ "$status" = 0 ] || cat run3.txt

# A case name with glob characters is printed shell-quoted, not expanded (to run1's).
"$script" "${common[@]}" --out rel-out --case 'g*' >run4.txt 2>&1
rc=$?
[ "$rc" = 0 ] || fail "a run with --case 'g*': exit $rc"
grep -qF 'this run wrote g\*.json)' run4.txt || fail "--case 'g*': the document is not named as it is"
[ "$status" = 0 ] || cat run4.txt

# A KVBENCH_BIN that is no program is a setup error (2), not the shell's 127.
KVBENCH_BIN=$tmp/no-such-kvbench "$script" "${common[@]}" --out rel-out >run5.txt 2>&1
rc=$?
[ "$rc" = 2 ] || fail "a missing KVBENCH_BIN: exit $rc, not 2"
grep -q 'KVBENCH_BIN=.*no executable kvbench' run5.txt || fail "a missing KVBENCH_BIN is not named"
[ "$status" = 0 ] || cat run5.txt
exit $status
