"""The trend page: TrendResult.report() and proflake trend --format html. Its series are the TrendResult's,
its change points the TrendResult's, and the diff it embeds for a change is Profiles.diff of the last job
before the change and the first after it, which the command it names draws in full; on both profilers.

The browser half (charts drawn, marks placed, a click showing the right diff) is tests/test_trend_browser.py.
"""

from __future__ import annotations

import json
import math
import re
import shlex

import pyarrow as pa
import pytest
from helpers.cli import run_cli
from proflake.errors import ExitCode, UsageError
from proflake.numbers import p_value, percent, seconds
from proflake.pages import build_trend_report
from proflake.query.profiles import Profiles
from proflake.query.trend import TrendResult
from test_diff_report import embedded
from test_trend import SERIES
from test_trend_series import store_of


@pytest.fixture(scope="module", params=["cprofile", "pyinstrument"])
def stores(request, tmp_path_factory) -> dict:
    """Both profilers: "mixed" (the total and load_batch up at job 4 and back at 7, forward up in the
    newest) and "steady" (noise only)."""
    tmp = tmp_path_factory.mktemp(f"trend-page-{request.param}")
    built = {name: store_of(tmp / name, SERIES[name], profiler=request.param)[0] for name in ("mixed", "steady")}
    return {**built, "profiler": request.param}


def test_the_page_charts_the_trend_s_series_and_lists_its_changes(stores):
    result = Profiles(stores["mixed"]).trend()
    assert result.changes  # the page below has something to mark
    data = result.report().data
    assert [j["id"] for j in data["jobs"]] == result.jobs
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", j["start"]) for j in data["jobs"])
    rows = result.series.to_pylist()
    first = min(r["job_start_time"] for r in rows)
    assert data["jobs"][0]["start"] == first.astimezone(__import__("datetime").timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    charts = {c["function"]: c for c in data["charts"]}
    assert data["charts"][0]["function"] is None and data["charts"][0]["label"] == "(total)"
    # every changed function is charted, with its changes' ids
    assert {c["function"] for c in result.changes} <= set(charts)
    for function, chart in charts.items():
        series = {r["job_id"]: r for r in rows if r["function"] == function}
        for i, job in enumerate(result.jobs):
            assert chart["mean"][i] == pytest.approx(series[job]["own_mean_s"] if job in series else 0.0)
            assert chart["sd"][i] == pytest.approx(math.sqrt(series[job]["own_spread_s2"]) if job in series else 0.0)
        assert [data["changes"][k]["job_id"] for k in chart["changes"]] == [
            c["job_id"] for c in result.changes if c["function"] == function
        ]
    for shown, change in zip(data["changes"], result.changes, strict=True):
        assert (shown["function"], shown["job_id"], shown["job_index"]) == (change["function"], change["job_id"], change["job_index"])
        assert shown["base_job"] == result.jobs[change["job_index"] - 2]  # the last job before the change
        assert shown["text"] == {
            "before": f"{seconds(change['before_s'])}/step",
            "after": f"{seconds(change['after_s'])}/step",
            "change": percent(change["change"]),
            "p": p_value(change["p_value"]),
            "jobs": f"{change['before_jobs']} jobs ({change['before_steps']:,} steps) vs "
                    f"{change['after_jobs']} ({change['after_steps']:,} steps)",
        }


def test_each_change_s_diff_is_profiles_diff_of_the_jobs_either_side(stores, tmp_path):
    profiles = Profiles(stores["mixed"])
    result = profiles.trend()
    data = result.report().data
    pairs = {(c["base_job"], c["job_id"]) for c in data["changes"]}
    assert len(data["diffs"]) == len(pairs) < len(data["changes"])  # the total and a function share a pair
    for change in data["changes"]:
        embedded_diff = data["diffs"][change["diff"]]
        assert (embedded_diff["base"], embedded_diff["head"]) == (change["base_job"], change["job_id"])
        diff = profiles.diff(change["base_job"], change["job_id"], match="line", profiler=stores["profiler"])
        assert embedded_diff["total"]["base_s"] == pytest.approx(diff.total["base"], rel=1e-12)
        assert embedded_diff["total"]["head_s"] == pytest.approx(diff.total["head"], rel=1e-12)
        assert embedded_diff["total"]["text"]["change"] == percent(diff.total["change_ratio"])
        table = diff.table.to_pylist()
        shown = embedded_diff["functions"]
        assert [r["function"] for r in shown[:10]] == [r["function"] for r in table[:10]]
        for row in shown:
            expected = next(r for r in table if r["function"] == row["function"])
            assert row["status"] == expected["status"]  # (DuckDB's sums may differ in the last bit between runs)
            assert (row["base_s"], row["head_s"]) == pytest.approx((expected["base_self"], expected["head_self"]), rel=1e-12)
            assert row["text"]["base"] == f"{seconds(expected['base_self'])}/step"
            assert row["text"]["p"] == p_value(expected["p_adjusted"])
        if change["function"] is not None:  # the function that changed is in the table, and changed that way
            row = next(r for r in shown if r["function"] == change["function"])
            assert (row["status"] == "slower") == (change["change"] > 0)
    # the command named is the full diff page of the same pair, with the same numbers
    change = next(c for c in data["changes"] if c["function"] is not None)
    command = shlex.split(change["command"])
    assert command[:4] == ["proflake", "diff", change["base_job"], change["job_id"]]
    out = tmp_path / "diff.html"
    assert command[-2:] == ["-o", "diff.html"]
    done = run_cli([*command[1:-1], str(out)])
    assert done.returncode == ExitCode.OK, done.stderr
    full = embedded(out.read_text(encoding="utf-8"))["diff"]
    assert full["total"]["base"] == pytest.approx(data["diffs"][change["diff"]]["total"]["base_s"], rel=1e-12)
    assert [f["function"] for f in full["functions"][:10]] == [r["function"] for r in data["diffs"][change["diff"]]["functions"][:10]]


def test_only_the_largest_changes_embed_their_diff(stores):
    result = Profiles(stores["mixed"]).trend()
    data = result.report(max_diffs=1).data
    largest = max(result.changes, key=lambda c: abs(c["change"]))
    with_diff = [c for c in data["changes"] if c["diff"] is not None]
    assert [(c["function"], c["job_id"]) for c in with_diff] == [(largest["function"], largest["job_id"])]
    assert (data["diffs_embedded"], data["max_diffs"], len(data["diffs"])) == (1, 1, 1)
    assert all(c["command"].startswith(f"proflake diff {c['base_job']} {c['job_id']} ") for c in data["changes"])


def test_no_change_points_no_diffs(stores):
    result = Profiles(stores["steady"]).trend()
    data = result.report().data
    assert (data["changes"], data["diffs"], data["diffs_embedded"]) == ([], {}, 0)
    assert len(data["jobs"]) == 8 and all(c["changes"] == [] for c in data["charts"])
    assert data["charts"][0]["function"] is None  # the total is still charted


def test_top_chooses_how_many_functions_are_charted_changed_ones_first(stores):
    result = Profiles(stores["mixed"]).trend()
    changed = {c["function"] for c in result.changes if c["function"] is not None}
    data = result.report(top=1).data
    assert [c["function"] for c in data["charts"]][0] is None and len(data["charts"]) == 2
    assert data["charts"][1]["function"] in changed
    everything = result.report(top=50).data["charts"]
    # a function with no own time anywhere (train_step only calls the others) is not charted
    assert all(any(c["mean"]) for c in everything)
    with pytest.raises(UsageError, match="top"):
        result.report(top=-1)


def test_page_is_self_contained_and_notebooks_show_it(stores):
    result = Profiles(stores["mixed"]).trend()
    page = result.report()
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page.html, re.IGNORECASE)
    assert "https://" not in page.html and "http://" not in page.html.replace("http://www.w3.org/2000/svg", "")
    assert "default-src 'none'" in page.html and page.html.count("<script") == 2
    assert embedded(page.html) == json.loads(json.dumps(page.data))
    assert result._repr_html_().startswith("<iframe srcdoc=")
    assert repr(page).startswith(f"<proflake Report: trend, {len(result.jobs)} jobs, {len(result.changes)} changes")


