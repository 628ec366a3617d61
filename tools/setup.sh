#!/usr/bin/env bash
# Installs the Debian packages varstate needs to build, test and benchmark.
# Idempotent: does nothing when every package is already installed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libeigen3-dev libprotobuf-dev protobuf-compiler
  libspdlog-dev libfmt-dev catch2 libleveldb-dev libsnappy-dev libbenchmark-dev
  clang libclang-rt-14-dev
  python3 python3-venv
  libcli11-dev nlohmann-json3-dev gnuplot-nox
  libopenmpi-dev openmpi-bin clang-format
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
