#!/usr/bin/env bash
# The main job: builds kvlane (installing what it needs), runs kvbench with its
# embedded default — two ranks on this host, the best transport present, a small
# grid, about a minute — then renders the run's documents with `kvbench summarize`
# (markdown tables and SVG charts) and prints where everything is. Extra arguments
# go to `kvbench run`; SUMMARY_DIR (default <out>/summary) moves the rendering.
# `kvbench run` runs in the caller's directory: a relative --out (default
# kvbench-out) and SUMMARY_DIR are relative to it, not to the repository.
# BUILD_DIR (default build) is relative to the repository root; KVBENCH_BIN names a
# kvbench binary to use instead of building one (tests; exit 2 when it is none).
# Only a run that wrote a document is rendered: after a run that wrote none (refused
# flags, a setup error) the documents of earlier runs in <out>, and their summary,
# are left as they are and said to be earlier runs', not presented as this one's.
# Exits with the run's code (0 valid, 1 a row failed or was not verified, 2 setup
# or control-plane error): a failed summary is reported but never hides it.
set -uo pipefail  # no -e: the run's exit code is kept through the summary step
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${KVBENCH_BIN:-}" ]; then
  kvbench=$KVBENCH_BIN
  if ! command -v "$kvbench" >/dev/null; then
    echo "[kvbench.sh] KVBENCH_BIN=$kvbench is no executable kvbench" >&2
    exit 2
  fi
else
  build=${BUILD_DIR:-build}
  case $build in /*) ;; *) build=$root/$build ;; esac
  (cd "$root" && BUILD_DIR=$build scripts/build.sh) >&2 || exit 2
  kvbench=$build/tools/kvbench/kvbench
fi

out=kvbench-out  # `kvbench run`'s default --out
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --out) out=${args[i + 1]:-$out} ;;
    --out=*) out=${args[i]#--out=} ;;
  esac
done
summary=${SUMMARY_DIR:-$out/summary}

# The documents in <out> (name, inode, modification time) before and after the run:
# a new or changed entry is this run's (kvbench writes each document anew and renames
# it into place). The trailing slash follows a symlinked <out>.
documents() {
  find "$out/" -maxdepth 1 -name '*.json' -printf '%f %i %T@\n' 2>/dev/null | LC_ALL=C sort
}
before=$(documents)
"$kvbench" run "$@"
rc=$?

written=()
while IFS= read -r entry; do
  [ -n "$entry" ] && written+=("${entry% * *}")
done < <(LC_ALL=C comm -13 <(printf '%s\n' "$before") <(documents))
if [ ${#written[@]} -gt 0 ]; then
  "$kvbench" summarize "$out" --out "$summary"
  src=$?
  echo "[kvbench.sh] documents: $out/*.json (this run wrote$(printf ' %q' "${written[@]}"))"
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
  echo "[kvbench.sh] this run wrote no document in $out: nothing rendered" >&2
  if compgen -G "$out/*.json" >/dev/null || [ -e "$summary" ]; then
    echo "[kvbench.sh] what $out holds (documents, $summary) is from earlier runs, not this one" >&2
  fi
fi
[ $rc = 0 ] || echo "[kvbench.sh] kvbench run exited $rc: the run is not valid" >&2
exit $rc
