#!/usr/bin/env bash
# Compiles each public header (include/varstate/*.h) on its own with a plain
# host compiler and no include path but include/: public headers may include
# only the standard library and other public headers (no Eigen, CUDA,
# protobuf or spdlog), the umbrella header varstate/varstate.h includes them
# all, and none names an internal of Variable.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
inc=$root/include
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for h in $(cd "$inc" && ls varstate/*.h); do
  [ "$h" = varstate/varstate.h ] && continue
  grep -qxF "#include \"$h\"" "$inc/varstate/varstate.h" ||
    { echo "varstate/varstate.h does not include public header $h"; exit 1; }
done
# Internals of Variable live in runtime/variable_access.h, not in the API.
if (cd "$inc" && grep -nwE 'update_mutex|set_value|mark_updated|update_state|state_handle|from_state_handle|VariableUpdateState|PartScatter' varstate/*.h); then
  echo "a public header names an internal of Variable (see runtime/variable_access.h)"; exit 1
fi
for h in $(cd "$inc" && ls varstate/*.h); do
  echo "#include \"$h\"" > "$tmp/check.cc"
  c++ -std=c++20 -fsyntax-only -DVARSTATE_HAVE_MPI=1 -I"$inc" "$tmp/check.cc" ||
    { echo "public header $h does not compile on its own"; exit 1; }
  n=$((n + 1))
done
echo "public headers: $n compile on their own"
