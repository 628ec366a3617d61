#!/usr/bin/env bash
# Compiles each public header on its own with a plain host compiler and no
# include path but the project's: public headers may include only the
# standard library and other varstate headers (no Eigen, CUDA, protobuf or
# spdlog).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for h in $(cd "$root" && ls varstate/*.h varstate/base/*.h varstate/device/*.h varstate/runtime/*.h varstate/checkpoint/*.h varstate/distributed/*.h 2>/dev/null | grep -v -e '_internal\.h$'); do
  echo "#include \"$h\"" > "$tmp/check.cc"
  c++ -std=c++20 -fsyntax-only -I"$root" "$tmp/check.cc" || { echo "public header $h does not compile on its own"; exit 1; }
  n=$((n + 1))
done
echo "public headers: $n compile on their own"
