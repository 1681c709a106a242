#!/usr/bin/env bash
# The main job: builds kvlane (installing what it needs) and runs kvbench with its
# embedded default — two ranks on this host, host memory, a small grid, about a
# minute — then prints the summary. Extra arguments go to `kvbench run`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build} scripts/build.sh >&2
exec "${BUILD_DIR:-build}/tools/kvbench/kvbench" run "$@"
