"""Every fetch method of the native API against smdebug's rules and pstats.Stats.add over the same files."""

from __future__ import annotations

import math
import pstats
import re
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers.profiles import LEGACY, SEMANTIC_INTERVALS, JobBuilder, assert_same_pstats, pstats_of
from proflake import Profiles, ingest
from proflake.errors import UnknownNameError, UsageError
from proflake.store.store import FileSpans, Store


# -- an independent oracle: smdebug's selection rules over directory names, in plain Python ------------
def _parse(name: str) -> dict:
    start, end = name.split("_")
    sm, ss, sp, st = start.split("-")
    em, es, ep, et = end.split("-")
    return {
        "start_mode": sm,
        "start_step": -1 if ss == "*" else int(ss),
        "start_phase": sp,
        "start_us": float(st),
        "end_mode": em,
        "end_step": math.inf if es == "*" else int(es),
        "end_phase": ep,
        "end_us": float(et),
    }


def in_step_interval(i: dict, start_step, end_step, start_phase, end_phase) -> bool:
    if start_step < i["start_step"] and end_step > i["end_step"]:
        return True
    if start_step > i["start_step"] or end_step < i["end_step"]:
        return False
    if start_step == i["start_step"] and start_phase in ("stepend", "forwardpassend") and i["start_phase"] != start_phase:
        return False
    if end_step == i["end_step"] and end_phase == "stepstart" and i["end_phase"] != end_phase:
        return False
    return True


def oracle(predicate, node: str | None = None) -> set[str]:
    return {
        label
        for label, (n, name, _) in SEMANTIC_INTERVALS.items()
        if (node is None or n == node) and predicate(_parse(name))
    }


@pytest.fixture(scope="module")
def semantic_job(tmp_path_factory) -> dict[str, Path]:
    """The hand-named job of tests/helpers/profiles.py, shared by this module's read-only tests."""
    job = JobBuilder(tmp_path_factory.mktemp("semantic") / "jobs" / "semantic")
    return {label: job.cprofile(node, name, workload) for label, (node, name, workload) in SEMANTIC_INTERVALS.items()}


@pytest.fixture(scope="module")
def profiles(semantic_job, tmp_path_factory) -> Profiles:
    """One store of the semantic job for every read-only test here (none of them writes to it)."""
    store = tmp_path_factory.mktemp("semantic-store") / "store"
    report = ingest(str(semantic_job["A"].parents[5]), str(store))
    assert report.new_intervals == len(SEMANTIC_INTERVALS) and not report.failed
    return Profiles(str(store))


def labels_of(result, job_files: dict[str, Path]) -> set[str]:
    by_path = {str(p): label for label, p in job_files.items()}
    return {by_path[uri] for uri in result.intervals["source_uri"].to_pylist()}


def check_against_pstats(result, job_files: dict[str, Path], expected_labels: set[str]) -> None:
    assert labels_of(result, job_files) == expected_labels
    assert_same_pstats(result.to_pstats().stats, pstats_of(job_files[label] for label in sorted(expected_labels)))


# -- by step ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, expected",
    [
        ({"start_step": 1}, {"C", "D"}),  # both halves of step 1, on default phases
        ({"start_step": 1, "start_phase": "forwardpassend"}, {"D"}),  # boundary: start phase decides
        ({"start_step": 1, "end_step": 1, "end_phase": "stepstart"}, set()),  # ends at stepstart: none do
        ({"start_step": 1, "end_step": 2}, {"C", "D", "E", "F", "F2"}),  # the between-steps interval E too
        ({"start_step": 0, "end_step": "*"}, {"B", "B2", "C", "D", "E", "F", "F2"}),
        ({"start_step": 0, "mode": "eval"}, {"H"}),
        ({"start_step": 0, "mode": "EVAL"}, {"H"}),
        ({"start_step": 2, "end_step": 2}, {"F", "F2"}),
    ],
)
def test_by_step_follows_smdebug_rule_and_sums_like_pstats(profiles, semantic_job, args, expected):
    mode = args.get("mode", "train").lower()
    end_step = args.get("end_step", args["start_step"])
    oracle_labels = oracle(
        lambda i: i["start_mode"] == mode
        and i["end_mode"] == mode
        and in_step_interval(
            i,
            args["start_step"],
            math.inf if end_step == "*" else end_step,
            args.get("start_phase", "stepstart"),
            args.get("end_phase", "stepend"),
        )
    )
    assert oracle_labels == expected  # the oracle itself agrees with the hand-worked answer
    result = profiles.by_step(**args)
    if expected:
        check_against_pstats(result, semantic_job, expected)
    else:
        assert result.empty and result.table.num_rows == 0


