#!/usr/bin/env bash
# The GPU host's whole check, in one go (issue: GPU correctness): every test
# binary, then compute-sanitizer's memcheck, racecheck, initcheck and
# synccheck over the GPU test binaries (quick mode: smaller sweeps, same
# code paths, tests tagged [large] left out; memcheck also tracks
# stream-ordered allocation races: use before cudaMallocAsync completes,
# use after cudaFreeAsync), then `varstate demo` on GPU:0. Prints one summary line per
# step and exits non-zero if any step failed. Runs from a GPU bundle
# (tools/make_gpu_bundle.sh puts it at bundle/gpu_check.sh) or from a build
# folder:   gpu_check.sh [BIN_DIR]   (default: the bundle's bin/)
# Each sanitizer step is capped at VARSTATE_SANITIZER_BUDGET seconds per
# binary (default 90), so the whole run fits in a few minutes on an H100.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/bin}
[ -d "$here/lib" ] && export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
[ -d "$here/testdata" ] && export VARSTATE_TESTDATA_DIR="$here/testdata"
budget=${VARSTATE_SANITIZER_BUDGET:-90}
log=${VARSTATE_CHECK_LOG:-$(mktemp -d)}
mkdir -p "$log"
summary=()
failed=0

# 1. every test binary (GPU binaries exit 77 = skipped when no GPU is seen)
# Device-parameterized binaries (tools/make_gpu_bundle.sh lists them) run
# twice: test bodies on CPU:0, then on GPU:0.
device_tests=$here/device_tests.txt
[ -f "$device_tests" ] || device_tests=/dev/null
pass=0; fail=0; skip=0; failures=""
count() {  # rc name
  case $1 in
    0) pass=$((pass + 1)) ;;
    77) skip=$((skip + 1)) ;;
    *) fail=$((fail + 1)); failures="$failures $2($1)" ;;
  esac
}
for t in "$bin"/test_*; do
  name=$(basename "$t")
  "$t" >"$log/$name.log" 2>&1; count $? "$name"
done
while read -r name; do
  VARSTATE_TEST_DEVICE=/device:GPU:0 "$bin/$name" >"$log/$name.on_gpu.log" 2>&1
  count $? "$name/GPU:0"
done < "$device_tests"
summary+=("tests: $pass passed, $fail failed, $skip skipped${failures:+ -- failed:$failures}")
[ "$fail" -eq 0 ] || failed=1

# 2. compute-sanitizer over the GPU test binaries, quick mode
# GPU-only binaries, and the device-parameterized ones (bodies on GPU:0).
gpu_bins=$( (cd "$bin" && ls test_*_gpu 2>/dev/null; cat "$device_tests") | sort -u)
if ! command -v compute-sanitizer >/dev/null; then
  summary+=("sanitizers: compute-sanitizer not found")
  failed=1
else
  for tool in memcheck racecheck initcheck synccheck; do
    errors=0; timed_out=""; bad=""
    options=()
    [ "$tool" = memcheck ] && options=(--track-stream-ordered-races all)
    # Stores by TMA bulk copies (cuBLAS's Hopper kernels) count as writes.
    case $tool in memcheck|initcheck) options+=(--check-bulk-copy yes) ;; esac
    for name in $gpu_bins; do
      out="$log/$name.$tool.log"
      VARSTATE_TEST_DEVICE=/device:GPU:0 VARSTATE_TEST_QUICK=1 timeout "$budget" \
        compute-sanitizer --tool "$tool" ${options[@]+"${options[@]}"} --error-exitcode 99 \
        "$bin/$name" "~[large]" >"$out" 2>&1
      rc=$?
      # "ERROR SUMMARY: N errors" (memcheck, initcheck, synccheck; not the
      # "... were not printed" line past the print limit), "(N errors," (racecheck)
      n=$(grep -a -o -E 'ERROR SUMMARY: [0-9]+ errors?$|\([0-9]+ errors?,' "$out" | tail -n 1 | grep -o -E '[0-9]+')
      errors=$((errors + ${n:-0}))
      case $rc in
        0|77) ;;
        124) timed_out="$timed_out $name" ;;
        *) bad="$bad $name($rc)" ;;
      esac
    done
    line="$tool: $errors errors"
    [ -n "$bad" ] && line="$line; failed:$bad"
    [ -n "$timed_out" ] && line="$line; over ${budget}s:$timed_out"
    summary+=("$line")
    [ "$errors" -eq 0 ] && [ -z "$bad" ] && [ -z "$timed_out" ] || failed=1
  done
fi

# 3. the main job on GPU:0
demo_dir=$(mktemp -d)
if "$bin/varstate" demo --checkpoint_dir "$demo_dir" >"$log/demo.log" 2>&1; then
  summary+=("demo: ok ($(grep -m1 -o 'GPU:0' "$log/demo.log" >/dev/null && echo 'used GPU:0' || echo 'no GPU:0 in its output'))")
else
  summary+=("demo: FAILED (see $log/demo.log)")
  failed=1
fi
rm -rf "$demo_dir"

echo "== gpu_check summary (logs in $log)"
printf '%s\n' "${summary[@]}"
exit "$failed"
