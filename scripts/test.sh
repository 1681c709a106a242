#!/usr/bin/env bash
# Builds kvlane and runs every CPU test (GPU-labelled tests are excluded here;
# scripts/gpu-check.sh runs them on a machine with GPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -LE gpu -j2 --timeout 600