def test_by_step_on_one_node_and_any_node(profiles, semantic_job):
    check_against_pstats(profiles.by_step(2, node="algo-2"), semantic_job, {"F2"})
    # smdebug's "any" is the node of the earliest interval: A on algo-1 starts first.
    check_against_pstats(profiles.by_step(2, node="any"), semantic_job, {"F"})


def test_by_step_per_node_keeps_nodes_apart(profiles, semantic_job):
    result = profiles.by_step(2, per_node=True)
    assert result.groups() == [("algo-1",), ("algo-2",)]
    assert_same_pstats(result.to_pstats(("algo-1",)).stats, pstats_of([semantic_job["F"]]))
    assert_same_pstats(result.to_pstats(("algo-2",)).stats, pstats_of([semantic_job["F2"]]))


def test_a_question_about_some_nodes_opens_only_their_files(profiles):
    con, spans = Store(profiles.store.location).connect_with_files()
    files = spans["function_stats"]
    nodes_in = {uri: set(pq.read_table(uri, columns=["node_id"])["node_id"].to_pylist()) for uri in files.uris}
    assert all(len(nodes) == 1 for nodes in nodes_in.values())  # ingest never mixes nodes in a file
    everything = files.overlapping(-math.inf, math.inf)
    assert files.overlapping(-math.inf, math.inf, ["algo-2"]) == [u for u in everything if nodes_in[u] == {"algo-2"}]
    assert files.overlapping(-math.inf, math.inf, ["algo-1", "algo-2"]) == everything
    con.close()


def test_node_statistics_that_may_be_truncated_never_hide_a_file():
    spans = FileSpans(["a", "b", "c"], np.zeros(3), np.zeros(3), ["algo-1", None, "algo-2"])
    # None: the log's statistics span several nodes (or none); a prefix may stand for a longer name.
    assert spans.overlapping(0, 0, ["algo-10"]) == ["a", "b"]
    assert spans.overlapping(0, 0, ["algo-2"]) == ["b", "c"]
    assert spans.overlapping(0, 0) == ["a", "b", "c"]
    assert spans.overlapping(1, 2, ["algo-2"]) == []


def test_callers_aggregated_alongside_equal_the_lazy_ones(profiles, semantic_job):
    eager = profiles.by_step(0, "*", callers=True)
    lazy = profiles.by_step(0, "*")
    eager_rows, lazy_rows = (r.callers().sort_by(CALLER_ORDER).to_pylist() for r in (eager, lazy))
    times = ("tottime", "cumtime")
    assert [{k: v for k, v in row.items() if k not in times} for row in eager_rows] == [
        {k: v for k, v in row.items() if k not in times} for row in lazy_rows
    ]
    # Sums of floats in another order may differ in the last bits.
    assert [[row[t] for t in times] for row in eager_rows] == [pytest.approx([row[t] for t in times], rel=1e-12) for row in lazy_rows]
    assert_same_pstats(eager.to_pstats().stats, lazy.to_pstats().stats)
    profiles.refresh()  # the second cursor's thread ends with the connection
    rollups = [t for t in threading.enumerate() if t.name.startswith("proflake-rollup")]
    for thread in rollups:  # it ends with the connection, but may still be on its way out: join, don't race
        thread.join(timeout=60)
    assert not [t for t in rollups if t.is_alive()]


CALLER_ORDER = [(c, "ascending") for c in ("filename", "lineno", "function_name", "caller_filename", "caller_lineno", "caller_function_name")]


# -- by time ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "window_us, expected",
    [
        ((3200, 3300), {"C"}),  # strictly inside C: smdebug misses this containment case
        ((3500, 3500), {"C", "D"}),  # a boundary instant belongs to both neighbours (inclusive bounds)
        ((2000, 2949), {"A", "B", "B2"}),
        ((8001, 9000), set()),
        ((0, 10_000), set(SEMANTIC_INTERVALS)),
    ],
)
def test_by_time_includes_overlap_and_containment(profiles, semantic_job, window_us, expected):
    lo, hi = window_us
    assert oracle(lambda i: i["start_us"] <= hi and i["end_us"] >= lo) == expected
    result = profiles.by_time(lo / 1e6, hi / 1e6)
    if expected:
        check_against_pstats(result, semantic_job, expected)
    else:
        assert result.empty


