#!/usr/bin/env bash
# CTest entry of the TensorFlow interop suite: makes sure the pinned
# TensorFlow is installed (tools/interop_venv.sh), then runs every test of
# test/interop/ in one pytest session (one TensorFlow import).
#   run_interop.sh INTEROP_TOOL [pytest args...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export VARSTATE_INTEROP_TOOL=$1
shift
# On failure the script has printed its one "interop: FAILED ..." line.
python=$(bash "$here/../../tools/interop_venv.sh") || exit 1
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1
# A private base for tmp_path: pytest prunes old numbered folders under the
# shared default base, which races with another suite running at the same time.
basetemp=$(mktemp -d)
trap 'rm -rf "$basetemp"' EXIT
"$python" -m pytest -q -p no:cacheprovider --basetemp "$basetemp/t" --rootdir "$here" "$here" "$@"
