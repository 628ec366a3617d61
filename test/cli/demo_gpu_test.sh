#!/usr/bin/env bash
# `varstate demo --device gpu` against `--device cpu`, where GPUs are (in CI:
# emulated ones, VARSTATE_CUDA=EMULATE; exit 77 = skipped without a GPU):
#   1. sgd, adam, adagrad: the GPU run's test and train RMSE within 1e-3 of the
#      CPU run's (this small job overfits: the train RMSE shows the training);
#   2. the GPU run's last checkpoint (the Adam run's, slots included), read on
#      the CPU and written again by `varstate compact`: TensorFlow reads every
#      tensor of both, with the same bits;
#   3. --resume across devices: the first half on one device, the second on
#      the other, ends within 1e-3 of the uninterrupted CPU run's RMSE;
#   4. sgd with --atomic_scatters on the GPU within 1e-3 of the CPU run.
#   demo_gpu_test.sh PATH/TO/varstate [PYTHON_WITH_TENSORFLOW]
set -euo pipefail
cli=${1:?usage: demo_gpu_test.sh VARSTATE_BIN [PYTHON]}
# The interop suite's environment (tools/interop_venv.sh), when installed.
python=${2:-${VARSTATE_VENV:-$HOME/.cache/varstate/venv-tf2.21}/bin/python}
if "$cli" devices | grep -q '^0 GPU(s)'; then
  echo "no GPU: skipping the demo's GPU runs"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small=(--users 1000 --items 300 --rank 8 --ratings_per_user 20 --noise 0.1 --batch_size 512
       --save_every 100 --max_to_keep 2 --full_checkpoints --shards 4 --seed 7)
steps=200
fail() { echo "FAIL: $*"; exit 1; }
rmse() { sed -nE 's/^test RMSE: [0-9.]+ before, ([0-9.]+) after.*/\1/p' "$1"; }
train_rmse() { sed -nE 's/^test RMSE: .* after \(train ([0-9.]+);.*/\1/p' "$1"; }
within() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.001) }'; }

for opt in sgd adam adagrad; do
  for dev in cpu gpu; do
    "$cli" demo "${small[@]}" --optimizer "$opt" --steps "$steps" --device "$dev" \
      --checkpoint_dir "$tmp/$dev-$opt" >"$tmp/$dev-$opt.log"
  done
  c=$(rmse "$tmp/cpu-$opt.log")
  g=$(rmse "$tmp/gpu-$opt.log")
  [ -n "$c" ] && [ -n "$g" ] || fail "$opt: no RMSE summary"
  within "$c" "$g" || fail "$opt: test RMSE on the GPU $g, on the CPU $c: more than 1e-3 apart"
  ct=$(train_rmse "$tmp/cpu-$opt.log")
  gt=$(train_rmse "$tmp/gpu-$opt.log")
  [ -n "$ct" ] && [ -n "$gt" ] || fail "$opt: no train RMSE"
  within "$ct" "$gt" || fail "$opt: train RMSE on the GPU $gt, on the CPU $ct: more than 1e-3 apart"
  echo "ok: $opt: test RMSE on the GPU $g, on the CPU $c; train RMSE $gt and $ct"
done

# Sparse SGD's duplicate ids combined by atomics on the GPU: the same
# training up to rounding.
"$cli" demo "${small[@]}" --optimizer sgd --steps "$steps" --device gpu --atomic_scatters \
  --checkpoint_dir "$tmp/gpu-sgd-atomic" >"$tmp/gpu-sgd-atomic.log"
a=$(rmse "$tmp/gpu-sgd-atomic.log")
c=$(rmse "$tmp/cpu-sgd.log")
[ -n "$a" ] || fail "--atomic_scatters: no RMSE summary"
within "$c" "$a" || fail "--atomic_scatters: test RMSE on the GPU $a, on the CPU $c: more than 1e-3 apart"
echo "ok: sgd --atomic_scatters: test RMSE on the GPU $a, on the CPU $c"

"$cli" compact "$tmp/gpu-adam/model-$steps" "$tmp/compacted/model-$steps" >/dev/null
if [ -x "$python" ] && "$python" -c 'import tensorflow' 2>/dev/null; then
  "$python" - "$tmp/gpu-adam/model-$steps" "$tmp/compacted/model-$steps" <<'PY' || fail "TensorFlow read different bits"
import sys
import numpy as np
import tensorflow as tf
gpu, cpu = (tf.train.load_checkpoint(p) for p in sys.argv[1:3])
names = sorted(gpu.get_variable_to_shape_map())
assert names == sorted(cpu.get_variable_to_shape_map()), "different tensors"
assert any(n.endswith("/Adam") for n in names), f"no Adam slots among {names}"
for n in names:
    a, b = np.asarray(gpu.get_tensor(n)), np.asarray(cpu.get_tensor(n))
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), n
print(f"ok: TensorFlow reads the GPU run's {len(names)} tensors and the CPU's copy bit for bit")
PY
else
  echo "TensorFlow not installed ($python): the bitwise check of the GPU checkpoint is not run"
fi

half=$((steps / 2))
for pair in "gpu cpu" "cpu gpu"; do
  read -r first second <<<"$pair"
  dir="$tmp/$first-then-$second"
  "$cli" demo "${small[@]}" --steps "$half" --device "$first" --checkpoint_dir "$dir" >/dev/null
  "$cli" demo "${small[@]}" --steps "$steps" --device "$second" --checkpoint_dir "$dir" --resume \
    >"$dir.log"
  grep -Eq "^resumed from .*/model-$half at step $half$" "$dir.log" ||
    fail "$first then $second: no 'resumed from ... at step $half'"
  r=$(rmse "$dir.log")
  c=$(rmse "$tmp/cpu-sgd.log")
  within "$r" "$c" || fail "$first then $second: test RMSE $r, the CPU run's $c"
  echo "ok: --resume from $first on $second: test RMSE $r (the CPU run's $c)"
done
