#!/usr/bin/env bash
# `varstate bench` on two small benchmarks: one JSON per binary whose
# context names machine, devices and version and whose figures carry their
# same-run limit, a summary table, and (with gnuplot) a throughput plot and
# a varstate-vs-PyTorch plot for a comparison file placed in --out.
#   tools/bench_test.sh PATH/TO/varstate
set -euo pipefail
cli=${1:?usage: bench_test.sh VARSTATE_BIN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat >"$tmp/scatter-vs-torch-test.json" <<'JSON'
{"context": {"torch": "9.9"}, "results": [
 {"name": "scatter/cpu/add/N10xD4/M8", "GBps": 1.5, "ours_GBps": 3.0},
 {"name": "scatter/cpu/mul/N10xD4/M8", "GBps": 2.5, "ours_GBps": 2.0}]}
JSON
"$cli" bench --filter 'BM_cpu_assign_add/(1|4)/|BM_cpu_cached_read' --out "$tmp" | tee "$tmp/log"
json=$(ls "$tmp"/dense_update-*.json) || fail "no dense_update JSON"
python3 - "$json" <<'PY' || fail "JSON content"
import json, sys
d = json.load(open(sys.argv[1]))
ctx = d["context"]
for key in ("varstate_machine", "varstate_devices", "varstate_version", "varstate_build"):
    assert ctx.get(key), key
assert "CPU:0" in ctx["varstate_devices"], ctx["varstate_devices"]
names = [b["name"] for b in d["benchmarks"]]
assert any(n.startswith("BM_cpu_assign_add/1/") for n in names) and any(n.startswith("BM_cpu_assign_add/4/") for n in names), names
assert not any("BM_cpu_assign/" in n for n in names), names          # the filter applied
for b in d["benchmarks"]:
    if b["name"].startswith("BM_cpu"):
        assert b["GBps"] > 0 and b["limit_GBps"] > 0, b
print("ok: JSON context and figures")
PY
ls "$tmp"/variables-*.json >/dev/null || fail "no variables JSON"
[ -z "$(ls "$tmp"/scatter-*-nogpu*.json "$tmp"/random-*.json 2>/dev/null)" ] || fail "JSON for binaries the filter left empty"
summary=$(ls "$tmp"/summary-*.md)
grep -Eq '^\| BM_cpu_assign_add/4 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$' "$summary" || fail "summary lacks assign_add/4"
grep -Eq '^- BM_cpu_cached_read_no_update/16: copies_per_read 0.00$' "$summary" || fail "summary lacks the counters-only figure"
if command -v gnuplot >/dev/null; then
  for png in "$tmp"/dense_update-*-cpu.png "$tmp"/scatter-vs-torch-test.png; do
    [ "$(head -c 4 "$png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$png is not a PNG"
  done
  [ -z "$(ls "$tmp"/*.gp "$tmp"/*.dat 2>/dev/null)" ] || fail "gnuplot scripts or data left behind"
  echo "ok: plots"
fi
echo "ok: varstate bench"