def test_by_time_rejects_a_reversed_window(profiles):
    with pytest.raises(UsageError, match=r"^the time window ends \(1.0\) before it starts \(2.0\); give its start first"):
        profiles.by_time(2.0, 1.0)


@pytest.mark.parametrize(
    ("start", "end"), [(3, 1), ("3", "1"), ("*", -2), (5, -1), (2**63 - 1, 0)],
)
def test_by_step_rejects_a_reversed_range(profiles, start, end):
    """A range that ends before it starts is a mistake, not a question with an empty answer."""
    with pytest.raises(UsageError, match=rf"^the step range ends \({end}\) before it starts \({re.escape(str(start))}\); "
                       "give its first step first, then its last$"):
        profiles.by_step(start, end)
    with pytest.raises(UsageError, match="step range ends"):
        profiles.fetch("by_step", start_step=start, end_step=end)


def test_by_step_ranges_that_are_not_reversed_still_answer(profiles):
    assert not profiles.by_step(2, 2).empty
    assert not profiles.by_step("*", "*").empty  # before step 0 to the end
    assert not profiles.by_step(-1, 2).empty


# -- between modes, pre-step-zero, post-hook-close -------------------------------------------------
def test_between_modes(profiles, semantic_job):
    check_against_pstats(profiles.between_modes("train", "eval"), semantic_job, {"G"})
    check_against_pstats(profiles.between_modes("PRE_STEP_ZERO", "TRAIN"), semantic_job, {"A"})
    check_against_pstats(profiles.between_modes("prestepzero", "posthookclose"), semantic_job, {"I"})
    assert profiles.between_modes("eval", "train").empty


def test_pre_step_zero_and_post_hook_close(profiles, semantic_job):
    check_against_pstats(profiles.pre_step_zero(), semantic_job, {"A"})
    check_against_pstats(profiles.post_hook_close(), semantic_job, {"I"})


# -- roll-ups --------------------------------------------------------------------------------------
def test_by_training_phase_aggregates_every_mode_pair(profiles, semantic_job):
    result = profiles.by_training_phase()
    pairs = {}
    for label, (_, name, _) in SEMANTIC_INTERVALS.items():
        i = _parse(name)
        pairs.setdefault((i["start_mode"], i["end_mode"]), set()).add(label)
    # Groups come in smdebug's enum order.
    assert result.groups() == [
        ("train", "train"),
        ("train", "eval"),
        ("eval", "eval"),
        ("prestepzero", "train"),
        ("prestepzero", "posthookclose"),
    ]
    for group, labels in pairs.items():
        assert_same_pstats(result.to_pstats(group).stats, pstats_of(semantic_job[x] for x in sorted(labels)))


def test_by_job_phase_fixes_smdebugs_two_bugs(profiles, semantic_job):
    result = profiles.by_job_phase()
    assert result.groups() == [("initialization",), ("training_loop",), ("finalization",)]
    # Bug 1: smdebug kept only the last mode pair's stats for the training loop; all of them count here.
    training = {"B", "C", "D", "E", "F", "G", "H", "B2", "F2"}
    assert_same_pstats(result.to_pstats(("training_loop",)).stats, pstats_of(semantic_job[x] for x in sorted(training)))
    # Bug 2: the post-hook-close interval starts in mode prestepzero; it is finalization, not initialization.
    assert_same_pstats(result.to_pstats(("initialization",)).stats, pstats_of([semantic_job["A"]]))
    assert_same_pstats(result.to_pstats(("finalization",)).stats, pstats_of([semantic_job["I"]]))


def test_whole_job_interval_gets_its_own_phase(tmp_path, store_path):
    job = JobBuilder(tmp_path / "whole")
    whole = job.cprofile("algo-1", "prestepzero-*-start-100_posthookclose-*-end-900", "b")
    ingest(str(tmp_path / "whole"), str(store_path))
    result = Profiles(str(store_path)).by_job_phase()
    assert result.groups() == [("whole_job",)]
    assert_same_pstats(result.to_pstats(("whole_job",)).stats, pstats_of([whole]))


def test_top_and_sort_keep_the_best_rows_per_group(profiles):
    full = profiles.by_job_phase(sort="tottime")
    top = profiles.by_job_phase(sort="tottime", top=2)
    for (phase,) in full.groups():
        expected = full.rows((phase,)).sort_by([("tottime", "descending")])["tottime"].to_pylist()[:2]
        assert top.rows((phase,))["tottime"].to_pylist() == expected
    calls = profiles.by_step(1, sort="ncalls").table
    assert calls["total_calls"].to_pylist() == sorted(calls["total_calls"].to_pylist(), reverse=True)


