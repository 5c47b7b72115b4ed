"""proflake diff / Profiles.diff: synthetic jobs whose truth is known, written as pstats dictionaries and
pyinstrument trees with chosen times, so every expected change (and every non-change) is exact."""

from __future__ import annotations

import csv
import io
import json
import marshal
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from proflake.cli import cli
from proflake.errors import ExitCode
from proflake.ingestion.batch import ingest
from proflake.query import diff as diff_module
from proflake.query import stats
from proflake.query.profiles import Profiles

# Own time per step of each function, in seconds, on the base side.
FUNCTIONS = {
    "forward": 0.050,
    "backward": 0.080,
    "load_batch": 0.020,
    "log_metrics": 0.004,
    "checkpoint": 0.002,
}
FILE = "/app/train.py"
LINES = {name: 10 * (i + 1) for i, name in enumerate(FUNCTIONS)}


def step_times(
    rng: np.random.Generator, functions: dict[str, float], steps: int, jitter: float = 0.10
) -> list[dict]:
    """Per step, each function's own time: a step-wide factor (the machine) times its own noise."""
    out = []
    for _ in range(steps):
        step_factor = rng.lognormal(0.0, jitter / 2)
        out.append({f: mean * step_factor * rng.lognormal(0.0, jitter) for f, mean in functions.items()})
    return out


def write_cprofile_step(stats_dir: Path, times: dict[str, float], lines: dict[str, int] = LINES) -> None:
    """A python_stats file holding exactly these own times: the functions under one train_step root."""
    stats_dir.mkdir(parents=True, exist_ok=True)
    root = (FILE, 1, "train_step")
    stats = {}
    for name, seconds in times.items():
        stats[(FILE, lines[name], name)] = (1, 1, seconds, seconds, {root: (1, 1, seconds, seconds)})
    total = sum(times.values())
    stats[root] = (1, 1, 0.0, total, {})
    (stats_dir / "python_stats").write_bytes(marshal.dumps(stats))


def write_pyinstrument_step(stats_dir: Path, times: dict[str, float], start: float) -> None:
    """A pyinstrument session: train_step with one child frame per function, self times as given."""
    stats_dir.mkdir(parents=True, exist_ok=True)
    children = [
        {
            "function": name,
            "file_path": FILE,
            "file_path_short": "train.py",
            "line_no": LINES[name],
            "time": t,
            "await_time": 0.0,
            "is_application_code": True,
            "children": [],
        }
        for name, t in times.items()
    ]
    total = sum(times.values())
    session = {
        "start_time": start,
        "duration": total,
        "sample_count": 100,
        "program": "train.py",
        "cpu_time": total,
        "root_frame": {
            "function": "train_step",
            "file_path": FILE,
            "file_path_short": "train.py",
            "line_no": 1,
            "time": total,
            "await_time": 0.0,
            "is_application_code": True,
            "children": children,
        },
    }
    (stats_dir / "python_stats.json").write_text(json.dumps(session))
    (stats_dir / "python_stats.html").write_text("<html></html>")


def write_job(
    root: Path,
    job: str,
    per_node_steps: dict[str, list[dict]],
    *,
    first_step: int = 0,
    profiler: str = "cprofile",
    lines: dict[str, int] = LINES,
) -> None:
    """One train interval per node and step, one second apart, in smdebug's layout."""
    for node, steps in per_node_steps.items():
        for i, times in enumerate(steps):
            step = first_step + i
            start = 1_700_000_000_000_000 + step * 1_000_000
            name = f"train-{step}-stepstart-{start}_train-{step}-stepend-{start + 500_000}"
            folder = root / job / "framework" / "pytorch" / profiler / node / name
            if profiler == "cprofile":
                write_cprofile_step(folder, times, lines)
            else:
                write_pyinstrument_step(folder, times, start / 1e6)


