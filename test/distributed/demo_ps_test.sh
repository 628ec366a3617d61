#!/usr/bin/env bash
# `mpirun -np 4 varstate demo --ps 2` on a small configuration:
#   1. every rank says what it is (2 ps tasks holding the tables' parts, 2
#      workers), and the test RMSE matches one process with the same
#      --shards and --seed (within 1e-3);
#   2. stopping at step 300 and --resume to 600 restores the
#      DistributedSaver checkpoint and ends at global_step 600 with the same
#      RMSE as the uninterrupted run;
#   3. --optimizer adagrad trains the ps variables with the optimizer to the
#      single process's RMSE (within 1e-3);
#   4. --dynamic: the tables as dynamic variables held by the 2 ps tasks,
#      stopped at 300 and resumed to 600 from the DistributedSaver's
#      incremental checkpoints, reach the single-process dynamic run's test
#      RMSE (within 1e-3; --admit_after 1: with admission, a key's sightings
#      in one step are split over the workers' calls, which admits some keys
#      a call later than one process does).
#   demo_ps_test.sh PATH/TO/varstate MPIRUN [MPIRUN FLAGS...]
set -euo pipefail
cli=${1:?usage: demo_ps_test.sh VARSTATE_BIN MPIRUN [FLAGS...]}
shift
mpirun=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--users 2000 --items 500 --rank 8 --ratings_per_user 40 --noise 0.1 --batch_size 1024
        --save_every 150 --max_to_keep 2 --shards 4 --seed 7)
small=("${common[@]}" --learning_rate 0.05)
adagrad=("${common[@]}" --optimizer adagrad --learning_rate 0.5)
fail() { echo "FAIL: $*"; exit 1; }
after() { sed -nE 's/^test RMSE(: [0-9.]+ before,| after:) ([0-9.]+).*/\2/p' "$1"; }
near() { awk -v a="$1" -v b="$2" -v t="${3:-0.001}" 'BEGIN { d = a - b; exit !(d < t && d > -t) }'; }

"$cli" demo "${small[@]}" --device cpu --steps 600 --checkpoint_dir "$tmp/one" > "$tmp/one.log"
one=$(after "$tmp/one.log")
[ -n "$one" ] || fail "no RMSE from the single process"

timeout -k 5 240 "${mpirun[@]}" -np 4 "$cli" demo "${small[@]}" --ps 2 --steps 600 \
  --checkpoint_dir "$tmp/ps" | tee "$tmp/ps.log"
for who in "ps/task:0: holds 4 table parts" "ps/task:1: holds 4 table parts" \
           "worker/task:0: trains its 1/2 of every batch (chief" "worker/task:1: trains its 1/2"; do
  grep -q "/job:$who" "$tmp/ps.log" || fail "no line for /job:$who"
done
ps=$(after "$tmp/ps.log")
near "$one" "$ps" || fail "test RMSE $ps with 2 ps tasks, $one in one process"
echo "ok: test RMSE $ps with 2 ps tasks + 2 workers, $one in one process"

timeout -k 5 240 "${mpirun[@]}" -np 4 "$cli" demo "${small[@]}" --ps 2 --steps 300 \
  --checkpoint_dir "$tmp/r" > /dev/null
timeout -k 5 240 "${mpirun[@]}" -np 4 "$cli" demo "${small[@]}" --ps 2 --steps 600 --resume \
  --checkpoint_dir "$tmp/r" | tee "$tmp/r.log"
grep -q "test RMSE at step 300" "$tmp/r.log" || fail "the resumed job does not start at step 300"
grep -q "global_step = 600; latest checkpoint: $tmp/r/model-600" "$tmp/r.log" ||
  fail "the resumed job does not end at step 600"
resumed=$(after "$tmp/r.log")
near "$ps" "$resumed" || fail "test RMSE $resumed resumed, $ps uninterrupted"
echo "ok: stop at 300 + --resume to 600: test RMSE $resumed (uninterrupted $ps)"

# 3. --optimizer adagrad: the parts' Adagrad applies run on the ps
#    variables (one optimizer per worker over its parts), and the test RMSE
#    matches one process with the same optimizer.
"$cli" demo "${adagrad[@]}" --device cpu --steps 300 \
  --checkpoint_dir "$tmp/one_adagrad" > "$tmp/one_adagrad.log"
one=$(after "$tmp/one_adagrad.log")
timeout -k 5 240 "${mpirun[@]}" -np 4 "$cli" demo "${adagrad[@]}" --ps 2 \
  --steps 300 --checkpoint_dir "$tmp/adagrad" | tee "$tmp/adagrad.log"
grep -q "/job:worker/task:1: applies adagrad to 4 of the 8 table parts" "$tmp/adagrad.log" ||
  fail "no line for worker 1's parts"
ps=$(after "$tmp/adagrad.log")
near "$one" "$ps" || fail "adagrad: test RMSE $ps with 2 ps tasks, $one in one process"
echo "ok: adagrad: test RMSE $ps with 2 ps tasks + 2 workers, $one in one process"

# 4. --dynamic: the tables keyed by raw 64-bit id hashes, held by the ps
#    tasks (each key on the task its hash picks), with the default admission
#    and row cap; the workers' sgd shares add up to the single-process step.
dynamic_flags=("${small[@]}" --admit_after 1)
dynamic() { sed -nE 's/^(RMSE: train [0-9.]+, test |test RMSE after: )([0-9.]+).*/\2/p' "$1"; }
"$cli" demo --dynamic "${dynamic_flags[@]}" --device cpu --steps 600 \
  --checkpoint_dir "$tmp/one_dynamic" > "$tmp/one_dynamic.log"
one=$(dynamic "$tmp/one_dynamic.log")
[ -n "$one" ] || fail "no RMSE from the single-process dynamic run"
timeout -k 5 240 "${mpirun[@]}" -np 4 "$cli" demo --dynamic "${dynamic_flags[@]}" --ps 2 --steps 300 \
  --checkpoint_dir "$tmp/dynamic" > /dev/null
timeout -k 5 240 "${mpirun[@]}" -np 4 "$cli" demo --dynamic "${dynamic_flags[@]}" --ps 2 --steps 600 \
  --resume --checkpoint_dir "$tmp/dynamic" | tee "$tmp/dynamic.log"
for who in "ps/task:0: holds 1/2 of the users' and the items' keys" \
           "worker/task:1: trains its 1/2 of every batch"; do
  grep -q "/job:$who" "$tmp/dynamic.log" || fail "--dynamic: no line for /job:$who"
done
grep -q "test RMSE at step 300" "$tmp/dynamic.log" ||
  fail "--dynamic: the resumed job does not start at step 300"
grep -q "global_step = 600; latest checkpoint: $tmp/dynamic/model-600" "$tmp/dynamic.log" ||
  fail "--dynamic: the resumed job does not end at step 600"
ps=$(dynamic "$tmp/dynamic.log")
near "$one" "$ps" || fail "--dynamic: test RMSE $ps with 2 ps tasks, $one in one process"
echo "ok: --dynamic: test RMSE $ps with 2 ps tasks + 2 workers (stopped at 300, resumed), $one in one process"