def test_a_trend_result_not_from_profiles_has_no_page(stores):
    result = Profiles(stores["mixed"]).trend()
    result._profiles = None
    with pytest.raises(UsageError, match="not made by Profiles.trend"):
        result.report()


def test_names_from_profiles_cannot_break_out_of_the_trend_page():
    """A hand-made result: a job id and a function name holding </script>, which the page keeps as data."""
    hostile = "</script><script>alert(1)</script>"
    series = pa.Table.from_pylist([
        {"job_id": job, "job_index": i + 1, "job_start_time": 1_700_000_000_000_000 + i, "function": f, "steps": 10,
         "own_mean_s": 0.1, "own_spread_s2": 0.0001}
        for i, job in enumerate(["a", hostile]) for f in (None, hostile)
    ])
    result = TrendResult("cprofile", None, ["a", hostile], 0.1, 0.01, 0.05, series, [], 2)
    page = build_trend_report(result)
    assert "<script>alert(1)" not in page.html
    data = embedded(page.html)
    assert data["jobs"][1]["id"] == hostile and data["charts"][1]["label"] == hostile
    assert data["jobs"][0]["start"] == "2023-11-14T22:13:20Z"  # microseconds since the epoch, in UTC


# -- the command line --------------------------------------------------------------------------------------
def test_cli_format_html_writes_the_page_and_keeps_the_gate(stores, tmp_path):
    out = tmp_path / "trend.html"
    done = run_cli(["trend", "--store", str(stores["mixed"]), "--format", "html", "-o", str(out), "--fail-on", "10%",
                    "--top", "3"])
    assert done.returncode == ExitCode.REGRESSION, done.stderr  # forward +30% in the newest job
    assert done.stdout == ""
    assert re.search(rf"wrote {re.escape(str(out))} \([\d,]+ bytes\): open it in a browser", done.stderr)
    data = embedded(out.read_text(encoding="utf-8"))
    api = Profiles(stores["mixed"]).trend(min_change=0.10)
    assert [(c["function"], c["job_id"]) for c in data["changes"]] == [(c["function"], c["job_id"]) for c in api.changes]
    assert len(data["charts"]) == 4
    assert data["gate"]["failed"] is True and data["gate"]["reasons"] == api.gate(0.10)


def test_cli_format_html_is_refused_on_a_terminal(stores, monkeypatch):
    import proflake.cli.trend as command

    monkeypatch.setattr(command, "stdout_is_terminal", lambda: True)
    done = run_cli(["trend", "--store", str(stores["steady"]), "--format", "html"])
    assert done.returncode == ExitCode.USAGE and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "proflake: error: --format html writes a web page, which a terminal cannot show; pass --output FILE"
    ]


def test_cli_format_html_to_a_pipe(stores):
    done = run_cli(["trend", "--store", str(stores["steady"]), "--format", "html"])
    assert done.returncode == ExitCode.OK, done.stderr
    assert done.stdout.startswith("<!DOCTYPE html>")
    assert embedded(done.stdout)["changes"] == []
