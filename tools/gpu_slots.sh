#!/usr/bin/env bash
# Runs slots of the real-GPU issue (docs/gpu.md, "Real GPUs") from an
# unpacked GPU bundle (tools/make_gpu_bundle.sh) on a lent GPU machine, inside
# one time budget, and leaves every log under OUT_DIR as at most one tarball
# per slot (the device tool returns 8 files):
#   gpu_slots.sh OUT_DIR DEADLINE_S SLOT...      SLOT: A, B, C, D, E, E2 or H
# Every step is capped by what is left of DEADLINE_S (seconds from the start),
# so the script returns, with its logs, before the caller's own limit. The last
# lines printed are one summary line per step.
#   A  probe (nvidia-smi, compute-sanitizer, a 10-s memcheck); the GPU-only
#      test binaries ([large] included) and the device-parameterized ones on
#      GPU:0, in parallel; `varstate demo` on the GPU (sgd, adam, adagrad,
#      --dynamic, --device all) and on the CPU, --resume across devices; the
#      GPU checkpoints tarred back (slotA-ckpts.tar.xz)
#   B  compute-sanitizer memcheck (--track-stream-ordered-races all) and
#      initcheck over the GPU-only binaries, quick mode, ~[large]
#   C  the same over the device-parameterized binaries, bodies on GPU:0
#   D  racecheck and synccheck over the GPU-only binaries
#   E  PyTorch side by side on CUDA: bench/compare_torch_demo.py, then
#      bench_dynamic on GPU:0, then bench/compare_torch_scatter.py (needs the
#      source tree beside the bundle: the bundle at the repository's bundle/)
#   E2 the Google Benchmark suites' GPU cases, each against its limit
#      measured in the same run (bench_optimizer: dense Adam against the
#      device copy bandwidth, sparse optimizers; bench_random, bench_math_ops,
#      bench_dense_update, bench_checkpoint, bench_scatter), those in the
#      bundle, JSON each
#   H  the GPU machine's own CPU, whose cores and caches differ from the
#      2-vCPU VM's where the CPU kernels' thresholds were set:
#      bench_sparse_limit (every float32 case), the training ops' two
#      numberings call by call at 262,144 to 1M uniform ids (the sort
#      threshold), bfloat16 up to 65,536 ids, and scatter_add of 1M ids
#      on one thread against the pool (the scatters' split trials)
set -uo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
deadline=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)  # the repository, when the bundle sits in it
bin=$here/bin
start=$SECONDS
summary=()

export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VARSTATE_TESTDATA_DIR="$here/testdata"
# cuBLAS: the toolkit's, else the one PyTorch's wheels carry.
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas.so.13' && [ ! -e /usr/local/cuda/lib64/libcublas.so.13 ]; then
  for d in $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cublas", "lib") for p in nvidia.__path__))' 2>/dev/null); do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"
  done
fi

left() { echo $((deadline - (SECONDS - start))); }
# cap SECONDS: the smaller of SECONDS and what is left less a reserve of 20 s
cap() { local l=$(($(left) - 20)); [ "$l" -lt "$1" ] && echo $((l > 1 ? l : 1)) || echo "$1"; }
note() { summary+=("$*"); echo "== $*"; }

