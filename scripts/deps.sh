#!/usr/bin/env bash
# Installs the Debian 12 packages kvlane builds and tests with (see docs/DEPENDENCIES.md).
# Skips apt when everything is already present.
set -euo pipefail
pkgs=(build-essential cmake git pkg-config libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libssl-dev libcli11-dev libfmt-dev gnuplot-nox iproute2
      python3-dev python3-pybind11 python3-pytest python3-numpy)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}"
fi
