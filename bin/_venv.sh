# Sourced by bin/demo and bin/test: make ./.venv hold proflake with the extras in PROFLAKE_EXTRAS (bin/demo:
# pandas, the runtime only; bin/test: test), then activate it. Each set of extras has its own stamp, so a
# .venv made by bin/demo gets the test tools on the first bin/test; re-installs only when pyproject.toml,
# the build hook or the C decoder changed since, so repeated runs are quick.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
extras="${PROFLAKE_EXTRAS-test}"
stamp=".venv/.proflake-installed${extras:+-${extras//,/-}}"
# The compiled decoder is built by the install, so a change to its source or build hook re-installs too.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ hatch_build.py -nt "$stamp" ] \
   || [ etl/proflake/readers/_pstats_columns.c -nt "$stamp" ]; then
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet -e ".${extras:+[$extras]}"
  touch "$stamp"
fi
