#!/usr/bin/env bash
# Runs the whole benchmark suite of a build (or of a GPU bundle) through
# `varstate bench --full`: Google Benchmark JSON (machine, devices and
# versions in its "context"), a Markdown table and PNG plots under OUT_DIR:
#   bench/run_benchmarks.sh BUILD_OR_BUNDLE_DIR [OUT_DIR] [FILTER]
# `varstate bench` without --full is the quick run (a minute on 2 cores).
set -euo pipefail
dir=${1:?usage: run_benchmarks.sh BUILD_OR_BUNDLE_DIR [OUT_DIR] [FILTER]}
out=${2:-$(dirname "$0")/results}
filter=${3:-.}
for cli in "$dir/tools/cli/varstate" "$dir/bin/varstate" "$dir/varstate"; do
  [ -x "$cli" ] && exec "$cli" bench --full --out "$out" --filter "$filter"
done
echo "run_benchmarks.sh: no varstate CLI in $dir/tools, $dir/bin or $dir" >&2
exit 1
