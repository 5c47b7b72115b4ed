"""The benchmark harness: the user's benchmark (bench/) on a tiny corpus; the lab (bench/lab/: its full run, the
A/B driver, the 2k-file run) in the slow tier."""

from __future__ import annotations

import json
import marshal
import pstats
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

METHODS = {
    "by_step",
    "by_step_range",
    "by_time",
    "between_modes",
    "pre_step_zero",
    "post_hook_close",
    "by_training_phase",
    "by_job_phase",
    "list_profile_stats",
    "nodes",
}
SMOKE_METHODS = ("by_step", "by_training_phase", "by_job_phase", "nodes")
COLUMNS = {
    "native_warm",
    "native_cold",
    "compat_warm",
    "compat_drop_in",
    "cli",
    "baseline",
    "baseline_cached",
    "ratios",
    "same_answer",
}
RATIOS = {
    "baseline_over_native_warm",
    "baseline_over_native_cold",
    "baseline_over_compat_warm",
    "baseline_over_compat_drop_in",
    "baseline_over_cli",
    "baseline_cached_over_compat_warm",
}


def run_bench(tmp_path: Path, files: int, nodes: int, *extra: str, timeout: int = 600) -> tuple[dict, Path]:
    corpus = tmp_path / "corpus"
    result = tmp_path / "result.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "bench.lab.run",
            "--files", str(files), "--nodes", str(nodes), "--out", str(corpus), "--json-out", str(result), *extra,
        ],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^\| method +\| nodes +\|", done.stdout, re.MULTILINE)  # the markdown table
    return json.loads(result.read_text()), corpus


