#!/usr/bin/env bash
# Installs the interop suite's Python packages (test/interop/requirements.txt:
# the pinned tensorflow-cpu wheel, numpy, pytest) into a virtual environment
# outside the tree, ${VARSTATE_VENV:-~/.cache/varstate/venv-tf2.21}.
# Idempotent: a stamp holding the requirements' hash makes a warm run a no-op.
# Prints the environment's python on stdout. On failure prints one line
# starting "interop: FAILED" on stderr and exits 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
req=$root/test/interop/requirements.txt
venv=${VARSTATE_VENV:-$HOME/.cache/varstate/venv-tf2.21}
stamp=$venv/.varstate-requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
python=${VARSTATE_PYTHON:-python3}
[ -x /usr/bin/python3 ] && [ -z "${VARSTATE_PYTHON:-}" ] && python=/usr/bin/python3
mkdir -p "$(dirname "$venv")"
log=$(dirname "$venv")/$(basename "$venv").install.log
echo "interop: installing $(grep -v '^#' "$req" | tr '\n' ' ')into $venv" >&2
if ! { "$python" -m venv "$venv" &&
       "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$req"; } >"$log" 2>&1; then
  rm -f "$stamp"
  echo "interop: FAILED to install the TensorFlow wheel ($(grep -m1 tensorflow "$req")) into $venv: $(tail -n 1 "$log") (log: $log)" >&2
  exit 1
fi
echo "$want" >"$stamp"
echo "$venv/bin/python"