def build_store(tmp_path: Path, jobs: dict[str, dict[str, list[dict]]], **kwargs) -> Path:
    source, store = tmp_path / "jobs", tmp_path / "store"
    for job, nodes in jobs.items():
        write_job(source, job, nodes, **kwargs)
    ingest(str(source), str(store), workers=1)
    return store


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    """run-a and run-b, two nodes, 12 steps each; in run-b backward is 30% slower, the rest unchanged.
    run-a also has steps 12..23 with nothing changed, to diff two step ranges of one job."""
    tmp = tmp_path_factory.mktemp("diff")
    rng = np.random.default_rng(7)
    slower = {**FUNCTIONS, "backward": FUNCTIONS["backward"] * 1.3}
    jobs = {
        "run-a": {n: step_times(rng, FUNCTIONS, 24) for n in ("algo-1", "algo-2")},
        "run-b": {n: step_times(rng, slower, 12) for n in ("algo-1", "algo-2")},
    }
    return build_store(tmp, jobs)


def by_function(result) -> dict[str, dict]:
    return {row["function_name"]: row for row in result.table.to_pylist()}


# -- the statistics ------------------------------------------------------------------------------------
def test_t_distribution_matches_published_tables():
    # Two-sided 95% critical values of Student's t (any statistics textbook's table).
    assert stats.t_quantile(0.95, np.array([1, 2, 5, 10, 30])) == pytest.approx(
        [12.706, 4.303, 2.571, 2.228, 2.042], abs=1e-3
    )
    assert stats.t_quantile(0.99, np.array([10])) == pytest.approx([3.169], abs=1e-3)
    assert stats.t_two_sided_p(np.array([2.228, 0.0, np.inf]), np.array([10, 4, 3])) == pytest.approx(
        [0.05, 1.0, 0.0], abs=1e-4
    )


def test_welch_matches_a_hand_computed_example():
    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 4.0, 6.0, 8.0, 10.0])
    r = stats.welch(a.mean(), a.var(ddof=1), 4, b.mean(), b.var(ddof=1), 5)
    se = np.sqrt(a.var(ddof=1) / 4 + b.var(ddof=1) / 5)
    assert float(r["t"]) == pytest.approx((6 - 2.5) / se)
    df = se**4 / ((a.var(ddof=1) / 4) ** 2 / 3 + (b.var(ddof=1) / 5) ** 2 / 4)
    assert float(r["df"]) == pytest.approx(df)
    assert float(r["ci_low"]) == pytest.approx(3.5 - float(stats.t_quantile(0.95, df)) * se)


def test_holm_adjusts_in_order_and_skips_untested():
    adjusted = stats.holm(np.array([0.01, 0.04, np.nan, 0.03, 0.5]))
    assert adjusted[[0, 1, 3, 4]] == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert np.isnan(adjusted[2])


def _noise_pair(rng, steps_base, steps_head, factor=None, jitter=0.10):
    head_functions = dict(FUNCTIONS)
    if factor:
        head_functions["backward"] *= factor
    base = step_times(rng, FUNCTIONS, steps_base, jitter)
    head = step_times(rng, head_functions, steps_head, jitter)
    def as_samples(steps):
        return {f: [s[f] for s in steps] for f in FUNCTIONS}
    return (diff_module.summarise(as_samples(base)), diff_module.summarise(as_samples(head)))


def test_no_change_pairs_rarely_fail_the_gate_over_many_seeds():
    """The false-positive rate of a 10% gate on pairs with no change and 10% step-to-step jitter."""
    rng = np.random.default_rng(2026)
    failures = significant = 0
    seeds = 100
    for _ in range(seeds):
        base, head = _noise_pair(rng, 12, 20)
        total, table = diff_module.compare(base, head, 12, 20)
        result = _result(total, table)
        failures += bool(result.gate(total=0.10, function=0.10))
        significant += any(table["significant"].to_pylist()) or total["significant"]
    # Holm keeps any false "significant" below alpha = 5% over the family; the threshold makes it rarer.
    assert significant / seeds <= 0.06
    assert failures / seeds <= 0.02


def test_a_30_percent_slower_function_is_found_among_noisy_steps():
    rng = np.random.default_rng(11)
    slower = gated = 0
    for _ in range(50):
        base, head = _noise_pair(rng, 12, 12, factor=1.3)
        total, table = diff_module.compare(base, head, 12, 12)
        rows = {r["function"]: r for r in table.to_pylist()}
        slower += rows["backward"]["status"] == "slower"
        gated += any("backward" in r for r in _result(total, table).gate(function=0.10))
    assert slower >= 49  # the change is significant nearly always
    # the gate asks for evidence of more than +10%: with 12 steps a side and ~11% jitter it has ~90% power
    assert gated >= 40