def check_result(data: dict, methods: set[str] | tuple[str, ...] = tuple(METHODS)) -> None:
    assert data["floor"]["seconds"] > 0
    # Parsing and writing Parquet is more work than reading alone, and wrote something.
    assert data["parquet_floor"]["seconds"] > 0 and data["parquet_floor"]["bytes_written"] > 0
    assert data["meta"]["cprofile_decoder"] == "compiled"
    one = data["ingest"]["runs"]["1"]
    assert one["seconds"] > 0 and one["x_floor"] > 0 and one["peak_rss_mb"] > 0
    # Ingest is the fastest of its passes, as the floors are of theirs (bench.lab.run --ingest-passes).
    assert len(one["passes_seconds"]) == 2 and one["seconds"] == pytest.approx(min(one["passes_seconds"]), abs=1e-3)
    # Each pass's floor pass counts, and the fastest pass is set against its own.
    assert len(one["adjacent_floors_seconds"]) == 2
    assert one["x_adjacent_floor"] == pytest.approx(one["seconds"] / one["adjacent_floor_seconds"])
    # And a Parquet-floor pass before each, which counts towards the run's fastest Parquet floor.
    assert len(one["adjacent_parquet_floors_seconds"]) == 2 and min(one["adjacent_parquet_floors_seconds"]) > 0
    # Every pass over its own Parquet-floor pass; the median of those is the paired ratio.
    paired = [i / f for i, f in zip(one["passes_seconds"], one["adjacent_parquet_floors_seconds"])]
    assert one["x_adjacent_parquet_floors"] == pytest.approx(paired)
    assert one["x_adjacent_parquet_floor"] == pytest.approx((paired[0] + paired[1]) / 2)
    from bench.lab.cases.ingest import best_parquet_floor
    from bench.lab.targets import fmt_x as _fmt_x

    every_parquet_pass = [*data["parquet_floor"]["passes_seconds"]] + [
        s for run in data["ingest"]["runs"].values() if isinstance(run, dict) for s in run["adjacent_parquet_floors_seconds"]
    ]
    assert best_parquet_floor(data) == pytest.approx(min(every_parquet_pass), abs=1e-3)  # passes_seconds are rounded
    targets = {t["name"]: t for t in data["targets"]}
    assert targets["ingest, 1 worker, against the Parquet floor"]["measured"] == _fmt_x(one["seconds"] / best_parquet_floor(data))
    paired_target = targets["ingest, 1 worker, each pass against the Parquet floor pass just before it (median)"]
    assert paired_target["measured"] == _fmt_x(one["x_adjacent_parquet_floor"])
    assert data["floor"]["seconds"] >= 0 and min(one["adjacent_floors_seconds"]) > 0
    assert one["report"]["failed"] == 0
    if data["ingest"]["workers_supported"]:
        assert data["ingest"]["runs"]["2"]["x_floor"] > 0
    else:
        assert data["ingest"]["runs"]["2"].startswith("n/a")
    assert 0 < data["ingest"]["incremental"]["x_full"]
    assert len(data["ingest"]["incremental"]["passes_seconds"]) == 3
    assert data["ingest"]["incremental"]["report"]["new_intervals"] == 0
    assert 0 < data["store"]["x_raw"]
    # The host-drift note spans the CPU probe of every row of the ingest table, the Parquet floor's too.
    rows = [data["floor"], data["parquet_floor"], data.get("readers", {}), data["ingest"]["incremental"],
            *[r for r in data["ingest"]["runs"].values() if isinstance(r, dict)]]
    probes = [row["machine"]["cpu_probe_ms"] for row in rows if row.get("machine")]
    assert f"A fixed CPU probe took {min(probes):.1f}-{max(probes):.1f} ms across these rows" in data["markdown"]
    assert set(data["fetch"]) == set(methods)
    for method, entry in data["fetch"].items():
        scopes = {"all"} if method in ("list_profile_stats", "nodes") else {"any", "all"}
        assert set(entry["scopes"]) == scopes, method
        for scope, cell in entry["scopes"].items():
            assert COLUMNS <= set(cell), (method, scope)
            assert set(cell["ratios"]) == RATIOS, (method, scope)
            for column in ("native_warm", "native_cold", "cli", "baseline"):
                assert cell[column].get("median_ms", 0) > 0, (method, scope, column, cell[column])
            assert cell["ratios"]["baseline_over_native_warm"] > 0
            # The native API must answer exactly what smdebug's algorithm answers.
            assert cell["same_answer"]["native"].startswith("match"), (method, scope, cell["same_answer"])
            assert cell["same_answer"]["compat"]  # a verdict, even when the compatible API is not there yet
    names = {t["name"] for t in data["targets"]}
    assert {"ingest, 1 worker", "ingest, 1 worker, against the Parquet floor", "incremental re-run", "ingest peak RSS", "store size"} <= names
    # The single step, four calls alternated: every round timed, and the targets read from the round ratios.
    from statistics import median

    from bench.lab.targets import TARGETS

    one_step = data["single_step"]
    runs = one_step["runs_ms"]
    assert set(runs) == {"compat", "smdebug_cached", "native", "sql_floor"}
    assert all(len(times) == one_step["rounds"] and min(times) > 0 for times in runs.values())
    for name in ("compat", "native", "sql_floor"):  # each call's time over smdebug's, round by round
        ratios = [a / b for a, b in zip(runs[name], runs["smdebug_cached"])]
        assert one_step["x_smdebug_cached"][name] == pytest.approx(median(ratios), rel=1e-3, abs=1e-3)
    # The floor is what a warm native by_step runs: the selection and the roll-up, nothing else.
    assert one_step["sql_floor_statements"] == ["by_step", "rollup_cprofile"]
    # The compatible call runs the floor's two statements and more (the caller edges, the pstats.Stats), but
    # how much longer it takes is a measurement, not a property: on a busy machine the ratio lands either
    # side of 1 (0.97 was seen), so only its presence and its arithmetic are checked here.
    assert one_step["compat_x_sql_floor"] > 0
    assert targets["compat by_step (one step) vs smdebug cached, alternated"]["measured"].startswith(
        _fmt_x(one_step["x_smdebug_cached"]["compat"])
    )
    honest = targets["compat by_step (one step) vs its SQL floor, alternated"]
    assert honest["measured"] == _fmt_x(one_step["compat_x_sql_floor"])
    assert honest["met"] == (one_step["compat_x_sql_floor"] <= TARGETS["compat_step_x_sql_floor"])
    assert "compat by_step (one step) vs smdebug cached" not in targets  # the unpaired row is for older JSON


