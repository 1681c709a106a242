#!/bin/bash
# CTest driver: an unwritable --json refuses the run before any measurement (exit 2),
# and a run refused later (transport not available here) leaves its document alone,
# no temporary file beside it. Usage: lanebench_json_test.sh <lanebench binary>
set -u
bin=$1
status=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
small=(--shape single --single-bytes 4KiB --single-ops write --pairs 1
       --warmup 0 --iters 1 --stall-probe-ms 0)
for json in "$dir/missing/out.json" "$dir" ""; do
  out=$("$bin" --transport tcp "${small[@]}" --json "$json" 2>&1)
  rc=$?
  if [ "$rc" -ne 2 ] || echo "$out" | grep -q '^\[1/'; then
    echo "--json $json: exit code $rc (expected 2, before any run):"
    echo "$out"
    status=1
  fi
done
if [ -n "$(ls -A "$dir")" ]; then
  echo "the check left files behind: $(ls -A "$dir")"
  status=1
fi
# Refused after the check where there is no GPU: the document says why, and nothing
# else is left (where there is one, the short run leaves its document alone too).
"$bin" --transport cuda "${small[@]}" --json "$dir/out.json" >/dev/null 2>&1
rc=$?
if [ "$(ls -A "$dir")" != out.json ]; then
  echo "--transport cuda (exit code $rc): $dir holds '$(ls -A "$dir")', expected out.json alone"
  status=1
fi
# What the document says: refused (exit code 77), the outcome and a reason; a run that
# happened (exit code 0), outcome ok.
case $rc in
  77) expect=('"outcome": "not-available"' '"reason": "[^"]') ;;
  0) expect=('"outcome": "ok"') ;;
  *)
    echo "--transport cuda: exit code $rc, expected 77 (not available here) or 0"
    expect=()
    status=1
    ;;
esac
for line in "${expect[@]}"; do
  if ! grep -q -- "$line" "$dir/out.json" 2>/dev/null; then
    echo "--transport cuda (exit code $rc): no '$line' in its document:"
    grep -E '"(outcome|reason)"' "$dir/out.json"
    status=1
  fi
done
exit $status
