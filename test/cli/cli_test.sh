#!/usr/bin/env bash
# Bad input to the varstate CLI: every case must exit with the expected
# non-zero code and print exactly one line on stderr matching a pattern
# (no uncaught exception, abort or core dump). Good input: --help of each
# command and --version exit 0 on stdout.
#   tools/cli_test.sh PATH/TO/varstate TESTDATA_DIR
set -uo pipefail
cli=${1:?usage: cli_test.sh VARSTATE_BIN TESTDATA_DIR}
testdata=${2:?usage: cli_test.sh VARSTATE_BIN TESTDATA_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 cases=0

# expect RC REGEX ARGS...: exit code RC, one stderr line matching REGEX.
expect() {
  local want_rc=$1 regex=$2
  shift 2
  cases=$((cases + 1))
  "$cli" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne "$want_rc" ] || [ "$lines" -ne 1 ] || ! grep -Eq -- "$regex" "$tmp/err"; then
    echo "FAIL: varstate $* -> exit $rc (want $want_rc), $lines stderr line(s), want /$regex/:"
    sed 's/^/  | /' "$tmp/err"
    failures=$((failures + 1))
  else
    echo "ok: varstate $* -> $rc: $(cat "$tmp/err")"
  fi
}

# expect_ok REGEX ARGS...: exit 0, stdout matching REGEX, nothing on stderr.
expect_ok() {
  local regex=$1
  shift
  cases=$((cases + 1))
  "$cli" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne 0 ] || [ -s "$tmp/err" ] || ! grep -Eq -- "$regex" "$tmp/out"; then
    echo "FAIL: varstate $* -> exit $rc, want 0 and stdout /$regex/"
    sed 's/^/  | /' "$tmp/out" "$tmp/err" | head -20
    failures=$((failures + 1))
  else
    echo "ok: varstate $* -> 0"
  fi
}

expect_ok '^varstate [0-9]+\.[0-9]+\.[0-9]+$' --version
expect_ok 'Subcommands:' --help
for cmd in demo devices inspect compact bench; do expect_ok "Usage: varstate $cmd" "$cmd" --help; done

expect 2 '^varstate: A subcommand is required'
expect 2 '^varstate: unknown command "trian" \(commands: .*demo' trian
expect 2 '^varstate: unknown flag "--frobnicate"' --frobnicate
expect 2 '^varstate demo: The following arguments? (was|were) not expected: .*--stpes' demo --stpes 3
expect 2 '^varstate demo: --steps: expected a whole number >= 0, got "abc"' demo --steps abc
expect 2 '^varstate demo: --steps: expected a whole number >= 0, got "abc"' demo --steps=abc
expect 2 '^varstate demo: --steps: expected a whole number >= 0, got "2.5"' demo --steps 2.5
expect 2 '^varstate demo: --steps: must be >= 0, got -3' demo --steps=-3
expect 2 '^varstate demo: --steps: .*(required|missing)' demo --steps
touch "$tmp/a_file"
expect 1 '^varstate demo: InvalidArgumentError: --checkpoint_dir ".*a_file/ckpt": cannot create the folder' \
  demo --steps 1 --checkpoint_dir "$tmp/a_file/ckpt"
expect 2 '^varstate demo: --batch_size: must be >= 1, got 0' demo --batch_size 0
expect 2 '^varstate demo: --device: .*tpu' demo --device tpu
expect 1 '^varstate demo: InvalidArgumentError: --users x --ratings_per_user \(3000000000 x 50\)' \
  demo --users 3000000000 --checkpoint_dir "$tmp/ckpt"
# Every size and product of sizes is checked before anything is allocated.
expect 1 '^varstate demo: InvalidArgumentError: --users x --rank \(50000 x 4611686018427387904\) must stay below 2\^31' \
  demo --rank 4611686018427387904 --checkpoint_dir "$tmp/ckpt"
expect 1 '^varstate demo: InvalidArgumentError: --items x --rank \(3000000 x 1000\) must stay below 2\^31' \
  demo --users 10 --items 3000000 --rank 1000 --checkpoint_dir "$tmp/ckpt"
expect 1 '^varstate demo: InvalidArgumentError: --users x --ratings_per_user \(10 x 9223372036854775807\)' \
  demo --users 10 --ratings_per_user 9223372036854775807 --checkpoint_dir "$tmp/ckpt"
expect 1 '^varstate demo: InvalidArgumentError: a batch \(--batch_size.*\) x --rank \(100 x 1073741824\) must stay below 2\^31' \
  demo --users 1 --items 1 --rank 1073741824 --ratings_per_user 100 --batch_size 100 --checkpoint_dir "$tmp/ckpt"
expect 1 '^varstate demo: InvalidArgumentError: a batch \(--batch_size.*\) x --rank \(10 x 1073741824\) must stay below 2\^31' \
  demo --users 1 --items 1 --rank 1073741824 --ratings_per_user 10 --batch_size 1000 --checkpoint_dir "$tmp/ckpt"
expect 1 '^varstate demo: InvalidArgumentError: --max_to_keep 3000000000 must be at most 2147483647' \
  demo --max_to_keep 3000000000 --checkpoint_dir "$tmp/ckpt"
