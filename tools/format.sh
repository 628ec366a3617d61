#!/usr/bin/env bash
# Formats every tracked C++/CUDA source with the project's .clang-format
# (clang-format 14, from tools/setup.sh):
#   tools/format.sh           rewrite the files in place
#   tools/format.sh --check   list the files that differ; exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
# examples/readme/ holds the README's code blocks verbatim
# (tools/check_readme_examples.py): formatted by hand with the README.
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v -e '^test/testdata/' -e '^examples/readme/')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --style=file "$f" | cmp -s - "$f"; then
      echo "not formatted: $f (run tools/format.sh)"
      bad=1
    fi
  done
  [ "$bad" -eq 0 ] && echo "format: ${#files[@]} files formatted"
  exit "$bad"
fi
clang-format --style=file -i "${files[@]}"