# run_one LOGDIR BUDGET ENV TOOL NAME: runs bin/NAME (NAME@GPU0: the same
# binary, a second run) as `env ENV timeout BUDGET TOOL bin/NAME $TEST_ARGS`;
# its log LOGDIR/NAME.log, its exit code LOGDIR/NAME.rc (124: over BUDGET).
run_one() {
  local logdir=$1 budget=$2 devenv=$3 tool=$4 name=$5
  set -f  # TEST_ARGS holds Catch2 tags: no globbing
  # shellcheck disable=SC2086  # ENV, TOOL and TEST_ARGS are word lists
  env $devenv timeout "$budget" $tool "$bin/${name%%@*}" ${TEST_ARGS:-} >"$logdir/$name.log" 2>&1
  echo $? >"$logdir/$name.rc"
}
export -f run_one
export bin
# run_parallel LOGDIR JOBS BUDGET ENV TOOL NAME...: run_one for each NAME, at
# most JOBS at once.
run_parallel() {
  local logdir=$1 jobs=$2 budget=$3 devenv=$4 tool=$5; shift 5
  mkdir -p "$logdir"
  printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ "$logdir" "$budget" "$devenv" "$tool" {}
}
# tally LOGDIR: "P passed, F failed (names), S skipped, T over time"
tally() {
  local p=0 f=0 s=0 t=0 bad=""
  for rc_file in "$1"/*.rc; do
    local n; n=$(basename "$rc_file" .rc); local rc; rc=$(cat "$rc_file")
    case $rc in 0) p=$((p + 1)) ;; 77) s=$((s + 1)) ;; 124) t=$((t + 1)); bad="$bad $n(time)" ;;
      *) f=$((f + 1)); bad="$bad $n($rc)" ;; esac
  done
  echo "$p passed, $f failed, $s skipped, $t over time${bad:+ --$bad}"
}

# The errors a compute-sanitizer log reports: memcheck, initcheck and
# synccheck end with "ERROR SUMMARY: N errors" (then, past the print limit,
# "ERROR SUMMARY: M errors were not printed"), racecheck with
# "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)".
sanitizer_errors() {
  grep -a -o -E 'ERROR SUMMARY: [0-9]+ errors?$|\([0-9]+ errors?,' "$1" | tail -n 1 | grep -o -E '[0-9]+'
}

gpu_only=$(cd "$bin" && ls test_*_gpu)
device_tests=$(cat "$here/device_tests.txt")

slot_a() {
  local d=$out/slotA; mkdir -p "$d"
  { nvidia-smi; nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,driver_version --format=csv
    compute-sanitizer --version; uname -a; nproc; free -g; } >"$d/probe.log" 2>&1
  for b in "$bin"/test_*_gpu "$bin/varstate"; do ldd "$b" | grep 'not found' && echo "MISSING LIBRARY: $b"; done >>"$d/probe.log" 2>&1
  timeout 10 compute-sanitizer --tool memcheck --error-exitcode 99 "$bin/test_device_gpu" >"$d/probe-memcheck.log" 2>&1
  local rc=$?
  note "A probe: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | head -1); sanitizer: $(compute-sanitizer --version 2>&1 | tail -1); 10-s memcheck rc $rc ($(grep -o 'ERROR SUMMARY: [0-9]*' "$d/probe-memcheck.log" | tail -1))"

  # The main job, in the background while the tests run: GPU and CPU, the GPU
  # checkpoints kept. Its throughput is slot E's business, not this one's.
  local ck=$out/ckpts; mkdir -p "$ck"
  demo() {  # NAME ARGS...
    local name=$1; shift
    if timeout "$(cap 90)" "$bin/varstate" demo --json "$d/demo-$name.json" "$@" >"$d/demo-$name.log" 2>&1; then
      echo "demo $name: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(" ".join(f"{k}={j[k]}" for k in ("optimizer", "first_step", "steps", "steps_per_s", "rmse_after") if k in j))' "$d/demo-$name.json" 2>&1)"
    else
      echo "demo $name: FAILED ($(tail -1 "$d/demo-$name.log"))"
    fi
  }
  (
    # The checkpoints that come back keep only the latest (and its chain).
    for opt in sgd adam adagrad; do
      demo "gpu-$opt" --device gpu --optimizer "$opt" --max_to_keep 1 --checkpoint_dir "$ck/gpu-$opt"
      demo "cpu-$opt" --device cpu --optimizer "$opt" --checkpoint_dir "$ck/cpu-$opt"
    done
    demo gpu-full --device gpu --full_checkpoints --checkpoint_dir "$ck/gpu-full"
    demo all --device all --max_to_keep 1 --checkpoint_dir "$ck/all"
    demo gpu-dynamic --device gpu --dynamic --max_to_keep 1 --checkpoint_dir "$ck/gpu-dynamic"
    demo all-dynamic --device all --dynamic --checkpoint_dir "$ck/all-dynamic"
    demo cpu-dynamic --device cpu --dynamic --checkpoint_dir "$ck/cpu-dynamic"
    # --resume across devices: 500 more steps on the other device.
    cp -r "$ck/gpu-sgd" "$ck/resume-gpu-to-cpu"; cp -r "$ck/cpu-sgd" "$ck/resume-cpu-to-gpu"
    cp -r "$ck/gpu-dynamic" "$ck/resume-dyn-gpu-to-cpu"
    demo resume-gpu-to-cpu --device cpu --resume --steps 4500 --checkpoint_dir "$ck/resume-gpu-to-cpu"
    demo resume-cpu-to-gpu --device gpu --resume --steps 4500 --checkpoint_dir "$ck/resume-cpu-to-gpu"
    demo resume-dyn-gpu-to-cpu --device cpu --dynamic --resume --steps 4500 --checkpoint_dir "$ck/resume-dyn-gpu-to-cpu"
    for c in gpu-sgd gpu-adam gpu-dynamic all; do
      "$bin/varstate" inspect "$ck/$c/model-4000" >"$d/inspect-$c.txt" 2>&1
    done
  ) >"$d/demo-summary.txt" 2>&1 &
  local demos=$!

  # Every GPU-only binary ([large] included) and each device-parameterized
  # one with its bodies on GPU:0, six at a time.
  local names=$gpu_only
  for t in $device_tests; do names="$names $t@GPU0"; done
  # shellcheck disable=SC2086
  TEST_ARGS="--durations yes" run_parallel "$d/tests" 6 "$(cap 300)" "VARSTATE_TEST_DEVICE=/device:GPU:0" "" $names
  note "A tests: $(tally "$d/tests")"
  for f in "$d"/tests/*.log; do echo "$(basename "$f"): $(grep -E 'test cases|All tests passed|skipping' "$f" | tail -1)"; done >"$d/tests-summary.txt"
  wait "$demos"
  note "A demo: $(grep -c '^demo ' "$d/demo-summary.txt") runs, $(grep -c FAILED "$d/demo-summary.txt") failed"
  cat "$d/demo-summary.txt"
  # One tarball per checkpoint folder that comes back (each under 16 MiB).
  for c in gpu-sgd gpu-adam gpu-dynamic all; do
    tar -C "$ck" -cJf "$out/slotA-ckpt-$c.tar.xz" "$c" 2>/dev/null
    [ "$(stat -c %s "$out/slotA-ckpt-$c.tar.xz")" -lt 16000000 ] || { rm -f "$out/slotA-ckpt-$c.tar.xz"; note "A: checkpoint $c over 16 MB, not returned"; }
  done
  rm -rf "$ck"
  tar -C "$out" -cJf "$out/slotA-logs.tar.xz" slotA && rm -rf "$d"
}

# sanitize SLOT "TOOL..." BINARY...: each compute-sanitizer tool (memcheck
# tracks stream-ordered races) over the binaries, quick mode, ~[large],
# eight at a time, the test bodies on GPU:0.
sanitize() {
  local slot=$1 tools=$2; shift 2
  local d=$out/slot$slot; mkdir -p "$d"
  local tool
  for tool in $tools; do
    local opts="--tool $tool --error-exitcode 99"
    [ "$tool" = memcheck ] && opts="$opts --track-stream-ordered-races all"
    # Stores by TMA bulk copies (cuBLAS's Hopper kernels) count as writes.
    case $tool in memcheck|initcheck) opts="$opts --check-bulk-copy yes" ;; esac
    local budget; budget=$(cap 150)
    [ "$budget" -lt 30 ] && { note "$slot $tool: no time left"; continue; }
    TEST_ARGS='~[large]' run_parallel "$d/$tool" 8 "$budget" \
      "VARSTATE_TEST_DEVICE=/device:GPU:0 VARSTATE_TEST_QUICK=1" "compute-sanitizer $opts" "$@"
    local errors=0 f n
    for f in "$d/$tool"/*.log; do
      n=$(sanitizer_errors "$f")
      errors=$((errors + ${n:-0}))
    done
    note "$slot $tool: $errors errors; $(tally "$d/$tool")"
  done
  tar -C "$out" -cJf "$out/slot$slot-logs.tar.xz" "slot$slot" && rm -rf "$d"
}

slot_e() {
  local d=$out/slotE; mkdir -p "$d"
  export PYTHONUNBUFFERED=1
  # In order of what a short lease must not miss: the main job, the dynamic
  # tables, the scatter ops (width 64: uniform and Zipf, 65,536 and 1M
  # updates, f32 and bf16, atomic and deterministic).
  if [ "$(cap 150)" -gt 60 ]; then
    timeout "$(cap 150)" python3 "$root/bench/compare_torch_demo.py" --device cuda --varstate "$bin/varstate" \
      --threads 2 --out "$d/demo-vs-pytorch-cuda-h200.json" >"$d/demo.log" 2>&1
    note "E demo vs torch: rc $? $(tail -4 "$d/demo.log" | tr '\n' ' ')"
  fi
  # The same with one part per table, as PyTorch holds them (the default
  # demo splits each table in two parts on the one GPU: twice the ops),
  # and its duplicate ids combined by atomics as PyTorch's index_add_ does
  # (the demo's default is the sorted deterministic path).
  if [ "$(cap 90)" -gt 50 ]; then
    timeout "$(cap 90)" python3 "$root/bench/compare_torch_demo.py" --device cuda --varstate "$bin/varstate" \
      --threads 2 --shards 1 --reps 2 --out "$d/demo-vs-pytorch-cuda-h200-shards1.json" >"$d/demo1.log" 2>&1
    note "E demo --shards 1 vs torch: rc $? $(tail -4 "$d/demo1.log" | tr '\n' ' ')"
  fi
  if [ "$(cap 90)" -gt 50 ]; then
    timeout "$(cap 90)" python3 "$root/bench/compare_torch_demo.py" --device cuda --varstate "$bin/varstate" \
      --threads 2 --shards 1 --atomic_scatters --reps 2 \
      --out "$d/demo-vs-pytorch-cuda-h200-shards1-atomic.json" >"$d/demo1a.log" 2>&1
    note "E demo --shards 1 --atomic_scatters vs torch: rc $? $(tail -4 "$d/demo1a.log" | tr '\n' ' ')"
  fi
  if [ "$(cap 90)" -gt 40 ]; then
    timeout "$(cap 90)" "$bin/bench_dynamic" --device /device:GPU:0 --reps 5 --machine h200 \
      --out "$d/dynamic-gpu-h200.json" >"$d/dynamic.log" 2>&1
    note "E bench_dynamic on GPU:0: rc $?"
  fi
  if [ "$(cap 200)" -gt 60 ]; then
    timeout "$(cap 200)" python3 "$root/bench/compare_torch_scatter.py" --device cuda --rounds 5 \
      --filter D64/ --ours-bin "$bin/bench_scatter" --out "$d/scatter-vs-torch-h200.json" >"$d/scatter.log" 2>&1
    note "E scatter vs torch: rc $? ($(grep -c . "$d/scatter.log") lines)"
  fi
  tar -C "$out" -cJf "$out/slotE-logs.tar.xz" slotE && rm -rf "$d"
}

slot_e2() {
  local d=$out/slotE2; mkdir -p "$d"
  local b
  for b in bench_optimizer bench_random bench_math_ops bench_dense_update bench_checkpoint \
    bench_scatter; do
    [ -x "$bin/$b" ] || continue
    [ "$(cap 120)" -gt 30 ] || { note "E2 $b: no time left"; continue; }
    timeout "$(cap 120)" "$bin/$b" '--benchmark_filter=gpu|GPU' --benchmark_format=console \
      --benchmark_out_format=json --benchmark_out="$d/$b-h200.json" >"$d/$b.log" 2>&1
    note "E2 $b: rc $? ($(grep -c -E 'gpu|GPU' "$d/$b.log") lines)"
  done
  tar -C "$out" -cJf "$out/slotE2-logs.tar.xz" slotE2 && rm -rf "$d"
}

slot_h() {
  local d=$out/slotH; mkdir -p "$d"
  local limit=$bin/bench_sparse_limit
  [ -x "$limit" ] || { note "H: bench_sparse_limit not in the bundle"; return; }
  if [ "$(cap 150)" -gt 40 ]; then
    timeout "$(cap 150)" "$limit" --reps 7 --machine h200-host \
      --out "$d/sparse-limit-h200-host.json" >"$d/limit.log" 2>&1
    note "H bench_sparse_limit float32: rc $? ($(grep -c distinct "$d/limit.log") cases)"
  fi
  local ids
  for ids in 262144 524288 1048576; do
    [ "$(cap 60)" -gt 20 ] || { note "H numbering at $ids ids: no time left"; continue; }
    timeout "$(cap 60)" "$limit" --numbering both --dist uniform --ids "$ids" --only sparse_adagrad \
      --reps 7 --machine h200-host --out "$d/numbering-adagrad-$ids-h200-host.json" \
      >"$d/numbering-adagrad-$ids.log" 2>&1
    timeout "$(cap 60)" "$limit" --numbering both --dist uniform --ids "$ids" --only lazy_adam \
      --reps 7 --machine h200-host --out "$d/numbering-lazy-adam-$ids-h200-host.json" \
      >"$d/numbering-lazy-adam-$ids.log" 2>&1
    note "H numbering at $ids ids: rc $?"
  done
  if [ "$(cap 90)" -gt 30 ]; then
    timeout "$(cap 90)" "$limit" --quick --dtype bfloat16 --reps 7 --machine h200-host \
      --out "$d/sparse-limit-bf16-h200-host.json" >"$d/limit-bf16.log" 2>&1
    note "H bench_sparse_limit bfloat16 --quick: rc $?"
  fi
  # Whether one thread keeps this host's memory busy: the scatters of 1M
  # ids on one thread, against the pool (whose split trials decide).
  local threads
  for threads in 1 default; do
    [ "$(cap 40)" -gt 15 ] || { note "H scatters on $threads thread(s): no time left"; continue; }
    (
      [ "$threads" = default ] || export VARSTATE_CPU_THREADS=$threads
      timeout "$(cap 40)" "$limit" --only scatter_add --ids 1048576 --reps 7 \
        --machine h200-host --out "$d/scatter-add-1m-threads-$threads-h200-host.json" \
        >"$d/scatter-add-1m-threads-$threads.log" 2>&1
    )
    note "H scatter_add 1M ids, threads $threads: rc $?"
  done
  nproc >"$d/cpu.txt"; lscpu >>"$d/cpu.txt" 2>&1
  tar -C "$out" -cJf "$out/slotH-logs.tar.xz" slotH && rm -rf "$d"
}

for slot in "$@"; do
  if [ "$(left)" -lt 40 ]; then note "slot $slot: not started, $(left) s left"; continue; fi
  slot_start=$SECONDS
  # shellcheck disable=SC2086
  case $slot in
    A) slot_a ;;
    B) sanitize B "memcheck initcheck" $gpu_only ;;        # the GPU-only binaries
    C) sanitize C "memcheck initcheck" $device_tests ;;    # the device-parameterized ones
    D) sanitize D "racecheck synccheck" $gpu_only ;;
    E) slot_e ;;
    E2) slot_e2 ;;
    H) slot_h ;;
    *) note "unknown slot $slot" ;;
  esac
  note "slot $slot: $((SECONDS - slot_start)) s"
done
echo "== summary ($((SECONDS - start)) s)"
printf '%s\n' "${summary[@]}"