def check_trend(data: dict) -> None:
    """The trend row (bench/lab/cases/trend.py): 20 jobs (at 10, three jobs of 4 steps after the change are too few
    to find all five), its planted change found, timed, its peak memory measured, judged and printed."""
    t = data["trend"]
    assert t["jobs"] == t["corpus"]["jobs"] == 20 and t["reused_store"] is False
    assert t["found_the_five_at_the_right_job"] is True and t["changes"] == 6  # the five and the total
    assert t["trend_s"] > 0 and t["page_s"] > 0 and t["page_bytes"] > 0 and t["page_diffs"] == 1
    assert t["peak_rss_mb"] >= t["rss_before_mb"] > 0
    names = {x["name"] for x in data["targets"]}
    assert {"trend over 20 jobs", "trend peak RSS", "trend finds the planted change"} <= names
    assert re.search(r"^\| +20 \| +2,040 \| ", data["markdown"], re.MULTILINE)  # 20 jobs x 102 series rows


def check_render_and_registry(data: dict, result: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables come from the JSON alone, and a section plugged into the registry is run on request,
    judged and printed with the others."""
    rendered = subprocess.run([sys.executable, "-m", "bench.lab.run", "--render", str(result)],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    assert rendered.stdout.rstrip("\n") == data["markdown"]

    from bench.lab import sections
    from bench.lab.run import parse_args
    from bench.lab.targets import target

    def run_toy(ctx) -> None:
        ctx.data["toy"] = {"ms": 2.0}

    toy = sections.Section(
        "toy", run_toy, "toy", default=False,
        targets=lambda d: [target("toy call", "<= 1 ms", f"{d['toy']['ms']} ms", d["toy"]["ms"] <= 1)],
        render=lambda d: ["", f"The toy call took {d['toy']['ms']} ms."],
    )
    monkeypatch.setattr(sections, "SECTIONS", [*sections.SECTIONS, toy])
    assert toy not in parse_args([]).sections and parse_args(["--with", "toy"]).sections[-1] is toy
    with pytest.raises(SystemExit):
        parse_args(["--with", "no_such_section"])
    judged = sections.evaluate_targets(data)
    assert [t["name"] for t in judged] == [t["name"] for t in data["targets"]]  # not run: not judged
    from types import SimpleNamespace

    toy.run(SimpleNamespace(data=data))  # type: ignore[arg-type]
    judged = sections.evaluate_targets(data)
    assert judged[-1] == {"name": "toy call", "target": "<= 1 ms", "measured": "2.0 ms", "met": False, "note": ""}
    markdown = sections.render_markdown({**data, "targets": judged})
    assert "The toy call took 2.0 ms." in markdown
    assert re.search(r"^\| toy call +\| <= 1 ms +\| 2.0 ms +\| \*\*no\*\* +\|$", markdown, re.MULTILINE)


@pytest.mark.slow
def test_bench_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The lab's full run (bench.lab.run), a tool for performance work, not a promise to users: ~24 s of CPU,
    # so it runs in the slow tier beside the 2,000-file run; the user's benchmark (python -m bench) is
    # tested in the default tier (test_user_bench_one_table_on_a_given_corpus). Four methods, one of each kind of scope (a step, a phase, a job phase, the listings): each measured
    # cell costs a CLI process and smdebug's re-read of every file (~1.3 s of CPU); all ten run in the slow
    # tier's 2,000-file benchmark, and the bench's cases still cover every method (checked below).
    data, corpus = run_bench(
        tmp_path, 40, 2, "--repeats", "2", "--cli-repeats", "1", "--baseline-repeats", "1", "--warmup", "0.05",
        "--alternations", "3", "--trend-jobs", "20", "--trend-repeats", "1", "--methods", *SMOKE_METHODS, timeout=1800
    )
    check_result(data, SMOKE_METHODS)
    check_trend(data)
    assert data["single_step"]["rounds"] == 3  # --alternations
    check_render_and_registry(data, tmp_path / "result.json", monkeypatch)
    manifest = json.loads((corpus / "corpus.json").read_text())
    from bench.lab.cases.fetch import build_cases

    assert {case.name for case in build_cases(manifest)} == METHODS
    assert manifest["cprofile_files"] == 40 and manifest["node_ids"] == ["algo-1", "algo-2"]

    # Every generated cProfile file is a valid pstats dump; pyinstrument sessions are readable.
    files = sorted((corpus / "bench-job").rglob("python_stats"))
    assert len(files) == 40
    for path in files:
        stats = pstats.Stats(str(path)).stats
        assert stats
        for cc, nc, tt, ct, callers in stats.values():
            assert 0 <= cc <= nc and tt >= 0 and ct >= 0
            for e_nc, e_cc, _, _ in callers.values():
                assert 0 <= e_cc <= e_nc
    pre = [p for p in files if p.parent.name.startswith("prestepzero-*-start")]
    assert len(pre) == 2 and all(len(marshal.loads(p.read_bytes())) > 1000 for p in pre)
    from proflake.readers.pyinstrument import read_pyinstrument

    sessions = sorted((corpus / "bench-job").rglob("python_stats.json"))
    assert len(sessions) == manifest["pyinstrument_intervals"] >= 2
    for path in sessions:
        assert read_pyinstrument(path.read_bytes()).frames.num_rows > 0
        assert path.with_suffix(".html").exists()


def test_corpus_is_deterministic_given_seed_and_templates(tmp_path: Path) -> None:
    from bench import corpus

    first = corpus.generate(tmp_path / "a", files=20, nodes=2, seed=7, jobs=1, log=lambda m: None)
    templates = Path(first["params"]["templates"])
    corpus.generate(tmp_path / "b", files=20, nodes=2, seed=7, templates=templates, jobs=1, log=lambda m: None)
    corpus.generate(tmp_path / "c", files=20, nodes=2, seed=8, templates=templates, jobs=1, log=lambda m: None)

    def contents(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("python_stats*")) if p.suffix != ".html"}

    a, b, c = (contents(tmp_path / name / corpus.JOB_NAME) for name in "abc")
    assert a == b
    assert a != c


def test_baseline_does_what_smdebug_does_on_a_cached_call(tmp_path: Path) -> None:
    """The baseline keeps smdebug 1.0.34's types and its per-call work, so its timings are smdebug's."""
    import copy

    from bench import baseline as bl
    from bench import corpus

    manifest = corpus.generate(tmp_path, files=20, nodes=2, seed=3, jobs=1, log=lambda m: None)
    smdebug = bl.SmdebugCProfileAnalysis(manifest["cprofile_dir"])
    entries = smdebug.python_profile_stats
    assert len(entries) == 20
    assert all(isinstance(e.start_mode, bl.PythonProfileModes) and isinstance(e.end_phase, bl.StepPhase) for e in entries)

    # cProfileAnalysis filters its list to cProfile entries on every call, refresh_stats=False included.
    stray = copy.copy(entries[0])
    stray.profiler_name = "pyinstrument"
    smdebug.python_profile_stats = [*entries, stray]
    smdebug.fetch_profile_stats_by_step(0, refresh_stats=False)
    assert stray not in smdebug.python_profile_stats and len(smdebug.python_profile_stats) == 20

    # Modes and phases as smdebug's enums or as their folder-name strings select the same files.
    as_enums = smdebug.fetch_profile_stats_by_step(
        1, 2, bl.PythonProfileModes.TRAIN, bl.StepPhase.STEP_START, bl.StepPhase.STEP_END, refresh_stats=False
    )
    as_strings = smdebug.fetch_profile_stats_by_step(1, 2, "train", "stepstart", "stepend", refresh_stats=False)
    assert as_enums is not None and as_enums.ps.stats == as_strings.ps.stats
    phases = smdebug.fetch_profile_stats_by_training_phase(refresh_stats=False)
    assert (bl.PythonProfileModes.TRAIN, bl.PythonProfileModes.TRAIN) in phases
    listed = smdebug.list_profile_stats(refresh_stats=False)
    assert set(listed["start_mode"]) <= set(bl.MODES)


@pytest.mark.slow
def test_bench_2k(tmp_path: Path) -> None:
    data, _ = run_bench(tmp_path, 2000, 4, "--repeats", "3", "--cli-repeats", "2", "--baseline-repeats", "2",
                        "--trend-jobs", "100", timeout=1800)
    check_result(data)
    assert data["corpus"]["raw_bytes"]["cprofile"] > 40e6


def lab_corpus(tmp_path: Path) -> Path:
    """A 20-file, 2-node corpus written by ``python -m bench.corpus``, for the lab tools' smoke tests."""
    corpus = tmp_path / "corpus"
    subprocess.run([sys.executable, "-m", "bench.corpus", "--files", "20", "--nodes", "2", "--out", str(corpus)],
                   cwd=REPO, check=True, capture_output=True, timeout=300)
    return corpus


@pytest.mark.slow
def test_ab_times_two_checkouts_alternately(tmp_path: Path) -> None:
    """The lab's A/B driver (bench.lab.ab), a tool for performance work: slow tier (~8 s of CPU)."""
    corpus = lab_corpus(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "bench.lab.ab", "--corpus", str(corpus), "--before", str(REPO), "--rounds", "2",
         "--workers", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.strip()
    assert line.startswith("1 worker(s): before ") and line.endswith("x")
    assert "'before': [" in line and "'after': [" in line
    refused = subprocess.run([sys.executable, "-m", "bench.lab.ab", "--corpus", str(tmp_path), "--before", str(REPO)],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "holds no corpus.json" in refused.stderr


@pytest.mark.slow
def test_scaling_bench_times_each_step_and_projects(tmp_path: Path) -> None:
    """The lab's scaling measurement (bench.lab.scaling_bench), a tool for performance work: slow tier."""
    corpus = lab_corpus(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "bench.lab.scaling_bench", "--corpus", str(corpus / "bench-job"), "--rounds", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r[0].strip() for r in rows] == ["workers", "1", "2", "8 (projected)", "32 (projected)"]
    one, two = ([float(c) for c in r[1:4]] for r in rows[1:3])
    assert all(v > 0 for v in (*one, *two))  # wall, the main process's CPU, the workers'
    assert rows[1][-1].strip() == "100%"
    projected = [float(r[1]) for r in rows[3:]]
    assert projected[0] >= projected[1] > 0  # more cores: no slower, never free


def test_user_bench_one_table_on_a_given_corpus(tmp_path: Path) -> None:
    """``python -m bench --corpus JOB``: every smdebug method timed on both sides, proflake's answers smdebug's."""
    from bench import corpus

    corpus.generate(tmp_path / "c", files=20, nodes=2, seed=5, jobs=1, log=lambda m: None)
    result = tmp_path / "user.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--corpus", str(tmp_path / "c" / corpus.JOB_NAME), "--repeats", "1",
         "--json-out", str(result)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^\| method \| selects \| smdebug \(s\) \| proflake \(s\) \|", done.stdout, re.MULTILINE)
    data = json.loads(result.read_text())
    assert data["files"] == 20 and data["ingest_s"] > 0
    assert [row["method"] for row in data["rows"]] == [
        "by_step", "by_step (range)", "by_time", "between_modes", "pre_step_zero", "post_hook_close",
        "by_training_phase", "by_job_phase", "list_profile_stats", "list_available_node_ids",
    ]
    for row in data["rows"]:
        assert row["answer"].startswith("match"), row
        assert row["smdebug_s"] > 0 and row["proflake_s"] > 0
    assert done.stdout.count("x faster |") + done.stdout.count("x slower |") == len(data["rows"])


def test_user_bench_refuses_a_folder_without_smdebug_layout(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "bench", "--corpus", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {tmp_path} has no smdebug cProfile folder (framework/<framework>/cprofile) below it."
    assert "Traceback" not in done.stderr