def test_a_3_percent_change_inside_10_percent_jitter_is_not_a_regression():
    rng = np.random.default_rng(5)
    failures = 0
    for _ in range(100):
        base, head = _noise_pair(rng, 8, 8, factor=1.03)
        total, table = diff_module.compare(base, head, 8, 8)
        failures += bool(_result(total, table).gate(total=0.10, function=0.10))
    assert failures <= 2


def _pair(rng, samples, factors, jitter):
    """Base and head summaries: ``samples`` steps a side, each function's head time scaled by its factor."""
    head_functions = {f: t * factors.get(f, 1.0) for f, t in FUNCTIONS.items()}
    base = step_times(rng, FUNCTIONS, samples, jitter)
    head = step_times(rng, head_functions, samples, jitter)
    return tuple(diff_module.summarise({f: [s[f] for s in steps] for f in FUNCTIONS}) for steps in (base, head))


def test_fail_on_percent_fails_exactly_when_fail_on_total_does_over_many_generated_pairs():
    """The gate's rule (docs/diff.md, "The gate"): the total is tested first at the full alpha, the functions
    only behind it, so `--fail-on X` (both) and `--fail-on total:X` reach the same verdict on every pair."""
    rng = np.random.default_rng(32)
    verdicts = {True: 0, False: 0}
    for _ in range(300):
        samples = int(rng.integers(2, 21))
        factors = {f: float(rng.choice([1.0, 1.0, rng.uniform(0.7, 1.8)])) for f in FUNCTIONS}
        base, head = _pair(rng, samples, factors, float(rng.uniform(0.02, 0.4)))
        total, table = diff_module.compare(base, head, samples, samples)
        result = _result(total, table)
        threshold = float(rng.choice([0.0, 0.05, 0.10, 0.25]))
        both, total_only = result.gate(total=threshold, function=threshold), result.gate(total=threshold)
        assert bool(both) == bool(total_only), (both, total_only)
        if both:
            assert both[0] == total_only[0] and both[0].startswith("total ")
        verdicts[bool(both)] += 1
    assert verdicts[True] > 30 and verdicts[False] > 30  # both verdicts were reached, many times


def test_a_slower_total_fails_the_both_gate_that_holm_over_everything_passed():
    """The red team's case: every function ~39% slower, 4 steps a side. Holm over the total and every
    function diluted the total's own test, so `--fail-on 10%` passed while `total:10%` failed."""
    rng = np.random.default_rng(389)
    base, head = _pair(rng, 4, {f: 1.389 for f in FUNCTIONS}, 0.10)
    total, table = diff_module.compare(base, head, 4, 4)
    result = _result(total, table)
    (p_total,) = stats.exceeds(np.array([total["change"]]), np.array([0.10 * total["base"]]),
                               np.array([total["se"]]), np.array([total["df"]]))
    rows = [r for r in table.to_pylist() if r["status"] not in ("minor", "untested")]
    p_rows = stats.exceeds(np.array([r["self_change"] for r in rows]), np.array([0.10 * r["base_self"] for r in rows]),
                           np.array([r["self_se"] for r in rows]), np.array([r["self_df"] for r in rows]))
    diluted = stats.holm(np.concatenate([[p_total], p_rows]))[0]
    assert p_total < 0.05 <= diluted  # the old procedure's verdict: no regression
    reasons = result.gate(total=0.10, function=0.10)
    assert reasons and reasons[0].startswith("total +") and f"p={p_total:.2g} < alpha 0.05" in reasons[0]
    assert reasons[0].endswith("samples)")


def test_every_verdict_says_which_test_its_p_and_threshold():
    rng = np.random.default_rng(7)
    base, head = _pair(rng, 12, {}, 0.10)
    total, table = diff_module.compare(base, head, 12, 12)
    result = _result(total, table)
    assert result.gate(total=0.10, function=0.10) == []
    lines = result.verdict(total=0.10, function=0.10)
    assert lines[0].startswith("total ") and "not shown over +10%" in lines[0] and "one-sided Welch, p=" in lines[0]
    assert ">= alpha 0.05" in lines[0]
    assert lines[1].startswith("functions not tested: they are tested behind the total")
    alone = result.verdict(function=0.10)
    assert len(alone) == 1 and "Holm over" in alone[0] and "smallest p=" in alone[0]


