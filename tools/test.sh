#!/usr/bin/env bash
# Installs dependencies, builds and runs every test of one configuration:
#   tools/test.sh [BUILD_DIR] [extra cmake args...]
# Default: build/, CUDA kernels compiled when nvcc is present (GPU tests
# report "skipped" on machines without a GPU).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
bash "$root/tools/setup.sh"
# TensorFlow for the interop suite (cached venv); on failure the suite's
# CTest test fails with one clear line, the other tests still run.
case " $* " in
  *" -DVARSTATE_BUILD_INTEROP_TESTS=OFF "*) ;;
  *) bash "$root/tools/interop_venv.sh" >/dev/null || true ;;
esac
cmake -S "$root" -B "$build" -G Ninja "$@"
cmake --build "$build" -j"$(nproc)"
if ! ctest --test-dir "$build" --output-on-failure -j"$(nproc)"; then
  # A failing test's output can run to thousands of lines of log warnings,
  # and a CI report keeps only its head and tail: repeat the failed
  # assertions (Catch2's "FAILED:" blocks, with their test case and
  # expansion) and forked children's last words at the very end.
  log="$build/Testing/Temporary/LastTest.log"
  echo "== failed assertions (from $log):"
  grep -a -B12 -A16 -E ": FAILED:|child: " "$log" | grep -av "\] \[warning\] " | tail -n 250 || true
  exit 1
fi
