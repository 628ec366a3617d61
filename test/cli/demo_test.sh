#!/usr/bin/env bash
# `varstate demo` on a small configuration:
#   1. the test RMSE falls from ~1 to near the noise level (0.1);
#   2. the same --seed gives a bit-identical final checkpoint, another seed
#      a different one;
#   3. stopping at step 1000 and --resume to 2000 prints "resumed from ...
#      at step 1000" and ends in the same checkpoint as one uninterrupted run.
#   tools/demo_test.sh PATH/TO/varstate
set -euo pipefail
cli=${1:?usage: demo_test.sh VARSTATE_BIN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small=(--users 2000 --items 500 --rank 8 --ratings_per_user 40 --noise 0.1 --batch_size 1024
       --learning_rate 0.05 --save_every 500 --max_to_keep 2 --device cpu)
fail() { echo "FAIL: $*"; exit 1; }

"$cli" demo "${small[@]}" --steps 2000 --seed 7 --checkpoint_dir "$tmp/a" | tee "$tmp/a.log"
line=$(grep -E '^test RMSE: [0-9.]+ before, [0-9.]+ after' "$tmp/a.log") || fail "no RMSE summary"
read -r before after < <(echo "$line" | sed -E 's/^test RMSE: ([0-9.]+) before, ([0-9.]+) after.*/\1 \2/')
awk -v b="$before" -v a="$after" 'BEGIN { exit !(b > 0.8 && a < 0.15 && a < b / 5) }' ||
  fail "test RMSE $before -> $after: want > 0.8 before, < 0.15 (noise 0.1) after"
echo "ok: test RMSE $before -> $after (noise 0.1)"
grep -q '^step 2000/2000 ' "$tmp/a.log" || fail "no plain progress line for step 2000 (stdout is not a terminal)"
# max_to_keep 2: model-1500 and model-2000 remain.
[ -e "$tmp/a/model-2000.index" ] && [ -e "$tmp/a/model-1500.index" ] && [ ! -e "$tmp/a/model-1000.index" ] ||
  fail "want model-1500 and model-2000 only: $(ls "$tmp/a")"

same_checkpoint() {  # DIR1 DIR2 STEP: index and every data shard byte-identical
  local f n=0
  for f in "$1"/model-"$3".index "$1"/model-"$3".data-*; do
    cmp -s "$f" "$2/$(basename "$f")" || return 1
    n=$((n + 1))
  done
  [ "$n" -ge 2 ]
}

"$cli" demo "${small[@]}" --steps 2000 --seed 7 --checkpoint_dir "$tmp/b" >/dev/null
same_checkpoint "$tmp/a" "$tmp/b" 2000 || fail "same --seed, different final checkpoints"
echo "ok: same seed -> bit-identical final checkpoint"
"$cli" demo "${small[@]}" --steps 2000 --seed 8 --checkpoint_dir "$tmp/c" >/dev/null
same_checkpoint "$tmp/a" "$tmp/c" 2000 && fail "--seed 7 and --seed 8 gave the same checkpoint"
echo "ok: another seed -> another checkpoint"

"$cli" demo "${small[@]}" --steps 1000 --seed 7 --checkpoint_dir "$tmp/d" >/dev/null
"$cli" demo "${small[@]}" --steps 2000 --seed 7 --checkpoint_dir "$tmp/d" --resume | tee "$tmp/d.log"
grep -Eq "^resumed from .*/model-1000 at step 1000$" "$tmp/d.log" || fail "no 'resumed from ... at step 1000'"
grep -Eq "^training steps 1000\.\.2000" "$tmp/d.log" || fail "resumed run does not continue at step 1000"
same_checkpoint "$tmp/a" "$tmp/d" 2000 || fail "stop at 1000 + --resume to 2000 differs from one run to 2000"
echo "ok: resume continues at step 1000 and ends in the same checkpoint"
