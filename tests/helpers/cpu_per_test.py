"""CPU time per test, for docs/development.md's table of the slowest tests (a pytest plugin, not a test).

    PYTHONPATH=tests PYTEST_ADDOPTS="-p helpers.cpu_per_test" bin/test      # writes .cpu-per-test/*.json
    python tests/helpers/cpu_per_test.py .cpu-per-test                     # the 15 slowest, and per module

Each test's figure is user + sys of its xdist worker and of the processes it reaped during the test
(``getrusage`` before and after). A process is counted when it is reaped: a session fixture's process
(the Spark session's JVM) lands on the last test of its worker, a module fixture's (the kill sweeps'
zygote) on the module's last test; the report names those as such when a test's CPU is far above its
wall time on two cores.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest

_rows: list[tuple[str, float, float]] = []
OUT = Path(os.environ.get("PROFLAKE_CPU_PER_TEST_DIR", ".cpu-per-test"))


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu(), time.monotonic()
    yield
    _rows.append((item.nodeid, _cpu() - cpu, time.monotonic() - wall))


def pytest_sessionfinish(session):
    if not _rows:
        return
    OUT.mkdir(exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (OUT / f"{worker}-{os.getpid()}.json").write_text(json.dumps({"rows": _rows, "total": _cpu()}))


def report(folder: Path, top: int = 15) -> str:
    rows = [row for path in sorted(folder.glob("*.json")) for row in json.loads(path.read_text())["rows"]]
    rows.sort(key=lambda row: -row[1])
    lines = [f"{len(rows)} tests, {sum(r[1] for r in rows):,.0f} s of CPU", "", "| test | CPU s | wall s |", "|---|---|---|"]
    for name, cpu, wall in rows[:top]:
        note = " (and processes reaped at its teardown)" if cpu > 2.5 * wall + 5 else ""
        lines.append(f"| {name.removeprefix('tests/')}{note} | {cpu:.1f} | {wall:.1f} |")
    modules: dict[str, float] = {}
    for name, cpu, _ in rows:
        modules[name.split("::")[0]] = modules.get(name.split("::")[0], 0.0) + cpu
    lines += ["", "| module | CPU s |", "|---|---|"]
    lines += [f"| {m.removeprefix('tests/')} | {c:.1f} |" for m, c in sorted(modules.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1] if len(sys.argv) > 1 else OUT)))
