#!/usr/bin/env bash
# Compiles each public header on its own with a plain host compiler and no
# include path but the project's: public headers may include only the
# standard library and other varstate headers (no Eigen, CUDA, protobuf or
# spdlog), and the umbrella header varstate/varstate.h includes them all.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
# The umbrella header gives the whole public API: it includes every public header.
for h in $(cd "$root" && ls varstate/base/*.h varstate/device/*.h varstate/runtime/*.h varstate/checkpoint/*.h | grep -v -e '_internal\.h$'); do
  grep -qxF "#include \"$h\"" "$root/varstate/varstate.h" || { echo "varstate/varstate.h does not include public header $h"; exit 1; }
done
# Internals live in *_internal.h (varstate::internal), not in public headers.
if (cd "$root" && ls varstate/base/*.h varstate/device/*.h varstate/runtime/*.h varstate/checkpoint/*.h |
    grep -v -e '_internal\.h$' | xargs grep -nwE 'update_mutex|set_value|mark_updated|update_state|state_handle|from_state_handle|VariableUpdateState'); then
  echo "a public header names an internal of Variable (see runtime/variable_internal.h)"; exit 1
fi
for h in $(cd "$root" && ls varstate/*.h varstate/base/*.h varstate/device/*.h varstate/runtime/*.h varstate/checkpoint/*.h varstate/distributed/*.h 2>/dev/null | grep -v -e '_internal\.h$'); do
  echo "#include \"$h\"" > "$tmp/check.cc"
  c++ -std=c++20 -fsyntax-only -I"$root" "$tmp/check.cc" || { echo "public header $h does not compile on its own"; exit 1; }
  n=$((n + 1))
done
echo "public headers: $n compile on their own"
