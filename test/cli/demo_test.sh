#!/usr/bin/env bash
# `varstate demo` on a small configuration:
#   1. the test RMSE falls from ~1 to near the noise level (0.1);
#   2. the same --seed gives a bit-identical final checkpoint, whatever the
#      CPU thread count (VARSTATE_CPU_THREADS), another seed a different one;
#   3. stopping at step 1000 and --resume to 2000 prints "resumed from ...
#      at step 1000" and ends in the same checkpoint as one uninterrupted run;
#   4. --max_to_keep spans restarts: after many resumed runs, and after runs
#      killed (SIGKILL) and resumed, at most max_to_keep checkpoints remain;
#   5. a copied checkpoint folder resumes from its own files (the state file
#      holds relative paths) with the original gone;
#   6. a latest checkpoint missing a data shard is skipped with a warning and
#      --resume continues from the one before it;
#   7. incremental checkpoints (the default; 1-6 use --full_checkpoints to
#      compare files): `inspect` shows the chain, --resume restores from a
#      delta and ends with the values of a run of full checkpoints, a run
#      killed mid-save resumes from its latest checkpoint, and `compact`
#      writes the same values as one checkpoint;
#   8. --optimizer momentum, adagrad, adam, rowwise-adagrad: the checkpoints
#      hold the slots (`inspect` lists ".../Adam", ".../Adam_1",
#      "beta1_power"), and a run stopped half way and resumed ends bit for
#      bit where one uninterrupted run does, with full checkpoints (the same
#      files) and with incremental ones (compacted: the same data files);
#      adam gives the same checkpoint for any CPU thread count.
#   tools/demo_test.sh PATH/TO/varstate
set -euo pipefail
cli=${1:?usage: demo_test.sh VARSTATE_BIN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small=(--users 2000 --items 500 --rank 8 --ratings_per_user 40 --noise 0.1 --batch_size 1024
       --learning_rate 0.05 --save_every 500 --max_to_keep 2 --device cpu --full_checkpoints)
fail() { echo "FAIL: $*"; exit 1; }

"$cli" demo "${small[@]}" --steps 2000 --seed 7 --checkpoint_dir "$tmp/a" | tee "$tmp/a.log"
line=$(grep -E '^test RMSE: [0-9.]+ before, [0-9.]+ after' "$tmp/a.log") || fail "no RMSE summary"
read -r before after < <(echo "$line" | sed -E 's/^test RMSE: ([0-9.]+) before, ([0-9.]+) after.*/\1 \2/')
awk -v b="$before" -v a="$after" 'BEGIN { exit !(b > 0.8 && a < 0.13 && a < b / 5) }' ||
  fail "test RMSE $before -> $after: want > 0.8 before, < 0.13 (noise 0.1) after"
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
for threads in 1 3; do
  VARSTATE_CPU_THREADS=$threads "$cli" demo "${small[@]}" --steps 2000 --seed 7 \
    --checkpoint_dir "$tmp/t$threads" >/dev/null
  same_checkpoint "$tmp/a" "$tmp/t$threads" 2000 ||
    fail "VARSTATE_CPU_THREADS=$threads gives another final checkpoint than the default"
done
echo "ok: 1 and 3 CPU threads -> the default's final checkpoint"
"$cli" demo "${small[@]}" --steps 2000 --seed 8 --checkpoint_dir "$tmp/c" >/dev/null
same_checkpoint "$tmp/a" "$tmp/c" 2000 && fail "--seed 7 and --seed 8 gave the same checkpoint"
echo "ok: another seed -> another checkpoint"

"$cli" demo "${small[@]}" --steps 1000 --seed 7 --checkpoint_dir "$tmp/d" >/dev/null
"$cli" demo "${small[@]}" --steps 2000 --seed 7 --checkpoint_dir "$tmp/d" --resume | tee "$tmp/d.log"
grep -Eq "^resumed from .*/model-1000 at step 1000$" "$tmp/d.log" || fail "no 'resumed from ... at step 1000'"
grep -Eq "^training steps 1000\.\.2000" "$tmp/d.log" || fail "resumed run does not continue at step 1000"
same_checkpoint "$tmp/a" "$tmp/d" 2000 || fail "stop at 1000 + --resume to 2000 differs from one run to 2000"
echo "ok: resume continues at step 1000 and ends in the same checkpoint"

count_indexes() { find "$1" -maxdepth 1 -name 'model-*.index' | wc -l; }

# 4. Six restarts with --max_to_keep 2: two checkpoints on disk, both listed.
"$cli" demo "${small[@]}" --steps 500 --seed 7 --checkpoint_dir "$tmp/e" >/dev/null
for steps in 1000 1500 2000 2500 3000; do
  "$cli" demo "${small[@]}" --steps "$steps" --seed 7 --checkpoint_dir "$tmp/e" --resume >/dev/null
done
[ "$(count_indexes "$tmp/e")" -eq 2 ] && [ -e "$tmp/e/model-3000.index" ] &&
  [ -e "$tmp/e/model-2500.index" ] || fail "after 6 runs with --max_to_keep 2: $(ls "$tmp/e")"
echo "ok: --max_to_keep 2 spans restarts"
# Runs killed at random points (during training or a save) and resumed:
# never more than 2 checkpoints besides what an interrupted save left
# (temporaries, or a checkpoint newer than the latest listed, which the next
# run saves over).
latest_step() { sed -nE 's/^model_checkpoint_path: "model-([0-9]+)"$/\1/p' "$1/checkpoint"; }
count_up_to_latest() {
  local latest f n=0 step
  latest=$(latest_step "$1")
  for f in "$1"/model-*.index; do
    step=${f##*/model-}
    step=${step%.index}
    [ "$step" -le "$latest" ] && n=$((n + 1))
  done
  echo "$n"
}
often=(--users 2000 --items 500 --rank 8 --ratings_per_user 40 --noise 0.1 --batch_size 1024
       --learning_rate 0.05 --save_every 100 --max_to_keep 2 --device cpu --seed 7 --full_checkpoints)
"$cli" demo "${often[@]}" --steps 100 --checkpoint_dir "$tmp/f" >/dev/null
for delay in 0.05 0.25 0.15 0.3 0.1 0.2; do
  before=$(latest_step "$tmp/f")
  "$cli" demo "${often[@]}" --steps 1000000 --checkpoint_dir "$tmp/f" --resume >/dev/null 2>&1 &
  # Killed once this run has saved (seconds in a sanitizer build on a busy
  # machine), after a delay that lands in training or in the next save.
  for _ in $(seq 600); do [ "$(latest_step "$tmp/f")" != "$before" ] && break; sleep 0.05; done
  sleep "$delay"
  kill -9 $! && wait $! 2>/dev/null || true
  # Two kept, plus at most the one whose deletion this kill interrupted
  # (written state file, oldest not yet deleted); the next run removes it.
  [ "$(count_up_to_latest "$tmp/f")" -le 3 ] || fail "killed resumed runs left $(ls "$tmp/f" | tr '\n' ' ')"
done
latest=$(latest_step "$tmp/f")
[ -n "$latest" ] && [ "$latest" -gt 100 ] || fail "killed runs saved nothing: $(cat "$tmp/f/checkpoint")"
"$cli" demo "${often[@]}" --steps $((latest + 100)) --checkpoint_dir "$tmp/f" --resume >"$tmp/f.log"
grep -q "^resumed from .*/model-$latest at step $latest$" "$tmp/f.log" ||
  fail "no resume from model-$latest after the killed runs: $(grep resum "$tmp/f.log")"
[ "$(count_indexes "$tmp/f")" -eq 2 ] || fail "after killed runs and one more: $(ls "$tmp/f" | tr '\n' ' ')"
echo "ok: killed and resumed runs keep at most 2 checkpoints (latest step $latest)"

# 5. A copy of the folder resumes from the copy: the state file's paths are
# relative, and the original is gone.
grep -qx 'model_checkpoint_path: "model-2000"' "$tmp/d/checkpoint" ||
  fail "state file paths are not relative: $(cat "$tmp/d/checkpoint")"
cp -r "$tmp/d" "$tmp/g"
mv "$tmp/d" "$tmp/d.moved"
"$cli" demo "${small[@]}" --steps 2500 --seed 7 --checkpoint_dir "$tmp/g" --resume >"$tmp/g.log"
grep -Eq "^resumed from $tmp/g/model-2000 at step 2000$" "$tmp/g.log" ||
  fail "the copy did not resume from its own model-2000: $(grep resum "$tmp/g.log")"
[ -e "$tmp/d.moved/model-1500.index" ] || fail "resuming the copy deleted the original's files"
echo "ok: a copied checkpoint folder resumes from its own files"

# 6. The latest checkpoint lost its data shard: resume from the one before.
rm "$tmp/d.moved"/model-2000.data-*
"$cli" demo "${small[@]}" --steps 2500 --seed 7 --checkpoint_dir "$tmp/d.moved" --resume \
  >"$tmp/h.log" 2>"$tmp/h.err"
grep -Eq "^resumed from .*/model-1500 at step 1500$" "$tmp/h.log" ||
  fail "did not fall back to model-1500: $(grep resum "$tmp/h.log")"
grep -Eq "^warning: --resume: skipping checkpoint .*/model-2000: .*model-2000\.data-00000-of-00001" \
  "$tmp/h.err" || fail "no warning naming the skipped model-2000 and its shard: $(cat "$tmp/h.err")"
same_checkpoint "$tmp/g" "$tmp/d.moved" 2500 || fail "the fallback run ends in another checkpoint"
echo "ok: a checkpoint missing a data shard is skipped for the one before"

# 7. Incremental checkpoints: tables large enough, saves frequent enough, that
# a save holds a fraction of the rows.
sparse=(--users 50000 --items 10000 --rank 8 --ratings_per_user 10 --batch_size 512
        --save_every 10 --max_to_keep 3 --device cpu --seed 7)
values() {  # CHECKPOINT: name dtype shape min max mean of each tensor
  "$cli" inspect "$1" | awk '$2 ~ /^(int64|float32)$/ { print $1, $2, $3, $(NF-2), $(NF-1), $NF }'
}
"$cli" demo "${sparse[@]}" --steps 40 --checkpoint_dir "$tmp/i" >/dev/null
"$cli" inspect "$tmp/i/model-40" >"$tmp/i.inspect"
grep -Eq "^chain of 4 checkpoint\(s\): base .*/model-10 \(step 10\)$" "$tmp/i.inspect" ||
  fail "no chain of 4 in: $(head -3 "$tmp/i.inspect")"
grep -Eq "^    recommender/users/embedding +[0-9]+ rows +[0-9]+ bytes$" "$tmp/i.inspect" ||
  fail "no rows of the users table in the delta: $(head -8 "$tmp/i.inspect")"
"$cli" demo "${sparse[@]}" --steps 60 --checkpoint_dir "$tmp/i" --resume >"$tmp/i.log"
grep -Eq "^resumed from .*/model-40 at step 40$" "$tmp/i.log" || fail "no resume from the delta model-40"
"$cli" demo "${sparse[@]}" --steps 60 --checkpoint_dir "$tmp/j" --full_checkpoints >/dev/null
[ "$(values "$tmp/i/model-60")" = "$(values "$tmp/j/model-60")" ] && [ -n "$(values "$tmp/j/model-60")" ] ||
  fail "incremental + resume and full checkpoints end with different values"
echo "ok: incremental checkpoints form a chain, resume from a delta, end with the same values"
"$cli" compact "$tmp/i/model-40" "$tmp/compact/model" >/dev/null || fail "compact failed"
"$cli" demo "${sparse[@]}" --steps 40 --checkpoint_dir "$tmp/k" --full_checkpoints >/dev/null
[ "$(values "$tmp/compact/model")" = "$(values "$tmp/k/model-40")" ] || fail "compacted values differ"
"$cli" inspect "$tmp/compact/model" | grep -q "^chain of" && fail "the compacted checkpoint is a chain"
echo "ok: compact writes the chain's values as one checkpoint"
# Compacting onto a file of its own chain (its base, its delta, itself),
# or onto an output whose .index is a directory, is refused in one line
# before anything is written.
sums() { (cd "$tmp/i" && md5sum -- model-* checkpoint); }
before=$(sums)
for out in model-10 model-20 model-40; do
  "$cli" compact "$tmp/i/model-40" "$tmp/i/$out" >/dev/null 2>"$tmp/err" && fail "compact onto $out succeeded"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
    grep -Eq '^varstate compact: InvalidArgumentError: .* is a file of the chain being compacted' "$tmp/err" ||
    fail "compact onto $out: $(cat "$tmp/err")"
done
[ "$(sums)" = "$before" ] || fail "a refused compaction changed the chain"
mkdir -p "$tmp/blocked/o.index"
"$cli" compact "$tmp/i/model-40" "$tmp/blocked/o" >/dev/null 2>"$tmp/err" && fail "compact onto a directory succeeded"
[ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -Eq '^varstate compact: FailedPreconditionError: .*o.index" is a directory' "$tmp/err" ||
  fail "compact onto a directory: $(cat "$tmp/err")"
[ "$(ls "$tmp/blocked")" = "o.index" ] || fail "a refused compaction wrote $(ls "$tmp/blocked")"
echo "ok: compact refuses a file of its own chain and a directory in the way, in one line"
for delay in 0.4 0.7 1.0; do
  "$cli" demo "${sparse[@]}" --steps 1000000 --checkpoint_dir "$tmp/i" --resume >/dev/null 2>&1 &
  sleep "$delay"
  kill -9 $! && wait $! 2>/dev/null || true
done
latest=$(latest_step "$tmp/i")
"$cli" demo "${sparse[@]}" --steps $((latest + 10)) --checkpoint_dir "$tmp/i" --resume >"$tmp/i.log"
grep -q "^resumed from .*/model-$latest at step $latest$" "$tmp/i.log" ||
  fail "no resume from model-$latest after killed incremental runs: $(grep resum "$tmp/i.log")"
echo "ok: killed incremental runs resume from their latest checkpoint (step $latest)"

# 8. The optimizers: slots in the checkpoints, bit-identical resumes.
optimizer_run=(--users 2000 --items 500 --rank 8 --ratings_per_user 40 --noise 0.1 --batch_size 1024
               --save_every 250 --max_to_keep 2 --device cpu --seed 7)
for opt in momentum adagrad adam rowwise-adagrad; do
  o=(--optimizer "$opt" "${optimizer_run[@]}")
  "$cli" demo "${o[@]}" --steps 1000 --full_checkpoints --checkpoint_dir "$tmp/$opt-full" >"$tmp/$opt.log"
  grep -q "optimizer $opt, learning rate" "$tmp/$opt.log" || fail "$opt: no 'optimizer $opt' line"
  "$cli" demo "${o[@]}" --steps 500 --full_checkpoints --checkpoint_dir "$tmp/$opt-full-resumed" >/dev/null
  "$cli" demo "${o[@]}" --steps 1000 --full_checkpoints --checkpoint_dir "$tmp/$opt-full-resumed" \
    --resume >"$tmp/$opt-resumed.log"
  grep -Eq "^resumed from .*/model-500 at step 500$" "$tmp/$opt-resumed.log" || fail "$opt: no resume at 500"
  same_checkpoint "$tmp/$opt-full" "$tmp/$opt-full-resumed" 1000 ||
    fail "$opt: 500 steps + --resume to 1000 differs from 1000 steps (full checkpoints)"
  "$cli" demo "${o[@]}" --steps 500 --checkpoint_dir "$tmp/$opt-incr" >/dev/null
  "$cli" demo "${o[@]}" --steps 1000 --checkpoint_dir "$tmp/$opt-incr" --resume >/dev/null
  "$cli" compact "$tmp/$opt-incr/model-1000" "$tmp/$opt-incr-compact/model-1000" >/dev/null
  for f in "$tmp/$opt-full"/model-1000.data-*; do  # the values (the indexes name other files)
    cmp -s "$f" "$tmp/$opt-incr-compact/$(basename "$f")" ||
      fail "$opt: incremental, 500 steps + --resume to 1000 differs from 1000 steps ($(basename "$f"))"
  done
done
"$cli" inspect "$tmp/adam-full/model-1000" >"$tmp/adam.inspect"
for name in recommender/users/embedding/Adam recommender/users/embedding/Adam_1 \
            recommender/items/embedding/Adam beta1_power beta2_power global_step; do
  grep -Eq "^$name +float32|^$name +int64" "$tmp/adam.inspect" || fail "inspect lists no $name: $(cat "$tmp/adam.inspect")"
done
"$cli" inspect "$tmp/adagrad-full/model-1000" | grep -Eq "^recommender/items/embedding/Adagrad +float32 +\[500,8\]" ||
  fail "inspect lists no recommender/items/embedding/Adagrad"
"$cli" inspect "$tmp/rowwise-adagrad-full/model-1000" |
  grep -Eq "^recommender/users/embedding/RowwiseAdagrad +float32 +\[2000\]" ||
  fail "inspect lists no recommender/users/embedding/RowwiseAdagrad of shape [2000]"
VARSTATE_CPU_THREADS=1 "$cli" demo --optimizer adam "${optimizer_run[@]}" --steps 1000 --full_checkpoints \
  --checkpoint_dir "$tmp/adam-1thread" >/dev/null
same_checkpoint "$tmp/adam-full" "$tmp/adam-1thread" 1000 || fail "adam: 1 CPU thread gives another checkpoint"
echo "ok: momentum, adagrad, adam, rowwise-adagrad: slots saved, resumed runs bit-identical (full and incremental)"