# -- listings --------------------------------------------------------------------------------------
def test_list_and_nodes(profiles, semantic_job):
    listing = profiles.list_profile_stats()
    assert listing.num_rows == len(SEMANTIC_INTERVALS)
    starts = listing["start_time_us"].to_pylist()
    assert starts == sorted(starts)
    assert set(listing["source_uri"].to_pylist()) == {str(p) for p in semantic_job.values()}
    assert profiles.nodes() == ["algo-1", "algo-2"]
    assert profiles.list_profile_stats(node="algo-2").num_rows == 2


def test_listing_is_the_intervals_table_row_for_row(profiles):
    """Selections return rowids and Profiles gathers the rows from an Arrow copy: both must agree."""
    con = profiles.connection()
    direct = con.sql("SELECT * FROM intervals ORDER BY start_time_us, node_id, profiler, source_uri").to_arrow_table()
    assert profiles.list_profile_stats().equals(direct)
    assert con.sql("SELECT count(*) = max(rowid) + 1 FROM intervals").fetchall() == [(True,)]


def test_star_steps_are_stored_as_minus_one_and_null(profiles):
    rows = {r["start_time_us"]: r for r in profiles.list_profile_stats().to_pylist()}
    assert rows[7000.0]["start_step"] == -1 and rows[7000.0]["end_step"] is None
    assert rows[1000.0]["start_step"] == -1 and rows[1000.0]["end_step"] == 0


# -- names, jobs, nodes ----------------------------------------------------------------------------
def test_unknown_names_list_the_valid_ones(profiles):
    with pytest.raises(UnknownNameError, match="unknown mode 'trian'; expected one of: train, eval, predict"):
        profiles.by_step(1, mode="trian")
    with pytest.raises(UnknownNameError, match="unknown phase 'middle'; expected one of: start, stepstart"):
        profiles.by_step(1, start_phase="middle")
    with pytest.raises(UnknownNameError, match="unknown node 'algo-9'; expected one of: algo-1, algo-2"):
        profiles.by_step(1, node="algo-9")
    with pytest.raises(UnknownNameError, match="unknown profiler"):
        profiles.by_step(1, profiler="yappi")


def test_several_jobs_need_a_job_or_all_jobs(tmp_path, store_path):
    for name, workload in (("job-a", "a"), ("job-b", "b")):
        JobBuilder(tmp_path / "jobs" / name).cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", workload)
    report = ingest(str(tmp_path / "jobs"), str(store_path))
    assert report.new_intervals == 2
    profiles = Profiles(str(store_path))
    assert profiles.job_ids() == ["job-a", "job-b"]
    with pytest.raises(UsageError, match=r"the store holds 2 jobs \(job-a, job-b\); pass --job ID"):
        profiles.by_step(0)
    a = profiles.by_step(0, job="job-a")
    assert_same_pstats(a.to_pstats().stats, pstats_of(sorted((tmp_path / "jobs" / "job-a").rglob("python_stats"))))
    both = profiles.by_step(0, all_jobs=True)
    assert_same_pstats(both.to_pstats().stats, pstats_of(sorted((tmp_path / "jobs").rglob("python_stats"))))
    with pytest.raises(UnknownNameError, match="unknown job 'job-c'"):
        profiles.by_step(0, job="job-c")


# -- real files ------------------------------------------------------------------------------------
def test_legacy_tensorflow_files_answer_like_pstats(store_path):
    ingest(str(LEGACY), str(store_path))
    profiles = Profiles(str(store_path))
    files = {int(p.parent.name.rsplit("_", 1)[1]): p for p in LEGACY.rglob("python_stats")}
    assert_same_pstats(profiles.by_step(2).to_pstats().stats, pstats_of([files[2]]))
    assert_same_pstats(profiles.by_step(2, 3).to_pstats().stats, pstats_of([files[2], files[3]]))
    assert_same_pstats(profiles.pre_step_zero().to_pstats().stats, pstats_of([files[-1]]))
    phases = profiles.by_job_phase()
    assert phases.groups() == [("initialization",), ("training_loop",)]
    assert_same_pstats(phases.to_pstats(("training_loop",)).stats, pstats_of([files[2], files[3]]))
    assert profiles.nodes() == ["151-algo-1"]


