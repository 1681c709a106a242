#!/usr/bin/env bash
# The main job: builds kvlane (installing what it needs), runs kvbench with its
# embedded default — two ranks on this host, the best transport present, a small
# grid, about a minute — then renders the run's documents with `kvbench summarize`
# (markdown tables and SVG charts) and prints where everything is. Extra arguments
# go to `kvbench run`; SUMMARY_DIR (default <out>/summary) moves the rendering.
# Exits with the run's code (0 valid, 1 a row failed or was not verified, 2 setup
# or control-plane error): a failed summary is reported but never hides it.
set -uo pipefail  # no -e: the run's exit code is kept through the summary step
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
BUILD_DIR=$build scripts/build.sh >&2 || exit 2
kvbench=$build/tools/kvbench/kvbench

out=kvbench-out  # `kvbench run`'s default --out
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --out) out=${args[i + 1]:-$out} ;;
    --out=*) out=${args[i]#--out=} ;;
  esac
done

"$kvbench" run "$@"
rc=$?

summary=${SUMMARY_DIR:-$out/summary}
if compgen -G "$out/*.json" >/dev/null; then
  "$kvbench" summarize "$out" --out "$summary"
  src=$?
  echo "[kvbench.sh] documents: $out/*.json"
  case $src in  # summarize's exit codes: tools/kvbench/README.md
    0|3) echo "[kvbench.sh] tables:    $summary/summary.md" ;;
    *) echo "[kvbench.sh] no summary (summarize exit $src, see above)" >&2 ;;
  esac
  if [ $src = 0 ]; then
    echo "[kvbench.sh] charts:    $summary/frontier.svg $summary/latency_vs_isl.svg"
  elif [ $src = 3 ]; then
    echo "[kvbench.sh] charts:    not rendered (summarize exit 3, see above; gnuplot installed?)" >&2
  fi
else
  echo "[kvbench.sh] no case document in $out: nothing to summarize" >&2
fi
[ $rc = 0 ] || echo "[kvbench.sh] kvbench run exited $rc: the run is not valid" >&2
exit $rc
