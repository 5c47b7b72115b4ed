# Sourced by bin/demo and bin/test: make ./.venv hold proflake and its dependencies, then activate it.
# Re-installs only when pyproject.toml changed since the last install, so repeated runs are quick.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=.venv/.proflake-installed
# The compiled decoder is built by the install, so a change to its source or build hook re-installs too.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ hatch_build.py -nt "$stamp" ] \
   || [ etl/proflake/readers/_pstats_columns.c -nt "$stamp" ]; then
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet -e ".[${PROFLAKE_EXTRAS:-test}]"
  touch "$stamp"
fi