def test_prof_file_opens_in_pstats(profiles, semantic_job, tmp_path):
    out = tmp_path / "step1.prof"
    profiles.by_step(1).write_prof(str(out))
    assert_same_pstats(pstats.Stats(str(out)).stats, pstats_of([semantic_job["C"], semantic_job["D"]]))


# -- pyinstrument ----------------------------------------------------------------------------------
def _json_frames(node, path=(), out=None):
    """(function key, time, self time, call path) of every real frame of a pyinstrument JSON tree."""
    out = [] if out is None else out
    key = f"{node.get('file_path') or ''}:{node.get('line_no') or 0}({node['function']})"
    children = [c for c in node.get("children", []) if c["function"] != "[self]"]
    self_time = max(node["time"] - sum(c["time"] for c in children), 0.0)
    out.append((key, node["time"], self_time, path + (key,)))
    for child in children:
        _json_frames(child, path + (key,), out)
    return out


def test_pyinstrument_roll_up_counts_recursion_once(tmp_path, store_path):
    from helpers.profiles import FORMAT_SAMPLES

    job = JobBuilder(tmp_path / "py")
    names = ["train-0-stepstart-2000_train-0-stepend-3000", "train-1-stepstart-3000_train-1-stepend-4000"]
    for name, sample in zip(names, ["pyinstrument-4.7.3.json", "pyinstrument-5.1.3.json"]):
        job.pyinstrument("algo-1", name, sample)
    ingest(str(tmp_path / "py"), str(store_path))
    result = Profiles(str(store_path)).by_step(0, 1)
    assert result.profiler == "pyinstrument"  # the only data there is
    frames = []
    for sample in ["pyinstrument-4.7.3.json", "pyinstrument-5.1.3.json"]:
        frames += _json_frames(__import__("json").loads((FORMAT_SAMPLES / sample).read_bytes())["root_frame"])
    rows = {r["function"]: r for r in result.table.to_pylist()}
    for key in {f[0] for f in frames}:
        mine = [f for f in frames if f[0] == key]
        assert rows[key]["self_time"] == pytest.approx(sum(f[2] for f in mine), abs=1e-9)
        # Inclusive time: only frames with no ancestor of the same function (recursion counted once).
        outer = [f for f in mine if key not in f[3][:-1]]
        assert rows[key]["total_time"] == pytest.approx(sum(f[1] for f in outer), abs=1e-9)
    fib = next(k for k in rows if k.endswith("(fib)"))
    assert rows[fib]["total_time"] < sum(f[1] for f in frames if f[0] == fib)  # naive sum would double count
    # The merged call tree: one node per distinct call path, times summed across both sessions.
    tree = result.call_tree().to_pylist()
    paths = {}
    for f in frames:
        paths[f[3]] = paths.get(f[3], 0.0) + f[1]
    assert len(tree) == len(paths)
    assert sorted(round(r["time"], 9) for r in tree) == sorted(round(t, 9) for t in paths.values())


def test_source_may_be_the_framework_folder_or_inside_it(tmp_path):
    job = JobBuilder(tmp_path / "runs" / "job-7")
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000")
    job.cprofile("algo-2", "train-0-stepstart-2000_train-0-stepend-3000")
    for source, expected in [
        (tmp_path / "runs", "job-7"),
        (tmp_path / "runs" / "job-7", "job-7"),
        (tmp_path / "runs" / "job-7" / "framework", "job-7"),
        (tmp_path / "runs" / "job-7" / "framework" / "pytorch" / "cprofile", "job-7"),
        (tmp_path / "runs" / "job-7" / "framework" / "pytorch" / "cprofile" / "algo-2", "job-7"),
    ]:
        store = str(tmp_path / f"store-{len(source.parts)}")
        ingest(str(source), store)
        assert Profiles(store).job_ids() == [expected], source
    ingest(str(tmp_path / "runs"), str(tmp_path / "named"), job_id="nightly-42")
    assert Profiles(str(tmp_path / "named")).job_ids() == ["nightly-42"]


def test_queries_and_schemas_ship_inside_the_wheel(tmp_path):
    import subprocess
    import sys
    import zipfile

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(tmp_path), str(root)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("proflake-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for sql in (root / "queries").glob("*.sql"):
        assert f"proflake/queries/{sql.name}" in names
    for schema in (root / "schemas").glob("*.json"):
        assert f"proflake/schemas/{schema.name}" in names
    assert "proflake/py.typed" in names
