#!/usr/bin/env bash
# Runs the benchmark binaries of a build (or of a GPU bundle) and saves
# Google Benchmark JSON under bench/results/, named after the machine:
#   bench/run_benchmarks.sh BUILD_OR_BUNDLE_BIN_DIR [OUT_DIR] [filter]
# Each JSON file's "context" names the host, CPU and, via the
# varstate_devices field added here, the GPUs.
set -euo pipefail
bin=${1:?usage: run_benchmarks.sh BIN_DIR [OUT_DIR] [FILTER]}
out=${2:-$(dirname "$0")/results}
filter=${3:-.}
mkdir -p "$out"
find_bin() { for d in "$bin" "$bin/bench" "$bin/bin"; do [ -x "$d/$1" ] && { echo "$d/$1"; return; }; done; }
cli=$(find_bin varstate)
gpu=none
if [ -n "$cli" ]; then
  gpu=$("$cli" devices | awk '/GPU:0/ {for (i=2;i<=NF;i++) if ($i ~ /GiB/) break; else printf "%s%s", (i>2?"-":""), $i}')
  [ -n "$gpu" ] || gpu=none
fi
machine="$(hostname)-$(nproc)cpu-${gpu// /-}"
for b in bench_dense_update bench_variables bench_scatter bench_random bench_checkpoint bench_sharing; do
  exe=$(find_bin "$b") || true
  [ -n "$exe" ] || continue
  file="$out/${b#bench_}-${machine}.json"
  echo "== $b -> $file"
  "$exe" --benchmark_filter="$filter" --benchmark_out="$file" --benchmark_out_format=json \
         --benchmark_context=varstate_machine="$machine"
done
