"""proflake report and Profiles.report: the numbers a report embeds are the fetch methods' answers, the page
is self-contained, the flame graph's pruning keeps totals, and notebooks get HTML."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from proflake import Profiles, ingest
from proflake.capture.sample_job import generate_sample_job
from proflake.cli import cli
from proflake.pages import call_tree, report_data
from proflake.render.stacks import OTHER

JOB = "report-job"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("report")
    generate_sample_job(base / JOB, nodes=2, train_steps=4, eval_steps=2)
    ingest(str(base / JOB), str(base / "store"))
    return str(base / "store")


@pytest.fixture(scope="module")
def profiles(store) -> Profiles:
    return Profiles(store)


def embedded(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="proflake-data">(.*?)</script>', page, re.DOTALL)
    assert match, "the page embeds its data"
    return json.loads(match.group(1))


def by_function(rows, key="function"):
    return {r[key]: r for r in rows}


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("profiler", ["cprofile", "pyinstrument"])
def test_top_functions_are_the_fetch_methods_answers(profiles, profiler):
    result = profiles.by_step(0, 3, profiler=profiler)
    data = report_data(result)
    expected = by_function(result.table.to_pylist())
    own, total, calls = ("tottime", "cumtime", "total_calls") if profiler == "cprofile" else ("self_time", "total_time", "frames")
    assert data["functions"], "the report lists functions"
    for row in data["functions"]:
        want = expected[row["function"]]
        assert close(row["own"], want[own]) and close(row["total"], want[total]) and row["calls"] == want[calls], row
    # The top by each sort key is there, so sorting the page's table by any column is exact.
    for key, column in (("own", own), ("total", total), ("calls", calls)):
        best = max(expected.values(), key=lambda r: r[column])
        assert best["function"] in {r["function"] for r in data["functions"]}, key


def test_per_phase_and_per_node_are_the_fetch_methods_answers(profiles):
    result = profiles.by_job_phase()
    data = report_data(result)
    phases = profiles.by_job_phase().table
    assert [p["phase"] for p in data["per_phase"]] == list(dict.fromkeys(phases["job_phase"].to_pylist()))
    for phase in data["per_phase"]:
        expected = by_function([r for r in phases.to_pylist() if r["job_phase"] == phase["phase"]])
        for row in phase["functions"]:
            assert close(row["total"], expected[row["function"]]["cumtime"])
    per_node = profiles.by_job_phase(per_node=True).table.to_pylist()
    nodes = data["per_node"]["nodes"]
    assert nodes == ["algo-1", "algo-2"]
    for row in data["per_node"]["functions"]:
        for node, cell in zip(nodes, row["cells"]):
            want = [r for r in per_node if r["node_id"] == node and r["function"] == row["function"]]
            total = sum(r["cumtime"] for r in want)  # summed over the job phases
            assert math.isclose(cell[1], total, rel_tol=1e-9, abs_tol=1e-12)


def test_steps_and_phases_match_the_sql_views(profiles):
    result = profiles.by_job_phase()
    data = report_data(result)
    views = profiles.sql("SELECT node_id, mode, step, wall_seconds FROM step_wall_time WHERE profiler = 'cprofile'").to_pylist()
    got = {(r[0], r[1], r[2]): r[3] for r in data["steps"]["rows"]}
    assert got.keys() == {(v["node_id"], v["mode"], v["step"]) for v in views}
    for v in views:
        assert close(got[(v["node_id"], v["mode"], v["step"])], v["wall_seconds"])
    skew = profiles.sql("SELECT mode, step, skew_seconds FROM step_node_skew WHERE profiler = 'cprofile'").to_pylist()
    mine = {(s["mode"], s["step"]): s["skew"] for s in data["steps"]["skew"]}
    for s in skew:
        assert close(mine[(s["mode"], s["step"])], s["skew_seconds"])
    durations = profiles.sql(
        "SELECT job_phase, node_id, sum(end_time_us - start_time_us) / 1e6 AS s FROM intervals "
        "WHERE profiler = 'cprofile' GROUP BY ALL"
    ).to_pylist()
    phases = {(p["phase"], p["node_id"]): p["seconds"] for p in data["phases"] if p["kind"] == "job_phase"}
    assert phases.keys() == {(d["job_phase"], d["node_id"]) for d in durations}
    for d in durations:
        assert close(phases[(d["job_phase"], d["node_id"])], d["s"])


def test_overview_names_the_job_and_what_is_missing(profiles, store):
    data = report_data(profiles.by_job_phase())
    o = data["overview"]
    assert o["jobs"] == [{"job_id": JOB, "framework": "pytorch"}]
    assert o["nodes"] == ["algo-1", "algo-2"]
    assert {m["mode"]: (m["first_step"], m["last_step"]) for m in o["modes"]} == {"train": (0, 3), "eval": (0, 1)}
    assert {p["profiler"] for p in o["profilers"]} == {"cprofile", "pyinstrument"}
    assert o["gaps"]["missing_steps"] == 0 and o["quarantine"]["files"] == 0


def test_overview_lists_missing_steps_and_quarantined_files(tmp_path):
    from helpers.profiles import JobBuilder

    job = JobBuilder(tmp_path / "jobs" / "gappy")
    for step, t in ((0, 1000), (1, 2000), (4, 5000)):
        job.cprofile("algo-1", f"train-{step}-stepstart-{t}_train-{step}-stepend-{t + 500}")
    bad = job.stats_dir("cprofile", "algo-1", "train-5-stepstart-6000_train-5-stepend-6500")
    bad.mkdir(parents=True)
    (bad / "python_stats").write_bytes(b"not a pstats file")
    ingest(str(tmp_path / "jobs" / "gappy"), str(tmp_path / "store"))
    o = report_data(Profiles(str(tmp_path / "store")).by_job_phase())["overview"]
    assert o["gaps"]["missing_steps"] == 2
    assert o["gaps"]["listed"] == [{"node_id": "algo-1", "mode": "train", "missing_steps": "2-3", "count": 2}]
    assert o["quarantine"]["files"] == 1 and o["quarantine"]["listed"][0]["error_kind"] == "cprofile"


@pytest.mark.parametrize("profiler", ["cprofile", "pyinstrument"])
def test_pruned_flame_graph_keeps_every_total(profiles, profiler):
    result = profiles.by_job_phase(profiler=profiler)
    full = call_tree(result, None, floor=0.0)
    small = call_tree(result, 25)
    assert small.nodes <= 25  # [other] nodes included
    assert close(small.total, full.total) and small.root.value == small.total
    folded = 0
    stack = [small.root]
    while stack:
        node = stack.pop()
        if node.children:
            # pyinstrument's JSON rounds every time to 6 decimals: in each merged session, children may
            # outgrow their parent by half a microsecond each (and the parent's own rounding), never by
            # more; the job phase merges every session's tree, so the bound adds up over them.
            sessions = result.intervals.num_rows
            slack = (len(node.children) + 1) * 0.5e-6 * sessions if profiler == "pyinstrument" else 0.0
            assert sum(c.value for c in node.children) <= node.value * (1 + 1e-9) + slack + 1e-12, node.name
        folded += node.folded
        stack.extend(node.children)
    assert folded > 0, "a 25-node budget folds something away"
    if profiler == "pyinstrument":  # exact: the root is the sum of the merged trees' root frames
        roots = result.call_tree()
        top = [r for r in roots.to_pylist() if r["depth"] == 0]
        assert close(full.total, sum(r["time"] for r in top))
        assert full.exact and not any(c.name == OTHER for c in full.root.children)


def test_cprofile_flame_graph_is_derived_from_caller_edges_and_says_so(profiles):
    data = report_data(profiles.by_step(1))
    flame = data["flame"]
    assert flame["exact"] is False
    assert flame["depth"][0] == 0 and flame["name"][0] == "all"
    assert len(flame["name"]) == flame["nodes"] <= flame["budget"]
    assert flame["note"].startswith("cProfile records callers, not stacks: ") and "placed by estimate" in flame["note"]
    assert len(flame["estimated"]) == flame["nodes"] and 0 <= flame["estimated_share"] <= 1
    page = Profiles(profiles.store).by_step(1).report().html
    assert flame["note"] in page and "a recursive cycle is drawn once" in page


def test_page_is_self_contained_and_embeds_its_data(profiles):
    report = profiles.report()
    page = report.html
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page, re.IGNORECASE)
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    assert "default-src 'none'" in page  # the page itself forbids any request
    assert embedded(page) == json.loads(json.dumps(report.data))
    assert page.count("<script") == 2 and "</script>" not in embedded_text(page)


def embedded_text(page: str) -> str:
    return page.split('id="proflake-data">', 1)[1].rsplit("</script>", 2)[0]


def test_names_from_profiles_cannot_break_out_of_the_page(profiles):
    from proflake.render.report.page import render_html

    data = report_data(profiles.by_step(1))
    data["functions"][0]["function"] = "</script><script>alert(1)</script>"
    page = render_html(data)
    assert "<script>alert(1)" not in page
    assert embedded(page)["functions"][0]["function"] == "</script><script>alert(1)</script>"


def test_notebooks_get_html(profiles):
    result = profiles.by_step(1, top=3)
    html = result._repr_html_()
    assert html.startswith("<div>") and "<table>" in html and html.count("<tr>") == 4
    assert "by_step" in html and "cprofile" in html
    report = result.report()
    assert report._repr_html_().startswith("<iframe srcdoc=")
    assert "Report" in repr(report)


def test_cli_report_writes_a_page_for_a_selection(store, tmp_path):
    out = tmp_path / "step.html"
    done = CliRunner().invoke(cli, ["report", "by-step", "1", "2", "--store", store, "--out", str(out), "--node", "algo-2"])
    assert done.exit_code == 0, done.output
    data = embedded(out.read_text(encoding="utf-8"))
    assert data["meta"]["method"] == "by_step" and data["meta"]["node"] == "algo-2"
    assert data["overview"]["nodes"] == ["algo-2"] and data["overview"]["intervals"] == 2
    assert data["per_node"] is None


def test_cli_report_whole_job_for_pyinstrument(store, tmp_path):
    out = tmp_path / "job.html"
    done = CliRunner().invoke(cli, ["report", "job", "--store", store, "-o", str(out), "--profiler", "pyinstrument"])
    assert done.exit_code == 0, done.output
    assert f"wrote {out}" in done.stderr
    data = embedded(out.read_text(encoding="utf-8"))
    assert data["meta"]["profiler"] == "pyinstrument" and data["flame"]["exact"] is True and data["edges"] is None


def test_cli_report_errors_are_one_line(store, tmp_path):
    done = CliRunner().invoke(cli, ["report", "job", "--store", store, "--job", "nope", "-o", str(tmp_path / "x.html")])
    assert done.exit_code == 2
    assert done.stderr.startswith("proflake: error: unknown job 'nope'") and done.stdout == ""
    done = CliRunner().invoke(cli, ["report", "job", "--store", store, "-o", str(tmp_path / "missing" / "x.html")])
    assert done.exit_code == 1 and "cannot write the report" in done.stderr and "Traceback" not in done.output


def test_every_report_and_export_command_has_help():
    for group in ("report", "export"):
        done = CliRunner().invoke(cli, [group, "--help"])
        assert done.exit_code == 0
        for name in ("job", "by-time", "by-step", "between-modes", "pre-step-zero", "post-hook-close"):
            assert name in done.output
            sub = CliRunner().invoke(cli, [group, name, "--help"])
            assert sub.exit_code == 0 and "--job" in sub.output, (group, name)


def test_empty_selection_still_writes_a_report(store, tmp_path):
    out = tmp_path / "empty.html"
    done = CliRunner().invoke(cli, ["report", "by-step", "99", "--store", store, "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert "no cprofile intervals matched by-step" in done.stderr
    data = embedded(Path(out).read_text(encoding="utf-8"))
    assert data["overview"]["intervals"] == 0 and data["functions"] == []


def test_report_bench_measures_each_selection(store, tmp_path):
    from bench.lab.report_bench import markdown, measure

    rows = measure(store, 1, tmp_path)
    assert [(r["profiler"], r["selection"]) for r in rows] == [("cprofile", "whole job"), ("pyinstrument", "whole job")]
    for row in rows:
        assert row["report_bytes"] == sum(p.stat().st_size for p in tmp_path.glob(f"{row['profiler']}-*.html"))
        assert row["report_s"] > 0 and row["fetch_s"] > 0 and row["speedscope_bytes"] > 0
    assert markdown(rows).count("\n") == len(rows) + 1


def test_siblings_with_equal_times_are_ordered_by_name_whatever_their_last_bits():
    """Two fetches of one selection can sum the same times in another order (DuckDB adds in parallel):
    0.1 + 0.2 is not 0.3 in floats. Siblings equal up to that noise keep one order, by name, and a budget
    that keeps only one of them keeps the same one (a page flipped between two draws was seen in CI)."""
    from proflake.query.page_data import StackData
    from proflake.render.stacks import call_tree as stacks_call_tree

    def tree(a_time: float, b_time: float, budget: int | None):
        rows = [(1, None, "main", 1.0, 0.4), (2, 1, "b", b_time, b_time), (3, 1, "a", a_time, a_time)]
        paths = pa.table({
            "path_id": [r[0] for r in rows], "parent_path_id": [r[1] for r in rows],
            "function": [f"x.py:1({r[2]})" for r in rows], "function_name": [r[2] for r in rows],
            "filename": ["x.py"] * 3, "lineno": [1] * 3, "time": [r[3] for r in rows], "self_time": [r[4] for r in rows],
        })
        return stacks_call_tree(StackData("pyinstrument", pa.table({}), call_paths=paths), budget, floor=0.0)

    assert 0.1 + 0.2 != 0.3
    for a_time, b_time in ((0.1 + 0.2, 0.3), (0.3, 0.1 + 0.2)):
        (main,) = tree(a_time, b_time, None).root.children
        assert [c.name for c in main.children] == ["x.py:1(a)", "x.py:1(b)"]
        (main,) = tree(a_time, b_time, 5).root.children  # room for main, one sibling and an [other] each
        assert [c.name for c in main.children] == ["x.py:1(a)", OTHER]
