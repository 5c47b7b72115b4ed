"""Profiles.diff's table and total against an oracle built from fetches: every side's samples (one node's
step each) fetched one step at a time with ``by_step(per_node=True)``, their means and spreads summed in
Python and put through the same ``compare``. Pins what diff_samples_cprofile.sql answers, however it sums:
functions merged by name from several lines of one interval, built-ins, absent functions, steps of two
intervals, matching by line, and per-second normalisation."""

from __future__ import annotations

import marshal
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from proflake.ingestion.batch import ingest
from proflake.query.diff_table import compare
from proflake.query.profiles import Profiles

FILE = "/app/train.py"
ROOT = (FILE, 1, "train_step")
# (filename, lineno, name) -> own seconds per step; two <genexpr> in one file share a key when matched by name
KEYS = {
    (FILE, 10, "forward"): 0.050,
    (FILE, 20, "backward"): 0.080,
    (FILE, 30, "<genexpr>"): 0.010,
    (FILE, 40, "<genexpr>"): 0.004,
    ("~", 0, "<built-in method builtins.len>"): 0.003,
    (FILE, 50, "log_metrics"): 0.002,
}
STEPS = 6  # per side and node


def write_interval(folder: Path, times: dict[tuple, float]) -> None:
    """A python_stats file: these own times (calls: a tenth of a millisecond each) under one root."""
    folder.mkdir(parents=True, exist_ok=True)
    stats = {}
    for key, seconds in times.items():
        calls = max(1, round(seconds * 10_000))
        stats[key] = (calls, calls, seconds, seconds * 1.5, {ROOT: (calls, calls, seconds, seconds * 1.5)})
    stats[ROOT] = (1, 1, 0.0, sum(times.values()), {})
    (folder / "python_stats").write_bytes(marshal.dumps(stats))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Job ``job``, two nodes, steps 0..11 (base 0..5, head 6..11, where backward is 20% slower); log_metrics
    is missing from some steps; algo-2's step 3 is two intervals (stepstart..forwardpassend..stepend)."""
    tmp = tmp_path_factory.mktemp("diff-answers")
    rng = np.random.default_rng(11)
    for node in ("algo-1", "algo-2"):
        for step in range(2 * STEPS):
            factor = rng.lognormal(0.0, 0.05)
            times = {k: v * factor * rng.lognormal(0.0, 0.1) for k, v in KEYS.items()}
            if step >= STEPS:
                times[(FILE, 20, "backward")] *= 1.2
            if step % 4 == 1:
                del times[(FILE, 50, "log_metrics")]
            start = 1_700_000_000_000_000 + step * 1_000_000
            folder = tmp / "jobs" / "job" / "framework" / "pytorch" / "cprofile" / node
            if node == "algo-2" and step == 3:
                middle = start + 200_000
                first = {k: v / 2 for k, v in times.items()}
                write_interval(folder / f"train-{step}-stepstart-{start}_train-{step}-forwardpassend-{middle}", first)
                write_interval(folder / f"train-{step}-forwardpassend-{middle}_train-{step}-stepend-{start + 500_000}", first)
            else:
                write_interval(folder / f"train-{step}-stepstart-{start}_train-{step}-stepend-{start + 500_000}", times)
    ingest(str(tmp / "jobs"), str(tmp / "store"), workers=1)
    return tmp / "store"


def key_of(filename: str, lineno: int, name: str, match: str) -> str:
    if match == "line":
        return name if filename == "~" else f"{filename}:{lineno}({name})"
    return name if filename in ("~", "") else f"{filename}({name})"