def _result(total, table):
    side = diff_module.Side(diff_module.Selection(), None, None, 0, 0, 0.0)
    return diff_module.DiffResult("cprofile", "step", "name", 0.05, 0.95, 0.01, side, side, total, table, [])


# -- through the store ---------------------------------------------------------------------------------
def test_the_sql_summary_is_each_functions_mean_and_spread_over_the_steps(tmp_path):
    rng = np.random.default_rng(3)
    steps = {"algo-1": step_times(rng, FUNCTIONS, 5), "algo-2": step_times(rng, FUNCTIONS, 4)}
    # log_metrics missing from two steps: it counts 0 there
    del steps["algo-1"][1]["log_metrics"], steps["algo-2"][3]["log_metrics"]
    store = build_store(tmp_path, {"job": steps})
    result = Profiles(store).diff("job", "job")
    rows = by_function(result)
    every = [s for node in steps.values() for s in node]
    for name in FUNCTIONS:
        values = np.array([s.get(name, 0.0) for s in every])
        assert rows[name]["base_self"] == pytest.approx(values.mean())
        assert rows[name]["base_present"] == int((values > 0).sum())
    totals = np.array([sum(s.values()) for s in every])
    assert result.total["base"] == pytest.approx(totals.mean())
    assert result.base.samples == 9 and result.base.intervals == 9
    assert rows["train_step"]["base_cum"] == pytest.approx(totals.mean())
    assert result.total["significant"] is False and result.total["change"] == pytest.approx(0, abs=1e-12)


def test_two_jobs_the_slower_function_is_flagged_and_nothing_else(two_runs):
    result = Profiles(two_runs).diff("run-a", "run-b")
    rows = by_function(result)
    assert result.table["function_name"][0].as_py() == "backward"  # the largest change first
    assert rows["backward"]["status"] == "slower"
    assert rows["backward"]["self_change_ratio"] == pytest.approx(0.3, abs=0.1)
    assert (
        rows["backward"]["self_ci_low"] < rows["backward"]["self_change"] < rows["backward"]["self_ci_high"]
    )
    others = [r for name, r in rows.items() if name not in ("backward",)]
    assert all(r["status"] in ("noise", "minor") for r in others), others
    assert result.base.samples == 48 and result.head.samples == 24  # different step counts
    assert any("backward" in reason for reason in result.gate(function=0.10))
    assert rows["backward"]["share_of_change"] == pytest.approx(1.0, abs=0.35)


def test_two_step_ranges_of_one_job_show_no_change(two_runs):
    result = Profiles(two_runs).diff(
        {"job": "run-a", "start_step": 0, "end_step": 11}, {"job": "run-a", "start_step": 12, "end_step": 23}
    )
    assert result.base.samples == result.head.samples == 24
    assert result.gate(total=0.05, function=0.10) == []


def test_two_nodes_of_one_job(two_runs):
    result = Profiles(two_runs).diff({"job": "run-b", "node": "algo-1"}, {"job": "run-b", "node": "algo-2"})
    assert result.base.samples == result.head.samples == 12
    assert result.base.node_id == "algo-1" and result.head.node_id == "algo-2"
    assert result.gate(total=0.10, function=0.10) == []


def test_added_and_removed_functions(tmp_path):
    rng = np.random.default_rng(1)
    base_functions = dict(FUNCTIONS)
    head_functions = {k: v for k, v in FUNCTIONS.items() if k != "checkpoint"} | {"augment": 0.030}
    lines = {**LINES, "augment": 99}
    jobs = {
        "old": {"algo-1": step_times(rng, base_functions, 8)},
        "new": {"algo-1": step_times(rng, head_functions, 8)},
    }
    store = build_store(tmp_path, jobs, lines=lines)
    result = Profiles(store).diff("old", "new")
    rows = by_function(result)
    assert rows["augment"]["status"] == "added" and rows["augment"]["base_present"] == 0
    assert rows["augment"]["self_change_ratio"] is None and rows["augment"]["significant"] is True
    assert rows["checkpoint"]["status"] == "removed" and rows["checkpoint"]["head_self"] == 0
    assert any(reason.startswith(f"{FILE}(augment) new") for reason in result.gate(function=0.10))


