"""The checked-in store of an older release (tests/data/stores/v1/): how it was made, and its answers.

``build`` was run ONCE, with proflake at commit c1d8011 (store schema version 1: before the store
recorded a schema version), from a worktree of that commit:

    .venv/bin/python -m tests.helpers.old_store tests/data/stores/v1

It writes the source files (copies of tests/data/format-samples, so their bytes are fixed) under
SOURCE_ROOT, ingests them in two batches, then records what that release answered on the store in
tests/data/stores/v1-answers.json. The report data were added to the answers later, by the same
release (c1d8011's package first on the path, this file as it is now), without rebuilding the store:

    PYTHONPATH=<a worktree of c1d8011>/etl .venv/bin/python -m tests.helpers.old_store --answers tests/data/stores/v1 The store's ``source_uri`` values name SOURCE_ROOT (absolute paths,
as a local ingest records them); the answers read them back as stored, so they do not depend on where
the store sits (tests copy it to their tmp_path). ``answers`` runs in tests too, with this release, to
compare: it uses only the public Python API both releases have.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from pathlib import Path
from typing import Any

SOURCE_ROOT = Path("/tmp/proflake-v1-fixture-source")
SAMPLES = Path(__file__).resolve().parent.parent / "data" / "format-samples"
# Two nodes, steps 0-2 of train, an eval step; cProfile dumps of Python 3.8 and 3.13 alternate.
CPROFILE_INTERVALS = [
    ("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "cprofile-py3.8.pstats"),
    ("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "cprofile-py3.13.pstats"),
    ("algo-1", "train-2-stepstart-4000_train-2-stepend-5000", "cprofile-py3.8.pstats"),
    ("algo-1", "eval-0-stepstart-5100_eval-0-stepend-6000", "cprofile-py3.13.pstats"),
    ("algo-2", "train-0-stepstart-2050_train-0-stepend-2950", "cprofile-py3.13.pstats"),
    ("algo-2", "train-1-stepstart-3050_train-1-stepend-3950", "cprofile-py3.8.pstats"),
]
PYINSTRUMENT_INTERVALS = [
    ("algo-1", "prestepzero-*-start-1000_train-0-stepstart-2000", "pyinstrument-5.1.3.json"),
    ("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "pyinstrument-4.7.3.json"),
]
# The second batch: another job, one cProfile and one pyinstrument interval.
SECOND_JOB = [
    ("cprofile", "algo-1", "train-0-stepstart-10000_train-0-stepend-11000", "cprofile-py3.13.pstats"),
    ("pyinstrument", "algo-1", "train-0-stepstart-10000_train-0-stepend-11000", "pyinstrument-5.1.3.json"),
]
JOBS = ("run-old-a", "run-old-b")


def _place(job_dir: Path, profiler: str, node: str, name: str, sample: str) -> None:
    folder = job_dir / "framework" / "pytorch" / profiler / node / name
    folder.mkdir(parents=True, exist_ok=True)
    if profiler == "cprofile":
        shutil.copy(SAMPLES / sample, folder / "python_stats")
    else:
        shutil.copy(SAMPLES / sample, folder / "python_stats.json")
        (folder / "python_stats.html").write_text("<html></html>")


def write_sources(root: Path = SOURCE_ROOT) -> tuple[Path, Path]:
    """The two jobs' source folders under ``root`` (replaced if there), with a truncated dump in the first."""
    shutil.rmtree(root, ignore_errors=True)
    first, second = root / JOBS[0], root / JOBS[1]
    for node, name, sample in CPROFILE_INTERVALS:
        _place(first, "cprofile", node, name, sample)
    for node, name, sample in PYINSTRUMENT_INTERVALS:
        _place(first, "pyinstrument", node, name, sample)
    bad = first / "framework" / "pytorch" / "cprofile" / "algo-2" / "train-2-stepstart-4050_train-2-stepend-4950"
    bad.mkdir(parents=True)
    (bad / "python_stats").write_bytes((SAMPLES / "cprofile-py3.8.pstats").read_bytes()[:700])  # quarantined
    for profiler, node, name, sample in SECOND_JOB:
        _place(second, profiler, node, name, sample)
    return first, second


