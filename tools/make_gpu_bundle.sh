#!/usr/bin/env bash
# Builds the CUDA configuration (sm_90, static libvarstate and libstdc++/libgcc:
# one copy of each in every binary) and packs the
# test and benchmark binaries, the CLI and the non-system shared libraries
# they need into a relocatable folder (default: bundle/), with an $ORIGIN
# rpath, so they run on a GPU host that has the CUDA driver and runtime but
# none of the build dependencies:
#   tools/make_gpu_bundle.sh [BUNDLE_DIR] [BUILD_DIR] [ARCHIVE]
# VARSTATE_BUNDLE_TARGETS (CMake targets, space-separated) builds and packs
# only those, e.g. what one lease's slots run; the binaries are stripped.
# With ARCHIVE, the bundle is also packed as ARCHIVE (tar, xz -9), the one
# file to carry to a GPU machine.
# On the GPU host:  bundle/gpu_check.sh (tests, the four compute-sanitizer
# tools, the demo; one summary line each), bundle/gpu_slots.sh (the GPU
# issue's slots inside one time budget), bundle/run_tests.sh and
# bundle/run_bench.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:-$root/bundle}
build=${2:-$root/build-bundle}
archive=${3:-}

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVARSTATE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DVARSTATE_BUILD_TESTS=ON -DVARSTATE_BUILD_BENCH=ON -DVARSTATE_SHARED=OFF \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" \
  -DCMAKE_BUILD_RPATH='$ORIGIN/../lib' -DCMAKE_SKIP_BUILD_RPATH=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" ${VARSTATE_BUNDLE_TARGETS:+--target $VARSTATE_BUNDLE_TARGETS}

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
find "$build/test" "$build/bench" "$build/tools/cli" -maxdepth 1 -type f -executable \
  \( -name 'test_*' -o -name 'bench_*' -o -name varstate \) | while read -r exe; do
  name=$(basename "$exe")
  # With VARSTATE_BUNDLE_TARGETS, only those (the CLI's target is varstate_cli).
  case " ${VARSTATE_BUNDLE_TARGETS:-$name} " in
    *" $name "*|*" ${name}_cli "*) cp "$exe" "$bundle/bin/" ;;
  esac
done
strip "$bundle"/bin/*
cp -r "$root/test/testdata" "$bundle/testdata"
# The device-parameterized binaries (CTest runs them a second time with
# VARSTATE_TEST_DEVICE=/device:GPU:0): one name a line.
ctest --test-dir "$build" --show-only=json-v1 | python3 -c '
import json, os, sys
for test in json.load(sys.stdin)["tests"]:
    # A test whose binary VARSTATE_BUNDLE_TARGETS left unbuilt has no command.
    if "command" not in test:
        continue
    for prop in test.get("properties", []):
        if prop["name"] == "ENVIRONMENT" and any(v.startswith("VARSTATE_TEST_DEVICE=") for v in prop["value"]):
            print(os.path.basename(test["command"][0]))
' | sort -u | while read -r t; do [ -x "$bundle/bin/$t" ] && echo "$t"; done > "$bundle/device_tests.txt"

# Non-system libraries: everything ldd resolves outside libc's own set and
# outside the CUDA toolkit (the GPU host has CUDA 13).
for exe in "$bundle"/bin/*; do
  ldd "$exe" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libgcc_s*|libstdc++*) ;;
    libcuda.so*|libcudart.so*|libcublas*.so*|libcurand*|libnvrtc*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done

cat > "$bundle/run_tests.sh" <<'SH'
#!/usr/bin/env bash
# Runs every test binary; GPU binaries exit 77 ("skipped") without a GPU.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH="$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VARSTATE_TESTDATA_DIR="$PWD/testdata"
pass=0; fail=0; skip=0
count() {
  case $1 in 0) pass=$((pass+1));; 77) skip=$((skip+1));; *) fail=$((fail+1)); echo "FAILED: $2 ($1)";; esac
}
for t in bin/test_*; do
  "$t" "$@"; count $? "$t"
done
# Device-parameterized binaries again, with their test bodies on GPU:0.
while read -r t; do
  VARSTATE_TEST_DEVICE=/device:GPU:0 "bin/$t" "$@"; count $? "$t on GPU:0"
done < device_tests.txt
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
SH
cat > "$bundle/run_bench.sh" <<'SH'
#!/usr/bin/env bash
# Runs the whole benchmark suite (`varstate bench --full`): JSON results, a
# table and, where gnuplot is installed, PNG plots in ${1:-results};
# ${2} filters the benchmarks by a regex.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH="$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
./bin/varstate bench --full --out "${1:-results}" --filter "${2:-.}"
SH
cp "$root/tools/gpu_check.sh" "$root/tools/gpu_slots.sh" "$bundle/"
chmod +x "$bundle"/*.sh
du -sh "$bundle"
if [ -n "$archive" ]; then
  mkdir -p "$(dirname "$archive")"
  tar -C "$(dirname "$bundle")" -cf - "$(basename "$bundle")" | xz -9 -T"$(nproc)" >"$archive"
  du -sh "$archive"
fi