expect 1 '^varstate demo: InvalidArgumentError: --shards 20000 is more than the rows of a table \(10000\)' \
  demo --shards 20000 --checkpoint_dir "$tmp/ckpt"
expect 2 '^varstate demo: --rank: expected a whole number >= 1, got "99999999999999999999"' \
  demo --rank 99999999999999999999
expect 2 '^varstate demo: --learning_rate: expected a number >= 0, got "fast"' demo --learning_rate fast
expect 2 '^varstate demo: --noise: must be >= 0, got -0.5' demo --noise=-0.5
if ! "$cli" devices | grep -q 'GPU:0'; then
  expect 1 '^varstate demo: InvalidArgumentError: --device gpu: no GPU found' \
    demo --device gpu --checkpoint_dir "$tmp/ckpt"
fi
# Out of memory while building the tables (address space capped; not under
# AddressSanitizer, which reserves far more): the run made the folder, and
# removes it again.
if [ -z "${ASAN_OPTIONS:-}" ]; then
  printf '#!/bin/sh\nulimit -v 3000000 && exec "%s" "$@"\n' "$cli" >"$tmp/capped_varstate"
  chmod +x "$tmp/capped_varstate"
  real_cli=$cli cli=$tmp/capped_varstate
  expect 1 '^varstate demo: ResourceExhaustedError: ' \
    demo --users 40000 --items 1000 --rank 40000 --ratings_per_user 1 --checkpoint_dir "$tmp/ckpt"
  cli=$real_cli
fi
# None of the failed runs above left a --checkpoint_dir behind.
cases=$((cases + 1))
if [ -e "$tmp/ckpt" ]; then
  echo "FAIL: a failed demo run left $tmp/ckpt"; failures=$((failures + 1))
fi
expect 2 '^varstate inspect: path is required' inspect
expect 2 '^varstate inspect: The following argument was not expected: extra' inspect a extra
expect 1 '^varstate inspect: NotFoundError: .*no_such_ckpt' inspect "$tmp/no_such_ckpt"
printf 'not a checkpoint index, just text\n' >"$tmp/corrupt.index"
expect 1 '^varstate inspect: [A-Za-z]+Error: .*corrupt' inspect "$tmp/corrupt"
head -c 100 "$testdata/tensorflow/half_plus_two_v2/variables.index" >"$tmp/truncated.index"
expect 1 '^varstate inspect: [A-Za-z]+Error: .*truncated' inspect "$tmp/truncated"
expect 1 '^varstate inspect: NotFoundError: .*no_such_tensor' \
  inspect "$testdata/tensorflow/half_plus_two_v2/variables" --tensor no_such_tensor
expect 2 '^varstate inspect: --tensor: a tensor name is required, got ""' \
  inspect "$testdata/tensorflow/half_plus_two_v2/variables" --tensor ""
expect 2 '^varstate compact: output is required' compact "$tmp/no_such_ckpt"
expect 1 '^varstate compact: ValueError: .*no_such_ckpt' compact "$tmp/no_such_ckpt" "$tmp/out"
# A named pipe where a file should be: refused at once, never waited on.
mkfifo "$tmp/pipe.index" "$tmp/pipe_v1"
expect 1 '^varstate inspect: InvalidArgumentError: opening ".*pipe.index": not a regular file' inspect "$tmp/pipe"
expect 1 '^varstate inspect: InvalidArgumentError: opening ".*pipe_v1": not a regular file' inspect "$tmp/pipe_v1"
expect 2 '^varstate bench: --filter: .*(required|missing)' bench --filter
expect 1 '^varstate bench: InvalidArgumentError: --filter "\[" is not a regular expression' bench --filter '['
expect 1 '^varstate bench: InvalidArgumentError: --out ".*a_file/out": cannot create the folder' \
  bench --out "$tmp/a_file/out"
# A filter that selects no benchmark: one line, not one complaint per
# binary. The suite here is a stand-in next to a copy of the CLI, with
# Google Benchmark's flags and messages.
mkdir "$tmp/bin"
cp "$cli" "$tmp/bin/varstate"
cat >"$tmp/bin/bench_scatter" <<'SCRIPT'
#!/bin/sh
filter=.
for a; do case $a in --benchmark_filter=*) filter=${a#*=} ;; esac; done
names=$(printf 'BM_ScatterUpdate/1024\nBM_ScatterAdd/1024\n' | grep -E -- "$filter")
if [ -z "$names" ]; then
  echo "Failed to match any benchmarks against regex: $filter" >&2
  exit 0
fi
case " $* " in *" --benchmark_list_tests=true "*) echo "$names" ;; *) exit 1 ;; esac
SCRIPT
chmod +x "$tmp/bin/bench_scatter"
cp "$tmp/bin/bench_scatter" "$tmp/bin/bench_random"
real_cli=$cli
cli=$tmp/bin/varstate
expect 1 '^varstate bench: NotFoundError: no benchmark matches --filter "nomatch"$' \
  bench --filter nomatch --out "$tmp/bench_out"
cli=$real_cli

echo "$((cases - failures)) of $cases cases passed"
[ "$failures" -eq 0 ]