def build(store: Path) -> None:
    """Write the sources and ingest them into a new store at ``store`` in two batches."""
    from proflake import ingest

    shutil.rmtree(store, ignore_errors=True)
    first, second = write_sources()
    ingest(str(first), str(store), job_id=JOBS[0], workers=1)
    ingest(str(second), str(store), job_id=JOBS[1], workers=1)


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _rows(table: Any) -> list[dict]:
    return [_plain(row) for row in table.to_pylist()]


def _columns(table: Any) -> dict[str, list]:
    """A table as column -> values, rows sorted by every column (smaller than rows, order-free)."""
    rows = sorted(table.to_pylist(), key=lambda row: json.dumps(_plain(row), sort_keys=True))
    return {name: [_plain(row[name]) for row in rows] for name in table.column_names}


def answers(store: Path) -> dict[str, Any]:
    """What the store answers, as JSON values: jobs, batches, the quarantine, nodes, the interval list,
    and every fetch method's table and intervals for each job."""
    from proflake import Profiles

    profiles = Profiles(str(store))
    out: dict[str, Any] = {
        "jobs": _rows(profiles.jobs()),
        "batches": _rows(profiles.batches()),
        "errors": _rows(profiles.errors(include_closed=True)),
    }
    fetches = {
        "by_step 0-1": ("by_step", {"start_step": 0, "end_step": 1}),
        "by_step all": ("by_step", {"start_step": "*", "end_step": "*"}),
        "by_step 1 algo-2": ("by_step", {"start_step": 1, "node": "algo-2"}),
        "by_time": ("by_time", {"start_time_s": 0.0035, "end_time_s": 0.0045}),
        "between_modes": ("between_modes", {"start_mode": "train", "end_mode": "eval"}),
        "by_training_phase": ("by_training_phase", {}),
        "by_job_phase": ("by_job_phase", {}),
        "pre_step_zero pyinstrument": ("pre_step_zero", {"profiler": "pyinstrument"}),
        "by_step all pyinstrument": ("by_step", {"start_step": "*", "end_step": "*", "profiler": "pyinstrument"}),
    }
    for job in JOBS:
        answers_of_job: dict[str, Any] = {
            "nodes": profiles.nodes(job=job),
            "list": _rows(profiles.list_profile_stats(job=job)),
        }
        for label, (method, args) in fetches.items():
            if args.get("node") not in (None, *answers_of_job["nodes"]):
                continue
            result = profiles.fetch(method, job=job, **args)
            answers_of_job[label] = {"table": _columns(result.table), "intervals": sorted(result.intervals["interval_id"].to_pylist())}
        answers_of_job["report"] = _report(profiles.by_job_phase(job=job))
        out[job] = answers_of_job
    return out


# What the report page shows, but for the function tables (the fetch answers hold them) and the flame
# graph; its time and release say when and by what it was made.
REPORT_PARTS = ("meta", "overview", "steps", "phases", "per_node")


def _report(result: Any) -> dict[str, Any]:
    from proflake.pages import report_data

    data = report_data(result)
    parts = {part: _plain(data[part]) for part in REPORT_PARTS}
    parts["meta"] = {k: v for k, v in parts["meta"].items() if k not in ("generated_at", "proflake")}
    return json.loads(json.dumps(parts, default=str))


if __name__ == "__main__":
    target = Path(sys.argv[-1])
    if sys.argv[1] != "--answers":
        build(target)
    result = answers(target)
    (target.parent / f"{target.name}-answers.json").write_text(json.dumps(result, sort_keys=True, separators=(",", ":")) + "\n")
