"""bench/lab/cli_startup.py end to end with one round: every row measured, ratios against the floors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_cli_startup_bench_measures_every_row(tmp_path):
    out = tmp_path / "startup.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.lab.cli_startup", "--repeats", "1", "--json-out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| `proflake fetch by-step 2` |" in done.stdout
    result = json.loads(out.read_text())
    rows = {row["command"]: row for row in result["rows"]}
    assert set(rows) == {"python -c pass", "proflake --help", "import duckdb, pyarrow, deltalake", "proflake jobs",
                         "proflake fetch by-step 2"}
    for name in ("proflake --help", "proflake jobs", "proflake fetch by-step 2"):
        row = rows[name]
        assert row["wall_ms"] > 0 and row["cpu_ms"] > 0 and row["wall_ratio"] > 0, row