def side_summary(profiles: Profiles, steps: range, match: str, per: str) -> tuple[pa.Table, int]:
    """What diff_samples_cprofile.sql should answer for one side, from one fetch per step."""
    samples: dict[tuple, dict[str, list[float]]] = {}
    info: dict[str, tuple] = {}
    for step in steps:
        fetched = profiles.by_step(step, step, job="job", per_node=True)
        seconds: dict[tuple, float] = defaultdict(float)
        for interval in fetched.intervals.to_pylist():
            seconds[(interval["node_id"], interval["start_step"])] += interval["duration_s"]
        for (node, _), wall in seconds.items():
            samples[(node, step)] = {"divisor": [wall if per == "second" else 1.0]}
        for row in fetched.table.to_pylist():
            key = key_of(row["filename"], row["lineno"], row["function_name"], match)
            info.setdefault(key, (row["filename"], row["lineno"], row["function_name"]))
            sums = samples[(row["node_id"], step)].setdefault(key, [0.0, 0.0, 0.0])
            sums[0] += row["tottime"]
            sums[1] += row["cumtime"]
            sums[2] += row["total_calls"]
    n = len(samples)
    rows = []
    keys: list[str | None] = [None, *sorted(info)]
    for key in keys:
        values = np.zeros((n, 3))
        present = 0
        for i, sample in enumerate(samples.values()):
            divisor = sample["divisor"][0]
            if key is None:
                own = sum(v[0] for k, v in sample.items() if k != "divisor")
                calls = sum(v[2] for k, v in sample.items() if k != "divisor")
                values[i] = (own / divisor, own / divisor, calls / divisor)
                present += 1
            elif key in sample:
                values[i] = np.array(sample[key]) / divisor
                present += 1
        mean = values.mean(axis=0)
        m2 = ((values - mean) ** 2).sum(axis=0)
        filename, lineno, name = info.get(key, (None, None, None)) if key is not None else (None, None, None)
        rows.append(
            {
                "function": key,
                "filename": filename,
                "lineno": lineno if match == "line" and key is not None else None,
                "function_name": name,
                "samples": n,
                "present": present,
                "self_mean": mean[0],
                "self_m2": m2[0],
                "cum_mean": mean[1],
                "cum_m2": m2[1],
                "calls_mean": mean[2],
                "calls_m2": m2[2],
                "seconds": 0.0,
            }
        )
    return pa.Table.from_pylist(rows), n


@pytest.mark.parametrize("match, per", [("name", "step"), ("line", "step"), ("name", "second")])
def test_the_diff_answers_what_its_samples_fetched_one_by_one_say(store, match, per):
    profiles = Profiles(store)
    base_range, head_range = range(0, STEPS), range(STEPS, 2 * STEPS)
    result = profiles.diff(
        {"job": "job", "start_step": base_range[0], "end_step": base_range[-1]},
        {"job": "job", "start_step": head_range[0], "end_step": head_range[-1]},
        match=match,
        per=per,
    )
    (base, n_base), (head, n_head) = (side_summary(profiles, r, match, per) for r in (base_range, head_range))
    total, table = compare(base, head, n_base, n_head)
    assert result.base.samples == n_base == 2 * STEPS and result.base.intervals == 2 * STEPS + 1
    assert set(total) == set(result.total)
    for name, expected in total.items():
        assert_same(result.total[name], expected, f"total {name}")
    actual = {row["function"]: row for row in result.table.to_pylist()}
    expected_rows = {row["function"]: row for row in table.to_pylist()}
    assert set(actual) == set(expected_rows)
    if match == "name":
        assert f"{FILE}(<genexpr>)" in actual  # two lines of one interval, summed per sample
    for function, row in expected_rows.items():
        for column, value in row.items():
            if column not in ("filename", "lineno", "function_name") or match == "line":
                assert_same(actual[function][column], value, f"{function} {column}")
    assert [r["function"] for r in result.table.to_pylist()][:3] == [r["function"] for r in table.to_pylist()][:3]


def assert_same(actual, expected, what: str) -> None:
    if isinstance(expected, float) and isinstance(actual, float):
        assert math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12), (what, actual, expected)
    else:
        assert actual == expected, (what, actual, expected)
