#!/usr/bin/env bash
# Make (once) a separate virtualenv holding smdebug 1.0.34 from PyPI, and print its python.
# smdebug pins pyinstrument 3.4.2 and protobuf 3.20, so it cannot share proflake's .venv.
# Usage: tests/smdebug/make_venv.sh [VENV_DIR]   (default: .venv-smdebug at the repo root)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${1:-$here/../../.venv-smdebug}"
python="${PYTHON:-python3}"
stamp="$venv/.smdebug-installed"
if [ ! -f "$stamp" ] || [ "$here/requirements.txt" -nt "$stamp" ]; then
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt" >&2
  touch "$stamp"
fi
echo "$venv/bin/python"