def test_a_moved_function_keeps_its_key_unless_matched_by_line(tmp_path):
    rng = np.random.default_rng(2)
    jobs = {
        "old": {"algo-1": step_times(rng, FUNCTIONS, 4)},
        "new": {"algo-1": step_times(rng, FUNCTIONS, 4)},
    }
    source = tmp_path / "jobs"
    write_job(source, "old", jobs["old"])
    write_job(source, "new", jobs["new"], lines={**LINES, "forward": 555})
    ingest(str(source), str(tmp_path / "store"), workers=1)
    profiles = Profiles(tmp_path / "store")
    assert by_function(profiles.diff("old", "new"))["forward"]["status"] not in ("added", "removed")
    by_line = {r["function"]: r for r in profiles.diff("old", "new", match="line").table.to_pylist()}
    assert by_line[f"{FILE}:555(forward)"]["status"] == "added"
    assert by_line[f"{FILE}:10(forward)"]["status"] == "removed"


def test_pyinstrument_jobs(tmp_path):
    rng = np.random.default_rng(4)
    slower = {**FUNCTIONS, "forward": FUNCTIONS["forward"] * 1.3}
    jobs = {"a": {"algo-1": step_times(rng, FUNCTIONS, 10)}, "b": {"algo-1": step_times(rng, slower, 10)}}
    store = build_store(tmp_path, jobs, profiler="pyinstrument")
    result = Profiles(store).diff("a", "b")
    assert result.profiler == "pyinstrument"
    rows = by_function(result)
    assert rows["forward"]["status"] == "slower"
    assert rows["forward"]["base_calls"] == 1.0  # frames per step
    assert rows["train_step"]["base_cum"] == pytest.approx(result.total["base"])
    assert [n for n, r in rows.items() if r["status"] == "slower"] == ["forward"]


def test_one_sample_a_side_is_said_and_never_significant(two_runs):
    result = Profiles(two_runs).diff(
        {"job": "run-a", "node": "algo-1", "start_step": 3},
        {"job": "run-b", "node": "algo-1", "start_step": 3},
    )
    assert result.base.samples == 1
    assert any("too few for a significance test" in w for w in result.warnings)
    assert not any(result.table["significant"].to_pylist())
    assert set(result.table["status"].to_pylist()) == {"untested"}
    assert result.gate(total=0.0, function=0.0) == []


def test_per_second_divides_by_each_steps_wall_time(two_runs):
    result = Profiles(two_runs).diff("run-a", "run-b", per="second")
    # each interval lasts 0.5 s: per second is twice per step
    per_step = Profiles(two_runs).diff("run-a", "run-b")
    assert result.total["base"] == pytest.approx(2 * per_step.total["base"])


# -- the command ---------------------------------------------------------------------------------------
def test_cli_gate_fails_with_its_own_exit_code_and_json(two_runs):
    runner = CliRunner()
    args = ["diff", "run-a", "run-b", "--store", str(two_runs), "--fail-on", "10%", "--format", "json"]
    result = runner.invoke(cli, args)
    assert result.exit_code == ExitCode.REGRESSION == 5, result.output
    report = json.loads(result.stdout)
    assert report["gate"]["failed"] is True
    assert any("backward" in r for r in report["gate"]["reasons"])
    assert report["functions"][0]["function_name"] == "backward"
    assert report["base"]["samples"] == 48 and report["head"]["samples"] == 24
    assert "regression" in result.stderr


def test_cli_gate_passes_on_a_no_change_pair(two_runs):
    args = [
        "diff",
        "run-a",
        "--base-steps",
        "0:11",
        "--head-steps",
        "12:23",
        "--store",
        str(two_runs),
        "--fail-on",
        "10%",
        "--format",
        "csv",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    header = next(csv.reader(io.StringIO(result.stdout)))
    assert header[:2] == ["function", "filename"] and "p_adjusted" in header
    assert "no significant regression" in result.stderr
    # ... and why: the test, its p-value against alpha, the threshold and the samples.
    assert "total " in result.stderr and "not shown over +10% (one-sided Welch, p=" in result.stderr
    assert "12 vs 12 samples" in result.stderr or "24 vs 24 samples" in result.stderr, result.stderr


def test_cli_fail_on_total_only_and_table(two_runs):
    result = CliRunner().invoke(
        cli, ["diff", "run-a", "run-b", "--store", str(two_runs), "--fail-on", "total:50%"]
    )
    assert result.exit_code == 0, result.output
    assert "backward" in result.stdout.splitlines()[2]


def test_cli_rejects_a_bad_threshold(two_runs):
    result = CliRunner().invoke(cli, ["diff", "run-a", "run-b", "--store", str(two_runs), "--fail-on", "ten"])
    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert "ten" in result.stderr


# -- SQL: the profile_diff table macro -------------------------------------------------------------------
GOLDEN_QUERY = """
SELECT function, presence, base_samples AS nb, head_samples AS nh, round(base_self, 3) AS base_self,
       round(head_self, 3) AS head_self, round(self_change_ratio, 3) AS ratio, round(welch_t, 3) AS t,
       round(welch_df, 2) AS df
FROM profile_diff('old', 'new', base_first_step := 0, base_last_step := 2, head_first_step := 0)
"""
# Checked by hand: fwd 2.5 s slower on a 2 s base (+125%); se = sqrt(1/3 + (5/3)/4) = sqrt(0.75),
# t = 2.5 / 0.866 = 2.887, Welch df = 0.75^2 / ((1/3)^2/2 + (5/12)^2/3) = 4.96; extra: mean 1, var 2/3 over 4
# steps, t = 1 / sqrt(1/6) = 2.449, df 3; gone: no spread on either side, so no t.
GOLDEN_OUTPUT = """\
"function","presence","nb","nh","base_self","head_self","ratio","t","df"
"/app/train.py(fwd)","both",3,4,2,4.5,1.25,2.887,4.96
"/app/train.py(extra)","added",3,4,0,1,,2.449,3
"/app/train.py(gone)","removed",3,4,0.5,0,-1,,
"/app/train.py(train_step)","both",3,4,0,0,,,
"""


@pytest.fixture(scope="module")
def golden_store(tmp_path_factory) -> Path:
    """Exact times: fwd 1, 2, 3 s in old's steps 0-2 (its step 3 is outside the range), 3, 4, 5, 6 s in
    new's four steps; gone 0.5 s in each old step and absent from new; extra 1, 0, 2, 1 s in new only."""
    tmp = tmp_path_factory.mktemp("golden")
    lines = {"fwd": 10, "gone": 20, "extra": 30}
    old = [
        {"fwd": 1.0, "gone": 0.5},
        {"fwd": 2.0, "gone": 0.5},
        {"fwd": 3.0, "gone": 0.5},
        {"fwd": 9.0, "gone": 0.5},
    ]
    new = [{"fwd": 3.0, "extra": 1.0}, {"fwd": 4.0}, {"fwd": 5.0, "extra": 2.0}, {"fwd": 6.0, "extra": 1.0}]
    source = tmp / "jobs"
    write_job(source, "old", {"algo-1": old}, lines=lines)
    write_job(source, "new", {"algo-1": new}, lines=lines)
    ingest(str(source), str(tmp / "store"), workers=1)
    return tmp / "store"


def test_profile_diff_macro_golden(golden_store):
    # CSV: the stable contract for programs (the text table's layout is for people and may change).
    result = CliRunner().invoke(cli, ["sql", GOLDEN_QUERY, "--store", str(golden_store), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.replace("\r\n", "\n") == GOLDEN_OUTPUT


def test_profile_diff_macro_agrees_with_profiles_diff(two_runs):
    profiles = Profiles(two_runs)
    python = by_function(
        profiles.diff({"job": "run-a", "start_step": 0, "end_step": 11}, {"job": "run-b", "node": "algo-2"})
    )
    sql = profiles.sql(
        "SELECT * FROM profile_diff('run-a', 'run-b', base_first_step := 0, base_last_step := 11, head_node := 'algo-2')"
    ).to_pylist()
    assert len(sql) == len(python)
    for row in sql:
        mine = python[row["function"].split("(")[-1].rstrip(")")]
        assert row["base_samples"] == 24 and row["head_samples"] == 12
        assert row["base_self"] == pytest.approx(mine["base_self"])
        assert row["head_self"] == pytest.approx(mine["head_self"])
        assert row["base_cum"] == pytest.approx(mine["base_cum"])
        if mine["self_se"]:
            assert row["self_se"] == pytest.approx(mine["self_se"])
            assert row["welch_df"] == pytest.approx(mine["self_df"])
